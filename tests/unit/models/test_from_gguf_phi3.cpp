// The phi3 architecture from GGUF files (models/from_gguf.cpp): Phi-3-mini-4k's header-only fixture
// (models/fixtures.cpp) built into llama.cpp's phi3 graph (src/models/phi3.cpp of ggml-org/llama.cpp:
// llama_model_phi3's load_arch_hparams, load_arch_tensors and graph; build_qkv and build_ffn in src/llama-graph.cpp;
// get_rope_factors in src/llama-model.cpp), and the keys' errors.
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

gguf::File phi3_mini() { return fixture("phi-3-mini-q4_k_m"); }

gguf::File with_rope_factors(gguf::File f, bool long_factors, bool short_factors) {
  if (long_factors) f.add_tensor("rope_factors_long.weight", gguf::TensorType::kF32, {48});
  if (short_factors) f.add_tensor("rope_factors_short.weight", gguf::TensorType::kF32, {48});
  EXPECT_TRUE(f.layout().ok());
  return f;
}

// microsoft/Phi-3-mini-4k-instruct config.json: hidden_size 3072, intermediate_size 8192, num_hidden_layers 32,
// num_attention_heads 32, num_key_value_heads 32, vocab_size 32064, max_position_embeddings 4096,
// original_max_position_embeddings 4096, rope_theta 10000.0, rms_norm_eps 1e-05, sliding_window 2047,
// rope_scaling null, tie_word_embeddings false.
TEST(FromGgufPhi3, Phi3MiniFixtureUsesEveryTensorOnce) {
  const gguf::File f = phi3_mini();
  auto m = build(f, {.n_ctx = 4096, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "phi3");
  EXPECT_EQ(c.n_layer, 32);
  EXPECT_EQ(c.n_embd, 3072);
  EXPECT_EQ(c.n_ff, 8192);
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.n_head_kv, 32);
  EXPECT_EQ(c.head_dim(), 96);
  EXPECT_EQ(c.n_vocab, 32064);
  EXPECT_EQ(c.n_ctx_orig, 4096);
  EXPECT_FLOAT_EQ(c.rope_base, 10000.0f);
  EXPECT_FLOAT_EQ(c.rope_scale, 1.0f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-5f);
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(96.0f));
  EXPECT_TRUE(c.fused_qkv && c.fused_up);
  EXPECT_FALSE(c.tied_output || c.rope_factors_ls || c.attn_qk_norm || c.post_norms || c.ffn_gelu);
  EXPECT_EQ(c.rope_mode, RopeMode::kNeox);
  EXPECT_EQ(c.weight_type, Type::kQ5_K);  // attn_qkv's
  // llama.cpp turns Phi's sliding window (2047 in the file) off: one causal mask for every layer.
  EXPECT_FALSE(c.has_swa());
  EXPECT_EQ(m->mask_swa, nullptr);
  expect_uses_the_file_exactly(m.value(), f);

  // Per layer: one QKV projection viewed as Q (offset 0), K (3072 floats on) and V (6144 on) with the projection's
  // row stride; NEOX rope of all 96 values of each head without factors; Q scaled by 1 / sqrt(96) after rope and
  // the flash attention's scale 1; a single-input SWIGLU of ffn_up's 2 x 8192 outputs.
  int qkv = 0, views = 0, q_scaled = 0, glu = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op == Op::kMulMat && std::string(t->src[0]->name).ends_with("attn_qkv.weight")) {
      ++qkv;
      EXPECT_EQ(t->ne[0], 3 * 3072);
    }
    if (t->op == Op::kRope) {
      EXPECT_EQ(t->op_params[0], 96) << t->name;
      EXPECT_EQ(t->op_params[1], static_cast<int32_t>(RopeMode::kNeox)) << t->name;
      EXPECT_EQ(t->src[2], nullptr) << t->name;
      const Tensor* view = t->src[0];
      ASSERT_EQ(view->op, Op::kView) << t->name;
      EXPECT_EQ(view->nb[2], view->view_src->nb[1]) << t->name;
      EXPECT_EQ(view->view_offs, std::string(t->name).starts_with("Qcur") ? 0u : 3072u * 4) << t->name;
      ++views;
    }
    if (t->op == Op::kScale && std::string(t->name).starts_with("Qcur_scaled")) {
      ++q_scaled;
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 0), 1.0f / std::sqrt(96.0f));
    }
    if (t->op == Op::kFlashAttnExt) {
      EXPECT_FLOAT_EQ(get_op_param<float>(*t, 0), 1.0f) << t->name;
    }
    if (t->op == Op::kSetRows && t->src[0]->name == std::string("cache_v_l0")) {
      EXPECT_EQ(t->src[1]->view_offs, 6144u * 4);
      EXPECT_EQ(t->src[1]->ne[0], 3072);
    }
    if (t->op == Op::kGlu) {
      ++glu;
      EXPECT_EQ(t->op_params[0], static_cast<int32_t>(GluOp::kSwiglu));
      EXPECT_EQ(t->op_params[1], 0);  // not swapped: SiLU of the first half (the gate)
      EXPECT_EQ(t->src[1], nullptr);
      EXPECT_EQ(t->src[0]->ne[0], 2 * 8192);
      EXPECT_EQ(t->ne[0], 8192);
    }
  }
  EXPECT_EQ(qkv, 32);
  EXPECT_EQ(views, 2 * 32);
  EXPECT_EQ(q_scaled, 32);
  EXPECT_EQ(glu, 32);
  EXPECT_EQ(count_ops(m.value(), Op::kRmsNorm), 2 * 32 + 1);
  EXPECT_EQ(m->logits->src[0], m->output);
}

// LongRoPE (Phi-3-mini-128k): the short factors while the context is at most original_context_length, the long ones
// above (llama_model::get_rope_factors: n_ctx_seq > n_ctx_orig_yarn).
TEST(FromGgufPhi3, LongRopeFactorsAreChosenByTheContext) {
  const gguf::File f = with_rope_factors(phi3_mini(), true, true);
  for (int64_t n_ctx : {4096, 8192}) {
    auto m = build(f, {.n_ctx = n_ctx});
    ASSERT_TRUE(m.ok()) << m.status().message();
    ASSERT_NE(m->rope_long, nullptr);
    ASSERT_NE(m->rope_short, nullptr);
    const Tensor* want = n_ctx > 4096 ? m->rope_long : m->rope_short;
    int roped = 0;
    for (const Tensor* t : m->graph->nodes()) {
      if (t->op != Op::kRope) continue;
      EXPECT_EQ(t->src[2], want) << n_ctx << " " << t->name;
      ++roped;
    }
    EXPECT_EQ(roped, 2 * 32);
  }
  // Only one of the two: named.
  auto m = build(with_rope_factors(phi3_mini(), true, false));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor rope_factors_short.weight is missing"));
  // original_context_length defaults to context_length.
  m = build(without_key(with_rope_factors(phi3_mini(), true, true), "phi3.rope.scaling.original_context_length"),
            {.n_ctx = 8192});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.n_ctx_orig, 4096);
  EXPECT_TRUE(m->config.rope_long());
}

TEST(FromGgufPhi3, MissingOrUnsupportedKeysAreNamed) {
  auto m = build(without_key(phi3_mini(), "phi3.attention.layer_norm_rms_epsilon"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key phi3.attention.layer_norm_rms_epsilon"));
  gguf::File f = phi3_mini();
  f.set("phi3.rope.scaling.attn_factor", gguf::Value::f32(-1.0f));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("phi3.rope.scaling.attn_factor: -1.000000 must be positive and finite"));
  f = phi3_mini();
  f.set("phi3.rope.scaling.type", gguf::Value::string("yarn"));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("phi3.rope.scaling.type"));
  f = phi3_mini();
  f.set("phi3.attention.head_count", gguf::Value::u32(35));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("not a multiple of phi3.attention.head_count"));
  // A sliding window of 0 (Phi-4) or none is the same graph.
  m = build(without_key(phi3_mini(), "phi3.attention.sliding_window"));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->config.has_swa());
}

// LongRoPE's attention factor (rope.scaling.attn_factor, 1.19 in the 128k files): llama.cpp multiplies the context's
// yarn_attn_factor by it (src/llama-context.cpp) and passes it to every ggml_rope_ext with ext_factor 0: ROPE's
// attn_factor, which scales cos and sin, with no YaRN ramp. Every ROPE of the graph carries it (op_params slot 6, with
// ext_factor 0 in slot 5); without the key the ROPEs keep the plain four-parameter form.
TEST(FromGgufPhi3, LongRopeAttentionFactorScalesEveryRope) {
  gguf::File f = with_rope_factors(phi3_mini(), true, true);
  f.set("phi3.rope.scaling.attn_factor", gguf::Value::f32(1.19f));
  auto m = build(f, {.n_ctx = 8192});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.rope_yarn.attn_factor, 1.19f);
  EXPECT_EQ(m->config.rope_yarn.ext_factor, 0.0f);
  int roped = 0;
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op != Op::kRope) continue;
    ++roped;
    EXPECT_EQ(get_op_param<float>(*t, 5), 0.0f) << t->name;
    EXPECT_EQ(get_op_param<float>(*t, 6), 1.19f) << t->name;
    EXPECT_EQ(t->src[2], m->rope_long) << t->name;
  }
  EXPECT_EQ(roped, 2 * 32);
  m = build(with_rope_factors(phi3_mini(), true, true), {.n_ctx = 8192});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->config.rope_yarn.is_default());
  for (const Tensor* t : m->graph->nodes()) {
    if (t->op == Op::kRope) {
      EXPECT_EQ(t->op_params[6], 0) << t->name;
    }
  }
}

// microsoft/Phi-3.5-mini-instruct (its fixture: Phi-3-mini's shapes, LongRoPE over 131072 / 4096 positions,
// rope.scaling.attn_factor sqrt(1 + ln 32 / ln 4096) = 1.1902): the short factors up to 4096 cells of cache, the long
// ones above; the attention factor on every ROPE either way.
TEST(FromGgufPhi3, Phi35MiniFixtureBuildsWithItsLongRope) {
  const gguf::File f = fixture("phi-3.5-mini-q4_k_m");
  for (int64_t n_ctx : {4096, 16384}) {
    auto m = build(f, {.n_ctx = n_ctx, .n_tokens = 4});
    ASSERT_TRUE(m.ok()) << m.status().message();
    const LlamaConfig& c = m->config;
    EXPECT_EQ(c.n_ctx_orig, 4096);
    EXPECT_TRUE(c.rope_factors_ls);
    EXPECT_NEAR(c.rope_yarn.attn_factor, std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)), 1e-6);
    EXPECT_EQ(c.rope_yarn.ext_factor, 0.0f);
    EXPECT_FALSE(c.has_swa());  // sliding_window 262144 in the file, not used (Phi SWA disabled)
    const Tensor* want = n_ctx > 4096 ? m->rope_long : m->rope_short;
    for (const Tensor* t : m->graph->nodes()) {
      if (t->op == Op::kRope) {
        EXPECT_EQ(t->src[2], want) << n_ctx << " " << t->name;
      }
    }
    // Every tensor of the file is a weight (check_against_file refuses an unused one); of the two factor tensors only
    // the chosen one is read, by every ROPE, so expect_uses_the_file_exactly's one reader per weight does not apply.
    EXPECT_EQ(m->weights.size(), f.tensors.size());
  }
}

// microsoft/phi-4 (ollama's phi4 metadata in jazzwang/snippet md/genai/llm/phi.md: 40 layers, embedding_length 5120,
// 40 / 10 heads, feed_forward_length 17920, rope.freq_base 250000, sliding_window 0, 100352 tokens): grouped-query
// heads of 128, so attn_qkv is [5120, 5120 + 2 x 1280]; no LongRoPE, no attention factor.
TEST(FromGgufPhi3, Phi4FixtureUsesEveryTensorOnce) {
  const gguf::File f = fixture("phi-4-q4_k_m");
  auto m = build(f, {.n_ctx = 4096, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.n_head_kv, 10);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.n_ff, 17920);
  EXPECT_EQ(c.n_vocab, 100352);
  EXPECT_FLOAT_EQ(c.rope_base, 250000.0f);
  EXPECT_FALSE(c.rope_factors_ls);
  EXPECT_TRUE(c.rope_yarn.is_default());
  EXPECT_FLOAT_EQ(c.attn_scale, 1.0f / std::sqrt(128.0f));
  EXPECT_EQ(m->layers[0].wqkv->ne[1], 5120 + 2 * 1280);
  expect_uses_the_file_exactly(m.value(), f);
}

TEST(FromGgufPhi3, MissingOrMisshapenTensorsAreNamed) {
  gguf::File f = phi3_mini();
  std::erase_if(f.tensors, [](const gguf::TensorInfo& t) { return t.name == "blk.3.attn_qkv.weight"; });
  ASSERT_TRUE(f.layout().ok());
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.3.attn_qkv.weight is missing"));
  // ffn_up of n_ff rows (an unfused file) is not phi3's [n_embd, 2 n_ff].
  f = phi3_mini();
  for (gguf::TensorInfo& t : f.tensors) {
    if (t.name == "blk.0.ffn_up.weight") t.ne[1] = 8192;
  }
  ASSERT_TRUE(f.layout().ok());
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.ffn_up.weight: the file has [3072, 8192]"));
}

// create_tensor_qkv takes separate blk.N.attn_{q,k,v}.weight when there is no fused one.
TEST(FromGgufPhi3, SeparateQkvProjectionsAreBuiltToo) {
  gguf::File f = phi3_mini();
  std::vector<std::string> layers;
  std::erase_if(f.tensors, [](const gguf::TensorInfo& t) { return t.name.ends_with("attn_qkv.weight"); });
  for (int il = 0; il < 32; ++il) {
    for (const char* w : {"attn_q", "attn_k", "attn_v"}) {
      f.add_tensor("blk." + std::to_string(il) + "." + w + ".weight", gguf::TensorType::kQ4_K, {3072, 3072});
    }
  }
  ASSERT_TRUE(f.layout().ok());
  auto m = build(f, {.n_ctx = 512});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_FALSE(m->config.fused_qkv);
  EXPECT_TRUE(m->config.fused_up);
  EXPECT_EQ(m->layers[5].wqkv, nullptr);
  EXPECT_NE(m->layers[5].wk, nullptr);
  expect_uses_the_file_exactly(m.value(), f);
}

}  // namespace
