// Split-input limit on a wide fan-in (docs/scheduler.md, 'Pass 5'; the anchor's split-input overflow): the random
// graphs of test_sched_properties.cpp are too small to fill a split with inputs, so this property builds its own graph,
// where every GPU layer needs two new tensors computed on the CPU: a node adds two inputs at once. The anchor checked
// the count only when a split was already full (and had fixed arrays), so a split could end one over the limit. Kills
// tests/mutation/defect-split-inputs-checked-only-when-full, defect-split-inputs-fixed-cap-30 and
// own-pass5-input-counted-off-by-one (docs/testing.md, "Mutation testing").
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tessera/scenario/scenario.h"
#include "tessera/harness/session/session.h"
#include "tessera/builtin.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::scenario;

namespace {

// inp [d, tok] (input); for each layer i: a-i = pl_a.i x inp and b-i = pl_b.i x inp (CPU weights, so computed on the
// CPU, before any layer); then per layer on the GPU: ffn-i = blk.i.ffn.weight x h, c-i = a-i + b-i (two new
// inputs of the GPU split), l_out-i = ffn-i + c-i.
std::string fan_in_graph(int layers) {
  const int d = 32, tok = 2;
  std::vector<std::string> t;
  auto add = [&](const std::string& name, std::vector<int> ne, const std::string& op, std::vector<int> src,
                 const std::string& extra) {
    std::string s = "{\"id\":" + std::to_string(t.size()) + ",\"name\":\"" + name + "\",\"type\":\"f32\",\"ne\":[";
    for (size_t k = 0; k < ne.size(); ++k) {
      if (k > 0) s += ",";
      s += std::to_string(ne[k]);
    }
    s += "],\"op\":\"" + op + "\"";
    if (!src.empty()) {
      s += ",\"src\":[";
      for (size_t k = 0; k < src.size(); ++k) {
        if (k > 0) s += ",";
        s += std::to_string(src[k]);
      }
      s += "]";
    }
    t.push_back(s + extra + "}");
    return static_cast<int>(t.size()) - 1;
  };
  const int x = add("inp", {d, tok}, "NONE", {}, ",\"flags\":[\"input\"],\"role\":\"input\"");
  std::vector<int> a, b, w;
  for (int i = 0; i < layers; ++i) {
    const int wa = add("pl_a." + std::to_string(i), {d, d}, "NONE", {}, ",\"role\":\"weight\"");
    const int wb = add("pl_b." + std::to_string(i), {d, d}, "NONE", {}, ",\"role\":\"weight\"");
    w.push_back(add("blk." + std::to_string(i) + ".ffn.weight", {d, d}, "NONE", {}, ",\"role\":\"weight\""));
    a.push_back(add("a-" + std::to_string(i), {d, tok}, "MUL_MAT", {wa, x}, ""));
    b.push_back(add("b-" + std::to_string(i), {d, tok}, "MUL_MAT", {wb, x}, ""));
  }
  int h = x;
  for (int i = 0; i < layers; ++i) {
    const int m = add("ffn-" + std::to_string(i), {d, tok}, "MUL_MAT", {w[static_cast<size_t>(i)], h}, "");
    const int c =
        add("c-" + std::to_string(i), {d, tok}, "ADD", {a[static_cast<size_t>(i)], b[static_cast<size_t>(i)]}, "");
    h = add("l_out-" + std::to_string(i), {d, tok}, "ADD", {m, c}, i == layers - 1 ? ",\"flags\":[\"output\"]" : "");
  }
  std::string out = "{\"format\":\"tessera-graph\",\"version\":1,\"tensors\":[";
  for (size_t k = 0; k < t.size(); ++k) {
    out += k > 0 ? ",\n" : "\n";
    out += t[k];
  }
  return out + "]}";
}

}  // namespace

RC_GTEST_PROP(SchedSplitProperties, NodesAddingSeveralInputsNeverOverflowTheLimit, ()) {
  const int layers = *rc::gen::inRange(4, 25);
  const int limit = *rc::gen::inRange(10, 40);
  const bool parallel = *rc::gen::arbitrary<bool>();
  const std::string scenario = std::string(R"({
    "name": "fan-in",
    "topology": {"name": "gpu-cpu", "devices": [
      {"name": "gpu0", "type": "gpu", "memory": "1 GiB"},
      {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true, "memory": "8 GiB",
       "caps": {"async": false, "events": false}}]},
    "graph": )") + fan_in_graph(layers) +
                               R"(,
    "policy": {"n_gpu_layers": -1, "op_offload": false},
    "expect": "nothing"
  })";
  Result<Scenario> sc = parse_scenario(scenario, "fan-in (test)");
  if (!sc.ok()) RC_FAIL("scenario: " + sc.status().message());
  SessionConfig config = sc->config;
  config.policy.max_split_inputs = limit;
  config.policy.parallel = parallel;
  Result<std::unique_ptr<Session>> made = Session::create(config, &builtin_registry());
  if (!made.ok()) RC_FAIL("session: " + made.status().message());
  Session& s = **made;
  Result<RunStats> r = s.run(1, true);
  if (!r.ok()) RC_FAIL("run: " + r.status().message());

  size_t most = 0;
  const std::vector<Scheduler::SplitView> splits = s.sched().splits();
  for (size_t i = 0; i < splits.size(); ++i) {
    most = std::max(most, splits[i].inputs.size());
    if (splits[i].inputs.size() > static_cast<size_t>(limit)) {
      RC_FAIL("split " + std::to_string(i) + " has " + std::to_string(splits[i].inputs.size()) +
              " inputs, max_split_inputs is " + std::to_string(limit) + " (" + std::to_string(layers) + " layers)\n" +
              s.splits_table());
    }
  }
  // The case is meant to reach the limit: 1 + 2 x layers inputs in all.
  RC_CLASSIFY(1 + 2 * layers > limit, "limit reached");
  RC_ASSERT(r->checked);
  if (!(r->nmse <= 1e-4) || r->nan_mismatch)
    RC_FAIL("outputs differ from the CPU reference: NMSE " + std::to_string(r->nmse));
  RC_ASSERT(r->races == 0u);
}
