// Scenario file versions (docs/scenarios.md, "Versions"): reading the "version" key, refusing a file without one whose
// layers the rules of commit 9a5a0e0 place differently, and reading a file of version 1 as it was meant by converting
// its placement keys to version 2's. Internal to scenario/ (the readers throw json_read::ParseProblem like the other
// file readers; scenario.cpp catches it); `tessera upgrade` writes the same conversion into the file (upgrade.cpp).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_read.h"
#include "tessera/harness/session/layer_map.h"
#include "tessera/scenario/scenario.h"

namespace tessera::scenario {

// The file's "version": 0 when it has none, else 1 .. kScenarioVersion. A newer version, or anything but a whole
// number in range, is an error naming the key.
int read_version(const harness::json_read::json& root);

// Whether the "policy" or "compare"."with" object uses a key that came with 9a5a0e0 (below): a file without a version
// that does was written for version 2.
bool uses_version2_keys(const harness::json_read::json& root);

// Version 1 did not have the keys that came with 9a5a0e0 (split_mode, main_gpu, override_tensor, cpu_moe, n_cpu_moe,
// kv_offload): in a policy object of a version 1 file they are an error that says the file was written for version 2.
void refuse_version2_keys(const harness::json_read::json& policy, const std::string& path);

// The placement keys of one policy of a version 1 file, converted: the same layer map under the current rules.
struct PolicyConversion {
  std::string path;      // "policy"
  bool changed = false;  // false: the keys mean the same under version 2
  // When changed, either: layers_per_device (non-empty; n_gpu_layers and tensor_split go), when version 1 kept the
  // output layer on the CPU with layers offloaded (only layers_per_device does that now); or tensor_split (whole
  // numbers: the layers per GPU, the output layer counted with the GPU that takes it; n_gpu_layers stays, it offloads
  // every layer), when version 1 offloaded every layer and the output layer.
  std::vector<int> layers_per_device;
  std::vector<int> tensor_split;
  std::string note;  // one line: what changed and why ("policy: n_gpu_layers 1 -> layers_per_device [1]: ...")

  // The policy with the converted keys.
  harness::PlacementPolicy apply(harness::PlacementPolicy policy) const;
};

// The placement of a scenario read without a version or as version 1, checked (version 0) or converted (version 1)
// against the current rules. Made after the topology, the model or graph and the run options are read (the layer
// maps need the devices and the layer count).
class VersionRules {
 public:
  VersionRules(const harness::SessionConfig& config, std::string source);

  // Version 0: an error at `path` when the policy's layers are placed differently by version 1's rules and the
  // current ones; the message names both placements and what to do. `policy_json`: the policy object as written (its
  // keys are named in the message; nullptr when the file has none).
  void require_same(const harness::PlacementPolicy& policy, const harness::json_read::json* policy_json,
                    const std::string& path);
  // Version 1: the conversion of the policy (an error when there is none: all-zero tensor_split, which version 1
  // refused; or when the layers cannot be placed at all to compare).
  PolicyConversion convert(const harness::PlacementPolicy& policy, const harness::json_read::json* policy_json,
                           const std::string& path);
  // A variant of the base policy ("compare"): `as_written` read over the file's own base policy, `as_read` over the
  // base policy as converted; an error at `path` when as_read is placed differently under the current rules than
  // as_written was under the file's version's.
  void require_variant(const harness::PlacementPolicy& as_written, const harness::PlacementPolicy& as_read,
                       const std::string& path, int version);

 private:
  // nullptr when the maps cannot be made (the session will report the error).
  const harness::LayerMaps* maps();

  const harness::SessionConfig* config_;
  std::string source_;
  std::unique_ptr<harness::LayerMaps> maps_;
  std::string maps_error_;  // why there are none
  bool tried_ = false;
};

// parse_scenario with a version for a file that has none: 0 (as parse_scenario: such a file must place its layers
// the same under both versions) or 1 (`tessera upgrade`: a file without a version was written before 9a5a0e0).
// `conversions`, when not null, receives the conversion of each policy of a version 1 file.
Result<Scenario> parse_scenario_as(std::string_view text, const std::string& source, int version_if_absent,
                                   std::vector<PolicyConversion>* conversions);

}  // namespace tessera::scenario
