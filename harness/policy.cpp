// Placement policies (see tessera/harness/policy.h).
#include "tessera/harness/policy.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <strings.h>

#include "tessera/harness/allocate.h"
#include "tessera/sim/simulator.h"

namespace tessera::harness {

using namespace tessera::sim;

SchedulerParams PlacementPolicy::scheduler_params() const {
  SchedulerParams p;
  p.op_offload = op_offload;
  p.parallel = parallel;
  p.max_split_inputs = max_split_inputs;
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

namespace {

std::vector<int> gpu_indices(const std::vector<Device*>& devices) {
  std::vector<int> g;
  for (size_t i = 0; i + 1 < devices.size(); ++i) {
    if (devices[i]->type() != DeviceType::kCpu) g.push_back(static_cast<int>(i));
  }
  return g;
}

size_t total_memory(const Device& d) {
  size_t free = 0, total = 0;
  d.memory(&free, &total);
  return total;
}

BufferType* find_target(const std::vector<Device*>& devices, const std::string& target) {
  for (Device* d : devices) {
    if (strcasecmp(d->name(), target.c_str()) == 0) return d->buffer_type();
  }
  for (Device* d : devices) {
    for (BufferType* b : {d->buffer_type(), d->host_buffer_type()}) {
      if (b != nullptr && strcasecmp(b->name(), target.c_str()) == 0) return b;
    }
  }
  return nullptr;
}

}  // namespace

std::vector<Device*> devices_of(const Simulator& simulator) {
  std::vector<Device*> d;
  for (size_t i = 0; i < simulator.device_count(); ++i) d.push_back(simulator.device(i));
  return d;
}

Result<std::vector<int>> layer_devices(const std::vector<Device*>& devices, int n_layer,
                                       const PlacementPolicy& policy) {
  if (devices.empty()) return TS_ERROR(StatusCode::kInvalidArgument, "policy: no devices to place onto");
  const int cpu = static_cast<int>(devices.size()) - 1;
  const std::vector<int> gpus = gpu_indices(devices);
  std::vector<int> out(static_cast<size_t>(std::max(n_layer, 0)), cpu);
  if (!policy.layers_per_device.empty()) {
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
    // The offloaded layers are the last `total`; the first GPU takes the first of them.
    int layer = n_layer - total;
    for (size_t g = 0; g < policy.layers_per_device.size(); ++g) {
      for (int k = 0; k < policy.layers_per_device[g]; ++k) out[static_cast<size_t>(layer++)] = gpus[g];
    }
    return out;
  }
  int n_off = policy.n_gpu_layers < 0 ? n_layer : std::min(policy.n_gpu_layers, n_layer);
  if (gpus.empty()) n_off = 0;
  if (n_off == 0) return out;
  std::vector<double> share;
  if (!policy.tensor_split.empty()) {
    if (policy.tensor_split.size() > gpus.size()) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split has %zu entries for %zu GPUs",
                      policy.tensor_split.size(), gpus.size());
    }
    share = policy.tensor_split;
    share.resize(gpus.size(), 0.0);
  } else {
    for (int g : gpus) share.push_back(static_cast<double>(total_memory(*devices[static_cast<size_t>(g)])));
  }
  double sum = 0.0;
  for (double s : share) {
    if (!(s >= 0.0) || !std::isfinite(s)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split entries must be >= 0 (got %g)", s);
    }
    sum += s;
  }
  if (!(sum > 0.0)) return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split has no positive entry");
  // Layer i of the offloaded ones goes to the GPU whose cumulative share covers (i + 0.5) / n_off.
  const int first = n_layer - n_off;
  for (int i = 0; i < n_off; ++i) {
    const double pos = (static_cast<double>(i) + 0.5) / static_cast<double>(n_off) * sum;
    double acc = 0.0;
    size_t g = 0;
    for (; g + 1 < share.size(); ++g) {
      acc += share[g];
      if (pos < acc) break;
    }
    out[static_cast<size_t>(first + i)] = gpus[g];
  }
  return out;
}

Result<Placement> place_model(const std::vector<Device*>& devices, const std::vector<Tensor*>& weights,
                              const std::vector<Tensor*>& caches, int n_layer, const PlacementPolicy& policy) {
  Result<std::vector<int>> ld = layer_devices(devices, n_layer, policy);
  if (!ld.ok()) return ld.status();
  Placement p;
  p.layer_device = std::move(ld).value();
  const int cpu = static_cast<int>(devices.size()) - 1;
  const std::vector<int> gpus = gpu_indices(devices);
  const bool head_on_gpu =
      !gpus.empty() && (policy.n_gpu_layers < 0 || policy.n_gpu_layers > n_layer) && policy.layers_per_device.empty();
  const int head_device = head_on_gpu ? (n_layer > 0 ? p.layer_device.back() : gpus.back()) : cpu;

  std::vector<std::pair<std::regex, BufferType*>> rules;
  for (const TensorOverride& o : policy.overrides) {
    BufferType* b = find_target(devices, o.target);
    if (b == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: override \"%s\": unknown device or buffer type \"%s\"",
                      o.pattern.c_str(), o.target.c_str());
    }
    try {
      rules.emplace_back(std::regex(o.pattern, std::regex::ECMAScript), b);
    } catch (const std::regex_error& e) {
      return TS_ERROR(StatusCode::kInvalidArgument,
                      "policy: override pattern \"%s\" is not a valid regular "
                      "expression: %s",
                      o.pattern.c_str(), e.what());
    }
  }
  auto device_buft = [&](int d) { return devices[static_cast<size_t>(d)]->buffer_type(); };
  auto choose = [&](Tensor* t, bool is_weight) -> BufferType* {
    for (const auto& [re, b] : rules) {
      if (std::regex_search(t->name, re)) return b;
    }
    const int layer = layer_of_name(t->name);
    if (layer >= 0 && layer < n_layer) return device_buft(p.layer_device[static_cast<size_t>(layer)]);
    if (is_weight && (std::strncmp(t->name, "output", 6) == 0)) return device_buft(head_device);
    return device_buft(cpu);
  };
  for (Tensor* w : weights) p.where.emplace_back(w, choose(w, true));
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
    for (size_t d = 0; d < devices.size(); ++d) {
      if (b->device() == devices[d]) {
        (i < n_weights ? p.weight_bytes : p.cache_bytes)[d] += b->alloc_size(*t);
      }
    }
  }
  return p;
}

}  // namespace tessera::harness
