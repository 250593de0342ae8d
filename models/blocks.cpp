// The shared model blocks (see blocks.h).
#include "blocks.h"

#include <cmath>

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

namespace {

// A llama.cpp build's cache write and read (llama_cpp_graph.h): with kv_cpy, VIEW + CPY of the new rows at the cache
// head (V transposed without flash attention); else SET_ROWS of 2d VIEWs (a transposed V through three RESHAPEs and
// per-element indices). The reads view the cache itself, [head_dim, n_kv, n_head_kv] (V transposed: [n_kv, head_dim,
// n_head_kv]); with kv_permutes as llama.cpp makes them, heads before slots, then permuted. `order` gets the writes
// (graph order keeps them before the reads, as in llama.cpp, where the reads view the cache leaf).
struct CacheViews {
  Tensor* k = nullptr;
  Tensor* v = nullptr;
};
CacheViews llama_cpp_cache(Context& ctx, const AttentionShape& s, const KvCache& cache, const AttentionInputs& in,
                           Tensor* k, Tensor* v, const GraphOrder& order) {
  const LlamaCppGraph& g = *s.cpp;
  const int64_t hd = s.head_dim, T = s.n_tokens, n_kv_embd = hd * s.n_head_kv;
  const int64_t n_ctx = cache.v->ne[1];
  const bool v_trans = !s.flash_attn;
  const size_t k_row = cache.k->nb[1], v_row = cache.v->nb[1];
  const size_t v_el = type_traits(cache.v->type).type_size;  // a transposed V is f16 / f32 (quantized needs flash)
  // Q (the caller), K and V added together, then the cache writes (build_attn); V before K from 7044 (not iSWA)
  if (g.v_before_k && !s.iswa) {
    fix_order(order, v);
    fix_order(order, k);
  } else {
    fix_order(order, k);
    fix_order(order, v);
  }
  Tensor *k_w = nullptr, *v_w = nullptr;
  if (g.kv_cpy) {
    if (g.k_write_reshape) k = reshape_2d(ctx, k, n_kv_embd, T);
    k_w = cpy(ctx, k, view_1d(ctx, cache.k, n_kv_embd * T, static_cast<size_t>(in.kv_head) * k_row));
    if (g.v_store_reshape) v = reshape_2d(ctx, v, n_kv_embd, T);
    if (v_trans) {
      Tensor* dst = view_2d(ctx, cache.v, T, n_kv_embd, static_cast<size_t>(n_ctx) * v_el,
                            static_cast<size_t>(in.kv_head) * v_el);
      v_w = cpy(ctx, transpose(ctx, v), dst);
    } else {
      v_w = cpy(ctx, v, view_1d(ctx, cache.v, n_kv_embd * T, static_cast<size_t>(in.kv_head) * v_row));
    }
  } else {
    // k and v are [head_dim, n_head_kv, T] (v may be a strided view of a fused projection): 2d views of their rows
    k_w = set_rows(ctx, cache.k, view_2d(ctx, k, n_kv_embd, T, k->nb[2], 0), in.kv_idxs);
    if (v_trans) {
      // V's rows merged: by a reshape when contiguous, else a copy (a fused projection's view), as cpy_v does
      Tensor* v2 = is_contiguous(*v) ? reshape_2d(ctx, v, n_kv_embd, T) : cont_2d(ctx, v, n_kv_embd, T);
      Tensor* flat = reshape_2d(ctx, cache.v, 1, n_ctx * n_kv_embd);
      v_w = set_rows(ctx, flat, reshape_2d(ctx, v2, 1, n_kv_embd * T), in.v_idxs);
    } else {
      v_w = set_rows(ctx, cache.v, view_2d(ctx, v, n_kv_embd, T, v->nb[2], 0),
                     in.v_idxs != nullptr ? in.v_idxs : in.kv_idxs);
    }
  }
  if (k_w == nullptr || v_w == nullptr) return {};
  fix_order(order, k_w);
  fix_order(order, v_w);
  const size_t k_head = row_size(cache.k->type, hd);
  CacheViews r;
  if (g.kv_permutes) {
    r.k = permute(ctx, view_3d(ctx, cache.k, hd, s.n_head_kv, s.n_kv, k_head, k_row, 0), 0, 2, 1, 3);
  } else {
    r.k = view_3d(ctx, cache.k, hd, s.n_kv, s.n_head_kv, k_row, k_head, 0);
  }
  if (v_trans) {  // slot s of dim d of head h at (h * hd + d) * n_ctx + s
    const size_t dim = static_cast<size_t>(n_ctx) * v_el, head = dim * static_cast<size_t>(hd);
    r.v = g.kv_permutes ? permute(ctx, view_3d(ctx, cache.v, s.n_kv, s.n_head_kv, hd, head, dim, 0), 0, 2, 1, 3)
                        : view_3d(ctx, cache.v, s.n_kv, hd, s.n_head_kv, dim, head, 0);
  } else {
    const size_t v_head = row_size(cache.v->type, hd);
    r.v = g.kv_permutes ? permute(ctx, view_3d(ctx, cache.v, hd, s.n_head_kv, s.n_kv, v_head, v_row, 0), 0, 2, 1, 3)
                        : view_3d(ctx, cache.v, hd, s.n_kv, s.n_head_kv, v_row, v_head, 0);
  }
  return r;
}

}  // namespace

Tensor* attention_kv(Context& ctx, const AttentionShape& s, const KvCache& cache, const AttentionInputs& in, Tensor* q,
                     Tensor* k, Tensor* v, int il, const GraphOrder& order, Tensor* sinks) {
  const int64_t hd = s.head_dim, T = s.n_tokens;
  Tensor *kv_k = nullptr, *kv_v = nullptr;
  if (s.cpp != nullptr) {
    fix_order(order, q);
    const CacheViews views = llama_cpp_cache(ctx, s, cache, in, k, v, order);
    kv_k = named(views.k, "k", il);
    kv_v = named(views.v, "v", il);
    // (Q then goes [hd, n_head, T] -> [hd, T, n_head] through a view per stream, one stream, from llama.cpp's PR
    // #14363)
    if (s.cpp->q_stream_view && q != nullptr) q = view_4d(ctx, q, hd, s.n_head, T, 1, q->nb[1], q->nb[2], q->nb[3], 0);
  } else {
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
    // one cache slot (all KV heads) and one head inside it, of each cache's own type (-ctk and -ctv may differ)
    const size_t k_row = cache.k->nb[1], k_head = row_size(cache.k->type, hd);
    const size_t v_row = cache.v->nb[1], v_head = row_size(cache.v->type, hd);
    kv_k = named(view_3d(ctx, k_set, hd, s.n_kv, s.n_head_kv, k_row, k_head, 0), "k", il);
    kv_v = named(view_3d(ctx, v_set, hd, s.n_kv, s.n_head_kv, v_row, v_head, 0), "v", il);
  }
  if (kv_k == nullptr || kv_v == nullptr) return nullptr;

  Tensor* qp = permute(ctx, q, 0, 2, 1, 3);  // [hd, T, n_head]
  if (s.flash_attn) {
    Tensor* out =
        named(flash_attn_ext(ctx, qp, kv_k, kv_v, in.mask, s.kq_scale, sinks), "fattn", il);  // [hd, n_head, T]
    return reshape_2d(ctx, out, hd * s.n_head, T);
  }
  Tensor* kq = named(mul_mat(ctx, kv_k, qp), "kq", il);  // [n_kv, T, n_head]
  kq = named(soft_max(ctx, kq, in.mask, s.kq_scale, sinks), "kq_soft_max", il);
  if (s.cpp != nullptr) {
    // llama.cpp's cache holds V transposed without flash attention: read as it is; the heads merged by one CONT
    Tensor* kqv = named(mul_mat(ctx, kv_v, kq), "kqv", il);  // [hd, T, n_head]
    return named(cont_2d(ctx, permute(ctx, kqv, 0, 2, 1, 3), hd * s.n_head, T), "kqv_merged_cont", il);
  }
  fix_order(order, kq);  // the scores before the copy of V, so the copy is not live while the scores are computed
  Tensor* vt = named(cont(ctx, transpose(ctx, kv_v)), "v_cont", il);        // [n_kv, hd, n_head_kv]
  Tensor* kqv = named(mul_mat(ctx, vt, kq), "kqv", il);                     // [hd, T, n_head]
  kqv = named(cont(ctx, permute(ctx, kqv, 0, 2, 1, 3)), "kqv_merged", il);  // [hd, n_head, T]
  return reshape_2d(ctx, kqv, hd * s.n_head, T);
}

namespace {

// x rotated by the Hadamard matrix rot [n, n] as llama.cpp's llama_mul_mat_hadamard (8619: ggml_mul_mat_aux) does it:
// x as rows of n values (RESHAPE; from 9027 a CONT when x is not contiguous), each row times the matrix (MUL_MAT),
// back to x's shape (RESHAPE). Unnamed, as llama.cpp leaves them. Before 9027 a non-contiguous x is refused: there
// ggml_reshape_2d asserted and llama.cpp aborted.
Tensor* rotated(Context& ctx, Tensor* x, Tensor* rot, const LlamaCppGraph& g) {
  if (x == nullptr || rot == nullptr) return x;
  const int64_t n = rot->ne[0], rows = nelements(*x) / n;
  Tensor* x2 = nullptr;
  if (is_contiguous(*x)) {
    x2 = reshape_2d(ctx, x, n, rows);
  } else if (g.rotation_cont) {
    x2 = cont_2d(ctx, x, n, rows);
  } else {
    return ctx.fail(Status(StatusCode::kInvalidArgument,
                           format_message("llama.cpp build %d rotates %s, which is not contiguous (a fused QKV "
                                          "projection's view), by ggml_reshape_2d, which asserts: builds 8619-9026 "
                                          "abort (PR #22630 copies it from 9027)",
                                          g.build, x->name)));
  }
  return reshape_4d(ctx, mul_mat(ctx, rot, x2), x->ne[0], x->ne[1], x->ne[2], x->ne[3]);
}

}  // namespace

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
    if (s.cpp != nullptr && s.cpp->qkv_cont) {
      // llama.cpp before its PR #14568: contiguous copies of 2d views, then reshaped to heads
      q = reshape_3d(ctx, named(cont(ctx, view_2d(ctx, qkv, nq, T, row, 0)), "Qcur", il), hd, s.n_head, T);
      k = reshape_3d(ctx, named(cont(ctx, view_2d(ctx, qkv, nk, T, row, nq * f)), "Kcur", il), hd, s.n_head_kv, T);
      v = named(cont(ctx, view_2d(ctx, qkv, nk, T, row, (nq + nk) * f)), "Vcur", il);
      if (s.cpp->v_reshape_3d) v = reshape_3d(ctx, v, hd, s.n_head_kv, T);
    } else {
      q = named(view_3d(ctx, qkv, hd, s.n_head, T, head, row, 0), "Qcur", il);
      k = named(view_3d(ctx, qkv, hd, s.n_head_kv, T, head, row, nq * f), "Kcur", il);
      // V as the cache rows it is written to: [n_embd_kv, T] with the token stride of qkv (llama.cpp's cpy_v); a
      // llama.cpp graph views it as heads, as Q and K
      Tensor* v_rows = view_2d(ctx, qkv, nk, T, row, (nq + nk) * f);
      if (s.cpp == nullptr) {
        v = v_rows;
      } else if (s.cpp->fused_v_cont_3d) {  // llama.cpp 6195-6409: one copy to heads
        v = cont_4d(ctx, v_rows, hd, s.n_head_kv, T, 1);
      } else if (s.cpp->fused_v_cont) {  // 5837-6194: a copy, then heads
        v = reshape_3d(ctx, cont(ctx, v_rows), hd, s.n_head_kv, T);
      } else {
        v = view_3d(ctx, qkv, hd, s.n_head_kv, T, head, row, (nq + nk) * f);
      }
      v = named(v, "Vcur", il);
    }
  } else {
    q = named(project(w.wq, w.bq), "Qcur", il);
    k = named(project(w.wk, w.bk), "Kcur", il);
    v = named(project(w.wv, w.bv), "Vcur", il);
    q = reshape_3d(ctx, q, hd, s.n_head, T);
    k = reshape_3d(ctx, k, hd, s.n_head_kv, T);
    if (s.cpp != nullptr && s.cpp->v_reshape_3d) v = reshape_3d(ctx, v, hd, s.n_head_kv, T);
  }
  // Per-head norms (qwen3): RMS_NORM over each head's head_dim values, times the norm weight.
  if (w.q_norm != nullptr) q = rms_norm_mul(ctx, q, w.q_norm, w.qk_norm_eps, "Qcur_normed", il);
  if (w.k_norm != nullptr) k = rms_norm_mul(ctx, k, w.k_norm, w.qk_norm_eps, "Kcur_normed", il);
  q = named(rope_ext(ctx, q, in.pos, r.n_rot, r.mode, r.freq_base, r.freq_scale, r.yarn, r.freq_factors), "Qcur_rope",
            il);
  k = named(rope_ext(ctx, k, in.pos, r.n_rot, r.mode, r.freq_base, r.freq_scale, r.yarn, r.freq_factors), "Kcur_rope",
            il);
  if (s.q_scale > 0.0f) q = named(scale(ctx, q, s.q_scale), "Qcur_scaled", il);
  // llama.cpp from 8619 with a quantized cache (LlamaCppGraph::kv_rotation): Q and K rotated by k_rot, V by v_rot, as
  // build_attn begins; they are then added to the graph (Q, V, K) and written as unrotated ones are
  const bool rotate = s.cpp != nullptr && s.cpp->kv_rotation;
  if (rotate && in.k_rot != nullptr) {
    q = rotated(ctx, q, in.k_rot, *s.cpp);
    k = rotated(ctx, k, in.k_rot, *s.cpp);
  }
  if (rotate && in.v_rot != nullptr) v = rotated(ctx, v, in.v_rot, *s.cpp);
  if (q == nullptr || k == nullptr || v == nullptr) return nullptr;  // (the context's error)
  Tensor* out = attention_kv(ctx, s, cache, in, q, k, v, il, order, w.sinks);
  // and the attention output rotated back by v_rot (its own inverse) before wo
  if (rotate && in.v_rot != nullptr) out = rotated(ctx, out, in.v_rot, *s.cpp);
  out = mul_mat(ctx, w.wo, out);
  if (w.bo != nullptr) out = add(ctx, out, w.bo);  // llama.cpp's build_attn: wo, then its bias
  return named(out, "attn_out", il);
}

namespace {

// A GLU of gate and up, or (llama.cpp before GGML_OP_GLU: cpp->split_glu) the activation of gate times up.
Tensor* gated(Context& ctx, Tensor* gate, Tensor* up, GluOp op, const LlamaCppGraph* cpp, const char* what, int il) {
  if (cpp == nullptr || !cpp->split_glu) return named(glu(ctx, gate, up, op), what, il);
  Tensor* act = unary(ctx, gate, op == GluOp::kGeglu ? UnaryOp::kGelu : UnaryOp::kSilu);
  return named(mul(ctx, act, up), what, il);
}

}  // namespace

Tensor* swiglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il, const LlamaCppGraph* cpp) {
  if (w.gate == nullptr) {  // fused gate and up (phi3)
    Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
    Tensor* act = nullptr;
    if (cpp != nullptr && cpp->split_glu && up != nullptr) {
      // llama.cpp's build_ffn before GGML_OP_GLU: each half copied out of a view, SILU of the first times the second
      const int64_t n_ff = up->ne[0] / 2;
      Tensor* x0 = cont(ctx, view_2d(ctx, up, n_ff, up->ne[1], up->nb[1], 0));
      Tensor* x1 = cont(ctx, view_2d(ctx, up, n_ff, up->ne[1], up->nb[1], row_size(up->type, n_ff)));
      act = named(mul(ctx, silu(ctx, x0), x1), "ffn_swiglu", il);
    } else {
      act = named(glu(ctx, up, nullptr, GluOp::kSwiglu), "ffn_swiglu", il);
    }
    return named(mul_mat(ctx, w.down, act), "ffn_out", il);
  }
  Tensor* gate = named(mul_mat(ctx, w.gate, cur), "ffn_gate", il);
  Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
  Tensor* act = gated(ctx, gate, up, GluOp::kSwiglu, cpp, "ffn_swiglu", il);
  return named(mul_mat(ctx, w.down, act), "ffn_out", il);
}

Tensor* geglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il, const LlamaCppGraph* cpp) {
  // llama.cpp's build_ffn (LLM_FFN_GELU, LLM_FFN_PAR): up first, then gate, then GEGLU of the two.
  Tensor* up = named(mul_mat(ctx, w.up, cur), "ffn_up", il);
  Tensor* gate = named(mul_mat(ctx, w.gate, cur), "ffn_gate", il);
  Tensor* act = gated(ctx, gate, up, GluOp::kGeglu, cpp, "ffn_geglu", il);
  return named(mul_mat(ctx, w.down, act), "ffn_out", il);
}

Tensor* moe_ffn(Context& ctx, const MoeParams& p, const MoeFfnWeights& w, Tensor* cur, int il,
                const GraphOrder& order) {
  if (cur == nullptr) return nullptr;
  // The token count comes from cur: a model's last layer may keep only the rows that produce logits.
  const int64_t n_embd = cur->ne[0], T = cur->ne[1];
  const int n_used = p.n_expert_used;
  Tensor* logits = named(mul_mat(ctx, w.gate_inp, cur), "ffn_moe_logits", il);  // [n_expert, T]
  if (w.gate_inp_b != nullptr) logits = named(add(ctx, logits, w.gate_inp_b), "ffn_moe_logits_biased", il);
  // SOFTMAX_WEIGHT: the experts are chosen by logit and the softmax is taken over the chosen ones only.
  Tensor* probs = p.softmax_weight ? logits : named(soft_max(ctx, logits), "ffn_moe_probs", il);
  // i32 [n_used, T]; llama.cpp: ARGSORT (descending) and a VIEW of its first n_used columns (ggml_top_k)
  Tensor* selected = nullptr;
  if (p.cpp != nullptr) {
    Tensor* sorted = argsort(ctx, probs, SortOrder::kDesc);
    if (sorted != nullptr) selected = view_2d(ctx, sorted, n_used, T, sorted->nb[1], 0);
    selected = named(selected, "ffn_moe_topk", il);
  } else {
    selected = named(top_k(ctx, probs, n_used), "ffn_moe_topk", il);
  }
  Tensor* weights = named(get_rows(ctx, reshape_3d(ctx, probs, 1, p.n_expert, T), selected), "ffn_moe_weights",
                          il);  // [1, n_used, T]
  if (p.softmax_weight) {
    Tensor* w2 = soft_max(ctx, reshape_2d(ctx, weights, n_used, T));
    weights = named(reshape_3d(ctx, w2, 1, n_used, T), "ffn_moe_weights_softmax", il);
  }
  if (p.norm_weights) {
    Tensor* w2 = reshape_2d(ctx, weights, n_used, T);
    Tensor* sum = named(sum_rows(ctx, w2), "ffn_moe_weights_sum", il);  // [1, T]
    // llama.cpp from 6844 (LlamaCppGraph::moe_weights_clamp): the sum clamped, against a division by zero
    if (p.cpp != nullptr && p.cpp->moe_weights_clamp) {
      sum = named(clamp(ctx, sum, 6.103515625e-5f, INFINITY), "ffn_moe_weights_sum_clamped", il);
    }
    w2 = named(div(ctx, w2, sum), "ffn_moe_weights_norm", il);
    weights = reshape_3d(ctx, w2, 1, n_used, T);
  }
  // llama.cpp from 6583: the weights into the graph now, before the experts' products
  if (p.cpp != nullptr && p.cpp->moe_weights_early) fix_order(order, weights);
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
                    : gated(ctx, gate, up, GluOp::kSwiglu, p.cpp, "ffn_moe_swiglu", il);
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
