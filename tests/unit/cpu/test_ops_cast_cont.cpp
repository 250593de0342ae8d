// CAST (a CPY without a destination: ggml_cast) and CONT to another shape (ggml_cont_4d), which llama.cpp's graphs
// use (the f32 mask cast to f16 for flash attention; the heads merged by ggml_cont_2d): built, refused when wrong, and
// computed by the CPU backend against plain loops over the same values.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/planner.h"
#include "tessera/types.h"

using namespace tessera;

namespace {

std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d(0.0f, 3.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Computes `out` from the input x (values `xv`) on the CPU backend; returns out's values.
std::vector<float> compute(Context& ctx, Tensor* x, const std::vector<float>& xv, Tensor* out) {
  (void)ctx;
  set_input(*x);
  set_output(*out);
  Graph g;
  EXPECT_TRUE(g.build_forward(out).ok());
  GraphPlanner planner(cpu::buffer_type());
  EXPECT_TRUE(planner.alloc_graph(g).ok());
  EXPECT_TRUE(tensor_from_f32(*x, xv).ok());
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  EXPECT_EQ(backend->graph_compute(g), ComputeStatus::kSuccess) << backend->last_error();
  return tensor_to_f32(*out).value();
}

TEST(OpsCast, F32ToF16IsTheRoundedValueInATensorOfItsOwn) {
  const uint64_t seed = 11;
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 48, 5);
  Tensor* c = cast(ctx, x, Type::kF16);
  ASSERT_NE(c, nullptr) << ctx.status().message();
  EXPECT_EQ(c->op, Op::kCpy);
  EXPECT_EQ(c->src[1], nullptr);
  EXPECT_EQ(c->view_src, nullptr);  // its own memory, not a view of a destination
  EXPECT_EQ(c->type, Type::kF16);
  EXPECT_EQ(c->ne[0], 48);
  EXPECT_EQ(c->ne[1], 5);
  const std::vector<float> xv = random_values(48 * 5, seed);
  const std::vector<float> got = compute(ctx, x, xv, c);
  ASSERT_EQ(got.size(), xv.size());
  for (size_t i = 0; i < xv.size(); ++i) {
    // f16 keeps 11 significant bits: the rounded value is within half a unit in the last place
    const float ulp = std::ldexp(1.0f, std::ilogb(xv[i]) - 10);
    EXPECT_NEAR(got[i], xv[i], ulp / 2) << "seed " << seed << " i " << i;
  }
}

TEST(OpsCast, RefusesIntegerToFloatAndPartialBlocks) {
  Context ctx({.no_alloc = true});
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 8);
  EXPECT_EQ(cast(ctx, ids, Type::kF32), nullptr);
  EXPECT_NE(ctx.status().message().find("integer"), std::string::npos) << ctx.status().message();
  Context ctx2({.no_alloc = true});
  Tensor* x = ctx2.new_tensor_1d(Type::kF32, 40);  // not a whole q8_0 block of 32
  EXPECT_EQ(cast(ctx2, x, Type::kQ8_0), nullptr);
  EXPECT_NE(ctx2.status().message().find("block size"), std::string::npos) << ctx2.status().message();
}

// ggml_cont_2d of a permuted tensor: its elements in the permuted order, laid out in the new shape.
TEST(OpsCont4d, APermutedTensorCopiedToANewShape) {
  const uint64_t seed = 12;
  const int64_t a0 = 4, a1 = 3, a2 = 5;  // [hd, T, heads] permuted to [hd, heads, T], merged to [hd * heads, T]
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_3d(Type::kF32, a0, a1, a2);
  Tensor* p = permute(ctx, x, 0, 2, 1, 3);
  Tensor* c = cont_2d(ctx, p, a0 * a2, a1);
  ASSERT_NE(c, nullptr) << ctx.status().message();
  EXPECT_EQ(c->op, Op::kCont);
  EXPECT_EQ(c->ne[0], a0 * a2);
  EXPECT_EQ(c->ne[1], a1);
  const std::vector<float> xv = random_values(static_cast<size_t>(a0 * a1 * a2), seed);
  const std::vector<float> got = compute(ctx, x, xv, c);
  // p[i0, h, t] = x[i0, t, h]; row t of c is p[:, :, t] in order (h outer, i0 inner)
  for (int64_t t = 0; t < a1; ++t) {
    for (int64_t h = 0; h < a2; ++h) {
      for (int64_t i0 = 0; i0 < a0; ++i0) {
        const float want = xv[static_cast<size_t>(i0 + a0 * (t + a1 * h))];
        EXPECT_EQ(got[static_cast<size_t>(t * a0 * a2 + h * a0 + i0)], want) << "seed " << seed;
      }
    }
  }
}

TEST(OpsCont4d, RefusesAnotherElementCount) {
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 4, 6);
  EXPECT_EQ(cont_2d(ctx, x, 5, 5), nullptr);
  EXPECT_NE(ctx.status().message().find("24 elements"), std::string::npos) << ctx.status().message();
}

}  // namespace
