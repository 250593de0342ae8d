// Scenario files check something, and find their topology files (issue 34): a scenario without expectations is an
// error unless it says "expect": "nothing"; "topology" may name a file relative to the scenario file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tessera/scenario/scenario.h"
#include "unit/scenario/scenario_error_of.h"
#include "tessera/builtin.h"
#include "support/temp_dir.h"

using namespace tessera;
using namespace tessera::harness;
using namespace tessera::scenario;
using ::testing::HasSubstr;

namespace {

using tessera::scenario::test::error_of;

// A scenario checks something or says so: one without expectations (or with only the qualifiers of
// outputs_match_reference) once passed without checking anything.
TEST(SimScenarioParse, AScenarioWithoutExpectationsIsAnError) {
  for (const char* expect : {"", R"(, "expect": {})", R"(, "expect": {"max_nmse": 0.1, "no_race": false})"}) {
    SCOPED_TRACE(expect);
    EXPECT_THAT(error_of(std::string(R"({"name": "x", "topology": "1gpu")") + expect + "}"),
                HasSubstr("case.json: expect: the scenario checks nothing: give expectations"));
  }
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": "everything"})"),
              HasSubstr("expect: expected an expectations object"));
  auto s = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing"})", "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
  EXPECT_TRUE(out.passed) << out.error;
  EXPECT_TRUE(out.results.empty());
}

// "topology" names a preset or a file; a relative file name is relative to the scenario file's directory.
TEST(SimScenarioParse, ATopologyFileIsFoundNextToTheScenario) {
  const std::string dir = tessera::test::temp_dir() + "tessera-topology-near/";
  std::filesystem::create_directories(dir + "rigs");
  {
    std::ofstream(dir + "rigs/small.json") << R"({"name": "small", "devices": [
      {"name": "gpu9", "type": "gpu", "memory": "2 GiB"},
      {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true, "memory": "8 GiB"}]})";
  }
  auto s = parse_scenario(R"({"name": "x", "topology": "rigs/small.json", "expect": "nothing"})", dir + "s.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s.value().config.topology.name, "small");
  EXPECT_EQ(s.value().config.topology.devices[0].name, "gpu9");
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "rigs/none.json", "expect": "nothing"})"),
              HasSubstr("topology: rigs/none.json: cannot open the topology file"));
}

// "kv_cache" (issue 31: llama.cpp's KV buffer sizes per device) checks the KV cache bytes of each device exactly, and
// counts as an expectation; a wrong value fails naming the device and both sizes.
TEST(SimScenarioParse, KvCacheBytesPerDeviceAreChecked) {
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"kv_cache": 5}})"),
              HasSubstr("expect.kv_cache: expected an object"));
  EXPECT_THAT(error_of(R"({"name": "x", "topology": "1gpu", "expect": {"kv_cache": {"gpu0": "lots"}}})"),
              HasSubstr("expect.kv_cache.gpu0"));
  // The tiny preset on one GPU: 2 layers of K and V, 2 KV heads x 16 values x 64 slots x 2 B (f16) = 4096 B each,
  // all on gpu0: 16384 B.
  for (const auto& [bytes, passes] : {std::pair{"16384 B", true}, {"16385 B", false}}) {
    auto s = parse_scenario(std::string(R"({"name": "x", "topology": "1gpu", "model": {"preset": "tiny"},
      "run": {"mode": "metadata-only"}, "expect": {"kv_cache": {"gpu0": ")") +
                                bytes + R"("}}})",
                            "case.json");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    const ScenarioOutcome out = run_scenario(s.value(), &builtin_registry());
    EXPECT_EQ(out.passed, passes) << bytes << ": " << out.error;
    ASSERT_EQ(out.results.size(), 1u);
    EXPECT_THAT(out.results[0].what, HasSubstr("kv cache on gpu0"));
  }
}

}  // namespace

// split_mode tensor runs the meta device (docs/tensor-parallel.md); an expectation it cannot answer yet fails and says
// which, rather than passing unchecked.
TEST(SimScenarioParse, TensorSplitAnswersWhatItCanAndNamesTheRest) {
  const std::string head = R"({"name": "x", "topology": "2gpu-unequal", "model": {"flash_attn": true},
                              "policy": {"split_mode": "tensor"}, "expect": )";
  auto ok = parse_scenario(head + R"({"no_race": true, "outputs_match_reference": true, "max_splits": 2}})", "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  const ScenarioOutcome good = run_scenario(ok.value(), &builtin_registry());
  EXPECT_TRUE(good.passed) << good.error;
  EXPECT_EQ(good.results.size(), 3u);
  auto nodes = parse_scenario(head + R"({"no_race": true, "max_split_inputs": 9, "max_reserves": 1}})", "t.json");
  ASSERT_TRUE(nodes.ok()) << nodes.status().to_string();
  const ScenarioOutcome bad = run_scenario(nodes.value(), &builtin_registry());
  EXPECT_FALSE(bad.passed);
  ASSERT_EQ(bad.results.size(), 1u);
  EXPECT_THAT(bad.results[0].detail, HasSubstr("not with split_mode tensor yet: max_split_inputs, max_reserves"));
  auto nothing = parse_scenario(head + R"("nothing"})", "t.json");
  ASSERT_TRUE(nothing.ok()) << nothing.status().to_string();
  EXPECT_TRUE(run_scenario(nothing.value(), &builtin_registry()).passed);
}

// expect.metrics with split_mode tensor: the meta device's simulator answers them. tiny (n_embd 64, 8 tokens) on two
// GPUs makes 4 AllReduces an evaluation of [64 x 8] f32 partial sums, 2048 B each; a ring over 2 devices cuts each into
// 2 chunks of 1024 B and passes one chunk each way in its reduce-scatter step and one in its all-gather step
// (docs/tensor-parallel.md, "Compute"): 4 x 2 = 8 copies of 1024 B from gpu0 to gpu1, as many back. gpu1's peak holds
// at least its half of the cache: 2 layers x K and V x 64 cells x 16 of the 32 KV values x 2 B = 8192 B. A metric only
// a session's scheduler records fails, saying so.
// Where nodes run under split_mode tensor: the input layer's GET_ROWS on the CPU (llama.cpp keeps token_embd there),
// a layer's attention output on the meta device ("meta" or its backend's name); with n_gpu_layers 2 of tiny's 2 layers
// (the output layer and layer 1) layer 0's on the CPU, by its weight
TEST(SimScenarioParse, TensorSplitNodesNameTheMetaDeviceOrTheCpu) {
  auto run = [](const std::string& policy, const std::string& nodes) {
    auto sc = parse_scenario(R"({"name": "x", "topology": "2gpu-unequal", "model": {"flash_attn": true},
                              "run": {"mode": "metadata-only"}, "policy": {"split_mode": "tensor")" +
                                 policy + R"(}, "expect": {"nodes": [)" + nodes + "]}}",
                             "t.json");
    EXPECT_TRUE(sc.ok()) << sc.status().to_string();
    return sc.ok() ? run_scenario(sc.value(), &builtin_registry()) : ScenarioOutcome{};
  };
  const ScenarioOutcome all = run("", R"j({"node": "attn_out-0", "device": "meta"},
      {"node": "attn_out-1", "device": "Meta(gpu0,gpu1)"}, {"node": "inp_embd", "device": "cpu"})j");
  for (const auto& r : all.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  EXPECT_TRUE(all.passed) << all.error;
  EXPECT_EQ(all.results.size(), 3u);
  const ScenarioOutcome ngl = run(R"(, "n_gpu_layers": 2)", R"({"node": "attn_out-0", "device": "cpu"},
      {"node": "attn_out-1", "device": "meta"})");
  for (const auto& r : ngl.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  EXPECT_TRUE(ngl.passed) << ngl.error;
  const ScenarioOutcome wrong =
      run("", R"({"node": "attn_out-0", "device": "cpu"}, {"node": "nope", "device": "cpu"})");
  EXPECT_FALSE(wrong.passed);
  ASSERT_EQ(wrong.results.size(), 2u);
  EXPECT_THAT(wrong.results[0].detail, HasSubstr("on Meta(gpu0,gpu1), cause"));
  EXPECT_EQ(wrong.results[1].detail, "no node of that name");
}

// run.steps with split_mode tensor: the meta device's run goes through them (reserve, alloc, compute, synchronize,
// compute-again), the logits still equal to the CPU's; a step that must fail lets the run go on, one that fails
// unexpectedly is the scenario's error, named by its number and step
TEST(SimScenarioParse, TensorSplitRunsTheSteps) {
  auto run = [](const std::string& steps) {
    auto sc = parse_scenario(R"({"name": "x", "topology": "2gpu-unequal", "model": {"flash_attn": true},
                              "run": {"steps": )" +
                                 steps + R"(}, "policy": {"split_mode": "tensor"},
                              "expect": {"no_race": true, "outputs_match_reference": true}})",
                             "t.json");
    EXPECT_TRUE(sc.ok()) << sc.status().to_string();
    return sc.ok() ? run_scenario(sc.value(), &builtin_registry()) : ScenarioOutcome{};
  };
  const ScenarioOutcome good = run(R"(["reserve", "alloc", "compute", "synchronize", "compute-again", "synchronize"])");
  for (const auto& r : good.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  EXPECT_TRUE(good.passed) << good.error;
  const ScenarioOutcome retry =
      run(R"([{"step": "compute-again", "fails": "a compute must come before it"}, "compute", "synchronize"])");
  for (const auto& r : retry.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  EXPECT_TRUE(retry.passed) << retry.error;
  const ScenarioOutcome bad = run(R"(["reset", "compute-again"])");
  EXPECT_FALSE(bad.passed);
  EXPECT_THAT(bad.error, HasSubstr("step 2 (compute-again): compute-again evaluates the graph computed last"));
  const ScenarioOutcome none = run(R"(["reserve", "synchronize"])");  // nothing computed: nothing to compare
  EXPECT_FALSE(none.passed);
  ASSERT_EQ(none.results.size(), 2u);
  EXPECT_EQ(none.results[1].detail, "not checked (no step computed the graph)");
}

TEST(SimScenarioParse, TensorSplitMetricsCountTheRingsCopies) {
  const std::string head = R"({"name": "x", "topology": "2gpu-unequal", "model": {"flash_attn": true},
                              "run": {"mode": "metadata-only"}, "policy": {"split_mode": "tensor"}, "expect": )";
  auto ok = parse_scenario(head + R"({"metrics": [
      {"metric": "copies", "from": "gpu0", "to": "gpu1", "equals": 8},
      {"metric": "copy_bytes", "from": "gpu1", "to": "gpu0", "equals": "8192 B"},
      {"metric": "splits", "equals": 2},
      {"metric": "makespan", "at_least": "1 us"},
      {"metric": "peak_memory", "device": "gpu1", "at_least": "8192 B"}]}})",
                           "t.json");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  const ScenarioOutcome good = run_scenario(ok.value(), &builtin_registry());
  for (const auto& r : good.results) EXPECT_TRUE(r.ok) << r.what << ": " << r.detail;
  EXPECT_TRUE(good.passed) << good.error;
  EXPECT_EQ(good.results.size(), 5u);
  auto reserves = parse_scenario(head + R"({"metrics": [{"metric": "reserves", "at_most": 1}]}})", "t.json");
  ASSERT_TRUE(reserves.ok()) << reserves.status().to_string();
  const ScenarioOutcome bad = run_scenario(reserves.value(), &builtin_registry());
  EXPECT_FALSE(bad.passed);
  ASSERT_EQ(bad.results.size(), 1u);
  EXPECT_THAT(bad.results[0].detail, HasSubstr("\"reserves\" is not measured with split_mode tensor yet"));
}
