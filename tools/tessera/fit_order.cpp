// `tessera fit --fill-in-order` (docs/fit.md): Tessera's own search, kept beside llama.cpp's fit. Each GPU in order
// gets the largest number of the remaining layers that plans next to the earlier GPUs' (weights, KV cache and compute
// buffers, each device leaving its margin free); the rest stay on the CPU.
#include <cstdio>
#include <iostream>

#include "tessera/builtin.h"
#include "tessera/harness/topology/topology.h"
#include "json_out.h"
#include "progress.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::llama;

int cmd_fit_fill_in_order(SessionConfig base, const std::vector<int64_t>& fit_target, bool json, bool wide) {
  std::vector<int> gpus;
  for (size_t i = 0; i < base.topology.devices.size(); ++i) {
    if (base.topology.devices[i].type != DeviceType::kCpu) gpus.push_back(static_cast<int>(i));
  }
  if (!fit_target.empty() && fit_target.size() != 1 && fit_target.size() != gpus.size()) {
    std::fprintf(stderr, "tessera: --fit-target: %zu values for %zu GPUs (give one for every GPU, or one for all)\n",
                 fit_target.size(), gpus.size());
    return kInputError;
  }
  for (size_t g = 0; g < gpus.size() && !fit_target.empty(); ++g) {
    base.topology.devices[static_cast<size_t>(gpus[g])].fit_margin =
        static_cast<size_t>(fit_target[fit_target.size() == 1 ? 0 : g]);
  }
  base.sim.fit_margins = true;  // each device leaves its fit_margin free (docs/topology.md)
  base.sim.mode = sim::MemoryMode::kMetadata;
  const int n_layer = base.model.n_layer;
  // While the GPUs are filled, the CPU's memory is unbounded: the layers a trial leaves on the CPU must not make a GPU
  // look full (more layers on the GPU means fewer on the CPU). The CPU is checked once, with the final counts. A
  // unified GPU shares the CPU's pool, so there the CPU keeps its memory.
  SessionConfig search = base;
  bool unified = false;
  for (const sim::DeviceConfig& d : base.topology.devices) unified = unified || d.unified;
  for (sim::DeviceConfig& d : search.topology.devices) {
    if (d.type == DeviceType::kCpu && !unified) d.memory += size_t{1} << 50;
  }
  std::vector<int> counts;
  Progress progress(!json);
  std::string last_error;  // why the last trial did not plan
  auto plans = [&](const SessionConfig& c, const std::vector<int>& layers) {
    SessionConfig cfg = c;
    cfg.policy.layers_per_device = layers;
    cfg.policy.tensor_split.clear();
    cfg.progress = [&progress](const char* step) { progress.step(step); };
    auto s = Session::create(cfg, &builtin_registry());
    const Status st = s.ok() ? s.value()->plan() : s.status();
    if (!st.ok()) last_error = st.message();
    progress.done();
    return st.ok();
  };
  int remaining = n_layer;
  for (size_t g = 0; g < gpus.size(); ++g) {
    const std::string& name = base.topology.devices[static_cast<size_t>(gpus[g])].name;
    std::fprintf(stderr, "fit: %s ...\n", name.c_str());
    std::vector<int> trial = counts;
    trial.push_back(0);
    if (!plans(search, trial)) {
      std::fprintf(stderr, "tessera: nothing fits even with no layer on %s (compute buffers or other tensors): %s\n",
                   name.c_str(), last_error.c_str());
      return kExpectationFailed;
    }
    int lo = 0, hi = remaining;
    while (lo < hi) {  // largest count that fits
      const int mid = (lo + hi + 1) / 2;
      trial.back() = mid;
      if (plans(search, trial)) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    counts.push_back(lo);
    remaining -= lo;
  }
  if (!plans(base, counts)) {
    std::fprintf(stderr, "tessera: with the GPUs full, the %d layers left do not fit on the CPU: %s\n", remaining,
                 last_error.c_str());
    return kExpectationFailed;
  }
  SessionConfig cfg = base;
  cfg.policy.layers_per_device = counts;
  auto s = Session::create(cfg, &builtin_registry());
  if (!s.ok() || !s.value()->plan().ok()) {
    std::fprintf(stderr, "tessera: the final placement does not plan\n");
    return kExpectationFailed;
  }
  if (json) {
    ojson j = fit_json(*s.value(), counts, remaining);
    j["method"] = "fill-in-order";
    std::cout << j.dump(2) << "\n";
    return kOk;
  }
  std::printf("%s\n\nlargest offload that fits (GPUs filled in order, compute buffers included):\n",
              headline(*s.value()).c_str());
  for (size_t g = 0; g < counts.size(); ++g) {
    std::printf("  %-8s %d layers\n", cfg.topology.devices[static_cast<size_t>(gpus[g])].name.c_str(), counts[g]);
  }
  std::printf("  %-8s %d layers\n\n%s%s", "cpu", remaining, fit_margins_note(cfg.topology).c_str(),
              s.value()->summary_table(wide).c_str());
  std::string flag;
  for (size_t g = 0; g < counts.size(); ++g) flag += (g ? "," : "") + std::to_string(counts[g]);
  std::printf("\nuse: --layers-per-device %s\n", flag.c_str());
  return kOk;
}

}  // namespace tessera::tool
