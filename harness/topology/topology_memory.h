// The memory keys of a topology's devices (docs/topology.md "Unified memory and overheads"): unified memory sharing
// the host pool, the driver's reservation, memory reported free that cannot be allocated, the fit margin. Internal to
// the topology loader (topology.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tessera/sim/device_config.h"
#include "tessera/status.h"

namespace tessera::harness::topology_memory {

// The device keys this file reads (for the unknown-key check).
inline constexpr const char* kKeys[] = {"unified", "reserved", "unallocatable", "fit_margin"};
// Reads them from a device object; a unified device without "memory" gets memory 0 until resolve() gives it the pool.
void parse(const nlohmann::json& device, const std::string& path, sim::DeviceConfig* d);
// After every device is read: a unified device without "memory" shares the whole pool (the CPU device's memory).
void resolve(sim::TopologyConfig* t);
// The rules (each error names the JSON path and the rule).
Status validate(const sim::TopologyConfig& t);
// Writes the keys that differ from their defaults.
void write(const sim::DeviceConfig& d, nlohmann::ordered_json* o);

}  // namespace tessera::harness::topology_memory
