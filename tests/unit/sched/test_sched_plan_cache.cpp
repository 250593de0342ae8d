// The plan cache (docs/scheduler.md, 'Plan cache'): a program that alternates graphs after one reserve keeps a plan
// per graph, so alternating two graphs ten times costs two full plans, in the reserved memory; the least recently used
// plan leaves a full cache; a weight of a cached graph moved to another buffer, a pin, and compute buffers that grew
// each make the cached plan go. Every evaluation is compared with the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "support/sched_doubles.h"
#include "unit/sched/gpu_cpu_rig.h"
#include "unit/sched/sched_net.h"

using namespace tessera;
using namespace tessera::testnet;
using ::testing::HasSubstr;

namespace {

// GPU0 refuses ROPE and SOFT_MAX: every layer splits several times (copies both ways).

// A stack of `layers` layers over `tokens` tokens (a prompt batch: several; a decode step: one), weights of even
// layers on the CPU, odd ones on GPU0.
Build stack(Rig& rig, int layers, int64_t tokens) {
  return [&rig, layers, tokens](Net& n) { return layer_stack(n, {nullptr, rig.gbuf()}, layers, tokens); };
}

SchedulerParams params(bool parallel, int plan_cache = 4) {
  SchedulerParams p = sched_params(parallel);
  p.plan_cache = plan_cache;
  return p;
}

// A net built and filled by `build` (weights seed 3).
std::unique_ptr<Net> make_net(const Build& build) {
  auto n = std::make_unique<Net>();
  n->finish(build(*n), 3);
  return n;
}

// Allocates, sets the inputs (seed), computes and compares with the CPU; returns whether the plan was reused.
bool evaluate(Scheduler& s, Net& n, const Build& build, unsigned seed) {
  EXPECT_TRUE(s.alloc_graph(n.graph).ok()) << s.last_error();
  const bool reused = s.plan_reuse().reused;
  expect_readable(s, n.graph);
  n.set_inputs(seed);
  EXPECT_EQ(s.graph_compute(n.graph), ComputeStatus::kSuccess) << s.last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 3, seed)) << "seed " << seed;
  return reused;
}

class SchedPlanCache : public ::testing::TestWithParam<bool> {};  // parameter: parallel

}  // namespace

// A prompt batch and a decode step, ten times each in turn after one reserve with the worst case (a larger batch):
// two full plans (each graph's first allocation), eighteen reuses, the compute memory of the reserve, no re-plan.
TEST_P(SchedPlanCache, AlternatingTwoGraphsCostsTwoPlans) {
  Rig2 rig;
  const Build worst = stack(rig, 3, 8), prompt = stack(rig, 3, 4), decode = stack(rig, 3, 1);
  auto w = make_net(worst);
  auto a = make_net(prompt);
  auto b = make_net(decode);
  auto s = rig.sched(params(GetParam()));
  ASSERT_TRUE(s->reserve(w->graph).ok()) << s->last_error();
  const size_t reserved0 = s->buffer_size(0), reserved1 = s->buffer_size(1);
  for (unsigned round = 0; round < 10; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    EXPECT_EQ(evaluate(*s, *a, prompt, 10 + round), round > 0) << s->plan_reuse().why_not;
    EXPECT_EQ(evaluate(*s, *b, decode, 50 + round), round > 0) << s->plan_reuse().why_not;
  }
  const PlanReuse pr = s->plan_reuse();
  EXPECT_EQ(pr.full_plans, 2);
  EXPECT_EQ(pr.reuses, 18);
  EXPECT_EQ(pr.cached, 2);
  EXPECT_EQ(s->replan_count(), 0) << "both graphs fit the reserve's plan";
  EXPECT_EQ(s->buffer_size(0), reserved0);
  EXPECT_EQ(s->buffer_size(1), reserved1);
  // the graph allocated last is the current one; the other's sources and placements are the user's again
  for (const Tensor* t : a->graph.nodes()) {
    EXPECT_EQ(t->buffer, nullptr) << t->name << " keeps a placement in a parked graph";
    for (const Tensor* src : t->src) {
      if (src != nullptr) {
        EXPECT_EQ(std::string(src->name).find('#'), std::string::npos) << t->name;
      }
    }
  }
}

// Cache of 2: a third graph evicts the least recently used plan; the graph used since stays.
TEST_P(SchedPlanCache, AThirdGraphEvictsTheLeastRecentlyUsed) {
  Rig2 rig;
  const Build b1 = stack(rig, 2, 1), b2 = stack(rig, 2, 2), b3 = stack(rig, 2, 3);
  auto g1 = make_net(b1);
  auto g2 = make_net(b2);
  auto g3 = make_net(b3);
  auto s = rig.sched(params(GetParam(), 2));
  ASSERT_TRUE(s->reserve(g3->graph).ok());  // the worst case: no graph outgrows it
  EXPECT_FALSE(evaluate(*s, *g1, b1, 1));
  EXPECT_FALSE(evaluate(*s, *g2, b2, 2));
  EXPECT_TRUE(evaluate(*s, *g1, b1, 3)) << s->plan_reuse().why_not;  // g1 used after g2: g2 is the older one
  EXPECT_FALSE(evaluate(*s, *g3, b3, 4));                            // evicts g2
  EXPECT_EQ(s->plan_reuse().cached, 2);
  EXPECT_TRUE(evaluate(*s, *g1, b1, 5)) << s->plan_reuse().why_not;
  EXPECT_FALSE(evaluate(*s, *g2, b2, 6));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr("was evicted (least recently used of 2)"));
  EXPECT_EQ(s->plan_reuse().full_plans, 4);
  EXPECT_EQ(s->plan_reuse().reuses, 2);
}

// The default cache (4 plans): four graphs in turn keep their plans; a fifth evicts the first (least recently used),
// the other three are still reused.
TEST_P(SchedPlanCache, AFullCacheEvictsTheLeastRecentlyUsed) {
  Rig2 rig;
  std::vector<Build> builds;
  std::vector<std::unique_ptr<Net>> nets;
  for (int64_t tokens = 1; tokens <= 5; ++tokens) builds.push_back(stack(rig, 2, tokens));
  for (const Build& b : builds) nets.push_back(make_net(b));
  auto s = rig.sched(params(GetParam()));
  ASSERT_TRUE(s->reserve(nets[4]->graph).ok());  // the worst case: no graph outgrows it
  for (unsigned round = 0; round < 2; ++round) {
    for (size_t i = 0; i < 4; ++i) {
      EXPECT_EQ(evaluate(*s, *nets[i], builds[i], 10 * round + static_cast<unsigned>(i)), round == 1)
          << "graph " << i << ": " << s->plan_reuse().why_not;
    }
  }
  EXPECT_EQ(s->plan_reuse().cached, 4);
  EXPECT_FALSE(evaluate(*s, *nets[4], builds[4], 40));
  EXPECT_EQ(s->plan_reuse().cached, 4);
  for (size_t i = 1; i < 4; ++i) EXPECT_TRUE(evaluate(*s, *nets[i], builds[i], 50)) << "graph " << i;
  EXPECT_FALSE(evaluate(*s, *nets[0], builds[0], 60));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr("was evicted (least recently used of 4)"));
  EXPECT_EQ(s->plan_reuse().full_plans, 6);
}

// A weight of a parked graph moved to GPU0's memory: its plan is not taken from the cache (the buffer is structure),
// the node follows its weight, and the other graph's plan stays.
TEST_P(SchedPlanCache, AWeightMovedWhileParkedTakesTheFullPath) {
  Rig2 rig;
  const Build ba = stack(rig, 2, 4), bb = stack(rig, 2, 1);
  auto a = make_net(ba);
  auto b = make_net(bb);
  auto s = rig.sched(params(GetParam()));
  EXPECT_FALSE(evaluate(*s, *a, ba, 1));
  EXPECT_FALSE(evaluate(*s, *b, bb, 2));
  Tensor* w = nullptr;
  for (Tensor* t : a->graph.leafs()) {
    if (std::string(t->name) == "blk.0.w1") w = t;
  }
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(s->get_tensor_backend(w), nullptr) << "a parked graph's tensors are not the current plan's";
  auto buf = std::move(rig.gdev.buft().alloc_buffer(nbytes(*w) + 64)).value();
  buf->set_usage(BufferUsage::kWeights);
  const std::vector<float> values = tensor_to_f32(*w).value();
  w->buffer = nullptr;
  w->data = nullptr;
  ASSERT_TRUE(TensorAllocator(*buf).alloc(*w).ok());
  ASSERT_TRUE(tensor_from_f32(*w, values).ok());
  EXPECT_FALSE(evaluate(*s, *a, ba, 3));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr("leaf 'blk.0.w1' (leaf "));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr(": buffer"));
  for (const Tensor* t : a->graph.nodes()) {
    if (std::string(t->name) == "q.0") {
      EXPECT_EQ(s->explain(t).backend, 0) << "q.0 follows its weight to GPU0";
    }
  }
  EXPECT_TRUE(evaluate(*s, *b, bb, 4)) << s->plan_reuse().why_not;
  s.reset();  // before the buffer goes
  a.reset();
}

// A pin set while a graph is parked: its plan is not taken (pins are structure).
TEST_P(SchedPlanCache, APinSetWhileParkedTakesTheFullPath) {
  Rig2 rig;
  const Build ba = stack(rig, 2, 4), bb = stack(rig, 2, 1);
  auto a = make_net(ba);
  auto b = make_net(bb);
  auto s = rig.sched(params(GetParam()));
  EXPECT_FALSE(evaluate(*s, *a, ba, 1));
  EXPECT_FALSE(evaluate(*s, *b, bb, 2));
  ASSERT_TRUE(s->set_tensor_backend(a->graph.node(0), s->backend(1)).ok());
  EXPECT_FALSE(evaluate(*s, *a, ba, 3));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr("a pin changed"));
  EXPECT_EQ(s->explain(a->graph.node(0)).cause, Cause::kPinned);
}

// Re-plans only when a graph outgrows the reserved memory: a larger batch than the reserve's grows the compute
// buffers, which replaces them, so the cached plans (their addresses) are dropped and say why.
TEST_P(SchedPlanCache, GrownBuffersDropTheCachedPlans) {
  Rig2 rig;
  const Build small = stack(rig, 2, 2), one = stack(rig, 2, 1), big = stack(rig, 2, 16);
  auto a = make_net(small);
  auto b = make_net(one);
  auto c = make_net(big);
  auto s = rig.sched(params(GetParam()));
  ASSERT_TRUE(s->reserve(a->graph).ok());
  const size_t reserved = s->buffer_size(0) + s->buffer_size(1);
  EXPECT_FALSE(evaluate(*s, *a, small, 1));
  EXPECT_FALSE(evaluate(*s, *b, one, 2));
  EXPECT_TRUE(evaluate(*s, *a, small, 3));
  EXPECT_EQ(s->buffer_size(0) + s->buffer_size(1), reserved);
  EXPECT_FALSE(evaluate(*s, *c, big, 4));
  EXPECT_GT(s->buffer_size(0) + s->buffer_size(1), reserved) << "the larger batch outgrew the reserve";
  EXPECT_GE(s->replan_count(), 1);
  EXPECT_FALSE(evaluate(*s, *a, small, 5));
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr("the compute buffers grew"));
  EXPECT_TRUE(evaluate(*s, *c, big, 6)) << "the plan made after the growth is kept";
}

INSTANTIATE_TEST_SUITE_P(SchedPlanCache, SchedPlanCache, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "parallel" : "serial"; });

// plan_cache outside 1 to kMaxCachedPlans is refused, with the value.
TEST(SchedPlanCacheParams, OutOfRangeIsRefused) {
  Rig2 rig;
  for (int n : {0, kMaxCachedPlans + 1}) {
    SchedulerParams p;
    p.plan_cache = n;
    auto s = Scheduler::create({rig.gpu.get(), rig.cpu.get()}, p);
    ASSERT_FALSE(s.ok());
    EXPECT_THAT(s.status().message(), HasSubstr("plan_cache " + std::to_string(n) + " is outside 1 to 16"));
  }
}
