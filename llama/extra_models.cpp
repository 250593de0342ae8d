// Extra models placed alongside the main one (see tessera/llama/extra_models.h; docs/extra-models.md).
#include "tessera/llama/llama_devices.h"
#include "tessera/llama/extra_models.h"

#include <algorithm>

#include "tessera/gguf.h"
#include "tessera/models/from_gguf.h"

namespace tessera::llama {

using namespace tessera::harness;

using sim::DeviceConfig;
using sim::format_bytes;

namespace {

Status invalid(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

size_t sub(size_t a, size_t b) { return a > b ? a - b : 0; }

// The topology's GPUs (every device that is not the CPU), in order: llama.cpp's CUDA0, CUDA1, ...
std::vector<size_t> gpus_of(const sim::TopologyConfig& t) {
  std::vector<size_t> out;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    if (t.devices[i].type != DeviceType::kCpu) out.push_back(i);
  }
  return out;
}

// The draft's session config: the main one's topology, simulator and placement options (llama-server copies the main
// common_params: -ts, -sm, -mg, -nkvo, -fa, -b, -ub) with the draft's model, -ngld and -devd; no -ot (the draft has
// its own, -otd), no pins, no explicit layer counts. `free_after_main`: per device, the memory the main model leaves
// (a -devd split by free memory); empty when placed alone.
Result<SessionConfig> draft_config(const SessionConfig& main, const DraftSpec& spec,
                                   const std::vector<size_t>& free_after_main) {
  auto file = gguf::read_model(spec.path);
  if (!file.ok()) return invalid("--draft: " + file.status().message());
  models::GgufRunShape run;
  run.n_ctx = spec.n_ctx > 0 ? spec.n_ctx : main.model.n_ctx;
  run.n_tokens = std::min<int64_t>(main.model.n_tokens, run.n_ctx);
  run.kv_type = spec.kv_type.value_or(Type::kF16);
  run.flash_attn = main.model.flash_attn;
  auto built = models::build_from_gguf(file.value(), run);
  if (!built.ok()) return invalid("--draft: " + built.status().message());
  SessionConfig c;
  c.topology = main.topology;
  c.model = built.value().config;
  c.sim = main.sim;
  c.sim.mode = sim::MemoryMode::kMetadata;
  c.model_seed = main.model_seed;
  c.policy = main.policy;
  c.policy.n_gpu_layers = spec.n_gpu_layers;
  c.policy.layers_per_device.clear();
  c.policy.overrides.clear();
  c.policy.pins.clear();
  c.policy.scheduler_devices.clear();
  if (spec.devices.empty()) return c;
  // -devd: the listed GPUs share the offloaded layers by their free memory (llama.cpp's default split over the
  // model's device list); the others get none.
  const std::vector<size_t> gpus = gpus_of(c.topology);
  std::vector<double> shares(gpus.size(), 0.0);
  bool any = false;
  for (const std::string& name : spec.devices) {
    if (name == "none") continue;
    const std::optional<size_t> found = find_gpu(c.topology, name);
    const size_t g =
        found ? static_cast<size_t>(std::find(gpus.begin(), gpus.end(), *found) - gpus.begin()) : gpus.size();
    if (g == gpus.size()) {
      return invalid("--device-draft " + name +
                     ": no GPU of that name in the topology (its GPUs: " + gpu_names(c.topology) + ")");
    }
    const size_t d = gpus[g];
    const size_t free = d < free_after_main.size() ? free_after_main[d] : c.topology.devices[d].memory;
    shares[g] = std::max<double>(static_cast<double>(free), 1.0);
    any = true;
  }
  if (!any) {
    c.policy.n_gpu_layers = 0;
  } else {
    c.policy.tensor_split = shares;
  }
  return c;
}

// What a device can allocate: memory - reserved - unallocatable (- the fit margin when counted).
size_t allocatable(const DeviceConfig& d, const sim::SimOptions& o) {
  return sub(sub(sub(d.memory, d.reserved), d.unallocatable), o.fit_margins ? d.fit_margin : 0);
}

Result<std::unique_ptr<Session>> planned(const SessionConfig& c, const Registry* real_devices) {
  auto s = Session::create(c, real_devices);
  if (!s.ok()) return s.status();
  TS_RETURN_IF_ERROR(s.value()->plan());
  return std::move(s).value();
}

// The device of the projector: the first GPU (clip.cpp: ggml_backend_init_by_type(GPU)), or the CPU without offload
// or without a GPU; its llama.cpp buffer name.
std::pair<size_t, std::string> mmproj_device(const sim::TopologyConfig& t, bool offload) {
  const std::vector<size_t> gpus = gpus_of(t);
  if (offload && !gpus.empty()) return {gpus.front(), "CUDA0"};
  size_t cpu = t.devices.empty() ? 0 : t.devices.size() - 1;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    if (t.devices[i].type == DeviceType::kCpu) cpu = i;
  }
  return {cpu, "CPU"};
}

Result<ExtraModelsPlacement::Mmproj> make_mmproj(const SessionConfig& main, const MmprojSpec& spec, Session& s) {
  auto m = read_mmproj(spec.path);
  if (!m.ok()) return m.status();
  ExtraModelsPlacement::Mmproj p;
  p.model = m.value();
  const auto [dev, name] = mmproj_device(main.topology, spec.offload);
  p.device = main.topology.devices[dev].name;
  p.buffer_name = name;
  p.flash_attn = main.model.flash_attn;
  const size_t alignment = devices_of(s.sim())[dev]->buffer_type()->alignment();
  auto w = mmproj_weight_bytes(spec.path, alignment, name != "CPU");
  if (!w.ok()) return w.status();
  p.weights = w.value();
  p.compute = mmproj_compute_estimate(p.model, p.flash_attn);
  return p;
}

void add_draft(const Session& d, std::vector<ExtraDeviceMemory>* out) {
  const std::vector<DeviceMemory> mem = d.memory();
  for (size_t i = 0; i < mem.size() && i < out->size(); ++i) {
    (*out)[i].draft_weights = mem[i].weights;
    (*out)[i].draft_kv = mem[i].cache;
    (*out)[i].draft_compute = mem[i].compute;
  }
}

// Marks `e` and says why: the model needs `needs` bytes on the device, which has `free` left after `after`.
std::string overflow_line(ExtraDeviceMemory* e, const char* model, size_t needs, size_t free, const char* after) {
  e->overflow = true;
  return format_message(
      "%s overflows because of the %s: it needs %s there, %s free after %s (%s allocatable; "
      "without it: fits)",
      e->device.c_str(), model, format_bytes(needs).c_str(), format_bytes(free).c_str(), after,
      format_bytes(e->allocatable).c_str());
}

}  // namespace

Result<ExtraModelsPlacement> place_extra_models(Session& main, const ExtraModels& extra,
                                                const LlamaContextParams& params, const Registry* real_devices) {
  const SessionConfig& mc = main.config();
  if (mc.graph) return invalid("--draft/--mmproj: extra models go next to a model (-m), not a serialized graph");
  ExtraModelsPlacement p;
  const std::vector<DeviceMemory> mem = main.memory();
  const std::vector<Device*> main_devices = devices_of(main.sim());
  std::vector<size_t> free_after_main;
  for (size_t i = 0; i < mc.topology.devices.size(); ++i) {
    ExtraDeviceMemory e;
    e.device = mc.topology.devices[i].name;
    e.main = mem[i].peak;
    e.allocatable = allocatable(mc.topology.devices[i], mc.sim);
    p.devices.push_back(e);
    size_t free = 0, total = 0;
    main_devices[i]->memory(&free, &total);
    free_after_main.push_back(sub(free, mc.topology.devices[i].unallocatable));
  }
  // The free memory (allocatable) per device after the main model and the draft, for the projector.
  std::vector<size_t> free_now = free_after_main;
  if (extra.draft) {
    p.draft_path = extra.draft->path;
    auto dc = draft_config(mc, *extra.draft, free_after_main);
    if (!dc.ok()) return dc.status();
    // The main model's memory is taken before the draft is loaded: each device's reservation grows by it.
    SessionConfig next = dc.value();
    for (size_t i = 0; i < next.topology.devices.size(); ++i) next.topology.devices[i].reserved += mem[i].peak;
    auto d = planned(next, real_devices);
    if (!d.ok() && d.status().code() != StatusCode::kAllocFailed) return invalid("--draft: " + d.status().message());
    if (!d.ok()) {
      // It does not fit next to the main model: its figures from the empty machine, and the devices it overflows.
      const std::string why = d.status().message();
      d = planned(dc.value(), real_devices);
      if (!d.ok())
        return invalid("--draft: " + extra.draft->path + " does not fit even alone: " + d.status().message());
      add_draft(*d.value(), &p.devices);
      size_t named = 0;
      for (size_t i = 0; i < p.devices.size(); ++i) {
        ExtraDeviceMemory& e = p.devices[i];
        if (e.draft() > free_after_main[i]) {
          p.overflows.push_back(overflow_line(&e, "draft model", e.draft(), free_after_main[i], "the main model"));
          ++named;
        }
      }
      if (named == 0) p.overflows.push_back("the draft model does not fit next to the main model: " + why);
    } else {
      add_draft(*d.value(), &p.devices);
      const std::vector<Device*> dd = devices_of(d.value()->sim());
      for (size_t i = 0; i < dd.size(); ++i) {
        size_t free = 0, total = 0;
        dd[i]->memory(&free, &total);
        free_now[i] = sub(free, next.topology.devices[i].unallocatable);
      }
    }
    auto b = llama_memory_breakdown(*d.value(), params);
    if (b.ok()) p.draft_buffers = std::move(b).value();
    p.draft = std::move(d).value();
  }
  if (extra.mmproj) {
    auto m = make_mmproj(mc, *extra.mmproj, main);
    if (!m.ok()) return m.status();
    for (size_t i = 0; i < p.devices.size(); ++i) {
      if (p.devices[i].device != m.value().device) continue;
      ExtraDeviceMemory& e = p.devices[i];
      e.mmproj_weights = m.value().weights;
      e.mmproj_compute = m.value().compute;
      if (p.fits() && e.mmproj() > free_now[i]) {
        p.overflows.push_back(overflow_line(&e, "projector (--mmproj)", e.mmproj(), free_now[i],
                                            extra.draft ? "the main model and the draft" : "the main model"));
      }
    }
    p.mmproj = std::move(m).value();
  }
  return p;
}

Result<std::vector<ExtraDeviceMemory>> extra_models_alone(const SessionConfig& main_config, const ExtraModels& extra,
                                                          const Registry* real_devices) {
  std::vector<ExtraDeviceMemory> out;
  for (const DeviceConfig& d : main_config.topology.devices) {
    ExtraDeviceMemory e;
    e.device = d.name;
    e.allocatable = allocatable(d, main_config.sim);
    out.push_back(e);
  }
  if (extra.draft) {
    auto dc = draft_config(main_config, *extra.draft, {});
    if (!dc.ok()) return dc.status();
    auto d = planned(dc.value(), real_devices);
    if (!d.ok()) return invalid("--draft: " + extra.draft->path + " does not fit even alone: " + d.status().message());
    add_draft(*d.value(), &out);
  }
  if (extra.mmproj) {
    auto m = read_mmproj(extra.mmproj->path);
    if (!m.ok()) return m.status();
    const auto [dev, name] = mmproj_device(main_config.topology, extra.mmproj->offload);
    const size_t alignment = main_config.topology.devices[dev].alignment;
    auto w = mmproj_weight_bytes(extra.mmproj->path, alignment, name != "CPU");
    if (!w.ok()) return w.status();
    out[dev].mmproj_weights = w.value();
    out[dev].mmproj_compute = mmproj_compute_estimate(m.value(), main_config.model.flash_attn);
  }
  return out;
}

void reserve_extra_models(const std::vector<ExtraDeviceMemory>& extra, sim::TopologyConfig* topology) {
  for (const ExtraDeviceMemory& e : extra) {
    for (DeviceConfig& d : topology->devices) {
      if (d.name == e.device) d.reserved += e.extra();
    }
  }
}

}  // namespace tessera::llama
