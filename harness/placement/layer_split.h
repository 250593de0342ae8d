// Pieces of the layer split shared by the current rules (policy.cpp, layer_devices) and version 1's (policy_v1.cpp,
// layer_devices_v1). Internal to placement/.
#pragma once

#include <vector>

#include "tessera/backend.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/status.h"

namespace tessera::harness {

// The indices of the devices that take offloaded layers: every one but the last (the CPU) that is not a CPU.
std::vector<int> gpu_indices(const std::vector<Device*>& devices);

// Explicit layer counts per GPU (policy.layers_per_device, not empty) into `out` (n_layer + 1 entries, the CPU's
// index in each): the offloaded layers are the last of them in all, the first GPU takes the first; the output layer
// (out[n_layer]) stays on the CPU. Errors: more counts than GPUs, a negative count, more layers than the model has.
Status place_layers_per_device(const std::vector<int>& gpus, int n_layer, const PlacementPolicy& policy,
                               std::vector<int>* out);

}  // namespace tessera::harness
