// The scheduler's `parallel` mode: compute memory stays the serial plan plus the per-slot copies that can be
// in flight at once (it does not grow with the number of splits), and pipelined evaluations of a llama-style graph
// with partial offload have no race in the simulator's hazard detector under adversarial seeds, with the CPU
// reference's results, evaluation after evaluation with changed inputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

#include "tessera/models/llama.h"
#include "unit/sim/sim_fixture.h"
#include "support/sweep.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"
#include "tessera/harness/placement/allocate.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::sim::testing;
using namespace tessera::models;

namespace {

// "tiny" shapes with more layers and no flash attention (so SOFT_MAX exists): with a GPU that refuses ROPE and
// SOFT_MAX every offloaded layer is cut into several splits (about 3 per layer over the graph), as in
// bench/sched_bench.cpp.
LlamaConfig model(int n_layer) {
  LlamaConfig c = preset("tiny").value();
  c.n_layer = n_layer;
  c.flash_attn = false;
  return c;
}

// One GPU that cannot run ROPE or SOFT_MAX, and the CPU.
TopologyConfig gpu_and_cpu() {
  DeviceConfig g = gpu("gpu0", 256 * MiB);
  OpRule deny;
  deny.allow = false;
  deny.ops = {Op::kRope, Op::kSoftMax};
  g.op_rules.push_back(deny);
  return topology({g, wrapped_cpu()}, "gpu+cpu");
}

// The same GPU, and a CPU whose compute is asynchronous, with events (a device that is the last backend, so the graph
// inputs are its own, and whose stream may still read them after graph_compute_async returns).
TopologyConfig gpu_and_async_cpu() {
  TopologyConfig t = gpu_and_cpu();
  t.devices[1].caps = {/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  t.name = "gpu+async cpu";
  return t;
}

// Input seeds of consecutive evaluations (changed inputs every time).
uint64_t input_seed(int eval) { return 1000 + 7 * static_cast<uint64_t>(eval); }

// The CPU reference of `n_eval` consecutive evaluations (the KV cache carries over): the logits of each.
std::vector<std::vector<float>> cpu_reference(const LlamaConfig& c, uint64_t model_seed, int n_eval) {
  LlamaGraph m = build_llama(c).value();
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type()).value();
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type()).value();
  EXPECT_TRUE(fill_random(m, model_seed).ok());
  GraphPlanner planner(cpu::buffer_type());
  EXPECT_TRUE(planner.alloc_graph(*m.graph).ok());
  auto backend = cpu::make_backend({.n_threads = 1});
  std::vector<std::vector<float>> out;
  for (int e = 0; e < n_eval; ++e) {
    EXPECT_TRUE(set_inputs(m, default_inputs(c, input_seed(e))).ok());
    EXPECT_EQ(backend->graph_compute(*m.graph), ComputeStatus::kSuccess) << backend->last_error();
    out.push_back(tensor_to_f32(*m.logits).value());
  }
  return out;
}

// The model on the simulated GPU + CPU: the first half of the layers (and the token embedding) on the CPU, the
// second half and the output head on the GPU, the KV cache with its layer.
struct Offloaded {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  LlamaGraph m;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::unique_ptr<Scheduler> sched;

  Offloaded(const SimOptions& opt, const LlamaConfig& c, uint64_t model_seed, bool parallel,
            const TopologyConfig& topo = gpu_and_cpu()) {
    sim = make_sim(topo, opt);
    backends = sim->make_backends().value();
    m = build_llama(c).value();
    BufferType* gpu_buft = sim->device(0)->buffer_type();
    BufferType* cpu_buft = sim->device(1)->buffer_type();
    auto on_gpu = [&](int layer) { return layer >= c.n_layer / 2; };
    std::vector<std::pair<Tensor*, BufferType*>> where;
    for (Tensor* w : m.weights) {
      const int layer = m.layer_of(w);
      const bool gpu = layer >= 0 ? on_gpu(layer) : w != m.tok_embd;
      where.emplace_back(w, gpu ? gpu_buft : cpu_buft);
    }
    auto wb = allocate_tensors(where, BufferUsage::kWeights);
    EXPECT_TRUE(wb.ok()) << wb.status().to_string();
    where.clear();
    for (Tensor* kv : m.kv_cache) where.emplace_back(kv, on_gpu(m.layer_of(kv)) ? gpu_buft : cpu_buft);
    auto cb = allocate_tensors(where, BufferUsage::kAny);
    EXPECT_TRUE(cb.ok()) << cb.status().to_string();
    for (auto* list : {&wb.value(), &cb.value()}) {
      for (auto& b : *list) buffers.push_back(std::move(b));
    }
    if (opt.mode == MemoryMode::kBacked) {
      EXPECT_TRUE(fill_random(m, model_seed).ok());
    }
    SchedulerParams p;
    p.parallel = parallel;
    auto s = Scheduler::create({backends[0].get(), backends[1].get()}, p);
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    sched = std::move(s).value();
  }
  ~Offloaded() {
    sched.reset();
    buffers.clear();
    backends.clear();
  }

  // One evaluation with the inputs of evaluation `e`: allocate (the next slot), set the inputs, compute
  // asynchronously (the previous evaluations may still run).
  ComputeStatus submit(int e) {
    if (Status s = sched->alloc_graph(*m.graph); !s.ok()) {
      ADD_FAILURE() << s.to_string();
      return ComputeStatus::kAllocFailed;
    }
    EXPECT_TRUE(set_inputs(m, default_inputs(m.config, input_seed(e))).ok());
    return sched->graph_compute_async(*m.graph);
  }
  std::vector<float> logits() const { return tensor_to_f32(*m.logits).value(); }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const NmseResult r = nmse(want.data(), got.data(), want.size());
  EXPECT_FALSE(r.nan_mismatch) << what;
  EXPECT_LT(r.nmse, 1e-5) << what;
}

constexpr int kLayers = 8;
constexpr int kEvals = 2 * kParallelCopies + 1;  // every slot used twice, then once more

// Pipelined: kEvals evaluations submitted back to back, each with new inputs, synchronized only at the end; the
// logits then are the last evaluation's.
TEST(SchedParallelMemory, PipelinedEvaluationsHaveNoRaceOverAdversarialSeeds) {
  const LlamaConfig c = model(kLayers);
  const std::vector<std::vector<float>> want = cpu_reference(c, 21, kEvals);
  // 25 seeds in the suite (each is a full pipelined run; under ASan a quarter, tests/support/sweep.h); set
  // TESSERA_RACE_SEEDS=100 (or more) for a longer sweep.
  const char* env = std::getenv("TESSERA_RACE_SEEDS");
  const uint64_t kSeeds =
      env != nullptr && std::atoi(env) > 0 ? static_cast<uint64_t>(std::atoi(env)) : tessera::test::sweep_seeds(25);
  size_t commands = 0;
  for (uint64_t seed = 1; seed <= kSeeds; ++seed) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    o.record_trace = false;
    Offloaded om(o, c, 21, /*parallel=*/true);
    for (int e = 0; e < kEvals; ++e) {
      ASSERT_EQ(om.submit(e), ComputeStatus::kSuccess) << "seed " << seed << ": " << om.sched->last_error();
      ASSERT_EQ(om.sched->current_slot(), e % kParallelCopies);
    }
    EXPECT_TRUE(om.sched->synchronize().ok());
    ASSERT_GE(om.sched->n_splits(), 3 * kLayers) << om.sched->report();
    ASSERT_TRUE(om.sim->races().empty()) << "seed " << seed << ":\n" << om.sim->races_report();
    ASSERT_TRUE(om.sim->errors().empty()) << "seed " << seed << ": " << om.sim->errors()[0];
    expect_close(om.logits(), want.back(), "seed " + std::to_string(seed));
    for (size_t d = 0; d < om.sim->device_count(); ++d) commands += om.sim->stats(d).n_commands;
  }
  EXPECT_GT(commands, kSeeds * kEvals * 3 * kLayers) << "the simulator saw the evaluations' commands";
}

// Pipelined as above, with the graph inputs on an asynchronous device: an evaluation in slot 0 reads them themselves
// (their slot-0 copy is the input, as in llama.cpp), on that device's stream after graph_compute_async returns, so
// the next alloc_graph waits for it before the user writes the next inputs. Without that wait the simulator sees the
// host write the next evaluation's inputs while the CPU's stream still reads slot 0's (mutant
// own-exec-input-owner-readers-not-waited).
TEST(SchedParallelMemory, PipelinedInputsOfAnAsynchronousDeviceAreNotOverwrittenWhileSlot0ReadsThem) {
  const LlamaConfig c = model(4);
  const std::vector<std::vector<float>> want = cpu_reference(c, 23, kEvals);
  const uint64_t seeds = tessera::test::sweep_seeds(8);
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    o.record_trace = false;
    Offloaded om(o, c, 23, /*parallel=*/true, gpu_and_async_cpu());
    for (int e = 0; e < kEvals; ++e) {
      ASSERT_EQ(om.submit(e), ComputeStatus::kSuccess) << "seed " << seed << ": " << om.sched->last_error();
    }
    EXPECT_TRUE(om.sched->synchronize().ok());
    ASSERT_TRUE(om.sim->races().empty()) << "seed " << seed << ":\n" << om.sim->races_report();
    ASSERT_TRUE(om.sim->errors().empty()) << "seed " << seed << ": " << om.sim->errors()[0];
    expect_close(om.logits(), want.back(), "seed " + std::to_string(seed));
  }
}

// A GPU and an asynchronous CPU (adversarial seed), a context for a small graph, and a 64 x 4 f32 weight on the GPU
// (random values), so that the product that reads it runs there.
struct GpuWeightRig {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  Context ctx{ContextParams{.no_alloc = true}};
  Tensor* w = nullptr;
  std::vector<float> wv;
  std::vector<std::unique_ptr<Buffer>> buffers;

  GpuWeightRig(const TopologyConfig& t, uint64_t seed) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    sim = make_sim(t, o);
    backends = sim->make_backends().value();
    w = ctx.new_tensor_2d(Type::kF32, 64, 4);
    auto wb = allocate_tensors({{w, sim->device(0)->buffer_type()}}, BufferUsage::kWeights);
    EXPECT_TRUE(wb.ok()) << wb.status().to_string();
    if (wb.ok()) buffers = std::move(wb).value();
    wv = random_values(64 * 4, seed);
    set_f32(*w, wv);
  }
  std::unique_ptr<Scheduler> scheduler(bool parallel) {
    SchedulerParams p;
    p.parallel = parallel;
    return Scheduler::create({backends[0].get(), backends[1].get()}, p).value();
  }
};

// A user input that the graph writes (a CPY into it, on an asynchronous CPU) and that a later split on the GPU reads:
// the GPU's copy of the input must be what the CPY wrote. The host copied user inputs at once, before the CPU's stream
// had run the CPY, so the GPU read the user's values (found by the end-to-end fuzzer; mutant
// own-exec-input-written-by-earlier-split-copied-at-once). Serial and pipelined, every evaluation checked.
TEST(SchedParallelMemory, AnInputWrittenByAnEarlierSplitReachesTheGpuAsWritten) {
  for (const bool parallel : {false, true}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(std::string(parallel ? "pipelined" : "serial") + ", seed " + std::to_string(seed));
      GpuWeightRig rig(gpu_and_async_cpu(), seed);
      Context& ctx = rig.ctx;
      Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 1);  // written by the graph
      Tensor* z = ctx.new_tensor_2d(Type::kF32, 64, 1);
      for (Tensor* in : {x, z}) set_input(*in);
      Tensor* written = cpy(ctx, scale(ctx, z, 2.0f), x);  // on the CPU, where x lives
      Tensor* y = mul_mat(ctx, rig.w, x);                  // on the GPU, after the CPY in graph order
      set_output(*y);
      Graph g;
      ASSERT_TRUE(g.build_forward(written).ok());
      ASSERT_TRUE(g.build_forward(y).ok());
      const std::vector<float>& wv = rig.wv;
      auto sched = rig.scheduler(parallel);
      for (int e = 0; e < 3; ++e) {
        ASSERT_TRUE(sched->alloc_graph(g).ok());
        const std::vector<float> xv = random_values(64, 100 + seed * 10 + e);
        const std::vector<float> zv = random_values(64, 200 + seed * 10 + e);
        set_f32(*x, xv);
        set_f32(*z, zv);
        ASSERT_EQ(sched->graph_compute(g), ComputeStatus::kSuccess) << sched->last_error();
        ASSERT_EQ(sched->get_tensor_backend(y), rig.backends[0].get()) << sched->report();
        const std::vector<float> got = get_f32(*y);
        for (int r = 0; r < 4; ++r) {  // y[r] = sum_i w[i, r] * 2 z[i]: the CPY's values, not the user's x
          double want = 0;
          for (int i = 0; i < 64; ++i)
            want += double(wv[static_cast<size_t>(r * 64 + i)]) * 2.0 * zv[static_cast<size_t>(i)];
          EXPECT_NEAR(got[static_cast<size_t>(r)], want, 1e-3 * (1.0 + std::abs(want))) << "evaluation " << e;
        }
      }
      EXPECT_TRUE(rig.sim->races().empty()) << rig.sim->races_report();
      EXPECT_TRUE(rig.sim->errors().empty());
    }
  }
}

// A leaf that a host-visible GPU reads where it lives (a CPU cache), and that a later split on an asynchronous CPU
// writes into (SET_ROWS): the next evaluation's read comes after this evaluation's write, so the GPU's first split
// waits for the CPU (found by the end-to-end fuzzer, serial with a computation again; mutant
// own-exec-write-before-next-evaluations-inplace-read-not-waited). Serial and pipelined, computed again without
// alloc_graph, adversarial seeds: no race.
TEST(SchedParallelMemory, AWriteIntoALeafIsDoneBeforeTheNextEvaluationReadsItInPlace) {
  for (const bool parallel : {false, true}) {
    for (uint64_t seed = 1; seed <= 4; ++seed) {
      SCOPED_TRACE(std::string(parallel ? "pipelined" : "serial") + ", seed " + std::to_string(seed));
      TopologyConfig t = gpu_and_async_cpu();
      t.devices[0].host_visible = true;  // reads the CPU's buffers in place
      GpuWeightRig rig(t, seed);
      Context& ctx = rig.ctx;
      Tensor* cache = ctx.new_tensor_2d(Type::kF32, 64, 8);  // a CPU leaf: read in place, then written
      Tensor* rows = ctx.new_tensor_2d(Type::kF32, 64, 2);
      Tensor* slots = ctx.new_tensor_1d(Type::kI32, 2);
      for (Tensor* in : {cache, rows, slots}) set_input(*in);
      Tensor* y = mul_mat(ctx, rig.w, cache);               // on the GPU, first
      Tensor* written = set_rows(ctx, cache, rows, slots);  // on the CPU, where the cache lives, after it
      set_output(*y);
      Graph g;
      ASSERT_TRUE(g.build_forward(y).ok());
      ASSERT_TRUE(g.build_forward(written).ok());
      auto sched = rig.scheduler(parallel);
      ASSERT_TRUE(sched->alloc_graph(g).ok());
      set_f32(*cache, random_values(64 * 8, 100 + seed));
      set_f32(*rows, random_values(64 * 2, 200 + seed));
      const int32_t ids[2] = {1, 5};
      ASSERT_TRUE(tensor_set(*slots, ids, 0, sizeof ids).ok());
      for (int e = 0; e < 3; ++e) {  // the same graph computed again, without alloc_graph
        ASSERT_EQ(sched->graph_compute_async(g), ComputeStatus::kSuccess) << sched->last_error();
      }
      ASSERT_TRUE(sched->synchronize().ok());
      ASSERT_EQ(sched->get_tensor_backend(y), rig.backends[0].get()) << sched->report();
      EXPECT_TRUE(rig.sim->races().empty()) << rig.sim->races_report() << sched->report();
      EXPECT_TRUE(rig.sim->errors().empty());
    }
  }
}

// Each evaluation's logits, with the next evaluation already submitted before reading the previous one is not
// possible (they share the output); so here every evaluation is synchronized and checked, on many seeds.
TEST(SchedParallelMemory, EveryEvaluationMatchesTheCpuReference) {
  const LlamaConfig c = model(kLayers);
  const std::vector<std::vector<float>> want = cpu_reference(c, 22, kEvals);
  const uint64_t seeds = tessera::test::sweep_seeds(20);  // a quarter under ASan (tests/support/sweep.h)
  for (uint64_t seed = 1; seed <= seeds; ++seed) {
    SimOptions o;
    o.seed = seed;
    o.adversarial = true;
    o.record_trace = false;
    Offloaded om(o, c, 22, /*parallel=*/true);
    for (int e = 0; e < kEvals; ++e) {
      ASSERT_EQ(om.submit(e), ComputeStatus::kSuccess) << "seed " << seed << ": " << om.sched->last_error();
      EXPECT_TRUE(om.sched->synchronize().ok());
      expect_close(om.logits(), want[static_cast<size_t>(e)],
                   "seed " + std::to_string(seed) + ", evaluation " + std::to_string(e));
    }
    ASSERT_TRUE(om.sim->races().empty()) << "seed " << seed << ":\n" << om.sim->races_report();
    ASSERT_TRUE(om.sim->errors().empty()) << "seed " << seed << ": " << om.sim->errors()[0];
  }
}

// Two models on one scheduler, evaluated in turn (a prompt batch of 4 tokens and a decode step of 1, each with its own
// weights and KV cache, as a draft and a main model): the plan cache keeps both plans, and switching between them
// with evaluations in flight keeps the slots' copies and events right. With 3 slots the two plans take every slot in
// turn (slot s is used by the prompt, then by the decode step, ...), under adversarial seeds: no race, and the outputs
// of each evaluation are the CPU reference's (synchronized: every one of them; pipelined: the last).
struct TwoModels {
  std::unique_ptr<Simulator> sim;
  std::vector<std::unique_ptr<Backend>> backends;
  LlamaGraph m[2];
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::unique_ptr<Scheduler> sched;

  TwoModels(const SimOptions& opt, const LlamaConfig (&c)[2], int n_copies) {
    sim = make_sim(gpu_and_cpu(), opt);
    backends = sim->make_backends().value();
    BufferType* gpu_buft = sim->device(0)->buffer_type();
    BufferType* cpu_buft = sim->device(1)->buffer_type();
    for (int k = 0; k < 2; ++k) {
      m[k] = build_llama(c[k]).value();
      // the second half of the layers and the output head on the GPU, the rest (and the caches with them) on the CPU
      auto on_gpu = [&](int layer) { return layer >= c[k].n_layer / 2; };
      std::vector<std::pair<Tensor*, BufferType*>> where;
      for (Tensor* w : m[k].weights) {
        const int layer = m[k].layer_of(w);
        where.emplace_back(w, (layer >= 0 ? on_gpu(layer) : w != m[k].tok_embd) ? gpu_buft : cpu_buft);
      }
      for (auto usage : {BufferUsage::kWeights, BufferUsage::kAny}) {
        auto b = allocate_tensors(where, usage);
        EXPECT_TRUE(b.ok()) << b.status().to_string();
        for (auto& buf : b.value()) buffers.push_back(std::move(buf));
        where.clear();
        for (Tensor* kv : m[k].kv_cache) where.emplace_back(kv, on_gpu(m[k].layer_of(kv)) ? gpu_buft : cpu_buft);
      }
      EXPECT_TRUE(fill_random(m[k], 30 + static_cast<uint64_t>(k)).ok());
    }
    SchedulerParams p;
    p.parallel = true;
    p.n_copies = n_copies;
    sched = std::move(Scheduler::create({backends[0].get(), backends[1].get()}, p)).value();
  }
  ~TwoModels() {
    sched.reset();
    buffers.clear();
    backends.clear();
  }
  ComputeStatus submit(int k, int e) {
    if (Status s = sched->alloc_graph(*m[k].graph); !s.ok()) {
      ADD_FAILURE() << s.to_string();
      return ComputeStatus::kAllocFailed;
    }
    EXPECT_TRUE(set_inputs(m[k], default_inputs(m[k].config, input_seed(e))).ok());
    return sched->graph_compute_async(*m[k].graph);
  }
};

TEST(SchedParallelMemory, AlternatingCachedPlansInFlightHaveNoRace) {
  constexpr int kTurns = 3;  // prompt, prompt, decode, decode, ... : 12 allocations over 3 slots, each slot 4 times
  LlamaConfig c[2] = {model(2), model(2)};
  c[0].n_tokens = 4;
  c[0].n_outputs = 1;
  c[1].n_tokens = 1;
  std::vector<std::vector<float>> want[2] = {cpu_reference(c[0], 30, 2 * kTurns), cpu_reference(c[1], 31, 2 * kTurns)};
  const uint64_t seeds = tessera::test::sweep_seeds(3);
  for (bool pipelined : {true, false}) {
    for (uint64_t seed = 1; seed <= seeds; ++seed) {
      SCOPED_TRACE(std::string(pipelined ? "pipelined" : "synchronized") + ", seed " + std::to_string(seed));
      SimOptions o;
      o.seed = seed;
      o.adversarial = true;
      o.record_trace = false;
      TwoModels tm(o, c, 3);
      for (int turn = 0; turn < kTurns; ++turn) {
        for (int k = 0; k < 2; ++k) {
          for (int e = 2 * turn; e < 2 * turn + 2; ++e) {  // two evaluations of one model in turn
            ASSERT_EQ(tm.submit(k, e), ComputeStatus::kSuccess) << tm.sched->last_error();
            EXPECT_EQ(tm.sched->plan_reuse().reused, e > 0) << tm.sched->plan_reuse().why_not;
            if (pipelined) continue;  // in flight: the next allocation (of either model) comes first
            ASSERT_TRUE(tm.sched->synchronize().ok());
            expect_close(tensor_to_f32(*tm.m[k].logits).value(), want[k][static_cast<size_t>(e)],
                         "model " + std::to_string(k) + ", evaluation " + std::to_string(e));
          }
        }
      }
      ASSERT_TRUE(tm.sched->synchronize().ok());
      expect_close(tensor_to_f32(*tm.m[1].logits).value(), want[1].back(), "the last evaluation");
      EXPECT_EQ(tm.sched->plan_reuse().full_plans, 2);
      EXPECT_EQ(tm.sched->plan_reuse().reuses, 4 * kTurns - 2);
      ASSERT_TRUE(tm.sim->races().empty()) << tm.sim->races_report();
      ASSERT_TRUE(tm.sim->errors().empty()) << tm.sim->errors()[0];
    }
  }
}

// Bytes of the copies that can be in flight at once in one evaluation, per backend: at each split, the copies made
// for it or for an earlier split of its backend and still read by it or a later split, plus the graph inputs' copies
// (alive for the whole evaluation), each rounded up to `align`. Run after an allocation in slot 0, where a graph input
// is its own copy: it is counted as a copy, and its bytes also go to *graph_inputs (the serial plan has them too).
std::vector<size_t> in_flight_copy_bytes(const Scheduler& s, const Graph& g, size_t align,
                                         std::vector<size_t>* graph_inputs) {
  graph_inputs->assign(static_cast<size_t>(s.n_backends()), 0);
  struct Life {
    int backend = -1;
    int first = INT32_MAX, last = -1;
    size_t bytes = 0;
    bool whole = false;
  };
  std::map<const Tensor*, Life> copies;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* node = g.node(i);
    const int sp = s.explain(node).split;
    for (const Tensor* src : node->src) {
      if (src == nullptr) continue;
      const TensorExplain e = s.explain(src);
      // a graph input read as itself in slot 0: INPUT and OUTPUT, not computed (a copy's flags)
      const bool input_slot0 =
          !e.is_copy && src->op == Op::kNone && (src->flags & (kFlagInput | kFlagOutput)) == (kFlagInput | kFlagOutput);
      if (!e.is_copy && !input_slot0) continue;
      if (input_slot0 && copies.count(src) == 0) {
        (*graph_inputs)[static_cast<size_t>(e.backend)] += (nbytes(*src) + align - 1) / align * align;
      }
      Life& l = copies[src];
      l.backend = e.backend;
      l.bytes = (nbytes(*src) + align - 1) / align * align;
      l.whole = l.whole || (src->flags & kFlagInput) != 0;
      l.first = std::min(l.first, sp);
      l.last = std::max(l.last, sp);
    }
  }
  std::vector<size_t> peak(static_cast<size_t>(s.n_backends()), 0);
  for (int sp = 0; sp < s.n_splits(); ++sp) {
    std::vector<size_t> live(peak.size(), 0);
    for (const auto& [t, l] : copies) {
      if (l.whole || (l.first <= sp && sp <= l.last)) live[static_cast<size_t>(l.backend)] += l.bytes;
    }
    for (size_t b = 0; b < peak.size(); ++b) peak[b] = std::max(peak[b], live[b]);
  }
  return peak;
}

// Parallel compute memory = the serial plan (without its copies) + kParallelCopies x the copies live at once; it does
// not grow with the number of splits (the anchor's defect: every copy of every split lifelong, x 4).
TEST(SchedParallelMemory, ParallelMemoryIsSerialPlusTheCopiesInFlight) {
  std::vector<size_t> extra_by_size;
  for (int layers : {4, 16, 64}) {
    SCOPED_TRACE(std::to_string(layers) + " layers");
    const LlamaConfig c = model(layers);
    SimOptions o;
    o.mode = MemoryMode::kMetadata;
    o.record_trace = false;
    Offloaded serial(o, c, 1, false), parallel(o, c, 1, true);
    auto ss = serial.sched->reserve_size(*serial.m.graph);
    auto ps = parallel.sched->reserve_size(*parallel.m.graph);
    ASSERT_TRUE(ss.ok()) << ss.status().to_string();
    ASSERT_TRUE(ps.ok()) << ps.status().to_string();
    ASSERT_TRUE(parallel.sched->alloc_graph(*parallel.m.graph).ok()) << parallel.sched->last_error();
    EXPECT_GE(parallel.sched->n_splits(), 3 * layers);
    ASSERT_EQ(parallel.sched->current_slot(), 0);
    std::vector<size_t> inputs;
    const std::vector<size_t> in_flight = in_flight_copy_bytes(*parallel.sched, *parallel.m.graph, 256, &inputs);
    size_t serial_total = 0, parallel_total = 0;
    for (size_t b = 0; b < 2; ++b) {
      // (slot 0's copy of a graph input is the input, which the serial plan holds already)
      EXPECT_LE((*ps)[b], (*ss)[b] + kParallelCopies * in_flight[b] - inputs[b])
          << "backend " << b << ": serial " << (*ss)[b] << ", in flight per slot " << in_flight[b] << ", graph inputs "
          << inputs[b];
      serial_total += (*ss)[b];
      parallel_total += (*ps)[b];
    }
    EXPECT_GT(parallel_total, serial_total) << "every slot has its own copies";
    extra_by_size.push_back(parallel_total - serial_total);
    // The reserve places what was planned: buffer sizes equal the dry run.
    ASSERT_TRUE(parallel.sched->reserve(*parallel.m.graph).ok());
    for (int b = 0; b < 2; ++b) EXPECT_EQ(parallel.sched->buffer_size(b), (*ps)[static_cast<size_t>(b)]) << b;
  }
  // 16x the layers (and the splits), the same extra memory.
  EXPECT_EQ(extra_by_size.front(), extra_by_size.back());
}

// The scheduler hands the planner the positions of every source in its graph (dependency nodes, copies, sources
// rewritten to copies, graph inputs' per-slot copies): the planner then needs no pointer lookup to number it, on a
// graph with dozens of splits, serial and parallel, at reserve and at every allocation's check. The planner takes
// them as exact (it does not read the source pointers); here it checks them (TESSERA_CHECK_POSITIONS=1, as ctest sets
// for every test), so a wrong one fails the reserve or the allocation.
TEST(SchedParallelMemory, ThePlannerNumbersTheSchedulersGraphWithoutLookups) {
  setenv("TESSERA_CHECK_POSITIONS", "1", 1);  // read by the planner when the scheduler creates it
  for (bool parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "parallel" : "serial");
    SimOptions o;
    o.mode = MemoryMode::kMetadata;
    o.record_trace = false;
    Offloaded off(o, model(8), 1, parallel);
    ASSERT_TRUE(off.sched->reserve(*off.m.graph).ok());
    EXPECT_EQ(off.sched->planner_index_lookups(), 0u);
    for (int e = 0; e < 3; ++e) {
      ASSERT_TRUE(off.sched->alloc_graph(*off.m.graph).ok()) << off.sched->last_error();
      EXPECT_GE(off.sched->n_splits(), 3 * 4);
      EXPECT_EQ(off.sched->planner_index_lookups(), 0u) << "allocation " << e;
    }
  }
}

// The slots' copies are disjoint: an input copy of one slot never overlaps the same copy of another slot.
TEST(SchedParallelMemory, EachSlotHasItsOwnCopyMemory) {
  const LlamaConfig c = model(4);
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  Offloaded om(o, c, 1, true);
  std::vector<std::set<const void*>> per_slot(kParallelCopies);
  std::set<const void*> all;
  for (int e = 0; e < kParallelCopies; ++e) {
    ASSERT_TRUE(om.sched->alloc_graph(*om.m.graph).ok()) << om.sched->last_error();
    const int slot = om.sched->current_slot();
    for (size_t i = 0; i < om.m.graph->n_nodes(); ++i) {
      for (const Tensor* src : om.m.graph->node(i)->src) {
        if (src != nullptr && om.sched->explain(src).is_copy) per_slot[static_cast<size_t>(slot)].insert(src->data);
      }
    }
    EXPECT_TRUE(om.sched->synchronize().ok());
  }
  for (const auto& s : per_slot) {
    EXPECT_FALSE(s.empty());
    for (const void* p : s) EXPECT_TRUE(all.insert(p).second) << "an address shared by two slots";
  }
}

}  // namespace
