// The predictions of `tessera compare-log` (tessera/llama/llama_log_predict.h; docs/compare-log.md says what each
// figure needs and what is assumed).
#include "option_names.h"
#include "tessera/models/fixtures.h"
#include "tessera/llama/llama_cmdline.h"
#include "tessera/llama/llama_log_predict.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "llama_log_model.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/llama/llama_memory.h"
#include "tessera/llama/llama_run.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/from_gguf.h"

namespace tessera::llama {

using namespace tessera::harness;

namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / 1024.0 / 1024.0; }

// The GPU backends whose device and buffer names compare-log reads: the name and a number ("CUDA0", "MTL0").
constexpr const char* kGpuBackends[] = {"CUDA", "ROCm", "Vulkan", "MTL"};

// The log's GPU backend ("CUDA", "ROCm", "Vulkan", "MTL": Apple Metal) from its device and buffer names; "CUDA" when
// none says.
std::string gpu_backend(const LlamaLog& log) {
  auto of = [](const std::string& name) -> std::string {
    for (const char* b : kGpuBackends) {
      if (name.rfind(b, 0) == 0) return b;
    }
    return "";
  };
  for (const LlamaLogDevice& d : log.devices) {
    if (!of(d.name).empty()) return of(d.name);
  }
  for (const LlamaLogBuffer& b : log.figures.buffers) {
    if (!of(b.device).empty()) return of(b.device);
  }
  for (const LlamaLogFailedAlloc& a : log.failed_allocs) {
    if (!of(a.device).empty()) return of(a.device);
  }
  return "CUDA";
}

// The GPU index of a name "CUDA3" / "ROCm0", or -1 ("CUDA_Host", "CPU").
int gpu_index(const std::string& name) {
  for (const char* b : kGpuBackends) {
    const size_t n = std::char_traits<char>::length(b);
    if (name.size() > n && name.compare(0, n, b) == 0 && std::isdigit(static_cast<unsigned char>(name[n]))) {
      return std::atoi(name.c_str() + n);
    }
  }
  return -1;
}

// The GPUs llama.cpp used: the "using device" lines (with free memory) when printed, else the backend's device list
// ("Device 0: ..."), else as many as the highest GPU index in a buffer or failed-allocation name says.
struct Gpus {
  int count = 0;
  std::vector<int64_t> free_mib;  // per GPU, when every one printed it
  std::string source;             // which lines said
};

Gpus log_gpus(const LlamaLog& log) {
  Gpus g;
  // The highest GPU index a buffer or failed allocation names (a draft model's 'using device' line may name fewer).
  int named_by_figures = 0;
  for (const LlamaLogBuffer& b : log.figures.buffers)
    named_by_figures = std::max(named_by_figures, gpu_index(b.device) + 1);
  for (const LlamaLogFailedAlloc& a : log.failed_allocs) {
    named_by_figures = std::max(named_by_figures, std::max(gpu_index(a.device), a.device_index) + 1);
  }
  std::vector<const LlamaLogDevice*> named;
  for (const LlamaLogDevice& d : log.devices) {
    if (!d.name.empty() && gpu_index(d.name) >= 0) named.push_back(&d);
  }
  if (!named.empty()) {
    g.count = static_cast<int>(named.size());
    g.source = named.front()->name.rfind("Vulkan", 0) == 0 && named.front()->index >= 0 ? "the Vulkan device list"
                                                                                        : "the 'using device' lines";
    for (const LlamaLogDevice* d : named) {
      if (!d->free_mib) {
        g.free_mib.clear();
        break;
      }
      g.free_mib.push_back(*d->free_mib);
    }
  } else {
    for (const LlamaLogDevice& d : log.devices) g.count = std::max(g.count, d.index + 1);
    if (g.count > 0) g.source = "the 'Device N:' lines";
  }
  if (named_by_figures > g.count) {
    g.count = named_by_figures;
    g.free_mib.clear();
    g.source = "the GPU names of the buffer lines";
  }
  if (g.count == 0) g.source = "no GPU named";
  return g;
}

// The simulated topology: a GPU per log GPU (llama.cpp CUDA's 128-byte alignment, ggml-cuda.cu
// ggml_backend_cuda_buffer_type_get_alignment; op offload of any op but GET_ROWS from a batch of 32 as ggml-cuda.cu's
// ggml_backend_cuda_device_offload_op counts it: ggml_offload_batch_size) and the CPU. Memory is not what is
// compared: every device gets room enough for any buffer (1 PiB), so a log of a failed allocation still gets its sizes.
// `row_rounding`: per GPU, the row split's rounding its "Device N:" line implies (row_rounding_of), 0 for the default.
// `metal`: Apple Metal GPUs instead (ggml-metal.cpp at build 8198): 32-byte buffers, no host buffer type, weights
// mapped from the file (buffer_from_host_ptr), op offload of MUL_MAT and MUL_MAT_ID from a batch of 32
// (ggml_backend_metal_device_offload_op), the kernels' room after some nodes (the metal_extras padding rule); and the
// CPU with its CPU_REPACK buffer type (an AArch64 CPU: Apple silicon), where the placement puts the matrix weights it
// repacks (PlacementPolicy::cpu_repack).
std::string topology_json(int n_gpus, const std::vector<int>& row_rounding, bool metal) {
  std::ostringstream s;
  s << R"({"name": "from-log", "description": "the GPUs of a llama.cpp log", "devices": [)";
  for (int i = 0; i < n_gpus; ++i) {
    const int r = static_cast<size_t>(i) < row_rounding.size() ? row_rounding[static_cast<size_t>(i)] : 0;
    if (metal) {
      s << R"({"name": "gpu)" << i << R"(", "type": "gpu", "memory": "1024 TiB", "alignment": 32, )"
        << R"("caps": {"async": true, "events": true, "host_buffer": false, "from_host_ptr": true}, )"
        << R"("padding": [{"metal_extras": true, "note": "ggml-metal's get_alloc_size"}], )"
        << R"("offload": {"min_batch": 32, "ops": ["MUL_MAT", "MUL_MAT_ID"]}}, )";
      continue;
    }
    s << R"({"name": "gpu)" << i << R"(", "type": "gpu", "memory": "1024 TiB", "alignment": 128, )";
    if (r > 0) s << R"("row_rounding": )" << r << ", ";
    s << R"("caps": {"async": true, "events": true, "host_buffer": true, "from_host_ptr": false}, )"
      << R"("offload": {"min_batch": 32, "batch": "ggml-cuda"}}, )";
  }
  s << R"({"name": "cpu", "type": "cpu", "wraps": "CPU", "memory": "1024 TiB", "alignment": 64, )"
    << R"("host_visible": true, "caps": {"async": false, "events": false, "host_buffer": false, )"
    << R"("from_host_ptr": true})";
  if (metal) s << R"(, "buffer_types": [{"name": "CPU_REPACK", "description": "ggml-cpu's repacked weights"}])";
  s << "}]}";
  return s.str();
}

// The row split's rounding a "Device N:" line implies (ggml-cuda's get_mmq_y_host): 64 for an NVIDIA GPU of compute
// capability below 7.0 ("compute capability 3.7") and an AMD RDNA1 GPU (gfx1010 to gfx1012), else 0 (the default 128).
int row_rounding_of(const std::string& description) {
  const size_t cc = description.find("compute capability ");
  if (cc != std::string::npos && std::atof(description.c_str() + cc + 19) < 7.0) return 64;
  for (const char* rdna1 : {"gfx1010", "gfx1011", "gfx1012"}) {
    if (description.find(rdna1) != std::string::npos) return 64;
  }
  return 0;
}

// llama.cpp's placement flags on a printed command line, as the option table's keys (policy_options.h); a flag
// without a value is a switch.
struct Flag {
  const char* names;  // comma-separated spellings
  const char* key;
  bool takes_value;
};
constexpr Flag kPlacementFlags[] = {
    {"-ts,--tensor-split", "tensor_split", true},
    {"-sm,--split-mode", "split_mode", true},
    {"-mg,--main-gpu", "main_gpu", true},
    {"-ot,--override-tensor", "override_tensor", true},
    {"-cmoe,--cpu-moe", "cpu_moe", false},
    {"-ncmoe,--n-cpu-moe", "n_cpu_moe", true},
    {"-nkvo,--no-kv-offload", "kv_offload", false},
    {"--no-op-offload", "op_offload", false},
    {"-ngl,--n-gpu-layers,--gpu-layers", "ngl", true},
    {"-c,--ctx-size", "ctx", true},
    {"-b,--batch-size", "batch", true},
    {"-ub,--ubatch-size", "ubatch", true},
    {"-ctk,--cache-type-k", "ctk", true},
    {"-ctv,--cache-type-v", "ctv", true},
    {"-fa,--flash-attn", "fa", true},
    {"--no-mmap", "no_mmap", false},
};

// The printed flash_attn ("enabled", "disabled", "auto", "1", "0", "on", "off") as -fa's value.
std::string fa_value(const std::string& printed) {
  if (printed == "enabled" || printed == "1" || printed == "on" || printed == "true") return "on";
  if (printed == "disabled" || printed == "0" || printed == "off" || printed == "false") return "off";
  return printed;
}

// The command line's flags: key -> value (the last occurrence; -ot's values joined with ',').
std::vector<std::pair<std::string, std::string>> command_flags(const std::string& command) {
  std::vector<std::pair<std::string, std::string>> out;
  auto split = split_command_words(command, /*as_printed=*/true);  // (never an error as printed)
  const std::vector<std::string> w = split.ok() ? split.value() : std::vector<std::string>{};
  for (size_t i = 0; i < w.size(); ++i) {
    std::string word = w[i], value;
    const size_t eq = word.find('=');
    const bool long_eq = word.rfind("--", 0) == 0 && eq != std::string::npos;
    // llama.cpp reads '_' in a long option's name as '-' (common_params_parse_ex): --n_gpu_layers is --n-gpu-layers.
    if (word.rfind("--", 0) == 0) std::replace(word.begin(), word.begin() + std::min(eq, word.size()), '_', '-');
    if (long_eq) {
      value = word.substr(eq + 1);
      word = word.substr(0, eq);
    }
    for (const Flag& f : kPlacementFlags) {
      if (!has_option_name(f.names, word)) continue;
      // -fa was a switch before it took on|off|auto (2025): a following word that is no such value is not its value.
      auto fa_word = [](const std::string& x) {
        for (const char* v : {"on", "off", "auto", "enabled", "disabled", "1", "0", "true", "false"}) {
          if (x == v) return true;
        }
        return false;
      };
      const bool fa_switch = std::string_view(f.key) == "fa" && !long_eq && (i + 1 >= w.size() || !fa_word(w[i + 1]));
      if (fa_switch) {
        value = "on";
      } else if (f.takes_value && !long_eq) {
        if (i + 1 >= w.size()) break;
        value = w[++i];
      }
      out.emplace_back(f.key, value);
    }
  }
  return out;
}

const std::string* flag(const std::vector<std::pair<std::string, std::string>>& flags, const char* key) {
  const std::string* v = nullptr;
  for (const auto& [k, val] : flags) {
    if (k == key) v = &val;
  }
  return v;
}

const std::string* param(const LlamaLog& log, const char* key) {
  for (const auto& [k, v] : log.context.params) {
    if (k == key) return &v;
  }
  return nullptr;
}

// What a figure needs: each kind's inputs that the log lacked ("" when every one was printed or given).
struct Missing {
  std::string model;    // no model
  std::string split;    // several GPUs, no -ts and no free memory: which GPU holds what is unknown
  std::string offload;  // no "offloaded N/M layers" line
  std::string ctx;      // no n_ctx
};

LogFigure figure(const std::string& kind, const std::string& device, double printed, int line) {
  LogFigure f;
  f.kind = kind;
  f.device = device;
  f.printed = printed;
  f.line = line;
  return f;
}

std::string join_missing(std::initializer_list<const std::string*> parts) {
  std::string s;
  for (const std::string* p : parts) {
    if (p->empty()) continue;
    s += (s.empty() ? "" : "; ") + *p;
  }
  return s;
}

}  // namespace

double LogFigure::percent() const {
  if (!predicted) return 0;
  if (printed == 0) return *predicted == 0 ? 0 : 100;
  return (*predicted - printed) / printed * 100.0;
}

double tolerance_of(const LogFigure& f, const LogTolerance& t) {
  if (f.kind == "graph nodes") return t.nodes_pct;
  if (f.kind == "graph splits") return t.splits_pct;
  if (f.kind == "compute" || f.kind == "failed compute" || f.kind == "breakdown compute") return t.compute_pct;
  return t.memory_pct;
}

bool within_tolerance(const LogFigure& f, const LogTolerance& t) {
  if (!f.predicted) return true;
  if (f.kind == "graph splits") return std::fabs(*f.predicted - f.printed) <= std::fabs(f.printed) * t.splits_pct / 100;
  // Printed sizes have two decimals: a difference below the rounding (0.005 MiB) is no difference.
  const double slack = f.is_count() ? 0.0 : 0.005;
  return std::fabs(f.diff()) <= std::fabs(f.printed) * tolerance_of(f, t) / 100.0 + slack;
}

Result<LogPrediction> predict_log(const LlamaLog& log, const LogPredictOptions& options) {
  LogPrediction out;
  const LlamaLogContext& c = log.context;
  const auto flags = log.command ? command_flags(log.command->text) : decltype(command_flags("")){};
  const std::string backend = gpu_backend(log);
  Missing missing;

  // The run: the printed context first, then the command line, then llama.cpp's defaults (with a note).
  LlamaRunArgs run;
  const bool ctx_printed = c.kv_size || c.n_ctx || (!flag(flags, "ctx") && c.n_ctx_slot);
  if (c.kv_size) {
    run.ctx_size = c.kv_size;
  } else if (c.n_ctx) {
    run.ctx_size = c.n_ctx;
  } else if (const std::string* v = flag(flags, "ctx")) {
    run.ctx_size = std::atoll(v->c_str());
  } else if (c.n_ctx_slot) {
    // llama-server gives each slot n_ctx / n_slots cells (unified or not, the cache holds n_ctx)
    run.ctx_size = *c.n_ctx_slot * c.n_slots.value_or(1);
    out.notes.push_back("n_ctx " + std::to_string(*run.ctx_size) + ": llama-server's n_ctx_slot" +
                        (c.n_slots ? " x n_slots" : " (no n_slots line: 1 slot assumed)"));
  } else if (log.fit_ran && log.model.n_ctx_train && *log.model.n_ctx_train > 0) {
    // llama.cpp's fit (common/fit.cpp, late 2025 on) prints its lines only in builds whose default context is the
    // model's training context (common/common.h: n_ctx = 0, "context the model was trained with")
    run.ctx_size = *log.model.n_ctx_train;
    out.notes.push_back("n_ctx " + std::to_string(*run.ctx_size) +
                        ": no -c and no n_ctx line, and llama.cpp's fit ran: the training context (n_ctx 0, the "
                        "default of the builds that fit)");
  } else {
    missing.ctx = "no 'n_ctx = N' (or 'kv_size = N') line: the context size";
  }
  if (c.n_batch) run.batch = c.n_batch;
  if (c.n_ubatch) run.ubatch = c.n_ubatch;
  if (c.n_outputs_max && *c.n_outputs_max > 0) run.n_outputs_max = c.n_outputs_max;
  if (!c.n_ubatch && !flag(flags, "ubatch")) {
    out.notes.push_back("no 'n_ubatch = N' line: llama.cpp's default 512 tokens per micro-batch assumed");
  }
  if (!c.type_k.empty()) run.cache_k = c.type_k;
  if (!c.type_v.empty()) run.cache_v = c.type_v;
  if (!c.flash_attn.empty()) run.flash_attn = fa_value(c.flash_attn);
  for (const auto& [k, v] : flags) {
    if (k == "batch" && !run.batch) run.batch = std::atoll(v.c_str());
    if (k == "ubatch" && !run.ubatch) run.ubatch = std::atoll(v.c_str());
    if (k == "ctk" && !run.cache_k) run.cache_k = v;
    if (k == "ctv" && !run.cache_v) run.cache_v = v;
    if (k == "fa" && !run.flash_attn) run.flash_attn = v;
  }
  if (!run.cache_k) out.notes.push_back("no KV cache type printed: llama.cpp's default f16 assumed");
  if (!run.flash_attn && log.fit_ran) {
    // the builds that fit have flash attention 'auto' by default (common/common.h: LLAMA_FLASH_ATTN_TYPE_AUTO)
    run.flash_attn = "auto";
    out.notes.push_back("flash attention not printed: 'auto' assumed (the default of the builds that fit)");
  } else if (!run.flash_attn) {
    run.flash_attn = "off";
    out.notes.push_back("flash attention not printed: off assumed (the default of builds before 'auto')");
  }
  const std::string where = log.source + ": ";
  const std::string command_where =
      log.command ? "line " + std::to_string(log.command->line) + ": the command line: " : "the command line: ";
  auto shape = resolve_llama_run(run);
  if (!shape.ok()) {
    // A context Tessera cannot run (K and V caches of different types, ...): the figures that depend on it say so.
    missing.ctx = "the printed context cannot be modelled: " + shape.status().message();
    LlamaRunArgs plain;
    plain.ctx_size = run.ctx_size;
    plain.batch = run.batch;
    plain.ubatch = run.ubatch;
    plain.n_outputs_max = run.n_outputs_max;
    shape = resolve_llama_run(plain);
    if (!shape.ok())
      return Status(StatusCode::kInvalidArgument, where + "the printed context: " + shape.status().message());
  }
  // A printed context is llama.cpp's after its padding (to 256 cells now; to 32 without flash attention in builds of
  // early 2025, llama_kv_cache_unified::get_padding): taken as printed, not padded again.
  if (ctx_printed && run.ctx_size && *run.ctx_size > 0) {
    shape.value().ctx = *run.ctx_size;
    if (shape.value().tokens > shape.value().ctx) shape.value().tokens = shape.value().ctx;
  }

  // The model.
  models::GgufRunShape gshape;
  gshape.n_ctx = shape.value().ctx > 0 ? shape.value().ctx : 4096;
  // The graph llama.cpp reserves: one micro-batch, min(n_ctx, n_batch, n_ubatch) tokens (512 when unset).
  gshape.n_tokens = shape.value().tokens > 0 ? shape.value().tokens : std::min<int64_t>(512, gshape.n_ctx);
  gshape.flash_attn = shape.value().flash_attn.value_or(false);
  if (shape.value().kv_type) gshape.kv_type = *shape.value().kv_type;
  gshape.v_type = shape.value().v_type;
  std::optional<models::LlamaConfig> model;
  if (!options.model_file.empty()) {
    auto file = models::fixtures::read_model_or_fixture(options.model_file);
    if (!file.ok()) return file.status();
    auto cfg = models::llama_config_from_gguf(file.value(), gshape);
    if (!cfg.ok()) return cfg.status();
    model = cfg.value();
    out.model = options.model_file + " (-m)";
  } else {
    auto cfg = model_from_log_metadata(log, gshape, &out.notes);
    if (cfg.ok()) {
      model = cfg.value();
      out.model = "the printed metadata";
    } else {
      missing.model = "the model: no -m FILE.gguf, and " + cfg.status().message();
      // The excerpts users paste seldom hold the metadata: the published model the log's names and figures point to,
      // predicted with each of the best few candidates, the one whose figures agree best kept (and said so).
      if (options.identify) {
        std::optional<LogPrediction> best;
        int best_agree = 0, best_predicted = 0;
        const ModelCandidate* chosen = nullptr;
        const std::vector<ModelCandidate> candidates = model_candidates(log);
        for (const ModelCandidate& cand : candidates) {
          LogPredictOptions o = options;
          o.model_file = cand.name;
          o.identify = false;
          auto p = predict_log(log, o);
          if (!p.ok()) continue;
          int agree = 0, predicted = 0;
          for (const LogFigure& f : p.value().figures) {
            if (!f.predicted) continue;
            ++predicted;
            agree += within_tolerance(f, LogTolerance{}) ? 1 : 0;
          }
          if (predicted > 0 && (!best || agree > best_agree)) {
            best = std::move(p).value();
            best_agree = agree;
            best_predicted = predicted;
            chosen = &cand;
          }
        }
        // Kept only when at least half of its predicted figures agree: a model that explains the log. Otherwise the
        // figures stay unpredicted and a note names the closest one.
        if (best && best_agree * 2 < best_predicted) {
          missing.model += "; the closest published model, " + chosen->name + ", predicts " +
                           std::to_string(best_agree) + " of " + std::to_string(best_predicted) +
                           " figures within the default tolerances (not assumed: give -m FILE.gguf or NAME)";
          best.reset();
        }
        if (best) {
          std::string why;
          for (const std::string& e : chosen->evidence) why += (why.empty() ? "" : ", ") + e;
          best->model = chosen->name + " (identified";
          if (!why.empty()) best->model += " by " + why;
          best->model += "; " + std::to_string(best_agree) + " of " + std::to_string(best_predicted) +
                         " predicted figures within the default tolerances";
          if (candidates.size() > 1) best->model += ", best of " + std::to_string(candidates.size()) + " candidates";
          best->model += ")";
          best->notes.insert(best->notes.begin(),
                             "the log prints no model metadata and no -m was given: the model was identified among the "
                             "published ones (give -m FILE.gguf or NAME to choose)");
          return std::move(best).value();
        }
      }
    }
  }

  // The topology and the placement.
  const Gpus gpus = log_gpus(log);
  SessionConfig cfg;
  std::vector<int> rounding(static_cast<size_t>(std::max(gpus.count, 0)), 0);
  for (const LlamaLogDevice& d : log.devices) {
    if (d.index >= 0 && d.index < gpus.count) rounding[static_cast<size_t>(d.index)] = row_rounding_of(d.description);
  }
  const bool metal = backend == "MTL";
  auto topo = parse_topology(topology_json(gpus.count, rounding, metal), "the devices of " + log.source);
  if (!topo.ok()) return topo.status();
  cfg.topology = std::move(topo).value();
  PlacementPolicy& policy = cfg.policy;
  policy.cpu_repack = metal;
  if (c.repeating_offloaded) {
    // "offloading K repeating layers" (the last K) and, or not, "offloading output layer": what was offloaded,
    // whichever way the build counted -ngl (before mid-2025 the output layer came on top of N, now it counts inside N).
    // Tessera's -ngl counts it inside: K + 1, with the output layer's tensors kept on the CPU when it was not.
    int64_t k = *c.repeating_offloaded;
    // From build 7467 llama.cpp prints min(ngl, n_layer) - 1 repeating layers beside the output layer: one fewer than
    // it offloads when every layer is (src/llama-model.cpp at 34af94cd9, lines 1663-1670; "offloading 35 repeating
    // layers" and "offloaded 37/37" for Qwen3-8B's 36). "offloaded N/N" with the output layer says all of them.
    if (c.output_offloaded && c.offloaded_layers && c.offload_total && c.offloaded_layers->value == *c.offload_total &&
        k + 2 == *c.offload_total) {
      k = *c.offload_total - 1;
    }
    TS_RETURN_IF_ERROR(
        apply_policy_option("n_gpu_layers", std::to_string(k > 0 || c.output_offloaded ? k + 1 : 0), &policy));
    if (!c.output_offloaded && k > 0)
      TS_RETURN_IF_ERROR(apply_policy_option("override_tensor", "^output=CPU", &policy));
  } else if (c.offloaded_layers) {
    TS_RETURN_IF_ERROR(apply_policy_option("n_gpu_layers", std::to_string(c.offloaded_layers->value), &policy));
    out.notes.push_back(
        "no 'offloading K repeating layers' line: 'offloaded N/M' read as -ngl N, the output layer "
        "counted inside N (llama.cpp since mid-2025)");
  } else if (const std::string* v = flag(flags, "ngl")) {
    Status st = apply_policy_option("n_gpu_layers", *v, &policy);
    if (!st.ok()) return Status(StatusCode::kInvalidArgument, where + command_where + st.message());
  } else if (const std::string* p = param(log, "n_gpu_layers")) {
    // the bench tools' parameter line ("main: n_kv_max = 16384, ..., n_gpu_layers = 99, ...")
    Status st = apply_policy_option("n_gpu_layers", *p, &policy);
    if (!st.ok()) return Status(StatusCode::kInvalidArgument, where + "the printed n_gpu_layers: " + st.message());
  } else if (gpus.count > 0) {
    missing.offload = "no 'offloaded N/M layers to GPU' line (or -ngl on the command line): the layers offloaded";
  }
  bool ts_given = false;
  for (const auto& [k, v] : flags) {
    if (k == "ngl" || k == "ctx" || k == "batch" || k == "ubatch" || k == "ctk" || k == "ctv" || k == "fa" ||
        k == "no_mmap") {
      continue;
    }
    ts_given = ts_given || k == "tensor_split";
    Status st = apply_policy_option(k, v, &policy);
    if (!st.ok()) return Status(StatusCode::kInvalidArgument, where + command_where + st.message());
  }
  // Split mode row: the log's split buffers ("CUDA0_Split model buffer size"), when no -sm was printed.
  const bool split_buffers = std::any_of(log.figures.buffers.begin(), log.figures.buffers.end(),
                                         [](const auto& b) { return b.device.ends_with("_Split"); });
  if (split_buffers && flag(flags, "split_mode") == nullptr) {
    TS_RETURN_IF_ERROR(apply_policy_option("split_mode", "row", &policy));
    out.notes.push_back("split mode row: the log's split buffers (" + backend + "N_Split)");
  }
  // The weights the log says an -ot sent elsewhere, when the command line with its -ot is not in the excerpt: each
  // tensor by its exact name, in the printed order.
  const bool ot_given = flag(flags, "override_tensor") != nullptr || flag(flags, "cpu_moe") != nullptr ||
                        flag(flags, "n_cpu_moe") != nullptr;
  if (!ot_given && !c.tensor_overrides.empty()) {
    for (const auto& [tensor, buft] : c.tensor_overrides) {
      std::string pattern = "^";
      for (char ch : tensor) {
        if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) pattern += '\\';
        pattern += ch;
      }
      Status st = apply_policy_option("override_tensor", pattern + "$=" + buft, &policy);
      if (!st.ok())
        return Status(StatusCode::kInvalidArgument, where + "a 'buffer type overridden' line: " + st.message());
    }
    out.notes.push_back(std::to_string(c.tensor_overrides.size()) +
                        " weights placed as the 'buffer type overridden' lines say (the -ot that sent them there is "
                        "not in the log)");
  }
  if (const std::string* off = param(log, "offload"); off != nullptr && *off == "0") policy.kv_offload = false;
  // "layer N assigned to device CUDAk" for every repeating layer: the split as it was, whatever the free memory (the
  // output layer, not printed, counted on the last layer's GPU as llama.cpp's split puts it there).
  std::vector<double> assigned;
  if (!ts_given && gpus.count > 1 && log.model.n_layer &&
      static_cast<int64_t>(c.layer_devices.size()) == *log.model.n_layer) {
    assigned.assign(static_cast<size_t>(gpus.count), 0.0);
    int last = -1;
    for (const auto& [il, device] : c.layer_devices) {
      const int k = gpu_index(device);
      if (k < 0 || k >= gpus.count) continue;  // a layer kept on the CPU
      assigned[static_cast<size_t>(k)] += 1;
      last = k;
    }
    if (last >= 0) assigned[static_cast<size_t>(last)] += 1;
    if (last < 0) assigned.clear();
  }
  if (!assigned.empty()) {
    policy.tensor_split = assigned;
    out.notes.push_back("the split from the 'layer N assigned to device' lines");
  } else if (!ts_given && gpus.count > 1) {
    // GPUs of one model, each in its own "Device N:" line (or, under -sm tensor, "- device N: CUDAN (...)"; the meta
    // device's own line, "using device Meta()", is none of them): idle, they have the same free memory (within far
    // less than a layer's share).
    std::vector<const LlamaLogDevice*> listed;
    for (const LlamaLogDevice& d : log.devices) {
      if (d.name != "Meta()") listed.push_back(&d);
    }
    bool same_gpus = static_cast<int>(listed.size()) == gpus.count;
    for (const LlamaLogDevice* d : listed) {
      same_gpus = same_gpus && d->index >= 0 && (d->name.empty() || gpu_index(d->name) == d->index) &&
                  d->description == listed.front()->description;
    }
    if (!gpus.free_mib.empty()) {
      // llama.cpp's default split: each GPU's free memory (src/llama-model.cpp, load_tensors).
      policy.tensor_split.assign(gpus.free_mib.begin(), gpus.free_mib.end());
    } else if (same_gpus) {
      policy.tensor_split.assign(static_cast<size_t>(gpus.count), 1.0);
      out.notes.push_back("no free memory printed: the " + std::to_string(gpus.count) + " GPUs are one model (" +
                          log.devices.front().description + "), so the same free memory assumed (an even split)");
    } else {
      missing.split = "no 'using device " + backend + "N (...) - M MiB free' lines (or -ts on the command line): " +
                      "how the layers are split between the " + std::to_string(gpus.count) + " GPUs";
    }
  }
  out.notes.push_back(std::to_string(gpus.count) + " GPU(s), from " + gpus.source);
  // Split mode tensor (ggml's meta device: "Meta() model buffer size", one line for every GPU's share, the largest) is
  // not predicted from a log: `tessera plan -sm tensor` and `run -sm tensor` predict those lines.
  const bool meta_buffers = std::any_of(log.figures.buffers.begin(), log.figures.buffers.end(),
                                        [](const auto& b) { return b.device == "Meta()"; });
  const bool tensor_split = meta_buffers || policy.split_mode == harness::SplitMode::kTensor;
  if (meta_buffers && policy.split_mode != harness::SplitMode::kTensor) {
    policy.split_mode = harness::SplitMode::kTensor;
    out.notes.push_back("split mode tensor: the log's Meta() buffers");
  }

  // The sequences (the output buffer holds a row per sequence): the printed n_seq_max, else n_ctx / n_ctx_per_seq,
  // else --parallel, else 1.
  int64_t n_seq_max = 1;
  long long per_seq = 0;
  if (c.n_seq_max) {
    n_seq_max = *c.n_seq_max;
  } else if (const std::string* ps = param(log, "n_ctx_per_seq"); ps != nullptr && c.n_ctx &&
                                                                  std::sscanf(ps->c_str(), "%lld", &per_seq) == 1 &&
                                                                  per_seq > 0 && *c.n_ctx % per_seq == 0) {
    n_seq_max = *c.n_ctx / per_seq;
    out.notes.push_back("n_seq_max " + std::to_string(n_seq_max) + ": n_ctx / n_ctx_per_seq");
  } else if (options.n_seq_max > 0) {
    n_seq_max = options.n_seq_max;
    out.notes.push_back("n_seq_max " + std::to_string(n_seq_max) + ": from --parallel");
  } else {
    out.notes.push_back("no 'n_seq_max' line: 1 sequence assumed (--parallel N gives another)");
  }
  if (log.ollama) {
    out.notes.push_back("an ollama log: its llama.cpp returns embeddings too (output rows of n_vocab + n_embd)");
  }
  // The build number ("build: 6096 (fd1234cb) ...", "main: build = 2459 (d199ca79)"): before 2540 (llama.cpp PR
  // #6122) the output buffer had a row for every token of a batch.
  // A build below 1000 is a build without its git history ("build = 1 (a07c32e)"), not a number to go by.
  const long long printed_build = log.build ? std::strtoll(log.build->text.c_str(), nullptr, 10) : 0;  // saturates
  const long long build_number = printed_build >= 1000 ? printed_build : 0;
  if (build_number > 0 && build_number < 2540) {
    out.notes.push_back("build " + std::to_string(build_number) +
                        " (before llama.cpp PR #6122, build 2540): an output row for every token of a batch");
  }

  // llama.cpp's graph as the build made it (llama_cpp_graph.h): the printed build, else the era of the log's format.
  int graph_build = 0;
  if (build_number > 0 && build_number <= 1000000) {
    graph_build = static_cast<int>(build_number);
  } else if (options.llama_build > 0) {
    graph_build = options.llama_build;
    out.notes.push_back("no build line: the graph of llama.cpp build " + std::to_string(graph_build) +
                        " (--llama-build)");
  } else {
    graph_build = log.old_format ? kLlamaCppOldFormatBuild : kLlamaCppNewestBuild;
    out.notes.push_back(std::string(printed_build > 0 ? "build " + std::to_string(printed_build) +
                                                            " is no llama.cpp build number (a build without its "
                                                            "history)"
                                                      : "no build line") +
                        ": the graph of llama.cpp build " + std::to_string(graph_build) + " assumed (" +
                        (log.old_format ? "the log's older format: builds 2572-4462 make the same graph"
                                        : "the newest build whose graph was checked") +
                        ")");
  }

  // Plan and take the breakdown.
  std::optional<MemoryBreakdown> breakdown;
  // llama.cpp's fit table, printed before the run's own buffers, is the run's when the fit changed nothing; but it is
  // measured on the model loaded without memory (no_alloc) with ggml_backend_sched_reserve_size, which resets the
  // scheduler first (common/fit.cpp, PR #16653): without the pins of the graph callback (-nkvo's merged heads on the
  // CPU, ...), and with the host's weights counted as their sum, not the mapped file's span.
  std::optional<MemoryBreakdown> fit_breakdown;
  Result<TensorParallelRun> tensor_run = Status(StatusCode::kInvalidArgument, "not run");  // -sm tensor's meta device
  const bool fit_table = log.fit_unchanged && std::any_of(log.figures.breakdown.begin(), log.figures.breakdown.end(),
                                                          [](const LlamaLogBreakdownRow& r) { return r.fit; });
  // The run's context parameters, as the log gives them.
  LlamaContextParams params = llama_context_params(shape.value());
  params.n_seq_max = n_seq_max;
  params.embeddings = log.ollama;
  params.metal = metal;
  // "kv_unified = true" (llama-server's automatic -np 4 gives it): the sliding-window caches keep every sequence's
  // window
  if (const std::string* kvu = param(log, "kv_unified"); kvu != nullptr && *kvu == "true") params.kv_unified = true;
  params.output_per_batch_token = build_number > 0 && build_number < 2540;
  const std::string* mmap = param(log, "mmap");
  params.use_mmap = !((mmap != nullptr && *mmap == "false") || flag(flags, "no_mmap") != nullptr);
  if (model) {
    cfg.model = *model;
    use_llama_cpp_rules(cfg, graph_build, llama_context_params(shape.value()));
    cfg.sim.mode = sim::MemoryMode::kMetadata;
    cfg.flash_attn_auto = shape.value().flash_attn_auto;
    if (tensor_split && c.flash_attn.empty() && flag(flags, "fa") == nullptr && !cfg.model.flash_attn) {
      // (llama.cpp refuses -sm tensor without flash attention and turns 'auto' on: a log of the meta device had it)
      cfg.model.flash_attn = true;
      out.notes.push_back("flash attention on: llama.cpp's meta device runs only with it");
    }
    // printed metadata Tessera cannot build a model of (e.g. n_embd not a whole number of q8_0 blocks): bad input
    if (Status v = models::validate(cfg.model); !v.ok()) {
      return Status(StatusCode::kInvalidArgument, where + "the log's model: " + v.message());
    }
  }
  if (model && !tensor_split) {
    // llama.cpp's fit changed the placement: the log prints the context and how many layers each device got, but not
    // the overrides the fit wrote for a MoE model's experts nor its -ts (debug lines). Tessera's fit on the same
    // machine gives them (it gives llama.cpp's own flags side by side, tests/side-by-side); only when the user set
    // none of -ngl, -ts and -ot (else the fit leaves the placement alone) and no printed line says the placement.
    const bool placement_printed = !c.tensor_overrides.empty() || !c.layer_devices.empty();
    if (log.fit_ran && !log.fit_unchanged && !ot_given && !ts_given && flag(flags, "ngl") == nullptr &&
        !placement_printed && gpus.count > 0) {
      SessionFitInputs in;
      in.params = llama_context_params(shape.value());
      in.n_ctx_train = log.model.n_ctx_train.value_or(0);
      if (const std::string* v = flag(flags, "ctx")) in.n_ctx = std::atoll(v->c_str());
      auto problem = session_fit_problem(cfg, in, options.real_devices);
      if (!problem.ok()) return Status(StatusCode::kInvalidArgument, where + "the fit: " + problem.status().message());
      // (the simulated GPUs are as large as the log needs: the fit's free memory is what the log printed)
      bool free_printed = true;
      for (size_t g = 0; g < problem.value().free.size(); ++g) {
        auto d = std::find_if(log.devices.begin(), log.devices.end(), [&](const LlamaLogDevice& x) {
          return (x.index == static_cast<int>(g) || x.name == problem.value().gpus[g]) && x.free_mib.has_value();
        });
        free_printed = free_printed && d != log.devices.end();
        if (d != log.devices.end()) problem.value().free[g] = *d->free_mib * (int64_t{1} << 20);
      }
      auto fitted =
          free_printed ? llama_fit(problem.value(), session_fit_measure(cfg, in, problem.value(), options.real_devices))
                       : Result<FitResult>(FitResult{});
      if (!fitted.ok()) return Status(StatusCode::kInvalidArgument, where + "the fit: " + fitted.status().message());
      const FitSetting& set = fitted.value().setting;
      if (fitted.value().outcome == FitResult::Outcome::kFitted && set.placed) {
        apply_fit_placement(set, &policy);
        out.notes.push_back(
            "llama.cpp's fit changed the placement, which the log does not print: Tessera's fit on the "
            "same machine gives " +
            fit_flags(set, problem.value()) + ", planned so");
      }
    }
    auto s = Session::create(cfg, options.real_devices);
    if (!s.ok()) return Status(StatusCode::kInvalidArgument, where + s.status().message());
    PipelineDecision pp = llama_pipeline_parallel(*s.value());
    if (pp.on && c.n_copies && static_cast<int>(c.n_copies->value) != s.value()->config().policy.n_copies) {
      // llama.cpp keeps n_copies copies of the split inputs (use_llama_cpp_rules plans so): a fork may print another
      // GGML_SCHED_MAX_COPIES
      cfg.policy.parallel = true;
      cfg.policy.n_copies = static_cast<int>(c.n_copies->value);
      s = Session::create(cfg, options.real_devices);
      if (!s.ok()) return Status(StatusCode::kInvalidArgument, where + s.status().message());
    }
    Status p = s.value()->plan();
    if (!p.ok()) return Status(StatusCode::kInvalidArgument, where + "the placement cannot be planned: " + p.message());
    auto b = llama_memory_breakdown(*s.value(), params);
    if (!b.ok()) return b.status();
    breakdown = std::move(b).value();
    fit_breakdown = breakdown;
    if (fit_table && cfg.pin_rule) {
      SessionConfig unpinned = cfg;
      unpinned.pin_rule = nullptr;
      auto u = Session::create(unpinned, options.real_devices);
      if (!u.ok()) return Status(StatusCode::kInvalidArgument, where + u.status().message());
      Status up = u.value()->plan();
      if (!up.ok())
        return Status(StatusCode::kInvalidArgument, where + "the placement cannot be planned: " + up.message());
      auto ub = llama_memory_breakdown(*u.value(), params);
      if (!ub.ok()) return ub.status();
      fit_breakdown = std::move(ub).value();
    }
    out.notes.push_back(
        std::string("pipeline parallelism ") +
        (pp.on ? "on (n_copies " + std::to_string(s.value()->config().policy.n_copies) + ")" : "off: " + pp.reason));
  } else if (model && tensor_split) {
    // Split mode tensor: ggml's meta device under the scheduler, run metadata-only (`tessera run -sm tensor
    // --metadata`), its buffers named as llama.cpp prints them: one "Meta()" line each for the model, the KV cache and
    // the compute buffer (the largest GPU's share of the weights and the cache; the whole graph's compute buffer,
    // which every GPU allocates), the host's compute buffer in the first GPU's host buffer type.
    // (a run that cannot be made -- no GPU named, the placement refused -- leaves every figure unpredicted, saying why)
    tensor_run = gpus.count > 0 ? run_tensor_parallel(cfg, options.real_devices, 1)
                                : Result<TensorParallelRun>(Status(StatusCode::kInvalidArgument, "no GPU named"));
    if (!tensor_run.ok()) {
      missing.split = "split mode tensor (" + std::string(meta_buffers ? "the log's Meta() buffers" : "-sm tensor") +
                      "): the meta device cannot be run: " + tensor_run.status().message();
    }
  }
  if (model && tensor_split && missing.split.empty()) {
    const TensorParallelRun& run = tensor_run.value();
    MemoryBreakdown b;
    size_t host_w = 0, host_kv = 0;
    for (size_t d = 0; d < cfg.topology.devices.size(); ++d) {
      if (cfg.topology.devices[d].type != DeviceType::kCpu) continue;
      host_w += run.weights[d];
      host_kv += run.cache[d];
    }
    auto add = [&b](LlamaBuffer::Kind kind, const char* name, size_t bytes) {
      if (bytes == 0) return;
      LlamaBuffer& x = b.buffers.emplace_back();
      x.kind = kind;
      x.name = name;
      x.bytes = bytes;
    };
    // (the host's weights as their sum: the mapped file's span when they lie together, as the token embedding alone)
    add(LlamaBuffer::Kind::kModel, "CPU_Mapped", host_w);
    add(LlamaBuffer::Kind::kModel, "Meta()", run.meta_weights);
    add(LlamaBuffer::Kind::kOutput, run.output_on_cpu ? "CPU" : "CUDA_Host", llama_output_bytes(cfg.model, params));
    add(LlamaBuffer::Kind::kKv, "CPU", host_kv);  // the cache of the layers -ngl leaves on the CPU
    add(LlamaBuffer::Kind::kKv, "Meta()", run.meta_cache);
    add(LlamaBuffer::Kind::kCompute, "Meta()", run.meta_compute);
    add(LlamaBuffer::Kind::kCompute, "CUDA_Host", run.cpu_compute);
    b.mapped_weights_sum = host_w;
    b.graph_nodes = run.graph_nodes;
    b.graph_splits = run.splits;
    breakdown = b;
    fit_breakdown = std::move(b);
    out.notes.push_back("split mode tensor over " + std::to_string(run.gpus.size()) +
                        " GPUs: the meta device run metadata-only (tessera run -sm tensor --metadata)");
  }

  // The predicted buffers, named as the log names them.
  auto rename = [&](std::string name) {
    if (backend != "CUDA" && name.rfind("CUDA", 0) == 0) name = backend + name.substr(4);
    return name;
  };
  std::vector<LlamaLogBuffer> fit_buffers;  // fit_breakdown's, named as the log names them
  if (breakdown) {
    // The output layer kept on the CPU by the override above is, for llama.cpp, an output layer that was not
    // offloaded: its output buffer is the CPU's (src/llama-context.cpp, the host buffer type of dev_output).
    const bool output_on_cpu = c.repeating_offloaded && *c.repeating_offloaded > 0 && !c.output_offloaded;
    auto named = [&](const MemoryBreakdown& from, bool mapped_as_sum, std::vector<LlamaLogBuffer>* to) {
      for (const LlamaBuffer& b : from.buffers) {
        static const char* kinds[] = {"model", "KV", "output", "compute"};
        const std::string name = b.kind == LlamaBuffer::Kind::kOutput && output_on_cpu ? "CPU" : rename(b.name);
        const size_t bytes = mapped_as_sum && b.kind == LlamaBuffer::Kind::kModel && b.name == "CPU_Mapped"
                                 ? from.mapped_weights_sum
                                 : b.bytes;
        to->push_back({name, kinds[static_cast<int>(b.kind)], mib(bytes), 0});
      }
    };
    named(*breakdown, false, &out.predicted.buffers);
    named(*fit_breakdown, true, &fit_buffers);
    out.predicted.graph_nodes = LogInt{static_cast<int64_t>(breakdown->graph_nodes), 0};
    out.predicted.graph_splits = LogInt{breakdown->graph_splits, 0};
  }

  // Each printed figure against its prediction. Host buffers have had other names: the 2024 format's "CPU" model
  // buffer is the mapped file ("CPU_Mapped" since), and the KV of layers left on the CPU was in "CUDA_Host" memory.
  const std::string host = backend + "_Host";
  auto same = [&](const std::string& kind, const std::string& printed, const std::string& predicted) {
    if (printed == predicted) return true;
    if (kind == "model" && printed == "CPU" && predicted == "CPU_Mapped") return true;
    if (kind == "KV" && printed == host && predicted == "CPU") return true;
    return false;
  };
  const std::string all_missing = join_missing({&missing.model, &missing.offload, &missing.split});
  const std::string ctx_missing = join_missing({&missing.model, &missing.offload, &missing.split, &missing.ctx});
  std::vector<int> used(out.predicted.buffers.size(), 0);
  auto buffer_figure = [&](LogFigure f, const std::string& kind) {
    if (f.kind == "input" || f.kind == "RS") {
      f.missing = "Tessera does not model the " + f.kind + " buffer of llama.cpp";
      return f;
    }
    const std::string& need = kind == "model" ? all_missing : ctx_missing;
    if (!need.empty()) {
      f.missing = need;
      return f;
    }
    // The n-th printed buffer of a (device, kind) is the n-th predicted one (an iSWA model's two KV caches).
    double sum = 0;
    bool found = false;
    for (size_t i = 0; i < out.predicted.buffers.size(); ++i) {
      const LlamaLogBuffer& p = out.predicted.buffers[i];
      if (used[i] || p.kind != kind || !same(kind, f.device, p.device)) continue;
      used[i] = 1;
      sum = p.mib;
      found = true;
      break;
    }
    f.predicted = found ? sum : 0.0;  // a buffer Tessera does not predict is predicted as 0 MiB
    return f;
  };
  // A model split across files (split.count > 1) is mapped file by file: llama.cpp prints a mapped model buffer per
  // file, and which tensors each file holds is not in the log. Those buffers are compared as one figure, their sum,
  // with Tessera's one mapped buffer.
  int64_t split_count = 0;
  for (const auto& [k, v] : log.model.kv) {
    if (k == "split.count") split_count = std::strtoll(v.c_str(), nullptr, 10);
  }
  std::vector<LlamaLogBuffer> printed_buffers;
  for (const LlamaLogBuffer& b : log.figures.buffers) {
    const bool mapped = b.kind == "model" && b.device.find("_Mapped") != std::string::npos;
    if (split_count > 1 && mapped) {
      auto same_buffer = [&](const LlamaLogBuffer& o) { return o.kind == b.kind && o.device == b.device; };
      auto it = std::find_if(printed_buffers.begin(), printed_buffers.end(), same_buffer);
      if (it != printed_buffers.end()) {
        it->mib += b.mib;
        continue;
      }
    }
    printed_buffers.push_back(b);
  }
  if (printed_buffers.size() < log.figures.buffers.size()) {
    out.notes.push_back("a model in " + std::to_string(split_count) +
                        " files: its mapped model buffers (one per file) are compared as their sum");
  }
  for (const LlamaLogBuffer& b : printed_buffers) {
    out.figures.push_back(buffer_figure(figure(b.kind, b.device, b.mib, b.line), b.kind));
  }
  // llama.cpp's memory breakdown table (common_memory_breakdown_print): per GPU, the host and any other buffer type,
  // the model, context (KV) and compute bytes of its buffer types, each sum in whole MiB (bytes / MiB, truncated). A
  // GPU's row holds its own buffer type, its split buffers (-sm row: the main GPU's, as ggml_backend_buft_get_device
  // says) and a mapped model buffer of its own (Metal's MTL0_Mapped); the host's every host buffer type (CPU,
  // CPU_Mapped, CUDA_Host); CPU_REPACK, not host memory for ggml, a row of its own.
  auto row_of = [&](const std::string& name) -> std::string {
    if (name == "CPU" || name == "CPU_Mapped" || name.ends_with("_Host")) return "Host";
    for (const char* suffix : {"_Split", "_Mapped"}) {
      const std::string sfx(suffix);
      if (name.size() > sfx.size() && name.ends_with(sfx)) return name.substr(0, name.size() - sfx.size());
    }
    return name;
  };
  for (const LlamaLogBreakdownRow& row : log.figures.breakdown) {
    for (const auto& [column, printed, kind] :
         {std::tuple{"model", row.model, "model"}, std::tuple{"context", row.context, "KV"},
          std::tuple{"compute", row.compute, "compute"}}) {
      LogFigure f = figure(std::string("breakdown ") + column, row.device, static_cast<double>(printed), row.line);
      const std::string& need = std::string(kind) == "model" ? all_missing : ctx_missing;
      if (row.fit && !log.fit_unchanged) {
        f.missing = "printed by llama.cpp's fit for the parameters it started from, which it then changed";
      } else if (!need.empty()) {
        f.missing = need;
      } else {
        double sum = 0;
        for (const LlamaLogBuffer& p : row.fit ? fit_buffers : out.predicted.buffers) {
          if (p.kind == kind && row_of(p.device) == row.device) sum += p.mib;
        }
        f.predicted = std::floor(sum + 1e-9);
      }
      out.figures.push_back(f);
    }
  }
  auto count_figure = [&](const std::optional<LogInt>& printed, const std::optional<LogInt>& predicted,
                          const char* kind) {
    if (!printed) return;
    LogFigure f = figure(kind, "", static_cast<double>(printed->value), printed->line);
    if (!ctx_missing.empty()) {
      f.missing = ctx_missing;
    } else {
      f.predicted = static_cast<double>(predicted->value);
    }
    out.figures.push_back(f);
  };
  count_figure(log.figures.graph_nodes, out.predicted.graph_nodes, "graph nodes");
  count_figure(log.figures.graph_splits, out.predicted.graph_splits, "graph splits");
  // A failed allocation: the buffer llama.cpp tried to allocate (its whole size, as printed in MiB or bytes).
  for (const LlamaLogFailedAlloc& a : log.failed_allocs) {
    std::string dev = a.device.empty() && a.device_index >= 0 ? backend + std::to_string(a.device_index) : a.device;
    const double printed = a.bytes ? static_cast<double>(*a.bytes) / 1024.0 / 1024.0 : a.mib.value_or(0);
    // the buffer of the stage: the weights', the KV cache's or the compute buffer
    const std::string buffer = a.stage == "compute" ? "compute" : a.stage == "kv" ? "KV" : "model";
    LogFigure f = figure("failed " + buffer, dev, printed, a.line);
    if (a.stage.empty()) {
      f.missing = "the failing allocation's stage (no 'alloc_tensor_range' or 'ggml_gallocr_reserve_n' line)";
    } else {
      f = buffer_figure(f, buffer);
      f.kind = "failed " + buffer;
    }
    out.figures.push_back(f);
  }
  if (!missing.model.empty()) out.unavailable = missing.model;
  return out;
}

}  // namespace tessera::llama
