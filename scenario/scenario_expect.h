// Scenario expectations on metrics and A/B comparisons (tessera/scenario/scenario_metrics.h): reading them from a
// scenario file, measuring a session and checking. Internal to the harness (the readers throw
// json_read::ParseProblem like the other file readers; scenario.cpp catches it).
#pragma once

#include <string>
#include <vector>

#include "common/json_read.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/scenario/scenario.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::llama;

// "expect.metrics" (`comparison` false) or "compare.expect" (true: bounds may also be "base" or a ratio): a list of
// metric expectations. Errors name the element and the key.
std::vector<MetricExpect> read_metric_expects(const json_read::json& v, const std::string& path, bool comparison);
// "compare": {"with": {policy keys}, "expect": [...]}; `policy` is the scenario's own (read before).
Comparison read_comparison(const json_read::json& v, const std::string& path, const PlacementPolicy& policy);

// Checks each metric expectation against a session whose run succeeded; appends one result each.
void check_metrics(Session& session, const std::vector<MetricExpect>& expects, std::vector<ExpectationResult>* out);
// The same for a run of the meta device (split_mode tensor): the simulator's metrics, its splits and each device's
// peak and compute bytes; a metric only a session's scheduler records (split_copy_bytes, reserves, re-plans) fails its
// expectation, saying so.
void check_metrics(const TensorParallelRun& run, const std::vector<MetricExpect>& expects,
                   std::vector<ExpectationResult>* out);
// Runs the scenario's variant (sc.compare) as `sc` was run, and checks each of its expectations against `base` (the
// session of the run just made; nullptr when it failed). Appends one result each (and one for a variant that fails).
void check_comparison(const Scenario& sc, Session* base, const Registry* real_devices,
                      std::vector<ExpectationResult>* out);

}  // namespace tessera::scenario
