// One simulated placement experiment: a topology, a model, a placement policy and simulator options, assembled into
// a simulator, backends, placed weights and a scheduler. The `tessera` tool and the scenario runner both drive it:
// plan (split + allocate), run (compute, check against the CPU reference), and report.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "models/llama.h"
#include "tessera/sched.h"
#include "tessera/sim/config.h"
#include "tessera/sim/policy.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

struct SessionConfig {
  TopologyConfig topology;
  models::LlamaConfig model;
  PlacementPolicy policy;
  SimOptions sim;
  uint64_t model_seed = 1;  // weights, cache and inputs
};

struct DeviceMemory {
  std::string device;
  size_t weights = 0, cache = 0, compute = 0;  // bytes
  size_t used = 0, peak = 0, capacity = 0;     // the simulated device's accounting
  int layers = 0;
};

struct RunStats {
  double makespan_us = 0;
  size_t races = 0;
  std::vector<std::string> errors;
  bool checked = false;   // numerics compared (memory-backed mode only)
  double nmse = 0;        // logits vs the CPU reference
  bool nan_mismatch = false;
};

class Session {
 public:
  // Errors: an invalid topology or model, a policy that does not apply, weights that do not fit (naming the device),
  // a scheduler that cannot be created.
  static Result<std::unique_ptr<Session>> create(const SessionConfig& config);
  ~Session();

  // Splits and allocates the graph (the scheduler's alloc_graph): a scheduling error or an allocation failure.
  Status plan();
  // Sets the inputs, computes `evaluations` times (asynchronously, then synchronizes) and, in memory-backed mode,
  // compares the logits with the same model computed on the plain CPU backend.
  Result<RunStats> run(int evaluations = 1, bool check_numerics = true);

  const SessionConfig& config() const { return config_; }
  Simulator& sim() { return *sim_; }
  Scheduler& sched() { return *sched_; }
  Graph& graph() { return *model_.graph; }
  const models::LlamaGraph& model() const { return model_; }
  const Placement& placement() const { return placement_; }
  std::vector<DeviceMemory> memory() const;
  // A node or leaf of the graph by name (the last node of that name), nullptr when none.
  const Tensor* find_tensor(const std::string& name) const;

  // Readable reports with a stable ordering.
  std::string summary_table() const;   // devices: layers, weights, cache, compute, peak / capacity
  std::string splits_table() const;    // split, backend, nodes, inputs (with their source backend and size)
  std::string explain(const std::string& tensor_name) const;  // backend, cause, split, copy
  std::string dot() const;             // Graphviz of the splits, nodes coloured by backend

 private:
  Session() = default;
  SessionConfig config_;
  std::unique_ptr<Simulator> sim_;
  std::vector<std::unique_ptr<Backend>> backends_;
  models::LlamaGraph model_;
  Placement placement_;
  std::unique_ptr<Scheduler> sched_;
};

}  // namespace tessera::sim
