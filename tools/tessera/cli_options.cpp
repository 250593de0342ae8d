// The placement and run options on tessera's command line (see cli_options.h).
#include "cli_options.h"

#include "tessera/harness/placement/policy_options.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/llama/llama_devices.h"
#include "subcommands.h"

namespace tessera::tool {

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
  app->add_option("--n-parallel", a->n_parallel,
                  "llama.cpp's -np (--parallel N): sequences, each with a row of logits in the output buffer; above 1 "
                  "with -kvu");
  app->add_flag("--kv-unified", a->kv_unified, "llama.cpp's -kvu: one KV buffer for all sequences");
  app->add_flag("--no-mmap", a->no_mmap,
                "llama.cpp's --no-mmap: the CPU's weights read into the first GPU's pinned host buffer (CUDA_Host) "
                "instead of the mapped file (CPU_Mapped)");
  app->add_flag("--embeddings,--embedding", a->embeddings,
                "llama.cpp's --embeddings: the output buffer holds n_embd floats more per output row");
  app->add_option("--n-outputs-max", a->n_outputs_max,
                  "llama.cpp's n_outputs_max (no llama.cpp option: llama-server sets -np x (1 + draft tokens), and a "
                  "pasted llama-server command line gives it): the prompt graph keeps min(-ub, N) output rows "
                  "(llama.cpp build 9460 and later)");
  app->add_flag("--swa-full", a->swa_full,
                "llama.cpp's --swa-full: full-size sliding-window caches (Tessera's only kind so far)");
}

// llama.cpp's -dev LIST: the topology keeps the listed GPUs, in the list's order, each with its number on the whole
// machine (CUDA1 stays CUDA1), and the CPU; "none" keeps the CPU only. A GPU is named as in the topology ("gpu1") or
// as llama.cpp names it ("CUDA1").
Status keep_devices(const std::string& list, sim::TopologyConfig* t) {
  std::vector<sim::DeviceConfig> kept;
  std::vector<bool> taken(t->devices.size(), false);
  size_t start = 0;
  bool none = false;
  for (;;) {
    const size_t comma = list.find(',', start);
    const std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) {
      return Status(StatusCode::kInvalidArgument, "-dev " + list + ": expected GPU names separated by commas, or none");
    }
    if (name == "none") {
      none = true;
    } else {
      const std::optional<size_t> found = llama::find_gpu(*t, name);
      if (!found) {
        return Status(
            StatusCode::kInvalidArgument,
            "-dev " + name + ": no GPU of that name in the topology (its GPUs: " + llama::gpu_names(*t) + ")");
      }
      if (taken[*found]) return Status(StatusCode::kInvalidArgument, "-dev " + list + ": " + name + " twice");
      taken[*found] = true;
      kept.push_back(t->devices[*found]);
      kept.back().gpu_number = sim::gpu_number(*t, *found);
    }
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (none && !kept.empty()) {
    return Status(StatusCode::kInvalidArgument, "-dev " + list + ": none and GPUs together");
  }
  for (const sim::DeviceConfig& d : t->devices) {
    if (d.type == DeviceType::kCpu) kept.push_back(d);
  }
  auto named = [&kept, t](const std::string& n) {
    return n == "host" ||
           std::any_of(kept.begin(), kept.end(), [&n](const sim::DeviceConfig& d) { return d.name == n; }) ||
           std::any_of(t->hosts.begin(), t->hosts.end(), [&n](const sim::HostConfig& h) { return h.name == n; });
  };
  std::vector<sim::LinkConfig> links;
  for (const sim::LinkConfig& l : t->links) {
    if (named(l.a) && named(l.b)) links.push_back(l);
  }
  t->devices = std::move(kept);
  t->links = std::move(links);
  t->name += " -dev " + list;
  return harness::validate_topology(*t);
}

}  // namespace tessera::tool
