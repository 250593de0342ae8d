// Scenario files, placement policies (docs/scenarios.md): every kind of malformed scenario is rejected with a message
// naming the file, the location and what was expected; the runner reports met and failed expectations; policies place
// layers where the user asked.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <map>
#include <string>
#include <vector>

#include "unit/sim/sim_fixture.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/graph/graph_io.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/scenario/scenario.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/builtin.h"
#include "support/temp_dir.h"
#include "unit/scenario/scenario_error_of.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::scenario;
using tessera::scenario::test::error_of;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

std::vector<Session::Step> step_kinds(const std::vector<Session::StepSpec>& steps) {
  std::vector<Session::Step> out;
  for (const Session::StepSpec& s : steps) out.push_back(s.step);
  return out;
}

TEST(SimScenarioParse, AMinimalScenarioTakesTheDefaults) {
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing"})", "case.json");
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
    "version": 2, "name": "all", "description": "d", "topology": "2gpu-unequal",
    "model": {"preset": "tiny", "n_layer": 6, "n_tokens": 4, "flash_attn": false, "weight_type": "q8_0"},
    "policy": {"n_gpu_layers": 5, "tensor_split": [2, 1], "overrides": [{"pattern": "^cache_", "target": "cpu"}],
               "op_offload": false, "parallel": true, "max_split_inputs": 12},
    "run": {"seed": 9, "mode": "metadata-only", "adversarial": true, "max_jitter": "20 us", "evaluations": 3,
            "model_seed": 4, "faults": {"fail_alloc_nth": 2, "fail_alloc_above": "1 MiB", "slow_copy_factor": 2.5,
                                        "fail_compute_ops": ["SOFT_MAX"], "drop_event_wait_nth": 1}},
    "expect": {"scheduling": "ok", "max_splits": 9, "min_splits": 2, "nodes": [{"node": "l_out-0", "device": "cpu"}],
               "peak_memory": {"gpu0": "2 GiB"}, "no_race": true, "outputs_match_reference": true, "max_nmse": 0.001,
               "max_reserves": 1}
  })",
                          "all.json");
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

// Every count of the model is range-checked before it is narrowed to its field: 2^32 + 2 once ran as a 2-layer model
// and 1e18 was reported as "n_layer must be >= 1".
TEST(SimScenarioParse, ModelCountsOutOfTheirFieldsRangeAreErrorsNamingTheField) {
  const struct {
    const char* key;
    int64_t max;
  } fields[] = {{"n_layer", INT32_MAX}, {"n_embd", INT64_MAX},    {"n_ff", INT64_MAX},
                {"n_head", INT64_MAX},  {"n_head_kv", INT64_MAX}, {"n_ctx", INT64_MAX},
                {"n_kv", INT64_MAX},    {"n_tokens", INT64_MAX},  {"n_outputs", INT64_MAX},
                {"n_vocab", INT64_MAX}, {"n_expert", INT32_MAX},  {"n_expert_used", INT32_MAX}};
  for (const auto& f : fields) {
    std::vector<std::string> bad = {"-1", "1.5", "9223372036854775808", "18446744073709551615", "1e19", "\"4\""};
    if (f.max == INT32_MAX) {
      for (const char* v : {"4294967298", "4294967297", "2147483648", "1e18"}) bad.push_back(v);
    }
    for (const std::string& value : bad) {
      SCOPED_TRACE(std::string(f.key) + " = " + value);
      const std::string text =
          R"({"name": "x", "topology": "1gpu", "model": {")" + std::string(f.key) + R"(": )" + value + "}}";
      EXPECT_THAT(error_of(text),
                  AllOf(HasSubstr("model." + std::string(f.key) + ": expected a whole number from 0 to "),
                        HasSubstr(std::to_string(f.max))));
    }
  }
  // Within range but over the model's own limit: that limit names the field.
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "model": {"n_layer": 2147483647}})"),
              HasSubstr("model.n_layer: expected at most 100000 layers"));
}

TEST(SimScenarioParse, WrongTypesSayWhatWasExpected) {
  EXPECT_THAT(error_of(R"({"name": 5, "topology": "1gpu"})"), HasSubstr("name: expected a string, got a number (5)"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": 3})"),
              HasSubstr("topology: expected a preset name, a topology file's name or a topology object"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"parallel": "yes"}})"),
              HasSubstr("policy.parallel: expected true or false"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"tensor_split": [1, "a"]}})"),
              HasSubstr("policy.tensor_split[1]: expected a number"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "model": {"n_layer": -2}})"),
              HasSubstr("model.n_layer: expected a whole number from 0 to 2147483647"));
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
  const std::string text =
      R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"preset": "tiny", "n_layer": 3},
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
  const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
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
    "expect": {"scheduling": "error", "error_contains": "injected fault"}})",
                          "fault.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
  EXPECT_TRUE(out.passed) << out.error;
  EXPECT_THAT(out.error, HasSubstr("MUL_MAT"));
}

// ---- lifecycle steps, scheduler devices, inputs per split ----

TEST(SimScenarioParse, StepsSchedulerDevicesAndSplitInputsAreRead) {
  auto s = parse_scenario(R"({"version": 2, "name": "x", "topology": "2gpu-unequal",
    "policy": {"scheduler_devices": ["gpu1", "cpu"]},
    "run": {"steps": ["reserve", "alloc", "compute", "compute"]}, "expect": {"max_split_inputs": 7}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  using St = Session::Step;
  EXPECT_EQ(step_kinds(s->steps), (std::vector<St>{St::kReserve, St::kAlloc, St::kCompute, St::kCompute}));
  EXPECT_EQ(s->config.policy.scheduler_devices, (std::vector<std::string>{"gpu1", "cpu"}));
  EXPECT_EQ(s->expect.max_split_inputs, 7);
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"steps": ["reserve", "decode"]}})"),
              HasSubstr("run.steps[1]: expected \"reserve\", \"alloc\", \"compute\", \"compute-again\", "
                        "\"synchronize\", \"reset\" or the first four with \"-next\" (\"compute-next-again\"), got "
                        "\"decode\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"steps": []}})"),
              HasSubstr("run.steps: expected 1 to 1000 steps"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "run": {"steps": ["compute"], "evaluations": 2}})"),
              HasSubstr("run.steps: expected either \"steps\" or \"evaluations\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"scheduler_devices": []}})"),
              HasSubstr("policy.scheduler_devices: expected at least one device name"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "policy": {"scheduler_devices": [3]}})"),
              HasSubstr("policy.scheduler_devices[0]: expected a string"));
}

// A graph whose output is NaN on both sides: SCALE of a finite input by NaN. NMSE skips the NaN positions, so this
// "matched" the reference (NMSE 0) until NaN/Inf in an output failed the comparison unless the scenario allows it.
TEST(SimScenarioRun, NanOutputsFailTheReferenceComparisonUnlessAllowed) {
  Context c({.no_alloc = true});
  Tensor* x = c.new_tensor_1d(Type::kF32, 8);
  set_name(*x, "x");
  set_input(*x);
  Tensor* y = scale(c, x, std::numeric_limits<float>::quiet_NaN());
  set_name(*y, "y");
  set_output(*y);
  Graph g;
  ASSERT_TRUE(g.build_forward(y).ok());
  const std::string graph = graph_to_json(g);
  auto run = [&](const std::string& extra) {
    auto s = parse_scenario(R"({"name": "nan", "topology": "1gpu", "graph": )" + graph +
                                R"(, "expect": {"outputs_match_reference": true)" + extra + "}}",
                            "nan.json");
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    return s.ok() ? run_scenario(s.value(), &builtin_registry()) : ScenarioOutcome{};
  };
  const ScenarioOutcome strict = run("");
  EXPECT_FALSE(strict.passed);
  ASSERT_EQ(strict.results.size(), 1u);
  EXPECT_FALSE(strict.results[0].ok);
  EXPECT_THAT(strict.results[0].detail, AllOf(HasSubstr("8 NaN/Inf values"), HasSubstr("allow_non_finite")));
  const ScenarioOutcome allowed = run(R"(, "allow_non_finite": true)");
  EXPECT_TRUE(allowed.passed) << (allowed.results.empty() ? allowed.error : allowed.results[0].detail);
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"allow_non_finite": 1}})"),
              HasSubstr("expect.allow_non_finite"));
}

ScenarioOutcome run_text(const std::string& text) {
  auto s = parse_scenario(text, "run.json");
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? run_scenario(s.value(), &builtin_registry()) : ScenarioOutcome{};
}

std::map<std::string, bool> results_of(const ScenarioOutcome& out) {
  std::map<std::string, bool> ok;
  for (const auto& r : out.results) ok[r.what] = r.ok;
  return ok;
}

TEST(SimScenarioRun, StepsDriveTheLifecycleAndAreCounted) {
  // Two reserves then two evaluations: two plans of the compute buffers (the evaluations re-plan nothing).
  const ScenarioOutcome two =
      run_text(R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 3},
    "run": {"steps": ["reserve", "reserve", "compute", "compute"]},
    "expect": {"max_reserves": 1, "outputs_match_reference": true}})");
  auto ok = results_of(two);
  EXPECT_FALSE(ok.at("at most 1 compute-buffer plans"));
  EXPECT_TRUE(ok.at("outputs match the CPU reference (NMSE <= 0.0001)"));
  const ScenarioOutcome one =
      run_text(R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 3},
    "run": {"steps": ["reserve", "compute", "alloc", "compute"]}, "expect": {"max_reserves": 1}})");
  EXPECT_TRUE(one.passed) << one.error;
  // A failing step is named with its position.
  const ScenarioOutcome bad = run_text(R"({"name": "x", "topology": "1gpu", "model": {"n_layer": 2},
    "run": {"steps": ["alloc", "compute"], "faults": {"fail_compute_ops": ["MUL_MAT"], "fail_compute_device": "gpu0"}},
    "expect": {"scheduling": "error"}})");
  EXPECT_TRUE(bad.passed);
  EXPECT_THAT(bad.error, HasSubstr("step 2 (compute)"));
}

TEST(SimScenarioRun, SchedulerDevicesLeaveDevicesOutAndUnknownNamesAreErrors) {
  // Every layer on gpu1, gpu0 not given to the scheduler: it plans and computes on gpu1 and the CPU.
  const ScenarioOutcome sub =
      run_text(R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 2},
    "policy": {"layers_per_device": [0, 2], "scheduler_devices": ["gpu1", "cpu"]},
    "expect": {"scheduling": "ok", "outputs_match_reference": true, "nodes": [{"node": "ffn_out-1", "device": "gpu1"}]}})");
  EXPECT_TRUE(sub.passed) << sub.error << sub.report;
  const ScenarioOutcome unknown =
      run_text(R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 2},
    "policy": {"scheduler_devices": ["gpu7", "cpu"]}, "expect": {"scheduling": "error"}})");
  EXPECT_THAT(unknown.error, HasSubstr("scheduler_devices: no device named \"gpu7\""));
  const ScenarioOutcome no_cpu =
      run_text(R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 2},
    "policy": {"scheduler_devices": ["gpu0", "gpu1"]}, "expect": {"scheduling": "error"}})");
  EXPECT_THAT(no_cpu.error, HasSubstr("must be a CPU device"));
}

TEST(SimScenarioRun, MaxSplitInputsIsCheckedAgainstEverySplit) {
  // gpu-no-fa's GPU splits copy several inputs each (the attention runs on the CPU).
  const ScenarioOutcome out = run_text(R"({"name": "x", "topology": "gpu-no-fa", "model": {"n_layer": 2},
    "expect": {"max_split_inputs": 1}})");
  auto ok = results_of(out);
  EXPECT_FALSE(ok.at("at most 1 inputs per split"));
  const ScenarioOutcome loose = run_text(R"({"name": "x", "topology": "gpu-no-fa", "model": {"n_layer": 2},
    "expect": {"max_split_inputs": 30}})");
  EXPECT_TRUE(loose.passed) << loose.report;
}

}  // namespace

// ---- Serialized graphs in scenarios and sessions (graph mode) ----

namespace {

// The tiny model's graph (GET_ROWS ids, SET_ROWS into caches, ROPE positions, GQA attention) as a serialized graph,
// for its preset batch or for n_tokens.
std::string tiny_graph_json(bool flash_attn, int64_t n_tokens = 0) {
  models::LlamaConfig c = models::preset("tiny").value();
  c.flash_attn = flash_attn;
  if (n_tokens > 0) c.n_tokens = n_tokens;  // the cache, weights and names are the same for every batch
  auto m = models::build_llama(c);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return graph_to_json(*m.value().graph);
}

std::string write_temp(const std::string& name, const std::string& text) {
  const std::string path = tessera::test::temp_dir() + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  EXPECT_NE(f, nullptr) << path;
  if (f != nullptr) {
    std::fwrite(text.data(), 1, text.size(), f);
    std::fclose(f);
  }
  return path;
}

SessionConfig graph_config(const std::string& json, const char* topology) {
  SessionConfig c;
  c.topology = topology_preset(topology).value();
  c.graph = GraphSource{json, "tiny.json"};
  return c;
}

}  // namespace

TEST(SimScenarioGraph, AnInlineGraphIsRead) {
  const std::string text =
      R"({"name": "g", "topology": "1gpu", "expect": "nothing", "graph": )" + tiny_graph_json(true) + "}";
  auto s = parse_scenario(text, "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s.value().config.graph.has_value());
  EXPECT_EQ(s.value().config.graph->source, "case.json (graph)");
  EXPECT_TRUE(graph_from_json(s.value().config.graph->text, "x").ok());
}

TEST(SimScenarioGraph, AGraphFileIsFoundNextToTheScenario) {
  write_temp("tessera-graph-next.json", tiny_graph_json(false));
  const std::string scenario =
      write_temp("tessera-scenario-next.json",
                 R"({"version": 2, "name": "g", "topology": "2gpu-unequal", "graph": "tessera-graph-next.json",
          "policy": {"pins": [{"tensor": "kq_soft_max-0", "device": "cpu"}]},
          "expect": {"outputs_match_reference": true, "no_race": true,
                     "nodes": [{"node": "kq_soft_max-0", "device": "cpu"}]}})");
  auto s = load_scenario_file(scenario);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s.value().config.graph->source, tessera::test::temp_dir() + "tessera-graph-next.json");
  ASSERT_EQ(s.value().config.policy.pins.size(), 1u);
  EXPECT_EQ(s.value().config.policy.pins[0].device, "cpu");
  const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
  EXPECT_TRUE(out.passed) << out.error << "\n" << out.report;
  EXPECT_EQ(out.results.size(), 3u);
}

TEST(SimScenarioGraph, GraphErrorsNameTheScenarioAndTheGraphLocation) {
  EXPECT_THAT(error_of(R"({"name": "g", "topology": "1gpu", "model": {"preset": "tiny"}, "graph": "x.json"})"),
              AllOf(HasSubstr("case.json"), HasSubstr("either \"model\" or \"graph\"")));
  EXPECT_THAT(error_of(R"({"name": "g", "topology": "1gpu", "graph": "no-such-graph.json"})"),
              AllOf(HasSubstr("case.json"), HasSubstr("no-such-graph.json"), HasSubstr("cannot open")));
  EXPECT_THAT(error_of(R"({"name": "g", "topology": "1gpu", "graph": 3})"),
              AllOf(HasSubstr("graph"), HasSubstr("file name or the graph object")));
  std::string bad = tiny_graph_json(true);
  const size_t at = bad.find("\"q4_0\"");
  ASSERT_NE(at, std::string::npos);
  bad.replace(at, 6, "\"q5_9\"");
  EXPECT_THAT(error_of(R"({"name": "g", "topology": "1gpu", "graph": )" + bad + "}"),
              AllOf(HasSubstr("case.json (graph)"), HasSubstr("tensors["), HasSubstr("q5_9")));
  EXPECT_THAT(error_of(R"({"name": "g", "topology": "1gpu", "policy": {"pins": [{"tensor": "x"}]}})"),
              AllOf(HasSubstr("policy.pins[0]"), HasSubstr("device")));
}

// A larger batch, then a smaller one over the same cache: the first graph's SET_ROWS writes cache slots the second
// reads. The CPU reference must follow the same cache history as the run; it used to compute the second graph alone
// from the seeded cache, a false NMSE failure with no hint of the cause. Both orders, and each graph twice.
TEST(SimSessionGraph, TheReferenceFollowsTheRunsCacheHistoryAcrossGraphs) {
  const std::string large = tiny_graph_json(true, 4), small = tiny_graph_json(true, 1);
  for (const char* steps : {R"(["compute", "compute-next"])", R"(["compute-next", "compute"])",
                            R"(["compute", "compute", "compute-next", "compute-next"])"}) {
    SCOPED_TRACE(steps);
    auto s = parse_scenario(R"({"name": "cache", "topology": "1gpu", "graph": )" + large + R"(, "next_graph": )" +
                                small + R"(, "run": {"steps": )" + steps +
                                R"(}, "expect": {"outputs_match_reference": true, "no_race": true}})",
                            "cache.json");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
    EXPECT_TRUE(out.passed) << out.error;
    for (const auto& r : out.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  }
}

TEST(SimSessionGraph, AModelsGraphPlacesAndComputesLikeTheModel) {
  for (bool fa : {true, false}) {
    SCOPED_TRACE(fa ? "flash attention" : "softmax attention");
    SessionConfig model_cfg;
    model_cfg.topology = topology_preset("2gpu-unequal").value();
    model_cfg.model = models::preset("tiny").value();
    model_cfg.model.flash_attn = fa;
    auto model_session = Session::create(model_cfg, &builtin_registry());
    ASSERT_TRUE(model_session.ok()) << model_session.status().to_string();
    ASSERT_TRUE(model_session.value()->plan().ok());

    auto s = Session::create(graph_config(tiny_graph_json(fa), "2gpu-unequal"), &builtin_registry());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    Session& g = *s.value();
    // Same names, so the same layers on the same devices, the same weight bytes and the same splits.
    const auto gm = g.memory();
    const auto mm = model_session.value()->memory();
    ASSERT_EQ(gm.size(), mm.size());
    for (size_t d = 0; d < gm.size(); ++d) {
      EXPECT_EQ(gm[d].layers, mm[d].layers) << gm[d].device;
      EXPECT_EQ(gm[d].weights, mm[d].weights) << gm[d].device;
      EXPECT_EQ(gm[d].cache, mm[d].cache) << gm[d].device;
    }
    auto r = g.run(2, true);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(g.sched().n_splits(), model_session.value()->sched().n_splits());
    EXPECT_TRUE(r.value().checked);
    EXPECT_FALSE(r.value().nan_mismatch);
    EXPECT_LE(r.value().nmse, 1e-6);
    EXPECT_EQ(r.value().races, 0u);
    ASSERT_EQ(g.outputs().size(), 1u);
    EXPECT_STREQ(g.outputs()[0]->name, "result_output");
  }
}

TEST(SimSessionGraph, TheOutputsAreCheckedNotJustComputed) {
  // A wrong weight value on the simulated side must show: change one weight after creation and compare.
  auto s = Session::create(graph_config(tiny_graph_json(true), "1gpu"), &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Tensor* w = const_cast<Tensor*>(s.value()->find_tensor("output.weight"));
  ASSERT_NE(w, nullptr);
  std::vector<float> v(static_cast<size_t>(nelements(*w)), 0.5f);
  ASSERT_TRUE(tensor_from_f32(*w, v).ok());
  auto r = s.value()->run(1, true);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_TRUE(r.value().checked);
  EXPECT_GT(r.value().nmse, 1e-3);
}

TEST(SimSessionGraph, PinsAreAppliedAndBadPinsAreErrors) {
  SessionConfig c = graph_config(tiny_graph_json(true), "1gpu");
  c.policy.pins = {{"attn_norm-1", "cpu"}};
  auto s = Session::create(c, &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s.value()->plan().ok());
  EXPECT_EQ(s.value()->sched().explain(s.value()->find_tensor("attn_norm-1")).cause, Cause::kPinned);
  EXPECT_THAT(s.value()->explain("attn_norm-1"), HasSubstr("on cpu, cause user (user pin"));
  c.policy.pins = {{"no-such-tensor", "cpu"}};
  auto bad = Session::create(c, &builtin_registry());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("no-such-tensor"), HasSubstr("no tensor of that name")));
  c.policy.pins = {{"attn_norm-1", "gpu7"}};
  bad = Session::create(c, &builtin_registry());
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), AllOf(HasSubstr("gpu7"), HasSubstr("no device named")));
}

TEST(SimSessionGraph, LeafDataFollowsItsUse) {
  auto m = models::build_llama(models::preset("tiny-moe").value());
  ASSERT_TRUE(m.ok());
  const models::LlamaGraph& g = m.value();
  std::vector<Tensor*> leafs = {g.tokens, g.pos, g.kv_idxs, g.mask, g.tok_embd};
  const std::vector<LeafData> d = infer_leaf_data(*g.graph, leafs);
  ASSERT_EQ(d.size(), 5u);
  EXPECT_EQ(d[0].kind, LeafFill::kIds);
  EXPECT_EQ(d[0].bound, g.config.n_vocab);
  EXPECT_EQ(d[1].kind, LeafFill::kPositions);
  EXPECT_EQ(d[2].kind, LeafFill::kDistinctIds);
  EXPECT_EQ(d[2].bound, g.config.n_ctx);
  EXPECT_EQ(d[3].kind, LeafFill::kFloat);
  EXPECT_EQ(d[4].kind, LeafFill::kFloat);
}

// Found by the scheduler properties (tests/property/test_sched_properties.cpp): a weight read through a copy by an
// early split on another backend, then written in place (SET_ROWS on its own backend), then read again on that other
// backend. The second reader must get a fresh copy, not the copy made before the write.
TEST(SimSessionGraph, ACopyIsNotReusedAfterItsSourceWasWrittenInPlace) {
  Context ctx(ContextParams{.no_alloc = true});
  Tensor* w = ctx.new_tensor_2d(Type::kF32, 32, 4);
  set_name(*w, "w");
  Tensor* rows = ctx.new_tensor_2d(Type::kF32, 32, 1);
  set_name(*rows, "rows");
  set_input(*rows);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 1);
  set_name(*ids, "ids");
  set_input(*ids);
  Tensor* before = scale(ctx, w, 2.0f);
  set_name(*before, "before");
  set_output(*before);
  Tensor* write = set_rows(ctx, w, rows, ids);
  set_name(*write, "write");
  Tensor* after = scale(ctx, w, 3.0f);
  set_name(*after, "after");
  set_output(*after);
  Graph g;
  ASSERT_TRUE(g.build_forward(before).ok());
  ASSERT_TRUE(g.build_forward(write).ok());
  ASSERT_TRUE(g.build_forward(after).ok());
  ASSERT_EQ(g.n_nodes(), 3u);
  ASSERT_EQ(g.node(2), after);

  SessionConfig c;
  auto topo = parse_topology(R"({"name": "t", "devices": [
      {"name": "gpu0", "type": "gpu", "memory": "1 MiB", "ops": {"rules": [{"deny": ["SCALE"]}]}},
      {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true, "memory": "64 MiB",
       "caps": {"async": false, "events": false}}]})",
                             "t.json");
  ASSERT_TRUE(topo.ok()) << topo.status().to_string();
  c.topology = topo.value();
  c.graph = GraphSource{graph_to_json(g), "stale-copy"};
  c.policy.overrides = {{"^w$", "gpu0"}};
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "serial");
    c.policy.parallel = parallel;
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto r = s.value()->run(1, true);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const auto splits = s.value()->sched().splits();
    ASSERT_EQ(splits.size(), 3u) << s.value()->splits_table();
    ASSERT_EQ(splits[2].inputs.size(), 1u) << s.value()->splits_table();
    EXPECT_STREQ(splits[2].inputs[0]->name, "w");
    EXPECT_TRUE(r.value().checked);
    EXPECT_LE(r.value().nmse, 1e-6) << s.value()->splits_table();
    EXPECT_FALSE(r.value().nan_mismatch);
    EXPECT_EQ(r.value().races, 0u);
  }
}

TEST(SimScenarioRun, SeveralSeedsMustAllPassAndAFailureNamesItsSeed) {
  auto s = parse_scenario(R"({"name": "s", "topology": "1gpu", "model": {"preset": "tiny", "n_layer": 1},
                              "run": {"seed": 40, "seeds": 3, "adversarial": true},
                              "expect": {"no_race": true, "outputs_match_reference": true}})",
                          "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s.value().seeds, 3);
  ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
  EXPECT_TRUE(out.passed) << out.report;
  ASSERT_FALSE(out.results.empty());
  EXPECT_EQ(out.results.back().what, "every one of 3 seeds passes");
  EXPECT_EQ(out.results.back().detail, "seeds 40..42");
  // A failing run stops the sweep, and the failure says which seed.
  Scenario broken = s.value();
  broken.config.sim.faults.fail_compute_ops = {Op::kMulMat};
  out = run_scenario(broken, &builtin_registry());
  EXPECT_FALSE(out.passed);
  EXPECT_EQ(out.results.back().detail, "seed 40 fails (0 passed before it)");
  EXPECT_THAT(error_of(R"({"name": "s", "topology": "1gpu", "run": {"seeds": 0}})"),
              AllOf(HasSubstr("run.seeds"), HasSubstr("1 to 1000")));
}

// ---- A next graph over the same weights (the chunk-growth scenario) ----

namespace {

// y = w · x (+ the "extra" weight when given): a first graph and variants of it as next graphs.
std::string small_graph(const char* w_name, int rows, bool extra) {
  std::string t = R"({"format": "tessera-graph", "version": 1, "tensors": [
    {"id": 0, "name": "x", "type": "f32", "ne": [4, 1], "op": "NONE", "flags": ["input"]},
    {"id": 1, "name": ")" +
                  std::string(w_name) + R"(", "type": "f32", "ne": [4, )" + std::to_string(rows) + R"(], "op": "NONE"},
    {"id": 2, "name": "y", "type": "f32", "ne": [)" +
                  std::to_string(rows) + R"(, 1], "op": "MUL_MAT", "src": [1, 0])";
  if (extra) {
    t += R"(},
    {"id": 3, "name": "blk.0.b", "type": "f32", "ne": [)" +
         std::to_string(rows) + R"(, 1], "op": "NONE"},
    {"id": 4, "name": "z", "type": "f32", "ne": [)" +
         std::to_string(rows) + R"(, 1], "op": "ADD", "src": [2, 3])";
  }
  return t + ", \"flags\": [\"output\"]}]}";
}

}  // namespace

TEST(SimScenarioParse, ANextGraphAndItsStepsAreRead) {
  const std::string g = small_graph("blk.0.w", 8, true);
  auto s =
      parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing", "graph": )" + g + R"(, "next_graph": )" +
                         g + R"(, "run": {"steps": ["reserve-next", "alloc-next", "compute-next", "compute"]}})",
                     "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  using St = Session::Step;
  EXPECT_EQ(step_kinds(s->steps), (std::vector<St>{St::kReserveNext, St::kAllocNext, St::kComputeNext, St::kCompute}));
  ASSERT_TRUE(s->config.next_graph.has_value());
  EXPECT_EQ(s->config.next_graph->source, "s.json (next_graph)");
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "next_graph": )" + g + "}"),
              HasSubstr("next_graph: a next graph needs a first one in \"graph\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "graph": )" + g +
                       R"(, "run": {"steps": ["compute", "compute-next"]}})"),
              HasSubstr("run.steps: a \"-next\" step needs a \"next_graph\""));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "graph": )" + g + R"(, "next_graph": 7})"),
              HasSubstr("next_graph: expected a serialized graph's file name or the graph object"));
}

TEST(SimSessionNextGraph, TheNextGraphComputesWithTheFirstGraphsWeights) {
  SessionConfig c = graph_config(small_graph("blk.0.w", 8, true), "1gpu");    // y = w·x, z = y + b
  c.next_graph = GraphSource{small_graph("blk.0.w", 8, false), "next.json"};  // y = w·x only
  c.policy.n_gpu_layers = 1;
  {
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    using St = Session::Step;
    auto r = s.value()->run_steps({St::kCompute, St::kComputeNext});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r.value().checked);
    EXPECT_LE(r.value().nmse, 1e-6);
    // The outputs compared are the next graph's (y), and the reports show the next graph (it has no z).
    ASSERT_EQ(s.value()->outputs().size(), 1u);
    EXPECT_STREQ(s.value()->outputs()[0]->name, "y");
    EXPECT_EQ(s.value()->find_tensor("z"), nullptr);
    EXPECT_THAT(s.value()->splits_table(), HasSubstr("last y"));
  }
  {
    // The next graph reads the first graph's weight: changing that weight changes the next graph's outputs, and the
    // comparison (with the weight's seeded values) sees it.
    auto s = Session::create(c, &builtin_registry());
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    Tensor* w = const_cast<Tensor*>(s.value()->find_tensor("blk.0.w"));
    ASSERT_NE(w, nullptr);
    ASSERT_TRUE(tensor_from_f32(*w, std::vector<float>(static_cast<size_t>(nelements(*w)), 0.5f)).ok());
    auto r = s.value()->run_steps({Session::Step::kComputeNext});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_GT(r.value().nmse, 1e-3);
  }
}

TEST(SimSessionNextGraph, MismatchedWeightsAndMissingGraphsAreErrors) {
  SessionConfig c = graph_config(small_graph("blk.0.w", 8, false), "1gpu");
  c.next_graph = GraphSource{small_graph("blk.0.other", 8, false), "next.json"};
  auto s = Session::create(c, &builtin_registry());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("next.json: weight \"blk.0.other\" is not a weight of the first graph"));
  c.next_graph = GraphSource{small_graph("blk.0.w", 16, false), "next.json"};
  s = Session::create(c, &builtin_registry());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), AllOf(HasSubstr("next.json: weight \"blk.0.w\" is"), HasSubstr("16")));
  SessionConfig model;
  model.topology = topology_preset("1gpu").value();
  model.model = models::preset("tiny").value();
  model.next_graph = GraphSource{small_graph("blk.0.w", 8, false), "next.json"};
  s = Session::create(model, &builtin_registry());
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("a next graph needs a serialized first graph"));
  // Without a next graph, a -next step is an error naming the step.
  s = Session::create(graph_config(small_graph("blk.0.w", 8, false), "1gpu"), &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto r = s.value()->run_steps({Session::Step::kCompute, Session::Step::kComputeNext});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("step 2 (compute-next): the scenario has no next graph"));
}
