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
    {"-np", "--n-parallel"},      {"-kvu", "--kv-unified"},
};

Status refuse(const std::string& what) { return Status(StatusCode::kInvalidArgument, "not supported yet: " + what); }

// The cache types llama.cpp's -ctk and -ctv take (common/arg.cpp, kv_cache_types).
std::optional<Type> cache_type(const std::string& name) {
  for (const char* n : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}) {
    Type t = Type::kF32;
    if (name == n && type_from_name(n, &t)) return t;
  }
  return std::nullopt;
}

}  // namespace

std::vector<std::string> llama_argv(int argc, char** argv) {
  std::vector<std::string> out;
  for (int i = 0; i < argc; ++i) {
    std::string a = argv[i];
    for (const auto& [from, to] : kShortNames) {
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
  app->add_flag("--swa-full", a->swa_full, "llama.cpp's --swa-full (not supported yet)");
}

Result<RunShape> resolve_llama_run(const LlamaRunArgs& a) {
  RunShape r;
  // src/llama-context.cpp (llama_context's constructor): n_ctx = GGML_PAD(n_ctx, 256); n_batch = min(n_ctx,
  // n_batch) for a causal model; n_ubatch = min(n_batch, n_ubatch). The graph is built for one micro-batch.
  if (a.ctx_size) {
    if (*a.ctx_size == 0) return refuse("-c 0 (the model's training context); give the context length");
    if (*a.ctx_size < 0 || *a.ctx_size > (1 << 24)) {
      return Status(StatusCode::kInvalidArgument, "-c " + std::to_string(*a.ctx_size) + ": expected 1 to 16777216");
    }
    r.ctx = (*a.ctx_size + 255) / 256 * 256;
  }
  for (const auto& [flag, v] : {std::pair{"-b", a.batch}, std::pair{"-ub", a.ubatch}}) {
    if (v && (*v < 1 || *v > (1 << 20))) {
      return Status(StatusCode::kInvalidArgument,
                    std::string(flag) + " " + std::to_string(*v) + ": expected 1 to 1048576");
    }
  }
  if (a.batch || a.ubatch) {
    int64_t n_batch = a.batch.value_or(2048);
    if (r.ctx > 0) n_batch = std::min(n_batch, r.ctx);
    r.tokens = std::min(n_batch, a.ubatch.value_or(512));
  }
  std::optional<Type> k, v;
  if (a.cache_k && !(k = cache_type(*a.cache_k))) {
    return Status(StatusCode::kInvalidArgument,
                  "-ctk " + *a.cache_k + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1");
  }
  if (a.cache_v && !(v = cache_type(*a.cache_v))) {
    return Status(StatusCode::kInvalidArgument,
                  "-ctv " + *a.cache_v + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1");
  }
  if (k || v) {
    if (k.value_or(Type::kF16) != v.value_or(Type::kF16)) {
      return refuse("-ctk and -ctv of different types (each defaults to f16; Tessera's K and V caches have one type)");
    }
    r.kv_type = k ? k : v;
  }
  if (a.flash_attn) {
    // common/arg.cpp: is_truthy, is_falsey, is_autoy.
    const std::string& f = *a.flash_attn;
    if (f == "on" || f == "enabled" || f == "true" || f == "1") {
      r.flash_attn = true;
    } else if (f == "off" || f == "disabled" || f == "false" || f == "0") {
      r.flash_attn = false;
    } else if (f == "auto" || f == "-1") {
      return refuse("-fa auto (llama.cpp decides per device after a trial reserve); give -fa on or -fa off");
    } else {
      return Status(StatusCode::kInvalidArgument, "-fa " + f + ": expected on, off or auto");
    }
  }
  if (a.n_parallel && *a.n_parallel != "1") {
    return refuse("-np " + *a.n_parallel + " (one sequence only; with --kv-unified or per-sequence caches alike)");
  }
  if (a.swa_full) return refuse("--swa-full (Tessera builds no sliding-window caches)");
  return r;
}

}  // namespace tessera::tool
