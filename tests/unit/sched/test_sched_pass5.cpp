// Pass 5 (docs/scheduler.md): splits and copies, with real data flowing through a restricted GPU-like backend
// (non-host buffer type backed by host memory) and the CPU, compared with the CPU-only result (bit-identical: the
// same reference kernels run everywhere).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "src/alloc/prefetch.h"
#include "support/sched_doubles.h"
#include "unit/sched/gpu_cpu_rig.h"
#include "unit/sched/sched_net.h"

using namespace tessera;
using namespace tessera::testnet;

namespace {

// Allocates, sets the inputs, computes and compares with the CPU-only reference.
void compute_and_compare(Scheduler& s, Net& n, const Build& build, unsigned wseed, unsigned iseed) {
  ASSERT_TRUE(s.alloc_graph(n.graph).ok()) << s.last_error();
  n.set_inputs(iseed);
  ASSERT_EQ(s.graph_compute(n.graph), ComputeStatus::kSuccess) << s.last_error() << "\n" << s.report();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, wseed, iseed));
}

// Names of the nodes (not views) of a split, and of its inputs.
std::vector<std::string> split_nodes(const Scheduler& s, const Graph& g, int k) {
  std::vector<std::string> out;
  const auto sp = s.splits()[static_cast<size_t>(k)];
  for (size_t i = sp.i_start; i < sp.i_end; ++i) {
    if (!op_is_view(g.node(i)->op)) out.emplace_back(g.node(i)->name);
  }
  return out;
}
std::vector<std::string> split_inputs(const Scheduler& s, int k) {
  std::vector<std::string> out;
  const auto splits = s.splits();
  for (const Tensor* t : splits[static_cast<size_t>(k)].inputs) out.emplace_back(t->name);
  return out;
}

using ::testing::ElementsAre;
using ::testing::IsEmpty;

}  // namespace

class SchedPass5Modes : public ::testing::TestWithParam<bool> {};  // parameter: parallel

// ---- a weight on an unusable buffer type forces a new split, but only when the split already has inputs ---------

// x -> n1 = W_gpu x -> n2 = W_cpu n1 (offloaded) -> n3 = W_cpu2 n2 (offloaded) -> out
static Build weight_chain(BufferType* g) {
  return [g](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    Tensor* x = n.input("x", 16, 4);
    Tensor* wg = n.weight("wg", 16, 16, g);
    Tensor* wc = n.weight("wc", 16, 16, nullptr);
    Tensor* wc2 = n.weight("wc2", 16, 16, nullptr);
    Tensor* n1 = Net::named(mul_mat(c, wg, x), "n1");
    Tensor* n2 = Net::named(mul_mat(c, wc, n1), "n2");
    Tensor* n3 = Net::named(mul_mat(c, wc2, n2), "n3");
    return {n.output(scale(c, n3, 0.5f), "out")};
  };
}

TEST_P(SchedPass5Modes, WeightOnUnusableBufferStartsASplitWhenTheSplitHasInputs) {
  Rig rig;
  rig.gdev.offload = [](const Tensor&) { return true; };  // take every op with a CPU host weight
  const Build build = weight_chain(rig.gbuf());
  Net n;
  n.finish(build(n), 5);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  ASSERT_EQ(s->n_splits(), 3) << s->report();
  for (int k = 0; k < 3; ++k) EXPECT_EQ(s->splits()[static_cast<size_t>(k)].backend, 0) << "split " << k;
  EXPECT_EQ(s->explain(find_node(n.graph, "n2")).cause, Cause::kOpOffload);
  // split 0 has an input (x), so n2's host weight starts split 1; split 1 has an input (wc), so n3 starts split 2
  EXPECT_THAT(split_nodes(*s, n.graph, 0), ElementsAre("n1"));
  EXPECT_THAT(split_inputs(*s, 0), ElementsAre("x"));
  EXPECT_THAT(split_nodes(*s, n.graph, 1), ElementsAre("n2"));
  EXPECT_THAT(split_inputs(*s, 1), ElementsAre("wc"));
  EXPECT_THAT(split_nodes(*s, n.graph, 2), ElementsAre("n3", "out"));
  EXPECT_THAT(split_inputs(*s, 2), ElementsAre("wc2"));
  expect_splits_cover(*s, n.graph);
  expect_inputs_foreign(*s, 30);
  expect_readable(*s, n.graph);
  for (unsigned eval = 0; eval < 3; ++eval) compute_and_compare(*s, n, build, 5, 40 + eval);
}

TEST_P(SchedPass5Modes, WeightDoesNotSplitASplitWithoutInputs) {
  Rig rig;
  rig.gdev.offload = [](const Tensor&) { return true; };
  const Build build = weight_chain(rig.gbuf());
  Net n;
  n.finish(build(n), 6);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->set_tensor_backend(n.inputs[0], rig.gpu.get()).ok());  // x on the GPU: split 0 starts without inputs
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  ASSERT_EQ(s->n_splits(), 2) << s->report();
  EXPECT_THAT(split_nodes(*s, n.graph, 0), ElementsAre("n1", "n2"));
  EXPECT_THAT(split_inputs(*s, 0), ElementsAre("wc"));
  EXPECT_THAT(split_nodes(*s, n.graph, 1), ElementsAre("n3", "out"));
  EXPECT_THAT(split_inputs(*s, 1), ElementsAre("wc2"));
  expect_splits_cover(*s, n.graph);
  expect_inputs_foreign(*s, 30);
  expect_readable(*s, n.graph);
  n.set_inputs(9);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 6, 9));
}

// ROPE frequency factors are an auxiliary weight: they never decide where the ROPE runs (pass 1), but on the CPU they
// start a split like any weight (ggml_backend_sched_split_graph checks every source in a weights buffer: llama.cpp
// master side by side, Llama 3.1 with CPU layers, 159 splits where Tessera had 145).
TEST_P(SchedPass5Modes, AuxiliaryWeightStartsASplitLikeAnyWeight) {
  Rig rig;
  const Build build = [&rig](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    Tensor* x = n.input("x", 16, 4);
    Tensor* pos = n.input("pos", 4, 1, 1, Type::kI32);
    Tensor* wg = n.weight("wg", 16, 16, rig.gbuf());
    Tensor* ff = n.weight_1d("rope_freqs", 8, nullptr);
    Tensor* a = Net::named(mul_mat(c, wg, x), "a");
    Tensor* r = Net::named(rope(c, reshape_3d(c, a, 16, 1, 4), pos, 16, RopeMode::kNormal, 10000.0f, 1.0f, ff), "r");
    return {n.output(scale(c, r, 3.0f), "out")};
  };
  Net n;
  n.finish(build(n), 8);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  ASSERT_EQ(s->n_splits(), 2) << s->report();
  EXPECT_EQ(s->splits()[0].backend, 0);
  EXPECT_EQ(s->splits()[1].backend, 0);
  EXPECT_EQ(s->splits()[1].reason, SplitReason::kWeightCopy);
  EXPECT_THAT(split_nodes(*s, n.graph, 0), ElementsAre("a"));
  EXPECT_THAT(split_nodes(*s, n.graph, 1), ElementsAre("r", "out"));
  EXPECT_THAT(split_inputs(*s, 0), ElementsAre("x"));
  EXPECT_THAT(split_inputs(*s, 1), ElementsAre("pos", "rope_freqs"));
  expect_inputs_foreign(*s, 30);
  expect_readable(*s, n.graph);
  n.set_inputs(3);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 8, 3));
}

// ---- the input limit, counted before adding ---------------------------------------------------------------------

// n_cpu per-layer tensors produced on the CPU (softmax, refused by the GPU) feed a chain of GPU nodes; the nodes
// bring 3 (flash attention q, k, v), 2 (mul) or 1 (add) new inputs, in turn.
static Build fan_in(BufferType* g, int n_cpu) {
  return [g, n_cpu](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    std::vector<Tensor*> roots, cs;
    for (int l = 0; l < n_cpu; ++l) {
      Tensor* in = n.input("in." + std::to_string(l), 16, 4);
      cs.push_back(Net::named(soft_max(c, in, nullptr, 1.0f + 0.1f * static_cast<float>(l)), "c." + std::to_string(l)));
      roots.push_back(cs.back());  // every CPU node first, so the GPU nodes form one run
    }
    Tensor* x = n.input("x", 16, 4);
    Tensor* wg = n.weight("wg", 16, 16, g);
    Tensor* h = Net::named(mul_mat(c, wg, x), "h0");
    int i = 0, kind = 0;
    while (i < n_cpu) {
      const int take = std::min(3 - kind % 3, n_cpu - i);
      ++kind;
      Tensor* t = nullptr;
      if (take == 3) {
        Tensor* fa = flash_attn_ext(c, cs[static_cast<size_t>(i)], cs[static_cast<size_t>(i) + 1],
                                    cs[static_cast<size_t>(i) + 2], nullptr, 0.25f);
        Net::named(fa, "fa." + std::to_string(i));
        t = reshape_3d(c, fa, 16, 4, 1);
      } else if (take == 2) {
        t = Net::named(mul(c, cs[static_cast<size_t>(i)], cs[static_cast<size_t>(i) + 1]), "m." + std::to_string(i));
      } else {
        t = cs[static_cast<size_t>(i)];
      }
      h = Net::named(add(c, h, t), "h." + std::to_string(i));
      i += take;
    }
    roots.push_back(n.output(scale(c, h, 0.5f), "out"));
    return roots;
  };
}

class SchedPass5Limit : public ::testing::TestWithParam<std::tuple<int, bool>> {};  // max_split_inputs, parallel

TEST_P(SchedPass5Limit, NoSplitExceedsTheLimitAndSplitsOnlyWhenTheNextNodeWouldOverflow) {
  const auto [max_inputs, parallel] = GetParam();
  Rig rig({Op::kSoftMax});
  const int n_cpu = 40;
  const Build build = fan_in(rig.gbuf(), n_cpu);
  Net n;
  n.finish(build(n), 2);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched(sched_params(parallel, max_inputs));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  expect_splits_cover(*s, n.graph);
  expect_inputs_foreign(*s, max_inputs);
  expect_readable(*s, n.graph);

  const auto splits = s->splits();
  ASSERT_GE(splits.size(), 2u);
  EXPECT_EQ(splits[0].backend, 1) << "the CPU nodes come first";
  EXPECT_THAT(splits[0].inputs, IsEmpty());
  std::set<std::string> gpu_inputs;
  size_t total = 0;
  for (size_t k = 1; k < splits.size(); ++k) {
    EXPECT_EQ(splits[k].backend, 0) << "split " << k;
    total += splits[k].inputs.size();
    for (const Tensor* t : splits[k].inputs) gpu_inputs.insert(t->name);
    if (k > 1) {
      // the split was cut only because the first node's new inputs did not fit in the previous one
      const Tensor* first = n.graph.node(splits[k].i_start);
      int brought = 0;
      for (const Tensor* src : user_sources[splits[k].i_start]) {
        if (src != nullptr &&
            std::find(splits[k].inputs.begin(), splits[k].inputs.end(), src) != splits[k].inputs.end()) {
          ++brought;
        }
      }
      EXPECT_GT(static_cast<int>(splits[k - 1].inputs.size()) + brought, max_inputs)
          << "split " << k << " starts at " << first->name << " although its " << brought << " new inputs fit in split "
          << k - 1 << " (" << splits[k - 1].inputs.size() << " inputs)";
    }
  }
  EXPECT_EQ(gpu_inputs.size(), static_cast<size_t>(n_cpu) + 1) << "x and every CPU tensor, each copied once";
  EXPECT_EQ(total, gpu_inputs.size());
  EXPECT_GE(static_cast<int>(splits.size()) - 1, (n_cpu + 1 + max_inputs - 1) / max_inputs);

  for (unsigned eval = 0; eval < 2; ++eval) {
    n.set_inputs(60 + eval);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 2, 60 + eval)) << "evaluation " << eval;
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  }
  s->reset();
  expect_sources_restored(n.graph, user_sources);
}

INSTANTIATE_TEST_SUITE_P(SchedPass5, SchedPass5Limit,
                         ::testing::Combine(::testing::Values(10, 11, 12, 13, 17, 30), ::testing::Bool()),
                         [](const auto& info) {
                           return "max" + std::to_string(std::get<0>(info.param)) +
                                  (std::get<1>(info.param) ? "_parallel" : "_serial");
                         });

// The plan recycles the lists of the splits it cut before (SchedPlan::recycle_splits): a scheduler that split a
// large graph with many inputs, then splits a smaller one, cuts exactly the splits a fresh scheduler cuts.
TEST(SchedPass5, SplitsOfAnEarlierGraphLeaveNothingBehind) {
  Rig rig({Op::kSoftMax});
  auto names = [](const Scheduler& s) {
    std::vector<std::string> out;
    for (const auto& sp : s.splits()) {
      std::string line =
          std::to_string(sp.backend) + " [" + std::to_string(sp.i_start) + ", " + std::to_string(sp.i_end) + "):";
      for (const Tensor* t : sp.inputs) line += std::string(" ") + t->name;
      out.push_back(line);
    }
    return out;
  };
  const Build big = fan_in(rig.gbuf(), 40), small = fan_in(rig.gbuf(), 7);
  Net nb, ns, ns_fresh;
  nb.finish(big(nb), 2);
  ns.finish(small(ns), 3);
  ns_fresh.finish(small(ns_fresh), 3);
  auto fresh = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(fresh->alloc_graph(ns_fresh.graph).ok()) << fresh->last_error();

  auto s = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(s->alloc_graph(nb.graph).ok()) << s->last_error();
  ASSERT_GT(s->n_splits(), fresh->n_splits());
  s->reset();
  ASSERT_TRUE(s->alloc_graph(ns.graph).ok()) << s->last_error();
  EXPECT_EQ(names(*s), names(*fresh));
  ns.set_inputs(9);
  ASSERT_EQ(s->graph_compute(ns.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(ns.read_outputs(), cpu_reference(small, 3, 9));
}

// On graphs whose Tensors outgrow the caches, index, pass 5, the planner and the planner's graph prefetch the Tensors
// they read (src/alloc/prefetch.h), and index asks the backends most capability questions up front. Neither changes a
// decision: with both forced on, the splits, causes, copies and planned sizes are those without, and the result is
// the CPU's. (It also runs those paths under the sanitizers, which no test graph is large enough to reach otherwise.)
TEST(SchedPass5, PrefetchingForLargeGraphsChangesNothing) {
  const detail::ScopedFarBytes guard(detail::far_bytes());  // (run sets it)
  for (const bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "serial");
    Rig rig({Op::kSoftMax});
    const Build build = fan_in(rig.gbuf(), 12);
    auto run = [&](size_t far) {
      detail::far_bytes() = far;
      Net n;
      n.finish(build(n), 6);
      auto s = rig.sched(sched_params(parallel, 10));
      Result<std::vector<size_t>> sizes = s->reserve_size(n.graph);
      EXPECT_TRUE(sizes.ok()) << sizes.status().message();
      EXPECT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
      // the report names tensors, not addresses: the two runs' graphs can be compared by it
      const std::string report = s->report();
      n.set_inputs(8);
      EXPECT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
      EXPECT_EQ(n.read_outputs(), cpu_reference(build, 6, 8));
      return std::make_pair(report, sizes.ok() ? *sizes : std::vector<size_t>{});
    };
    const auto without = run(SIZE_MAX);
    const auto with = run(0);
    EXPECT_GT(std::count(without.first.begin(), without.first.end(), '\n'), 10) << without.first;
    EXPECT_EQ(with.first, without.first);
    EXPECT_EQ(with.second, without.second);
  }
}

// A node that brings 3 new inputs to a split holding 9 of at most 10 starts a new split (the anchor only checked a
// full split, and took 12).
TEST(SchedPass5, NodeBringingSeveralInputsToANearlyFullSplitStartsANewOne) {
  Rig rig({Op::kSoftMax});
  const Build build = [&rig](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    std::vector<Tensor*> roots, cs;
    for (int l = 0; l < 11; ++l) {
      cs.push_back(Net::named(soft_max(c, n.input("in." + std::to_string(l), 16, 4)), "c." + std::to_string(l)));
      roots.push_back(cs.back());
    }
    Tensor* h = Net::named(mul_mat(c, n.weight("wg", 16, 16, rig.gbuf()), n.input("x", 16, 4)), "h0");  // +1: x
    for (int l = 0; l < 8; l += 2) h = Net::named(add(c, h, mul(c, cs[l], cs[l + 1])), "h." + std::to_string(l));  // +8
    Tensor* fa = Net::named(flash_attn_ext(c, cs[8], cs[9], cs[10], nullptr, 0.5f), "fa");                         // +3
    roots.push_back(n.output(add(c, h, reshape_3d(c, fa, 16, 4, 1)), "out"));
    return roots;
  };
  Net n;
  n.finish(build(n), 4);
  auto s = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  ASSERT_EQ(s->n_splits(), 3) << s->report();
  EXPECT_EQ(split_inputs(*s, 1).size(), 9u);
  EXPECT_THAT(split_nodes(*s, n.graph, 2), ElementsAre("fa", "out"));
  EXPECT_THAT(split_inputs(*s, 2), ElementsAre("c.8", "c.9", "c.10"));
  expect_inputs_foreign(*s, 10);
  n.set_inputs(5);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 4, 5));
}

// A source read twice by one node is one new input: a split holding 9 of 10 inputs takes the node.
TEST(SchedPass5, SourceReadTwiceByANodeCountsOnce) {
  Rig rig({Op::kSoftMax});
  const Build build = [&rig](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    std::vector<Tensor*> roots, cs;
    for (int l = 0; l < 9; ++l) {
      cs.push_back(Net::named(soft_max(c, n.input("in." + std::to_string(l), 16, 4)), "c." + std::to_string(l)));
      roots.push_back(cs.back());
    }
    Tensor* h = Net::named(mul_mat(c, n.weight("wg", 16, 16, rig.gbuf()), n.input("x", 16, 4)), "h0");  // +1: x
    for (int l = 0; l < 8; l += 2) h = Net::named(add(c, h, mul(c, cs[l], cs[l + 1])), "h." + std::to_string(l));  // +8
    Tensor* sq = Net::named(mul(c, cs[8], cs[8]), "sq");  // +1 (read twice)
    roots.push_back(n.output(add(c, h, sq), "out"));
    return roots;
  };
  Net n;
  n.finish(build(n), 4);
  auto s = rig.sched(sched_params(false, 10));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_EQ(s->n_splits(), 2) << "the CPU split and one GPU split\n" << s->report();
  if (s->n_splits() == 2) {
    EXPECT_EQ(split_inputs(*s, 1).size(), 10u);
  }
  expect_inputs_foreign(*s, 10);
  n.set_inputs(5);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 4, 5));
}

// ---- copies: reuse across splits, per-slot copies, graph inputs ---------------------------------------------------

TEST_P(SchedPass5Modes, CopyIsReusedByALaterSplitOnTheSameBackend) {
  const bool parallel = GetParam();
  Rig rig({Op::kSoftMax});
  const Build build = reuse_graph(rig.gbuf());
  Net n;
  n.finish(build(n), 11);
  auto s = rig.sched(sched_params(parallel));
  for (unsigned eval = 0; eval < 3; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    ASSERT_EQ(s->n_splits(), 4) << s->report();
    EXPECT_THAT(split_nodes(*s, n.graph, 0), ElementsAre("c"));
    EXPECT_THAT(split_inputs(*s, 0), IsEmpty());
    EXPECT_THAT(split_nodes(*s, n.graph, 1), ElementsAre("g1"));
    EXPECT_THAT(split_inputs(*s, 1), ElementsAre("c"));
    EXPECT_THAT(split_nodes(*s, n.graph, 2), ElementsAre("s"));
    EXPECT_THAT(split_inputs(*s, 2), ElementsAre("g1"));
    EXPECT_THAT(split_nodes(*s, n.graph, 3), ElementsAre("g2", "out"));
    EXPECT_THAT(split_inputs(*s, 3), ElementsAre("s")) << "c is already on the GPU: no second input";
    Tensor* g1 = find_node(n.graph, "g1");
    Tensor* g2 = find_node(n.graph, "g2");
    const int slot = s->current_slot();
    ASSERT_NE(g1->src[1], nullptr);
    EXPECT_EQ(g1->src[1], g2->src[1]) << "both GPU splits read the same copy of c";
    EXPECT_EQ(std::string(g1->src[1]->name), "GPU0#c#" + std::to_string(slot));
    const TensorExplain e = s->explain(g1->src[1]);
    EXPECT_TRUE(e.is_copy);
    EXPECT_EQ(e.backend, 0);
    EXPECT_EQ(e.cause, Cause::kCopy);
    EXPECT_EQ(std::string(find_node(n.graph, "s")->src[0]->name), "CPU#g1#" + std::to_string(slot));
    expect_splits_cover(*s, n.graph);
    expect_inputs_foreign(*s, 30);
    expect_readable(*s, n.graph);
    n.set_inputs(20 + eval);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 11, 20 + eval));
  }
}

TEST(SchedPass5, PerSlotCopiesWithParallel) {
  Rig rig({Op::kSoftMax});
  const Build build = reuse_graph(rig.gbuf());
  Net n;
  n.finish(build(n), 12);
  auto s = rig.sched(sched_params(true));
  EXPECT_EQ(s->n_copies(), kParallelCopies);
  Tensor* g1 = find_node(n.graph, "g1");
  Tensor* g2 = find_node(n.graph, "g2");
  Tensor* c = find_node(n.graph, "c");
  Tensor* x = n.inputs[0];
  std::vector<const void*> c_copy_data, x_copy_data;
  for (int eval = 0; eval < kParallelCopies + 1; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    const int slot = s->current_slot();
    EXPECT_EQ(slot, eval % kParallelCopies) << "each allocation takes the next slot";
    // the GPU copy of c for this slot
    const Tensor* cc = g1->src[1];
    EXPECT_EQ(std::string(cc->name), "GPU0#c#" + std::to_string(slot));
    EXPECT_EQ(g2->src[1], cc);
    EXPECT_EQ(cc->flags & (kFlagInput | kFlagOutput), 0)
        << "planned like any tensor (freed after its last reader), in its slot's own copy region";
    EXPECT_EQ(cc->type, c->type);
    for (int d = 0; d < kMaxDims; ++d) {
      EXPECT_EQ(cc->ne[d], c->ne[d]);
      EXPECT_EQ(cc->nb[d], c->nb[d]);
    }
    EXPECT_NE(tensor_buffer(*cc), nullptr);
    // x is a graph input: with parallel it gets per-slot copies on its own backend (the CPU), read by c; slot 0's is
    // x itself (llama.cpp's n_copies tensors per graph input, the original one of them)
    const Tensor* xc = c->src[0];
    EXPECT_EQ(xc->flags & (kFlagInput | kFlagOutput), kFlagInput | kFlagOutput);
    EXPECT_EQ(s->explain(xc).backend, 1);
    if (slot == 0) {
      EXPECT_EQ(xc, x);
      EXPECT_FALSE(s->explain(xc).is_copy);
    } else {
      EXPECT_EQ(std::string(xc->name), "CPU#x#" + std::to_string(slot));
      EXPECT_TRUE(s->explain(xc).is_copy);
      EXPECT_NE(xc, x);
    }
    if (eval < kParallelCopies) {
      c_copy_data.push_back(cc->data);
      x_copy_data.push_back(xc->data);
    } else {
      EXPECT_EQ(cc->data, c_copy_data[0]) << "slot 0 again: the same memory as the first evaluation";
      EXPECT_EQ(xc->data, x_copy_data[0]);
    }
    expect_readable(*s, n.graph);
    n.set_inputs(70 + static_cast<unsigned>(eval));
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 12, 70 + static_cast<unsigned>(eval)));
  }
  EXPECT_EQ(std::set<const void*>(c_copy_data.begin(), c_copy_data.end()).size(), static_cast<size_t>(kParallelCopies))
      << "each slot has its own copy of c";
  EXPECT_EQ(std::set<const void*>(x_copy_data.begin(), x_copy_data.end()).size(), static_cast<size_t>(kParallelCopies))
      << "each slot has its own copy of x";
}

TEST(SchedPass5, WithoutParallelOneCopyPerTensor) {
  Rig rig({Op::kSoftMax});
  const Build build = reuse_graph(rig.gbuf());
  Net n;
  n.finish(build(n), 12);
  auto s = rig.sched();
  EXPECT_EQ(s->n_copies(), 1);
  for (int eval = 0; eval < 3; ++eval) {
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    EXPECT_EQ(s->current_slot(), 0);
    EXPECT_EQ(std::string(find_node(n.graph, "g1")->src[1]->name), "GPU0#c#0");
    EXPECT_EQ(find_node(n.graph, "c")->src[0], n.inputs[0]) << "no graph-input copies without parallel";
  }
}

// With parallel, a graph input read by a GPU split: per-slot copies on the CPU (its own backend) and on the GPU.
TEST(SchedPass5, GraphInputReadByAnotherBackendWithParallel) {
  Rig rig;
  const Build build = weight_chain(rig.gbuf());  // x feeds n1 on the GPU
  Net n;
  n.finish(build(n), 13);
  auto s = rig.sched(sched_params(true));
  Tensor* n1 = find_node(n.graph, "n1");
  for (int eval = 0; eval < 2 * kParallelCopies; ++eval) {
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    const int slot = s->current_slot();
    EXPECT_EQ(std::string(n1->src[1]->name), "GPU0#x#" + std::to_string(slot));
    EXPECT_EQ(s->explain(n1->src[1]).backend, 0);
    EXPECT_THAT(split_inputs(*s, 0), ElementsAre("x")) << "the split input is the user's tensor, not a copy";
    n.set_inputs(90 + static_cast<unsigned>(eval));
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 13, 90 + static_cast<unsigned>(eval)));
  }
}

// A transposed view of a CPU tensor read by a GPU node: the copy keeps the view's layout.
TEST_P(SchedPass5Modes, StridedViewIsCopiedWithItsLayout) {
  Rig rig({Op::kSoftMax});
  const Build build = [&rig](Net& n) -> std::vector<Tensor*> {
    Context& c = n.ctx;
    Tensor* x = n.input("x", 8, 8);
    Tensor* sm = Net::named(soft_max(c, x), "sm");
    Tensor* t = Net::named(transpose(c, sm), "sm_t");
    Tensor* a = Net::named(mul_mat(c, n.weight("wg", 8, 8, rig.gbuf()), x), "a");
    Tensor* g = Net::named(add(c, a, t), "g");
    return {n.output(scale(c, g, 1.0f), "out")};
  };
  Net n;
  n.finish(build(n), 14);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  Tensor* g = find_node(n.graph, "g");
  const Tensor* tc = g->src[1];
  EXPECT_TRUE(s->explain(tc).is_copy) << tc->name;
  EXPECT_EQ(s->explain(tc).backend, 0);
  const Tensor* t = find_node(n.graph, "sm_t");
  for (int d = 0; d < kMaxDims; ++d) {
    EXPECT_EQ(tc->ne[d], t->ne[d]);
    EXPECT_EQ(tc->nb[d], t->nb[d]);
  }
  expect_splits_cover(*s, n.graph);
  expect_inputs_foreign(*s, 30);
  expect_readable(*s, n.graph);
  n.set_inputs(15);
  ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, 14, 15));
}

// ---- splits cover the graph; inputs are foreign --------------------------------------------------------------

TEST_P(SchedPass5Modes, SplitsCoverTheGraphInOrderWithThreeBackends) {
  const bool parallel = GetParam();
  doubles::RestrictedDevice d0("GPU0"), d1("GPU1");
  d0.refused = {Op::kRope};
  d1.refused = {Op::kSoftMax};
  auto g0 = std::move(d0.init_backend()).value();
  auto g1 = std::move(d1.init_backend()).value();
  auto cpu = cpu::make_backend({.n_threads = 1});
  const Build build = [&](Net& n) { return layer_stack(n, {&d0.buft(), &d1.buft(), nullptr}, 6); };
  Net n;
  n.finish(build(n), 21);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = Scheduler::create({g0.get(), g1.get(), cpu.get()}, sched_params(parallel));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE((*s)->alloc_graph(n.graph).ok()) << (*s)->last_error();
  EXPECT_GE((*s)->n_splits(), 6) << (*s)->report();
  std::set<int> used;
  for (const auto& sp : (*s)->splits()) used.insert(sp.backend);
  EXPECT_EQ(used.size(), 3u) << "every backend runs something\n" << (*s)->report();
  expect_splits_cover(**s, n.graph);
  expect_inputs_foreign(**s, 30);
  expect_readable(**s, n.graph);
  // views take the split of the node before them (or split 0)
  for (size_t i = 0; i < n.graph.n_nodes(); ++i) {
    if (op_is_view(n.graph.node(i)->op)) {
      EXPECT_GE((*s)->explain(n.graph.node(i)).split, 0) << n.graph.node(i)->name;
    }
  }
  for (unsigned eval = 0; eval < 2; ++eval) {
    if (eval > 0) {
      ASSERT_TRUE((*s)->alloc_graph(n.graph).ok()) << (*s)->last_error();
    }
    n.set_inputs(30 + eval);
    ASSERT_EQ((*s)->graph_compute(n.graph), ComputeStatus::kSuccess) << (*s)->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 21, 30 + eval));
  }
  (*s)->reset();
  expect_sources_restored(n.graph, user_sources);
}

INSTANTIATE_TEST_SUITE_P(SchedPass5, SchedPass5Modes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "parallel" : "serial"; });
