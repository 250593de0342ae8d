// The scheduler over simulated topologies (integration): the outputs equal the CPU reference; with
// `parallel` and adversarial seeds the hazard detector finds no race in the scheduler's event flow across 200 seeds
// (a quarter under ASan); a simulator that drops one of the scheduler's event waits is reported as a race; the same
// seed gives the same trace and results.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cinttypes>

#include "tessera/harness/session/reference.h"
#include "tessera/models/llama.h"
#include "support/sweep.h"
#include "unit/sim/sim_fixture.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"
#include "tessera/harness/placement/allocate.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::sim::testing;
using namespace tessera::models;
using ::testing::HasSubstr;

namespace {

LlamaConfig small_llama() {
  LlamaConfig c = preset("tiny").value();
  c.n_layer = 4;
  return c;
}

// The CPU oracle (harness::cpu_reference_logits), which must succeed.
std::vector<float> cpu_logits(const LlamaConfig& c, uint64_t seed) {
  auto r = tessera::harness::cpu_reference_logits(c, seed);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : std::vector<float>();
}

// The model on a simulated topology: layers spread over the GPUs in order (the last layers and the token
// embedding on the CPU, the output head on the last GPU), the scheduler over every device.
struct SimModel {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  LlamaGraph m;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::unique_ptr<Scheduler> sched;

  SimModel(const TopologyConfig& topo, const SimOptions& opt, const LlamaConfig& c, uint64_t model_seed,
           SchedulerParams params = {}, int cpu_layers = 1) {
    sim = make_sim(topo, opt);
    backends = sim->make_backends().value();
    m = build_llama(c).value();
    const int n_gpu = static_cast<int>(sim->device_count()) - 1;
    const int gpu_layers = c.n_layer - cpu_layers;
    BufferType* cpu_buft = sim->device(sim->device_count() - 1)->buffer_type();
    auto device_of_layer = [&](int layer) -> BufferType* {
      if (layer < 0 || layer >= gpu_layers || n_gpu == 0) return cpu_buft;
      return sim->device(static_cast<size_t>(layer * n_gpu / gpu_layers))->buffer_type();
    };
    std::vector<std::pair<Tensor*, BufferType*>> where;
    for (Tensor* w : m.weights) {
      BufferType* b = device_of_layer(m.layer_of(w));
      if (m.layer_of(w) < 0 && w != m.tok_embd && n_gpu > 0)
        b = sim->device(static_cast<size_t>(n_gpu - 1))->buffer_type();
      where.emplace_back(w, b);
    }
    auto wb = allocate_tensors(where, BufferUsage::kWeights);
    EXPECT_TRUE(wb.ok()) << wb.status().to_string();
    where.clear();
    // A device whose rules deny by default (the accelerator preset) cannot write the cache (SET_ROWS): the cache
    // stays on the CPU, as a user would configure it (in its memory it is a clean scheduling error).
    for (Tensor* kv : m.kv_cache) {
      const int layer = m.layer_of(kv);
      const bool restricted = layer < gpu_layers && n_gpu > 0 &&
                              !topo.devices[static_cast<size_t>(layer * n_gpu / gpu_layers)].default_allow;
      where.emplace_back(kv, restricted ? cpu_buft : device_of_layer(layer));
    }
    auto cb = allocate_tensors(where, BufferUsage::kAny);
    EXPECT_TRUE(cb.ok()) << cb.status().to_string();
    for (auto* list : {&wb.value(), &cb.value()}) {
      for (auto& b : *list) buffers.push_back(std::move(b));
    }
    if (opt.mode == MemoryMode::kBacked) {  // no bytes to fill otherwise
      EXPECT_TRUE(fill_random(m, model_seed).ok());
    }
    std::vector<Backend*> bp;
    for (auto& b : backends) bp.push_back(b.get());
    auto s = Scheduler::create(bp, params);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    sched = std::move(s).value();
  }

  ~SimModel() {
    sched.reset();
    buffers.clear();
    backends.clear();
  }

  // Allocates, sets the inputs and computes `evaluations` times back to back (asynchronously), then synchronizes.
  ComputeStatus run(uint64_t input_seed, int evaluations = 1) {
    if (!sched->alloc_graph(*m.graph).ok()) return ComputeStatus::kAllocFailed;
    EXPECT_TRUE(set_inputs(m, default_inputs(m.config, input_seed)).ok());
    for (int i = 0; i < evaluations; ++i) {
      const ComputeStatus s = sched->graph_compute_async(*m.graph);
      if (s != ComputeStatus::kSuccess) return s;
    }
    EXPECT_TRUE(sched->synchronize().ok());
    return ComputeStatus::kSuccess;
  }

  std::vector<float> logits() const { return tensor_to_f32(*m.logits).value(); }
};

TopologyConfig two_gpus_and_cpu() {
  DeviceConfig g0 = gpu("gpu0", 256 * MiB), g1 = gpu("gpu1", 128 * MiB);
  g1.cost.launch_overhead_us = 9;  // unequal devices: different timings
  g1.cost.mem_bandwidth = 200e9;
  return topology({g0, g1, wrapped_cpu()}, "2gpu");
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, uint64_t seed) {
  ASSERT_EQ(got.size(), want.size());
  const NmseResult r = nmse(want.data(), got.data(), want.size());
  EXPECT_FALSE(r.nan_mismatch) << "seed " << seed;
  EXPECT_LT(r.nmse, 1e-5) << "seed " << seed;
}

TEST(SimIntegration, SchedulerOverTwoSimulatedGpusMatchesTheCpuReference) {
  const LlamaConfig c = small_llama();
  const std::vector<float> want = cpu_logits(c, 5);
  SimOptions o;
  o.seed = 42;
  SimModel sm(two_gpus_and_cpu(), o, c, 5);
  ASSERT_EQ(sm.run(5), ComputeStatus::kSuccess) << sm.sched->last_error();
  EXPECT_GT(sm.sched->n_splits(), 2);
  expect_close(sm.logits(), want, o.seed);
  EXPECT_TRUE(sm.sim->races().empty()) << sm.sim->races_report();
  EXPECT_TRUE(sm.sim->errors().empty()) << sm.sim->errors()[0];
  // Every device did work, and the timeline has a makespan.
  const Trace tr = sm.sim->trace();
  for (size_t d = 0; d < sm.sim->device_count(); ++d) EXPECT_GT(sm.sim->stats(d).n_commands, 0u) << d;
  EXPECT_GT(summarize(tr).makespan_us, 0.0);
}

// A kernel that fails while it runs on an asynchronous device (a KV-cache slot out of range) is the failure of the
// graph_compute that queued it, reported once, never the next evaluation's (found by the lifecycle property): the
// next evaluation, with good inputs, succeeds and matches the CPU.
TEST(SimIntegration, AnAsynchronousKernelFailureFailsItsOwnEvaluationOnly) {
  const LlamaConfig c = small_llama();
  const std::vector<float> want = cpu_logits(c, 5);
  SimOptions o;
  o.seed = 42;
  SimModel sm(two_gpus_and_cpu(), o, c, 5);
  ASSERT_TRUE(sm.sched->alloc_graph(*sm.m.graph).ok());
  LlamaInputs bad = default_inputs(c, 5);
  for (int32_t& k : bad.kv_idxs) k = 1 << 20;  // beyond the cache
  ASSERT_TRUE(set_inputs(sm.m, bad).ok());
  EXPECT_EQ(sm.sched->graph_compute(*sm.m.graph), ComputeStatus::kFailed);
  EXPECT_THAT(sm.sched->last_error(), HasSubstr("out of range"));
  EXPECT_TRUE(sm.sched->synchronize().ok());  // reported once
  ASSERT_EQ(sm.run(5), ComputeStatus::kSuccess) << sm.sched->last_error();
  expect_close(sm.logits(), want, o.seed);
  // The same with graph_compute_async: each device's failure is reported once, by the call itself (when it waits
  // for the failed work, e.g. before a host copy) or else by the user's synchronize, and not again.
  ASSERT_TRUE(sm.sched->alloc_graph(*sm.m.graph).ok());
  ASSERT_TRUE(set_inputs(sm.m, bad).ok());
  const ComputeStatus cs = sm.sched->graph_compute_async(*sm.m.graph);
  const std::string async_error = sm.sched->last_error();
  const Status sync = sm.sched->synchronize();
  ASSERT_TRUE(cs != ComputeStatus::kSuccess || !sync.ok());
  EXPECT_THAT(cs != ComputeStatus::kSuccess ? async_error : sync.message(), HasSubstr("out of range"));
  EXPECT_TRUE(sm.sched->synchronize().ok());
  ASSERT_EQ(sm.run(5), ComputeStatus::kSuccess) << sm.sched->last_error();
  expect_close(sm.logits(), want, o.seed);
}

// The sharpest form of the lifecycle property's counterexample: the failing kernel is the last work of its backend
// in the evaluation, so no later compute there could report it. Before Backend::synchronize returned a Status,
// graph_compute returned success here and the next evaluation on that GPU was blamed.
TEST(SimIntegration, AFailureInTheLastSplitOfAnAsynchronousGpuFailsThatEvaluation) {
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}));
  auto backends = sim->make_backends().value();
  Context ctx({.no_alloc = true});
  Tensor* table = ctx.new_tensor_2d(Type::kF32, 8, 4);  // 4 rows
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  Tensor* rows = get_rows(ctx, table, ids);
  ASSERT_NE(rows, nullptr) << ctx.status().to_string();
  set_output(*rows);
  Graph g;
  ASSERT_TRUE(g.build_forward(rows).ok());
  auto buf = alloc_ctx_tensors(ctx, *sim->device(0)->buffer_type());  // everything in the GPU's memory
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  std::vector<float> values(32);
  for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) + 0.5f;
  ASSERT_TRUE(tensor_set(*table, values.data(), 0, nbytes(*table)).ok());
  auto sched = Scheduler::create({backends[0].get(), backends[1].get()}).value();
  const int32_t bad[2] = {1, 9};  // 9 is out of range
  ASSERT_TRUE(tensor_set(*ids, bad, 0, sizeof(bad)).ok());
  ASSERT_EQ(sched->n_splits(), 0);
  EXPECT_EQ(sched->graph_compute(g), ComputeStatus::kFailed);
  EXPECT_THAT(sched->last_error(), HasSubstr("out of range"));
  ASSERT_EQ(sched->n_splits(), 1);         // one split, on gpu0: nothing ran there after the failing kernel
  EXPECT_TRUE(sched->synchronize().ok());  // reported once
  const int32_t good[2] = {3, 1};
  ASSERT_TRUE(tensor_set(*ids, good, 0, sizeof(good)).ok());
  ASSERT_EQ(sched->graph_compute(g), ComputeStatus::kSuccess) << sched->last_error();
  std::vector<float> got(16);
  ASSERT_TRUE(tensor_get(*rows, got.data(), 0, nbytes(*rows)).ok());
  for (size_t c = 0; c < 8; ++c) {
    EXPECT_EQ(got[c], values[3 * 8 + c]) << c;
    EXPECT_EQ(got[8 + c], values[1 * 8 + c]) << c;
  }
}

// Pins that move every tensor of a graph from a GPU to the CPU leave the planner's graph looking the same (same
// nodes, no copies, sizes that fit): only the scheduler's "moved to another buffer type" check sees that the plan
// now puts tensors in memory the CPU cannot access, and must re-reserve. (Kills the mutant
// own-sched-moved-check-ignores-buft, which the scenarios, properties and fuzzers let through.)
TEST(SimIntegration, PinsMovingAWholeGraphToAnotherBufferTypeReReserve) {
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}));
  auto backends = sim->make_backends().value();
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 64);
  set_input(*x);
  Tensor* a = scale(ctx, x, 2.0f);
  Tensor* b = scale(ctx, a, 3.0f);
  ASSERT_NE(b, nullptr) << ctx.status().to_string();
  set_output(*b);
  Graph g;
  ASSERT_TRUE(g.build_forward(b).ok());
  auto sched = Scheduler::create({backends[0].get(), backends[1].get()}).value();
  const std::vector<float> xv = random_values(64, 7);
  for (int where : {0, 1, 0}) {
    SCOPED_TRACE(where == 0 ? "on gpu0" : "on the cpu");
    for (Tensor* t : {x, a, b})
      ASSERT_TRUE(sched->set_tensor_backend(t, backends[static_cast<size_t>(where)].get()).ok());
    const int reserves = sched->reserve_count();
    ASSERT_TRUE(sched->alloc_graph(g).ok()) << sched->last_error();
    EXPECT_EQ(sched->reserve_count(), reserves + 1);
    EXPECT_EQ(sched->n_splits(), 1);
    set_f32(*x, xv);
    ASSERT_EQ(sched->graph_compute(g), ComputeStatus::kSuccess) << sched->last_error();
    const std::vector<float> got = get_f32(*b);
    for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], 6.0f * xv[i]) << i;
  }
}

// Every shipped topology preset runs the model through the scheduler with the CPU reference's results and no race,
// serial and parallel (the accelerator without events or async exercises the scheduler's synchronize fallbacks).
TEST(SimIntegration, EveryPresetComputesTheModelCorrectly) {
  const LlamaConfig c = small_llama();
  const std::vector<float> want = cpu_logits(c, 5);
  for (const std::string& name : topology_preset_names()) {
    for (bool parallel : {false, true}) {
      SCOPED_TRACE(name + (parallel ? " parallel" : " serial"));
      SimOptions o;
      o.seed = 11;
      o.adversarial = true;
      SchedulerParams p;
      p.parallel = parallel;
      SimModel sm(topology_preset(name).value(), o, c, 5, p);
      ASSERT_EQ(sm.run(5, 2), ComputeStatus::kSuccess) << sm.sched->last_error();
      expect_close(sm.logits(), want, o.seed);
      EXPECT_TRUE(sm.sim->races().empty()) << sm.sim->races_report();
      EXPECT_TRUE(sm.sim->errors().empty()) << sm.sim->errors()[0];
    }
  }
}

// The tiny models of the Qwen architectures (Q/K/V biases; per-head Q/K norms with heads of their own size; experts)
// and of gemma3 (two masks, sliding-window and global layers, post-norms, GELU FFN, scaled embeddings and Q) through
// the scheduler on simulated topologies, with the CPU reference's results and no race: two GPUs, a GPU
// without flash attention (FLASH_ATTN_EXT on the CPU), partial offload (half the layers on the CPU) and `parallel`
// with adversarial delays.
TEST(SimIntegration, QwenGemmaAndPhiModelsOnSimulatedTopologiesMatchTheCpuReference) {
  struct Case {
    const char* what;
    TopologyConfig topo;
    int cpu_layers;
    bool parallel;
  };
  const Case cases[] = {{"2 gpus", two_gpus_and_cpu(), 1, false},
                        {"gpu without flash attention", topology_preset("gpu-no-fa").value(), 1, false},
                        {"partial offload", topology_preset("1gpu").value(), 2, false},
                        {"parallel", two_gpus_and_cpu(), 1, true}};
  for (const char* name : {"tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3"}) {
    LlamaConfig c = preset(name).value();
    if (c.swa_pattern == 0) c.n_layer = 4;  // (tiny-gemma3 keeps its 6: five sliding-window layers, a global one)
    const std::vector<float> want = cpu_logits(c, 5);
    for (const Case& k : cases) {
      SCOPED_TRACE(std::string(name) + " on " + k.what);
      SimOptions o;
      o.seed = 13;
      o.adversarial = k.parallel;
      SchedulerParams p;
      p.parallel = k.parallel;
      SimModel sm(k.topo, o, c, 5, p, k.cpu_layers);
      ASSERT_EQ(sm.run(5, k.parallel ? 2 : 1), ComputeStatus::kSuccess) << sm.sched->last_error();
      expect_close(sm.logits(), want, o.seed);
      EXPECT_TRUE(sm.sim->races().empty()) << sm.sim->races_report();
      EXPECT_TRUE(sm.sim->errors().empty()) << sm.sim->errors()[0];
      EXPECT_GT(sm.sched->n_splits(), 1);
    }
  }
}

TEST(SimIntegration, ParallelAdversarialSeedsHaveNoRaceInTheSchedulersEventFlow) {
  const LlamaConfig c = small_llama();
  const std::vector<float> want = cpu_logits(c, 9);
  SchedulerParams p;
  p.parallel = true;
  const uint64_t seeds = tessera::test::sweep_seeds(200);  // a quarter under ASan (tests/support/sweep.h)
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    o.record_trace = false;
    SimModel sm(two_gpus_and_cpu(), o, c, 9, p);
    // Several evaluations in flight: each takes the next copy slot.
    ASSERT_EQ(sm.run(9, 3), ComputeStatus::kSuccess) << "seed " << seed << ": " << sm.sched->last_error();
    ASSERT_TRUE(sm.sim->races().empty()) << "seed " << seed << ":\n" << sm.sim->races_report();
    ASSERT_TRUE(sm.sim->errors().empty()) << "seed " << seed << ": " << sm.sim->errors()[0];
    if (seed % 20 == 1) expect_close(sm.logits(), want, seed);
  }
}

// An integrated GPU that computes in host memory and shares the CPU's compute buffer type, and cannot do RMS_NORM:
// the graph alternates igpu / cpu splits that have no inputs (no copies: both read the shared buffer), so the
// scheduler must make the CPU wait for the igpu's event before each CPU split (docs/scheduler.md, 'Execution').
struct SharedMemoryChain {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  Context ctx{{.no_alloc = true}};
  std::unique_ptr<Buffer> weights;
  Graph graph;
  Tensor* x = nullptr;
  Tensor* out = nullptr;
  std::vector<Tensor*> w;
  std::unique_ptr<Scheduler> sched;

  explicit SharedMemoryChain(SimOptions o) {
    DeviceConfig ig = gpu("igpu");
    ig.type = DeviceType::kIgpu;
    ig.host_visible = true;
    OpRule no_norm;
    no_norm.allow = false;
    no_norm.ops = {Op::kRmsNorm};
    ig.op_rules.push_back(no_norm);
    sim = make_sim(topology({ig, wrapped_cpu()}, "igpu"), o);
    backends = sim->make_backends().value();
    const int64_t d = 32;
    x = ctx.new_tensor_2d(Type::kF32, d, 4);
    set_name(*x, "x");
    set_input(*x);
    Tensor* h = x;
    for (int i = 0; i < 4; ++i) {
      Tensor* wi = ctx.new_tensor_2d(Type::kF32, d, d);
      format_name(*wi, "w%d", i);
      w.push_back(wi);
      h = rms_norm(ctx, mul_mat(ctx, wi, h), 1e-5f);
    }
    out = h;
    set_output(*out);
    EXPECT_TRUE(graph.build_forward(out).ok());
    std::vector<std::pair<Tensor*, BufferType*>> where;
    for (Tensor* wi : w) where.emplace_back(wi, sim->device(0)->buffer_type());
    auto wb = allocate_tensors(where, BufferUsage::kWeights);
    EXPECT_TRUE(wb.ok()) << wb.status().to_string();
    weights = std::move(wb.value()[0]);
    for (size_t i = 0; i < w.size(); ++i) set_f32(*w[i], random_values(static_cast<size_t>(d * d), 100 + i));
    SchedulerParams p;
    BufferType* shared = sim->device(1)->buffer_type();
    p.bufts = {shared, shared};
    sched = Scheduler::create({backends[0].get(), backends[1].get()}, p).value();
  }
  ~SharedMemoryChain() {
    sched.reset();
    weights.reset();
    backends.clear();
  }
  ComputeStatus run() {
    if (!sched->alloc_graph(graph).ok()) return ComputeStatus::kAllocFailed;
    set_f32(*x, random_values(static_cast<size_t>(nelements(*x)), 7));
    const ComputeStatus s = sched->graph_compute(graph);
    return s;
  }
};

TEST(SimIntegration, TheSharedMemoryChainNeedsItsEventWaitsAndHasThem) {
  SimOptions o;
  o.seed = 3;
  o.adversarial = true;
  SharedMemoryChain ch(o);
  ASSERT_EQ(ch.run(), ComputeStatus::kSuccess) << ch.sched->last_error();
  EXPECT_GE(ch.sched->n_splits(), 8) << ch.sched->report();
  for (const auto& sp : ch.sched->splits()) EXPECT_TRUE(sp.inputs.empty()) << ch.sched->report();
  EXPECT_TRUE(ch.sim->races().empty()) << ch.sim->races_report();
  EXPECT_TRUE(ch.sim->errors().empty());
}

TEST(SimIntegration, DroppingOneOfTheSchedulersEventWaitsIsReportedAsARace) {
  SimOptions o;
  o.seed = 3;
  o.adversarial = true;
  o.faults.drop_event_wait_nth =
      3;  // the CPU's wait for the igpu before the second CPU split (1: step 0's, 2: the igpu's slot)
  SharedMemoryChain ch(o);
  ASSERT_EQ(ch.run(), ComputeStatus::kSuccess) << ch.sched->last_error();
  ASSERT_FALSE(ch.sim->races().empty()) << "a dropped event wait went unnoticed";
  const Race& r = ch.sim->races()[0];
  EXPECT_EQ(r.first.agent, "igpu/s0");
  EXPECT_EQ(r.second.agent, "cpu/s0");
  EXPECT_EQ(r.seed, 3u);
  EXPECT_THAT(r.to_string(), HasSubstr("seed 3"));
}

TEST(SimIntegration, SameSeedSameTraceAndResultsDifferentSeedDifferentTimeline) {
  const LlamaConfig c = small_llama();
  SchedulerParams p;
  p.parallel = true;
  auto run = [&](uint64_t seed, Trace* trace) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    SimModel sm(two_gpus_and_cpu(), o, c, 9, p);
    EXPECT_EQ(sm.run(9, 2), ComputeStatus::kSuccess) << sm.sched->last_error();
    *trace = sm.sim->trace();
    return sm.logits();
  };
  Trace a, b, other;
  const std::vector<float> la = run(17, &a);
  const std::vector<float> lb = run(17, &b);
  run(18, &other);
  ASSERT_EQ(a.events.size(), b.events.size());
  for (size_t i = 0; i < a.events.size(); ++i) {
    ASSERT_EQ(a.events[i].name, b.events[i].name) << i;
    ASSERT_EQ(a.events[i].track, b.events[i].track) << i;
    ASSERT_EQ(a.events[i].start_us, b.events[i].start_us) << i;  // bit for bit
    ASSERT_EQ(a.events[i].end_us, b.events[i].end_us) << i;
  }
  ASSERT_EQ(la.size(), lb.size());
  EXPECT_EQ(0, std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)));
  bool differs = a.events.size() != other.events.size();
  for (size_t i = 0; !differs && i < a.events.size(); ++i) differs = a.events[i].end_us != other.events[i].end_us;
  EXPECT_TRUE(differs) << "seed 18 should delay commands differently from seed 17";
}

TEST(SimIntegration, MetadataOnlyModePlansAndTimesWithoutBytes) {
  LlamaConfig c = preset("70b").value();
  c.n_layer = 8;  // keep the unit test short; bench/ runs the full 80 layers
  c.n_tokens = 32;
  c.n_ctx = 512;
  DeviceConfig g0 = gpu("gpu0", 80 * GiB), g1 = gpu("gpu1", 80 * GiB);
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  SimModel sm(topology({g0, g1, wrapped_cpu(64 * GiB)}), o, c, 1, {}, /*cpu_layers=*/0);
  ASSERT_EQ(sm.run(1), ComputeStatus::kSuccess) << sm.sched->last_error();
  EXPECT_TRUE(sm.sim->races().empty()) << sm.sim->races_report();
  // 4 layers of 70B-sized q4_0 weights (about 480 MB each) on each GPU, without a byte of real memory.
  EXPECT_GT(sm.sim->stats(0).memory_peak, 1800 * MiB);
  EXPECT_GT(sm.sim->stats(1).memory_peak, 1800 * MiB);
  EXPECT_GT(summarize(sm.sim->trace()).makespan_us, 0.0);
  const std::vector<float> logits = sm.logits();  // reads give zeros
  EXPECT_EQ(logits[0], 0.0f);
}

}  // namespace
