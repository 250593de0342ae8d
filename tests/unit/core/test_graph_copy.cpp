// graph_copy, compare_graph_backend, the NMSE helper and the f32 read/write helpers (docs/interfaces.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"

using namespace tessera;

TEST(Nmse, DefinitionAndNonFiniteHandling) {
  const float a[3] = {1, 2, 2};
  const float b[3] = {1, 2, 3};
  // sum (a-b)^2 = 1, sum a^2 = 9
  EXPECT_DOUBLE_EQ(nmse(a, b, 3).nmse, 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(nmse(a, a, 3).nmse, 0.0);
  EXPECT_FALSE(nmse(a, b, 3).nan_mismatch);
  const float n1[2] = {1, NAN}, n2[2] = {1, 5};
  EXPECT_TRUE(nmse(n1, n2, 2).nan_mismatch);
  EXPECT_FALSE(nmse(n1, n1, 2).nan_mismatch);  // NaN where the reference has NaN
  const float i1[1] = {INFINITY}, i2[1] = {-INFINITY};
  EXPECT_TRUE(nmse(i1, i2, 1).nan_mismatch);
  // NaN or Inf on both sides is skipped by NMSE and counted, matching or not.
  EXPECT_EQ(nmse(a, b, 3).non_finite, 0u);
  EXPECT_EQ(nmse(n1, n1, 2).non_finite, 1u);
  EXPECT_EQ(nmse(n1, n1, 2).nmse, 0.0);
  EXPECT_EQ(nmse(n1, n2, 2).non_finite, 1u);
  EXPECT_EQ(nmse(i1, i1, 1).non_finite, 1u);
  const float z[2] = {0, 0}, nz[2] = {0, 1};
  EXPECT_TRUE(std::isinf(nmse(z, nz, 2).nmse));  // error against an all-zero reference
}

TEST(F32Helpers, RoundTripThroughNonContiguousViews) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF16, 3, 4);
  Tensor* t = transpose(ctx, a);  // [4, 3], strided
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok());
  std::vector<float> v(12);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 5.5f;  // exact in f16
  ASSERT_TRUE(tensor_from_f32(*t, v).ok());
  auto back = tensor_to_f32(*t);
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back, v);
  // element (i0=1, i1=2) of the transposed view is element (2, 1) of a
  auto whole = tensor_to_f32(*a);
  EXPECT_EQ((*whole)[1 * 3 + 2], v[2 * 4 + 1]);
  EXPECT_FALSE(tensor_from_f32(*t, std::vector<float>(5)).ok());
}

// Storage-only types have no conversions: an error naming the tensor and its type, never a call through a null
// function pointer. Their bytes still move (tensor_set / tensor_get).
TEST(F32Helpers, StorageOnlyTypesAreUnsupportedNotCrashes) {
  Context ctx({.no_alloc = true});
  Tensor* q6 = ctx.new_tensor_2d(Type::kQ6_K, 256, 2);
  set_name(*q6, "blk.0.ffn_down.weight");
  Tensor* f64 = ctx.new_tensor_1d(Type::kF64, 4);
  Tensor* i8 = ctx.new_tensor_1d(Type::kI8, 4);
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  for (Tensor* t : {q6, f64, i8}) {
    SCOPED_TRACE(type_name(t->type));
    auto to = tensor_to_f32(*t);
    ASSERT_FALSE(to.ok());
    EXPECT_EQ(to.status().code(), StatusCode::kUnsupported);
    EXPECT_THAT(to.status().message(),
                ::testing::HasSubstr(std::string("is ") + type_name(t->type) + ", a storage-only type"));
    const Status from = tensor_from_f32(*t, std::vector<float>(static_cast<size_t>(nelements(*t)), 1.0f));
    EXPECT_EQ(from.code(), StatusCode::kUnsupported);
    EXPECT_THAT(from.message(), ::testing::HasSubstr("tensor_from_f32"));
  }
  EXPECT_THAT(tensor_to_f32(*q6).status().message(), ::testing::HasSubstr("blk.0.ffn_down.weight"));
  // The bytes themselves: 2 rows of one 210-byte block.
  ASSERT_EQ(nbytes(*q6), 420u);
  std::vector<uint8_t> bytes(420);
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = static_cast<uint8_t>(i * 7);
  ASSERT_TRUE(tensor_set(*q6, bytes.data(), 0, bytes.size()).ok());
  std::vector<uint8_t> back(420);
  ASSERT_TRUE(tensor_get(*q6, back.data(), 0, back.size()).ok());
  EXPECT_EQ(back, bytes);
}

TEST(GraphCopy, CopiesDataKeepsViewsAndMapsEveryTensor) {
  auto cpu_backend = cpu::make_backend({.n_threads = 1});
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 8, 4);
  Tensor* xv = view_2d(ctx, x, 8, 2, x->nb[1], x->nb[1]);  // rows 1..2
  set_name(*x, "x");
  Tensor* z = scale(ctx, add(ctx, xv, xv), 0.5f);
  Graph g;
  ASSERT_TRUE(g.build_forward(z).ok());
  auto buf = alloc_ctx_tensors(ctx, *cpu_backend);
  ASSERT_TRUE(buf.ok());
  std::mt19937 rng(5);
  std::normal_distribution<float> dist;
  std::vector<float> vx(32);
  for (float& f : vx) f = dist(rng);
  ASSERT_TRUE(tensor_from_f32(*x, vx).ok());
  auto copy = graph_copy(*cpu_backend, g);
  ASSERT_TRUE(copy.ok()) << copy.status().message();
  ASSERT_EQ(copy->graph->n_nodes(), g.n_nodes());
  ASSERT_EQ(copy->graph->n_leafs(), g.n_leafs());
  Tensor* cx = copy->copy_of(x);
  Tensor* cxv = copy->copy_of(xv);
  ASSERT_NE(cx, nullptr);
  EXPECT_NE(cx, x);
  EXPECT_STREQ(cx->name, "x");
  EXPECT_EQ(cxv->view_src, cx);  // a view of the copied source
  EXPECT_EQ(cxv->data, static_cast<char*>(cx->data) + x->nb[1]);
  EXPECT_EQ(*tensor_to_f32(*cx), vx);
  // computing the copy gives the same result as computing the original
  ASSERT_EQ(cpu_backend->graph_compute(g), ComputeStatus::kSuccess);
  ASSERT_EQ(cpu_backend->graph_compute(*copy->graph), ComputeStatus::kSuccess);
  EXPECT_EQ(*tensor_to_f32(*z), *tensor_to_f32(*copy->copy_of(z)));
}

TEST(CompareGraphBackend, VisitsEveryComputedNodeAndStopsOnRequest) {
  auto b1 = cpu::make_backend({.n_threads = 1});
  auto b2 = cpu::make_backend({.n_threads = 2});
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 16, 3);
  Tensor* r = reshape_1d(ctx, x, 48);  // a view: skipped
  Tensor* out = soft_max(ctx, silu(ctx, scale(ctx, reshape_2d(ctx, r, 16, 3), 2.0f)));
  Graph g;
  ASSERT_TRUE(g.build_forward(out).ok());
  auto buf = alloc_ctx_tensors(ctx, *b1);
  ASSERT_TRUE(buf.ok());
  std::vector<float> vx(48);
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> dist(-2, 2);
  for (float& f : vx) f = dist(rng);
  ASSERT_TRUE(tensor_from_f32(*x, vx).ok());
  std::vector<size_t> seen;
  Status s = compare_graph_backend(*b1, *b2, g, [&](size_t i, Tensor& t1, Tensor& t2) {
    seen.push_back(i);
    EXPECT_EQ(t1.op, t2.op);
    auto e = nmse(t1, t2);
    EXPECT_TRUE(e.ok());
    EXPECT_EQ(e->nmse, 0.0);  // same kernels, thread count must not change results
    return true;
  });
  ASSERT_TRUE(s.ok()) << s.message();
  size_t computed = 0;
  for (Tensor* n : g.nodes()) computed += op_is_view(n->op) ? 0 : 1;
  EXPECT_EQ(seen.size(), computed);
  EXPECT_EQ(computed, 3u);
  seen.clear();
  ASSERT_TRUE(compare_graph_backend(*b1, *b2, g, [&](size_t i, Tensor&, Tensor&) {
                seen.push_back(i);
                return false;
              }).ok());
  EXPECT_EQ(seen.size(), 1u);
}
