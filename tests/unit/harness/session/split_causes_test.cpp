// The causes of a plan's splits and the op rules explain names (tessera/harness/session/split_causes.h), on the tiny
// model whose splits are worked out by hand in tests/cli/split_causes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/builtin.h"
#include "tessera/ops.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::ElementsAre;

namespace {

std::unique_ptr<Session> planned(const std::string& topology, const std::function<void(SessionConfig&)>& edit = {}) {
  SessionConfig c;
  auto t = topology_preset(topology);
  EXPECT_TRUE(t.ok()) << t.status().message();
  c.topology = std::move(t).value();
  auto m = models::preset("tiny");
  EXPECT_TRUE(m.ok());
  c.model = m.value();
  c.sim.mode = sim::MemoryMode::kMetadata;
  if (edit) edit(c);
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return nullptr;
  EXPECT_TRUE(s.value()->plan().ok());
  return std::move(s).value();
}

}  // namespace

// gpu0 refuses FLASH_ATTN_EXT: the CPU (token_embd), gpu0, the CPU (fattn-0), gpu0, the CPU (fattn-1), gpu0.
TEST(SplitCauses, UnsupportedOpOnBothSidesOfEachAttention) {
  auto s = planned("gpu-no-fa");
  ASSERT_NE(s, nullptr);
  EXPECT_THAT(split_causes(s->sched(), s->graph()),
              ElementsAre(SplitCause::kStart, SplitCause::kWeights, SplitCause::kUnsupported, SplitCause::kUnsupported,
                          SplitCause::kUnsupported, SplitCause::kUnsupported));
  const SplitCauseSummary sum = summarize_split_causes(*s, &builtin_registry());
  ASSERT_EQ(sum.groups.size(), 3u);
  EXPECT_EQ(sum.groups[0].cause, SplitCause::kUnsupported);
  EXPECT_EQ(sum.groups[0].splits, 4);
  EXPECT_EQ(sum.groups[0].option, "-fa off");
  EXPECT_EQ(sum.groups[0].splits_with_option, 2);  // attention as MUL_MAT / SOFT_MAX / MUL_MAT runs on gpu0
  EXPECT_THAT(sum.groups[0].top_ops,
              ElementsAre(std::pair<std::string, int>{"FLASH_ATTN_EXT", 2}, std::pair<std::string, int>{"MUL_MAT", 2}));
  EXPECT_EQ(sum.groups[1].cause, SplitCause::kStart);  // ties in enum order
  EXPECT_EQ(sum.groups[2].cause, SplitCause::kWeights);
  EXPECT_TRUE(sum.groups[2].option.empty()) << "every layer is on the GPU already";
  EXPECT_FALSE(sum.groups[2].no_option.empty());
}

// Op offload of both CPU layers' matrix multiplications: 24 splits, 23 from op offload; without it 2.
TEST(SplitCauses, OpOffloadAndItsCounterfactual) {
  auto s = planned("2gpu-unequal", [](SessionConfig& c) {
    c.model.n_tokens = 32;
    c.policy.n_gpu_layers = 1;
  });
  ASSERT_NE(s, nullptr);
  ASSERT_EQ(s->sched().n_splits(), 24);
  const SplitCauseSummary no_replan = summarize_split_causes(*s, &builtin_registry(), false);
  ASSERT_EQ(no_replan.groups.size(), 2u);
  EXPECT_EQ(no_replan.groups[0].cause, SplitCause::kOpOffload);
  EXPECT_EQ(no_replan.groups[0].splits, 23);
  EXPECT_EQ(no_replan.groups[0].n_layers, 2);
  EXPECT_EQ(no_replan.groups[0].option, "--no-op-offload");
  EXPECT_EQ(no_replan.groups[0].splits_with_option, -1) << "not planned again";
  const SplitCauseSummary sum = summarize_split_causes(*s, &builtin_registry());
  EXPECT_EQ(sum.groups[0].splits_with_option, 2);
  EXPECT_THAT(format_split_causes(sum), ::testing::HasSubstr("with --no-op-offload: 2 splits (planned again)"));
  // The summary plans a copy: the session's own plan is unchanged.
  EXPECT_EQ(s->sched().n_splits(), 24);
}

TEST(SplitCauses, OpRuleVerdictsNameTheFirstMatchingRuleAndItsNote) {
  auto t = topology_preset("gpu-no-fa");
  ASSERT_TRUE(t.ok());
  auto s = planned("gpu-no-fa");
  ASSERT_NE(s, nullptr);
  const Tensor* fa = s->find_tensor("fattn-0");
  ASSERT_NE(fa, nullptr);
  const std::vector<OpRuleVerdict> v = op_rule_verdicts(t.value(), *fa);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].device, "gpu0");
  EXPECT_EQ(v[0].rule, 0u);
  EXPECT_FALSE(v[0].allow);
  EXPECT_EQ(v[0].note, "no flash-attention kernel on this backend");  // harness/topology/presets/gpu-no-fa.json
  EXPECT_THAT(s->explain("fattn-0"),
              ::testing::HasSubstr("refused by gpu0's op rule 0: no flash-attention kernel on this backend"));
  // A node no rule matches, and a view: no verdicts.
  EXPECT_TRUE(op_rule_verdicts(t.value(), *s->find_tensor("Qcur-0")).empty());
  // An allow rule is named for the device the node runs on, not for another.
  sim::TopologyConfig allow = t.value();
  allow.devices[0].op_rules = {{true, {Op::kMulMat}, {}, {}, {}, 0, 0, 0, "matrix engine"}};
  EXPECT_EQ(op_rule_lines(allow, *s->find_tensor("Qcur-0"), "gpu0"), "  allowed by gpu0's op rule 0: matrix engine\n");
  EXPECT_EQ(op_rule_lines(allow, *s->find_tensor("Qcur-0"), "cpu"), "");
}
