// A GPU of a topology as llama.cpp names it (-dev, -devd, an -ot buffer type): the topology's own name ("gpu1") or
// llama.cpp's CUDA<n> (n: sim::gpu_number, the GPU's number on the machine), so that every option naming devices
// finds them alike and says the same when it does not.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "tessera/sim/device_config.h"

namespace tessera::llama {

// The index in t.devices of the GPU named `name` ("gpu1" or "CUDA1"), or nothing (a CPU device is no GPU).
std::optional<size_t> find_gpu(const sim::TopologyConfig& t, const std::string& name);
// The topology's GPUs for a message: "gpu0 (CUDA0), gpu1 (CUDA1)", or "none".
std::string gpu_names(const sim::TopologyConfig& t);

}  // namespace tessera::llama
