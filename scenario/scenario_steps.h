// The scenario keys of run lifecycles (docs/scenarios.md): "run.steps" (each a step name, or an object for a step
// that must fail) and "run.inputs". Internal to the harness (throws json_read::ParseProblem like the other readers).
#pragma once

#include <string>
#include <vector>

#include "common/json_read.h"
#include "tessera/harness/session/session.h"

namespace tessera::scenario {

using namespace tessera::harness;

// "run.steps": a list of 1 to 1000 steps, each "reserve", "alloc", "compute", "synchronize", "reset", the first
// three with "-next", or {"step": NAME, "fails": true | "TEXT"} for a step that must fail (with an error containing
// TEXT).
std::vector<Session::StepSpec> read_steps(const json_read::json& v, const std::string& path);

// "run.inputs": "fixed" (false) or "per_evaluation" (true).
bool read_inputs_kind(const json_read::json& v, const std::string& path);

}  // namespace tessera::scenario
