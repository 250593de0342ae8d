// The llama-style decoder graph (see llama.h). Intermediate tensors are named like llama.cpp's callbacks
// ("attn_norm-3", "Qcur-3", "kq-3", "ffn_moe_topk-3", ...) so reports and tensor-override patterns can refer to them.
#include "tessera/models/llama.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/graph_copy.h"

namespace tessera::models {

namespace {

Status invalid(const std::string& msg) { return Status(StatusCode::kInvalidArgument, "llama config: " + msg); }

// Names a tensor "<what>-<layer>" (or "<what>" for layer -1) and returns it; null passes through.
Tensor* named(Tensor* t, const char* what, int il) {
  if (t == nullptr) return nullptr;
  if (il >= 0) {
    format_name(*t, "%s-%d", what, il);
  } else {
    set_name(*t, what);
  }
  return t;
}

Tensor* weight(Context& wctx, std::vector<Tensor*>& all, Type type, std::initializer_list<int64_t> ne,
               const char* name, int il) {
  const std::vector<int64_t> v(ne);
  Tensor* t = wctx.new_tensor(type, static_cast<int>(v.size()), v.data());
  if (t == nullptr) return nullptr;
  if (il >= 0) {
    format_name(*t, "blk.%d.%s.weight", il, name);
  } else {
    format_name(*t, "%s.weight", name);
  }
  all.push_back(t);
  return t;
}

class Builder {
 public:
  Builder(const LlamaConfig& c, LlamaGraph& m) : c_(c), m_(m), ctx_(*m.ctx) {}

  // The first error of adding tensors to the graph early (see expand).
  const Status& graph_status() const { return graph_status_; }

  void create_weights() {
    Context& w = *m_.weights_ctx;
    auto& all = m_.weights;
    const Type wt = c_.weight_type;
    m_.tok_embd = weight(w, all, wt, {c_.n_embd, c_.n_vocab}, "token_embd", -1);
    m_.layers.resize(static_cast<size_t>(c_.n_layer));
    for (int il = 0; il < c_.n_layer; ++il) {
      LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      l.attn_norm = weight(w, all, Type::kF32, {c_.n_embd}, "attn_norm", il);
      l.wq = weight(w, all, wt, {c_.n_embd, c_.n_embd}, "attn_q", il);
      l.wk = weight(w, all, wt, {c_.n_embd, c_.n_embd_kv()}, "attn_k", il);
      l.wv = weight(w, all, wt, {c_.n_embd, c_.n_embd_kv()}, "attn_v", il);
      l.wo = weight(w, all, wt, {c_.n_embd, c_.n_embd}, "attn_output", il);
      l.ffn_norm = weight(w, all, Type::kF32, {c_.n_embd}, "ffn_norm", il);
      if (c_.is_moe()) {
        l.ffn_gate_inp = weight(w, all, Type::kF32, {c_.n_embd, c_.n_expert}, "ffn_gate_inp", il);
        l.ffn_gate_exps = weight(w, all, wt, {c_.n_embd, c_.n_ff, c_.n_expert}, "ffn_gate_exps", il);
        l.ffn_down_exps = weight(w, all, wt, {c_.n_ff, c_.n_embd, c_.n_expert}, "ffn_down_exps", il);
        l.ffn_up_exps = weight(w, all, wt, {c_.n_embd, c_.n_ff, c_.n_expert}, "ffn_up_exps", il);
      } else {
        l.ffn_gate = weight(w, all, wt, {c_.n_embd, c_.n_ff}, "ffn_gate", il);
        l.ffn_down = weight(w, all, wt, {c_.n_ff, c_.n_embd}, "ffn_down", il);
        l.ffn_up = weight(w, all, wt, {c_.n_embd, c_.n_ff}, "ffn_up", il);
      }
      Context& kc = *m_.cache_ctx;
      l.k_cache = kc.new_tensor_2d(c_.kv_type, c_.n_embd_kv(), c_.n_ctx);
      l.v_cache = kc.new_tensor_2d(c_.kv_type, c_.n_embd_kv(), c_.n_ctx);
      if (l.k_cache != nullptr) format_name(*l.k_cache, "cache_k_l%d", il);
      if (l.v_cache != nullptr) format_name(*l.v_cache, "cache_v_l%d", il);
      m_.kv_cache.push_back(l.k_cache);
      m_.kv_cache.push_back(l.v_cache);
    }
    m_.output_norm = weight(w, all, Type::kF32, {c_.n_embd}, "output_norm", -1);
    m_.output = weight(w, all, wt, {c_.n_embd, c_.n_vocab}, "output", -1);
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
    m_.kv_idxs = input(ctx_.new_tensor_1d(Type::kI32, c_.n_tokens), "inp_kv_idxs");
    m_.mask = input(ctx_.new_tensor_2d(Type::kF16, c_.kv_len(), c_.n_tokens), "inp_kq_mask");
    if (c_.outputs() < c_.n_tokens) m_.out_ids = input(ctx_.new_tensor_1d(Type::kI32, c_.outputs()), "inp_out_ids");
  }

  // One decoder step; returns the logits.
  Tensor* build() {
    Tensor* inp = named(get_rows(ctx_, m_.tok_embd, m_.tokens), "inp_embd", -1);
    for (int il = 0; il < c_.n_layer; ++il) {
      const LlamaLayer& l = m_.layers[static_cast<size_t>(il)];
      Tensor* cur = rms_norm_mul(inp, l.attn_norm, "attn_norm", il);
      cur = attention(l, cur, il);
      if (il == c_.n_layer - 1 && m_.out_ids != nullptr) {
        // Only the rows that produce logits go on (llama.cpp's inp_out_ids).
        cur = get_rows(ctx_, cur, m_.out_ids);
        inp = get_rows(ctx_, inp, m_.out_ids);
      }
      Tensor* ffn_inp = named(add(ctx_, cur, inp), "ffn_inp", il);
      cur = rms_norm_mul(ffn_inp, l.ffn_norm, "ffn_norm", il);
      cur = c_.is_moe() ? moe_ffn(l, cur, il) : dense_ffn(l, cur, il);
      inp = named(add(ctx_, cur, ffn_inp), "l_out", il);
    }
    Tensor* cur = rms_norm_mul(inp, m_.output_norm, "result_norm", -1);
    return named(mul_mat(ctx_, m_.output, cur), "result_output", -1);
  }

 private:
  // RMS_NORM ("norm-<il>") times the norm weight ("<what>-<il>").
  Tensor* rms_norm_mul(Tensor* x, Tensor* w, const char* what, int il) {
    return named(mul(ctx_, named(rms_norm(ctx_, x, c_.norm_eps), "norm", il), w), what, il);
  }

  Tensor* attention(const LlamaLayer& l, Tensor* cur, int il) {
    const int64_t hd = c_.head_dim(), T = c_.n_tokens, n_kv = c_.kv_len();
    const int n_rot = static_cast<int>(hd);
    Tensor* q = named(mul_mat(ctx_, l.wq, cur), "Qcur", il);
    Tensor* k = named(mul_mat(ctx_, l.wk, cur), "Kcur", il);
    Tensor* v = named(mul_mat(ctx_, l.wv, cur), "Vcur", il);
    q = named(rope(ctx_, reshape_3d(ctx_, q, hd, c_.n_head, T), m_.pos, n_rot, RopeMode::kNormal, c_.rope_base),
              "Qcur_rope", il);
    k = named(rope(ctx_, reshape_3d(ctx_, k, hd, c_.n_head_kv, T), m_.pos, n_rot, RopeMode::kNormal, c_.rope_base),
              "Kcur_rope", il);

    // Write the new rows into the cache, then read the first n_kv slots back through views of the SET_ROWS results
    // (the views depend on the writes, so graph order has the writes first).
    Tensor* k_set = set_rows(ctx_, l.k_cache, reshape_2d(ctx_, k, c_.n_embd_kv(), T), m_.kv_idxs);
    Tensor* v_set = set_rows(ctx_, l.v_cache, v, m_.kv_idxs);
    if (k_set == nullptr || v_set == nullptr) return nullptr;
    // Fix the order as llama.cpp does (Q, K, V and the cache writes first), rather than leave it to the depth-first
    // walk from the logits, which would visit V's sources first because the attention reads V first.
    expand(q);
    expand(k_set);
    expand(v_set);
    const size_t row = l.k_cache->nb[1];                    // one cache slot: all KV heads
    const size_t head = row_size(c_.kv_type, hd);           // one head inside a slot
    Tensor* kv_k = named(view_3d(ctx_, k_set, hd, n_kv, c_.n_head_kv, row, head, 0), "k", il);
    Tensor* kv_v = named(view_3d(ctx_, v_set, hd, n_kv, c_.n_head_kv, row, head, 0), "v", il);

    Tensor* qp = permute(ctx_, q, 0, 2, 1, 3);  // [hd, T, n_head]
    const float kq_scale = 1.0f / std::sqrt(static_cast<float>(hd));
    Tensor* out = nullptr;
    if (c_.flash_attn) {
      out = named(flash_attn_ext(ctx_, qp, kv_k, kv_v, m_.mask, kq_scale), "fattn", il);  // [hd, n_head, T]
      out = reshape_2d(ctx_, out, c_.n_embd, T);
    } else {
      Tensor* kq = named(mul_mat(ctx_, kv_k, qp), "kq", il);  // [n_kv, T, n_head]
      kq = named(soft_max(ctx_, kq, m_.mask, kq_scale), "kq_soft_max", il);
      expand(kq);  // the scores before the copy of V, so the copy is not live while the scores are computed
      Tensor* vt = named(cont(ctx_, transpose(ctx_, kv_v)), "v_cont", il);  // [n_kv, hd, n_head_kv]
      Tensor* kqv = named(mul_mat(ctx_, vt, kq), "kqv", il);                // [hd, T, n_head]
      kqv = named(cont(ctx_, permute(ctx_, kqv, 0, 2, 1, 3)), "kqv_merged", il);  // [hd, n_head, T]
      out = reshape_2d(ctx_, kqv, c_.n_embd, T);
    }
    return named(mul_mat(ctx_, l.wo, out), "attn_out", il);
  }

  Tensor* dense_ffn(const LlamaLayer& l, Tensor* cur, int il) {
    Tensor* gate = named(mul_mat(ctx_, l.ffn_gate, cur), "ffn_gate", il);
    Tensor* up = named(mul_mat(ctx_, l.ffn_up, cur), "ffn_up", il);
    Tensor* act = named(swiglu(ctx_, gate, up), "ffn_swiglu", il);
    return named(mul_mat(ctx_, l.ffn_down, act), "ffn_out", il);
  }

  Tensor* moe_ffn(const LlamaLayer& l, Tensor* cur, int il) {
    const int64_t T = cur != nullptr ? cur->ne[1] : 0;
    const int n_used = c_.n_expert_used;
    Tensor* logits = named(mul_mat(ctx_, l.ffn_gate_inp, cur), "ffn_moe_logits", il);  // [n_expert, T]
    Tensor* probs = named(soft_max(ctx_, logits), "ffn_moe_probs", il);
    Tensor* selected = named(top_k(ctx_, probs, n_used), "ffn_moe_topk", il);  // i32 [n_used, T]
    Tensor* weights = named(get_rows(ctx_, reshape_3d(ctx_, probs, 1, c_.n_expert, T), selected), "ffn_moe_weights",
                            il);  // [1, n_used, T]
    if (c_.moe_norm_weights) {
      Tensor* w2 = reshape_2d(ctx_, weights, n_used, T);
      Tensor* sum = named(sum_rows(ctx_, w2), "ffn_moe_weights_sum", il);  // [1, T]
      w2 = named(div(ctx_, w2, sum), "ffn_moe_weights_norm", il);
      weights = reshape_3d(ctx_, w2, 1, n_used, T);
    }
    Tensor* x = reshape_3d(ctx_, cur, c_.n_embd, 1, T);
    Tensor* up = named(mul_mat_id(ctx_, l.ffn_up_exps, x, selected), "ffn_moe_up", il);        // [n_ff, n_used, T]
    Tensor* gate = named(mul_mat_id(ctx_, l.ffn_gate_exps, x, selected), "ffn_moe_gate", il);  // [n_ff, n_used, T]
    Tensor* act = named(swiglu(ctx_, gate, up), "ffn_moe_swiglu", il);
    // [n_embd, n_used, T]
    Tensor* experts = named(mul_mat_id(ctx_, l.ffn_down_exps, act, selected), "ffn_moe_down", il);
    experts = named(mul(ctx_, experts, weights), "ffn_moe_weighted", il);
    if (experts == nullptr) return nullptr;
    // Sum over the used experts: views of expert e's rows, added up.
    auto expert_view = [&](int e) {
      return view_2d(ctx_, experts, c_.n_embd, T, experts->nb[2], static_cast<size_t>(e) * experts->nb[1]);
    };
    Tensor* out = n_used == 1 ? cont(ctx_, expert_view(0)) : expert_view(0);
    for (int e = 1; e < n_used; ++e) out = add(ctx_, out, expert_view(e));
    return named(out, "ffn_moe_out", il);
  }

  // Adds t and what it depends on to the graph now, fixing their place in the order.
  void expand(Tensor* t) {
    if (t == nullptr || !graph_status_.ok()) return;
    graph_status_ = m_.graph->build_forward(t);
  }

  const LlamaConfig& c_;
  LlamaGraph& m_;
  Context& ctx_;
  Status graph_status_;
};

uint64_t mix(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Status validate(const LlamaConfig& c) {
  if (c.n_layer < 1) return invalid("n_layer must be >= 1");
  for (auto [v, what] : {std::pair{c.n_embd, "n_embd"}, {c.n_ff, "n_ff"}, {c.n_head, "n_head"},
                         {c.n_head_kv, "n_head_kv"}, {c.n_ctx, "n_ctx"}, {c.n_tokens, "n_tokens"},
                         {c.n_vocab, "n_vocab"}}) {
    if (v < 1) return invalid(format_message("%s must be >= 1, got %lld", what, static_cast<long long>(v)));
  }
  if (c.n_embd % c.n_head != 0) return invalid("n_embd must be a multiple of n_head");
  if (c.n_head % c.n_head_kv != 0) return invalid("n_head must be a multiple of n_head_kv");
  if (c.head_dim() % 2 != 0) return invalid("the head size n_embd / n_head must be even (rope)");
  if (c.n_kv < 0 || c.n_kv > c.n_ctx) return invalid("n_kv must be in [0, n_ctx] (0 = n_ctx)");
  if (c.n_tokens > c.kv_len()) return invalid("n_tokens must be <= n_kv (the new tokens are part of the cache)");
  if (c.n_outputs < 0 || c.n_outputs > c.n_tokens) return invalid("n_outputs must be in [0, n_tokens]");
  if (c.n_expert < 0 || c.n_expert_used < 0 || (c.n_expert == 0) != (c.n_expert_used == 0) ||
      c.n_expert_used > c.n_expert) {
    return invalid("experts: need 0 < n_expert_used <= n_expert, or both 0 for a dense FFN");
  }
  if (!type_is_valid(c.weight_type) || c.weight_type == Type::kI32) {
    return invalid("weight_type must be a weight type");
  }
  if (!type_is_valid(c.kv_type) || c.kv_type == Type::kI32) return invalid("kv_type must be a weight type");
  const int64_t wb = type_traits(c.weight_type).block_size;
  if (c.n_embd % wb != 0 || c.n_ff % wb != 0) {
    return invalid(format_message("n_embd and n_ff must be multiples of %lld for weight type %s",
                                  static_cast<long long>(wb), type_name(c.weight_type)));
  }
  if (c.n_embd_kv() % type_traits(c.kv_type).block_size != 0) {
    return invalid(
        format_message("head_dim * n_head_kv must be a multiple of the %s block size", type_name(c.kv_type)));
  }
  if (!(c.rope_base > 0.0f) || !std::isfinite(c.rope_base)) return invalid("rope_base must be positive");
  if (!(c.norm_eps >= 0.0f) || !std::isfinite(c.norm_eps)) return invalid("norm_eps must be finite and >= 0");
  return Status::Ok();
}

std::vector<std::string> preset_names() { return {"tiny", "tiny-moe", "7b", "8x7b-moe", "70b"}; }

Result<LlamaConfig> preset(const std::string& name) {
  LlamaConfig c;
  c.name = name;
  if (name == "tiny" || name == "tiny-moe") {
    c.n_layer = 2;
    c.n_embd = 64;
    c.n_ff = 128;
    c.n_head = 4;
    c.n_head_kv = 2;
    c.n_ctx = 64;
    c.n_tokens = 8;
    c.n_vocab = 256;
    if (name == "tiny-moe") {
      c.n_expert = 4;
      c.n_expert_used = 2;
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

std::vector<Tensor*> LlamaGraph::inputs() const {
  std::vector<Tensor*> v{tokens, pos, kv_idxs, mask};
  if (out_ids != nullptr) v.push_back(out_ids);
  return v;
}

int LlamaGraph::layer_of(const Tensor* t) const {
  for (size_t il = 0; il < layers.size(); ++il) {
    const LlamaLayer& l = layers[il];
    for (const Tensor* w : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down,
                            l.ffn_gate_inp, l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps, l.k_cache, l.v_cache}) {
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
  m.graph = std::make_unique<Graph>(std::max<size_t>(Graph::kDefaultCapacity,
                                                     (static_cast<size_t>(config.n_layer) + 2) * per_layer));

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

Status fill_random(LlamaGraph& model, uint64_t seed) {
  auto fill = [&](Tensor* t, uint64_t salt, float mean, float stddev) -> Status {
    std::mt19937_64 rng(mix(seed, salt));
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(static_cast<size_t>(nelements(*t)));
    for (float& f : v) f = dist(rng);
    Status s = tensor_from_f32(*t, v);
    if (!s.ok()) return Status(s.code(), std::string("fill_random: ") + t->name + ": " + s.message());
    return s;
  };
  uint64_t salt = 0;
  for (Tensor* w : model.weights) {
    const bool is_norm = w->ne[1] == 1 && w->ne[2] == 1 && w->type == Type::kF32;
    const bool is_embd = w == model.tok_embd;
    const float stddev = is_norm ? 0.1f : is_embd ? 1.0f : 1.0f / std::sqrt(static_cast<float>(w->ne[0]));
    TS_RETURN_IF_ERROR(fill(w, salt++, is_norm ? 1.0f : 0.0f, stddev));
  }
  for (Tensor* kv : model.kv_cache) TS_RETURN_IF_ERROR(fill(kv, salt++, 0.0f, 1.0f));
  return Status::Ok();
}

LlamaInputs default_inputs(const LlamaConfig& c, uint64_t seed) {
  LlamaInputs in;
  const int64_t T = c.n_tokens, n_kv = c.kv_len(), first = n_kv - T;
  std::mt19937_64 rng(mix(seed, 0x70c));
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.n_vocab - 1));
  for (int64_t i = 0; i < T; ++i) {
    in.tokens.push_back(tok(rng));
    in.pos.push_back(static_cast<int32_t>(first + i));
    in.kv_idxs.push_back(static_cast<int32_t>(first + i));
  }
  for (int64_t i = c.n_tokens - c.outputs(); i < T; ++i) in.out_ids.push_back(static_cast<int32_t>(i));
  in.mask.assign(static_cast<size_t>(n_kv * T), 0.0f);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = first + i + 1; j < n_kv; ++j) {
      in.mask[static_cast<size_t>(i * n_kv + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  return in;
}

Status set_inputs(LlamaGraph& m, const LlamaInputs& in) {
  auto set_i32 = [](Tensor* t, const std::vector<int32_t>& v) -> Status {
    if (t == nullptr) return Status::Ok();
    if (static_cast<int64_t>(v.size()) != nelements(*t)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: %s needs %lld values, got %zu", t->name,
                      static_cast<long long>(nelements(*t)), v.size());
    }
    return tensor_set(*t, v.data(), 0, v.size() * sizeof(int32_t));
  };
  TS_RETURN_IF_ERROR(set_i32(m.tokens, in.tokens));
  TS_RETURN_IF_ERROR(set_i32(m.pos, in.pos));
  TS_RETURN_IF_ERROR(set_i32(m.kv_idxs, in.kv_idxs));
  TS_RETURN_IF_ERROR(set_i32(m.out_ids, in.out_ids));
  if (static_cast<int64_t>(in.mask.size()) != nelements(*m.mask)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: the mask needs %lld values, got %zu",
                    static_cast<long long>(nelements(*m.mask)), in.mask.size());
  }
  return tensor_from_f32(*m.mask, in.mask);
}

}  // namespace tessera::models
