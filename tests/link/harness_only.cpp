// Links only tessera::harness (and what it depends on: sim, models, the core, the CPU backend) and the CPU-only
// registry of real devices: no llama.cpp rules (tessera::llama) and no scenario files (tessera::scenario), which sit
// above the harness (docs/architecture.md, "Layers and rooms"). Plans the tiny model on the 1gpu preset in
// metadata-only mode and checks where its two layers went.
#include <cstdio>

#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"

using namespace tessera;

int main() {
  harness::SessionConfig config;
  auto topology = harness::topology_preset("1gpu");
  auto model = models::preset("tiny");
  if (!topology.ok() || !model.ok()) {
    std::fprintf(stderr, "harness_only: the 1gpu preset or the tiny model is missing\n");
    return 1;
  }
  config.topology = topology.value();
  config.model = model.value();
  config.sim.mode = sim::MemoryMode::kMetadata;
  auto session = harness::Session::create(config, &builtin_registry());
  if (!session.ok()) {
    std::fprintf(stderr, "harness_only: %s\n", session.status().to_string().c_str());
    return 1;
  }
  const Status planned = session.value()->plan();
  if (!planned.ok()) {
    std::fprintf(stderr, "harness_only: %s\n", planned.to_string().c_str());
    return 1;
  }
  // -ngl defaults to every layer: both repeating layers of tiny on gpu0 (1gpu.json: one 24 GiB GPU and the CPU).
  int gpu_layers = 0;
  for (const harness::DeviceMemory& d : session.value()->memory()) {
    if (d.device == "gpu0") gpu_layers = d.layers;
  }
  if (gpu_layers != 2) {
    std::fprintf(stderr, "harness_only: %d layers on gpu0, expected 2\n", gpu_layers);
    return 1;
  }
  std::printf("harness_only: ok (tiny on 1gpu: %d splits)\n", session.value()->sched().n_splits());
  return 0;
}
