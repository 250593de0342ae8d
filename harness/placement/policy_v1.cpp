// The layer split of Tessera's placement before commit 9a5a0e0 gave n_gpu_layers and tensor_split llama.cpp's
// meanings (see layer_devices_v1 in tessera/harness/placement/policy.h): what a scenario file of version 1 meant
// (docs/scenarios.md, "Versions"). Kept as it was, so that such a file is read as it was written.
#include <algorithm>
#include <cmath>

#include "tessera/harness/placement/policy.h"
#include "layer_split.h"

namespace tessera::harness {

Result<std::vector<int>> layer_devices_v1(const std::vector<Device*>& devices, int n_layer,
                                          const PlacementPolicy& policy) {
  if (devices.empty()) return TS_ERROR(StatusCode::kInvalidArgument, "policy: no devices to place onto");
  if (n_layer < 0) return TS_ERROR(StatusCode::kInvalidArgument, "policy: a negative layer count (%d)", n_layer);
  const int cpu = static_cast<int>(devices.size()) - 1;
  const std::vector<int> gpus = gpu_indices(devices);
  // One entry per layer, then the output layer (the "output head"), as layer_devices returns them.
  std::vector<int> out(static_cast<size_t>(n_layer) + 1, cpu);
  if (!policy.layers_per_device.empty()) {  // (the same in both versions)
    TS_RETURN_IF_ERROR(place_layers_per_device(gpus, n_layer, policy, &out));
    return out;
  }
  // The last n_off layers are offloaded (-1: all of them); the head goes with them only for -1 or more than n_layer.
  int n_off = policy.n_gpu_layers < 0 ? n_layer : std::min(policy.n_gpu_layers, n_layer);
  if (gpus.empty()) n_off = 0;
  const bool head_on_gpu = !gpus.empty() && (policy.n_gpu_layers < 0 || policy.n_gpu_layers > n_layer);
  if (n_off > 0) {
    std::vector<double> share;
    if (!policy.tensor_split.empty()) {
      if (policy.tensor_split.size() > gpus.size()) {
        return TS_ERROR(StatusCode::kInvalidArgument, "policy: tensor_split has %zu entries for %zu GPUs",
                        policy.tensor_split.size(), gpus.size());
      }
      share = policy.tensor_split;
      share.resize(gpus.size(), 0.0);
    } else {
      // The default shares were each GPU's total memory (llama.cpp's, and version 2's, are its free memory).
      for (int g : gpus) {
        size_t free = 0, total = 0;
        devices[static_cast<size_t>(g)]->memory(&free, &total);
        share.push_back(static_cast<double>(total));
      }
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
  }
  // The head went to the last layer's device (the last GPU when there are no layers).
  if (head_on_gpu) out.back() = n_layer > 0 ? out[static_cast<size_t>(n_layer) - 1] : gpus.back();
  return out;
}

}  // namespace tessera::harness
