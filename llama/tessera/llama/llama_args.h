// llama.cpp's spelling of its options (common/arg.cpp): the single-dash names (-ngl, -ts, -ot, -cmoe, ...) and the
// double-dash names they stand for, which `tessera` registers (docs/scenarios.md, "Placement options"). The meaning of
// the run options is tessera/llama/llama_run.h's.
#pragma once

#include <string>
#include <vector>

namespace tessera::llama {

// The arguments with llama.cpp's single-dash long names ("-ngl") rewritten to their double-dash names
// ("--n-gpu-layers"); everything else as given. -np is --n-parallel: tessera's --parallel is the scheduler's pipeline
// parallelism (the "parallel" policy key).
std::vector<std::string> llama_argv(int argc, char** argv);

}  // namespace tessera::llama
