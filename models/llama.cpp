// The llama-style decoder (see llama.h): its weights, its inputs and the decoder loop, built from the shared blocks
// (blocks.h). The presets are in presets.cpp, the seeded weights and inputs in llama_data.cpp.
#include "tessera/models/llama.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "blocks.h"
#include "tessera/build.h"

namespace tessera::models {

namespace {

using blocks::named;
using blocks::new_weight;

Status invalid(const std::string& msg) { return Status(StatusCode::kInvalidArgument, "llama config: " + msg); }

class Builder {
 public:
  Builder(const LlamaConfig& c, LlamaGraph& m)
      : c_(c),
        m_(m),
        ctx_(*m.ctx),
        cpp_graph_(c.llama_cpp.value_or(LlamaCppGraph{})),
        cpp_(c.llama_cpp ? &cpp_graph_ : nullptr) {}

  // The first error of adding tensors to the graph early (see expand).
  const Status& graph_status() const { return graph_status_; }

  // The type of a weight: the model file's (weight_types), else `fallback`.
  Type type_of(const char* name, int il, const char* suffix, Type fallback) const {
    if (c_.weight_types.empty()) return fallback;
    const std::string full =
        il >= 0 ? format_message("blk.%d.%s.%s", il, name, suffix) : format_message("%s.%s", name, suffix);
    const auto it = c_.weight_types.find(full);
    return it == c_.weight_types.end() ? fallback : it->second;
  }

  // The weights in the order llama.cpp's loaders create them (create_tensor calls of the architecture).
  void create_weights() {
    Context& w = *m_.weights_ctx;
    auto& all = m_.weights;
    const Type wt = c_.weight_type;
    const Type f32 = Type::kF32;
    auto weight = [&](const char* name, int il, Type fallback, std::initializer_list<int64_t> ne) {
      return new_weight(w, all, type_of(name, il, "weight", fallback), ne, name, il);
    };
    auto bias = [&](const char* name, int il, std::initializer_list<int64_t> ne) {
      return new_weight(w, all, type_of(name, il, "bias", f32), ne, name, il, "bias");
    };
    m_.tok_embd = weight("token_embd", -1, wt, {c_.n_embd, c_.n_vocab});
    if (c_.fused_up) return create_phi3_weights(weight);
    if (c_.attn_sinks) return create_gpt_oss_weights(weight, bias);
    if (c_.rope_freq_factors) m_.rope_freqs = weight("rope_freqs", -1, f32, {c_.head_dim() / 2});
    m_.layers.resize(static_cast<size_t>(c_.n_layer));
    for (int il = 0; il < c_.n_layer; ++il) {
      LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      create_rope_copies(il);
      l.attn_norm = weight("attn_norm", il, f32, {c_.n_embd});
      l.wq = weight("attn_q", il, wt, {c_.n_embd, c_.n_embd_q()});
      l.wk = weight("attn_k", il, wt, {c_.n_embd, c_.n_embd_kv()});
      l.wv = weight("attn_v", il, wt, {c_.n_embd, c_.n_embd_kv()});
      l.wo = weight("attn_output", il, wt, {c_.n_embd_q(), c_.n_embd});
      if (c_.attn_bias) {
        l.bq = bias("attn_q", il, {c_.n_embd_q()});
        l.bk = bias("attn_k", il, {c_.n_embd_kv()});
        l.bv = bias("attn_v", il, {c_.n_embd_kv()});
      }
      if (c_.attn_qk_norm) {
        l.attn_k_norm = weight("attn_k_norm", il, f32, {c_.head_dim()});
        l.attn_q_norm = weight("attn_q_norm", il, f32, {c_.head_dim()});
      }
      if (c_.post_norms) l.attn_post_norm = weight("post_attention_norm", il, f32, {c_.n_embd});
      l.ffn_norm = weight("ffn_norm", il, f32, {c_.n_embd});
      if (c_.is_moe()) {
        l.ffn_gate_inp = weight("ffn_gate_inp", il, f32, {c_.n_embd, c_.n_expert});
        l.ffn_gate_exps = weight("ffn_gate_exps", il, wt, {c_.n_embd, c_.n_ff, c_.n_expert});
        l.ffn_down_exps = weight("ffn_down_exps", il, wt, {c_.n_ff, c_.n_embd, c_.n_expert});
        l.ffn_up_exps = weight("ffn_up_exps", il, wt, {c_.n_embd, c_.n_ff, c_.n_expert});
      } else {
        l.ffn_gate = weight("ffn_gate", il, wt, {c_.n_embd, c_.n_ff});
        l.ffn_down = weight("ffn_down", il, wt, {c_.n_ff, c_.n_embd});
        l.ffn_up = weight("ffn_up", il, wt, {c_.n_embd, c_.n_ff});
      }
      if (c_.post_norms) l.ffn_post_norm = weight("post_ffw_norm", il, f32, {c_.n_embd});
      create_cache(l, il);
    }
    create_output(weight);
  }

  // The output norm and head (the token embedding when tied); where each architecture's loader creates them.
  template <class Weight>
  void create_output(Weight& weight) {
    m_.output_norm = weight("output_norm", -1, Type::kF32, {c_.n_embd});
    if (!c_.tied_output) {
      m_.output = weight("output", -1, c_.weight_type, {c_.n_embd, c_.n_vocab});
    } else {
      m_.output = c_.output_copy ? copy_weight(m_.tok_embd, c_.n_layer) : m_.tok_embd;
    }
  }

  // A copy of a shared weight (LlamaGraph::copies): same name, shape and type, created now, held by layer `layer`'s
  // buffer type.
  Tensor* copy_weight(const Tensor* of, int layer) {
    Tensor* t = m_.weights_ctx->new_tensor(of->type, 4, of->ne);
    if (t == nullptr) return nullptr;
    set_name(*t, of->name);
    m_.weights.push_back(t);
    m_.copies.push_back({t, of, layer});
    return t;
  }

  // The rope factors layer il reads (LlamaConfig::rope_factor_copy): the originals, or their copy for il's buffer type,
  // created with the first layer that reads it. Index 0 of each is the original.
  void create_rope_copies(int il) {
    const int k = rope_copy_index(il);
    if (k == 0 || static_cast<size_t>(k) < rope_sets_.size()) return;
    std::array<Tensor*, 3> set{};
    const std::array<Tensor*, 3> originals{m_.rope_freqs, m_.rope_long, m_.rope_short};
    for (size_t i = 0; i < set.size(); ++i) {
      if (originals[i] != nullptr) set[i] = copy_weight(originals[i], il);
    }
    rope_sets_.resize(static_cast<size_t>(k) + 1);
    rope_sets_[static_cast<size_t>(k)] = set;
  }
  int rope_copy_index(int il) const {
    const auto& v = c_.rope_factor_copy;
    return static_cast<size_t>(il) < v.size() ? v[static_cast<size_t>(il)] : 0;
  }
  // The rope factors of layer il (null: none).
  Tensor* rope_factors(int il) const {
    const int k = rope_copy_index(il);
    const std::array<Tensor*, 3> set = k == 0 || static_cast<size_t>(k) >= rope_sets_.size()
                                           ? std::array<Tensor*, 3>{m_.rope_freqs, m_.rope_long, m_.rope_short}
                                           : rope_sets_[static_cast<size_t>(k)];
    return c_.rope_factors_ls ? (c_.rope_long() ? set[1] : set[2]) : set[0];
  }

  void create_cache(LlamaLayer& l, int il) {
    Context& kc = *m_.cache_ctx;
    const int64_t cells = c_.is_swa(il) ? c_.ctx_swa() : c_.n_ctx;
    l.k_cache = kc.new_tensor_2d(c_.kv_type, c_.n_embd_kv(), cells);
    l.v_cache = kc.new_tensor_2d(c_.v_type(), c_.n_embd_kv(), cells);
    if (l.k_cache != nullptr) format_name(*l.k_cache, "cache_k_l%d", il);
    if (l.v_cache != nullptr) format_name(*l.v_cache, "cache_v_l%d", il);
    m_.kv_cache.push_back(l.k_cache);
    m_.kv_cache.push_back(l.v_cache);
  }

  // phi3's order (llama_model_phi3::load_arch_tensors): the output tensors first, then each layer's attention
  // (fused QKV when the config has it, else wq, wk, wv) and FFN (ffn_down before the fused ffn_up), and the LongRoPE
  // factors with layer 0 (shared by every layer; named without a layer).
  template <class Weight>
  void create_phi3_weights(Weight& weight) {
    const Type wt = c_.weight_type, f32 = Type::kF32;
    create_output(weight);
    m_.layers.resize(static_cast<size_t>(c_.n_layer));
    for (int il = 0; il < c_.n_layer; ++il) {
      LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      l.attn_norm = weight("attn_norm", il, f32, {c_.n_embd});
      if (c_.fused_qkv) {
        l.wqkv = weight("attn_qkv", il, wt, {c_.n_embd, c_.n_embd_q() + 2 * c_.n_embd_kv()});
      } else {
        l.wq = weight("attn_q", il, wt, {c_.n_embd, c_.n_embd_q()});
        l.wk = weight("attn_k", il, wt, {c_.n_embd, c_.n_embd_kv()});
        l.wv = weight("attn_v", il, wt, {c_.n_embd, c_.n_embd_kv()});
      }
      l.wo = weight("attn_output", il, wt, {c_.n_embd_q(), c_.n_embd});
      l.ffn_norm = weight("ffn_norm", il, f32, {c_.n_embd});
      l.ffn_down = weight("ffn_down", il, wt, {c_.n_ff, c_.n_embd});
      l.ffn_up = weight("ffn_up", il, wt, {c_.n_embd, 2 * c_.n_ff});
      if (il == 0 && c_.rope_factors_ls) {
        m_.rope_long = weight("rope_factors_long", -1, f32, {c_.head_dim() / 2});
        m_.rope_short = weight("rope_factors_short", -1, f32, {c_.head_dim() / 2});
      }
      create_rope_copies(il);
      create_cache(l, il);
    }
  }

  // gpt-oss's order (llama_model_openai_moe::load_arch_tensors, src/models/openai-moe.cpp): the output tensors, then
  // per layer the norms (post_attention_norm is the FFN's input norm: ffn_norm here), the attention weights, the sinks,
  // the router and the experts, then the biases.
  template <class Weight, class Bias>
  void create_gpt_oss_weights(Weight& weight, Bias& bias) {
    const Type wt = c_.weight_type, f32 = Type::kF32;
    const int64_t ne = c_.n_expert;
    create_output(weight);
    m_.layers.resize(static_cast<size_t>(c_.n_layer));
    for (int il = 0; il < c_.n_layer; ++il) {
      LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      l.attn_norm = weight("attn_norm", il, f32, {c_.n_embd});
      l.ffn_norm = weight("post_attention_norm", il, f32, {c_.n_embd});
      l.wq = weight("attn_q", il, wt, {c_.n_embd, c_.n_embd_q()});
      l.wk = weight("attn_k", il, wt, {c_.n_embd, c_.n_embd_kv()});
      l.wv = weight("attn_v", il, wt, {c_.n_embd, c_.n_embd_kv()});
      l.wo = weight("attn_output", il, wt, {c_.n_embd_q(), c_.n_embd});
      l.attn_sinks = weight("attn_sinks", il, f32, {c_.n_head});
      l.ffn_gate_inp = weight("ffn_gate_inp", il, f32, {c_.n_embd, ne});
      l.ffn_gate_exps = weight("ffn_gate_exps", il, wt, {c_.n_embd, c_.n_ff, ne});
      l.ffn_down_exps = weight("ffn_down_exps", il, wt, {c_.n_ff, c_.n_embd, ne});
      l.ffn_up_exps = weight("ffn_up_exps", il, wt, {c_.n_embd, c_.n_ff, ne});
      if (c_.attn_bias) {
        l.bq = bias("attn_q", il, {c_.n_embd_q()});
        l.bk = bias("attn_k", il, {c_.n_embd_kv()});
        l.bv = bias("attn_v", il, {c_.n_embd_kv()});
      }
      if (c_.attn_out_bias) l.bo = bias("attn_output", il, {c_.n_embd});
      if (c_.moe_bias) {
        l.ffn_gate_inp_b = bias("ffn_gate_inp", il, {ne});
        l.ffn_gate_exps_b = bias("ffn_gate_exps", il, {c_.n_ff, ne});
        l.ffn_down_exps_b = bias("ffn_down_exps", il, {c_.n_embd, ne});
        l.ffn_up_exps_b = bias("ffn_up_exps", il, {c_.n_ff, ne});
      }
      create_cache(l, il);
    }
  }

  void create_inputs() {
    auto input = [&](Tensor* t, const char* name) {
      if (t == nullptr) return t;
      set_name(*t, name);
      set_input(*t);
      return t;
    };
    m_.tokens = input(ctx_.new_tensor_1d(Type::kI32, c_.n_tokens), "inp_tokens");
    m_.pos = input(ctx_.new_tensor_1d(Type::kI32, c_.n_tokens), "inp_pos");
    // A llama.cpp graph of the VIEW + CPY era writes at the cache head (no indices); one writing with SET_ROWS has
    // llama.cpp's inputs: i64 indices for K and for V (each of V's elements when V is transposed), per cache
    if (cpp_ == nullptr) {
      m_.kv_idxs = input(ctx_.new_tensor_1d(Type::kI32, c_.n_tokens), "inp_kv_idxs");
    } else if (!cpp_->kv_cpy) {
      const int64_t n_v = c_.flash_attn ? c_.n_tokens : c_.n_embd_kv() * c_.n_tokens;
      m_.kv_idxs = input(ctx_.new_tensor_1d(Type::kI64, c_.n_tokens), "inp_k_idxs");
      m_.v_idxs = input(ctx_.new_tensor_1d(Type::kI64, n_v), "inp_v_idxs");
      if (c_.has_swa()) {
        m_.kv_idxs_swa = input(ctx_.new_tensor_1d(Type::kI64, c_.n_tokens), "inp_k_idxs_swa");
        m_.v_idxs_swa = input(ctx_.new_tensor_1d(Type::kI64, n_v), "inp_v_idxs_swa");
      }
    }
    // A llama.cpp graph's mask is f32 (cast to f16 for flash attention in build(), as build_inp_kq_mask does), or
    // from 9410 f16 with flash attention (mask_f16)
    const bool f32_mask = cpp_ != nullptr ? !(cpp_->mask_f16 && c_.flash_attn) : c_.kq_mask_f32 && !c_.flash_attn;
    const Type mask_type = f32_mask ? Type::kF32 : Type::kF16;
    m_.mask = input(ctx_.new_tensor_2d(mask_type, c_.kv_len(), c_.n_tokens), "inp_kq_mask");
    if (c_.has_swa()) {
      m_.mask_swa = input(ctx_.new_tensor_2d(mask_type, c_.kv_len_swa(), c_.n_tokens), "inp_kq_mask_swa");
    }
    // llama.cpp from 8619 with a quantized cache: the Hadamard matrices of its caches' rotations (kv_rotation), made
    // with the attention inputs (llama_kv_cache::build_input_k_rot, build_input_v_rot): the non-SWA cache's, then
    // from 8699 the SWA cache's
    auto rot = [&](int64_t n, const char* name) {
      return n > 0 ? input(ctx_.new_tensor_2d(Type::kF32, n, n), name) : nullptr;
    };
    m_.k_rot = rot(c_.k_rot_dim(), "attn_inp_k_rot");
    m_.v_rot = rot(c_.v_rot_dim(), "attn_inp_v_rot");
    if (c_.has_swa() && cpp_ != nullptr && cpp_->kv_rotation_swa_inputs) {
      m_.k_rot_swa = rot(c_.k_rot_dim(), "attn_inp_k_rot_swa");
      m_.v_rot_swa = rot(c_.v_rot_dim(), "attn_inp_v_rot_swa");
    }
    // llama.cpp builds inp_out_ids even when every token is an output (llama_cpp_graph.h, out_ids_always)
    if (c_.outputs() < c_.n_tokens || (cpp_ != nullptr && cpp_->out_ids_always)) {
      m_.out_ids = input(ctx_.new_tensor_1d(Type::kI32, c_.outputs()), "inp_out_ids");
    }
    // llama.cpp from 7819: an embeddings input beside the tokens, which no node reads (inp_embd_input)
    if (cpp_ != nullptr && cpp_->inp_embd_input) {
      m_.embd = input(ctx_.new_tensor_2d(Type::kF32, c_.n_embd, c_.n_tokens), "inp_embd_unused");
    }
  }

  // One decoder step; returns the logits.
  Tensor* build() {
    const blocks::AttentionShape shape{
        .head_dim = c_.head_dim(),
        .n_head = c_.n_head,
        .n_head_kv = c_.n_head_kv,
        .n_tokens = c_.n_tokens,
        .n_kv = c_.kv_len(),
        .kq_scale = c_.attn_scale > 0.0f ? 1.0f : 1.0f / std::sqrt(static_cast<float>(c_.head_dim())),
        .q_scale = c_.attn_scale,
        .flash_attn = c_.flash_attn,
        .cpp = cpp_,
        .iswa = c_.has_swa()};
    const blocks::RopeParams rope{.n_rot = static_cast<int>(c_.head_dim()),
                                  .mode = c_.rope_mode,
                                  .freq_base = c_.rope_base,
                                  .freq_scale = c_.rope_scale,
                                  .freq_factors = rope_factors(0),
                                  .yarn = c_.rope_yarn};
    blocks::AttentionShape shape_swa = shape;
    shape_swa.n_kv = c_.kv_len_swa();
    blocks::RopeParams rope_swa = rope;
    rope_swa.freq_base = c_.rope_base_swa;
    rope_swa.freq_scale = c_.rope_scale_swa;
    // The new tokens' slots (default_inputs): the last n_tokens of the n_kv attended to.
    const int64_t kv_head = c_.kv_len() - c_.n_tokens;
    // llama.cpp casts its f32 masks to f16 for flash attention, once per graph (ggml_cast: a CPY node each)
    Tensor* mask = m_.mask;
    Tensor* mask_swa = m_.mask_swa;
    if (cpp_ != nullptr && c_.flash_attn && !cpp_->mask_f16) {
      mask = named(cast(ctx_, mask, Type::kF16), "kq_mask_cnv", -1);
      if (mask_swa != nullptr) mask_swa = named(cast(ctx_, mask_swa, Type::kF16), "kq_mask_swa_cnv", -1);
    }
    // (the sliding-window layers rotate by their own cache's matrices from 8699, before by the non-SWA cache's)
    const bool own_rot_swa = cpp_ != nullptr && cpp_->kv_rotation_swa_inputs;
    const blocks::AttentionInputs attn_in{.pos = m_.pos,
                                          .kv_idxs = m_.kv_idxs,
                                          .mask = mask,
                                          .v_idxs = m_.v_idxs,
                                          .kv_head = kv_head,
                                          .k_rot = m_.k_rot,
                                          .v_rot = m_.v_rot};
    const blocks::AttentionInputs attn_in_swa{.pos = m_.pos,
                                              .kv_idxs = m_.kv_idxs_swa != nullptr ? m_.kv_idxs_swa : m_.kv_idxs,
                                              .mask = mask_swa,
                                              .v_idxs = m_.v_idxs_swa != nullptr ? m_.v_idxs_swa : m_.v_idxs,
                                              .kv_head = c_.kv_len_swa() - c_.n_tokens,
                                              .k_rot = own_rot_swa ? m_.k_rot_swa : m_.k_rot,
                                              .v_rot = own_rot_swa ? m_.v_rot_swa : m_.v_rot};
    const blocks::MoeParams moe{.n_expert = c_.n_expert,
                                .n_expert_used = c_.n_expert_used,
                                .norm_weights = c_.moe_norm_weights,
                                .softmax_weight = c_.moe_softmax_weight,
                                .oai_alpha = c_.swiglu_oai_alpha,
                                .oai_limit = c_.swiglu_oai_limit,
                                .cpp = cpp_};
    const blocks::GraphOrder order = [this](Tensor* t) { expand(t); };

    Tensor* inp = named(get_rows(ctx_, m_.tok_embd, m_.tokens), "inp_embd", -1);
    if (c_.embd_scale) inp = named(scale(ctx_, inp, std::sqrt(static_cast<float>(c_.n_embd))), "inp_scaled", -1);
    bool global_used = false, swa_used = false;  // which mask some layer reads
    // gpt-oss in llama.cpp from 10158: the output rows selected after the layers, not in the last one
    const bool out_ids_after = cpp_ != nullptr && cpp_->out_ids_after_layers && c_.attn_sinks;
    for (int il = 0; il < c_.n_layer; ++il) {
      const LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      const bool swa = c_.is_swa(il);
      (swa ? swa_used : global_used) = true;
      Tensor* cur = blocks::rms_norm_mul(ctx_, inp, l.attn_norm, c_.norm_eps, "attn_norm", il);
      blocks::RopeParams rope_il = swa ? rope_swa : rope;
      rope_il.freq_factors = rope_factors(il);
      cur = blocks::self_attention(ctx_, swa ? shape_swa : shape, rope_il,
                                   {.wqkv = l.wqkv,
                                    .wq = l.wq,
                                    .wk = l.wk,
                                    .wv = l.wv,
                                    .wo = l.wo,
                                    .bq = l.bq,
                                    .bk = l.bk,
                                    .bv = l.bv,
                                    .bo = l.bo,
                                    .sinks = l.attn_sinks,
                                    .q_norm = l.attn_q_norm,
                                    .k_norm = l.attn_k_norm,
                                    .qk_norm_eps = c_.norm_eps},
                                   {.k = l.k_cache, .v = l.v_cache}, swa ? attn_in_swa : attn_in, cur, il, order);
      if (il == c_.n_layer - 1 && m_.out_ids != nullptr && !out_ids_after) {
        // Only the rows that produce logits go on (llama.cpp's inp_out_ids).
        cur = get_rows(ctx_, cur, m_.out_ids);
        inp = get_rows(ctx_, inp, m_.out_ids);
      }
      if (c_.post_norms) cur = blocks::rms_norm_mul(ctx_, cur, l.attn_post_norm, c_.norm_eps, "attn_post_norm", il);
      Tensor* ffn_inp = named(add(ctx_, cur, inp), c_.post_norms ? "sa_out" : "ffn_inp", il);
      cur = blocks::rms_norm_mul(ctx_, ffn_inp, l.ffn_norm, c_.norm_eps, c_.attn_sinks ? "attn_post_norm" : "ffn_norm",
                                 il);
      if (c_.ffn_gelu) {
        cur = blocks::geglu_ffn(ctx_, {.gate = l.ffn_gate, .up = l.ffn_up, .down = l.ffn_down}, cur, il, cpp_);
      } else if (c_.is_moe()) {
        cur = blocks::moe_ffn(ctx_, moe,
                              {.gate_inp = l.ffn_gate_inp,
                               .gate_exps = l.ffn_gate_exps,
                               .up_exps = l.ffn_up_exps,
                               .down_exps = l.ffn_down_exps,
                               .gate_inp_b = l.ffn_gate_inp_b,
                               .gate_exps_b = l.ffn_gate_exps_b,
                               .up_exps_b = l.ffn_up_exps_b,
                               .down_exps_b = l.ffn_down_exps_b},
                              cur, il, order);
      } else {
        cur = blocks::swiglu_ffn(ctx_, {.gate = l.ffn_gate, .up = l.ffn_up, .down = l.ffn_down}, cur, il, cpp_);
      }
      if (c_.post_norms) cur = blocks::rms_norm_mul(ctx_, cur, l.ffn_post_norm, c_.norm_eps, "ffn_post_norm", il);
      inp = named(add(ctx_, cur, ffn_inp), "l_out", il);
    }
    // A mask no layer reads is no input of the graph (a sliding-window model with fewer layers than its pattern has
    // no global layer: `run -m tiny-gemma3 --layers 3` failed writing inp_kq_mask, which nothing had allocated)
    if (!global_used) m_.mask = nullptr;
    if (!swa_used) m_.mask_swa = nullptr;
    // so are rotation matrices no layer reads (the non-SWA cache's are read by every layer before 8699)
    if (!global_used && (own_rot_swa || !swa_used)) m_.k_rot = m_.v_rot = nullptr;
    if (!swa_used) m_.k_rot_swa = m_.v_rot_swa = nullptr;
    // and each cache's indices (llama.cpp's graph: one set per cache)
    if (!global_used && m_.kv_idxs_swa != nullptr) m_.kv_idxs = m_.v_idxs = nullptr;
    if (!swa_used) m_.kv_idxs_swa = m_.v_idxs_swa = nullptr;
    if (out_ids_after && m_.out_ids != nullptr) {
      inp = get_rows(ctx_, inp, m_.out_ids);
    }
    // the unused embeddings input is a leaf of the graph from its start, as ggml_build_forward_select adds it
    if (m_.embd != nullptr) expand(m_.embd);
    Tensor* cur = blocks::rms_norm_mul(ctx_, inp, m_.output_norm, c_.norm_eps, "result_norm", -1);
    return named(mul_mat(ctx_, m_.output, cur), "result_output", -1);
  }

 private:
  // Adds t and what it depends on to the graph now, fixing their place in the order (the blocks' GraphOrder).
  void expand(Tensor* t) {
    if (t == nullptr || !graph_status_.ok()) return;
    graph_status_ = m_.graph->build_forward(t);
  }

  const LlamaConfig& c_;
  LlamaGraph& m_;
  Context& ctx_;
  const LlamaCppGraph cpp_graph_;
  const LlamaCppGraph* cpp_;  // null: Tessera's own graph
  Status graph_status_;
  std::vector<std::array<Tensor*, 3>> rope_sets_;  // [k]: the k-th copies of rope_freqs, rope_long, rope_short
};

}  // namespace

// llama_kv_cache's attn_rot_k and attn_rot_v (src/llama-kv-cache.cpp from 8619, PR #21038), and the sizes of
// build_input_k_rot's and build_input_v_rot's matrices. Tessera's layers share one head size, so llama.cpp's other
// condition (n_embd_head_k_all > 0 from 8699, before !is_n_embd_k_gqa_variable(): every layer of the cache alike)
// holds.
int64_t LlamaConfig::k_rot_dim() const {
  if (!llama_cpp || !llama_cpp->kv_rotation || !type_traits(kv_type).is_quantized || head_dim() % 64 != 0) return 0;
  int64_t n = 64;
  while (head_dim() % (2 * n) == 0) n *= 2;
  return n;
}
int64_t LlamaConfig::v_rot_dim() const {
  if (!llama_cpp || !llama_cpp->kv_rotation || !type_traits(v_type()).is_quantized || head_dim() % 64 != 0) return 0;
  return 64;  // "using smaller rotation matrices for V seems beneficial"
}

std::string LlamaConfig::kv_type_text() const {
  std::string t = type_name(kv_type);
  if (v_type() != kv_type) t += std::string("/") + type_name(v_type());
  return t;
}

Status validate(const LlamaConfig& c) {
  if (c.n_layer < 1) return invalid("n_layer must be >= 1");
  for (auto [v, what] : {std::pair{c.n_embd, "n_embd"},
                         {c.n_ff, "n_ff"},
                         {c.n_head, "n_head"},
                         {c.n_head_kv, "n_head_kv"},
                         {c.n_ctx, "n_ctx"},
                         {c.n_tokens, "n_tokens"},
                         {c.n_vocab, "n_vocab"}}) {
    if (v < 1) return invalid(format_message("%s must be >= 1, got %lld", what, static_cast<long long>(v)));
  }
  if (c.n_embd_head < 0) return invalid("n_embd_head must be >= 0 (0: n_embd / n_head)");
  if (c.n_embd_head == 0 && c.n_embd % c.n_head != 0) {
    return invalid("n_embd must be a multiple of n_head (or n_embd_head set)");
  }
  if (c.n_embd_head > (int64_t{1} << 20) || c.n_head > (int64_t{1} << 20)) {
    return invalid("n_embd_head and n_head must be at most 2^20");  // (their product stays far from overflow)
  }
  if (c.n_head % c.n_head_kv != 0) return invalid("n_head must be a multiple of n_head_kv");
  if (c.head_dim() % 2 != 0) return invalid("the head size (n_embd_head, or n_embd / n_head) must be even (rope)");
  if (c.rope_mode != RopeMode::kNormal && c.rope_mode != RopeMode::kNeox) {
    return invalid("rope_mode must be normal or neox");
  }
  if (c.n_kv < 0 || c.n_kv > c.n_ctx) return invalid("n_kv must be in [0, n_ctx] (0 = n_ctx)");
  if (c.n_tokens > c.kv_len()) return invalid("n_tokens must be <= n_kv (the new tokens are part of the cache)");
  if (c.n_outputs < 0 || c.n_outputs > c.n_tokens) return invalid("n_outputs must be in [0, n_tokens]");
  if (c.llama_cpp && c.llama_cpp->build < 1) {
    return invalid("llama_cpp.build must be >= 1 (unset llama_cpp: Tessera's own graph)");
  }
  if (c.n_expert < 0 || c.n_expert_used < 0 || (c.n_expert == 0) != (c.n_expert_used == 0) ||
      c.n_expert_used > c.n_expert) {
    return invalid("experts: need 0 < n_expert_used <= n_expert, or both 0 for a dense FFN");
  }
  // The Weight set of docs/ops.md: a float type or any quantized type (storage-only ones too: such a model is placed,
  // planned and timed in metadata-only mode; a memory-backed run refuses it).
  auto is_weight_type = [](Type t) {
    return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16 || (type_is_valid(t) && type_traits(t).is_quantized);
  };
  if (!is_weight_type(c.weight_type)) {
    return invalid(
        format_message("weight_type must be f32, f16, bf16 or a quantized type, got %s", type_name(c.weight_type)));
  }
  for (auto [t, what] : {std::pair{c.kv_type, "kv_type"}, std::pair{c.v_type(), "the V cache's type"}}) {
    if (!is_weight_type(t)) {
      return invalid(format_message("%s must be f32, f16, bf16 or a quantized type, got %s", what, type_name(t)));
    }
  }
  // Attention without flash attention reads V transposed (cont(transpose(V))), which a block-quantized V cannot be;
  // llama.cpp refuses the same ("V cache quantization requires flash_attn"). A quantized K is read head by head.
  if (!c.flash_attn && type_traits(c.v_type()).is_quantized) {
    return invalid(format_message(
        "a %s V cache needs flash attention: without it V is read transposed, which a quantized cache cannot be; "
        "use flash attention or a V cache of f16, bf16 or f32",
        type_name(c.v_type())));
  }
  // One type for every matrix (a preset): each row length must hold whole blocks of it. A file's model types each
  // weight (weight_types, from the tensor table), where llama-quantize has already given a row that a type's blocks do
  // not divide another type (Qwen2.5-72B's ffn_down rows of 29568 are q5_0 / q8_0 in a Q4_K_M file whose attn_q sets
  // weight_type q4_K): each weight is checked against its own type where it is made (Context::new_tensor).
  const int64_t wb = type_traits(c.weight_type).block_size;
  if (c.weight_types.empty() && (c.n_embd % wb != 0 || c.n_ff % wb != 0 || c.n_embd_q() % wb != 0)) {
    return invalid(format_message("n_embd, n_ff and head_dim * n_head must be multiples of %lld for weight type %s",
                                  static_cast<long long>(wb), type_name(c.weight_type)));
  }
  for (const Type t : {c.kv_type, c.v_type()}) {
    if (type_traits(t).is_quantized && c.head_dim() % type_traits(t).block_size != 0) {
      return invalid(
          format_message("head_dim %lld (n_embd / n_head) must be a multiple of the %s block size (the cache "
                         "is viewed head by head)",
                         static_cast<long long>(c.head_dim()), type_name(t)));
    }
    if (c.n_embd_kv() % type_traits(t).block_size != 0) {
      return invalid(format_message("head_dim * n_head_kv must be a multiple of the %s block size", type_name(t)));
    }
  }
  for (auto [v, what] : {std::pair{c.rope_base, "rope_base"},
                         {c.rope_scale, "rope_scale"},
                         {c.rope_base_swa, "rope_base_swa"},
                         {c.rope_scale_swa, "rope_scale_swa"}}) {
    if (!(v > 0.0f) || !std::isfinite(v)) return invalid(format_message("%s must be positive and finite", what));
  }
  if (const char* why = rope_yarn_invalid(c.rope_yarn, std::min(c.rope_scale, c.rope_scale_swa))) {
    return invalid(std::string("rope_yarn: ") + why);
  }
  if (!(c.attn_scale >= 0.0f) || !std::isfinite(c.attn_scale)) return invalid("attn_scale must be finite and >= 0");
  if (c.n_ctx_swa < 0 || c.n_ctx_swa > c.n_ctx || (c.n_ctx_swa > 0 && c.n_ctx_swa < c.n_tokens)) {
    return invalid("n_ctx_swa must be 0 (n_ctx) or in [n_tokens, n_ctx]");
  }
  if (c.swa_pattern < 0 || (c.swa_pattern > 0 && c.n_swa < 1)) {
    return invalid("sliding-window attention needs swa_pattern >= 1 and n_swa >= 1 (or swa_pattern 0: none)");
  }
  if (c.ffn_gelu && c.is_moe()) return invalid("ffn_gelu is for dense FFNs (experts are SwiGLU)");
  if ((c.fused_qkv || c.rope_factors_ls) && !c.fused_up) {
    return invalid("fused_qkv and rope_factors_ls are phi3's and need its fused_up");
  }
  if (c.fused_up && (c.is_moe() || c.ffn_gelu || c.attn_bias || c.attn_qk_norm || c.post_norms || c.has_swa() ||
                     c.rope_freq_factors)) {
    return invalid(
        "fused_up (phi3) goes with none of experts, ffn_gelu, biases, Q/K norms, post-norms, sliding "
        "windows or rope_freq_factors");
  }
  if (c.n_ctx_orig < 0) return invalid("n_ctx_orig must be >= 0 (0: n_ctx)");
  if (c.attn_sinks && (!c.is_moe() || c.ffn_gelu || c.attn_qk_norm || c.post_norms || c.fused_up)) {
    return invalid(
        "attn_sinks (gpt-oss's layout) needs experts and goes with none of ffn_gelu, Q/K norms, post-norms "
        "or fused projections");
  }
  if ((c.moe_bias || c.moe_softmax_weight || c.swiglu_oai_alpha != 0.0f) && !c.is_moe()) {
    return invalid("moe_bias, moe_softmax_weight and swiglu_oai_alpha are for experts (n_expert > 0)");
  }
  if (c.attn_out_bias && !c.attn_sinks) return invalid("attn_out_bias is gpt-oss's and needs its layout (attn_sinks)");
  if (c.moe_bias && !c.attn_sinks) return invalid("moe_bias is gpt-oss's and needs its layout (attn_sinks)");
  if (!(c.swiglu_oai_alpha >= 0.0f) || !std::isfinite(c.swiglu_oai_alpha) || !(c.swiglu_oai_limit >= 0.0f) ||
      !std::isfinite(c.swiglu_oai_limit)) {
    return invalid("swiglu_oai_alpha and swiglu_oai_limit must be finite and >= 0");
  }
  if (!(c.norm_eps >= 0.0f) || !std::isfinite(c.norm_eps)) return invalid("norm_eps must be finite and >= 0");
  if (c.output_copy && !c.tied_output) return invalid("output_copy is a copy of token_embd and needs tied_output");
  if (!c.rope_factor_copy.empty()) {
    if (c.rope_factor_copy.size() != static_cast<size_t>(c.n_layer)) {
      return invalid("rope_factor_copy has " + std::to_string(c.rope_factor_copy.size()) + " entries for " +
                     std::to_string(c.n_layer) + " layers");
    }
    int next = 1;  // copies are numbered in the order of the first layer reading each
    for (size_t il = 0; il < c.rope_factor_copy.size(); ++il) {
      const int k = c.rope_factor_copy[il];
      if (k < 0 || k > next || (il == 0 && k != 0)) {
        return invalid("rope_factor_copy[" + std::to_string(il) + "] is " + std::to_string(k) +
                       ": layer 0 reads the original (0), and copy k first follows copy k - 1");
      }
      if (k == next) ++next;
    }
  }
  return Status::Ok();
}

const LlamaGraph::WeightCopy* LlamaGraph::copy_of(const Tensor* t) const {
  for (const WeightCopy& c : copies) {
    if (c.copy == t) return &c;
  }
  return nullptr;
}

std::vector<Tensor*> LlamaGraph::inputs() const {
  std::vector<Tensor*> v{tokens, pos};
  for (Tensor* t : {kv_idxs, v_idxs, mask, kv_idxs_swa, v_idxs_swa}) {
    if (t != nullptr) v.push_back(t);
  }
  for (Tensor* t : {mask_swa, k_rot, v_rot, k_rot_swa, v_rot_swa, out_ids, embd}) {
    if (t != nullptr) v.push_back(t);
  }
  return v;
}

int LlamaGraph::layer_of(const Tensor* t) const {
  for (size_t il = 0; il < layers.size(); ++il) {
    const LlamaLayer& l = layers[il];
    const Tensor* const all[] = {l.wqkv,
                                 l.attn_norm,
                                 l.wq,
                                 l.wk,
                                 l.wv,
                                 l.wo,
                                 l.bq,
                                 l.bk,
                                 l.bv,
                                 l.attn_q_norm,
                                 l.attn_k_norm,
                                 l.ffn_norm,
                                 l.ffn_gate,
                                 l.ffn_up,
                                 l.ffn_down,
                                 l.ffn_gate_inp,
                                 l.ffn_gate_exps,
                                 l.ffn_up_exps,
                                 l.ffn_down_exps,
                                 l.k_cache,
                                 l.v_cache,
                                 l.attn_post_norm,
                                 l.ffn_post_norm,
                                 l.bo,
                                 l.attn_sinks,
                                 l.ffn_gate_inp_b,
                                 l.ffn_gate_exps_b,
                                 l.ffn_up_exps_b,
                                 l.ffn_down_exps_b};
    for (const Tensor* w : all) {
      if (w != nullptr && w == t) return static_cast<int>(il);
    }
  }
  return -1;
}

Result<LlamaGraph> build_llama(const LlamaConfig& config) {
  TS_RETURN_IF_ERROR(validate(config));
  LlamaGraph m;
  m.config = config;
  m.weights_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  m.cache_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  m.ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  // Generous: a MoE layer has ~30 + 2 * n_expert_used nodes.
  const size_t per_layer = 64 + 4 * static_cast<size_t>(config.n_expert_used);
  m.graph = std::make_unique<Graph>(
      std::max<size_t>(Graph::kDefaultCapacity, (static_cast<size_t>(config.n_layer) + 2) * per_layer));

  Builder b(config, m);
  b.create_weights();
  for (Context* c : {m.weights_ctx.get(), m.cache_ctx.get()}) {
    if (!c->ok()) return c->status();
  }
  b.create_inputs();
  m.logits = b.build();
  if (!m.ctx->ok()) return m.ctx->status();
  TS_RETURN_IF_ERROR(b.graph_status());
  if (m.logits == nullptr) return Status(StatusCode::kFailed, "build_llama: no logits (internal error)");
  set_output(*m.logits);
  TS_RETURN_IF_ERROR(m.graph->build_forward(m.logits));
  return m;
}

}  // namespace tessera::models
