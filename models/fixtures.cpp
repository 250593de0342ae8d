// Header-only GGUF fixtures of real models (fixtures.h, docs/gguf.md "Fixtures").
//
// Each fixture is built the way the real file was made: the tensors convert_hf_to_gguf.py writes for the
// architecture (names from gguf-py's tensor table, shapes from llama.cpp's create_tensor calls for the architecture),
// then the types llama-quantize gives them (quantized_types, quant_types.cpp), in llama-quantize's order
// (weight_name_less). Hyperparameters are the Hugging Face config.json values, cited per fixture; the outside numbers
// each fixture is checked against (tensor counts per type, sizes, parameter counts) are in
// tests/unit/models/test_fixtures.cpp.
//
// llama.cpp sources read (ggml-org/llama.cpp): src/llama-quant.cpp at commit 007dbbf3 (llama_tensor_get_type_impl,
// tensor_allows_quantization, tensor_type_fallback, init_quantize_state_counters, llama_quant_model_from_metadata),
// src/llama-model-loader.h at 01b75d6a (weight_name_comparer), src/llama-arch.cpp (tensor names), the per-architecture
// create_tensor calls (llama, qwen2, qwen3, qwen3moe, gemma3, openai-moe / gpt-oss, phi3), convert_hf_to_gguf.py
// (which tensors stay F32; which keys are written) and include/llama.h (llama_ftype).
#include "tessera/models/fixtures.h"

#include <filesystem>

#include <algorithm>
#include <cstdio>
#include <string_view>
#include <utility>

namespace tessera::models::fixtures {

using gguf::File;
using gguf::TensorType;
using gguf::Value;

// ---- building a fixture ----

namespace {

constexpr TensorType kF32 = TensorType::kF32;
constexpr TensorType kSrc = TensorType::kBF16;  // a weight llama-quantize requantizes (its source type is not kept)

std::string blk(int64_t il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

// A fixture in the making: metadata in the order convert_hf_to_gguf.py writes it, tensors as it writes them.
class Draft {
 public:
  Draft(std::string arch, const char* general_name) : arch_(std::move(arch)) {
    set("general.architecture", Value::string(arch_));
    set("general.type", Value::string("model"));
    set("general.name", Value::string(general_name));
  }

  void set(const std::string& key, Value v) { file_.set(key, std::move(v)); }
  // "<arch>.<key>" (the architecture's keys).
  void u32(const std::string& key, uint32_t v) { set(arch_ + "." + key, Value::u32(v)); }
  void f32(const std::string& key, float v) { set(arch_ + "." + key, Value::f32(v)); }
  void str(const std::string& key, const char* v) { set(arch_ + "." + key, Value::string(v)); }
  void file_type(FileType t) { set("general.file_type", Value::u32(static_cast<uint32_t>(t))); }
  void quantization_version() { set("general.quantization_version", Value::u32(2)); }  // GGML_QNT_VERSION

  // The vocabulary, n tokens: synthetic strings "<tok0>".."<tokN-1>" of the real count, all of type 1 (normal).
  // BPE ("gpt2") vocabularies also have merges in real files; they are left out here.
  void vocab_bpe(const char* pre, int64_t n, uint32_t bos, uint32_t eos, int64_t pad = -1) {
    set("tokenizer.ggml.model", Value::string("gpt2"));
    set("tokenizer.ggml.pre", Value::string(pre));
    set("tokenizer.ggml.tokens", Value::strings(tokens(n)));
    set("tokenizer.ggml.token_type", Value::i32s(std::vector<int32_t>(static_cast<size_t>(n), 1)));
    set("tokenizer.ggml.bos_token_id", Value::u32(bos));
    set("tokenizer.ggml.eos_token_id", Value::u32(eos));
    if (pad >= 0) set("tokenizer.ggml.padding_token_id", Value::u32(static_cast<uint32_t>(pad)));
  }
  // SentencePiece ("llama") vocabularies: tokens, scores (all 0 here), token types.
  void vocab_spm(int64_t n, uint32_t bos, uint32_t eos, uint32_t unk, int64_t pad = -1) {
    set("tokenizer.ggml.model", Value::string("llama"));
    set("tokenizer.ggml.pre", Value::string("default"));
    set("tokenizer.ggml.tokens", Value::strings(tokens(n)));
    set("tokenizer.ggml.scores", Value::f32s(std::vector<float>(static_cast<size_t>(n), 0.0f)));
    set("tokenizer.ggml.token_type", Value::i32s(std::vector<int32_t>(static_cast<size_t>(n), 1)));
    set("tokenizer.ggml.bos_token_id", Value::u32(bos));
    set("tokenizer.ggml.eos_token_id", Value::u32(eos));
    set("tokenizer.ggml.unknown_token_id", Value::u32(unk));
    if (pad >= 0) set("tokenizer.ggml.padding_token_id", Value::u32(static_cast<uint32_t>(pad)));
  }

  // A tensor as convert writes it. 1-D tensors and norms are F32 there (convert_hf_to_gguf.py prepare_tensors:
  // `n_dims <= 1 or new_name.endswith("_norm.weight")`), and so are the MoE router and every tensor whose name does
  // not end in ".weight" (biases): both pass through llama-quantize unchanged.
  void weight(const std::string& name, std::vector<int64_t> ne) { tensors_.push_back({name, std::move(ne), kSrc}); }
  void f32_tensor(const std::string& name, std::vector<int64_t> ne) { tensors_.push_back({name, std::move(ne), kF32}); }

  // Quantizes (in llama-quantize's order) and lays the tensors out.
  Result<File> finish(const QuantModel& model, FileType ftype) && {
    std::stable_sort(tensors_.begin(), tensors_.end(),
                     [](const SourceTensor& a, const SourceTensor& b) { return weight_name_less(a.name, b.name); });
    Result<std::vector<TensorType>> types = quantized_types(model, ftype, tensors_);
    if (!types.ok()) return types.status();
    for (size_t i = 0; i < tensors_.size(); ++i) file_.add_tensor(tensors_[i].name, types.value()[i], tensors_[i].ne);
    TS_RETURN_IF_ERROR(file_.layout());
    // layout() sets offsets and sizes; the data section's size (which the reader sets) is set here too, so that the
    // fixture says how much data the real file has.
    for (const gguf::TensorInfo& t : file_.tensors) file_.data_bytes = std::max(file_.data_bytes, t.offset + t.size);
    return std::move(file_);
  }

 private:
  static std::vector<std::string> tokens(int64_t n) {
    std::vector<std::string> out;
    out.reserve(static_cast<size_t>(n));
    char buf[32];
    for (int64_t i = 0; i < n; ++i) {
      std::snprintf(buf, sizeof(buf), "<tok%lld>", static_cast<long long>(i));
      out.emplace_back(buf);
    }
    return out;
  }

  std::string arch_;
  File file_;
  std::vector<SourceTensor> tensors_;
};

// The dense hyperparameters every fixture has.
struct Dims {
  int64_t n_layer, n_embd, n_ff, n_head, n_head_kv, head_dim, n_vocab;
};

// The keys TextModel.set_gguf_parameters writes first (convert_hf_to_gguf.py), in its order.
void base_keys(Draft& d, const Dims& m, uint32_t n_ctx, float rope_base, float rms_eps) {
  d.u32("block_count", static_cast<uint32_t>(m.n_layer));
  d.u32("context_length", n_ctx);
  d.u32("embedding_length", static_cast<uint32_t>(m.n_embd));
  d.u32("feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.u32("attention.head_count", static_cast<uint32_t>(m.n_head));
  d.u32("attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  d.f32("rope.freq_base", rope_base);
  d.f32("attention.layer_norm_rms_epsilon", rms_eps);
}

void head_dim_keys(Draft& d, const Dims& m) {
  d.u32("attention.key_length", static_cast<uint32_t>(m.head_dim));
  d.u32("attention.value_length", static_cast<uint32_t>(m.head_dim));
}

// token_embd, output_norm and (unless the embeddings are tied) output.
void embeddings(Draft& d, const Dims& m, bool tied) {
  d.weight("token_embd.weight", {m.n_embd, m.n_vocab});
  d.f32_tensor("output_norm.weight", {m.n_embd});
  if (!tied) d.weight("output.weight", {m.n_embd, m.n_vocab});
}

// The attention of llama-style layers: attn_norm, attn_q [n_embd, n_head * head_dim], attn_k and attn_v
// [n_embd, n_head_kv * head_dim], attn_output [n_head * head_dim, n_embd].
void attention(Draft& d, const Dims& m, int64_t il) {
  d.f32_tensor(blk(il, "attn_norm.weight"), {m.n_embd});
  d.weight(blk(il, "attn_q.weight"), {m.n_embd, m.n_head * m.head_dim});
  d.weight(blk(il, "attn_k.weight"), {m.n_embd, m.n_head_kv * m.head_dim});
  d.weight(blk(il, "attn_v.weight"), {m.n_embd, m.n_head_kv * m.head_dim});
  d.weight(blk(il, "attn_output.weight"), {m.n_head * m.head_dim, m.n_embd});
}

// SwiGLU FFN: ffn_gate and ffn_up [n_embd, n_ff], ffn_down [n_ff, n_embd].
void dense_ffn(Draft& d, const Dims& m, int64_t il) {
  d.weight(blk(il, "ffn_gate.weight"), {m.n_embd, m.n_ff});
  d.weight(blk(il, "ffn_up.weight"), {m.n_embd, m.n_ff});
  d.weight(blk(il, "ffn_down.weight"), {m.n_ff, m.n_embd});
}

// Merged experts (convert_hf_to_gguf.py stacks them into 3-D tensors): the router ffn_gate_inp [n_embd, n_expert]
// (F32), ffn_gate_exps and ffn_up_exps [n_embd, n_ff_exp, n_expert], ffn_down_exps [n_ff_exp, n_embd, n_expert].
void moe_ffn(Draft& d, int64_t n_embd, int64_t n_ff_exp, int64_t n_expert, int64_t il) {
  d.f32_tensor(blk(il, "ffn_gate_inp.weight"), {n_embd, n_expert});
  d.weight(blk(il, "ffn_gate_exps.weight"), {n_embd, n_ff_exp, n_expert});
  d.weight(blk(il, "ffn_up_exps.weight"), {n_embd, n_ff_exp, n_expert});
  d.weight(blk(il, "ffn_down_exps.weight"), {n_ff_exp, n_embd, n_expert});
}

QuantModel quant_model(const char* arch, const Dims& m, int64_t n_expert = 0) {
  return QuantModel{arch, m.n_layer, m.n_head, m.n_head_kv, n_expert};
}

// ---- the llama architecture: Llama 3.1, Mistral, Mixtral ----

struct LlamaSpec {
  const char* general_name;
  Dims m;
  uint32_t n_ctx;
  float rope_base;
  float rms_eps;
  int64_t n_expert = 0;
  int64_t n_expert_used = 0;
  bool llama3_vocab = false;  // BPE (Llama 3) rather than SentencePiece (Mistral)
  bool rope_freqs = false;    // Llama 3.1's rope scaling factors as a tensor
};

Result<File> llama(const LlamaSpec& s) {
  const Dims& m = s.m;
  Draft d("llama", s.general_name);
  base_keys(d, m, s.n_ctx, s.rope_base, s.rms_eps);
  if (s.n_expert > 0) {
    d.u32("expert_count", static_cast<uint32_t>(s.n_expert));
    d.u32("expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  }
  d.file_type(FileType::kQ4_K_M);
  // LlamaModel.set_gguf_parameters: the vocabulary size and the rotated dimensions (head_dim).
  d.u32("vocab_size", static_cast<uint32_t>(m.n_vocab));
  d.u32("rope.dimension_count", static_cast<uint32_t>(m.head_dim));
  if (s.llama3_vocab) {
    d.vocab_bpe("llama-bpe", m.n_vocab, 128000, 128009);  // <|begin_of_text|>, <|eot_id|>
  } else {
    d.vocab_spm(m.n_vocab, 1, 2, 0);  // <s>, </s>, <unk>
  }
  d.quantization_version();

  embeddings(d, m, /*tied=*/false);
  // Llama 3.1's "llama3" rope scaling: convert_hf_to_gguf.py (LlamaModel.generate_extra_tensors) writes the per-
  // frequency factors as rope_freqs.weight, F32 [head_dim / 2].
  if (s.rope_freqs) d.f32_tensor("rope_freqs.weight", {m.head_dim / 2});
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    if (s.n_expert > 0) {
      moe_ffn(d, m.n_embd, m.n_ff, s.n_expert, il);
    } else {
      dense_ffn(d, m, il);
    }
  }
  return std::move(d).finish(quant_model("llama", m, s.n_expert), FileType::kQ4_K_M);
}

// meta-llama/Llama-3.1-8B-Instruct config.json: hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
// num_attention_heads 32, num_key_value_heads 8 (head_dim 4096 / 32 = 128), vocab_size 128256,
// max_position_embeddings 131072, rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling rope_type "llama3",
// tie_word_embeddings false. The same values are in the metadata of bartowski's Q4_K_M file printed in
// utilityai/llama-cpp-rs PR #400 and mozilla-ai/llamafile issue #516.
Result<File> llama31_8b() {
  return llama({"Meta Llama 3.1 8B Instruct",
                {32, 4096, 14336, 32, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true});
}

// meta-llama/Llama-3.1-70B-Instruct config.json: hidden_size 8192, intermediate_size 28672, num_hidden_layers 80,
// num_attention_heads 64, num_key_value_heads 8 (head_dim 128), vocab_size 128256, max_position_embeddings 131072,
// rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling "llama3".
Result<File> llama31_70b() {
  return llama({"Meta Llama 3.1 70B Instruct",
                {80, 8192, 28672, 64, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true});
}

// Mistral-7B-Instruct-v0.3 (v0.3: the 32768-token vocabulary; v0.1 had 32000). mistralai/Mistral-7B-Instruct-v0.3
// config.json: hidden_size 4096, intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32,
// num_key_value_heads 8 (head_dim 128), vocab_size 32768, max_position_embeddings 32768, rope_theta 1000000.0,
// rms_norm_eps 1e-05, sliding_window null (convert_hf_to_gguf.py writes it as the llama architecture).
Result<File> mistral_7b() {
  return llama({"Mistral 7B Instruct v0.3", {32, 4096, 14336, 32, 8, 128, 32768}, 32768, 1000000.0f, 1e-5f});
}

// mistralai/Mixtral-8x7B-Instruct-v0.1 config.json: hidden_size 4096, intermediate_size 14336 (per expert),
// num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, num_local_experts 8, num_experts_per_tok 2,
// vocab_size 32000, max_position_embeddings 32768, rope_theta 1000000.0, rms_norm_eps 1e-05. Experts merged into 3-D
// tensors as convert_hf_to_gguf.py writes them since 2024 (TheBloke's December 2023 files have the experts split,
// blk.N.ffn_gate.E.weight, 995 tensors).
Result<File> mixtral_8x7b() {
  return llama({"Mixtral 8x7B Instruct v0.1", {32, 4096, 14336, 32, 8, 128, 32000}, 32768, 1000000.0f, 1e-5f, 8, 2});
}

// ---- qwen2: Qwen2.5 ----

// Qwen/Qwen2.5-7B-Instruct config.json: hidden_size 3584, intermediate_size 18944, num_hidden_layers 28,
// num_attention_heads 28, num_key_value_heads 4 (head_dim 128), vocab_size 152064, max_position_embeddings 32768,
// rope_theta 1000000.0, rms_norm_eps 1e-06, tie_word_embeddings false; q/k/v projections with biases. The tokenizer
// has 151665 tokens; convert pads the vocabulary to vocab_size with [PAD] tokens, so the token array has 152064.
Result<File> qwen25_7b() {
  const Dims m{28, 3584, 18944, 28, 4, 128, 152064};
  Draft d("qwen2", "Qwen2.5 7B Instruct");
  base_keys(d, m, 32768, 1000000.0f, 1e-6f);
  d.file_type(FileType::kQ4_K_M);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);  // <|endoftext|>, <|im_end|>, pad <|endoftext|>
  d.quantization_version();
  embeddings(d, m, false);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    d.f32_tensor(blk(il, "attn_q.bias"), {m.n_head * m.head_dim});
    d.f32_tensor(blk(il, "attn_k.bias"), {m.n_head_kv * m.head_dim});
    d.f32_tensor(blk(il, "attn_v.bias"), {m.n_head_kv * m.head_dim});
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    dense_ffn(d, m, il);
  }
  return std::move(d).finish(quant_model("qwen2", m), FileType::kQ4_K_M);
}

// ---- qwen3 and qwen3moe ----

// Qwen3 layers add per-head RMS norms of q and k: attn_q_norm, attn_k_norm [head_dim].
void qk_norms(Draft& d, const Dims& m, int64_t il) {
  d.f32_tensor(blk(il, "attn_q_norm.weight"), {m.head_dim});
  d.f32_tensor(blk(il, "attn_k_norm.weight"), {m.head_dim});
}

// Qwen/Qwen3-8B config.json: hidden_size 4096, intermediate_size 12288, num_hidden_layers 36, num_attention_heads 32,
// num_key_value_heads 8, head_dim 128, vocab_size 151936, max_position_embeddings 40960, rope_theta 1000000,
// rms_norm_eps 1e-06, tie_word_embeddings false (the 0.6B, 1.7B and 4B models tie theirs; 8B has output.weight).
Result<File> qwen3_8b() {
  const Dims m{36, 4096, 12288, 32, 8, 128, 151936};
  Draft d("qwen3", "Qwen3 8B");
  base_keys(d, m, 40960, 1000000.0f, 1e-6f);
  head_dim_keys(d, m);  // written because config.json has head_dim
  d.file_type(FileType::kQ4_K_M);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);
  d.quantization_version();
  embeddings(d, m, false);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    qk_norms(d, m, il);
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    dense_ffn(d, m, il);
  }
  return std::move(d).finish(quant_model("qwen3", m), FileType::kQ4_K_M);
}

// Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, intermediate_size 6144 (written as feed_forward_length; no dense
// FFN uses it), moe_intermediate_size 768, num_hidden_layers 48, num_attention_heads 32, num_key_value_heads 4,
// head_dim 128, num_experts 128, num_experts_per_tok 8, vocab_size 151936, max_position_embeddings 40960,
// rope_theta 1000000.0, rms_norm_eps 1e-06, tie_word_embeddings false. Key order as in the Q4_K_M file's metadata
// printed in llama.cpp issue #13427.
Result<File> qwen3_30b_a3b() {
  const Dims m{48, 2048, 6144, 32, 4, 128, 151936};
  constexpr int64_t kExperts = 128, kExpertsUsed = 8, kFfExp = 768;
  Draft d("qwen3moe", "Qwen3 30B A3B");
  base_keys(d, m, 40960, 1000000.0f, 1e-6f);
  d.u32("expert_used_count", kExpertsUsed);
  head_dim_keys(d, m);
  d.u32("expert_count", kExperts);
  d.u32("expert_feed_forward_length", kFfExp);
  d.file_type(FileType::kQ4_K_M);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);
  d.quantization_version();
  embeddings(d, m, false);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    qk_norms(d, m, il);
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    moe_ffn(d, m.n_embd, kFfExp, kExperts, il);
  }
  return std::move(d).finish(quant_model("qwen3moe", m, kExperts), FileType::kQ4_K_M);
}

// ---- gemma3 ----

// google/gemma-3-12b-it config.json (text_config): hidden_size 3840, intermediate_size 15360, num_hidden_layers 48,
// num_attention_heads 16, num_key_value_heads 8, head_dim 256, vocab_size 262208, max_position_embeddings 131072,
// rope_theta 1000000.0 (global layers; the local ones use 10000, which llama.cpp does not read from the file),
// rope_scaling linear factor 8.0, sliding_window 1024, rms_norm_eps 1e-06; the embeddings are tied (no output.weight).
// The same keys and values are in the metadata of a gemma-3-12b-it GGUF printed in intel/ipex-llm issue #12978, and a
// Gemma 3 file's vocabulary of 262208 tokens with scores and types in llama.cpp issue #12784. The vision tower and
// projector are in a separate mmproj file, not in this one.
Result<File> gemma3_12b() {
  const Dims m{48, 3840, 15360, 16, 8, 256, 262208};
  Draft d("gemma3", "Gemma 3 12b It");
  d.u32("context_length", 131072);
  d.u32("embedding_length", static_cast<uint32_t>(m.n_embd));
  d.u32("block_count", static_cast<uint32_t>(m.n_layer));
  d.u32("feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.u32("attention.head_count", static_cast<uint32_t>(m.n_head));
  d.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  head_dim_keys(d, m);
  d.f32("rope.freq_base", 1000000.0f);
  d.u32("attention.sliding_window", 1024);
  d.u32("attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  d.str("rope.scaling.type", "linear");
  d.f32("rope.scaling.factor", 8.0f);
  d.file_type(FileType::kQ4_K_M);
  d.vocab_spm(m.n_vocab, 2, 106, 3, 0);  // <bos>, <end_of_turn>, <unk>, <pad>
  d.quantization_version();
  embeddings(d, m, /*tied=*/true);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    qk_norms(d, m, il);
    d.f32_tensor(blk(il, "post_attention_norm.weight"), {m.n_embd});
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    dense_ffn(d, m, il);
    d.f32_tensor(blk(il, "post_ffw_norm.weight"), {m.n_embd});
  }
  return std::move(d).finish(quant_model("gemma3", m), FileType::kQ4_K_M);
}

// ---- gpt-oss ----

// openai/gpt-oss-20b config.json: hidden_size 2880, intermediate_size 2880 (per expert), num_hidden_layers 24,
// num_attention_heads 64, num_key_value_heads 8, head_dim 64, num_local_experts 32, num_experts_per_tok 4,
// vocab_size 201088, max_position_embeddings 131072, rope_theta 150000, rope_scaling yarn factor 32 over
// original_max_position_embeddings 4096, sliding_window 128, rms_norm_eps 1e-05. ggml-org/gpt-oss-20b-GGUF's
// gpt-oss-20b-mxfp4.gguf: general.architecture "gpt-oss" (LLM_ARCH_OPENAI_MOE), general.file_type 38 (MXFP4_MOE),
// 35 keys and 459 tensors (ik_llama.cpp issue #822), keys as printed in llama.cpp issue #15789 and PR #17609 (which
// shows general.quantization_version then general.file_type last: written by llama-quantize). Attention with biases
// and per-head sinks; no ffn_norm: post_attention_norm is the FFN's input norm; experts with biases.
Result<File> gpt_oss_20b() {
  const Dims m{24, 2880, 2880, 64, 8, 64, 201088};
  constexpr int64_t kExperts = 32, kExpertsUsed = 4;
  Draft d("gpt-oss", "Gpt Oss 20b");
  base_keys(d, m, 131072, 150000.0f, 1e-5f);
  d.u32("expert_count", kExperts);
  d.u32("expert_used_count", kExpertsUsed);
  head_dim_keys(d, m);
  d.u32("attention.sliding_window", 128);
  d.u32("expert_feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.str("rope.scaling.type", "yarn");
  d.f32("rope.scaling.factor", 32.0f);
  d.u32("rope.scaling.original_context_length", 4096);
  // <|startoftext|>, <|return|>, pad <|endoftext|> (llama.cpp PR #17609's log).
  d.vocab_bpe("gpt-4o", m.n_vocab, 199998, 200002, 199999);
  d.quantization_version();
  d.file_type(FileType::kMXFP4_MOE);
  embeddings(d, m, false);
  const int64_t q = m.n_head * m.head_dim, kv = m.n_head_kv * m.head_dim;
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    d.f32_tensor(blk(il, "attn_q.bias"), {q});
    d.f32_tensor(blk(il, "attn_k.bias"), {kv});
    d.f32_tensor(blk(il, "attn_v.bias"), {kv});
    d.f32_tensor(blk(il, "attn_output.bias"), {m.n_embd});
    d.f32_tensor(blk(il, "attn_sinks.weight"), {m.n_head});
    d.f32_tensor(blk(il, "post_attention_norm.weight"), {m.n_embd});
    moe_ffn(d, m.n_embd, m.n_ff, kExperts, il);
    d.f32_tensor(blk(il, "ffn_gate_inp.bias"), {kExperts});
    d.f32_tensor(blk(il, "ffn_gate_exps.bias"), {m.n_ff, kExperts});
    d.f32_tensor(blk(il, "ffn_up_exps.bias"), {m.n_ff, kExperts});
    d.f32_tensor(blk(il, "ffn_down_exps.bias"), {m.n_embd, kExperts});
  }
  return std::move(d).finish(quant_model("gpt-oss", m, kExperts), FileType::kMXFP4_MOE);
}

// ---- phi3 ----

// microsoft/Phi-3-mini-4k-instruct config.json: hidden_size 3072, intermediate_size 8192, num_hidden_layers 32,
// num_attention_heads 32, num_key_value_heads 32 (head_dim 96), vocab_size 32064, max_position_embeddings 4096,
// original_max_position_embeddings 4096, rope_theta 10000.0, rms_norm_eps 1e-05, sliding_window 2047,
// tie_word_embeddings false; fused projections: qkv_proj -> attn_qkv [n_embd, (n_head + 2 n_head_kv) head_dim] and
// gate_up_proj -> ffn_up [n_embd, 2 n_ff]. The 4k model has no rope_factors_long/short tensors (the 128k one has).
// Phi3MiniModel.set_gguf_parameters writes sliding_window (0 when absent, which marks Phi-4). Checked for the phi3
// build: the keys are set_gguf_parameters' in its order (context_length, rope.scaling.original_context_length, ...,
// file_type, sliding_window; generate_extra_tensors adds rope.scaling.attn_factor and rope_factors_{long,short} only
// for a config with long_factor, not this 4k one), and the shapes are llama_model_phi3::load_arch_tensors'
// (src/models/phi3.cpp): attn_qkv [n_embd, n_embd + 2 n_embd_gqa], attn_output [n_embd, n_embd], ffn_up
// [n_embd, 2 n_ff], ffn_down [n_ff, n_embd].
Result<File> phi3_mini() {
  const Dims m{32, 3072, 8192, 32, 32, 96, 32064};
  Draft d("phi3", "Phi 3 Mini 4k Instruct");
  d.u32("context_length", 4096);
  d.u32("rope.scaling.original_context_length", 4096);
  d.u32("embedding_length", static_cast<uint32_t>(m.n_embd));
  d.u32("feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.u32("block_count", static_cast<uint32_t>(m.n_layer));
  d.u32("attention.head_count", static_cast<uint32_t>(m.n_head));
  d.u32("attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  d.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  d.u32("rope.dimension_count", static_cast<uint32_t>(m.head_dim));
  d.f32("rope.freq_base", 10000.0f);
  d.file_type(FileType::kQ4_K_M);
  d.u32("attention.sliding_window", 2047);
  d.vocab_spm(m.n_vocab, 1, 32000, 0, 32000);  // <s>, <|endoftext|>, <unk>, pad <|endoftext|> (PR #11003's log)
  d.quantization_version();
  embeddings(d, m, false);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    d.f32_tensor(blk(il, "attn_norm.weight"), {m.n_embd});
    d.weight(blk(il, "attn_qkv.weight"), {m.n_embd, (m.n_head + 2 * m.n_head_kv) * m.head_dim});
    d.weight(blk(il, "attn_output.weight"), {m.n_head * m.head_dim, m.n_embd});
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    d.weight(blk(il, "ffn_up.weight"), {m.n_embd, 2 * m.n_ff});
    d.weight(blk(il, "ffn_down.weight"), {m.n_ff, m.n_embd});
  }
  return std::move(d).finish(quant_model("phi3", m), FileType::kQ4_K_M);
}

struct Entry {
  const char* name;
  Result<File> (*make)();
};

constexpr Entry kFixtures[] = {
    {"llama-3.1-8b-q4_k_m", llama31_8b},     {"llama-3.1-70b-q4_k_m", llama31_70b}, {"mistral-7b-q4_k_m", mistral_7b},
    {"mixtral-8x7b-q4_k_m", mixtral_8x7b},   {"qwen2.5-7b-q4_k_m", qwen25_7b},      {"qwen3-8b-q4_k_m", qwen3_8b},
    {"qwen3-30b-a3b-q4_k_m", qwen3_30b_a3b}, {"gemma-3-12b-q4_k_m", gemma3_12b},    {"gpt-oss-20b-mxfp4", gpt_oss_20b},
    {"phi-3-mini-q4_k_m", phi3_mini},
};

}  // namespace

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const Entry& e : kFixtures) names.emplace_back(e.name);
  return names;
}

Result<File> make_fixture(const std::string& name) {
  for (const Entry& e : kFixtures) {
    if (name == e.name) return e.make();
  }
  std::string known;
  for (const Entry& e : kFixtures) known += std::string(known.empty() ? "" : ", ") + e.name;
  return TS_ERROR(StatusCode::kNotFound, "no GGUF fixture named '%s' (known: %s)", name.c_str(), known.c_str());
}

bool is_fixture_name(const std::string& name) {
  for (const Entry& e : kFixtures) {
    if (name == e.name) return true;
  }
  return false;
}

Result<gguf::Model> read_model_or_fixture(const std::string& path_or_name) {
  std::error_code ec;
  if (!is_fixture_name(path_or_name) || std::filesystem::exists(path_or_name, ec)) {
    return gguf::read_model(path_or_name);
  }
  auto file = make_fixture(path_or_name);
  if (!file.ok()) return file.status();
  return gguf::Model::of_file(std::move(file).value());
}

std::vector<std::string> complete_fixture_names() { return {"tiny-llama", "tiny-mixtral", "tiny-gpt-oss"}; }

Result<LlamaConfig> complete_fixture_config(const std::string& name) {
  if (name != "tiny-llama" && name != "tiny-mixtral" && name != "tiny-gpt-oss") {
    return Status(StatusCode::kNotFound,
                  "no complete fixture named '" + name + "' (tiny-llama, tiny-mixtral, tiny-gpt-oss)");
  }
  auto c = preset(name == "tiny-llama" ? "tiny" : name == "tiny-mixtral" ? "tiny-moe" : "tiny-gpt-oss");
  if (!c.ok()) return c.status();
  c->name = name;
  c->weight_type = Type::kQ4_0;
  c->weight_types = {{"token_embd.weight", Type::kQ8_0}, {"output.weight", Type::kQ8_0}};
  for (int il = 0; il < c->n_layer; ++il) c->weight_types[blk(il, "attn_v.weight")] = Type::kF16;
  if (name == "tiny-gpt-oss") {  // q8_0 matrices (gpt-oss-20b's attention and embeddings), an f16 output head
    c->weight_type = Type::kQ8_0;
    c->weight_types["output.weight"] = Type::kF16;
    // gpt-oss-20b's YaRN: factor 32 over 4096 trained positions (rope.scaling.* keys), ext_factor 1; on 16 pairs of
    // base 150000 the ramp runs from pair 4 to 9.
    c->rope_scale = c->rope_scale_swa = 1.0f / 32.0f;
    c->rope_yarn.n_ctx_orig = 4096;
    c->rope_yarn.ext_factor = 1.0f;
  }
  return c;
}

}  // namespace tessera::models::fixtures
