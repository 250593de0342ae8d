// The CPU backend itself: thread-count independence, abort callback, graph plans, failures as statuses.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"

using namespace tessera;
using ::testing::HasSubstr;

namespace {

struct SmallModel {
  Context ctx{{.no_alloc = true}};
  Graph graph;
  std::unique_ptr<Buffer> buffer;
  Tensor* x = nullptr;
  Tensor* out = nullptr;

  explicit SmallModel(Backend& b, unsigned seed) {
    x = ctx.new_tensor_3d(Type::kF32, 64, 4, 3);
    Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 64, 96);
    Tensor* pos = ctx.new_tensor_1d(Type::kI32, 3);
    Tensor* h = rms_norm(ctx, x, 1e-6f);
    Tensor* r = rope(ctx, h, pos, 32, RopeMode::kNeox);
    Tensor* m = mul_mat(ctx, w, reshape_2d(ctx, cont(ctx, r), 64, 12));
    out = soft_max(ctx, m, nullptr, 0.3f);
    EXPECT_TRUE(ctx.ok()) << ctx.status().message();
    EXPECT_TRUE(graph.build_forward(out).ok());
    auto buf = alloc_ctx_tensors(ctx, b);
    EXPECT_TRUE(buf.ok());
    buffer = std::move(buf).value();
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist;
    for (Tensor* t : {x, w}) {
      std::vector<float> v(static_cast<size_t>(nelements(*t)));
      for (float& f : v) f = dist(rng);
      EXPECT_TRUE(tensor_from_f32(*t, v).ok());
    }
    const int32_t p[3] = {0, 7, 100};
    EXPECT_TRUE(tensor_set(*pos, p, 0, sizeof p).ok());
  }
};

}  // namespace

TEST(CpuBackend, ResultsDoNotDependOnTheThreadCount) {
  const unsigned seed = 1234;
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::vector<float> first;
  for (int n : {1, 2, 3, 7}) {
    auto b = cpu::make_backend({.n_threads = n});
    SmallModel m(*b, seed);
    ASSERT_EQ(b->graph_compute(m.graph), ComputeStatus::kSuccess) << b->last_error();
    auto v = tensor_to_f32(*m.out);
    ASSERT_TRUE(v.ok());
    if (first.empty()) {
      first = *v;
    } else {
      EXPECT_EQ(*v, first) << "n_threads " << n;  // bit-identical
    }
  }
}

TEST(CpuBackend, AbortCallbackStopsBetweenNodes) {
  auto b = cpu::make_backend({.n_threads = 2});
  SmallModel m(*b, 1);
  int calls = 0;
  struct State {
    int* calls;
  } st{&calls};
  cpu::set_abort_callback(
      *b, [](void* u) { return ++*static_cast<State*>(u)->calls >= 3; }, &st);
  EXPECT_EQ(b->graph_compute(m.graph), ComputeStatus::kAborted);
  EXPECT_THAT(b->last_error(), HasSubstr("abort"));
  EXPECT_EQ(calls, 3);
  cpu::set_abort_callback(*b, nullptr, nullptr);
  EXPECT_EQ(b->graph_compute(m.graph), ComputeStatus::kSuccess);
}

TEST(CpuBackend, GraphPlansComputeTheSameResult) {
  auto b = cpu::make_backend({.n_threads = 2});
  SmallModel m(*b, 77);
  ASSERT_EQ(b->graph_compute(m.graph), ComputeStatus::kSuccess);
  auto direct = tensor_to_f32(*m.out);
  ASSERT_TRUE(tensor_memset(*m.out, 0, 0, nbytes(*m.out)).ok());
  auto plan = b->plan_create(m.graph);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(b->plan_compute(**plan), ComputeStatus::kSuccess);
  ASSERT_EQ(b->plan_compute(**plan), ComputeStatus::kSuccess);  // reusable
  EXPECT_EQ(*tensor_to_f32(*m.out), *direct);
}

TEST(CpuBackend, FailuresAreStatusesNamingTheNode) {
  auto b = cpu::make_backend({.n_threads = 1});
  // a node whose memory was never placed
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 4);
  Tensor* y = silu(ctx, x);
  set_name(*y, "act");
  Graph g;
  ASSERT_TRUE(g.build_forward(y).ok());
  EXPECT_EQ(b->graph_compute(g), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr("act"));
  EXPECT_THAT(b->last_error(), HasSubstr("not allocated"));
  // a hand-made node the CPU does not support (an element-wise op on a quantized tensor)
  Context ctx2({.no_alloc = true});
  Tensor* q = ctx2.new_tensor_1d(Type::kQ8_0, 32);
  Tensor* bad = ctx2.new_tensor_1d(Type::kQ8_0, 32);
  bad->op = Op::kAdd;
  bad->src[0] = q;
  bad->src[1] = q;
  set_name(*bad, "bad_add");
  auto buf = alloc_ctx_tensors(ctx2, *b);
  ASSERT_TRUE(buf.ok());
  EXPECT_FALSE(b->supports_op(*bad));
  Graph g2;
  ASSERT_TRUE(g2.build_forward(bad).ok());
  EXPECT_EQ(b->graph_compute(g2), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr("not supported"));
  // an empty graph is fine
  Graph empty;
  EXPECT_EQ(b->graph_compute(empty), ComputeStatus::kSuccess);
}
