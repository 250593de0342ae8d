// Subcommands of the `tessera` tool kept out of main.cpp, and the pieces of `tessera plan`'s report that live in
// their own files (docs/scenarios.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>

#include "tessera/harness/split_causes.h"

namespace tessera::tool {

// `tessera topologies [--show NAME] [--json]`: the presets, or one preset (or file) as JSON. Returns the exit code.
int cmd_topologies(const std::string& show, bool json);

// The plan's split causes as JSON (`tessera plan --json`, key "split_causes"): the split count and, per cause, its
// name, description, split count, top layers and ops, and the option with the split count planned again.
nlohmann::ordered_json split_causes_json(const harness::SplitCauseSummary& summary);

}  // namespace tessera::tool
