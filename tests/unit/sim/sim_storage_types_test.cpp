// Storage-only types on simulated devices (docs/simulator.md, "Storage-only types"): in metadata-only mode a device
// judges a node with storage-only tensors by its stand-in (block-quantized -> q4_0, f64 -> f32, integers -> i32), so
// it answers supports_op exactly as for the same node in the stand-in's type; the op rules see the real types; the
// cost comes from the real bytes. Memory-backed devices refuse every such node, and computing one fails.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "sim/sim_impl.h"  // op_time_us
#include "tessera/build.h"
#include "tessera/sim/op_rules.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using ::testing::HasSubstr;

namespace {

// Every storage-only type (types.h).
std::vector<Type> storage_only_types() {
  std::vector<Type> v;
  for (int i = kKernelTypeCount; i < kTypeCount; ++i) v.push_back(static_cast<Type>(i));
  return v;
}

// A set of nodes built with the block-quantized type `quant` where a weight goes, `integer` for an integer table
// and `wide` for a float table (the storage-only types, or their stand-ins q4_0, i32 and f32: the same nodes, shapes
// and strides in values). ne0 = 256 is a whole number of blocks of every type.
struct Pieces {
  Context ctx{{.no_alloc = true}};
  std::vector<std::pair<std::string, Tensor*>> nodes;

  Pieces(Type quant, Type integer, Type wide) {
    auto add_node = [&](const char* what, Tensor* t) {
      EXPECT_NE(t, nullptr) << what << ": " << ctx.status().to_string();
      if (t != nullptr) nodes.emplace_back(what, t);
    };
    Tensor* w = ctx.new_tensor_2d(quant, 256, 16);
    Tensor* x = ctx.new_tensor_2d(Type::kF32, 256, 4);
    Tensor* x64 = ctx.new_tensor_2d(Type::kF32, 256, 64);
    Tensor* ids = ctx.new_tensor_1d(Type::kI32, 4);
    add_node("leaf", w);
    add_node("view of every other row", view_2d(ctx, w, 256, 8, 2 * w->nb[1], w->nb[1]));
    add_node("permute (dim 0 kept)", permute(ctx, ctx.new_tensor_3d(quant, 256, 4, 3), 0, 2, 1, 3));
    add_node("MUL_MAT, batch 4", mul_mat(ctx, w, x));
    add_node("MUL_MAT, batch 64", mul_mat(ctx, w, x64));
    add_node("MUL_MAT of a strided view", mul_mat(ctx, view_2d(ctx, w, 256, 8, 2 * w->nb[1], 0), x));
    add_node("GET_ROWS", get_rows(ctx, w, ids));
    add_node("CONT", cont(ctx, w));
    add_node("CPY f32 -> quantized", cpy(ctx, x, ctx.new_tensor_2d(quant, 256, 4)));
    add_node("CPY quantized -> f32", cpy(ctx, ctx.new_tensor_2d(quant, 256, 4), x));
    add_node("SET_ROWS into quantized", set_rows(ctx, w, x, ids));
    {
      Tensor* experts = ctx.new_tensor_3d(quant, 256, 16, 4);
      Tensor* b = ctx.new_tensor_3d(Type::kF32, 256, 2, 3);
      Tensor* eids = ctx.new_tensor_2d(Type::kI32, 2, 3);
      add_node("MUL_MAT_ID", mul_mat_id(ctx, experts, b, eids));
    }
    {
      Tensor* q = ctx.new_tensor_3d(Type::kF32, 256, 4, 2);
      Tensor* k = ctx.new_tensor_3d(quant, 256, 8, 1);
      Tensor* v = ctx.new_tensor_3d(quant, 256, 8, 1);
      add_node("FLASH_ATTN_EXT with quantized K and V", flash_attn_ext(ctx, q, k, v, nullptr, 0.125f));
    }
    {
      // Refused whatever the type: the weight's src1 is replaced by i32 after the build.
      Tensor* bad = mul_mat(ctx, w, x);
      if (bad != nullptr) bad->src[1] = ctx.new_tensor_2d(Type::kI32, 256, 4);
      add_node("MUL_MAT with an i32 src1", bad);
    }
    Tensor* table = ctx.new_tensor_2d(integer, 8, 16);
    add_node("GET_ROWS of an integer table", get_rows(ctx, table, ids));
    add_node("CPY integer -> i32", cpy(ctx, ctx.new_tensor_2d(integer, 8, 4), ctx.new_tensor_2d(Type::kI32, 8, 4)));
    add_node("CONT of an integer tensor", cont(ctx, table));
    Tensor* wide_t = ctx.new_tensor_2d(wide, 64, 4);
    add_node("CONT of a float tensor", cont(ctx, wide_t));
    add_node("CPY float -> f16", cpy(ctx, wide_t, ctx.new_tensor_2d(Type::kF16, 64, 4)));
    add_node("GET_ROWS of a float table", get_rows(ctx, wide_t, ctx.new_tensor_1d(Type::kI32, 2)));
    add_node("transposed float (CONT)", cont(ctx, transpose(ctx, wide_t)));
  }
};

// Three devices: a plain simulated GPU, one with op rules that refuse some of the pieces, the wrapped CPU.
TopologyConfig three_devices() {
  DeviceConfig ruled = gpu("gpu1");
  OpRule no_fa;
  no_fa.allow = false;
  no_fa.ops = {Op::kFlashAttnExt};
  OpRule small_batch;
  small_batch.allow = false;
  small_batch.ops = {Op::kMulMat};
  small_batch.max_batch = 7;
  ruled.op_rules = {no_fa, small_batch};
  return topology({gpu("gpu0"), ruled, wrapped_cpu()});
}

SimOptions mode(MemoryMode m) {
  SimOptions o;
  o.mode = m;
  return o;
}

std::vector<TraceEvent> compute_events(const Simulator& sim) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : sim.trace().events) {
    if (e.kind == TraceKind::kCompute) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST(SimStorageTypes, StandInTypes) {
  for (int i = 0; i < kKernelTypeCount; ++i) {
    EXPECT_EQ(stand_in_type(static_cast<Type>(i)), static_cast<Type>(i)) << "a type with kernels is its own stand-in";
  }
  for (Type t : storage_only_types()) {
    SCOPED_TRACE(type_name(t));
    const Type want = type_traits(t).is_quantized ? Type::kQ4_0 : t == Type::kF64 ? Type::kF32 : Type::kI32;
    EXPECT_EQ(stand_in_type(t), want);
  }
  EXPECT_EQ(stand_in_type(Type::kQ6_K), Type::kQ4_0);
  EXPECT_EQ(stand_in_type(Type::kIQ4_NL), Type::kQ4_0);
  EXPECT_EQ(stand_in_type(Type::kF64), Type::kF32);
  EXPECT_EQ(stand_in_type(Type::kI8), Type::kI32);
  EXPECT_EQ(stand_in_type(Type::kI16), Type::kI32);
  EXPECT_EQ(stand_in_type(Type::kI64), Type::kI32);
}

// Metadata-only mode: every device answers for a node with storage-only tensors what it answers for the same node in
// the stand-in types, for every block-quantized storage-only type (q4_1 ... q2_0) and every plain one.
TEST(SimStorageTypes, MetadataOnlyDevicesJudgeEachNodeLikeItsStandIn) {
  auto sim = make_sim(three_devices(), mode(MemoryMode::kMetadata));
  ASSERT_NE(sim, nullptr);
  const Pieces twin(Type::kQ4_0, Type::kI32, Type::kF32);
  const std::vector<std::pair<Type, Type>> plain = {
      {Type::kI8, Type::kF64}, {Type::kI16, Type::kF64}, {Type::kI64, Type::kF64}};
  for (Type q : storage_only_types()) {
    if (!type_traits(q).is_quantized) continue;
    for (const auto& [integer, wide] : plain) {
      const Pieces p(q, integer, wide);
      ASSERT_EQ(p.nodes.size(), twin.nodes.size());
      for (size_t d = 0; d < sim->device_count(); ++d) {
        const Device& dev = *sim->device(d);
        for (size_t i = 0; i < p.nodes.size(); ++i) {
          EXPECT_EQ(dev.supports_op(*p.nodes[i].second), dev.supports_op(*twin.nodes[i].second))
              << dev.name() << ": " << p.nodes[i].first << " with " << type_name(q) << ", " << type_name(integer)
              << ", " << type_name(wide) << ": " << describe(*p.nodes[i].second);
        }
      }
    }
  }
  // The answers above are not all "no": by hand, for q6_k weights.
  const Pieces q6(Type::kQ6_K, Type::kI8, Type::kF64);
  auto claims = [&](size_t device, const std::string& what) {
    for (const auto& [name, t] : q6.nodes) {
      if (name == what) return sim->device(device)->supports_op(*t);
    }
    ADD_FAILURE() << "no piece " << what;
    return false;
  };
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_TRUE(claims(d, "leaf"));
    EXPECT_TRUE(claims(d, "MUL_MAT, batch 64"));
    EXPECT_TRUE(claims(d, "GET_ROWS"));
    EXPECT_TRUE(claims(d, "GET_ROWS of an integer table"));
    EXPECT_TRUE(claims(d, "CONT of a float tensor"));
    EXPECT_FALSE(claims(d, "MUL_MAT with an i32 src1"));
  }
  EXPECT_TRUE(claims(0, "FLASH_ATTN_EXT with quantized K and V"));
  EXPECT_FALSE(claims(1, "FLASH_ATTN_EXT with quantized K and V")) << "gpu1's rule denies FLASH_ATTN_EXT";
  EXPECT_TRUE(claims(0, "MUL_MAT, batch 4"));
  EXPECT_FALSE(claims(1, "MUL_MAT, batch 4")) << "gpu1's rule denies MUL_MAT up to batch 7";
}

// The op rules see the real types: a rule can name a storage-only type, and one naming q4_0 does not cover q6_k.
TEST(SimStorageTypes, OpRulesSeeTheRealTypes) {
  DeviceConfig no_q6 = gpu("gpu0");
  OpRule deny;
  deny.allow = false;
  deny.ops = {Op::kMulMat};
  deny.src0_types = {Type::kQ6_K};
  no_q6.op_rules = {deny};
  DeviceConfig only_q4 = gpu("gpu1");  // like the accel preset: an allow-list of weight types, default deny
  OpRule allow;
  allow.ops = {Op::kMulMat};
  allow.src0_types = {Type::kQ4_0};
  only_q4.op_rules = {allow};
  only_q4.default_allow = false;
  auto sim = make_sim(topology({no_q6, only_q4, wrapped_cpu()}), mode(MemoryMode::kMetadata));
  ASSERT_NE(sim, nullptr);
  Nodes n;
  Tensor* q6 = n.mul_mat_node(Type::kQ6_K, 256, 16, 8);
  Tensor* q4k = n.mul_mat_node(Type::kQ4_K, 256, 16, 8);
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 256, 16, 8);
  EXPECT_FALSE(sim->device(0)->supports_op(*q6));
  EXPECT_TRUE(sim->device(0)->supports_op(*q4k));
  EXPECT_TRUE(sim->device(0)->supports_op(*q4));
  EXPECT_FALSE(sim->device(1)->supports_op(*q6));
  EXPECT_FALSE(sim->device(1)->supports_op(*q4k));
  EXPECT_TRUE(sim->device(1)->supports_op(*q4));
  EXPECT_TRUE(sim->device(2)->supports_op(*q6));
}

// Memory-backed devices compute, so they refuse every node with a storage-only tensor (leafs and views too), while
// the same nodes in the stand-in types are claimed as usual.
TEST(SimStorageTypes, MemoryBackedDevicesRefuseEveryNodeWithAStorageOnlyTensor) {
  auto sim = make_sim(three_devices(), mode(MemoryMode::kBacked));
  ASSERT_NE(sim, nullptr);
  const Pieces twin(Type::kQ4_0, Type::kI32, Type::kF32);
  size_t twin_claims = 0;
  for (Type q : {Type::kQ6_K, Type::kQ4_K, Type::kIQ4_NL, Type::kMXFP4, Type::kNVFP4, Type::kQ1_0}) {
    const Pieces p(q, Type::kI16, Type::kF64);
    for (size_t d = 0; d < sim->device_count(); ++d) {
      for (size_t i = 0; i < p.nodes.size(); ++i) {
        const Tensor& t = *p.nodes[i].second;
        bool storage_only = !type_has_kernels(t.type);
        for (const Tensor* s : t.src) storage_only = storage_only || (s != nullptr && !type_has_kernels(s->type));
        if (t.view_src != nullptr) storage_only = storage_only || !type_has_kernels(t.view_src->type);
        if (!storage_only) continue;  // (the CPY into an i32 tensor of a plain i32 twin, say)
        EXPECT_FALSE(sim->device(d)->supports_op(t)) << sim->device(d)->name() << ": " << p.nodes[i].first;
        twin_claims += sim->device(d)->supports_op(*twin.nodes[i].second) ? 1 : 0;
      }
    }
  }
  EXPECT_GT(twin_claims, 0u);
}

// The cost model charges the real bytes. A q6_k weight [4096, 4096] times an f32 vector, on the cost device
// (5 us overhead, 40 TFLOP/s for quantized weights, 500 GB/s):
//   weight 4096 rows x 4096 / 256 blocks x 210 bytes = 13762560 bytes; vector and result 4096 x 4 = 16384 each;
//   13795328 bytes / 500 GB/s = 27.590656 us > 2 x 4096 x 4096 flops / 40 TFLOP/s = 0.8388608 us;
//   time = 5 + 27.590656 = 32.590656 us.
// Its q4_0 stand-in would move 4096 x 4096 / 32 x 18 = 9437184 + 32768 bytes: 5 + 18.939904 = 23.939904 us.
TEST(SimStorageTypes, MetadataOnlyComputeIsTimedFromTheRealBytes) {
  Nodes n;
  Tensor* q6 = n.mul_mat_node(Type::kQ6_K, 4096, 4096, 1);
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 4096, 4096, 1);
  EXPECT_EQ(nbytes(*q6->src[0]), 13762560u);
  EXPECT_NEAR(op_time_us(cost_device(), *q6), 32.590656, 1e-9);
  EXPECT_NEAR(op_time_us(cost_device(), *q4), 23.939904, 1e-9);

  auto sim = make_sim(topology({cost_device()}), mode(MemoryMode::kMetadata));
  ASSERT_NE(sim, nullptr);
  auto b = sim->device(0)->init_backend({}).value();
  OneOp op(*sim->device(0)->buffer_type(), [](Context& c) {
    Tensor* w = c.new_tensor_2d(Type::kQ6_K, 4096, 4096);
    set_name(*w, "blk.0.ffn_down.weight");
    return mul_mat(c, w, c.new_tensor_2d(Type::kF32, 4096, 1));
  });
  ASSERT_NE(op.buffer, nullptr);
  ASSERT_EQ(b->graph_compute_async(op.graph), ComputeStatus::kSuccess) << b->last_error();
  ASSERT_TRUE(b->synchronize().ok());
  const std::vector<TraceEvent> ev = compute_events(*sim);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NEAR(ev[0].end_us - ev[0].start_us, 32.590656, 1e-9);
  EXPECT_TRUE(sim->errors().empty());
}

// Memory-backed: the compute of such a node fails at submission, naming the device and the node.
TEST(SimStorageTypes, MemoryBackedComputeOfAStorageOnlyNodeFails) {
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}), mode(MemoryMode::kBacked));
  ASSERT_NE(sim, nullptr);
  for (size_t d = 0; d < 2; ++d) {
    auto b = sim->device(d)->init_backend({}).value();
    OneOp op(*sim->device(d)->buffer_type(), [](Context& c) {
      Tensor* w = c.new_tensor_2d(Type::kQ6_K, 256, 8);
      set_name(*w, "w_q6");
      Tensor* r = mul_mat(c, w, c.new_tensor_2d(Type::kF32, 256, 2));
      if (r != nullptr) set_name(*r, "product");
      return r;
    });
    ASSERT_NE(op.buffer, nullptr);
    EXPECT_EQ(b->graph_compute_async(op.graph), ComputeStatus::kFailed);
    EXPECT_THAT(b->last_error(), HasSubstr("does not support"));
    EXPECT_THAT(b->last_error(), HasSubstr("product"));
    EXPECT_TRUE(compute_events(*sim).empty());
  }
}
