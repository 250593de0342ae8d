// Remote devices (sim/sim_network.cpp, docs/simulator.md "Copies between hosts"): a device on another host is reached
// through the network links of the hosts on the way, a copy between hosts goes leg after leg through the local host's
// memory (llama.cpp's RPC backend: get_tensor, then set_tensor), a copy between two devices of one remote host is made
// there (the command crosses the network), and a remote device's buffers are never host memory. Every figure below is
// worked out by hand in the comment beside it.
#include <gmock/gmock.h>

#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using ::testing::HasSubstr;

namespace {

constexpr size_t k100MiB = 100 * MiB;  // 104857600 bytes

DeviceConfig remote(const std::string& name, const std::string& host) {
  DeviceConfig d = gpu(name, 1 * GiB);
  d.host = host;
  d.host_bandwidth = 20e9;  // its PCIe on its own host
  d.host_latency_us = 5;
  return d;
}

// gpu0 local (25 GB/s, 10 us to the local host), gpu1 local (the same, gpu()'s defaults); r0 and r1 on node1 (10
// GbE: 1.25 GB/s, 50 us); r2 on node2, reached through node1 (100 Gb InfiniBand: 12.5 GB/s, 2 us); each remote device
// 20 GB/s, 5 us to its own host; the CPU.
TopologyConfig two_remote_hosts() {
  DeviceConfig g0 = gpu("gpu0", 1 * GiB);
  g0.host_bandwidth = 25e9;
  g0.host_latency_us = 10;
  TopologyConfig t = topology(
      {remote("r0", "node1"), remote("r1", "node1"), remote("r2", "node2"), g0, gpu("gpu1"), wrapped_cpu()}, "hosts");
  t.hosts = {HostConfig{"node1", "", "", 1.25e9, 50}, HostConfig{"node2", "", "node1", 12.5e9, 2}};
  return t;
}

struct Rig {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  explicit Rig(const TopologyConfig& t = two_remote_hosts()) {
    SimOptions o;
    o.mode = MemoryMode::kMetadata;  // 100 MiB tensors without the bytes
    sim = make_sim(t, o);
    if (sim == nullptr) return;
    backends = sim->make_backends().value();
  }
  size_t index(const std::string& name) const {
    for (size_t i = 0; i < sim->device_count(); ++i) {
      if (sim->device_config(i).name == name) return i;
    }
    ADD_FAILURE() << "no device " << name;
    return 0;
  }
  // The duration of one async copy of `bytes` from device `from` to device `to` (the destination's stream copies).
  double copy_us(const std::string& from, const std::string& to, size_t bytes = k100MiB) {
    const size_t a = index(from), b = index(to);
    Vectors src(*sim->device(a)->buffer_type(), {"src"}, static_cast<int64_t>(bytes / 4));
    Vectors dst(*sim->device(b)->buffer_type(), {"dst"}, static_cast<int64_t>(bytes / 4));
    const size_t before = sim->trace().events.size();
    EXPECT_TRUE(backends[b]->cpy_tensor_async(backends[a].get(), *src[0], *dst[0]));
    EXPECT_TRUE(backends[b]->synchronize().ok());
    for (size_t i = before; i < sim->trace().events.size(); ++i) {
      const TraceEvent& e = sim->trace().events[i];
      if (e.kind != TraceKind::kCopy) continue;
      EXPECT_EQ(e.bytes, bytes);
      return e.end_us - e.start_us;
    }
    ADD_FAILURE() << "no copy event";
    return -1;
  }
  // The time of writing `bytes` from host memory into a tensor on `to` (Simulator::set_time_us: the weight upload).
  double upload_us(const std::string& to, size_t bytes = k100MiB) {
    Vectors dst(*sim->device(index(to))->buffer_type(), {"dst"}, static_cast<int64_t>(bytes / 4));
    return sim->set_time_us(*dst[0]);
  }
};

TEST(SimRemoteDevice, AnUploadCrossesTheNetworkThenTheRemoteHostsLink) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  // 100 MiB over 10 GbE: 50 us + 104857600 B / 1.25 GB/s = 50 + 83886.08 us (83.9 ms); then node1's PCIe to r0:
  // 5 us + 104857600 / 20e9 s = 5 + 5242.88 us. 83936.08 + 5247.88 = 89183.96 us.
  EXPECT_NEAR(r.upload_us("r0"), 89183.96, 1e-6);
  // A local GPU: only its own link, 10 + 104857600 / 25e9 s = 10 + 4194.304 us.
  EXPECT_NEAR(r.upload_us("gpu0"), 4204.304, 1e-6);
}

TEST(SimRemoteDevice, LocalGpuToRemoteGpuCrossesPcieThenTheNetworkThenRemotePcie) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  // gpu0 -> local host 4204.304 us, the network 83936.08 us, node1 -> r0 5247.88 us: 93388.264 us in all.
  EXPECT_NEAR(r.copy_us("gpu0", "r0"), 93388.264, 1e-6);
  // Links are crossed the same way back.
  EXPECT_NEAR(r.copy_us("r0", "gpu0"), 93388.264, 1e-6);
}

TEST(SimRemoteDevice, TwoDevicesOfOneRemoteHostCopyThereWithOneNetworkLatency) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  // Through node1's memory at the slower of the two links (20 GB/s), latencies 5 + 5 us: 10 + 5242.88 us; the copy
  // command crosses the network once (50 us, no bytes): 5302.88 us. No 83.9 ms of network transfer.
  EXPECT_NEAR(r.copy_us("r0", "r1"), 5302.88, 1e-6);
}

TEST(SimRemoteDevice, DevicesOfTwoRemoteHostsCopyThroughTheLocalHost) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  // r0 -> node1: 5247.88; node1 -> local: 83936.08; local -> node1 -> node2: 83936.08 + (2 + 104857600 / 12.5e9 s =
  // 8390.608); node2 -> r2: 5247.88. 5247.88 + 83936.08 + 83936.08 + 8390.608 + 5247.88 = 186758.528 us.
  EXPECT_NEAR(r.copy_us("r0", "r2"), 186758.528, 1e-6);
  // The host reached through another host: an upload crosses both links: 83936.08 + 8390.608 + 5247.88.
  EXPECT_NEAR(r.upload_us("r2"), 97574.568, 1e-6);
}

TEST(SimRemoteDevice, LocalCopiesKeepTheirRule) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  // gpu0 -> gpu1, both local without a link: through the host at the slower host link (25 GB/s), latencies 10 + 10
  // us: 20 + 4194.304 us, as before hosts existed.
  EXPECT_NEAR(r.copy_us("gpu0", "gpu1"), 4214.304, 1e-6);
}

// A copy the host drives (tensor_copy, when the destination has no async copy; llama.cpp's RPC device has none) takes
// the same legs, and its event names both devices although its track is the host's.
TEST(SimRemoteDevice, AHostDrivenCopyTakesTheSameLegs) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  Vectors src(*r.sim->device(r.index("gpu0"))->buffer_type(), {"src"}, static_cast<int64_t>(k100MiB / 4));
  Vectors dst(*r.sim->device(r.index("r0"))->buffer_type(), {"dst"}, static_cast<int64_t>(k100MiB / 4));
  const double before = r.sim->now_us();
  ASSERT_TRUE(tensor_copy(*src[0], *dst[0]).ok());
  EXPECT_NEAR(r.sim->now_us() - before, 93388.264, 1e-6);  // the host blocks for the whole copy
  const TraceEvent& e = r.sim->trace().events.back();
  EXPECT_EQ(e.kind, TraceKind::kCopy);
  EXPECT_EQ(e.peer, static_cast<int>(r.index("gpu0")));
  EXPECT_EQ(e.device, static_cast<int>(r.index("r0")));
  EXPECT_NEAR(e.end_us - e.start_us, 93388.264, 1e-6);
}

TEST(SimRemoteDevice, ItsBuffersAreNeverHostMemory) {
  Rig r;
  ASSERT_NE(r.sim, nullptr);
  Device& r0 = *r.sim->device(r.index("r0"));
  Device& cpu = *r.sim->device(r.index("cpu"));
  Device& gpu0 = *r.sim->device(r.index("gpu0"));
  EXPECT_FALSE(r0.buffer_type()->is_host());
  EXPECT_FALSE(cpu.supports_buft(*r0.buffer_type())) << "the local CPU cannot address a remote device's memory";
  EXPECT_FALSE(gpu0.supports_buft(*r0.buffer_type()));
  EXPECT_FALSE(r0.supports_buft(*cpu.buffer_type())) << "nor can the remote device read local host memory";
  EXPECT_EQ(r0.host_buffer_type(), nullptr);
}

// Configs built in code are checked by Simulator::create too (the topology loader names the JSON path first).
TEST(SimRemoteDevice, ImpossibleHostsAreRefused) {
  auto error = [](const TopologyConfig& t) {
    auto s = Simulator::create(t, {}, &builtin_registry());
    return s.ok() ? std::string() : s.status().message();
  };
  TopologyConfig t = two_remote_hosts();
  t.hosts[0].via = "node2";  // node1 via node2 via node1
  EXPECT_THAT(error(t), HasSubstr("cycle of hosts"));
  t = two_remote_hosts();
  t.devices[0].host = "node9";
  EXPECT_THAT(error(t), HasSubstr("device r0 is on unknown host node9"));
  t = two_remote_hosts();
  t.hosts[0].bandwidth = 0;
  EXPECT_THAT(error(t), HasSubstr("host node1: its network link needs a bandwidth > 0"));
  t = two_remote_hosts();
  t.devices[0].host_visible = true;
  EXPECT_THAT(error(t), HasSubstr("device r0 on remote host node1 cannot be unified, host-visible"));
  t = two_remote_hosts();
  t.devices.back().host = "node1";
  EXPECT_THAT(error(t), HasSubstr("the CPU device cpu must be on the local host"));
  t = two_remote_hosts();
  t.links = {LinkConfig{"gpu0", "r0", 100e9, 1}};
  EXPECT_THAT(error(t), HasSubstr("link gpu0-r0 joins two hosts"));
}

}  // namespace
