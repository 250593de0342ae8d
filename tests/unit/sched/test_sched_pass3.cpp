// Pass 3 (docs/scheduler.md): best fit for unassigned nodes (the supporting backend where most sources are assigned
// and in a buffer type it can use; ties to the higher priority) and upgrade of assigned nodes to a higher-priority
// backend sharing the same compute buffer type, only when it supports the op and every source's buffer type; user
// pins never move.
#include "unit/sched/sched_pass_fixture.h"

namespace tessera::sched::testing {
namespace {

class SchedPass3 : public SchedPassFixture {
 protected:
  void run() { pass3_upgrade(plan, graph, bs); }
};

// ---- best fit ----

TEST_F(SchedPass3, BestFitGoesWhereMostSourcesAre) {
  Tensor* a = ctx.new_tensor_3d(Type::kF32, 8, 2, 4);
  set_name(*a, "a");
  Tensor* pos = ctx.new_tensor_1d(Type::kI32, 4);
  set_name(*pos, "pos");
  Tensor* ff = ctx.new_tensor_1d(Type::kF32, 4);
  set_name(*ff, "ff");
  place(cpu_buft, {a});
  weights(gpu1_buft, {ff});
  Tensor* r = named(rope(ctx, a, pos, 8, RopeMode::kNormal, 10000.0f, 1.0f, ff), "r");
  build(r);
  plan.set(a, kCpu, Cause::kHasBuffer);
  plan.set(pos, kCpu, Cause::kInput);  // no buffer: counts through the CPU's compute buffer type
  plan.set(ff, kGpu1, Cause::kHasBuffer);
  run();
  EXPECT_TRUE(Assigned(r, kCpu, Cause::kMostSources));  // 2 sources on the CPU beat 1 on GPU1 and 0 on GPU0
}

TEST_F(SchedPass3, BestFitTieGoesToTheHigherPriority) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  place(gpu1_buft, {a});
  place(cpu_buft, {b});
  Tensor* n = named(add(ctx, a, b), "n");
  build(n);
  plan.set(a, kGpu1, Cause::kHasBuffer);
  plan.set(b, kCpu, Cause::kHasBuffer);
  run();
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kMostSources));  // 1 vs 1: GPU1 before the CPU; GPU0 (0) is not a tie
}

TEST_F(SchedPass3, WithoutAssignedSourcesTheFirstSupportingBackendWins) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* n = named(add(ctx, a, b), "n");
  Tensor* m = named(mul(ctx, a, b), "m");
  refuse(kGpu0, Op::kMul);
  build({n, m});
  run();
  EXPECT_TRUE(Assigned(n, kGpu0, Cause::kMostSources));
  EXPECT_TRUE(Assigned(m, kGpu1, Cause::kMostSources));  // only backends supporting the op compete
}

TEST_F(SchedPass3, SourcesCountOnlyWhenAssignedAndInABufferTypeTheBackendCanUse) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  place(gpu0_buft, {a});  // in GPU0 memory but not assigned (yet): does not count
  Tensor* n = named(add(ctx, a, b), "n");
  allow_buft(kGpu1, cpu_buft);  // GPU1 can also use host memory
  Tensor* c = tensor("c");
  Tensor* d = tensor("d");
  place(cpu_buft, {c, d});
  Tensor* m = named(add(ctx, c, d), "m");
  build({n, m});
  plan.set(b, kGpu1, Cause::kConsumer);
  plan.set(c, kCpu, Cause::kHasBuffer);
  plan.set(d, kCpu, Cause::kHasBuffer);
  run();
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kMostSources));  // GPU1: 1 (b), GPU0: 0
  EXPECT_TRUE(Assigned(m, kGpu1, Cause::kMostSources));  // GPU1: 2 and CPU: 2 (both can use CPU_buf); GPU0: 0
}

TEST_F(SchedPass3, ViewSourceCountsThroughItsViewSrcAndViewsAreSkipped) {
  Tensor* x = tensor("x");
  Tensor* n0 = named(scale(ctx, x, 1.0f), "n0");
  Tensor* v = named(reshape_1d(ctx, n0, 64), "v");
  Tensor* b = tensor("b", 64, 1);
  Tensor* n = named(add(ctx, v, reshape_1d(ctx, b, 64)), "n");
  build(n);
  plan.set(n0, kGpu1, Cause::kWeight);
  run();
  EXPECT_TRUE(Unassigned(v));                            // a view op: left for pass 4
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kMostSources));  // v counts for GPU1 through n0's backend
}

TEST_F(SchedPass3, BestFitSeesTheDecisionsOfEarlierNodes) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* c = tensor("c");
  Tensor* n1 = named(add(ctx, a, b), "n1");
  Tensor* n2 = named(add(ctx, c, n1), "n2");
  build(n2);
  plan.set(a, kGpu1, Cause::kConsumer);
  plan.set(b, kGpu1, Cause::kConsumer);
  run();
  EXPECT_TRUE(Assigned(n1, kGpu1, Cause::kMostSources));
  EXPECT_TRUE(Assigned(n2, kGpu1, Cause::kMostSources));  // n1 now counts; otherwise GPU0 by priority
}

TEST_F(SchedPass3, NodeNoBackendSupportsStaysUnassigned) {
  refuse_everywhere(Op::kSoftMax);
  Tensor* x = tensor("x");
  Tensor* p = named(soft_max(ctx, x), "p");
  build(p);
  plan.set(x, kCpu, Cause::kInput);
  run();
  EXPECT_TRUE(Unassigned(p));  // pass 4 reports it
}

// ---- upgrade ----

TEST_F(SchedPass3, UpgradeToAHigherBackendSharingTheComputeBufferType) {
  share_gpu0_compute_buft();
  Tensor* x = tensor("x");
  Tensor* y = tensor("y");
  place(gpu0_buft, {y});
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  Tensor* m = named(add(ctx, x, y), "m");
  build({n, m});
  plan.set(x, kGpu1, Cause::kConsumer);  // no buffer: GPU1's compute type, which is GPU0's
  plan.set(y, kGpu0, Cause::kHasBuffer);
  plan.set(n, kGpu1, Cause::kExpanded);
  plan.set(m, kGpu1, Cause::kMostSources);
  run();
  EXPECT_TRUE(Assigned(n, kGpu0, Cause::kUpgraded));
  EXPECT_TRUE(Assigned(m, kGpu0, Cause::kUpgraded));
}

TEST_F(SchedPass3, NoUpgradeWithoutASharedComputeBufferType) {
  allow_buft(kGpu0, gpu1_buft);  // GPU0 could even read GPU1's memory, but computes in another type
  Tensor* x = tensor("x");
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  build(n);
  plan.set(x, kGpu1, Cause::kConsumer);
  plan.set(n, kGpu1, Cause::kExpanded);
  run();
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kExpanded));
}

TEST_F(SchedPass3, NoUpgradeWhenTheHigherBackendRefusesTheOp) {
  share_gpu0_compute_buft();
  refuse(kGpu0, Op::kScale);
  Tensor* x = tensor("x");
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  build(n);
  plan.set(x, kGpu1, Cause::kConsumer);
  plan.set(n, kGpu1, Cause::kExpanded);
  run();
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kExpanded));
}

TEST_F(SchedPass3, NoUpgradeWhenASourceIsInABufferTypeTheHigherBackendCannotUse) {
  share_gpu0_compute_buft();
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});  // only GPU1 can use GPU1_buf
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  Tensor* z = named(scale(ctx, y, 1.0f), "z");
  build(z);
  plan.set(w, kGpu1, Cause::kHasBuffer);
  plan.set(x, kGpu1, Cause::kConsumer);
  plan.set(y, kGpu1, Cause::kWeight);
  plan.set(z, kGpu1, Cause::kExpanded);
  run();
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kWeight));    // w's buffer type is not GPU0's
  EXPECT_TRUE(Assigned(z, kGpu0, Cause::kUpgraded));  // y lives in GPU1's compute type, shared with GPU0
}

TEST_F(SchedPass3, UserPinsAreNotUpgraded) {
  share_gpu0_compute_buft();
  Tensor* x = tensor("x");
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  build(n);
  plan.set(x, kGpu1, Cause::kConsumer);
  plan.set(n, kGpu1, Cause::kPinned);
  run();
  EXPECT_TRUE(Assigned(n, kGpu1, Cause::kPinned));
}

TEST_F(SchedPass3, UpgradeTakesTheHighestPriorityCandidate) {
  // All three compute in host memory (e.g. integrated devices): every upgrade condition but the op holds.
  compute = {&cpu_buft, &cpu_buft, &cpu_buft};
  allow_buft(kGpu0, cpu_buft);
  allow_buft(kGpu1, cpu_buft);
  refuse(kGpu0, Op::kScale);
  Tensor* x = tensor("x");
  Tensor* n1 = named(scale(ctx, x, 1.0f), "n1");
  Tensor* n2 = named(add(ctx, n1, x), "n2");
  build(n2);
  plan.set(x, kCpu, Cause::kInput);
  plan.set(n1, kCpu, Cause::kExpanded);
  plan.set(n2, kCpu, Cause::kExpanded);
  run();
  EXPECT_TRUE(Assigned(n1, kGpu1, Cause::kUpgraded));  // GPU0 refuses SCALE
  EXPECT_TRUE(Assigned(n2, kGpu0, Cause::kUpgraded));
}

TEST_F(SchedPass3, AssignedViewsAreNeverUpgraded) {
  share_gpu0_compute_buft();
  Tensor* x = tensor("x");
  Tensor* v = named(reshape_1d(ctx, x, 64), "v");
  build(v);
  plan.set(x, kGpu1, Cause::kConsumer);
  plan.set(v, kGpu1, Cause::kViewSourceHasBuffer);
  run();
  EXPECT_TRUE(Assigned(v, kGpu1, Cause::kViewSourceHasBuffer));
}

}  // namespace
}  // namespace tessera::sched::testing
