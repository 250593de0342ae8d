// Op rules of simulated devices (sim/op_rules.cpp): batch_size, rule_matches (every field of OpRule, unset fields
// match anything), op_allowed_by_rules (first match decides, else default_allow) and offload_wanted (OffloadRule),
// then how a simulated device consults them (supports_op, offload_op). Nodes are metadata only; each expectation is
// worked out by hand in the comment next to it.
#include <gtest/gtest.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "unit/sim/sim_fixture.h"
#include "sim/sim_impl.h"  // op_allowed_by_rules, offload_wanted
#include "tessera/build.h"
#include "tessera/sim/device_config.h"
#include "tessera/sim/op_rules.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;

namespace {

DeviceConfig with_offload(bool enabled, int64_t min_batch, std::vector<Op> ops) {
  DeviceConfig d = gpu("gpu0");
  d.offload = OffloadRule{enabled, min_batch, std::move(ops)};
  return d;
}

// A one-device simulator whose device has the given rules.

}  // namespace

// =====================================================================================================================
// batch_size

TEST(SimOpRules, BatchSizeIsNe1ExceptForMulMatIdWhereItIsNe2) {
  Nodes n;
  // MUL_MAT [64, 16] x [64, 8] -> [16, 8]: ne[1] = 8 columns.
  EXPECT_EQ(batch_size(*n.mul_mat_node(Type::kF32, 64, 16, 8)), 8);
  // ADD [64, 3]: ne[1] = 3.
  EXPECT_EQ(batch_size(*n.add_node(64, 3)), 3);
  // SCALE of a vector [64]: ne[1] = 1.
  EXPECT_EQ(batch_size(*n.scale_node(64)), 1);
  // MUL_MAT_ID with 4 experts, 2 used, 5 tokens -> [16, 2, 5]: ne[1] = 2 is the used experts, ne[2] = 5 the tokens;
  // the batch is the tokens.
  Tensor* mmid = n.mul_mat_id_node(64, 16, 4, 2, 5);
  ASSERT_EQ(mmid->ne[1], 2);
  ASSERT_EQ(mmid->ne[2], 5);
  EXPECT_EQ(batch_size(*mmid), 5);
}

// =====================================================================================================================
// rule_matches: one field at a time

TEST(SimOpRules, AnEmptyRuleMatchesEveryNode) {
  Nodes n;
  // No field is set: nothing to fail, whatever the op, types, batch or ne0 (a leaf has no sources at all).
  const OpRule empty;
  EXPECT_TRUE(rule_matches(empty, *n.mul_mat_node(Type::kQ4_0, 64, 16, 8)));
  EXPECT_TRUE(rule_matches(empty, *n.mul_mat_id_node(64, 16, 4, 2, 5)));
  EXPECT_TRUE(rule_matches(empty, *n.scale_node(7)));
  EXPECT_TRUE(rule_matches(empty, *n.leaf(Type::kI32, 3, 1)));
}

TEST(SimOpRules, OpsListsTheOpsThatMatch) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 8);
  Tensor* ad = n.add_node(64, 8);
  // {MUL_MAT}: the MUL_MAT matches, the ADD does not.
  EXPECT_TRUE(rule_matches(rule(true, {Op::kMulMat}), *mm));
  EXPECT_FALSE(rule_matches(rule(true, {Op::kMulMat}), *ad));
  // {ADD, MUL_MAT}: both, whatever the position in the list.
  EXPECT_TRUE(rule_matches(rule(true, {Op::kAdd, Op::kMulMat}), *mm));
  EXPECT_TRUE(rule_matches(rule(true, {Op::kAdd, Op::kMulMat}), *ad));
  // {SCALE}: neither.
  EXPECT_FALSE(rule_matches(rule(true, {Op::kScale}), *mm));
  EXPECT_FALSE(rule_matches(rule(true, {Op::kScale}), *ad));
  // allow does not take part in matching: a deny rule matches the same nodes.
  EXPECT_TRUE(rule_matches(rule(false, {Op::kMulMat}), *mm));
}

TEST(SimOpRules, Src0TypesIsTheTypeOfTheFirstSource) {
  Nodes n;
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 64, 16, 8);  // src0 q4_0, src1 f32, dst f32
  OpRule r;
  r.src0_types = {Type::kQ4_0};
  EXPECT_TRUE(rule_matches(r, *q4));
  r.src0_types = {Type::kQ8_0};
  EXPECT_FALSE(rule_matches(r, *q4));
  r.src0_types = {Type::kQ8_0, Type::kQ4_0};  // any type of the list
  EXPECT_TRUE(rule_matches(r, *q4));
  // f32 is the type of src1 and of the result, not of src0: no match.
  r.src0_types = {Type::kF32};
  EXPECT_FALSE(rule_matches(r, *q4));
  // A leaf has no src0: a src0 list cannot hold, whatever the leaf's own type.
  r.src0_types = {Type::kF32};
  EXPECT_FALSE(rule_matches(r, *n.leaf(Type::kF32, 64, 1)));
}

TEST(SimOpRules, Src1TypesIsTheTypeOfTheSecondSource) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kQ4_0, 64, 16, 8);  // src1 f32
  Tensor* gr = n.get_rows_node(64, 4);                  // src0 q8_0, src1 i32, dst f32
  OpRule r;
  r.src1_types = {Type::kF32};
  EXPECT_TRUE(rule_matches(r, *mm));
  EXPECT_FALSE(rule_matches(r, *gr));
  r.src1_types = {Type::kI32};
  EXPECT_FALSE(rule_matches(r, *mm));
  EXPECT_TRUE(rule_matches(r, *gr));
  // q4_0 is src0's type: a src1 list {q4_0} does not match the MUL_MAT.
  r.src1_types = {Type::kQ4_0};
  EXPECT_FALSE(rule_matches(r, *mm));
  // SCALE has one source: src[1] is null, so a src1 list cannot hold, even {f32} (the type of its only source).
  r.src1_types = {Type::kF32};
  EXPECT_FALSE(rule_matches(r, *n.scale_node(64)));
}

TEST(SimOpRules, DstTypesIsTheNodesOwnType) {
  Nodes n;
  Tensor* gr = n.get_rows_node(64, 4);  // src0 q8_0, result f32
  OpRule r;
  r.dst_types = {Type::kF32};
  EXPECT_TRUE(rule_matches(r, *gr));
  r.dst_types = {Type::kQ8_0};  // the source's type, not the result's
  EXPECT_FALSE(rule_matches(r, *gr));
  r.dst_types = {Type::kF16, Type::kF32};
  EXPECT_TRUE(rule_matches(r, *gr));
  // A leaf has a type too: an i32 leaf matches {i32}, not {f32}.
  r.dst_types = {Type::kI32};
  EXPECT_TRUE(rule_matches(r, *n.leaf(Type::kI32, 8, 1)));
  r.dst_types = {Type::kF32};
  EXPECT_FALSE(rule_matches(r, *n.leaf(Type::kI32, 8, 1)));
}

TEST(SimOpRules, MinBatchIsInclusiveAndZeroIsUnset) {
  Nodes n;
  Tensor* b31 = n.mul_mat_node(Type::kF32, 64, 16, 31);  // batch 31
  Tensor* b32 = n.mul_mat_node(Type::kF32, 64, 16, 32);  // batch 32
  OpRule r;
  r.min_batch = 32;  // batch >= 32
  EXPECT_FALSE(rule_matches(r, *b31));
  EXPECT_TRUE(rule_matches(r, *b32));
  r.min_batch = 0;                                  // unset
  EXPECT_TRUE(rule_matches(r, *n.scale_node(64)));  // batch 1
  // MUL_MAT_ID: 2 used experts, 5 tokens -> batch 5. min 5 matches, min 6 does not (ne[1] = 2 would fail both).
  Tensor* mmid = n.mul_mat_id_node(64, 16, 4, 2, 5);
  r.min_batch = 5;
  EXPECT_TRUE(rule_matches(r, *mmid));
  r.min_batch = 6;
  EXPECT_FALSE(rule_matches(r, *mmid));
}

TEST(SimOpRules, MaxBatchIsInclusiveAndZeroOrLessIsUnset) {
  Nodes n;
  Tensor* b64 = n.mul_mat_node(Type::kF32, 64, 16, 64);  // batch 64
  Tensor* b65 = n.mul_mat_node(Type::kF32, 64, 16, 65);  // batch 65
  OpRule r;
  r.max_batch = 64;  // batch <= 64
  EXPECT_TRUE(rule_matches(r, *b64));
  EXPECT_FALSE(rule_matches(r, *b65));
  // Unset: 0 and negative values impose no limit (read as a limit, -1 would reject every batch).
  r.max_batch = 0;
  EXPECT_TRUE(rule_matches(r, *b65));
  r.max_batch = -1;
  EXPECT_TRUE(rule_matches(r, *b65));
  // MUL_MAT_ID batch 5 (tokens, not the 2 used experts): max 5 matches, max 4 does not.
  Tensor* mmid = n.mul_mat_id_node(64, 16, 4, 2, 5);
  r.max_batch = 5;
  EXPECT_TRUE(rule_matches(r, *mmid));
  r.max_batch = 4;
  EXPECT_FALSE(rule_matches(r, *mmid));
}

TEST(SimOpRules, MinAndMaxBatchTogetherAreAWindow) {
  Nodes n;
  OpRule r;
  r.min_batch = 32;
  r.max_batch = 64;
  // [32, 64]: 31 and 65 are outside, both ends inside.
  EXPECT_FALSE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 31)));
  EXPECT_TRUE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 32)));
  EXPECT_TRUE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 48)));
  EXPECT_TRUE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 64)));
  EXPECT_FALSE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 65)));
  // min > max is an empty window: 40 fails "<= 30".
  r.min_batch = 40;
  r.max_batch = 30;
  EXPECT_FALSE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 16, 40)));
}

TEST(SimOpRules, Ne0MultipleLooksAtTheFirstSourceElseTheNodeItself) {
  Nodes n;
  OpRule r;
  r.ne0_multiple = 32;
  // SCALE [64] of a source [64]: 64 % 32 = 0 matches; [48]: 48 % 32 = 16 does not.
  EXPECT_TRUE(rule_matches(r, *n.scale_node(64)));
  EXPECT_FALSE(rule_matches(r, *n.scale_node(48)));
  // MUL_MAT: src0 [k, m], result [m, n]. The rule reads src0's ne[0] = k, not the result's ne[0] = m:
  // k 64, m 48 -> 64 % 32 = 0 matches (though 48 % 32 != 0); k 48, m 64 -> 48 % 32 = 16 fails (though 64 % 32 = 0).
  EXPECT_TRUE(rule_matches(r, *n.mul_mat_node(Type::kF32, 64, 48, 8)));
  EXPECT_FALSE(rule_matches(r, *n.mul_mat_node(Type::kF32, 48, 64, 8)));
  // GET_ROWS of a table [96, 16] by 5 ids: result [96, 5]; src0 ne[0] 96 = 3 * 32 matches.
  EXPECT_TRUE(rule_matches(r, *n.get_rows_node(96, 5)));
  // No source: the node's own ne[0]. 96 % 32 = 0 matches, 80 % 32 = 16 does not.
  EXPECT_TRUE(rule_matches(r, *n.leaf(Type::kF32, 96, 1)));
  EXPECT_FALSE(rule_matches(r, *n.leaf(Type::kF32, 80, 1)));
  // 0 (and negative) is unset: 80 matches.
  r.ne0_multiple = 0;
  EXPECT_TRUE(rule_matches(r, *n.leaf(Type::kF32, 80, 1)));
  r.ne0_multiple = -32;
  EXPECT_TRUE(rule_matches(r, *n.leaf(Type::kF32, 80, 1)));
}

TEST(SimOpRules, EverySetFieldMustHold) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kQ4_0, 64, 16, 8);  // MUL_MAT, src0 q4_0, src1 f32, dst f32, batch 8, ne0 64
  OpRule r = rule(true, {Op::kMulMat});
  r.src0_types = {Type::kQ4_0};
  r.src1_types = {Type::kF32};
  r.dst_types = {Type::kF32};
  r.min_batch = 8;
  r.max_batch = 8;
  r.ne0_multiple = 64;
  EXPECT_TRUE(rule_matches(r, *mm)) << "every field holds";
  // Break one field at a time: each alone makes the rule miss.
  auto miss = [&](auto change, const char* what) {
    OpRule x = r;
    change(x);
    EXPECT_FALSE(rule_matches(x, *mm)) << what;
  };
  miss([](OpRule& x) { x.ops = {Op::kAdd}; }, "ops");
  miss([](OpRule& x) { x.src0_types = {Type::kQ8_0}; }, "src0_types");
  miss([](OpRule& x) { x.src1_types = {Type::kF16}; }, "src1_types");
  miss([](OpRule& x) { x.dst_types = {Type::kF16}; }, "dst_types");
  miss([](OpRule& x) { x.min_batch = 9; }, "min_batch");
  miss([](OpRule& x) { x.max_batch = 7; }, "max_batch");
  miss([](OpRule& x) { x.ne0_multiple = 128; }, "ne0_multiple (64 % 128 = 64)");
  // note is documentation only.
  OpRule noted = r;
  noted.note = "anything";
  EXPECT_TRUE(rule_matches(noted, *mm));
}

// =====================================================================================================================
// op_allowed_by_rules: first match decides, else default_allow

TEST(SimOpRules, NoRulesMeansTheDefault) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 8);
  EXPECT_TRUE(op_allowed_by_rules(with_rules({}, true), *mm));
  EXPECT_FALSE(op_allowed_by_rules(with_rules({}, false), *mm));
}

TEST(SimOpRules, AMatchingRuleOverridesTheDefaultBothWays) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 8);
  Tensor* ad = n.add_node(64, 8);
  // Default allow, deny MUL_MAT: the MUL_MAT is denied by the rule, the ADD (no rule matches) allowed by default.
  DeviceConfig deny = with_rules({rule(false, {Op::kMulMat})}, true);
  EXPECT_FALSE(op_allowed_by_rules(deny, *mm));
  EXPECT_TRUE(op_allowed_by_rules(deny, *ad));
  // Default deny, allow ADD: the ADD is allowed by the rule; the MUL_MAT and a SCALE fall through to the default.
  DeviceConfig allow = with_rules({rule(true, {Op::kAdd})}, false);
  EXPECT_TRUE(op_allowed_by_rules(allow, *ad));
  EXPECT_FALSE(op_allowed_by_rules(allow, *mm));
  EXPECT_FALSE(op_allowed_by_rules(allow, *n.scale_node(64)));
}

TEST(SimOpRules, FirstMatchingRuleDecides) {
  Nodes n;
  Tensor* small = n.mul_mat_node(Type::kF32, 64, 16, 8);  // batch 8
  Tensor* big = n.mul_mat_node(Type::kF32, 64, 16, 16);   // batch 16
  OpRule deny_big = rule(false, {Op::kMulMat});
  deny_big.min_batch = 16;
  const OpRule allow_mm = rule(true, {Op::kMulMat});
  // [deny batch >= 16, allow MUL_MAT], default deny: small misses the first rule and the second allows it;
  // big matches the first rule, which denies it (the second is never asked).
  DeviceConfig a = with_rules({deny_big, allow_mm}, false);
  EXPECT_TRUE(op_allowed_by_rules(a, *small));
  EXPECT_FALSE(op_allowed_by_rules(a, *big));
  // Reversed: allow MUL_MAT matches both first, so the deny rule behind it never decides.
  DeviceConfig b = with_rules({allow_mm, deny_big}, false);
  EXPECT_TRUE(op_allowed_by_rules(b, *small));
  EXPECT_TRUE(op_allowed_by_rules(b, *big));
  // Two matching deny/allow rules for the same node: the first one's allow is the answer, not the last one's.
  EXPECT_FALSE(op_allowed_by_rules(with_rules({rule(false, {}), rule(true, {})}, true), *small));
  EXPECT_TRUE(op_allowed_by_rules(with_rules({rule(true, {}), rule(false, {})}, false), *small));
}

TEST(SimOpRules, AllowOnlyQ4_0WeightsForMulMat) {
  Nodes n;
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 64, 32, 8);
  Tensor* q8 = n.mul_mat_node(Type::kQ8_0, 64, 32, 8);
  Tensor* f32 = n.mul_mat_node(Type::kF32, 64, 32, 8);
  Tensor* ad = n.add_node(64, 8);
  // [allow MUL_MAT with src0 q4_0, deny MUL_MAT], default allow:
  //   q4_0 MUL_MAT -> rule 1 allows; q8_0 and f32 MUL_MAT -> rule 1 misses (src0), rule 2 denies;
  //   ADD -> neither rule names ADD: the default allows.
  OpRule only_q4 = rule(true, {Op::kMulMat});
  only_q4.src0_types = {Type::kQ4_0};
  DeviceConfig d = with_rules({only_q4, rule(false, {Op::kMulMat})}, true);
  EXPECT_TRUE(op_allowed_by_rules(d, *q4));
  EXPECT_FALSE(op_allowed_by_rules(d, *q8));
  EXPECT_FALSE(op_allowed_by_rules(d, *f32));
  EXPECT_TRUE(op_allowed_by_rules(d, *ad));
}

TEST(SimOpRules, BatchWindowWithDefaultDeny) {
  Nodes n;
  // [allow MUL_MAT with batch in [32, 64]], default deny: outside the window no rule matches and the default denies.
  OpRule r = rule(true, {Op::kMulMat});
  r.min_batch = 32;
  r.max_batch = 64;
  DeviceConfig d = with_rules({r}, false);
  EXPECT_FALSE(op_allowed_by_rules(d, *n.mul_mat_node(Type::kF32, 64, 16, 31)));
  EXPECT_TRUE(op_allowed_by_rules(d, *n.mul_mat_node(Type::kF32, 64, 16, 32)));
  EXPECT_TRUE(op_allowed_by_rules(d, *n.mul_mat_node(Type::kF32, 64, 16, 64)));
  EXPECT_FALSE(op_allowed_by_rules(d, *n.mul_mat_node(Type::kF32, 64, 16, 65)));
}

// =====================================================================================================================
// offload_wanted: OffloadRule

TEST(SimOpRules, OffloadRuleDefaultsAreOff) {
  Nodes n;
  // OffloadRule{}: disabled (min_batch 32, any op): even a batch of 512 is not asked for.
  const OffloadRule def;
  EXPECT_FALSE(def.enabled);
  EXPECT_EQ(def.min_batch, 32);
  EXPECT_TRUE(def.ops.empty());
  EXPECT_FALSE(offload_wanted(gpu("gpu0"), *n.mul_mat_node(Type::kF32, 64, 16, 512)));
}

TEST(SimOpRules, OffloadNeedsEnabled) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 64);  // batch 64
  // Disabled: no, though min_batch 1 <= 64 and MUL_MAT is listed.
  EXPECT_FALSE(offload_wanted(with_offload(false, 1, {Op::kMulMat}), *mm));
  EXPECT_TRUE(offload_wanted(with_offload(true, 1, {Op::kMulMat}), *mm));
}

TEST(SimOpRules, OffloadMinBatchIsInclusive) {
  Nodes n;
  // min_batch 32: batch 31 no, 32 yes, 33 yes.
  DeviceConfig d = with_offload(true, 32, {});
  EXPECT_FALSE(offload_wanted(d, *n.mul_mat_node(Type::kF32, 64, 16, 31)));
  EXPECT_TRUE(offload_wanted(d, *n.mul_mat_node(Type::kF32, 64, 16, 32)));
  EXPECT_TRUE(offload_wanted(d, *n.mul_mat_node(Type::kF32, 64, 16, 33)));
  // min_batch 0: every batch (>= 1) meets it, batch 1 yes.
  EXPECT_TRUE(offload_wanted(with_offload(true, 0, {}), *n.scale_node(64)));
  // MUL_MAT_ID: batch = tokens (ne[2] = 40), not the used experts (ne[1] = 2): min 40 yes, min 41 no.
  Tensor* mmid = n.mul_mat_id_node(64, 16, 8, 2, 40);
  EXPECT_TRUE(offload_wanted(with_offload(true, 40, {}), *mmid));
  EXPECT_FALSE(offload_wanted(with_offload(true, 41, {}), *mmid));
}

TEST(SimOpRules, OffloadOpsListLimitsTheOpsAndEmptyMeansAny) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 32);  // batch 32
  Tensor* ad = n.add_node(64, 32);                      // batch 32
  // {MUL_MAT}: the MUL_MAT yes, the ADD no (same batch).
  DeviceConfig only_mm = with_offload(true, 32, {Op::kMulMat});
  EXPECT_TRUE(offload_wanted(only_mm, *mm));
  EXPECT_FALSE(offload_wanted(only_mm, *ad));
  // {ADD, MUL_MAT}: both.
  DeviceConfig both = with_offload(true, 32, {Op::kAdd, Op::kMulMat});
  EXPECT_TRUE(offload_wanted(both, *mm));
  EXPECT_TRUE(offload_wanted(both, *ad));
  // {}: any op.
  DeviceConfig any = with_offload(true, 32, {});
  EXPECT_TRUE(offload_wanted(any, *mm));
  EXPECT_TRUE(offload_wanted(any, *ad));
  // The op rules do not take part: a device that denies MUL_MAT may still ask for it (the scheduler checks support).
  DeviceConfig denied = with_offload(true, 32, {});
  denied.op_rules = {rule(false, {Op::kMulMat})};
  EXPECT_TRUE(offload_wanted(denied, *mm));
}

// "batch": "ggml-cuda" counts batches as llama.cpp's CUDA backend does (ggml-cuda.cu get_op_batch_size): an ADD_ID of
// [64, 4 used experts, 8 tokens] has 32 rows (offloaded at 32, where the token count, 8, would not be); MUL_MAT_ID its
// tokens; GET_ROWS never.
TEST(SimOpRules, OffloadWithGgmlCudaBatchesCountsRows) {
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_3d(Type::kF32, 64, 4, 8);
  Tensor* bias = ctx.new_tensor_2d(Type::kF32, 64, 16);
  Tensor* ids = ctx.new_tensor_2d(Type::kI32, 4, 8);
  Tensor* add = add_id(ctx, x, bias, ids);
  ASSERT_NE(add, nullptr) << ctx.status().message();
  Tensor* rows = get_rows(ctx, ctx.new_tensor_2d(Type::kF32, 64, 100), ctx.new_tensor_1d(Type::kI32, 512));
  ASSERT_NE(rows, nullptr) << ctx.status().message();
  EXPECT_EQ(ggml_offload_batch_size(*add), 32);
  EXPECT_EQ(ggml_offload_batch_size(*rows), 0);
  DeviceConfig d = with_offload(true, 32, {});
  EXPECT_FALSE(offload_wanted(d, *add));  // tokens: ne[1] = 4
  d.offload.ggml_cuda_batch = true;
  EXPECT_TRUE(offload_wanted(d, *add));
  EXPECT_FALSE(offload_wanted(d, *rows));  // 512 rows gathered, but GET_ROWS is never offloaded
  Nodes n;
  EXPECT_TRUE(offload_wanted(d, *n.mul_mat_id_node(64, 16, 8, 2, 40)));  // MUL_MAT_ID: its 40 tokens
  EXPECT_FALSE(offload_wanted(d, *n.mul_mat_node(Type::kF32, 64, 16, 31)));
}

// =====================================================================================================================
// Through a simulated device: supports_op and offload_op consult the rules

TEST(SimOpRules, DeviceSupportsOpConsultsTheRules) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 32, 8);
  Tensor* ad = n.add_node(64, 8);
  auto plain = sim_with_rules({}, true);
  EXPECT_TRUE(plain->device(0)->supports_op(*mm));
  EXPECT_TRUE(plain->device(0)->supports_op(*ad));
  auto sim = sim_with_rules({rule(false, {Op::kMulMat})}, true);
  EXPECT_FALSE(sim->device(0)->supports_op(*mm));
  EXPECT_TRUE(sim->device(0)->supports_op(*ad));
  auto deny_all = sim_with_rules({rule(true, {Op::kAdd})}, false);
  EXPECT_TRUE(deny_all->device(0)->supports_op(*ad));
  EXPECT_FALSE(deny_all->device(0)->supports_op(*mm));
}

TEST(SimOpRules, DeviceRulesNeverDenyLeafsAndViews) {
  Nodes n;
  // Leafs and views compute nothing, so a device that denies everything still holds them.
  auto sim = sim_with_rules({rule(false, {})}, false);
  Device& d = *sim->device(0);
  Tensor* x = n.leaf(Type::kF32, 64, 8);
  Tensor* t = transpose(n.ctx, x);
  ASSERT_NE(t, nullptr);
  EXPECT_TRUE(d.supports_op(*x));
  EXPECT_TRUE(d.supports_op(*t));
  EXPECT_FALSE(d.supports_op(*n.add_node(64, 8))) << "while an op is denied";
}

TEST(SimOpRules, DeviceOffloadOpAsksTheOffloadRule) {
  Nodes n;
  Tensor* mm31 = n.mul_mat_node(Type::kF32, 64, 16, 31);
  Tensor* mm32 = n.mul_mat_node(Type::kF32, 64, 16, 32);
  Tensor* add32 = n.add_node(64, 32);
  DeviceConfig off = gpu("off"), on = gpu("on"), any = gpu("any");
  off.offload = {/*enabled=*/false, 1, {}};
  on.offload = {/*enabled=*/true, 32, {Op::kMulMat}};
  any.offload = {/*enabled=*/true, 32, {}};
  auto sim = make_sim(topology({off, on, any}));
  EXPECT_FALSE(sim->device(0)->offload_op(*mm32));
  EXPECT_FALSE(sim->device(1)->offload_op(*mm31));
  EXPECT_TRUE(sim->device(1)->offload_op(*mm32));
  EXPECT_FALSE(sim->device(1)->offload_op(*add32)) << "ADD is not in the list";
  EXPECT_TRUE(sim->device(2)->offload_op(*add32)) << "an empty list means any op";
  EXPECT_FALSE(sim->device(2)->offload_op(*mm31));
}
