// Every numeric field of every JSON file format (topology, scenario with its model, policy, run and expectations,
// serialized graph) fed the values that break a narrowing: 2^32 + k, 2^31, 2^63, 2^64 - 1, -1, -(2^32 + 1), 1e18,
// 1e300 and a fraction, one field at a time in an otherwise valid file (issue 36). A value outside the range of the
// field it is stored in must be an error naming the file and the field; a value inside it is either read exactly (no
// narrowing, no clamping) or an error naming the file and the field. The GGUF reader's fixed-width fields are covered
// in tests/unit/core/test_gguf.cpp; sizes near 2^63 through the API and every format by the property
// tests/property/test_size_properties.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tessera/harness/graph/graph_io.h"
#include "tessera/scenario/scenario.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::harness;
using namespace tessera::scenario;

namespace {

using json = nlohmann::ordered_json;
using Real = long double;

// The values fed to each field, as JSON text (2^63 and 2^64 - 1 must reach the reader as written).
const char* const kValues[] = {
    "4294967297",  "4294967298", "4294967296", "2147483648", "9223372036854775808", "18446744073709551615", "-1",
    "-4294967297", "1e18",       "1e300",      "0.5"};

constexpr Real kI32 = std::numeric_limits<int32_t>::max();
constexpr Real kI64 = std::numeric_limits<int64_t>::max();
constexpr Real kU64 = std::numeric_limits<uint64_t>::max();
constexpr Real kInf = std::numeric_limits<Real>::infinity();

// One numeric field: where it is (a JSON pointer into the base file), what an error must name (its path; for the
// model's counts, whose cross-field checks speak of "n_embd", the key), the values it may hold ([lo, hi], whole
// numbers only or not: its storage's range, or a documented limit such as the alignment's 1 GiB), and how to read the
// value back from what the loader produced.
template <typename Loaded>
struct Field {
  std::string pointer;
  std::string name;  // the field's path as errors print it
  Real lo, hi;
  bool whole;
  std::function<Real(const Loaded&)> read;
};

// Feeds every value to every field of `base` through `load` and checks the rule above.
template <typename Loaded, typename Load>
void check_fields(const json& base, const std::string& source, const std::vector<Field<Loaded>>& fields, Load load) {
  {
    auto ok = load(base.dump(), source);
    ASSERT_TRUE(ok.ok()) << "the base file must load: " << ok.status().message();
  }
  for (const Field<Loaded>& f : fields) {
    // The base file must have the field (a typo in the table would test nothing).
    ASSERT_TRUE(base.contains(json::json_pointer(f.pointer))) << f.pointer;
    for (const char* text : kValues) {
      SCOPED_TRACE(f.name + " = " + text);
      json edited = base;
      edited[json::json_pointer(f.pointer)] = json::parse(text);
      const Real v = std::strtold(text, nullptr);
      const bool representable = v >= f.lo && v <= f.hi && (!f.whole || std::floor(v) == v);
      auto r = load(edited.dump(), source);
      if (r.ok()) {
        EXPECT_TRUE(representable) << "accepted a value outside the field's range";
        // A whole-number field holds the number exactly; a real field holds the double nearest to the text.
        const Real expected = f.whole ? v : static_cast<Real>(static_cast<double>(v));
        EXPECT_EQ(f.read(r.value()), expected) << "read as " << static_cast<double>(f.read(r.value()));
      } else {
        const std::string& m = r.status().message();
        EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << m;
        EXPECT_NE(m.find(source + ": "), std::string::npos) << "the error does not name the file: " << m;
        EXPECT_NE(m.find(f.name), std::string::npos) << "the error does not name the field: " << m;
      }
    }
  }
}

// ---- topology files ----

const char* const kTopology = R"({
  "name": "t",
  "devices": [
    {"name": "gpu0", "type": "gpu", "memory": 1073741824, "alignment": 256, "max_alloc": 536870912,
     "ops": {"default": "allow", "rules": [{"deny": ["SOFT_MAX"], "min_batch": 1, "max_batch": 64, "ne0_multiple": 32}]},
     "offload": {"min_batch": 32, "ops": ["MUL_MAT"]},
     "cost": {"launch_overhead": 5, "flops_f32": 1e12, "flops_f16": 2e12, "flops_quant": 3e12, "bandwidth": 5e11,
              "overrides": [{"op": "ADD", "overhead": 1, "flops": 1e9, "fixed": 2}]},
     "host_link": {"bandwidth": 2.5e10, "latency": 10},
     "padding": [{"row_multiple": 512, "extra": 64}]},
    {"name": "cpu", "type": "cpu", "memory": 4294967296,
     "buffer_types": [{"name": "R", "padding": [{"extra": 32}],
                       "ops": {"rules": [{"allow": ["MUL_MAT"], "ne0_multiple": 8}]}}]}
  ],
  "links": [{"a": "gpu0", "b": "host", "bandwidth": 1e10, "latency": 3}]
})";

TEST(NumericFields, TopologyFilesReadEveryFieldExactlyOrNameIt) {
  using sim::TopologyConfig;
  using F = Field<TopologyConfig>;
  auto dev = [](const TopologyConfig& t) -> const sim::DeviceConfig& { return t.devices[0]; };
  const std::vector<F> fields = {
      {"/devices/0/memory", "devices[0].memory", 0, kU64, true, [&](auto& t) { return Real(dev(t).memory); }},
      {"/devices/0/alignment", "devices[0].alignment", 0, Real(sim::kMaxAlignment), true,
       [&](auto& t) { return Real(dev(t).alignment); }},
      {"/devices/0/max_alloc", "devices[0].max_alloc", 0, kU64, true, [&](auto& t) { return Real(dev(t).max_alloc); }},
      {"/devices/0/ops/rules/0/min_batch", "devices[0].ops.rules[0]", 0, kI64, true,
       [&](auto& t) { return Real(dev(t).op_rules[0].min_batch); }},
      {"/devices/0/ops/rules/0/max_batch", "devices[0].ops.rules[0]", 0, kI64, true,
       [&](auto& t) { return Real(dev(t).op_rules[0].max_batch); }},
      {"/devices/0/ops/rules/0/ne0_multiple", "devices[0].ops.rules[0].ne0_multiple", 0, kI64, true,
       [&](auto& t) { return Real(dev(t).op_rules[0].ne0_multiple); }},
      {"/devices/0/offload/min_batch", "devices[0].offload.min_batch", 0, kI64, true,
       [&](auto& t) { return Real(dev(t).offload.min_batch); }},
      {"/devices/0/padding/0/row_multiple", "devices[0].padding[0].row_multiple", 0, Real(sim::kMaxRowMultiple), true,
       [&](auto& t) { return Real(dev(t).padding[0].row_multiple); }},
      {"/devices/0/padding/0/extra", "devices[0].padding[0].extra", 0, Real(sim::kMaxPaddingExtra), true,
       [&](auto& t) { return Real(dev(t).padding[0].extra); }},
      {"/devices/1/buffer_types/0/padding/0/extra", "devices[1].buffer_types[0].padding[0].extra", 0,
       Real(sim::kMaxPaddingExtra), true, [&](auto& t) { return Real(t.devices[1].buffer_types[0].padding[0].extra); }},
      {"/devices/1/buffer_types/0/ops/rules/0/ne0_multiple", "devices[1].buffer_types[0].ops.rules[0].ne0_multiple", 0,
       kI64, true, [&](auto& t) { return Real(t.devices[1].buffer_types[0].op_rules[0].ne0_multiple); }},
      {"/devices/0/cost/launch_overhead", "devices[0].cost.launch_overhead", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.launch_overhead_us); }},
      {"/devices/0/cost/flops_f32", "devices[0].cost.flops_f32", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.flops_f32); }},
      {"/devices/0/cost/flops_f16", "devices[0].cost.flops_f16", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.flops_f16); }},
      {"/devices/0/cost/flops_quant", "devices[0].cost.flops_quant", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.flops_quant); }},
      {"/devices/0/cost/bandwidth", "devices[0].cost.bandwidth", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.mem_bandwidth); }},
      {"/devices/0/cost/overrides/0/overhead", "devices[0].cost.overrides[0].overhead", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.overrides[0].overhead_us); }},
      {"/devices/0/cost/overrides/0/flops", "devices[0].cost.overrides[0].flops", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.overrides[0].flops); }},
      {"/devices/0/cost/overrides/0/fixed", "devices[0].cost.overrides[0].fixed", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).cost.overrides[0].fixed_us); }},
      {"/devices/0/host_link/bandwidth", "devices[0].host_link.bandwidth", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).host_bandwidth); }},
      {"/devices/0/host_link/latency", "devices[0].host_link.latency", 0, kInf, false,
       [&](auto& t) { return Real(dev(t).host_latency_us); }},
      {"/links/0/bandwidth", "links[0].bandwidth", 0, kInf, false, [&](auto& t) { return Real(t.links[0].bandwidth); }},
      {"/links/0/latency", "links[0].latency", 0, kInf, false, [&](auto& t) { return Real(t.links[0].latency_us); }},
  };
  check_fields<TopologyConfig>(json::parse(kTopology), "topo.json", fields, parse_topology);
}

// ---- scenario files: model, policy, run, faults and expectations ----

const char* const kScenario = R"({
  "name": "x", "topology": "2gpu-unequal",
  "model": {"preset": "tiny", "n_layer": 2, "n_embd": 64, "n_ff": 128, "n_head": 4, "n_head_kv": 4, "n_ctx": 64,
            "n_kv": 32, "n_tokens": 2, "n_outputs": 1, "n_vocab": 256, "n_expert": 4, "n_expert_used": 2},
  "policy": {"n_gpu_layers": 2, "tensor_split": [2, 1], "layers_per_device": [1, 1], "max_split_inputs": 12,
             "n_copies": 2},
  "run": {"seed": 9, "max_jitter": 20, "evaluations": 2, "model_seed": 4,
          "faults": {"fail_alloc_nth": 2, "fail_alloc_above": 1048576, "slow_copy_factor": 2.5, "slow_event": 3,
                     "hide_free": 4096, "drop_event_wait_nth": 1}},
  "expect": {"max_splits": 9, "min_splits": 2, "max_split_inputs": 12, "max_reserves": 1,
             "peak_memory": {"gpu0": 1073741824}, "weights": {"gpu0": 65536}, "max_nmse": 0.001}
})";

TEST(NumericFields, ScenarioFilesReadEveryFieldExactlyOrNameIt) {
  using F = Field<Scenario>;
  auto model = [](const Scenario& s) -> const models::LlamaConfig& { return s.config.model; };
  const std::vector<F> fields = {
      {"/model/n_layer", "n_layer", 0, kI32, true, [&](auto& s) { return Real(model(s).n_layer); }},
      {"/model/n_embd", "n_embd", 0, kI64, true, [&](auto& s) { return Real(model(s).n_embd); }},
      {"/model/n_ff", "n_ff", 0, kI64, true, [&](auto& s) { return Real(model(s).n_ff); }},
      {"/model/n_head", "n_head", 0, kI64, true, [&](auto& s) { return Real(model(s).n_head); }},
      {"/model/n_head_kv", "n_head_kv", 0, kI64, true, [&](auto& s) { return Real(model(s).n_head_kv); }},
      {"/model/n_ctx", "n_ctx", 0, kI64, true, [&](auto& s) { return Real(model(s).n_ctx); }},
      {"/model/n_kv", "n_kv", 0, kI64, true, [&](auto& s) { return Real(model(s).n_kv); }},
      {"/model/n_tokens", "n_tokens", 0, kI64, true, [&](auto& s) { return Real(model(s).n_tokens); }},
      {"/model/n_outputs", "n_outputs", 0, kI64, true, [&](auto& s) { return Real(model(s).n_outputs); }},
      {"/model/n_vocab", "n_vocab", 0, kI64, true, [&](auto& s) { return Real(model(s).n_vocab); }},
      {"/model/n_expert", "n_expert", 0, kI32, true, [&](auto& s) { return Real(model(s).n_expert); }},
      {"/model/n_expert_used", "n_expert_used", 0, kI32, true, [&](auto& s) { return Real(model(s).n_expert_used); }},
      {"/policy/n_gpu_layers", "policy.n_gpu_layers", -kI32 - 1, kI32, true,
       [](auto& s) { return Real(s.config.policy.n_gpu_layers); }},
      {"/policy/tensor_split/1", "policy.tensor_split[1]", 0, kInf, false,
       [](auto& s) { return Real(s.config.policy.tensor_split[1]); }},
      {"/policy/layers_per_device/1", "policy.layers_per_device[1]", 0, kI32, true,
       [](auto& s) { return Real(s.config.policy.layers_per_device[1]); }},
      {"/policy/max_split_inputs", "policy.max_split_inputs", -kI32 - 1, kI32, true,
       [](auto& s) { return Real(s.config.policy.max_split_inputs); }},
      {"/policy/n_copies", "policy.n_copies", -kI32 - 1, kI32, true,
       [](auto& s) { return Real(s.config.policy.n_copies); }},
      {"/run/seed", "run.seed", 0, kU64, true, [](auto& s) { return Real(s.config.sim.seed); }},
      {"/run/max_jitter", "run.max_jitter", 0, kInf, false, [](auto& s) { return Real(s.config.sim.max_jitter_us); }},
      {"/run/evaluations", "run.evaluations", 0, kI32, true, [](auto& s) { return Real(s.evaluations); }},
      {"/run/model_seed", "run.model_seed", 0, kU64, true, [](auto& s) { return Real(s.config.model_seed); }},
      {"/run/faults/fail_alloc_nth", "run.faults.fail_alloc_nth", 0, kI64, true,
       [](auto& s) { return Real(s.config.sim.faults.fail_alloc_nth); }},
      {"/run/faults/fail_alloc_above", "run.faults.fail_alloc_above", 0, kU64, true,
       [](auto& s) { return Real(s.config.sim.faults.fail_alloc_above); }},
      {"/run/faults/slow_copy_factor", "run.faults.slow_copy_factor", 0, kInf, false,
       [](auto& s) { return Real(s.config.sim.faults.slow_copy_factor); }},
      {"/run/faults/slow_event", "run.faults.slow_event", 0, kInf, false,
       [](auto& s) { return Real(s.config.sim.faults.slow_event_us); }},
      {"/run/faults/hide_free", "run.faults.hide_free", 0, kU64, true,
       [](auto& s) { return Real(s.config.sim.faults.hide_free_bytes); }},
      {"/run/faults/drop_event_wait_nth", "run.faults.drop_event_wait_nth", 0, kI64, true,
       [](auto& s) { return Real(s.config.sim.faults.drop_event_wait_nth); }},
      {"/expect/max_splits", "expect.max_splits", 0, kI32, true, [](auto& s) { return Real(*s.expect.max_splits); }},
      {"/expect/min_splits", "expect.min_splits", 0, kI32, true, [](auto& s) { return Real(*s.expect.min_splits); }},
      {"/expect/max_split_inputs", "expect.max_split_inputs", 0, kI32, true,
       [](auto& s) { return Real(*s.expect.max_split_inputs); }},
      {"/expect/max_reserves", "expect.max_reserves", 0, kI32, true,
       [](auto& s) { return Real(*s.expect.max_reserves); }},
      {"/expect/peak_memory/gpu0", "expect.peak_memory.gpu0", 0, kU64, true,
       [](auto& s) { return Real(s.expect.peak_memory[0].max_bytes); }},
      {"/expect/weights/gpu0", "expect.weights.gpu0", 0, kU64, true,
       [](auto& s) { return Real(s.expect.weights[0].bytes); }},
      {"/expect/max_nmse", "expect.max_nmse", 0, kInf, false, [](auto& s) { return Real(s.expect.max_nmse); }},
  };
  check_fields<Scenario>(json::parse(kScenario), "case.json", fields, parse_scenario);
}

// The run's shape of a model read from a file (a header-only fixture here): narrower limits, the same rule.
TEST(NumericFields, ScenarioFileModelShapeReadsEveryFieldExactlyOrNamesIt) {
  using F = Field<Scenario>;
  const json base = json::parse(R"({"name": "x", "topology": "1gpu",
    "model": {"fixture": "llama-3.1-8b-q4_k_m", "n_ctx": 256, "n_kv": 128, "n_tokens": 4, "n_outputs": 1},
    "expect": "nothing"})");
  const std::vector<F> fields = {
      {"/model/n_ctx", "n_ctx", 0, kI64, true, [](auto& s) { return Real(s.config.model.n_ctx); }},
      {"/model/n_kv", "n_kv", 0, kI64, true, [](auto& s) { return Real(s.config.model.n_kv); }},
      {"/model/n_tokens", "n_tokens", 0, kI64, true, [](auto& s) { return Real(s.config.model.n_tokens); }},
      {"/model/n_outputs", "n_outputs", 0, kI64, true, [](auto& s) { return Real(s.config.model.n_outputs); }},
  };
  check_fields<Scenario>(base, "case.json", fields, parse_scenario);
}

// ---- serialized graphs ----

// The example of docs/graph-format.md plus an unused leaf (tensors[6]) whose shape any edit may change.
const char* const kGraph = R"({
  "format": "tessera-graph", "version": 1,
  "tensors": [
    {"id":0,"name":"w","type":"q4_0","ne":[64,32,1,1],"nb":[18,36,1152,1152],"op":"NONE","role":"weight"},
    {"id":1,"name":"x","type":"f32","ne":[64,8,1,1],"nb":[4,256,2048,2048],"op":"NONE","flags":["input"],"role":"input"},
    {"id":2,"name":"y","type":"f32","ne":[32,8,1,1],"nb":[4,128,1024,1024],"op":"MUL_MAT","src":[0,1]},
    {"id":3,"name":"y2","type":"f32","ne":[32,8,1,1],"nb":[4,128,1024,1024],"op":"SCALE","op_params":[1056964608],"src":[2]},
    {"id":4,"name":"yv","type":"f32","ne":[16,8,1,1],"nb":[4,128,1024,1024],"op":"VIEW","op_params":[64],"src":[3],"view_src":3,"view_offs":64},
    {"id":5,"name":"out","type":"f32","ne":[16,8,1,1],"nb":[4,64,512,512],"op":"CONT","src":[4],"flags":["output"]},
    {"id":6,"name":"c","type":"f32","ne":[4,2,1,1],"nb":[4,16,32,32],"op":"NONE","role":"weight"}
  ],
  "leafs": [0, 1, 6],
  "nodes": [2, 3, 4, 5]
})";

TEST(NumericFields, GraphFilesReadEveryFieldExactlyOrNameIt) {
  using F = Field<LoadedGraph>;
  auto t = [](const LoadedGraph& g, size_t i) -> const Tensor& { return *g.tensors[i]; };
  const Real kNe = Real(int64_t{1} << 62);
  std::vector<F> fields = {
      {"/version", "version", 1, 1, true, [](auto&) { return Real(1); }},
      {"/tensors/2/id", "tensors[2].id", 2, 2, true, [](auto&) { return Real(2); }},
      {"/tensors/2/src/1", "tensors[2].src[1]", 1, 1, true, [](auto&) { return Real(1); }},
      {"/tensors/4/view_src", "tensors[4].view_src", 3, 3, true, [](auto&) { return Real(3); }},
      {"/tensors/4/view_offs", "tensors[4]", 64, 64, true, [&](auto& g) { return Real(t(g, 4).view_offs); }},
      {"/tensors/3/op_params/0", "tensors[3].op_params", INT32_MIN, INT32_MAX, true,
       [&](auto& g) { return Real(t(g, 3).op_params[0]); }},
      {"/leafs/2", "leafs[2]", 6, 6, true, [](auto&) { return Real(6); }},
      {"/nodes/3", "nodes[3]", 5, 5, true, [](auto&) { return Real(5); }},
  };
  for (int i = 0; i < 4; ++i) {
    const std::string d = std::to_string(i);
    // The unused leaf: any shape up to 2^62 elements in all; its strides must be the contiguous ones.
    fields.push_back(
        {"/tensors/6/ne/" + d, "tensors[6]", 0, kNe, true, [&, i](auto& g) { return Real(t(g, 6).ne[i]); }});
    fields.push_back(
        {"/tensors/6/nb/" + d, "tensors[6].nb", 0, kU64, true, [&, i](auto& g) { return Real(t(g, 6).nb[i]); }});
    // A computed tensor: its shape and strides must be the builder's.
    fields.push_back(
        {"/tensors/5/ne/" + d, "tensors[5]", 0, kNe, true, [&, i](auto& g) { return Real(t(g, 5).ne[i]); }});
    fields.push_back(
        {"/tensors/4/nb/" + d, "tensors[4]", 0, kU64, true, [&, i](auto& g) { return Real(t(g, 4).nb[i]); }});
  }
  check_fields<LoadedGraph>(json::parse(kGraph), "graph.json", fields, graph_from_json);
}

}  // namespace
