// Serialized graphs (harness/graph_io): JSON round trips of llama graphs and of a hand-built graph with every op, a
// numeric round trip on the CPU (bit-identical outputs), every malformed category rejected with a message naming the
// file, the JSON path and what was expected, and a no-crash sweep (truncations, byte flips, number replacements).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/models/llama.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/graph/graph_io.h"
#include "support/temp_dir.h"
#include "unit/harness/graph/graph_io_support.h"

using namespace tessera;
using namespace tessera::harness;
using tessera::test::bytes_of;
using ::testing::HasSubstr;
using ojson = nlohmann::ordered_json;

namespace {

models::LlamaConfig llama_config(const char* name, bool flash_attn) {
  Result<models::LlamaConfig> c = models::preset(name);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  c->flash_attn = flash_attn;
  return *c;
}

models::LlamaGraph llama(const char* name, bool flash_attn) {
  Result<models::LlamaGraph> m = models::build_llama(llama_config(name, flash_attn));
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return std::move(m).value();
}

// A graph with every op of docs/ops.md: views of every kind (a view of a view too), CPY/SET_ROWS into views,
// GLU with one and two sources (and SWIGLU_OAI), ROPE with and without freq_factors, SOFT_MAX with and without a
// mask and sinks, FLASH_ATTN_EXT with every combination of mask and sinks, MUL_MAT_ID, ADD_ID, CLAMP, TOP_K, ARGSORT,
// a param leaf.
struct HandGraph {
  std::unique_ptr<Context> ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
  std::vector<Tensor*> outs;
};

HandGraph hand_graph() {
  HandGraph h;
  Context& c = *h.ctx;
  auto leaf = [&](Tensor* t, const char* name, bool input = false) {
    set_name(*t, name);
    if (input) set_input(*t);
    return t;
  };
  auto out = [&](Tensor* t) {
    EXPECT_NE(t, nullptr) << c.status().to_string();
    if (t != nullptr) {
      set_output(*t);
      h.outs.push_back(t);
    }
    return t;
  };
  Tensor* x = leaf(c.new_tensor_4d(Type::kF32, 64, 8, 2, 1), "x", true);
  Tensor* w = leaf(c.new_tensor_2d(Type::kQ8_0, 64, 32), "w");
  Tensor* b = leaf(c.new_tensor_1d(Type::kF32, 64), "b");
  Tensor* bp = leaf(c.new_tensor_1d(Type::kF32, 64), "b_param");
  set_param(*bp);
  Tensor* a1 = add(c, x, b);
  Tensor* a2 = add(c, a1, bp);
  Tensor* m1 = mul(c, a2, b);
  Tensor* d1 = div(c, m1, b);
  Tensor* s1 = scale(c, d1, 0.5f, 0.25f);
  Tensor* u = unary(c, s1, UnaryOp::kGelu);
  Tensor* u2 = out(unary(c, s1, UnaryOp::kNeg));
  (void)u2;
  Tensor* g1 = glu(c, u, nullptr, GluOp::kSwiglu, true);  // [32, 8, 2, 1]
  Tensor* g2 = glu(c, u, s1, GluOp::kGeglu);              // [64, 8, 2, 1]
  Tensor* r = rms_norm(c, g2, 1e-5f);
  Tensor* n = norm(c, r, 1e-6f);
  Tensor* sums = out(sum_rows(c, n));
  out(clamp(c, sums, 6.103515625e-5f, INFINITY));
  // after the GEGLU (reached through sum_rows), which the op_params test finds as the first GLU
  out(swiglu_oai(c, u, s1, 1.702f, 7.0f));
  out(swiglu_oai(c, u, nullptr, 0.5f, 2.5f, true));
  Tensor* flat = reshape_2d(c, n, 64, 16);
  Tensor* mm = mul_mat(c, w, flat);  // [32, 16]
  Tensor* tr = transpose(c, mm);     // [16, 32]
  Tensor* ct = cont(c, tr);
  Tensor* mask = leaf(c.new_tensor_2d(Type::kF16, 16, 32), "mask", true);
  Tensor* sm = out(soft_max(c, ct, mask, 0.125f));
  out(soft_max(c, ct, nullptr, 1.0f));
  Tensor* sm_sinks = leaf(c.new_tensor_1d(Type::kF32, 1), "sm_sinks");
  out(soft_max(c, ct, mask, 0.125f, sm_sinks));
  out(soft_max(c, ct, nullptr, 0.5f, sm_sinks));
  out(argsort(c, sm, SortOrder::kDesc));
  out(top_k(c, sm, 4));
  Tensor* pm = permute(c, x, 0, 2, 1, 3);  // [64, 2, 8, 1]
  out(dup(c, pm));
  Tensor* v = view_2d(c, x, 32, 8, x->nb[1], 32 * sizeof(float));
  out(cont(c, v));
  Tensor* vv = view_1d(c, v, 16, 4 * sizeof(float));  // a view of a view
  out(scale(c, vv, 2.0f));
  // rope: [head_dim 16, n_head 4, n_tokens 8]
  Tensor* qh = reshape_4d(c, g1, 16, 4, 8, 1);
  Tensor* pos = leaf(c.new_tensor_1d(Type::kI32, 8), "pos", true);
  Tensor* ff = leaf(c.new_tensor_1d(Type::kF32, 8), "freq_factors");
  Tensor* ro1 = rope(c, qh, pos, 16, RopeMode::kNeox, 10000.0f, 1.0f, ff);
  Tensor* ro2 = rope(c, ro1, pos, 8, RopeMode::kNormal, 500000.0f, 0.5f);
  // attention: q [16, n_q 8, H 4, 1], k/v f16 [16, n_kv 10, H_kv 2, 1]
  Tensor* q = cont(c, permute(c, ro2, 0, 2, 1, 3));
  Tensor* k = leaf(c.new_tensor_4d(Type::kF16, 16, 10, 2, 1), "k");
  Tensor* vc = leaf(c.new_tensor_4d(Type::kF16, 16, 10, 2, 1), "v");
  Tensor* kq_mask = leaf(c.new_tensor_2d(Type::kF16, 10, 8), "kq_mask", true);
  Tensor* sinks = leaf(c.new_tensor_1d(Type::kF32, 4), "sinks");
  out(flash_attn_ext(c, q, k, vc, kq_mask, 0.25f, sinks));
  out(flash_attn_ext(c, q, k, vc, nullptr, 0.25f, sinks));
  out(flash_attn_ext(c, q, k, vc, kq_mask, 0.25f));
  out(flash_attn_ext(c, q, k, vc, nullptr, 0.5f));
  // experts: as q4_0 [64, 16, 4]; b [64, 2, 8]; ids [2, 8]
  Tensor* as = leaf(c.new_tensor_3d(Type::kQ4_0, 64, 16, 4), "experts");
  Tensor* ids = leaf(c.new_tensor_2d(Type::kI32, 2, 8), "expert_ids", true);
  Tensor* mmid = out(mul_mat_id(c, as, reshape_3d(c, x, 64, 2, 8), ids));  // [16, 2, 8]
  Tensor* expert_bias = leaf(c.new_tensor_2d(Type::kF32, 16, 4), "expert_bias");
  out(add_id(c, mmid, expert_bias, ids));
  // indexing and copies into a cache
  Tensor* rid = leaf(c.new_tensor_1d(Type::kI32, 3), "row_ids", true);
  Tensor* rows = get_rows(c, w, rid);  // f32 [64, 3]
  Tensor* cache = leaf(c.new_tensor_2d(Type::kF16, 64, 10), "cache");
  Tensor* sr = out(set_rows(c, cache, rows, rid));
  out(cont(c, sr));
  Tensor* slot = view_2d(c, cache, 64, 3, cache->nb[1], 5 * cache->nb[1]);
  out(cpy(c, rows, slot));
  Tensor* dst = leaf(c.new_tensor_2d(Type::kF32, 64, 3), "dst");
  out(cpy(c, rows, dst));
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  for (Tensor* t : h.outs) EXPECT_TRUE(h.graph->build_forward(t).ok());
  return h;
}

LoadedGraph load_ok(const std::string& text, const std::string& source = "test.json") {
  Result<LoadedGraph> g = graph_from_json(text, source);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
  return g.ok() ? std::move(g).value() : LoadedGraph{};
}

void expect_round_trip(const Graph& g) {
  const std::string a = graph_to_json(g);
  LoadedGraph l = load_ok(a);
  ASSERT_NE(l.graph, nullptr);
  EXPECT_EQ(l.graph->n_nodes(), g.n_nodes());
  EXPECT_EQ(l.graph->n_leafs(), g.n_leafs());
  const std::string b = graph_to_json(*l.graph);
  EXPECT_EQ(a, b);
  // Every loaded node matches the original node's layout, op, params and flags.
  for (size_t i = 0; i < g.n_nodes() && i < l.graph->n_nodes(); ++i) {
    const Tensor* x = g.node(i);
    const Tensor* y = l.graph->node(i);
    EXPECT_TRUE(same_layout(*x, *y)) << describe(*x);
    EXPECT_EQ(x->op, y->op);
    EXPECT_EQ(std::memcmp(x->op_params, y->op_params, sizeof x->op_params), 0);
    EXPECT_EQ(x->flags, y->flags);
    EXPECT_STREQ(x->name, y->name);
    EXPECT_EQ(x->view_src != nullptr, y->view_src != nullptr);
    EXPECT_EQ(x->view_offs, y->view_offs);
  }
}

// ---------------------------------------------------------------------------------------------------------------

TEST(SimGraphIo, RoundTripLlamaVariants) {
  for (const char* name : {"tiny", "tiny-moe"}) {
    for (bool fa : {true, false}) {
      SCOPED_TRACE(std::string(name) + (fa ? " flash" : " no-flash"));
      models::LlamaGraph m = llama(name, fa);
      expect_round_trip(*m.graph);
      LoadedGraph l = load_ok(graph_to_json(*m.graph));
      EXPECT_EQ(l.weights.size(), m.weights.size() + m.kv_cache.size());
      EXPECT_EQ(l.inputs.size(), m.inputs().size());
      ASSERT_EQ(l.outputs.size(), 1u);
      EXPECT_STREQ(l.outputs[0]->name, m.logits->name);
      ASSERT_NE(l.by_name("token_embd.weight"), nullptr);
      EXPECT_TRUE(same_layout(*l.by_name("token_embd.weight"), *m.tok_embd));
      EXPECT_EQ(l.by_name("no such tensor"), nullptr);
      EXPECT_TRUE(l.ctx->no_alloc());
    }
  }
}

TEST(SimGraphIo, RoundTripEveryOp) {
  HandGraph h = hand_graph();
  std::vector<bool> seen(kOpCount, false);
  for (const Tensor* t : h.graph->nodes()) seen[static_cast<int>(t->op)] = true;
  for (const Tensor* t : h.graph->leafs()) seen[static_cast<int>(t->op)] = true;
  for (int i = 0; i < kOpCount; ++i) EXPECT_TRUE(seen[i]) << "no " << op_name(static_cast<Op>(i)) << " in the graph";
  expect_round_trip(*h.graph);
  // The param leaf is a node, as build_forward makes it.
  LoadedGraph l = load_ok(graph_to_json(*h.graph));
  ASSERT_NE(l.by_name("b_param"), nullptr);
  EXPECT_TRUE(l.graph->visited(l.by_name("b_param")));
  EXPECT_EQ(l.by_name("b_param")->flags, kFlagParam);
}

TEST(SimGraphIo, RoundTripGraphView) {
  models::LlamaGraph m = llama("tiny", true);
  Graph part = m.graph->view(10, 30);  // no leafs; sources outside the view are still written
  const std::string a = graph_to_json(part);
  LoadedGraph l = load_ok(a);
  EXPECT_EQ(l.graph->n_nodes(), 20u);
  EXPECT_EQ(l.graph->n_leafs(), 0u);
  EXPECT_EQ(graph_to_json(*l.graph), a);
}

TEST(SimGraphIo, FileRoundTripAndFormat) {
  HandGraph h = hand_graph();
  const std::string path = tessera::test::temp_path("tessera_graph_io_test.json");
  ASSERT_TRUE(save_graph_file(*h.graph, path).ok());
  Result<LoadedGraph> l = load_graph_file(path);
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(graph_to_json(*l->graph), graph_to_json(*h.graph));
  std::filesystem::remove(path);
  Result<LoadedGraph> missing = load_graph_file(path);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr(path));

  // The format: every tensor with id, type, ne, nb and op; leafs with a role; views with view_src and view_offs.
  const ojson j = ojson::parse(graph_to_json(*h.graph));
  EXPECT_EQ(j["format"], "tessera-graph");
  EXPECT_EQ(j["version"], 1);
  for (const ojson& t : j["tensors"]) {
    EXPECT_TRUE(t.contains("id") && t.contains("type") && t.contains("ne") && t.contains("nb") && t.contains("op"));
    EXPECT_EQ(t.contains("role"), t["op"] == "NONE");
    if (t["op"] == "VIEW" || t["op"] == "CPY" || t["op"] == "SET_ROWS" || t["op"] == "PERMUTE") {
      EXPECT_TRUE(t.contains("view_src") && t.contains("view_offs")) << t.dump();
    }
  }
}

TEST(SimGraphIo, NoLeafsOrNodesMeansEveryTensor) {
  const std::string text = R"({"format": "tessera-graph", "version": 1, "tensors": [
    {"id": 0, "name": "a", "type": "f32", "ne": [4, 2], "op": "NONE", "flags": ["input"]},
    {"id": 1, "name": "w", "type": "f32", "ne": [4, 3], "op": "NONE"},
    {"id": 2, "name": "y", "type": "f32", "ne": [3, 2], "op": "MUL_MAT", "src": [1, 0], "flags": ["output"]}]})";
  LoadedGraph l = load_ok(text);
  ASSERT_NE(l.graph, nullptr);
  EXPECT_EQ(l.graph->n_leafs(), 2u);
  EXPECT_EQ(l.graph->n_nodes(), 1u);
  ASSERT_EQ(l.weights.size(), 1u);
  EXPECT_STREQ(l.weights[0]->name, "w");
  ASSERT_EQ(l.inputs.size(), 1u);
  ASSERT_EQ(l.outputs.size(), 1u);
  EXPECT_EQ(l.tensors[2]->nb[1], 12u);
}

// The example of docs/graph-format.md is exactly what the writer produces for this graph.
TEST(SimGraphIo, DocExample) {
  Context c(ContextParams{.no_alloc = true});
  Tensor* x = c.new_tensor_2d(Type::kF32, 64, 8);
  set_name(*x, "x");
  set_input(*x);
  Tensor* w = c.new_tensor_2d(Type::kQ4_0, 64, 32);
  set_name(*w, "w");
  Tensor* y = mul_mat(c, w, x);
  set_name(*y, "y");
  Tensor* y2 = scale(c, y, 0.5f);
  set_name(*y2, "y2");
  Tensor* yv = view_2d(c, y2, 16, 8, y2->nb[1], 16 * sizeof(float));
  set_name(*yv, "yv");
  Tensor* out = cont(c, yv);
  set_name(*out, "out");
  set_output(*out);
  Graph g;
  ASSERT_TRUE(g.build_forward(out).ok());
  const std::string expected = R"({
  "format": "tessera-graph",
  "version": 1,
  "tensors": [
    {"id":0,"name":"w","type":"q4_0","ne":[64,32,1,1],"nb":[18,36,1152,1152],"op":"NONE","role":"weight"},
    {"id":1,"name":"x","type":"f32","ne":[64,8,1,1],"nb":[4,256,2048,2048],"op":"NONE","flags":["input"],"role":"input"},
    {"id":2,"name":"y","type":"f32","ne":[32,8,1,1],"nb":[4,128,1024,1024],"op":"MUL_MAT","src":[0,1]},
    {"id":3,"name":"y2","type":"f32","ne":[32,8,1,1],"nb":[4,128,1024,1024],"op":"SCALE","op_params":[1056964608],"src":[2]},
    {"id":4,"name":"yv","type":"f32","ne":[16,8,1,1],"nb":[4,128,1024,1024],"op":"VIEW","op_params":[64],"src":[3],"view_src":3,"view_offs":64},
    {"id":5,"name":"out","type":"f32","ne":[16,8,1,1],"nb":[4,64,512,512],"op":"CONT","src":[4],"flags":["output"]}
  ],
  "leafs": [0, 1],
  "nodes": [2, 3, 4, 5]
}
)";
  EXPECT_EQ(graph_to_json(g), expected);
  LoadedGraph l = load_ok(expected);
  EXPECT_EQ(graph_to_json(*l.graph), expected);
}

// ---------------------------------------------------------------------------------------------------------------
// Numeric round trip: the loaded graph computes bit-identical outputs on the CPU.

void fill_leaf(Tensor& t, std::mt19937_64& rng) {
  const size_t n = static_cast<size_t>(nelements(t));
  if (t.type == Type::kI32) {
    std::vector<int32_t> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = static_cast<int32_t>(i % 3);
    ASSERT_TRUE(tensor_set(t, v.data(), 0, n * sizeof(int32_t)).ok());
    return;
  }
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& f : v) f = dist(rng);
  ASSERT_TRUE(tensor_from_f32(t, v).ok());
}

// Copies the leaf data of `from` (graph order) into `to` (same order).
void copy_leafs(const Graph& from, const Graph& to) {
  ASSERT_EQ(from.n_leafs(), to.n_leafs());
  for (size_t i = 0; i < from.n_leafs(); ++i) {
    std::vector<uint8_t> b = bytes_of(*from.leaf(i));
    ASSERT_TRUE(tensor_set(*to.leaf(i), b.data(), 0, b.size()).ok());
  }
  for (size_t i = 0; i < from.n_nodes(); ++i) {
    if (from.node(i)->op != Op::kNone) continue;
    std::vector<uint8_t> b = bytes_of(*from.node(i));
    ASSERT_TRUE(tensor_set(*to.node(i), b.data(), 0, b.size()).ok());
  }
}

void expect_same_outputs(Graph& a, Graph& b) {
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 1});
  ASSERT_EQ(backend->graph_compute(a), ComputeStatus::kSuccess) << backend->last_error();
  ASSERT_EQ(backend->graph_compute(b), ComputeStatus::kSuccess) << backend->last_error();
  ASSERT_EQ(a.n_nodes(), b.n_nodes());
  size_t outputs = 0;
  for (size_t i = 0; i < a.n_nodes(); ++i) {
    if ((a.node(i)->flags & kFlagOutput) == 0) continue;
    ++outputs;
    EXPECT_EQ(bytes_of(*a.node(i)), bytes_of(*b.node(i))) << describe(*a.node(i));
  }
  EXPECT_GT(outputs, 0u);
}

TEST(SimGraphIo, NumericRoundTripLlama) {
  for (const char* name : {"tiny", "tiny-moe"}) {
    for (bool fa : {true, false}) {
      SCOPED_TRACE(std::string(name) + (fa ? " flash" : " no-flash"));
      models::LlamaGraph m = llama(name, fa);
      LoadedGraph l = load_ok(graph_to_json(*m.graph));
      ASSERT_NE(l.ctx, nullptr);
      std::vector<std::unique_ptr<Buffer>> bufs;
      for (Context* c : {m.weights_ctx.get(), m.cache_ctx.get(), m.ctx.get(), l.ctx.get()}) {
        Result<std::unique_ptr<Buffer>> b = alloc_ctx_tensors(*c, *cpu::buffer_type());
        ASSERT_TRUE(b.ok()) << b.status().to_string();
        bufs.push_back(std::move(b).value());
      }
      ASSERT_TRUE(models::fill_random(m, 42).ok());
      ASSERT_TRUE(models::set_inputs(m, models::default_inputs(m.config, 42)).ok());
      copy_leafs(*m.graph, *l.graph);
      expect_same_outputs(*m.graph, *l.graph);
    }
  }
}

TEST(SimGraphIo, NumericRoundTripEveryOp) {
  HandGraph h = hand_graph();
  LoadedGraph l = load_ok(graph_to_json(*h.graph));
  ASSERT_NE(l.ctx, nullptr);
  Result<std::unique_ptr<Buffer>> ba = alloc_ctx_tensors(*h.ctx, *cpu::buffer_type());
  Result<std::unique_ptr<Buffer>> bb = alloc_ctx_tensors(*l.ctx, *cpu::buffer_type());
  ASSERT_TRUE(ba.ok() && bb.ok());
  std::mt19937_64 rng(7);
  for (Tensor* t : h.graph->leafs()) fill_leaf(*t, rng);
  for (Tensor* t : h.graph->nodes()) {
    if (t->op == Op::kNone) fill_leaf(*t, rng);
  }
  copy_leafs(*h.graph, *l.graph);
  expect_same_outputs(*h.graph, *l.graph);
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed files: each rejected with the file name, the JSON path and what was expected.

class SimGraphIoMalformed : public ::testing::Test {
 protected:
  void SetUp() override {
    h_ = hand_graph();
    base_ = ojson::parse(graph_to_json(*h_.graph));
  }
  // Index of the first tensor with this op (or name).
  size_t find(const std::string& op_or_name) const {
    const ojson& ts = base_["tensors"];
    for (size_t i = 0; i < ts.size(); ++i) {
      if (ts[i]["op"] == op_or_name || ts[i]["name"] == op_or_name) return i;
    }
    ADD_FAILURE() << "no tensor " << op_or_name;
    return 0;
  }
  std::string reject(const ojson& j) { return reject_text(j.dump(2)); }
  std::string reject_text(const std::string& text) {
    Result<LoadedGraph> g = graph_from_json(text, "bad_graph.json");
    EXPECT_FALSE(g.ok()) << "accepted";
    if (g.ok()) return {};
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(g.status().message(), HasSubstr("bad_graph.json"));
    return g.status().message();
  }
  // Applies `edit` to a copy of the valid file; the message must contain every fragment.
  void expect_rejected(const std::function<void(ojson&)>& edit, std::initializer_list<std::string> fragments) {
    ojson j = base_;
    edit(j);
    const std::string msg = reject(j);
    for (const std::string& f : fragments) EXPECT_THAT(msg, HasSubstr(f));
  }
  static std::string at(size_t i) { return "tensors[" + std::to_string(i) + "]"; }

  HandGraph h_;
  ojson base_;
};

TEST_F(SimGraphIoMalformed, BaseIsValid) { load_ok(base_.dump(2)); }

TEST_F(SimGraphIoMalformed, WrongShapeOrTypeVersusSources) {
  const size_t mm = find("MUL_MAT");
  expect_rejected([&](ojson& j) { j["tensors"][mm]["ne"][1] = 17; },
                  {at(mm) + ".ne", "expected [32, 16, 1, 1]", "MUL_MAT", "got [32, 17, 1, 1]"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["type"] = "f16"; }, {at(mm) + ".type", "expected f32", "got f16"});
  // sources of the wrong type or shape: the builder's complaint, with the path of the tensor
  const size_t x = find("x");
  expect_rejected([&](ojson& j) { j["tensors"][x]["type"] = "i32"; },
                  {"tensors[", "expected sources and op_params", "ADD"});
  const size_t add = find("ADD");
  expect_rejected([&](ojson& j) { j["tensors"][add]["src"][1] = find("w"); },
                  {at(add), "expected sources and op_params that ADD accepts"});
}

TEST_F(SimGraphIoMalformed, ViewOutsideItsSource) {
  const size_t v = find("VIEW");
  expect_rejected(
      [&](ojson& j) {
        j["tensors"][v]["op_params"] = {4096, 0};
      },
      {at(v), "expected sources and op_params that VIEW accepts", "exceed"});
  expect_rejected([&](ojson& j) { j["tensors"][v]["op_params"] = {0, 1}; }, {at(v), "exceed"});
  expect_rejected([&](ojson& j) { j["tensors"][v]["nb"][1] = 100000; }, {at(v), "exceed"});
  expect_rejected([&](ojson& j) { j["tensors"][v]["nb"][1] = uint64_t{1} << 62; }, {at(v) + ".nb", "overflows"});
  expect_rejected([&](ojson& j) { j["tensors"][v]["view_offs"] = 8; }, {at(v) + ".view_offs", "expected 128", "got 8"});
  expect_rejected([&](ojson& j) { j["tensors"][v].erase("nb"); }, {at(v), "missing required key \"nb\""});
  const size_t w = find("w");
  expect_rejected([&](ojson& j) { j["tensors"][v]["view_src"] = w; },
                  {at(v) + ".view_src", "expected 0", "got " + std::to_string(w)});
  const size_t mm = find("MUL_MAT");
  expect_rejected([&](ojson& j) { j["tensors"][mm]["view_src"] = w; }, {at(mm) + ".view_src", "expected no view_src"});
  expect_rejected([&](ojson& j) { j["tensors"][w]["view_src"] = 0; },
                  {at(w) + ".view_src", "expected no view_src for a leaf"});
}

TEST_F(SimGraphIoMalformed, CyclesForwardAndDanglingIds) {
  const size_t mm = find("MUL_MAT");
  expect_rejected([&](ojson& j) { j["tensors"][mm]["src"][1] = mm; }, {at(mm) + ".src[1]", "cycle"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["src"][1] = mm + 1; },
                  {at(mm) + ".src[1]", "expected the id of an earlier tensor", "forward reference"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["src"][1] = 99999; }, {at(mm) + ".src[1]", "no such tensor"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["src"][1] = -1; }, {at(mm) + ".src[1]", "expected a tensor id"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["src"][1] = "3"; }, {at(mm) + ".src[1]", "expected a tensor id"});
  expect_rejected([&](ojson& j) { j["leafs"][0] = 99999; }, {"leafs[0]", "no such tensor"});
  expect_rejected([&](ojson& j) { j["nodes"].push_back(j["nodes"][0]); }, {"nodes[", "each tensor once"});
  expect_rejected([&](ojson& j) { j["leafs"].push_back(mm); }, {"leafs[", "expected a leaf", "MUL_MAT"});
  expect_rejected([&](ojson& j) { j["nodes"].push_back(find("w")); }, {"nodes[", "each tensor once", "already leafs["});
  expect_rejected(
      [&](ojson& j) {
        const size_t w = find("w");
        ojson kept = ojson::array();
        for (const ojson& id : j["leafs"]) {
          if (id != w) kept.push_back(id);
        }
        j["leafs"] = kept;
        j["nodes"].push_back(w);
      },
      {"nodes[", "expected a node", "is a leaf"});
  // nodes out of topological order
  expect_rejected(
      [&](ojson& j) {
        ojson& n = j["nodes"];
        std::swap(n[0], n[n.size() - 1]);
      },
      {"nodes[", "topological order", "a later node"});
  expect_rejected([&](ojson& j) { j.erase("nodes"); }, {"leafs", "expected both \"leafs\" and \"nodes\""});
  expect_rejected([&](ojson& j) { j["tensors"][3]["id"] = 4; }, {"tensors[3].id", "expected 3", "got 4"});
}

TEST_F(SimGraphIoMalformed, SourceCounts) {
  const size_t add = find("ADD");
  expect_rejected([&](ojson& j) { j["tensors"][add]["src"].push_back(0); },
                  {at(add) + ".src", "at most 2 sources for ADD", "got 3"});
  expect_rejected(
      [&](ojson& j) {
        ojson s = ojson::array();
        for (int i = 0; i < kMaxSrc + 1; ++i) s.push_back(0);
        j["tensors"][add]["src"] = s;
      },
      {at(add) + ".src", "at most 2 sources"});
  expect_rejected([&](ojson& j) { j["tensors"][add]["src"] = {0}; },
                  {at(add) + ".src", "2 required sources for ADD", "src[1] is missing"});
  expect_rejected([&](ojson& j) { j["tensors"][add]["src"][0] = nullptr; }, {at(add) + ".src", "src[0] is null"});
  expect_rejected([&](ojson& j) { j["tensors"][add].erase("src"); }, {at(add) + ".src", "required sources"});
  const size_t w = find("w");
  expect_rejected([&](ojson& j) { j["tensors"][w]["src"] = {0}; }, {at(w) + ".src", "at most 0 sources for NONE"});
}

TEST_F(SimGraphIoMalformed, BadShapesAndStrides) {
  const size_t x = find("x");
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"][1] = -8; }, {at(x) + ".ne[1]", "expected an element count"});
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"][1] = 1.5; }, {at(x) + ".ne[1]", "expected an element count"});
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"][1] = uint64_t{1} << 63; }, {at(x) + ".ne[1]", "2^62"});
  expect_rejected(
      [&](ojson& j) {
        j["tensors"][x]["ne"] = {int64_t{1} << 40, int64_t{1} << 40, 1, 1};
      },
      {at(x) + ".ne", "overflows"});
  // 2^62 f32 elements: within the per-dimension limit, but 2^64 bytes (once read as 0 bytes).
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"] = {int64_t{1} << 62, 1, 1, 1}; }, {at(x), "overflows"});
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"] = {1, 2, 3, 4, 5}; }, {at(x) + ".ne", "an array of 1 to 4"});
  expect_rejected([&](ojson& j) { j["tensors"][x]["ne"] = ojson::array(); }, {at(x) + ".ne", "an array of 1 to 4"});
  const size_t w = find("w");
  expect_rejected([&](ojson& j) { j["tensors"][w]["ne"][0] = 48; }, {at(w), "block size"});
  // nb inconsistent with type/ne
  expect_rejected([&](ojson& j) { j["tensors"][x]["nb"][1] = 512; },
                  {at(x) + ".nb", "non-contiguous leafs are not supported"});
  const size_t mm = find("MUL_MAT");
  expect_rejected([&](ojson& j) { j["tensors"][mm]["nb"][1] = 4; }, {at(mm) + ".nb", "expected [4, 128, 2048, 2048]"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["nb"] = {4, 128}; }, {at(mm) + ".nb", "an array of 4 byte strides"});
  const size_t tr = find("TRANSPOSE");
  expect_rejected([&](ojson& j) { j["tensors"][tr]["ne"] = {32, 16, 1, 1}; }, {at(tr) + ".ne", "TRANSPOSE"});
  const size_t rs = find("RESHAPE");
  expect_rejected([&](ojson& j) { j["tensors"][rs]["ne"][1] = 15; }, {at(rs), "RESHAPE", "cannot reshape"});
}

TEST_F(SimGraphIoMalformed, UnknownNamesKeysAndFlags) {
  const size_t mm = find("MUL_MAT");
  expect_rejected([&](ojson& j) { j["tensors"][mm]["op"] = "MATMUL"; },
                  {at(mm) + ".op", "unknown op \"MATMUL\"", "MUL_MAT"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["op"] = std::string("ADD\0x", 5); },
                  {at(mm) + ".op", "without NUL"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["type"] = "q4_k_m"; },
                  {at(mm) + ".type", "unknown type \"q4_k_m\"", "q4_0"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["shape"] = {1}; },
                  {at(mm), "unknown key \"shape\"", "expected one of"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["flags"] = {"outptu"}; },
                  {at(mm) + ".flags[0]", "unknown flag", "output"});
  expect_rejected([&](ojson& j) { j["tensors"][mm]["role"] = "weight"; }, {at(mm) + ".role", "expected no role"});
  const size_t x = find("x");
  expect_rejected([&](ojson& j) { j["tensors"][x]["role"] = "weight"; }, {at(x) + ".role", "expected \"input\""});
  expect_rejected([&](ojson& j) { j["tensors"][x]["name"] = std::string(64, 'n'); },
                  {at(x) + ".name", "at most 63 bytes"});
  expect_rejected([&](ojson& j) { j["format"] = "ggml"; }, {"format", "expected \"tessera-graph\""});
  // A newer version names the newest this build reads; another value says what is expected.
  expect_rejected([&](ojson& j) { j["version"] = 2; },
                  {"version: version 2 is newer than this build of Tessera reads (serialized graphs up to version 1)"});
  expect_rejected([&](ojson& j) { j["version"] = 0; }, {"version", "expected 1"});
  expect_rejected([&](ojson& j) { j["version"] = "1"; }, {"version", "expected 1"});
  expect_rejected([&](ojson& j) { j.erase("tensors"); }, {"missing required key \"tensors\""});
  expect_rejected([&](ojson& j) { j["extra"] = 1; }, {"unknown key \"extra\""});
  expect_rejected([&](ojson& j) { j = ojson::array(); }, {"expected a JSON object"});
  expect_rejected([&](ojson& j) { j["tensors"][mm].erase("op"); }, {at(mm), "missing required key \"op\""});
}

TEST_F(SimGraphIoMalformed, OpParams) {
  const size_t glu_i = find("GLU");  // the two-source GEGLU: op_params [1]
  expect_rejected(
      [&](ojson& j) {
        j["tensors"][glu_i]["op_params"] = {0, 2};
      },
      {at(glu_i) + ".op_params", "expected [0, 1]", "got [0, 2]"});
  expect_rejected(
      [&](ojson& j) {
        ojson p = ojson::array();
        for (int i = 0; i < 17; ++i) p.push_back(1);
        j["tensors"][glu_i]["op_params"] = p;
      },
      {at(glu_i) + ".op_params", "at most 16 int32 values"});
  expect_rejected([&](ojson& j) { j["tensors"][glu_i]["op_params"] = {5, 1}; }, {at(glu_i), "invalid glu op 5"});
  expect_rejected([&](ojson& j) { j["tensors"][glu_i]["op_params"] = {int64_t{1} << 32}; },
                  {at(glu_i) + ".op_params[0]", "int32"});
  expect_rejected([&](ojson& j) { j["tensors"][glu_i]["op_params"].push_back(7); },
                  {at(glu_i) + ".op_params", "expected [1, 1]", "got [1, 7]"});
  const size_t tk = find("TOP_K");
  expect_rejected([&](ojson& j) { j["tensors"][tk]["op_params"] = {1000}; }, {at(tk), "TOP_K", "k = 1000"});
  const size_t pm = find("PERMUTE");
  expect_rejected([&](ojson& j) { j["tensors"][pm]["op_params"] = {0, 0, 1, 3}; }, {at(pm), "not a permutation"});
  const size_t w = find("w");
  expect_rejected([&](ojson& j) { j["tensors"][w]["op_params"] = {1}; },
                  {at(w) + ".op_params[0]", "expected 0 for a leaf"});
}

TEST_F(SimGraphIoMalformed, SyntaxAndDuplicates) {
  std::string msg = reject_text("{\n  \"format\": \"tessera-graph\",\n  \"version\": 1,,\n}");
  EXPECT_THAT(msg, HasSubstr("bad_graph.json:3:"));
  EXPECT_THAT(msg, HasSubstr("JSON syntax error"));
  msg = reject_text("");
  EXPECT_THAT(msg, HasSubstr("bad_graph.json:1:"));
  msg = reject_text(R"({"format": "tessera-graph", "version": 1, "tensors": [{"id": 0, "id": 0}]})");
  EXPECT_THAT(msg, HasSubstr("tensors[0]: duplicate key \"id\""));
}

// ---------------------------------------------------------------------------------------------------------------
// No crash on any input: truncations, byte flips and number replacements of the llama JSON; whatever is accepted
// must write back and load again.

// Returns whether the text was accepted.
bool check_any(const std::string& text) {
  Result<LoadedGraph> g = graph_from_json(text, "fuzz.json");
  if (!g.ok()) {
    EXPECT_THAT(g.status().message(), HasSubstr("fuzz.json"));
    return false;
  }
  const std::string again = graph_to_json(*g->graph);
  Result<LoadedGraph> g2 = graph_from_json(again, "fuzz2.json");
  EXPECT_TRUE(g2.ok()) << g2.status().to_string();
  if (g2.ok()) {
    EXPECT_EQ(graph_to_json(*g2->graph), again);
  }
  return true;
}

TEST(SimGraphIo, NoCrashSweep) {
  models::LlamaGraph m = llama("tiny-moe", true);
  const std::string text = graph_to_json(*m.graph);
  // truncations
  for (size_t i = 0; i < 200; ++i) check_any(text.substr(0, text.size() * i / 200));
  std::mt19937_64 rng(20240601);
  // byte flips
  for (int i = 0; i < 300; ++i) {
    std::string t = text;
    const int flips = 1 + static_cast<int>(rng() % 3);
    for (int f = 0; f < flips; ++f) t[rng() % t.size()] = static_cast<char>(rng() & 0xff);
    check_any(t);
  }
  // numbers replaced by edge values (most of these parse, so they reach the validation)
  std::vector<size_t> numbers;
  for (size_t i = 1; i < text.size(); ++i) {
    const bool digit = text[i] >= '0' && text[i] <= '9';
    if (digit && !(text[i - 1] >= '0' && text[i - 1] <= '9') && text[i - 1] != '-') numbers.push_back(i);
  }
  ASSERT_FALSE(numbers.empty());
  const char* edges[] = {"0",
                         "1",
                         "2",
                         "3",
                         "7",
                         "-1",
                         "64",
                         "1000",
                         "2147483648",
                         "4294967295",
                         "4611686018427387904",
                         "18446744073709551615",
                         "1e30",
                         "0.5",
                         "null",
                         "\"x\"",
                         "[]",
                         "{}",
                         "999999"};
  int accepted = 0;
  for (int i = 0; i < 500; ++i) {
    std::string t = text;
    const size_t at = numbers[rng() % numbers.size()];
    size_t end = at;
    while (end < t.size() && t[end] >= '0' && t[end] <= '9') ++end;
    t.replace(at, end - at, edges[rng() % (sizeof edges / sizeof edges[0])]);
    accepted += check_any(t) ? 1 : 0;
  }
  // Some replacements are harmless (a float op param, a list order that stays topological), most are rejected.
  EXPECT_LT(accepted, 500);
}

}  // namespace
