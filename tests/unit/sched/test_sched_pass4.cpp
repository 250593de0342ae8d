// Pass 4 (docs/scheduler.md): unassigned views take their view source's backend, unassigned sources the node's
// backend (views among them their view source's), a node still unassigned the first backend that supports it; a
// node no backend supports, or a pinned / INPUT node on a backend that refuses it, is a scheduling error (a status,
// never an abort, never a silently unassigned node). Ends with passes 1-4 together.
#include "unit/sched/sched_pass_fixture.h"

using ::testing::HasSubstr;

namespace tessera::sched::testing {
namespace {

class SchedPass4 : public SchedPassFixture {
 protected:
  Status run() { return pass4_sources(plan, graph, bs); }
};

TEST_F(SchedPass4, UnassignedViewsTakeTheirViewSrcsBackend) {
  Tensor* x = tensor("x");
  Tensor* n0 = named(scale(ctx, x, 1.0f), "n0");
  Tensor* v1 = named(reshape_2d(ctx, n0, 16, 4), "v1");
  Tensor* v2 = named(transpose(ctx, v1), "v2");  // a view of a view
  Tensor* n1 = named(cont(ctx, v2), "n1");
  build(n1);
  plan.set(n0, kGpu1, Cause::kExpanded);
  plan.set(n1, kGpu0, Cause::kMostSources);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(v1, kGpu1, Cause::kViewOfSource));
  EXPECT_TRUE(Assigned(v2, kGpu1, Cause::kViewOfSource));  // its view_src's, not its consumer's
  EXPECT_TRUE(Assigned(x, kGpu1, Cause::kConsumer));
  EXPECT_TRUE(Assigned(n0, kGpu1, Cause::kExpanded));
  EXPECT_TRUE(Assigned(n1, kGpu0, Cause::kMostSources));
  EXPECT_TRUE(FullyAssigned());
}

TEST_F(SchedPass4, UnassignedSourcesTakeTheNodesBackend) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* c = input("c");
  Tensor* n = named(add(ctx, a, b), "n");
  Tensor* m = named(mul(ctx, n, c), "m");
  build(m);
  plan.set(c, kCpu, Cause::kInput);
  plan.set(n, kGpu0, Cause::kMostSources);
  plan.set(m, kGpu1, Cause::kExpanded);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(a, kGpu0, Cause::kConsumer));
  EXPECT_TRUE(Assigned(b, kGpu0, Cause::kConsumer));
  EXPECT_TRUE(Assigned(c, kCpu, Cause::kInput));  // assigned sources keep their backend
  EXPECT_TRUE(FullyAssigned());
}

// A source that is a view but not a node of this graph (e.g. a graph built node by node) is still placed with its
// view source, not with the node using it.
TEST_F(SchedPass4, UnassignedViewSourcesTakeTheirViewSrcsBackend) {
  Tensor* x = tensor("x");
  Tensor* n0 = named(scale(ctx, x, 1.0f), "n0");
  Tensor* v = named(reshape_1d(ctx, n0, 64), "v");
  Tensor* n1 = named(scale(ctx, v, 1.0f), "n1");
  Tensor* y = tensor("y");
  Tensor* vy = named(reshape_1d(ctx, y, 64), "vy");  // its view source is not assigned either
  Tensor* n2 = named(add(ctx, n1, vy), "n2");
  ASSERT_TRUE(ctx.ok());
  ASSERT_TRUE(graph.add_leaf(x).ok());
  ASSERT_TRUE(graph.add_node(n0).ok());
  ASSERT_TRUE(graph.add_node(n1).ok());
  ASSERT_TRUE(graph.add_node(n2).ok());
  plan.set(x, kGpu1, Cause::kInput);
  plan.set(n0, kGpu1, Cause::kExpanded);
  plan.set(n1, kGpu0, Cause::kMostSources);
  plan.set(n2, kGpu0, Cause::kMostSources);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(v, kGpu1, Cause::kViewOfSource));   // with n0, not with n1 on GPU0
  EXPECT_TRUE(Assigned(y, kGpu0, Cause::kConsumer));       // the view's source takes the node's backend
  EXPECT_TRUE(Assigned(vy, kGpu0, Cause::kViewOfSource));  // and the view follows it
}

TEST_F(SchedPass4, UnassignedNodeFallsBackToTheFirstSupportingBackend) {
  refuse(kGpu0, Op::kSoftMax);
  Tensor* x = tensor("x");
  Tensor* p = named(soft_max(ctx, x), "p");
  build(p);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(p, kGpu1, Cause::kFallback));
  EXPECT_TRUE(Assigned(x, kGpu1, Cause::kConsumer));  // sources follow the node's final backend
  EXPECT_TRUE(FullyAssigned());
}

TEST_F(SchedPass4, ViewOfAnUnassignedLeafGoesWithItsSource) {
  refuse(kGpu0, Op::kReshape);
  Tensor* x = tensor("x");
  Tensor* v = named(reshape_1d(ctx, x, 64), "v");
  Tensor* n = named(scale(ctx, v, 1.0f), "n");
  build(n);
  plan.set(n, kGpu1, Cause::kMostSources);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(v, kGpu1, Cause::kViewOfSource));
  // Only where the view source ends is checked (with the view), not which of pass 4's causes names it.
  EXPECT_EQ(plan.backend_of(x), kGpu1);
  EXPECT_NE(plan.cause_of(x), Cause::kUnassigned);
  EXPECT_TRUE(FullyAssigned());
}

TEST_F(SchedPass4, NodeNoBackendSupportsIsASchedulingError) {
  refuse_everywhere(Op::kSoftMax);
  Tensor* x = tensor("x");
  Tensor* h = named(scale(ctx, x, 1.0f), "h");
  Tensor* p = named(soft_max(ctx, h), "probs");
  Tensor* out = named(scale(ctx, p, 1.0f), "out");
  build(out);
  plan.set(h, kGpu0, Cause::kMostSources);
  plan.set(out, kGpu0, Cause::kMostSources);
  const Status s = run();
  ExpectSchedulingError(s, {"SOFT_MAX", "probs"});
  EXPECT_NE(plan.backend_of(p), kGpu0);  // never silently put somewhere it cannot run
}

TEST_F(SchedPass4, PinnedNodeOnABackendThatRefusesItIsASchedulingError) {
  refuse(kGpu0, Op::kRmsNorm);
  Tensor* x = tensor("x");
  Tensor* n = named(rms_norm(ctx, x, 1e-5f), "pinned_norm");
  build(n);
  plan.set(n, kGpu0, Cause::kPinned);
  const Status s = run();
  ExpectSchedulingError(s, {"pinned_norm", "GPU0", "RMS_NORM"});
}

// The anchor's defect (docs/scheduler.md): nodes left unassigned when the CPU's support check says no.
TEST_F(SchedPass4, InputNodeOnALastBackendThatRefusesItIsASchedulingError) {
  refuse(kCpu, Op::kGetRows);
  Tensor* table = tensor("table");
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 4);
  set_name(*ids, "ids");
  Tensor* rows = named(get_rows(ctx, table, ids), "rows");
  set_input(*rows);
  build(rows);
  plan.set(rows, kCpu, Cause::kInput);
  const Status s = run();
  ExpectSchedulingError(s, {"rows", "CPU", "GET_ROWS"});
}

// Passes 1-4 on a small decoder-like graph: weights on GPU1 and in host memory, GPU1 refusing SOFT_MAX.
// A destination written by two nodes (a CPY into a cache, then a SET_ROWS into the result) that earlier passes put
// on different backends: the destination and both writers end on one backend that can run both. (Found by the
// end_to_end fuzzer: moving the destination to the second writer's backend left the first writer behind, writing into
// memory its device cannot access.)
TEST_F(SchedPass4, EveryWriterOfADestinationRunsWhereItLives) {
  refuse(kGpu0, Op::kSetRows);
  Tensor* x = tensor("x");
  Tensor* a = named(scale(ctx, x, 2.0f), "a");
  Tensor* cache = tensor("cache");  // no memory: the scheduler places it
  Tensor* c1 = named(cpy(ctx, a, cache), "c1");
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  set_name(*ids, "ids");
  Tensor* rows = tensor("rows", 8, 2);
  Tensor* c2 = named(set_rows(ctx, c1, rows, ids), "c2");
  Tensor* out = named(scale(ctx, c2, 1.0f), "out");
  build(out);
  plan.set(a, kGpu0, Cause::kMostSources);
  plan.set(c1, kGpu0, Cause::kExpanded);    // the destination is first met here: it would go to GPU0
  plan.set(c2, kCpu, Cause::kMostSources);  // GPU0 refuses SET_ROWS
  plan.set(out, kCpu, Cause::kExpanded);
  ASSERT_TRUE(run().ok());
  EXPECT_EQ(plan.backend_of(cache), kCpu);
  EXPECT_EQ(plan.backend_of(c1), kCpu);
  EXPECT_EQ(plan.backend_of(c2), kCpu);
  EXPECT_TRUE(Assigned(a, kGpu0, Cause::kMostSources));  // the writer's source stays: pass 5 copies it
  EXPECT_TRUE(FullyAssigned());
}

TEST_F(SchedPass4, WritersThatNeedADestinationOnTwoBackendsAreASchedulingError) {
  refuse(kGpu0, Op::kSetRows);
  Tensor* x = tensor("x");
  Tensor* cache = tensor("cache");
  Tensor* c1 = named(cpy(ctx, x, cache), "c1");
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  set_name(*ids, "ids");
  Tensor* rows = tensor("rows", 8, 2);
  Tensor* c2 = named(set_rows(ctx, c1, rows, ids), "c2");
  build(c2);
  plan.set(c1, kGpu0, Cause::kPinned);  // pinned where the other writer cannot run
  plan.set(c2, kCpu, Cause::kMostSources);
  const Status s = run();
  ExpectSchedulingError(s, {"cache", "c1 on GPU0", "c2 on CPU"});
}

TEST_F(SchedPass4, AfterPasses1To4EveryNodeAndSourceIsAssigned) {
  refuse(kGpu1, Op::kSoftMax);
  Tensor* x = input("x");
  Tensor* w1 = tensor("w1");
  Tensor* w2 = tensor("w2");
  weights(gpu1_buft, {w1});
  weights(cpu_buft, {w2});
  Tensor* h = named(rms_norm(ctx, x, 1e-5f), "h");
  Tensor* q = named(mul_mat(ctx, w1, h), "q");
  Tensor* r = named(reshape_1d(ctx, q, 64), "r");
  Tensor* p = named(soft_max(ctx, r), "p");
  Tensor* pr = named(reshape_2d(ctx, p, 8, 8), "pr");
  Tensor* f = named(mul_mat(ctx, w2, pr), "f");
  Tensor* out = named(scale(ctx, f, 1.0f), "out");
  build(out);
  PassOptions opt;
  opt.op_offload = false;
  ASSERT_TRUE(pass1_preassign(plan, graph, bs, opt).ok());
  pass2_expand(plan, graph, bs);
  pass3_upgrade(plan, graph, bs);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(FullyAssigned());
  EXPECT_TRUE(Assigned(x, kCpu, Cause::kInput));
  EXPECT_TRUE(Assigned(w1, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(w2, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(h, kGpu1, Cause::kExpanded));  // the GPU run grows backwards over it
  EXPECT_TRUE(Assigned(q, kGpu1, Cause::kWeight));
  EXPECT_TRUE(Assigned(r, kGpu1, Cause::kViewOfSource));
  EXPECT_TRUE(Assigned(p, kCpu, Cause::kExpanded));  // GPU1 refuses it: the CPU, from the backward sweep
  EXPECT_TRUE(Assigned(pr, kCpu, Cause::kViewOfSource));
  EXPECT_TRUE(Assigned(f, kCpu, Cause::kWeight));
  EXPECT_TRUE(Assigned(out, kCpu, Cause::kExpanded));
}

TEST_F(SchedPass4, SplitGraphReportsTheSchedulingErrorOfPass4) {
  refuse_everywhere(Op::kArgsort);
  Tensor* x = input("x");
  Tensor* s = named(argsort(ctx, x, SortOrder::kAsc), "order");
  build(s);
  const Status st = split_graph(plan, graph, bs, PassOptions{});
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("ARGSORT"));
  EXPECT_THAT(st.message(), HasSubstr("order"));
}

}  // namespace
}  // namespace tessera::sched::testing
