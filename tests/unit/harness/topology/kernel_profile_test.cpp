// Kernel profiles (docs/bench.md, "Kernel profiles"): read from a file, applied to a machine's GPUs and CPU, errors
// that name the key.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <unistd.h>
#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;

namespace {

std::string write_temp(const std::string& text) {
  char name[] = "/tmp/tessera-kernels-XXXXXX";
  const int fd = mkstemp(name);
  EXPECT_GE(fd, 0);
  std::ofstream(name) << text;
  close(fd);
  return name;
}

}  // namespace

TEST(KernelProfile, AppliesEachSideToItsDevices) {
  const std::string path = write_temp(R"({"name": "test",
    "gpu": {"launch_overhead": "2 us", "efficiency": {"mat_vec": {"memory": 0.75}, "attn_prefill": {"compute": 0.5}}},
    "cpu": {"efficiency": {"other": {"memory": 0.25}}},
    "sources": ["by hand"]})");
  auto p = load_kernel_profile(path);
  std::remove(path.c_str());
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  auto t = topology_preset("2x-rtx4090-pcie4");
  ASSERT_TRUE(t.ok());
  sim::TopologyConfig m = t.value();
  apply_kernel_profile(p.value(), &m);
  const auto mv = static_cast<size_t>(sim::KernelClass::kMatVec);
  const auto pre = static_cast<size_t>(sim::KernelClass::kAttnPrefill);
  const auto other = static_cast<size_t>(sim::KernelClass::kOther);
  for (size_t i = 0; i < 2; ++i) {  // gpu0, gpu1
    EXPECT_DOUBLE_EQ(m.devices[i].cost.launch_overhead_us, 2.0);
    EXPECT_DOUBLE_EQ(m.devices[i].cost.efficiency[mv].memory, 0.75);
    EXPECT_DOUBLE_EQ(m.devices[i].cost.efficiency[mv].compute, 1.0);
    EXPECT_DOUBLE_EQ(m.devices[i].cost.efficiency[pre].compute, 0.5);
    EXPECT_DOUBLE_EQ(m.devices[i].cost.efficiency[other].memory, 1.0);
  }
  const sim::DeviceConfig& cpu = m.devices.back();
  EXPECT_DOUBLE_EQ(cpu.cost.launch_overhead_us, t.value().devices.back().cost.launch_overhead_us);  // not given
  EXPECT_DOUBLE_EQ(cpu.cost.efficiency[other].memory, 0.25);
  EXPECT_DOUBLE_EQ(cpu.cost.efficiency[mv].memory, 1.0);
  EXPECT_NE(m.name.find("--kernels test"), std::string::npos) << m.name;
  EXPECT_EQ(m.sources.back(), "by hand");
  EXPECT_TRUE(validate_topology(m).ok());
}

TEST(KernelProfile, ErrorsNameTheFileAndTheKey) {
  auto error = [](const std::string& text) {
    const std::string path = write_temp(text);
    auto p = load_kernel_profile(path);
    std::remove(path.c_str());
    return p.ok() ? std::string("ok") : p.status().message();
  };
  EXPECT_NE(error(R"({"name": "x", "gpus": {}})").find("unknown key \"gpus\""), std::string::npos);
  // (the file is named too: found by the topology fuzzer, which checks every error names its source)
  EXPECT_NE(error(R"({"gpu": {"efficiency": {"mat_vec": {"memory": 0}}}})")
                .find(": gpu.efficiency.mat_vec.memory: expected a share of the peak above 0 and at most 4"),
            std::string::npos);
  EXPECT_EQ(error(R"({"gpu": {"efficiency": {"mat_vec": {"memory": 0}}}})").rfind("/tmp/tessera-kernels-", 0), 0u);
  EXPECT_NE(error(R"({"cpu": {"launch_overhead": "fast"}})").find("cpu.launch_overhead: expected a duration"),
            std::string::npos);
  EXPECT_NE(error(R"({"gpu": {"flops_f16": "1 TFLOP/s"}})").find("unknown key \"flops_f16\""), std::string::npos)
      << "a profile says what kernels reach, not the device's peaks";
  EXPECT_NE(error("{").find("/tmp/tessera-kernels-"), std::string::npos);
  auto missing = load_kernel_profile("no-such-profile");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no kernel profile or file named"), std::string::npos);
}
