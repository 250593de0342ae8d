// Scenario file versions (docs/scenarios.md, "Versions"): version 2 is read as written; a file without "version" is
// read when version 1's rules (before commit 9a5a0e0) and version 2's place its layers the same, and refused with a
// message naming both placements otherwise; a version 1 file is read as it was meant, its placement keys converted;
// a newer version is refused. The placements in the expected values are worked out by hand from each version's rules
// (version 1: tests/unit/harness/placement/policy_v1_test.cpp; version 2: policy_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "scenario_error_of.h"
#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/scenario/scenario.h"

using namespace tessera;
using namespace tessera::harness;
using namespace tessera::scenario;
using tessera::scenario::test::error_of;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

// tiny with 2 layers on 1gpu (gpu0, then cpu): n_gpu_layers 1 was layer 1 (version 1) and is the output layer alone
// (version 2: i_gpu_start = 3 - 1 = 2 = n_layer).
std::string tiny_1gpu(const std::string& version, const std::string& policy) {
  return "{" + version + R"("name": "x", "topology": "1gpu", "model": {"preset": "tiny", "n_layer": 2}, "policy": )" +
         policy + R"(, "expect": "nothing"})";
}

// Where a session of the scenario puts each layer (by device name) and the output layer.
std::vector<std::string> layers_of(const Scenario& sc) {
  auto s = Session::create(sc.config, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  std::vector<std::string> out;
  const Placement& p = s.value()->placement();
  for (int d : p.layer_device) out.push_back(s.value()->sim().device(static_cast<size_t>(d))->name());
  out.push_back(std::string("output ") + s.value()->sim().device(static_cast<size_t>(p.output_device))->name());
  return out;
}

TEST(ScenarioVersion, TheCurrentVersionIsReadAsWritten) {
  auto s = parse_scenario(tiny_1gpu(R"("version": 2, )", R"({"n_gpu_layers": 1})"), "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->version, 2);
  EXPECT_EQ(s->config.policy.n_gpu_layers, 1);
  EXPECT_TRUE(s->conversions.empty());
  EXPECT_EQ(layers_of(*s), (std::vector<std::string>{"cpu", "cpu", "output gpu0"}));
}

// No "version" and a placement both versions make alike: read without a word (every layer offloaded to one GPU,
// nothing offloaded, explicit counts, no GPU at all).
TEST(ScenarioVersion, NoVersionIsReadWhenThePlacementIsTheSame) {
  for (const char* policy : {R"({})", R"({"n_gpu_layers": -1})", R"({"n_gpu_layers": 0})", R"({"n_gpu_layers": 3})",
                             R"({"layers_per_device": [1], "parallel": true})"}) {
    SCOPED_TRACE(policy);
    auto s = parse_scenario(tiny_1gpu("", policy), "case.json");
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    EXPECT_EQ(s->version, 0);
    EXPECT_TRUE(s->conversions.empty());
  }
  auto none = parse_scenario(R"({"name": "x", "topology": "1gpu", "expect": "nothing"})", "case.json");
  EXPECT_TRUE(none.ok()) << none.status().to_string();
}

TEST(ScenarioVersion, NoVersionAndAChangedPlacementIsRefusedWithBothPlacements) {
  EXPECT_EQ(error_of(tiny_1gpu("", R"({"n_gpu_layers": 1})")),
            "case.json: policy: no \"version\", and commit 9a5a0e0 changed where this file's layers go: with "
            "n_gpu_layers 1, version 1 (the rules before it) put layer 0 on cpu, layer 1 on gpu0, the output layer on "
            "cpu; version 2 (the current rules) puts layers 0-1 on cpu, the output layer on gpu0 (n_gpu_layers N now "
            "counts the output layer as llama.cpp's -ngl does: it offloads the output layer and the last N - 1 "
            "layers, where version 1 offloaded the last N layers and kept the output layer on the CPU). If the file "
            "was written for the current rules, add \"version\": 2; if it was written before 9a5a0e0, `tessera "
            "upgrade case.json` converts it (docs/scenarios.md, \"Versions\")");
  // Two GPUs of 24 and 8 GiB, 4 layers, no policy: version 1 split by total memory at each layer's middle (positions
  // 4, 12, 20 of 32 below 24, 28 not: layers 0-2 on gpu0, layer 3 and the output layer on gpu1); version 2 by free
  // memory over the layers and the output layer (0, 0.2, 0.4, 0.6 below 0.75: layers 0-3 on gpu0, the output layer
  // on gpu1).
  const std::string msg =
      error_of(R"({"name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 4}, "expect": "nothing"})");
  EXPECT_THAT(msg, StartsWith("case.json: no \"version\", and commit 9a5a0e0 changed where this file's layers go: "
                              "with no n_gpu_layers or tensor_split (every layer offloaded, split by the GPUs' "
                              "memory), version 1 (the rules before it) put layers 0-2 on gpu0, layer 3 and the output "
                              "layer on gpu1; version 2 (the current rules) puts layers 0-3 on gpu0, the output layer "
                              "on gpu1 (the layers are now split across the GPUs as llama.cpp splits them"));
  // A variant of "compare" is checked the same way.
  EXPECT_THAT(error_of(tiny_1gpu("", R"({"parallel": true}, "compare": {"with": {"n_gpu_layers": 1},
                                         "expect": [{"metric": "splits", "at_most": "base"}]})")),
              StartsWith("case.json: compare.with: no \"version\", and commit 9a5a0e0 changed where this variant's "
                         "layers go: version 1 (the rules before it) put layer 0 on cpu, layer 1 on gpu0, the output "
                         "layer on cpu; version 2"));
}

// A file without "version" that uses a key only version 2 has was written for version 2.
TEST(ScenarioVersion, NoVersionWithAVersion2KeyIsVersion2) {
  auto s = parse_scenario(tiny_1gpu("", R"({"n_gpu_layers": 1, "kv_offload": false})"), "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->config.policy.n_gpu_layers, 1);
  EXPECT_TRUE(s->conversions.empty());
}

// Version 1 is read as it was meant: n_gpu_layers 1 was layer 1 with the output layer on the CPU, which only
// layers_per_device [1] says now.
TEST(ScenarioVersion, Version1IsReadAsItWasMeant) {
  auto s = parse_scenario(tiny_1gpu(R"("version": 1, )", R"({"n_gpu_layers": 1})"), "case.json");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->version, 1);
  EXPECT_EQ(s->config.policy.layers_per_device, (std::vector<int>{1}));
  EXPECT_TRUE(s->config.policy.tensor_split.empty());
  ASSERT_EQ(s->conversions.size(), 1u);
  EXPECT_THAT(s->conversions[0], StartsWith("policy: n_gpu_layers 1 -> layers_per_device [1]: version 1 put layer 0 on "
                                            "cpu, layer 1 on gpu0, the output layer on cpu; with n_gpu_layers 1 the "
                                            "current rules put layers 0-1 on cpu, the output layer on gpu0 ("));
  EXPECT_EQ(layers_of(*s), (std::vector<std::string>{"cpu", "gpu0", "output cpu"}));

  // Every layer on two GPUs (24 and 8 GiB, 4 layers; version 1: layers 0-2 on gpu0, layer 3 and the output layer on
  // gpu1): the layers per GPU as shares, the output layer counted with gpu1: 3, 2 (cumulative 0.6, 1 over 5 layers:
  // 0, 0.2, 0.4 below 0.6 on gpu0; 0.6, 0.8 on gpu1).
  auto two = parse_scenario(
      R"({"version": 1, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 4}, "expect": "nothing"})",
      "case.json");
  ASSERT_TRUE(two.ok()) << two.status().to_string();
  EXPECT_EQ(two->config.policy.tensor_split, (std::vector<double>{3, 2}));
  EXPECT_EQ(two->config.policy.n_gpu_layers, -1);
  EXPECT_EQ(layers_of(*two), (std::vector<std::string>{"gpu0", "gpu0", "gpu0", "gpu1", "output gpu1"}));

  // A placement both versions make alike is kept, with a note.
  auto same = parse_scenario(tiny_1gpu(R"("version": 1, )", R"({"n_gpu_layers": 0})"), "case.json");
  ASSERT_TRUE(same.ok()) << same.status().to_string();
  EXPECT_EQ(same->config.policy.n_gpu_layers, 0);
  EXPECT_TRUE(same->config.policy.layers_per_device.empty());
  ASSERT_EQ(same->conversions.size(), 1u);
  EXPECT_EQ(same->conversions[0],
            "policy: n_gpu_layers 0 places the layers the same under version 2: layers 0-1 "
            "and the output layer on cpu");
}

TEST(ScenarioVersion, Version1WithoutAVersion2MeaningIsRefused) {
  // All zero shares: version 1 refused them; version 2 reads them as the default split.
  EXPECT_EQ(error_of(R"({"version": 1, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 4},
                        "policy": {"tensor_split": [0, 0]}, "expect": "nothing"})"),
            "case.json: policy.tensor_split: version 1 refused this placement (policy: tensor_split has no positive "
            "entry), and the current rules place it (layers 0-3 on gpu0, the output layer on gpu1): no version 2 file "
            "means what this one meant; set \"version\": 2 to take the current meaning");
  // Keys that came with version 2.
  EXPECT_EQ(error_of(tiny_1gpu(R"("version": 1, )", R"({"split_mode": "none"})")),
            "case.json: policy.split_mode: version 1 has no such key (it came with llama.cpp's meanings in commit "
            "9a5a0e0, version 2): a file that uses it was written for the current rules; set \"version\": 2");
  EXPECT_THAT(error_of(tiny_1gpu(R"("version": 1, )", R"({}, "compare": {"with": {"cpu_moe": true},
                                                          "expect": [{"metric": "splits", "at_most": "base"}]})")),
              StartsWith("case.json: compare.with.cpu_moe: version 1 has no such key"));
}

TEST(ScenarioVersion, ANewerOrBadVersionIsRefused) {
  // (before the keys: a newer file may have keys this build does not know)
  EXPECT_EQ(error_of(R"({"version": 3, "name": "x", "topology": "1gpu", "a_key_of_version_3": true})"),
            "case.json: version: version 3 is newer than this build of Tessera reads (scenario files up to version 2): "
            "use a newer Tessera");
  EXPECT_EQ(error_of(R"({"version": 18446744073709551615, "name": "x", "topology": "1gpu"})"),
            "case.json: version: version 18446744073709551615 is newer than this build of Tessera reads (scenario "
            "files up to version 2): use a newer Tessera");
  EXPECT_EQ(error_of(R"({"version": 0, "name": "x", "topology": "1gpu"})"),
            "case.json: version: expected a version number from 1 to 2, got a number (0)");
  EXPECT_EQ(error_of(R"({"version": "2", "name": "x", "topology": "1gpu"})"),
            "case.json: version: expected a version number from 1 to 2, got a string (\"2\")");
  EXPECT_EQ(error_of(R"({"version": 1.5, "name": "x", "topology": "1gpu"})"),
            "case.json: version: expected a version number from 1 to 2, got a number (1.5)");
}

}  // namespace
