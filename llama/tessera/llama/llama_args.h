// llama.cpp's spelling of its options (common/arg.cpp): the single-dash names (-ngl, -ts, -ot, -cmoe, ...) and the
// double-dash names they stand for, which `tessera` registers (docs/scenarios.md, "Placement options"). The meaning of
// the run options is tessera/llama/llama_run.h's.
#pragma once

#include <string>
#include <vector>

namespace tessera::llama {

// The arguments with llama.cpp's single-dash long names ("-ngl") rewritten to their double-dash names
// ("--n-gpu-layers"), a single-dash option with "=VALUE" split from its value ("-ts=3,1" -> "--tensor-split=3,1",
// "-c=4096" -> "-c" "4096"); everything else as given. -np and llama.cpp's --parallel N are --n-parallel: tessera's
// --pipeline-parallel (--parallel without a number) is the scheduler's pipeline parallelism (the "parallel" policy
// key).
std::vector<std::string> llama_argv(int argc, char** argv);
// llama.cpp's single-dash names that llama_argv rewrites ("-ngl", "-ts", ...), for a did-you-mean.
std::vector<std::string> llama_single_dash_names();

}  // namespace tessera::llama
