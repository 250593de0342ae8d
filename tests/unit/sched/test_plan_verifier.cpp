// The scheduler's plan verifier (src/sched/verify.cpp, TS_DEBUG_ASSERT, TESSERA_CHECK_INVARIANTS): it runs after each
// pass in debug and sanitizer builds. Each check is shown to fire on a plan corrupted by hand, naming the invariant and
// the tensor. The verifier's own answers are checked in every build; that split_graph aborts on a violation only where
// the checks are compiled in (elsewhere that test is skipped and says why).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "unit/sched/sched_pass_fixture.h"

using ::testing::HasSubstr;

namespace tessera::sched::testing {

// Breaks what no public member of the plan can: its facts, copy sets and memoised supports_op answers (a friend of
// SchedPlan), so that the checks of the plan's own bookkeeping can be shown to fire.
struct PlanCorrupter {
  // answer: 1 yes, 0 no, -1 never asked (as SchedPlan::supports_answer reads it)
  static void set_answer(SchedPlan& p, int32_t id, int b, int answer) {
    uint32_t& bits = p.op_memo_.at(static_cast<size_t>(id));
    bits &= ~((1u << b) | (1u << (b + 16)));
    if (answer >= 0) bits |= (1u << b) | (static_cast<uint32_t>(answer) << (b + 16));
  }
  static uint8_t& facts(SchedPlan& p, int32_t id) { return p.facts_.at(static_cast<size_t>(id)); }
  static void clear_fact(SchedPlan& p, int32_t id, SchedPlan::Fact f) {
    facts(p, id) = static_cast<uint8_t>(facts(p, id) & ~f);
  }
  static SchedPlan::CopySetKey& key(SchedPlan& p, int32_t set) { return p.copy_set_keys_.at(static_cast<size_t>(set)); }
  static int32_t& copy_id(SchedPlan& p, int32_t set, int slot) {
    return p.copy_set_ids_.at(static_cast<size_t>(set)).at(static_cast<size_t>(slot));
  }
  static int32_t& origin(SchedPlan& p, int32_t id) { return p.copy_origin_.at(static_cast<size_t>(id)); }
  static Tensor*& copy(SchedPlan& p, int32_t set, int slot) {
    return p.copy_sets_.at(static_cast<size_t>(set)).at(static_cast<size_t>(slot));
  }
};

namespace {

// Passes 1-5 on a small decoder-like graph (the one pass 4's tests end with): an INPUT on the CPU, weights on GPU1
// and in the CPU's memory, GPU1 refusing SOFT_MAX. It gives two splits (GPU1, then the CPU), each with a copied input.
class PlanVerifierTest : public SchedPassFixture {
 protected:
  void decoder_graph() {
    refuse(kGpu1, Op::kSoftMax);
    x = input("x");
    w1 = tensor("w1");
    w2 = tensor("w2");
    weights(gpu1_buft, {w1});
    weights(cpu_buft, {w2});
    h = named(rms_norm(ctx, x, 1e-5f), "h");
    q = named(mul_mat(ctx, w1, h), "q");
    r = named(reshape_1d(ctx, q, 64), "r");
    p = named(soft_max(ctx, r), "p");
    pr = named(reshape_2d(ctx, p, 8, 8), "pr");
    f = named(mul_mat(ctx, w2, pr), "f");
    out = named(scale(ctx, f, 1.0f), "out");
    build(out);
  }
  // Runs the passes from `from` to `to`, the chained verifier after each; every check holds on the real plan.
  void run_passes(int from, int to) {
    for (int pass = from; pass <= to; ++pass) {
      run_pass(pass);
      ASSERT_EQ(verifier.check(pass, plan, graph, bs, opt), "") << "pass " << pass;
    }
  }
  // One pass, without the verifier.
  void run_pass(int pass) {
    switch (pass) {
      case 1: ASSERT_TRUE(pass1_preassign(plan, graph, bs, opt).ok()); break;
      case 2: pass2_expand(plan, graph, bs); break;
      case 3: pass3_upgrade(plan, graph, bs); break;
      case 4: ASSERT_TRUE(pass4_sources(plan, graph, bs).ok()); break;
      case 5:
        plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
        ASSERT_TRUE(pass5_splits(plan, graph, bs, opt).ok());
        break;
    }
  }
  void run_passes(int to) { run_passes(1, to); }
  // What the chained verifier says of pass `pass` when `corrupt` changed its result: passes before it are verified.
  template <typename Fn>
  std::string changed_by(int pass, Fn corrupt) {
    run_passes(pass - 1);
    run_pass(pass);
    corrupt();
    return verifier.check(pass, plan, graph, bs, opt);
  }
  int32_t id(const Tensor* t) const { return plan.id_of(t); }
  Tensor* extra(const char* name) { return tensor(name); }  // a tensor outside the graph
  // What a fresh verifier (no previous pass to compare with) finds after pass p.
  std::string fresh(int pass) {
    PlanVerifier v;
    return v.check(pass, plan, graph, bs, opt);
  }
  // The first split with inputs.
  Split& split_with_inputs() {
    for (Split& sp : plan.splits) {
      if (!sp.inputs.empty()) return sp;
    }
    ADD_FAILURE() << "no split has inputs";
    return plan.splits.front();
  }
  void TearDown() override { restore_sources(plan); }

  PassOptions opt{.op_offload = false};
  PlanVerifier verifier;
  Tensor *x = nullptr, *w1 = nullptr, *w2 = nullptr, *h = nullptr, *q = nullptr, *r = nullptr, *p = nullptr,
         *pr = nullptr, *f = nullptr, *out = nullptr;
};

TEST_F(PlanVerifierTest, EveryCheckHoldsAfterEveryPass) {
  decoder_graph();
  run_passes(5);
  EXPECT_EQ(plan.splits.size(), 2u);
  for (const Split& sp : plan.splits) EXPECT_FALSE(sp.inputs.empty());
  EXPECT_FALSE(plan.rewrites.empty());
}

TEST_F(PlanVerifierTest, EveryCheckHoldsWhenPipelined) {
  opt.n_copies = static_cast<int>(kParallelCopies);
  opt.slot = 2;
  decoder_graph();
  run_passes(5);
  EXPECT_FALSE(plan.graph_inputs.empty());  // x has its own per-slot copies
}

// ---- every pass ----

TEST_F(PlanVerifierTest, ABackendWithoutACause) {
  decoder_graph();
  run_passes(2);
  plan.set(h, kGpu0, Cause::kUnassigned);
  const std::string v = fresh(2);
  EXPECT_THAT(v, HasSubstr("after pass 2: a tensor has a backend exactly when it has a cause"));
  EXPECT_THAT(v, HasSubstr("'h'"));
}

TEST_F(PlanVerifierTest, ACauseOfAPassThatHasNotRun) {
  decoder_graph();
  run_passes(1);
  plan.set(h, kCpu, Cause::kFallback);
  const std::string v = fresh(1);
  EXPECT_THAT(v, HasSubstr("a cause comes from a pass that has run"));
  EXPECT_THAT(v, HasSubstr("'h'"));
  EXPECT_THAT(v, HasSubstr("4.fallback"));
}

// ---- pass 1 ----

TEST_F(PlanVerifierTest, Pass1InputOffTheLastBackend) {
  decoder_graph();
  run_passes(1);
  plan.set(x, kGpu0, Cause::kInput);
  const std::string v = fresh(1);
  EXPECT_THAT(v, HasSubstr("1.inp: a graph input starts on the last backend"));
  EXPECT_THAT(v, HasSubstr("'x'"));
}

TEST_F(PlanVerifierTest, Pass1TensorWithMemoryOnABackendThatCannotUseIt) {
  decoder_graph();
  run_passes(1);
  plan.set(w1, kCpu, Cause::kHasBuffer);  // w1 is in GPU1's memory
  const std::string v = fresh(1);
  EXPECT_THAT(v, HasSubstr("1.dst: a tensor with memory runs on a backend that can use it"));
  EXPECT_THAT(v, HasSubstr("'w1'"));
  EXPECT_THAT(v, HasSubstr("GPU1_buf"));
}

TEST_F(PlanVerifierTest, Pass1RuleThatAppliesLeftUnapplied) {
  decoder_graph();
  run_passes(1);
  plan.set(x, -1, Cause::kUnassigned);
  const std::string v = fresh(1);
  EXPECT_THAT(v, HasSubstr("1.inp: every graph input without memory starts on the last backend"));
  EXPECT_THAT(v, HasSubstr("'x'"));
}

TEST_F(PlanVerifierTest, Pass1WeightCauseOnABackendThatCannotUseTheWeight) {
  decoder_graph();
  run_passes(1);
  plan.set(f, kGpu0, Cause::kWeight);  // f's weight w2 is in the CPU's memory
  const std::string v = fresh(1);
  EXPECT_THAT(v, HasSubstr("1.wgt"));
  EXPECT_THAT(v, HasSubstr("'f'"));
  EXPECT_THAT(v, HasSubstr("'w2'"));
}

// ---- passes 2 and 3: only their changes ----

TEST_F(PlanVerifierTest, APinNeverMoves) {
  decoder_graph();
  plan.set(h, kGpu0, Cause::kPinned);
  run_passes(2);
  pass3_upgrade(plan, graph, bs);
  plan.set(h, kGpu1, Cause::kUpgraded);
  const std::string v = verifier.check(3, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("a pin never moves"));
  EXPECT_THAT(v, HasSubstr("'h'"));
  EXPECT_THAT(v, HasSubstr("GPU0 [user]"));
}

TEST_F(PlanVerifierTest, Pass2ChangesAnAssignedNode) {
  decoder_graph();
  run_passes(1);
  pass2_expand(plan, graph, bs);
  plan.set(f, kGpu1, Cause::kExpanded);  // pass 1 put it on the CPU (its weight)
  const std::string v = verifier.check(2, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("2.exp: pass 2 only assigns unassigned computed nodes"));
  EXPECT_THAT(v, HasSubstr("'f'"));
}

TEST_F(PlanVerifierTest, Pass3UpgradesAcrossComputeBufferTypes) {
  decoder_graph();
  run_passes(2);
  pass3_upgrade(plan, graph, bs);
  ASSERT_EQ(plan.backend_of(p), kCpu);
  plan.set(p, kGpu0, Cause::kUpgraded);  // GPU0 computes in another buffer type than the CPU
  const std::string v = verifier.check(3, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("3.best / 3.upg"));
  EXPECT_THAT(v, HasSubstr("'p'"));
}

// ---- pass 4 ----

TEST_F(PlanVerifierTest, Pass4NodeWithoutABackend) {
  decoder_graph();
  run_passes(4);
  plan.set(out, -1, Cause::kUnassigned);
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("after pass 4: every node has a backend"));
  EXPECT_THAT(v, HasSubstr("'out'"));
}

TEST_F(PlanVerifierTest, Pass4SourceWithoutABackend) {
  decoder_graph();
  run_passes(4);
  plan.set(x, -1, Cause::kUnassigned);
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("every source of a node has a backend"));
  EXPECT_THAT(v, HasSubstr("'x'"));
  EXPECT_THAT(v, HasSubstr("'h'"));
}

TEST_F(PlanVerifierTest, Pass4NodeOnABackendThatRefusesIt) {
  decoder_graph();
  run_passes(4);
  plan.set(p, kGpu1, Cause::kExpanded);  // GPU1 refuses SOFT_MAX
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("every computed node runs on a backend that supports it"));
  EXPECT_THAT(v, HasSubstr("'p'"));
}

TEST_F(PlanVerifierTest, Pass4ViewAwayFromItsSource) {
  decoder_graph();
  run_passes(4);
  ASSERT_EQ(plan.cause_of(r), Cause::kViewOfSource);
  plan.set(r, kCpu, Cause::kViewOfSource);  // q is on GPU1
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("4.vsrc: a view placed by pass 4 is on its source's backend"));
  EXPECT_THAT(v, HasSubstr("'r'"));
  EXPECT_THAT(v, HasSubstr("'q'"));
}

TEST_F(PlanVerifierTest, Pass4WriterAwayFromItsDestination) {
  Tensor* a = named(scale(ctx, tensor("x"), 2.0f), "a");
  Tensor* cache = tensor("cache");  // no memory: the scheduler places it
  Tensor* c1 = named(cpy(ctx, a, cache), "c1");
  build(named(scale(ctx, c1, 1.0f), "out"));
  run_passes(4);
  ASSERT_EQ(plan.backend_of(c1), plan.backend_of(cache));
  plan.set(c1, plan.backend_of(cache) == kGpu0 ? kGpu1 : kGpu0, Cause::kViewOfSource);
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("a node that writes into a tensor runs where that tensor lives"));
  EXPECT_THAT(v, HasSubstr("'c1'"));
  EXPECT_THAT(v, HasSubstr("'cache'"));
}

TEST_F(PlanVerifierTest, Pass4MovesAnAssignedNodeThatWritesNothing) {
  decoder_graph();
  run_passes(3);
  ASSERT_TRUE(pass4_sources(plan, graph, bs).ok());
  plan.set(q, kGpu0, Cause::kFallback);  // pass 1 put it with its weight
  const std::string v = verifier.check(4, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("pass 4 moves an assigned tensor only to put the writers of a destination"));
  EXPECT_THAT(v, HasSubstr("'q'"));
}

// ---- pass 5 ----

TEST_F(PlanVerifierTest, Pass5SplitRangesWithAGap) {
  decoder_graph();
  run_passes(5);
  plan.splits[1].i_start += 1;
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("after pass 5: split ranges are contiguous, in order, not empty and cover every node once"));
  EXPECT_THAT(v, HasSubstr("split 1"));
}

TEST_F(PlanVerifierTest, Pass5NodeSplitNamesAnotherSplit) {
  decoder_graph();
  run_passes(5);
  const size_t last = graph.n_nodes() - 1;
  ASSERT_EQ(graph.node(last), out);
  plan.node_split[last] = 0;
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("node_split names the split that holds the node"));
  EXPECT_THAT(v, HasSubstr("'out'"));
}

TEST_F(PlanVerifierTest, Pass5NodeOffItsSplitsBackend) {
  decoder_graph();
  run_passes(5);
  ASSERT_EQ(plan.backend_of(out), kCpu);
  plan.set(out, kGpu0, Cause::kExpanded);
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("a split's computed nodes run on its backend"));
  EXPECT_THAT(v, HasSubstr("'out'"));
}

TEST_F(PlanVerifierTest, Pass5SplitOverMaxSplitInputs) {
  decoder_graph();
  run_passes(5);
  Split& sp = split_with_inputs();
  while (static_cast<int>(sp.inputs.size()) <= opt.max_split_inputs) {
    sp.inputs.push_back(sp.inputs[0]);
    sp.input_ids.push_back(sp.input_ids[0]);
    sp.input_copies.push_back(sp.input_copies[0]);
    sp.input_sets.push_back(sp.input_sets[0]);
  }
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("a split has at most max_split_inputs inputs"));
  EXPECT_THAT(v, HasSubstr("has 31 (max 30)"));
}

TEST_F(PlanVerifierTest, Pass5InputWithoutItsCopy) {
  decoder_graph();
  run_passes(5);
  Split& sp = split_with_inputs();
  const std::string input = sp.inputs[0]->name;
  sp.input_copies[0][0] = nullptr;
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("each split input's copy exists, one per slot"));
  EXPECT_THAT(v, HasSubstr("'" + input + "'"));
}

TEST_F(PlanVerifierTest, Pass5CopyOnAnotherBackendThanItsSet) {
  decoder_graph();
  run_passes(5);
  const int32_t set = split_with_inputs().input_sets[0];
  const int32_t cid = plan.copy_id_in_set(set, 0);
  const int b = plan.backend(cid);
  plan.set_id(cid, b == kGpu0 ? kCpu : kGpu0, Cause::kCopy);
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("a copy is on its set's backend and copies its set's tensor"));
  EXPECT_THAT(v, HasSubstr(plan.tensor(cid)->name));
}

TEST_F(PlanVerifierTest, Pass5RewrittenNodeReadingTheOriginal) {
  decoder_graph();
  run_passes(5);
  const SchedPlan::Rewrite w = plan.rewrites.back();
  w.node->src[w.src] = w.original;
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("a rewritten node reads its copy"));
  EXPECT_THAT(v, HasSubstr(std::string("'") + w.node->name + "'"));
}

TEST_F(PlanVerifierTest, Pass5ForeignSourceReadWithoutACopy) {
  decoder_graph();
  run_passes(5);
  const SchedPlan::Rewrite w = plan.rewrites.back();
  w.node->src[w.src] = w.original;
  plan.rewrites.pop_back();
  const std::string v = fresh(5);
  EXPECT_THAT(v, HasSubstr("every source a node's backend cannot read is read through a copy"));
  EXPECT_THAT(v, HasSubstr(std::string("'") + w.node->name + "'"));
  EXPECT_THAT(v, HasSubstr(std::string("'") + w.original->name + "'"));
}

TEST_F(PlanVerifierTest, Pass5ChangesAnAssignment) {
  decoder_graph();
  run_passes(4);
  plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  ASSERT_TRUE(pass5_splits(plan, graph, bs, opt).ok());
  plan.set(w2, kGpu0, Cause::kHasBuffer);
  const std::string v = verifier.check(5, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("pass 5 changes no assignment"));
  EXPECT_THAT(v, HasSubstr("'w2'"));
}

// ---- every check fires on its own: each part of a compound condition, broken alone ----

TEST_F(PlanVerifierTest, AGraphWithOtherNodesOrLeafsThanThePlan) {
  decoder_graph();
  run_passes(1);
  Graph fewer_nodes;
  ASSERT_TRUE(fewer_nodes.build_forward(q).ok());
  EXPECT_THAT(PlanVerifier().check(1, plan, fewer_nodes, bs, opt), HasSubstr("the plan indexes the graph"));
  Graph more_leafs;
  ASSERT_TRUE(more_leafs.build_forward(out).ok());
  ASSERT_TRUE(more_leafs.add_leaf(extra("y")).ok());
  ASSERT_EQ(more_leafs.n_nodes(), graph.n_nodes());
  const std::string v = PlanVerifier().check(1, plan, more_leafs, bs, opt);
  EXPECT_THAT(v, HasSubstr("the plan indexes the graph"));
  EXPECT_THAT(v, HasSubstr("the graph 7 and 4"));
}

TEST_F(PlanVerifierTest, ABackendOutsideTheSet) {
  decoder_graph();
  run_passes(2);
  plan.set(h, -2, Cause::kExpanded);
  EXPECT_THAT(fresh(2), HasSubstr("a backend is one of the set: 'h' (id 0) is on backend -2 of 3"));
  plan.set(h, 3, Cause::kExpanded);
  EXPECT_THAT(fresh(2), HasSubstr("a backend is one of the set: 'h' (id 0) is on backend 3 of 3"));
}

TEST_F(PlanVerifierTest, AnUnknownCause) {
  decoder_graph();
  run_passes(2);
  plan.set(h, kGpu0, Cause::kCount);
  EXPECT_THAT(fresh(2), HasSubstr("a cause is a known one: 'h' (id 0) has cause"));
}

TEST_F(PlanVerifierTest, CauseCopyOnATensorThatIsNotACopyAndTheReverse) {
  decoder_graph();
  run_passes(5);
  plan.set(h, plan.backend_of(h), Cause::kCopy);
  EXPECT_THAT(fresh(5), HasSubstr("exactly the scheduler's copies have cause copy: 'h' (id 0) is GPU1 [copy] and not"));
  plan.set(h, plan.backend_of(h), Cause::kExpanded);
  const int32_t cid = plan.copy_id_in_set(split_with_inputs().input_sets[0], 0);
  plan.set_id(cid, plan.backend(cid), Cause::kFallback);
  EXPECT_THAT(fresh(5), HasSubstr("[4.fallback] and is a copy"));
}

TEST_F(PlanVerifierTest, Pass1AssignsATensorOutsideTheGraph) {
  decoder_graph();
  run_passes(1);
  plan.set(extra("outside"), kCpu, Cause::kInput);
  EXPECT_THAT(fresh(1), HasSubstr("pass 1 assigns only the graph's nodes and leafs: 'outside'"));
}

TEST_F(PlanVerifierTest, Pass1MemoryCauseOnAViewOnATensorWithoutMemoryOrOnARefusedOp) {
  decoder_graph();
  run_passes(1);
  plan.set(r, kGpu1, Cause::kHasBuffer);  // a view
  EXPECT_THAT(fresh(1), HasSubstr("1.dst: a tensor with memory runs on a backend that can use it and its op: 'r'"));
  plan.set(r, -1, Cause::kUnassigned);
  plan.set(h, kGpu1, Cause::kHasBuffer);  // no memory
  EXPECT_THAT(fresh(1), HasSubstr("'h' (id 0) is GPU1 [1.dst], buffer type (none)"));
  plan.set(h, -1, Cause::kUnassigned);
  PlanCorrupter::set_answer(plan, id(w1), kGpu1, 0);
  EXPECT_THAT(fresh(1), HasSubstr("'w1' (id 8) is GPU1 [1.dst], buffer type GPU1_buf"));
}

TEST_F(PlanVerifierTest, Pass1ViewSourceCauseOnAViewOfNoMemoryOrOfMemoryItCannotUse) {
  refuse(kGpu1, Op::kSoftMax);
  x = input("x");
  w1 = tensor("w1");
  weights(gpu1_buft, {w1});
  Tensor* wv = named(reshape_2d(ctx, w1, 8, 8), "wv");
  init_views({wv});
  build(named(mul_mat(ctx, wv, x), "out"));
  run_passes(1);
  ASSERT_TRUE(Assigned(wv, kGpu1, Cause::kViewSourceHasBuffer));
  plan.set(wv, kCpu, Cause::kViewSourceHasBuffer);
  EXPECT_THAT(fresh(1), HasSubstr("1.vsrc: a view of memory runs on a backend that can use that memory and its op: "
                                  "'wv' (id 0) is CPU [1.vsrc], view of 'w1'"));
  plan.set(wv, kGpu1, Cause::kViewSourceHasBuffer);
  PlanCorrupter::set_answer(plan, id(wv), kGpu1, 0);
  EXPECT_THAT(fresh(1), HasSubstr("1.vsrc: a view of memory"));
  PlanCorrupter::set_answer(plan, id(wv), kGpu1, -1);
  plan.set(wv, -1, Cause::kUnassigned);
  EXPECT_THAT(fresh(1), HasSubstr("1.vsrc: every view of memory is assigned by it: 'wv' (id 0) (view of 'w1'"));
  plan.set(wv, kGpu1, Cause::kViewSourceHasBuffer);
  plan.set(x, kGpu1, Cause::kViewSourceHasBuffer);  // not a view
  EXPECT_THAT(fresh(1), HasSubstr("view of '(no tensor)' (id -1) in buffer type (none)"));
}

TEST_F(PlanVerifierTest, Pass1InputCauseWithoutTheInputFlag) {
  decoder_graph();
  run_passes(1);
  plan.set(h, kCpu, Cause::kInput);
  EXPECT_THAT(fresh(1), HasSubstr("1.inp: a graph input starts on the last backend: 'h' (id 0) is CPU [1.inp] without "
                                  "the INPUT flag"));
}

TEST_F(PlanVerifierTest, Pass1WeightCauseWithoutAWeightOrOnARefusedOp) {
  decoder_graph();
  run_passes(1);
  plan.set(h, kGpu1, Cause::kWeight);
  EXPECT_THAT(fresh(1), HasSubstr("1.wgt: a node runs where its deciding weight's memory can be used: 'h' (id 0) is "
                                  "GPU1 [1.wgt], deciding weight '(no tensor)' (id -1)"));
  plan.set(h, -1, Cause::kUnassigned);
  ASSERT_TRUE(Assigned(q, kGpu1, Cause::kWeight));
  PlanCorrupter::set_answer(plan, id(q), kGpu1, 0);
  EXPECT_THAT(fresh(1), HasSubstr("1.wgt: a node runs where its deciding weight's memory can be used: 'q'"));
}

TEST_F(PlanVerifierTest, Pass1OffloadCauseBrokenEachWay) {
  decoder_graph();
  run_passes(1);
  ASSERT_TRUE(Assigned(f, kCpu, Cause::kWeight));  // w2 is in host memory
  plan.set(f, kGpu0, Cause::kOpOffload);
  EXPECT_THAT(fresh(1), HasSubstr("1.off: only an op whose deciding weight is in host memory is offloaded, to a "
                                  "backend that supports it: 'f' (id 5) is GPU0 [1.off], deciding weight 'w2' (id 7), "
                                  "op_offload off"));
  opt.op_offload = true;
  PlanCorrupter::set_answer(plan, id(f), kGpu0, 0);
  EXPECT_THAT(fresh(1), HasSubstr("1.off: only an op"));
  PlanCorrupter::set_answer(plan, id(f), kGpu0, 1);
  EXPECT_EQ(fresh(1), "");               // an offload as pass 1 makes it
  plan.set(f, kCpu, Cause::kOpOffload);  // to the last backend
  EXPECT_THAT(fresh(1), HasSubstr("'f' (id 5) is CPU [1.off]"));
  plan.set(f, kCpu, Cause::kWeight);
  plan.set(q, kGpu0, Cause::kOpOffload);  // w1 is not host memory
  EXPECT_THAT(fresh(1), HasSubstr("'q' (id 1) is GPU0 [1.off], deciding weight 'w1' (id 8)"));
  plan.set(q, kGpu1, Cause::kWeight);
  plan.set(h, kGpu0, Cause::kOpOffload);  // no weight
  EXPECT_THAT(fresh(1), HasSubstr("'h' (id 0) is GPU0 [1.off], deciding weight '(no tensor)'"));
}

TEST_F(PlanVerifierTest, Pass1TensorWithMemoryLeftUnassigned) {
  decoder_graph();
  run_passes(1);
  plan.set(w1, -1, Cause::kUnassigned);
  EXPECT_THAT(fresh(1), HasSubstr("1.dst: every tensor with memory is assigned by it: 'w1' (id 8) (buffer type "
                                  "GPU1_buf) is no backend [unassigned]"));
}

TEST_F(PlanVerifierTest, Pass2AssignsWithAnotherCauseAViewOrARefusedBackend) {
  decoder_graph();
  EXPECT_THAT(changed_by(2, [&] { plan.set(p, kCpu, Cause::kWeight); }), HasSubstr("2.exp: pass 2 only assigns"));
}

TEST_F(PlanVerifierTest, Pass2AssignsAView) {
  decoder_graph();
  EXPECT_THAT(changed_by(2, [&] { plan.set(pr, kCpu, Cause::kExpanded); }),
              HasSubstr("2.exp: pass 2 only assigns unassigned computed nodes, to a backend that supports them: 'pr'"));
}

TEST_F(PlanVerifierTest, Pass2AssignsToARefusingBackend) {
  decoder_graph();
  EXPECT_THAT(changed_by(2,
                         [&] {
                           plan.set(p, kGpu1, Cause::kExpanded);
                           PlanCorrupter::set_answer(plan, id(p), kGpu1, 0);
                         }),
              HasSubstr("2.exp: pass 2 only assigns unassigned computed nodes, to a backend that supports them: 'p'"));
}

TEST_F(PlanVerifierTest, Pass3ChangesEachWayItMayNot) {
  decoder_graph();
  run_passes(2);
  run_pass(3);
  const std::vector<std::pair<const char*, std::function<void()>>> breaks = {
      {"an unassigned node with a cause other than 3.best", [&] { plan.set(pr, kCpu, Cause::kExpanded); }},
      {"a move down", [&] { plan.set(q, kCpu, Cause::kUpgraded); }},
      {"a move with another cause", [&] { plan.set(q, kGpu0, Cause::kExpanded); }},
      {"a view moved", [&] { plan.set(pr, kCpu, Cause::kMostSources); }},
      {"a move to a refusing backend",
       [&] {
         plan.set(out, kGpu1, Cause::kMostSources);
         PlanCorrupter::set_answer(plan, id(out), kGpu1, 0);
       }},
  };
  const SchedPlan& p3 = plan;
  std::vector<std::pair<int, Cause>> saved;
  for (int32_t i = 0; i < static_cast<int32_t>(p3.n_ids()); ++i) saved.emplace_back(p3.backend(i), p3.cause(i));
  for (const auto& [what, corrupt] : breaks) {
    SCOPED_TRACE(what);
    PlanVerifier v = verifier;  // the snapshot after pass 2
    corrupt();
    EXPECT_THAT(v.check(3, plan, graph, bs, opt), HasSubstr("3.best / 3.upg"));
    for (int32_t i = 0; i < static_cast<int32_t>(saved.size()); ++i) plan.set_id(i, saved[i].first, saved[i].second);
    PlanCorrupter::set_answer(plan, id(out), kGpu1, -1);
  }
}

TEST_F(PlanVerifierTest, Pass4AssignsWithACauseOfAnotherPass) {
  decoder_graph();
  EXPECT_THAT(changed_by(4,
                         [&] {
                           plan.set(extra("late"), -1, Cause::kUnassigned);
                           plan.set(pr, plan.backend_of(pr), Cause::kExpanded);
                         }),
              HasSubstr("pass 4 assigns with its own causes: 'pr'"));
}

TEST_F(PlanVerifierTest, Pass4MovesADestinationAndChangesItsCause) {
  Tensor* a = named(scale(ctx, tensor("x"), 2.0f), "a");
  Tensor* cache = tensor("cache");
  Tensor* c1 = named(cpy(ctx, a, cache), "c1");
  build(named(scale(ctx, c1, 1.0f), "out"));
  run_passes(3);
  run_pass(4);
  plan.set(cache, plan.backend_of(cache), Cause::kExpanded);
  plan.set(a, plan.backend_of(a) == kGpu0 ? kGpu1 : kGpu0, Cause::kViewOfSource);  // not a writer, not a view
  const std::string v = verifier.check(4, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("pass 4 moves an assigned tensor only to put the writers of a destination"));
}

TEST_F(PlanVerifierTest, Pass5AddsATensorThatIsNotACopy) {
  decoder_graph();
  EXPECT_THAT(changed_by(5, [&] { plan.set(extra("late"), -1, Cause::kUnassigned); }),
              HasSubstr("pass 5 adds only copies: 'late'"));
}

TEST_F(PlanVerifierTest, Pass4NodeOnABackendNeverAsked) {
  decoder_graph();
  run_passes(4);
  PlanCorrupter::set_answer(plan, id(out), plan.backend_of(out), -1);
  EXPECT_THAT(fresh(4), HasSubstr("every computed node runs on a backend that supports it: 'out' (id 6) is CPU"));
  EXPECT_THAT(fresh(4), HasSubstr("and supports_op was never asked"));
}

TEST_F(PlanVerifierTest, Pass5SplitListsBrokenEachWay) {
  decoder_graph();
  run_passes(5);
  const std::vector<Split> good = plan.splits;
  const std::vector<int> good_node_split = plan.node_split;
  const size_t n = graph.n_nodes();
  struct Break {
    const char* expect;
    std::function<void()> corrupt;
  };
  const std::vector<Break> breaks = {
      {"every node has a split: node_split has 6 entries for 7 nodes", [&] { plan.node_split.pop_back(); }},
      {"a graph with nodes has splits, an empty one none: 0 splits, 7 nodes", [&] { plan.splits.clear(); }},
      {"a split runs on a backend of the set: split 0 is on no backend", [&] { plan.splits[0].backend = -1; }},
      {"a split runs on a backend of the set: split 0 is on backend 3 (of 3)", [&] { plan.splits[0].backend = 3; }},
      {"split 0 covers nodes [0, 0)", [&] { plan.splits[0].i_end = 0; }},
      {"split 1 covers nodes", [&] { plan.splits[1].i_end = n + 1; }},
      {"the splits end at node", [&] { plan.splits.pop_back(); }},
      {"a split's input lists are parallel", [&] { plan.splits[0].input_ids.pop_back(); }},
      {"a split's input lists are parallel", [&] { plan.splits[0].input_copies.pop_back(); }},
      {"a split's input lists are parallel", [&] { plan.splits[0].input_sets.pop_back(); }},
      {"a split input is the tensor its id names: split 0 input 0: id -1", [&] { plan.splits[0].input_ids[0] = -1; }},
      {"a split input is the tensor its id names", [&] { plan.splits[0].input_ids[0] = 1000; }},
      {"a split input is the tensor its id names: split 0 input 0: id 0, tensor '(null)'",
       [&] {
         plan.splits[0].input_ids[0] = 0;
         plan.splits[0].inputs[0] = nullptr;
       }},
      {"each split input has a copy set", [&] { plan.splits[0].input_sets[0] = -1; }},
      {"each split input has a copy set", [&] { plan.splits[0].input_sets[0] = 1000; }},
  };
  ASSERT_EQ(plan.splits.size(), 2u);
  ASSERT_FALSE(plan.splits[0].inputs.empty());
  for (const Break& b : breaks) {
    SCOPED_TRACE(b.expect);
    b.corrupt();
    EXPECT_THAT(fresh(5), HasSubstr(b.expect));
    plan.splits = good;
    plan.node_split = good_node_split;
  }
  EXPECT_EQ(fresh(5), "");
}

TEST_F(PlanVerifierTest, Pass5InputTheSplitCanReadItself) {
  decoder_graph();
  run_passes(5);
  Split& sp = plan.splits[1];
  ASSERT_FALSE(sp.inputs.empty());
  const int32_t own = static_cast<int32_t>(sp.i_start);  // a node of the split, on its backend
  sp.input_ids[0] = own;
  sp.inputs[0] = plan.user_tensor(own);
  EXPECT_THAT(fresh(5), HasSubstr("a split input is a tensor the split's backend cannot read: split 1 on CPU copies"));
}

TEST_F(PlanVerifierTest, Pass5CopySetsBrokenEachWay) {
  decoder_graph();
  run_passes(5);
  const int32_t set = plan.splits[0].input_sets[0];
  const SchedPlan::CopySetKey good = plan.copy_set_key(set);
  const int32_t cid = plan.copy_id_in_set(set, 0);
  struct Break {
    const char* expect;
    std::function<void()> corrupt;
  };
  const std::vector<Break> breaks = {
      {"each split input's copies are its copies on the split's backend",
       [&] { PlanCorrupter::key(plan, set).backend = kGpu0; }},
      {"each split input's copies are its copies on the split's backend",
       [&] { PlanCorrupter::key(plan, set).graph_input = true; }},
      {"a copy set has one copy per slot", [&] { PlanCorrupter::copy_id(plan, set, 1) = cid; }},
      {"every copy exists, one per slot", [&] { PlanCorrupter::copy_id(plan, set, 0) = -1; }},
      {"every copy exists, one per slot", [&] { PlanCorrupter::copy_id(plan, set, 0) = 1000; }},
      {"every copy exists, one per slot", [&] { PlanCorrupter::copy_id(plan, set, 0) = 0; }},
      {"a copy is on its set's backend and copies its set's tensor",
       [&] { PlanCorrupter::origin(plan, cid) = good.id == 0 ? 1 : 0; }},
  };
  const std::vector<Split> good_splits = plan.splits;
  const std::vector<int> good_node_split = plan.node_split;
  for (const Break& b : breaks) {
    SCOPED_TRACE(b.expect);
    b.corrupt();
    EXPECT_THAT(fresh(5), HasSubstr(b.expect));
    PlanCorrupter::key(plan, set) = good;
    PlanCorrupter::copy_id(plan, set, 0) = cid;
    PlanCorrupter::copy_id(plan, set, 1) = -1;
    PlanCorrupter::origin(plan, cid) = good.id;
    plan.splits = good_splits;
    plan.node_split = good_node_split;
  }
  EXPECT_EQ(fresh(5), "");
}

TEST_F(PlanVerifierTest, Pass5CopySetOfAnOutOfRangeTensorOrBackend) {
  decoder_graph();
  run_passes(5);
  // a set no split reads (the splits check the sets they read first)
  const int32_t set = plan.add_copy_set(id(h), kCpu, 1);
  PlanCorrupter::key(plan, set).id = -1;
  EXPECT_THAT(fresh(5),
              HasSubstr("a copy set copies a tensor of the plan to a backend of the set: set 2: id -1 to CPU"));
  PlanCorrupter::key(plan, set).id = 1000;
  EXPECT_THAT(fresh(5), HasSubstr("set 2: id 1000 to CPU"));
  PlanCorrupter::key(plan, set).id = 0;
  PlanCorrupter::key(plan, set).backend = -1;
  EXPECT_THAT(fresh(5), HasSubstr("set 2: id 0 to no backend"));
  PlanCorrupter::key(plan, set).backend = 3;
  EXPECT_THAT(fresh(5), HasSubstr("set 2: id 0 to backend 3 (of 3)"));
}

TEST_F(PlanVerifierTest, Pass5GraphInputsBrokenEachWay) {
  opt.n_copies = static_cast<int>(kParallelCopies);
  opt.slot = 2;
  decoder_graph();
  run_passes(5);
  ASSERT_EQ(plan.graph_inputs.size(), 1u);
  const int32_t xid = plan.graph_input_ids[0];
  const int32_t set = plan.copy_set(xid, plan.backend(xid));
  ASSERT_GE(set, 0);
  struct Break {
    std::string expect;
    std::function<void()> corrupt;
  };
  const std::vector<Break> breaks = {
      {"graph inputs get their own copies only when pipelined", [&] { plan.graph_input_ids.pop_back(); }},
      {"a graph input with its own copies is a leaf flagged INPUT: graph input 0: '(no tensor)' (id -1)",
       [&] { plan.graph_input_ids[0] = -1; }},
      {"a graph input with its own copies is a leaf flagged INPUT", [&] { plan.graph_input_ids[0] = 1000; }},
      {"a graph input with its own copies is a leaf flagged INPUT", [&] { plan.graph_inputs[0] = h; }},
      {"a graph input with its own copies is a leaf flagged INPUT: graph input 0: 'x'",
       [&] { PlanCorrupter::clear_fact(plan, xid, SchedPlan::kInputFlag); }},
      {"a graph input with its own copies is a leaf flagged INPUT: graph input 0: 'x'",
       [&] { PlanCorrupter::clear_fact(plan, xid, SchedPlan::kNoneOp); }},
      // (slot 0 of a graph input's set is x itself, not a copy of it: the set check sees that first)
      {"a copy is on its set's backend and copies its set's tensor: copy 'x'",
       [&] { PlanCorrupter::key(plan, set).graph_input = false; }},
      {"a graph input's slot 0 is the input itself: set " + std::to_string(set) + " (of 'x'",
       [&] {
         PlanCorrupter::copy_id(plan, set, 0) = plan.copy_id_in_set(set, 1);
         PlanCorrupter::copy(plan, set, 0) = plan.copy_in_set(set, 1);
       }},
  };
  const PlanVerifier fresh_verifier;
  for (const Break& b : breaks) {
    SCOPED_TRACE(b.expect);
    SchedPlan::CopySetKey key = plan.copy_set_key(set);
    const int32_t slot0_id = plan.copy_id_in_set(set, 0);
    Tensor* slot0 = plan.copy_in_set(set, 0);
    const uint8_t facts = PlanCorrupter::facts(plan, xid);
    const auto inputs = plan.graph_inputs;
    const auto ids = plan.graph_input_ids;
    b.corrupt();
    std::string v = PlanVerifier(fresh_verifier).check(5, plan, graph, bs, opt);
    EXPECT_THAT(v, HasSubstr(b.expect));
    PlanCorrupter::key(plan, set) = key;
    PlanCorrupter::copy_id(plan, set, 0) = slot0_id;
    PlanCorrupter::copy(plan, set, 0) = slot0;
    PlanCorrupter::facts(plan, xid) = facts;
    plan.graph_inputs = inputs;
    plan.graph_input_ids = ids;
  }
}

TEST_F(PlanVerifierTest, Pass5GraphInputWithItsOwnCopiesWhenNotPipelined) {
  decoder_graph();
  run_passes(5);
  ASSERT_TRUE(plan.graph_inputs.empty());
  plan.graph_inputs.push_back(x);
  plan.graph_input_ids.push_back(id(x));
  EXPECT_THAT(fresh(5), HasSubstr("graph inputs get their own copies only when pipelined: 1 graph inputs, 1 ids, 1 "
                                  "copies"));
}

TEST_F(PlanVerifierTest, Pass5RewritesBrokenEachWay) {
  decoder_graph();
  run_passes(5);
  ASSERT_FALSE(plan.rewrites.empty());
  const std::vector<SchedPlan::Rewrite> good = plan.rewrites;
  const SchedPlan::Rewrite w = good.back();
  SchedPlan::Rewrite& last = plan.rewrites.back();
  struct Break {
    const char* expect;
    std::function<void()> corrupt;
  };
  const std::vector<Break> breaks = {
      {"a rewrite names a source of a node", [&] { last.node_index = graph.n_nodes(); }},
      {"a rewrite names a source of a node", [&] { last.node_index = w.node_index == 0 ? 1 : 0; }},
      {"a rewrite names a source of a node", [&] { last.src = -1; }},
      {"a rewrite names a source of a node", [&] { last.src = kMaxSrc - 1; }},
      {"a rewrite keeps the user's source to restore", [&] { last.original = out; }},
      {"a source is rewritten to a copy of itself", [&] { last.replacement = -1; }},
      {"a source is rewritten to a copy of itself", [&] { last.replacement = 1000; }},
      {"a source is rewritten to a copy of itself", [&] { last.replacement = 0; }},
      {"a source is rewritten once", [&] { plan.rewrites.push_back(w); }},
  };
  for (const Break& b : breaks) {
    SCOPED_TRACE(b.expect);
    b.corrupt();
    EXPECT_THAT(fresh(5), HasSubstr(b.expect));
    plan.rewrites = good;
  }
  EXPECT_EQ(fresh(5), "");
}

TEST_F(PlanVerifierTest, Pass5RewrittenToACopyTheNodesBackendCannotRead) {
  opt.n_copies = static_cast<int>(kParallelCopies);
  opt.slot = 2;
  decoder_graph();
  run_passes(5);
  // h (on GPU1) reads x through GPU1's copy; point it at x's own per-slot copy on the CPU instead.
  SchedPlan::Rewrite* hx = nullptr;
  for (SchedPlan::Rewrite& w : plan.rewrites) {
    if (w.node == h) hx = &w;
  }
  ASSERT_NE(hx, nullptr);
  const int32_t own = plan.copy_id_in_set(plan.copy_set(id(x), plan.backend_of(x)), opt.slot);
  hx->replacement = own;
  h->src[hx->src] = plan.user_tensor(own);
  EXPECT_THAT(fresh(5), HasSubstr("a node reads a copy its backend can read: node 'h' (id 0) (GPU1) reads"));
}

// ---- split_graph aborts where the checks are compiled in ----

TEST_F(PlanVerifierTest, SplitGraphAbortsNamingTheInvariantAndTheTensor) {
  if constexpr (!kCheckInvariants) GTEST_SKIP() << "built without TESSERA_CHECK_INVARIANTS";
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  decoder_graph();
  // An assignment pass 1 keeps (it only skips pins) with the cause of a pass that has not run.
  plan.set(h, kGpu0, Cause::kFallback);
  plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  EXPECT_DEATH((void)split_graph(plan, graph, bs, opt),
               "scheduler plan verifier: after pass 1: a cause comes from a pass that has run: 'h'");
}

TEST_F(PlanVerifierTest, SplitGraphRunsTheVerifierAfterEveryPass) {
  if constexpr (!kCheckInvariants) GTEST_SKIP() << "built without TESSERA_CHECK_INVARIANTS";
  decoder_graph();
  plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  ASSERT_TRUE(split_graph(plan, graph, bs, opt).ok());  // (would abort on a violation)
}

}  // namespace
}  // namespace tessera::sched::testing
