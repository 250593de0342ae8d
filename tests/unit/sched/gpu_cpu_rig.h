// A GPU-like backend (a restricted device refusing the given ops; non-host buffer type backed by host memory) and
// the CPU, with a scheduler over both: the rig of the pass-5, split-reason and lifecycle tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <set>
#include <utility>

#include "support/sched_doubles.h"
#include "tessera/cpu.h"
#include "tessera/sched.h"

namespace tessera::testnet {

struct Rig {
  doubles::RestrictedDevice gdev;
  std::unique_ptr<Backend> gpu;
  std::unique_ptr<Backend> cpu = cpu::make_backend({.n_threads = 1});
  // events: whether GPU0 has events (RestrictedDevice)
  explicit Rig(std::set<Op> refused = {}, bool events = false) : gdev("GPU0", events) {
    gdev.refused = std::move(refused);
    gpu = std::move(gdev.init_backend()).value();
  }
  std::unique_ptr<Scheduler> sched(SchedulerParams p = {}) {
    auto s = Scheduler::create({gpu.get(), cpu.get()}, std::move(p));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }
  BufferType* gbuf() { return &gdev.buft(); }
};

// The rig with ROPE and SOFT_MAX refused by GPU0 (every op before and after them on the GPU, each between two splits).
struct Rig2 : Rig {
  explicit Rig2(bool events = false, std::set<Op> refused = {Op::kRope, Op::kSoftMax})
      : Rig(std::move(refused), events) {}
};

}  // namespace tessera::testnet
