// The gemma3 architecture from GGUF files (models/from_gguf.cpp): Gemma 3 12B's header-only fixture
// (models/fixtures.cpp) built into llama.cpp's gemma3 graph (src/models/gemma3.cpp of ggml-org/llama.cpp, with
// src/llama-model.cpp's load_hparams and load_tensors for LLM_ARCH_GEMMA3), and the keys' errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "unit/models/from_gguf_checks.h"

using namespace tessera;
using namespace tessera::models;
using namespace tessera::models::testing;
using ::testing::HasSubstr;

namespace {

gguf::File gemma3_12b() { return fixture("gemma-3-12b-q4_k_m"); }

// google/gemma-3-12b-it config.json (text_config): hidden_size 3840, intermediate_size 15360, num_hidden_layers 48,
// num_attention_heads 16, num_key_value_heads 8, head_dim 256, vocab_size 262208, rope_theta 1000000 with
// rope_scaling linear factor 8 (global layers), rope_local_base_freq 10000, sliding_window 1024,
// sliding_window_pattern 6, query_pre_attn_scalar 256, rms_norm_eps 1e-06, tied embeddings.
TEST(FromGgufGemma3, Gemma3_12bFixtureUsesEveryTensorOnce) {
  const gguf::File f = gemma3_12b();
  auto m = build(f, {.n_ctx = 4096, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "gemma3");
  EXPECT_EQ(c.n_layer, 48);
  EXPECT_EQ(c.n_embd, 3840);
  EXPECT_EQ(c.n_ff, 15360);
  EXPECT_EQ(c.n_head, 16);
  EXPECT_EQ(c.n_head_kv, 8);
  EXPECT_EQ(c.head_dim(), 256);  // not 3840 / 16 = 240
  EXPECT_EQ(c.n_vocab, 262208);
  EXPECT_FLOAT_EQ(c.rope_base, 1000000.0f);
  EXPECT_FLOAT_EQ(c.rope_scale, 1.0f / 8.0f);
  EXPECT_FLOAT_EQ(c.rope_base_swa, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_scale_swa, 1.0f);
  EXPECT_EQ(c.n_swa, 1024);
  EXPECT_EQ(c.swa_pattern, 6);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / 16.0f);  // query_pre_attn_scalar 256
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_TRUE(c.tied_output && c.attn_qk_norm && c.post_norms && c.ffn_gelu && c.embd_scale);
  EXPECT_EQ(c.rope_mode, RopeMode::kNeox);
  expect_uses_the_file_exactly(m.value(), f);

  // Layers 5, 11, ..., 47 are global: the full mask and the global rope; the 40 others the window's.
  int global = 0;
  for (int il = 0; il < c.n_layer; ++il) global += c.is_swa(il) ? 0 : 1;
  EXPECT_EQ(global, 8);
  int fattn_swa = 0, fattn_global = 0, rope_swa = 0, rope_global = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op == Op::kFlashAttnExt) {
      fattn_swa += t->src[3] == m->mask_swa ? 1 : 0;
      fattn_global += t->src[3] == m->mask ? 1 : 0;
    }
    if (t->op == Op::kRope) {
      EXPECT_EQ(t->op_params[0], 256) << t->name;
      EXPECT_EQ(t->op_params[1], static_cast<int32_t>(RopeMode::kNeox)) << t->name;
      const float base = get_op_param<float>(*t, 2), scale = get_op_param<float>(*t, 3);
      if (base == 10000.0f && scale == 1.0f) ++rope_swa;
      if (base == 1000000.0f && scale == 0.125f) ++rope_global;
    }
  }
  EXPECT_EQ(fattn_swa, 40);
  EXPECT_EQ(fattn_global, 8);
  EXPECT_EQ(rope_swa, 2 * 40);
  EXPECT_EQ(rope_global, 2 * 8);
  // The embeddings scaled by sqrt(3840), Q by 1/16 (the flash attention's own scale is then 1), a GEGLU per layer,
  // four RMS norms per layer with weights plus Q/K's, and the output head reads token_embd.
  const Tensor* inp_scaled = nullptr;
  int q_scaled = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op != Op::kScale) continue;
    if (std::string(t->name) == "inp_scaled") inp_scaled = t;
    if (std::string(t->name).starts_with("Qcur_scaled")) {
      ++q_scaled;
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 0), 1.0f / 16.0f);
    }
  }
  ASSERT_NE(inp_scaled, nullptr);
  EXPECT_FLOAT_EQ(get_op_param<float>(*inp_scaled, 0), std::sqrt(3840.0f));
  EXPECT_EQ(q_scaled, 48);
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op == Op::kFlashAttnExt) {
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 0), 1.0f) << t->name;
    }
    if (t->op == Op::kGlu) {
      EXPECT_EQ(t->op_params[0], static_cast<int32_t>(GluOp::kGeglu)) << t->name;
    }
  }
  EXPECT_EQ(count_ops(m.value(), Op::kGlu), 48);
  EXPECT_EQ(count_ops(m.value(), Op::kRmsNorm), 48 * 6 + 1);
  EXPECT_EQ(m->logits->src[0], m->tok_embd);
}

TEST(FromGgufGemma3, WithoutASlidingWindowEveryLayerIsGlobal) {
  // llama.cpp (LLM_ARCH_GEMMA3): attention.sliding_window absent or 0 is LLAMA_SWA_TYPE_NONE.
  auto m = build(without_key(gemma3_12b(), "gemma3.attention.sliding_window"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->config.has_swa());
  EXPECT_EQ(m->mask_swa, nullptr);
  // ... whose graph caps the logits with TANH, which Tessera does not have: refused, naming the key.
  gguf::File f = without_key(gemma3_12b(), "gemma3.attention.sliding_window");
  f.set("gemma3.final_logit_softcapping", gguf::Value::f32(30.0f));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("gemma3.final_logit_softcapping"));
}

TEST(FromGgufGemma3, MissingOrUnsupportedKeysAreNamed) {
  auto m = build(without_key(gemma3_12b(), "gemma3.attention.layer_norm_rms_epsilon"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key gemma3.attention.layer_norm_rms_epsilon"));
  gguf::File f = gemma3_12b();
  f.set("gemma3.rope.scaling.type", gguf::Value::string("yarn"));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("gemma3.rope.scaling.type"));
  f = gemma3_12b();
  f.set("gemma3.rope.scaling.factor", gguf::Value::f32(-1.0f));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("gemma3.rope.scaling.factor"));
  // Without the rope scaling keys, the global layers are not scaled.
  m = build(without_key(without_key(gemma3_12b(), "gemma3.rope.scaling.factor"), "gemma3.rope.scaling.type"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FLOAT_EQ(m->config.rope_scale, 1.0f);
}

TEST(FromGgufGemma3, AMissingPostNormIsNamed) {
  gguf::File f = gemma3_12b();
  std::erase_if(f.tensors, [](const gguf::TensorInfo& t) { return t.name == "blk.7.post_ffw_norm.weight"; });
  ASSERT_TRUE(f.layout().ok());
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.7.post_ffw_norm.weight is missing"));
}

// The 27B (62 layers) scales Q by 1 / sqrt(embedding_length / head_count), the others by 1 / sqrt(key_length)
// (llama.cpp's f_attention_scale; gemma-3-27b: hidden_size 5376, 32 heads, query_pre_attn_scalar 168 = 5376 / 32).
TEST(FromGgufGemma3, The27bScalesQueriesByItsOwnSize) {
  gguf::File f = gemma3_12b();
  for (auto [key, v] : {std::pair{"block_count", 62},
                        {"embedding_length", 5376},
                        {"attention.head_count", 32},
                        {"attention.head_count_kv", 16},
                        {"attention.key_length", 128},
                        {"attention.value_length", 128},
                        {"feed_forward_length", 21504}}) {
    f.set(std::string("gemma3.") + key, gguf::Value::u32(static_cast<uint32_t>(v)));
  }
  auto config = llama_config_from_gguf(gguf::Model::of_file(gguf::File(f)), {});
  ASSERT_TRUE(config.ok()) << config.status().message();
  EXPECT_FLOAT_EQ(config->attn_scale, 1.0f / std::sqrt(168.0f));
  EXPECT_EQ(config->head_dim(), 128);

  // The gemma-3-27b fixture (unsloth's file's metadata, ik_llama.cpp issue #539): the same scale, every tensor used.
  const gguf::File f27 = fixture("gemma-3-27b-q4_k_m");
  auto m = build(f27, {.n_ctx = 4096, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FLOAT_EQ(m->config.attn_scale, 1.0f / std::sqrt(168.0f));
  EXPECT_EQ(m->config.head_dim(), 128);
  EXPECT_EQ(m->config.n_swa, 1024);
  expect_uses_the_file_exactly(m.value(), f27);
}

}  // namespace
