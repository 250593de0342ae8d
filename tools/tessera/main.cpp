// The `tessera` tool (docs/scenarios.md): plan, run, trace, dot, repro, fit, topologies, inspect, compare-log
// (docs/compare-log.md) and upgrade over simulated topologies.
// With no arguments it runs the built-in default (the tiny model on the 1gpu preset) and prints a summary.
// Exit codes: 0 ok; 1 an expectation failed (a scenario expectation, a race, outputs that do not match the CPU
// reference, a placement that does not fit or cannot be scheduled); 2 usage or input error.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include "tessera/harness/graph/graph_io.h"
#include "tessera/harness/inspect/inspect.h"
#include "tessera/harness/common/edit_distance.h"
#include "tessera/harness/common/text_table.h"
#include "tessera/llama/llama_args.h"
#include "tessera/llama/llama_cmdline.h"
#include "tessera/llama/llama_devices.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/scenario/scenario.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/sim/trace.h"
#include "tessera/builtin.h"
#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "extra_args.h"
#include "json_out.h"
#include "junit.h"
#include "cli_options.h"
#include "progress.h"
#include "subcommands.h"
#include "version.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::scenario;
using namespace tessera::llama;
using ojson = nlohmann::ordered_json;
using tessera::tool::headline;
using tessera::tool::Progress;

using tessera::tool::kExpectationFailed;
using tessera::tool::kInputError;
using tessera::tool::kOk;

namespace {

struct Options {
  std::string topology;           // empty: "1gpu", or the --gpu machine
  std::vector<std::string> gpus;  // --gpu SIZE or --gpu DEVICE-PRESET, in order
  std::string cpu;                // --cpu DEVICE-PRESET: the machine's CPU
  std::string kernels;            // --kernels PROFILE|FILE: llama.cpp's kernels' share of the peaks
  std::string devices;            // --device (llama.cpp's -dev): the GPUs the model uses, by name
  std::string model = "tiny";
  std::string graph;  // a serialized graph file instead of the model
  int layers = 0;     // 0: the preset's
  int tokens = 0;     // 0: the preset's
  int ctx = 0;        // 0: the preset's
  bool no_flash_attn = false;
  bool no_speed = false;  // plan --no-speed: no simulated pp512 / tg128
  // The placement options (tessera/harness/placement/policy_options.h), as given: (key, text) per occurrence ("" for a
  // switch), in command-line order, applied in that order by make_config.
  std::vector<std::pair<std::string, std::string>> policy;
  tessera::tool::LlamaRunArgs llama;  // -c, -b, -ub, -ctk, -ctv, -fa, -np, ... (cli_options.h)
  ExtraModelArgs extra;               // --draft, -ngld, ..., --mmproj (extra_args.h)
  uint64_t seed = 1;
  bool adversarial = false;
  bool metadata = false;
  int evaluations = 1;
  bool json = false;
  bool llama_log = false;  // plan, run: the memory breakdown as llama.cpp's log lines
  bool wide = false;       // plan, run, trace: the tables' --wide layout (docs/scenarios.md "Tables and --wide")
  int llama_build = 0;     // a GGUF model planned as this llama.cpp build's graph (0: the newest checked)
};

void add_common(CLI::App* app, Options* o) {
  app->add_option("-t,--topology", o->topology,
                  "topology preset name or JSON file (see `tessera topologies`; default 1gpu)");
  app->add_option("--gpu", o->gpus,
                  "instead of -t: a GPU with this much memory (\"12GiB\") or a device preset (rtx4090, h100-sxm-80gb, "
                  "...: `tessera topologies --devices`), once per GPU; the machine is these GPUs and its CPU");
  app->add_option("--cpu", o->cpu,
                  "the machine's CPU as a device preset (ryzen9-7950x, ...: `tessera topologies --devices`) or a "
                  "topology file's CPU (FILE.json: `tessera calibrate -o` writes one)");
  app->add_option("--kernels", o->kernels,
                  "a kernel profile (embedded name or JSON file): the launch overhead and the share of the peaks "
                  "llama.cpp's kernels reach, per kernel class (docs/bench.md)");
  app->add_option("--device", o->devices,
                  "llama.cpp's -dev: the GPUs the model uses, in order (gpu1 or CUDA1, ...; none: the CPU only); "
                  "the others are left out, as llama.cpp leaves them");
  app->add_option("-m,--model", o->model,
                  "model preset (tiny, tiny-moe, tiny-qwen2, tiny-qwen3, tiny-qwen3moe, tiny-gemma3, tiny-phi3, 7b, "
                  "8x7b-moe, 70b), GGUF file (FILE.gguf; docs/gguf.md) or a published model by name "
                  "(qwen3-30b-a3b-q4_k_m, ...: its file's header, no download; an unknown name lists them)");
  app->add_option("-g,--graph", o->graph, "a serialized graph file (docs/graph-format.md) instead of the model");
  app->add_option("--layers", o->layers, "number of layers (default: the preset's)")->check(CLI::Range(1, 100000));
  app->add_option("--tokens", o->tokens, "tokens per batch (default: the preset's)")->check(CLI::Range(1, 1 << 20));
  app->add_option("--ctx", o->ctx, "KV cache length (default: the preset's)")->check(CLI::Range(1, 1 << 24));
  app->add_flag("--no-flash-attn", o->no_flash_attn, "attention as MUL_MAT -> SOFT_MAX -> MUL_MAT");
  // The placement options come from the table scenario files read too, with the same names and meaning.
  tessera::tool::add_policy_options(app, &o->policy);
  tessera::tool::add_llama_run_options(app, &o->llama);
  tessera::tool::add_extra_model_options(app, &o->extra);
  app->add_option("--seed", o->seed, "simulator seed (adversarial delays, weights and inputs)");
  app->add_flag("--adversarial", o->adversarial, "random command delays to explore interleavings");
  app->add_flag("--metadata", o->metadata,
                "run and trace without values (metadata-only memory: models larger than this machine); plan, dot "
                "and fit always work so");
  app->add_option("--llama-build", o->llama_build,
                  "a GGUF model in plan, dot, fit: the graph of this llama.cpp build (its ops and node count; "
                  "default: the newest checked, " +
                      std::to_string(llama::kLlamaCppNewestBuild) + "; docs/compare-log.md)")
      ->check(CLI::Range(1, 1000000));
  app->add_flag("--json", o->json, "machine-readable output");
  app->add_flag("--llama-log", o->llama_log,
                "plan, run: llama.cpp's buffers as llama.cpp's own log lines instead of the breakdown table");
}

// The machine of --gpu SIZE ...: the 1gpu preset's GPU once per size, with that memory, then the preset's CPU.
Result<sim::TopologyConfig> gpu_topology(const Options& o) {
  if (!o.topology.empty()) {
    return Status(StatusCode::kInvalidArgument,
                  "--gpu and -t " + o.topology + ": give one of them (--gpu builds the machine: its GPUs and the CPU)");
  }
  auto base = topology_preset("1gpu");
  if (!base.ok()) return base.status();
  sim::TopologyConfig t = base.value();
  const sim::DeviceConfig gpu = t.devices.front(), cpu = t.devices.back();
  t.devices.clear();
  t.name = "--gpu";
  for (const std::string& size : o.gpus) {
    sim::DeviceConfig d = gpu;
    auto bytes = parse_size(size);
    const bool digit = !size.empty() && std::isdigit(static_cast<unsigned char>(size[0])) != 0;
    if (!bytes.ok() && !digit) {
      // a device preset: its memory, speeds and links from its public specifications
      auto preset = device_preset(size);
      if (!preset.ok()) return Status(StatusCode::kInvalidArgument, "--gpu " + size + ": " + preset.status().message());
      if (preset.value().device.type == DeviceType::kCpu) {
        return Status(StatusCode::kInvalidArgument, "--gpu " + size + ": a CPU (give it with --cpu)");
      }
      d = preset.value().device;
      d.fit_margin = gpu.fit_margin;
      for (const std::string& src : preset.value().sources) {
        if (std::find(t.sources.begin(), t.sources.end(), src) == t.sources.end()) t.sources.push_back(src);
      }
    } else {
      if (!bytes.ok()) return Status(StatusCode::kInvalidArgument, "--gpu " + size + ": " + bytes.status().message());
      if (bytes.value() == 0) return Status(StatusCode::kInvalidArgument, "--gpu " + size + ": a GPU needs memory");
      d.memory = bytes.value();
      d.description = "a GPU with " + format_size(bytes.value()) +
                      " (--gpu: llama.cpp's CUDA buffers and op offload; otherwise the 1gpu preset's)";
    }
    d.name = "gpu" + std::to_string(t.devices.size());
    // As llama.cpp's CUDA backend, which a --gpu machine stands for (and compare-log's simulated GPUs): buffers aligned
    // to 128 bytes (ggml_backend_cuda_buffer_type_get_alignment) and op offload of any op but GET_ROWS from a batch of
    // 32, counted as ggml-cuda counts it (ggml_backend_cuda_device_offload_op; ggml_offload_batch_size)
    d.alignment = 128;
    d.offload.enabled = true;
    d.offload.min_batch = 32;
    d.offload.ops.clear();
    d.offload.ggml_cuda_batch = true;
    t.devices.push_back(d);
    t.name += " " + size;
  }
  t.description = "the GPUs of --gpu and the CPU";
  t.devices.push_back(cpu);
  TS_RETURN_IF_ERROR(validate_topology(t));
  return t;
}

// --cpu NAME: the topology's CPU becomes that device preset (named as the CPU was, so links and rules naming it still
// apply), its sources added to the topology's.
Status replace_cpu(const std::string& name, sim::TopologyConfig* t) {
  auto preset = device_preset(name);
  if (!preset.ok() && name.size() > 5 && name.compare(name.size() - 5, 5, ".json") == 0) {
    // a topology file (`tessera calibrate -o FILE` writes one): its CPU, the last device
    auto file = load_topology_file(name);
    if (!file.ok()) return Status(StatusCode::kInvalidArgument, "--cpu " + name + ": " + file.status().message());
    preset = DevicePreset{file.value().devices.back(), file.value().sources};
  }
  if (!preset.ok()) return Status(StatusCode::kInvalidArgument, "--cpu " + name + ": " + preset.status().message());
  if (preset.value().device.type != DeviceType::kCpu) {
    return Status(StatusCode::kInvalidArgument, "--cpu " + name + ": not a CPU (a GPU is given with --gpu)");
  }
  for (sim::DeviceConfig& d : t->devices) {
    if (d.type != DeviceType::kCpu) continue;
    sim::DeviceConfig cpu = preset.value().device;
    cpu.name = d.name;
    d = cpu;
    for (const std::string& src : preset.value().sources) {
      if (std::find(t->sources.begin(), t->sources.end(), src) == t->sources.end()) t->sources.push_back(src);
    }
    t->name += " --cpu " + name;
    return validate_topology(*t);
  }
  return Status(StatusCode::kInvalidArgument, "--cpu " + name + ": the topology has no CPU to replace");
}

// After a parse error: for each argument that looks like an option no command knows ("--ctx-szie"), the closest
// known name, when one is close (CLI11 only says the argument was not expected).
void suggest_options(CLI::App& app, int argc, char** argv) {
  std::vector<std::string> known;
  std::vector<CLI::App*> apps = {&app};
  for (CLI::App* sub : app.get_subcommands({})) apps.push_back(sub);
  for (CLI::App* a : apps) {
    for (const CLI::Option* opt : a->get_options()) {
      for (const std::string& n : opt->get_lnames()) known.push_back("--" + n);
    }
  }
  for (const std::string& n : tessera::llama::llama_single_dash_names()) known.push_back(n);
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.size() < 3 || arg[0] != '-' || std::isdigit(static_cast<unsigned char>(arg[1])) != 0) continue;
    arg = arg.substr(0, arg.find('='));
    if (std::find(known.begin(), known.end(), arg) != known.end()) continue;
    const std::string best = tessera::harness::closest_option(arg, known);
    if (!best.empty()) {
      std::fprintf(stderr, "tessera: unknown option '%s'; did you mean '%s'?\n", arg.c_str(), best.c_str());
    }
  }
}

// A model file rather than a preset name: a name ending in .gguf, or any existing path that names no preset (ollama
// keeps its models as blobs named by their digest, with no extension). The file is then read whatever its name: one
// that is not GGUF, or a directory, gets the reader's error naming it, not "unknown llama preset".
bool is_gguf_path(const std::string& model) {
  if (model.size() > 5 && model.compare(model.size() - 5, 5, ".gguf") == 0) return true;
  if (model.empty() || models::preset(model).ok()) return false;
  if (models::fixtures::is_fixture_name(model)) return true;  // a fixture's header (read_model_or_fixture)
  std::error_code ec;
  return std::filesystem::exists(model, ec);
}

// The session config of the common options. The extra models (--draft, --mmproj) are checked here too and go to
// *extra when it is given: they are placed beside the planned session (extra_args.h). `notes`: say on standard error
// what is set aside (a config made twice says it once).
Result<SessionConfig> make_config(Options o, ExtraModels* extra_out = nullptr, bool notes = true) {
  SessionConfig c;
  auto shape = resolve_llama_run(o.llama);
  if (!shape.ok()) return shape.status();
  if (shape.value().ctx > 0) o.ctx = static_cast<int>(shape.value().ctx);
  if (shape.value().tokens > 0) o.tokens = static_cast<int>(shape.value().tokens);
  if (shape.value().flash_attn) o.no_flash_attn = !*shape.value().flash_attn;
  // llama.cpp's -t is its thread count: a pasted "-t 8" names no topology (a preset or a file); threads change no
  // placement or memory, so it is set aside with a word
  if (!o.topology.empty() &&
      std::all_of(o.topology.begin(), o.topology.end(), [](unsigned char ch) { return std::isdigit(ch) != 0; }) &&
      !std::filesystem::exists(o.topology)) {
    if (notes)
      std::fprintf(stderr,
                   "tessera: -t %s: llama.cpp's thread count, ignored (threads change no placement or memory); the "
                   "machine is -t/--topology PRESET|FILE or --gpu SIZE (default 1gpu)\n",
                   o.topology.c_str());
    o.topology.clear();
  }
  auto topo = o.gpus.empty() ? load_topology(o.topology.empty() ? "1gpu" : o.topology) : gpu_topology(o);
  if (!topo.ok()) return topo.status();
  c.topology = std::move(topo).value();
  if (!o.cpu.empty()) TS_RETURN_IF_ERROR(replace_cpu(o.cpu, &c.topology));
  if (!o.kernels.empty()) {
    auto profile = load_kernel_profile(o.kernels);
    if (!profile.ok()) return Status(profile.status().code(), "--kernels: " + profile.status().message());
    apply_kernel_profile(profile.value(), &c.topology);
  }
  if (!o.devices.empty()) TS_RETURN_IF_ERROR(tessera::tool::keep_devices(o.devices, &c.topology));
  if (!o.graph.empty()) {
    Result<std::string> text = read_graph_text(o.graph);
    if (!text.ok()) return text.status();
    c.graph = GraphSource{std::move(text).value(), o.graph};
  }
  if (is_gguf_path(o.model)) {
    // A model file: its hyperparameters, tensor shapes and types; the run's shape from the options.
    if (o.layers > 0) {
      return Status(StatusCode::kInvalidArgument, "--layers: " + o.model + " has its own block count");
    }
    auto file = models::fixtures::read_model_or_fixture(o.model);
    if (!file.ok()) return file.status();
    models::GgufRunShape run;
    run.n_ctx = o.ctx;
    run.full_context = true;  // no -c (or -c 0): the model's training context, llama.cpp's -c 0
    if (o.tokens > 0) run.n_tokens = o.tokens;
    run.flash_attn = !o.no_flash_attn;
    if (shape.value().kv_type) run.kv_type = *shape.value().kv_type;
    run.v_type = shape.value().v_type;
    auto built = models::build_from_gguf(file.value(), run);  // checks the graph against the file
    if (!built.ok()) return built.status();
    c.model = built.value().config;
    if (o.tokens <= 0) {
      // no --tokens, -b or -ub: the batch llama.cpp reserves its compute buffers for, min(n_ctx, n_ubatch) tokens
      // (issue 50: plan built a one-token graph under a table headed "n_ubatch 512", where fit measured 512)
      c.model.n_tokens = llama_ubatch(c.model.n_ctx, llama_context_params(shape.value()));
      if (c.model.n_outputs > c.model.n_tokens) c.model.n_outputs = 0;
    }
  } else {
    auto m = models::preset(o.model);
    if (!m.ok() && o.model.find('/') != std::string::npos) {
      return Status(StatusCode::kNotFound, "-m " + o.model + ": no such file (nor a model preset)");
    }
    if (!m.ok()) {
      return Status(StatusCode::kNotFound, m.status().message() + "; nor a file, nor a published model by name (" +
                                               models::fixtures::catalogue_help() + ")");
    }
    c.model = m.value();
  }
  if (o.layers > 0) c.model.n_layer = o.layers;
  if (o.tokens > 0) c.model.n_tokens = o.tokens;
  if (o.ctx > 0) c.model.n_ctx = o.ctx;
  if (o.no_flash_attn) c.model.flash_attn = false;
  if (shape.value().flash_attn) c.model.flash_attn = *shape.value().flash_attn;
  if (shape.value().kv_type) c.model.kv_type = *shape.value().kv_type;
  if (shape.value().v_type) c.model.v_cache_type = shape.value().v_type;
  c.flash_attn_auto = shape.value().flash_attn_auto;
  auto extra = resolve_extra_models(o.extra, &c.topology);
  if (!extra.ok()) return extra.status();
  if (extra_out != nullptr) *extra_out = std::move(extra).value();
  if (c.model.n_kv > c.model.n_ctx) c.model.n_kv = 0;
  TS_RETURN_IF_ERROR(models::validate(c.model));
  for (const auto& [key, text] : o.policy) TS_RETURN_IF_ERROR(apply_policy_option(key, text, &c.policy));
  c.sim.seed = o.seed;
  c.sim.adversarial = o.adversarial;
  c.sim.mode = o.metadata ? MemoryMode::kMetadata : MemoryMode::kBacked;
  c.model_seed = o.seed;
  if (o.llama_build > 0 && !(is_gguf_path(o.model) && o.metadata)) {
    return Status(StatusCode::kInvalidArgument,
                  "--llama-build: for a GGUF model (-m FILE.gguf) in plan, dot, fit or --metadata runs");
  }
  if (is_gguf_path(o.model) && o.metadata) {
    // llama.cpp's model: the graph of its build (the newest checked unless --llama-build) and ggml-alloc's rules
    // (online packing, inputs freed after their last use), as compare-log predicts llama.cpp's figures
    // (docs/compare-log.md)
    use_llama_cpp_rules(c, o.llama_build > 0 ? o.llama_build : llama::kLlamaCppNewestBuild,
                        llama_context_params(shape.value()));
  }
  return c;
}

// `tessera bench`: an instance's options as the common options (llama-bench's -ngl, -ts, -ot, ... mean what
// llama.cpp's do), metadata-only, with llama.cpp's rules for a preset too (its graph and pipeline-parallelism
// decision: llama-bench runs llama.cpp).
Result<SessionConfig> bench_config(const tessera::tool::BenchInstance& b, int64_t n_ctx) {
  Options o;
  o.model = b.model;
  o.topology = b.topology;
  o.gpus = b.gpus;
  o.cpu = b.cpu;
  o.kernels = b.kernels;
  o.devices = b.devices;
  o.metadata = true;
  o.llama_build = b.llama_build;
  o.llama.ctx_size = n_ctx;
  o.llama.batch = b.n_batch;
  o.llama.ubatch = std::min(b.n_ubatch, b.n_batch);
  o.llama.cache_k = b.type_k;
  o.llama.cache_v = b.type_v;
  o.llama.flash_attn = b.flash_attn;
  o.policy.emplace_back("n_gpu_layers", b.n_gpu_layers == "-1" ? "all" : b.n_gpu_layers);
  if (b.n_cpu_moe != "0") o.policy.emplace_back("n_cpu_moe", b.n_cpu_moe);
  o.policy.emplace_back("split_mode", b.split_mode);
  o.policy.emplace_back("main_gpu", b.main_gpu);
  if (!b.tensor_split.empty()) {
    std::string ts = b.tensor_split;
    for (char& ch : ts) {
      if (ch == '/' || ch == ';') ch = ',';
    }
    o.policy.emplace_back("tensor_split", ts);
  }
  if (!b.override_tensor.empty()) {
    std::string ot = b.override_tensor;
    for (char& ch : ot) {
      if (ch == ';') ch = ',';
    }
    o.policy.emplace_back("override_tensor", ot);
  }
  if (b.no_kv_offload) o.policy.emplace_back("kv_offload", "");
  auto c = make_config(o, nullptr, false);
  if (!c.ok()) return c.status();
  if (!is_gguf_path(o.model)) {
    auto shape = resolve_llama_run(o.llama);
    use_llama_cpp_rules(c.value(), llama::kLlamaCppNewestBuild,
                        shape.ok() ? llama_context_params(shape.value()) : LlamaContextParams{});
  }
  return c;
}

// -b, -ub and --swa-full for the memory breakdown (make_config has checked them).
LlamaContextParams context_params(const Options& o) {
  auto shape = resolve_llama_run(o.llama);
  return shape.ok() ? llama_context_params(shape.value()) : LlamaContextParams{};
}

int cmd_fit(Options o, const tessera::tool::FitArgs& args);

// Creates and plans a session, showing its long steps on `progress`; prints the error and returns null on failure
// (*code says which exit code). The extra models of the options go to *extra when it is given.
// `plan_only`: the session is planned once and never evaluated (plan, dot), so the scheduler keeps no record of the
// plan for reuse: the record copies every node's structure (a quarter of `plan`'s time at 100,000 layers, issue 51).
std::unique_ptr<Session> planned_session(const Options& o, Progress* progress, int* code, ExtraModels* extra = nullptr,
                                         bool plan_only = false) {
  progress->step("reading the model and the topology");
  auto cfg = make_config(o, extra);
  if (!cfg.ok()) {
    progress->done();
    std::fprintf(stderr, "tessera: %s\n", cfg.status().message().c_str());
    *code = kInputError;
    return nullptr;
  }
  if (plan_only) cfg.value().policy.reuse = false;
  cfg.value().progress = [progress](const char* step) { progress->step(step); };
  auto s = Session::create(cfg.value(), &builtin_registry());
  progress->done();
  // Out of memory with a model (fit places models, not serialized graphs): what each GPU would need with these
  // options (fit --strict's table: used, free, margin, how far over) and what to try next
  auto oom_hint = [&o]() {
    if (!o.graph.empty()) return;
    if (!o.json) {
      std::fflush(stderr);
      std::printf("what each GPU needs with these options (as `tessera fit --strict` measures it):\n\n");
      tessera::tool::FitArgs strict;
      strict.strict = true;
      (void)cmd_fit(o, strict);
      std::fflush(stdout);
    }
    std::fprintf(
        stderr,
        "hint: `tessera fit` with the same -m and -t finds the -c/-ngl/-ts/-ot that fit (llama.cpp's --fit)%s\n",
        o.json ? ", and `tessera fit --strict` shows how far each GPU is over with these options" : "");
  };
  if (!s.ok()) {
    std::fprintf(stderr, "tessera: %s\n", s.status().message().c_str());
    *code = s.status().code() == StatusCode::kAllocFailed ? kExpectationFailed : kInputError;
    if (s.status().code() == StatusCode::kAllocFailed) oom_hint();
    return nullptr;
  }
  Status p = s.value()->plan();
  progress->done();
  if (!p.ok()) {
    std::fprintf(stderr, "tessera: the placement cannot be planned: %s\n", p.message().c_str());
    *code = kExpectationFailed;
    if (p.code() == StatusCode::kAllocFailed) oom_hint();
    return nullptr;
  }
  *code = kOk;
  return std::move(s).value();
}

// Writes the session's graph as the user built it: the scheduler's reset restores the sources it rewired to its
// copies while planning (so this comes after every report of the plan).
int save_planned_graph(Session& s, const std::string& path) {
  s.sched().reset();
  Status st = save_graph_file(s.graph(), path);
  if (!st.ok()) {
    std::fprintf(stderr, "tessera: %s\n", st.message().c_str());
    return kInputError;
  }
  std::fprintf(stderr, "tessera: graph written to %s (replay it with --graph or a scenario's \"graph\")\n",
               path.c_str());
  return kOk;
}

// A plan reads no values: plan, dot, fit and --explain work in metadata-only mode (the sizes are the same).
int cmd_plan(Options o, const std::vector<std::string>& explain, bool all_splits, const std::string& save_graph) {
  o.metadata = true;
  if (auto cfg = make_config(o, nullptr, /*notes=*/false);
      cfg.ok() && cfg.value().policy.split_mode == SplitMode::kTensor) {
    return tool::cmd_plan_tensor(cfg.value(), explain, o.json, o.wide);
  }
  int code = kOk;
  Progress progress(!o.json);
  ExtraModels extra_models;
  auto s = planned_session(o, &progress, &code, &extra_models, /*plan_only=*/true);
  if (!s) return code;
  if (!tool::explained_exist(*s, explain)) return kInputError;
  const SplitCauseSummary causes = summarize_split_causes(*s, &builtin_registry());  // plans again per option
  // llama-bench's pp512 and tg128 on this placement (issue 46): a model only; a failure is said, not fatal
  Result<tool::PlacementSpeed> speed = Status(StatusCode::kInvalidArgument, "--no-speed");
  if (!o.no_speed && !s->config().graph) {
    progress.step("simulating pp512 and tg128");
    speed = tool::placement_speed(s->config(), !is_gguf_path(o.model), context_params(o), &builtin_registry());
  }
  progress.done();
  ojson j = o.json ? tool::plan_json(*s, explain, causes, context_params(o)) : ojson();
  if (o.json) j["speed"] = speed.ok() ? tool::speed_json(speed.value()) : ojson(nullptr);
  if (!o.json) {
    std::printf("%s\n\n%s\n%s", headline(*s).c_str(), s->summary_table(o.wide).c_str(),
                tool::memory_breakdown_text(*s, context_params(o), o.llama_log, o.wide).c_str());
  }
  const int extra =
      tool::report_extra_models(*s, extra_models, context_params(o), o.llama_log, o.json ? &j : nullptr, o.wide);
  if (o.json || extra == kInputError) {
    if (o.json && extra != kInputError) std::cout << j.dump(2) << "\n";
    if (extra != kOk) return extra;
    return save_graph.empty() ? kOk : save_planned_graph(*s, save_graph);
  }
  if (speed.ok()) {
    std::printf("%s\n", tool::speed_text(speed.value()).c_str());
  } else if (!o.no_speed && !s->config().graph) {
    std::printf("speed: not simulated: %s\n\n", speed.status().message().c_str());
  }
  std::printf("%d splits, %d copy slot(s)\n\n%s\n", s->sched().n_splits(), s->sched().n_copies(),
              format_split_causes(causes, o.wide).c_str());
  if (all_splits || s->sched().n_splits() <= 12) {
    std::printf("%s", s->splits_table().c_str());
  } else {
    std::printf("(use --splits to list them)\n");
  }
  for (const std::string& name : explain) std::printf("%s", s->explain(name).c_str());
  if (extra != kOk) return extra;
  return save_graph.empty() ? kOk : save_planned_graph(*s, save_graph);
}

// A memory-backed run holds every weight and cache in this machine's memory, fills them with random values and
// computes every op on the CPU, then again for the CPU reference: minutes for a 7B model. From this many bytes of
// weights and caches on (or TESSERA_RUN_HINT_ABOVE bytes) the run says so first, with the way to answer in a second.
constexpr size_t kRunHintAbove = size_t{1} << 30;

// Before a memory-backed run: its memory, from the same configuration planned in metadata-only mode (a fraction of a
// second), and the hint on standard error when the weights and caches are above the threshold. Says nothing when the
// configuration does not plan or has a type that cannot be computed (the run itself then reports why).
void run_size_hint(const Options& o) {
  size_t above = kRunHintAbove;
  if (const char* env = std::getenv("TESSERA_RUN_HINT_ABOVE")) {
    char* end = nullptr;
    const unsigned long long v = std::strtoull(env, &end, 10);
    if (end != env && *end == '\0') above = static_cast<size_t>(v);
  }
  auto cfg = make_config(o, nullptr, /*notes=*/false);
  if (!cfg.ok()) return;
  cfg.value().sim.mode = MemoryMode::kMetadata;
  cfg.value().policy.reuse = false;
  // -sm tensor holds the same weights, cache and about the same compute buffers in this machine's memory: the layer
  // split's plan sizes them
  if (cfg.value().policy.split_mode == SplitMode::kTensor) cfg.value().policy.split_mode = SplitMode::kLayer;
  auto s = Session::create(cfg.value(), &builtin_registry());
  if (!s.ok() || !s.value()->plan().ok()) return;
  // A tensor of a storage-only type: the run is refused at once, saying so (Session::create)
  for (const std::vector<Tensor*>* list : {&s.value()->graph().leafs(), &s.value()->graph().nodes()}) {
    for (const Tensor* t : *list) {
      if (type_is_valid(t->type) && !type_has_kernels(t->type)) return;
    }
  }
  size_t weights = 0, cache = 0, compute = 0;
  for (const DeviceMemory& m : s.value()->memory()) {
    weights += m.weights;
    cache += m.cache;
    compute += m.compute;
  }
  if (weights + cache < above) return;
  std::fprintf(stderr,
               "tessera: this run holds %s in this machine's memory (weights %s and KV cache %s, filled with random "
               "values; compute buffers %s) and computes every op over them on this CPU, %d evaluation(s) and the "
               "CPU reference: minutes for a model this size\n"
               "hint: --metadata (the same report without numerics), `tessera plan` and `tessera fit` answer placement "
               "and memory questions in under a second\n",
               format_bytes(weights + cache + compute).c_str(), format_bytes(weights).c_str(),
               format_bytes(cache).c_str(), format_bytes(compute).c_str(), o.evaluations);
}

int cmd_run(const Options& o, const std::string& trace_file, bool quiet_trace_note,
            const std::vector<std::string>& explain = {}) {
  if (!o.metadata) run_size_hint(o);
  if (auto cfg = make_config(o, nullptr, /*notes=*/false);
      cfg.ok() && cfg.value().policy.split_mode == SplitMode::kTensor) {
    return tool::cmd_run_tensor(cfg.value(), o.evaluations, o.json, o.wide, trace_file, quiet_trace_note, explain);
  }
  int code = kOk;
  Progress progress(!o.json);
  ExtraModels extra_models;
  auto s = planned_session(o, &progress, &code, &extra_models);
  if (!s) return code;
  if (!tool::explained_exist(*s, explain)) return kInputError;
  std::fprintf(stderr, "tessera: running %d evaluation(s)...\n", o.evaluations);
  auto r = s->run(o.evaluations, true);
  progress.done();
  if (!r.ok()) {
    std::fprintf(stderr, "tessera: the run failed: %s\n", r.status().message().c_str());
    return kExpectationFailed;
  }
  const RunStats& st = r.value();
  // (NaN/Inf in an output fails even where the reference has the same: RunStats::matches_reference)
  const bool numerics_ok = st.matches_reference(1e-4);
  if (!trace_file.empty() && !tool::write_chrome_trace(trace_file, s->sim().trace(), quiet_trace_note)) {
    return kInputError;
  }
  // The evaluations only (docs/simulator.md "Makespan"): the weight upload is its own figure, in both memory modes.
  const TraceSummary sum = summarize(s->sim().trace(), st.trace_first, st.trace_last);
  int extra = kOk;
  if (o.json) {
    ojson j = tool::run_json(*s, st, sum, numerics_ok, context_params(o), explain);
    extra = tool::report_extra_models(*s, extra_models, context_params(o), o.llama_log, &j);
    if (extra != kInputError) std::cout << j.dump(2) << "\n";
  } else {
    std::printf("%s\n\n%s\n%s", headline(*s).c_str(), s->summary_table(o.wide).c_str(),
                tool::memory_breakdown_text(*s, context_params(o), o.llama_log, o.wide).c_str());
    extra = tool::report_extra_models(*s, extra_models, context_params(o), o.llama_log, nullptr, o.wide);
    std::printf("%d splits; simulated makespan %.3f ms, %s copied\n", s->sched().n_splits(), st.makespan_us / 1000.0,
                format_bytes(sum.copy_bytes).c_str());
    std::printf("weight upload: %.3f ms (weights and KV cache from the host, before the makespan)\n",
                st.weight_upload_us / 1000.0);
    std::printf("%s", format_summary(sum, o.wide).c_str());
    if (st.checked) {
      const std::string non_finite =
          st.non_finite > 0 ? format_message(" (%zu NaN/Inf values)", st.non_finite) : std::string();
      std::printf("numerics: %s vs the CPU reference: NMSE %.3g%s%s -> %s\n", s->config().graph ? "outputs" : "logits",
                  st.nmse, st.nan_mismatch ? " (NaN/Inf mismatch)" : "", non_finite.c_str(),
                  numerics_ok ? "ok" : "MISMATCH");
    } else {
      std::printf("numerics: not checked (metadata-only mode has no values)\n");
    }
    std::printf("races: %zu\n", st.races);
    if (st.races > 0) std::printf("%s", s->sim().races_report(3).c_str());
    std::printf("%s", tool::plan_reuse_text(s->sched()).c_str());
    for (const std::string& name : explain) std::printf("%s", tool::explain_run_text(*s, name).c_str());
    if (!trace_file.empty() && !quiet_trace_note) {
      std::printf("trace written to %s (open it in https://ui.perfetto.dev)\n", trace_file.c_str());
    }
  }
  if (extra != kOk) return extra;
  return st.races == 0 && numerics_ok ? kOk : kExpectationFailed;
}

// Above this many nodes `dot` without --by draws one node per split: Graphviz's layout time grows much faster than
// the node count (tiny with 20 layers, 524 nodes: 1.4 s; 36 layers, 940 nodes: 12 s; Llama-3.1-8B, 999 nodes: 44 to
// 121 s; Qwen3-30B-A3B, 2983 nodes: 163 s, a user's killed after 300 s; docs/scenarios.md "dot").
constexpr size_t kDotFullGraphLimit = 500;

// `by`: "node", "split", "layer", or "" (every node up to kDotFullGraphLimit nodes, else the splits, with a note).
int cmd_dot(Options o, const std::string& out_file, const std::string& by) {
  if (o.json) {  // a shared option (add_common), but dot has no JSON form: refused rather than ignored
    std::fprintf(stderr,
                 "tessera: dot --json: dot writes Graphviz only; `tessera plan --json` gives the plan as JSON\n");
    return kInputError;
  }
  o.metadata = true;  // a plan reads no values
  int code = kOk;
  Progress progress(true);
  auto s = planned_session(o, &progress, &code, nullptr, /*plan_only=*/true);
  if (!s) return code;
  Session::DotView view = by == "split"   ? Session::DotView::kSplit
                          : by == "layer" ? Session::DotView::kLayer
                                          : Session::DotView::kNode;
  if (by.empty() && s->graph().n_nodes() > kDotFullGraphLimit) {
    view = Session::DotView::kSplit;
    std::fprintf(stderr,
                 "tessera: dot: the graph has %zu nodes (more than %zu, which Graphviz takes minutes to lay out): one "
                 "node per split (--by split); --by layer draws one node per layer and backend, --by node every "
                 "node\n",
                 s->graph().n_nodes(), kDotFullGraphLimit);
  }
  const std::string dot = s->dot(view);
  if (out_file.empty() || out_file == "-") {
    std::cout << dot;
    return kOk;
  }
  std::ofstream out(out_file);
  out << dot;
  if (!out) {
    std::fprintf(stderr, "tessera: cannot write %s\n", out_file.c_str());
    return kInputError;
  }
  std::fprintf(stderr, "tessera: %d splits written to %s (render with: dot -Tsvg %s -o plan.svg)\n",
               s->sched().n_splits(), out_file.c_str(), out_file.c_str());
  return kOk;
}

// Runs each scenario file and checks its expectations; ends with "N passed, M failed" (standard error with --json)
// and, with `junit_file`, writes a JUnit XML report (a file that cannot be read is an error case there).
int cmd_repro(const std::vector<std::string>& files, bool json, const std::string& junit_file, bool wide) {
  int code = kOk;
  ojson all = ojson::array();
  std::vector<tool::JunitCase> cases;
  int passed = 0, failed = 0, unread = 0;
  Progress progress(!json);
  for (size_t i = 0; i < files.size(); ++i) {
    auto sc = load_scenario_file(files[i]);
    if (!sc.ok()) {
      std::fprintf(stderr, "tessera: %s\n", sc.status().message().c_str());
      code = kInputError;
      ++unread;
      cases.push_back({files[i], files[i], 0, tool::JunitCase::Result::kError, sc.status().message(), ""});
      continue;
    }
    if (files.size() > 1) std::fprintf(stderr, "[%zu/%zu] %s\n", i + 1, files.size(), files[i].c_str());
    const auto start = std::chrono::steady_clock::now();
    sc.value().config.progress = [&progress](const char* step) { progress.step(step); };
    const ScenarioOutcome out = run_scenario(sc.value(), &builtin_registry());
    progress.done();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string lines;
    size_t n_failed = 0;
    for (const auto& r : out.results) {
      lines += format_message("[%s] %s: %s\n", r.ok ? "ok" : "FAIL", r.what.c_str(), r.detail.c_str());
      n_failed += r.ok ? 0 : 1;
    }
    cases.push_back({sc.value().name, files[i], seconds,
                     out.passed ? tool::JunitCase::Result::kPassed : tool::JunitCase::Result::kFailed,
                     format_message("%zu of %zu expectations failed", n_failed, out.results.size()), lines});
    if (json) {
      all.push_back(tool::repro_scenario_json(sc.value().name, files[i], out));
    } else {
      std::printf("scenario %s (%s): %s\n", sc.value().name.c_str(), files[i].c_str(),
                  out.passed ? "PASSED" : "FAILED");
      if (!sc.value().description.empty()) std::printf("  %s\n", sc.value().description.c_str());
      for (const std::string& c : sc.value().conversions) std::printf("  version 1, read as meant: %s\n", c.c_str());
      for (const auto& r : out.results) {
        std::printf("  [%s] %s: %s\n", r.ok ? "ok" : "FAIL", r.what.c_str(), r.detail.c_str());
      }
      const std::string& report = wide ? out.report_wide : out.report;
      if (!out.passed && !report.empty()) std::printf("\n%s\n", report.c_str());
    }
    (out.passed ? passed : failed) += 1;
    if (!out.passed && code == kOk) code = kExpectationFailed;
  }
  if (json) std::cout << tool::repro_json(all, passed, failed, unread).dump(2) << "\n";
  std::string summary = format_message("%d passed, %d failed", passed, failed);
  if (unread > 0) summary += format_message(", %d not run (the file could not be read)", unread);
  std::fprintf(json ? stderr : stdout, "%s\n", summary.c_str());
  if (!junit_file.empty()) {
    std::ofstream xml(junit_file);
    xml << tool::junit_xml("tessera repro", cases);
    xml.close();
    if (!xml) {
      std::fprintf(stderr, "tessera: --junit %s: cannot write the file\n", junit_file.c_str());
      return kInputError;
    }
  }
  return code;
}

// `tessera fit` (tools/tessera/fit.cpp, docs/fit.md): what the user set of the context and the placement, for
// llama.cpp's fit, which may change only what the user left unset.
int cmd_fit(Options o, const tessera::tool::FitArgs& args) {
  o.metadata = true;  // sizes only
  SessionFitInputs in;
  in.params = context_params(o);
  in.tokens_given = o.tokens > 0 || o.llama.batch || o.llama.ubatch;
  in.n_ctx = o.ctx > 0 ? o.ctx : 0;
  auto shape = resolve_llama_run(o.llama);
  if (shape.ok() && shape.value().ctx > 0) in.n_ctx = shape.value().ctx;
  // (-ot and the rest as flags: a fit that changes nothing prints them back, as llama-fit-params does)
  auto add_ot = [&](const std::string& flag) { in.user_ot += (in.user_ot.empty() ? "" : " ") + flag; };
  for (const auto& [key, text] : o.policy) {
    if (key == "n_gpu_layers" && text != "auto") in.user_ngl = text;
    if (key == "tensor_split" || key == "layers_per_device") in.user_ts = text;
    if (key == "override_tensor") add_ot("-ot \"" + text + "\"");
    if (key == "overrides") add_ot("--override \"" + text + "\"");  // (Tessera's own: a device per pattern)
    if (key == "cpu_moe" && text != "false" && text != "0") add_ot("-cmoe");
    if (key == "n_cpu_moe") add_ot("-ncmoe " + text);
  }
  ExtraModels extra;
  auto base = make_config(o, &extra);
  tessera::tool::FitArgs a = args;
  a.devices = o.devices;
  return tessera::tool::cmd_fit(a, base, extra, in, is_gguf_path(o.model) ? o.model : "", o.json);
}

// A throughput for reading, 4 significant digits ("134.4 GFLOP/s"): format_flops writes what reads back exactly, which
// for a rate given as "0.1344 TFLOP/s" is 134.39999999999998 GFLOP/s.
std::string flops_display(double flops) {
  const bool tera = flops >= 1e12;
  return format_message("%.4g %s", flops / (tera ? 1e12 : 1e9), tera ? "TFLOP/s" : "GFLOP/s");
}

// `tessera topologies --devices`: the device presets, a line each (memory, bandwidth, FP16 and INT8 throughput).
int cmd_devices() {
  std::printf("%-24s %-4s %9s %11s %14s %14s\n", "device", "type", "memory", "bandwidth", "flops_f16", "flops_quant");
  for (const std::string& name : device_preset_names()) {
    auto p = device_preset(name);
    if (!p.ok()) {
      std::fprintf(stderr, "tessera: %s\n", p.status().message().c_str());
      return kInputError;
    }
    const sim::DeviceConfig& d = p.value().device;
    std::printf("%-24s %-4s %9s %11s %14s %14s\n", name.c_str(), d.type == DeviceType::kCpu ? "cpu" : "gpu",
                format_size(d.memory).c_str(), format_rate(d.cost.mem_bandwidth).c_str(),
                flops_display(d.cost.flops_f16).c_str(), flops_display(d.cost.flops_quant).c_str());
  }
  std::printf(
      "\n--gpu NAME (once per GPU) and --cpu NAME build a machine of them; where each figure comes from: "
      "tessera topologies --show-device NAME\n");
  return kOk;
}

int cmd_topologies(const std::string& show, bool json, bool wide) {
  if (!show.empty()) {
    auto t = load_topology(show);
    if (!t.ok()) {
      std::fprintf(stderr, "tessera: %s\n", t.status().message().c_str());
      return kInputError;
    }
    std::cout << topology_to_json(t.value()) << "\n";
    return kOk;
  }
  if (json) {
    std::cout << tool::topologies_json().dump(2) << "\n";
    return kOk;
  }
  // One preset a line with --wide; else the description wrapped to 80 columns under its column (a name wider than
  // the column on a line of its own).
  for (const std::string& name : topology_preset_names()) {
    auto t = topology_preset(name);
    if (!t.ok()) continue;
    if (wide) {
      std::printf("%-16s %s\n", name.c_str(), t.value().description.c_str());
    } else {
      const std::string indent(17, ' ');
      if (name.size() > 16) std::printf("%s\n", name.c_str());
      const std::string first = name.size() > 16 ? indent : format_message("%-16s ", name.c_str());
      std::printf("%s", wrap_lines(first, t.value().description, indent).c_str());
    }
  }
  return kOk;
}

}  // namespace

// A llama.cpp command line given whole to plan, run, trace, dot or fit: the words after "--"
// (`tessera plan -t rtx3060 -- llama-server -m X.gguf -ngl 99 -t 8`) or the string of --llama-args, read with
// llama.cpp's rules (tessera/llama/llama_cmdline.h) and replaced by tessera's options. Says on standard error what was
// taken and what was ignored. Returns kInputError (after saying why) for a command line llama.cpp would refuse.
int pasted_llama_command(std::vector<std::string>* args) {
  if (args->size() < 2) return kOk;
  const std::string sub = (*args)[1];
  const bool takes = sub == "plan" || sub == "run" || sub == "trace" || sub == "dot" || sub == "fit";
  tessera::llama::LlamaCommandTarget target;
  target.fit = sub == "fit";
  auto expand = [&](const std::vector<std::string>& words, const char* how) -> Result<std::vector<std::string>> {
    if (!takes) {
      return Status(StatusCode::kInvalidArgument,
                    std::string(how) + ": a llama.cpp command line goes to plan, run, trace, dot or fit");
    }
    auto cmd = tessera::llama::read_llama_command(words, target);
    if (!cmd.ok()) return cmd.status();
    const tessera::llama::LlamaCommand& c = cmd.value();
    auto join = [](const std::vector<std::string>& v) {
      std::string out;
      for (const std::string& x : v) out += (out.empty() ? "" : ", ") + x;
      return out;
    };
    std::fprintf(stderr, "tessera: %s's command line: used %s\n", c.program.empty() ? "llama.cpp" : c.program.c_str(),
                 c.used.empty() ? "nothing" : join(c.used).c_str());
    if (!c.ignored.empty()) {
      std::fprintf(stderr, "tessera: ignored (no effect on placement or memory): %s\n", join(c.ignored).c_str());
    }
    for (const std::string& n : c.notes) std::fprintf(stderr, "tessera: note: %s\n", n.c_str());
    return c.args;
  };
  std::vector<std::string> out;
  for (size_t i = 0; i < args->size(); ++i) {
    const std::string& a = (*args)[i];
    Result<std::vector<std::string>> more = std::vector<std::string>{};
    if (a == "--") {
      more = expand(std::vector<std::string>(args->begin() + static_cast<std::ptrdiff_t>(i) + 1, args->end()), "--");
      i = args->size();
    } else if (a == "--llama-args" || a.rfind("--llama-args=", 0) == 0) {
      std::string text;
      if (a == "--llama-args") {
        if (i + 1 >= args->size()) {
          std::fprintf(stderr, "tessera: --llama-args needs a value (a llama.cpp command line, quoted)\n");
          return kInputError;
        }
        text = (*args)[++i];
      } else {
        text = a.substr(13);
      }
      auto words = tessera::llama::split_command_words(text);
      more = words.ok() ? expand(words.value(), "--llama-args") : Result<std::vector<std::string>>(words.status());
    } else {
      out.push_back(a);
      continue;
    }
    if (!more.ok()) {
      std::fprintf(stderr, "tessera: %s\n", more.status().message().c_str());
      return kInputError;
    }
    out.insert(out.end(), more.value().begin(), more.value().end());
  }
  *args = std::move(out);
  return kOk;
}

int main(int argc, char** argv) {
  CLI::App app{"tessera: plan, run and explain tensor-graph placements on simulated multi-device topologies"};
  app.footer(
      "With no subcommand: runs the tiny model on the 1gpu preset and prints a summary.\n"
      "A llama.cpp command line, read with llama.cpp's rules (plan, run, trace, dot, fit):\n"
      "  tessera plan --gpu 12GiB -- llama-server -m X.gguf -ngl 99 -t 8 -c 32768 ...\n"
      "  tessera fit -t rig.json --llama-args \"llama-server -m X.gguf -ot exps=CPU\"\n"
      "Exit codes: 0 ok, 1 an expectation failed (scenario, race, numerics, does not fit), 2 usage or input "
      "error.");
  app.set_version_flag("--version", std::string("tessera ") + TESSERA_VERSION + " (git " + TESSERA_GIT_REVISION + ")",
                       "print the version and the git revision it was built from, and exit");
  Options o;
  std::vector<std::string> explain;
  bool all_splits = false;
  std::string trace_file, trace_out = "tessera-trace.json", dot_out, show, save_graph;
  std::vector<std::string> scenario_files;
  bool repro_json = false, topo_json = false;
  std::string junit_file;

  CLI::App* plan = app.add_subcommand("plan", "assignment, splits, copies, per-device memory, explanations");
  add_common(plan, &o);
  const char* pasted =
      "A whole llama.cpp command line after -- (or as one string in --llama-args \"...\"), read with llama.cpp's "
      "rules: tessera plan --gpu 12GiB -- llama-server -m X.gguf -ngl 99 -t 8 -c 32768 (docs/scenarios.md).";
  plan->footer(pasted);
  plan->add_option("--explain", explain, "explain a tensor's placement (backend, cause, split); repeatable");
  plan->add_flag("--splits", all_splits, "list every split");
  plan->add_flag("--no-speed", o.no_speed,
                 "leave out the simulated pp512 and tg128 of the placement (llama-bench's tests, docs/bench.md)");
  plan->add_option("--save-graph", save_graph, "write the graph as a serialized graph file (to edit or replay)");
  plan->add_flag("--wide", o.wide, tessera::tool::kWideHelp);

  CLI::App* run = app.add_subcommand("run", "simulated execution, numerics checked against the CPU reference");
  add_common(run, &o);
  run->footer(pasted);
  run->add_option("--evaluations", o.evaluations, "evaluations in flight")->check(CLI::Range(1, 1000));
  run->add_option("--trace", trace_file, "also write a Chrome trace file");
  run->add_option("--explain", explain, "explain a tensor's placement after the run, and the plan's reuse");
  run->add_flag("--wide", o.wide, tessera::tool::kWideHelp);

  CLI::App* trace = app.add_subcommand("trace", "run and write the Chrome trace (Perfetto) of the simulation");
  add_common(trace, &o);
  trace->footer(pasted);
  trace->add_option("-o,--output", trace_out, "trace file (default: tessera-trace.json)");
  trace
      ->add_option("--evaluations", o.evaluations,
                   "evaluations in flight (with --parallel, a pipelined prompt's ubatches: the trace shows them "
                   "overlap on several GPUs)")
      ->check(CLI::Range(1, 1000));
  trace->add_flag("--wide", o.wide, tessera::tool::kWideHelp);

  CLI::App* dot = app.add_subcommand("dot", "Graphviz of the split graph, nodes coloured by backend");
  add_common(dot, &o);
  dot->footer(pasted);
  dot->add_option("-o,--output", dot_out, "output file (default: standard output)");
  std::string dot_by;
  dot->add_option("--by", dot_by,
                  "node: every node, in a cluster per split; split: one node per split; layer: one node per layer and "
                  "backend (default: node, or split above " +
                      std::to_string(kDotFullGraphLimit) + " nodes)")
      ->check(CLI::IsMember({"node", "split", "layer"}));

  CLI::App* repro = app.add_subcommand("repro", "run scenario files and check their expectations (exit 0/1)");
  repro->add_option("scenarios", scenario_files, "scenario files")->required();
  repro->add_flag("--json", repro_json, "machine-readable output");
  repro->add_option("--junit", junit_file, "also write a JUnit XML report (one test case per scenario file)");
  bool repro_wide = false;
  repro->add_flag("--wide", repro_wide, tessera::tool::kWideHelp);

  CLI::App* fit = app.add_subcommand("fit", "llama.cpp's fit of -c, -ngl, -ts and -ot to the GPUs' free memory");
  add_common(fit, &o);
  fit->footer(pasted);
  tessera::tool::FitArgs fit_args;
  tessera::tool::add_fit_options(fit, &fit_args);

  CLI::App* inspect = app.add_subcommand("inspect", "a GGUF model file: metadata, tensors by layer, totals per type");
  std::string inspect_path;
  InspectOptions inspect_options;
  inspect->add_option("file", inspect_path, "the GGUF file (any shard of a split model)")->required();
  inspect->add_flag("--json", inspect_options.json, "machine-readable output");
  inspect->add_flag("--wide", inspect_options.wide, tessera::tool::kWideHelp);
  inspect->add_option("--array", inspect_options.arrays, "print this array in full (repeatable)")
      ->allow_extra_args(false);

  tessera::tool::CompareLogArgs compare_log_args;
  CLI::App* compare_log = tessera::tool::add_compare_log(app, compare_log_args);

  tessera::tool::UpgradeArgs upgrade_args;
  CLI::App* upgrade = tessera::tool::add_upgrade(app, upgrade_args);

  CLI::App* topologies = app.add_subcommand("topologies", "list the topology presets");
  topologies->add_option("--show", show, "print a preset (or file) as JSON");
  topologies->add_flag("--json", topo_json, "machine-readable output");
  bool topo_wide = false;
  topologies->add_flag("--wide", topo_wide, "one preset a line, its description whole (wider than 80 columns)");
  bool topo_devices = false;
  std::string show_device;
  topologies->add_flag("--devices", topo_devices, "list the device presets (--gpu NAME, --cpu NAME)");
  topologies->add_option("--show-device", show_device, "print a device preset as JSON, with its sources");

  CLI::App* bench = app.add_subcommand(
      "bench", "llama-bench's tests (pp, tg, pg at a depth) and table, the time simulated on the topology");
  tessera::tool::BenchArgs bench_args;
  tessera::tool::add_bench_options(bench, &bench_args);
  bench->footer(
      "llama-bench's options (-p, -n, -pg, -d, -b, -ub, -ctk, -ctv, -fa, -ngl, -ncmoe, -sm, -mg, -nkvo, -ts, -ot, -r, "
      "-o): comma-separated lists give a row per combination. docs/bench.md says what is simulated and how far to "
      "trust it.");

  CLI::App* calibrate =
      app.add_subcommand("calibrate",
                         "measure this machine's CPU backend and write it as a simulated device (--check: against the "
                         "simulated time)");
  tessera::tool::CalibrateArgs calibrate_args;
  tessera::tool::add_calibrate_options(calibrate, &calibrate_args);

  app.require_subcommand(0, 1);
  // A pasted llama.cpp command line (after "--", or in --llama-args): tessera's options of the same meaning.
  std::vector<std::string> given_args(argv, argv + argc);
  // llama-bench's -pg (two letters after one dash: CLI11 would read it as -p with the value "g")
  if (given_args.size() > 1 && given_args[1] == "bench") {
    for (std::string& a : given_args) {
      if (a == "-pg") a = "--pg";
    }
  }
  if (int rc = pasted_llama_command(&given_args); rc != kOk) return rc;
  std::vector<char*> given_argv;
  for (std::string& a : given_args) given_argv.push_back(a.data());
  argc = static_cast<int>(given_argv.size());
  argv = given_argv.data();
  try {
    // llama.cpp's single-dash names (-ngl, -ts, -ot, ...) as their double-dash names; CLI11 takes the rest reversed.
    std::vector<std::string> args = tessera::llama::llama_argv(argc, argv);
    args.erase(args.begin());
    std::reverse(args.begin(), args.end());
    app.parse(args);
  } catch (const CLI::ParseError& e) {
    const int rc = app.exit(e);
    if (rc != 0) suggest_options(app, argc, argv);
    return rc == 0 ? kOk : kInputError;
  }
  try {
    if (*plan) return cmd_plan(o, explain, all_splits, save_graph);
    if (*run) return cmd_run(o, trace_file, false, explain);
    if (*trace) return cmd_run(o, trace_out, true);  // says "trace written" only once it is
    if (*dot) return cmd_dot(o, dot_out, dot_by);
    if (*repro) return cmd_repro(scenario_files, repro_json, junit_file, repro_wide);
    if (*fit) return cmd_fit(o, fit_args);
    if (*topologies && topo_devices) return cmd_devices();
    if (*topologies && !show_device.empty()) {
      auto p = device_preset(show_device);
      if (!p.ok()) {
        std::fprintf(stderr, "tessera: %s\n", p.status().message().c_str());
        return kInputError;
      }
      sim::TopologyConfig t;
      t.name = show_device;
      t.devices.push_back(p.value().device);
      t.sources = p.value().sources;
      std::cout << topology_to_json(t) << "\n";
      return kOk;
    }
    if (*topologies) return cmd_topologies(show, topo_json, topo_wide);
    if (*bench) return tessera::tool::cmd_bench(bench_args, bench_config, &builtin_registry());
    if (*calibrate) return tessera::tool::cmd_calibrate(calibrate_args, &builtin_registry());
    if (*compare_log) return tessera::tool::cmd_compare_log(compare_log_args, &builtin_registry());
    if (*upgrade) return tessera::tool::cmd_upgrade(upgrade_args);
    if (*inspect) {
      auto report = inspect_file(inspect_path, inspect_options);
      if (!report.ok()) {
        std::fprintf(stderr, "tessera: %s\n", report.status().message().c_str());
        return kInputError;
      }
      std::fputs(report.value().c_str(), stdout);
      return kOk;
    }
    // The built-in default.
    std::printf("tessera: no subcommand given; running the built-in default (see `tessera --help`)\n\n");
    return cmd_run(o, "", false);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tessera: internal error: %s\n", e.what());
    return kInputError;
  }
}
