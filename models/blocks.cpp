// The shared model blocks (see blocks.h).
#include "blocks.h"

#include "tessera/tensor.h"
#include "tessera/types.h"

namespace tessera::models::blocks {

namespace {

void fix_order(const GraphOrder& order, Tensor* t) {
  if (order) order(t);
}

}  // namespace

Tensor* named(Tensor* t, const char* what, int il) {
  if (t == nullptr) return nullptr;
  if (il >= 0) {
    format_name(*t, "%s-%d", what, il);
  } else {
    set_name(*t, what);
  }
  return t;
}

Tensor* new_weight(Context& wctx, std::vector<Tensor*>& all, Type type, std::initializer_list<int64_t> ne,
                   const char* name, int il, const char* suffix) {
  const std::vector<int64_t> v(ne);
  Tensor* t = wctx.new_tensor(type, static_cast<int>(v.size()), v.data());
  if (t == nullptr) return nullptr;
  if (il >= 0) {
    format_name(*t, "blk.%d.%s.%s", il, name, suffix);
  } else {
    format_name(*t, "%s.%s", name, suffix);
  }
  all.push_back(t);
  return t;
}

Tensor* rms_norm_mul(Context& ctx, Tensor* x, Tensor* w, float eps, const char* what, int il) {
  return named(mul(ctx, named(rms_norm(ctx, x, eps), "norm", il), w), what, il);
}

Tensor* attention_kv(Context& ctx, const AttentionShape& s, const KvCache& cache, const AttentionInputs& in, Tensor* q,
                     Tensor* k, Tensor* v, int il, const GraphOrder& order, Tensor* sinks) {
  const int64_t hd = s.head_dim, T = s.n_tokens;
  // Write the new rows into the cache, then read the first n_kv slots back through views of the SET_ROWS results
  // (the views depend on the writes, so graph order has the writes first).
  Tensor* k_set = set_rows(ctx, cache.k, reshape_2d(ctx, k, hd * s.n_head_kv, T), in.kv_idxs);
  Tensor* v_set = set_rows(ctx, cache.v, v, in.kv_idxs);
  if (k_set == nullptr || v_set == nullptr) return nullptr;
  // Fix the order as llama.cpp does (Q, K, V and the cache writes first), rather than leave it to the depth-first
  // walk from the logits, which would visit V's sources first because the attention reads V first.
  fix_order(order, q);
  fix_order(order, k_set);
  fix_order(order, v_set);
  const size_t row = cache.k->nb[1];                // one cache slot: all KV heads
  const size_t head = row_size(cache.k->type, hd);  // one head inside a slot
  Tensor* kv_k = named(view_3d(ctx, k_set, hd, s.n_kv, s.n_head_kv, row, head, 0), "k", il);
  Tensor* kv_v = named(view_3d(ctx, v_set, hd, s.n_kv, s.n_head_kv, row, head, 0), "v", il);

  Tensor* qp = permute(ctx, q, 0, 2, 1, 3);  // [hd, T, n_head]
  if (s.flash_attn) {
    Tensor* out =
        named(flash_attn_ext(ctx, qp, kv_k, kv_v, in.mask, s.kq_scale, sinks), "fattn", il);  // [hd, n_head, T]
    return reshape_2d(ctx, out, hd * s.n_head, T);
  }
  Tensor* kq = named(mul_mat(ctx, kv_k, qp), "kq", il);  // [n_kv, T, n_head]
  kq = named(soft_max(ctx, kq, in.mask, s.kq_scale, sinks), "kq_soft_max", il);
  fix_order(order, kq);  // the scores before the copy of V, so the copy is not live while the scores are computed
  Tensor* vt = named(cont(ctx, transpose(ctx, kv_v)), "v_cont", il);        // [n_kv, hd, n_head_kv]
  Tensor* kqv = named(mul_mat(ctx, vt, kq), "kqv", il);                     // [hd, T, n_head]
  kqv = named(cont(ctx, permute(ctx, kqv, 0, 2, 1, 3)), "kqv_merged", il);  // [hd, n_head, T]
  return reshape_2d(ctx, kqv, hd * s.n_head, T);
}

Tensor* self_attention(Context& ctx, const AttentionShape& s, const RopeParams& r, const AttentionWeights& w,
                       const KvCache& cache, const AttentionInputs& in, Tensor* cur, int il, const GraphOrder& order) {
  const int64_t hd = s.head_dim, T = s.n_tokens;
  // A projection, then its bias (llama.cpp's qwen2 adds each bias right after its MUL_MAT, before the reshape).
  auto project = [&](Tensor* wt, Tensor* b) {
    Tensor* x = mul_mat(ctx, wt, cur);
    return b != nullptr ? add(ctx, x, b) : x;
  };
  Tensor *q = nullptr, *k = nullptr, *v = nullptr;
  if (w.wqkv != nullptr) {
    // One projection; Q, K and V are views of each token's row [Q | K | V] (f32).
    Tensor* qkv = named(mul_mat(ctx, w.wqkv, cur), "wqkv", il);
    if (qkv == nullptr) return nullptr;
    const size_t f = sizeof(float), head = hd * f, row = qkv->nb[1];
    const int64_t nq = hd * s.n_head, nk = hd * s.n_head_kv;
    q = named(view_3d(ctx, qkv, hd, s.n_head, T, head, row, 0), "Qcur", il);
    k = named(view_3d(ctx, qkv, hd, s.n_head_kv, T, head, row, nq * f), "Kcur", il);
    // V as the cache rows it is written to: [n_embd_kv, T] with the token stride of qkv (llama.cpp's cpy_v).
    v = named(view_2d(ctx, qkv, nk, T, row, (nq + nk) * f), "Vcur", il);
  } else {
    q = named(project(w.wq, w.bq), "Qcur", il);
    k = named(project(w.wk, w.bk), "Kcur", il);
    v = named(project(w.wv, w.bv), "Vcur", il);
    q = reshape_3d(ctx, q, hd, s.n_head, T);
    k = reshape_3d(ctx, k, hd, s.n_head_kv, T);
  }
  // Per-head norms (qwen3): RMS_NORM over each head's head_dim values, times the norm weight.
  if (w.q_norm != nullptr) q = rms_norm_mul(ctx, q, w.q_norm, w.qk_norm_eps, "Qcur_normed", il);
  if (w.k_norm != nullptr) k = rms_norm_mul(ctx, k, w.k_norm, w.qk_norm_eps, "Kcur_normed", il);
  q = named(rope_ext(ctx, q, in.pos, r.n_rot, r.mode, r.freq_base, r.freq_scale, r.yarn, r.freq_factors), "Qcur_rope",
            il);
  k = named(rope_ext(ctx, k, in.pos, r.n_rot, r.mode, r.freq_base, r.freq_scale, r.yarn, r.freq_factors), "Kcur_rope",
            il);
  if (s.q_scale > 0.0f) q = named(scale(ctx, q, s.q_scale), "Qcur_scaled", il);
  Tensor* out = attention_kv(ctx, s, cache, in, q, k, v, il, order, w.sinks);
  out = mul_mat(ctx, w.wo, out);
  if (w.bo != nullptr) out = add(ctx, out, w.bo);  // llama.cpp's build_attn: wo, then its bias
  return named(out, "attn_out", il);
}

Tensor* swiglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il) {
  if (w.gate == nullptr) {  // fused gate and up (phi3)
    Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
    Tensor* act = named(glu(ctx, up, nullptr, GluOp::kSwiglu), "ffn_swiglu", il);
    return named(mul_mat(ctx, w.down, act), "ffn_out", il);
  }
  Tensor* gate = named(mul_mat(ctx, w.gate, cur), "ffn_gate", il);
  Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
  Tensor* act = named(swiglu(ctx, gate, up), "ffn_swiglu", il);
  return named(mul_mat(ctx, w.down, act), "ffn_out", il);
}

Tensor* geglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il) {
  // llama.cpp's build_ffn (LLM_FFN_GELU, LLM_FFN_PAR): up first, then gate, then GEGLU of the two.
  Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
  Tensor* gate = named(mul_mat(ctx, w.gate, cur), "ffn_gate", il);
  Tensor* act = named(glu(ctx, gate, up, GluOp::kGeglu), "ffn_geglu", il);
  return named(mul_mat(ctx, w.down, act), "ffn_out", il);
}

Tensor* moe_ffn(Context& ctx, const MoeParams& p, const MoeFfnWeights& w, Tensor* cur, int il) {
  if (cur == nullptr) return nullptr;
  // The token count comes from cur: a model's last layer may keep only the rows that produce logits.
  const int64_t n_embd = cur->ne[0], T = cur->ne[1];
  const int n_used = p.n_expert_used;
  Tensor* logits = named(mul_mat(ctx, w.gate_inp, cur), "ffn_moe_logits", il);  // [n_expert, T]
  if (w.gate_inp_b != nullptr) logits = named(add(ctx, logits, w.gate_inp_b), "ffn_moe_logits_biased", il);
  // SOFTMAX_WEIGHT: the experts are chosen by logit and the softmax is taken over the chosen ones only.
  Tensor* probs = p.softmax_weight ? logits : named(soft_max(ctx, logits), "ffn_moe_probs", il);
  Tensor* selected = named(top_k(ctx, probs, n_used), "ffn_moe_topk", il);  // i32 [n_used, T]
  Tensor* weights = named(get_rows(ctx, reshape_3d(ctx, probs, 1, p.n_expert, T), selected), "ffn_moe_weights",
                          il);  // [1, n_used, T]
  if (p.softmax_weight) {
    Tensor* w2 = soft_max(ctx, reshape_2d(ctx, weights, n_used, T));
    weights = named(reshape_3d(ctx, w2, 1, n_used, T), "ffn_moe_weights_softmax", il);
  }
  if (p.norm_weights) {
    Tensor* w2 = reshape_2d(ctx, weights, n_used, T);
    Tensor* sum = named(sum_rows(ctx, w2), "ffn_moe_weights_sum", il);  // [1, T]
    w2 = named(div(ctx, w2, sum), "ffn_moe_weights_norm", il);
    weights = reshape_3d(ctx, w2, 1, n_used, T);
  }
  auto biased = [&](Tensor* x, Tensor* b, const char* what) {
    return b != nullptr ? named(add_id(ctx, x, b, selected), what, il) : x;
  };
  Tensor* x = reshape_3d(ctx, cur, n_embd, 1, T);
  Tensor* up = named(mul_mat_id(ctx, w.up_exps, x, selected), "ffn_moe_up", il);  // [n_ff, n_used, T]
  up = biased(up, w.up_exps_b, "ffn_moe_up_biased");
  Tensor* gate = named(mul_mat_id(ctx, w.gate_exps, x, selected), "ffn_moe_gate", il);  // [n_ff, n_used, T]
  gate = biased(gate, w.gate_exps_b, "ffn_moe_gate_biased");
  Tensor* act = p.oai_alpha > 0.0f
                    ? named(swiglu_oai(ctx, gate, up, p.oai_alpha, p.oai_limit), "ffn_moe_swiglu_oai", il)
                    : named(swiglu(ctx, gate, up), "ffn_moe_swiglu", il);
  // [n_embd, n_used, T]
  Tensor* experts = named(mul_mat_id(ctx, w.down_exps, act, selected), "ffn_moe_down", il);
  experts = biased(experts, w.down_exps_b, "ffn_moe_down_biased");
  experts = named(mul(ctx, experts, weights), "ffn_moe_weighted", il);
  if (experts == nullptr) return nullptr;
  // Sum over the used experts: views of expert e's rows, added up.
  auto expert_view = [&](int e) {
    return view_2d(ctx, experts, experts->ne[0], T, experts->nb[2], static_cast<size_t>(e) * experts->nb[1]);
  };
  Tensor* out = n_used == 1 ? cont(ctx, expert_view(0)) : expert_view(0);
  for (int e = 1; e < n_used; ++e) out = add(ctx, out, expert_view(e));
  return named(out, "ffn_moe_out", il);
}

}  // namespace tessera::models::blocks
