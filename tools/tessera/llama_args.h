// llama.cpp's spelling on tessera's command line (docs/scenarios.md, "Placement options"): its single-dash names
// (-ngl, -ts, -ot, -cmoe, ...) and its run options (-c, -b, -ub, -ctk, -ctv, -fa, -np, --kv-unified, --swa-full),
// with llama.cpp's meaning (common/arg.cpp; src/llama-context.cpp for how the context and batches are rounded).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "tessera/status.h"
#include "tessera/types.h"

namespace tessera::tool {

// The arguments with llama.cpp's single-dash long names ("-ngl") rewritten to their double-dash names
// ("--n-gpu-layers"), which CLI11 can take; everything else as given.
std::vector<std::string> llama_argv(int argc, char** argv);

// Every placement option of the table (tessera/harness/policy_options.h), registered on `app`: each occurrence is
// appended to `given` as (key, text) in command-line order, so -ot, -cmoe and -ncmoe keep llama.cpp's order (the
// first matching override wins).
void add_policy_options(CLI::App* app, std::vector<std::pair<std::string, std::string>>* given);

struct LlamaRunArgs {
  std::optional<int64_t> ctx_size, batch, ubatch;  // -c, -b, -ub
  std::optional<std::string> cache_k, cache_v, flash_attn, n_parallel;
  bool kv_unified = false, swa_full = false;
};
void add_llama_run_options(CLI::App* app, LlamaRunArgs* a);

// What the run options come to, in tessera's terms.
struct RunShape {
  int64_t ctx = 0;     // 0: as before
  int64_t tokens = 0;  // 0: as before
  std::optional<bool> flash_attn;
  std::optional<Type> kv_type;
};
// Errors (kInvalidArgument) name the flag: a bad value, or what Tessera does not support yet.
Result<RunShape> resolve_llama_run(const LlamaRunArgs& a);

}  // namespace tessera::tool
