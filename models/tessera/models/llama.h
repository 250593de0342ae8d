// A llama-style decoder as a Tessera graph: one decoder step (a batch of n_tokens) over a KV cache of n_ctx slots of
// which the first n_kv are attended to. Dense (SwiGLU FFN) or mixture-of-experts (router, TOP_K, MUL_MAT_ID),
// attention as FLASH_ATTN_EXT or as MUL_MAT -> SOFT_MAX -> MUL_MAT. The same builder makes the Qwen decoders, which
// differ from llama's in a few switches (LlamaConfig's architecture fields): Q/K/V biases (qwen2), per-head RMS norms
// of Q and K and a head size of its own (qwen3, qwen3moe), NEOX rope (all three). Used by the benchmarks, the tests
// and the harness's sessions, whose placement policies select weights by GGUF-style name and layer. Built from the
// shared blocks (models/blocks.h); presets in models/presets.cpp, weights and inputs in llama_data.cpp.
//
// Three contexts, so a caller can place each part where it wants:
//   weights_ctx  (no_alloc) the weights, named as in GGUF ("token_embd.weight", "blk.3.attn_q.weight", ...)
//   cache_ctx    (no_alloc) the per-layer K and V caches "cache_k_l3", "cache_v_l3": [head_dim * n_head_kv, n_ctx]
//   ctx          (no_alloc) inputs and intermediate tensors; the graph planner places them
// Nothing is allocated here: use alloc_ctx_tensors on weights_ctx / cache_ctx for real memory, or leave them
// metadata-only (e.g. give them a placeholder buffer so a planner sees them as externally allocated).
//
// Inputs (flag INPUT, in ctx): tokens i32 [n_tokens], pos i32 [n_tokens] (rope positions), kv_idxs i32 [n_tokens]
// (cache slots the new K/V rows are written to by SET_ROWS), mask f16 [n_kv, n_tokens] (0 or -inf, added to the
// scores), mask_swa (the same shape, for the sliding-window layers of a config with swa_pattern), and out_ids i32
// [n_outputs] when only some tokens produce logits; a llama.cpp graph has a few more of its own (LlamaGraph: embd, the
// rotation matrices). Output (flag OUTPUT): logits f32 [n_vocab, n_outputs].
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/rope.h"
#include "tessera/status.h"
#include "tessera/models/llama_cpp_graph.h"

namespace tessera::gguf {
struct Model;
}

namespace tessera::models {

struct LlamaConfig {
  std::string name = "custom";
  int n_layer = 1;
  int64_t n_embd = 64;
  int64_t n_ff = 128;  // FFN hidden size (per expert for MoE)
  int64_t n_head = 4;
  int64_t n_head_kv = 4;  // < n_head: grouped-query attention (n_head % n_head_kv == 0)
  int64_t n_ctx = 64;     // KV cache length (slots)
  int64_t n_kv = 0;       // cache slots attended to (the first n_kv); 0 = n_ctx
  int64_t n_tokens = 1;   // tokens in the batch
  int64_t n_outputs = 0;  // tokens that produce logits (the last layer keeps only those rows); 0 = n_tokens
  int64_t n_vocab = 256;
  Type weight_type = Type::kQ4_0;  // the large matrices (norms are f32, the MoE router f32)
  Type kv_type = Type::kF16;       // the K cache's, and the V cache's unless v_cache_type says otherwise (-ctk, -ctv)
  std::optional<Type> v_cache_type;
  Type v_type() const { return v_cache_type.value_or(kv_type); }
  // "f16", or "K/V" ("q8_0/f16") when the two caches' types differ.
  std::string kv_type_text() const;
  bool flash_attn = true;
  // The attention mask's type as llama.cpp makes it: f32 (build_inp_kq_mask creates it f32 and casts it to f16 only
  // for flash attention). Models read from GGUF files set it for the softmax path (a flash-attention graph keeps an f16
  // mask: its cast is not modelled); the built-in presets keep an f16 mask.
  bool kq_mask_f32 = false;
  // Mixture of experts: n_expert > 0 replaces the dense FFN by n_expert experts of which n_expert_used are used.
  int n_expert = 0;
  int n_expert_used = 0;
  bool moe_norm_weights = true;  // renormalise the selected experts' weights to sum 1 (Mixtral)
  float rope_base = 10000.0f;
  float norm_eps = 1e-5f;
  // From a model file (from_gguf.h): the type of each weight by its GGUF name (others take weight_type, and norms
  // f32), rope frequency factors ("rope_freqs.weight", f32 [head_dim / 2], Llama 3.1's rope scaling: ROPE's third
  // source), and tied embeddings (no output.weight: the logits read token_embd.weight).
  std::map<std::string, Type> weight_types;
  bool rope_freq_factors = false;
  bool tied_output = false;
  // The copies llama.cpp's loader makes of a weight that several layers share (create_tensor with TENSOR_DUPLICATED:
  // one per buffer type that needs it, "avoid creating a new one" where the original's buffer type is the same; the
  // placement policy decides them: tessera/harness/placement/policy.h, weight_copies). output_copy: with tied_output,
  // the output head is a copy of token_embd.weight on the output layer's buffer type (the logits read it, not
  // token_embd). rope_factor_copy[il]: the copy of the rope factors (rope_freqs, or phi3's rope_factors_long/short)
  // layer il reads: 0 the original, created with layer 0; k > 0 the k-th copy, created with the first layer reading
  // it. Empty: every layer reads the original.
  bool output_copy = false;
  std::vector<int> rope_factor_copy;
  // Architecture (llama.cpp's per-architecture graph builders; docs/gguf.md, 'Architectures'). The defaults are
  // llama's graph.
  std::string arch = "llama";              // what the model is (reports); the switches below make the graph
  int64_t n_embd_head = 0;                 // head size; 0: n_embd / n_head. key_length may differ from that (Qwen3,
                                           // Mistral Nemo): then wq is [n_embd, n_embd_head * n_head], wo its transpose
  bool attn_bias = false;                  // qwen2: blk.N.attn_{q,k,v}.bias (f32), added after each projection
  bool attn_qk_norm = false;               // qwen3: blk.N.attn_{q,k}_norm.weight (f32 [head_dim]), an RMS norm of each
                                           // head of Q and K before rope
  RopeMode rope_mode = RopeMode::kNormal;  // qwen2, qwen3: kNeox (pairs (x[i], x[i + head_dim / 2]))
  // gemma3 (llama.cpp's gemma3 graph, src/models/gemma3.cpp):
  bool embd_scale = false;  // the embeddings times sqrt(n_embd) ("inp_scaled")
  bool post_norms = false;  // blk.N.post_attention_norm / post_ffw_norm (f32 [n_embd]): RMS norms of the attention
                            // and FFN outputs before their residual adds
  bool ffn_gelu = false;    // GELU-gated FFN (GEGLU of gate and up) instead of SwiGLU
  float attn_scale = 0.0f;  // > 0: Q is scaled by it after rope (SCALE) and the scores by 1; 0: 1 / sqrt(head_dim)
  float rope_scale = 1.0f;  // rope's freq_scale (1 / the linear rope scaling factor) of the global layers
  // Sliding-window attention: with swa_pattern > 0, layer il is a sliding-window layer unless il % swa_pattern ==
  // swa_pattern - 1 (llama.cpp's set_swa_pattern); those layers read the SWA mask (a token at position p sees the
  // cache positions in (p - n_swa, p]) and rope with rope_base_swa / rope_scale_swa. Their caches are full size
  // (n_ctx), as llama.cpp's --swa-full.
  int swa_pattern = 0;
  int64_t n_swa = 0;
  // > 0: the sliding-window layers' caches hold this many cells (llama.cpp's iSWA cache, min(n_ctx, PAD(n_swa +
  // n_ubatch, 256)): tessera/llama/llama_memory.h, llama_kv_cells), and their attention reads them all; 0: n_ctx
  // (--swa-full). Placement and memory only: a memory-backed run refuses a cache smaller than n_ctx.
  int64_t n_ctx_swa = 0;
  float rope_base_swa = 10000.0f;
  float rope_scale_swa = 1.0f;
  // YaRN rope scaling of every layer (gpt-oss: rope.scaling.type yarn; llama.cpp's cparams yarn_* apply to the
  // sliding-window layers too); the default is none.
  RopeYarn rope_yarn;
  // phi3 (llama.cpp's phi3 graph, src/models/phi3.cpp):
  bool fused_qkv = false;        // blk.N.attn_qkv.weight [n_embd, n_embd_q + 2 n_embd_kv] instead of wq, wk, wv: its
                                 // output is viewed as Q, K and V (llama.cpp's build_qkv)
  bool fused_up = false;         // blk.N.ffn_up.weight [n_embd, 2 n_ff] and no ffn_gate: SWIGLU of its output's halves
                                 // (SiLU of the first half, the gate, times the second)
  bool rope_factors_ls = false;  // rope_factors_long.weight and rope_factors_short.weight (f32 [head_dim / 2],
                                 // LongRoPE): the long ones when n_ctx > n_ctx_orig, else the short ones
                                 // (llama_model::get_rope_factors)
  int64_t n_ctx_orig = 0;        // rope.scaling.original_context_length; 0: n_ctx
  // gpt-oss (llama.cpp's openai-moe-iswa graph, LLM_ARCH_OPENAI_MOE): with attn_sinks the weights are created in its
  // loader's order and the FFN input norm is blk.N.post_attention_norm (there is no ffn_norm).
  bool attn_out_bias = false;       // blk.N.attn_output.bias (f32 [n_embd]), added after the output projection
  bool attn_sinks = false;          // blk.N.attn_sinks.weight (f32 [n_head]): a logit per head in the softmax's
                                    // denominator (FLASH_ATTN_EXT's or SOFT_MAX's sinks)
  bool moe_bias = false;            // blk.N.ffn_gate_inp.bias (f32 [n_expert]) added to the router logits, and the
                                    // experts' biases blk.N.ffn_{gate,up,down}_exps.bias (ADD_ID after each MUL_MAT_ID)
  bool moe_softmax_weight = false;  // the top experts by router logit, their weights the softmax over the selected
                                    // logits (LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX_WEIGHT); else softmax, then top-k
  float swiglu_oai_alpha = 0.0f;    // > 0: the experts' GLU is SWIGLU_OAI with this alpha and swiglu_oai_limit
  float swiglu_oai_limit = 0.0f;
  // Set: the graph a llama.cpp build makes (llama_cpp_graph.h: its ops, node count and compute buffers; the switches of
  // build N are llama_cpp_graph(N), tessera/llama/llama_cpp_graph.h, which `tessera compare-log` takes from the
  // log's build line); unset: Tessera's own graph.
  std::optional<LlamaCppGraph> llama_cpp;
  // What the graph does not compute as the model would (a file feature Tessera builds for placement but has no op
  // for): empty, or the reason, naming the key. Plans and metadata-only runs place and time the graph as built;
  // fill_random (every memory-backed run) refuses with this reason.
  std::string compute_refusal;
  // A model file holding every tensor's data (from_gguf.h, a "complete" file): fill_random reads the weights from it
  // instead of drawing them. Null for the presets and for header-only files.
  std::shared_ptr<const gguf::Model> weights_file;

  int64_t head_dim() const { return n_embd_head > 0 ? n_embd_head : n_embd / n_head; }
  int64_t n_embd_q() const { return head_dim() * n_head; }  // Q and the attention output: wq's ne1, wo's ne0
  int64_t n_embd_kv() const { return head_dim() * n_head_kv; }
  int64_t kv_len() const { return n_kv > 0 ? n_kv : n_ctx; }
  int64_t ctx_swa() const { return n_ctx_swa > 0 ? n_ctx_swa : n_ctx; }  // a sliding-window layer's cells
  int64_t kv_len_swa() const { return std::min(kv_len(), ctx_swa()); }   // and the cells it attends to
  int64_t outputs() const { return n_outputs > 0 ? n_outputs : n_tokens; }
  bool is_moe() const { return n_expert > 0; }
  bool has_swa() const { return swa_pattern > 0; }
  bool is_swa(int il) const { return swa_pattern > 0 && il % swa_pattern < swa_pattern - 1; }
  bool rope_long() const { return n_ctx > (n_ctx_orig > 0 ? n_ctx_orig : n_ctx); }
  // A llama.cpp graph from 8619 (LlamaCppGraph::kv_rotation): the size of the Hadamard matrix that rotates Q and K
  // (the largest power of two >= 64 dividing the head size) when the K cache's type is quantized and the head size a
  // multiple of 64, else 0 (no rotation); of the one that rotates V and the attention output (64) when the V cache's
  // type is quantized and the head size a multiple of 64, else 0.
  int64_t k_rot_dim() const;
  int64_t v_rot_dim() const;
};

// Checks the sizes (positive, divisible, n_kv <= n_ctx, n_tokens <= n_kv, experts, quantized row lengths).
Status validate(const LlamaConfig& config);

// Presets: "tiny" (2 layers, n_embd 64, 4 heads / 2 KV heads, ff 128, vocab 256, ctx 64, 8 tokens), "tiny-moe" (tiny
// with 4 experts, 2 used), "7b" (Llama-2-7B shapes), "8x7b-moe" (Mixtral-8x7B shapes), "70b" (Llama-2-70B shapes).
// Tiny models of the other architectures: "tiny-qwen2" (tiny with Q/K/V biases and NEOX rope), "tiny-qwen3" (Q/K
// norms, NEOX rope, and a head size of 32, not n_embd / n_head = 16), "tiny-qwen3moe" (tiny-qwen3 with 4 experts, 2
// used), "tiny-gemma3" (6 layers, 5 sliding-window ones of window 16 and a global one, heads of 32, Q/K norms,
// post-norms, GELU FFN, scaled embeddings, linear rope scaling 2 on the global layer, tied embeddings), "tiny-phi3"
// (fused QKV and gate/up projections, NEOX rope, Q scaled after rope, LongRoPE factors of which the long ones apply:
// n_ctx 64 > n_ctx_orig 32), "tiny-gpt-oss" (4 layers alternating sliding-window (window 16) and global, QKV and
// output biases, attention sinks, 4 experts of which 2 used with biases, the router's softmax over the selected
// logits, SWIGLU_OAI experts, NEOX rope).
// The large presets use n_ctx 4096 and n_tokens 512; override fields as needed. Unknown name: kNotFound.
Result<LlamaConfig> preset(const std::string& name);
std::vector<std::string> preset_names();

// The weights of one layer (null where the variant has none: dense vs MoE).
struct LlamaLayer {
  Tensor* attn_norm = nullptr;        // f32 [n_embd]
  Tensor* wqkv = nullptr;             // fused_qkv: [n_embd, n_embd_q + 2 n_embd_kv] (then no wq, wk, wv)
  Tensor* wq = nullptr;               // [n_embd, n_embd_q]
  Tensor* wk = nullptr;               // [n_embd, n_embd_kv]
  Tensor* wv = nullptr;               // [n_embd, n_embd_kv]
  Tensor* wo = nullptr;               // [n_embd_q, n_embd]
  Tensor* bq = nullptr;               // attn_bias: f32 [n_embd_q]
  Tensor* bk = nullptr;               // attn_bias: f32 [n_embd_kv]
  Tensor* bv = nullptr;               // attn_bias: f32 [n_embd_kv]
  Tensor* attn_q_norm = nullptr;      // attn_qk_norm: f32 [head_dim]
  Tensor* attn_k_norm = nullptr;      // attn_qk_norm: f32 [head_dim]
  Tensor* attn_post_norm = nullptr;   // post_norms: f32 [n_embd] ("post_attention_norm")
  Tensor* ffn_norm = nullptr;         // f32 [n_embd]
  Tensor* ffn_gate = nullptr;         // dense: [n_embd, n_ff]
  Tensor* ffn_up = nullptr;           // dense: [n_embd, n_ff]
  Tensor* ffn_down = nullptr;         // dense: [n_ff, n_embd]
  Tensor* ffn_gate_inp = nullptr;     // MoE router, f32 [n_embd, n_expert]
  Tensor* ffn_gate_exps = nullptr;    // MoE: [n_embd, n_ff, n_expert]
  Tensor* ffn_up_exps = nullptr;      // MoE: [n_embd, n_ff, n_expert]
  Tensor* ffn_down_exps = nullptr;    // MoE: [n_ff, n_embd, n_expert]
  Tensor* ffn_post_norm = nullptr;    // post_norms: f32 [n_embd] ("post_ffw_norm")
  Tensor* bo = nullptr;               // attn_out_bias: f32 [n_embd]
  Tensor* attn_sinks = nullptr;       // attn_sinks: f32 [n_head]
  Tensor* ffn_gate_inp_b = nullptr;   // moe_bias: f32 [n_expert]
  Tensor* ffn_gate_exps_b = nullptr;  // moe_bias: f32 [n_ff, n_expert]
  Tensor* ffn_up_exps_b = nullptr;    // moe_bias: f32 [n_ff, n_expert]
  Tensor* ffn_down_exps_b = nullptr;  // moe_bias: f32 [n_embd, n_expert]
  Tensor* k_cache = nullptr;          // kv_type [n_embd_kv, n_ctx]
  Tensor* v_cache = nullptr;
};

struct LlamaGraph {
  LlamaConfig config;
  std::unique_ptr<Context> weights_ctx;
  std::unique_ptr<Context> cache_ctx;
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Graph> graph;

  // Inputs and output.
  Tensor* tokens = nullptr;
  Tensor* pos = nullptr;
  Tensor* kv_idxs = nullptr;  // null in a llama.cpp graph that writes the cache at its head (VIEW + CPY)
  // A llama.cpp graph writing with SET_ROWS (from 6071) has inputs of its own for V: i64 [n_tokens] with flash
  // attention, else (V transposed) i64 [n_embd_kv * n_tokens]; its kv_idxs, K's, is i64 too, as llama.cpp's
  // (build_input_k_idxs, build_input_v_idxs); Tessera's own graph has kv_idxs i32 for K and V and no v_idxs.
  Tensor* v_idxs = nullptr;
  // ...and with sliding-window layers, the sliding-window cache's own (llama.cpp's iSWA inputs: one set per cache)
  Tensor* kv_idxs_swa = nullptr;
  Tensor* v_idxs_swa = nullptr;
  Tensor* mask = nullptr;      // null when no layer reads it (a sliding-window model with no global layer)
  Tensor* mask_swa = nullptr;  // has_swa(): the sliding-window layers' mask f16 [kv_len_swa(), n_tokens]; null when
                               // no layer is a sliding-window one
  Tensor* out_ids = nullptr;   // only when n_outputs < n_tokens
  Tensor* embd = nullptr;      // llama.cpp from 7819: inp_embd [n_embd, n_tokens], read by no node (inp_embd_input)
  // llama.cpp from 8619 with a quantized cache (LlamaCppGraph::kv_rotation): the normalised Walsh-Hadamard matrices,
  // f32 [k_rot_dim(), k_rot_dim()] ("attn_inp_k_rot") and [v_rot_dim(), v_rot_dim()] ("attn_inp_v_rot"); null where
  // nothing is rotated or no layer reads them. The sliding-window layers' own ("attn_inp_k_rot_swa",
  // "attn_inp_v_rot_swa": llama.cpp names them as the others) from 8699 (kv_rotation_swa_inputs); before, those
  // layers read k_rot and v_rot.
  Tensor* k_rot = nullptr;
  Tensor* v_rot = nullptr;
  Tensor* k_rot_swa = nullptr;
  Tensor* v_rot_swa = nullptr;
  Tensor* logits = nullptr;

  // Weights.
  Tensor* tok_embd = nullptr;     // [n_embd, n_vocab]
  Tensor* output_norm = nullptr;  // f32 [n_embd]
  Tensor* output = nullptr;       // [n_embd, n_vocab] (tok_embd when tied_output)
  Tensor* rope_freqs = nullptr;   // f32 [head_dim / 2] when rope_freq_factors
  Tensor* rope_long = nullptr;    // rope_factors_ls: f32 [head_dim / 2] ("rope_factors_long.weight")
  Tensor* rope_short = nullptr;   // rope_factors_ls: f32 [head_dim / 2] ("rope_factors_short.weight")
  std::vector<LlamaLayer> layers;

  std::vector<Tensor*> weights;  // every weight, in creation order (the copies below included)
  // The copies of shared weights (LlamaConfig::output_copy, rope_factor_copy): each copy, the weight it copies (same
  // name, shape, type and values) and the layer whose buffer type holds it (n_layer: the output layer).
  struct WeightCopy {
    Tensor* copy;
    const Tensor* of;
    int layer;
  };
  std::vector<WeightCopy> copies;
  const WeightCopy* copy_of(const Tensor* t) const;  // null: not a copy
  std::vector<Tensor*> kv_cache;                     // k_l0, v_l0, k_l1, v_l1, ...
  std::vector<Tensor*> inputs() const;

  // The layer a weight or cache tensor belongs to (-1 for token_embd / output*, or an unknown tensor).
  int layer_of(const Tensor* t) const;
};

// Builds the graph. Errors: an invalid config (validate) or a shape the graph builders reject (the context's error).
Result<LlamaGraph> build_llama(const LlamaConfig& config);

// Helpers to compute a model with real memory (weights, cache and graph allocated).
// Random weights (seeded; approximately normal, scaled by 1/sqrt(ne0); norms around 1) and a random cache (the slots
// before the new tokens hold earlier tokens' K/V). Each tensor has its own stream and each value depends only on its
// index in it, so the values are the same for any number of threads (`threads`: at most that many; 0 = one per
// hardware thread) and, for the same config and seed, for every attention variant. Errors: a config with a
// compute_refusal (kUnsupported, its reason), a tensor that cannot hold values (unallocated, a storage-only type), out
// of host memory. With config.weights_file the weights are that
// file's (read_file_weights) and only the cache is drawn.
Status fill_random(LlamaGraph& model, uint64_t seed, int threads = 0);

// The input values of one decoder step: n_tokens new tokens at positions n_kv - n_tokens .. n_kv - 1, written to the
// cache slots of the same index, with a causal mask; logits for the last n_outputs tokens.
struct LlamaInputs {
  std::vector<int32_t> tokens, pos, kv_idxs, out_ids;
  // for v_idxs: the slots again (flash attention) or the cache element of each V value (dim d of slot s: d * n_ctx +
  // s); kv_idxs_swa / v_idxs_swa: the same for the sliding-window cache (its own slots and size)
  std::vector<int32_t> v_idxs, kv_idxs_swa, v_idxs_swa;
  std::vector<float> mask;      // [n_kv, n_tokens], 0 or -inf
  std::vector<float> mask_swa;  // has_swa(): the same, also -inf for the slots n_swa or more positions back
  // k_rot_dim() > 0 / v_rot_dim() > 0: the normalised Walsh-Hadamard matrix of that size (Sylvester's H_n / sqrt(n):
  // symmetric and orthogonal, its own inverse), row-major, for k_rot and k_rot_swa / v_rot and v_rot_swa
  std::vector<float> k_rot, v_rot;
};
LlamaInputs default_inputs(const LlamaConfig& config, uint64_t seed);
// Writes the inputs into the (allocated) input tensors. Errors: sizes that do not match, unallocated tensors.
Status set_inputs(LlamaGraph& model, const LlamaInputs& inputs);

}  // namespace tessera::models
