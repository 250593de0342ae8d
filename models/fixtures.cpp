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
#include <cmath>
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

// Set while make_fixture_without_vocab builds: the vocabulary arrays are left out (see fixtures.h).
thread_local bool t_without_vocab = false;

// A fixture in the making: metadata in the order convert_hf_to_gguf.py writes it, tensors as it writes them.
class Draft {
 public:
  Draft(std::string arch, const char* general_name) : arch_(std::move(arch)) {
    set("general.architecture", Value::string(arch_));
    set("general.type", Value::string("model"));
    set("general.name", Value::string(general_name));
  }

  void set(const std::string& key, Value v) { file_.set(key, std::move(v)); }
  // A key written before general.type: convert_hf_to_gguf.py's generate_extra_tensors runs (in prepare_tensors)
  // before set_gguf_parameters, so a key it adds directly follows general.architecture, the writer's first.
  void set_second(const std::string& key, Value v) {
    file_.metadata.insert(file_.metadata.begin() + 1, gguf::KeyValue{key, std::move(v), 0});
  }
  // "<arch>.<key>" (the architecture's keys).
  void u32(const std::string& key, uint32_t v) { set(arch_ + "." + key, Value::u32(v)); }
  void f32(const std::string& key, float v) { set(arch_ + "." + key, Value::f32(v)); }
  void str(const std::string& key, const char* v) { set(arch_ + "." + key, Value::string(v)); }
  void file_type(FileType t) { set("general.file_type", Value::u32(static_cast<uint32_t>(t))); }
  void quantization_version() { set("general.quantization_version", Value::u32(2)); }  // GGML_QNT_VERSION

  // The vocabulary, n tokens: synthetic strings "<tok0>".."<tokN-1>" of the real count, all of type 1 (normal).
  // BPE ("gpt2") vocabularies also have merges in real files; they are left out here.
  // Special tokens in gguf-py SpecialVocab's order (bos, eos, unk, ..., pad); -1: not written.
  void vocab_bpe(const char* pre, int64_t n, uint32_t bos, uint32_t eos, int64_t pad = -1, int64_t unk = -1) {
    set("tokenizer.ggml.model", Value::string("gpt2"));
    set("tokenizer.ggml.pre", Value::string(pre));
    if (!t_without_vocab) {
      set("tokenizer.ggml.tokens", Value::strings(tokens(n)));
      set("tokenizer.ggml.token_type", Value::i32s(std::vector<int32_t>(static_cast<size_t>(n), 1)));
    }
    set("tokenizer.ggml.bos_token_id", Value::u32(bos));
    set("tokenizer.ggml.eos_token_id", Value::u32(eos));
    if (unk >= 0) set("tokenizer.ggml.unknown_token_id", Value::u32(static_cast<uint32_t>(unk)));
    if (pad >= 0) set("tokenizer.ggml.padding_token_id", Value::u32(static_cast<uint32_t>(pad)));
  }
  // SentencePiece ("llama") vocabularies: tokens, scores (all 0 here), token types.
  void vocab_spm(int64_t n, uint32_t bos, uint32_t eos, uint32_t unk, int64_t pad = -1) {
    set("tokenizer.ggml.model", Value::string("llama"));
    set("tokenizer.ggml.pre", Value::string("default"));
    if (!t_without_vocab) {
      set("tokenizer.ggml.tokens", Value::strings(tokens(n)));
      set("tokenizer.ggml.scores", Value::f32s(std::vector<float>(static_cast<size_t>(n), 0.0f)));
      set("tokenizer.ggml.token_type", Value::i32s(std::vector<int32_t>(static_cast<size_t>(n), 1)));
    }
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
    for (int64_t i = 0; i < n; ++i) out.push_back("<tok" + std::to_string(i) + ">");
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
  bool llama3_vocab = false;   // BPE (Llama 3) rather than SentencePiece (Mistral)
  bool rope_freqs = false;     // Llama 3.1's rope scaling factors as a tensor
  bool tied = false;           // tie_word_embeddings (Llama 3.2 1B and 3B): no output.weight
  bool head_dim_keys = false;  // config.json has head_dim: TextModel writes attention.key_length / value_length
  bool tekken_vocab = false;   // Mistral's Tekken BPE vocabulary (Nemo, Small 3): tokenizer.ggml.pre "tekken"
};

Result<File> llama(const LlamaSpec& s, FileType ft) {
  const Dims& m = s.m;
  Draft d("llama", s.general_name);
  base_keys(d, m, s.n_ctx, s.rope_base, s.rms_eps);
  if (s.n_expert > 0) {
    d.u32("expert_count", static_cast<uint32_t>(s.n_expert));
    d.u32("expert_used_count", static_cast<uint32_t>(s.n_expert_used));
  }
  if (s.head_dim_keys) head_dim_keys(d, m);
  d.file_type(ft);
  // LlamaModel.set_gguf_parameters: the vocabulary size and the rotated dimensions (head_dim).
  d.u32("vocab_size", static_cast<uint32_t>(m.n_vocab));
  d.u32("rope.dimension_count", static_cast<uint32_t>(m.head_dim));
  if (s.llama3_vocab) {
    d.vocab_bpe("llama-bpe", m.n_vocab, 128000, 128009);  // <|begin_of_text|>, <|eot_id|>
  } else if (s.tekken_vocab) {
    // <s>, </s>, <unk> (Mistral-Nemo's metadata in ollama/ollama issue #8277: bos 1, eos 2, unknown 0, pre tekken)
    d.vocab_bpe("tekken", m.n_vocab, 1, 2, /*pad=*/-1, /*unk=*/0);
  } else {
    d.vocab_spm(m.n_vocab, 1, 2, 0);  // <s>, </s>, <unk>
  }
  d.quantization_version();

  embeddings(d, m, s.tied);
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
  return std::move(d).finish(quant_model("llama", m, s.n_expert), ft);
}

// meta-llama/Llama-3.1-8B-Instruct config.json: hidden_size 4096, intermediate_size 14336, num_hidden_layers 32,
// num_attention_heads 32, num_key_value_heads 8 (head_dim 4096 / 32 = 128), vocab_size 128256,
// max_position_embeddings 131072, rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling rope_type "llama3",
// tie_word_embeddings false. The same values are in the metadata of bartowski's Q4_K_M file printed in
// utilityai/llama-cpp-rs PR #400 and mozilla-ai/llamafile issue #516.
Result<File> llama31_8b(FileType ft) {
  return llama(
      {"Meta Llama 3.1 8B Instruct", {32, 4096, 14336, 32, 8, 128, 128256}, 131072, 500000.0f, 1e-5f, 0, 0, true, true},
      ft);
}

// meta-llama/Llama-3.1-70B-Instruct config.json: hidden_size 8192, intermediate_size 28672, num_hidden_layers 80,
// num_attention_heads 64, num_key_value_heads 8 (head_dim 128), vocab_size 128256, max_position_embeddings 131072,
// rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling "llama3".
Result<File> llama31_70b(FileType ft) {
  return llama({"Meta Llama 3.1 70B Instruct",
                {80, 8192, 28672, 64, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true},
               ft);
}

// Mistral-7B-Instruct-v0.3 (v0.3: the 32768-token vocabulary; v0.1 had 32000). mistralai/Mistral-7B-Instruct-v0.3
// config.json: hidden_size 4096, intermediate_size 14336, num_hidden_layers 32, num_attention_heads 32,
// num_key_value_heads 8 (head_dim 128), vocab_size 32768, max_position_embeddings 32768, rope_theta 1000000.0,
// rms_norm_eps 1e-05, sliding_window null (convert_hf_to_gguf.py writes it as the llama architecture).
Result<File> mistral_7b(FileType ft) {
  return llama({"Mistral 7B Instruct v0.3", {32, 4096, 14336, 32, 8, 128, 32768}, 32768, 1000000.0f, 1e-5f}, ft);
}

// mistralai/Mixtral-8x7B-Instruct-v0.1 config.json: hidden_size 4096, intermediate_size 14336 (per expert),
// num_hidden_layers 32, num_attention_heads 32, num_key_value_heads 8, num_local_experts 8, num_experts_per_tok 2,
// vocab_size 32000, max_position_embeddings 32768, rope_theta 1000000.0, rms_norm_eps 1e-05. Experts merged into 3-D
// tensors as convert_hf_to_gguf.py writes them since 2024 (TheBloke's December 2023 files have the experts split,
// blk.N.ffn_gate.E.weight, 995 tensors).
Result<File> mixtral_8x7b(FileType ft) {
  return llama({"Mixtral 8x7B Instruct v0.1", {32, 4096, 14336, 32, 8, 128, 32000}, 32768, 1000000.0f, 1e-5f, 8, 2},
               ft);
}

// ---- qwen2: Qwen2.5 ----

struct QwenSpec {
  const char* general_name;
  Dims m;
  uint32_t n_ctx;
  float rms_eps = 1e-6f;
  bool tied = false;  // tie_word_embeddings (Qwen2.5 0.5B-3B, Qwen3 0.6B-4B): no output.weight
  float rope_base = 1000000.0f;
};

Result<File> qwen2(const QwenSpec& s, FileType ft) {
  const Dims& m = s.m;
  Draft d("qwen2", s.general_name);
  base_keys(d, m, s.n_ctx, s.rope_base, s.rms_eps);
  d.file_type(ft);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);  // <|endoftext|>, <|im_end|>, pad <|endoftext|>
  d.quantization_version();
  embeddings(d, m, s.tied);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    d.f32_tensor(blk(il, "attn_q.bias"), {m.n_head * m.head_dim});
    d.f32_tensor(blk(il, "attn_k.bias"), {m.n_head_kv * m.head_dim});
    d.f32_tensor(blk(il, "attn_v.bias"), {m.n_head_kv * m.head_dim});
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    dense_ffn(d, m, il);
  }
  return std::move(d).finish(quant_model("qwen2", m), ft);
}

// Qwen/Qwen2.5-7B-Instruct config.json: hidden_size 3584, intermediate_size 18944, num_hidden_layers 28,
// num_attention_heads 28, num_key_value_heads 4 (head_dim 128), vocab_size 152064, max_position_embeddings 32768,
// rope_theta 1000000.0, rms_norm_eps 1e-06, tie_word_embeddings false; q/k/v projections with biases. The tokenizer
// has 151665 tokens; convert pads the vocabulary to vocab_size with [PAD] tokens, so the token array has 152064.
Result<File> qwen25_7b(FileType ft) {
  return qwen2({"Qwen2.5 7B Instruct", {28, 3584, 18944, 28, 4, 128, 152064}, 32768}, ft);
}

// ---- qwen3 and qwen3moe ----

// Qwen3 layers add per-head RMS norms of q and k: attn_q_norm, attn_k_norm [head_dim].
void qk_norms(Draft& d, const Dims& m, int64_t il) {
  d.f32_tensor(blk(il, "attn_q_norm.weight"), {m.head_dim});
  d.f32_tensor(blk(il, "attn_k_norm.weight"), {m.head_dim});
}

Result<File> qwen3(const QwenSpec& s, FileType ft) {
  const Dims& m = s.m;
  Draft d("qwen3", s.general_name);
  base_keys(d, m, s.n_ctx, s.rope_base, s.rms_eps);
  head_dim_keys(d, m);  // written because config.json has head_dim
  d.file_type(ft);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);
  d.quantization_version();
  embeddings(d, m, s.tied);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    qk_norms(d, m, il);
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    dense_ffn(d, m, il);
  }
  return std::move(d).finish(quant_model("qwen3", m), ft);
}

// Qwen/Qwen3-8B config.json: hidden_size 4096, intermediate_size 12288, num_hidden_layers 36, num_attention_heads 32,
// num_key_value_heads 8, head_dim 128, vocab_size 151936, max_position_embeddings 40960, rope_theta 1000000,
// rms_norm_eps 1e-06, tie_word_embeddings false (the 0.6B, 1.7B and 4B models tie theirs; 8B has output.weight).
Result<File> qwen3_8b(FileType ft) { return qwen3({"Qwen3 8B", {36, 4096, 12288, 32, 8, 128, 151936}, 40960}, ft); }

struct QwenMoeSpec {
  QwenSpec q;
  int64_t n_expert, n_expert_used, n_ff_exp;
};

Result<File> qwen3moe(const QwenMoeSpec& s, FileType ft) {
  const Dims& m = s.q.m;
  const int64_t kExperts = s.n_expert, kExpertsUsed = s.n_expert_used, kFfExp = s.n_ff_exp;
  Draft d("qwen3moe", s.q.general_name);
  base_keys(d, m, s.q.n_ctx, s.q.rope_base, s.q.rms_eps);
  d.u32("expert_used_count", static_cast<uint32_t>(kExpertsUsed));
  head_dim_keys(d, m);
  d.u32("expert_count", static_cast<uint32_t>(kExperts));
  d.u32("expert_feed_forward_length", static_cast<uint32_t>(kFfExp));
  d.file_type(ft);
  d.vocab_bpe("qwen2", m.n_vocab, 151643, 151645, 151643);
  d.quantization_version();
  embeddings(d, m, false);
  for (int64_t il = 0; il < m.n_layer; ++il) {
    attention(d, m, il);
    qk_norms(d, m, il);
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    moe_ffn(d, m.n_embd, kFfExp, kExperts, il);
  }
  return std::move(d).finish(quant_model("qwen3moe", m, kExperts), ft);
}

// Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, intermediate_size 6144 (written as feed_forward_length; no dense
// FFN uses it), moe_intermediate_size 768, num_hidden_layers 48, num_attention_heads 32, num_key_value_heads 4,
// head_dim 128, num_experts 128, num_experts_per_tok 8, vocab_size 151936, max_position_embeddings 40960,
// rope_theta 1000000.0, rms_norm_eps 1e-06, tie_word_embeddings false. Key order as in the Q4_K_M file's metadata
// printed in llama.cpp issue #13427.
Result<File> qwen3_30b_a3b(FileType ft) {
  return qwen3moe({{"Qwen3 30B A3B", {48, 2048, 6144, 32, 4, 128, 151936}, 40960}, 128, 8, 768}, ft);
}

// ---- gemma3 ----

struct GemmaSpec {
  const char* general_name;
  Dims m;
  uint32_t n_ctx;
  uint32_t sliding_window;
  float rope_scale;  // rope_scaling linear factor; 0 for rope_scaling null (1B), which writes no rope.scaling keys
};

Result<File> gemma3(const GemmaSpec& s, FileType ft) {
  const Dims& m = s.m;
  Draft d("gemma3", s.general_name);
  d.u32("context_length", s.n_ctx);
  d.u32("embedding_length", static_cast<uint32_t>(m.n_embd));
  d.u32("block_count", static_cast<uint32_t>(m.n_layer));
  d.u32("feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.u32("attention.head_count", static_cast<uint32_t>(m.n_head));
  d.f32("attention.layer_norm_rms_epsilon", 1e-6f);
  head_dim_keys(d, m);
  d.f32("rope.freq_base", 1000000.0f);
  d.u32("attention.sliding_window", s.sliding_window);
  d.u32("attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  if (s.rope_scale > 0.0f) {
    d.str("rope.scaling.type", "linear");
    d.f32("rope.scaling.factor", s.rope_scale);
  }
  d.file_type(ft);
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
  return std::move(d).finish(quant_model("gemma3", m), ft);
}

// google/gemma-3-12b-it config.json (text_config): hidden_size 3840, intermediate_size 15360, num_hidden_layers 48,
// num_attention_heads 16, num_key_value_heads 8, head_dim 256, vocab_size 262208, max_position_embeddings 131072,
// rope_theta 1000000.0 (global layers; the local ones use 10000, which llama.cpp does not read from the file),
// rope_scaling linear factor 8.0, sliding_window 1024, rms_norm_eps 1e-06; the embeddings are tied (no output.weight).
// The same keys and values are in the metadata of a gemma-3-12b-it GGUF printed in intel/ipex-llm issue #12978, and a
// Gemma 3 file's vocabulary of 262208 tokens with scores and types in llama.cpp issue #12784. The vision tower and
// projector are in a separate mmproj file, not in this one.
Result<File> gemma3_12b(FileType ft) {
  return gemma3({"Gemma 3 12b It", {48, 3840, 15360, 16, 8, 256, 262208}, 131072, 1024, 8.0f}, ft);
}

// ---- gpt-oss ----

Result<File> gpt_oss(const char* general_name, const Dims& m, int64_t kExperts, int64_t kExpertsUsed, FileType ft) {
  Draft d("gpt-oss", general_name);
  base_keys(d, m, 131072, 150000.0f, 1e-5f);
  d.u32("expert_count", static_cast<uint32_t>(kExperts));
  d.u32("expert_used_count", static_cast<uint32_t>(kExpertsUsed));
  head_dim_keys(d, m);
  d.u32("attention.sliding_window", 128);
  d.u32("expert_feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.str("rope.scaling.type", "yarn");
  d.f32("rope.scaling.factor", 32.0f);
  d.u32("rope.scaling.original_context_length", 4096);
  // <|startoftext|>, <|return|>, pad <|endoftext|> (llama.cpp PR #17609's log).
  d.vocab_bpe("gpt-4o", m.n_vocab, 199998, 200002, 199999);
  d.quantization_version();
  d.file_type(ft);
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
  return std::move(d).finish(quant_model("gpt-oss", m, kExperts), ft);
}

// openai/gpt-oss-20b config.json: hidden_size 2880, intermediate_size 2880 (per expert), num_hidden_layers 24,
// num_attention_heads 64, num_key_value_heads 8, head_dim 64, num_local_experts 32, num_experts_per_tok 4,
// vocab_size 201088, max_position_embeddings 131072, rope_theta 150000, rope_scaling yarn factor 32 over
// original_max_position_embeddings 4096, sliding_window 128, rms_norm_eps 1e-05. ggml-org/gpt-oss-20b-GGUF's
// gpt-oss-20b-mxfp4.gguf: general.architecture "gpt-oss" (LLM_ARCH_OPENAI_MOE), general.file_type 38 (MXFP4_MOE),
// 35 keys and 459 tensors (ik_llama.cpp issue #822), keys as printed in llama.cpp issue #15789 and PR #17609 (which
// shows general.quantization_version then general.file_type last: written by llama-quantize). Attention with biases
// and per-head sinks; no ffn_norm: post_attention_norm is the FFN's input norm; experts with biases.
Result<File> gpt_oss_20b(FileType ft) { return gpt_oss("Gpt Oss 20b", {24, 2880, 2880, 64, 8, 64, 201088}, 32, 4, ft); }

// ---- phi3 ----

struct Phi3Spec {
  const char* general_name;
  Dims m;
  uint32_t n_ctx, n_ctx_orig;  // max_position_embeddings, original_max_position_embeddings (else the former)
  float rope_base;
  uint32_t sliding_window;  // 0 when config.json has none (Phi-4)
  bool long_rope = false;   // rope_scaling longrope: rope.scaling.attn_factor and rope_factors_{long,short}
  bool phi4_vocab = false;  // Phi-4's GPT-2 BPE vocabulary ("dbrx" pre-tokenizer) rather than Phi-3's SentencePiece
};

// Phi3MiniModel (convert_hf_to_gguf.py): set_gguf_parameters' keys in its order (context_length,
// rope.scaling.original_context_length, ..., file_type, sliding_window: 0 when absent, which marks Phi-4);
// generate_extra_tensors adds, for a config whose rope_scaling has long_factor (type longrope or su), the key
// rope.scaling.attn_factor = sqrt(1 + ln(max_position_embeddings / original) / ln(original)) and the tensors
// rope_factors_long / rope_factors_short (f32 [head_dim / 2]). prepare_tensors runs before set_gguf_parameters, so the
// key directly follows general.architecture (as printed in ollama/ollama issue #12722 for a Phi-4-mini file: kv 1).
// Fused projections: qkv_proj -> attn_qkv [n_embd, (n_head + 2 n_head_kv) head_dim] and gate_up_proj -> ffn_up
// [n_embd, 2 n_ff]. Checked for the phi3 build: the shapes are llama_model_phi3::load_arch_tensors'
// (src/models/phi3.cpp): attn_qkv [n_embd, n_embd + 2 n_embd_gqa], attn_output [n_embd, n_embd], ffn_up
// [n_embd, 2 n_ff], ffn_down [n_ff, n_embd].
Result<File> phi3(const Phi3Spec& s, FileType ft) {
  const Dims& m = s.m;
  Draft d("phi3", s.general_name);
  if (s.long_rope) {
    const double scale = static_cast<double>(s.n_ctx) / static_cast<double>(s.n_ctx_orig);
    const double attn_factor = std::sqrt(1.0 + std::log(scale) / std::log(static_cast<double>(s.n_ctx_orig)));
    d.set_second("phi3.rope.scaling.attn_factor", Value::f32(static_cast<float>(attn_factor)));
  }
  d.u32("context_length", s.n_ctx);
  d.u32("rope.scaling.original_context_length", s.n_ctx_orig);
  d.u32("embedding_length", static_cast<uint32_t>(m.n_embd));
  d.u32("feed_forward_length", static_cast<uint32_t>(m.n_ff));
  d.u32("block_count", static_cast<uint32_t>(m.n_layer));
  d.u32("attention.head_count", static_cast<uint32_t>(m.n_head));
  d.u32("attention.head_count_kv", static_cast<uint32_t>(m.n_head_kv));
  d.f32("attention.layer_norm_rms_epsilon", 1e-5f);
  d.u32("rope.dimension_count", static_cast<uint32_t>(m.head_dim));
  d.f32("rope.freq_base", s.rope_base);
  d.file_type(ft);
  d.u32("attention.sliding_window", s.sliding_window);
  if (s.phi4_vocab) {
    d.vocab_bpe("dbrx", m.n_vocab, 100257, 100257, 100257);  // <|endoftext|> for bos, eos and pad
  } else {
    d.vocab_spm(m.n_vocab, 1, 32000, 0, 32000);  // <s>, <|endoftext|>, <unk>, pad <|endoftext|> (PR #11003's log)
  }
  d.quantization_version();
  embeddings(d, m, false);
  if (s.long_rope) {
    d.f32_tensor("rope_factors_long.weight", {m.head_dim / 2});
    d.f32_tensor("rope_factors_short.weight", {m.head_dim / 2});
  }
  for (int64_t il = 0; il < m.n_layer; ++il) {
    d.f32_tensor(blk(il, "attn_norm.weight"), {m.n_embd});
    d.weight(blk(il, "attn_qkv.weight"), {m.n_embd, (m.n_head + 2 * m.n_head_kv) * m.head_dim});
    d.weight(blk(il, "attn_output.weight"), {m.n_head * m.head_dim, m.n_embd});
    d.f32_tensor(blk(il, "ffn_norm.weight"), {m.n_embd});
    d.weight(blk(il, "ffn_up.weight"), {m.n_embd, 2 * m.n_ff});
    d.weight(blk(il, "ffn_down.weight"), {m.n_ff, m.n_embd});
  }
  return std::move(d).finish(quant_model("phi3", m), ft);
}

// microsoft/Phi-3-mini-4k-instruct config.json: hidden_size 3072, intermediate_size 8192, num_hidden_layers 32,
// num_attention_heads 32, num_key_value_heads 32 (head_dim 96), vocab_size 32064, max_position_embeddings 4096,
// original_max_position_embeddings 4096, rope_theta 10000.0, rms_norm_eps 1e-05, sliding_window 2047,
// tie_word_embeddings false. The 4k model has no rope_factors_long/short tensors (the 128k one has).
Result<File> phi3_mini(FileType ft) {
  return phi3({"Phi 3 Mini 4k Instruct", {32, 3072, 8192, 32, 32, 96, 32064}, 4096, 4096, 10000.0f, 2047}, ft);
}

// ---- the catalogue's other bases (issue 50, item 4) ----
//
// Where a value was read from a copy of the model's config.json (a fine-tune or conversion that names the model in
// _name_or_path or its commit message, or mlc-ai/mlc-llm's python/mlc_llm/model/model_preset.py, which copies the
// configs verbatim), the copy is named; the outside numbers each base is checked against are in test_fixtures.cpp.

// meta-llama/Llama-3.2-1B-Instruct config.json (as copied in mlc-ai/mlc-llm model_preset.py, "llama3_2_1b"):
// hidden_size 2048, intermediate_size 8192, num_hidden_layers 16, num_attention_heads 32, num_key_value_heads 8,
// head_dim 64, vocab_size 128256, max_position_embeddings 131072, rope_theta 500000.0, rms_norm_eps 1e-05,
// rope_scaling llama3 (factor 32, so rope_freqs.weight [32]), tie_word_embeddings true (no output.weight: token_embd
// takes the output's type). head_dim in config.json: TextModel writes attention.key_length / value_length.
Result<File> llama32_1b(FileType ft) {
  return llama({"Llama 3.2 1B Instruct",
                {16, 2048, 8192, 32, 8, 64, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true,
                /*tied=*/true,
                /*head_dim_keys=*/true},
               ft);
}

// meta-llama/Llama-3.2-3B-Instruct config.json (mlc-ai/mlc-llm model_preset.py "llama3_2_3b"; the same values in
// citsjtu2020/LLM-Prof sglang/Model_Config.md): hidden_size 3072, intermediate_size 8192, num_hidden_layers 28,
// num_attention_heads 24, num_key_value_heads 8, head_dim 128, vocab_size 128256, max_position_embeddings 131072,
// rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling llama3 factor 32, tie_word_embeddings true.
Result<File> llama32_3b(FileType ft) {
  return llama({"Llama 3.2 3B Instruct",
                {28, 3072, 8192, 24, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true,
                /*tied=*/true,
                /*head_dim_keys=*/true},
               ft);
}

// meta-llama/Llama-3.3-70B-Instruct config.json (as copied, _name_or_path "meta-llama/Llama-3.3-70B-Instruct", in
// relaxml/Llama-3.3-70B-Instruct-QTIP-3Bit config.json): hidden_size 8192, intermediate_size 28672,
// num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, head_dim 128, vocab_size 128256,
// max_position_embeddings 131072, rope_theta 500000.0, rms_norm_eps 1e-05, rope_scaling llama3 factor 8,
// tie_word_embeddings false: Llama 3.1 70B's shapes, with head_dim written (attention.key_length / value_length).
Result<File> llama33_70b(FileType ft) {
  return llama({"Llama 3.3 70B Instruct",
                {80, 8192, 28672, 64, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true,
                /*tied=*/false,
                /*head_dim_keys=*/true},
               ft);
}

// Qwen2.5 Instruct: q/k/v biases, the vocabulary padded to vocab_size (qwen25_7b). max_position_embeddings 32768,
// rope_theta 1000000.0, rms_norm_eps 1e-06 in each config below.
//
// Qwen/Qwen2.5-0.5B config.json (as copied in osllmai-community/Qwen2.5-0.5B; the Instruct model card gives the same
// 24 layers, 14 / 2 heads and 32,768 context): hidden_size 896, intermediate_size 4864, num_hidden_layers 24,
// num_attention_heads 14, num_key_value_heads 2, vocab_size 151936, tie_word_embeddings true. 896 is not a multiple
// of 256: the K-quant types fall back (q4_K -> q5_0, q6_K -> q8_0) on the rows of that length.
Result<File> qwen25_05b(FileType ft) {
  return qwen2({"Qwen2.5 0.5B Instruct", {24, 896, 4864, 14, 2, 64, 151936}, 32768, 1e-6f, /*tied=*/true}, ft);
}

// Qwen/Qwen2.5-1.5B-Instruct config.json (as copied in onnx-community/Qwen2.5-1.5B-Instruct): hidden_size 1536,
// intermediate_size 8960, num_hidden_layers 28, num_attention_heads 12, num_key_value_heads 2, vocab_size 151936,
// tie_word_embeddings true.
Result<File> qwen25_15b(FileType ft) {
  return qwen2({"Qwen2.5 1.5B Instruct", {28, 1536, 8960, 12, 2, 128, 151936}, 32768, 1e-6f, /*tied=*/true}, ft);
}

// Qwen/Qwen2.5-3B-Instruct config.json (mlc-ai/mlc-llm model_preset.py "qwen2.5_3b"; the same in
// hsuwill000/Qwen2.5-3B-Instruct-openvino): hidden_size 2048, intermediate_size 11008, num_hidden_layers 36,
// num_attention_heads 16, num_key_value_heads 2, vocab_size 151936, tie_word_embeddings true.
Result<File> qwen25_3b(FileType ft) {
  return qwen2({"Qwen2.5 3B Instruct", {36, 2048, 11008, 16, 2, 128, 151936}, 32768, 1e-6f, /*tied=*/true}, ft);
}

// Qwen/Qwen2.5-14B-Instruct config.json (as copied in osllmai-community/Qwen2.5-14B-Instruct): hidden_size 5120,
// intermediate_size 13824, num_hidden_layers 48, num_attention_heads 40, num_key_value_heads 8, vocab_size 152064,
// tie_word_embeddings false.
Result<File> qwen25_14b(FileType ft) {
  return qwen2({"Qwen2.5 14B Instruct", {48, 5120, 13824, 40, 8, 128, 152064}, 32768}, ft);
}

// Qwen/Qwen2.5-32B-Instruct config.json (as copied, _name_or_path "Qwen/Qwen2.5-32B-Instruct", in
// ehristoforu/qwen2.5-test-32b-it): hidden_size 5120, intermediate_size 27648, num_hidden_layers 64,
// num_attention_heads 40, num_key_value_heads 8, vocab_size 152064, tie_word_embeddings false.
Result<File> qwen25_32b(FileType ft) {
  return qwen2({"Qwen2.5 32B Instruct", {64, 5120, 27648, 40, 8, 128, 152064}, 32768}, ft);
}

// Qwen/Qwen2.5-72B-Instruct config.json (as copied in FuturisticVibes/magnum-v4-72b-8.0bpw-h8-exl2, _name_or_path
// ".../Qwen2.5-72B-Instruct", and gghfez/UwU-72B-Preview via unsloth/qwen2.5-72b-instruct-bnb-4bit): hidden_size 8192,
// intermediate_size 29568, num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, vocab_size 152064,
// tie_word_embeddings false.
Result<File> qwen25_72b(FileType ft) {
  return qwen2({"Qwen2.5 72B Instruct", {80, 8192, 29568, 64, 8, 128, 152064}, 32768}, ft);
}

// Qwen/Qwen2.5-Coder-32B-Instruct config.json (as added, "Add config.json from Qwen/Qwen2.5-Coder-32B-Instruct", to
// ai-team-20/qwen3-coder-480b-3): Qwen2.5-32B-Instruct's shapes (5120, 27648, 64 layers, 40 / 8 heads, vocab 152064),
// max_position_embeddings 32768, rope_theta 1000000.0, rms_norm_eps 1e-06, tie_word_embeddings false.
Result<File> qwen25_coder_32b(FileType ft) {
  return qwen2({"Qwen2.5 Coder 32B Instruct", {64, 5120, 27648, 40, 8, 128, 152064}, 32768}, ft);
}

// Qwen3: per-head q/k norms, head_dim written; max_position_embeddings 40960, rope_theta 1000000, rms_norm_eps 1e-06.
//
// Qwen/Qwen3-0.6B config.json (mlc-ai/mlc-llm model_preset.py "qwen3_0.6b"): hidden_size 1024, intermediate_size
// 3072, num_hidden_layers 28, num_attention_heads 16, num_key_value_heads 8, head_dim 128 (16 x 128 = 2048, not
// 1024), vocab_size 151936, tie_word_embeddings true. The same keys in the Q8_0 file's metadata printed in
// tests/fidelity/41-qwen3-0.6b-q8_0-cpu-lab-report.log.
Result<File> qwen3_06b(FileType ft) {
  return qwen3({"Qwen3 0.6B", {28, 1024, 3072, 16, 8, 128, 151936}, 40960, 1e-6f, /*tied=*/true}, ft);
}

// Qwen/Qwen3-14B config.json (as copied in citsjtu2020/LLM-Prof sglang/Model_Config.md): hidden_size 5120,
// intermediate_size 17408, num_hidden_layers 40, num_attention_heads 40, num_key_value_heads 8, head_dim 128,
// vocab_size 151936, tie_word_embeddings false.
Result<File> qwen3_14b(FileType ft) { return qwen3({"Qwen3 14B", {40, 5120, 17408, 40, 8, 128, 151936}, 40960}, ft); }

// Qwen/Qwen3-32B config.json (citsjtu2020/LLM-Prof sglang/Model_Config.md): hidden_size 5120, intermediate_size
// 25600, num_hidden_layers 64, num_attention_heads 64, num_key_value_heads 8, head_dim 128 (64 x 128 = 8192, not
// 5120), vocab_size 151936, tie_word_embeddings false. The same keys in the metadata of unsloth's Qwen3-32B-Q4_0.gguf
// printed in tests/fidelity/43-qwen3-32b-q4_0-ik-llama-arm-cpu-old-format.log.
Result<File> qwen3_32b(FileType ft) { return qwen3({"Qwen3 32B", {64, 5120, 25600, 64, 8, 128, 151936}, 40960}, ft); }

// Qwen/Qwen3-235B-A22B: the metadata of ubergarm's Qwen3-235B-A22B-Q8_0.gguf printed in
// tests/fidelity/37-qwen3moe-235b-q8_0-1gpu-nommap-ot-fa-q8kv.log (block_count 94, context_length 40960,
// embedding_length 4096, feed_forward_length 12288, head_count 64, head_count_kv 4, rope.freq_base 1000000,
// layer_norm_rms_epsilon 1e-06, expert_used_count 8, key_length 128, expert_count 128, expert_feed_forward_length
// 1536, 151936 tokens), which are config.json's hidden_size, intermediate_size, moe_intermediate_size, ... (the same
// numbers in Ascend/MindSpeed-RL configs/model/qwen3_235b_a22b.yaml, converted from it); untied embeddings.
Result<File> qwen3_235b_a22b(FileType ft) {
  return qwen3moe({{"Qwen3 235B A22B", {94, 4096, 12288, 64, 4, 128, 151936}, 40960}, 128, 8, 1536}, ft);
}

// google/gemma-3-1b-it config.json (mlc-ai/mlc-llm model_preset.py "gemma3_1b_it"; the same in
// indiebot-community/gemma-3-1b-it-bnb-4bit): a text-only model, hidden_size 1152, intermediate_size 6912,
// num_hidden_layers 26, num_attention_heads 4, num_key_value_heads 1, head_dim 256, vocab_size 262144 (the larger
// models' 262208 has the image tokens), max_position_embeddings 32768, rope_theta 1000000, rope_scaling null (no
// rope.scaling keys), sliding_window 512, rms_norm_eps 1e-06; tied embeddings. 1152 is not a multiple of 256: the
// K-quant types fall back on the rows of that length.
Result<File> gemma3_1b(FileType ft) {
  return gemma3({"Gemma 3 1b It", {26, 1152, 6912, 4, 1, 256, 262144}, 32768, 512, 0.0f}, ft);
}

// openai/gpt-oss-120b: original/config.json (as duplicated from openai/gpt-oss-120b in witflag/AlphaMind):
// num_hidden_layers 36, num_experts 128, experts_per_token 4, vocab_size 201088, hidden_size 2880, intermediate_size
// 2880, head_dim 64, num_attention_heads 64, num_key_value_heads 8, sliding_window 128, initial_context_length 4096,
// rope_theta 150000, rope_scaling_factor 32: gpt-oss-20b's layer with 36 layers of 128 experts. The print_info of
// unsloth's gpt-oss-120b GGUF in tests/fidelity/20-gpt-oss-120b-3gpu-ncpumoe-cmdline.log agrees (n_ctx_train 131072,
// n_layer 36, n_expert 128, n_expert_used 4, n_swa 128, f_norm_rms_eps 1e-05, 201088 tokens, 687 tensors).
Result<File> gpt_oss_120b(FileType ft) {
  return gpt_oss("Gpt Oss 120b", {36, 2880, 2880, 64, 8, 64, 201088}, 128, 4, ft);
}

// ---- more published models ----

// mistralai/Mistral-Nemo-Instruct-2407: its GGUF metadata as ollama shows it (ollama/ollama issue #8277: block_count
// 40, context_length 1024000, embedding_length 5120, feed_forward_length 14336, head_count 32, head_count_kv 8,
// key_length / value_length 128, rope.dimension_count 128, rope.freq_base 1000000, layer_norm_rms_epsilon 1e-05,
// vocab_size 131072, tokenizer gpt2 / pre tekken, bos 1, eos 2, unknown 0), which are config.json's (the Base model's
// config.json as copied in kevinstephano/thunder_model_blocks mistral/mistral_config.py has the same shapes and
// head_dim 128, tie_word_embeddings false; the Instruct model's max_position_embeddings is 1024000, as llama.cpp issue
// #8655 prints n_ctx_train). Heads of 128 on a 5120 embedding of 32 heads (4096 wide, not 5120): attn_q
// [5120, 4096], attn_output [4096, 5120].
Result<File> mistral_nemo_12b(FileType ft) {
  return llama({"Mistral Nemo Instruct 2407",
                {40, 5120, 14336, 32, 8, 128, 131072},
                1024000,
                1000000.0f,
                1e-5f,
                0,
                0,
                /*llama3_vocab=*/false,
                /*rope_freqs=*/false,
                /*tied=*/false,
                /*head_dim_keys=*/true,
                /*tekken_vocab=*/true},
               ft);
}

// mistralai/Mistral-Small-24B-Instruct-2501 config.json, as ShelbyJenkins/llm_client
// llm_models/src/llm/local/gguf/generated/preset_models.rs (MISTRAL_SMALL_24B_INSTRUCT_2501) reads it:
// context_length 32768, embedding_length 5120, feed_forward_length 32768, head_count 32, head_count_kv 8,
// block_count 40, vocab_size 131072 (Tekken), architecture mistral. Its head_dim 128, rope_theta 100000000.0,
// rms_norm_eps 1e-05 and tie_word_embeddings false were not found in a readable copy of this config.json; they change
// no tensor but the attention's width, and the published file sizes the test checks (bartowski's) need the 128: with
// heads of 5120 / 32 = 160 every file would be 0.2 GB larger.
Result<File> mistral_small_24b(FileType ft) {
  return llama({"Mistral Small 24B Instruct 2501",
                {40, 5120, 32768, 32, 8, 128, 131072},
                32768,
                100000000.0f,
                1e-5f,
                0,
                0,
                /*llama3_vocab=*/false,
                /*rope_freqs=*/false,
                /*tied=*/false,
                /*head_dim_keys=*/true,
                /*tekken_vocab=*/true},
               ft);
}

// microsoft/Phi-3.5-mini-instruct config.json (mlc-ai/mlc-llm model_preset.py "phi-3_5", _name_or_path
// "Phi-3.5-mini-instruct"; the same in sdpython/onnx-diagnostic hub_data_cached_configs.py): Phi-3-mini's shapes
// (3072, 8192, 32 layers, 32 / 32 heads, vocab_size 32064), max_position_embeddings 131072,
// original_max_position_embeddings 4096, rope_theta 10000.0, rms_norm_eps 1e-05, sliding_window 262144, rope_scaling
// type longrope with 48 long and 48 short factors: rope.scaling.attn_factor sqrt(1 + ln 32 / ln 4096) = 1.1902 and
// rope_factors_long / rope_factors_short [48]. The metadata of a Phi-3.5-mini-instruct Q8_0 file printed in llama.cpp
// issue #9112 has the same keys in the same order (context_length 131072, original_context_length 4096, ...).
Result<File> phi35_mini(FileType ft) {
  return phi3({"Phi 3.5 Mini Instruct",
               {32, 3072, 8192, 32, 32, 96, 32064},
               131072,
               4096,
               10000.0f,
               262144,
               /*long_rope=*/true},
              ft);
}

// microsoft/phi-4: the metadata of ollama's phi4 (Q4_K_M) GGUF printed in jazzwang/snippet md/genai/llm/phi.md
// (2025-01-10): context_length 16384, original_context_length 16384, embedding_length 5120, feed_forward_length 17920,
// block_count 40, head_count 40, head_count_kv 10, layer_norm_rms_epsilon 1e-05, rope.dimension_count 128,
// rope.freq_base 250000, sliding_window 0, tokenizer gpt2 / pre dbrx with 100352 tokens, bos = eos = pad 100257 --
// config.json's hidden_size, intermediate_size, ... (the same shapes in ShelbyJenkins/llm_client preset_models.rs
// "PHI_4"); no rope_scaling (no LongRoPE tensors), tie_word_embeddings false.
Result<File> phi4(FileType ft) {
  return phi3({"Phi 4",
               {40, 5120, 17920, 40, 10, 128, 100352},
               16384,
               16384,
               250000.0f,
               0,
               /*long_rope=*/false,
               /*phi4_vocab=*/true},
              ft);
}

// Qwen/Qwen3-1.7B config.json (mlc-ai/mlc-llm model_preset.py "qwen3_1.7b"): hidden_size 2048, intermediate_size
// 6144, num_hidden_layers 28, num_attention_heads 16, num_key_value_heads 8, head_dim 128 (16 x 128 = 2048),
// vocab_size 151936, max_position_embeddings 40960, rope_theta 1000000, rms_norm_eps 1e-06, tie_word_embeddings true.
Result<File> qwen3_17b(FileType ft) {
  return qwen3({"Qwen3 1.7B", {28, 2048, 6144, 16, 8, 128, 151936}, 40960, 1e-6f, /*tied=*/true}, ft);
}

// Qwen/Qwen3-4B config.json (as copied in rasbt/LLMs-from-scratch pkg/llms_from_scratch/qwen3.py, QWEN3_CONFIG_4B):
// emb_dim (hidden_size) 2560, hidden_dim (intermediate_size) 9728, n_layers 36, n_heads 32, n_kv_groups 8,
// head_dim 128 (32 x 128 = 4096, not 2560), vocab_size 151936, context_length 40960, rope_base 1000000; tied
// embeddings (the 0.6B, 1.7B and 4B models tie theirs, qwen3_8b), rms_norm_eps 1e-06 as in every Qwen3 config.
Result<File> qwen3_4b(FileType ft) {
  return qwen3({"Qwen3 4B", {36, 2560, 9728, 32, 8, 128, 151936}, 40960, 1e-6f, /*tied=*/true}, ft);
}

// google/gemma-3-4b-it config.json (the copy in sdpython/onnx-diagnostic
// onnx_diagnostic/torch_models/hghub/hub_data_cached_configs.py): text_config hidden_size 2560, intermediate_size
// 10240, num_hidden_layers 34, rope_scaling linear factor 8.0, sliding_window 1024; the other text keys are
// Gemma3TextConfig's defaults, which the print_info of ggml-org/gemma-3-4b-it-GGUF in
// tests/fidelity/21-gemma3-4b-L4-metadata.log shows: n_ctx_train 131072, n_head 8, n_head_kv 4, head size 256, n_swa
// 1024 (vocab_size 262208, rope_theta 1000000, rms_norm_eps 1e-06, as the 12B's). Text model only (the vision tower is
// the separate mmproj file); tied embeddings.
Result<File> gemma3_4b(FileType ft) {
  return gemma3({"Gemma 3 4b It", {34, 2560, 10240, 8, 4, 256, 262208}, 131072, 1024, 8.0f}, ft);
}

// google/gemma-3-27b-it: the metadata of unsloth's gemma-3-27b-it-Q4_0.gguf printed in ikawrakow/ik_llama.cpp issue
// #539: context_length 131072, embedding_length 5376, block_count 62, feed_forward_length 21504, head_count 32,
// layer_norm_rms_epsilon 1e-06, key_length / value_length 128, rope.freq_base 1000000, sliding_window 1024,
// head_count_kv 16, rope.scaling linear factor 8, 262208 tokens (bos 2, eos 106, unk 3, pad 0) -- config.json's
// text_config. Heads of 128 (32 x 128 = 4096, not 5376); config.json's query_pre_attn_scalar 168 = 5376 / 32, which the
// file does not carry: llama.cpp (and from_gguf.cpp, gemma3_keys) scale the 62-layer model's Q by 1 / sqrt(5376 / 32).
Result<File> gemma3_27b(FileType ft) {
  return gemma3({"Gemma 3 27b It", {62, 5376, 21504, 32, 16, 128, 262208}, 131072, 1024, 8.0f}, ft);
}

// meta-llama/Llama-3.1-405B: the metadata of a Llama-3.1-405B Q4_0 GGUF printed in ArmDeveloperEcosystem/arm-learning-
// paths content/learning-paths/servers-and-cloud-computing/distributed-inference-with-llama-cpp/how-to-3.md:
// block_count 126, context_length 131072, embedding_length 16384, feed_forward_length 53248, head_count 128,
// head_count_kv 8, rope.freq_base 500000, layer_norm_rms_epsilon 1e-05, key_length / value_length 128 (config.json's
// head_dim), vocab_size 128256, rope.dimension_count 128 -- config.json's values (the 405B config's rope_scaling is
// llama3, so rope_freqs.weight [64]: the log's 1138 tensors are 126 x 9 + 4). The Instruct model has the same shapes
// (its eos <|eot_id|>).
Result<File> llama31_405b(FileType ft) {
  return llama({"Meta Llama 3.1 405B Instruct",
                {126, 16384, 53248, 128, 8, 128, 128256},
                131072,
                500000.0f,
                1e-5f,
                0,
                0,
                true,
                true,
                /*tied=*/false,
                /*head_dim_keys=*/true},
               ft);
}

// mistralai/Mixtral-8x22B-Instruct-v0.1 config.json (as Lightning-AI/litgpt litgpt/config.py reads it, citing that
// config.json: padded_vocab_size 32768, block_size 65536, n_layer 56, n_head 48, n_embd 6144, n_query_groups 8,
// intermediate_size 16384, rope_base 1000000, norm_eps 1e-05, n_expert 8, n_expert_per_token 2): Mixtral 8x7B's layer,
// 56 of them, 48 heads of 128 on 6144, the v3 SentencePiece vocabulary of 32768 tokens; no attention.key_length (as
// for Mixtral 8x7B, whose config.json has no head_dim).
Result<File> mixtral_8x22b(FileType ft) {
  return llama({"Mixtral 8x22B Instruct v0.1", {56, 6144, 16384, 48, 8, 128, 32768}, 65536, 1000000.0f, 1e-5f, 8, 2},
               ft);
}

// ---- the catalogue ----

// The lower-case llama.cpp name of each file type a fixture can be made in (llama-quantize's names; "mxfp4" for
// gpt-oss's MXFP4_MOE, as its published files are named). Q2_K_S is left out: llama-quantize refuses it without an
// importance matrix (tools/quantize/quantize.cpp: "Please do not use IQ1_S, ... or Q2_K_S quantization without an
// importance matrix"), and the fixtures are quantized without one.
struct FileTypeName {
  const char* name;
  FileType type;
};

constexpr FileTypeName kFileTypeNames[] = {
    {"q4_0", FileType::kQ4_0},     {"q4_1", FileType::kQ4_1},     {"q8_0", FileType::kQ8_0},
    {"q5_0", FileType::kQ5_0},     {"q5_1", FileType::kQ5_1},     {"q2_k", FileType::kQ2_K},
    {"q3_k_s", FileType::kQ3_K_S}, {"q3_k_m", FileType::kQ3_K_M}, {"q3_k_l", FileType::kQ3_K_L},
    {"q4_k_s", FileType::kQ4_K_S}, {"q4_k_m", FileType::kQ4_K_M}, {"q5_k_s", FileType::kQ5_K_S},
    {"q5_k_m", FileType::kQ5_K_M}, {"q6_k", FileType::kQ6_K},     {"iq4_nl", FileType::kIQ4_NL},
    {"iq4_xs", FileType::kIQ4_XS},
};
constexpr FileTypeName kMxfp4{"mxfp4", FileType::kMXFP4_MOE};

// A base model: its name, its builder, and the file type of its published default (fixture_names()). gpt-oss is
// published in MXFP4_MOE only, and llama-quantize's other types are not modelled for it: its catalogue is that one.
struct Base {
  const char* name;
  Result<File> (*make)(FileType);
  FileType published;
};

constexpr Base kBases[] = {
    {"llama-3.1-8b", llama31_8b, FileType::kQ4_K_M},
    {"llama-3.1-70b", llama31_70b, FileType::kQ4_K_M},
    {"mistral-7b", mistral_7b, FileType::kQ4_K_M},
    {"mixtral-8x7b", mixtral_8x7b, FileType::kQ4_K_M},
    {"qwen2.5-7b", qwen25_7b, FileType::kQ4_K_M},
    {"qwen3-8b", qwen3_8b, FileType::kQ4_K_M},
    {"qwen3-30b-a3b", qwen3_30b_a3b, FileType::kQ4_K_M},
    {"gemma-3-12b", gemma3_12b, FileType::kQ4_K_M},
    {"gpt-oss-20b", gpt_oss_20b, FileType::kMXFP4_MOE},
    {"phi-3-mini", phi3_mini, FileType::kQ4_K_M},
    // issue 50, item 4
    {"llama-3.2-1b", llama32_1b, FileType::kQ4_K_M},
    {"llama-3.2-3b", llama32_3b, FileType::kQ4_K_M},
    {"llama-3.3-70b", llama33_70b, FileType::kQ4_K_M},
    {"qwen2.5-0.5b", qwen25_05b, FileType::kQ4_K_M},
    {"qwen2.5-1.5b", qwen25_15b, FileType::kQ4_K_M},
    {"qwen2.5-3b", qwen25_3b, FileType::kQ4_K_M},
    {"qwen2.5-14b", qwen25_14b, FileType::kQ4_K_M},
    {"qwen2.5-32b", qwen25_32b, FileType::kQ4_K_M},
    {"qwen2.5-72b", qwen25_72b, FileType::kQ4_K_M},
    {"qwen2.5-coder-32b", qwen25_coder_32b, FileType::kQ4_K_M},
    {"qwen3-0.6b", qwen3_06b, FileType::kQ4_K_M},
    {"qwen3-14b", qwen3_14b, FileType::kQ4_K_M},
    {"qwen3-32b", qwen3_32b, FileType::kQ4_K_M},
    {"qwen3-235b-a22b", qwen3_235b_a22b, FileType::kQ4_K_M},
    {"gemma-3-1b", gemma3_1b, FileType::kQ4_K_M},
    {"gpt-oss-120b", gpt_oss_120b, FileType::kMXFP4_MOE},
    // more published models: llama heads of their own size, not n_embd / n_head (Mistral Nemo, Small 3), LongRoPE's
    // attention factor (Phi-3.5), and sizes the catalogue lacked
    {"mistral-nemo-12b", mistral_nemo_12b, FileType::kQ4_K_M},
    {"mistral-small-24b", mistral_small_24b, FileType::kQ4_K_M},
    {"phi-3.5-mini", phi35_mini, FileType::kQ4_K_M},
    {"phi-4", phi4, FileType::kQ4_K_M},
    {"qwen3-1.7b", qwen3_17b, FileType::kQ4_K_M},
    {"qwen3-4b", qwen3_4b, FileType::kQ4_K_M},
    {"gemma-3-4b", gemma3_4b, FileType::kQ4_K_M},
    {"gemma-3-27b", gemma3_27b, FileType::kQ4_K_M},
    {"llama-3.1-405b", llama31_405b, FileType::kQ4_K_M},
    {"mixtral-8x22b", mixtral_8x22b, FileType::kQ4_K_M},
};

bool mxfp4_only(const Base& b) { return b.published == FileType::kMXFP4_MOE; }

const char* ftype_name(FileType t) {
  if (t == kMxfp4.type) return kMxfp4.name;
  for (const FileTypeName& f : kFileTypeNames) {
    if (f.type == t) return f.name;
  }
  return "?";
}

// The base and file type of a catalogue name ("qwen3-32b-q4_k_s"), or false.
bool parse_name(const std::string& name, const Base** base, FileType* ft) {
  for (const Base& b : kBases) {
    const std::string prefix = std::string(b.name) + "-";
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string rest = name.substr(prefix.size());
    if (mxfp4_only(b)) {
      if (rest != kMxfp4.name) continue;
      *base = &b;
      *ft = kMxfp4.type;
      return true;
    }
    for (const FileTypeName& f : kFileTypeNames) {
      if (rest == f.name) {
        *base = &b;
        *ft = f.type;
        return true;
      }
    }
  }
  return false;
}

}  // namespace

std::vector<std::string> fixture_names() {
  std::vector<std::string> names;
  for (const Base& b : kBases) names.push_back(std::string(b.name) + "-" + ftype_name(b.published));
  return names;
}

std::vector<std::string> base_names() {
  std::vector<std::string> names;
  for (const Base& b : kBases) names.emplace_back(b.name);
  return names;
}

std::vector<std::string> catalogue_file_types() {
  std::vector<std::string> names;
  for (const FileTypeName& f : kFileTypeNames) names.emplace_back(f.name);
  return names;
}

std::vector<std::string> catalogue_names() {
  std::vector<std::string> names;
  for (const Base& b : kBases) {
    if (mxfp4_only(b)) {
      names.push_back(std::string(b.name) + "-" + kMxfp4.name);
      continue;
    }
    for (const FileTypeName& f : kFileTypeNames) names.push_back(std::string(b.name) + "-" + f.name);
  }
  return names;
}

std::string catalogue_help() {
  std::string bases, types;
  for (const Base& b : kBases) {
    if (!mxfp4_only(b)) bases += std::string(bases.empty() ? "" : ", ") + b.name;
  }
  for (const FileTypeName& f : kFileTypeNames) types += std::string(types.empty() ? "" : ", ") + f.name;
  std::string mx;
  for (const Base& b : kBases) {
    if (mxfp4_only(b)) mx += std::string(mx.empty() ? "" : ", ") + b.name;
  }
  return "BASE-TYPE with BASE one of " + bases + " and TYPE one of " + types + "; or " + mx + " with TYPE mxfp4";
}

Result<File> make_fixture(const std::string& name) {
  const Base* base = nullptr;
  FileType ft{};
  if (parse_name(name, &base, &ft)) return base->make(ft);
  return TS_ERROR(StatusCode::kNotFound, "no GGUF fixture named '%s' (%s)", name.c_str(), catalogue_help().c_str());
}

Result<File> make_fixture_without_vocab(const std::string& name) {
  struct Flag {
    Flag() { t_without_vocab = true; }
    ~Flag() { t_without_vocab = false; }
    Flag(const Flag&) = delete;
    Flag& operator=(const Flag&) = delete;
  } flag;
  return make_fixture(name);
}

bool is_fixture_name(const std::string& name) {
  const Base* base = nullptr;
  FileType ft{};
  return parse_name(name, &base, &ft);
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
