// Unified memory and per-device overheads of simulated devices (sim/sim_pool.cpp, docs/simulator.md "Memory"): the
// host pool shared by a unified device and the CPU device, counted once; the driver's reservation; memory reported
// free that cannot be allocated; fit margins. Every figure below is worked out by hand in the comment beside it.
#include <gmock/gmock.h>

#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using ::testing::HasSubstr;

namespace {

// A 16 GiB host whose integrated GPU may take up to 12 GiB of it (metadata-only: no bytes behind the buffers).
struct Unified {
  std::unique_ptr<Simulator> sim;
  explicit Unified(size_t cap = 12 * GiB, size_t igpu_reserved = 0, SimOptions o = {}) {
    DeviceConfig igpu = gpu("igpu0", cap);
    igpu.type = DeviceType::kIgpu;
    igpu.unified = true;
    igpu.host_visible = true;
    igpu.reserved = igpu_reserved;
    o.mode = MemoryMode::kMetadata;
    sim = make_sim(topology({igpu, wrapped_cpu(16 * GiB)}), o);
  }
  BufferType& igpu() { return *sim->device(0)->buffer_type(); }
  BufferType& cpu() { return *sim->device(1)->buffer_type(); }
  size_t free(size_t d) {
    size_t f = 0, t = 0;
    sim->device(d)->memory(&f, &t);
    return f;
  }
};

TEST(SimUnifiedMemory, AnAllocationOnEitherSideReducesTheOther) {
  Unified u;
  ASSERT_NE(u.sim, nullptr);
  EXPECT_EQ(u.free(0), 12 * GiB);  // the cap
  EXPECT_EQ(u.free(1), 16 * GiB);  // the whole pool
  auto cpu_buf = u.cpu().alloc_buffer(6 * GiB);
  ASSERT_TRUE(cpu_buf.ok()) << cpu_buf.status().message();
  // The pool has 16 - 6 = 10 GiB left, below the GPU's 12 GiB cap: the GPU may now take 10 GiB, not 12.
  EXPECT_EQ(u.free(0), 10 * GiB);
  EXPECT_EQ(u.free(1), 10 * GiB);
  auto too_much = u.igpu().alloc_buffer(10 * GiB + 1);
  ASSERT_FALSE(too_much.ok());
  EXPECT_THAT(too_much.status().message(),
              HasSubstr("igpu0: out of memory: asked 10.00 GiB, free 10.00 GiB of the host memory pool of 16.00 GiB "
                        "that it shares (in use: igpu0 0 B, cpu 6.00 GiB; reserved 0 B)"));
  auto gpu_buf = u.igpu().alloc_buffer(8 * GiB);
  ASSERT_TRUE(gpu_buf.ok());
  // 6 + 8 = 14 GiB of 16 in use: 2 GiB left for either side.
  EXPECT_EQ(u.free(0), 2 * GiB);
  EXPECT_EQ(u.free(1), 2 * GiB);
  EXPECT_FALSE(u.cpu().alloc_buffer(2 * GiB + 1).ok());
  EXPECT_TRUE(u.cpu().alloc_buffer(2 * GiB).ok());  // freed at once
  const PoolStats p = u.sim->pool_stats();
  EXPECT_EQ(p.members, (std::vector<size_t>{0, 1}));
  EXPECT_EQ(p.capacity, 16 * GiB);
  EXPECT_EQ(p.used, 14 * GiB);
  EXPECT_EQ(p.peak, 16 * GiB);  // 6 + 8 + 2, counted once
  cpu_buf.value().reset();
  // The GPU's own cap binds again: 12 - 8 = 4 GiB, while the pool has 16 - 8 = 8.
  EXPECT_EQ(u.free(0), 4 * GiB);
  EXPECT_EQ(u.free(1), 8 * GiB);
  EXPECT_EQ(u.sim->pool_stats().used, 8 * GiB);
}

TEST(SimUnifiedMemory, TheCapBindsWhenThePoolIsFree) {
  Unified u;
  ASSERT_NE(u.sim, nullptr);
  auto r = u.igpu().alloc_buffer(12 * GiB + 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("igpu0: out of memory: asked 12.00 GiB, free 12.00 GiB of 12.00 GiB"));
  EXPECT_TRUE(u.igpu().alloc_buffer(12 * GiB).ok());
}

// Without the pool (the GPU not unified) both devices could allocate their full memory: 12 + 16 = 28 GiB of a 16 GiB
// machine. This is what the pool prevents.
TEST(SimUnifiedMemory, ADiscreteDeviceDoesNotShare) {
  DeviceConfig g = gpu("gpu0", 12 * GiB);
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  auto sim = make_sim(topology({g, wrapped_cpu(16 * GiB)}), o);
  ASSERT_NE(sim, nullptr);
  auto a = sim->device(0)->buffer_type()->alloc_buffer(12 * GiB);
  auto b = sim->device(1)->buffer_type()->alloc_buffer(16 * GiB);
  EXPECT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(sim->pool_stats().members.empty());
}

TEST(SimUnifiedMemory, HostVisibleBuffers) {
  Unified u;
  ASSERT_NE(u.sim, nullptr);
  EXPECT_TRUE(u.igpu().is_host());
}

// The driver's reservation of a unified device comes out of the pool: 16 - 1 = 15 GiB for both sides together.
TEST(SimUnifiedMemory, AReservationComesOutOfThePool) {
  Unified u(12 * GiB, 1 * GiB);
  ASSERT_NE(u.sim, nullptr);
  EXPECT_EQ(u.free(0), 11 * GiB);                   // 12 - 1
  EXPECT_EQ(u.free(1), 15 * GiB);                   // 16 - 1
  ASSERT_TRUE(u.cpu().alloc_buffer(5 * GiB).ok());  // freed at once
  auto c = u.cpu().alloc_buffer(5 * GiB);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(u.free(0), 10 * GiB);  // 16 - 1 - 5
  EXPECT_FALSE(u.igpu().alloc_buffer(10 * GiB + 1).ok());
  EXPECT_TRUE(u.igpu().alloc_buffer(10 * GiB).ok());
  EXPECT_EQ(u.sim->pool_stats().reserved, 1 * GiB);
}

// A discrete GPU of 8 GiB with 512 MiB reserved by the driver and 256 MiB that it reports free but cannot allocate:
// memory() says 8192 - 512 = 7680 MiB free; an allocation gets at most 7680 - 256 = 7424 MiB.
TEST(SimDeviceOverheads, ReportedFreeIsAboveAllocatable) {
  DeviceConfig g = gpu("gpu0", 8 * GiB);
  g.reserved = 512 * MiB;
  g.unallocatable = 256 * MiB;
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  auto sim = make_sim(topology({g, wrapped_cpu()}), o);
  ASSERT_NE(sim, nullptr);
  size_t free = 0, total = 0;
  sim->device(0)->memory(&free, &total);
  EXPECT_EQ(free, 7680 * MiB);
  EXPECT_EQ(total, 8 * GiB);
  BufferType& bt = *sim->device(0)->buffer_type();
  auto r = bt.alloc_buffer(7424 * MiB + 1);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(),
              HasSubstr("gpu0: out of memory: asked 7.25 GiB, free 7.25 GiB of 8.00 GiB, 512.00 MiB reserved by the "
                        "driver, 256.00 MiB reported free but not allocatable"));
  auto ok = bt.alloc_buffer(7424 * MiB);
  ASSERT_TRUE(ok.ok());
  sim->device(0)->memory(&free, &total);
  EXPECT_EQ(free, 256 * MiB);  // 7680 - 7424: reported free, not allocatable
  EXPECT_FALSE(bt.alloc_buffer(1).ok());
}

// A fit margin counts only when SimOptions::fit_margins is on (tessera fit): 8 GiB less 1 GiB.
TEST(SimDeviceOverheads, FitMarginOnlyWhenFitting) {
  DeviceConfig g = gpu("gpu0", 8 * GiB);
  g.fit_margin = 1 * GiB;
  for (bool fit : {false, true}) {
    SCOPED_TRACE(fit ? "fit" : "plan");
    SimOptions o;
    o.mode = MemoryMode::kMetadata;
    o.fit_margins = fit;
    auto sim = make_sim(topology({g, wrapped_cpu()}), o);
    ASSERT_NE(sim, nullptr);
    BufferType& bt = *sim->device(0)->buffer_type();
    EXPECT_EQ(bt.alloc_buffer(7 * GiB + 1).ok(), !fit);
    EXPECT_TRUE(bt.alloc_buffer(7 * GiB).ok());
  }
}

// A unified device's fit margin is left free in the pool: 16 - 2 = 14 GiB for both sides while fitting.
TEST(SimUnifiedMemory, AFitMarginIsLeftFreeInThePool) {
  DeviceConfig igpu = gpu("igpu0", 12 * GiB);
  igpu.type = DeviceType::kIgpu;
  igpu.unified = true;
  igpu.fit_margin = 2 * GiB;
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  o.fit_margins = true;
  auto sim = make_sim(topology({igpu, wrapped_cpu(16 * GiB)}), o);
  ASSERT_NE(sim, nullptr);
  auto c = sim->device(1)->buffer_type()->alloc_buffer(14 * GiB);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(sim->device(0)->buffer_type()->alloc_buffer(1).ok());
  EXPECT_EQ(sim->pool_stats().margins, 2 * GiB);
}

TEST(SimUnifiedMemory, NeedsTheCpuDeviceLast) {
  DeviceConfig igpu = gpu("igpu0", 4 * GiB);
  igpu.unified = true;
  auto s = Simulator::create(topology({igpu}), {}, &builtin_registry());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("unified-memory device shares the host pool of the CPU device"));
}

}  // namespace
