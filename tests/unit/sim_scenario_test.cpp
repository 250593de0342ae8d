// Scenario files and placement policies (issue 6): every category of malformed scenario is rejected with a message
// naming the file, the location and what was expected; the runner reports met and failed expectations; policies place
// layers where the user asked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "sim_fixture.h"
#include "tessera/sim/policy.h"
#include "tessera/sim/scenario.h"
#include "tessera/sim/topology.h"

using namespace tessera;
using namespace tessera::sim;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

std::string error_of(const std::string& text) {
  auto s = parse_scenario(text, "case.json");
  EXPECT_FALSE(s.ok()) << "accepted: " << text;
  return s.ok() ? std::string() : s.status().message();
}

TEST(SimScenarioParse, AMinimalScenarioTakesTheDefaults) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu"})", "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s.value().name, "x");
  EXPECT_EQ(s.value().config.topology.name, "1gpu");
  EXPECT_EQ(s.value().config.model.name, "tiny");
  EXPECT_EQ(s.value().evaluations, 1);
  EXPECT_EQ(s.value().config.policy.n_gpu_layers, -1);
  EXPECT_EQ(s.value().config.sim.mode, MemoryMode::kBacked);
}

TEST(SimScenarioParse, EveryFieldIsRead) {
  auto s = parse_scenario(R"({
    "name": "all", "description": "d", "topology": "2gpu-unequal",
    "model": {"preset": "tiny", "n_layer": 6, "n_tokens": 4, "flash_attn": false, "weight_type": "q8_0"},
    "policy": {"n_gpu_layers": 5, "tensor_split": [2, 1], "overrides": [{"pattern": "^cache_", "target": "cpu"}],
               "op_offload": false, "parallel": true, "max_split_inputs": 12},
    "run": {"seed": 9, "mode": "metadata-only", "adversarial": true, "max_jitter": "20 us", "evaluations": 3,
            "model_seed": 4, "faults": {"fail_alloc_nth": 2, "fail_alloc_above": "1 MiB", "slow_copy_factor": 2.5,
                                        "fail_compute_ops": ["SOFT_MAX"], "drop_event_wait_nth": 1}},
    "expect": {"scheduling": "ok", "max_splits": 9, "min_splits": 2, "nodes": [{"node": "l_out-0", "device": "cpu"}],
               "peak_memory": {"gpu0": "2 GiB"}, "no_race": true, "outputs_match_reference": true, "max_nmse": 0.001,
               "max_reserves": 1}
  })", "all.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const Scenario& sc = s.value();
  EXPECT_EQ(sc.config.model.n_layer, 6);
  EXPECT_EQ(sc.config.model.n_tokens, 4);
  EXPECT_FALSE(sc.config.model.flash_attn);
  EXPECT_EQ(sc.config.model.weight_type, Type::kQ8_0);
  EXPECT_EQ(sc.config.policy.n_gpu_layers, 5);
  EXPECT_EQ(sc.config.policy.tensor_split, (std::vector<double>{2, 1}));
  ASSERT_EQ(sc.config.policy.overrides.size(), 1u);
  EXPECT_EQ(sc.config.policy.overrides[0].target, "cpu");
  EXPECT_FALSE(sc.config.policy.op_offload);
  EXPECT_TRUE(sc.config.policy.parallel);
  EXPECT_EQ(sc.config.policy.max_split_inputs, 12);
  EXPECT_EQ(sc.config.sim.seed, 9u);
  EXPECT_EQ(sc.config.sim.mode, MemoryMode::kMetadata);
  EXPECT_TRUE(sc.config.sim.adversarial);
  EXPECT_DOUBLE_EQ(sc.config.sim.max_jitter_us, 20.0);
  EXPECT_EQ(sc.evaluations, 3);
  EXPECT_EQ(sc.config.model_seed, 4u);
  EXPECT_EQ(sc.config.sim.faults.fail_alloc_nth, 2);
  EXPECT_EQ(sc.config.sim.faults.fail_alloc_above, MiB);
  EXPECT_DOUBLE_EQ(sc.config.sim.faults.slow_copy_factor, 2.5);
  EXPECT_EQ(sc.config.sim.faults.fail_compute_ops, (std::vector<Op>{Op::kSoftMax}));
  EXPECT_EQ(sc.config.sim.faults.drop_event_wait_nth, 1);
  EXPECT_EQ(sc.expect.scheduling_ok, true);
  EXPECT_EQ(sc.expect.max_splits, 9);
  EXPECT_EQ(sc.expect.min_splits, 2);
  ASSERT_EQ(sc.expect.nodes.size(), 1u);
  EXPECT_EQ(sc.expect.nodes[0].device, "cpu");
  ASSERT_EQ(sc.expect.peak_memory.size(), 1u);
  EXPECT_EQ(sc.expect.peak_memory[0].max_bytes, 2 * GiB);
  EXPECT_EQ(sc.expect.no_race, true);
  EXPECT_DOUBLE_EQ(sc.expect.max_nmse, 0.001);
  EXPECT_EQ(sc.expect.max_reserves, 1);
}

TEST(SimScenarioParse, SyntaxErrorsGiveLineAndColumn) {
  EXPECT_THAT(error_of("{\n  \"name\": \"x\",\n  \"topology\" \"1gpu\"\n}"),
              AllOf(HasSubstr("case.json:3:"), HasSubstr("JSON syntax error")));
  EXPECT_THAT(error_of(""), HasSubstr("case.json:"));
  EXPECT_THAT(error_of(R"({"name": "a", "name": "b", "topology": "1gpu"})"), HasSubstr("duplicate key \"name\""));
}

TEST(SimScenarioParse, UnknownKeysAreRejectedWithTheirPath) {
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "polcy": {}})"),
              AllOf(HasSubstr("case.json: unknown key \"polcy\""), HasSubstr("did you mean \"policy\"")));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"parralel": true}})"),
              HasSubstr("case.json: policy: unknown key \"parralel\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"nodes": [{"node": "a", "dev": "b"}]}})"),
              HasSubstr("expect.nodes[0]: unknown key \"dev\""));
}

TEST(SimScenarioParse, WrongTypesSayWhatWasExpected) {
  EXPECT_THAT(error_of(R"({"name": 5, "topology": "1gpu"})"), HasSubstr("name: expected a string, got a number (5)"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": 3})"),
              HasSubstr("topology: expected a preset name or a topology object"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"parallel": "yes"}})"),
              HasSubstr("policy.parallel: expected true or false"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"tensor_split": [1, "a"]}})"),
              HasSubstr("policy.tensor_split[1]: expected a number"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "model": {"n_layer": -2}})"),
              HasSubstr("model.n_layer: expected a whole number >= 0"));
}

TEST(SimScenarioParse, BadValuesAreRejected) {
  EXPECT_THAT(error_of(R"({"topology": "1gpu"})"), HasSubstr("missing required key \"name\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "no-such"})"), HasSubstr("no topology preset"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "model": {"preset": "13b"}})"),
              AllOf(HasSubstr("model.preset: expected a model preset"), HasSubstr("tiny")));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "model": {"n_head": 3}})"),
              HasSubstr("model: the model is invalid"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"mode": "fast"}})"),
              HasSubstr("run.mode: expected \"memory-backed\" or \"metadata-only\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"evaluations": 0}})"),
              HasSubstr("run.evaluations: expected 1 to 1000"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"faults": {"fail_alloc_above": "lots"}}})"),
              HasSubstr("run.faults.fail_alloc_above"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"faults": {"fail_compute_ops": ["FOO"]}}})"),
              HasSubstr("run.faults.fail_compute_ops[0]: expected an op name"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"scheduling": "maybe"}})"),
              HasSubstr("expect.scheduling: expected \"ok\" or \"error\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"peak_memory": {"gpu0": "big"}}})"),
              HasSubstr("expect.peak_memory.gpu0"));
}

TEST(SimScenarioParse, InlineTopologyErrorsNameTheTopology) {
  EXPECT_THAT(error_of(R"({"name": "x", "topology": {"name": "t", "devices": [{"name": "gpu0", "memory": "a lot"}]}})"),
              AllOf(HasSubstr("case.json (topology)"), HasSubstr("devices[0].memory")));
}

TEST(SimScenarioParse, MissingFileNamesThePath) {
  auto s = load_scenario_file("/nonexistent/dir/s.json");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("/nonexistent/dir/s.json: cannot open the scenario file"));
}

TEST(SimScenarioParse, NoCrashOnTruncatedOrMangledInput) {
  const std::string text = R"({"name": "x", "topology": "2gpu-unequal", "model": {"preset": "tiny", "n_layer": 3},
    "policy": {"tensor_split": [1, 1], "overrides": [{"pattern": "a", "target": "cpu"}]},
    "run": {"seed": 2, "faults": {"slow_event": "3 us"}}, "expect": {"max_splits": 4, "no_race": true}})";
  for (size_t n = 0; n < text.size(); n += 3) (void)parse_scenario(text.substr(0, n), "cut.json");
  std::mt19937_64 rng(17);
  for (int i = 0; i < 300; ++i) {
    std::string t = text;
    for (int k = 0; k < 3; ++k) t[rng() % t.size()] = static_cast<char>(rng() % 256);
    (void)parse_scenario(t, "mangled.json");
  }
  SUCCEED() << "no crash, no exception (seed 17)";
}

// ---- the runner ----

TEST(SimScenarioRun, MetAndFailedExpectationsAreReported) {
  auto s = parse_scenario(R"({"name": "x", "topology": "gpu-no-fa", "model": {"n_layer": 2},
    "expect": {"scheduling": "ok", "max_splits": 1, "min_splits": 2, "no_race": true, "outputs_match_reference": true,
               "nodes": [{"node": "fattn-0", "device": "cpu"}, {"node": "fattn-1", "device": "gpu0"}]}})",
                          "run.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const ScenarioOutcome out = run_scenario(s.value());
  EXPECT_FALSE(out.passed);
  std::map<std::string, bool> ok;
  for (const auto& r : out.results) ok[r.what] = r.ok;
  EXPECT_TRUE(ok.at("scheduling succeeds"));
  EXPECT_FALSE(ok.at("at most 1 splits"));  // FLASH_ATTN_EXT on the CPU costs splits
  EXPECT_TRUE(ok.at("at least 2 splits"));
  EXPECT_TRUE(ok.at("no race"));
  EXPECT_TRUE(ok.at("fattn-0 on cpu"));
  EXPECT_FALSE(ok.at("fattn-1 on gpu0"));
  EXPECT_TRUE(ok.at("outputs match the CPU reference (NMSE <= 0.0001)"));
}

TEST(SimScenarioRun, AnInjectedFaultEndsInACleanError) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu",
    "run": {"faults": {"fail_compute_ops": ["MUL_MAT"], "fail_compute_device": "gpu0"}},
    "expect": {"scheduling": "error", "error_contains": "injected fault"}})", "fault.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const ScenarioOutcome out = run_scenario(s.value());
  EXPECT_TRUE(out.passed) << out.error;
  EXPECT_THAT(out.error, HasSubstr("MUL_MAT"));
}

// ---- policies ----

TEST(SimPolicy, LayerOfName) {
  EXPECT_EQ(layer_of_name("blk.12.ffn_up.weight"), 12);
  EXPECT_EQ(layer_of_name("cache_v_l3"), 3);
  EXPECT_EQ(layer_of_name("token_embd.weight"), -1);
  EXPECT_EQ(layer_of_name("blk.x.attn_q.weight"), -1);
}

TEST(SimPolicy, LayersGoWhereThePolicySays) {
  auto sim = tessera::sim::testing::make_sim(load_topology("2gpu-unequal").value());
  // 24 GiB and 8 GiB GPUs: by memory, 3/4 of the offloaded layers on gpu0.
  PlacementPolicy p;
  auto all = layer_devices(*sim, 8, p).value();
  EXPECT_EQ(all, (std::vector<int>{0, 0, 0, 0, 0, 0, 1, 1}));
  p.n_gpu_layers = 4;  // the last four layers, split 3:1
  EXPECT_EQ(layer_devices(*sim, 8, p).value(), (std::vector<int>{2, 2, 2, 2, 0, 0, 0, 1}));
  p.tensor_split = {1, 1};
  EXPECT_EQ(layer_devices(*sim, 8, p).value(), (std::vector<int>{2, 2, 2, 2, 0, 0, 1, 1}));
  p.layers_per_device = {1, 2};  // explicit counts win
  EXPECT_EQ(layer_devices(*sim, 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 1, 1}));
  p.layers_per_device = {5, 5};
  EXPECT_FALSE(layer_devices(*sim, 8, p).ok());
  p.layers_per_device = {1, 1, 1};
  EXPECT_FALSE(layer_devices(*sim, 8, p).ok());
  p.layers_per_device.clear();
  p.tensor_split = {0, 0};
  EXPECT_FALSE(layer_devices(*sim, 8, p).ok());
  p.tensor_split = {-1, 2};
  EXPECT_FALSE(layer_devices(*sim, 8, p).ok());
}

}  // namespace
