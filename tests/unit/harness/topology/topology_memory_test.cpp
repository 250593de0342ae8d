// The memory keys of topology files (docs/topology.md "Unified memory and overheads"): unified, reserved,
// unallocatable, fit_margin, and the top-level sources; each rule's error names the file, the JSON path and the rule.
// The new presets of real machines hold the figures their files cite.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

std::string memory_error_of(const std::string& text) {
  Result<TopologyConfig> r = parse_topology(text, "rig.json");
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

// An integrated GPU with `fields` and a CPU of `cpu_memory` (the pool).
std::string rig(const std::string& fields, const std::string& cpu = R"("memory": "16 GiB")") {
  return R"({"name": "t", "devices": [{"name": "igpu0", "type": "igpu")" + (fields.empty() ? "" : ", " + fields) +
         R"(}, {"name": "cpu", "type": "cpu", )" + cpu + "}]}";
}

TEST(TopologyUnified, ParsesAndWritesBack) {
  Result<TopologyConfig> t =
      parse_topology(rig(R"("unified": true, "memory": "12 GiB", "reserved": "256 MiB", "fit_margin": "1 GiB")"), "r");
  ASSERT_TRUE(t.ok()) << t.status().message();
  const DeviceConfig& d = t->devices[0];
  EXPECT_TRUE(d.unified);
  EXPECT_EQ(d.memory, 12 * GiB);
  EXPECT_EQ(d.reserved, 256 * MiB);
  EXPECT_EQ(d.unallocatable, 0u);
  EXPECT_EQ(d.fit_margin, 1 * GiB);
  const std::string text = topology_to_json(t.value());
  EXPECT_THAT(text, HasSubstr(R"("unified": true,)"));
  EXPECT_THAT(text, HasSubstr(R"("reserved": "256 MiB",)"));
  EXPECT_THAT(text, HasSubstr(R"("fit_margin": "1 GiB",)"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("unallocatable")));  // defaults are not written
  Result<TopologyConfig> back = parse_topology(text, "back");
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(topology_to_json(back.value()), text);
}

// Without "memory" a unified device may take the whole pool (the CPU device's 16 GiB), not the 8 GiB default.
TEST(TopologyUnified, WithoutMemoryTheShareIsThePool) {
  Result<TopologyConfig> t = parse_topology(rig(R"("unified": true)"), "r");
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->devices[0].memory, 16 * GiB);
}

TEST(TopologyUnified, AShareAboveThePoolIsAnError) {
  EXPECT_EQ(memory_error_of(rig(R"("unified": true, "memory": "24 GiB")")),
            "rig.json: devices[0].memory: the unified-memory share 24 GiB is above the host pool of 16 GiB "
            "(devices[1] \"cpu\" memory) (rule: a unified device's memory is at most the pool)");
  EXPECT_EQ(memory_error_of(rig(R"("unified": true, "memory": "16 GiB")")), "");  // the whole pool is fine
}

TEST(TopologyUnified, TheCpuCannotBeUnified) {
  EXPECT_EQ(memory_error_of(rig("", R"("memory": "16 GiB", "unified": true)")),
            "rig.json: devices[1].unified: the CPU device holds the host pool and cannot share it (rule: only a "
            "device before the CPU may be unified)");
}

TEST(TopologyUnified, ReservationsLeaveSomethingOfThePool) {
  // 10 + 6 = 16 GiB of a 16 GiB pool reserved: nothing left.
  EXPECT_EQ(memory_error_of(rig(R"("unified": true, "memory": "12 GiB", "reserved": "10 GiB")",
                                R"("memory": "16 GiB", "reserved": "6 GiB")")),
            "rig.json: devices[1].memory: the reservations of the devices sharing the host pool (igpu0 10 GiB, cpu "
            "6 GiB) come to 16 GiB, leaving nothing of the pool (16 GiB) (rule: the pool's reservations < the pool)");
  EXPECT_EQ(memory_error_of(rig(R"("unified": true, "memory": "12 GiB", "reserved": "10 GiB")",
                                R"("memory": "16 GiB", "reserved": "5 GiB")")),
            "");
}

TEST(TopologyOverheads, ReservedAndUnallocatableLeaveSomething) {
  EXPECT_EQ(memory_error_of(rig(R"("memory": "8 GiB", "reserved": "6 GiB", "unallocatable": "2 GiB")")),
            "rig.json: devices[0].reserved: 6 GiB reserved and 2 GiB unallocatable leave nothing of the memory "
            "(8 GiB) to allocate (rule: reserved + unallocatable < memory)");
  EXPECT_EQ(memory_error_of(rig(R"("memory": "8 GiB", "unallocatable": "9 GiB")")),
            "rig.json: devices[0].unallocatable: 0 B reserved and 9 GiB unallocatable leave nothing of the memory "
            "(8 GiB) to allocate (rule: reserved + unallocatable < memory)");
  EXPECT_EQ(memory_error_of(rig(R"("memory": "8 GiB", "reserved": "6 GiB", "unallocatable": "1 GiB")")), "");
}

TEST(TopologyOverheads, AFitMarginIsAtMostTheAllocatableMemory) {
  // 8 - 6 - 1 = 1 GiB allocatable.
  EXPECT_EQ(memory_error_of(
                rig(R"("memory": "8 GiB", "reserved": "6 GiB", "unallocatable": "1 GiB", "fit_margin": "1025 MiB")")),
            "rig.json: devices[0].fit_margin: 1025 MiB is above the 1 GiB the device can allocate (rule: fit_margin <= "
            "memory - reserved - unallocatable)");
  EXPECT_EQ(memory_error_of(
                rig(R"("memory": "8 GiB", "reserved": "6 GiB", "unallocatable": "1 GiB", "fit_margin": "1 GiB")")),
            "");
}

TEST(TopologyOverheads, BadValuesNameTheKey) {
  EXPECT_THAT(memory_error_of(rig(R"("unified": "yes")")),
              HasSubstr("rig.json: devices[0].unified: expected true or false, got a string"));
  EXPECT_THAT(memory_error_of(rig(R"("reserved": "-1 GiB")")),
              HasSubstr("rig.json: devices[0].reserved: expected a size"));
  EXPECT_THAT(memory_error_of(rig(R"("fit_margin": "1 gib")")),
              HasSubstr("rig.json: devices[0].fit_margin: expected a size"));
  EXPECT_THAT(memory_error_of(rig(R"("fit_margn": "1 GiB")")), HasSubstr("did you mean \"fit_margin\"?"));
  EXPECT_THAT(memory_error_of(R"({"name": "t", "sources": "x", "devices": [{"name": "cpu", "type": "cpu"}]})"),
              HasSubstr("rig.json: sources: expected a list of strings"));
}

// The presets of real machines: the figures their "sources" cite.
TEST(TopologyRealMachines, PresetsHoldTheirCitedFigures) {
  const TopologyConfig apu = topology_preset("apu-128gb-96gb-gpu").value();
  EXPECT_TRUE(apu.devices[0].unified);
  EXPECT_EQ(apu.devices[0].memory, 96 * GiB);
  EXPECT_EQ(apu.devices.back().memory, 128 * GiB);
  EXPECT_EQ(apu.devices[0].cost.mem_bandwidth, 256e9);
  const TopologyConfig mac = topology_preset("laptop-64gb-unified").value();
  EXPECT_TRUE(mac.devices[0].unified);
  EXPECT_TRUE(mac.devices[0].host_visible);
  EXPECT_EQ(mac.devices[0].memory, 48 * GiB);  // 75 % of 64 GiB
  EXPECT_EQ(mac.devices.back().memory, 64 * GiB);
  EXPECT_EQ(mac.devices[0].cost.mem_bandwidth, 400e9);
  const TopologyConfig mixed = topology_preset("rtx3090-rtx3060").value();
  EXPECT_EQ(mixed.devices[0].reserved, (24576 - 22532) * MiB);  // llama.cpp#15125: 22532 MiB free of 24 GiB
  EXPECT_EQ(mixed.devices[1].reserved, (12288 - 11687) * MiB);  // 11687 MiB free of 12 GiB
  EXPECT_EQ(mixed.devices[0].cost.mem_bandwidth, 936e9);
  EXPECT_EQ(mixed.devices[1].cost.mem_bandwidth, 360e9);
  const TopologyConfig ada = topology_preset("2x-rtx4090-pcie4").value();
  EXPECT_EQ(ada.devices.size(), 3u);
  EXPECT_EQ(ada.devices[0].cost.mem_bandwidth, 1008e9);
  EXPECT_EQ(ada.devices[0].host_bandwidth, 31.5e9);
  EXPECT_TRUE(ada.links.empty());  // no NVLink on the 4090
  const TopologyConfig dgx = topology_preset("8x-h100-80gb-nvlink").value();
  EXPECT_EQ(dgx.devices.size(), 9u);
  EXPECT_EQ(dgx.links.size(), 28u);  // 8 * 7 / 2 pairs
  EXPECT_EQ(dgx.links[0].bandwidth, 450e9);
  EXPECT_EQ(dgx.devices[0].cost.mem_bandwidth, 3.35e12);
  for (const char* name :
       {"2x-rtx4090-pcie4", "rtx3090-rtx3060", "laptop-64gb-unified", "apu-128gb-96gb-gpu", "8x-h100-80gb-nvlink"}) {
    const TopologyConfig t = topology_preset(name).value();
    EXPECT_FALSE(t.sources.empty()) << name;
    EXPECT_EQ(t.devices[0].fit_margin, 1 * GiB) << name;  // llama.cpp's default fit margin, 1024 MiB
  }
}

}  // namespace
