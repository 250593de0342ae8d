// The predictions of `tessera compare-log` (docs/compare-log.md, issue 31): from a llama.cpp / ollama log read by
// parse_llama_log, the model (a GGUF file given with -m, or the printed metadata), the topology (the printed device
// list) and the options (the printed context parameters, the offload lines and the command line) are rebuilt, the
// session is planned, and llama_memory_breakdown (tessera/llama/llama_memory.h, the one place that computes
// llama.cpp's buffers) gives every figure the log printed: the model, KV, output and compute buffers per device,
// graph nodes and splits, and the size of a failed allocation. A figure that cannot be predicted says which log line
// is missing.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessera/llama/llama_log.h"
#include "tessera/registry.h"
#include "tessera/status.h"

namespace tessera::llama {

struct LogPredictOptions {
  std::string model_file;  // -m FILE.gguf: the model's tensors from the file (else the printed metadata)
  // Without -m and without the printed metadata: the published model (tessera/models/fixtures.h) the log's figures
  // and names point to (model_candidates), predicted with each of the best few, the one that agrees best kept.
  bool identify = true;
  const Registry* real_devices = nullptr;  // the real CPU that the simulated topology's CPU wraps (as for sessions)
  int64_t n_seq_max = 0;  // --parallel N: the sequences, when the log prints neither n_seq_max nor n_ctx_per_seq
  int llama_build = 0;    // --llama-build N: the build (its graph), when the log prints none
};

// One figure the log printed, and Tessera's prediction of it.
struct LogFigure {
  // "model", "KV", "RS", "compute", "output", "input" (a buffer), "graph nodes", "graph splits", "failed model" or
  // "failed compute" (a failed allocation: stage model or compute), "breakdown model", "breakdown context" or
  // "breakdown compute" (a row of llama.cpp's memory breakdown table: whole MiB).
  std::string kind;
  std::string device;  // as printed ("CUDA0", "CUDA_Host", "ROCm0", "CPU", a breakdown row's "Host"); "" for nodes and
                       // splits
  double printed = 0;  // MiB, or a count (nodes, splits)
  int line = 0;        // the printed line
  std::optional<double> predicted;
  std::string missing;  // when not predicted: why (the line the log lacks, or what Tessera does not model)
  bool is_count() const { return kind == "graph nodes" || kind == "graph splits"; }
  double diff() const { return predicted ? *predicted - printed : 0; }
  // The difference in % of the printed figure (0 when both are 0; 100 when only the printed one is 0).
  double percent() const;
};

struct LogPrediction {
  std::string model;               // where the model came from: "FILE.gguf (-m)", "the printed metadata", or ""
  std::string unavailable;         // "" or why no figure of the model could be predicted (the lines missing)
  std::vector<std::string> notes;  // what was assumed or approximated, one sentence each
  std::vector<LogFigure> figures;  // one per printed figure, in log order
  LlamaLogFigures predicted;       // Tessera's buffers, nodes and splits, named as the log names them
};

// The published models (the fixtures' catalogue) a log may have been made with, best first, each with what points to
// it: the model file's name on the printed command line or loader line ("Qwen3-30B-A3B-Q4_K_M.gguf"), the printed file
// type, the layer count ("offloaded 49/49 layers": 48), and the printed model buffers' sum against the file's tensor
// bytes. A printed layer count or file type rules out the others; empty when nothing points anywhere.
struct ModelCandidate {
  std::string name;                   // a fixture name, "qwen3-30b-a3b-q4_k_m"
  std::vector<std::string> evidence;  // "the file name Qwen3-30B-A3B-Q4_K_M.gguf", "48 layers", ...
};
std::vector<ModelCandidate> model_candidates(const LlamaLog& log, size_t max = 3);

// Predicts the log's figures. Errors (input errors): the -m file cannot be read, is not a model Tessera builds, or
// its options cannot be applied. A log that lacks what a prediction needs is no error: its figures say what is
// missing.
Result<LogPrediction> predict_log(const LlamaLog& log, const LogPredictOptions& options = {});

// Tolerances of the comparison (exit 1 when a predicted figure is off by more), in % of the printed figure:
// the targets by default.
struct LogTolerance {
  double memory_pct = 0.5;    // model, KV, RS, output buffers and a failed model allocation
  double compute_pct = 10.0;  // compute buffers and a failed compute allocation
  double nodes_pct = 2.0;     // graph nodes
  double splits_pct = 0.0;    // graph splits (equal)
};
double tolerance_of(const LogFigure& f, const LogTolerance& t);
// Whether a predicted figure is within its tolerance (a figure not predicted is neither within nor off).
bool within_tolerance(const LogFigure& f, const LogTolerance& t);

}  // namespace tessera::llama
