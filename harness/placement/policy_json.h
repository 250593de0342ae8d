// The scenario side of the placement-option table (tessera/harness/placement/policy_options.h): reads a scenario's
// "policy" object. Internal to the harness (it throws json_read::ParseProblem like the other file readers).
#pragma once

#include <string>

#include "common/json_read.h"
#include "tessera/harness/placement/policy.h"

namespace tessera::harness {

// Reads every key of the table present in `v` (an object; unknown keys are errors naming the closest key).
void read_policy_json(const json_read::json& v, const std::string& path, PlacementPolicy* policy);

}  // namespace tessera::harness
