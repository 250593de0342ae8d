// Scenario files' extra models (see scenario_extra.h).
#include "scenario_extra.h"

#include "tessera/llama/llama_devices.h"
#include "tessera/llama/extra_models.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::llama;

using namespace json_read;

namespace {

// A file named relative to the scenario file's directory.
std::string near(std::string file, const std::string& source) {
  const size_t slash = source.rfind('/');
  if (!file.empty() && file[0] != '/' && slash != std::string::npos) file = source.substr(0, slash + 1) + file;
  return file;
}

// A -devd name: a GPU of the topology by its name or as llama.cpp's CUDA<n>, or "none".
void check_device(const std::string& name, const sim::TopologyConfig& t, const std::string& path) {
  if (name == "none" || llama::find_gpu(t, name)) return;
  fail(path, "no GPU named " + quote(name) + " in the topology (its GPUs: " + llama::gpu_names(t) + ")");
}

}  // namespace

void parse_extra_models(const json& root, const std::string& source, Scenario* scenario) {
  const SessionConfig* config = &scenario->config;
  if (const json* v = member(root, "draft")) {
    const std::string path = "draft";
    expect_object(*v, path, {"gguf", "n_gpu_layers", "devices", "ctx_size", "cache_type"}, "a draft model object");
    DraftSpec d;
    d.path = near(get_string(required(*v, path, "gguf", "the draft model's GGUF file"), child(path, "gguf")), source);
    if (const json* x = member(*v, "n_gpu_layers")) {
      const std::string p = child(path, "n_gpu_layers");
      if (x->is_string()) {
        const std::string t = x->get<std::string>();
        if (t != "all" && t != "auto") fail(p, "expected a layer count, \"all\" or \"auto\", got " + quote(t));
      } else {
        d.n_gpu_layers = static_cast<int>(get_count(*x, p, "a layer count from 0 to 1000000", 1000000));
      }
    }
    if (const json* x = member(*v, "devices")) {
      d.devices =
          get_list<std::string>(*x, child(path, "devices"), "GPU names", [&](const json& n, const std::string& np) {
            std::string name = get_string(n, np);
            check_device(name, config->topology, np);
            return name;
          });
    }
    if (const json* x = member(*v, "ctx_size")) {
      const int64_t c = get_count(*x, child(path, "ctx_size"), "a context from 0 to 16777216", int64_t{1} << 24);
      d.n_ctx = (c + 255) / 256 * 256;
    }
    if (const json* x = member(*v, "cache_type")) d.kv_type = get_type(*x, child(path, "cache_type"));
    scenario->extra.draft = d;
  }
  if (const json* v = member(root, "mmproj")) {
    const std::string path = "mmproj";
    expect_object(*v, path, {"gguf", "offload"}, "a projector object");
    MmprojSpec m;
    m.path = near(get_string(required(*v, path, "gguf", "the projector's GGUF file"), child(path, "gguf")), source);
    if (const json* x = member(*v, "offload")) m.offload = get_bool(*x, child(path, "offload"));
    scenario->extra.mmproj = m;
  }
  if (scenario->extra.empty()) return;
  if (config->graph) fail(scenario->extra.draft ? "draft" : "mmproj", "extra models go beside a model, not a graph");
  const Status st = check_extra_models(scenario->extra);
  if (!st.ok()) fail(st.message().rfind("--draft", 0) == 0 ? "draft.gguf" : "mmproj.gguf", st.message());
}

void parse_extra_expect(const json& v, const std::string& path, Expectations* e) {
  if (const json* x = member(v, "extra_models_fit"))
    e->extra_models_fit = get_bool(*x, child(path, "extra_models_fit"));
  if (const json* x = member(v, "extra_overflow_contains")) {
    e->extra_overflow_contains = get_string(*x, child(path, "extra_overflow_contains"));
  }
}

void check_extra_expect(Session& s, const ExtraModels& extra, const Expectations& e, const Registry* real_devices,
                        const std::function<void(std::string what, bool ok, std::string detail)>& check) {
  if (!e.extra_models_fit && e.extra_overflow_contains.empty()) return;
  auto p = place_extra_models(s, extra, LlamaContextParams{}, real_devices);
  if (!p.ok()) {
    check("the extra models are placed", false, p.status().message());
    return;
  }
  std::string overflows;
  for (const std::string& o : p.value().overflows) overflows += (overflows.empty() ? "" : "; ") + o;
  const std::string detail = overflows.empty() ? "they fit" : overflows;
  if (e.extra_models_fit) {
    check(*e.extra_models_fit ? "the extra models fit" : "the extra models overflow",
          p.value().fits() == *e.extra_models_fit, detail);
  }
  if (!e.extra_overflow_contains.empty()) {
    check("an overflow contains \"" + e.extra_overflow_contains + "\"",
          overflows.find(e.extra_overflow_contains) != std::string::npos, detail);
  }
}

}  // namespace tessera::scenario
