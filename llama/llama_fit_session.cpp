// llama.cpp's fit on a simulated topology (tessera/llama/llama_fit.h; docs/fit.md): the problem of a session config
// and its measuring function, which plans each setting metadata-only and reads llama.cpp's buffers per GPU
// (llama_memory.h) as llama.cpp's common_get_device_memory_data reads llama_get_memory_breakdown.
#include <algorithm>

#include "tessera/llama/llama_fit.h"
#include "tessera/registry.h"
#include "tessera/sim/simulator.h"

namespace tessera::llama {

using namespace tessera::harness;

namespace {

constexpr int64_t kDefaultFitMargin = int64_t{1024} << 20;  // llama.cpp's fit margin, 1024 MiB a GPU
// What `unbounded` adds to every device's memory: far above any model, far below overflow.
constexpr size_t kUnbounded = size_t{1} << 50;

}  // namespace

Result<FitProblem> session_fit_problem(const SessionConfig& base, const SessionFitInputs& in, const Registry* real) {
  if (base.graph) {
    return Status(StatusCode::kInvalidArgument, "fit works on a model's layers (-m), not on a serialized graph");
  }
  FitProblem p;
  p.n_layer = base.model.n_layer;
  p.n_ctx_train = in.n_ctx_train;
  p.n_expert = base.model.n_expert;
  p.n_ctx = in.n_ctx;
  p.n_ctx_min = in.n_ctx_min;
  p.user_ngl = in.user_ngl;
  p.user_ts = in.user_ts;
  p.user_ot = in.user_ot;
  p.row_split = base.policy.split_mode == SplitMode::kRow;
  sim::SimOptions opt;
  opt.mode = sim::MemoryMode::kMetadata;
  auto simulator = sim::Simulator::create(base.topology, opt, real);
  if (!simulator.ok()) return simulator.status();
  std::vector<const sim::DeviceConfig*> gpus;
  for (size_t i = 0; i < simulator.value()->device_count(); ++i) {
    const sim::DeviceConfig& d = simulator.value()->device_config(i);
    if (d.type == DeviceType::kCpu) continue;
    size_t free = 0, total = 0;
    simulator.value()->device(i)->memory(&free, &total);
    p.gpus.push_back("CUDA" + std::to_string(sim::gpu_number(base.topology, i)));
    p.free.push_back(static_cast<int64_t>(free));
    gpus.push_back(&d);
  }
  if (!in.fit_target.empty() && in.fit_target.size() != 1 && in.fit_target.size() != gpus.size()) {
    return Status(StatusCode::kInvalidArgument,
                  format_message("--fit-target: %zu values for %zu GPUs (give one for every GPU, or one for all)",
                                 in.fit_target.size(), gpus.size()));
  }
  for (size_t g = 0; g < gpus.size(); ++g) {
    if (!in.fit_target.empty()) {
      p.margins.push_back(in.fit_target[in.fit_target.size() == 1 ? 0 : g]);
    } else {
      p.margins.push_back(gpus[g]->fit_margin > 0 ? static_cast<int64_t>(gpus[g]->fit_margin) : kDefaultFitMargin);
    }
  }
  return p;
}

void apply_fit_placement(const FitSetting& setting, PlacementPolicy* policy) {
  policy->n_gpu_layers = setting.n_gpu_layers;
  policy->layers_per_device.clear();
  policy->tensor_split.assign(setting.tensor_split.begin(), setting.tensor_split.end());
  if (std::all_of(policy->tensor_split.begin(), policy->tensor_split.end(), [](double x) { return x == 0; })) {
    policy->tensor_split.clear();
  }
  policy->overrides.clear();
  for (const auto& [pattern, buft] : setting.overrides) policy->overrides.push_back({pattern, buft, true});
}

Result<SessionConfig> fit_session_config(const SessionConfig& base, const SessionFitInputs& in,
                                         const FitProblem& problem, const FitSetting& setting, bool unbounded) {
  SessionConfig c = base;
  const int64_t n_ctx = setting.n_ctx > 0 ? setting.n_ctx : in.n_ctx_train;
  c.model.n_ctx = n_ctx;
  c.model.n_kv = 0;
  if (!in.tokens_given) c.model.n_tokens = llama_ubatch(n_ctx, in.params);
  c.model.n_tokens = std::min(c.model.n_tokens, n_ctx);
  if (c.model.n_outputs > c.model.n_tokens) c.model.n_outputs = 0;
  TS_RETURN_IF_ERROR(models::validate(c.model));
  if (setting.placed) apply_fit_placement(setting, &c.policy);
  c.sim.mode = sim::MemoryMode::kMetadata;
  c.sim.fit_margins = false;
  // llama.cpp's fit sizes with ggml_backend_sched_reserve_size, which still resets the graph callback's pins
  // (ggml-backend.cpp at 34af94cd9, lines 1893-1904): its estimates have none
  c.pin_rule = nullptr;
  if (unbounded) {
    // llama.cpp's default split follows the free memory: kept at the real devices' before their memory grows.
    if (c.policy.tensor_split.empty() && c.policy.layers_per_device.empty()) {
      c.policy.tensor_split.assign(problem.free.begin(), problem.free.end());
    }
    for (sim::DeviceConfig& d : c.topology.devices) d.memory += kUnbounded;
  }
  return c;
}

std::vector<FitUse> fit_use_of(Session& s, const FitProblem& problem, const LlamaContextParams& params) {
  std::vector<FitUse> use(problem.gpus.size());
  auto b = llama_memory_breakdown(s, params);
  if (!b.ok()) return use;
  // (a split buffer, -sm row, counts on its main GPU: llama.cpp's fit sums each buffer type's memory on
  // ggml_backend_buft_get_device's device, common/fit.cpp)
  for (const MemoryBreakdown::Row& r : b.value().rows()) {
    for (size_t g = 0; g < problem.gpus.size(); ++g) {
      if (r.name != problem.gpus[g] && r.name != problem.gpus[g] + "_Split") continue;
      use[g].model += static_cast<int64_t>(r.model);
      use[g].total += static_cast<int64_t>(r.total());
    }
  }
  // A unified-memory GPU (docs/fit.md "Unified memory"): its weights and KV sit in a host-visible buffer type, which
  // the breakdown names CUDA_Host on the host, so its CUDA<n> row holds only the compute buffer. What it draws from its
  // share of the host pool is the simulator's per-device accounting (`tessera plan`'s device table): weights + KV +
  // compute, counted here once, for the GPU (the fit, as llama.cpp, does not count the CPU's memory).
  const std::vector<DeviceMemory> mem = s.memory();
  const auto& devices = s.config().topology.devices;
  size_t g = 0;
  for (size_t d = 0; d < devices.size() && d < mem.size() && g < use.size(); ++d) {
    if (devices[d].type == DeviceType::kCpu) continue;
    if (devices[d].unified) {
      use[g].model = static_cast<int64_t>(mem[d].weights);
      use[g].total = static_cast<int64_t>(mem[d].weights + mem[d].cache + mem[d].compute);
    }
    ++g;
  }
  return use;
}

FitMeasure session_fit_measure(const SessionConfig& base, const SessionFitInputs& in, const FitProblem& problem,
                               const Registry* real) {
  return [base, in, problem, real](const FitSetting& setting) -> Result<std::vector<FitUse>> {
    auto fail = [&](const Status& st) {
      return Status(st.code(), "fit: measuring " + fit_flags(setting, problem) + ": " + st.message());
    };
    auto c = fit_session_config(base, in, problem, setting, true);
    if (!c.ok()) return fail(c.status());
    auto s = Session::create(c.value(), real);
    if (!s.ok()) return fail(s.status());
    const Status p = s.value()->plan();
    if (!p.ok()) return fail(p);
    return fit_use_of(*s.value(), problem, in.params);
  };
}

}  // namespace tessera::llama
