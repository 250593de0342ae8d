// Header-only GGUF fixtures of real models (docs/gguf.md, "Fixtures"): the metadata and the tensor table of a
// published quantized GGUF file -- tensor names, shapes, types and order as llama.cpp writes them -- without the
// weights. make_fixture gives a gguf::File laid out as llama-quantize lays out its output (every tensor at the next
// multiple of 32 bytes); the caller writes it with gguf::write_file(path, file), which writes the header and tensor
// table only, so the file reads back as header-only (gguf::DataState::kHeaderOnly).
//
// What is exact and what is synthetic: the tensor table (names, shapes, types, order), the architecture's
// hyperparameters and the vocabulary size are the real file's. The token strings are synthetic ("<tok12345>"), the
// token types all 1 (normal), the SentencePiece scores all 0, and the BPE merges, chat templates and the
// general.* provenance keys (license, tags, base models) are left out: Tessera's placement questions need none of them,
// and the vocabulary arrays are kept at their real length only so that readers meet arrays as large as a real file's.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/llama.h"
#include "tessera/status.h"

namespace tessera::models::fixtures {

// The catalogue: a fixture's name is BASE-TYPE, a base model ("qwen3-32b") in a file type ("q4_k_s": the lower-case
// llama.cpp name of a FileType below, Q2_K_S and MXFP4_MOE aside; gpt-oss's bases come in "mxfp4" only, as published).
// The bases, in a fixed order (docs/gguf.md, "Fixtures", cites each one's source): "llama-3.1-8b", "llama-3.1-70b",
// "mistral-7b" (v0.3), "mixtral-8x7b", "qwen2.5-7b", "qwen3-8b", "qwen3-30b-a3b", "gemma-3-12b", "gpt-oss-20b",
// "phi-3-mini", then "llama-3.2-1b", "llama-3.2-3b", "llama-3.3-70b", "qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b",
// "qwen2.5-14b", "qwen2.5-32b", "qwen2.5-72b", "qwen2.5-coder-32b", "qwen3-0.6b", "qwen3-14b", "qwen3-32b",
// "qwen3-235b-a22b", "gemma-3-1b", "gpt-oss-120b", then "mistral-nemo-12b", "mistral-small-24b", "phi-3.5-mini",
// "phi-4", "qwen3-1.7b", "qwen3-4b", "gemma-3-4b", "gemma-3-27b", "llama-3.1-405b", "mixtral-8x22b".
std::vector<std::string> base_names();
// The file types of the catalogue's names, "q4_0" .. "iq4_xs" (gpt-oss: "mxfp4").
std::vector<std::string> catalogue_file_types();
// Every base in its published default type, one name per base in the order of base_names(): "llama-3.1-8b-q4_k_m",
// ..., "gpt-oss-20b-mxfp4", ... (what tessera_make_fixtures writes without names).
std::vector<std::string> fixture_names();
// Every base in every file type: "llama-3.1-8b-q4_0", "llama-3.1-8b-q4_1", ..., "gpt-oss-120b-mxfp4".
std::vector<std::string> catalogue_names();
// How a catalogue name is made, for messages: "BASE-TYPE with BASE one of llama-3.1-8b, ... and TYPE one of q4_0,
// ...; or gpt-oss-20b, gpt-oss-120b with TYPE mxfp4".
std::string catalogue_help();

// The fixture's header: metadata and tensor table, laid out (tensor offsets and sizes set, and data_bytes: the bytes
// of the real file's data section). Any catalogue name; kNotFound for another (the message says how names are made:
// the bases and the file types, catalogue_help).
Result<gguf::File> make_fixture(const std::string& name);
// make_fixture less the vocabulary arrays (tokenizer.ggml.tokens, scores and token_type; the token ids and the
// tokenizer's name stay), for callers that need only the tensor table and the architecture's keys: the arrays are
// most of a fixture's building time (~150k strings for a Qwen or Gemma vocabulary), and they hold no tensor. The
// tensors, their offsets and data_bytes are make_fixture's.
Result<gguf::File> make_fixture_without_vocab(const std::string& name);

// A model named by a file or by the fixtures: an existing path is read (gguf::read_model, its errors); otherwise a
// fixture's name ("qwen3-30b-a3b-q4_k_m") gives that fixture's header, the published file's tensor table without its
// weights, so that `tessera plan -m qwen3-30b-a3b-q4_k_m` answers without the download. kNotFound when it is neither
// (the caller says how names are made: catalogue_help).
Result<gguf::Model> read_model_or_fixture(const std::string& path_or_name);
// Whether `name` is a catalogue name (catalogue_names()).
bool is_fixture_name(const std::string& name);

// The tiny complete fixtures, small enough to compute: "tiny-llama" and "tiny-mixtral" (the tiny and tiny-moe presets,
// llama architecture) with a quantized file's mix of types: q8_0 token_embd and output, f16 attn_v, q4_0 for the
// other matrices, f32 norms and router. tessera_make_fixtures writes each with its weights (fill_random, seed 1) as a
// complete file (complete_gguf, from_gguf.h): a memory-backed run of it computes with the file's weights.
std::vector<std::string> complete_fixture_names();
// The config of a complete fixture; kNotFound for an unknown name (the message lists the known ones).
Result<LlamaConfig> complete_fixture_config(const std::string& name);

// ---- llama.cpp's choice of tensor types (exposed for the tests and for other fixtures) ----

// llama_ftype (llama.cpp include/llama.h): the file types whose rules quantized_types implements, as written to
// general.file_type.
enum class FileType : uint32_t {
  kQ4_0 = 2,        // LLAMA_FTYPE_MOSTLY_Q4_0
  kQ4_1 = 3,        // LLAMA_FTYPE_MOSTLY_Q4_1
  kQ8_0 = 7,        // LLAMA_FTYPE_MOSTLY_Q8_0
  kQ5_0 = 8,        // LLAMA_FTYPE_MOSTLY_Q5_0
  kQ5_1 = 9,        // LLAMA_FTYPE_MOSTLY_Q5_1
  kQ2_K = 10,       // LLAMA_FTYPE_MOSTLY_Q2_K
  kQ3_K_S = 11,     // LLAMA_FTYPE_MOSTLY_Q3_K_S
  kQ3_K_M = 12,     // LLAMA_FTYPE_MOSTLY_Q3_K_M
  kQ3_K_L = 13,     // LLAMA_FTYPE_MOSTLY_Q3_K_L
  kQ4_K_S = 14,     // LLAMA_FTYPE_MOSTLY_Q4_K_S
  kQ4_K_M = 15,     // LLAMA_FTYPE_MOSTLY_Q4_K_M
  kQ5_K_S = 16,     // LLAMA_FTYPE_MOSTLY_Q5_K_S
  kQ5_K_M = 17,     // LLAMA_FTYPE_MOSTLY_Q5_K_M
  kQ6_K = 18,       // LLAMA_FTYPE_MOSTLY_Q6_K
  kQ2_K_S = 21,     // LLAMA_FTYPE_MOSTLY_Q2_K_S
  kIQ4_NL = 25,     // LLAMA_FTYPE_MOSTLY_IQ4_NL
  kIQ4_XS = 30,     // LLAMA_FTYPE_MOSTLY_IQ4_XS
  kMXFP4_MOE = 38,  // LLAMA_FTYPE_MOSTLY_MXFP4_MOE
};

// The file type of llama.cpp's printed name (llama_model_ftype_name: "Q4_K - Medium", "Q8_0", "IQ4_XS - 4.25 bpw",
// "MXFP4 MoE", ...; case-insensitive, a " (guessed)" suffix allowed), or false for a name whose rules are not
// implemented (the IQ1/IQ2/IQ3 types, TQ, F16/BF16/F32: a log of one of those prints one quantized type or none).
bool file_type_from_name(const std::string& printed, FileType* out);
// Every file type above (those file_type_from_name knows by name).
std::vector<FileType> file_types_with_rules();

// The hyperparameters llama-quantize's type choice depends on.
struct QuantModel {
  std::string arch;  // general.architecture: "llama", "qwen3moe", "gpt-oss", ...
  int64_t n_layer = 0;
  int64_t n_head = 0;
  int64_t n_head_kv = 0;
  int64_t n_expert = 0;      // 0 for a dense model
  bool has_imatrix = false;  // quantized with an importance matrix (changes ffn_down of Q4_0, Q5_0, IQ4_NL, IQ4_XS)
};

// A tensor as convert_hf_to_gguf.py writes it, before quantization.
struct SourceTensor {
  std::string name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length
  gguf::TensorType type = gguf::TensorType::kF16;
};

// llama.cpp's tensor order (llama_model_loader::weight_name_comparer, src/llama-model-loader.h), which is the order
// llama-quantize writes and quantizes in: tensors outside the blocks first, then block by block ("blk.N." by the
// number N, so blk.10 after blk.9), by name within each group.
bool weight_name_less(std::string_view a, std::string_view b);
// The block number weight_name_less orders by: the N of "blk.N.", -1 outside the blocks.
int weight_block(std::string_view name);

// The types llama-quantize gives `tensors`, taken in that order (the order matters: attn_v's "more bits" layers are
// counted along it; sort by weight_name_less first to match llama-quantize). One type per tensor. Implements the
// rules of llama_tensor_get_type (llama.cpp src/llama-quant.cpp) for the file types above, without user overrides; see
// quant_types.cpp for each rule and its source. Errors (kInvalidArgument, naming
// the tensor): a row length no type fits, where llama-quantize throws too (a q8_0 row that is not a whole number of
// 32-value blocks), and a shape that is not 1 to 4 positive dimensions.
Result<std::vector<gguf::TensorType>> quantized_types(const QuantModel& model, FileType ftype,
                                                      const std::vector<SourceTensor>& tensors);

}  // namespace tessera::models::fixtures
