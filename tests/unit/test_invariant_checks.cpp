// The invariant checks of debug and sanitizer builds (TS_DEBUG_ASSERT, TESSERA_CHECK_INVARIANTS): the scheduler's plan
// verifier after each pass, and the simulator's clock, queue and memory checks. Each check is shown to fire on a plan
// or simulator state corrupted by hand, naming the invariant and the tensor (device, command; in the simulator the
// seed). The verifier's own answers are checked in every build; that split_graph and the simulator abort on a
// violation only where the checks are compiled in (elsewhere those tests are skipped).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "sched_pass_fixture.h"
#include "sim_fixture.h"
#include "sim_impl.h"
#include "tessera/sim/simulator.h"

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
  plan.set(w1, kCpu, Cause::kDst);  // w1 is in GPU1's memory
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
  plan.set(h, kGpu0, Cause::kUser);
  run_passes(2);
  pass3_upgrade(plan, graph, bs);
  plan.set(h, kGpu1, Cause::kUpgrade);
  const std::string v = verifier.check(3, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("a pin never moves"));
  EXPECT_THAT(v, HasSubstr("'h'"));
  EXPECT_THAT(v, HasSubstr("GPU0 [user]"));
}

TEST_F(PlanVerifierTest, Pass2ChangesAnAssignedNode) {
  decoder_graph();
  run_passes(1);
  pass2_expand(plan, graph, bs);
  plan.set(f, kGpu1, Cause::kExpand);  // pass 1 put it on the CPU (its weight)
  const std::string v = verifier.check(2, plan, graph, bs, opt);
  EXPECT_THAT(v, HasSubstr("2.exp: pass 2 only assigns unassigned computed nodes"));
  EXPECT_THAT(v, HasSubstr("'f'"));
}

TEST_F(PlanVerifierTest, Pass3UpgradesAcrossComputeBufferTypes) {
  decoder_graph();
  run_passes(2);
  pass3_upgrade(plan, graph, bs);
  ASSERT_EQ(plan.backend_of(p), kCpu);
  plan.set(p, kGpu0, Cause::kUpgrade);  // GPU0 computes in another buffer type than the CPU
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
  plan.set(p, kGpu1, Cause::kExpand);  // GPU1 refuses SOFT_MAX
  const std::string v = fresh(4);
  EXPECT_THAT(v, HasSubstr("every computed node runs on a backend that supports it"));
  EXPECT_THAT(v, HasSubstr("'p'"));
}

TEST_F(PlanVerifierTest, Pass4ViewAwayFromItsSource) {
  decoder_graph();
  run_passes(4);
  ASSERT_EQ(plan.cause_of(r), Cause::kViewOfSrc);
  plan.set(r, kCpu, Cause::kViewOfSrc);  // q is on GPU1
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
  plan.set(c1, plan.backend_of(cache) == kGpu0 ? kGpu1 : kGpu0, Cause::kViewOfSrc);
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
  plan.set(out, kGpu0, Cause::kExpand);
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
  plan.set(w2, kGpu0, Cause::kDst);
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

namespace tessera::sim::testing {
namespace {

constexpr uint64_t kSeed = 7;

// One asynchronous simulated GPU, memory-backed, with a vector in its memory whose async set has been applied: the
// simulator's clock and queue have moved.
struct SimRig {
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<Backend> b;
  std::unique_ptr<Vectors> v;
  SimDevice* dev = nullptr;
  explicit SimRig(DeviceConfig cfg = gpu("gpu0")) {
    SimOptions o;
    o.seed = kSeed;
    sim = make_sim(topology({std::move(cfg)}), o);
    b = sim->device(0)->init_backend({}).value();
    dev = dynamic_cast<SimDevice*>(sim->device(0));
    v = std::make_unique<Vectors>(*sim->device(0)->buffer_type(), std::vector<std::string>{"v"});
    const std::vector<float> ones(64, 1.0f);
    b->set_tensor_async(*(*v)[0], ones.data(), 0, ones.size() * sizeof(float));
    EXPECT_TRUE(b->synchronize().ok());
  }
  Simulator::Impl* impl() const { return sim->impl(); }
};

#define SKIP_WITHOUT_CHECKS()                                                                      \
  do {                                                                                             \
    if constexpr (!kCheckInvariants) GTEST_SKIP() << "built without TESSERA_CHECK_INVARIANTS";    \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                                                \
  } while (0)

TEST(SimInvariants, NormalRunKeepsTheClockAndQueueInOrder) {
  SimRig rig;
  EXPECT_GT(rig.impl()->now, 0.0);
  EXPECT_TRUE(rig.impl()->pending.empty());
  if constexpr (kCheckInvariants) {
    EXPECT_GT(rig.impl()->applied_until, 0.0);
  }
}

TEST(SimInvariants, HostTimeGoingBack) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        rig.impl()->now = 0;  // before the end of the set already applied
        std::vector<float> out(64);
        (void)tensor_get(*(*rig.v)[0], out.data(), 0, out.size() * sizeof(float));
      },
      "simulator clock: host time 0 us went back before .* us, the end of a command already applied \\(seed 7\\)");
}

TEST(SimInvariants, PendingCommandsAppliedOutOfEndTimeOrder) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        auto* s = rig.impl();
        s->pending.push({s->applied_until / 2, s->seq++, [] {}, s->hz.current_command()});
        s->advance_host(s->now);
      },
      "simulator queue: gpu0/s0 #[0-9]+ set_async v .* is applied after a command ending at .* us: pending commands "
      "are applied out of end-time order \\(seed 7\\)");
}

TEST(SimInvariants, CommandEndingBeforeItsSubmission) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        auto* s = rig.impl();
        s->push(s->now / 2, [] {});
      },
      "simulator clock: gpu0/s0 #[0-9]+ set_async v .* ends at .* us, before the host submitted it at .* us "
      "\\(seed 7\\)");
}

// A cost model giving NaN: the stream's end time is not after its last one.
TEST(SimInvariants, StreamEndGoingBack) {
  SKIP_WITHOUT_CHECKS();
  DeviceConfig cfg = gpu("gpu0");
  cfg.cost.launch_overhead_us = std::numeric_limits<double>::quiet_NaN();
  SimRig rig(cfg);
  OneOp op(*rig.sim->device(0)->buffer_type(), [](Context& c) {
    Tensor* a = c.new_tensor_1d(Type::kF32, 64);
    set_name(*a, "a");
    Tensor* y = scale(c, a, 2.0f);
    set_name(*y, "y");
    return y;
  });
  EXPECT_DEATH((void)rig.b->graph_compute_async(op.graph),
               "simulator clock: the last end of stream gpu0 went back from .* us to nan us in gpu0/s0 #[0-9]+ SCALE "
               "y \\(seed 7\\)");
}

TEST(SimInvariants, MemoryUsedOverCapacity) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        rig.dev->stats.memory_used = rig.dev->config().memory + 1;
        (void)rig.dev->reserve_memory(0);
      },
      "simulated memory: device gpu0 uses 1073741825 bytes of its 1073741824 \\(seed 7\\)");
}

TEST(SimInvariants, MemoryReleasedThatWasNeverReserved) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(rig.dev->release_memory(rig.dev->stats.memory_used + 1),
               "simulated memory: device gpu0 releases [0-9]+ bytes, more than the [0-9]+ it uses \\(seed 7\\)");
}

}  // namespace
}  // namespace tessera::sim::testing
