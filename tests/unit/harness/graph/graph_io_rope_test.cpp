// ROPE's YaRN parameters in the graph file format (docs/graph-format.md): op_params slots 4..8 written only when
// YaRN is on, read back into the same node (text and computed bytes), and bad values rejected with the file, the
// tensor's path and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/graph/graph_io.h"
#include "unit/harness/graph/graph_io_support.h"
#include "tessera/rope.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::HasSubstr;
using ojson = nlohmann::ordered_json;
using tessera::test::bytes_of;
using tessera::test::f32_bits;
using tessera::test::index_of;

namespace {

struct RopeGraph {
  std::unique_ptr<Context> ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
};

// q [16, 4 heads, 3 tokens]: a plain NEOX rope, and YaRN (gpt-oss's: factor 32 over 4096, ext_factor 1) with an
// attention factor and frequency factors.
RopeGraph rope_graph() {
  RopeGraph g;
  Context& c = *g.ctx;
  Tensor* q = c.new_tensor_4d(Type::kF32, 16, 4, 3, 1);
  set_name(*q, "q");
  set_input(*q);
  Tensor* pos = c.new_tensor_1d(Type::kI32, 3);
  set_name(*pos, "pos");
  set_input(*pos);
  Tensor* ff = c.new_tensor_1d(Type::kF32, 8);
  set_name(*ff, "freq_factors");
  Tensor* plain = rope(c, q, pos, 16, RopeMode::kNeox, 150000.0f, 1.0f / 32.0f);
  RopeYarn y;
  y.n_ctx_orig = 4096;
  y.ext_factor = 1.0f;
  y.attn_factor = 0.75f;
  Tensor* yarn = rope_ext(c, q, pos, 16, RopeMode::kNeox, 150000.0f, 1.0f / 32.0f, y, ff);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  set_name(*plain, "q_plain");
  set_name(*yarn, "q_yarn");
  for (Tensor* t : {plain, yarn}) {
    set_output(*t);
    EXPECT_TRUE(g.graph->build_forward(t).ok());
  }
  return g;
}

TEST(GraphIoRope, YarnSlotsRoundTrip) {
  RopeGraph g = rope_graph();
  const std::string text = graph_to_json(*g.graph);
  const ojson j = ojson::parse(text);
  const ojson& plain = j["tensors"][index_of(j, "q_plain")]["op_params"];
  const ojson& yarn = j["tensors"][index_of(j, "q_yarn")]["op_params"];
  EXPECT_EQ(plain.size(), 4u);  // no YaRN: the four-parameter form
  ASSERT_EQ(yarn.size(), 9u);
  EXPECT_EQ(yarn[4], 4096);
  EXPECT_EQ(yarn[5], f32_bits(1.0f));
  EXPECT_EQ(yarn[6], f32_bits(0.75f));
  EXPECT_EQ(yarn[7], f32_bits(32.0f));
  EXPECT_EQ(yarn[8], f32_bits(1.0f));
  Result<LoadedGraph> l = graph_from_json(text, "rope.json");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(graph_to_json(*l->graph), text);
  const Tensor* y = l->by_name("q_yarn");
  ASSERT_NE(y, nullptr);
  const RopeYarn back = rope_yarn_of(*y);
  EXPECT_EQ(back.n_ctx_orig, 4096);
  EXPECT_EQ(back.attn_factor, 0.75f);

  // The loaded graph computes the same bytes, and the YaRN node is not the plain one.
  auto ba = alloc_ctx_tensors(*g.ctx, *cpu::buffer_type());
  auto bb = alloc_ctx_tensors(*l->ctx, *cpu::buffer_type());
  ASSERT_TRUE(ba.ok() && bb.ok());
  std::mt19937 rng(3);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (size_t i = 0; i < g.graph->n_leafs(); ++i) {
    Tensor& t = *g.graph->leaf(i);
    std::vector<float> v(static_cast<size_t>(nelements(t)));
    if (t.type == Type::kI32) {
      std::vector<int32_t> p = {0, 5000, 70000};  // beyond the 4096 trained positions too
      ASSERT_TRUE(tensor_set(t, p.data(), 0, p.size() * 4).ok());
    } else {
      for (float& x : v) x = t.name == std::string("freq_factors") ? 1.0f + std::abs(dist(rng)) : dist(rng);
      ASSERT_TRUE(tensor_from_f32(t, v).ok());
    }
    std::vector<uint8_t> b = bytes_of(t);
    ASSERT_TRUE(tensor_set(*l->graph->leaf(i), b.data(), 0, b.size()).ok());
  }
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 1});
  ASSERT_EQ(backend->graph_compute(*g.graph), ComputeStatus::kSuccess) << backend->last_error();
  ASSERT_EQ(backend->graph_compute(*l->graph), ComputeStatus::kSuccess) << backend->last_error();
  for (const char* name : {"q_plain", "q_yarn"}) {
    const Tensor* a = nullptr;
    for (Tensor* t : g.graph->nodes()) {
      if (std::string(t->name) == name) a = t;
    }
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(bytes_of(*a), bytes_of(*l->by_name(name))) << name;
  }
  EXPECT_NE(bytes_of(*l->by_name("q_plain")), bytes_of(*l->by_name("q_yarn")));
}

TEST(GraphIoRope, BadYarnSlotsAreNamed) {
  RopeGraph g = rope_graph();
  const ojson base = ojson::parse(graph_to_json(*g.graph));
  const size_t ry = index_of(base, "q_yarn");
  const size_t rp = index_of(base, "q_plain");
  const std::string at_y = "tensors[" + std::to_string(ry) + "]";
  const std::string at_p = "tensors[" + std::to_string(rp) + "]";
  struct Edit {
    size_t tensor;
    int slot;  // -1: append the default YaRN values to the plain rope
    int32_t value;
    std::vector<std::string> fragments;
  };
  const std::vector<Edit> edits = {
      {ry, 5, f32_bits(2.0f), {at_y, "ROPE", "ext_factor must be in [0, 1]"}},
      {ry, 5, f32_bits(NAN), {at_y, "ext_factor must be in [0, 1]"}},
      {ry, 6, f32_bits(-1.0f), {at_y, "attn_factor must be positive and finite"}},
      {ry, 4, 0, {at_y, "n_ctx_orig must be positive when ext_factor != 0"}},
      {ry, 4, -5, {at_y, "n_ctx_orig must be >= 0"}},
      {ry, 7, f32_bits(0.0f), {at_y, "beta_fast and beta_slow must be positive"}},
      {ry, 8, f32_bits(INFINITY), {at_y, "beta_fast and beta_slow must be positive"}},
      {ry, 3, f32_bits(0.0f), {at_y, "freq_scale must be positive when ext_factor != 0"}},
      // The defaults written out are not the canonical form (all five slots 0).
      {rp, -1, 0, {at_p + ".op_params", "canonical form"}},
  };
  for (const Edit& e : edits) {
    ojson j = base;
    ojson& p = j["tensors"][e.tensor]["op_params"];
    if (e.slot < 0) {
      for (int32_t v : {0, 0, f32_bits(1.0f), f32_bits(32.0f), f32_bits(1.0f)}) p.push_back(v);
    } else {
      p[static_cast<size_t>(e.slot)] = e.value;
    }
    Result<LoadedGraph> l = graph_from_json(j.dump(1), "bad_rope.json");
    ASSERT_FALSE(l.ok()) << "accepted: slot " << e.slot;
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(l.status().message(), HasSubstr("bad_rope.json"));
    for (const std::string& f : e.fragments) EXPECT_THAT(l.status().message(), HasSubstr(f)) << "slot " << e.slot;
  }
}

}  // namespace
