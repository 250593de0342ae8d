// The placement options and llama.cpp's run options (-c, -b, -ub, -ctk, -ctv, -fa, -np, --kv-unified, --swa-full) on
// tessera's command line (docs/scenarios.md, "Placement options"), registered on CLI11 under their double-dash names;
// main rewrites llama.cpp's single-dash spellings to those first (tessera/llama/llama_args.h), and the run options
// mean what llama.cpp means (tessera/llama/llama_run.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/llama/llama_run.h"

namespace tessera::tool {

// Every placement option of the table (tessera/harness/placement/policy_options.h), registered on `app`: each
// occurrence is appended to `given` as (key, text) in command-line order, so -ot, -cmoe and -ncmoe keep llama.cpp's
// order (the first matching override wins).
void add_policy_options(CLI::App* app, std::vector<std::pair<std::string, std::string>>* given);

using llama::LlamaRunArgs;
void add_llama_run_options(CLI::App* app, LlamaRunArgs* a);

}  // namespace tessera::tool
