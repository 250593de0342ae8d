// The extra models on tessera's command line (see extra_args.h).
#include "extra_args.h"

#include <cstdio>
#include <iostream>

#include "tessera/builtin.h"
#include "json_out.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::llama;

void add_extra_model_options(CLI::App* app, ExtraModelArgs* a) {
  app->add_option("--draft,--model-draft", a->draft,
                  "llama.cpp's -md: a draft model (FILE.gguf) placed beside the model with its own weights, KV cache "
                  "and compute buffers");
  app->add_option("--gpu-layers-draft,--n-gpu-layers-draft", a->ngld, "llama.cpp's -ngld: the draft's -ngl");
  app->add_option("--device-draft", a->devd, "llama.cpp's -devd: the GPUs of the draft (gpu1 or CUDA1, ...; none)");
  app->add_option("--ctx-size-draft", a->ctx_size, "llama.cpp's -cd: the draft's context (default: the model's)");
  app->add_option("--cache-type-k-draft", a->cache_k, "llama.cpp's -ctkd: the draft's K cache type (default f16)");
  app->add_option("--cache-type-v-draft", a->cache_v, "llama.cpp's -ctvd: the draft's V cache type (as -ctkd)");
  app->add_option("--mmproj", a->mmproj, "llama.cpp's -mm: a multimodal projector (a clip FILE.gguf) on the first GPU");
  app->add_flag("--no-mmproj-offload", a->no_mmproj_offload, "llama.cpp's: the projector on the CPU");
}

ojson extra_models_json(const ExtraModelsPlacement& p, const LlamaContextParams& params) {
  ojson o = ojson::object();
  o["fits"] = p.fits();
  o["overflows"] = p.overflows;
  ojson devices = ojson::array();
  for (const ExtraDeviceMemory& e : p.devices) {
    devices.push_back({{"device", e.device},
                       {"main", e.main},
                       {"draft", {{"weights", e.draft_weights}, {"kv", e.draft_kv}, {"compute", e.draft_compute}}},
                       {"mmproj", {{"weights", e.mmproj_weights}, {"compute", e.mmproj_compute}}},
                       {"total", e.total()},
                       {"allocatable", e.allocatable}});
  }
  o["devices"] = std::move(devices);
  o["draft"] = ojson();
  if (p.draft) {
    o["draft"] = {{"path", p.draft_path},
                  {"workload", p.draft->describe_workload()},
                  {"llama_memory", llama_memory_json(*p.draft, params)}};
  }
  o["mmproj"] = ojson();
  if (p.mmproj) {
    const ExtraModelsPlacement::Mmproj& m = *p.mmproj;
    o["mmproj"] = {{"path", m.model.path},
                   {"device", m.device},
                   {"name", m.buffer_name},
                   {"weights", m.weights},
                   {"compute", m.compute},
                   {"image_size", m.model.image_size},
                   {"patch_size", m.model.patch_size},
                   {"flash_attn", m.flash_attn}};
  }
  return o;
}

int reserve_extra_models_for_fit(SessionConfig* config, const ExtraModels& models) {
  if (models.empty()) return 0;
  auto extra = extra_models_alone(*config, models, &builtin_registry());
  if (!extra.ok()) {
    std::fprintf(stderr, "tessera: %s\n", extra.status().message().c_str());
    return 2;
  }
  reserve_extra_models(extra.value(), &config->topology);
  std::string taken;
  for (const ExtraDeviceMemory& e : extra.value()) {
    if (e.extra() > 0) taken += (taken.empty() ? "" : ", ") + e.device + " " + sim::format_bytes(e.extra());
  }
  std::fprintf(stderr, "fit: the extra models (draft, projector) take %s; the model is fitted in the rest\n",
               taken.c_str());
  return 0;
}

int report_extra_models(Session& s, const ExtraModels& extra, const LlamaContextParams& params, bool llama_log,
                        ojson* json, bool wide) {
  if (json != nullptr) (*json)["extra_models"] = ojson();
  if (extra.empty()) return 0;
  auto p = place_extra_models(s, extra, params, &builtin_registry());
  if (!p.ok()) {
    std::fprintf(stderr, "tessera: %s\n", p.status().message().c_str());
    return 2;
  }
  if (json != nullptr) {
    (*json)["extra_models"] = extra_models_json(p.value(), params);
  } else {
    std::printf("%s\n", format_extra_models(p.value(), llama_log, wide).c_str());
  }
  return p.value().fits() ? 0 : 1;
}

}  // namespace tessera::tool
