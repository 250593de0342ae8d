// The scheduler's lifecycle (docs/scheduler.md): reserve / alloc / compute / reset sequences, user pins, dry runs, slot
// rotation, allocation failures, explain and report, and execution over 2-3 backends with events, always with real
// data compared with the CPU-only result (bit-identical: the same reference kernels run everywhere).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <sstream>

#include "support/sched_doubles.h"
#include "unit/sched/gpu_cpu_rig.h"
#include "unit/sched/sched_net.h"

using namespace tessera;
using namespace tessera::testnet;
using ::testing::HasSubstr;

namespace {

// GPU0 (refusing ROPE and SOFT_MAX, so every layer splits several times) and the CPU.

// [GPU0 (refuses ROPE), GPU1 (refuses SOFT_MAX), CPU].
struct Rig3 {
  doubles::RestrictedDevice d0, d1;
  std::unique_ptr<Backend> g0, g1;
  std::unique_ptr<Backend> cpu = cpu::make_backend({.n_threads = 2});
  explicit Rig3(bool events = false) : d0("GPU0", events), d1("GPU1", events) {
    d0.refused = {Op::kRope};
    d1.refused = {Op::kSoftMax};
    g0 = std::move(d0.init_backend()).value();
    g1 = std::move(d1.init_backend()).value();
  }
  std::unique_ptr<Scheduler> sched(SchedulerParams p = {}) {
    auto s = Scheduler::create({g0.get(), g1.get(), cpu.get()}, std::move(p));
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? std::move(s).value() : nullptr;
  }
};

// Sets the inputs (the graph must be allocated), computes and compares with the CPU-only reference.
void set_compute_compare(Scheduler& s, Net& n, const Build& build, unsigned wseed, unsigned iseed) {
  n.set_inputs(iseed);
  ASSERT_EQ(s.graph_compute(n.graph), ComputeStatus::kSuccess) << s.last_error();
  EXPECT_EQ(n.read_outputs(), cpu_reference(build, wseed, iseed));
}

}  // namespace

class SchedulerLifecycleModes : public ::testing::TestWithParam<bool> {};  // parameter: parallel

// ---- reserve / alloc / compute / reset ----------------------------------------------------------------------

TEST_P(SchedulerLifecycleModes, ReserveAllocComputeResetCompute) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 4); };
  Net n;
  n.finish(build(n), 3);
  // the inputs live in the user's own buffer, so they can be set while the graph is not allocated (after reset)
  auto inbuf = cpu::buffer_type()->alloc_buffer(4096);
  ASSERT_TRUE(inbuf.ok());
  TensorAllocator ta(**inbuf);
  for (Tensor* in : n.inputs) ASSERT_TRUE(ta.alloc(*in).ok());
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->reserve(n.graph).ok()) << s->last_error();
  EXPECT_EQ(s->reserve_count(), 1);
  expect_sources_restored(n.graph, user_sources);  // reserve resets
  for (int round = 0; round < 3; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    set_compute_compare(*s, n, build, 3, 10 + static_cast<unsigned>(round));
    s->reset();
    expect_sources_restored(n.graph, user_sources);
    EXPECT_EQ(s->n_splits(), 0);
    EXPECT_EQ(s->explain(find_node(n.graph, "q.1")).backend, -1) << "reset clears the assignments";
    // compute on the reset (unallocated) graph allocates it
    n.set_inputs(50 + static_cast<unsigned>(round));
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 3, 50 + static_cast<unsigned>(round)));
    EXPECT_GT(s->n_splits(), 4);
    s->reset();
  }
  EXPECT_EQ(s->reserve_count(), 1) << "nothing changed: no re-reserve";
}

TEST_P(SchedulerLifecycleModes, UserPinsSurviveReserveWithoutReReserve) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 3); };
  Net n;
  n.finish(build(n), 4);
  auto s = rig.sched(sched_params(GetParam()));
  Tensor* ffn1 = find_node(n.graph, "ffn.1");  // would run on the GPU
  Tensor* res2 = find_node(n.graph, "res.2");
  ASSERT_TRUE(s->set_tensor_backend(ffn1, rig.cpu.get()).ok());
  ASSERT_TRUE(s->set_tensor_backend(res2, rig.cpu.get()).ok());
  EXPECT_EQ(s->get_tensor_backend(ffn1), rig.cpu.get());
  ASSERT_TRUE(s->reserve(n.graph).ok()) << s->last_error();
  // the anchor wiped the pins in reserve, so every following evaluation saw changed assignments and re-reserved
  EXPECT_EQ(s->get_tensor_backend(ffn1), rig.cpu.get()) << "reserve keeps the user's pins";
  EXPECT_EQ(s->explain(ffn1).cause, Cause::kPinned);
  const int reserves = s->reserve_count();
  for (unsigned eval = 0; eval < 5; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    EXPECT_EQ(s->explain(ffn1).backend, 1);
    EXPECT_EQ(s->explain(ffn1).cause, Cause::kPinned);
    EXPECT_EQ(s->explain(res2).backend, 1);
    expect_readable(*s, n.graph);
    set_compute_compare(*s, n, build, 4, 20 + eval);
    EXPECT_EQ(s->reserve_count(), reserves) << "pins kept by reserve: no re-reserve";
  }
}

TEST(SchedulerLifecycle, NoReReserveReportedWithDebugSwitch) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 4);
  SchedulerParams p = sched_params(false);
  p.debug_reserve = true;
  auto s = rig.sched(p);
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "ffn.0"), rig.cpu.get()).ok());
  ASSERT_TRUE(s->reserve(n.graph).ok());
  for (unsigned eval = 0; eval < 3; ++eval) {
    ::testing::internal::CaptureStderr();
    const Status st = s->alloc_graph(n.graph);
    EXPECT_EQ(::testing::internal::GetCapturedStderr(), "") << "no re-reserve expected";
    ASSERT_TRUE(st.ok()) << st.message();
    set_compute_compare(*s, n, build, 4, 30 + eval);
  }
  // a pin moving a node to another buffer type is a reason to re-reserve, and is reported
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "ffn.1"), rig.cpu.get()).ok());
  ::testing::internal::CaptureStderr();
  const Status st = s->alloc_graph(n.graph);
  EXPECT_THAT(::testing::internal::GetCapturedStderr(), HasSubstr("re-reserve"));
  ASSERT_TRUE(st.ok()) << st.message();
  set_compute_compare(*s, n, build, 4, 33);
}

TEST_P(SchedulerLifecycleModes, ResetClearsPinsAndRestoresSources) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 5);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched(sched_params(GetParam()));
  Tensor* q1 = find_node(n.graph, "q.1");
  ASSERT_TRUE(s->set_tensor_backend(q1, rig.cpu.get()).ok());
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_EQ(s->explain(q1).cause, Cause::kPinned);
  EXPECT_EQ(s->explain(q1).backend, 1);
  bool reads_copy = false;
  for (Tensor* node : n.graph.nodes()) {
    for (Tensor* src : node->src) reads_copy |= src != nullptr && s->explain(src).is_copy;
  }
  EXPECT_TRUE(reads_copy) << "while allocated, nodes read the scheduler's copies";
  set_compute_compare(*s, n, build, 5, 1);
  s->reset();
  EXPECT_EQ(s->get_tensor_backend(q1), nullptr) << "reset clears the pins";
  EXPECT_EQ(s->explain(q1).cause, Cause::kUnassigned);
  expect_sources_restored(n.graph, user_sources);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_EQ(s->explain(q1).backend, 0) << "back on the GPU, where its weight is";
  EXPECT_EQ(s->explain(q1).cause, Cause::kWeight);
  set_compute_compare(*s, n, build, 5, 2);
  s->reset();
  expect_sources_restored(n.graph, user_sources);
}

TEST_P(SchedulerLifecycleModes, SameGraphSplitReservedAndComputedManyTimes) {
  Rig3 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 3); };
  Net n;
  n.finish(build(n), 6);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched(sched_params(GetParam()));
  for (unsigned round = 0; round < 6; ++round) {
    SCOPED_TRACE("round " + std::to_string(round));
    ASSERT_TRUE(s->reserve(n.graph).ok()) << s->last_error();
    expect_sources_restored(n.graph, user_sources);
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    expect_splits_cover(*s, n.graph);
    expect_inputs_foreign(*s, 30);
    set_compute_compare(*s, n, build, 6, 100 + round);
    if (round % 2 == 1) s->reset();
  }
  EXPECT_EQ(s->reserve_count(), 6);
  s->reset();
  expect_sources_restored(n.graph, user_sources);
}

TEST_P(SchedulerLifecycleModes, ReserveTwiceThenCompute) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 3); };
  Net n;
  n.finish(build(n), 7);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->reserve(n.graph).ok());
  ASSERT_TRUE(s->reserve(n.graph).ok());
  EXPECT_EQ(s->reserve_count(), 2);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  set_compute_compare(*s, n, build, 7, 3);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  set_compute_compare(*s, n, build, 7, 4);
  EXPECT_EQ(s->reserve_count(), 2);
}

// Two different graphs through one scheduler, alternately: each allocation re-splits, and results stay right.
TEST_P(SchedulerLifecycleModes, TwoGraphsAlternately) {
  Rig2 rig;
  const Build small = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft(), nullptr}, 2, 4); };
  const Build large = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 3, 8); };
  Net a, b;
  a.finish(small(a), 8);
  b.finish(large(b), 9);
  const SourceSnapshot sa = snapshot_sources(a.graph), sb = snapshot_sources(b.graph);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->reserve(b.graph).ok());
  for (unsigned round = 0; round < 3; ++round) {
    ASSERT_TRUE(s->alloc_graph(a.graph).ok()) << s->last_error();
    set_compute_compare(*s, a, small, 8, round);
    expect_sources_restored(b.graph, sb);
    ASSERT_TRUE(s->alloc_graph(b.graph).ok()) << s->last_error();
    set_compute_compare(*s, b, large, 9, round);
    expect_sources_restored(a.graph, sa);
  }
}

// The same, without reserving the larger graph first: its allocation grows the compute buffers (a re-reserve) while
// the smaller graph's tensors are still placed in the old ones; coming back to the smaller graph must work. Run in a
// child process (a use-after-free of a replaced compute buffer would take the whole test binary down).
static void growing_graphs_alternately(bool parallel) {
  Rig2 rig;
  const Build small = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft(), nullptr}, 2, 4); };
  const Build large = [&](Net& n) { return layer_stack(n, {nullptr, &rig.gdev.buft()}, 3, 16); };
  Net a, b;
  a.finish(small(a), 8);
  b.finish(large(b), 9);
  auto s = rig.sched(sched_params(parallel));
  for (unsigned round = 0; round < 2; ++round) {
    for (int which = 0; which < 2; ++which) {
      Net& n = which == 0 ? a : b;
      Status st = s->alloc_graph(n.graph);
      if (!st.ok()) {
        std::fprintf(stderr, "round %u, graph %c: alloc_graph: %s\n", round, which == 0 ? 'a' : 'b',
                     st.message().c_str());
        std::exit(1);
      }
      n.set_inputs(round);
      if (s->graph_compute(n.graph) != ComputeStatus::kSuccess) {
        std::fprintf(stderr, "round %u, graph %c: compute: %s\n", round, which == 0 ? 'a' : 'b',
                     s->last_error().c_str());
        std::exit(2);
      }
      if (n.read_outputs() != cpu_reference(which == 0 ? small : large, which == 0 ? 8 : 9, round)) {
        std::fprintf(stderr, "round %u, graph %c: wrong result\n", round, which == 0 ? 'a' : 'b');
        std::exit(3);
      }
    }
  }
  std::exit(0);
}

TEST_P(SchedulerLifecycleModes, GrowingGraphsAlternately) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(growing_graphs_alternately(GetParam()), ::testing::ExitedWithCode(0), "")
      << "a graph placed in compute buffers that a later re-reserve replaced";
}

// A re-reserve caused by an assignment change (a new pin) after the graph was allocated and computed: the compute
// buffer of the CPU grows while the graph's tensors are still placed in the old one.
TEST_P(SchedulerLifecycleModes, ReReserveAfterANewPinOnAnAllocatedGraph) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 3); };
  Net n;
  n.finish(build(n), 22);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  set_compute_compare(*s, n, build, 22, 1);
  const int reserves = s->reserve_count();
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "ffn.1"), rig.cpu.get()).ok());
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "q.2"), rig.cpu.get()).ok());
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  EXPECT_EQ(s->reserve_count(), reserves + 1) << "an assignment moved to another buffer type";
  EXPECT_EQ(s->explain(find_node(n.graph, "ffn.1")).backend, 1);
  set_compute_compare(*s, n, build, 22, 2);
}

// ---- reserve_size, slot rotation, compute without alloc ------------------------------------------------------

TEST(SchedulerLifecycle, ReserveSizeIsADryRunWithPerBackendSizes) {
  Rig3 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 3); };
  const Build bigger = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 3, 16); };
  Net n, big;
  n.finish(build(n), 10);
  big.finish(bigger(big), 10);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  auto s = rig.sched();
  const int live0 = rig.d0.buft().live, live1 = rig.d1.buft().live;
  auto sizes = s->reserve_size(n.graph);
  ASSERT_TRUE(sizes.ok()) << sizes.status().message();
  ASSERT_EQ(sizes->size(), 3u);
  for (int b = 0; b < 3; ++b) {
    EXPECT_GT((*sizes)[static_cast<size_t>(b)], 0u) << "backend " << b;
    EXPECT_EQ(s->buffer_size(b), 0u) << "a dry run allocates nothing";
  }
  EXPECT_EQ(rig.d0.buft().live, live0);
  EXPECT_EQ(rig.d1.buft().live, live1);
  EXPECT_EQ(s->reserve_count(), 0);
  EXPECT_EQ(s->n_splits(), 0);
  expect_sources_restored(n.graph, user_sources);

  ASSERT_TRUE(s->reserve(n.graph).ok());
  std::vector<size_t> reserved;
  for (int b = 0; b < 3; ++b) {
    reserved.push_back(s->buffer_size(b));
    EXPECT_EQ(reserved.back(), (*sizes)[static_cast<size_t>(b)]) << "reserve allocates what the dry run planned";
  }
  auto big_sizes = s->reserve_size(big.graph);
  ASSERT_TRUE(big_sizes.ok());
  for (int b = 0; b < 3; ++b) {
    EXPECT_GT((*big_sizes)[static_cast<size_t>(b)], reserved[static_cast<size_t>(b)]) << "16 tokens need more";
    EXPECT_EQ(s->buffer_size(b), reserved[static_cast<size_t>(b)]) << "the dry run changed nothing";
  }
  EXPECT_EQ(s->reserve_count(), 1);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  set_compute_compare(*s, n, build, 10, 1);
}

// Inputs in the user's own CPU buffer: compute a graph that was never allocated.
TEST_P(SchedulerLifecycleModes, ComputeOnAnUnallocatedGraphAllocatesIt) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 3); };
  Net m;
  m.finish(build(m), 11);
  auto ib = cpu::buffer_type()->alloc_buffer(4096);
  ASSERT_TRUE(ib.ok());
  TensorAllocator ta(**ib);
  for (Tensor* in : m.inputs) ASSERT_TRUE(ta.alloc(*in).ok());
  auto s = rig.sched(sched_params(GetParam()));
  for (unsigned eval = 0; eval < 3; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    set_compute_compare(*s, m, build, 11, 40 + eval);  // no alloc_graph: compute allocates (again, once computed)
  }
  EXPECT_EQ(s->explain(m.inputs[0]).cause, Cause::kHasBuffer) << "the input's buffer decides";
  EXPECT_EQ(s->reserve_count(), 1);
}

TEST(SchedulerLifecycle, SlotRotatesAtAllocationNotAtCompute) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 12);
  auto s = rig.sched(sched_params(true));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 0);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 1) << "each allocation takes the next slot";
  // computing the allocated (not yet computed) graph uses the allocation's slot
  set_compute_compare(*s, n, build, 12, 1);
  EXPECT_EQ(s->current_slot(), 1) << "compute of an allocated graph does not rotate";
  // computing it again reallocates: the next slot
  set_compute_compare(*s, n, build, 12, 2);
  EXPECT_EQ(s->current_slot(), 2);
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 3);
  EXPECT_TRUE(s->synchronize().ok());  // something is allocated: the rotation goes on
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 0) << "wraps after kParallelCopies";
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 1);
  set_compute_compare(*s, n, build, 12, 3);
  s->reset();
  EXPECT_TRUE(s->synchronize().ok());  // nothing allocated: back to slot 0
  ASSERT_TRUE(s->alloc_graph(n.graph).ok());
  EXPECT_EQ(s->current_slot(), 0);
  set_compute_compare(*s, n, build, 12, 4);
}

TEST(SchedulerLifecycle, WithoutParallelTheSlotIsAlwaysZero) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 12);
  auto s = rig.sched();
  for (unsigned eval = 0; eval < 3; ++eval) {
    ASSERT_TRUE(s->alloc_graph(n.graph).ok());
    EXPECT_EQ(s->current_slot(), 0);
    set_compute_compare(*s, n, build, 12, eval);
    EXPECT_EQ(s->current_slot(), 0);
  }
}

// ---- allocation failure --------------------------------------------------------------------------------------

// Every weight on the CPU, every op with a weight offloaded: the GPU's compute memory is the only GPU memory.
static void allocation_failure(bool parallel, bool max_size) {
  doubles::RestrictedDevice gdev("GPU0");
  gdev.refused = {Op::kSoftMax};
  gdev.offload = [](const Tensor&) { return true; };
  auto gpu = std::move(gdev.init_backend()).value();
  auto cpu = cpu::make_backend({.n_threads = 1});
  const Build build = [](Net& n) { return layer_stack(n, {nullptr}, 3); };
  Net n;
  n.finish(build(n), 13);
  const SourceSnapshot user_sources = snapshot_sources(n.graph);
  {
    auto sr = Scheduler::create({gpu.get(), cpu.get()}, sched_params(parallel));
    ASSERT_TRUE(sr.ok());
    Scheduler& s = **sr;
    if (max_size) {
      gdev.buft().max_size_ = 64;  // smaller than any GPU tensor
    } else {
      gdev.buft().fail_alloc = true;
    }
    Status st = s.alloc_graph(n.graph);
    ASSERT_FALSE(st.ok());
    EXPECT_EQ(st.code(), StatusCode::kAllocFailed) << st.message();
    EXPECT_FALSE(s.last_error().empty());
    expect_sources_restored(n.graph, user_sources);
    EXPECT_EQ(s.graph_compute(n.graph), ComputeStatus::kAllocFailed);
    EXPECT_FALSE(s.last_error().empty());
    EXPECT_EQ(s.reserve(n.graph).code(), StatusCode::kAllocFailed);
    expect_sources_restored(n.graph, user_sources);
    EXPECT_EQ(s.graph_compute(n.graph), ComputeStatus::kAllocFailed) << "still failing, never crashing";
    // fix the device: the same scheduler works again
    gdev.buft().max_size_ = SIZE_MAX;
    gdev.buft().fail_alloc = false;
    ASSERT_TRUE(s.alloc_graph(n.graph).ok()) << s.last_error();
    EXPECT_GT(s.buffer_size(0), 0u);
    EXPECT_GT(gdev.buft().live, 0);
    for (unsigned eval = 0; eval < 2; ++eval) {
      if (eval > 0) {
        ASSERT_TRUE(s.alloc_graph(n.graph).ok()) << s.last_error();
      }
      set_compute_compare(s, n, build, 13, eval);
    }
  }
  EXPECT_EQ(gdev.buft().live, 0) << "every GPU compute buffer freed with the scheduler";
}

TEST_P(SchedulerLifecycleModes, AllocationFailureAboveMaxSizeThenRecovery) { allocation_failure(GetParam(), true); }
TEST_P(SchedulerLifecycleModes, AllocationFailureOutOfMemoryThenRecovery) { allocation_failure(GetParam(), false); }

TEST(SchedulerLifecycle, FailedAllocationLeaksNothing) {
  doubles::RestrictedDevice gdev("GPU0");
  gdev.offload = [](const Tensor&) { return true; };
  auto gpu = std::move(gdev.init_backend()).value();
  auto cpu = cpu::make_backend({.n_threads = 1});
  Net n;
  n.finish(layer_stack(n, {nullptr}, 2), 1);
  {
    auto s = Scheduler::create({gpu.get(), cpu.get()});
    ASSERT_TRUE(s.ok());
    gdev.buft().max_size_ = 64;
    EXPECT_EQ((*s)->graph_compute(n.graph), ComputeStatus::kAllocFailed);
    EXPECT_EQ((*s)->alloc_graph(n.graph).code(), StatusCode::kAllocFailed);
  }
  EXPECT_EQ(gdev.buft().live, 0);
}

// A graph allocated and computed by one scheduler, then by another one after the first was destroyed: the first
// scheduler's compute buffers are gone, so the graph's tensors must not be taken for tensors in a user buffer (and
// never dereferenced). Run in a child process: a use-after-free would take the whole test binary down.
static void graph_outlives_its_scheduler(bool parallel) {
  Rig2 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.gdev.buft()}, 2); };
  Net n;
  n.finish(build(n), 23);
  for (unsigned round = 0; round < 3; ++round) {
    auto s = rig.sched(sched_params(parallel));
    Status st = s->alloc_graph(n.graph);
    if (!st.ok()) {
      std::fprintf(stderr, "scheduler %u: alloc_graph: %s\n", round, st.message().c_str());
      std::exit(1);
    }
    n.set_inputs(round);
    if (s->graph_compute(n.graph) != ComputeStatus::kSuccess) {
      std::fprintf(stderr, "scheduler %u: compute: %s\n", round, s->last_error().c_str());
      std::exit(2);
    }
    if (n.read_outputs() != cpu_reference(build, 23, round)) {
      std::fprintf(stderr, "scheduler %u: wrong result\n", round);
      std::exit(3);
    }
  }
  std::exit(0);
}

TEST_P(SchedulerLifecycleModes, GraphOutlivesItsScheduler) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(graph_outlives_its_scheduler(GetParam()), ::testing::ExitedWithCode(0), "")
      << "a graph whose tensors were placed in the compute buffers of a destroyed scheduler";
}

// ---- queries: explain, report, counts ------------------------------------------------------------------------

TEST(SchedulerLifecycle, ExplainNodesLeafsAndCopies) {
  Rig2 rig(false, {Op::kSoftMax});
  const Build build = reuse_graph(&rig.gdev.buft());
  Net n;
  n.finish(build(n), 14);
  auto s = rig.sched();
  Tensor* g2 = find_node(n.graph, "g2");
  Tensor* outside = n.ctx.new_tensor_1d(Type::kF32, 4);
  // before any split: a pin is explained as such
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "out"), rig.gpu.get()).ok());
  EXPECT_EQ(s->explain(find_node(n.graph, "out")).cause, Cause::kPinned);
  EXPECT_EQ(s->explain(find_node(n.graph, "out")).backend_name, "GPU0");
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();

  struct Want {
    const char* name;
    int backend;
    Cause cause;
    int split;
  };
  for (const Want& w :
       {Want{"c", 1, Cause::kMostSources, 0}, Want{"g1", 0, Cause::kWeight, 1}, Want{"s", 1, Cause::kMostSources, 2},
        Want{"g2", 0, Cause::kExpanded, 3}, Want{"out", 0, Cause::kPinned, 3}}) {
    const TensorExplain e = s->explain(find_node(n.graph, w.name));
    EXPECT_EQ(e.backend, w.backend) << w.name;
    EXPECT_EQ(e.backend_name, w.backend == 0 ? "GPU0" : "CPU") << w.name;
    EXPECT_EQ(e.cause, w.cause) << w.name << ": " << cause_name(e.cause);
    EXPECT_EQ(e.split, w.split) << w.name;
    EXPECT_FALSE(e.is_copy) << w.name;
  }
  // leafs: the weight (its buffer decides), the input
  const TensorExplain ew = s->explain(n.weights[0].first);
  EXPECT_EQ(ew.backend, 0);
  EXPECT_EQ(ew.cause, Cause::kHasBuffer);
  EXPECT_EQ(ew.split, -1);
  EXPECT_FALSE(ew.is_copy);
  const TensorExplain ex = s->explain(n.inputs[0]);
  EXPECT_EQ(ex.backend, 1);
  EXPECT_EQ(ex.cause, Cause::kInput);
  EXPECT_EQ(ex.split, -1);
  EXPECT_FALSE(ex.is_copy);
  // copies: c on the GPU (read by g1 and g2), s on the GPU
  for (int j = 0; j < 2; ++j) {
    const TensorExplain ec = s->explain(g2->src[j]);
    EXPECT_TRUE(ec.is_copy) << g2->src[j]->name;
    EXPECT_EQ(ec.backend, 0);
    EXPECT_EQ(ec.backend_name, "GPU0");
    EXPECT_EQ(ec.cause, Cause::kCopy);
  }
  // a tensor the graph does not hold
  const TensorExplain eo = s->explain(outside);
  EXPECT_EQ(eo.backend, -1);
  EXPECT_EQ(eo.cause, Cause::kUnassigned);
  EXPECT_EQ(eo.split, -1);
  EXPECT_FALSE(eo.is_copy);
  set_compute_compare(*s, n, build, 14, 1);
}

TEST_P(SchedulerLifecycleModes, ReportListsEverySplitWithInputsAndNodes) {
  Rig3 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 3); };
  Net n;
  n.finish(build(n), 15);
  auto s = rig.sched(sched_params(GetParam()));
  EXPECT_THAT(s->report(), HasSubstr("no graph"));
  ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
  const std::string rep = s->report();
  std::vector<std::string> lines;
  {
    std::istringstream in(rep);
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  const auto splits = s->splits();
  size_t at = 0;  // lines are in order: each split's header, then its nodes
  for (size_t k = 0; k < splits.size(); ++k) {
    const std::string head = "split #" + std::to_string(k) + ":";
    while (at < lines.size() && lines[at].find(head) == std::string::npos) ++at;
    ASSERT_LT(at, lines.size()) << "no header for split " << k << "\n" << rep;
    const std::string& h = lines[at];
    EXPECT_THAT(h, HasSubstr(s->backend(splits[k].backend)->name()));
    EXPECT_THAT(h, HasSubstr(std::to_string(splits[k].inputs.size()) + " inputs"));
    EXPECT_THAT(h, HasSubstr(std::string("(cut: ") + split_reason_name(splits[k].reason) + ")"));
    for (const Tensor* in : splits[k].inputs) {
      EXPECT_THAT(h, HasSubstr(std::string(in->name) + " (")) << "input with its size";
    }
    if (!splits[k].inputs.empty()) {
      EXPECT_THAT(h, HasSubstr("KiB"));
    }
    for (size_t i = splits[k].i_start; i < splits[k].i_end; ++i) {
      const Tensor* node = n.graph.node(i);
      const TensorExplain e = s->explain(node);
      const std::string tag = "node #" + std::to_string(i) + " ";
      while (at < lines.size() && lines[at].find(tag) == std::string::npos) ++at;
      ASSERT_LT(at, lines.size()) << "no line for node " << i << " in split " << k << "\n" << rep;
      const std::string& l = lines[at];
      EXPECT_THAT(l, HasSubstr(node->name));
      EXPECT_THAT(l, HasSubstr(op_name(node->op)));
      EXPECT_THAT(l, HasSubstr(std::string(s->backend(e.backend)->name()) + " " + cause_name(e.cause)));
    }
  }
}

TEST(SchedulerLifecycle, CountsAndBackendQueries) {
  Rig3 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 3); };
  for (bool parallel : {false, true}) {
    Net n;  // a fresh graph per scheduler (see GraphOutlivesItsScheduler)
    n.finish(build(n), 16);
    auto s = rig.sched(sched_params(parallel));
    EXPECT_EQ(s->n_backends(), 3);
    EXPECT_EQ(s->backend(0), rig.g0.get());
    EXPECT_EQ(s->backend(1), rig.g1.get());
    EXPECT_EQ(s->backend(2), rig.cpu.get());
    EXPECT_EQ(s->backend(-1), nullptr);
    EXPECT_EQ(s->backend(3), nullptr);
    EXPECT_EQ(s->backend_index(rig.g1.get()), 1);
    EXPECT_EQ(s->n_copies(), parallel ? kParallelCopies : 1);
    EXPECT_EQ(s->n_splits(), 0);
    EXPECT_EQ(s->reserve_count(), 0);
    for (int b = -1; b <= 3; ++b) EXPECT_EQ(s->buffer_size(b), 0u);
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    EXPECT_EQ(s->n_splits(), static_cast<int>(s->splits().size()));
    EXPECT_GT(s->n_splits(), 3);
    for (int b = 0; b < 3; ++b) EXPECT_GT(s->buffer_size(b), 0u) << b;
    EXPECT_EQ(s->buffer_size(3), 0u);
    // pins: only the scheduler's backends
    auto other = cpu::make_backend({.n_threads = 1});
    EXPECT_FALSE(s->set_tensor_backend(n.graph.node(0), other.get()).ok());
    EXPECT_FALSE(s->set_tensor_backend(nullptr, rig.g0.get()).ok());
  }
}

// ---- execution ------------------------------------------------------------------------------------------------

TEST_P(SchedulerLifecycleModes, ThreeBackendsMatchTheCpuAcrossRepeatedEvaluations) {
  const bool parallel = GetParam();
  Rig3 rig;
  const Build build = [&](Net& n) { return layer_stack(n, {&rig.d0.buft(), &rig.d1.buft(), nullptr}, 6, 6); };
  Net n;
  n.finish(build(n), 17);
  auto s = rig.sched(sched_params(parallel));
  ASSERT_TRUE(s->reserve(n.graph).ok());
  const int reserves = s->reserve_count();
  for (unsigned eval = 0; eval < 6; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    if (parallel) {
      EXPECT_EQ(s->current_slot(), static_cast<int>(eval % kParallelCopies));
    }
    expect_readable(*s, n.graph);
    n.set_inputs(200 + eval);
    ASSERT_EQ(s->graph_compute_async(n.graph), ComputeStatus::kSuccess) << s->last_error();
    n.set_inputs(900 + eval);  // the user may overwrite the inputs as soon as the call returns
    EXPECT_TRUE(s->synchronize().ok());
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 17, 200 + eval));
  }
  std::set<int> used;
  for (const auto& sp : s->splits()) used.insert(sp.backend);
  EXPECT_EQ(used.size(), 3u) << s->report();
  EXPECT_EQ(s->reserve_count(), reserves);
}

// a = W0 x [GPU0] ; b = W1a W1b [GPU1, only GPU1 weights: a split without inputs right after a GPU0 split] ;
// c = a + b [pinned to the CPU] ; d = W1c c [GPU1: input c, copied by the synchronous fallback] ; out = d / 2
static Build no_input_split_graph(BufferType* b0, BufferType* b1) {
  return [b0, b1](Net& n) -> std::vector<Tensor*> {
    Context& ctx = n.ctx;
    Tensor* x = n.input("x", 16, 4);
    Tensor* a = Net::named(mul_mat(ctx, n.weight("w0", 16, 16, b0), x), "a");
    Tensor* b = Net::named(mul_mat(ctx, n.weight("w1a", 16, 16, b1), n.weight("w1b", 16, 4, b1)), "b");
    Tensor* c = Net::named(add(ctx, a, b), "c");
    Tensor* d = Net::named(mul_mat(ctx, n.weight("w1c", 16, 16, b1), c), "d");
    return {n.output(scale(ctx, d, 0.5f), "out")};
  };
}

TEST_P(SchedulerLifecycleModes, SplitWithoutInputsWaitsForThePreviousBackendAndEveryEventIsRecorded) {
  const bool parallel = GetParam();
  Rig3 rig(/*events=*/true);
  const Build build = no_input_split_graph(&rig.d0.buft(), &rig.d1.buft());
  Net n;
  n.finish(build(n), 18);
  auto s = rig.sched(sched_params(parallel));
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "c"), rig.cpu.get()).ok());
  for (unsigned eval = 0; eval < 4; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    const auto splits = s->splits();
    ASSERT_EQ(splits.size(), 4u) << s->report();
    EXPECT_EQ(splits[0].backend, 0);
    EXPECT_EQ(splits[1].backend, 1);
    EXPECT_TRUE(splits[1].inputs.empty()) << s->report();
    EXPECT_EQ(splits[2].backend, 2);
    EXPECT_EQ(splits[3].backend, 1);
    ASSERT_EQ(splits[3].inputs.size(), 1u);
    EXPECT_EQ(std::string(splits[3].inputs[0]->name), "c");
    const doubles::EventStats e0 = rig.d0.event_stats, e1 = rig.d1.event_stats;
    n.set_inputs(300 + eval);
    ASSERT_EQ(s->graph_compute(n.graph), ComputeStatus::kSuccess) << s->last_error();
    EXPECT_EQ(n.read_outputs(), cpu_reference(build, 18, 300 + eval));
    // split 1 (GPU1, no inputs) follows split 0 (GPU0): GPU1 waits for GPU0's event
    const int waits_gpu1_on_gpu0 =
        rig.d0.event_stats.waits_by["GPU1"] - (e0.waits_by.count("GPU1") ? e0.waits_by.at("GPU1") : 0);
    EXPECT_GT(waits_gpu1_on_gpu0, 0) << "the split without inputs did not wait for the previous backend";
    // an event recorded after every split: one GPU0 split, two GPU1 splits
    EXPECT_EQ(rig.d0.event_stats.records - e0.records, 1);
    EXPECT_EQ(rig.d1.event_stats.records - e1.records, 2);
    EXPECT_EQ(rig.d0.event_stats.records_by["GPU0"] - (e0.records_by.count("GPU0") ? e0.records_by.at("GPU0") : 0), 1);
    EXPECT_EQ(rig.d1.event_stats.records_by["GPU1"] - (e1.records_by.count("GPU1") ? e1.records_by.at("GPU1") : 0), 2);
    // split 3's input c comes from the CPU without an async copy: the fallback synchronizes GPU1's slot event
    // (GPU1 has no user input, so no other path synchronizes its events)
    EXPECT_GT(rig.d1.event_stats.syncs - e1.syncs, 0) << "the synchronous copy fallback skipped the slot event";
    // split 0's input x is a user input: copied synchronously once GPU0's slot event has completed
    EXPECT_GT(rig.d0.event_stats.syncs - e0.syncs, 0) << "a user input was copied without waiting for the slot";
  }
}

// A split without inputs after a split on the same backend never happens; after another backend without events the
// scheduler synchronizes that backend instead (no crash, right data).
TEST_P(SchedulerLifecycleModes, SplitWithoutInputsWithoutEvents) {
  Rig3 rig(/*events=*/false);
  const Build build = no_input_split_graph(&rig.d0.buft(), &rig.d1.buft());
  Net n;
  n.finish(build(n), 19);
  auto s = rig.sched(sched_params(GetParam()));
  ASSERT_TRUE(s->set_tensor_backend(find_node(n.graph, "c"), rig.cpu.get()).ok());
  for (unsigned eval = 0; eval < 3; ++eval) {
    ASSERT_TRUE(s->alloc_graph(n.graph).ok()) << s->last_error();
    set_compute_compare(*s, n, build, 19, 400 + eval);
  }
}

INSTANTIATE_TEST_SUITE_P(SchedulerLifecycle, SchedulerLifecycleModes, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "parallel" : "serial"; });
