// Extra buffer types through a whole session (docs/topology.md, "Buffer types and padding"): weights overridden into
// the CPU's repacked type (-ot 'REGEX=CPU_REPACK'), an op that type's rules refuse placed on another backend with the
// weight copied in, explain naming the rule, op offload never taking a repacked weight, and the padding of the GPU's
// quantized rows in the weight bytes. Sizes are worked out by hand in the comments (q4_0: 32 values in 18 bytes; the
// tiny model: n_embd 64, n_ff 128, 2 KV heads of 16, vocabulary 256).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string_view>

#include "tessera/build.h"
#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

// The 1gpu preset's GPU (offload of MUL_MAT from 32 tokens), whose q4_0 rows are padded to 512 values, and a
// simulated CPU (host memory) with a repacked weight type that takes only MUL_MAT on q4_0 weights.
constexpr const char* kTopology = R"({
  "name": "gpu-and-repacking-cpu",
  "devices": [
    {"name": "gpu0", "memory": "1 GiB", "offload": {"min_batch": 32, "ops": ["MUL_MAT"]},
     "padding": [{"types": ["q4_0"], "row_multiple": 512, "note": "MATRIX_ROW_PADDING"}]},
    {"name": "cpu", "type": "cpu", "host_visible": true, "memory": "8 GiB", "alignment": 64,
     "caps": {"async": false, "events": false},
     "buffer_types": [{"name": "CPU_REPACK",
                       "ops": {"default": "deny",
                               "rules": [{"allow": ["MUL_MAT"], "src0_types": ["q4_0"], "note": "repacked q4_0 GEMM"}]}}]}
  ]
})";

std::unique_ptr<Session> planned(int n_tokens, std::vector<TensorOverride> overrides, int ngl,
                                 bool cpu_repack = false) {
  SessionConfig c;
  auto t = parse_topology(kTopology, "test topology");
  EXPECT_TRUE(t.ok()) << t.status().message();
  c.topology = std::move(t).value();
  auto m = models::preset("tiny");
  EXPECT_TRUE(m.ok());
  c.model = m.value();
  c.model.n_tokens = n_tokens;
  c.policy.n_gpu_layers = ngl;
  c.policy.overrides = std::move(overrides);
  c.policy.cpu_repack = cpu_repack;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return nullptr;
  Status p = s.value()->plan();
  EXPECT_TRUE(p.ok()) << p.message();
  return std::move(s).value();
}

std::string device_of(Session& s, const char* node) {
  const Tensor* t = s.find_tensor(node);
  if (t == nullptr) return "(no such node)";
  return s.sched().explain(t).backend_name;
}

}  // namespace

TEST(BufferTypeSession, OpRefusedForARepackedWeightRunsElsewhereAndExplainNamesTheRule) {
  // Everything on the CPU (-ngl 0), the token embedding repacked: GET_ROWS has no repacked kernel, so the CPU
  // refuses it and the scheduler places it on gpu0, which gets the embedding copied in.
  auto s = planned(8, {{"token_embd", "CPU_REPACK", true}}, 0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(device_of(*s, "inp_embd"), "gpu0");
  EXPECT_THAT(s->explain("inp_embd"),
              HasSubstr("refused by cpu's buffer type CPU_REPACK (source token_embd.weight), its default (deny): no "
                        "rule matches"));
  // Without the override the embedding stays on the CPU with its weight.
  auto plain = planned(8, {}, 0);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(device_of(*plain, "inp_embd"), "cpu");
  EXPECT_EQ(plain->explain("inp_embd").find("CPU_REPACK"), std::string::npos);
}

TEST(BufferTypeSession, RepackedWeightsAreNeverOffloadedAndExplainNamesTheAllowingRule) {
  // 32 tokens: gpu0 asks for the CPU layers' MUL_MATs. Layer 0's attention weights repacked: Qcur-0 stays on the CPU
  // (its weight is not host memory), layer 1's (host memory) is offloaded.
  auto s = planned(32, {{"blk\\.0\\.attn_", "CPU_REPACK", true}}, 0);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(device_of(*s, "Qcur-0"), "cpu");
  EXPECT_EQ(device_of(*s, "Qcur-1"), "gpu0");
  EXPECT_THAT(s->explain("Qcur-0"),
              HasSubstr("allowed by cpu's buffer type CPU_REPACK (source blk.0.attn_q.weight), rule 0: repacked q4_0 "
                        "GEMM"));
  // The verdicts themselves: rule 0 allows MUL_MAT on the repacked q4_0 weight.
  const std::vector<BufferTypeVerdict> v = buffer_type_verdicts(s->config().topology, *s->find_tensor("Qcur-0"));
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].device, "cpu");
  EXPECT_EQ(v[0].buffer_type, "CPU_REPACK");
  EXPECT_EQ(v[0].rule, 0);
  EXPECT_TRUE(v[0].allow);
}

TEST(BufferTypeSession, WeightBytesCountTheGpusRowPaddingAndTheRepackedTypeAsTheCpus) {
  // -ngl 3 on 2 layers: everything but the token embedding on gpu0. Per layer, q4_0 [64 x m] is 36 m bytes: attn_q
  // 2304, attn_k 1152, attn_v 1152, attn_output 2304, ffn_gate 4608, ffn_up 4608, ffn_down [128 x 64] 4608, plus two
  // f32 norms of 256: 21248. Padding to 512 values: ne0 64 misses 448 values (14 blocks, 252 B), six such weights,
  // ne0 128 misses 384 (12 blocks, 216 B): 1728 per layer. The output [64 x 256]: 9216 + 252, its norm 256.
  // gpu0: 2 x (21248 + 1728) + 9216 + 252 + 256 = 55676. The CPU: token_embd [64 x 256] = 9216.
  auto s = planned(8, {}, 3);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(s->placement().weight_bytes[0], 55676u);
  EXPECT_EQ(s->placement().weight_bytes[1], 9216u);
  // The token embedding in the repacked type is still the CPU's memory.
  auto r = planned(8, {{"token_embd", "CPU_REPACK", true}}, 3);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->placement().weight_bytes[1], 9216u);
}

// PlacementPolicy::cpu_repack (llama.cpp's CPU buffer type list [CPU_REPACK, CPU] without a GPU host buffer type, as
// on Apple Metal): the matrix weights bound for the CPU's own buffer type that the CPU repacks (cpu_repacks: the tiny
// model's q4_0 matrices, rows a multiple of 4) go to CPU_REPACK; the token embedding (GET_ROWS) and the f32 norms stay
// in the CPU's own; a GPU's weights are untouched. Repacked weights are not host memory: never offloaded.
TEST(BufferTypeSession, CpuRepackPutsTheCpusRepackableMatricesInItsRepackedType) {
  auto buft_of = [](Session& s, const char* name) {
    for (const auto& [t, b] : s.placement().where) {
      if (std::string_view(t->name) == name) return std::string(b->name());
    }
    return std::string("(no such weight)");
  };
  // -ngl 3 (everything on gpu0) but layer 0's FFN overridden to the CPU, 32 tokens (gpu0 asks for host MUL_MATs).
  auto s = planned(32, {{"blk\\.0\\.ffn_", "CPU", true}}, 3, true);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(buft_of(*s, "blk.0.ffn_up.weight"), "CPU_REPACK");
  EXPECT_EQ(buft_of(*s, "blk.0.ffn_down.weight"), "CPU_REPACK");
  EXPECT_EQ(buft_of(*s, "blk.0.ffn_norm.weight"), "cpu");  // f32: not repacked
  EXPECT_EQ(buft_of(*s, "token_embd.weight"), "cpu");
  EXPECT_EQ(buft_of(*s, "blk.1.ffn_up.weight"), "gpu0");
  EXPECT_EQ(device_of(*s, "ffn_up-0"), "cpu");  // not offloaded: not host memory
  // Without cpu_repack the same override leaves them in the CPU's own (host) buffer type, and gpu0 takes the op.
  auto plain = planned(32, {{"blk\\.0\\.ffn_", "CPU", true}}, 3, false);
  ASSERT_NE(plain, nullptr);
  EXPECT_EQ(buft_of(*plain, "blk.0.ffn_up.weight"), "cpu");
  EXPECT_EQ(device_of(*plain, "ffn_up-0"), "gpu0");
  // Layers left on the CPU by -ngl go the same way.
  auto cpu_layers = planned(8, {}, 0, true);
  ASSERT_NE(cpu_layers, nullptr);
  EXPECT_EQ(buft_of(*cpu_layers, "blk.1.attn_q.weight"), "CPU_REPACK");
}

TEST(BufferTypeSession, CpuRepacksTheTypesAndShapesGgmlRepacksOnAArch64) {
  Context ctx{{.no_alloc = true}};
  auto w = [&](Type t, int64_t rows, const char* name = "blk.0.ffn_up.weight") {
    Tensor* x = ctx.new_tensor_2d(t, 256, rows);
    std::snprintf(x->name, sizeof(x->name), "%s", name);
    return cpu_repacks(*x);
  };
  for (Type t : {Type::kQ4_0, Type::kIQ4_NL, Type::kMXFP4, Type::kQ8_0}) {
    EXPECT_TRUE(w(t, 4)) << type_name(t);
    EXPECT_FALSE(w(t, 6)) << type_name(t);  // rows not a multiple of 4
  }
  for (Type t : {Type::kQ4_K, Type::kQ5_K, Type::kQ6_K}) {
    EXPECT_TRUE(w(t, 8)) << type_name(t);
    EXPECT_FALSE(w(t, 4)) << type_name(t);  // rows not a multiple of 8
  }
  for (Type t : {Type::kF32, Type::kF16, Type::kQ5_0, Type::kQ3_K, Type::kQ2_K}) EXPECT_FALSE(w(t, 8)) << type_name(t);
  EXPECT_FALSE(w(Type::kQ4_0, 8, "token_embd.weight"));          // read by GET_ROWS
  Tensor* experts = ctx.new_tensor_3d(Type::kMXFP4, 256, 8, 4);  // MUL_MAT_ID's 3-D weight
  EXPECT_TRUE(cpu_repacks(*experts));
  Tensor* four = ctx.new_tensor_4d(Type::kQ4_0, 256, 8, 4, 2);
  EXPECT_FALSE(cpu_repacks(*four));
}
