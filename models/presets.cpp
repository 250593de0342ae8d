// The llama presets (see preset() in llama.h): small test models and the shapes of well-known checkpoints.
#include <cmath>
#include <string>
#include <vector>

#include "tessera/models/llama.h"

namespace tessera::models {

std::vector<std::string> preset_names() {
  return {"tiny",         "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3",
          "tiny-gpt-oss", "7b",       "8x7b-moe",   "70b"};
}

Result<LlamaConfig> preset(const std::string& name) {
  LlamaConfig c;
  c.name = name;
  if (name == "tiny" || name == "tiny-moe" || name == "tiny-qwen2" || name == "tiny-qwen3" || name == "tiny-qwen3moe" ||
      name == "tiny-gemma3" || name == "tiny-phi3" || name == "tiny-gpt-oss") {
    c.n_layer = 2;
    c.n_embd = 64;
    c.n_ff = 128;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.n_ctx = 64;
    c.n_tokens = 8;
    c.n_vocab = 256;
    if (name == "tiny-moe" || name == "tiny-qwen3moe") {
      c.n_expert = 4;
      c.n_expert_used = 2;
    }
    if (name == "tiny-qwen2") {  // llama.cpp's qwen2 graph: Q/K/V biases, NEOX rope
      c.arch = "qwen2";
      c.attn_bias = true;
      c.rope_mode = RopeMode::kNeox;
    } else if (name == "tiny-qwen3" || name == "tiny-qwen3moe") {
      // qwen3 / qwen3moe: Q/K norms, NEOX rope, and heads of their own size: 4 heads of 32 (wq [64, 128]), not
      // n_embd / n_head = 16, as Qwen3's key_length may be.
      c.arch = name == "tiny-qwen3" ? "qwen3" : "qwen3moe";
      c.attn_qk_norm = true;
      c.rope_mode = RopeMode::kNeox;
      c.n_embd_head = 32;
      c.norm_eps = 1e-6f;
    }
    if (name == "tiny-gemma3") {
      // llama.cpp's gemma3 graph: six layers so that the pattern of 6 (src/llama-model.cpp, LLM_ARCH_GEMMA3) has five
      // sliding-window layers (window 16, smaller than the 64 cache slots) and a global one; heads of 32, not
      // n_embd / n_head = 16 (Gemma 3 12B: 256, not 3840 / 16); a linear rope scaling of 2 on the global layer.
      c.arch = "gemma3";
      c.n_layer = 6;
      c.n_embd_head = 32;
      c.attn_qk_norm = true;
      c.rope_mode = RopeMode::kNeox;
      c.norm_eps = 1e-6f;
      c.embd_scale = true;
      c.post_norms = true;
      c.ffn_gelu = true;
      c.attn_scale = 1.0f / std::sqrt(32.0f);
      c.rope_base = 1000000.0f;
      c.rope_scale = 0.5f;
      c.swa_pattern = 6;
      c.n_swa = 16;
      c.tied_output = true;
    }
    if (name == "tiny-phi3") {
      // llama.cpp's phi3 graph: fused attn_qkv and ffn_up (gate and up), NEOX rope, Q scaled by 1 / sqrt(head_dim)
      // after rope; grouped-query heads (as Phi-3-medium's 40 / 10) so the K and V views start at different offsets;
      // LongRoPE factors, of which the long ones apply (a cache of 64 slots over an original context of 32).
      c.arch = "phi3";
      c.fused_qkv = true;
      c.fused_up = true;
      c.rope_mode = RopeMode::kNeox;
      c.attn_scale = 1.0f / std::sqrt(16.0f);
      c.rope_factors_ls = true;
      c.n_ctx_orig = 32;
    }
    if (name == "tiny-gpt-oss") {
      // llama.cpp's openai-moe-iswa graph (gpt-oss): layers alternating sliding-window (window 16, smaller than the 64
      // cache slots) and global (set_swa_pattern(2): layers 0 and 2 local), heads of 32 (wq [64, 128], as
      // gpt-oss-20b's 64 heads of 64 over 2880), Q/K/V and output biases, attention sinks, NEOX rope with the same
      // base on every layer, no ffn_norm (post_attention_norm is the FFN's input norm), 4 experts of which 2 used
      // with biases, the softmax over the selected router logits, SWIGLU_OAI (alpha 1.702, limit 7).
      c.arch = "gpt-oss";
      c.n_layer = 4;
      c.n_embd_head = 32;
      c.rope_mode = RopeMode::kNeox;
      c.rope_base = 150000.0f;
      c.rope_base_swa = 150000.0f;
      c.swa_pattern = 2;
      c.n_swa = 16;
      c.attn_bias = true;
      c.attn_out_bias = true;
      c.attn_sinks = true;
      c.n_expert = 4;
      c.n_expert_used = 2;
      c.moe_bias = true;
      c.moe_softmax_weight = true;
      c.moe_norm_weights = false;
      c.swiglu_oai_alpha = 1.702f;
      c.swiglu_oai_limit = 7.0f;
    }
    return c;
  }
  c.n_ctx = 4096;
  c.n_tokens = 512;
  c.n_vocab = 32000;
  if (name == "7b") {  // Llama-2-7B
    c.n_layer = 32;
    c.n_embd = 4096;
    c.n_ff = 11008;
    c.n_head = 32;
    c.n_head_kv = 32;
  } else if (name == "8x7b-moe") {  // Mixtral-8x7B
    c.n_layer = 32;
    c.n_embd = 4096;
    c.n_ff = 14336;
    c.n_head = 32;
    c.n_head_kv = 8;
    c.n_expert = 8;
    c.n_expert_used = 2;
    c.rope_base = 1000000.0f;
  } else if (name == "70b") {  // Llama-2-70B
    c.n_layer = 80;
    c.n_embd = 8192;
    c.n_ff = 28672;
    c.n_head = 64;
    c.n_head_kv = 8;
  } else {
    std::string known;
    for (const std::string& n : preset_names()) known += (known.empty() ? "" : ", ") + n;
    return Status(StatusCode::kNotFound, "unknown llama preset '" + name + "' (known: " + known + ")");
  }
  return c;
}

}  // namespace tessera::models
