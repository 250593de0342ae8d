// The simulator's invariant checks of debug and sanitizer builds (TS_DEBUG_ASSERT, TESSERA_CHECK_INVARIANTS): the
// clock, the queue and memory. Each is shown to abort on a simulator state corrupted by hand, naming the invariant, the
// device or command and the seed; in builds without the checks those tests are skipped and say why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>

#include "sim/sim_impl.h"
#include "tessera/sim/simulator.h"
#include "unit/sim/sim_fixture.h"

namespace tessera::sim::testing {
namespace {

constexpr uint64_t kSeed = 7;

// One asynchronous simulated GPU, memory-backed, with a vector in its memory whose async set has been applied: the
// simulator's clock and queue have moved.
struct SimRig {
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<Backend> b;
  std::unique_ptr<Vectors> v;
  SimDevice* dev = nullptr;
  explicit SimRig(DeviceConfig cfg = gpu("gpu0")) {
    SimOptions o;
    o.seed = kSeed;
    sim = make_sim(topology({std::move(cfg)}), o);
    b = sim->device(0)->init_backend({}).value();
    dev = dynamic_cast<SimDevice*>(sim->device(0));
    v = std::make_unique<Vectors>(*sim->device(0)->buffer_type(), std::vector<std::string>{"v"});
    const std::vector<float> ones(64, 1.0f);
    b->set_tensor_async(*(*v)[0], ones.data(), 0, ones.size() * sizeof(float));
    EXPECT_TRUE(b->synchronize().ok());
  }
  Simulator::Impl* impl() const { return sim->impl(); }
};

#define SKIP_WITHOUT_CHECKS()                                                                  \
  do {                                                                                         \
    if constexpr (!kCheckInvariants) GTEST_SKIP() << "built without TESSERA_CHECK_INVARIANTS"; \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                                            \
  } while (0)

TEST(SimInvariants, NormalRunKeepsTheClockAndQueueInOrder) {
  SimRig rig;
  EXPECT_GT(rig.impl()->now, 0.0);
  EXPECT_TRUE(rig.impl()->pending.empty());
  if constexpr (kCheckInvariants) {
    EXPECT_GT(rig.impl()->applied_until, 0.0);
  }
}

TEST(SimInvariants, HostTimeGoingBack) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        rig.impl()->now = 0;  // before the end of the set already applied
        std::vector<float> out(64);
        (void)tensor_get(*(*rig.v)[0], out.data(), 0, out.size() * sizeof(float));
      },
      "simulator clock: host time 0 us went back before .* us, the end of a command already applied \\(seed 7\\)");
}

TEST(SimInvariants, PendingCommandsAppliedOutOfEndTimeOrder) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        auto* s = rig.impl();
        s->pending.push({s->applied_until / 2, s->seq++, [] {}, s->hz.current_command()});
        s->advance_host(s->now);
      },
      "simulator queue: gpu0/s0 #[0-9]+ set_async v .* is applied after a command ending at .* us: pending commands "
      "are applied out of end-time order \\(seed 7\\)");
}

TEST(SimInvariants, CommandEndingBeforeItsSubmission) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        auto* s = rig.impl();
        s->push(s->now / 2, [] {});
      },
      "simulator clock: gpu0/s0 #[0-9]+ set_async v .* ends at .* us, before the host submitted it at .* us "
      "\\(seed 7\\)");
}

// A cost model giving NaN: the stream's end time is not after its last one.
TEST(SimInvariants, StreamEndGoingBack) {
  SKIP_WITHOUT_CHECKS();
  DeviceConfig cfg = gpu("gpu0");
  cfg.cost.launch_overhead_us = std::numeric_limits<double>::quiet_NaN();
  SimRig rig(cfg);
  OneOp op(*rig.sim->device(0)->buffer_type(), [](Context& c) {
    Tensor* a = c.new_tensor_1d(Type::kF32, 64);
    set_name(*a, "a");
    Tensor* y = scale(c, a, 2.0f);
    set_name(*y, "y");
    return y;
  });
  EXPECT_DEATH((void)rig.b->graph_compute_async(op.graph),
               "simulator clock: the last end of stream gpu0 went back from .* us to nan us in gpu0/s0 #[0-9]+ SCALE "
               "y \\(seed 7\\)");
}

TEST(SimInvariants, MemoryUsedOverCapacity) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(
      {
        rig.dev->stats.memory_used = rig.dev->config().memory + 1;
        (void)rig.dev->reserve_memory(0);
      },
      "simulated memory: device gpu0 uses 1073741825 bytes of its 1073741824 \\(seed 7\\)");
}

TEST(SimInvariants, MemoryReleasedThatWasNeverReserved) {
  SKIP_WITHOUT_CHECKS();
  SimRig rig;
  EXPECT_DEATH(rig.dev->release_memory(rig.dev->stats.memory_used + 1),
               "simulated memory: device gpu0 releases [0-9]+ bytes, more than the [0-9]+ it uses \\(seed 7\\)");
}

}  // namespace
}  // namespace tessera::sim::testing
