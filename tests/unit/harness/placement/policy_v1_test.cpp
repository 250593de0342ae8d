// The layer split before commit 9a5a0e0 (layer_devices_v1: what a scenario file of version 1 means), worked out by
// hand from the rules it had: n_gpu_layers N offloaded the last N layers, the output layer stayed on the CPU unless N
// was -1 or above n_layer (then it went with the last layer); layer i of the n offloaded ones went to the GPU whose
// cumulative share covers (i + 0.5) / n of the total; the default shares were each GPU's total memory.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/harness/placement/policy.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

// One GPU (device 0) and the CPU (device 1), 4 layers; entries: layers 0-3, then the output layer.
TEST(SimPolicyVersion1, NGpuLayersWereTheLastLayersWithoutTheOutputLayer) {
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}));
  PlacementPolicy p;
  p.n_gpu_layers = 1;  // the last layer alone (version 2: the output layer alone)
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, p).value(), (std::vector<int>{1, 1, 1, 0, 1}));
  p.n_gpu_layers = 4;  // every layer, the output layer still on the CPU
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, p).value(), (std::vector<int>{0, 0, 0, 0, 1}));
  p.n_gpu_layers = 5;  // above n_layer: the output layer too
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, p).value(), (std::vector<int>{0, 0, 0, 0, 0}));
  p.n_gpu_layers = -1;
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, p).value(), (std::vector<int>{0, 0, 0, 0, 0}));
  p.n_gpu_layers = 0;
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, p).value(), (std::vector<int>{1, 1, 1, 1, 1}));
  // No layers at all, everything offloaded: the output layer went to the last GPU.
  p.n_gpu_layers = -1;
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 0, p).value(), (std::vector<int>{0}));
}

// 24 GiB and 8 GiB GPUs, 8 layers, all offloaded: shares 24, 8 of 32; positions (i + 0.5) / 8 x 32 = 2, 6, 10, 14,
// 18, 22 fall below 24 (gpu0: layers 0-5), 26 and 30 do not (gpu1: layers 6-7, and the output layer with layer 7).
// Version 2 puts layers 0-6 on gpu0 (policy_test.cpp, LayersGoWhereThePolicySays).
TEST(SimPolicyVersion1, SharesWereRoundedAtEachLayersMiddle) {
  auto sim = make_sim(topology({gpu("gpu0", 24 * GiB), gpu("gpu1", 8 * GiB), wrapped_cpu()}));
  PlacementPolicy p;
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 8, p).value(), (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1, 1}));
  // -ts 3,1 over the last 4 layers (n_gpu_layers 4): positions 0.5, 1.5, 2.5 below 3 (gpu0: layers 4-6), 3.5 not
  // (gpu1: layer 7); the output layer on the CPU.
  p.n_gpu_layers = 4;
  p.tensor_split = {3, 1};
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 0, 0, 0, 1, 2}));
  // 1,1 over 2 layers: 0.5 below 1 (gpu0), 1.5 not (gpu1).
  p.n_gpu_layers = 2;
  p.tensor_split = {1, 1};
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 2, 0, 1, 2}));
  // Explicit counts: as today.
  p.layers_per_device = {1, 2};
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 1, 1, 2}));
}

// The default shares were the GPUs' total memory, not their free memory: a 24 GiB GPU with 16 GiB reserved by the
// driver still counted 24 against the other's 8. 4 layers: positions 4, 12, 20 below 24 (gpu0), 28 not (gpu1).
TEST(SimPolicyVersion1, DefaultSharesWereTotalMemory) {
  DeviceConfig big = gpu("gpu0", 24 * GiB);
  big.reserved = 16 * GiB;
  auto sim = make_sim(topology({big, gpu("gpu1", 8 * GiB), wrapped_cpu()}));
  EXPECT_EQ(layer_devices_v1(devices_of(*sim), 4, PlacementPolicy{}).value(), (std::vector<int>{0, 0, 0, 1, 1}));
}

TEST(SimPolicyVersion1, RefusedWhatVersion1Refused) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  PlacementPolicy p;
  p.tensor_split = {0, 0};
  auto r = layer_devices_v1(devices_of(*sim), 4, p);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("tensor_split has no positive entry"));
  p.tensor_split = {1, 1, 1};
  EXPECT_THAT(layer_devices_v1(devices_of(*sim), 4, p).status().message(), HasSubstr("3 entries for 2 GPUs"));
  // (version 2 reads all zero as the default split)
  p.tensor_split = {0, 0};
  EXPECT_TRUE(layer_devices(devices_of(*sim), 4, p).ok());
}

}  // namespace
