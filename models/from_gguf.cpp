// Models from GGUF files (from_gguf.h). The keys are those llama.cpp's converter writes (gguf-py's constants:
// "{arch}.block_count", "{arch}.attention.head_count", ...); what llama.cpp does with them is described in
// docs/gguf.md, 'Architectures'.
#include "tessera/models/from_gguf.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <map>
#include <memory>
#include <set>
#include <string_view>

namespace tessera::models {

namespace {

Status file_error(const gguf::Model& model, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, model.metadata().source + ": " + what);
}

// A count key (any integer type) or, where llama.cpp allows it, an array of one value per layer that must all be the
// same here. `fallback` < 0: the key is required.
Result<int64_t> count_key(const gguf::Model& model, const std::string& key, int64_t fallback, int64_t n_layer) {
  const gguf::File& f = model.metadata();
  const gguf::Value* v = f.find_value(key);
  if (v == nullptr) {
    if (fallback >= 0) return fallback;
    return file_error(model, "missing key " + key + " (the architecture needs it)");
  }
  if (const gguf::Array* a = v->as_array()) {
    if (a->skipped || a->values.empty()) return file_error(model, key + ": an empty or unread per-layer array");
    if (n_layer > 0 && a->size != static_cast<uint64_t>(n_layer)) {
      return file_error(model,
                        format_message("%s: %llu per-layer values for %lld layers", key.c_str(),
                                       static_cast<unsigned long long>(a->size), static_cast<long long>(n_layer)));
    }
    std::optional<int64_t> first;
    for (const gguf::Value& e : a->values) {
      std::optional<int64_t> x = e.as_signed();
      if (!x) {
        if (auto u = e.as_unsigned(); u && *u <= static_cast<uint64_t>(INT64_MAX)) x = static_cast<int64_t>(*u);
      }
      if (!x) return file_error(model, key + ": per-layer values must be integers");
      if (first && *first != *x) {
        return file_error(model, key + ": per-layer values differ (" + v->to_string() +
                                     "); Tessera builds layers of one shape so far");
      }
      first = x;
    }
    return *first;
  }
  return f.get_int(key);
}

Result<float> float_key(const gguf::Model& model, const std::string& key, float fallback) {
  const gguf::Value* v = model.metadata().find_value(key);
  if (v == nullptr) return fallback;
  if (auto x = v->as_f32()) return *x;
  if (auto x = v->as_f64()) return static_cast<float>(*x);
  return file_error(model, key + ": expected a float, found " + gguf::value_type_name(v->type()));
}

Result<Type> tessera_type(const gguf::Model& model, const gguf::TensorInfo& t) {
  Type type;
  if (!type_from_gguf_id(static_cast<int>(t.type), &type)) {
    return file_error(model, format_message("tensor %s: type %s (%u) is not a Tessera type", t.name.c_str(),
                                            gguf::type_name(t.type), static_cast<unsigned>(t.type)));
  }
  return type;
}

// The dimensions up to the last one above 1 (at least 1).
int dims(const int64_t* ne) {
  int n = 4;
  while (n > 1 && ne[n - 1] == 1) --n;
  return n;
}

std::string shape_string(const int64_t* ne, int n) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += format_message(i == 0 ? "%lld" : ", %lld", static_cast<long long>(ne[i]));
  return s + "]";
}

// What each architecture's llama.cpp graph builder does differently from llama's (src/models/<arch>.cpp, and
// llama_model_rope_type in src/llama-model.cpp for the rope mode).
struct ArchInfo {
  const char* name;
  bool attn_bias;     // qwen2: blk.N.attn_{q,k,v}.bias added after the projections
  bool qk_norm;       // qwen3, qwen3moe: blk.N.attn_{q,k}_norm.weight, per-head RMS norms before rope
  bool own_head_dim;  // the head size is attention.key_length, which need not be embedding_length / head_count
                      // (llama.cpp's loaders take hparams.n_embd_head_k from it for every architecture; llama's and
                      // qwen3's make wq [n_embd, n_embd_head_k * n_head]); else it must be that quotient
  bool moe;           // qwen3moe: always experts (expert_count, expert_used_count > 0; expert_feed_forward_length)
  bool moe_optional;  // llama: experts when expert_count > 0 (Mixtral)
  RopeMode rope;      // LLAMA_ROPE_TYPE_NORM (llama) or LLAMA_ROPE_TYPE_NEOX (the Qwen architectures)
  bool rope_freqs;    // llama: rope_freqs.weight (Llama 3.1) is ROPE's frequency factors; the Qwen graphs pass none
  bool eps_required;  // the Qwen loaders require attention.layer_norm_rms_epsilon (llama here defaults to 1e-5)
  bool gemma3;        // gemma3: scaled embeddings, post-norms, GELU FFN, Q scaled, sliding-window layers (gemma3_keys)
  bool phi3;          // phi3: fused QKV and gate/up, Q scaled, LongRoPE factors (phi3_keys)
  bool gpt_oss;       // gpt-oss: biases, sinks, alternating sliding window, biased experts (gpt_oss_keys)
};

constexpr ArchInfo kArchs[] = {
    {"llama", false, false, true, false, true, RopeMode::kNormal, true, false, false, false, false},
    {"qwen2", true, false, false, false, false, RopeMode::kNeox, false, true, false, false, false},
    {"qwen3", false, true, true, false, false, RopeMode::kNeox, false, true, false, false, false},
    {"qwen3moe", false, true, true, true, false, RopeMode::kNeox, false, true, false, false, false},
    {"gemma3", false, true, true, false, false, RopeMode::kNeox, false, true, true, false, false},
    {"phi3", false, false, false, false, false, RopeMode::kNeox, false, true, false, true, false},
    {"gpt-oss", true, false, true, true, false, RopeMode::kNeox, false, true, false, false, true},
};

std::string long_str(int64_t v) { return std::to_string(static_cast<long long>(v)); }

// YaRN (rope.scaling.type yarn), as llama.cpp sets up ggml_rope_ext for it (load_hparams in src/llama-model.cpp;
// llama_context's constructor in src/llama-context.cpp; llama_hparams' defaults in src/llama-hparams.h):
//   - freq_scale = 1 / rope.scaling.factor, as for linear scaling (the caller);
//   - n_ctx_orig = rope.scaling.original_context_length, else context_length (n_ctx_orig_yarn);
//   - ext_factor 1 (yarn_ext_factor "not set" becomes 1 for yarn), or rope.scaling.yarn_ext_factor;
//   - beta_fast 32 and beta_slow 1 (the hparams defaults), or rope.scaling.yarn_beta_fast / yarn_beta_slow;
//   - attn_factor = rope.scaling.attn_factor (hparams.rope_attn_factor, default 1). llama.cpp's context also sets
//     yarn_attn_factor to get_mscale(factor) / (1 + 0.1 ln factor), which is 1 (the ROPE kernel applies the
//     temperature 1 + 0.1 ln factor itself: PR #17945); Tessera's kernel does the same, so only the key's value
//     remains.
//   - rope.scaling.yarn_log_multiplier and rope.scaling.yarn_attn_factor (DeepSeek's mscale variants) are refused:
//     their graphs scale the attention differently.
Status yarn_rope_scaling(const gguf::Model& model, const std::string& p, LlamaConfig& c) {
  for (const char* k : {"rope.scaling.yarn_log_multiplier", "rope.scaling.yarn_attn_factor"}) {
    if (model.metadata().find_value(p + k) != nullptr) {
      return file_error(model, p + k + " is not supported (only YaRN's plain temperature 1 + 0.1 ln factor is)");
    }
  }
  auto ctx_len = count_key(model, p + "context_length", 4096, c.n_layer);
  if (!ctx_len.ok()) return ctx_len.status();
  const std::string orig_key = p + "rope.scaling.original_context_length";
  auto n_ctx_orig = count_key(model, orig_key, ctx_len.value(), c.n_layer);
  if (!n_ctx_orig.ok()) return n_ctx_orig.status();
  if (n_ctx_orig.value() < 1 || n_ctx_orig.value() > INT32_MAX) {
    return file_error(model, orig_key + ": " + long_str(n_ctx_orig.value()) + " is outside [1, 2^31 - 1]");
  }
  RopeYarn y;
  y.n_ctx_orig = static_cast<int32_t>(n_ctx_orig.value());
  struct FloatKey {
    const char* key;
    float fallback;
    float* out;
    bool unit;  // in [0, 1], else positive
  };
  for (const FloatKey& k : {FloatKey{"rope.scaling.yarn_ext_factor", 1.0f, &y.ext_factor, true},
                            FloatKey{"rope.scaling.attn_factor", 1.0f, &y.attn_factor, false},
                            FloatKey{"rope.scaling.yarn_beta_fast", 32.0f, &y.beta_fast, false},
                            FloatKey{"rope.scaling.yarn_beta_slow", 1.0f, &y.beta_slow, false}}) {
    auto v = float_key(model, p + k.key, k.fallback);
    if (!v.ok()) return v.status();
    const float x = v.value();
    if (!std::isfinite(x) || (k.unit ? (x < 0.0f || x > 1.0f) : !(x > 0.0f))) {
      return file_error(model, p + k.key + ": " + std::to_string(x) +
                                   (k.unit ? " is outside [0, 1]" : " must be positive and finite"));
    }
    *k.out = x;
  }
  c.rope_yarn = y;
  return Status::Ok();
}

// rope.scaling.type (linear or none, and yarn where allow_yarn; llama.cpp's default is linear) and
// rope.scaling.factor (else the older rope.scale_linear): rope's frequency scale is the factor's inverse
// (src/llama-model.cpp load_hparams); yarn adds YaRN's parameters (yarn_rope_scaling). gpt-oss allows yarn; gemma3
// and phi3 keep refusing it (their files do not use it; phi3's LongRoPE attn_factor is read by phi3_keys alone).
Status linear_rope_scaling(const gguf::Model& model, const std::string& p, LlamaConfig& c, bool allow_yarn = false) {
  const gguf::File& f = model.metadata();
  bool yarn = false;
  if (const gguf::Value* type = f.find_value(p + "rope.scaling.type")) {
    const std::string* t = type->as_string();
    if (t == nullptr || (*t != "linear" && *t != "none" && !(allow_yarn && *t == "yarn"))) {
      return file_error(model, p + "rope.scaling.type: " + type->to_string() + " is not supported for " + c.arch +
                                   (allow_yarn ? " (yarn, linear or none)" : " (linear or none)"));
    }
    yarn = *t == "yarn";
  }
  const bool has_factor = f.find_value(p + "rope.scaling.factor") != nullptr;
  auto factor = float_key(model, p + (has_factor ? "rope.scaling.factor" : "rope.scale_linear"), 0.0f);
  if (!factor.ok()) return factor.status();
  if (factor.value() < 0.0f || !std::isfinite(factor.value())) {
    return file_error(model,
                      p + (has_factor ? "rope.scaling.factor" : "rope.scale_linear") + " must be finite and >= 0");
  }
  c.rope_scale = factor.value() == 0.0f ? 1.0f : 1.0f / factor.value();
  if (yarn) TS_RETURN_IF_ERROR(yarn_rope_scaling(model, p, c));
  return Status::Ok();
}

// What llama.cpp's phi3 loader and graph take from the keys and the tensor table (src/models/phi3.cpp,
// llama_model_phi3; get_rope_factors in src/llama-model.cpp):
//   - attention.layer_norm_rms_epsilon is required (eps_required);
//   - attention.sliding_window is read, but llama.cpp turns Phi's sliding window off (LLAMA_SWA_TYPE_NONE, n_swa 0,
//     "Phi SWA is currently disabled", PR #13676): every layer attends to the whole cache with the causal mask;
//   - blk.N.attn_qkv.weight (fused) or blk.N.attn_{q,k,v}.weight (create_tensor_qkv takes either), ffn_up
//     [n_embd, 2 n_ff] with no ffn_gate (SWIGLU of its halves), attn_output [n_embd, n_embd];
//   - rope_factors_long.weight / rope_factors_short.weight (LongRoPE, f32 [n_rot / 2]): the long factors when the
//     context (n_ctx) is above rope.scaling.original_context_length (default context_length), else the short ones;
//   - rope.scaling.attn_factor (hparams.rope_attn_factor, default 1; LongRoPE's scaling of cos and sin,
//     sqrt(1 + ln(context_length / original_context_length) / ln(original_context_length)) in the 128k files):
//     llama.cpp's context multiplies yarn_attn_factor by it (cparams.yarn_attn_factor *= hparams.rope_attn_factor,
//     src/llama-context.cpp) and passes that to every ggml_rope_ext, with ext_factor 0 (not YaRN): ROPE's attn_factor
//     with ext_factor 0, which multiplies cos and sin and changes nothing else;
//   - Q is scaled by 1 / sqrt(head_dim) after rope and the scores by 1.
Status phi3_keys(const gguf::Model& model, const std::string& p, int64_t ctx_len, LlamaConfig& c) {
  TS_RETURN_IF_ERROR(linear_rope_scaling(model, p, c));
  auto attn_factor = float_key(model, p + "rope.scaling.attn_factor", 1.0f);
  if (!attn_factor.ok()) return attn_factor.status();
  if (!std::isfinite(attn_factor.value()) || !(attn_factor.value() > 0.0f)) {
    return file_error(
        model, p + "rope.scaling.attn_factor: " + std::to_string(attn_factor.value()) + " must be positive and finite");
  }
  c.rope_yarn.attn_factor = attn_factor.value();  // ext_factor stays 0: cos and sin scaled, nothing else
  auto n_ctx_orig = count_key(model, p + "rope.scaling.original_context_length", ctx_len, c.n_layer);
  if (!n_ctx_orig.ok()) return n_ctx_orig.status();
  if (n_ctx_orig.value() < 1 || n_ctx_orig.value() > INT32_MAX) {
    return file_error(model, p + "rope.scaling.original_context_length: " + long_str(n_ctx_orig.value()) +
                                 " is outside [1, 2^31 - 1]");
  }
  c.n_ctx_orig = n_ctx_orig.value();
  const bool has_long = model.find_tensor("rope_factors_long.weight") != nullptr;
  const bool has_short = model.find_tensor("rope_factors_short.weight") != nullptr;
  if (has_long != has_short) {
    return file_error(model, std::string("tensor ") + (has_long ? "rope_factors_short" : "rope_factors_long") +
                                 ".weight is missing: a phi3 file with LongRoPE factors has both (Tessera builds "
                                 "both or neither)");
  }
  c.rope_factors_ls = has_long;
  c.fused_qkv = model.find_tensor("blk.0.attn_qkv.weight") != nullptr;
  c.fused_up = true;
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim()));
  return Status::Ok();
}

// What llama.cpp's gemma3 loader and graph take from the keys (src/llama-model.cpp load_hparams, LLM_ARCH_GEMMA3;
// src/models/gemma3.cpp):
//   - attention.sliding_window > 0: sliding-window attention in a pattern of 6 (layers 0-4 of every six local, the
//     sixth global; set_swa_pattern(6)), the local layers with rope base 10000 and scale 1 (fixed, not in the file);
//     absent or 0: every layer global (LLAMA_SWA_TYPE_NONE);
//   - rope.scaling.factor (else the older rope.scale_linear): the global layers' rope frequency scale is its inverse;
//     rope.scaling.type must be linear (or none) for that;
//   - the query scale 1 / sqrt(attention.key_length), but 1 / sqrt(embedding_length / head_count) for the 27B
//     (62 layers; gemma_pytorch's query_pre_attn_scalar, which the file does not carry);
//   - final_logit_softcapping is applied only by the graph without sliding windows, which needs TANH (not an op here).
Status gemma3_keys(const gguf::Model& model, const std::string& p, LlamaConfig& c) {
  c.embd_scale = true;
  c.post_norms = true;
  c.ffn_gelu = true;
  auto n_swa = count_key(model, p + "attention.sliding_window", 0, c.n_layer);
  if (!n_swa.ok()) return n_swa.status();
  if (n_swa.value() < 0 || n_swa.value() > INT32_MAX) {
    return file_error(model, p + "attention.sliding_window: " + long_str(n_swa.value()) + " is outside [0, 2^31 - 1]");
  }
  if (n_swa.value() > 0) {
    c.swa_pattern = 6;
    c.n_swa = n_swa.value();
    c.rope_base_swa = 10000.0f;
    c.rope_scale_swa = 1.0f;
  } else {
    auto cap = float_key(model, p + "final_logit_softcapping", 0.0f);
    if (!cap.ok()) return cap.status();
    if (cap.value() != 0.0f) {
      return file_error(model, p + "final_logit_softcapping is set and " + p +
                                   "attention.sliding_window is not: the graph without sliding windows caps the logits "
                                   "with TANH, which Tessera does not have");
    }
  }
  TS_RETURN_IF_ERROR(linear_rope_scaling(model, p, c));
  const int64_t scale_dim = c.n_layer == 62 ? c.n_embd / c.n_head : c.head_dim();
  c.attn_scale = 1.0f / std::sqrt(static_cast<float>(scale_dim));
  return Status::Ok();
}

// What llama.cpp's gpt-oss loader and graph take from the keys (llama_model_openai_moe::load_arch_hparams and
// load_arch_tensors, src/models/openai-moe.cpp; the graph in the same file, formerly src/models/openai-moe-iswa.cpp;
// build_moe_ffn in src/llama-graph.cpp):
//   - attention.sliding_window (required): the window of the sliding-window layers, which alternate with global ones
//     (set_swa_pattern of attention.sliding_window_pattern, 2 when absent: layers 0, 2, 4, ... local);
//   - rope.freq_base_swa (optional): the local layers' rope base, else rope.freq_base; both layers' rope scale is the
//     model's;
//   - rope.scaling.type "yarn" (gpt-oss-20b: factor 32 over original_context_length 4096): ROPE with YaRN
//     (yarn_rope_scaling: ext_factor 1, beta_fast 32, beta_slow 1, attn_factor 1, so cos and sin scaled by
//     1 + 0.1 ln 32) on every layer, sliding or not (llama.cpp's cparams are the same for both);
//   - the router's logits plus its bias, the top expert_used_count experts by logit, their weights the softmax over
//     the selected logits (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, not renormalised), the experts' biases added
//     with ADD_ID after each MUL_MAT_ID, SWIGLU_OAI with alpha 1.702 and limit 7 (constants of build_moe_ffn's
//     LLM_FFN_SWIGLU_OAI_MOE, not in the file);
//   - Q/K/V and output biases, attention sinks (one per head), the scores scaled by 1 / sqrt(head size); output.weight
//     is required (no tied embeddings).
Status gpt_oss_keys(const gguf::Model& model, const std::string& p, LlamaConfig& c) {
  c.attn_out_bias = true;
  c.attn_sinks = true;
  c.moe_bias = true;
  c.moe_softmax_weight = true;
  c.moe_norm_weights = false;
  c.swiglu_oai_alpha = 1.702f;
  c.swiglu_oai_limit = 7.0f;
  c.tied_output = false;
  const std::string window_key = p + "attention.sliding_window";
  auto n_swa = count_key(model, window_key, -1, c.n_layer);
  if (!n_swa.ok()) return n_swa.status();
  if (n_swa.value() < 1 || n_swa.value() > INT32_MAX) {
    return file_error(model, window_key + ": " + long_str(n_swa.value()) + " is outside [1, 2^31 - 1]");
  }
  const std::string pattern_key = p + "attention.sliding_window_pattern";
  auto pattern = count_key(model, pattern_key, 2, c.n_layer);
  if (!pattern.ok()) return pattern.status();
  if (pattern.value() < 1 || pattern.value() > 100000) {
    return file_error(model, pattern_key + ": " + long_str(pattern.value()) + " is outside [1, 100000]");
  }
  c.n_swa = n_swa.value();
  c.swa_pattern = static_cast<int>(pattern.value());
  auto base_swa = float_key(model, p + "rope.freq_base_swa", c.rope_base);
  if (!base_swa.ok()) return base_swa.status();
  c.rope_base_swa = base_swa.value();
  TS_RETURN_IF_ERROR(linear_rope_scaling(model, p, c, /*allow_yarn=*/true));
  c.rope_scale_swa = c.rope_scale;
  return Status::Ok();
}

}  // namespace

std::vector<std::string> gguf_architectures() {
  std::vector<std::string> names;
  for (const ArchInfo& a : kArchs) names.emplace_back(a.name);
  return names;
}

Result<LlamaConfig> llama_config_from_gguf(const gguf::Model& model, const GgufRunShape& run) {
  const gguf::File& f = model.metadata();
  auto arch_name = f.get_string("general.architecture");
  if (!arch_name.ok()) return arch_name.status();
  const ArchInfo* arch = nullptr;
  for (const ArchInfo& a : kArchs) {
    if (arch_name.value() == a.name) arch = &a;
  }
  if (arch == nullptr) {
    std::string list;
    for (const std::string& a : gguf_architectures()) list += (list.empty() ? "" : ", ") + a;
    return Status(StatusCode::kUnsupported, f.source + ": architecture '" + arch_name.value() +
                                                "' is not supported (Tessera builds: " + list + ")");
  }
  const std::string p = arch_name.value() + ".";
  LlamaConfig c;
  c.kq_mask_f32 = true;  // llama.cpp's mask (llama.h: kq_mask_f32)
  c.arch = arch->name;
  c.attn_bias = arch->attn_bias;
  c.attn_qk_norm = arch->qk_norm;
  c.rope_mode = arch->rope;
  const gguf::Value* name = f.find_value("general.name");
  c.name = name != nullptr && name->as_string() != nullptr ? *name->as_string() : f.source;
  auto n_layer = count_key(model, p + "block_count", -1, 0);
  if (!n_layer.ok()) return n_layer.status();
  if (n_layer.value() < 1 || n_layer.value() > 100000) {
    return file_error(model, p + "block_count: " + std::to_string(n_layer.value()) + " is outside [1, 100000]");
  }
  c.n_layer = static_cast<int>(n_layer.value());
  struct Count {
    const char* key;
    int64_t* field;
    int64_t fallback;
  };
  int64_t n_expert = 0, n_expert_used = 0, n_ff_exp = 0;
  int64_t n_head = 0;
  const bool experts = arch->moe || arch->moe_optional;
  // qwen3moe's feed_forward_length is the dense size no layer uses: llama.cpp reads it but does not require it.
  const Count counts[] = {{"embedding_length", &c.n_embd, -1},
                          {"feed_forward_length", &c.n_ff, arch->moe ? 0 : -1},
                          {"attention.head_count", &n_head, -1},
                          {"expert_count", &n_expert, experts && arch->moe ? -1 : 0},
                          {"expert_used_count", &n_expert_used, experts && arch->moe ? -1 : 0},
                          {"expert_feed_forward_length", &n_ff_exp, arch->gpt_oss ? -1 : 0}};
  for (const Count& k : counts) {
    if (!experts && std::string_view(k.key).starts_with("expert_")) continue;  // a dense graph reads none
    if (!arch->moe && std::string_view(k.key) == "expert_feed_forward_length") continue;
    auto v = count_key(model, p + k.key, k.fallback, c.n_layer);
    if (!v.ok()) return v.status();
    if (v.value() < 0 || v.value() > INT32_MAX) {  // (expert counts are narrowed to int below)
      return file_error(model, p + k.key + ": " + std::to_string(v.value()) + " is outside [0, 2^31 - 1]");
    }
    *k.field = v.value();
  }
  c.n_head = n_head;
  auto n_head_kv = count_key(model, p + "attention.head_count_kv", n_head, c.n_layer);
  if (!n_head_kv.ok()) return n_head_kv.status();
  c.n_head_kv = n_head_kv.value();
  if (arch->moe) {
    // llama.cpp's qwen3moe loader refuses a model without experts, and takes the experts' FFN size from
    // expert_feed_forward_length, else feed_forward_length / expert_used_count.
    for (auto [v, key] : {std::pair{n_expert, "expert_count"}, {n_expert_used, "expert_used_count"}}) {
      if (v < 1) return file_error(model, p + key + " is 0: the " + arch->name + " architecture needs experts");
    }
    c.n_ff = n_ff_exp > 0 ? n_ff_exp : c.n_ff / n_expert_used;
    if (c.n_ff < 1) {
      return file_error(model, "missing key " + p + "expert_feed_forward_length (and " + p +
                                   "feed_forward_length / expert_used_count is 0): the experts' FFN size");
    }
  }
  c.n_expert = static_cast<int>(n_expert);
  c.n_expert_used = static_cast<int>(n_expert_used);
  if (c.n_embd < 1 || c.n_ff < 1 || c.n_head < 1 || c.n_head_kv < 1) {
    return file_error(model, "embedding_length, feed_forward_length, head_count and head_count_kv must be >= 1");
  }
  if (c.n_expert_used > c.n_expert) {
    return file_error(model, p + "expert_used_count " + long_str(c.n_expert_used) + " is more than " + p +
                                 "expert_count " + long_str(c.n_expert));
  }
  const bool has_key_length = f.find_value(p + "attention.key_length") != nullptr;
  if (c.n_embd % c.n_head != 0 && !(arch->own_head_dim && has_key_length)) {
    return file_error(
        model, format_message("%sembedding_length %lld is not a multiple of %sattention.head_count %lld", p.c_str(),
                              static_cast<long long>(c.n_embd), p.c_str(), static_cast<long long>(c.n_head)));
  }
  // The head size: attention.key_length where the architecture takes it (llama: Mistral Nemo's 128 on 5120 / 32
  // heads; qwen3), else embedding_length / head_count; the quotient when the key is absent. value_length and
  // rope.dimension_count default to it and must equal it (llama.cpp's graphs assert n_embd_head_v == n_embd_head_k
  // == n_rot).
  int64_t head_dim = c.n_embd / c.n_head;
  if (arch->own_head_dim) {
    auto k = count_key(model, p + "attention.key_length", head_dim, c.n_layer);
    if (!k.ok()) return k.status();
    if (k.value() < 2 || k.value() > 65536) {
      return file_error(model, p + "attention.key_length: " + long_str(k.value()) + " is outside [2, 65536]");
    }
    head_dim = k.value();
    c.n_embd_head = head_dim;
  }
  for (const char* k : {"attention.key_length", "attention.value_length", "rope.dimension_count"}) {
    auto v = count_key(model, p + k, head_dim, c.n_layer);
    if (!v.ok()) return v.status();
    if (v.value() != head_dim) {
      if (arch->own_head_dim) {
        return file_error(model, format_message("%s%s is %lld, not %sattention.key_length = %lld: heads whose K, V "
                                                "and rotated sizes differ are not supported",
                                                p.c_str(), k, static_cast<long long>(v.value()), p.c_str(),
                                                static_cast<long long>(head_dim)));
      }
      return file_error(model, format_message("%s%s is %lld, not embedding_length / head_count = %lld: heads of "
                                              "another size than n_embd / n_head are not supported for %s",
                                              p.c_str(), k, static_cast<long long>(v.value()),
                                              static_cast<long long>(head_dim), arch->name));
    }
  }
  auto base = float_key(model, p + "rope.freq_base", 10000.0f);
  if (!base.ok()) return base.status();
  c.rope_base = base.value();
  if (arch->eps_required && f.find_value(p + "attention.layer_norm_rms_epsilon") == nullptr) {
    return file_error(model, "missing key " + p + "attention.layer_norm_rms_epsilon (the architecture needs it)");
  }
  auto eps = float_key(model, p + "attention.layer_norm_rms_epsilon", 1e-5f);
  if (!eps.ok()) return eps.status();
  c.norm_eps = eps.value();
  if (arch->gemma3) TS_RETURN_IF_ERROR(gemma3_keys(model, p, c));
  if (arch->gpt_oss) TS_RETURN_IF_ERROR(gpt_oss_keys(model, p, c));

  // The tensor table: vocabulary, types, the optional tensors.
  const gguf::TensorInfo* embd = model.find_tensor("token_embd.weight");
  if (embd == nullptr) return file_error(model, "tensor token_embd.weight is missing (the architecture needs it)");
  c.n_vocab = embd->ne[1];
  for (const gguf::Model::TensorRef& ref : model.tensors) {
    const gguf::TensorInfo& t = model.tensor(ref);
    auto type = tessera_type(model, t);
    if (!type.ok()) return type.status();
    c.weight_types[t.name] = type.value();
  }
  c.rope_freq_factors = arch->rope_freqs && model.find_tensor("rope_freqs.weight") != nullptr;
  c.tied_output = !arch->gpt_oss && model.find_tensor("output.weight") == nullptr;

  // The run.
  auto ctx_len = count_key(model, p + "context_length", 4096, c.n_layer);
  if (!ctx_len.ok()) return ctx_len.status();
  c.n_ctx = run.n_ctx > 0      ? run.n_ctx
            : run.full_context ? (ctx_len.value() + 255) / 256 * 256
                               : std::min<int64_t>(ctx_len.value(), 4096);
  if (arch->phi3) TS_RETURN_IF_ERROR(phi3_keys(model, p, ctx_len.value(), c));
  c.n_tokens = run.n_tokens;
  c.n_kv = run.n_kv;
  c.n_outputs = run.n_outputs;
  c.kv_type = run.kv_type;
  c.v_cache_type = run.v_type;
  c.flash_attn = run.flash_attn;
  const char* q_name = c.fused_qkv ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight";
  c.weight_type = c.weight_types.count(q_name) != 0 ? c.weight_types[q_name] : c.weight_types["token_embd.weight"];
  // A complete file: the weights come from it (fill_random reads them).
  const bool complete = std::all_of(model.shards.begin(), model.shards.end(),
                                    [](const gguf::File& s) { return s.data_state() == gguf::DataState::kComplete; });
  if (complete) c.weights_file = std::make_shared<const gguf::Model>(model);
  return c;
}

Status check_against_file(const LlamaGraph& graph, const gguf::Model& model) {
  std::set<std::string> used;
  for (const Tensor* w : graph.weights) {
    const gguf::TensorInfo* t = model.find_tensor(w->name);
    if (t == nullptr) {
      return file_error(model, std::string("tensor ") + w->name + " is missing (the graph needs it, " +
                                   shape_string(w->ne, dims(w->ne)) + " " + type_name(w->type) + ")");
    }
    if (!used.insert(t->name).second) continue;  // (tied: token_embd read twice)
    bool same = true;
    for (int i = 0; i < 4; ++i) same = same && w->ne[i] == t->ne[i];
    if (!same) {
      return file_error(model, "tensor " + t->name + ": the file has " + shape_string(t->ne, dims(t->ne)) +
                                   ", the graph with these hyperparameters needs " + shape_string(w->ne, dims(w->ne)));
    }
    Type type;
    if (!type_from_gguf_id(static_cast<int>(t->type), &type) || type != w->type) {
      return file_error(model, "tensor " + t->name + ": the file has type " + gguf::type_name(t->type) +
                                   ", the graph " + type_name(w->type));
    }
  }
  const std::string* arch = model.metadata().find_value("general.architecture") != nullptr
                                ? model.metadata().find_value("general.architecture")->as_string()
                                : nullptr;
  for (const gguf::Model::TensorRef& ref : model.tensors) {
    const gguf::TensorInfo& t = model.tensor(ref);
    if (used.count(t.name) == 0) {
      return file_error(model, "tensor " + t.name + " is not used by the " + (arch != nullptr ? *arch : "model's") +
                                   " architecture (another variant of it, or a newer converter?)");
    }
  }
  return Status::Ok();
}

Result<LlamaGraph> build_from_gguf(const gguf::Model& model, const GgufRunShape& run) {
  auto config = llama_config_from_gguf(model, run);
  if (!config.ok()) return config.status();
  auto graph = build_llama(config.value());
  if (!graph.ok()) {
    return Status(graph.status().code(), model.metadata().source + ": " + graph.status().message());
  }
  TS_RETURN_IF_ERROR(check_against_file(graph.value(), model));
  return graph;
}

}  // namespace tessera::models
