// Run lifecycles (docs/scenarios.md, "run.steps", "run.inputs", policy "n_copies"): per-evaluation inputs, the
// synchronize and reset steps, a step that must fail and the retry after it, and the number of in-flight copy slots;
// every malformed key is an error naming the file and the key.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tessera/builtin.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/scenario/scenario.h"
#include "unit/scenario/scenario_error_of.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::scenario;
using ::testing::HasSubstr;

namespace {

using tessera::scenario::test::error_of;

SessionConfig tiny_on(const std::string& topology) {
  SessionConfig c;
  c.topology = topology_preset(topology).value();
  c.model = models::preset("tiny").value();
  return c;
}

std::vector<float> outputs_after(const SessionConfig& c, const std::vector<Session::StepSpec>& steps) {
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  auto r = s.value()->run_steps(steps);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return {};
  EXPECT_TRUE(r->checked);
  EXPECT_TRUE(r->matches_reference(1e-4)) << "NMSE " << r->nmse;
  return s.value()->read_outputs().value();
}

using St = Session::Step;

Session::StepSpec step(St st, bool must_fail = false, std::string error_contains = {}) {
  return {st, must_fail, std::move(error_contains)};
}

}  // namespace

// ---- parsing ----

TEST(SimScenarioSteps, InputsKindIsRead) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing",
    "run": {"inputs": "per_evaluation", "evaluations": 3}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->config.per_evaluation_inputs);
  auto f =
      parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing", "run": {"inputs": "fixed"}})", "s.json");
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  EXPECT_FALSE(f->config.per_evaluation_inputs);
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"inputs": "each"}})"),
              HasSubstr("case.json: run.inputs: expected \"fixed\" or \"per_evaluation\", got \"each\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"inputs": 2}})"), HasSubstr("run.inputs:"));
}

TEST(SimScenarioSteps, StepsSynchronizeResetAndMustFailAreRead) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing",
    "run": {"steps": [{"step": "reserve", "fails": "out of memory"}, "reserve", "compute", "synchronize", "reset",
                      {"step": "compute", "fails": true}]}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->steps.size(), 6u);
  EXPECT_EQ(s->steps[0].step, St::kReserve);
  EXPECT_TRUE(s->steps[0].must_fail);
  EXPECT_EQ(s->steps[0].error_contains, "out of memory");
  EXPECT_FALSE(s->steps[1].must_fail);
  EXPECT_EQ(s->steps[3].step, St::kSynchronize);
  EXPECT_EQ(s->steps[4].step, St::kReset);
  EXPECT_TRUE(s->steps[5].must_fail);
  EXPECT_EQ(s->steps[5].error_contains, "");
  const std::string head = R"({"name": "x", "topology": "1gpu", "run": {"steps": ["compute", )";
  EXPECT_THAT(error_of(head + R"({"step": "reserve"}]}})"),
              HasSubstr("case.json: run.steps[1]: missing required key \"fails\""));
  EXPECT_THAT(error_of(head + R"({"step": "reserve", "fails": false}]}})"),
              HasSubstr("run.steps[1].fails: expected true or a part of the expected error"));
  EXPECT_THAT(error_of(head + R"({"step": "reserve", "fails": ""}]}})"),
              HasSubstr("run.steps[1].fails: expected true or a non-empty part of the expected error"));
  EXPECT_THAT(error_of(head + R"({"step": "sync", "fails": true}]}})"),
              HasSubstr("run.steps[1].step: expected \"reserve\", \"alloc\", \"compute\", \"compute-again\""));
  EXPECT_THAT(error_of(head + R"({"step": "reserve", "fails": true, "retry": 2}]}})"), HasSubstr("run.steps[1]"));
  EXPECT_THAT(error_of(head + R"(7]}})"), HasSubstr("run.steps[1]"));
}

TEST(SimScenarioSteps, CopySlotsAreAPolicyKeyWithinOneToFour) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing",
    "policy": {"parallel": true, "n_copies": 2}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config.policy.n_copies, 2);
  EXPECT_EQ(s->config.policy.scheduler_params().n_copies, 2);
  EXPECT_EQ(PlacementPolicy{}.n_copies, 4);
  for (const char* bad : {"0", "5", "-1", "2.5", "4294967298", "\"2\""}) {
    EXPECT_THAT(error_of(std::string(R"({"name": "x", "topology": "1gpu", "policy": {"n_copies": )") + bad + "}}"),
                HasSubstr("case.json: policy.n_copies: expected"))
        << bad;
  }
  PlacementPolicy p;
  EXPECT_TRUE(apply_policy_option("n_copies", "3", &p).ok());
  EXPECT_EQ(p.n_copies, 3);
  const Status bad = apply_policy_option("n_copies", "5", &p);
  EXPECT_THAT(bad.message(), HasSubstr("--n-copies"));
  EXPECT_THAT(bad.message(), HasSubstr("1 to 4"));
}

// ---- the scheduler's slot count ----

TEST(SimSchedulerCopySlots, TheSlotCountIsRangeCheckedAndUsed) {
  SessionConfig c = tiny_on("2gpu-unequal");
  c.policy.parallel = true;
  for (int n : {1, 2, 3, 4}) {
    c.policy.n_copies = n;
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s.value()->sched().n_copies(), n);
  }
  for (int n : {0, 5, -3}) {
    c.policy.n_copies = n;
    auto s = Session::create(c, &builtin_registry());
    ASSERT_FALSE(s.ok()) << n;
    EXPECT_THAT(s.status().message(), HasSubstr("n_copies " + std::to_string(n) + " is outside 1 to 4"));
  }
  c.policy.parallel = false;  // no pipelining: one slot whatever n_copies says
  c.policy.n_copies = 2;
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s.value()->sched().n_copies(), 1);
}

// ---- per-evaluation inputs ----

TEST(SimSessionInputs, PerEvaluationInputsDifferAndTheReferenceFollowsThem) {
  EXPECT_EQ(evaluation_input_seed(7, 0), 7u);
  EXPECT_NE(evaluation_input_seed(7, 1), evaluation_input_seed(7, 0));
  EXPECT_NE(evaluation_input_seed(7, 2), evaluation_input_seed(7, 1));
  SessionConfig c = tiny_on("2gpu-unequal");
  c.policy.parallel = true;
  c.policy.n_copies = 2;
  const std::vector<float> fixed2 = outputs_after(c, {step(St::kCompute), step(St::kCompute)});
  c.per_evaluation_inputs = true;
  const std::vector<float> one = outputs_after(c, {step(St::kCompute)});
  const std::vector<float> two = outputs_after(c, {step(St::kCompute), step(St::kCompute)});
  const std::vector<float> three =
      outputs_after(c, {step(St::kCompute), step(St::kSynchronize), step(St::kCompute), step(St::kCompute)});
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(one, fixed2);  // evaluation 0 has the fixed inputs
  EXPECT_NE(two, one);     // evaluation 1 another one's
  EXPECT_NE(three, two);
  // run() too: its evaluations get their own inputs
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok());
  auto r = s.value()->run(3);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->checked && r->matches_reference(1e-4)) << r->nmse;
  EXPECT_EQ(s.value()->read_outputs().value(), three);
}

// ---- a step that must fail, the retry, reset ----

TEST(SimSessionSteps, AReserveThatFailsIsRetriedOnAConsistentState) {
  SessionConfig c = tiny_on("2gpu-unequal");
  c.model.n_layer = 4;
  // allocations 1-4 are the weights and caches of cpu, gpu0, gpu1; 5-7 the compute buffers of the first reserve:
  // the second one (gpu1's) fails, after gpu0's was allocated
  c.sim.faults.fail_alloc_nth = 6;
  const std::vector<Session::StepSpec> retry = {step(St::kReserve, true, "injected fault"), step(St::kReserve),
                                                step(St::kCompute)};
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto r = s.value()->run_steps(retry);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->checked && r->matches_reference(1e-4)) << r->nmse;
  EXPECT_EQ(r->races, 0u);
  EXPECT_EQ(s.value()->sched().reserve_count(), 2);
  // no compute memory was left behind by the failed reserve: the devices hold what a clean run holds
  SessionConfig clean = tiny_on("2gpu-unequal");
  clean.model.n_layer = 4;
  auto k = Session::create(clean, &builtin_registry());
  ASSERT_TRUE(k.ok());
  ASSERT_TRUE(k.value()->run_steps(std::vector<St>{St::kReserve, St::kCompute}).ok());
  const auto got = s.value()->memory(), want = k.value()->memory();
  ASSERT_EQ(got.size(), want.size());
  for (size_t d = 0; d < got.size(); ++d) {
    EXPECT_EQ(got[d].used, want[d].used) << got[d].device;
    EXPECT_EQ(got[d].compute, want[d].compute) << got[d].device;
  }
  // without the retry the compute allocates the buffers itself (the failed reserve left no plan to use)
  auto n = Session::create(c, &builtin_registry());
  ASSERT_TRUE(n.ok());
  auto rn = n.value()->run_steps({step(St::kReserve, true, "injected"), step(St::kCompute)});
  ASSERT_TRUE(rn.ok()) << rn.status().to_string();
  EXPECT_TRUE(rn->matches_reference(1e-4));
}

TEST(SimSessionSteps, AStepExpectedToFailMustFailWithTheGivenText) {
  SessionConfig c = tiny_on("1gpu");
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok());
  auto r = s.value()->run_steps({step(St::kReserve, true, ""), step(St::kCompute)});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("step 1 (reserve): expected to fail, but it succeeded"));
  c = tiny_on("2gpu-unequal");
  c.model.n_layer = 4;
  c.sim.faults.fail_alloc_nth = 6;  // gpu1's compute buffer
  auto f = Session::create(c, &builtin_registry());
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  auto rf = f.value()->run_steps({step(St::kReserve, true, "no such text"), step(St::kCompute)});
  ASSERT_FALSE(rf.ok());
  EXPECT_THAT(rf.status().message(), HasSubstr("step 1 (reserve): expected to fail with \"no such text\""));
}

TEST(SimSessionSteps, ResetKeepsTheUsersPins) {
  SessionConfig c = tiny_on("1gpu");
  c.policy.pins.push_back({"kq_soft_max-1", "cpu"});
  c.model.flash_attn = false;
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto r =
      s.value()->run_steps(std::vector<Session::StepSpec>{step(St::kCompute), step(St::kReset), step(St::kCompute)});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r->matches_reference(1e-4));
  EXPECT_THAT(s.value()->explain("kq_soft_max-1"), HasSubstr("on cpu, cause user "));
}

// ---- compute-again: the graph computed last, evaluated once more without alloc_graph and new inputs ----

TEST(SimSessionSteps, ComputeAgainReadsTheInputsTheLastEvaluationRead) {
  SessionConfig c = tiny_on("2gpu-unequal");
  c.policy.parallel = true;
  c.policy.n_copies = 2;
  c.per_evaluation_inputs = true;  // a compute would write other inputs; a compute-again writes none
  const std::vector<float> one = outputs_after(c, {step(St::kCompute)});
  const std::vector<float> two = outputs_after(c, {step(St::kCompute), step(St::kCompute)});
  ASSERT_FALSE(one.empty());
  ASSERT_NE(one, two);
  // (each compared with the CPU reference by outputs_after, and here with the run of one and two evaluations)
  EXPECT_EQ(outputs_after(c, {step(St::kCompute), step(St::kComputeAgain), step(St::kComputeAgain)}), one);
  EXPECT_EQ(outputs_after(c, {step(St::kCompute), step(St::kCompute), step(St::kComputeAgain)}), two);
  EXPECT_EQ(outputs_after(c, {step(St::kCompute), step(St::kSynchronize), step(St::kComputeAgain)}), one);
  // the evaluations in flight on both GPUs, in both slots, race with nothing
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok());
  auto r = s.value()->run_steps({St::kCompute, St::kComputeAgain, St::kComputeAgain, St::kComputeAgain});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(r->races, 0u) << s.value()->sim().races_report();
}

TEST(SimSessionSteps, ComputeAgainNeedsTheSameGraphComputedJustBefore) {
  const SessionConfig c = tiny_on("1gpu");
  const std::string need = "must come before it, with no reserve, alloc, reset or step of the other graph between";
  for (const std::vector<St>& steps :
       {std::vector<St>{St::kComputeAgain}, std::vector<St>{St::kCompute, St::kAlloc, St::kComputeAgain},
        std::vector<St>{St::kCompute, St::kReserve, St::kComputeAgain},
        std::vector<St>{St::kCompute, St::kReset, St::kComputeAgain}}) {
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok());
    auto r = s.value()->run_steps(steps);
    ASSERT_FALSE(r.ok()) << steps.size() << " steps";
    EXPECT_THAT(r.status().message(), HasSubstr("(compute-again): compute-again evaluates the graph computed last"));
    EXPECT_THAT(r.status().message(), HasSubstr("a compute " + need));
  }
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok());
  auto r = s.value()->run_steps({St::kCompute, St::kComputeNextAgain});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("step 2 (compute-next-again): the scenario has no next graph"));
  SessionConfig freed = c;
  freed.policy.free_inputs = true;
  auto f = Session::create(freed, &builtin_registry());
  ASSERT_TRUE(f.ok());
  auto rf = f.value()->run_steps({St::kCompute, St::kComputeAgain});
  ASSERT_FALSE(rf.ok());
  EXPECT_THAT(rf.status().message(), HasSubstr("needs the graph's inputs kept, and policy free_inputs frees them"));
  // a failed compute-again that must fail lets the lifecycle go on
  auto g = Session::create(c, &builtin_registry());
  ASSERT_TRUE(g.ok());
  auto rg = g.value()->run_steps(
      {step(St::kComputeAgain, true, "a compute must come before it"), step(St::kCompute), step(St::kComputeAgain)});
  ASSERT_TRUE(rg.ok()) << rg.status().to_string();
  EXPECT_TRUE(rg->matches_reference(1e-4));
}

TEST(SimScenarioSteps, ComputeAgainStepsAreRead) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing",
    "run": {"steps": ["compute", "compute-again", {"step": "compute-again", "fails": true}]}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_EQ(s->steps.size(), 3u);
  EXPECT_EQ(s->steps[1].step, St::kComputeAgain);
  EXPECT_EQ(s->steps[2].step, St::kComputeAgain);
  EXPECT_TRUE(s->steps[2].must_fail);
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"steps": ["compute", "compute-next-again"]}})"),
              HasSubstr("a \"-next\" step needs a \"next_graph\""));
  EXPECT_STREQ(Session::step_name(St::kComputeNextAgain), "compute-next-again");
}
