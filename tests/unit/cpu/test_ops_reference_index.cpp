// Op correctness against the oracle: GET_ROWS (every Any type), SET_ROWS (every Weight type, untouched rows checked
// bytewise), ARGSORT / TOP_K (indices compared exactly, ties stable), and index errors (compute fails, no crash,
// nothing written out of bounds).
#include "unit/cpu/op_oracle.h"

#include <gmock/gmock.h>

namespace tessera::optest {
namespace {

// ---- GET_ROWS ----
class OpRefGetRows : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(AnyTypes, OpRefGetRows, testing::ValuesIn(kAnyTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

// Dequantizing / widening to f32 is exact (a q8_0/q4_0 value is an int of <= 8 bits times an f16 scale of 11
// significant bits, which fits f32's 24), so GET_ROWS must reproduce the oracle's decoded values exactly.
TEST_P(OpRefGetRows, BatchedIdsExact) {
  const Type t = GetParam();
  struct Cfg {
    int64_t ne0, n_rows, n, ne2, ne3;
  };
  std::vector<Cfg> cfgs = {{64, 6, 4, 2, 2}, {32, 1, 3, 1, 1}, {96, 9, 9, 1, 1}, {64, 5, 1, 3, 1}};
  if (!is_quant(t)) cfgs.push_back({7, 5, 8, 2, 1}), cfgs.push_back({1, 4, 2, 1, 3});
  for (const Cfg& g : cfgs) {
    SCOPED_TRACE("ne0=" + std::to_string(g.ne0) + " n_rows=" + std::to_string(g.n_rows) + " n=" + std::to_string(g.n) +
                 " ne2=" + std::to_string(g.ne2) + " ne3=" + std::to_string(g.ne3));
    OpCase c;
    HT A;
    Tensor* a = c.rand_input(t, {g.ne0, g.n_rows, g.ne2, g.ne3}, &A);
    std::vector<int32_t> ids(static_cast<size_t>(g.n * g.ne2 * g.ne3));
    for (int32_t& x : ids) x = c.rand_int(0, static_cast<int32_t>(g.n_rows - 1));
    Tensor* tids = c.ids_input({g.n, g.ne2, g.ne3, 1}, ids);
    Tensor* out = get_rows(c.ctx, a, tids);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t == Type::kI32 ? Type::kI32 : Type::kF32);
    HT ref({g.ne0, g.n, g.ne2, g.ne3});
    for_each_index(ref.ne, [&](int64_t i0, int64_t i, int64_t j, int64_t k) {
      ref.at(i0, i, j, k) = A.at(i0, ids[static_cast<size_t>((k * g.ne2 + j) * g.n + i)], j, k);
    });
    expect_exact(ref, c.read(out));
  }
  {
    SCOPED_TRACE("permuted source (rows strided)");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {64, 3, 5, 1}, &R);    // -> a [64, 5 rows, 3]
    const std::vector<int32_t> ids = {4, 0, 4, 2, 1, 3};  // [2, 3]
    Tensor* out = get_rows(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), c.ids_input({2, 3, 1, 1}, ids));
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT A = permute(R, 0, 2, 1, 3);
    HT ref({64, 2, 3, 1});
    for_each_index(ref.ne, [&](int64_t i0, int64_t i, int64_t j, int64_t) {
      ref.at(i0, i, j) = A.at(i0, ids[static_cast<size_t>(j * 2 + i)], j);
    });
    expect_exact(ref, c.read(out));
  }
}

// ---- SET_ROWS ----
class OpRefSetRows : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(WeightTypes, OpRefSetRows, testing::ValuesIn(kWeightTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

TEST_P(OpRefSetRows, ScatterKeepsOtherRows) {
  const Type t = GetParam();
  struct Cfg {
    int64_t ne0, n_rows, n, ne2, ne3;
    bool permuted_rows = false;  // rows a permuted view
  };
  std::vector<Cfg> cfgs = {{64, 8, 3, 2, 1}, {32, 5, 5, 1, 1}, {96, 7, 1, 2, 2}, {64, 6, 4, 3, 1, true}};
  if (!is_quant(t)) cfgs.push_back({7, 6, 2, 3, 1}), cfgs.push_back({1, 3, 1, 1, 1});
  for (const Cfg& g : cfgs) {
    SCOPED_TRACE("ne0=" + std::to_string(g.ne0) + " n_rows=" + std::to_string(g.n_rows) + " n=" + std::to_string(g.n) +
                 " ne2=" + std::to_string(g.ne2) + " ne3=" + std::to_string(g.ne3) +
                 (g.permuted_rows ? " permuted rows" : ""));
    OpCase c;
    const Shape dne{g.ne0, g.n_rows, g.ne2, g.ne3};
    HT D0, R;
    Tensor* dst = c.rand_input(t, dne, &D0);
    Tensor* rows;
    if (g.permuted_rows) {
      HT RR;
      rows = permute(c.ctx, c.rand_input(Type::kF32, {g.ne0, g.ne2, g.n, g.ne3}, &RR, -2.0f, 2.0f), 0, 2, 1, 3);
      R = permute(RR, 0, 2, 1, 3);
    } else {
      rows = c.rand_input(Type::kF32, {g.ne0, g.n, g.ne2, g.ne3}, &R, -2.0f, 2.0f);
    }
    // Distinct destination rows per (j, k) so that the result does not depend on write order.
    std::vector<int32_t> ids;
    for (int64_t jk = 0; jk < g.ne2 * g.ne3; ++jk) {
      std::vector<int32_t> p(static_cast<size_t>(g.n_rows));
      std::iota(p.begin(), p.end(), 0);
      std::shuffle(p.begin(), p.end(), c.rng);
      ids.insert(ids.end(), p.begin(), p.begin() + g.n);
    }
    Tensor* tids = c.ids_input({g.n, g.ne2, g.ne3, 1}, ids);
    Tensor* out = set_rows(c.ctx, dst, rows, tids);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    EXPECT_EQ(shape_of(out), dne);
    const std::vector<uint8_t> before = encode(t, std::vector<float>(D0.v.begin(), D0.v.end()));
    const std::vector<uint8_t> after = c.bytes_of(dst);
    ASSERT_EQ(after.size(), before.size());
    const size_t rsz = byte_count(t, g.ne0);
    for (int64_t k = 0; k < g.ne3; ++k)
      for (int64_t j = 0; j < g.ne2; ++j)
        for (int64_t r = 0; r < g.n_rows; ++r) {
          const size_t off = static_cast<size_t>((k * g.ne2 + j) * g.n_rows + r) * rsz;
          int64_t src = -1;
          for (int64_t i = 0; i < g.n; ++i)
            if (ids[static_cast<size_t>((k * g.ne2 + j) * g.n + i)] == r) src = i;
          SCOPED_TRACE("dst row " + std::to_string(r) + " j=" + std::to_string(j) + " k=" + std::to_string(k));
          if (src < 0) {
            EXPECT_TRUE(std::equal(before.begin() + off, before.begin() + off + rsz, after.begin() + off))
                << "a row not indexed was modified";
          } else {
            std::vector<double> x(static_cast<size_t>(g.ne0));
            for (int64_t i0 = 0; i0 < g.ne0; ++i0) x[static_cast<size_t>(i0)] = R.at(i0, src, j, k);
            expect_stored(t, x, after.data() + off, "set row");
          }
        }
  }
}

// SET_ROWS with i64 ids (llama.cpp's cache indices, ggml's type for them) writes what it writes with the same ids as
// i32: the same destination bytes, for every Weight type, on fresh random rows and ids.
TEST_P(OpRefSetRows, I64IdsWriteWhatI32IdsWrite) {
  const Type t = GetParam();
  for (int rep = 0; rep < 3; ++rep) {
    OpCase c;
    const int64_t ne0 = is_quant(t) ? 64 : 24, n_rows = 9, n = 4, ne2 = 2;
    const std::vector<float> d0 = c.rand_floats(ne0 * n_rows * ne2);
    Tensor* dst32 = c.input(t, {ne0, n_rows, ne2, 1}, d0);
    Tensor* dst64 = c.input(t, {ne0, n_rows, ne2, 1}, d0);
    const std::vector<float> r = c.rand_floats(ne0 * n * ne2, -2.0f, 2.0f);
    Tensor* rows = c.input(Type::kF32, {ne0, n, ne2, 1}, r);
    std::vector<int32_t> ids;
    for (int64_t j = 0; j < ne2; ++j) {
      std::vector<int32_t> p(static_cast<size_t>(n_rows));
      std::iota(p.begin(), p.end(), 0);
      std::shuffle(p.begin(), p.end(), c.rng);
      ids.insert(ids.end(), p.begin(), p.begin() + n);
    }
    Tensor* out32 = set_rows(c.ctx, dst32, rows, c.ids_input({n, ne2, 1, 1}, ids));
    Tensor* out64 = set_rows(c.ctx, dst64, rows, c.ids64_input({n, ne2, 1, 1}, {ids.begin(), ids.end()}));
    ASSERT_NE(out64, nullptr) << c.ctx.status().to_string();
    TS_EXPECT_COMPUTE_OK(c, out32, out64);
    EXPECT_EQ(c.bytes_of(dst64), c.bytes_of(dst32));
  }
}

// ---- ARGSORT / TOP_K ----
using SortParam = std::tuple<Type, SortOrder>;
class OpRefArgsort : public testing::TestWithParam<SortParam> {};

// Distinct values exactly representable in every Float type: integers below 256 times 1/8, shuffled per row.
std::vector<float> distinct_rows(OpCase& c, const Shape& ne) {
  std::vector<float> v;
  for (int64_t r = 0; r < numel(ne) / ne[0]; ++r) {
    std::vector<int> p(static_cast<size_t>(ne[0]));
    std::iota(p.begin(), p.end(), -static_cast<int>(ne[0] / 2));
    std::shuffle(p.begin(), p.end(), c.rng);
    for (int x : p) v.push_back(static_cast<float>(x) * 0.125f);
  }
  return v;
}
// Stable order of one row: ascending, or descending with ties keeping the lower index first.
std::vector<int32_t> stable_order(const double* x, int64_t n, SortOrder order) {
  std::vector<int32_t> idx(static_cast<size_t>(n));
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int32_t a, int32_t b) { return order == SortOrder::kAsc ? x[a] < x[b] : x[a] > x[b]; });
  return idx;
}

const Shape kSortShapes[] = {{1, 2, 1, 1}, {7, 4, 2, 1}, {33, 3, 1, 2}, {96, 2, 2, 1}};

TEST_P(OpRefArgsort, DistinctValues) {
  const auto [t, order] = GetParam();
  for (const Shape& ne : kSortShapes) {
    SCOPED_TRACE(shape_str(ne));
    OpCase c;
    HT A;
    Tensor* a = c.input(t, ne, distinct_rows(c, ne), &A);
    Tensor* out = argsort(c.ctx, a, order);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, Type::kI32);
    HT ref(ne);
    for (int64_t r = 0; r < numel(ne) / ne[0]; ++r) {
      const auto idx = stable_order(&A.v[static_cast<size_t>(r * ne[0])], ne[0], order);
      for (int64_t i = 0; i < ne[0]; ++i) ref.v[static_cast<size_t>(r * ne[0] + i)] = idx[static_cast<size_t>(i)];
    }
    expect_exact(ref, c.read(out));
  }
  {
    SCOPED_TRACE("permuted source");
    OpCase c;
    HT R;
    Tensor* root = c.input(t, {33, 3, 4, 1}, distinct_rows(c, {33, 3, 4, 1}), &R);
    Tensor* out = argsort(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), order);
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT A = permute(R, 0, 2, 1, 3);
    HT ref(A.ne);
    for (int64_t r = 0; r < numel(A.ne) / 33; ++r) {
      const auto idx = stable_order(&A.v[static_cast<size_t>(r * 33)], 33, order);
      for (int64_t i = 0; i < 33; ++i) ref.v[static_cast<size_t>(r * 33 + i)] = idx[static_cast<size_t>(i)];
    }
    expect_exact(ref, c.read(out));
  }
}

std::vector<SortParam> sort_params() {
  std::vector<SortParam> p;
  for (Type t : kFloatTypes)
    for (SortOrder o : {SortOrder::kAsc, SortOrder::kDesc}) p.emplace_back(t, o);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllFloatBothOrders, OpRefArgsort, testing::ValuesIn(sort_params()),
                         [](const testing::TestParamInfo<SortParam>& i) {
                           return std::string(tname(std::get<0>(i.param))) +
                                  (std::get<1>(i.param) == SortOrder::kAsc ? "_asc" : "_desc");
                         });

class OpRefTopK : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(FloatTypes, OpRefTopK, testing::ValuesIn(kFloatTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

TEST_P(OpRefTopK, DistinctValues) {
  const Type t = GetParam();
  for (const Shape& ne : kSortShapes) {
    for (const int64_t k : {int64_t{1}, std::min<int64_t>(5, ne[0]), ne[0]}) {
      SCOPED_TRACE(shape_str(ne) + " k=" + std::to_string(k));
      OpCase c;
      HT A;
      Tensor* a = c.input(t, ne, distinct_rows(c, ne), &A);
      Tensor* out = top_k(c.ctx, a, static_cast<int>(k));
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, Type::kI32);
      HT ref({k, ne[1], ne[2], ne[3]});
      for (int64_t r = 0; r < numel(ne) / ne[0]; ++r) {
        const auto idx = stable_order(&A.v[static_cast<size_t>(r * ne[0])], ne[0], SortOrder::kDesc);
        for (int64_t i = 0; i < k; ++i) ref.v[static_cast<size_t>(r * k + i)] = idx[static_cast<size_t>(i)];
      }
      expect_exact(ref, c.read(out));
    }
  }
  {
    SCOPED_TRACE("permuted source, k=4");
    OpCase c;
    HT R;
    Tensor* root = c.input(t, {33, 3, 4, 1}, distinct_rows(c, {33, 3, 4, 1}), &R);
    Tensor* out = top_k(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), 4);
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT A = permute(R, 0, 2, 1, 3);
    HT ref({4, A.ne[1], A.ne[2], A.ne[3]});
    for (int64_t r = 0; r < numel(A.ne) / 33; ++r) {
      const auto idx = stable_order(&A.v[static_cast<size_t>(r * 33)], 33, SortOrder::kDesc);
      for (int64_t i = 0; i < 4; ++i) ref.v[static_cast<size_t>(r * 4 + i)] = idx[static_cast<size_t>(i)];
    }
    expect_exact(ref, c.read(out));
  }
}

// Explicit ties: equal values keep the lower index first (asc, desc and top_k).
TEST(OpRefSortTies, StableOrder) {
  OpCase c;
  const std::vector<float> row = {3, 1, 3, 2, 1, 3, 0, 2};
  Tensor* a = c.input(Type::kF32, {8, 1, 1, 1}, row);
  Tensor* asc = argsort(c.ctx, a, SortOrder::kAsc);
  Tensor* desc = argsort(c.ctx, a, SortOrder::kDesc);
  Tensor* top = top_k(c.ctx, a, 4);
  TS_EXPECT_COMPUTE_OK(c, asc, desc, top);
  EXPECT_EQ(c.read(asc).v, (std::vector<double>{6, 1, 4, 3, 7, 0, 2, 5}));
  EXPECT_EQ(c.read(desc).v, (std::vector<double>{0, 2, 5, 3, 7, 1, 4, 6}));
  EXPECT_EQ(c.read(top).v, (std::vector<double>{0, 2, 5, 3}));
}

// ---- index errors: compute fails with a message naming the node; nothing written out of bounds ----
void expect_index_failure(OpCase& c, Tensor* out, Tensor* guard, const std::vector<uint8_t>& guard_bytes) {
  ASSERT_NE(out, nullptr) << c.ctx.status().to_string();
  set_name(*out, "bad_index_node");
  ASSERT_EQ(c.run({out}), ComputeStatus::kFailed);
  EXPECT_FALSE(c.backend->last_error().empty());
  EXPECT_THAT(c.backend->last_error(), testing::HasSubstr("bad_index_node"));
  if (guard != nullptr) {
    EXPECT_EQ(c.bytes_of(guard), guard_bytes) << "memory next to the destination changed";
  }
}

TEST(OpRefIndexErrors, GetRowsOutOfRange) {
  for (const int32_t bad : {4, -1, 1000000}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    OpCase c;
    Tensor* a = c.rand_input(Type::kF32, {8, 4, 1, 1});
    Tensor* ids = c.ids_input({3, 1, 1, 1}, {0, bad, 2});
    expect_index_failure(c, get_rows(c.ctx, a, ids), nullptr, {});
  }
}

TEST(OpRefIndexErrors, SetRowsOutOfRange) {
  for (const Type t : {Type::kF32, Type::kQ8_0}) {
    for (const int32_t bad : {3, -1}) {
      SCOPED_TRACE(std::string(tname(t)) + " id " + std::to_string(bad));
      OpCase c;
      Tensor* dst = c.rand_input(t, {32, 3, 1, 1});
      const std::vector<float> gv = c.rand_floats(64);
      Tensor* guard = c.input(Type::kF32, {64, 1, 1, 1}, gv);  // placed next to dst by the linear allocator
      Tensor* rows = c.rand_input(Type::kF32, {32, 2, 1, 1});
      Tensor* ids = c.ids_input({2, 1, 1, 1}, {bad, 0});
      expect_index_failure(c, set_rows(c.ctx, dst, rows, ids), guard, encode(Type::kF32, gv));
    }
  }
}

// i64 ids out of range, beyond i32 too: the error names the node and the id, nothing is written
TEST(OpRefIndexErrors, SetRowsI64OutOfRange) {
  for (const int64_t bad : {int64_t{3}, int64_t{-1}, int64_t{1} << 40}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    OpCase c;
    Tensor* dst = c.rand_input(Type::kF32, {32, 3, 1, 1});
    const std::vector<float> gv = c.rand_floats(64);
    Tensor* guard = c.input(Type::kF32, {64, 1, 1, 1}, gv);
    Tensor* rows = c.rand_input(Type::kF32, {32, 2, 1, 1});
    Tensor* ids = c.ids64_input({2, 1, 1, 1}, {bad, 0});
    expect_index_failure(c, set_rows(c.ctx, dst, rows, ids), guard, encode(Type::kF32, gv));
    EXPECT_THAT(c.backend->last_error(), testing::HasSubstr("id " + std::to_string(bad)));
  }
}

TEST(OpRefIndexErrors, MulMatIdOutOfRange) {
  for (const int32_t bad : {3, -2}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    OpCase c;
    Tensor* as = c.rand_input(Type::kQ4_0, {32, 4, 3, 1});
    Tensor* b = c.rand_input(Type::kF32, {32, 1, 2, 1});
    Tensor* ids = c.ids_input({2, 2, 1, 1}, {0, 1, bad, 2});
    expect_index_failure(c, mul_mat_id(c.ctx, as, b, ids), nullptr, {});
  }
}

}  // namespace
}  // namespace tessera::optest
