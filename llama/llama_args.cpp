// llama.cpp's spelling of its options (see tessera/llama/llama_args.h).
#include "tessera/llama/llama_args.h"

#include <utility>

namespace tessera::llama {

namespace {

// llama.cpp's single-dash long names (common/arg.cpp) and the double-dash names tessera registers for them. -np is
// --n-parallel here: tessera's --parallel is the scheduler's pipeline parallelism (the "parallel" policy key).
constexpr std::pair<const char*, const char*> kShortNames[] = {
    {"-ngl", "--n-gpu-layers"},   {"-ts", "--tensor-split"},  {"-sm", "--split-mode"},   {"-mg", "--main-gpu"},
    {"-ot", "--override-tensor"}, {"-cmoe", "--cpu-moe"},     {"-ncmoe", "--n-cpu-moe"}, {"-nkvo", "--no-kv-offload"},
    {"-ctk", "--cache-type-k"},   {"-ctv", "--cache-type-v"}, {"-fa", "--flash-attn"},   {"-ub", "--ubatch-size"},
    {"-np", "--n-parallel"},      {"-kvu", "--kv-unified"},   {"-fitt", "--fit-target"}, {"-fitc", "--fit-ctx"},
};
// The draft model's and the projector's (tessera/llama/extra_specs.h).
constexpr std::pair<const char*, const char*> kExtraModelNames[] = {
    {"-md", "--model-draft"},    {"-ngld", "--gpu-layers-draft"},   {"-devd", "--device-draft"},
    {"-cd", "--ctx-size-draft"}, {"-ctkd", "--cache-type-k-draft"}, {"-ctvd", "--cache-type-v-draft"},
    {"-mm", "--mmproj"},
};

}  // namespace

std::vector<std::string> llama_argv(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : kShortNames) {
      if (a == from) a = to;
    }
    for (const auto& [from, to] : kExtraModelNames) {
      if (a == from) a = to;
    }
    out.push_back(std::move(a));
  }
  return out;
}

}  // namespace tessera::llama
