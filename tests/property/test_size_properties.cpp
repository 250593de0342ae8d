// Sizes near 2^63 (issue 36's memory-safety bug: an f32 tensor of 2^62 + 1 elements got a 4-byte buffer). Random
// types and shapes whose extents sit near powers of two up to 2^63 - 1, through every way a tensor gets a size: the API
// (Context::new_tensor, reshape, views), a serialized graph's leaf, and a GGUF tensor table. Each must either give
// exactly the size computed here in 128 bits (independently of the code under test), within the documented limits,
// or a clean InvalidArgument error naming the tensor -- never a wrapped size.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "support/gguf_bytes.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/gguf.h"
#include "tessera/harness/graph/graph_io.h"

using namespace tessera;

namespace {

using u128 = unsigned __int128;
constexpr u128 kSaturated = ~u128{0};
constexpr int64_t kTwo62 = int64_t{1} << 62;

u128 mul_sat(u128 a, u128 b) {
  u128 r = 0;
  return __builtin_mul_overflow(a, b, &r) ? kSaturated : r;
}

// An extent near a power of two (2^k - 2 .. 2^k + 2, k up to 63, clamped to [0, 2^63 - 1]), or a small one.
rc::Gen<int64_t> gen_extent() {
  return rc::gen::oneOf(rc::gen::inRange<int64_t>(0, 5),
                        rc::gen::map(rc::gen::pair(rc::gen::inRange(0, 64), rc::gen::inRange(-2, 3)), [](auto kd) {
                          const u128 p = u128{1} << kd.first;
                          const u128 v = kd.second < 0 && p < u128(-kd.second) ? 0 : p + kd.second;
                          const u128 max = std::numeric_limits<int64_t>::max();
                          return static_cast<int64_t>(v > max ? max : v);
                        }));
}

struct Shape {
  Type type;
  int n_dims;
  int64_t ne[4];
};

// ne0 is mostly a whole number of blocks (else every path refuses it for that reason alone).
rc::Gen<Shape> gen_shape() {
  return rc::gen::exec([] {
    Shape s;
    s.type = static_cast<Type>(*rc::gen::inRange(0, kTypeCount));
    s.n_dims = *rc::gen::inRange(1, 5);
    for (int i = 0; i < 4; ++i) s.ne[i] = i < s.n_dims ? *gen_extent() : 1;
    const int64_t bs = type_traits(s.type).block_size;
    if (*rc::gen::weightedElement<bool>({{4, true}, {1, false}})) s.ne[0] = s.ne[0] / bs * bs;
    return s;
  });
}

// What the limits of docs/data-model.md allow: ne0 a whole number of blocks, at most 2^62 elements (zeros counted as
// ones) and at most 2^62 - 1 bytes. *bytes: the exact size.
bool fits(const Shape& s, u128* bytes) {
  const TypeTraits& tt = type_traits(s.type);
  u128 extent = 1;
  for (int64_t n : s.ne) extent = mul_sat(extent, n == 0 ? 1 : static_cast<u128>(n));
  *bytes = mul_sat(static_cast<u128>(s.ne[0] / tt.block_size), tt.type_size);
  for (int i = 1; i < 4; ++i) *bytes = mul_sat(*bytes, static_cast<u128>(s.ne[i]));
  return s.ne[0] % tt.block_size == 0 && extent <= static_cast<u128>(kTwo62) &&
         *bytes <= static_cast<u128>(std::numeric_limits<size_t>::max() >> 2);
}

std::string describe_shape(const Shape& s) {
  return std::string(type_name(s.type)) + " [" + std::to_string(s.ne[0]) + ", " + std::to_string(s.ne[1]) + ", " +
         std::to_string(s.ne[2]) + ", " + std::to_string(s.ne[3]) + "]";
}

// The tensor is either exactly the size computed above, with element and row counts that did not wrap, or refused.
void check_tensor(const Shape& s, const Tensor* t, const Status& status) {
  u128 bytes = 0;
  const bool ok = fits(s, &bytes);
  RC_LOG() << describe_shape(s) << ": " << (t != nullptr ? "created" : status.message()) << "\n";
  if (t == nullptr) {
    RC_ASSERT(!ok);
    RC_ASSERT(status.code() == StatusCode::kInvalidArgument);
    return;
  }
  RC_ASSERT(ok);
  RC_ASSERT(static_cast<u128>(nbytes(*t)) == bytes);
  u128 elements = 1;
  for (int64_t n : s.ne) elements *= static_cast<u128>(n);  // <= 2^62 here
  RC_ASSERT(static_cast<u128>(nelements(*t)) == elements);
  RC_ASSERT(nrows(*t) >= 0);
}

// The cases the properties found, kept as plain tests: a q2_k tensor of 2^63 elements in 3 * 2^60 bytes (the byte
// check alone let it through; nelements() wrapped negative), and an empty f32 tensor of 2^64 rows (nrows() wrapped).
TEST(SizeProperties, ElementAndRowCountsOverTwoToTheSixtyTwoAreRefused) {
  Context ctx({.no_alloc = true});
  const int64_t big = int64_t{1} << 62;
  EXPECT_EQ(ctx.new_tensor_2d(Type::kQ2_K, big, 2), nullptr);
  EXPECT_NE(ctx.status().message().find("element count"), std::string::npos) << ctx.status().message();
  ctx.clear_error();
  EXPECT_EQ(ctx.new_tensor_3d(Type::kF32, 0, int64_t{1} << 32, int64_t{1} << 32), nullptr);
  ctx.clear_error();
  EXPECT_NE(ctx.new_tensor_2d(Type::kF32, 0, big), nullptr);  // 2^62 empty rows: the limit itself
  auto g = harness::graph_from_json(
      R"({"format": "tessera-graph", "version": 1, "tensors": [{"id": 0, "type": "f32", "ne": [0, 4294967296, 4294967296], "op": "NONE"}]})",
      "empty.json");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("empty.json: tensors[0].ne"), std::string::npos) << g.status().message();
}

RC_GTEST_PROP(SizeProperties, NewTensorIsExactOrRefused, ()) {
  const Shape s = *gen_shape();
  Context ctx({.no_alloc = true});
  const Tensor* t = ctx.new_tensor(s.type, s.n_dims, s.ne);
  check_tensor(s, t, ctx.status());
}

// Reshaping a small tensor to a shape whose element count wraps to the same number must be refused, not a view of
// 2^64 elements over a few bytes.
RC_GTEST_PROP(SizeProperties, ReshapeAndViewsAreExactOrRefused, ()) {
  const Shape s = *gen_shape();
  Context ctx({.no_alloc = true});
  const int64_t bs = type_traits(s.type).block_size;
  Tensor* src = ctx.new_tensor_1d(s.type, *rc::gen::element<int64_t>(0, bs, 4 * bs));
  RC_ASSERT(src != nullptr);
  Tensor* r = reshape_4d(ctx, src, s.ne[0], s.ne[1], s.ne[2], s.ne[3]);
  if (r != nullptr) {
    u128 elements = 1;
    for (int64_t n : s.ne) elements = mul_sat(elements, static_cast<u128>(n));
    RC_ASSERT(elements == static_cast<u128>(nelements(*src)));
    size_t span = 0;
    RC_ASSERT(checked_nbytes(*r, &span));
    RC_ASSERT(span <= nbytes(*src));
  } else {
    RC_ASSERT(ctx.status().code() == StatusCode::kInvalidArgument);
  }
  ctx.clear_error();
  // A view with the source's row stride: its span must lie inside the source or be refused.
  Tensor* v = view_4d(ctx, src, s.ne[0], s.ne[1], s.ne[2], s.ne[3], src->nb[1], src->nb[1], src->nb[1], 0);
  if (v != nullptr) {
    size_t span = 0;
    RC_ASSERT(checked_nbytes(*v, &span));
    RC_ASSERT(span <= nbytes(*src));
  }
}

RC_GTEST_PROP(SizeProperties, GraphFileLeafIsExactOrRefused, ()) {
  const Shape s = *gen_shape();
  std::string ne;
  for (int i = 0; i < s.n_dims; ++i) ne += (i ? "," : "") + std::to_string(s.ne[i]);
  const std::string text = R"({"format": "tessera-graph", "version": 1, "tensors": [{"id": 0, "name": "w", "type": ")" +
                           std::string(type_name(s.type)) + R"(", "ne": [)" + ne + R"(], "op": "NONE"}]})";
  auto g = harness::graph_from_json(text, "big.json");
  if (!g.ok()) {
    RC_LOG() << g.status().message() << "\n";
    RC_ASSERT(g.status().message().find("big.json: tensors[0]") != std::string::npos);
  }
  check_tensor(s, g.ok() ? g.value().tensors[0] : nullptr, g.ok() ? Status::Ok() : g.status());
}

// GGUF's own limits are wider (a tensor of up to 2^64 - 1 bytes less the data section's offset, int64 element counts,
// every extent > 0): the size the reader records must be exact, or the tensor refused naming it.
RC_GTEST_PROP(SizeProperties, GgufTensorTableSizeIsExactOrRefused, ()) {
  Shape s = *gen_shape();
  auto info = gguf::type_info(static_cast<uint32_t>(type_traits(s.type).gguf_id));
  RC_PRE(info != nullptr && !info->removed);
  test::GgufBytes b;
  b.header(3, 1, 0).str("w").u32(static_cast<uint32_t>(s.n_dims));
  for (int i = 0; i < s.n_dims; ++i) b.i64(s.ne[i]);
  b.u32(static_cast<uint32_t>(type_traits(s.type).gguf_id)).u64(0);
  auto f = gguf::read_memory(b.span(), "big.gguf");
  u128 bytes = mul_sat(static_cast<u128>(s.ne[0] / info->block_size), info->type_size);
  u128 elements = 1;
  for (int i = 1; i < s.n_dims; ++i) bytes = mul_sat(bytes, static_cast<u128>(s.ne[i]));
  for (int i = 0; i < s.n_dims; ++i) elements = mul_sat(elements, static_cast<u128>(s.ne[i]));
  // The data section starts after the header, at the next multiple of the alignment (32): a tensor that would end
  // past 2^64 - 1 there cannot be in a file and is refused too.
  const uint64_t data_offset = (b.span().size() + 31) / 32 * 32;
  const bool ok = s.ne[0] % info->block_size == 0 && bytes <= std::numeric_limits<uint64_t>::max() - data_offset &&
                  elements <= static_cast<u128>(std::numeric_limits<int64_t>::max());
  bool positive = true;
  for (int i = 0; i < s.n_dims; ++i) positive = positive && s.ne[i] > 0;
  if (!f.ok()) {
    RC_LOG() << f.status().message() << "\n";
    RC_ASSERT(f.status().message().find("tensor[0]") != std::string::npos);
    RC_ASSERT(!(ok && positive));
    return;
  }
  RC_ASSERT(ok && positive);
  RC_ASSERT(static_cast<u128>(f.value().tensors[0].size) == bytes);
}

}  // namespace
