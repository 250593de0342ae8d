// Layer maps without a session (see tessera/harness/session/layer_map.h).
#include "tessera/harness/session/layer_map.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "session_detail.h"
#include "tessera/harness/graph/graph_io.h"

namespace tessera::harness {

Result<std::unique_ptr<LayerMaps>> LayerMaps::create(const SessionConfig& config) {
  std::unique_ptr<LayerMaps> m(new LayerMaps());
  sim::TopologyConfig topology = config.topology;
  for (sim::DeviceConfig& d : topology.devices) d.wraps.clear();
  auto sim = sim::Simulator::create(topology, config.sim, nullptr);
  if (!sim.ok()) return sim.status();
  m->sim_ = std::move(sim).value();
  m->devices_ = devices_of(*m->sim_);
  if (config.graph) {
    auto g = graph_from_json(config.graph->text, config.graph->source);
    if (!g.ok()) return g.status();
    m->n_layer_ = layer_count(g.value().weights);
    m->output_matters_ = false;
    for (const Tensor* w : g.value().weights) {
      m->output_matters_ = m->output_matters_ || std::strncmp(w->name, "output", 6) == 0;
    }
  } else {
    m->n_layer_ = config.model.n_layer;
  }
  return m;
}

Result<std::vector<int>> LayerMaps::current(const PlacementPolicy& policy) const {
  return layer_devices(devices_, n_layer_, policy);
}

Result<std::vector<int>> LayerMaps::version1(const PlacementPolicy& policy) const {
  return layer_devices_v1(devices_, n_layer_, policy);
}

bool LayerMaps::same(const std::vector<int>& a, const std::vector<int>& b) const {
  if (a.size() != b.size() || a.empty()) return a == b;
  return std::equal(a.begin(), a.end() - (output_matters_ ? 0 : 1), b.begin());
}

std::string LayerMaps::describe(const std::vector<int>& map) const {
  const int n = static_cast<int>(map.size()) - 1;  // the output layer's entry
  const int last = output_matters_ ? n : n - 1;    // the last entry described
  if (last < 0) return "no layer";
  std::string out;
  for (int a = 0; a <= last;) {
    int b = a;
    while (b + 1 <= last && map[static_cast<size_t>(b + 1)] == map[static_cast<size_t>(a)]) ++b;
    std::string what;
    if (a == n) {
      what = "the output layer";
    } else {
      const int last = b == n ? n - 1 : b;
      what = last == a ? "layer " + std::to_string(a) : "layers " + std::to_string(a) + "-" + std::to_string(last);
      if (b == n) what += " and the output layer";
    }
    const int d = map[static_cast<size_t>(a)];
    const std::string device =
        d >= 0 && static_cast<size_t>(d) < devices_.size() ? devices_[static_cast<size_t>(d)]->name() : "?";
    out += (out.empty() ? "" : ", ") + what + " on " + device;
    a = b + 1;
  }
  return out;
}

}  // namespace tessera::harness
