// The scheduler's plan verifier (src/sched/verify.cpp, TS_DEBUG_ASSERT, TESSERA_CHECK_INVARIANTS): it runs after each
// pass in debug and sanitizer builds. Each check is shown to fire on a plan corrupted by hand, naming the invariant and
// the tensor. The verifier's own answers are checked in every build; that split_graph aborts on a violation only where
// the checks are compiled in (elsewhere that test is skipped and says why).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "unit/sched/sched_pass_fixture.h"

using ::testing::HasSubstr;

namespace tessera::sched::testing {
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
      ASSERT_EQ(verifier.check(pass, plan, graph, bs, opt), "") << "pass " << pass;
    }
  }
  void run_passes(int to) { run_passes(1, to); }
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
