// The hosts of a topology and the devices on them (docs/topology.md "Hosts and remote devices"): remote hosts reached
// over a network link, as llama.cpp's RPC servers are (tools/rpc/README.md in ggml-org/llama.cpp), and the rules a
// remote device follows. The simulator times the copies (sim/sim_network.cpp).
#include "topology_hosts.h"

#include <cmath>

#include "common/json_read.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/sim/hosts.h"

namespace tessera::harness::topology_hosts {

using namespace tessera::sim;
using namespace json_read;
using ojson = nlohmann::ordered_json;

namespace {

// At most this many remote hosts (a topology has at most 16 devices, so more hosts could hold no device).
constexpr size_t kMaxHosts = 16;

std::string host_names(const TopologyConfig& t) {
  std::string s = "host";
  for (const HostConfig& h : t.hosts) s += ", " + h.name;
  return s;
}

HostConfig parse_host(const json& v, const std::string& path) {
  expect_object(v, path, {"name", "description", "via", "link"},
                "a host object such as {\"name\": \"node1\", \"link\": {\"bandwidth\": \"1.25 GB/s\", \"latency\": "
                "\"50 us\"}}");
  HostConfig h;
  h.name = get_string(required(v, path, "name", "the host's name, e.g. \"node1\""), child(path, "name"));
  if (const json* x = member(v, "description")) h.description = get_string(*x, child(path, "description"));
  if (const json* x = member(v, "via")) h.via = get_string(*x, child(path, "via"));
  if (is_local_host(h.via)) h.via.clear();  // "host": the local host, written as the default
  if (const json* x = member(v, "link")) {
    const std::string p = child(path, "link");
    expect_object(*x, p, {"bandwidth", "latency"},
                  "an object {\"bandwidth\": \"1.25 GB/s\", \"latency\": \"50 us\"} (the network link)");
    h.bandwidth = get_rate(required(*x, p, "bandwidth", "the network's bandwidth, e.g. \"1.25 GB/s\" for 10 GbE"),
                           child(p, "bandwidth"));
    h.latency_us =
        get_duration(required(*x, p, "latency", "the time of one crossing, e.g. \"50 us\""), child(p, "latency"));
  }
  return h;
}

bool positive_finite(double v) { return v > 0 && std::isfinite(v); }

}  // namespace

void parse_hosts(const json& root, TopologyConfig* t) {
  const json* x = member(root, "hosts");
  if (x == nullptr) return;
  t->hosts = get_list<HostConfig>(*x, "hosts", "host objects", parse_host);
  if (t->hosts.size() > kMaxHosts) {
    fail("hosts", format_message("expected at most %zu remote hosts, got %zu", kMaxHosts, t->hosts.size()));
  }
}

void parse_device_host(const json& v, const std::string& path, DeviceConfig* d) {
  if (const json* x = member(v, "host")) d->host = get_string(*x, child(path, "host"), "a host name");
  if (is_local_host(d->host)) d->host.clear();  // "host": the local host, written as the default
}

Status validate(const TopologyConfig& t) {
  if (t.hosts.size() > kMaxHosts) return invalid(format_message("hosts: expected at most %zu remote hosts", kMaxHosts));
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    const HostConfig& h = t.hosts[i];
    const std::string path = element("hosts", i);
    if (h.name.empty()) return invalid(child(path, "name") + ": expected a non-empty host name");
    if (is_local_host(h.name)) {
      return invalid(child(path, "name") +
                     ": \"host\" is the local host (the one running the program), which is implicit; give the remote "
                     "host another name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (iequal(t.hosts[j].name, h.name)) {
        return invalid(child(path, "name") + ": duplicate host name " + quote(h.name) + " (hosts[" + std::to_string(j) +
                       "] is " + quote(t.hosts[j].name) + "; names are case-insensitive)");
      }
    }
    for (size_t k = 0; k < t.devices.size(); ++k) {
      if (iequal(t.devices[k].name, h.name)) {
        return invalid(child(path, "name") + ": host name " + quote(h.name) + " is taken by devices[" +
                       std::to_string(k) + "].name (host and device names are case-insensitive)");
      }
    }
    if (h.bandwidth == 0) {
      std::string on;
      for (size_t k = 0; k < t.devices.size(); ++k) {
        if (iequal(t.devices[k].host, h.name))
          on += std::string(on.empty() ? "" : ", ") + "devices[" + std::to_string(k) + "] " + quote(t.devices[k].name);
      }
      return invalid(path + ": host " + quote(h.name) +
                     " has no network link (give it \"link\": {\"bandwidth\": \"1.25 GB/s\", \"latency\": \"50 us\"})" +
                     (on.empty() ? std::string() : ", so " + on + " on it could not be reached") +
                     " (rule: every remote host is reached through a network link)");
    }
    if (!positive_finite(h.bandwidth)) {
      return invalid(child(child(path, "link"), "bandwidth") + ": expected a bandwidth > 0, got " +
                     number_text(h.bandwidth) + " B/s");
    }
    if (!(h.latency_us >= 0) || !std::isfinite(h.latency_us)) {
      return invalid(child(child(path, "link"), "latency") + ": expected a duration >= 0");
    }
    if (find_host(t, h.via) == -2) {
      return invalid(child(path, "via") + ": unknown host " + quote(h.via) + " (expected one of: " + host_names(t) +
                     ") (rule: a host is reached through the local host, \"host\", or another of \"hosts\")");
    }
  }
  // Following "via" from each host must reach the local host; a host met twice on the way is a cycle.
  for (size_t i = 0; i < t.hosts.size(); ++i) {
    std::string chain = t.hosts[i].name;
    std::vector<bool> seen(t.hosts.size(), false);
    for (int at = static_cast<int>(i); at >= 0;) {
      seen[static_cast<size_t>(at)] = true;
      at = find_host(t, t.hosts[static_cast<size_t>(at)].via);
      if (at < 0) break;
      chain += " -> " + t.hosts[static_cast<size_t>(at)].name;
      if (seen[static_cast<size_t>(at)]) {
        return invalid(child(element("hosts", i), "via") + ": a cycle of hosts (" + chain +
                       ") never reaches the local host (rule: following \"via\" from every host ends at the local "
                       "host, \"host\")");
      }
    }
  }
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceConfig& d = t.devices[i];
    const std::string path = element("devices", i);
    const int h = find_host(t, d.host);
    if (h == -2) {
      return invalid(child(path, "host") + ": unknown host " + quote(d.host) + " (expected one of: " + host_names(t) +
                     ") (rule: a device is on the local host, \"host\", the default, or on one of \"hosts\")");
    }
    if (h == -1) continue;
    const std::string where = "device " + quote(d.name) + " is on host " + quote(d.host);
    if (i + 1 == t.devices.size() || d.type == DeviceType::kCpu) {
      return invalid(child(path, "host") + ": " + where +
                     ", but the CPU device is the local host's: the program and the scheduler's last backend run there "
                     "(rule: the CPU device is on the local host)");
    }
    if (d.unified) {
      return invalid(child(path, "unified") + ": " + where +
                     "; the host pool a unified device shares is the local CPU device's memory (rule: a remote device "
                     "is not unified)");
    }
    if (d.host_visible) {
      return invalid(child(path, "host_visible") + ": " + where +
                     ": its buffers are that host's memory, which the local CPU cannot address (rule: a remote device "
                     "is never host-visible)");
    }
    if (!d.wraps.empty()) {
      return invalid(child(path, "wraps") + ": " + where +
                     ", and a wrapped real device computes in this process (rule: a remote device is a pure simulated "
                     "device)");
    }
    for (const auto& [key, on] :
         {std::pair{"host_buffer", d.caps.host_buffer}, std::pair{"from_host_ptr", d.caps.buffer_from_host_ptr}}) {
      if (on) {
        return invalid(child(child(path, "caps"), key) + ": " + where +
                       ", and llama.cpp's RPC device has no buffers in the local host's memory (rule: a remote device "
                       "has no pinned host buffer type and no buffers from host pointers)");
      }
    }
  }
  auto where = [&](const std::string& end, int* host) {
    if (iequal(end, "host")) {
      *host = -1;
      return std::string("\"host\" (the local host's memory)");
    }
    for (const DeviceConfig& d : t.devices) {
      if (!iequal(d.name, end)) continue;
      *host = find_host(t, d.host);
      return quote(d.name) + (*host < 0 ? " on the local host" : " on host " + quote(d.host));
    }
    *host = -1;
    return quote(end);
  };
  for (size_t i = 0; i < t.links.size(); ++i) {
    int ha = -1, hb = -1;
    const std::string a = where(t.links[i].a, &ha), b = where(t.links[i].b, &hb);
    if (ha != hb) {
      return invalid(element("links", i) + ": " + a + " and " + b +
                     " are on different hosts: a copy between hosts crosses the hosts' network links (\"hosts\"), and "
                     "a remote device's link to its own host is its \"host_link\" (rule: a link joins two endpoints on "
                     "one host)");
    }
  }
  return Status::Ok();
}

void write_hosts(const TopologyConfig& t, ojson* root) {
  if (t.hosts.empty()) return;
  ojson hosts = ojson::array();
  for (const HostConfig& h : t.hosts) {
    ojson o;
    o["name"] = h.name;
    if (!h.description.empty()) o["description"] = h.description;
    if (!is_local_host(h.via)) o["via"] = h.via;
    o["link"] = ojson{{"bandwidth", format_rate(h.bandwidth)}, {"latency", format_duration_us(h.latency_us)}};
    hosts.push_back(std::move(o));
  }
  (*root)["hosts"] = std::move(hosts);
}

void write_device_host(const DeviceConfig& d, ojson* device) {
  if (!is_local_host(d.host)) (*device)["host"] = d.host;
}

}  // namespace tessera::harness::topology_hosts
