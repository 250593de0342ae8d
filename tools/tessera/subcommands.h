// `tessera` subcommands kept outside main.cpp: `compare-log` (compare_log.cpp, docs/compare-log.md), `plan -sm tensor`
// (tensor_parallel.cpp), `fit`
// (fit.cpp and fit_order.cpp, docs/fit.md) and `upgrade` (upgrade.cpp, docs/scenarios.md "Versions"). Each returns the
// tool's exit code: 0 ok, 1 an expectation failed, 2 usage or input error.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include <functional>

#include "tessera/harness/session/session.h"
#include "tessera/llama/extra_specs.h"
#include "tessera/llama/llama_bench.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/llama/llama_log.h"
#include "tessera/llama/llama_log_predict.h"

// (CLI11's header alone takes about 6 s to compile; the files that build the command line include it, the others
// only name its App)
namespace CLI {
class App;
}  // namespace CLI

namespace tessera::tool {

// The tool's exit codes (every subcommand): 0 ok, 1 an expectation failed, 2 usage or input error.
inline constexpr int kOk = 0, kExpectationFailed = 1, kInputError = 2;

// --help of --wide, the flag of every subcommand that prints tables (docs/scenarios.md "Tables and --wide").
inline constexpr const char* kWideHelp =
    "the tables' wide layout (fixed column widths, nothing shortened): wider than the 80 columns they keep to "
    "otherwise";

struct CompareLogArgs {
  std::string path;
  std::string model;      // -m FILE.gguf
  int64_t n_seq_max = 0;  // -np / --parallel: the sequences, when the log does not print them
  std::string command;    // --command: the run's llama.cpp command line, when the log does not print one
  int llama_build = 0;    // --llama-build: the build, when the log prints none
  bool json = false;
  bool wide = false;  // --wide: the comparison one line per figure
  llama::LogTolerance tolerance;
};
// Adds `compare-log LOG [--json]` to the app; the returned subcommand is parsed into `args`.
CLI::App* add_compare_log(CLI::App& app, CompareLogArgs& args);
int cmd_compare_log(const CompareLogArgs& args, const Registry* real_devices);

// `plan -sm tensor` (tensor_parallel.cpp, docs/tensor-parallel.md): the model of `config` split over its topology's
// GPUs as llama.cpp's meta device splits it; `explain`: tensors whose split state to print.
int cmd_plan_tensor(const harness::SessionConfig& config, const std::vector<std::string>& explain, bool json,
                    bool wide);
// `run -sm tensor` and `trace -sm tensor` (tensor_parallel.cpp): the model on the meta device of the topology's GPUs
// under the scheduler (llama::run_tensor_parallel); `trace_file`: where to write the Chrome trace ("" for none);
// `explain`: the tensors whose placement to print (the meta device or the CPU, the cause, the split).
int cmd_run_tensor(const harness::SessionConfig& config, int evaluations, bool json, bool wide,
                   const std::string& trace_file, bool quiet_trace_note, const std::vector<std::string>& explain = {});

// The record and the comparison as text and as the `tessera-compare-log` JSON object (docs/json.md,
// docs/json/compare-log.schema.json).
// `wide`: the comparison one line per figure instead of a table within 80 columns.
std::string compare_log_text(const llama::LlamaLog& log, const llama::LogPrediction& p, const llama::LogTolerance& t,
                             bool wide = false);
nlohmann::ordered_json compare_log_json(const llama::LlamaLog& log, const llama::LogPrediction& p,
                                        const llama::LogTolerance& t);

struct FitArgs {
  bool strict = false;         // --strict: check the given options
  bool fill_in_order = false;  // --fill-in-order: Tessera's own search
  std::string fit_target;      // --fit-target (-fitt): MiB, one value or one per GPU
  int64_t fit_ctx = 4096;      // --fit-ctx (-fitc)
  // -dev as given: kept first in the printed flags (-ts and the -ot buffer types count the GPUs of its list)
  std::string devices;
  bool wide = false;              // --wide: the tables' fixed columns (wider than 80)
  bool rank = false;              // --rank: the placements that fit, ranked by simulated speed (fit_rank.cpp)
  std::string rank_by = "tg128";  // --rank-by tg128|pp512
};
// Adds fit's own options to its subcommand.
void add_fit_options(CLI::App* fit, FitArgs* args);
// `base`: the session config of the common options (its error is an input error); `extra`: the extra models of the
// options (--draft, --mmproj), reserved on the devices first; `in`: what the user set of the
// context and the placement (SessionFitInputs' n_ctx_train, n_ctx_min and fit_target are filled here); `model_path`:
// the GGUF file, "" for a preset.
int cmd_fit(const FitArgs& args, const Result<harness::SessionConfig>& base, const llama::ExtraModels& extra,
            llama::SessionFitInputs in, const std::string& model_path, bool json);
// --fill-in-order: the largest layer offload per GPU, GPUs in order; `fit_target` in bytes (empty: the topology's
// fit_margin).
int cmd_fit_fill_in_order(harness::SessionConfig base, const std::vector<int64_t>& fit_target, bool json,
                          bool wide = false);

struct UpgradeArgs {
  std::string path;
  std::string output;  // -o: "" in place (FILE.bak kept), "-" standard output
};
// Adds `upgrade FILE [-o OUT]` to the app; the returned subcommand is parsed into `args`.
CLI::App* add_upgrade(CLI::App& app, UpgradeArgs& args);
int cmd_upgrade(const UpgradeArgs& args);

// `tessera bench` (bench.cpp, docs/bench.md): llama-bench's options, each as given (every occurrence, its items
// comma-separated as llama-bench takes them).
struct BenchArgs {
  std::vector<std::string> models;
  std::string topology;
  std::vector<std::string> gpus;
  std::string cpu;      // --cpu DEVICE-PRESET
  std::string kernels;  // --kernels PROFILE|FILE
  std::string devices;  // -dev: the GPUs used (none: the CPU only)
  std::vector<std::string> n_prompt, n_gen, n_pg, n_depth, n_batch, n_ubatch;
  std::vector<std::string> type_k, type_v, flash_attn, n_gpu_layers, n_cpu_moe, split_mode, main_gpu, no_kv_offload;
  std::vector<std::string> tensor_split, override_tensor;
  int repetitions = 5;
  std::string output = "md";
  int llama_build = 0;
  bool progress = false;
};
// One combination of the options: a row's model, machine and placement (the tests run on it).
struct BenchInstance {
  std::string model, topology;
  std::vector<std::string> gpus;
  std::string cpu, devices, kernels;
  int llama_build = 0;
  std::string n_gpu_layers, n_cpu_moe, split_mode, main_gpu;
  std::string tensor_split;     // llama-bench's "3/1" (or "3;1")
  std::string override_tensor;  // llama-bench's "REGEX=BUFT;REGEX=BUFT"
  bool no_kv_offload = false;
  std::string flash_attn, type_k, type_v;
  int64_t n_batch = 2048, n_ubatch = 512;
};
// The session config of an instance with a cache of n_ctx cells (main.cpp: the common options' make_config).
using BenchConfigFn = std::function<Result<harness::SessionConfig>(const BenchInstance&, int64_t n_ctx)>;
void add_bench_options(CLI::App* bench, BenchArgs* args);
int cmd_bench(const BenchArgs& args, const BenchConfigFn& make_config, const Registry* real_devices);

// `tessera calibrate` (calibrate.cpp, docs/calibrate.md).
struct CalibrateArgs {
  std::string output;  // -o: the measured CPU as a topology file
  bool check = false;  // --check: the fixture graphs measured against simulated
  std::string device;  // --device FILE: check that description instead of calibrating
  int repeats = 7;
  int threads = 0;
  bool json = false;
};
void add_calibrate_options(CLI::App* app, CalibrateArgs* args);
int cmd_calibrate(const CalibrateArgs& args, const Registry* real_devices);

// llama.cpp's -dev LIST (cli_options.cpp): the topology keeps the listed GPUs, in the list's order, each with its
// number on the whole machine (CUDA1 stays CUDA1), and the CPU; "none" keeps the CPU only. A GPU is named as in the
// topology
// ("gpu1") or as llama.cpp names it ("CUDA1"). Errors: an unknown or repeated name, none with GPUs.
Status keep_devices(const std::string& list, sim::TopologyConfig* t);

// The speed of a placement (speed.cpp, docs/bench.md "Speed in plan and fit"): llama-bench's pp512 and tg128 at
// depth 0, simulated on it as `tessera bench` simulates a row.
struct PlacementSpeed {
  llama::BenchResult pp, tg;
  int64_t n_batch = 2048, n_ubatch = 512;
  std::string kernels;  // the kernel profile's name (--kernels), "" for the devices' peaks
};
// `planned`: the session config of the placement (the model, the topology, -ngl / -ts / -ot); `llama_rules`: apply
// llama.cpp's graph and pipeline-parallel decision first (a model preset, as `tessera bench` does; a GGUF file's plan
// has them already); `params`: -b and -ub. Errors: a serialized graph (no tokens to time), the simulation's.
Result<PlacementSpeed> placement_speed(const harness::SessionConfig& planned, bool llama_rules,
                                       const llama::LlamaContextParams& params, const Registry* real_devices);
// "busy gpu0 9.80 ms, cpu 0.40 ms; 8.00 KiB copied": the devices by busy time (those busy for 1 % of the time or
// more), at most max_devices of them.
std::string speed_breakdown(const sim::TraceSummary& s, size_t max_devices = 3);
// The device busy longest in a test's summary ("" when none is).
std::string bottleneck(const sim::TraceSummary& s);
// The lines plan prints, and its --json key "speed".
std::string speed_text(const PlacementSpeed& s);
nlohmann::ordered_json speed_json(const PlacementSpeed& s);

// `fit --rank` (fit_rank.cpp, docs/fit.md "Ranking placements by speed").
struct RankedPlacement {
  std::string label;    // "llama.cpp's fit", "whole layers only (-ngl)", "CUDA1 alone (-dev CUDA1)", ...
  std::string flags;    // llama.cpp's flags for it ("" when none was found)
  bool fits = false;    // every GPU keeps its margin free (then it is timed)
  std::string why_not;  // why it is not ranked
  PlacementSpeed speed;
};
// The placements weighed: `first` (llama.cpp's fit or, with --strict, the given options; `first_why_not` non-empty
// when it does not fit), the largest whole-layer -ngl that fits, every expert on the CPU and the smallest -ncmoe that
// fits (a MoE model) and each GPU alone fit by llama.cpp's fit (several GPUs), at the first's context. Those that fit
// come first, fastest first by tg128 (pp512 with by_prompt); then those that do not, with the reason.
std::vector<RankedPlacement> rank_placements(const harness::SessionConfig& base, const llama::SessionFitInputs& in,
                                             const llama::FitProblem& p, const llama::FitSetting& first,
                                             const std::string& first_label, const std::string& first_flags,
                                             const std::string& first_why_not, bool llama_rules, bool by_prompt);
// Why the first placement beats the second: the time of the test's unit (a token, the prompt), the device whose busy
// time differs most, and the bytes copied.
std::string rank_why(const RankedPlacement& a, const RankedPlacement& b, bool by_prompt);
std::string ranking_text(const std::vector<RankedPlacement>& ranked, bool by_prompt, bool wide);
nlohmann::ordered_json ranking_json(const std::vector<RankedPlacement>& ranked, bool by_prompt);

}  // namespace tessera::tool
