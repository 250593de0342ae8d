// The planner's ggml-alloc rules (GraphPlanner::set_free_inputs, set_ggml_inplace, Packing::kOnline), which `tessera
// compare-log` plans with to predict llama.cpp's compute buffers, and the scheduler parameters that set them
// (SchedulerParams:: free_inputs, online_packing). Overlaps are judged by planner_check.h, which does not use the
// planner's code.
#include <gtest/gtest.h>

#include "support/planner_check.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/sched.h"

using namespace tessera;

namespace {

std::string planned_overlap(const Graph& g, const GraphPlanner& ga) {
  return check::find_overlap(g, [&](const Tensor* t) { return ga.owns(tensor_buffer(*t)); });
}

// An input read by the first node only, then a large node: ggml-alloc frees the input after its reader, so the large
// node may take its memory; Tessera's own rule keeps every input for the whole evaluation.
struct EarlyInput {
  Context ctx{{.no_alloc = true}};
  Graph g;
  Tensor* in = nullptr;
  Tensor* r = nullptr;
  Tensor* big = nullptr;
  Tensor* out = nullptr;
  EarlyInput() {
    in = ctx.new_tensor_1d(Type::kF32, 1024);  // 4 KiB
    set_input(*in);
    Tensor* s = sum_rows(ctx, in);  // [1]: the input's only reader
    r = ctx.new_tensor_1d(Type::kF32, 1024);
    set_input(*r);
    big = scale(ctx, r, 2.0f);  // 4 KiB, computed after the first input is dead
    out = add(ctx, big, s);
    set_output(*out);
    EXPECT_TRUE(g.build_forward(out).ok());
  }
};

TEST(PlannerGgmlRules, FreedInputsLeaveTheirMemoryToLaterNodes) {
  const size_t align = cpu::buffer_type()->alignment();
  const size_t kib4 = (4096 + align - 1) / align * align, one = (4 + align - 1) / align * align;
  for (bool free_inputs : {false, true}) {
    SCOPED_TRACE(free_inputs);
    EarlyInput e;
    GraphPlanner ga(cpu::buffer_type());
    ga.set_packing(GraphPlanner::Packing::kOnline);
    ga.set_free_inputs(free_inputs);
    EXPECT_EQ(ga.free_inputs(), free_inputs);
    auto sizes = ga.reserve_size(e.g);
    ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
    // in and r (inputs, placed first), s, then big and out (in place of big). With free_inputs big reuses an input's
    // block (in's, dead after s, or r's in place: its last reader is big); without, it needs one of its own.
    EXPECT_EQ((*sizes)[0], free_inputs ? 2 * kib4 + one : 3 * kib4 + one);
    ASSERT_TRUE(ga.alloc_graph(e.g).ok());
    if (free_inputs) {
      EXPECT_TRUE(e.big->data == e.in->data || e.big->data == e.r->data);
    } else {
      EXPECT_TRUE(e.big->data != e.in->data && e.big->data != e.r->data);
    }
    EXPECT_EQ(planned_overlap(e.g, ga), "");
  }
}

// OUTPUT tensors stay pinned with free_inputs; an INPUT that is also an OUTPUT too.
TEST(PlannerGgmlRules, OutputsStayPinnedWhenInputsAreFreed) {
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 256);
  set_input(*x);
  set_output(*x);
  Tensor* a = scale(ctx, x, 2.0f);  // could compute in place of x, were it not an output
  set_output(*a);
  Tensor* b = silu(ctx, a);  // could compute in place of a, were it not an output
  Graph g;
  ASSERT_TRUE(g.build_forward(b).ok());
  GraphPlanner ga(cpu::buffer_type());
  ga.set_free_inputs(true);
  ASSERT_TRUE(ga.alloc_graph(g).ok());
  EXPECT_NE(a->data, x->data);
  EXPECT_NE(b->data, a->data);
  EXPECT_NE(b->data, x->data);
  EXPECT_EQ(planned_overlap(g, ga), "");
}

// ggml-alloc's in-place rule: of two sources that qualify, the first (ggml_gallocr_allocate_node walks node->src in
// order and takes the first); the planner's own rule takes the one at the lower address. Here the second source, b,
// was placed first, so it is the lower one.
TEST(PlannerGgmlRules, InPlaceTakesTheFirstSourceThatQualifies) {
  for (bool ggml : {false, true}) {
    SCOPED_TRACE(ggml);
    Context ctx({.no_alloc = true});
    Tensor* x = ctx.new_tensor_1d(Type::kF32, 256);
    set_input(*x);
    Tensor* b = scale(ctx, x, 2.0f);  // placed first: the lower block
    Tensor* a = scale(ctx, x, 3.0f);  // placed second
    Tensor* c = add(ctx, a, b);       // both sources die here, same layout
    Tensor* d = sum_rows(ctx, c);
    set_output(*d);
    Graph g;
    ASSERT_TRUE(g.build_forward(b).ok());  // b computed (and placed) before a
    ASSERT_TRUE(g.build_forward(d).ok());
    GraphPlanner ga(cpu::buffer_type());
    ga.set_packing(GraphPlanner::Packing::kOnline);
    ga.set_ggml_inplace(ggml);
    EXPECT_EQ(ga.ggml_inplace(), ggml);
    ASSERT_TRUE(ga.alloc_graph(g).ok());
    ASSERT_LT(b->data, a->data);
    EXPECT_EQ(c->data, ggml ? a->data : b->data);
    EXPECT_EQ(planned_overlap(g, ga), "");
  }
}

// A view is never taken in place with ggml's rule: ggml asks ggml_gallocr_is_own of the source, and a view is never
// allocated itself. llama.cpp's ROPE of a reshaped Q or K product gets a block of its own so (the planner's own rule
// computes it in the product's block), which is one activation per GPU compute buffer in its logs.
struct ReshapedProduct {
  Context ctx{{.no_alloc = true}};
  Graph g;
  Tensor* m = nullptr;
  Tensor* n = nullptr;
  ReshapedProduct() {
    Tensor* x = ctx.new_tensor_1d(Type::kF32, 256);  // 1 KiB
    set_input(*x);
    m = scale(ctx, x, 2.0f);                 // the product
    Tensor* v = reshape_2d(ctx, m, 16, 16);  // its only use
    n = scale(ctx, v, 3.0f);                 // same layout as the view
    Tensor* out = sum_rows(ctx, n);
    set_output(*out);
    EXPECT_TRUE(g.build_forward(out).ok());
  }
};

TEST(PlannerGgmlRules, AViewIsNeverTakenInPlace) {
  const size_t align = cpu::buffer_type()->alignment();
  const size_t one = (64 + align - 1) / align * align;  // sum_rows: 16 floats
  for (bool ggml : {false, true}) {
    SCOPED_TRACE(ggml);
    ReshapedProduct r;
    GraphPlanner ga(cpu::buffer_type());
    ga.set_packing(GraphPlanner::Packing::kOnline);
    ga.set_ggml_inplace(ggml);
    auto sizes = ga.reserve_size(r.g);
    ASSERT_TRUE(sizes.ok()) << sizes.status().to_string();
    // x and m, and n in m's block (the sums then in a block of their own), or in one of its own (the sums then in m's,
    // free once n is computed)
    EXPECT_EQ((*sizes)[0], ggml ? 3 * 1024 : 2 * 1024 + one);
    ASSERT_TRUE(ga.alloc_graph(r.g).ok());
    EXPECT_EQ(r.n->data == r.m->data, !ggml);
    EXPECT_EQ(planned_overlap(r.g, ga), "");
  }
}

// The compute bytes a scheduler with parameters p over one CPU backend reserves for g (0 on a failure, reported).
size_t cpu_reserve_size(const SchedulerParams& p, Graph& g) {
  std::unique_ptr<Backend> cpu_backend = cpu::make_backend({.n_threads = 1});
  auto s = Scheduler::create({cpu_backend.get()}, p);
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return 0;
  auto sz = s.value()->reserve_size(g);
  EXPECT_TRUE(sz.ok()) << sz.status().to_string();
  return sz.ok() ? sz.value().at(0) : 0;
}

// ...and SchedulerParams::ggml_inplace reaches the scheduler's planner.
TEST(PlannerGgmlRules, SchedulerParamsSetTheInPlaceRule) {
  size_t sizes[2] = {0, 0};
  for (bool ggml : {false, true}) {
    ReshapedProduct r;
    SchedulerParams p;
    p.online_packing = true;
    p.ggml_inplace = ggml;
    sizes[ggml ? 1 : 0] = cpu_reserve_size(p, r.g);
  }
  const size_t align = cpu::buffer_type()->alignment();
  EXPECT_EQ(sizes[0], 2 * 1024 + (64 + align - 1) / align * align);
  EXPECT_EQ(sizes[1], 3 * 1024u);
}

// The scheduler's parameters reach its planner: the same graph, split over one backend, needs less with free_inputs.
TEST(PlannerGgmlRules, SchedulerParamsSetThem) {
  size_t sizes[2] = {0, 0};
  for (bool ggml : {false, true}) {
    EarlyInput e;
    SchedulerParams p;
    p.online_packing = ggml;
    p.free_inputs = ggml;
    sizes[ggml ? 1 : 0] = cpu_reserve_size(p, e.g);
  }
  EXPECT_GT(sizes[1], 0u);
  EXPECT_LT(sizes[1], sizes[0]);
}

}  // namespace
