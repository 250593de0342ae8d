// Hosts by name, for the simulator's network timing (sim/sim_network.cpp) and the topology loader's checks
// (harness/topology/topology_hosts.cpp); docs/topology.md "Hosts and remote devices".
#pragma once

#include <string>

#include "tessera/sim/device_config.h"

namespace tessera::sim {

// "" and "host" (any case) are the local host.
bool is_local_host(const std::string& host);
// The index of the host named `name` (case-insensitive) in t.hosts; -1 for the local host, -2 when there is none.
int find_host(const TopologyConfig& t, const std::string& name);

}  // namespace tessera::sim
