// Scenario file versions (see scenario_version.h, docs/scenarios.md "Versions").
#include "scenario_version.h"

#include <utility>

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::harness::json_read;

namespace {

constexpr const char* kPlacementKeys[] = {"n_gpu_layers", "tensor_split", "layers_per_device"};
// The policy keys that came with 9a5a0e0.
constexpr const char* kVersion2Keys[] = {"split_mode", "main_gpu",  "override_tensor",
                                         "cpu_moe",    "n_cpu_moe", "kv_offload"};

// "n_gpu_layers 1, tensor_split [3, 1]": the placement keys of a policy object as written.
std::string keys_text(const json* policy) {
  std::string out;
  for (const char* key : kPlacementKeys) {
    const json* v = policy != nullptr ? member(*policy, key) : nullptr;
    if (v != nullptr) out += (out.empty() ? "" : ", ") + std::string(key) + " " + one_line(*v);
  }
  return out.empty() ? "no n_gpu_layers or tensor_split (every layer offloaded, split by the GPUs' memory)" : out;
}

template <typename T>
std::string list_text(const std::vector<T>& v) {
  std::string out = "[";
  for (size_t i = 0; i < v.size(); ++i) out += (i > 0 ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}

size_t gpu_count(const LayerMaps& m) {
  size_t n = 0;
  for (size_t i = 0; i + 1 < m.devices().size(); ++i) n += m.devices()[i]->type() != DeviceType::kCpu ? 1 : 0;
  return n;
}

// What 9a5a0e0 changed that matters for this policy.
std::string why(const PlacementPolicy& p, const LayerMaps& m) {
  std::string out;
  if (p.layers_per_device.empty() && p.n_gpu_layers >= 1 && p.n_gpu_layers <= m.n_layer()) {
    out =
        "n_gpu_layers N now counts the output layer as llama.cpp's -ngl does: it offloads the output layer and the "
        "last N - 1 layers, where version 1 offloaded the last N layers and kept the output layer on the CPU";
  }
  if (p.layers_per_device.empty() && gpu_count(m) >= 2) {
    out += std::string(out.empty() ? "" : "; ") +
           "the layers are now split across the GPUs as llama.cpp splits them: the output layer among them, each to "
           "the first GPU whose cumulative share is above the layer's position, the default shares being each GPU's "
           "free memory; version 1 split the layers alone, rounding at each layer's middle, by each GPU's total "
           "memory";
  }
  return out.empty() ? "" : " (" + out + ")";
}

std::string placed(const Result<std::vector<int>>& map, const LayerMaps& m) {
  return map.ok() ? m.describe(map.value()) : "nothing: it refuses the policy (" + map.status().message() + ")";
}

}  // namespace

int read_version(const json& root) { return get_version(root, "scenario files", kScenarioVersion); }

bool uses_version2_keys(const json& root) {
  const json* policy = member(root, "policy");
  const json* compare = member(root, "compare");
  const json* with = compare != nullptr ? member(*compare, "with") : nullptr;
  for (const json* p : {policy, with}) {
    if (p == nullptr || !p->is_object()) continue;
    for (const char* key : kVersion2Keys) {
      if (member(*p, key) != nullptr) return true;
    }
  }
  return false;
}

void refuse_version2_keys(const json& policy, const std::string& path) {
  for (const char* key : kVersion2Keys) {
    if (member(policy, key) != nullptr) {
      fail(child(path, key),
           "version 1 has no such key (it came with llama.cpp's meanings in commit 9a5a0e0, version "
           "2): a file that uses it was written for the current rules; set \"version\": 2");
    }
  }
}

PlacementPolicy PolicyConversion::apply(PlacementPolicy policy) const {
  if (!changed) return policy;
  if (!layers_per_device.empty()) {
    policy.layers_per_device = layers_per_device;
    policy.n_gpu_layers = -1;
    policy.tensor_split.clear();
  } else {
    policy.tensor_split.assign(tensor_split.begin(), tensor_split.end());
  }
  return policy;
}

VersionRules::VersionRules(const SessionConfig& config, std::string source)
    : config_(&config), source_(std::move(source)) {}

const LayerMaps* VersionRules::maps() {
  if (!tried_) {
    tried_ = true;
    auto m = LayerMaps::create(*config_);
    if (m.ok()) {
      maps_ = std::move(m).value();
    } else {
      maps_error_ = m.status().message();
    }
  }
  return maps_.get();
}

void VersionRules::require_same(const PlacementPolicy& policy, const json* policy_json, const std::string& path) {
  const LayerMaps* m = maps();
  if (m == nullptr) return;
  const auto before = m->version1(policy), now = m->current(policy);
  if (!before.ok() && !now.ok()) return;  // both refuse it: the session says why
  if (before.ok() && now.ok() && m->same(before.value(), now.value())) return;
  fail(path, "no \"version\", and commit 9a5a0e0 changed where this file's layers go: with " + keys_text(policy_json) +
                 ", version 1 (the rules before it) put " + placed(before, *m) +
                 "; version 2 (the current rules) puts " + placed(now, *m) + why(policy, *m) +
                 ". If the file was written for the current rules, add \"version\": 2; if it was written before "
                 "9a5a0e0, `tessera upgrade " +
                 source_ + "` converts it (docs/scenarios.md, \"Versions\")");
}

PolicyConversion VersionRules::convert(const PlacementPolicy& policy, const json* policy_json,
                                       const std::string& path) {
  PolicyConversion c;
  c.path = path;
  const LayerMaps* m = maps();
  if (m == nullptr) {
    fail(path, "cannot convert the placement to version 2: the layers cannot be placed (" + maps_error_ + ")");
  }
  const auto before = m->version1(policy), now = m->current(policy);
  if (!before.ok()) {
    if (!now.ok()) return c;  // both refuse it
    const bool split = policy_json != nullptr && member(*policy_json, "tensor_split") != nullptr;
    fail(split ? child(path, "tensor_split") : path,
         "version 1 refused this placement (" + before.status().message() + "), and the current rules place it (" +
             placed(now, *m) +
             "): no version 2 file means what this one meant; set \"version\": 2 to take the current meaning");
  }
  const std::vector<int>& map = before.value();
  if (now.ok() && m->same(now.value(), map)) {
    c.note = path + ": " + keys_text(policy_json) + " places the layers the same under version 2: " + m->describe(map);
    return c;
  }
  const int n = m->n_layer();
  const int cpu = static_cast<int>(m->devices().size()) - 1;
  std::vector<int> gpus;
  for (int i = 0; i < cpu; ++i) {
    if (m->devices()[static_cast<size_t>(i)]->type() != DeviceType::kCpu) gpus.push_back(i);
  }
  // Layers per GPU in version 1's map (it puts every offloaded layer on a GPU, in GPU order).
  std::vector<int> counts(gpus.size(), 0);
  auto gpu_of = [&](int device) {
    for (size_t g = 0; g < gpus.size(); ++g) {
      if (gpus[g] == device) return static_cast<int>(g);
    }
    return -1;
  };
  for (int il = 0; il < n; ++il) {
    const int d = map[static_cast<size_t>(il)];
    if (d == cpu) continue;
    const int g = gpu_of(d);
    if (g < 0) {
      fail(path, "cannot convert the placement: layer " + std::to_string(il) + " is on no GPU (please report)");
    }
    ++counts[static_cast<size_t>(g)];
  }
  auto trimmed = [](std::vector<int> v) {
    while (v.size() > 1 && v.back() == 0) v.pop_back();
    return v;
  };
  const int output = map[static_cast<size_t>(n)];
  std::string written;
  if (output == cpu) {
    // Offloaded layers with the output layer on the CPU: only layers_per_device says that now.
    c.layers_per_device = trimmed(counts.empty() ? std::vector<int>{0} : counts);
    written = "layers_per_device " + list_text(c.layers_per_device);
  } else {
    // Every layer and the output layer offloaded (version 1's n_gpu_layers -1 or above n_layer): n_gpu_layers means
    // the same, and the layers per GPU, the output layer with its GPU, as shares give version 1's split exactly.
    const int g = gpu_of(output);
    if (g < 0) fail(path, "cannot convert the placement: the output layer is on no GPU (please report)");
    ++counts[static_cast<size_t>(g)];
    c.tensor_split = trimmed(counts);
    written = "tensor_split " + list_text(c.tensor_split);
  }
  c.changed = true;
  const auto check = m->current(c.apply(policy));
  if (!check.ok() || !m->same(check.value(), map)) {
    fail(path, "cannot convert the placement to version 2 (" + written + " would put " + placed(check, *m) +
                   ", version 1 put " + m->describe(map) + "; please report)");
  }
  c.note = path + ": " + keys_text(policy_json) + " -> " + written + ": version 1 put " + m->describe(map) + "; with " +
           keys_text(policy_json) + " the current rules put " + placed(now, *m) + why(policy, *m);
  return c;
}

void VersionRules::require_variant(const PlacementPolicy& as_written, const PlacementPolicy& as_read,
                                   const std::string& path, int version) {
  const LayerMaps* m = maps();
  if (m == nullptr) return;
  const auto before = m->version1(as_written), now = m->current(as_read);
  if (!before.ok() && !now.ok()) return;
  if (before.ok() && now.ok() && m->same(before.value(), now.value())) return;
  if (version == 0) {
    fail(path,
         "no \"version\", and commit 9a5a0e0 changed where this variant's layers go: version 1 (the rules before "
         "it) put " +
             placed(before, *m) + "; version 2 (the current rules) puts " + placed(now, *m) + why(as_written, *m) +
             ". If the file was written for the current rules, add \"version\": 2 (docs/scenarios.md, "
             "\"Versions\")");
  }
  fail(path, "for this variant version 1 put " + placed(before, *m) +
                 "; over the converted \"policy\" the current "
                 "rules put " +
                 placed(now, *m) +
                 ". Version 1 had no \"compare\" (it came after commit 9a5a0e0): set \"version\": 2 and write the "
                 "variant's keys for the current rules");
}

}  // namespace tessera::scenario
