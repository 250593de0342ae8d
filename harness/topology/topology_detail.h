// Internal to the topology loader (topology.cpp, topology_bufts.cpp): the pieces of the device parser that the buffer
// type keys share (op rules), and the buffer type keys themselves ("padding", "buffer_types"; docs/topology.md).
// Parse functions throw json_read::ParseProblem; validation returns a Status naming the JSON path.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/sim/device_config.h"
#include "tessera/status.h"

namespace tessera::harness::topology_detail {

using ojson = nlohmann::ordered_json;

sim::OpRule parse_rule(const nlohmann::json& v, const std::string& path);
// {"default": "allow" | "deny", "rules": [...]}
void parse_ops(const nlohmann::json& v, const std::string& path, bool* default_allow, std::vector<sim::OpRule>* rules);
Status validate_rules(const std::vector<sim::OpRule>& rules, const std::string& path);
ojson ops_json(bool default_allow, const std::vector<sim::OpRule>& op_rules);
ojson op_list(const std::vector<Op>& ops);
ojson type_list(const std::vector<Type>& types);

// The device keys "padding" and "buffer_types" (topology_bufts.cpp).
void parse_buffer_keys(const nlohmann::json& device, const std::string& path, sim::DeviceConfig* d);
Status validate_buffer_keys(const sim::DeviceConfig& d, const std::string& path);
// Buffer type names against every device name and every other buffer type name of the topology.
Status validate_buffer_type_names(const sim::TopologyConfig& t);
void buffer_keys_json(const sim::DeviceConfig& d, ojson* device);

}  // namespace tessera::harness::topology_detail
