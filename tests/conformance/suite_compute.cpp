// The backend conformance suite, graph compute: a llama-style block against the CPU reference (plain and through a
// graph plan), the empty graph, and graph_copy / compare_graph_backend onto the backend.
#include <string>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"
#include "tessera/cpu.h"

namespace tessera::conformance {

TEST_P(BackendConformance, LlamaBlockMatchesCpu) {
  SCOPED_TRACE(trace());
  auto be = instantiate_case(build_llama_block, buft());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  auto ref = instantiate_case(build_llama_block, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *be->graph);
  if (!unclaimed.empty()) {
    ASSERT_FALSE(factory().expect_full_op_support) << "unclaimed nodes: " << join(unclaimed);
    GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  }
  CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  ASSERT_EQ(backend_->graph_compute(*be->graph), ComputeStatus::kSuccess) << backend_->last_error();
  ASSERT_EQ(be->graph->n_nodes(), ref->graph->n_nodes());
  for (size_t i = 0; i < be->graph->n_nodes(); ++i) {
    const Tensor& node = *be->graph->node(i);
    EXPECT_TRUE(outputs_match(*ref->graph->node(i), node, nmse_tolerance(factory(), node)))
        << "node " << i << " (" << op_name(node.op) << ")";
  }
}

TEST_P(BackendConformance, EmptyGraphComputes) {
  SCOPED_TRACE(trace());
  Graph empty;
  EXPECT_EQ(backend_->graph_compute(empty), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_EQ(backend_->graph_compute_async(empty), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_P(BackendConformance, GraphPlanMatchesCompute) {
  SCOPED_TRACE(trace());
  auto be = instantiate_case(build_llama_block, buft());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  auto ref = instantiate_case(build_llama_block, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  if (!unclaimed_nodes(*backend_, *be->graph).empty()) GTEST_SKIP() << "backend does not claim every node";
  auto plan = backend_->plan_create(*be->graph);
  if (!plan.ok()) GTEST_SKIP() << "no graph plans: " << plan.status().to_string();
  ASSERT_NE(plan.value(), nullptr);
  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  for (int round = 0; round < 2; ++round) {  // a plan is reusable; new inputs each round
    SCOPED_TRACE(::testing::Message() << "plan_compute round " << round);
    CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
    ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
    ASSERT_EQ(backend_->plan_compute(*plan.value()), ComputeStatus::kSuccess) << backend_->last_error();
    EXPECT_TRUE(outputs_match(*ref->out, *be->out, nmse_tolerance(factory(), *be->out)));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Graph copy and backend comparison.

namespace {

// Views of leafs and of nodes, a quantized weight, and computed nodes around them.
Tensor* build_copy_graph(CaseBuilder& b) {
  Context& ctx = b.ctx();
  Tensor* x = b.input(Type::kF32, 64, 8);
  Tensor* w = b.input(Type::kQ8_0, 64, 16);
  Tensor* bias = b.input(Type::kF32, 16);
  if (!x) return nullptr;
  Tensor* x_rows = view_2d(ctx, x, 64, 4, x->nb[1], 2 * x->nb[1]);  // view of a leaf
  Tensor* y = mul_mat(ctx, w, x_rows);                              // [16, 4]
  Tensor* z = silu(ctx, add(ctx, y, bias));
  Tensor* zt = transpose(ctx, z);         // view of a node
  Tensor* c = cont(ctx, zt);              // [4, 16]
  Tensor* r = reshape_2d(ctx, c, 16, 4);  // view of a node
  Tensor* out = mul(ctx, r, y);
  if (out) set_name(*out, "copy_graph_out");
  return out;
}

}  // namespace

TEST_P(BackendConformance, GraphCopyCopiesDataAndViews) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const Graph& g = *src->graph;
  // Every tensor that owns memory gets data (nodes too: graph_copy copies all data, computed or not).
  std::vector<Tensor*> all(g.leafs());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  for (Tensor* t : all) {
    if (!is_view(*t)) {
      CONF_ASSERT_OK(fill_random(*t, rng_));
    }
  }
  auto copy = graph_copy(*backend_, g);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  const GraphCopy& gc = copy.value();
  ASSERT_NE(gc.graph, nullptr);
  ASSERT_EQ(gc.graph->n_nodes(), g.n_nodes());
  for (size_t i = 0; i < g.n_nodes(); ++i) EXPECT_EQ(gc.graph->node(i), gc.copy_of(g.node(i))) << "node " << i;
  for (Tensor* t : all) {
    SCOPED_TRACE(::testing::Message() << "tensor " << describe(*t) << " op " << op_name(t->op));
    Tensor* c = gc.copy_of(t);
    ASSERT_NE(c, nullptr);
    ASSERT_NE(c, t);
    EXPECT_TRUE(same_layout(*t, *c));
    EXPECT_EQ(c->op, t->op);
    EXPECT_STREQ(c->name, t->name);
    for (int s = 0; s < kMaxSrc; ++s) {
      if (t->src[s]) {
        EXPECT_EQ(c->src[s], gc.copy_of(t->src[s])) << "src " << s;
      }
    }
    EXPECT_EQ(is_view(*c), is_view(*t));
    if (is_view(*t)) {
      EXPECT_EQ(c->view_src, gc.copy_of(t->view_src)) << "a view must stay a view of the copied source";
      EXPECT_EQ(c->view_offs, t->view_offs);
    }
    Buffer* cb = tensor_buffer(*c);
    ASSERT_NE(cb, nullptr) << "copy not allocated";
    EXPECT_EQ(cb->type(), backend_->default_buffer_type()) << "copy not in the backend's memory";
    EXPECT_TRUE(BytesEqual(read_bytes(*t), read_bytes(*c))) << "data not copied";
  }
  // The copy computes on the backend like the original on the CPU.
  const auto unclaimed = unclaimed_nodes(*backend_, *gc.graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  ASSERT_EQ(backend_->graph_compute(*gc.graph), ComputeStatus::kSuccess) << backend_->last_error();
  ASSERT_EQ(cpu_->graph_compute(*src->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  EXPECT_TRUE(outputs_match(*src->out, *gc.copy_of(src->out), nmse_tolerance(factory(), *src->out)));
}

TEST_P(BackendConformance, CompareGraphBackendVisitsEveryNode) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *src->graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  for (auto& l : src->leafs) CONF_ASSERT_OK(fill_random(*l.tensor, rng_));
  const Graph& g = *src->graph;
  std::vector<size_t> expected;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    if (!op_is_view(g.node(i)->op)) expected.push_back(i);
  }
  ASSERT_GE(expected.size(), 4u);
  ASSERT_LT(expected.size(), g.n_nodes()) << "the graph must contain view nodes";
  std::vector<size_t> seen;
  Status s = compare_graph_backend(*cpu_, *backend_, g, [&](size_t i, Tensor& t1, Tensor& t2) {
    seen.push_back(i);
    EXPECT_LT(i, g.n_nodes());
    if (i < g.n_nodes()) {
      EXPECT_EQ(&t1, g.node(i)) << "t1 is the graph's own node";
    }
    EXPECT_NE(&t1, &t2);
    EXPECT_EQ(t1.op, t2.op);
    EXPECT_TRUE(same_layout(t1, t2));
    EXPECT_TRUE(outputs_match(t1, t2, nmse_tolerance(factory(), t2))) << "node " << i;
    return true;
  });
  CONF_EXPECT_OK(s);
  EXPECT_EQ(seen, expected) << "the callback must run once per non-view node, in graph order";
}

TEST_P(BackendConformance, CompareGraphBackendStopsEarly) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *src->graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  for (auto& l : src->leafs) CONF_ASSERT_OK(fill_random(*l.tensor, rng_));
  for (size_t stop_after : {size_t{1}, size_t{2}}) {
    size_t calls = 0;
    Status s = compare_graph_backend(*cpu_, *backend_, *src->graph, [&](size_t, Tensor&, Tensor&) {
      ++calls;
      return calls < stop_after;
    });
    CONF_EXPECT_OK(s) << "stopping is not an error";
    EXPECT_EQ(calls, stop_after) << "the walk must stop when the callback returns false";
  }
}

}  // namespace tessera::conformance
