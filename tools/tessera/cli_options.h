// llama.cpp's spelling on tessera's command line (docs/scenarios.md, "Placement options"): its single-dash names
// (-ngl, -ts, -ot, -cmoe, ...) and its run options (-c, -b, -ub, -ctk, -ctv, -fa, -np, --kv-unified, --swa-full),
// with llama.cpp's meaning (common/arg.cpp; src/llama-context.cpp for how the context and batches are rounded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/harness/llama_run.h"

namespace tessera::tool {

// The arguments with llama.cpp's single-dash long names ("-ngl") rewritten to their double-dash names
// ("--n-gpu-layers"), which CLI11 can take; everything else as given.
std::vector<std::string> llama_argv(int argc, char** argv);

// Every placement option of the table (tessera/harness/policy_options.h), registered on `app`: each occurrence is
// appended to `given` as (key, text) in command-line order, so -ot, -cmoe and -ncmoe keep llama.cpp's order (the
// first matching override wins).
void add_policy_options(CLI::App* app, std::vector<std::pair<std::string, std::string>>* given);

using harness::LlamaRunArgs;
void add_llama_run_options(CLI::App* app, LlamaRunArgs* a);

}  // namespace tessera::tool
