// Scenario files' extra models (docs/scenarios.md "Extra models"): the root keys "draft" and "mmproj", the expectations
// "extra_models_fit" and "extra_overflow_contains", and their check after the run (internal to the scenario parser
// and runner, scenario.cpp).
#pragma once

#include <functional>
#include <string>

#include "common/json_read.h"
#include "tessera/scenario/scenario.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::llama;

// Reads "draft" and "mmproj" of the scenario's root into scenario->extra (files relative to the scenario's directory,
// read and checked here; -devd names checked against scenario->config.topology). Throws ParseProblem naming the key.
void parse_extra_models(const json_read::json& root, const std::string& source, Scenario* scenario);
// Reads "extra_models_fit" and "extra_overflow_contains" of an expectations object (their keys are allowed by the
// caller).
void parse_extra_expect(const json_read::json& v, const std::string& path, Expectations* e);
// Places the extra models `extra` next to the run session and checks the expectations on them; `check` records each.
void check_extra_expect(Session& s, const ExtraModels& extra, const Expectations& e, const Registry* real_devices,
                        const std::function<void(std::string what, bool ok, std::string detail)>& check);

}  // namespace tessera::scenario
