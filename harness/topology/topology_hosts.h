// The hosts of a topology and the devices on them (docs/topology.md "Hosts and remote devices"): the top-level
// "hosts" list, each device's "host" key, and the rules of remote devices. Internal to the topology loader
// (topology.cpp).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "tessera/sim/device_config.h"
#include "tessera/status.h"

namespace tessera::harness::topology_hosts {

// Reads the top-level "hosts" list (throws json_read::ParseProblem).
void parse_hosts(const nlohmann::json& root, sim::TopologyConfig* t);
// Reads a device's "host" key.
void parse_device_host(const nlohmann::json& device, const std::string& path, sim::DeviceConfig* d);
// The rules (each error names the JSON path and the rule); run after the devices' and links' own checks.
Status validate(const sim::TopologyConfig& t);
// Writes "hosts" (when there are any) and a device's "host" (when it is remote).
void write_hosts(const sim::TopologyConfig& t, nlohmann::ordered_json* root);
void write_device_host(const sim::DeviceConfig& d, nlohmann::ordered_json* device);

}  // namespace tessera::harness::topology_hosts
