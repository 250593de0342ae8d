// `tessera upgrade` (scenario::upgrade_text, docs/scenarios.md "Versions"): each kind of file told apart, converted
// to its current version with the rest of the text kept byte for byte, and bad input refused naming the file and the
// place. The converted files are written out by hand from version 1's rules (tests/unit/harness/placement/
// policy_v1_test.cpp) and version 2's.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "tessera/scenario/scenario.h"
#include "tessera/scenario/scenario_upgrade.h"

using namespace tessera;
using namespace tessera::scenario;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

Upgrade upgraded(const std::string& text, const std::string& source = "f.json") {
  auto u = upgrade_text(text, source);
  EXPECT_TRUE(u.ok()) << u.status().to_string();
  return u.ok() ? u.value() : Upgrade{};
}

std::string refused(const std::string& text, const std::string& source = "f.json") {
  auto u = upgrade_text(text, source);
  EXPECT_FALSE(u.ok()) << "accepted: " << text;
  return u.ok() ? std::string() : u.status().message();
}

// Version 1's n_gpu_layers 2 on 4 layers: layers 2-3 on gpu0, the output layer on the CPU; only layers_per_device
// [2] says that in version 2 (n_gpu_layers 2 is layer 3 and the output layer now).
TEST(ScenarioUpgrade, Version1NGpuLayersBecomesLayersPerDevice) {
  const Upgrade u = upgraded(R"({
  "version": 1,
  "name": "old",
  "topology": "1gpu",
  "model": {"preset": "tiny", "n_layer": 4},
  "policy": {"n_gpu_layers": 2, "parallel": true},
  "expect": "nothing"
}
)");
  EXPECT_EQ(u.kind, FileKind::kScenario);
  EXPECT_EQ(u.from_version, 1);
  EXPECT_EQ(u.to_version, 2);
  EXPECT_TRUE(u.changed);
  EXPECT_EQ(u.text, R"({
  "version": 2,
  "name": "old",
  "topology": "1gpu",
  "model": {"preset": "tiny", "n_layer": 4},
  "policy": {"layers_per_device": [2], "parallel": true},
  "expect": "nothing"
}
)");
  ASSERT_EQ(u.changes.size(), 2u);
  EXPECT_EQ(u.changes[0], "version 1 -> 2");
  EXPECT_THAT(u.changes[1], StartsWith("policy: n_gpu_layers 2 -> layers_per_device [2]: version 1 put layers 0-1 on "
                                       "cpu, layers 2-3 on gpu0, the output layer on cpu; with n_gpu_layers 2 the "
                                       "current rules put layers 0-2 on cpu, layer 3 and the output layer on gpu0 "
                                       "(n_gpu_layers N now counts the output layer"));
  // The converted file is current.
  auto again = upgrade_text(u.text, "f.json");
  ASSERT_TRUE(again.ok()) << again.status().to_string();
  EXPECT_FALSE(again->changed);
  EXPECT_EQ(again->text, u.text);
  EXPECT_THAT(again->changes, ElementsAre("already version 2, the current one: nothing to change"));
}

// Without a version the file is read as version 1. -ts 3,1 over every layer of 4 on two GPUs: version 1 put layers
// 0-2 on gpu0 (positions 0.5, 1.5, 2.5 below 3) and layer 3 with the output layer on gpu1; as version 2 shares that
// is 3 layers and 2 (cumulative 0.6, 1 over 5 layers: 0, 0.2, 0.4 on gpu0, 0.6 and 0.8 on gpu1). A file on one line
// stays on one line.
TEST(ScenarioUpgrade, NoVersionTensorSplitIsRewrittenAsVersion1Placed) {
  const Upgrade u = upgraded(R"({"name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 4}, )"
                             R"("policy": {"tensor_split": [3, 1], "parallel": true}, "expect": "nothing"})");
  EXPECT_EQ(u.from_version, 0);
  EXPECT_EQ(u.text, R"({"version": 2, "name": "x", "topology": "2gpu-unequal", "model": {"n_layer": 4}, )"
                    R"("policy": {"tensor_split": [3, 2], "parallel": true}, "expect": "nothing"})");
  ASSERT_EQ(u.changes.size(), 2u);
  EXPECT_EQ(u.changes[0],
            "no \"version\": read as version 1 (a file written before commit 9a5a0e0), written as "
            "version 2");
  EXPECT_THAT(u.changes[1], StartsWith("policy: tensor_split [3, 1] -> tensor_split [3, 2]: version 1 put layers 0-2 "
                                       "on gpu0, layer 3 and the output layer on gpu1; with tensor_split [3, 1] the "
                                       "current rules put layers 0-3 on gpu0, the output layer on gpu1 ("));
}

// No policy: the default split changed on two GPUs (version 1 by total memory 24, 8 GiB at each layer's middle:
// layers 0-2 on gpu0, layer 3 and the output layer on gpu1); the policy is added after "model".
TEST(ScenarioUpgrade, APolicyIsAddedWhereTheFileHasNone) {
  const Upgrade u = upgraded(R"({
  "name": "x",
  "topology": "2gpu-unequal",
  "model": {"n_layer": 4},
  "expect": "nothing"
}
)");
  EXPECT_EQ(u.text, R"({
  "version": 2,
  "name": "x",
  "topology": "2gpu-unequal",
  "model": {"n_layer": 4},
  "policy": {"tensor_split": [3, 2]},
  "expect": "nothing"
}
)");
}

// A policy too long for one line is laid out one key per line; the other keys keep their order and values.
TEST(ScenarioUpgrade, ALongPolicyIsLaidOutOneKeyPerLine) {
  const Upgrade u = upgraded(R"({
  "version": 1,
  "name": "long",
  "topology": "1gpu",
  "model": {"preset": "tiny", "n_layer": 4},
  "policy": {
    "n_gpu_layers": 3,
    "overrides": [{"pattern": "^blk\\.0\\.ffn_up", "target": "cpu"}, {"pattern": "^blk\\.1\\.ffn_up", "target": "cpu"}]
  },
  "expect": "nothing"
}
)");
  EXPECT_EQ(u.text, R"({
  "version": 2,
  "name": "long",
  "topology": "1gpu",
  "model": {"preset": "tiny", "n_layer": 4},
  "policy": {
    "layers_per_device": [3],
    "overrides": [{"pattern": "^blk\\.0\\.ffn_up", "target": "cpu"}, {"pattern": "^blk\\.1\\.ffn_up", "target": "cpu"}]
  },
  "expect": "nothing"
}
)");
}

// Placements both versions make alike: only the version key is added, with a note; a file using a key that came with
// version 2 was written for it.
TEST(ScenarioUpgrade, ASamePlacementOnlyGetsTheVersion) {
  const Upgrade same = upgraded(R"({"name": "x", "topology": "1gpu", "expect": "nothing"})");
  EXPECT_EQ(same.text, R"({"version": 2, "name": "x", "topology": "1gpu", "expect": "nothing"})");
  EXPECT_THAT(same.changes,
              ElementsAre("no \"version\": read as version 1 (a file written before commit 9a5a0e0), written as "
                          "version 2",
                          "policy: no n_gpu_layers or tensor_split (every layer offloaded, split by the GPUs' memory) "
                          "places the layers the same under version 2: layers 0-1 and the output layer on gpu0"));
  // (a file with CRLF line ends keeps them)
  const Upgrade crlf =
      upgraded("{\r\n  \"name\": \"x\",\r\n  \"topology\": \"1gpu\",\r\n  \"expect\": \"nothing\"\r\n}\r\n");
  EXPECT_EQ(crlf.text,
            "{\r\n  \"version\": 2,\r\n  \"name\": \"x\",\r\n  \"topology\": \"1gpu\",\r\n  \"expect\": "
            "\"nothing\"\r\n}\r\n");
  const Upgrade v2 = upgraded(R"({"name": "x", "topology": "1gpu", "policy": {"n_gpu_layers": 1, "cpu_moe": true},
 "expect": "nothing"})");
  EXPECT_EQ(v2.text, R"({"version": 2, "name": "x", "topology": "1gpu", "policy": {"n_gpu_layers": 1, "cpu_moe": true},
 "expect": "nothing"})");
  ASSERT_EQ(v2.changes.size(), 1u);
  EXPECT_THAT(v2.changes[0], StartsWith("no \"version\": the file uses keys that only version 2 has"));
}

TEST(ScenarioUpgrade, TopologiesGetTheirVersionAndGraphsAreCurrent) {
  const std::string topology = R"({
  "name": "t",
  "devices": [{"name": "gpu0", "type": "gpu", "memory": "1 GiB"}, {"name": "cpu", "type": "cpu", "memory": "8 GiB"}]
}
)";
  const Upgrade t = upgraded(topology, "t.json");
  EXPECT_EQ(t.kind, FileKind::kTopology);
  EXPECT_EQ(t.from_version, 0);
  EXPECT_EQ(t.to_version, 1);
  EXPECT_EQ(t.text, R"({
  "version": 1,
  "name": "t",
  "devices": [{"name": "gpu0", "type": "gpu", "memory": "1 GiB"}, {"name": "cpu", "type": "cpu", "memory": "8 GiB"}]
}
)");
  EXPECT_EQ(t.original, topology);
  const Upgrade current = upgraded(t.text, "t.json");
  EXPECT_FALSE(current.changed);
  EXPECT_EQ(current.from_version, 1);
  EXPECT_EQ(refused(R"({"version": 2, "name": "t", "devices": []})", "t.json"),
            "t.json: version: version 2 is newer than this build of Tessera reads (topology files up to version 1): "
            "use a newer Tessera");

  const Upgrade g = upgraded(R"({"format": "tessera-graph", "version": 1, "tensors": [
    {"id": 0, "name": "a", "type": "f32", "ne": [4, 2], "op": "NONE", "flags": ["input"]},
    {"id": 1, "name": "w", "type": "f32", "ne": [4, 3], "op": "NONE"},
    {"id": 2, "name": "y", "type": "f32", "ne": [3, 2], "op": "MUL_MAT", "src": [1, 0], "flags": ["output"]}]})",
                             "g.json");
  EXPECT_EQ(g.kind, FileKind::kGraph);
  EXPECT_FALSE(g.changed);
  EXPECT_THAT(g.changes, ElementsAre("already version 1, the current one: nothing to change"));
}

TEST(ScenarioUpgrade, BadInputIsRefusedNamingTheFileAndThePlace) {
  EXPECT_THAT(refused("{\"name\": "), StartsWith("f.json:1:"));
  EXPECT_EQ(refused("[1, 2]"),
            "f.json: expected a JSON object at the top level (a scenario, a topology or a "
            "serialized graph), got an array");
  EXPECT_EQ(refused(R"({"name": "x"})"),
            "f.json: cannot tell what kind of file this is: expected a scenario (with \"topology\"), a topology (with "
            "\"devices\") or a serialized graph (with \"format\": \"tessera-graph\")");
  // The readers' own errors.
  EXPECT_EQ(refused(R"({"topology": "1gpu"})"), "f.json: missing required key \"name\" (the scenario's name)");
  EXPECT_EQ(refused(R"({"version": 3, "name": "x", "topology": "1gpu"})"),
            "f.json: version: version 3 is newer than this build of Tessera reads (scenario files up to version 2): "
            "use a newer Tessera");
  EXPECT_THAT(refused(R"({"version": 1, "name": "x", "topology": "1gpu", "policy": {"main_gpu": 0}})"),
              StartsWith("f.json: policy.main_gpu: version 1 has no such key"));
  EXPECT_THAT(refused(R"({"format": "tessera-graph", "version": 2, "tensors": []})", "g.json"),
              HasSubstr("g.json: version: version 2 is newer than this build of Tessera reads (serialized graphs up to "
                        "version 1)"));
}

// Cut and mangled texts: a converted file or an error naming the file, never a crash; what is converted is current
// when upgraded again.
TEST(ScenarioUpgrade, CutAndMangledTextsAreConvertedOrRefused) {
  const std::vector<std::string> texts = {
      "{\n  \"version\": 1,\n  \"name\": \"m\",\n  \"topology\": \"2gpu-unequal\",\n  \"model\": {\"n_layer\": 4},\n"
      "  \"policy\": {\"n_gpu_layers\": 3, \"tensor_split\": [1, 1]},\n  \"expect\": \"nothing\"\n}\n",
      R"({"name": "m", "topology": "1gpu", "model": {"n_layer": 2}, "policy": {"n_gpu_layers": 1}, "expect": "nothing"})",
      R"({"name": "t", "devices": [{"name": "gpu0", "memory": "1 GiB"}, {"name": "cpu", "type": "cpu"}]})"};
  std::mt19937_64 rng(5);
  const std::string bytes = " {}[],:\"01a\\";
  int converted = 0;
  auto check = [&](const std::string& text) {
    auto u = upgrade_text(text, "m.json");
    if (!u.ok()) {
      EXPECT_THAT(u.status().message(), HasSubstr("m.json")) << text;
      return;
    }
    if (!u->changed) return;
    ++converted;
    auto again = upgrade_text(u->text, "m.json");
    ASSERT_TRUE(again.ok()) << again.status().to_string() << "\n" << u->text;
    EXPECT_FALSE(again->changed) << u->text;
  };
  for (const std::string& base : texts) {
    check(base);
    for (size_t n = 0; n < base.size(); n += 5) check(base.substr(0, n));
    for (int i = 0; i < 150; ++i) {
      std::string t = base;
      for (int k = 0; k < 2; ++k) t[rng() % t.size()] = bytes[rng() % bytes.size()];
      check(t);
    }
  }
  EXPECT_GE(converted, 3);  // (each unmangled text is converted)
}

}  // namespace
