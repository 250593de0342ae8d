// Placement policies (see tessera/harness/placement/policy.h).
#include "tessera/harness/placement/policy.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <unordered_map>
#include <strings.h>

#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/harness/placement/allocate.h"
#include "tessera/sim/simulator.h"
#include "layer_split.h"

namespace tessera::harness {

using namespace tessera::sim;

SchedulerParams PlacementPolicy::scheduler_params() const {
  SchedulerParams p;
  p.op_offload = op_offload;
  p.parallel = parallel;
  p.n_copies = n_copies;
  p.max_split_inputs = max_split_inputs;
  p.reuse = reuse;
  p.online_packing = online_packing;
  p.free_inputs = free_inputs;
  p.ggml_inplace = ggml_inplace;
  p.fa_sinks_decide = fa_sinks_decide;
  return p;
}

int layer_of_name(const char* name) {
  // Llama 3.1's rope frequency factors are one tensor that every layer reads; llama.cpp's loader creates it with layer
  // 0 and refers to it from the others (src/llama-model.cpp: create_tensor(..., TENSOR_DUPLICATED for i != 0)), so
  // its memory is layer 0's.
  if (std::strcmp(name, "rope_freqs.weight") == 0) return 0;
  const char* digits = nullptr;
  if (std::strncmp(name, "blk.", 4) == 0) {
    digits = name + 4;
  } else if (std::strncmp(name, "cache_k_l", 9) == 0 || std::strncmp(name, "cache_v_l", 9) == 0) {
    digits = name + 9;
  }
  if (digits == nullptr || *digits < '0' || *digits > '9') return -1;
  char* end = nullptr;
  const long v = std::strtol(digits, &end, 10);
  if (v > 1000000) return -1;
  return static_cast<int>(v);
}

std::vector<int> gpu_indices(const std::vector<Device*>& devices) {
  std::vector<int> g;
  for (size_t i = 0; i + 1 < devices.size(); ++i) {
    if (devices[i]->type() != DeviceType::kCpu) g.push_back(static_cast<int>(i));
  }
  return g;
}

Status place_layers_per_device(const std::vector<int>& gpus, int n_layer, const PlacementPolicy& policy,
                               std::vector<int>* out) {
  if (policy.layers_per_device.size() > gpus.size()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "policy: %zu layer counts for %zu GPUs",
                    policy.layers_per_device.size(), gpus.size());
  }
  int total = 0;
  for (int c : policy.layers_per_device) {
    if (c < 0) return TS_ERROR(StatusCode::kInvalidArgument, "policy: a negative layer count (%d)", c);
    total += c;
  }
  if (total > n_layer) {
    return TS_ERROR(StatusCode::kInvalidArgument, "policy: %d layers per device in all, the model has %d", total,
                    n_layer);
  }
  int layer = n_layer - total;
  for (size_t g = 0; g < policy.layers_per_device.size(); ++g) {
    for (int k = 0; k < policy.layers_per_device[g]; ++k) (*out)[static_cast<size_t>(layer++)] = gpus[g];
  }
  return Status::Ok();
}

namespace {

// llama.cpp's default split: each device's free memory (src/llama-model.cpp, load_tensors, "default split, by free
// memory"), read before anything is placed.
size_t free_memory(const Device& d) {
  size_t free = 0, total = 0;
  d.memory(&free, &total);
  return free;
}

bool parse_index(const std::string& text, size_t prefix, int* out) {
  if (text.size() <= prefix || text.size() > prefix + 6) return false;
  int v = 0;
  for (size_t i = prefix; i < text.size(); ++i) {
    if (text[i] < '0' || text[i] > '9') return false;
    v = v * 10 + (text[i] - '0');
  }
  *out = v;
  return true;
}

// Tessera's names: a device ("cpu", "gpu1": its main buffer type) or a buffer type ("gpu0_Host", an extra buffer
// type such as "CPU_REPACK"), case-insensitive.
BufferType* find_tessera_target(const std::vector<Device*>& devices, const std::string& target) {
  for (Device* d : devices) {
    if (strcasecmp(d->name(), target.c_str()) == 0) return d->buffer_type();
  }
  for (Device* d : devices) {
    std::vector<BufferType*> types = d->extra_buffer_types();
    types.insert(types.begin(), {d->buffer_type(), d->host_buffer_type()});
    for (BufferType* b : types) {
      if (b != nullptr && strcasecmp(b->name(), target.c_str()) == 0) return b;
    }
  }
  return nullptr;
}

}  // namespace

bool cpu_repacks(const Tensor& w) {
  if (std::strncmp(w.name, "token_embd", 10) == 0) return false;
  const int dims = w.ne[3] > 1 ? 4 : w.ne[2] > 1 ? 3 : 2;
  if (dims > 3 || w.ne[1] < 1) return false;
  switch (w.type) {
    case Type::kQ4_0:
    case Type::kIQ4_NL:
    case Type::kMXFP4:
    case Type::kQ8_0: return w.ne[1] % 4 == 0;
    case Type::kQ4_K:
    case Type::kQ5_K:
    case Type::kQ6_K: return w.ne[1] % 8 == 0;
    default: return false;
  }
}

std::vector<Device*> devices_of(const Simulator& simulator) {
  std::vector<Device*> d;
  for (size_t i = 0; i < simulator.device_count(); ++i) d.push_back(simulator.device(i));
  return d;
}

// llama.cpp's buffer type names, as -ot takes them (common/arg.cpp, "--override-tensor": the names of every
// device's buffer types): "CPU" is the CPU's, "CUDA<n>" the n-th GPU's (Tessera's GPUs in topology order), and
// "CUDA_Host" the first GPU's host (pinned) buffer type. Tessera's own device and buffer type names work too
// (case-insensitive); llama.cpp's are matched exactly, as llama.cpp matches them.
BufferType* find_override_target(const std::vector<Device*>& devices, const std::string& target) {
  if (devices.empty()) return nullptr;
  const std::vector<int> gpus = gpu_indices(devices);
  if (target == "CPU") return devices.back()->buffer_type();
  if (target == "CUDA_Host") {
    return gpus.empty() ? nullptr : devices[static_cast<size_t>(gpus.front())]->host_buffer_type();
  }
  int n = 0;
  if (target.rfind("CUDA", 0) == 0 && parse_index(target, 4, &n)) {
    return n < static_cast<int>(gpus.size()) ? devices[static_cast<size_t>(gpus[static_cast<size_t>(n)])]->buffer_type()
                                             : nullptr;
  }
  return find_tessera_target(devices, target);
}

Result<std::vector<int>> layer_devices(const std::vector<Device*>& devices, int n_layer,
                                       const PlacementPolicy& policy) {
  if (devices.empty()) return TS_ERROR(StatusCode::kInvalidArgument, "policy: no devices to place onto");
  if (n_layer < 0) return TS_ERROR(StatusCode::kInvalidArgument, "policy: a negative layer count (%d)", n_layer);
  const int cpu = static_cast<int>(devices.size()) - 1;
  std::vector<int> gpus = gpu_indices(devices);
  // One entry per layer, then the output layer ("layer n_layer" in llama.cpp).
  std::vector<int> out(static_cast<size_t>(n_layer) + 1, cpu);
  if (policy.split_mode == SplitMode::kTensor) {
    return TS_ERROR(StatusCode::kInvalidArgument,
                    "policy: split_mode tensor (-sm tensor): not supported yet here; `tessera plan`, `run`, `trace`, "
                    "`bench` and scenario files "
                    "take it (docs/tensor-parallel.md)");
  }
  if (policy.main_gpu < 0 || (!gpus.empty() && policy.main_gpu >= static_cast<int>(gpus.size()))) {
    return TS_ERROR(StatusCode::kInvalidArgument, "policy: main_gpu %d: there are %zu GPUs", policy.main_gpu,
                    gpus.size());
  }
  if (!policy.layers_per_device.empty()) {
    TS_RETURN_IF_ERROR(place_layers_per_device(gpus, n_layer, policy, &out));
    return out;
  }
  // split_mode none: the main GPU alone (src/llama.cpp, llama_model_load).
  if (policy.split_mode == SplitMode::kNone && !gpus.empty()) gpus = {gpus[static_cast<size_t>(policy.main_gpu)]};
  if (gpus.empty()) return out;
  std::vector<double> given = policy.tensor_split;
  if (policy.split_mode == SplitMode::kNone) given.resize(std::min<size_t>(given.size(), 1));
  if (given.size() > gpus.size()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split has %zu entries for %zu GPUs", given.size(),
                    gpus.size());
  }
  for (double s : given) {
    if (!(s >= 0.0) || !std::isfinite(s)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split entries must be >= 0 (got %g)", s);
    }
  }
  // src/llama-model.cpp, load_tensors: the shares as floats, all zero meaning "by free memory", then cumulative sums
  // divided by the total.
  std::vector<float> splits(gpus.size(), 0.0f);
  bool all_zero = true;
  for (size_t i = 0; i < given.size(); ++i) {
    splits[i] = static_cast<float>(given[i]);
    all_zero = all_zero && splits[i] == 0.0f;
  }
  if (all_zero) {
    for (size_t i = 0; i < gpus.size(); ++i) {
      splits[i] = static_cast<float>(free_memory(*devices[static_cast<size_t>(gpus[i])]));
    }
  }
  float split_sum = 0.0f;
  for (float& s : splits) {
    split_sum += s;
    s = split_sum;
  }
  if (!(split_sum > 0.0f)) return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split has no positive entry");
  for (float& s : splits) s /= split_sum;
  // i_gpu_start and act_gpu_layers as llama.cpp computes them; -1 (all) is n_layer + 1.
  const int ngl = policy.n_gpu_layers < 0 ? n_layer + 1 : policy.n_gpu_layers;
  const int i_gpu_start = std::max(n_layer + 1 - ngl, 0);
  const int act_gpu_layers = std::min(ngl, n_layer + 1);
  for (int il = i_gpu_start; il <= n_layer && il - i_gpu_start < act_gpu_layers; ++il) {
    const float at = static_cast<float>(il - i_gpu_start) / static_cast<float>(act_gpu_layers);
    const size_t g = static_cast<size_t>(std::upper_bound(splits.begin(), splits.end(), at) - splits.begin());
    out[static_cast<size_t>(il)] = gpus[std::min(g, gpus.size() - 1)];
  }
  return out;
}

namespace {

struct OverrideRule {
  std::regex re;
  BufferType* buft;
  bool weights_only;
};

Result<std::vector<OverrideRule>> override_rules(const std::vector<Device*>& devices, const PlacementPolicy& policy) {
  std::vector<OverrideRule> rules;
  for (const TensorOverride& o : policy.overrides) {
    BufferType* b = find_override_target(devices, o.target);
    if (b == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: override \"%s\": unknown device or buffer type \"%s\"",
                      o.pattern.c_str(), o.target.c_str());
    }
    try {
      rules.push_back({std::regex(o.pattern, std::regex::ECMAScript), b, o.weights_only});
    } catch (const std::regex_error& e) {
      return TS_ERROR(StatusCode::kInvalidArgument,
                      "policy: override pattern \"%s\" is not a valid regular "
                      "expression: %s",
                      o.pattern.c_str(), e.what());
    }
  }
  return rules;
}

// The buffer type of the first override matching a name (src/llama-model.cpp: the loop over tensor_buft_overrides
// breaks at the first std::regex_search hit); null: none matches.
BufferType* override_of(const std::vector<OverrideRule>& rules, const char* name, bool is_weight) {
  for (const OverrideRule& r : rules) {
    if ((is_weight || !r.weights_only) && std::regex_search(name, r.re)) return r.buft;
  }
  return nullptr;
}

// Row split (-sm row; llama.cpp's make_gpu_buft_list puts each GPU's split buffer type first in its list): the split
// buffer type of each GPU, by the registration's extension function (nullptr for the CPU). llama.cpp hands the split
// buffer type the -ts shares as given (all zero: ggml-cuda's default, each GPU's total memory).
Result<std::vector<BufferType*>> split_buffer_types(const std::vector<Device*>& devices,
                                                    const PlacementPolicy& policy) {
  std::vector<BufferType*> out(devices.size(), nullptr);
  if (policy.split_mode != SplitMode::kRow) return out;
  std::vector<float> shares;
  for (double v : policy.tensor_split) shares.push_back(static_cast<float>(v));
  for (int g : gpu_indices(devices)) {
    Device* d = devices[static_cast<size_t>(g)];
    void* fn = d->reg() != nullptr ? d->reg()->get_proc_address(kSplitBufferTypeProc) : nullptr;
    BufferType* b = fn != nullptr ? reinterpret_cast<SplitBufferTypeFn>(fn)(d, shares.data(), shares.size()) : nullptr;
    if (b == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: -sm row: device %s does not support split buffers",
                      d->name());
    }
    out[static_cast<size_t>(g)] = b;
  }
  return out;
}

// Whether llama.cpp's loader puts a weight in a split buffer type (src/llama-model.cpp, weight_buft_supported): the op
// its tensor info names is a MUL_MAT (in Tessera's architectures every 2-D ".weight" but the token embedding, whose
// output-head copy counts as the output; a ".bias" is always an ADD or ADD_ID, gpt-oss's expert biases 2-D too;
// norms, sinks and rope factors are 1-D, experts 3-D), and the device
// supports that MUL_MAT with the weight in the split buffer type (ggml-cuda: only when the device holds some of its
// rows), asked as llama.cpp asks it: on a stand-in weight in an empty buffer of that type, times 512 activations.
bool takes_row_split(Device& device, BufferType& split, const Tensor& t, bool output_copy) {
  const std::string_view name = t.name;
  if (t.ne[1] < 2 || t.ne[2] != 1 || t.ne[3] != 1 || !name.ends_with(".weight")) return false;
  if (std::strcmp(t.name, "token_embd.weight") == 0 && !output_copy) return false;
  auto dummy = split.alloc_buffer(0);
  if (!dummy.ok()) return false;
  ContextParams cp;
  cp.no_alloc = true;
  Context ctx(cp);
  Tensor* w = ctx.new_tensor_2d(t.type, t.ne[0], t.ne[1]);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, t.ne[0], 512);
  Tensor* mm = w != nullptr && x != nullptr ? mul_mat(ctx, w, x) : nullptr;
  if (mm == nullptr) return false;
  w->buffer = dummy.value().get();
  const bool ok = device.supports_op(*mm);
  w->buffer = nullptr;
  return ok;
}

}  // namespace

bool is_split_buffer_type(const BufferType& b) {
  Device* d = b.device();
  if (d == nullptr || d->reg() == nullptr || d->reg()->get_proc_address(kSplitBytesProc) == nullptr) return false;
  if (&b == d->buffer_type() || &b == d->host_buffer_type()) return false;
  for (BufferType* e : d->extra_buffer_types()) {
    if (&b == e) return false;
  }
  return true;
}

Result<WeightCopies> weight_copies(const std::vector<Device*>& devices, int n_layer, const PlacementPolicy& policy,
                                   bool tied_output, const std::vector<std::string>& rope_factor_names) {
  Result<std::vector<int>> ld = layer_devices(devices, n_layer, policy);
  if (!ld.ok()) return ld.status();
  const std::vector<int>& layer_device = ld.value();
  auto rules = override_rules(devices, policy);
  if (!rules.ok()) return rules.status();
  WeightCopies out;
  const int cpu = static_cast<int>(devices.size()) - 1;
  if (tied_output && override_of(rules.value(), "token_embd.weight", true) == nullptr) {
    out.output = layer_device.back() != cpu;
  }
  bool overridden = false;
  for (const std::string& name : rope_factor_names) {
    overridden = overridden || override_of(rules.value(), name.c_str(), true) != nullptr;
  }
  if (rope_factor_names.empty() || overridden || n_layer < 1) return out;
  std::vector<int> seen{layer_device[0]};  // the devices holding a copy, by copy number
  out.rope_of_layer.assign(static_cast<size_t>(n_layer), 0);
  for (int il = 0; il < n_layer; ++il) {
    const int d = layer_device[static_cast<size_t>(il)];
    const auto at = std::find(seen.begin(), seen.end(), d);
    out.rope_of_layer[static_cast<size_t>(il)] = static_cast<int>(at - seen.begin());
    if (at == seen.end()) seen.push_back(d);
  }
  if (seen.size() == 1) out.rope_of_layer.clear();
  return out;
}

Result<Placement> place_model(const std::vector<Device*>& devices, const std::vector<Tensor*>& weights,
                              const std::vector<Tensor*>& caches, int n_layer, const PlacementPolicy& policy,
                              const std::vector<std::pair<const Tensor*, int>>& layer_of) {
  Result<std::vector<int>> ld = layer_devices(devices, n_layer, policy);
  if (!ld.ok()) return ld.status();
  Placement p;
  p.layer_device = std::move(ld).value();
  p.output_device = p.layer_device.back();
  p.layer_device.pop_back();
  const int cpu = static_cast<int>(devices.size()) - 1;

  auto rules = override_rules(devices, policy);
  if (!rules.ok()) return rules.status();
  auto splits = split_buffer_types(devices, policy);
  if (!splits.ok()) return splits.status();
  std::unordered_map<const Tensor*, int> hinted(layer_of.begin(), layer_of.end());
  // A layer's weight goes to its device's buffer type, a matrix first to the device's split buffer type (-sm row).
  auto device_buft = [&](int d, const Tensor* weight = nullptr, bool output_copy = false) {
    Device* dev = devices[static_cast<size_t>(d)];
    BufferType* split = splits.value()[static_cast<size_t>(d)];
    if (weight != nullptr && split != nullptr && takes_row_split(*dev, *split, *weight, output_copy)) return split;
    return dev->buffer_type();
  };
  // cpu_repack: the CPU's CPU_REPACK buffer type for the matrix weights it repacks (PlacementPolicy::cpu_repack)
  BufferType* repack = nullptr;
  if (policy.cpu_repack) {
    for (BufferType* e : devices[static_cast<size_t>(cpu)]->extra_buffer_types()) {
      if (repack == nullptr && strcasecmp(e->name(), "CPU_REPACK") == 0) repack = e;
    }
  }
  auto to_repack = [&](Tensor* t, BufferType* b) {
    return repack != nullptr && b == devices[static_cast<size_t>(cpu)]->buffer_type() && cpu_repacks(*t) ? repack : b;
  };
  auto choose = [&](Tensor* t, bool is_weight) -> BufferType* {
    if (BufferType* b = override_of(rules.value(), t->name, is_weight)) return b;
    if (!is_weight && !policy.kv_offload) return device_buft(cpu);
    const Tensor* w = is_weight ? t : nullptr;
    if (const auto it = hinted.find(t); it != hinted.end()) {
      const bool in_layer = it->second >= 0 && it->second < n_layer;
      return device_buft(in_layer ? p.layer_device[static_cast<size_t>(it->second)] : p.output_device, w, !in_layer);
    }
    const int layer = layer_of_name(t->name);
    if (layer >= 0 && layer < n_layer) return device_buft(p.layer_device[static_cast<size_t>(layer)], w);
    if (is_weight && (std::strncmp(t->name, "output", 6) == 0)) return device_buft(p.output_device, w);
    return device_buft(cpu);
  };
  for (Tensor* w : weights) p.where.emplace_back(w, to_repack(w, choose(w, true)));
  const size_t n_weights = p.where.size();
  for (Tensor* c : caches) p.where.emplace_back(c, choose(c, false));

  std::vector<std::pair<Tensor*, BufferType*>> wl(p.where.begin(), p.where.begin() + static_cast<long>(n_weights));
  std::vector<std::pair<Tensor*, BufferType*>> cl(p.where.begin() + static_cast<long>(n_weights), p.where.end());
  auto wb = allocate_tensors(wl, BufferUsage::kWeights);
  if (!wb.ok()) return wb.status();
  auto cb = allocate_tensors(cl, BufferUsage::kAny);
  if (!cb.ok()) return cb.status();
  for (auto* list : {&wb.value(), &cb.value()}) {
    for (auto& b : *list) p.buffers.push_back(std::move(b));
  }
  p.weight_bytes.assign(devices.size(), 0);
  p.cache_bytes.assign(devices.size(), 0);
  for (size_t i = 0; i < p.where.size(); ++i) {
    const auto [t, b] = p.where[i];
    auto& bytes = i < n_weights ? p.weight_bytes : p.cache_bytes;
    const bool split = std::find(splits.value().begin(), splits.value().end(), b) != splits.value().end();
    void* split_bytes = split ? b->device()->reg()->get_proc_address(kSplitBytesProc) : nullptr;
    for (size_t d = 0; d < devices.size(); ++d) {
      if (split_bytes != nullptr) {  // (a split tensor's rows on every GPU)
        bytes[d] += reinterpret_cast<SplitBytesFn>(split_bytes)(*b, *t, *devices[d]);
      } else if (b->device() == devices[d]) {
        bytes[d] += b->alloc_size(*t);
      }
    }
  }
  return p;
}

}  // namespace tessera::harness
