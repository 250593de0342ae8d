// Which device each layer of a session goes to, for any policy, without making the session (no graph is built, no
// weight placed): the devices of a fresh simulator of the session's topology and options and the layer count it
// places. Scenario files use it to tell whether a file of an older version places its layers differently under the
// current rules, and to convert it (scenario/scenario_version.cpp, docs/scenarios.md "Versions").
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/harness/placement/policy.h"
#include "tessera/harness/session/session.h"
#include "tessera/sim/simulator.h"
#include "tessera/status.h"

namespace tessera::harness {

class LayerMaps {
 public:
  // The simulator of config.topology and config.sim as Session::create makes it, except that a device that wraps a
  // real one is simulated alone (the layer split reads only each device's type and memory); the layer count of the
  // model (config.model.n_layer) or of the serialized graph (config.graph: one more than the highest layer its
  // weights name). Errors: the simulator's and the graph reader's.
  static Result<std::unique_ptr<LayerMaps>> create(const SessionConfig& config);

  int n_layer() const { return n_layer_; }
  const std::vector<Device*>& devices() const { return devices_; }
  // The map of n_layer + 1 entries (the output layer last), indices into devices(): by the current rules
  // (layer_devices) and by those before commit 9a5a0e0 (layer_devices_v1).
  Result<std::vector<int>> current(const PlacementPolicy& policy) const;
  Result<std::vector<int>> version1(const PlacementPolicy& policy) const;
  // Whether the output layer's entry places anything: a model's output weights, or a serialized graph's weights named
  // "output..." (place_model puts those on the output layer's device); a graph without them has no output layer.
  bool output_matters() const { return output_matters_; }
  // Whether two maps place every weight the same (the output layer's entry counts when it matters).
  bool same(const std::vector<int>& a, const std::vector<int>& b) const;
  // A map in words: "layers 0-23 on gpu0, layers 24-31 and the output layer on gpu1".
  std::string describe(const std::vector<int>& map) const;

 private:
  LayerMaps() = default;
  std::unique_ptr<sim::Simulator> sim_;
  std::vector<Device*> devices_;
  int n_layer_ = 0;
  bool output_matters_ = true;
};

}  // namespace tessera::harness
