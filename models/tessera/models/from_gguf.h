// Models from GGUF files (docs/gguf.md, 'Architectures'): the hyperparameters come from the file's `<arch>.*` keys,
// and every weight's shape and type from its tensor table (a Q4_K_M file mixes q4_k, q6_k and f32; nothing is
// assumed). The graph is llama.cpp's graph of one decoder step for that architecture, built by the architecture's
// builder (llama.h for the llama family), and then checked against the file: every weight of the graph is a tensor
// of the file with the same shape and type, and every tensor of the file is used.
//
// Architectures: llama (with Mistral and Mixtral, which GGUF files also name "llama"), qwen2 (Qwen2, Qwen2.5), qwen3
// and qwen3moe (Qwen3, Qwen3 MoE), gemma3 (Gemma 3's text model), all built by build_llama with the architecture's
// switches (LlamaConfig::arch and the fields after it). Others are refused with the list of those supported.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/llama.h"
#include "tessera/status.h"

namespace tessera::models {

// The run's shape: what a llama.cpp command line sets, not the file (-c, -b/-ub, the cache type, -fa).
struct GgufRunShape {
  int64_t n_ctx = 0;  // KV cache slots (-c); 0: the model's context_length, at most 4096 (see full_context)
  // n_ctx 0 is the model's whole context_length, padded to 256 (llama.cpp's -c 0, its default in its newest builds;
  // `tessera plan` and fit), not at most 4096 (scenario files and the draft model keep that).
  bool full_context = false;
  int64_t n_tokens = 1;                       // tokens in the batch (1: a decode step; more: a prompt-processing step)
  int64_t n_kv = 0;                           // cache slots attended to; 0 = n_ctx
  int64_t n_outputs = 0;                      // tokens that produce logits; 0 = n_tokens
  Type kv_type = Type::kF16;                  // the K cache's (and the V cache's unless v_type)
  std::optional<Type> v_type = std::nullopt;  // the V cache's, when it differs
  bool flash_attn = true;
};

// The architectures build_from_gguf knows ("llama", "qwen2", "qwen3", "qwen3moe", "gemma3", "phi3", "gpt-oss").
std::vector<std::string> gguf_architectures();

// The config of a GGUF model: hyperparameters from the <arch>.* keys, vocabulary and weight types from the tensor
// table, the graph's switches from the architecture. Errors name the file and the key or tensor: another
// architecture, a missing or inconsistent key (a head count that does not divide the embedding length, per-layer head
// counts that differ, a qwen3moe file without experts), a type Tessera does not know.
Result<LlamaConfig> llama_config_from_gguf(const gguf::Model& model, const GgufRunShape& run);

// Builds the model's graph (as build_llama) and checks it against the file (check_against_file). When every shard of
// the model is complete (gguf::DataState::kComplete: each tensor's bytes are in its file) the config keeps the model
// (LlamaConfig::weights_file), so a memory-backed run computes with the file's weights; a header-only file's
// weights are drawn at random (fill_random).
Result<LlamaGraph> build_from_gguf(const gguf::Model& model, const GgufRunShape& run);

// Every weight of the graph is a tensor of the file with the same shape and type, and every tensor of the file is a
// weight of the graph. Errors name the tensor: one the file lacks, one the architecture does not use, a shape or
// type that differs.
Status check_against_file(const LlamaGraph& graph, const gguf::Model& model);

// Reads every weight of `graph` (allocated) from graph.config.weights_file: the bytes of the file's tensor of the same
// name, which check_against_file found of the same shape and type. Errors name the file and the tensor: no
// weights_file, a tensor the file lacks or of another size, an unallocated weight, a read error (a file changed or
// truncated since it was read).
Status read_file_weights(LlamaGraph& graph);

// A model with allocated, filled weights as a complete GGUF file of its architecture (config.arch): the `<arch>.*`
// keys of its config (block count, lengths, head counts and head size, expert counts and length, rope base, norm
// epsilon, the context length n_ctx, gemma3's sliding window and linear rope scaling, phi3's original context length)
// and every weight in creation order with its data. Errors: an unallocated weight; what gguf::serialize refuses (more
// than 4 GiB). For tests and the tiny complete fixtures.
Result<std::vector<uint8_t>> complete_gguf(const LlamaGraph& graph);

}  // namespace tessera::models
