// Pass 2, expansion (docs/scheduler.md): four sweeps over the nodes (forward / backward carrying only non-last
// backends, a node on the last backend clearing the current one; then forward / backward carrying any backend);
// unsupported nodes stay unassigned while the current backend is kept; view ops are skipped.
#include <cstdio>

#include "unit/sched/sched_pass_fixture.h"

namespace tessera::sched::testing {
namespace {

class SchedPass2 : public SchedPassFixture {
 protected:
  void run() { pass2_expand(plan, graph, bs); }

  // x -> n0 -> n1 -> ... -> n(k-1), each a SCALE of the previous.
  std::vector<Tensor*> chain(int k) {
    x = tensor("x");
    std::vector<Tensor*> n;
    Tensor* h = x;
    for (int i = 0; i < k; ++i) {
      h = scale(ctx, h, 1.0f);
      format_name(*h, "n%d", i);
      n.push_back(h);
    }
    build(h);
    return n;
  }
  Tensor* x = nullptr;
};

TEST_F(SchedPass2, GpuRunGrowsForwardThenBackwardOverTheChain) {
  auto n = chain(6);
  plan.set(n[2], kGpu1, Cause::kWeight);
  run();
  EXPECT_TRUE(Assigned(n[0], kGpu1, Cause::kExpanded));  // sweep 2 (backward)
  EXPECT_TRUE(Assigned(n[1], kGpu1, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[2], kGpu1, Cause::kWeight));    // assigned nodes are never changed
  EXPECT_TRUE(Assigned(n[3], kGpu1, Cause::kExpanded));  // sweep 1 (forward)
  EXPECT_TRUE(Assigned(n[5], kGpu1, Cause::kExpanded));
  EXPECT_TRUE(Unassigned(x));  // leafs are not expanded into
}

TEST_F(SchedPass2, NodeOnTheLastBackendClearsCurrentInTheNonLastSweeps) {
  auto n = chain(7);
  plan.set(n[1], kGpu0, Cause::kWeight);
  plan.set(n[3], kCpu, Cause::kWeight);
  run();
  EXPECT_TRUE(Assigned(n[0], kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[2], kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[3], kCpu, Cause::kWeight));
  // GPU0 does not jump over the CPU node; the CPU takes the rest in sweep 3
  EXPECT_TRUE(Assigned(n[4], kCpu, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[5], kCpu, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[6], kCpu, Cause::kExpanded));
}

TEST_F(SchedPass2, GpuRunsGrowTowardsCpuNodesFromBothSides) {
  auto n = chain(7);
  plan.set(n[0], kCpu, Cause::kWeight);
  plan.set(n[3], kGpu0, Cause::kWeight);
  plan.set(n[5], kCpu, Cause::kWeight);
  run();
  EXPECT_TRUE(Assigned(n[1], kGpu0, Cause::kExpanded));  // backward non-last sweep, before any CPU sweep
  EXPECT_TRUE(Assigned(n[2], kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[4], kGpu0, Cause::kExpanded));  // forward non-last sweep
  EXPECT_TRUE(Assigned(n[6], kCpu, Cause::kExpanded));   // only what no GPU run reaches
}

TEST_F(SchedPass2, BackwardNonLastSweepBeatsAnEarlierCpuNode) {
  auto n = chain(5);
  plan.set(n[0], kCpu, Cause::kInput);
  plan.set(n[4], kGpu1, Cause::kWeight);
  run();
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(Assigned(n[i], kGpu1, Cause::kExpanded));
}

TEST_F(SchedPass2, UnsupportedNodeStaysUnassignedAndCurrentIsKept) {
  auto n = chain(7);
  plan.set(n[0], kGpu0, Cause::kWeight);
  refuse_tensor(kGpu0, n[1]);
  plan.set(n[6], kGpu1, Cause::kWeight);
  refuse_tensor(kGpu1, n[5]);
  refuse_tensor(kGpu0, n[5]);
  refuse_tensor(kGpu1, n[1]);  // GPU1 would not get it anyway: the current backend is GPU0
  run();
  EXPECT_TRUE(Unassigned(n[1]));                         // GPU0 refuses it; expansion never picks another backend
  EXPECT_TRUE(Assigned(n[2], kGpu0, Cause::kExpanded));  // GPU0 is still current after the refused node
  EXPECT_TRUE(Assigned(n[3], kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[4], kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Unassigned(n[5]));  // GPU0 (forward) and GPU1 (backward) both refuse it
}

TEST_F(SchedPass2, ExpansionOnlyUsesTheCurrentBackend) {
  auto n = chain(3);
  plan.set(n[0], kGpu1, Cause::kWeight);
  refuse_tensor(kGpu1, n[1]);  // GPU0 and the CPU could run it, but neither is current
  run();
  EXPECT_TRUE(Unassigned(n[1]));
  EXPECT_TRUE(Assigned(n[2], kGpu1, Cause::kExpanded));
}

TEST_F(SchedPass2, ForwardAnyBackendSweepCarriesTheCpu) {
  auto n = chain(4);
  plan.set(n[0], kCpu, Cause::kInput);
  run();
  for (int i = 1; i <= 3; ++i) EXPECT_TRUE(Assigned(n[i], kCpu, Cause::kExpanded));
}

TEST_F(SchedPass2, BackwardAnyBackendSweepCarriesTheCpu) {
  auto n = chain(4);
  plan.set(n[3], kCpu, Cause::kWeight);
  run();
  for (int i = 0; i <= 2; ++i) EXPECT_TRUE(Assigned(n[i], kCpu, Cause::kExpanded));
}

TEST_F(SchedPass2, AnyBackendSweepsGiveTheCpuWhatTheGpusRefuse) {
  auto n = chain(5);
  plan.set(n[0], kGpu0, Cause::kWeight);
  refuse_tensor(kGpu0, n[1]);
  plan.set(n[2], kCpu, Cause::kWeight);
  refuse_tensor(kGpu1, n[3]);
  plan.set(n[4], kGpu1, Cause::kWeight);
  run();
  EXPECT_TRUE(Assigned(n[1], kCpu, Cause::kExpanded));  // sweep 4 (backward from the CPU node)
  EXPECT_TRUE(Assigned(n[3], kCpu, Cause::kExpanded));  // sweep 3 (forward from the CPU node)
}

TEST_F(SchedPass2, AnyBackendSweepKeepsCurrentOverANodeTheCpuRefuses) {
  auto n = chain(4);
  plan.set(n[0], kCpu, Cause::kInput);
  refuse_tensor(kCpu, n[1]);
  refuse_tensor(kGpu0, n[1]);
  refuse_tensor(kGpu1, n[1]);
  run();
  EXPECT_TRUE(Unassigned(n[1]));
  EXPECT_TRUE(Assigned(n[2], kCpu, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n[3], kCpu, Cause::kExpanded));
}

TEST_F(SchedPass2, ViewOpsAreSkipped) {
  Tensor* a = tensor("a");
  Tensor* n0 = named(scale(ctx, a, 1.0f), "n0");
  Tensor* v = named(reshape_1d(ctx, n0, 64), "v");
  Tensor* n1 = named(scale(ctx, v, 1.0f), "n1");
  Tensor* c = tensor("c", 64, 1);
  Tensor* cv = named(reshape_1d(ctx, c, 64), "cv");
  Tensor* n2 = named(add(ctx, n1, cv), "n2");
  build(n2);
  ASSERT_EQ(graph.nodes(), (std::vector<Tensor*>{n0, v, n1, cv, n2}));
  plan.set(n0, kGpu0, Cause::kWeight);
  plan.set(c, kCpu, Cause::kHasBuffer);
  plan.set(cv, kCpu, Cause::kViewSourceHasBuffer);  // an assigned view on the CPU does not clear the current backend
  run();
  EXPECT_TRUE(Unassigned(v));  // views are never expanded into (pass 4 gives them their source's backend)
  EXPECT_TRUE(Assigned(n1, kGpu0, Cause::kExpanded));
  EXPECT_TRUE(Assigned(cv, kCpu, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Assigned(n2, kGpu0, Cause::kExpanded));
}

TEST_F(SchedPass2, UserPinsAndOtherCausesAreNotChanged) {
  auto n = chain(4);
  plan.set(n[0], kGpu0, Cause::kWeight);
  plan.set(n[1], kCpu, Cause::kPinned);
  plan.set(n[2], kGpu1, Cause::kOpOffload);
  run();
  EXPECT_TRUE(Assigned(n[0], kGpu0, Cause::kWeight));
  EXPECT_TRUE(Assigned(n[1], kCpu, Cause::kPinned));
  EXPECT_TRUE(Assigned(n[2], kGpu1, Cause::kOpOffload));
  EXPECT_TRUE(Assigned(n[3], kGpu1, Cause::kExpanded));
}

TEST_F(SchedPass2, NothingAssignedNothingExpanded) {
  auto n = chain(3);
  run();
  for (Tensor* t : n) EXPECT_TRUE(Unassigned(t));
}

}  // namespace
}  // namespace tessera::sched::testing
