// The planner's ggml-alloc rules (GraphPlanner::set_free_inputs, Packing::kOnline), which `tessera compare-log` plans
// with to predict llama.cpp's compute buffers, and the scheduler parameters that set them (SchedulerParams::
// free_inputs, online_packing). Overlaps are judged by planner_check.h, which does not use the planner's code.
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

// The scheduler's parameters reach its planner: the same graph, split over one backend, needs less with free_inputs.
TEST(PlannerGgmlRules, SchedulerParamsSetThem) {
  std::unique_ptr<Backend> cpu_backend = cpu::make_backend({.n_threads = 1});
  size_t sizes[2] = {0, 0};
  for (bool ggml : {false, true}) {
    EarlyInput e;
    SchedulerParams p;
    p.online_packing = ggml;
    p.free_inputs = ggml;
    auto s = Scheduler::create({cpu_backend.get()}, p);
    ASSERT_TRUE(s.ok()) << s.status().to_string();
    auto r = s.value()->reserve_size(e.g);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    sizes[ggml ? 1 : 0] = r.value().at(0);
  }
  EXPECT_LT(sizes[1], sizes[0]);
}

}  // namespace
