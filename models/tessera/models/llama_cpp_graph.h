// The variants of llama.cpp's graph the decoder builds (LlamaConfig::llama_cpp). llama.cpp has changed the ops of its
// graph many times (the node count it prints, "graph nodes = N", and a little of its compute buffers change with
// them); each switch below is one such change. Which build made which graph -- the switches of each build, from the
// pull request and first build of each change -- is llama.cpp's rule, in llama/llama_cpp_graph.cpp
// (llama_cpp_graph(build); docs/compare-log.md, "llama.cpp's graph by build", lists the sources and the logs).
// Tessera's own graph (LlamaConfig::llama_cpp unset) is none of them: it writes the cache with SET_ROWS and reads it
// untransposed, merges the heads with CONT + RESHAPE, and picks experts with one TOP_K node.
#pragma once

namespace tessera::models {

struct LlamaCppGraph {
  int build = 0;  // the llama.cpp build (> 0) these switches are of

  // The last layer's two GET_ROWS of inp_out_ids (the attention output and the residual), built even when every token
  // is an output, as in the graph llama.cpp reserves: from 2540 (PR #6122, the output buffer per output row).
  bool out_ids_always = false;
  // The KV cache written with VIEW + CPY at the cache head (llm_build_kv_store, later cpy_k / cpy_v): before 6071
  // (PR #14959 made ggml_set_rows the default). From 6071: SET_ROWS of 2d VIEWs of K and V (with V transposed: three
  // RESHAPEs, the rows indexed per element).
  bool kv_cpy = false;
  // With kv_cpy: a RESHAPE of K to 2d before its write, from 5817 (PR #14285, the set_rows path's preparation).
  bool k_write_reshape = false;
  // With kv_cpy: V reshaped to 2d before its write: before 2572 (PR #6369 removed a reshape "likely not needed") and
  // again from 4919 (PR #12449, where the builders hand V over as [head_dim, n_head_kv, T]).
  bool v_store_reshape = false;
  // The model builders reshape V to [head_dim, n_head_kv, T] as they do Q and K: from 4919 (PR #12449).
  bool v_reshape_3d = false;
  // build_attn_mha permutes K and V (the cache read as [head_dim, n_head_kv, n_kv]) as well as Q: from 5429
  // (PR #13194).
  bool kv_permutes = false;
  // Q viewed per stream (ggml_view_4d) before its permute: from 5913 (PR #14363).
  bool q_stream_view = false;
  // SILU (or GELU) then MUL instead of one GLU node, and a fused up projection's halves each as VIEW + CONT: before
  // 5776 (PR #14158, GGML_OP_GLU in build_ffn and build_moe_ffn).
  bool split_glu = false;
  // A fused QKV projection's Q, K and V as CONTs of 2d views, Q and K (from 4919 V too) then reshaped to heads:
  // before 5837 (PR #14568 removed those CONTs).
  bool qkv_cont = false;
  // From 5837 (Q and K views of the fused projection) until 6410 (PR #15662): V still a contiguous copy, CONT + RESHAPE
  // to heads, and from 6195 (PR #15380) one CONT to heads (ggml_cont_3d).
  bool fused_v_cont = false;
  bool fused_v_cont_3d = false;
  // build_attn expands V before K (Q, V, K, then the cache writes), "to enable rope fusion", from 7044 (PR #16884);
  // before, Q, K, V. Only the order changes (the iSWA models' build_attn keeps Q, K, V).
  bool v_before_k = false;
  // An unused f32 input inp_embd [n_embd, n_tokens] beside the tokens (ggml_build_forward_select keeps both inputs
  // so that token and embedding batches share a graph): a leaf no node reads, never freed, in the compute buffer of
  // the graph inputs' backend; from 7819 (PR #18898).
  bool inp_embd_input = false;
  // With flash attention the masks are f16 inputs, not f32 inputs cast to f16 (one CPY node per mask fewer): from
  // 9410 (PR #23764).
  bool mask_f16 = false;
  // MoE weight normalisation (build_moe_ffn with norm_w: qwen3moe, Mixtral; not qwen2moe, not gpt-oss): the sum of
  // the chosen experts' weights clamped to [6.103515625e-5, +inf] (CLAMP, "ffn_moe_weights_sum_clamped") before
  // the DIV, against a division by zero: one node per MoE layer, from 6844 (PR #16655, f696428c).
  bool moe_weights_clamp = false;
  // build_moe_ffn adds the experts' weights to the graph as soon as they are computed ("call early so that topk-moe
  // can be used": GET_ROWS of the probabilities, softmax or normalisation, right after the ARGSORT), before the
  // experts' products, which otherwise come first (the weights are the MUL's second source): from 6583 (PR #16130,
  // 077c94d0). Only the order changes, and with it where ggml-alloc puts the layer's tensors.
  bool moe_weights_early = false;
  // Not the graph's: ggml-cuda's buffer type reserves, with each FLASH_ATTN_EXT of a batch, room for f16 copies of K
  // and V that are not f16 (a quantized cache): from 9489 (PR #23907). use_llama_cpp_rules gives every GPU the padding
  // rule (sim::PaddingRule::f16_kv_copies).
  bool cuda_fa_f16_copies = false;
  // Not the graph's: ggml's scheduler places a FLASH_ATTN_EXT by its sinks weight (gpt-oss), as it does an op by its
  // first weight: before 10150 (PR #25832, "ggml : adjust logic for offloading ops to weight's backend", which skips
  // FLASH_ATTN_EXT as ROPE, "the sinks tensor is too small"). use_llama_cpp_rules sets
  // SchedulerParams::fa_sinks_decide.
  bool fa_sinks_decide = false;
  // gpt-oss: one GET_ROWS of inp_out_ids after the last layer (its FFN runs on every token) instead of two in it:
  // from 10158 (PR #25794).
  bool out_ids_after_layers = false;
  // Hadamard rotations of the attention when the cache is quantized (PR #21038, 744c0c73, "rotate activations for
  // better quantization"): from 8619. Per cache, K is rotated when the K cache's type is quantized and the head size
  // a multiple of 64 (llama_kv_cache's attn_rot_k; LLAMA_ATTN_ROT_DISABLE aside), V likewise (attn_rot_v; a
  // quantized V needs flash attention). A rotation is llama_mul_mat_hadamard (8619: ggml_mul_mat_aux): a RESHAPE to
  // [nrot, n / nrot], a MUL_MAT by the normalised Walsh-Hadamard matrix, a RESHAPE back: three nodes. K rotated: Q and
  // K, after rope (and Q's scale), before they are added to the graph and K is written, by the f32 input
  // attn_inp_k_rot [nrot, nrot] (nrot the largest power of two >= 64 dividing the head size); V rotated: V before its
  // write and the attention output before wo, by attn_inp_v_rot [64, 64]. Six nodes per layer and rotated side, and
  // one or two inputs (leafs); the matrices are orthogonal and symmetric, so the scores and outputs are unchanged
  // but for the cache's quantization error.
  bool kv_rotation = false;
  // With kv_rotation, an iSWA model's sliding-window layers read their own cache's matrices (attn_inp_k_rot and
  // attn_inp_v_rot of the SWA cache: two inputs more, no node more): from 8699 (PR #21513, 4eb19514). 8619-8698: the
  // non-SWA cache's matrices for every layer.
  bool kv_rotation_swa_inputs = false;
  // With kv_rotation, a non-contiguous tensor (a fused QKV projection's V view, phi3) copied to 2d by CONT instead of
  // reshaped: from 9027 (PR #22630, fa595462). Before, ggml_reshape_2d asserted (GGML_ASSERT(ggml_is_contiguous)):
  // such a model aborted, and Tessera refuses to build it.
  bool rotation_cont = false;
  // In every build: Q, K and V are added to the graph together (ggml_build_forward_expand of each, "so that they are
  // not reordered ... the number of splits in the graph is reduced", since 1843, PR #4766), then the cache writes.
  // In every build: without flash attention the V cache holds V transposed (read by a view, no copy); the heads are
  // merged by one CONT (ggml_cont_2d); MoE experts are chosen by ARGSORT + VIEW (ggml_top_k; build_moe_ffn kept that
  // when GGML_OP_TOP_K arrived, PR #17365).
};

}  // namespace tessera::models
