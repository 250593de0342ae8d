// The llama-style model builder (models/): presets, config checks, graph structure, and a CPU computation of the
// tiny model in every attention/FFN variant (finite logits; flash attention and the MUL_MAT/SOFT_MAX path agree).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "tessera/models/llama.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"

using namespace tessera;
using namespace tessera::models;
using ::testing::HasSubstr;

namespace {

LlamaConfig tiny(bool moe, bool flash_attn) {
  Result<LlamaConfig> c = preset(moe ? "tiny-moe" : "tiny");
  EXPECT_TRUE(c.ok());
  c->flash_attn = flash_attn;
  return *c;
}

std::map<Op, int> op_counts(const Graph& g) {
  std::map<Op, int> counts;
  for (const Tensor* n : g.nodes()) counts[n->op]++;
  return counts;
}

// A model with real memory on the CPU: weights and cache in their own buffers, the graph placed by the planner.
struct CpuModel {
  LlamaGraph m;
  std::unique_ptr<Buffer> weights, cache;
  std::unique_ptr<GraphPlanner> planner;
};

CpuModel make_cpu_model(const LlamaConfig& c, uint64_t seed) {
  CpuModel cm;
  Result<LlamaGraph> m = build_llama(c);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  cm.m = std::move(m).value();
  Result<std::unique_ptr<Buffer>> wb = alloc_ctx_tensors(*cm.m.weights_ctx, *cpu::buffer_type());
  EXPECT_TRUE(wb.ok()) << wb.status().to_string();
  cm.weights = std::move(wb).value();
  Result<std::unique_ptr<Buffer>> cb = alloc_ctx_tensors(*cm.m.cache_ctx, *cpu::buffer_type());
  EXPECT_TRUE(cb.ok()) << cb.status().to_string();
  cm.cache = std::move(cb).value();
  Status s = fill_random(cm.m, seed);
  EXPECT_TRUE(s.ok()) << s.to_string();
  cm.planner = std::make_unique<GraphPlanner>(cpu::buffer_type());
  s = cm.planner->alloc_graph(*cm.m.graph);
  EXPECT_TRUE(s.ok()) << s.to_string();
  s = set_inputs(cm.m, default_inputs(c, seed));
  EXPECT_TRUE(s.ok()) << s.to_string();
  return cm;
}

std::vector<float> compute_logits(const LlamaConfig& c, uint64_t seed) {
  CpuModel cm = make_cpu_model(c, seed);
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  EXPECT_EQ(backend->graph_compute(*cm.m.graph), ComputeStatus::kSuccess) << backend->last_error();
  Result<std::vector<float>> logits = tensor_to_f32(*cm.m.logits);
  EXPECT_TRUE(logits.ok()) << logits.status().to_string();
  return logits.ok() ? *logits : std::vector<float>{};
}

}  // namespace

TEST(LlamaBuilder, PresetsBuildMetadataOnly) {
  for (const std::string& name : preset_names()) {
    Result<LlamaConfig> c = preset(name);
    ASSERT_TRUE(c.ok()) << name;
    EXPECT_EQ(c->name, name);
    Result<LlamaGraph> m = build_llama(*c);
    ASSERT_TRUE(m.ok()) << name << ": " << m.status().to_string();
    EXPECT_EQ(m->layers.size(), static_cast<size_t>(c->n_layer));
    EXPECT_EQ(m->kv_cache.size(), 2 * static_cast<size_t>(c->n_layer));
    EXPECT_EQ(m->logits->ne[0], c->n_vocab);
    EXPECT_EQ(m->logits->ne[1], c->n_tokens);
    EXPECT_TRUE(m->logits->flags & kFlagOutput);
    for (Tensor* w : m->weights) EXPECT_EQ(w->data, nullptr) << w->name;  // nothing allocated
  }
  Result<LlamaConfig> bad = preset("13b");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("tiny"));
}

TEST(LlamaBuilder, PresetShapes) {
  Result<LlamaConfig> moe = preset("8x7b-moe");
  ASSERT_TRUE(moe.ok());
  EXPECT_EQ(moe->n_expert, 8);
  EXPECT_EQ(moe->n_expert_used, 2);
  EXPECT_EQ(moe->n_ff, 14336);
  Result<LlamaConfig> big = preset("70b");
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->n_layer, 80);
  EXPECT_EQ(big->n_embd, 8192);
  EXPECT_EQ(big->n_head_kv, 8);
  EXPECT_EQ(big->n_ff, 28672);
}

TEST(LlamaBuilder, InvalidConfigsAreErrors) {
  auto expect_error = [](LlamaConfig c, const char* what) {
    Result<LlamaGraph> m = build_llama(c);
    ASSERT_FALSE(m.ok()) << what;
    EXPECT_EQ(m.status().code(), StatusCode::kInvalidArgument) << what;
    EXPECT_THAT(m.status().message(), HasSubstr(what));
  };
  LlamaConfig c = tiny(false, true);
  c.n_head = 5;
  expect_error(c, "n_head");
  c = tiny(false, true);
  c.n_head_kv = 3;
  expect_error(c, "n_head_kv");
  c = tiny(false, true);
  c.n_kv = c.n_ctx + 1;
  expect_error(c, "n_kv");
  c = tiny(false, true);
  c.n_tokens = c.n_ctx + 1;
  expect_error(c, "n_tokens");
  c = tiny(true, true);
  c.n_expert_used = 5;
  expect_error(c, "n_expert_used");
  c = tiny(false, true);
  c.n_ff = 100;  // not a multiple of the q4_0 block
  expect_error(c, "multiples of 32");
  c = tiny(false, true);
  c.n_layer = 0;
  expect_error(c, "n_layer");
  // A quantized cache: V is read transposed without flash attention, and the cache is viewed per head.
  c = tiny(false, false);
  c.n_embd = 128;           // head_dim 32
  c.kv_type = Type::kQ8_0;  // (and V, unless v_cache_type says otherwise)
  expect_error(c, "a q8_0 V cache needs flash attention");
  c.v_cache_type = Type::kF16;
  EXPECT_TRUE(validate(c).ok()) << "a quantized K is read head by head, with or without flash attention";
  c.v_cache_type = Type::kQ8_0;
  expect_error(c, "a q8_0 V cache needs flash attention");
  c.kv_type = Type::kF16;
  expect_error(c, "a q8_0 V cache needs flash attention");
  c = tiny(false, true);  // head_dim 16
  c.kv_type = Type::kQ8_0;
  expect_error(c, "head_dim 16 (n_embd / n_head) must be a multiple of the q8_0 block size");
}

TEST(LlamaBuilder, GgufNamesAndShapes) {
  Result<LlamaGraph> dense = build_llama(tiny(false, true));
  ASSERT_TRUE(dense.ok());
  Tensor* q = dense->weights_ctx->find("blk.1.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q, dense->layers[1].wq);
  EXPECT_EQ(dense->layer_of(q), 1);
  EXPECT_EQ(dense->layers[0].wk->ne[1], 32);  // head_dim 16 x 2 KV heads
  EXPECT_NE(dense->weights_ctx->find("token_embd.weight"), nullptr);
  EXPECT_NE(dense->weights_ctx->find("output.weight"), nullptr);
  EXPECT_EQ(dense->layer_of(dense->output), -1);
  Tensor* kc = dense->cache_ctx->find("cache_k_l1");
  ASSERT_NE(kc, nullptr);
  EXPECT_EQ(dense->layer_of(kc), 1);
  EXPECT_EQ(kc->ne[0], 32);
  EXPECT_EQ(kc->ne[1], 64);
  EXPECT_EQ(kc->type, Type::kF16);

  Result<LlamaGraph> moe = build_llama(tiny(true, true));
  ASSERT_TRUE(moe.ok());
  Tensor* up = moe->weights_ctx->find("blk.0.ffn_up_exps.weight");
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->ne[0], 64);
  EXPECT_EQ(up->ne[1], 128);
  EXPECT_EQ(up->ne[2], 4);
  EXPECT_NE(moe->weights_ctx->find("blk.1.ffn_gate_inp.weight"), nullptr);
  EXPECT_EQ(moe->weights_ctx->find("blk.0.ffn_up.weight"), nullptr);
  EXPECT_NE(moe->ctx->find("ffn_moe_topk-1"), nullptr);
  for (Tensor* in : moe->inputs()) EXPECT_TRUE(in->flags & kFlagInput) << in->name;
}

TEST(LlamaBuilder, OpsOfEachVariant) {
  for (bool moe : {false, true}) {
    for (bool fa : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "moe " << moe << " fa " << fa);
      LlamaConfig c = tiny(moe, fa);
      Result<LlamaGraph> m = build_llama(c);
      ASSERT_TRUE(m.ok()) << m.status().to_string();
      std::map<Op, int> ops = op_counts(*m->graph);
      const int L = c.n_layer;
      EXPECT_EQ(ops[Op::kSetRows], 2 * L);
      EXPECT_EQ(ops[Op::kRope], 2 * L);
      EXPECT_EQ(ops[Op::kGetRows], 1 + (moe ? L : 0));
      EXPECT_EQ(ops[Op::kFlashAttnExt], fa ? L : 0);
      EXPECT_EQ(ops[Op::kSoftMax], (fa ? 0 : L) + (moe ? L : 0));
      EXPECT_EQ(ops[Op::kMulMatId], moe ? 3 * L : 0);
      EXPECT_EQ(ops[Op::kTopK], moe ? L : 0);
      EXPECT_EQ(ops[Op::kRmsNorm], 2 * L + 1);
      // Q, K, V, O + (dense: gate, up, down | MoE: router) + (non-FA: KQ, KQV) per layer, and the output.
      EXPECT_EQ(ops[Op::kMulMat], L * (4 + (moe ? 1 : 3) + (fa ? 0 : 2)) + 1);
      // Every SET_ROWS precedes the views reading its cache.
      for (size_t i = 0; i < m->graph->n_nodes(); ++i) {
        const Tensor* n = m->graph->node(i);
        if (n->op == Op::kView && n->src[0]->op == Op::kSetRows) {
          EXPECT_TRUE(m->graph->visited(n->src[0]));
        }
      }
      EXPECT_EQ(m->graph->node_at(-1), m->logits);
    }
  }
}

TEST(LlamaBuilder, NodeCountPerLayerIsStable) {
  for (bool moe : {false, true}) {
    for (bool fa : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "moe " << moe << " fa " << fa);
      std::vector<size_t> nodes, leafs;
      for (int layers = 1; layers <= 4; ++layers) {
        LlamaConfig c = tiny(moe, fa);
        c.n_layer = layers;
        Result<LlamaGraph> m = build_llama(c);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        nodes.push_back(m->graph->n_nodes());
        leafs.push_back(m->graph->n_leafs());
      }
      for (size_t i = 2; i < nodes.size(); ++i) {
        EXPECT_EQ(nodes[i] - nodes[i - 1], nodes[1] - nodes[0]);
        EXPECT_EQ(leafs[i] - leafs[i - 1], leafs[1] - leafs[0]);
      }
      EXPECT_GT(nodes[1] - nodes[0], 15u);
    }
  }
}

TEST(LlamaBuilder, TinyComputesFiniteLogitsOnCpu) {
  for (bool moe : {false, true}) {
    for (bool fa : {false, true}) {
      SCOPED_TRACE(::testing::Message() << "moe " << moe << " fa " << fa);
      LlamaConfig c = tiny(moe, fa);
      std::vector<float> logits = compute_logits(c, 1234);
      ASSERT_EQ(logits.size(), static_cast<size_t>(c.n_vocab * c.n_tokens));
      double sumsq = 0;
      for (float v : logits) {
        ASSERT_TRUE(std::isfinite(v));
        sumsq += double(v) * v;
      }
      EXPECT_GT(sumsq, 0.0);
    }
  }
}

TEST(LlamaBuilder, FlashAttentionMatchesSoftMaxPath) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "moe " << moe);
    std::vector<float> fa = compute_logits(tiny(moe, true), 77);
    std::vector<float> ref = compute_logits(tiny(moe, false), 77);
    ASSERT_EQ(fa.size(), ref.size());
    ASSERT_FALSE(fa.empty());
    NmseResult r = nmse(ref.data(), fa.data(), ref.size());
    EXPECT_FALSE(r.nan_mismatch);
    EXPECT_LE(r.nmse, 1e-6);
  }
}

TEST(LlamaBuilder, SameSeedSameLogitsDifferentSeedDifferent) {
  const LlamaConfig c = tiny(false, true);
  std::vector<float> a = compute_logits(c, 5), b = compute_logits(c, 5), d = compute_logits(c, 6);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, d);
}

// Each weight has its own stream and each value depends on its index only: the thread count changes nothing.
TEST(LlamaBuilder, RandomWeightsDoNotDependOnTheThreadCount) {
  LlamaConfig c = tiny(false, true);
  c.n_vocab = 4096;  // token_embd and output: 256 Ki values each, split over several threads
  auto bytes_with = [&](int threads) {
    CpuModel cm = make_cpu_model(c, 3);
    EXPECT_TRUE(fill_random(cm.m, 9, threads).ok());
    std::vector<uint8_t> all;
    for (const std::vector<Tensor*>* list : {&cm.m.weights, &cm.m.kv_cache}) {
      for (const Tensor* t : *list) {
        std::vector<uint8_t> b(nbytes(*t));
        EXPECT_TRUE(tensor_get(*t, b.data(), 0, b.size()).ok());
        all.insert(all.end(), b.begin(), b.end());
      }
    }
    return all;
  };
  const std::vector<uint8_t> one = bytes_with(1);
  EXPECT_EQ(one, bytes_with(3));
  EXPECT_EQ(one, bytes_with(0));  // one thread per hardware thread
}

TEST(LlamaBuilder, OutputRowsMatchTheFullBatch) {
  for (bool moe : {false, true}) {
    SCOPED_TRACE(::testing::Message() << "moe " << moe);
    LlamaConfig c = tiny(moe, true);
    std::vector<float> full = compute_logits(c, 9);
    c.n_outputs = 2;
    Result<LlamaGraph> m = build_llama(c);
    ASSERT_TRUE(m.ok());
    ASSERT_NE(m->out_ids, nullptr);
    EXPECT_EQ(m->logits->ne[1], 2);
    std::vector<float> last = compute_logits(c, 9);
    ASSERT_EQ(last.size(), static_cast<size_t>(2 * c.n_vocab));
    const std::vector<float> tail(full.end() - 2 * c.n_vocab, full.end());
    NmseResult r = nmse(tail.data(), last.data(), tail.size());
    EXPECT_LE(r.nmse, 1e-10);
  }
}

TEST(LlamaBuilder, CacheRowsAreWritten) {
  LlamaConfig c = tiny(false, true);
  CpuModel cm = make_cpu_model(c, 3);
  Tensor* k0 = cm.m.layers[0].k_cache;
  Result<std::vector<float>> before = tensor_to_f32(*k0);
  ASSERT_TRUE(before.ok());
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 1});
  ASSERT_EQ(backend->graph_compute(*cm.m.graph), ComputeStatus::kSuccess) << backend->last_error();
  Result<std::vector<float>> after = tensor_to_f32(*k0);
  ASSERT_TRUE(after.ok());
  const size_t row = static_cast<size_t>(c.n_embd_kv());
  const size_t first_new = static_cast<size_t>(c.kv_len() - c.n_tokens);
  for (size_t slot = 0; slot < static_cast<size_t>(c.n_ctx); ++slot) {
    const bool written = slot >= first_new && slot < first_new + static_cast<size_t>(c.n_tokens);
    const bool same =
        std::equal(before->begin() + slot * row, before->begin() + (slot + 1) * row, after->begin() + slot * row);
    EXPECT_EQ(same, !written) << "slot " << slot;
  }
}

// A sliding-window model with fewer layers than its pattern has no global layer (and gpt-oss with one layer none
// but its sliding-window one): the mask no layer reads is no input, and the inputs are written without it (before,
// `tessera run -m tiny-gemma3 --layers 3` failed: "tensor 'inp_kq_mask' ... is not allocated").
TEST(LlamaBuilder, AMaskNoLayerReadsIsNoInput) {
  for (const auto& [name, layers] : std::vector<std::pair<std::string, int>>{{"tiny-gemma3", 3}, {"tiny-gpt-oss", 1}}) {
    SCOPED_TRACE(name);
    LlamaConfig c = preset(name).value();
    c.n_layer = layers;
    ASSERT_TRUE(c.has_swa());
    auto built = build_llama(c);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    LlamaGraph& m = built.value();
    EXPECT_EQ(m.mask, nullptr);
    ASSERT_NE(m.mask_swa, nullptr);
    for (const Tensor* t : m.inputs()) EXPECT_STRNE(t->name, "inp_kq_mask");
    // the graph computes on the CPU with the inputs written
    auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());
    auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());
    ASSERT_TRUE(wb.ok() && cb.ok());
    ASSERT_TRUE(fill_random(m, 3).ok());
    GraphPlanner planner(cpu::buffer_type());
    ASSERT_TRUE(planner.alloc_graph(*m.graph).ok());
    const Status set = set_inputs(m, default_inputs(c, 3));
    ASSERT_TRUE(set.ok()) << set.to_string();
    auto backend = cpu::make_backend();
    EXPECT_EQ(backend->graph_compute(*m.graph), ComputeStatus::kSuccess) << backend->last_error();
  }
  // with its global layer, gemma 3 has both masks
  LlamaConfig c = preset("tiny-gemma3").value();
  auto built = build_llama(c);
  ASSERT_TRUE(built.ok());
  EXPECT_NE(built->mask, nullptr);
  EXPECT_NE(built->mask_swa, nullptr);
}

// A sliding-window cache smaller than the context (n_ctx_swa, llama.cpp's iSWA cache): the sliding-window layers
// attend to its kv_len_swa() cells, the last positions up to the new tokens', so their mask has that many columns
// (before, default_inputs gave them the full mask: `tessera bench -m gpt-oss-120b-mxfp4 ... -d 6000` failed with
// "the sliding-window mask needs 393216 values, got 3407872"). tiny-gpt-oss: 8 tokens at positions 56..63 of 64
// cells, window 16, a sliding-window cache of 16 cells: the cells hold positions 48..63, and token i (position
// 56 + i) sees the positions in (40 + i, 56 + i]: cells 0 .. 8 + i, every cell before its own and none after it.
TEST(LlamaBuilder, SlidingWindowMaskOfASmallerCache) {
  LlamaConfig c = preset("tiny-gpt-oss").value();
  c.n_ctx_swa = 16;
  const LlamaInputs in = default_inputs(c, 1);
  ASSERT_EQ(in.mask_swa.size(), 16u * 8);
  for (int64_t i = 0; i < 8; ++i) {
    for (int64_t j = 0; j < 16; ++j) {
      const bool seen = j <= 8 + i;
      EXPECT_EQ(in.mask_swa[static_cast<size_t>(i * 16 + j)] == 0.0f, seen) << "token " << i << ", cell " << j;
    }
  }
  auto built = build_llama(c);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  GraphPlanner planner(cpu::buffer_type());
  ASSERT_TRUE(planner.alloc_graph(*built->graph).ok());
  const Status set = set_inputs(built.value(), in);
  EXPECT_TRUE(set.ok()) << set.to_string();
}
