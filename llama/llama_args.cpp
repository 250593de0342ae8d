// llama.cpp's spelling of its options (see tessera/llama/llama_args.h).
#include "tessera/llama/llama_args.h"

#include <cctype>
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
    {"-dev", "--device"},
};
// The draft model's and the projector's (tessera/llama/extra_specs.h).
constexpr std::pair<const char*, const char*> kExtraModelNames[] = {
    {"-md", "--model-draft"},    {"-ngld", "--gpu-layers-draft"},   {"-devd", "--device-draft"},
    {"-cd", "--ctx-size-draft"}, {"-ctkd", "--cache-type-k-draft"}, {"-ctvd", "--cache-type-v-draft"},
    {"-mm", "--mmproj"},
};

bool is_number(const char* s) {
  if (*s == '\0') return false;
  for (; *s != '\0'; ++s) {
    if (std::isdigit(static_cast<unsigned char>(*s)) == 0) return false;
  }
  return true;
}

}  // namespace

std::vector<std::string> llama_argv(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    // a single-dash option with its value after '=' ("-ts=3,1", "-c=4096"), read as "--name=value" is: llama.cpp's
    // names become "--tensor-split=3,1", a one-letter option and its value two arguments (CLI11 took "-c=4096" as -c
    // with the value "=4096", and "-ts=..." as -t with "s=...")
    std::string value;
    bool has_value = false;
    if (i > 0 && a.size() > 2 && a[0] == '-' && a[1] != '-' && std::isalpha(static_cast<unsigned char>(a[1]))) {
      const size_t eq = a.find('=');
      if (eq != std::string::npos) {
        value = a.substr(eq + 1);
        a.resize(eq);
        has_value = true;
      }
    }
    for (const auto& [from, to] : kShortNames) {
      if (a == from) a = to;
    }
    // llama.cpp's --parallel N is -np N; tessera's --parallel alone is --pipeline-parallel (the scheduler's)
    if (a == "--parallel" && i + 1 < argc && is_number(argv[i + 1])) a = "--n-parallel";
    if (a.rfind("--parallel=", 0) == 0) a = "--n-parallel=" + a.substr(11);
    for (const auto& [from, to] : kExtraModelNames) {
      if (a == from) a = to;
    }
    if (has_value && a.rfind("--", 0) == 0) {
      out.push_back(a + "=" + value);  // (one argument: a value such as "-1,2" is not taken for an option)
    } else {
      out.push_back(std::move(a));
      if (has_value) out.push_back(std::move(value));
    }
  }
  return out;
}

std::vector<std::string> llama_single_dash_names() {
  std::vector<std::string> out;
  for (const auto& [from, to] : kShortNames) out.push_back(from);
  for (const auto& [from, to] : kExtraModelNames) out.push_back(from);
  return out;
}

}  // namespace tessera::llama
