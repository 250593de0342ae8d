// Scenario files: a topology (a preset's name, a file or inline), a model, a placement policy, the simulator's
// options and expectations (at least one, or "expect": "nothing"); `tessera repro FILE` runs one and checks its
// expectations. Format: docs/scenarios.md.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/scenario/scenario_metrics.h"
#include "tessera/llama/extra_specs.h"
#include "tessera/harness/session/session.h"
#include "tessera/status.h"

namespace tessera::scenario {

struct Expectations {
  // "scheduling": "ok" (plan and run succeed) or "error" (they fail; error_contains then names a part of the message).
  std::optional<bool> scheduling_ok;
  std::string error_contains;
  std::optional<int> max_splits, min_splits;
  std::optional<int> max_split_inputs;  // every split copies in at most this many inputs
  struct NodeOn {
    std::string node;    // tensor name
    std::string device;  // expected backend (device name)
  };
  std::vector<NodeOn> nodes;
  struct PeakMemory {
    std::string device;
    size_t max_bytes = 0;
  };
  std::vector<PeakMemory> peak_memory;
  struct Weights {
    std::string device;
    size_t bytes = 0;
  };
  std::vector<Weights> weights;   // the bytes of weights the policy placed on the device, exactly
  std::vector<Weights> kv_cache;  // the bytes of KV cache on the device, exactly
  std::optional<bool> no_race;
  std::optional<bool> outputs_match_reference;
  double max_nmse = 1e-4;
  bool allow_non_finite = false;    // outputs_match_reference accepts NaN/Inf where the reference has the same
  std::optional<int> max_reserves;  // re-plans of the compute buffers over all evaluations
  std::vector<MetricExpect>
      metrics;  // "metrics": bounds on time, traffic, synchronizations, plans (scenario_metrics.h)
  // The extra models ("draft", "mmproj"): whether they fit beside the main model, and a part of an overflow's line.
  std::optional<bool> extra_models_fit;
  std::string extra_overflow_contains;

  // Whether any expectation is set (max_nmse and allow_non_finite only qualify outputs_match_reference).
  bool checks_something() const {
    return scheduling_ok || !error_contains.empty() || max_splits || min_splits || max_split_inputs || !nodes.empty() ||
           !peak_memory.empty() || !weights.empty() || !kv_cache.empty() || no_race.value_or(false) ||
           outputs_match_reference.value_or(false) || max_reserves || !metrics.empty() || extra_models_fit ||
           !extra_overflow_contains.empty();
  }
};

// The scenario file format's version (the "version" key; docs/scenarios.md, "Versions"). 2: n_gpu_layers and
// tensor_split mean what they mean in llama.cpp (commit 9a5a0e0); 1: Tessera's rules before it. A file without the key
// is read as version 2 when both versions place its layers the same way, and refused otherwise.
constexpr int kScenarioVersion = 2;

struct Scenario {
  std::string name;
  std::string description;
  std::string source;  // file name
  int version = 0;     // the file's "version" (0: none)
  // A version 1 file is read as it was meant: its placement keys converted to version 2's, one line each (what
  // `tessera upgrade` writes into the file).
  std::vector<std::string> conversions;
  harness::SessionConfig config;
  llama::ExtraModels extra;  // "draft" and "mmproj": placed beside the planned model when an expectation is on them
  int evaluations = 1;
  std::vector<harness::Session::StepSpec>
      steps;      // "run.steps": when present, Session::run_steps instead of `evaluations`
  int seeds = 1;  // run with simulator seeds seed, seed + 1, ..., seed + seeds - 1; every run must pass
  Expectations expect;
  std::optional<Comparison> compare;  // "compare": a second run with other policy keys, checked against this one
};

// Errors name the source, the location and what was expected.
Result<Scenario> parse_scenario(std::string_view text, const std::string& source);
Result<Scenario> load_scenario_file(const std::string& path);

struct ExpectationResult {
  std::string what;  // "max_splits <= 12"
  bool ok = false;
  std::string detail;  // what was found
};

struct ScenarioOutcome {
  std::vector<ExpectationResult> results;
  bool passed = false;
  std::string error;        // the session's error, if planning or running failed
  std::string report;       // summary table (within 80 columns) and splits
  std::string report_wide;  // the same with the summary table's --wide layout
};

// Builds the session, plans, runs, checks every expectation. Never aborts; errors become failed expectations. With
// several seeds: the outcome of the first seed that fails (its details name the seed), else the last one's.
// `real_devices`: as for Session::create.
ScenarioOutcome run_scenario(const Scenario& scenario, const Registry* real_devices);

}  // namespace tessera::scenario
