// The simulator: simulated commands per second in metadata-only mode (target >= 1,000,000/s), and planning
// plus simulating one forward pass of a 70B-like llama graph on the 8 x 80 GiB preset (target < 1 s).
//
//   tessera_bench_sim                       Google Benchmark suites
//   tessera_bench_sim --forward70b          one timed 70B forward pass, phase by phase (build, place, schedule+plan,
//                                           simulate), with the simulated makespan and per-device memory
#include <benchmark/benchmark.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/sched.h"
#include "tessera/harness/placement/allocate.h"
#include "tessera/sim/simulator.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/builtin.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;

namespace {

DeviceConfig bench_gpu(const char* name) {
  DeviceConfig d;
  d.name = name;
  d.memory = 80 * GiB;
  d.caps = {true, false, false, true};
  return d;
}

DeviceConfig bench_cpu() {
  DeviceConfig d;
  d.name = "cpu";
  d.type = DeviceType::kCpu;
  d.wraps = "CPU";
  d.host_visible = true;
  d.alignment = 64;
  d.caps = {false, false, false, false};
  return d;
}

// Single-node graphs (y_i = x_i * 2) in one metadata-only buffer per device, submitted round-robin to two GPU
// streams; every 8th command on stream 1 waits for an event recorded on stream 0, every 8th on stream 0 copies from
// stream 1's buffer. Counts compute, copy and event commands.
void BM_SimCommandsMetadata(benchmark::State& state) {
  const bool trace = state.range(0) != 0;
  TopologyConfig t;
  t.name = "bench";
  t.devices = {bench_gpu("gpu0"), bench_gpu("gpu1"), bench_cpu()};
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  o.record_trace = trace;
  auto sim = Simulator::create(t, o, &builtin_registry()).value();
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  constexpr int kOps = 64;
  Context ctx({.no_alloc = true});
  std::vector<std::unique_ptr<Graph>> graphs;
  std::vector<Tensor*> outs;
  for (int i = 0; i < kOps; ++i) {
    Tensor* x = ctx.new_tensor_2d(Type::kF32, 4096, 8);
    format_name(*x, "x%d", i);
    Tensor* y = scale(ctx, x, 2.0f);
    format_name(*y, "y%d", i);
    auto g = std::make_unique<Graph>(4);
    (void)g->add_node(y);
    graphs.push_back(std::move(g));
    outs.push_back(y);
  }
  auto buf0 = alloc_ctx_tensors(ctx, *sim->device(0)->buffer_type()).value();
  Context ctx1({.no_alloc = true});
  std::vector<Tensor*> dst;
  for (int i = 0; i < kOps; ++i) dst.push_back(ctx1.new_tensor_2d(Type::kF32, 4096, 8));
  auto buf1 = alloc_ctx_tensors(ctx1, *sim->device(1)->buffer_type()).value();
  auto ev = sim->device(0)->event_new();
  uint64_t i = 0;
  const uint64_t before = sim->commands();
  for (auto _ : state) {
    const int k = static_cast<int>(i % kOps);
    if (i % 2 == 0) {
      b0->graph_compute_async(*graphs[static_cast<size_t>(k)]);
      if (i % 16 == 0) ev->record(*b0);
    } else if (i % 16 == 1) {
      ev->wait(*b1);
      b1->cpy_tensor_async(b0.get(), *outs[static_cast<size_t>(k)], *dst[static_cast<size_t>(k)]);
    } else {
      b1->cpy_tensor_async(b1.get(), *dst[static_cast<size_t>(k)], *dst[static_cast<size_t>((k + 1) % kOps)]);
    }
    ++i;
  }
  sim->finish();
  state.SetItemsProcessed(static_cast<int64_t>(sim->commands() - before));
  state.counters["races"] = static_cast<double>(sim->races().size());
  state.SetLabel(trace ? "with trace" : "no trace");
}
BENCHMARK(BM_SimCommandsMetadata)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond)->Iterations(2000000);

// The 70B-like forward pass on the 8 x 80 GiB preset: 10 layers per GPU, token embedding on the CPU.
struct Forward70b {
  double build_ms = 0, place_ms = 0, schedule_ms = 0, simulate_ms = 0;
  double makespan_us = 0;
  int splits = 0;
  size_t commands = 0;
  std::vector<size_t> peak;
  std::string error;
};

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Forward70b forward_70b(int n_tokens) {
  Forward70b r;
  using clock = std::chrono::steady_clock;
  auto t0 = clock::now();
  TopologyConfig topo = topology_preset("8x80gb").value();
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  auto sim = Simulator::create(topo, o, &builtin_registry()).value();
  auto backends = sim->make_backends().value();
  models::LlamaConfig c = models::preset("70b").value();
  c.n_tokens = n_tokens;
  models::LlamaGraph m = models::build_llama(c).value();
  r.build_ms = ms_since(t0);

  t0 = clock::now();
  const int n_gpu = static_cast<int>(sim->device_count()) - 1;
  auto buft_of = [&](int layer) -> BufferType* {
    if (layer < 0) return sim->device(static_cast<size_t>(n_gpu - 1))->buffer_type();
    return sim->device(static_cast<size_t>(layer * n_gpu / c.n_layer))->buffer_type();
  };
  std::vector<std::pair<Tensor*, BufferType*>> where;
  for (Tensor* w : m.weights) {
    where.emplace_back(
        w, w == m.tok_embd ? sim->device(static_cast<size_t>(n_gpu))->buffer_type() : buft_of(m.layer_of(w)));
  }
  auto wb = allocate_tensors(where, BufferUsage::kWeights);
  where.clear();
  for (Tensor* kv : m.kv_cache) where.emplace_back(kv, buft_of(m.layer_of(kv)));
  auto cb = allocate_tensors(where, BufferUsage::kAny);
  if (!wb.ok() || !cb.ok()) {
    r.error = !wb.ok() ? wb.status().to_string() : cb.status().to_string();
    return r;
  }
  r.place_ms = ms_since(t0);

  t0 = clock::now();
  std::vector<Backend*> bp;
  for (auto& b : backends) bp.push_back(b.get());
  auto sched = Scheduler::create(bp, {}).value();
  if (Status s = sched->alloc_graph(*m.graph); !s.ok()) {
    r.error = s.to_string();
    return r;
  }
  r.schedule_ms = ms_since(t0);

  t0 = clock::now();
  const uint64_t c0 = sim->commands();
  if (sched->graph_compute(*m.graph) != ComputeStatus::kSuccess) {
    r.error = sched->last_error();
    return r;
  }
  sim->finish();
  r.simulate_ms = ms_since(t0);
  r.commands = sim->commands() - c0;
  r.splits = sched->n_splits();
  r.makespan_us = summarize(sim->trace()).makespan_us;
  for (size_t d = 0; d < sim->device_count(); ++d) r.peak.push_back(sim->stats(d).memory_peak);
  if (!sim->races().empty()) r.error = "race: " + sim->races()[0].to_string();
  sched.reset();
  wb.value().clear();
  cb.value().clear();
  return r;
}

void BM_Forward70bPlanAndSimulate(benchmark::State& state) {
  for (auto _ : state) {
    Forward70b r = forward_70b(static_cast<int>(state.range(0)));
    if (!r.error.empty()) {
      state.SkipWithError(r.error.c_str());
      return;
    }
    state.counters["schedule_ms"] = r.schedule_ms;
    state.counters["simulate_ms"] = r.simulate_ms;
    state.counters["plan+sim_ms"] = r.schedule_ms + r.simulate_ms;
    state.counters["splits"] = r.splits;
    state.counters["makespan_ms"] = r.makespan_us / 1000.0;
  }
}
BENCHMARK(BM_Forward70bPlanAndSimulate)->Arg(1)->Arg(512)->Unit(benchmark::kMillisecond)->Iterations(3);

int print_forward_70b() {
  for (int tokens : {1, 512}) {
    Forward70b r = forward_70b(tokens);
    if (!r.error.empty()) {
      std::fprintf(stderr, "70b forward (%d tokens): %s\n", tokens, r.error.c_str());
      return 1;
    }
    std::printf("70b forward, %d tokens, 8x80gb preset, metadata-only:\n", tokens);
    std::printf("  build graph %.1f ms, place weights %.1f ms, schedule+plan+allocate %.1f ms, simulate %.1f ms\n",
                r.build_ms, r.place_ms, r.schedule_ms, r.simulate_ms);
    std::printf(
        "  planning plus simulating: %.1f ms (target < 1000 ms); %d splits, %zu simulated commands, makespan "
        "%.3f ms\n",
        r.schedule_ms + r.simulate_ms, r.splits, r.commands, r.makespan_us / 1000.0);
    std::printf("  peak memory per device (GiB):");
    for (size_t p : r.peak) std::printf(" %.2f", static_cast<double>(p) / static_cast<double>(GiB));
    std::printf("\n");
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--forward70b") == 0) return print_forward_70b();
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
