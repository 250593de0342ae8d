// Building blocks shared by the model architectures of tessera::models (internal to the target: not installed, not
// part of the public headers). Each block is a function of explicit shapes, weights and inputs, never of one
// architecture's config, so a new architecture composes them with its own hyperparameters. Intermediate tensors are
// named like llama.cpp's callbacks ("norm-3", "Qcur-3", "kq-3", "ffn_moe_topk-3", ...; see named) so reports and
// tensor-override patterns read the same whatever the architecture.
//
// Errors follow the builders' sticky context error: a block given a null tensor, or whose ops fail, returns null
// and leaves the error in the context for the caller to check once.
#pragma once

#include <cstdint>
#include <functional>
#include <initializer_list>
#include <vector>

#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/models/llama_cpp_graph.h"
#include "tessera/rope.h"

namespace tessera::models::blocks {

// Names a tensor "<what>-<il>" (or "<what>" for il -1) and returns it; null passes through.
Tensor* named(Tensor* t, const char* what, int il);

// A new weight in `wctx` named as in GGUF: "blk.<il>.<name>.<suffix>", or "<name>.<suffix>" for il -1 (the suffix
// "weight", or "bias"). It is also appended to `all` (the model's list of weights, in creation order). Null when the
// context rejects the shape.
Tensor* new_weight(Context& wctx, std::vector<Tensor*>& all, Type type, std::initializer_list<int64_t> ne,
                   const char* name, int il, const char* suffix = "weight");

// Where a block fixes the graph order, as llama.cpp's builders call ggml_build_forward_expand: the hook adds the
// tensor, and what it depends on, to the graph now, so it comes before whatever is added later. An empty hook leaves
// the order to the depth-first walk from the outputs. Errors are the hook owner's to collect.
using GraphOrder = std::function<void(Tensor*)>;

// RMS_NORM of x ("norm-<il>") times the norm weight w ("<what>-<il>").
Tensor* rms_norm_mul(Context& ctx, Tensor* x, Tensor* w, float eps, const char* what, int il);

// ---- attention ----

struct AttentionShape {
  int64_t head_dim = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;   // < n_head: grouped-query attention
  int64_t n_tokens = 0;    // the batch (every token attends: the output rows are selected after attention)
  int64_t n_kv = 0;        // cache slots attended to (the first n_kv of the cache)
  float kq_scale = 1.0f;   // the scores are kq * kq_scale + mask
  float q_scale = 0.0f;    // > 0: Q is scaled by it (SCALE, "Qcur_scaled") after rope (gemma3)
  bool flash_attn = true;  // FLASH_ATTN_EXT, else MUL_MAT -> SOFT_MAX -> MUL_MAT
  // A llama.cpp build's graph (llama_cpp_graph.h), or null for Tessera's own.
  const LlamaCppGraph* cpp = nullptr;
  // The model's cache is llama.cpp's iSWA one (a sliding-window and a global cache): its build_attn keeps Q, K, V in
  // that order where the other one expands V before K (LlamaCppGraph::v_before_k).
  bool iswa = false;
};

struct RopeParams {
  int n_rot = 0;  // rotated dimensions of each head
  RopeMode mode = RopeMode::kNormal;
  float freq_base = 10000.0f;
  float freq_scale = 1.0f;
  Tensor* freq_factors = nullptr;  // f32 [n_rot / 2] dividing the frequencies, or null
  RopeYarn yarn;                   // YaRN scaling (none by default)
};

// One layer's K and V caches: cache type [head_dim * n_head_kv, n_ctx].
struct KvCache {
  Tensor* k = nullptr;
  Tensor* v = nullptr;
};

// The inputs every attention layer reads: pos i32 [n_tokens] (rope positions), kv_idxs i32 [n_tokens] (the cache
// slots the new rows go to), mask [n_kv, n_tokens] (added to the scores).
// A llama.cpp graph writing with VIEW + CPY has no kv_idxs: it writes the slots from kv_head on. One writing a
// transposed V with SET_ROWS indexes V's elements: v_idxs i32 [head_dim * n_head_kv * n_tokens].
// A llama.cpp graph from 8619 with a quantized cache (LlamaCppGraph::kv_rotation) rotates by the Hadamard matrices
// k_rot (Q and K) and v_rot (V and the attention output), f32 [nrot, nrot]; null: no rotation.
struct AttentionInputs {
  Tensor* pos = nullptr;
  Tensor* kv_idxs = nullptr;
  Tensor* mask = nullptr;
  Tensor* v_idxs = nullptr;
  int64_t kv_head = 0;
  Tensor* k_rot = nullptr;
  Tensor* v_rot = nullptr;
};

struct AttentionWeights {
  Tensor* wqkv = nullptr;  // fused (phi3): [n_embd, head_dim * (n_head + 2 n_head_kv)]; then wq, wk, wv are null
  Tensor* wq = nullptr;    // [n_embd, head_dim * n_head]
  Tensor* wk = nullptr;    // [n_embd, head_dim * n_head_kv]
  Tensor* wv = nullptr;    // [n_embd, head_dim * n_head_kv]
  Tensor* wo = nullptr;    // [head_dim * n_head, n_embd]
  // Optional (null: none).
  Tensor* bq = nullptr;      // [head_dim * n_head], added to Q after the projection (qwen2)
  Tensor* bk = nullptr;      // [head_dim * n_head_kv]
  Tensor* bv = nullptr;      // [head_dim * n_head_kv]
  Tensor* bo = nullptr;      // [n_embd], added after the output projection (gpt-oss)
  Tensor* sinks = nullptr;   // f32 [n_head]: attention sinks (gpt-oss), FLASH_ATTN_EXT's or SOFT_MAX's
  Tensor* q_norm = nullptr;  // [head_dim]: RMS_NORM of each head of Q times q_norm, before rope (qwen3)
  Tensor* k_norm = nullptr;  // [head_dim]: the same for K
  float qk_norm_eps = 1e-6f;
};

// Attention over the KV cache, from roped q [head_dim, n_head, T] and k [head_dim, n_head_kv, T] and from
// v [head_dim * n_head_kv, T]: writes k and v into the cache slots kv_idxs (SET_ROWS), reads the first n_kv slots back
// through views of those writes ("k-<il>", "v-<il>"), and returns the heads merged, [head_dim * n_head, T], before the
// output projection. `order` is given Q and the two cache writes (first), and with the MUL_MAT path the softmax'd
// scores (before V's transposed copy, so that copy is not live while the scores are computed).
// `sinks` (f32 [n_head] or null): attention sinks, given to FLASH_ATTN_EXT or to the SOFT_MAX of the scores.
Tensor* attention_kv(Context& ctx, const AttentionShape& shape, const KvCache& cache, const AttentionInputs& in,
                     Tensor* q, Tensor* k, Tensor* v, int il, const GraphOrder& order, Tensor* sinks = nullptr);

// Self-attention of a layer: Q, K, V projections of cur [n_embd, T] ("Qcur", "Kcur", "Vcur"; with their biases added
// when given; or one fused projection "wqkv" whose rows are viewed as Q, K and V, as llama.cpp's build_qkv), Q and K as
// heads [head_dim, n_head(_kv), T] and, when given, their per-head norms ("Qcur_normed", "Kcur_normed"), rope of Q and
// K ("Qcur_rope", "Kcur_rope"), attention_kv, and the output projection ("attn_out"): [n_embd, T]. With in.k_rot
// (in.v_rot), Q and K (V, and the attention output before the projection) are rotated as llama.cpp's build_attn does
// from 8619: RESHAPE to rows of nrot values (a CONT when not contiguous, from 9027: rotation_cont), MUL_MAT by the
// matrix, RESHAPE back (unnamed, as llama.cpp leaves them).
Tensor* self_attention(Context& ctx, const AttentionShape& shape, const RopeParams& rope_params,
                       const AttentionWeights& w, const KvCache& cache, const AttentionInputs& in, Tensor* cur, int il,
                       const GraphOrder& order);

// ---- feed-forward ----

struct DenseFfnWeights {
  Tensor* gate = nullptr;  // [n_embd, n_ff]
  Tensor* up = nullptr;    // [n_embd, n_ff]
  Tensor* down = nullptr;  // [n_ff, n_embd]
};

// SwiGLU FFN: down(swiglu(gate(cur), up(cur))) ("ffn_gate", "ffn_up", "ffn_swiglu", "ffn_out"); cur [n_embd, T].
// Without gate (phi3's fused gate_up, up [n_embd, 2 n_ff]): down(swiglu(up(cur))), the single-input SWIGLU of the
// two halves (SiLU of the first), as llama.cpp's build_ffn with LLM_FFN_SWIGLU.
// `cpp` (a llama.cpp build's graph, or null): with split_glu, SILU then MUL (and a fused up projection's halves as
// VIEW + CONT each) instead of one GLU.
Tensor* swiglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il, const LlamaCppGraph* cpp = nullptr);

// GELU-gated FFN (gemma): down(geglu(gate(cur), up(cur))) ("ffn_up", "ffn_gate", "ffn_geglu", "ffn_out").
Tensor* geglu_ffn(Context& ctx, const DenseFfnWeights& w, Tensor* cur, int il, const LlamaCppGraph* cpp = nullptr);

struct MoeParams {
  int n_expert = 0;
  int n_expert_used = 0;     // top-k
  bool norm_weights = true;  // renormalise the selected experts' weights to sum 1 (Mixtral)
  // gpt-oss (llama.cpp's build_moe_ffn with LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT, LLM_FFN_SWIGLU_OAI_MOE): the
  // top experts by router logit, their weights the softmax over the selected logits ("ffn_moe_weights_softmax")
  bool softmax_weight = false;
  float oai_alpha = 0.0f;  // > 0: SWIGLU_OAI(gate, up, oai_alpha, oai_limit) instead of SWIGLU ("ffn_moe_swiglu_oai")
  float oai_limit = 0.0f;
  // A llama.cpp build's graph (null: Tessera's): experts chosen by ARGSORT + VIEW, split_glu, and with norm_weights
  // moe_weights_clamp (the weights' sum clamped before the DIV, "ffn_moe_weights_sum_clamped").
  const LlamaCppGraph* cpp = nullptr;
};

struct MoeFfnWeights {
  Tensor* gate_inp = nullptr;   // the router, [n_embd, n_expert]
  Tensor* gate_exps = nullptr;  // [n_embd, n_ff, n_expert]
  Tensor* up_exps = nullptr;    // [n_embd, n_ff, n_expert]
  Tensor* down_exps = nullptr;  // [n_ff, n_embd, n_expert]
  // Optional biases (gpt-oss): the router's, added to its logits ("ffn_moe_logits_biased"), and the experts', added
  // with ADD_ID after each MUL_MAT_ID ("ffn_moe_{up,gate,down}_biased").
  Tensor* gate_inp_b = nullptr;   // [n_expert]
  Tensor* gate_exps_b = nullptr;  // [n_ff, n_expert]
  Tensor* up_exps_b = nullptr;    // [n_ff, n_expert]
  Tensor* down_exps_b = nullptr;  // [n_embd, n_expert]
};

// Mixture-of-experts SwiGLU FFN on cur [n_embd, T]: router logits and SOFT_MAX, TOP_K experts per token, their
// weights (optionally renormalised), the experts' SwiGLU through MUL_MAT_ID, weighted and summed over the used
// experts ("ffn_moe_*"). Returns [n_embd, T].
// order: fixes the place of the experts' weights in the graph (LlamaCppGraph::moe_weights_early); may be empty.
Tensor* moe_ffn(Context& ctx, const MoeParams& p, const MoeFfnWeights& w, Tensor* cur, int il,
                const GraphOrder& order = {});

}  // namespace tessera::models::blocks
