// The extra models' options (see tessera/llama/extra_specs.h; common/arg.cpp for llama.cpp's meaning of each flag).
#include <cstdlib>

#include "tessera/gguf.h"
#include "tessera/llama/llama_devices.h"
#include "tessera/llama/extra_models.h"
#include "tessera/models/from_gguf.h"

namespace tessera::llama {

using namespace tessera::harness;

namespace {

Status invalid_spec(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

// The cache types llama.cpp's -ctkd and -ctvd take (common/arg.cpp, kv_cache_types).
bool cache_type(const std::string& name, Type* out) {
  for (const char* n : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}) {
    if (name == n) return type_from_name(n, out);
  }
  return false;
}

}  // namespace

Result<ExtraModels> resolve_extra_models(const ExtraModelArgs& a, const sim::TopologyConfig* topology) {
  ExtraModels e;
  if (a.draft) {
    if (a.draft->empty()) return invalid_spec("--draft: expected a GGUF file");
    e.draft = DraftSpec{};
    e.draft->path = *a.draft;
  } else {
    for (const auto& [flag, given] :
         {std::pair{"-ngld", a.ngld.has_value()}, std::pair{"-devd", a.devd.has_value()},
          std::pair{"-cd", a.ctx_size.has_value()}, std::pair{"-ctkd", a.cache_k.has_value()},
          std::pair{"-ctvd", a.cache_v.has_value()}}) {
      if (given) return invalid_spec(std::string(flag) + ": a draft option without a draft model (--draft FILE.gguf)");
    }
  }
  if (a.ngld) {
    const std::string& t = *a.ngld;
    if (t == "all" || t == "auto" || t == "-1") {
      e.draft->n_gpu_layers = -1;
    } else {
      char* end = nullptr;
      const long v = std::strtol(t.c_str(), &end, 10);
      if (t.empty() || *end != '\0' || v < 0 || v > 1000000) {
        return invalid_spec("-ngld " + t + ": expected a layer count (0 to 1000000), \"all\" or \"auto\"");
      }
      e.draft->n_gpu_layers = static_cast<int>(v);
    }
  }
  if (a.devd) {
    std::string rest = *a.devd;
    while (true) {
      const size_t comma = rest.find(',');
      const std::string name = rest.substr(0, comma);
      if (name.empty()) return invalid_spec("-devd " + *a.devd + ": expected GPU names separated by commas, or none");
      if (topology != nullptr && name != "none" && !find_gpu(*topology, name)) {
        return invalid_spec("-devd " + name +
                            ": no GPU of that name in the topology (its GPUs: " + gpu_names(*topology) + ")");
      }
      e.draft->devices.push_back(name);
      if (comma == std::string::npos) break;
      rest = rest.substr(comma + 1);
    }
  }
  if (a.ctx_size) {
    if (*a.ctx_size < 0 || *a.ctx_size > (1 << 24)) {
      return invalid_spec("-cd " + std::to_string(*a.ctx_size) + ": expected 0 (the main model's) to 16777216");
    }
    e.draft->n_ctx = (*a.ctx_size + 255) / 256 * 256;
  }
  for (const auto& [flag, text] : {std::pair{"-ctkd", a.cache_k}, std::pair{"-ctvd", a.cache_v}}) {
    if (!text) continue;
    Type t = Type::kF16;
    if (!cache_type(*text, &t)) {
      return invalid_spec(std::string(flag) + " " + *text +
                          ": expected f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1");
    }
    if (e.draft->kv_type && *e.draft->kv_type != t) {
      return invalid_spec("-ctvd " + *text + ": not supported yet: K and V draft caches of different types");
    }
    e.draft->kv_type = t;
  }
  if (a.mmproj) {
    if (a.mmproj->empty()) return invalid_spec("--mmproj: expected a GGUF file");
    e.mmproj = MmprojSpec{*a.mmproj, !a.no_mmproj_offload};
  } else if (a.no_mmproj_offload) {
    return invalid_spec("--no-mmproj-offload: without a projector (--mmproj FILE.gguf)");
  }
  TS_RETURN_IF_ERROR(check_extra_models(e));
  return e;
}

Status check_extra_models(const ExtraModels& e) {
  if (e.draft) {
    auto file = gguf::read_model(e.draft->path);
    if (!file.ok()) return invalid_spec("--draft: " + file.status().message());
    auto config = models::llama_config_from_gguf(file.value(), models::GgufRunShape{});
    if (!config.ok()) return invalid_spec("--draft: " + config.status().message());
  }
  if (e.mmproj) {
    auto m = read_mmproj(e.mmproj->path);
    if (!m.ok()) return m.status();
  }
  return Status::Ok();
}

}  // namespace tessera::llama
