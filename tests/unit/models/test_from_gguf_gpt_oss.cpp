// The gpt-oss architecture from GGUF files (models/from_gguf.cpp): gpt-oss-20b's header-only fixture
// (models/fixtures.cpp) built into llama.cpp's gpt-oss graph (ggml-org/llama.cpp src/models/openai-moe.cpp,
// llama_model_openai_moe: load_arch_hparams, load_arch_tensors and the graph; build_moe_ffn in src/llama-graph.cpp),
// the keys' and tensors' errors, and YaRN's refusal of a memory-backed compute.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "unit/models/from_gguf_checks.h"

using namespace tessera;
using namespace tessera::models;
using namespace tessera::models::testing;
using ::testing::HasSubstr;

namespace {

gguf::File gpt_oss_20b() { return fixture("gpt-oss-20b-mxfp4"); }

// The bytes of a complete GGUF file of the model `c` with seeded random weights (seed 1), written by complete_gguf.
Result<std::vector<uint8_t>> complete_bytes(const LlamaConfig& c) {
  auto g = build_llama(c);
  if (!g.ok()) return g.status();
  auto wbuf = alloc_ctx_tensors(*g->weights_ctx, *cpu::buffer_type());  // (held while in use)
  if (!wbuf.ok()) return wbuf.status();
  auto cbuf = alloc_ctx_tensors(*g->cache_ctx, *cpu::buffer_type());  // (held while in use)
  if (!cbuf.ok()) return cbuf.status();
  if (Status st = fill_random(g.value(), 1); !st.ok()) return st;
  return complete_gguf(g.value());
}

// openai/gpt-oss-20b config.json: hidden_size 2880, intermediate_size 2880, num_hidden_layers 24,
// num_attention_heads 64, num_key_value_heads 8, head_dim 64, num_local_experts 32, num_experts_per_tok 4,
// vocab_size 201088, rope_theta 150000, rope_scaling yarn factor 32, sliding_window 128, layer_types alternating
// "sliding_attention" (layer 0) and "full_attention", rms_norm_eps 1e-05, swiglu_limit 7.0.
TEST(FromGgufGptOss, GptOss20bFixtureUsesEveryTensorOnce) {
  const gguf::File f = gpt_oss_20b();
  auto m = build(f, {.n_ctx = 4096, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "gpt-oss");
  EXPECT_EQ(c.n_layer, 24);
  EXPECT_EQ(c.n_embd, 2880);
  EXPECT_EQ(c.n_ff, 2880);
  EXPECT_EQ(c.n_head, 64);
  EXPECT_EQ(c.n_head_kv, 8);
  EXPECT_EQ(c.head_dim(), 64);  // not 2880 / 64 = 45
  EXPECT_EQ(c.n_expert, 32);
  EXPECT_EQ(c.n_expert_used, 4);
  EXPECT_EQ(c.n_vocab, 201088);
  EXPECT_EQ(c.n_swa, 128);
  EXPECT_EQ(c.swa_pattern, 2);
  EXPECT_FLOAT_EQ(c.rope_base, 150000.0f);
  EXPECT_FLOAT_EQ(c.rope_base_swa, 150000.0f);
  EXPECT_FLOAT_EQ(c.rope_scale, 1.0f / 32.0f);
  EXPECT_FLOAT_EQ(c.rope_scale_swa, 1.0f / 32.0f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_EQ(c.rope_mode, RopeMode::kNeox);
  EXPECT_TRUE(c.attn_bias && c.attn_out_bias && c.attn_sinks && c.moe_bias && c.moe_softmax_weight);
  EXPECT_FALSE(c.moe_norm_weights || c.tied_output || c.attn_qk_norm || c.post_norms);
  // YaRN from rope.scaling.{type, factor, original_context_length} and llama.cpp's defaults (ext_factor 1 for yarn,
  // beta_fast 32, beta_slow 1, attn_factor 1): computed, not refused; every ROPE of the graph has it.
  EXPECT_EQ(c.compute_refusal, "");
  EXPECT_EQ(c.rope_yarn.n_ctx_orig, 4096);
  EXPECT_EQ(c.rope_yarn.ext_factor, 1.0f);
  EXPECT_EQ(c.rope_yarn.attn_factor, 1.0f);
  EXPECT_EQ(c.rope_yarn.beta_fast, 32.0f);
  EXPECT_EQ(c.rope_yarn.beta_slow, 1.0f);
  int ropes = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op != Op::kRope) continue;
    ++ropes;
    const RopeYarn y = rope_yarn_of(*t);
    EXPECT_EQ(y.n_ctx_orig, 4096) << t->name;
    EXPECT_EQ(y.ext_factor, 1.0f) << t->name;
    EXPECT_FLOAT_EQ(get_op_param<float>(*t, 3), 1.0f / 32.0f) << t->name;
  }
  EXPECT_EQ(ropes, 2 * 24);  // Q and K of every layer
  expect_uses_the_file_exactly(m.value(), f);

  // Layers 0, 2, ..., 22 slide (set_swa_pattern(2)); every attention has its layer's sinks.
  int fattn_swa = 0, fattn_global = 0, add_id = 0, oai = 0, top_k = 0, weights_softmax = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op == Op::kFlashAttnExt) {
      const int il = std::stoi(std::string(t->name).substr(6));  // "fattn-IL"
      EXPECT_EQ(t->src[4], m->layers[static_cast<size_t>(il)].attn_sinks) << t->name;
      EXPECT_EQ(t->src[3], il % 2 == 0 ? m->mask_swa : m->mask) << t->name;
      (il % 2 == 0 ? fattn_swa : fattn_global)++;
    }
    add_id += t->op == Op::kAddId ? 1 : 0;
    if (t->op == Op::kGlu) {
      EXPECT_EQ(t->op_params[0], static_cast<int32_t>(GluOp::kSwigluOai)) << t->name;
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 2), 1.702f);
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 3), 7.0f);
      ++oai;
    }
    if (t->op == Op::kTopK) {  // by the biased router logits, not by a softmax of them
      ASSERT_NE(t->src[0], nullptr);
      EXPECT_EQ(t->src[0]->op, Op::kAdd) << t->name;
      ++top_k;
    }
    if (t->op == Op::kSoftMax) {
      EXPECT_EQ(t->ne[0], 4) << t->name;  // over the 4 selected experts only
      ++weights_softmax;
    }
  }
  EXPECT_EQ(fattn_swa, 12);
  EXPECT_EQ(fattn_global, 12);
  EXPECT_EQ(add_id, 3 * 24);
  EXPECT_EQ(oai, 24);
  EXPECT_EQ(top_k, 24);
  EXPECT_EQ(weights_softmax, 24);
  EXPECT_EQ(count_ops(m.value(), Op::kMulMatId), 3 * 24);
}

// Without flash attention the sinks go to the SOFT_MAX of the scores (its third source).
TEST(FromGgufGptOss, WithoutFlashAttentionTheScoresSoftmaxTakesTheSinks) {
  auto m = build(gpt_oss_20b(), {.n_ctx = 512, .n_tokens = 2, .flash_attn = false});
  ASSERT_TRUE(m.ok()) << m.status().message();
  int with_sinks = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op != Op::kSoftMax || t->src[2] == nullptr) continue;
    const int il = std::stoi(std::string(t->name).substr(12));  // "kq_soft_max-IL"
    EXPECT_EQ(t->src[2], m->layers[static_cast<size_t>(il)].attn_sinks) << t->name;
    EXPECT_EQ(t->src[1], il % 2 == 0 ? m->mask_swa : m->mask) << t->name;
    ++with_sinks;
  }
  EXPECT_EQ(with_sinks, 24);
  EXPECT_EQ(count_ops(m.value(), Op::kFlashAttnExt), 0);
}

TEST(FromGgufGptOss, MissingOrInconsistentKeysAreNamed) {
  for (const char* key : {"gpt-oss.attention.sliding_window", "gpt-oss.expert_feed_forward_length",
                          "gpt-oss.attention.layer_norm_rms_epsilon", "gpt-oss.expert_count"}) {
    auto m = build(without_key(gpt_oss_20b(), key));
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_THAT(m.status().message(), HasSubstr(std::string("missing key ") + key));
  }
  gguf::File f = gpt_oss_20b();
  f.set("gpt-oss.attention.sliding_window", gguf::Value::u32(0));
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("gpt-oss.attention.sliding_window: 0 is outside [1, 2^31 - 1]"));
  f = gpt_oss_20b();
  f.set("gpt-oss.attention.sliding_window_pattern", gguf::Value::u32(0));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("gpt-oss.attention.sliding_window_pattern: 0 is outside [1, 100000]"));
  f = gpt_oss_20b();
  f.set("gpt-oss.rope.scaling.type", gguf::Value::string("longrope"));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("gpt-oss.rope.scaling.type: 'longrope' is not supported for gpt-oss (yarn, linear or none)"));
  // YaRN's keys: out of range or unsupported ones are named.
  for (auto [key, value, what] :
       {std::tuple{"gpt-oss.rope.scaling.original_context_length", gguf::Value::u32(0), "0 is outside [1, 2^31 - 1]"},
        std::tuple{"gpt-oss.rope.scaling.yarn_ext_factor", gguf::Value::f32(2.0f), "is outside [0, 1]"},
        std::tuple{"gpt-oss.rope.scaling.yarn_beta_fast", gguf::Value::f32(-1.0f), "must be positive and finite"},
        std::tuple{"gpt-oss.rope.scaling.yarn_beta_slow", gguf::Value::f32(0.0f), "must be positive and finite"},
        std::tuple{"gpt-oss.rope.scaling.attn_factor", gguf::Value::f32(NAN), "must be positive and finite"},
        std::tuple{"gpt-oss.rope.scaling.yarn_log_multiplier", gguf::Value::f32(0.1f), "is not supported"}}) {
    f = gpt_oss_20b();
    f.set(key, value);
    m = build(f);
    ASSERT_FALSE(m.ok()) << key;
    EXPECT_THAT(m.status().message(), HasSubstr(key)) << key;
    EXPECT_THAT(m.status().message(), HasSubstr(what)) << key;
  }
  f = gpt_oss_20b();
  f.set("gpt-oss.expert_used_count", gguf::Value::u32(33));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("expert_used_count 33 is more than gpt-oss.expert_count 32"));

  // Optional keys: another pattern and the local layers' own rope base.
  f = gpt_oss_20b();
  f.set("gpt-oss.attention.sliding_window_pattern", gguf::Value::u32(4));
  f.set("gpt-oss.rope.freq_base_swa", gguf::Value::f32(10000.0f));
  m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.swa_pattern, 4);
  EXPECT_TRUE(m->config.is_swa(0) && m->config.is_swa(2) && !m->config.is_swa(3));
  EXPECT_FLOAT_EQ(m->config.rope_base_swa, 10000.0f);
}

TEST(FromGgufGptOss, MissingTensorsAreNamed) {
  for (const char* name : {"blk.3.attn_sinks.weight", "blk.0.ffn_up_exps.bias", "blk.23.attn_output.bias",
                           "blk.5.ffn_gate_inp.bias", "output.weight", "blk.1.post_attention_norm.weight"}) {
    auto m = build(without_tensor(gpt_oss_20b(), name));
    ASSERT_FALSE(m.ok()) << name;
    EXPECT_THAT(m.status().message(), HasSubstr(std::string("tensor ") + name + " is missing"));
  }
  gguf::File f = gpt_oss_20b();
  f.add_tensor("blk.0.ffn_norm.weight", gguf::TensorType::kF32, {2880});
  ASSERT_TRUE(f.layout().ok());
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.ffn_norm.weight is not used by the gpt-oss architecture"));
}

// A config's compute_refusal stops a memory-backed run, with its reason. (No key sets it since YaRN computes.)
// Without rope scaling keys the rope is plain.
TEST(FromGgufGptOss, ComputeRefusalStopsAMemoryBackedRun) {
  LlamaConfig c = preset("tiny-gpt-oss").value();
  c.compute_refusal = "m.gguf: gpt-oss.rope.scaling.type is yarn: YaRN";
  LlamaGraph m = build_llama(c).value();
  auto wbuf = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());  // (held while in use)
  ASSERT_TRUE(wbuf.ok());
  auto cbuf = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());  // (held while in use)
  ASSERT_TRUE(cbuf.ok());
  const Status s = fill_random(m, 1);
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  EXPECT_THAT(s.message(), HasSubstr("memory-backed run: m.gguf: gpt-oss.rope.scaling.type is yarn"));

  gguf::File f = gpt_oss_20b();
  for (const char* key : {"gpt-oss.rope.scaling.type", "gpt-oss.rope.scaling.factor"}) f = without_key(f, key);
  auto plain = build(f);
  ASSERT_TRUE(plain.ok()) << plain.status().message();
  EXPECT_EQ(plain->config.compute_refusal, "");
  EXPECT_FLOAT_EQ(plain->config.rope_scale, 1.0f);
  EXPECT_TRUE(plain->config.rope_yarn.is_default());
}

// The tiny complete fixture reads back into its config: the preset's, with gpt-oss-20b's YaRN (the oracle test
// computes the preset with and without YaRN).
TEST(FromGgufGptOss, TinyCompleteFixtureReadsBackAsThePreset) {
  auto cfg = fixtures::complete_fixture_config("tiny-gpt-oss");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  auto bytes = complete_bytes(cfg.value());
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto file = gguf::read_memory(bytes.value(), "tiny-gpt-oss.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  auto m = build(file.value(), {.n_ctx = 64, .n_tokens = 8});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& a = m->config;
  const LlamaConfig& b = cfg.value();
  EXPECT_EQ(a.arch, "gpt-oss");
  EXPECT_EQ(a.n_layer, b.n_layer);
  EXPECT_EQ(a.head_dim(), b.head_dim());
  EXPECT_EQ(a.n_swa, b.n_swa);
  EXPECT_EQ(a.swa_pattern, b.swa_pattern);
  EXPECT_FLOAT_EQ(a.rope_base, b.rope_base);
  EXPECT_FLOAT_EQ(a.rope_base_swa, b.rope_base_swa);
  EXPECT_EQ(a.n_expert, b.n_expert);
  EXPECT_EQ(a.n_expert_used, b.n_expert_used);
  EXPECT_EQ(a.moe_norm_weights, b.moe_norm_weights);
  EXPECT_FLOAT_EQ(a.swiglu_oai_alpha, b.swiglu_oai_alpha);
  EXPECT_FLOAT_EQ(a.swiglu_oai_limit, b.swiglu_oai_limit);
  EXPECT_FLOAT_EQ(a.rope_scale, 1.0f / 32.0f);
  EXPECT_FLOAT_EQ(a.rope_scale_swa, 1.0f / 32.0f);
  EXPECT_EQ(a.rope_yarn.n_ctx_orig, 4096);
  EXPECT_EQ(a.rope_yarn.ext_factor, 1.0f);
  EXPECT_EQ(a.compute_refusal, "");
  expect_uses_the_file_exactly(m.value(), file.value());
}

// A complete tiny gpt-oss with YaRN (factor 32 over 16 trained positions, a beta_fast other than the default): the
// writer's yarn keys read back into the same parameters. (test_weights_file.cpp computes such a file: the same logits
// as the model it was written from.)
TEST(FromGgufGptOss, TinyCompleteFixtureWithYarnReadsBack) {
  auto cfg = fixtures::complete_fixture_config("tiny-gpt-oss");
  ASSERT_TRUE(cfg.ok()) << cfg.status().message();
  LlamaConfig c = cfg.value();
  c.rope_scale = c.rope_scale_swa = 1.0f / 32.0f;
  c.rope_yarn.n_ctx_orig = 16;
  c.rope_yarn.ext_factor = 1.0f;
  c.rope_yarn.beta_fast = 8.0f;
  auto bytes = complete_bytes(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  auto file = gguf::read_memory(bytes.value(), "tiny-gpt-oss-yarn.gguf");
  ASSERT_TRUE(file.ok()) << file.status().message();
  EXPECT_EQ(file->find_value("gpt-oss.rope.scaling.type")->to_string(), "'yarn'");
  auto m = build(file.value(), {.n_ctx = 64, .n_tokens = 8});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& a = m->config;
  EXPECT_FLOAT_EQ(a.rope_scale, 1.0f / 32.0f);
  EXPECT_FLOAT_EQ(a.rope_scale_swa, 1.0f / 32.0f);
  EXPECT_EQ(a.rope_yarn.n_ctx_orig, 16);
  EXPECT_EQ(a.rope_yarn.ext_factor, 1.0f);
  EXPECT_EQ(a.rope_yarn.attn_factor, 1.0f);
  EXPECT_EQ(a.rope_yarn.beta_fast, 8.0f);
  EXPECT_EQ(a.rope_yarn.beta_slow, 1.0f);
  EXPECT_EQ(a.compute_refusal, "");
}

}  // namespace
