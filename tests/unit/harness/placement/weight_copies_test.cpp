// The copies llama.cpp's loader makes of weights several layers share (issue 48: the tied output head as a copy of
// token_embd on the output layer's GPU, a copy of rope_freqs per other buffer type): which copies a placement gets
// (weight_copies, against llama.cpp's rule worked out by hand), where they land, what they weigh, and that a model
// computed with them equals the CPU reference, which reads the originals.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "tessera/builtin.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

const std::vector<std::string> kRopeFreqs = {"rope_freqs.weight"};

WeightCopies copies_of(const char* topology, int n_layer, const PlacementPolicy& p, bool tied,
                       const std::vector<std::string>& rope) {
  auto topo = load_topology(topology);
  EXPECT_TRUE(topo.ok()) << topology << ": " << topo.status().message();
  if (!topo.ok()) return WeightCopies{};
  auto sim = make_sim(topo.value());
  auto c = weight_copies(devices_of(*sim), n_layer, p, tied, rope);
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? c.value() : WeightCopies{};
}

// llama.cpp (src/llama-model.cpp at c08002a1, lines 2223-2227 and 2340-2346): the tied output head is token_embd.weight
// created with the output layer's buffer type, a new tensor unless that buffer type's context already holds one of
// the name; -ot matches the name, so an override on token_embd sends both to the same buffer type.
TEST(WeightCopies, TheTiedOutputIsACopyWhereTheOutputLayerIsOnAGpu) {
  PlacementPolicy all;  // -ngl all on one GPU: the output layer on gpu0, token_embd on the CPU
  EXPECT_TRUE(copies_of("1gpu", 4, all, true, {}).output);
  EXPECT_FALSE(copies_of("1gpu", 4, all, false, {}).output);  // untied: output.weight is the head
  PlacementPolicy none;
  none.n_gpu_layers = 0;  // the output layer on the CPU with token_embd
  EXPECT_FALSE(copies_of("1gpu", 4, none, true, {}).output);
  PlacementPolicy one;
  one.n_gpu_layers = 1;  // since build 7467 the first offloaded layer is the output layer
  EXPECT_TRUE(copies_of("1gpu", 4, one, true, {}).output);
  PlacementPolicy embd_on_cpu = all;
  embd_on_cpu.overrides.push_back({"token_embd", "CPU"});
  EXPECT_FALSE(copies_of("1gpu", 4, embd_on_cpu, true, {}).output);
  PlacementPolicy embd_on_gpu = all;
  embd_on_gpu.overrides.push_back({"token_embd", "gpu0"});
  EXPECT_FALSE(copies_of("1gpu", 4, embd_on_gpu, true, {}).output);
  PlacementPolicy no_gpu = all;
  no_gpu.split_mode = SplitMode::kNone;
  no_gpu.n_gpu_layers = 0;
  EXPECT_FALSE(copies_of("2gpu-unequal", 4, no_gpu, true, {}).output);
}

// llama.cpp (src/llama-model.cpp at c08002a1, line 2395): every layer i creates rope_freqs.weight with
// TENSOR_DUPLICATED for i != 0, in its own buffer type: one copy per buffer type holding layers, other than layer 0's.
TEST(WeightCopies, RopeFactorsGetACopyPerOtherBufferTypeInLayerOrder) {
  PlacementPolicy all;  // every layer on gpu0: one buffer type, no copy
  EXPECT_TRUE(copies_of("1gpu", 4, all, false, kRopeFreqs).rope_of_layer.empty());
  EXPECT_TRUE(copies_of("1gpu", 4, all, false, {}).rope_of_layer.empty());  // no rope factors
  PlacementPolicy partial;
  partial.n_gpu_layers = 3;  // i_gpu_start = 5 - 3 = 2: layers 0-1 on the CPU, 2-3 and the output on gpu0
  EXPECT_EQ(copies_of("1gpu", 4, partial, false, kRopeFreqs).rope_of_layer, (std::vector<int>{0, 0, 1, 1}));
  // Two GPUs of 24 and 8 GiB, all 4 layers: act = 5, shares 0.75, 1: il / 5 < 0.75 for il <= 3, so layers 0-3 on
  // gpu0 and the output alone on gpu1; no layer reads a copy.
  EXPECT_TRUE(copies_of("2gpu-unequal", 4, all, false, kRopeFreqs).rope_of_layer.empty());
  PlacementPolicy even = all;
  even.tensor_split = {1, 1};  // il / 5 < 0.5 for il <= 2: layers 0-2 on gpu0, layer 3 on gpu1
  EXPECT_EQ(copies_of("2gpu-unequal", 4, even, false, kRopeFreqs).rope_of_layer, (std::vector<int>{0, 0, 0, 1}));
  PlacementPolicy both = even;
  both.n_gpu_layers = 4;  // i_gpu_start 1, act 4: layer 0 on the CPU, 1-2 on gpu0 ((il - 1) / 4 < 0.5), 3 on gpu1
  EXPECT_EQ(copies_of("2gpu-unequal", 4, both, false, kRopeFreqs).rope_of_layer, (std::vector<int>{0, 1, 1, 2}));
  PlacementPolicy pinned = both;
  pinned.overrides.push_back({"rope_freqs", "CPU"});  // the name matches: every layer's is the CPU's one tensor
  EXPECT_TRUE(copies_of("2gpu-unequal", 4, pinned, false, kRopeFreqs).rope_of_layer.empty());
}

TEST(WeightCopies, BadPoliciesAreErrors) {
  auto sim = make_sim(load_topology("1gpu").value());
  PlacementPolicy p;
  p.overrides.push_back({"(", "CPU"});
  auto c = weight_copies(devices_of(*sim), 4, p, true, kRopeFreqs);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(c.status().message(), HasSubstr("not a valid regular expression"));
  p.overrides = {{"x", "nowhere"}};
  EXPECT_THAT(weight_copies(devices_of(*sim), 4, p, true, {}).status().message(), HasSubstr("nowhere"));
}

TEST(WeightCopies, ConfigsWithBadCopiesAreRefused) {
  models::LlamaConfig c = models::preset("tiny").value();  // 2 layers, untied
  c.output_copy = true;
  EXPECT_THAT(models::build_llama(c).status().message(), HasSubstr("needs tied_output"));
  c.output_copy = false;
  c.rope_freq_factors = true;
  c.rope_factor_copy = {0};
  EXPECT_THAT(models::build_llama(c).status().message(), HasSubstr("1 entries for 2 layers"));
  c.rope_factor_copy = {1, 1};
  EXPECT_THAT(models::build_llama(c).status().message(), HasSubstr("layer 0 reads the original"));
  c.rope_factor_copy = {0, 2};
  EXPECT_THAT(models::build_llama(c).status().message(), HasSubstr("rope_factor_copy[1] is 2"));
  c.rope_factor_copy = {0, 1};
  EXPECT_TRUE(models::build_llama(c).ok());
}

// The tiny llama, tied and with rope factors, 4 layers on two GPUs with layer 0 on the CPU (-ngl 4 -ts 1,1, as in the
// test above): the output head and two rope_freqs copies are weights of their own on their GPUs, the graph reads them,
// and the logits equal the CPU reference's (computed from the originals alone).
TEST(WeightCopies, ASessionPlacesTheCopiesAndComputesTheReferenceLogits) {
  SessionConfig sc;
  sc.topology = topology_preset("2gpu-unequal").value();
  sc.model = models::preset("tiny").value();
  sc.model.n_layer = 4;
  sc.model.tied_output = true;
  sc.model.rope_freq_factors = true;
  sc.policy.n_gpu_layers = 4;
  sc.policy.tensor_split = {1, 1};
  sc.model_seed = 7;
  auto s = Session::create(sc, &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().message();
  const Session& session = **s;
  const models::LlamaGraph& m = session.model();
  ASSERT_EQ(m.copies.size(), 3u);  // the output head, rope_freqs for gpu0 and for gpu1
  EXPECT_NE(m.output, m.tok_embd);
  EXPECT_STREQ(m.output->name, "token_embd.weight");
  EXPECT_EQ(session.config().model.rope_factor_copy, (std::vector<int>{0, 1, 1, 2}));
  auto device_of = [&](const Tensor* t) -> std::string {
    for (const auto& [w, bt] : session.placement().where) {
      if (w == t) return bt->device()->name();
    }
    return "?";
  };
  EXPECT_EQ(device_of(m.tok_embd), "cpu");
  EXPECT_EQ(device_of(m.output), "gpu1");
  EXPECT_EQ(device_of(m.rope_freqs), "cpu");
  for (const models::LlamaGraph::WeightCopy& c : m.copies) {
    EXPECT_EQ(std::string(c.copy->name), std::string(c.of->name));
    if (c.of == m.rope_freqs) {
      EXPECT_EQ(device_of(c.copy), c.layer == 1 ? "gpu0" : "gpu1") << c.layer;
    }
  }
  // Each layer's ROPE reads the factors of its buffer type.
  for (size_t i = 0; i < m.graph->n_nodes(); ++i) {
    const Tensor* n = m.graph->node(i);
    if (n->op != Op::kRope) continue;
    const char* dash = std::strrchr(n->name, '-');
    ASSERT_NE(dash, nullptr) << n->name;
    const int il = std::atoi(dash + 1);
    const std::string want = il == 0 ? "cpu" : il < 3 ? "gpu0" : "gpu1";
    EXPECT_EQ(device_of(n->src[2]), want) << n->name;
  }
  auto r = (*s)->run(1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->checked);
  EXPECT_TRUE(r->matches_reference(1e-5)) << "NMSE " << r->nmse;
}

// A copy that does not hold its original's values is seen by the reference comparison: the same session with the
// output head's copy overwritten differs from the reference.
TEST(WeightCopies, ACopyWithOtherValuesDiffersFromTheReference) {
  SessionConfig sc;
  sc.topology = topology_preset("1gpu").value();
  sc.model = models::preset("tiny").value();
  sc.model.tied_output = true;
  sc.model_seed = 7;
  auto s = Session::create(sc, &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().message();
  const models::LlamaGraph& m = (*s)->model();
  ASSERT_EQ(m.copies.size(), 1u);
  Tensor* head = m.copies[0].copy;
  std::vector<uint8_t> zeros(nbytes(*head), 0);
  ASSERT_TRUE(tensor_set(*head, zeros.data(), 0, zeros.size()).ok());
  auto r = (*s)->run(1);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->checked);
  EXPECT_FALSE(r->matches_reference(1e-5));
}

}  // namespace
