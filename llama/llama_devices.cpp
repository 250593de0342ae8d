// A GPU of a topology as llama.cpp names it (see tessera/llama/llama_devices.h).
#include "tessera/llama/llama_devices.h"

namespace tessera::llama {

std::optional<size_t> find_gpu(const sim::TopologyConfig& t, const std::string& name) {
  for (size_t i = 0; i < t.devices.size(); ++i) {
    if (t.devices[i].type == DeviceType::kCpu) continue;
    if (t.devices[i].name == name || "CUDA" + std::to_string(sim::gpu_number(t, i)) == name) return i;
  }
  return std::nullopt;
}

std::string gpu_names(const sim::TopologyConfig& t) {
  std::string out;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    if (t.devices[i].type == DeviceType::kCpu) continue;
    out += (out.empty() ? "" : ", ") + t.devices[i].name + " (CUDA" + std::to_string(sim::gpu_number(t, i)) + ")";
  }
  return out.empty() ? "none" : out;
}

}  // namespace tessera::llama
