// The race sweep over the shared configuration space (issue 51, docs/testing.md "Generators and their reach"): the
// properties run random graphs on the space's topologies and lifecycles, the preset sweeps (ReuseSweep,
// SimIntegration) run the models on the topology presets; this sweep runs the tiny models -- llama's layers, MoE,
// sliding-window and gpt-oss graphs -- on topologies and lifecycles drawn from tests/support/config_space.h, seeded
// (SeededChoices: case N is the same everywhere), under adversarial timing. Every case either runs with no race, no
// simulator error and logits equal to the CPU reference, or is refused for a reason the case itself gives: a device
// too small for what is placed on it, or the injected allocation failure.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "support/config_space.h"
#include "support/sweep.h"
#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"

using namespace tessera;
using namespace tessera::harness;
namespace space = tessera::test::space;

namespace {

constexpr const char* kModels[] = {"tiny", "tiny-moe", "tiny-gemma3", "tiny-gpt-oss"};

struct SweepCase {
  space::TopologySpec topology;
  space::LifecycleSpec lifecycle;
  std::string model;
  int n_gpu_layers = -1;
  bool kv_offload = true;
  // -sm row (issue 47): each GPU layer's matrices split by rows over every GPU at the drawn shares (empty: each GPU's
  // memory), the cuts rounded to the drawn rounding (1: every GPU gets rows of the tiny matrices; 128: few do)
  bool row_split = false;
  int row_rounding = 128;
  std::vector<double> shares;
};

SweepCase draw_case(uint64_t seed) {
  space::SeededChoices c(seed);
  SweepCase k;
  k.topology = space::draw_topology(c, 1);
  k.lifecycle = space::draw_lifecycle(c);
  // (the second graph is the properties': a session of a model has none)
  k.lifecycle.alternate = false;
  k.lifecycle.next_in_flight = false;
  k.model = kModels[c.in_range(0, 3)];
  k.n_gpu_layers = c.one_in(3) ? static_cast<int>(c.in_range(0, 3)) : -1;  // -1: every layer (llama.cpp's default)
  // a device that cannot write the cache (SET_ROWS, CPY) would hold it where nothing can write it: the user keeps
  // it in host memory (-nkvo), as the preset sweeps do for such a device
  for (const space::DeviceSpec& d : k.topology.devices) {
    for (int b = 0; b < space::kNumDenyable; ++b) {
      const Op op = space::kDenyable[b];
      if (((d.deny >> b) & 1u) != 0 && (op == Op::kSetRows || op == Op::kCpy)) k.kv_offload = false;
    }
  }
  // (drawn last: the cases before them stay what they were)
  k.row_split = c.one_in(3);
  constexpr int kRoundings[] = {1, 8, 64, 128};
  k.row_rounding = kRoundings[c.in_range(0, 3)];
  if (c.one_in(2)) {
    for (size_t i = 0; i < k.topology.devices.size(); ++i) k.shares.push_back(static_cast<double>(c.in_range(0, 3)));
  }
  return k;
}

std::string describe(const SweepCase& k) {
  std::string row;
  if (k.row_split) {
    row = ", -sm row (rounding " + std::to_string(k.row_rounding) + ", shares";
    for (double v : k.shares) row += " " + std::to_string(static_cast<int>(v));
    row += k.shares.empty() ? " by memory)" : ")";
  }
  return "model " + k.model + ", n_gpu_layers " + std::to_string(k.n_gpu_layers) + ", kv_offload " +
         std::to_string(k.kv_offload) + row + "\n" + space::describe(k.topology) + "\n" + space::describe(k.lifecycle);
}

// A refusal the case explains: out of memory on a device of the case (a 64 KiB or 256 KiB one, or the injected
// failure).
bool refused_for_memory(const Status& s, const SweepCase& k) {
  const bool oom = s.code() == StatusCode::kAllocFailed || s.message().find("does not fit") != std::string::npos ||
                   s.message().find("out of memory") != std::string::npos;
  bool small = k.lifecycle.fail_alloc_nth > 0;
  for (const space::DeviceSpec& d : k.topology.devices) small = small || d.memory < 2;
  return oom && small;
}

}  // namespace

TEST(ConfigSpaceSweep, TinyModelsOnDrawnTopologiesAndLifecyclesHaveNoRaceAndMatchTheCpu) {
  const uint64_t seeds = tessera::test::sweep_seeds(300, 20);  // a quarter under ASan (tests/support/sweep.h)
  std::map<std::string, int> outcomes;
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    const SweepCase k = draw_case(seed);
    const std::string where = "case seed " + std::to_string(seed) + " (tests/unit/harness/session/" +
                              "config_space_sweep_test.cpp; rerun with --gtest_filter=ConfigSpaceSweep.*)\n" +
                              describe(k);
    space::record_buckets("unit:ConfigSpaceSweep", space::buckets_of(k.topology, k.lifecycle));
    SessionConfig c;
    c.topology = space::make_topology(k.topology, "tests/unit/harness/session/config_space_sweep_test.cpp");
    c.model = models::preset(k.model).value();
    c.policy.n_gpu_layers = k.n_gpu_layers;
    c.policy.kv_offload = k.kv_offload;
    if (k.row_split) {
      c.policy.split_mode = SplitMode::kRow;
      for (sim::DeviceConfig& d : c.topology.devices) d.row_rounding = k.row_rounding;
      // shares of the GPUs (the devices that are not the CPU), when drawn and not all zero
      size_t n_gpus = 0;
      for (const sim::DeviceConfig& d : c.topology.devices) n_gpus += d.type != DeviceType::kCpu ? 1 : 0;
      std::vector<double> shares(k.shares.begin(), k.shares.begin() + std::min(k.shares.size(), n_gpus));
      if (std::any_of(shares.begin(), shares.end(), [](double v) { return v > 0; })) c.policy.tensor_split = shares;
      ++outcomes["with -sm row"];
    }
    space::apply_lifecycle(k.lifecycle, &c.policy, &c.sim);
    c.per_evaluation_inputs = k.lifecycle.per_evaluation_inputs;
    c.sim.seed = seed;
    c.sim.adversarial = true;
    c.sim.record_trace = false;
    c.model_seed = seed;
    auto s = Session::create(c, &builtin_registry());
    if (!s.ok()) {
      ASSERT_TRUE(refused_for_memory(s.status(), k)) << where << "\nSession::create: " << s.status().to_string();
      ++outcomes["refused at creation"];
      continue;
    }
    auto r = (*s)->run_steps(space::lifecycle_steps(k.lifecycle));
    if (!r.ok()) {
      ASSERT_TRUE(refused_for_memory(r.status(), k)) << where << "\nrun: " << r.status().to_string();
      ++outcomes["refused while running"];
      continue;
    }
    ASSERT_EQ(r->races, 0u) << where << "\n" << (*s)->sim().races_report(1);
    ASSERT_TRUE(r->errors.empty()) << where << "\n" << r->errors[0];
    ASSERT_TRUE(r->checked) << where;
    ASSERT_TRUE(r->matches_reference(1e-4)) << where << "\nNMSE " << r->nmse;
    ++outcomes["ran"];
    if (k.row_split) {
      bool split = false;
      for (const auto& [t, buft] : (*s)->placement().where) split = split || is_split_buffer_type(*buft);
      ++outcomes[split ? "ran with split weights" : "ran with -sm row, nothing split"];
    }
  }
  std::printf(
      "config-space sweep: %llu cases: %d ran, %d refused at creation, %d while running (out of memory); %d with -sm "
      "row, %d of them ran with split weights, %d with none split\n",
      static_cast<unsigned long long>(seeds), outcomes["ran"], outcomes["refused at creation"],
      outcomes["refused while running"], outcomes["with -sm row"], outcomes["ran with split weights"],
      outcomes["ran with -sm row, nothing split"]);
  // The row split is reached: most row-split cases run with weights split over their GPUs.
  EXPECT_GE(outcomes["ran with split weights"] * 2, outcomes["with -sm row"]);
  // Most cases run: the sweep is about the runs, the refusals are the exception.
  EXPECT_GE(outcomes["ran"], static_cast<int>(seeds) / 2) << outcomes["refused at creation"] << " refused at creation, "
                                                          << outcomes["refused while running"] << " while running";
}
