// Placement policies: the layer-split arithmetic worked out by hand, placement over the Device interface (simulated
// and real devices alike), and the one option table that the command line and scenario files both read.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/context.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/scenario/scenario.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using namespace tessera::scenario;
using ::testing::HasSubstr;

namespace {

TEST(SimPolicy, LayerOfName) {
  EXPECT_EQ(layer_of_name("blk.12.ffn_up.weight"), 12);
  EXPECT_EQ(layer_of_name("cache_v_l3"), 3);
  EXPECT_EQ(layer_of_name("token_embd.weight"), -1);
  EXPECT_EQ(layer_of_name("blk.x.attn_q.weight"), -1);
}

// llama.cpp's rules (src/llama-model.cpp, load_tensors): the output layer is layer n_layer; layers from
// i_gpu_start = max(n_layer + 1 - N, 0) are offloaded, act = min(N, n_layer + 1) of them; layer il goes to the first
// GPU whose cumulative share is above (il - i_gpu_start) / act (std::upper_bound). layer_devices returns one entry per
// layer, then the output layer's.
TEST(SimPolicy, LayersGoWhereThePolicySays) {
  auto sim = make_sim(load_topology("2gpu-unequal").value());
  // 24 GiB and 8 GiB GPUs: by free memory, cumulative shares 0.75, 1. All of 8 layers: act = 9, il / 9 < 0.75 for
  // il <= 6 (6/9 = 0.67; 7/9 = 0.78): layers 0-6 on gpu0, layer 7 and the output on gpu1.
  PlacementPolicy p;
  auto all = layer_devices(devices_of(*sim), 8, p).value();
  EXPECT_EQ(all, (std::vector<int>{0, 0, 0, 0, 0, 0, 0, 1, 1}));
  // -ngl 4: i_gpu_start = 9 - 4 = 5, act 4: k = il - 5 = 0, 1, 2 (k/4 < 0.75) on gpu0 (layers 5-7); k = 3 (0.75 is
  // not above 0.75) on gpu1: the output layer.
  p.n_gpu_layers = 4;
  EXPECT_EQ(layer_devices(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 0, 0, 1}));
  // -ts 1,1: shares 0.5, 1: k = 0, 1 on gpu0; k = 2 (exactly 0.5: upper_bound goes past it) and 3 on gpu1.
  p.tensor_split = {1, 1};
  EXPECT_EQ(layer_devices(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 0, 1, 1}));
  p.layers_per_device = {1, 2};  // explicit counts win; the output layer stays on the CPU
  EXPECT_EQ(layer_devices(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 1, 1, 2}));
  p.layers_per_device = {5, 5};
  EXPECT_FALSE(layer_devices(devices_of(*sim), 8, p).ok());
  p.layers_per_device = {1, 1, 1};
  EXPECT_FALSE(layer_devices(devices_of(*sim), 8, p).ok());
  p.layers_per_device.clear();
  // All zero: llama.cpp splits by free memory, as with no split at all.
  p.tensor_split = {0, 0};
  EXPECT_EQ(layer_devices(devices_of(*sim), 8, p).value(), (std::vector<int>{2, 2, 2, 2, 2, 0, 0, 0, 1}));
  p.tensor_split = {-1, 2};
  EXPECT_FALSE(layer_devices(devices_of(*sim), 8, p).ok());
}

// Three GPUs of 24, 8 and 8 GiB and 10 layers, all offloaded (act = 11). Cumulative shares 24/40, 32/40, 40/40 = 0.6,
// 0.8, 1. il / 11: 6/11 = 0.55 is the last below 0.6 (gpu0: layers 0-6), 8/11 = 0.73 the last below 0.8 (gpu1: 7, 8),
// then gpu2: layer 9 and the output.
TEST(SimPolicyArithmetic, DefaultSplitFollowsEachGpusMemory) {
  auto sim = make_sim(topology({gpu("gpu0", 24 * GiB), gpu("gpu1", 8 * GiB), gpu("gpu2", 8 * GiB), wrapped_cpu()}));
  EXPECT_EQ(layer_devices(devices_of(*sim), 10, PlacementPolicy{}).value(),
            (std::vector<int>{0, 0, 0, 0, 0, 0, 0, 1, 1, 2, 2}));
}

// -ngl 5 of 10: i_gpu_start = 11 - 5 = 6, so layers 0-5 stay on the CPU (device 3). A split 1,0,1: cumulative 0.5,
// 0.5, 1. k = il - 6 over 5: 0, 0.2, 0.4 below 0.5 -> gpu0 (layers 6-8); 0.6 and 0.8: the first share above them is
// gpu2's (gpu1's 0.5 is not) -> layer 9 and the output on gpu2.
TEST(SimPolicyArithmetic, PartialOffloadWithAZeroShare) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), gpu("gpu2"), wrapped_cpu()}));
  PlacementPolicy p;
  p.n_gpu_layers = 5;
  p.tensor_split = {1, 0, 1};
  EXPECT_EQ(layer_devices(devices_of(*sim), 10, p).value(), (std::vector<int>{3, 3, 3, 3, 3, 3, 0, 0, 0, 2, 2}));
}

// A 32-layer model on one GPU: -ngl counts the output layer first. -ngl 28: i_gpu_start = 33 - 28 = 5, layers 0-4 on
// the CPU, 5-31 and the output on the GPU. -ngl 32: only layer 0 on the CPU. -ngl 33 (or more, or all): everything.
// -ngl 1: the output layer alone. -ngl 0: nothing.
TEST(SimPolicyArithmetic, NglCountsTheOutputLayerFirst) {
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}));
  auto on_gpu = [&](int ngl) {
    PlacementPolicy p;
    p.n_gpu_layers = ngl;
    std::vector<int> layers;
    const std::vector<int> d = layer_devices(devices_of(*sim), 32, p).value();
    for (size_t il = 0; il < d.size(); ++il) {
      if (d[il] == 0) layers.push_back(static_cast<int>(il));
    }
    return layers;
  };
  auto range = [](int from, int to) {
    std::vector<int> v;
    for (int i = from; i <= to; ++i) v.push_back(i);
    return v;
  };
  EXPECT_EQ(on_gpu(28), range(5, 32));
  EXPECT_EQ(on_gpu(32), range(1, 32));
  EXPECT_EQ(on_gpu(33), range(0, 32));
  EXPECT_EQ(on_gpu(99), range(0, 32));
  EXPECT_EQ(on_gpu(-1), range(0, 32));
  EXPECT_EQ(on_gpu(1), (std::vector<int>{32}));
  EXPECT_EQ(on_gpu(0), (std::vector<int>{}));
}

// -ts 3,1 on two GPUs, -ngl 33 of 32 layers: cumulative shares 0.75, 1; il / 33 < 0.75 for il <= 24 (24/33 = 0.727,
// 25/33 = 0.758): layers 0-24 on gpu0 (25 layers), 25-31 and the output on gpu1.
TEST(SimPolicyArithmetic, TensorSplitThreeToOne) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  PlacementPolicy p;
  p.n_gpu_layers = 33;
  p.tensor_split = {3, 1};
  std::vector<int> want(25, 0);
  want.resize(33, 1);
  EXPECT_EQ(layer_devices(devices_of(*sim), 32, p).value(), want);
}

// -sm none: the main GPU (-mg) takes every offloaded layer, whatever the split; -sm row is refused; -mg must name a
// GPU.
TEST(SimPolicyArithmetic, SplitModeNoneUsesTheMainGpu) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  PlacementPolicy p;
  p.split_mode = SplitMode::kNone;
  p.main_gpu = 1;
  p.n_gpu_layers = 3;  // i_gpu_start = 5 - 3 = 2: layers 2, 3 and the output
  p.tensor_split = {3, 1};
  EXPECT_EQ(layer_devices(devices_of(*sim), 4, p).value(), (std::vector<int>{2, 2, 1, 1, 1}));
  p.main_gpu = 0;
  EXPECT_EQ(layer_devices(devices_of(*sim), 4, p).value(), (std::vector<int>{2, 2, 0, 0, 0}));
  p.main_gpu = 2;
  auto r = layer_devices(devices_of(*sim), 4, p);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("main_gpu 2"));
  // Split mode row places the layers as split mode layer does (llama.cpp PR #10026); the rows of their matrices are
  // cut over the GPUs by place_model (row_split_test.cpp).
  p.main_gpu = 0;
  p.split_mode = SplitMode::kLayer;
  const std::vector<int> by_layer = layer_devices(devices_of(*sim), 4, p).value();
  p.split_mode = SplitMode::kRow;
  EXPECT_EQ(layer_devices(devices_of(*sim), 4, p).value(), by_layer);
}

// A split shorter than the GPU list gives the GPUs left out a share of 0; more layers than the model has means all.
TEST(SimPolicyArithmetic, ShortSplitsAndTooManyLayers) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  PlacementPolicy p;
  p.n_gpu_layers = 99;
  p.tensor_split = {1};
  EXPECT_EQ(layer_devices(devices_of(*sim), 3, p).value(), (std::vector<int>{0, 0, 0, 0}));
  p.n_gpu_layers = 0;
  EXPECT_EQ(layer_devices(devices_of(*sim), 3, p).value(), (std::vector<int>{2, 2, 2, 2}));
  p.tensor_split = {1, 1, 1};  // three entries for two GPUs
  p.n_gpu_layers = 3;
  auto r = layer_devices(devices_of(*sim), 3, p);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("3 entries for 2 GPUs"));
}

// The explicit counts take the last layers, first GPU first: 2 and 1 of 6 layers -> layers 3, 4 on gpu0, 5 on gpu1;
// the output layer stays on the CPU.
TEST(SimPolicyArithmetic, ExplicitCountsTakeTheLastLayers) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  PlacementPolicy p;
  p.layers_per_device = {2, 1};
  EXPECT_EQ(layer_devices(devices_of(*sim), 6, p).value(), (std::vector<int>{2, 2, 2, 0, 0, 1, 2}));
}

// The policy needs only the Device interface: on the real CPU alone (no GPU), every layer and weight stays on it.
TEST(SimPolicy, PlacesOntoRealDevicesThroughTheDeviceInterface) {
  Device* cpu = builtin_registry().device_by_name("CPU");
  ASSERT_NE(cpu, nullptr);
  EXPECT_EQ(layer_devices({cpu}, 4, PlacementPolicy{}).value(), (std::vector<int>{0, 0, 0, 0, 0}));
  Context ctx{{.no_alloc = true}};
  Tensor* w = ctx.new_tensor_1d(Type::kF32, 16);
  set_name(*w, "blk.1.attn_q.weight");
  auto placed = place_model({cpu}, {w}, {}, 4, PlacementPolicy{});
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  EXPECT_EQ(placed.value().where.at(0).second, cpu->buffer_type());
  EXPECT_EQ(placed.value().weight_bytes.at(0), 64u);
  EXPECT_FALSE(layer_devices({}, 4, PlacementPolicy{}).ok());
}

// The Qwen architectures' own weights (Q/K/V biases, Q/K norms) are named "blk.N.*" like the others, so they go with
// their layer: with the layers split over two GPUs and the CPU, every weight of layer N is on layer N's device.
TEST(SimPolicy, QwenBiasesAndNormsLandInTheirLayer) {
  EXPECT_EQ(layer_of_name("blk.7.attn_q.bias"), 7);
  EXPECT_EQ(layer_of_name("blk.11.attn_k_norm.weight"), 11);
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  for (const char* name : {"tiny-qwen2", "tiny-qwen3moe"}) {
    models::LlamaConfig c = models::preset(name).value();
    c.n_layer = 6;
    models::LlamaGraph m = models::build_llama(c).value();
    PlacementPolicy p;
    p.layers_per_device = {2, 2};  // layers 0, 1 on the CPU, 2, 3 on gpu0, 4, 5 on gpu1
    auto placed = place_model(devices_of(*sim), m.weights, m.kv_cache, c.n_layer, p);
    ASSERT_TRUE(placed.ok()) << placed.status().to_string();
    int checked = 0;
    for (const auto& [t, buft] : placed.value().where) {
      const int layer = m.layer_of(t);
      if (layer < 0) continue;
      const size_t device = static_cast<size_t>(placed.value().layer_device.at(static_cast<size_t>(layer)));
      EXPECT_EQ(buft, sim->device(device)->buffer_type()) << t->name;
      const std::string n = t->name;
      checked += n.ends_with(".bias") || n.ends_with("_norm.weight") ? 1 : 0;
    }
    // attn_norm and ffn_norm, and the biases (qwen2) or Q/K norms (qwen3moe), of 6 layers
    EXPECT_EQ(checked, 6 * (c.attn_bias ? 5 : 4)) << name;
  }
}

// ---- the option table ----

// One line per option: a command-line value and the same in a scenario file. Each must give the same policy as the
// other, and differ from the default (so a reader that did nothing would fail).
struct OptionCase {
  const char* key;
  std::vector<std::string> texts;  // command-line occurrences ("" for a switch)
  const char* json;                // the scenario value
};

const std::vector<OptionCase>& option_cases() {
  static const std::vector<OptionCase> cases = {
      {"n_gpu_layers", {"7"}, "7"},
      {"tensor_split", {"3,1"}, "[3, 1]"},
      {"layers_per_device", {"2", "1"}, "[2, 1]"},
      {"overrides", {"ffn_.*=cpu", "a=b=gpu0"}, R"([{"pattern": "ffn_.*", "target": "cpu"},
                                                   {"pattern": "a=b", "target": "gpu0"}])"},
      {"split_mode", {"none"}, R"("none")"},
      {"main_gpu", {"1"}, "1"},
      {"override_tensor", {"ffn_.*=CPU,a=b=CUDA0"}, R"(["ffn_.*=CPU", "a=b=CUDA0"])"},
      {"cpu_moe", {""}, "true"},
      {"n_cpu_moe", {"2"}, "2"},
      {"kv_offload", {""}, "false"},
      {"pins", {"attn_norm-0=gpu0"}, R"([{"tensor": "attn_norm-0", "device": "gpu0"}])"},
      {"op_offload", {""}, "false"},
      {"parallel", {""}, "true"},
      {"n_copies", {"2"}, "2"},
      {"plan_reuse", {""}, "false"},
      {"max_split_inputs", {"12"}, "12"},
      {"scheduler_devices", {"gpu0,cpu"}, R"(["gpu0", "cpu"])"},
  };
  return cases;
}

bool same_policy(const PlacementPolicy& a, const PlacementPolicy& b) {
  auto ov = [](const PlacementPolicy& p) {
    std::vector<std::string> v;
    for (const auto& o : p.overrides) v.push_back(o.pattern + "\n" + o.target + (o.weights_only ? "\nw" : ""));
    for (const auto& o : p.pins) v.push_back(o.tensor + "\n" + o.device);
    return v;
  };
  return a.n_gpu_layers == b.n_gpu_layers && a.tensor_split == b.tensor_split &&
         a.layers_per_device == b.layers_per_device && ov(a) == ov(b) && a.op_offload == b.op_offload &&
         a.parallel == b.parallel && a.n_copies == b.n_copies && a.max_split_inputs == b.max_split_inputs &&
         a.scheduler_devices == b.scheduler_devices && a.overrides.size() == b.overrides.size() &&
         a.split_mode == b.split_mode && a.main_gpu == b.main_gpu && a.kv_offload == b.kv_offload && a.reuse == b.reuse;
}

TEST(PolicyOptions, EveryOptionMeansTheSameOnTheCommandLineAndInAFile) {
  ASSERT_EQ(option_cases().size(), policy_options().size()) << "a new option needs a line in option_cases()";
  for (const PolicyOption& o : policy_options()) {
    SCOPED_TRACE(o.key);
    const OptionCase* c = nullptr;
    for (const OptionCase& oc : option_cases()) c = o.key == oc.key ? &oc : c;
    ASSERT_NE(c, nullptr);
    PlacementPolicy from_cli;
    for (const std::string& t : c->texts) ASSERT_TRUE(apply_policy_option(o.key, t, &from_cli).ok()) << t;
    auto sc = parse_scenario(std::string(R"({"name": "x", "topology": "1gpu", "expect": "nothing", "policy": {")") +
                                 o.key + "\": " + c->json + "}}",
                             "case.json");
    ASSERT_TRUE(sc.ok()) << sc.status().to_string();
    EXPECT_TRUE(same_policy(from_cli, sc.value().config.policy));
    EXPECT_FALSE(same_policy(from_cli, PlacementPolicy{})) << "the case does not change the default";
  }
}

// The command line spells a key with dashes, a list of pairs in the singular, a true-by-default switch negated.
TEST(PolicyOptions, FlagsAreTheKeysSpelledWithDashes) {
  for (const PolicyOption& o : policy_options()) {
    std::string dashed = "--" + o.key;
    for (char& ch : dashed) ch = ch == '_' ? '-' : ch;
    const bool pairs = o.value.find('=') != std::string::npos && o.key.back() == 's';
    // (a key on by default is turned off by its negation: "op_offload" -> --no-op-offload)
    const bool negated = o.value.empty() && (o.key.ends_with("_offload") || o.key == "plan_reuse");
    const std::string expected = negated ? "--no-" + dashed.substr(2)
                                 : pairs ? dashed.substr(0, dashed.size() - 1)
                                         : dashed;
    EXPECT_NE(("," + o.flags + ",").find("," + expected + ","), std::string::npos) << o.key << ": " << o.flags;
    EXPECT_FALSE(o.help.empty()) << o.key;
  }
}

TEST(PolicyOptions, BadValuesNameTheFlagAndWhatWasExpected) {
  PlacementPolicy p;
  struct Bad {
    const char* key;
    const char* text;
    const char* message;
  };
  for (const Bad& b : std::vector<Bad>{
           {"n_gpu_layers", "x", "--ngl x: expected a whole number"},
           {"n_gpu_layers", "5 ", "--ngl 5 : expected a whole number"},
           {"n_gpu_layers", "-7", "--ngl -7: expected a whole number of layers from 0 to 1000000, or all, auto or -1"},
           {"n_gpu_layers", "ALL", "--ngl ALL: expected"},
           {"split_mode", "rows", "--split-mode rows: expected none, layer, row or tensor"},
           {"main_gpu", "-1", "--main-gpu -1: expected a GPU index"},
           {"override_tensor", "ffn=CPU,", "--override-tensor ffn=CPU,: expected REGEX=BUFT"},
           {"override_tensor", "ffn", "--override-tensor ffn: expected REGEX=BUFT"},
           {"n_cpu_moe", "-1", "--n-cpu-moe -1: expected a whole number"},
           {"tensor_split", "3,,1", "--tensor-split 3,,1: expected numbers separated by commas"},
           {"tensor_split", "nan", "--tensor-split nan: expected numbers"},
           {"layers_per_device", "-1", "--layers-per-device -1: expected layer counts"},
           {"overrides", "=cpu", "--override =cpu: expected REGEX=TARGET"},
           {"pins", "attn_norm-0", "--pin attn_norm-0: expected TENSOR=DEVICE"},
           {"n_copies", "5", "--n-copies 5: expected a whole number from 1 to 4"},
           {"max_split_inputs", "9", "--max-split-inputs 9: expected a whole number between 10 and 1000000"},
           {"scheduler_devices", "gpu0,", "--scheduler-devices gpu0,: expected device names"},
           {"no_such_option", "1", "no placement option named \"no_such_option\""},
       }) {
    const Status s = apply_policy_option(b.key, b.text, &p);
    EXPECT_FALSE(s.ok()) << b.key << " " << b.text;
    EXPECT_THAT(s.message(), HasSubstr(b.message));
  }
  auto sc = parse_scenario(R"({"name": "x", "topology": "1gpu", "policy": {"max_split_inputs": 9}})", "case.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_THAT(sc.status().message(), HasSubstr("policy.max_split_inputs: expected a whole number between 10"));
  // A negative layer count other than -1 meant "all" without a word.
  sc = parse_scenario(R"({"name": "x", "topology": "1gpu", "policy": {"n_gpu_layers": -7}})", "case.json");
  ASSERT_FALSE(sc.ok());
  EXPECT_THAT(sc.status().message(), HasSubstr("policy.n_gpu_layers: expected a whole number of layers from 0"));
}

}  // namespace
