// Scenario expectations on time and traffic ("expect.metrics") and comparisons of two runs ("compare"), issue 36:
// located parse errors, and each metric checked against values worked out by hand (failing when they are off).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/builtin.h"
#include "tessera/scenario/scenario.h"
#include "unit/scenario/scenario_error_of.h"

using namespace tessera;
using namespace tessera::harness;
using namespace tessera::scenario;
using ::testing::HasSubstr;

namespace {

using tessera::scenario::test::error_of;

std::string with_metrics(const std::string& list) {
  return R"({"name": "x", "topology": "1gpu", "expect": {"metrics": )" + list + "}}";
}

std::string with_compare(const std::string& compare) {
  return R"({"name": "x", "topology": "1gpu", "compare": )" + compare + "}";
}

TEST(ScenarioMetricsParse, ErrorsNameTheFileTheKeyAndWhatWasExpected) {
  struct Case {
    std::string text, message;
  };
  const Case cases[] = {
      {with_metrics("[]"), "case.json: expect.metrics: expected a non-empty list of metric expectations"},
      {with_metrics("{}"), "case.json: expect.metrics: expected a non-empty list of metric expectations"},
      {with_metrics(R"([{"metric": "makespam", "at_most": 1}])"),
       "case.json: expect.metrics[0].metric: unknown metric \"makespam\"; the metrics are makespan, host_blocked"},
      {with_metrics(R"([{"at_most": 1}])"), "case.json: expect.metrics[0]: missing required key \"metric\""},
      {with_metrics(R"([{"metric": "splits"}])"),
       "case.json: expect.metrics[0]: expected a bound: \"at_most\", \"at_least\" or \"equals\""},
      {with_metrics(R"([{"metric": "splits", "at_most": 1}, {"metric": "makespan", "device": "gpu0", "at_most": 1}])"),
       "case.json: expect.metrics[1].device: the metric \"makespan\" takes no \"device\""},
      {with_metrics(R"([{"metric": "copies", "split": 1, "at_most": 1}])"),
       "case.json: expect.metrics[0].split: the metric \"copies\" takes no \"split\""},
      {with_metrics(R"([{"metric": "compute_bytes", "at_most": 1}])"),
       "case.json: expect.metrics[0]: missing required key \"device\""},
      {with_metrics(R"([{"metric": "compute_bytes", "device": 0, "at_most": 1}])"),
       "case.json: expect.metrics[0].device: expected a string, got a number (0)"},
      {with_metrics(R"([{"metric": "makespan", "at_most": "5 parsecs"}])"), "case.json: expect.metrics[0].at_most: "},
      {with_metrics(R"([{"metric": "copy_bytes", "at_least": -1}])"),
       "case.json: expect.metrics[0].at_least: expected a size"},
      {with_metrics(R"([{"metric": "splits", "equals": 1.5}])"),
       "case.json: expect.metrics[0].equals: expected a whole number >= 0, got a number (1.5)"},
      {with_metrics(R"([{"metric": "splits", "at_most": "base"}])"),
       "case.json: expect.metrics[0].at_most: \"base\" compares with the base run: only in \"compare\".\"expect\""},
      {with_metrics(R"([{"metric": "splits", "at_most_ratio": 2}])"),
       "case.json: expect.metrics[0].at_most_ratio: \"at_most_ratio\" compares with the base run: only in"},
      {with_metrics(R"([{"metric": "splits", "at_mots": 2}])"),
       "case.json: expect.metrics[0]: unknown key \"at_mots\""},
      {with_compare(R"({"expect": [{"metric": "splits", "at_most": "base"}]})"),
       "case.json: compare: missing required key \"with\""},
      {with_compare(R"({"with": {}, "expect": [{"metric": "splits", "at_most": "base"}]})"),
       "case.json: compare.with: expected a non-empty object of policy keys"},
      {with_compare(R"({"with": {"parralel": true}, "expect": [{"metric": "splits", "at_most": "base"}]})"),
       "case.json: compare.with: unknown key \"parralel\""},
      {with_compare(R"({"with": {"parallel": 1}, "expect": [{"metric": "splits", "at_most": "base"}]})"),
       "case.json: compare.with.parallel: "},
      {with_compare(R"({"with": {"parallel": true}})"), "case.json: compare: missing required key \"expect\""},
      {with_compare(R"({"with": {"parallel": true}, "expect": []})"),
       "case.json: compare.expect: expected a non-empty list of metric expectations"},
      {with_compare(R"({"with": {"parallel": true}, "expect": [{"metric": "splits", "at_most_ratio": -2}]})"),
       "case.json: compare.expect[0].at_most_ratio: expected a number >= 0, got a number (-2)"},
      {with_compare(R"({"with": {"parallel": true}, "expect": [{"metric": "splits", "at_least": "bass"}]})"),
       "case.json: compare.expect[0].at_least: expected a whole number >= 0, got a string (\"bass\")"},
      {with_compare(R"({"with": {"parallel": true}, "expect": [{"metric": "splits"}]})"),
       "case.json: compare.expect[0]: expected a bound: \"at_most\", \"at_least\" or \"equals\" (a value or \"base\")"},
      {with_compare(R"({"with": {"parallel": true}, "expect": [{"metric": "splits", "at_most": 1}], "x": 1})"),
       "case.json: compare: unknown key \"x\""},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text);
    EXPECT_THAT(error_of(c.text), HasSubstr(c.message));
  }
}

// A comparison alone is a check: the scenario needs no "expect"; "base" and the ratios are read there.
TEST(ScenarioMetricsParse, AComparisonIsACheckAndReadsBaseAndRatios) {
  auto s = parse_scenario(with_compare(R"({"with": {"parallel": true, "op_offload": false}, "expect": [
      {"metric": "compute_bytes", "device": "gpu0", "at_most_ratio": 4, "at_least": "base"},
      {"metric": "makespan", "at_most": "2 ms"}]})"),
                          "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  ASSERT_TRUE(s->compare.has_value());
  EXPECT_TRUE(s->compare->policy.parallel);
  EXPECT_FALSE(s->compare->policy.op_offload);
  EXPECT_FALSE(s->config.policy.parallel);  // the base keeps its own policy
  ASSERT_EQ(s->compare->expect.size(), 2u);
  const MetricExpect& m = s->compare->expect[0];
  EXPECT_EQ(m.path, "compare.expect[0]");
  EXPECT_EQ(m.device, "gpu0");
  ASSERT_EQ(m.bounds.size(), 2u);
  EXPECT_TRUE(m.bounds[0].base);  // the plain bounds first, then the ratios
  EXPECT_EQ(m.bounds[0].op, MetricBound::Op::kAtLeast);
  EXPECT_EQ(m.bounds[1].ratio, 4.0);
  EXPECT_EQ(m.bounds[1].op, MetricBound::Op::kAtMost);
  EXPECT_EQ(s->compare->expect[1].bounds[0].value, 2000.0);  // microseconds
}

// The experts of the tiny MoE model on the CPU, at 32 tokens (the 1gpu preset's GPU asks for MUL_MAT_ID from 32 on),
// two evaluations: op offload copies every expert weight to gpu0 in each evaluation. The values below are worked out
// by hand (tests/scenarios/op-offload-copies-cpu-experts.json): an expert tensor is 64 x 128 x 4 q4_0 elements, 18432
// B; per evaluation 2 layers x 3 of them plus the embedding rows computed on the CPU (64 x 32 f32, 8192 B), in 7
// copies; 8 splits (the CPU's embedding lookup, gpu0 from layer 0's norm, and 3 per layer: each expert product starts a
// split that copies its weight in); no reserve before the first allocation, so one plan, made by alloc_graph, which
// first synchronizes the two backends.
std::string offload_scenario(const std::string& metrics) {
  return R"({"name": "offload", "topology": "1gpu", "model": {"preset": "tiny-moe", "n_tokens": 32},
    "policy": {"cpu_moe": true}, "run": {"evaluations": 2}, "expect": {"metrics": )" +
         metrics + "}}";
}

ScenarioOutcome run_text(const std::string& text) {
  auto s = parse_scenario(text, "case.json");
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  return run_scenario(s.value(), &builtin_registry());
}

TEST(ScenarioMetricsRun, EachMetricMeetsItsHandWorkedValueAndFailsWhenTheBoundIsOff) {
  struct Case {
    std::string metric;  // the expectation without its bound
    std::string exact;   // the value worked out by hand
    std::string off;     // a bound it must fail, and the result's text
    std::string what;
  };
  const Case cases[] = {
      {R"("metric": "copy_bytes", "from": "cpu", "to": "gpu0")", R"("equals": 237568)", R"("equals": 237567)",
       "expect.metrics[0]: copy_bytes from cpu to gpu0 == 232.00 KiB (237567 B)"},
      {R"("metric": "copy_bytes", "from": "cpu", "to": "gpu0")", R"("at_least": "232 KiB")", R"("at_most": "231 KiB")",
       "expect.metrics[0]: copy_bytes from cpu to gpu0 <= 231.00 KiB (236544 B)"},
      {R"("metric": "copies", "from": "cpu", "to": "gpu0")", R"("equals": 14)", R"("at_most": 13)",
       "expect.metrics[0]: copies from cpu to gpu0 <= 13"},
      // 14 copies from the CPU (host link 50 GB/s, 1 us) to gpu0 (25 GB/s, 10 us), 237568 B in all: through the host
      // at the slower 25 GB/s, 11 us each: 14 x 11 + 237568 / 25e9 s = 154 + 9.50272 = 163.50272 us.
      {R"("metric": "copy_time", "from": "cpu", "to": "gpu0")", R"("at_least": 163.50271, "at_most": 163.50273)",
       R"("at_most": "163.5 us")", "expect.metrics[0]: copy_time from cpu to gpu0 <= 163.500 us"},
      {R"("metric": "split_copy_bytes", "split": 2)", R"("equals": 18432)", R"("at_least": 18433)",
       "expect.metrics[0]: split_copy_bytes of split 2 >= 18.00 KiB (18433 B)"},
      {R"("metric": "splits")", R"("equals": 8)", R"("at_least": 9)", "expect.metrics[0]: splits >= 9"},
      {R"("metric": "reserves")", R"("equals": 1)", R"("equals": 0)", "expect.metrics[0]: reserves == 0"},
      {R"("metric": "replans")", R"("equals": 1)", R"("at_most": 0)", "expect.metrics[0]: replans <= 0"},
      {R"("metric": "replan_synchronizations")", R"("equals": 2)", R"("equals": 3)",
       "expect.metrics[0]: replan_synchronizations == 3"},
      // Not worked out by hand: only that something was measured.
      {R"("metric": "makespan")", R"("at_least": "1 us")", R"("at_most": "1 us")",
       "expect.metrics[0]: makespan <= 1.000 us"},
      {R"("metric": "host_blocked")", R"("at_least": "1 us")", R"("at_most": "1 us")",
       "expect.metrics[0]: host_blocked <= 1.000 us"},
      {R"("metric": "compute_bytes", "device": "gpu0")", R"("at_least": 1)", R"("at_most": 0)",
       "expect.metrics[0]: compute_bytes of gpu0 <= 0 B"},
      {R"("metric": "peak_memory", "device": "gpu0")", R"("at_least": 1)", R"("at_most": 0)",
       "expect.metrics[0]: peak_memory of gpu0 <= 0 B"},
      {R"("metric": "synchronizations")", R"("at_least": 1)", R"("at_most": 0)",
       "expect.metrics[0]: synchronizations <= 0"},
      {R"("metric": "event_waits")", R"("at_least": 1)", R"("at_most": 0)", "expect.metrics[0]: event_waits <= 0"},
      {R"("metric": "event_synchronizations")", R"("at_least": 1)", R"("at_most": 0)",
       "expect.metrics[0]: event_synchronizations <= 0"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.metric);
    const ScenarioOutcome good = run_text(offload_scenario("[{" + c.metric + ", " + c.exact + "}]"));
    EXPECT_TRUE(good.passed) << (good.results.empty() ? good.error : good.results[0].detail);
    const ScenarioOutcome bad = run_text(offload_scenario("[{" + c.metric + ", " + c.off + "}]"));
    EXPECT_FALSE(bad.passed);
    ASSERT_EQ(bad.results.size(), 1u);
    EXPECT_EQ(bad.results[0].what, c.what);
    EXPECT_THAT(bad.results[0].detail, HasSubstr("measured "));
  }
}

TEST(ScenarioMetricsRun, AnUnknownDeviceOrSplitFailsNamingIt) {
  const ScenarioOutcome out = run_text(offload_scenario(R"([{"metric": "compute_bytes", "device": "gpu7", "at_most": 1},
      {"metric": "copies", "to": "gpu7", "at_most": 1}, {"metric": "split_copy_bytes", "split": 99, "at_most": 1}])"));
  EXPECT_FALSE(out.passed);
  ASSERT_EQ(out.results.size(), 3u);
  EXPECT_EQ(out.results[0].detail, "no device \"gpu7\"");
  EXPECT_EQ(out.results[1].detail, "no device \"gpu7\"");
  EXPECT_EQ(out.results[2].detail, "no split 99 (there are 8)");
}

// A comparison runs the variant and bounds its value by the base run's: op offload off moves the experts' products
// to the CPU, so far fewer bytes come from the CPU (the base's 237568 B by hand); a wrong bound fails naming both.
TEST(ScenarioMetricsRun, AComparisonFailsNamingTheVariantAndBothValues) {
  const std::string base = R"({"name": "offload", "topology": "1gpu", "model": {"preset": "tiny-moe", "n_tokens": 32},
    "policy": {"cpu_moe": true}, "run": {"evaluations": 2}, "compare": {"with": {"op_offload": false}, "expect": )";
  const ScenarioOutcome good = run_text(base + R"([{"metric": "copy_bytes", "from": "cpu", "at_most_ratio": 0.5},
      {"metric": "splits", "at_most": "base"}]}})");
  EXPECT_TRUE(good.passed);
  const ScenarioOutcome bad = run_text(base + R"([{"metric": "copy_bytes", "from": "cpu", "at_least": "base"}]}})");
  EXPECT_FALSE(bad.passed);
  ASSERT_EQ(bad.results.size(), 1u);
  EXPECT_EQ(bad.results[0].what, "compare.expect[0]: copy_bytes from cpu with {\"op_offload\":false} >= base");
  EXPECT_THAT(bad.results[0].detail, HasSubstr(", base 232.00 KiB (237568 B) (ratio 0."));
  // A variant that cannot run fails the comparison with its error.
  const ScenarioOutcome broken = run_text(R"({"name": "x", "topology": "1gpu", "compare": {"with":
      {"pins": [{"tensor": "no-such-tensor", "device": "gpu0"}]}, "expect": [{"metric": "splits", "at_most": "base"}]}})");
  EXPECT_FALSE(broken.passed);
  ASSERT_EQ(broken.results.size(), 1u);
  EXPECT_THAT(broken.results[0].what, HasSubstr("compare: the variant (with {\"pins\":"));
  EXPECT_THAT(broken.results[0].detail, HasSubstr("no-such-tensor"));
}

}  // namespace
