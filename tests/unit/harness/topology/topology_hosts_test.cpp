// Hosts and remote devices in topology files (docs/topology.md "Hosts and remote devices"): the "hosts" list, each
// device's "host", and the rules of impossible topologies, each error naming the file, the JSON path and the rule. The
// RPC preset holds the figures its file cites.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

std::string hosts_error_of(const std::string& text) {
  Result<TopologyConfig> r = parse_topology(text, "rig.json");
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

constexpr const char* kNode1 = R"({"name": "node1", "link": {"bandwidth": "1.25 GB/s", "latency": "50 us"}})";

// rpc0 (with `remote_fields`) on a host, gpu0 local, the CPU (with `cpu_fields`); `hosts` is the hosts list.
std::string hosts_rig(const std::string& remote_fields = R"("host": "node1")", const std::string& hosts = kNode1,
                      const std::string& extra = "", const std::string& cpu_fields = "") {
  return R"({"name": "t", "hosts": [)" + hosts + R"(], "devices": [{"name": "rpc0", "type": "gpu")" +
         (remote_fields.empty() ? "" : ", " + remote_fields) + R"(}, {"name": "gpu0"}, {"name": "cpu", "type": "cpu")" +
         (cpu_fields.empty() ? "" : ", " + cpu_fields) + "}]" + extra + "}";
}

TEST(TopologyHosts, ParsesAndWritesBack) {
  Result<TopologyConfig> t = parse_topology(
      hosts_rig(
          R"("host": "node2")",
          std::string(kNode1) +
              R"(, {"name": "node2", "description": "IB", "via": "node1", "link": {"bandwidth": "12.5 GB/s", "latency": "2 us"}})"),
      "r");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->hosts.size(), 2u);
  EXPECT_EQ(t->hosts[0].name, "node1");
  EXPECT_EQ(t->hosts[0].via, "");
  EXPECT_EQ(t->hosts[0].bandwidth, 1.25e9);
  EXPECT_EQ(t->hosts[0].latency_us, 50.0);
  EXPECT_EQ(t->hosts[1].via, "node1");
  EXPECT_EQ(t->hosts[1].bandwidth, 12.5e9);
  EXPECT_EQ(t->devices[0].host, "node2");
  EXPECT_EQ(t->devices[1].host, "");
  const std::string text = topology_to_json(t.value());
  EXPECT_THAT(text, HasSubstr(R"("host": "node2",)"));
  EXPECT_THAT(text, HasSubstr(R"("via": "node1",)"));
  Result<TopologyConfig> back = parse_topology(text, "back");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(topology_to_json(back.value()), text);
}

// "host" names the local host, as the link endpoint does; it reads back as the default.
TEST(TopologyHosts, HostIsTheLocalHost) {
  Result<TopologyConfig> t = parse_topology(hosts_rig(R"("host": "host")"), "r");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->devices[0].host, "");
  EXPECT_THAT(topology_to_json(t.value()), ::testing::Not(HasSubstr(R"("host": )")));
}

TEST(TopologyHosts, ARemoteHostWithoutALinkIsAnError) {
  EXPECT_EQ(hosts_error_of(hosts_rig(R"("host": "node1")", R"({"name": "node1"})")),
            "rig.json: hosts[0]: host \"node1\" has no network link (give it \"link\": {\"bandwidth\": \"1.25 GB/s\", "
            "\"latency\": \"50 us\"}), so devices[0] \"rpc0\" on it could not be reached (rule: every remote host is "
            "reached through a network link)");
}

TEST(TopologyHosts, ACycleOfHostsIsAnError) {
  EXPECT_EQ(hosts_error_of(hosts_rig(R"("host": "a")",
                                     R"({"name": "a", "via": "b", "link": {"bandwidth": "1 GB/s", "latency": "1 us"}},
                            {"name": "b", "via": "a", "link": {"bandwidth": "1 GB/s", "latency": "1 us"}})")),
            "rig.json: hosts[0].via: a cycle of hosts (a -> b -> a) never reaches the local host (rule: following "
            "\"via\" from every host ends at the local host, \"host\")");
  // A host reached through itself.
  EXPECT_THAT(hosts_error_of(
                  hosts_rig(R"("host": "a")", R"({"name": "a", "via": "A", "link": {"bandwidth": 1, "latency": 0}})")),
              HasSubstr("hosts[0].via: a cycle of hosts (a -> a)"));
}

TEST(TopologyHosts, UnknownHostNamesAreErrors) {
  EXPECT_EQ(hosts_error_of(hosts_rig(R"("host": "node7")")),
            "rig.json: devices[0].host: unknown host \"node7\" (expected one of: host, node1) (rule: a device is on "
            "the local host, \"host\", the default, or on one of \"hosts\")");
  EXPECT_EQ(hosts_error_of(hosts_rig(
                R"("host": "node1")",
                R"({"name": "node1", "via": "gateway", "link": {"bandwidth": "1 GB/s", "latency": "1 us"}})")),
            "rig.json: hosts[0].via: unknown host \"gateway\" (expected one of: host, node1) (rule: a host is reached "
            "through the local host, \"host\", or another of \"hosts\")");
}

TEST(TopologyHosts, HostNamesAreUniqueAndNotTheLocalOrADevice) {
  EXPECT_THAT(hosts_error_of(hosts_rig(
                  R"("host": "node1")",
                  std::string(kNode1) + ", " + R"({"name": "NODE1", "link": {"bandwidth": 1, "latency": 0}})")),
              HasSubstr("rig.json: hosts[1].name: duplicate host name \"NODE1\" (hosts[0] is \"node1\""));
  EXPECT_THAT(hosts_error_of(hosts_rig("", R"({"name": "host", "link": {"bandwidth": 1, "latency": 0}})")),
              HasSubstr("rig.json: hosts[0].name: \"host\" is the local host"));
  EXPECT_THAT(hosts_error_of(hosts_rig("", R"({"name": "gpu0", "link": {"bandwidth": 1, "latency": 0}})")),
              HasSubstr("rig.json: hosts[0].name: host name \"gpu0\" is taken by devices[1].name"));
}

TEST(TopologyHosts, ARemoteDeviceIsNeverHostMemory) {
  EXPECT_EQ(hosts_error_of(hosts_rig(R"("host": "node1", "host_visible": true)")),
            "rig.json: devices[0].host_visible: device \"rpc0\" is on host \"node1\": its buffers are that host's "
            "memory, which the local CPU cannot address (rule: a remote device is never host-visible)");
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1", "unified": true, "memory": "1 GiB")")),
              HasSubstr("rig.json: devices[0].unified: device \"rpc0\" is on host \"node1\"; the host pool a unified "
                        "device shares is the local CPU device's memory (rule: a remote device is not unified)"));
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1", "caps": {"host_buffer": true})")),
              HasSubstr("rig.json: devices[0].caps.host_buffer: device \"rpc0\" is on host \"node1\", and llama.cpp's "
                        "RPC device has no buffers in the local host's memory"));
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1", "caps": {"from_host_ptr": true})")),
              HasSubstr("rig.json: devices[0].caps.from_host_ptr: "));
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1", "wraps": "CPU")")),
              HasSubstr("rig.json: devices[0].wraps: device \"rpc0\" is on host \"node1\", and a wrapped real device "
                        "computes in this process (rule: a remote device is a pure simulated device)"));
}

TEST(TopologyHosts, TheCpuDeviceIsLocal) {
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1")", kNode1, "", R"("host": "node1")")),
              HasSubstr("rig.json: devices[2].host: device \"cpu\" is on host \"node1\", but the CPU device is the "
                        "local host's"));
}

TEST(TopologyHosts, ALinkBetweenHostsIsAnError) {
  EXPECT_EQ(hosts_error_of(hosts_rig(R"("host": "node1")", kNode1, R"(, "links": [{"a": "gpu0", "b": "rpc0"}])")),
            "rig.json: links[0]: \"gpu0\" on the local host and \"rpc0\" on host \"node1\" are on different hosts: a "
            "copy between hosts crosses the hosts' network links (\"hosts\"), and a remote device's link to its own "
            "host is its \"host_link\" (rule: a link joins two endpoints on one host)");
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1")", kNode1, R"(, "links": [{"a": "host", "b": "rpc0"}])")),
              HasSubstr("rig.json: links[0]: \"host\" (the local host's memory) and \"rpc0\" on host \"node1\" are on "
                        "different hosts"));
}

TEST(TopologyHosts, BadLinkFiguresAreErrors) {
  EXPECT_THAT(hosts_error_of(
                  hosts_rig(R"("host": "node1")", R"({"name": "node1", "link": {"bandwidth": "fast", "latency": 0}})")),
              HasSubstr("rig.json: hosts[0].link.bandwidth: expected a rate such as"));
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1")", R"({"name": "node1", "link": {"latency": "1 us"}})")),
              HasSubstr("rig.json: hosts[0].link: missing required key \"bandwidth\""));
  EXPECT_THAT(hosts_error_of(hosts_rig(R"("host": "node1")", R"({"name": "node1", "lnk": {}})")),
              HasSubstr("rig.json: hosts[0]: unknown key \"lnk\""));
}

// Two devices on one remote host may have a link of their own (NVLink in that machine).
TEST(TopologyHosts, ALinkOnOneRemoteHostIsAllowed) {
  const std::string t = R"({"name": "t", "hosts": [)" + std::string(kNode1) +
                        R"(], "devices": [{"name": "rpc0", "host": "node1"}, {"name": "rpc1", "host": "NODE1"},
                        {"name": "cpu", "type": "cpu"}], "links": [{"a": "rpc0", "b": "rpc1", "bandwidth": "50 GB/s"}]})";
  EXPECT_EQ(hosts_error_of(t), "");
}

// The preset of two hosts over 10 GbE holds the figures cited in its file.
TEST(TopologyHosts, TheRpcPresetHoldsItsCitedFigures) {
  Result<TopologyConfig> t = topology_preset("2-hosts-2x-rtx3090-10gbe-rpc");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->hosts.size(), 1u);
  EXPECT_EQ(t->hosts[0].name, "node1");
  EXPECT_EQ(t->hosts[0].bandwidth, 1.25e9);  // 10 Gb/s / 8
  EXPECT_EQ(t->hosts[0].latency_us, 50.0);
  ASSERT_EQ(t->devices.size(), 5u);
  const char* const names[] = {"rpc0", "rpc1", "gpu0", "gpu1", "cpu"};  // RPC devices first, as llama.cpp orders them
  const char* const hosts[] = {"node1", "node1", "", "", ""};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(t->devices[i].name, names[i]);
    EXPECT_EQ(t->devices[i].host, hosts[i]) << names[i];
  }
  for (size_t i = 0; i < 4; ++i) {
    const DeviceConfig& d = t->devices[i];
    EXPECT_EQ(d.memory, 24 * GiB) << d.name;
    EXPECT_EQ(d.cost.mem_bandwidth, 936e9) << d.name;
    EXPECT_EQ(d.host_bandwidth, 31.5e9) << d.name;  // PCIe 4.0 x16 on its own host
    EXPECT_FALSE(d.host_visible);
  }
  // ggml-rpc's device props: no async, no events, no host buffer type, no op offload.
  EXPECT_FALSE(t->devices[0].caps.async);
  EXPECT_FALSE(t->devices[0].caps.events);
  EXPECT_FALSE(t->devices[0].offload.enabled);
  EXPECT_GE(t->sources.size(), 5u);
}

}  // namespace
