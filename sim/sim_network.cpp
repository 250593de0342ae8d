// Hosts and remote devices (docs/simulator.md "Copies between hosts", docs/topology.md "Hosts and remote devices"):
// which host each device is on, the network path from the local host to each remote host, and the time of a copy.
//
// The rule follows llama.cpp's RPC backend (ggml-rpc.cpp; tools/rpc/README.md): the program talks to each remote
// host's rpc-server over the network, and a copy whose two ends are on different hosts goes through the local host's
// memory as separate transfers, one after the other (ggml_backend_tensor_copy falls back to get_tensor into host
// memory and set_tensor from it when the buffers' cpy_tensor refuses, which the RPC buffer does for a buffer of another
// server; the server writes what it received into its device). So its legs add up: the source device's link to its
// host, the network links from the source's host to the local host, those from the local host to the destination's
// host, the destination's link to its host; each leg latency + bytes / bandwidth. Two devices on one remote host copy
// on that host (RPC_CMD_COPY_TENSOR): the command crosses the network (its latency, no bytes), the bytes move as
// between two devices of the local host.
#include <algorithm>
#include <cmath>

#include "sim_impl.h"
#include "tessera/sim/hosts.h"

namespace tessera::sim {

namespace {

Status bad(const TopologyConfig& t, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, "topology " + t.name + ": " + what);
}

}  // namespace

bool is_local_host(const std::string& host) { return host.empty() || same_name(host, "host"); }

int find_host(const TopologyConfig& t, const std::string& name) {
  if (is_local_host(name)) return -1;
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    if (same_name(t.hosts[i].name, name)) return static_cast<int>(i);
  }
  return -2;
}

Status check_hosts(const TopologyConfig& t) {
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    const HostConfig& h = t.hosts[i];
    if (h.name.empty() || is_local_host(h.name)) return bad(t, "a remote host needs a name other than \"host\"");
    for (size_t j = 0; j < i; ++j) {
      if (same_name(t.hosts[j].name, h.name)) return bad(t, "two hosts named " + h.name);
    }
    for (const DeviceConfig& d : t.devices) {
      if (same_name(d.name, h.name)) return bad(t, "host " + h.name + " has the name of a device");
    }
    if (!(h.bandwidth > 0) || !std::isfinite(h.bandwidth) || !(h.latency_us >= 0) || !std::isfinite(h.latency_us)) {
      return bad(t, "host " + h.name + ": its network link needs a bandwidth > 0 and a latency >= 0");
    }
    if (find_host(t, h.via) == -2) return bad(t, "host " + h.name + " is reached through unknown host " + h.via);
  }
  // Following `via` from any host reaches the local host within as many steps as there are hosts.
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    int at = static_cast<int>(i);
    for (size_t step = 0; at >= 0 && step <= t.hosts.size(); ++step) at = find_host(t, t.hosts[at].via);
    if (at >= 0) return bad(t, "host " + t.hosts[i].name + " is in a cycle of hosts that never reaches the local host");
  }
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceConfig& d = t.devices[i];
    const int h = find_host(t, d.host);
    if (h == -2) return bad(t, "device " + d.name + " is on unknown host " + d.host);
    if (h == -1) continue;
    if (d.type == DeviceType::kCpu || i + 1 == t.devices.size()) {
      return bad(t, "the CPU device " + d.name + " must be on the local host");
    }
    if (d.unified || d.host_visible || !d.wraps.empty() || d.caps.host_buffer || d.caps.buffer_from_host_ptr) {
      return bad(t, "device " + d.name + " on remote host " + d.host +
                        " cannot be unified, host-visible, wrapped or use local host memory");
    }
  }
  auto host_of = [&](const std::string& end) {
    for (const DeviceConfig& d : t.devices) {
      if (same_name(d.name, end)) return find_host(t, d.host);
    }
    return -3;  // "host"
  };
  for (const LinkConfig& l : t.links) {
    const int a = host_of(l.a), b = host_of(l.b);
    if (a != b && !(a == -3 && b == -1) && !(a == -1 && b == -3)) {
      return bad(t, "link " + l.a + "-" + l.b + " joins two hosts (a link joins endpoints on one host)");
    }
  }
  return Status::Ok();
}

void init_network(Simulator::Impl* s) {
  const TopologyConfig& t = s->topo;
  for (const DeviceConfig& d : t.devices) s->device_host.push_back(find_host(t, d.host));
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    std::vector<Simulator::Impl::Hop> path;
    for (int at = static_cast<int>(i); at >= 0; at = find_host(t, t.hosts[static_cast<size_t>(at)].via)) {
      path.push_back({t.hosts[static_cast<size_t>(at)].bandwidth, t.hosts[static_cast<size_t>(at)].latency_us});
    }
    s->host_path.push_back(std::move(path));
  }
}

double Simulator::Impl::host_leg_us(int device, double b) const {
  if (device < 0) return 0.0;
  const DeviceConfig& c = topo.devices[static_cast<size_t>(device)];
  double bw = c.host_bandwidth, lat = c.host_latency_us;
  for (const LinkConfig& l : topo.links) {
    if ((same_name(l.a, c.name) && same_name(l.b, "host")) || (same_name(l.a, "host") && same_name(l.b, c.name))) {
      bw = l.bandwidth;
      lat = l.latency_us;
    }
  }
  return lat + (bw > 0 ? b / bw * 1e6 : 0.0);
}

double Simulator::Impl::same_host_copy_us(int from, int to, double b) const {
  const std::string host = "host";
  const std::string& na = from < 0 ? host : topo.devices[static_cast<size_t>(from)].name;
  const std::string& nb = to < 0 ? host : topo.devices[static_cast<size_t>(to)].name;
  for (const LinkConfig& l : topo.links) {
    if ((same_name(l.a, na) && same_name(l.b, nb)) || (same_name(l.a, nb) && same_name(l.b, na))) {
      return l.latency_us + b / l.bandwidth * 1e6;
    }
  }
  // No explicit link: through the host, at the smaller of the two host bandwidths and the sum of the latencies.
  double bw = 1e300, lat = 0.0;
  for (int d : {from, to}) {
    if (d < 0) continue;
    const DeviceConfig& c = topo.devices[static_cast<size_t>(d)];
    double dbw = c.host_bandwidth, dlat = c.host_latency_us;
    for (const LinkConfig& l : topo.links) {
      if ((same_name(l.a, c.name) && same_name(l.b, host)) || (same_name(l.a, host) && same_name(l.b, c.name))) {
        dbw = l.bandwidth;
        dlat = l.latency_us;
      }
    }
    bw = std::min(bw, dbw);
    lat += dlat;
  }
  return lat + (bw > 0 ? b / bw * 1e6 : 0.0);
}

double Simulator::Impl::copy_time_us(int from, int to, size_t bytes) const {
  const double b = static_cast<double>(bytes);
  const double slow = opt.faults.slow_copy_factor > 0 ? opt.faults.slow_copy_factor : 1.0;
  if (from == to) {
    if (from < 0) return 0.0;
    const CostModel& m = topo.devices[static_cast<size_t>(from)].cost;
    return slow * (m.launch_overhead_us + (m.mem_bandwidth > 0 ? b / m.mem_bandwidth * 1e6 : 0.0));
  }
  const int hf = from < 0 ? -1 : device_host[static_cast<size_t>(from)];
  const int ht = to < 0 ? -1 : device_host[static_cast<size_t>(to)];
  if (hf == ht) {
    double us = same_host_copy_us(from, to, b);
    // On a remote host: the copy command crosses the network to it (latency only).
    if (hf >= 0) {
      for (const Hop& h : host_path[static_cast<size_t>(hf)]) us += h.latency_us;
    }
    return slow * us;
  }
  // Different hosts: through the local host's memory, leg after leg.
  double us = host_leg_us(from, b) + host_leg_us(to, b);
  for (int h : {hf, ht}) {
    if (h < 0) continue;
    for (const Hop& hop : host_path[static_cast<size_t>(h)]) us += hop.latency_us + b / hop.bandwidth * 1e6;
  }
  return slow * us;
}

}  // namespace tessera::sim
