// Why pass 5 started each split (Scheduler::SplitView::reason, docs/scheduler.md pass 5): the first split, a change
// of backend, a weight to copy into a split that already has inputs, the max_split_inputs limit. The graphs are those
// of test_sched_pass5.cpp, whose split boundaries are worked out there node by node.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "support/sched_doubles.h"
#include "unit/sched/gpu_cpu_rig.h"
#include "unit/sched/sched_net.h"

using namespace tessera;
using namespace tessera::testnet;

namespace {

std::vector<SplitReason> reasons(const Scheduler& s) {
  std::vector<SplitReason> out;
  for (const auto& sp : s.splits()) out.push_back(sp.reason);
  return out;
}

// x -> n1 = W_gpu x -> n2 = W_cpu n1 (offloaded) -> n3 = W_cpu2 n2 (offloaded) -> out: all on the GPU; n2 and n3
// each read a host weight while the split before has inputs.
Build chain_of_weights(BufferType* g) {
  return [g](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    Tensor* x = n.input("x", 16, 4);
    Tensor* n1 = Net::named(mul_mat(c, n.weight("wg", 16, 16, g), x), "n1");
    Tensor* n2 = Net::named(mul_mat(c, n.weight("wc", 16, 16, nullptr), n1), "n2");
    Tensor* n3 = Net::named(mul_mat(c, n.weight("wc2", 16, 16, nullptr), n2), "n3");
    return {n.output(scale(c, n3, 0.5f), "out")};
  };
}

// 11 softmaxes on the CPU (refused by the GPU), then a GPU chain bringing 1 + 8 inputs, then a flash attention that
// brings 3 more: with max_split_inputs 10 it starts a third split.
Build nearly_full(BufferType* g) {
  return [g](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    std::vector<Tensor*> roots, cs;
    for (int l = 0; l < 11; ++l) {
      cs.push_back(Net::named(soft_max(c, n.input("in." + std::to_string(l), 16, 4)), "c." + std::to_string(l)));
      roots.push_back(cs.back());
    }
    Tensor* h = Net::named(mul_mat(c, n.weight("wg", 16, 16, g), n.input("x", 16, 4)), "h0");
    for (int l = 0; l < 8; l += 2) h = Net::named(add(c, h, mul(c, cs[l], cs[l + 1])), "h." + std::to_string(l));
    Tensor* fa = Net::named(flash_attn_ext(c, cs[8], cs[9], cs[10], nullptr, 0.5f), "fa");
    roots.push_back(n.output(add(c, h, reshape_3d(c, fa, 16, 4, 1)), "out"));
    return roots;
  };
}

using ::testing::ElementsAre;

}  // namespace

TEST(SchedSplitReason, WeightCopiesStartSplitsOnTheSameBackend) {
  for (const bool parallel : {false, true}) {
    Rig rig;
    rig.gdev.offload = [](const Tensor&) { return true; };
    const Build build = chain_of_weights(&rig.gdev.buft());
    Net n;
    n.finish(build(n), 5);
    auto s = rig.sched(sched_params(parallel));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    ASSERT_EQ(s->n_splits(), 3) << s->report();
    EXPECT_THAT(reasons(*s), ElementsAre(SplitReason::kFirst, SplitReason::kWeightCopy, SplitReason::kWeightCopy))
        << s->report();
  }
}

TEST(SchedSplitReason, BackendChangeAndInputLimit) {
  Rig rig({Op::kSoftMax});
  const Build build = nearly_full(&rig.gdev.buft());
  Net n;
  n.finish(build(n), 4);
  auto s = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  ASSERT_EQ(s->n_splits(), 3) << s->report();
  EXPECT_THAT(reasons(*s), ElementsAre(SplitReason::kFirst, SplitReason::kBackend, SplitReason::kInputLimit))
      << s->report();
  // With the default limit (30) the twelve inputs fit in one GPU split.
  auto wide = rig.sched(sched_params(false));
  ASSERT_TRUE(wide->alloc_graph(n.graph).ok()) << wide->last_error();
  EXPECT_THAT(reasons(*wide), ElementsAre(SplitReason::kFirst, SplitReason::kBackend)) << wide->report();
}

// The plan recycles split records: a scheduler that cut a weight split before cuts a fresh graph's first split with
// reason kFirst, not the recycled record's reason.
TEST(SchedSplitReason, RecycledSplitsGetTheirOwnReason) {
  Rig rig({Op::kSoftMax});
  rig.gdev.offload = [](const Tensor&) { return true; };
  const Build chain = chain_of_weights(&rig.gdev.buft());
  const Build full = nearly_full(&rig.gdev.buft());
  Net a, b;
  a.finish(chain(a), 5);
  b.finish(full(b), 4);
  auto s = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(s->alloc_graph(a.graph).ok()) << s->last_error();
  ASSERT_TRUE(s->alloc_graph(b.graph).ok()) << s->last_error();
  EXPECT_THAT(reasons(*s), ElementsAre(SplitReason::kFirst, SplitReason::kBackend, SplitReason::kInputLimit));
  ASSERT_TRUE(s->alloc_graph(a.graph).ok()) << s->last_error();
  EXPECT_THAT(reasons(*s), ElementsAre(SplitReason::kFirst, SplitReason::kWeightCopy, SplitReason::kWeightCopy));
}

TEST(SchedSplitReason, NamesAndDescriptions) {
  EXPECT_STREQ(split_reason_name(SplitReason::kFirst), "first");
  EXPECT_STREQ(split_reason_name(SplitReason::kBackend), "backend");
  EXPECT_STREQ(split_reason_name(SplitReason::kWeightCopy), "weight");
  EXPECT_STREQ(split_reason_name(SplitReason::kInputLimit), "inputs");
  EXPECT_THAT(cause_description(Cause::kOpOffload), ::testing::HasSubstr("op offload"));
  for (int c = 0; c < static_cast<int>(Cause::kCount); ++c) {
    EXPECT_STRNE(cause_description(static_cast<Cause>(c)), "?") << cause_name(static_cast<Cause>(c));
  }
}
