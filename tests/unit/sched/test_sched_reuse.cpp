// Plan reuse (docs/scheduler.md, 'Reuse'): a graph allocated again with the same structure keeps the scheduler's
// plan and computes the same results as the CPU; every kind of structural change takes the full path, says why
// (node and field), and ends with the plan a fresh scheduler (reuse off) makes of the changed graph.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "support/sched_doubles.h"
#include "unit/sched/gpu_cpu_rig.h"
#include "unit/sched/sched_net.h"

using namespace tessera;
using namespace tessera::testnet;
using ::testing::HasSubstr;

namespace {

// GPU0 refuses ROPE and SOFT_MAX: every layer splits several times.

Tensor* node_named(const Graph& g, const std::string& name) {
  for (Tensor* t : g.nodes()) {
    if (name == t->name) return t;
  }
  for (Tensor* t : g.leafs()) {
    if (name == t->name) return t;
  }
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

// The plan as the scheduler shows it: each node's backend and cause, each split's backend, range and input count.
using Shot = std::tuple<std::vector<std::pair<int, Cause>>, std::vector<std::tuple<int, size_t, size_t, size_t>>>;
Shot shot(const Scheduler& s, const Graph& g) {
  Shot out;
  for (const Tensor* t : g.nodes()) {
    const TensorExplain e = s.explain(t);
    std::get<0>(out).emplace_back(e.backend, e.cause);
  }
  for (const auto& sp : s.splits()) std::get<1>(out).emplace_back(sp.backend, sp.i_start, sp.i_end, sp.inputs.size());
  return out;
}

class SchedReuse : public ::testing::TestWithParam<bool> {};  // parameter: parallel

SchedulerParams reuse_params(bool parallel, bool reuse = true) {
  SchedulerParams p = sched_params(parallel);
  p.reuse = reuse;
  return p;
}

}  // namespace

// The same graph evaluated again with new input values: the plan is kept (no split, no placement), the slot still
// rotates per allocation with pipelining, and every evaluation matches the CPU.
TEST_P(SchedReuse, SameGraphKeepsThePlanAndMatchesTheCpu) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 4); };
  Net n;
  n.finish(build(n), 3);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched(reuse_params(GetParam()));
  ASSERT_TRUE(s->reserve(n.graph).ok()) << s->last_error();
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_FALSE(s->plan_reuse().reused);
  const Shot first = shot(*s, n.graph);
  for (unsigned round = 0; round < 8; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    if (round > 0) {
      ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
      EXPECT_TRUE(s->plan_reuse().reused) << s->plan_reuse().why_not;
      EXPECT_TRUE(s->explain(node_named(n.graph, "q.1")).plan_reused);
    }
    EXPECT_EQ(s->current_slot(), GetParam() ? static_cast<int>(round % kParallelCopies) : 0);
    EXPECT_EQ(shot(*s, n.graph), first);
    expect_readable(*s, n.graph);
    n.set_inputs(20 + round);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 3, 20 + round));
  }
  // graph_compute of a computed graph allocates it again: reused too
  n.set_inputs(99);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_TRUE(s->plan_reuse().reused);
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 3, 99));
  EXPECT_EQ(s->plan_reuse().full_plans, 1);
  EXPECT_EQ(s->plan_reuse().reuses, 8);
  EXPECT_EQ(s->reserve_count(), 1);
  EXPECT_THAT(s->report(), HasSubstr("plan: reused, 8 reused / 1 planned"));
  s->reset();
  expect_sources_restored(n.graph, user_sources);
}

TEST_P(SchedReuse, OffSwitchPlansEveryAllocation) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 3);
  auto s = rig.sched(reuse_params(GetParam(), /*reuse=*/false));
  for (unsigned round = 0; round < 3; ++round) {
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    EXPECT_FALSE(s->plan_reuse().reused);
    EXPECT_EQ(s->plan_reuse().why_not, "reuse is off (SchedulerParams::reuse)");
    n.set_inputs(round);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 3, round));
  }
  EXPECT_EQ(s->plan_reuse().full_plans, 3);
  EXPECT_EQ(s->plan_reuse().reuses, 0);
}

namespace {

// One structural change: allocate and compute the graph, apply `change`, allocate again. The allocation must not
// reuse the plan, must say why (`why`: node and field), and must end with the plan that a fresh scheduler without
// reuse makes of the changed graph. `check` runs on the changed, allocated graph (optional).
struct Change {
  std::string why;
  std::function<void(Net&, Scheduler&, Rig2&)> change;
  std::function<void(Net&, Scheduler&)> check = {};
  std::function<void()> done = {};  // runs last, before the rig goes away (e.g. frees a buffer of the rig's type)
};

void expect_full_path(bool parallel, const Change& c) {
  Rig2 rig;
  struct Done {
    const Change& c;
    ~Done() {
      if (c.done) c.done();
    }
  } done{c};  // destroyed after the schedulers and the net, before the rig, on every path out
  // the stack, and a window of 16 values into its output (a view with room to move)
  const Build build = [&](Net& n) {
    std::vector<Tensor*> roots = layer_stack(n, {nullptr, &rig.gdev.buft()}, 3);
    Tensor* win = Net::named(view_1d(n.ctx, roots[0], 16, 0), "win");
    roots.push_back(n.output(scale(n.ctx, win, 1.0f), "win_out"));
    return roots;
  };
  Net n;
  n.finish(build(n), 5);
  auto s = rig.sched(reuse_params(parallel));
  for (unsigned round = 0; round < 2; ++round) {  // planned, then reused
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    n.set_inputs(7);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  }
  ASSERT_TRUE(s->plan_reuse().reused);
  c.change(n, *s, rig);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_FALSE(s->plan_reuse().reused) << "the change was ignored";
  EXPECT_THAT(s->plan_reuse().why_not, HasSubstr(c.why));
  EXPECT_THAT(s->report(), HasSubstr("plan: new (not reused: " + s->plan_reuse().why_not + ")"));
  if (c.check) c.check(n, *s);
  const Shot got = shot(*s, n.graph);
  expect_splits_cover(*s, n.graph);
  expect_readable(*s, n.graph);
  // The fresh plan of the changed graph, by a scheduler without reuse (the pins carried over).
  std::vector<std::pair<Tensor*, int>> pins;
  for (Tensor* t : n.graph.nodes()) {
    if (s->explain(t).cause == Cause::kPinned) pins.emplace_back(t, s->explain(t).backend);
  }
  s->reset();
  auto fresh = rig.sched(reuse_params(parallel, /*reuse=*/false));
  for (auto [t, b] : pins) ASSERT_TRUE(fresh->set_tensor_backend(t, fresh->backend(b)).ok());
  ASSERT_TRUE(fresh->alloc_graph(n.graph).ok()) << fresh->last_error();
  EXPECT_EQ(got, shot(*fresh, n.graph));
}

}  // namespace

TEST_P(SchedReuse, ChangedOpTakesTheFullPath) {
  // norm.1 becomes a SOFT_MAX, which GPU0 refuses: it must leave GPU0
  expect_full_path(GetParam(), {"node 'norm.1' (node ",
                                [](Net& n, Scheduler&, Rig2&) {
                                  Tensor* t = node_named(n.graph, "norm.1");
                                  t->op = Op::kSoftMax;  // (op_params as they were: only the op changes)
                                },
                                [](Net& n, Scheduler& s) {
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr(": op"));
                                  EXPECT_EQ(s.explain(node_named(n.graph, "norm.1")).backend, 1);
                                }});
}

TEST_P(SchedReuse, ChangedOpParameterTakesTheFullPath) {
  expect_full_path(GetParam(), {"): op_params", [](Net& n, Scheduler&, Rig2&) {
                                  set_op_param<float>(*node_named(n.graph, "sm.2"), 0, 0.25f);
                                }});
}

TEST_P(SchedReuse, ChangedShapeTakesTheFullPath) {
  // the window and its scale grow from 16 to 32 values: win_out needs a larger block (a re-plan), and a reused plan
  // would leave it in a block of 16
  int reserves_before = 0;
  expect_full_path(GetParam(), {"node 'win' (node ",
                                [&](Net& n, Scheduler& s, Rig2&) {
                                  for (const char* name : {"win", "win_out"}) {
                                    Tensor* t = node_named(n.graph, name);
                                    t->ne[0] = 32;
                                    for (int d = 1; d < kMaxDims; ++d)
                                      t->nb[d] = t->nb[d - 1] * static_cast<size_t>(t->ne[d - 1]);
                                  }
                                  reserves_before = s.reserve_count();
                                },
                                [&](Net&, Scheduler& s) {
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("ne (shape)"));
                                  EXPECT_GT(s.reserve_count(), reserves_before) << "win_out grew: planned again";
                                }});
}

TEST_P(SchedReuse, ChangedTypeTakesTheFullPath) {
  // layer 1's w1 (f16, in GPU0's memory) is read as q8_0 (1088 of its 2048 bytes)
  expect_full_path(GetParam(), {"leaf 'blk.1.w1' (leaf ",
                                [](Net& n, Scheduler&, Rig2&) {
                                  Tensor* w = node_named(n.graph, "blk.1.w1");
                                  w->type = Type::kQ8_0;
                                  w->nb[0] = 34;
                                  w->nb[1] = 34;  // one block of 32 per row
                                  for (int d = 2; d < kMaxDims; ++d)
                                    w->nb[d] = w->nb[d - 1] * static_cast<size_t>(w->ne[d - 1]);
                                },
                                [](Net&, Scheduler& s) { EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("type")); }});
}

TEST_P(SchedReuse, SourceReplacedByAnotherNodeTakesTheFullPath) {
  // res.2 adds res.0 instead of res.1, which it reads through a copy: a source pass 5 rewrote is replaced
  expect_full_path(GetParam(), {"node 'res.2' (node ", [](Net& n, Scheduler&, Rig2&) {
                                  node_named(n.graph, "res.2")->src[0] = node_named(n.graph, "res.0");
                                }});
}

TEST_P(SchedReuse, TensorReplacedByAnotherOfTheSameSizeTakesTheFullPath) {
  // q.0's weight (in CPU memory) is replaced by a tensor of the same type and shape in GPU0's memory: q.0 moves
  Tensor* moved = nullptr;
  std::unique_ptr<Buffer> buf;
  Context ctx{{.no_alloc = true}};
  expect_full_path(GetParam(), {"node 'q.0' (node ",
                                [&](Net& n, Scheduler&, Rig2& rig) {
                                  Tensor* q = node_named(n.graph, "q.0");
                                  Tensor* w = q->src[0];
                                  moved = ctx.new_tensor_2d(w->type, w->ne[0], w->ne[1]);
                                  set_name(*moved, "blk.0.w1.gpu");
                                  buf = std::move(rig.gdev.buft().alloc_buffer(nbytes(*moved) + 64)).value();
                                  buf->set_usage(BufferUsage::kWeights);
                                  ASSERT_TRUE(TensorAllocator(*buf).alloc(*moved).ok());
                                  q->src[0] = moved;
                                },
                                [&](Net& n, Scheduler& s) {
                                  EXPECT_EQ(s.explain(node_named(n.graph, "q.0")).backend, 0);
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("src[0]"));
                                },
                                [&] { buf.reset(); }});
}

// Identity is structure (docs/scheduler.md, "Why identity is structure"): the graph rebuilt in the same Graph with a
// new tensor of the same op, shape and sources at the last node's position. The new object has no address: a reused
// plan would leave it unplaced.
TEST_P(SchedReuse, NodeReplacedByAnotherObjectOfTheSameShapeTakesTheFullPath) {
  Tensor* fresh = nullptr;
  expect_full_path(GetParam(), {"node 'win_out' (node ",
                                [&](Net& n, Scheduler&, Rig2&) {
                                  // (node by node: the nodes read the scheduler's copies until it plans again)
                                  std::vector<Tensor*> nodes = n.graph.nodes(), leafs = n.graph.leafs();
                                  ASSERT_EQ(nodes.back(), node_named(n.graph, "win_out"));
                                  fresh = scale(n.ctx, node_named(n.graph, "win"), 1.0f);
                                  set_name(*fresh, "win_out");
                                  set_output(*fresh);
                                  nodes.back() = fresh;
                                  n.graph.clear();
                                  for (Tensor* t : leafs) ASSERT_TRUE(n.graph.add_leaf(t).ok());
                                  for (Tensor* t : nodes) ASSERT_TRUE(n.graph.add_node(t).ok());
                                },
                                [&](Net& n, Scheduler& s) {
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr(": another tensor"));
                                  EXPECT_EQ(node_named(n.graph, "win_out"), fresh);
                                  EXPECT_NE(fresh->data, nullptr) << "the new object is placed";
                                  EXPECT_GE(s.explain(fresh).backend, 0);
                                }});
}

// A weight replaced by another object of the same type and shape in the same kind of memory (CPU host): the
// placement would not change, but the copy that takes it to GPU0 must read the new one.
TEST_P(SchedReuse, WeightReplacedByAnotherInTheSameMemoryTakesTheFullPath) {
  Tensor* other = nullptr;
  Tensor* old = nullptr;
  std::unique_ptr<Buffer> buf;
  Context ctx{{.no_alloc = true}};
  expect_full_path(GetParam(), {"node 'q.0' (node ",
                                [&](Net& n, Scheduler&, Rig2&) {
                                  Tensor* q = node_named(n.graph, "q.0");
                                  old = q->src[0];
                                  other = ctx.new_tensor_2d(old->type, old->ne[0], old->ne[1]);
                                  set_name(*other, "blk.0.w1.other");
                                  buf = std::move(cpu::buffer_type()->alloc_buffer(nbytes(*other) + 64)).value();
                                  buf->set_usage(BufferUsage::kWeights);
                                  ASSERT_TRUE(TensorAllocator(*buf).alloc(*other).ok());
                                  q->src[0] = other;
                                },
                                [&](Net&, Scheduler& s) {
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("src[0]"));
                                  EXPECT_GE(s.explain(other).backend, 0) << "the plan reads the new weight";
                                  for (const auto& sp : s.splits()) {
                                    for (const Tensor* in : sp.inputs) EXPECT_NE(in, old) << "a copy of the old one";
                                  }
                                },
                                [&] { buf.reset(); }});
}

TEST_P(SchedReuse, ChangedViewOffsetTakesTheFullPath) {
  // the window starts 64 bytes later: its address must follow
  expect_full_path(GetParam(),
                   {"node 'win' (node ", [&](Net& n, Scheduler&, Rig2&) { node_named(n.graph, "win")->view_offs = 64; },
                    [&](Net& n, Scheduler& s) {
                      EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("view_offs"));
                      const Tensor* view = node_named(n.graph, "win");
                      ASSERT_NE(view->data, nullptr);
                      EXPECT_EQ(static_cast<char*>(view->data), static_cast<char*>(view->view_src->data) + 64);
                    }});
}

TEST_P(SchedReuse, ChangedFlagTakesTheFullPath) {
  expect_full_path(GetParam(),
                   {"node 'ffn.1' (node ", [](Net& n, Scheduler&, Rig2&) { set_output(*node_named(n.graph, "ffn.1")); },
                    [](Net&, Scheduler& s) { EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("flags")); }});
}

TEST_P(SchedReuse, ChangedPinTakesTheFullPath) {
  expect_full_path(GetParam(), {"a pin changed",
                                [](Net& n, Scheduler& s, Rig2&) {
                                  ASSERT_TRUE(s.set_tensor_backend(node_named(n.graph, "q.1"), s.backend(1)).ok());
                                },
                                [](Net& n, Scheduler& s) {
                                  EXPECT_EQ(s.explain(node_named(n.graph, "q.1")).backend, 1);
                                  EXPECT_EQ(s.explain(node_named(n.graph, "q.1")).cause, Cause::kPinned);
                                }});
}

TEST_P(SchedReuse, WeightMovedToAnotherBufferTakesTheFullPath) {
  // layer 0's w1 moves from CPU memory into GPU0's: q.0 follows its weight
  std::unique_ptr<Buffer> buf;
  expect_full_path(GetParam(), {"leaf 'blk.0.w1' (leaf ",
                                [&](Net& n, Scheduler&, Rig2& rig) {
                                  Tensor* w = node_named(n.graph, "blk.0.w1");
                                  buf = std::move(rig.gdev.buft().alloc_buffer(nbytes(*w) + 64)).value();
                                  buf->set_usage(BufferUsage::kWeights);
                                  w->buffer = nullptr;
                                  w->data = nullptr;
                                  ASSERT_TRUE(TensorAllocator(*buf).alloc(*w).ok());
                                },
                                [](Net& n, Scheduler& s) {
                                  EXPECT_THAT(s.plan_reuse().why_not, HasSubstr("buffer"));
                                  EXPECT_EQ(s.explain(node_named(n.graph, "q.0")).backend, 0);
                                },
                                [&] { buf.reset(); }});
}

TEST_P(SchedReuse, AnotherGraphTakesTheFullPath) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 2); };
  Net a, b;
  a.finish(build(a), 3);
  b.finish(build(b), 3);
  auto s = rig.sched(reuse_params(GetParam()));
  ASSERT_TRUE(s->alloc_graph(a.graph).ok()) << s->last_error();
  ASSERT_TRUE(s->alloc_graph(b.graph).ok()) << s->last_error();
  EXPECT_FALSE(s->plan_reuse().reused);
  EXPECT_EQ(s->plan_reuse().why_not, "another graph than the planned one (no plan of it in the cache)");
  ASSERT_TRUE(s->alloc_graph(b.graph).ok()) << s->last_error();
  EXPECT_TRUE(s->plan_reuse().reused);
  b.set_inputs(4);
  ASSERT_EQ(s->graph_compute(b.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(b.read_outputs(), cpu_reference(build, 3, 4));
}

INSTANTIATE_TEST_SUITE_P(SchedReuse, SchedReuse, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "parallel" : "serial"; });
