// The memory llama.cpp allocates for a planned session, buffer by buffer, as llama.cpp names and prints them
// (docs/scenarios.md, "Memory breakdown"): the model buffers (src/llama-model.cpp, load_tensors), the KV buffers
// (src/llama-kv-cache.cpp; sliding-window caches sized by src/llama-kv-cache-iswa.cpp), the output buffer and the
// compute buffers (src/llama-context.cpp), graph nodes and graph splits, and whether llama.cpp turns pipeline
// parallelism on. One place computes it: `tessera plan` and `run` print it (a table, or llama.cpp's own log lines with
// --llama-log) and --json gives it as records; a reader of llama.cpp logs can compare against the same records.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "tessera/llama/llama_run.h"
#include "tessera/harness/session/session.h"

namespace tessera::llama {

// What llama.cpp's buffers depend on beyond the model, the placement and the graph: -b and -ub (llama.cpp's defaults
// 2048 and 512; the graph's batch is the model's n_tokens, which --tokens, -b or -ub set) and --swa-full.
struct LlamaContextParams {
  int64_t n_batch = 2048;
  int64_t n_ubatch = 512;
  bool swa_full = false;
  int64_t n_seq_max = 1;    // -np: the output buffer holds one row of logits per sequence
  bool kv_unified = false;  // -kvu: one cache for every sequence (its sliding-window caches keep every window)
  bool embeddings = false;  // the context also returns embeddings (ollama's runner does): n_embd more per row
  // Builds before llama.cpp PR #6122 (build 2540, 2024-03-26) reserved an output row for every token of a batch
  // (n_batch rows), not one per sequence.
  bool output_per_batch_token = false;
  // --no-mmap: weights in the CPU's memory are read into buffers instead of mapped: the first GPU's host buffer
  // ("CUDA_Host", pinned) when there is a GPU, the CPU's ("CPU") for those an override sends to the CPU.
  bool use_mmap = true;
  // n_outputs_max (llama_context_params, from build 9460, PR #23861): the output rows llama.cpp reserves its prompt
  // graph for, min(n_ubatch, n_outputs_max); 0 means n_batch (every token an output, as before 9460). llama-server
  // sets it to n_parallel x (1 + the speculative draft's tokens) and prints "n_outputs_max = N"; llama-cli and the
  // others leave it 0. Fewer output rows shrink the last layer's FFN and the logits [n_vocab, rows] in the compute
  // buffers (Qwen3-8B, -ub 2048: 2048 rows of 151936 logits are 1187 MiB).
  int64_t n_outputs_max = 0;
  // The GPUs are Apple Metal devices (ggml-metal; compare-log of a log naming MTL0): no host buffer type (the output
  // buffer, the CPU backend's compute buffer and --no-mmap weights in the CPU's memory are "CPU", not the GPU's pinned
  // "CUDA_Host"), a GPU's weights mapped from the file with mmap (the device takes buffer_from_host_ptr: "MTL0_Mapped",
  // the span of the file from its first to the end of its last weight, as CPU_Mapped), no CUDA row padding, and
  // weights in the CPU's extra buffer type (PlacementPolicy::cpu_repack) in their own buffer, "CPU_REPACK".
  bool metal = false;
};
// From the run options as given (unset: llama.cpp's defaults).
LlamaContextParams llama_context_params(const LlamaRunShape& shape);
// llama.cpp's n_ubatch after its clamps (src/llama-context.cpp): n_batch = min(n_ctx, n_batch) for a causal model,
// n_ubatch = min(n_batch, n_ubatch).
int64_t llama_ubatch(int64_t n_ctx, const LlamaContextParams& p);
// The cells of llama.cpp's cache of layer il (src/llama-kv-cache-iswa.cpp): n_ctx for a global layer or with
// --swa-full; for a sliding-window layer GGML_PAD(min(n_ctx, n_swa * (kv_unified ? n_seq_max : 1) + n_ubatch), 256).
int64_t llama_kv_cells(const models::LlamaConfig& m, int il, const LlamaContextParams& p);

// Plans c's model as llama.cpp plans it: the graph of llama.cpp build `build` (models/tessera/models/
// llama_cpp_graph.h), ggml-alloc's rules (online packing, graph inputs freed after their last use) and an iSWA model's
// own smaller sliding-window cache (llama_kv_cells; unless p.swa_full), and pipeline parallelism whenever llama.cpp
// enables it for the placement (SessionConfig::parallel_rule: llama_pipeline_parallel's decision, n_copies
// kLlamaMaxCopies; in fit's dry runs too, as llama.cpp's fit sizes them). compare-log and the tool's GGUF plans and
// fits use it.
void use_llama_cpp_rules(harness::SessionConfig& c, int build, const LlamaContextParams& p);

// One buffer llama.cpp allocates.
struct LlamaBuffer {
  enum class Kind { kModel, kKv, kOutput, kCompute };
  Kind kind = Kind::kModel;
  // llama.cpp's name of the buffer (type): "CUDA0", "CUDA1", ... (the n-th GPU of the topology), "CUDA_Host" (pinned
  // host memory of the first GPU), "CPU_Mapped" (the model file mapped: weights on the CPU), "CPU".
  std::string name;
  std::string device;  // the topology device whose memory holds it (the CPU device for host memory)
  size_t bytes = 0;
  // KV only: "" for a model without sliding-window layers, else "non-SWA" or "SWA" (llama_kv_cache_iswa's two caches).
  std::string cache;
  int64_t cells = 0;  // KV only: the cache's cells (n_ctx, or the sliding-window size)
  int layers = 0;     // KV only: the layers of that cache held in this buffer
};

// Whether llama.cpp enables pipeline parallelism (src/llama-context.cpp, llama_context's constructor): more than one
// GPU, every layer offloaded (the output layer too: n_gpu_layers > n_layer), split mode layer, the KV cache offloaded,
// no tensor overrides (-ot, -cmoe, -ncmoe), and every GPU with async compute and events. Then the scheduler keeps
// n_copies (GGML_SCHED_MAX_COPIES, 4) copies of every split input in the compute buffers.
struct PipelineDecision {
  bool on = false;
  int n_copies = 1;
  std::string reason;  // why not ("one GPU", "layers on the CPU", ...) or "" when on
};
PipelineDecision llama_pipeline_parallel(harness::Session& s);
PipelineDecision llama_pipeline_parallel(const harness::SessionConfig& c, const harness::Placement& p);

struct MemoryBreakdown {
  std::vector<LlamaBuffer> buffers;  // in llama.cpp's log order: model, KV, output, compute
  int64_t n_ctx = 0, n_ubatch = 0;
  std::string kv_type;  // the K and V caches' type ("f16", "q8_0", ...; "q8_0/f16" when they differ)
  Type k_type = Type::kF16, v_type = Type::kF16;  // -ctk, -ctv
  int64_t n_seq_max = 1;  // -np: the sequences (all in one KV stream: Tessera plans -np above 1 with -kvu only)
  size_t graph_nodes = 0;
  int graph_splits = 0;
  PipelineDecision pipeline;  // llama.cpp's rule
  // The weights in the mapped file, as a sum of their sizes (each padded to 32 bytes) rather than the file's span:
  // what llama.cpp's fit measures for the host, whose model is loaded without memory (no_alloc: the CPU context's
  // ggml_backend_alloc_ctx_tensors_from_buft_size, src/llama-model.cpp memory_breakdown, PR #16653).
  size_t mapped_weights_sum = 0;
  bool planned_parallel = false;  // whether this plan has pipeline parallelism (--parallel)

  // Per buffer name, in order of first appearance: the model, KV, compute and output bytes and their sum.
  struct Row {
    std::string name, device;
    size_t model = 0, kv = 0, compute = 0, output = 0;
    size_t total() const { return model + kv + compute + output; }
  };
  std::vector<Row> rows() const;
};

// The output buffer (src/llama-context.cpp, output_reserve(n_seq_max) in llama_context's constructor): for each of
// n_seq_max outputs (every batch token's before build 2540: output_per_batch_token), n_vocab floats of logits and,
// when the context returns embeddings, n_embd more.
size_t llama_output_bytes(const models::LlamaConfig& m, const LlamaContextParams& params);

// The breakdown of a planned model session. Errors: a session of a serialized graph (no llama.cpp model), one not
// planned yet.
Result<MemoryBreakdown> llama_memory_breakdown(harness::Session& s, const LlamaContextParams& params = {});

// The table `tessera plan` prints: one row per buffer, then graph nodes, graph splits and pipeline parallelism. The
// table keeps within 80 columns; `wide`: the fixed columns of --wide (tessera/harness/common/text_table.h).
std::string format_memory_breakdown(const MemoryBreakdown& b, bool wide = false);
// The same as llama.cpp's log lines (load_tensors: ... model buffer size = ..., llama_kv_cache: ..., llama_context:
// ... output buffer size / compute buffer size, graph nodes, graph splits), in llama.cpp's formats.
std::string format_llama_log(const MemoryBreakdown& b);

}  // namespace tessera::llama
