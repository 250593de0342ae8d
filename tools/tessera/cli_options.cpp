// llama.cpp's spelling on tessera's command line (see llama_args.h).
#include "llama_args.h"

#include <utility>

#include "tessera/harness/policy_options.h"

namespace tessera::tool {

namespace {

// llama.cpp's single-dash long names (common/arg.cpp) and the double-dash names tessera registers for them. -np is
// --n-parallel here: tessera's --parallel is the scheduler's pipeline parallelism (the "parallel" policy key).
constexpr std::pair<const char*, const char*> kShortNames[] = {
    {"-ngl", "--n-gpu-layers"},   {"-ts", "--tensor-split"},  {"-sm", "--split-mode"},   {"-mg", "--main-gpu"},
    {"-ot", "--override-tensor"}, {"-cmoe", "--cpu-moe"},     {"-ncmoe", "--n-cpu-moe"}, {"-nkvo", "--no-kv-offload"},
    {"-ctk", "--cache-type-k"},   {"-ctv", "--cache-type-v"}, {"-fa", "--flash-attn"},   {"-ub", "--ubatch-size"},
    {"-np", "--n-parallel"},      {"-kvu", "--kv-unified"},   {"-fitt", "--fit-target"}, {"-fitc", "--fit-ctx"},
};
// The draft model's and the projector's (extra_args.h).
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

void add_policy_options(CLI::App* app, std::vector<std::pair<std::string, std::string>>* given) {
  using harness::PolicyOption;
  for (const PolicyOption& po : harness::policy_options()) {
    const std::string key = po.key;
    // trigger_on_parse: the callback runs at each occurrence, so `given` keeps the command line's order.
    if (po.value.empty()) {
      app->add_flag_callback(
             po.flags, [given, key] { given->emplace_back(key, ""); }, po.help)
          ->trigger_on_parse();
    } else {
      app->add_option_function<std::string>(
             po.flags, [given, key](const std::string& t) { given->emplace_back(key, t); },
             po.help + (po.repeatable ? " (repeatable)" : ""))
          ->type_name(po.value)
          ->allow_extra_args(false)
          ->trigger_on_parse();
    }
  }
}

void add_llama_run_options(CLI::App* app, LlamaRunArgs* a) {
  app->add_option("-c,--ctx-size", a->ctx_size, "llama.cpp's -c: KV cache slots, rounded up to a multiple of 256");
  app->add_option("-b,--batch-size", a->batch, "llama.cpp's -b: logical batch (default 2048)");
  app->add_option("--ubatch-size", a->ubatch,
                  "llama.cpp's -ub: physical batch, the graph's tokens (default 512, at most -b)");
  app->add_option("--cache-type-k", a->cache_k, "llama.cpp's -ctk: K cache type (f16, q8_0, q4_0, ...)");
  app->add_option("--cache-type-v", a->cache_v, "llama.cpp's -ctv: V cache type (the same as -ctk for now)");
  app->add_option("--flash-attn", a->flash_attn, "llama.cpp's -fa: on or off (auto: not supported yet)");
  app->add_option("--n-parallel", a->n_parallel, "llama.cpp's -np: sequences (1 for now)");
  app->add_flag("--kv-unified", a->kv_unified, "llama.cpp's -kvu: one KV buffer for all sequences");
  app->add_flag("--swa-full", a->swa_full,
                "llama.cpp's --swa-full: full-size sliding-window caches (Tessera's only kind so far)");
}

}  // namespace tessera::tool
