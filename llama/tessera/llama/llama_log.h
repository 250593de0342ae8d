// A llama.cpp or ollama log as users paste it into bug reports, read into a structured record (docs/compare-log.md):
// the model metadata print, the context parameters, the device list, the buffer-size lines, graph nodes and splits,
// failed allocations, and every non-empty line the reader could not use (never dropped silently). The formats of
// 2024 (`llm_load_tensors:`, `llama_new_context_with_model:`, `llama_kv_cache_init:`) and of 2025-2026
// (`load_tensors:`, `llama_context:`, `llama_kv_cache[_unified|_iswa]:`) are read, with ollama's prefixes (journal,
// docker compose), llama.cpp's own timestamp prefix, ANSI colour codes and CRLF line ends.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "tessera/status.h"

namespace tessera::llama {

// An integer the log printed, with the (1-based) line it came from.
struct LogInt {
  int64_t value = 0;
  int line = 0;
};

// One "<device> <kind> buffer size = X MiB" line. kind: "model" (load_tensors; the 2024 format prints no kind there),
// "KV", "RS", "compute", "output", "input". device as printed: "CUDA0", "CPU_Mapped", "CUDA_Host", "ROCm0", "CPU".
struct LlamaLogBuffer {
  std::string device;
  std::string kind;
  double mib = 0;
  int line = 0;
};

// A row of llama.cpp's memory breakdown table (llama_memory_breakdown_print at exit, common_memory_breakdown_print in
// its fit; common/fit.cpp), whole MiB as printed: a GPU "|   - CUDA0 (RTX 4090)   | 24077 =  945 + (19187 = 17904 +
// 384 +     898) +        3945 |", the host "|   - Host |  58271 = 58259 +       0 +      12 |" (every host buffer
// type), or another buffer type without a device ("HTP0-REPACK"). model: the weights; context: the KV and recurrent
// state caches (not the output buffer); compute: the compute buffers.
struct LlamaLogBreakdownRow {
  std::string device;                  // "CUDA0", "Host", "HTP0-REPACK"
  std::string description;             // "RTX 4090" ("" for the host)
  std::optional<int64_t> total, free;  // a GPU's
  int64_t self = 0, model = 0, context = 0, compute = 0;
  bool fit = false;  // printed by llama.cpp's fit for the parameters it started from (before it changed any)
  int line = 0;
};

// The figures a prediction is compared with: what the log printed, or what a model of llama.cpp predicts.
struct LlamaLogFigures {
  std::vector<LlamaLogBreakdownRow> breakdown;  // the memory breakdown table's rows, in log order
  std::vector<LlamaLogBuffer> buffers;          // in log order
  std::optional<LogInt> graph_nodes;
  std::optional<LogInt> graph_splits;  // "graph splits = N" or the 2024 "graph splits (measure): N"
};

// The model metadata: llama_model_loader's key-value lines and tensor type counts, and the print_info (2025-2026) or
// llm_load_print_meta (2024) lines, as printed; the typed fields below come from either (print_info first).
struct LlamaLogModel {
  std::string path;  // "loaded meta data with N key-value pairs and M tensors from PATH"
  std::vector<std::pair<std::string, std::string>> kv;        // "general.architecture" -> "qwen3moe"
  std::vector<std::pair<std::string, int64_t>> tensor_types;  // "q6_K" -> 660
  std::vector<std::pair<std::string, std::string>> info;      // "n_layer" -> "94", "file type" -> "Q4_K - Medium"
  std::string arch;                                           // print_info arch, or general.architecture
  std::optional<int64_t> n_layer, n_embd, n_head, n_head_kv, n_swa, n_ctx_train, n_expert, n_expert_used;
  // print_info n_vocab, else <arch>.vocab_size, else the length of tokenizer.ggml.tokens ("arr[str,151936]").
  std::optional<int64_t> n_vocab;
  std::optional<int64_t> n_tokens_array;                       // that length, as printed in the kv line's type
  std::string model_type, model_params, file_type, file_size;  // as printed: "30B.A3B", "30.53 B", "60.87 GiB (..)"
};

// One KV cache's total line: 2024 "KV self size = 5120.00 MiB, K (f16): 2560.00 MiB, V (f16): 2560.00 MiB", or
// 2025-2026 "size = 2048.00 MiB (131072 cells, 4 layers, 1/1 seqs), K (f16): ..." (an iSWA model prints two).
struct LlamaLogKvCache {
  double mib = 0;
  std::optional<int64_t> cells, layers;
  std::string type_k, type_v;
  double k_mib = 0, v_mib = 0;
  int line = 0;
};

// The context parameters: every "key = value" of the context's lines (llama_context, llama_new_context_with_model,
// llama_kv_cache_init's "kv_size = ..., type_k = 'q8_0', ..."), and the typed values read from them.
struct LlamaLogContext {
  std::vector<std::pair<std::string, std::string>> params;
  std::optional<int64_t> n_ctx, n_batch, n_ubatch, n_seq_max, kv_size;
  std::optional<int64_t> n_outputs_max;  // "n_outputs_max = 1" (build 9460 and later; llama-server sets it)
  // llama-server's "initializing slots, n_slots = 1" and "new slot n_ctx_slot = 30016" (each slot's share of n_ctx)
  std::optional<int64_t> n_slots, n_ctx_slot;
  std::string flash_attn;                      // as printed: "enabled", "auto", "0", "1" ("" when not printed)
  std::string type_k, type_v;                  // from kv_size's line or the KV cache totals
  std::optional<LogInt> n_copies;              // "pipeline parallelism enabled (n_copies=4)"
  std::optional<LogInt> offloaded_layers;      // "offloaded 30/49 layers to GPU": 30
  std::optional<int64_t> offload_total;        // ... 49
  std::optional<int64_t> repeating_offloaded;  // "offloading 30 repeating layers to GPU"
  bool output_offloaded = false;  // "offloading output layer to GPU" (2024: "offloading non-repeating layers")
  std::optional<int64_t> kv_cells_non_swa, kv_cells_swa;  // llama_kv_cache_iswa: "creating [non-]SWA KV cache"
  // "load_tensors: layer   3 assigned to device CUDA0, is_swa = 0" (printed at debug verbosity): layer -> device
  std::vector<std::pair<int64_t, std::string>> layer_devices;
  std::vector<LlamaLogKvCache> kv_caches;
  // "Tensor blk.0.ffn_up_exps.weight buffer type overriden to CPU" (2025), "tensor blk.0.ffn_up_exps.weight (123 MiB
  // q4_K) buffer type overridden to CUDA_Host" (2026): the weights an -ot sent elsewhere, tensor -> buffer type
  std::vector<std::pair<std::string, std::string>> tensor_overrides;
};

// A device: llama.cpp's "using device CUDA0 (NVIDIA GeForce RTX 3090) - 22532 MiB free", or a backend's device list
// ("  Device 0: NVIDIA GeForce RTX 3090, compute capability 8.6, VMM: yes", index set, name empty).
struct LlamaLogDevice {
  std::string name;         // "CUDA0"
  int index = -1;           // "Device 0:"
  std::string description;  // "NVIDIA GeForce RTX 3090" (and the rest of a Device line)
  std::optional<int64_t> free_mib;
  std::string bus_id;  // "0000:31:00.0" (printed since 2026)
  int line = 0;
};

// A failed allocation: "allocating 144817.04 MiB on device 0: cudaMalloc failed" and/or the allocator's
// "failed to allocate CUDA0 buffer of size 151851674624" (joined into one record when they follow each other).
// stage: "model" (alloc_tensor_range, loading the weights), "kv" (the same, followed by "failed to allocate buffer for
// kv cache"), "compute" (ggml_gallocr_reserve_n), or "" (unknown).
struct LlamaLogFailedAlloc {
  std::string device;  // "CUDA0", "ROCm0"; "" when only the device index was printed
  int device_index = -1;
  std::optional<double> mib;
  std::optional<uint64_t> bytes;
  std::string stage;
  int line = 0;  // the first of its lines
};

// A line the reader kept as text: an error message, the command line, the build.
struct LogText {
  std::string text;
  int line = 0;
};

struct LlamaLogLine {
  int line = 0;
  std::string text;  // after CRLF, ANSI codes and prefixes were removed
};

struct LlamaLog {
  std::string source;  // the file name (or what the caller called the text)
  int lines = 0;       // lines in the input
  int lines_used = 0;
  int lines_skipped = 0;  // blank lines, the fidelity files' leading "# " header and "[... cut by Tessera" markers
  std::optional<LogText> build;    // "build: 6096 (fd1234cb) ..." / "main: build = 1971 (1182cf4d)"
  std::optional<LogText> command;  // a pasted command line: "$ ./llama-cli ...", "./build/bin/llama-server ..."
  LlamaLogModel model;
  LlamaLogContext context;
  std::vector<LlamaLogDevice> devices;
  LlamaLogFigures figures;
  std::vector<LlamaLogFailedAlloc> failed_allocs;
  std::vector<LogText> errors;       // "error loading model: ...", "failed to allocate compute buffers", ...
  std::vector<LlamaLogLine> unused;  // every non-empty line not used, with its line number
  // Printed by ollama's runner (a line with its journal or docker prefix, its Go log lines "source=server.go" /
  // "source=runner.go", or a model from its store ".ollama/models/blobs"): ollama's llama.cpp returns embeddings.
  bool ollama = false;
  // A line of llama.cpp's older function names (llm_load_print_meta:, llm_load_tensors:, llama_new_context_with_model:;
  // renamed by builds 4463-4500, early 2025): without a build line, the graph of that era is assumed.
  bool old_format = false;
  int draft_line = 0;  // "... loading draft model '...'": this line and those after it are the draft's (not used)
  // llama.cpp's fit ran ("common_params_fit_impl: ..." / "llama_params_fit_impl: ...") and said it changed nothing
  // ("... no changes needed"): its memory breakdown of the starting parameters is the run's
  bool fit_ran = false, fit_unchanged = false, fit_reduced_ctx = false;
};

// Reads a log. `source` names it in errors ("FILE: line N: ..."). Errors (an unreadable input): a NUL byte (not a
// text log), and a text with no line the reader recognises. Anything else is read: an unrecognised or truncated
// line goes to `unused`.
Result<LlamaLog> parse_llama_log(std::string_view text, const std::string& source);
// The same for a file; an error also when it cannot be opened.
Result<LlamaLog> read_llama_log_file(const std::string& path);

// A line as the reader sees it: ANSI colour codes, a trailing CR, and the prefixes of ollama's journal and docker
// logs and llama.cpp's timestamps removed, then trimmed.
std::string clean_log_line(std::string_view raw);

// The predictions of these figures: tessera/llama/llama_log_predict.h.

}  // namespace tessera::llama
