// Plan reuse with pipelining (issue 33, docs/scheduler.md 'Reuse'): on every topology preset, a session evaluates the
// tiny model several times in flight with `parallel` and reuse on, with other inputs per evaluation, under 200
// adversarial seeds: every evaluation after the first keeps the plan, the hazard detector reports no race, and the
// outputs of the last evaluation equal the CPU reference of the same inputs (which replays the earlier ones for the
// cache).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "support/sweep.h"
#include "tessera/builtin.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;

namespace {

class ReuseSweep : public ::testing::TestWithParam<std::string> {};

// The tiny model (3 layers) on the preset `preset`, pipelined, under adversarial timing with simulator seed `seed`.
SessionConfig sweep_config(const std::string& preset, uint64_t seed) {
  SessionConfig c;
  c.topology = topology_preset(preset).value();
  c.model = models::preset("tiny").value();
  c.model.n_layer = 3;
  c.policy.parallel = true;
  c.policy.n_gpu_layers = 2;  // a layer on the CPU: more splits and copies
  // an accelerator that cannot write the cache (SET_ROWS) keeps it in host memory, as a user would (-nkvo)
  c.policy.kv_offload = preset != "accel-no-events";
  c.sim.seed = seed;
  c.sim.adversarial = true;
  c.sim.record_trace = false;
  c.model_seed = 3;
  return c;
}

}  // namespace

TEST_P(ReuseSweep, PipelinedReusedEvaluationsHaveNoRaceAndMatchTheCpu) {
  constexpr int kEvaluations = 5;  // more than the slots: every slot is used, the first one again
  // Under ASan a sixteenth (12 seeds per preset, ten presets): the sanitizers look for memory errors, which the first
  // seeds' paths show; the race detector runs all 200 in the default build (tests/support/sweep.h).
  const uint64_t seeds = tessera::test::sweep_seeds(200, 5, 16);
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SessionConfig c = sweep_config(GetParam(), seed);
    c.policy.reuse = true;
    c.per_evaluation_inputs = true;
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.status().to_string();
    auto r = (*s)->run(kEvaluations);
    ASSERT_TRUE(r.ok()) << "seed " << seed << ": " << r.status().to_string();
    const PlanReuse pr = (*s)->sched().plan_reuse();
    ASSERT_TRUE(pr.reused) << "seed " << seed << ": " << pr.why_not;
    ASSERT_EQ(pr.full_plans, 1) << "seed " << seed;
    ASSERT_EQ(pr.reuses, kEvaluations - 1) << "seed " << seed;
    ASSERT_EQ(r->races, 0u) << "seed " << seed << ": " << (*s)->sim().races_report();
    ASSERT_TRUE(r->errors.empty()) << "seed " << seed << ": " << r->errors[0];
    ASSERT_TRUE(r->checked) << "seed " << seed;
    ASSERT_TRUE(r->matches_reference(1e-4)) << "seed " << seed << ": NMSE " << r->nmse;
  }
}

// The same graph computed again without alloc_graph (graph_compute_async on a computed graph allocates it itself, and
// the application wrote no new inputs): alloc_graph's wait for the backends that read a user input in place does not
// run, so the executor's own waits before the host writes a pipelined graph input's slot copy must hold (the input's
// backend, and every backend that reads the copy in place). Without this lifecycle the mutants
// own-exec-graph-input-copy-no-wait and own-exec-graph-input-wait-own-backend-only survived every suite (issue 51:
// alloc_graph's wait covers them whenever the application allocates first).
TEST_P(ReuseSweep, PipelinedEvaluationsComputedWithoutAllocGraphHaveNoRace) {
  constexpr int kEvaluations = 5;
  const uint64_t seeds = tessera::test::sweep_seeds(20, 5, 16);  // (the mutants above fail at seed 1)
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    for (int n_copies : {1, 2}) {
      SessionConfig c = sweep_config(GetParam(), seed);
      c.policy.n_copies = n_copies;
      auto s = Session::create(c, &builtin_registry());
      ASSERT_TRUE(s.ok()) << "seed " << seed << ": " << s.status().to_string();
      Session& session = **s;
      ASSERT_TRUE(session.plan().ok());
      ASSERT_TRUE(session.set_inputs().ok());
      for (int e = 0; e < kEvaluations; ++e) {
        ASSERT_EQ(session.sched().graph_compute_async(session.graph()), ComputeStatus::kSuccess)
            << "seed " << seed << ", evaluation " << e << ": " << session.sched().last_error();
      }
      ASSERT_TRUE(session.sched().synchronize().ok()) << "seed " << seed;
      session.sim().finish();
      ASSERT_EQ(session.sim().races().size(), 0u)
          << "seed " << seed << ", " << n_copies << " slots: " << session.sim().races_report();
      // the same inputs every time, and every evaluation writes the same cache slots: the reference of one
      auto got = session.read_outputs();
      auto want = session.reference_outputs();
      ASSERT_TRUE(got.ok() && want.ok());
      const NmseResult n = nmse(want->data(), got->data(), std::min(want->size(), got->size()));
      ASSERT_EQ(got->size(), want->size());
      ASSERT_LE(n.nmse, 1e-4) << "seed " << seed << ", " << n_copies << " slots";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReuseSweep, ReuseSweep, ::testing::ValuesIn(topology_preset_names()), [](const auto& info) {
  std::string n = info.param;
  for (char& ch : n) {
    if (ch == '-') ch = '_';
  }
  return n;
});
