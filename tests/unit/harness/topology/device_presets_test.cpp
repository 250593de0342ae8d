// Device presets (harness/topology/devices/*.json, docs/topology.md "Device presets"): each parses as a topology
// device, has its sources, and its figures are the published ones.
#include <gtest/gtest.h>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;

TEST(DevicePresets, EveryPresetParsesWithItsSources) {
  const std::vector<std::string> names = device_preset_names();
  ASSERT_GE(names.size(), 15u);
  size_t gpus = 0, cpus = 0;
  for (const std::string& n : names) {
    auto p = device_preset(n);
    ASSERT_TRUE(p.ok()) << n << ": " << p.status().to_string();
    const sim::DeviceConfig& d = p.value().device;
    EXPECT_EQ(d.name, n) << "a preset's name is its file's";
    EXPECT_FALSE(p.value().sources.empty()) << n << ": no sources";
    EXPECT_FALSE(d.description.empty()) << n;
    EXPECT_GT(d.memory, 0u) << n;
    EXPECT_GT(d.cost.mem_bandwidth, 0) << n;
    EXPECT_GT(d.cost.flops_f32, 0) << n;
    EXPECT_GE(d.cost.flops_f16, d.cost.flops_f32 * 0.99) << n << ": FP16 slower than FP32";
    EXPECT_GT(d.cost.flops_quant, 0) << n;
    if (d.type == DeviceType::kCpu) {
      ++cpus;
    } else {
      ++gpus;
      // a GPU's memory is its own; it does not exceed the 1 TB/s-class figure by orders of magnitude
      EXPECT_LT(d.cost.mem_bandwidth, 10e12) << n;
    }
  }
  // issue 46: at least 12 GPUs across generations and vendors and 3 CPUs
  EXPECT_GE(gpus, 12u);
  EXPECT_GE(cpus, 3u);
}

// The RTX 4090 as NVIDIA's Ada whitepaper (v2.01, Appendix A, Table 2) gives it: 24 GB GDDR6X, 1008 GB/s, FP32
// 82.6 TFLOPS, FP16 tensor with FP16 accumulate 330.3 TFLOPS, INT8 tensor 660.6 TOPS (dense), PCIe 4.0 x16.
TEST(DevicePresets, Rtx4090IsTheWhitepapersFigures) {
  auto p = device_preset("rtx4090");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const sim::DeviceConfig& d = p.value().device;
  EXPECT_EQ(d.memory, uint64_t{24} << 30);
  EXPECT_DOUBLE_EQ(d.cost.mem_bandwidth, 1008e9);
  EXPECT_DOUBLE_EQ(d.cost.flops_f32, 82.6e12);
  EXPECT_DOUBLE_EQ(d.cost.flops_f16, 330.3e12);
  EXPECT_DOUBLE_EQ(d.cost.flops_quant, 660.6e12);
  EXPECT_DOUBLE_EQ(d.host_bandwidth, 31.5e9);
  EXPECT_EQ(d.type, DeviceType::kGpu);
}

// The Ryzen 9 7950X: 16 cores x 4.5 GHz (base) x 2 FMA pipes x 8 FP32 lanes (256-bit) x 2 = 2304 GFLOP/s; two
// channels of DDR5-5200 x 8 bytes = 83.2 GB/s (AMD's product page: 16 cores, 4.5 GHz base, DDR5-5200).
TEST(DevicePresets, Ryzen7950xIsItsCoresAndMemory) {
  auto p = device_preset("ryzen9-7950x");
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  const sim::DeviceConfig& d = p.value().device;
  EXPECT_EQ(d.type, DeviceType::kCpu);
  EXPECT_DOUBLE_EQ(d.cost.flops_f32, 16 * 4.5e9 * 2 * 8 * 2);
  EXPECT_DOUBLE_EQ(d.cost.mem_bandwidth, 2 * 8 * 5200e6);
}

TEST(DevicePresets, AnUnknownNameListsThem) {
  auto p = device_preset("rtx9999");
  ASSERT_FALSE(p.ok());
  EXPECT_EQ(p.status().code(), StatusCode::kNotFound);
  EXPECT_NE(p.status().message().find("rtx4090"), std::string::npos) << p.status().message();
}
