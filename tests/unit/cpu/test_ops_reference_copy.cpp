// Op correctness against the oracle: CPY between every pair of types (i32 only with i32), CONT of transposed and
// permuted views, DUP, and the view ops (VIEW, RESHAPE, PERMUTE, TRANSPOSE) read through CONT, for every Any type.
#include "unit/cpu/op_oracle.h"

namespace tessera::optest {
namespace {

// ---- CPY ----
using CpyParam = std::tuple<Type, Type>;
class OpRefCpy : public testing::TestWithParam<CpyParam> {};

// CPY walks both tensors in flat order, so b's n-th stored value must be a's n-th value converted to b's type:
// exact for f32/i32 destinations, correctly rounded for f16/bf16, within the block bound for q8_0/q4_0 (see
// expect_stored in op_oracle.h).
TEST_P(OpRefCpy, FlatOrderConversion) {
  const auto [ta, tb] = GetParam();
  struct Cfg {
    Shape a, b;
    int src;  // 0: contiguous a; 1: a transposed (non-quantized) / permuted with axis0 = 0 (quantized)
  };
  std::vector<Cfg> cfgs = {{{64, 3, 2, 1}, {32, 4, 3, 1}, 0},
                           {{32, 1, 1, 1}, {32, 1, 1, 1}, 0},
                           {{96, 2, 1, 1}, {64, 3, 1, 1}, 0},
                           {{64, 3, 2, 1}, {32, 12, 1, 1}, 1}};
  if (!is_quant(ta) && !is_quant(tb)) {
    cfgs.push_back({{7, 5, 1, 1}, {35, 1, 1, 1}, 0});
    cfgs.push_back({{1, 1, 1, 1}, {1, 1, 1, 1}, 0});
    cfgs.push_back({{7, 5, 3, 1}, {5, 21, 1, 1}, 1});
  }
  for (const Cfg& g : cfgs) {
    SCOPED_TRACE("a " + shape_str(g.a) + " -> b " + shape_str(g.b) + (g.src ? " (non-contiguous source)" : ""));
    OpCase c;
    HT R, Bold;
    Tensor* root = c.rand_input(ta, g.a, &R, -3.0f, 3.0f);
    Tensor* a = root;
    HT A = R;
    if (g.src == 1) {
      if (is_quant(ta)) {
        a = permute(c.ctx, root, 0, 2, 1, 3);
        A = permute(R, 0, 2, 1, 3);
      } else {
        a = transpose(c.ctx, root);
        A = transpose(R);
      }
    }
    Tensor* b = c.rand_input(tb, g.b, &Bold);  // random old contents: every value must be overwritten
    Tensor* out = cpy(c.ctx, a, b);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, tb);
    EXPECT_EQ(shape_of(out), g.b);
    const std::vector<uint8_t> bytes = c.bytes_of(b);
    ASSERT_EQ(bytes.size(), byte_count(tb, numel(g.b)));
    expect_stored(tb, A.v, bytes.data(), std::string(tname(ta)) + " -> " + tname(tb));
  }
}

std::vector<CpyParam> cpy_params() {
  std::vector<CpyParam> p;
  for (Type ta : kWeightTypes)
    for (Type tb : kWeightTypes) p.emplace_back(ta, tb);
  p.emplace_back(Type::kI32, Type::kI32);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllTypePairs, OpRefCpy, testing::ValuesIn(cpy_params()),
                         [](const testing::TestParamInfo<CpyParam>& i) {
                           return std::string(tname(std::get<0>(i.param))) + "_to_" + tname(std::get<1>(i.param));
                         });

// ---- CONT / DUP / views (value-exact: these ops only move values) ----
class OpRefAnyType : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(AnyTypes, OpRefAnyType, testing::ValuesIn(kAnyTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

struct PermCase {
  Shape root;
  int ax[4];
};
std::vector<PermCase> perm_cases(Type t) {
  if (is_quant(t))  // quantized: dim 0 stays in place
    return {{{64, 3, 5, 2}, {0, 2, 1, 3}}, {{32, 3, 2, 4}, {0, 3, 1, 2}}, {{96, 2, 3, 1}, {0, 1, 3, 2}}};
  return {{{7, 5, 3, 2}, {1, 0, 2, 3}},
          {{7, 5, 3, 2}, {2, 0, 3, 1}},
          {{33, 4, 1, 3}, {3, 2, 1, 0}},
          {{1, 6, 5, 1}, {0, 2, 1, 3}},
          {{64, 3, 5, 2}, {0, 2, 1, 3}}};
}

TEST_P(OpRefAnyType, ContOfPermutedAndTransposed) {
  const Type t = GetParam();
  for (const PermCase& p : perm_cases(t)) {
    SCOPED_TRACE(shape_str(p.root) + " permute(" + std::to_string(p.ax[0]) + "," + std::to_string(p.ax[1]) + "," +
                 std::to_string(p.ax[2]) + "," + std::to_string(p.ax[3]) + ")");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, p.root, &R);
    Tensor* out = cont(c.ctx, permute(c.ctx, root, p.ax[0], p.ax[1], p.ax[2], p.ax[3]));
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    expect_exact(permute(R, p.ax[0], p.ax[1], p.ax[2], p.ax[3]), c.read(out));
  }
  if (!is_quant(t)) {
    for (const Shape& ne : {Shape{7, 5, 1, 1}, Shape{33, 2, 3, 1}, Shape{1, 9, 1, 1}}) {
      SCOPED_TRACE("transpose " + shape_str(ne));
      OpCase c;
      HT R;
      Tensor* root = c.rand_input(t, ne, &R);
      Tensor* out = cont(c.ctx, transpose(c.ctx, root));
      TS_EXPECT_COMPUTE_OK(c, out);
      expect_exact(transpose(R), c.read(out));
    }
  }
}

TEST_P(OpRefAnyType, Dup) {
  const Type t = GetParam();
  {
    SCOPED_TRACE("contiguous");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {64, 3, 2, 1}, &R);
    Tensor* out = dup(c.ctx, root);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    expect_exact(R, c.read(out));
  }
  {
    SCOPED_TRACE("permuted source");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {64, 3, 5, 1}, &R);
    Tensor* out = dup(c.ctx, permute(c.ctx, root, 0, 2, 1, 3));
    TS_EXPECT_COMPUTE_OK(c, out);
    expect_exact(permute(R, 0, 2, 1, 3), c.read(out));
  }
}

// VIEW (1d..4d, byte offsets and strides), RESHAPE (1d..4d), PERMUTE, TRANSPOSE, each read through CONT. Offsets and
// strides are chosen in *values* (block-aligned for quantized types) and converted to bytes for the builders.
TEST_P(OpRefAnyType, ViewOpsThroughCont) {
  const Type t = GetParam();
  const bool q = is_quant(t);
  const Shape rs{64, 4, 2, 1};  // 512 values, rows of 64
  auto B = [&](int64_t values) { return byte_count(t, values); };
  struct V {
    const char* name;
    std::function<Tensor*(Context&, Tensor*)> build;
    std::function<HT(const HT&)> oracle;
  };
  const int64_t o1 = q ? 96 : 5, o3 = q ? 32 : 7, w = q ? 32 : 17;
  const std::vector<V> views = {
      {"view_1d", [&](Context& ctx, Tensor* r) { return view_1d(ctx, r, w, B(o1)); },
       [&](const HT& R) {
         return strided(R, {w, 1, 1, 1}, {1, 0, 0, 0}, o1);
       }},
      {"view_2d", [&](Context& ctx, Tensor* r) { return view_2d(ctx, r, w, 3, B(128), B(64 + o3)); },
       [&](const HT& R) {
         return strided(R, {w, 3, 1, 1}, {1, 128, 0, 0}, 64 + o3);
       }},
      {"view_3d", [&](Context& ctx, Tensor* r) { return view_3d(ctx, r, w, 2, 2, B(64), B(192), B(o3)); },
       [&](const HT& R) {
         return strided(R, {w, 2, 2, 1}, {1, 64, 192, 0}, o3);
       }},
      {"view_4d", [&](Context& ctx, Tensor* r) { return view_4d(ctx, r, 32, 2, 2, 2, B(64), B(128), B(256), B(32)); },
       [&](const HT& R) {
         return strided(R, {32, 2, 2, 2}, {1, 64, 128, 256}, 32);
       }},
      {"reshape_1d", [&](Context& ctx, Tensor* r) { return reshape_1d(ctx, r, 512); },
       [&](const HT& R) {
         return reshaped(R, {512, 1, 1, 1});
       }},
      {"reshape_2d", [&](Context& ctx, Tensor* r) { return reshape_2d(ctx, r, 128, 4); },
       [&](const HT& R) {
         return reshaped(R, {128, 4, 1, 1});
       }},
      {"reshape_3d", [&](Context& ctx, Tensor* r) { return reshape_3d(ctx, r, 32, 8, 2); },
       [&](const HT& R) {
         return reshaped(R, {32, 8, 2, 1});
       }},
      {"reshape_4d", [&](Context& ctx, Tensor* r) { return reshape_4d(ctx, r, 32, 2, 4, 2); },
       [&](const HT& R) {
         return reshaped(R, {32, 2, 4, 2});
       }},
      {"permute",
       [&](Context& ctx, Tensor* r) { return q ? permute(ctx, r, 0, 3, 1, 2) : permute(ctx, r, 3, 1, 0, 2); },
       [&](const HT& R) { return q ? permute(R, 0, 3, 1, 2) : permute(R, 3, 1, 0, 2); }},
      {"permute of view_2d",
       [&](Context& ctx, Tensor* r) {
         Tensor* v = view_3d(ctx, r, w, 3, 2, B(64), B(256), B(o3));
         return q ? permute(ctx, v, 0, 2, 1, 3) : permute(ctx, v, 1, 2, 0, 3);
       },
       [&](const HT& R) {
         const HT v = strided(R, {w, 3, 2, 1}, {1, 64, 256, 0}, o3);
         return q ? permute(v, 0, 2, 1, 3) : permute(v, 1, 2, 0, 3);
       }},
  };
  std::vector<V> all = views;
  if (!q) {
    all.push_back({"transpose", [&](Context& ctx, Tensor* r) { return transpose(ctx, r); },
                   [&](const HT& R) { return transpose(R); }});
    all.push_back({"transpose of view_2d",
                   [&](Context& ctx, Tensor* r) { return transpose(ctx, view_2d(ctx, r, 9, 5, B(64), B(3))); },
                   [&](const HT& R) {
                     return transpose(strided(R, {9, 5, 1, 1}, {1, 64, 0, 0}, 3));
                   }});
  }
  for (const V& v : all) {
    SCOPED_TRACE(v.name);
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, rs, &R);
    Tensor* view = v.build(c.ctx, root);
    ASSERT_NE(view, nullptr) << c.ctx.status().to_string();
    Tensor* out = cont(c.ctx, view);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    expect_exact(v.oracle(R), c.read(out));
  }
}

}  // namespace
}  // namespace tessera::optest
