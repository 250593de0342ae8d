// The multi-backend scheduler on llama-style graphs with partial offload (bench/RESULTS.md, "Scheduler"): split time
// per node (passes 1-5), reserve time per node (split + build of the planner's graph + plan), and compute memory with
// and without `parallel`.
//
// Graphs: the "tiny" preset shapes (n_embd 64, 4 heads / 2 KV heads, ff 128, vocab 256) with more layers, MUL_MAT ->
// SOFT_MAX -> MUL_MAT attention (no flash attention, so SOFT_MAX exists), 32 tokens over a 256-slot KV cache, from
// about 1,000 to 100,000 nodes. Shapes do not matter for split timing; they do for the memory columns.
//
// Placement (as llama.cpp with n_gpu_layers = n_layer / 2): token_embd, output_norm, output and the first half of
// the layers on the CPU, the second half of the layers on "GPU0" (a RestrictedDevice from
// tests/support/sched_doubles.h: non-host buffer type, refusing ROPE and SOFT_MAX, so every offloaded layer splits
// several times). Backends: {GPU0, CPU}.
//
// Weights and KV cache are metadata-only: each points at a placeholder buffer (no memory) of the buffer type of the
// device that holds it; the weight placeholders have usage WEIGHTS (pass 1 and pass 5 only look at the buffer's type
// and usage, never at data). The KV cache placeholders have usage ANY.
//
// After the benchmarks a markdown table of all sizes is printed (for bench/RESULTS.md). --profile runs no benchmark:
// it times each pass (and the teardown) separately with thread CPU timers, per size (--profile=N: only the N-layer
// model), one walk of the nodes through SchedPlan::assign vs dense arrays and through supports_op, the backends'
// questions one split asks, and a floor (the reads and questions any scheduler must make, timed alone). --report=N
// prints the splits of an N-layer model (backend, inputs, nodes with backend and cause) as split_graph cuts them, to
// check the setup.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../src/sched/plan.h"
#include "tessera/models/llama.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/sched.h"
#include "sched_model.h"
#include "support/sched_doubles.h"

using namespace tessera;
using namespace tessera::models;
using namespace tessera::bench;

namespace {

// Every source pointer of every node: the user's graph must be intact after a split and its restore.
std::vector<const Tensor*> sources_of(const Graph& g) {
  std::vector<const Tensor*> v;
  v.reserve(g.n_nodes() * kMaxSrc);
  for (const Tensor* n : g.nodes()) v.insert(v.end(), std::begin(n->src), std::end(n->src));
  return v;
}

size_t align64(size_t n) { return (n + 63) / 64 * 64; }

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}
double wall_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

struct Row {
  int n_layer = 0;
  size_t nodes = 0, splits = 0, inputs = 0;
  double split_ns = 0, cycle_ns = 0, reserve_size_ns = 0, reserve_ns = 0;  // per node, best of the runs
  size_t bytes_serial = 0, bytes_parallel = 0;
  size_t max_split_input_bytes = 0, graph_input_bytes = 0;  // for the in-flight estimate
};
std::vector<int> g_order;
std::map<int, Row> g_rows;
Row& row(int n_layer) {
  if (!g_rows.count(n_layer)) g_order.push_back(n_layer);
  Row& r = g_rows[n_layer];
  r.n_layer = n_layer;
  return r;
}
void keep_min(double& slot, double v) { slot = slot == 0 ? v : std::min(slot, v); }

sched::BackendList backend_list() {
  std::vector<BufferType*> bufts;
  for (Backend* b : backends().list()) bufts.push_back(b->default_buffer_type());
  return sched::BackendList(backends().list(), bufts);
}

// ---- split_graph: passes 1-5 on a fresh plan, then the user's sources restored ----
void BM_Split(benchmark::State& state, int n_layer) {
  Model& mod = model(n_layer);
  Graph& g = mod.graph();
  sched::BackendList set = backend_list();
  const sched::PassOptions opt;  // op_offload, 30 inputs, 1 slot
  const std::vector<const Tensor*> before = sources_of(g);

  size_t splits = 0, inputs = 0, iterations = 0, max_in_bytes = 0;
  double split_cpu = 0, cycle_cpu = 0;
  // One plan for every iteration, cleared between splits as the scheduler does (its arrays keep their capacity).
  auto plan = std::make_unique<sched::SchedPlan>();
  for (auto _ : state) {
    const double c0 = thread_cpu_ns();
    plan->clear();
    plan->copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
    const double w1 = wall_ns(), c1 = thread_cpu_ns();
    Status s = sched::split_graph(*plan, g, set, opt);
    const double c2 = thread_cpu_ns(), w2 = wall_ns();
    if (!s.ok()) {
      state.SkipWithError(s.to_string().c_str());
      return;
    }
    splits = plan->splits.size();
    inputs = 0;
    max_in_bytes = 0;
    for (const auto& sp : plan->splits) {
      inputs += sp.inputs.size();
      size_t b = 0;
      for (const Tensor* t : sp.inputs) b += align64(nbytes(*t));
      max_in_bytes = std::max(max_in_bytes, b);
    }
    sched::restore_sources(*plan);
    plan->copy_ctx.reset();
    const double c3 = thread_cpu_ns();
    state.SetIterationTime((w2 - w1) * 1e-9);
    split_cpu += c2 - c1;
    cycle_cpu += c3 - c0;
    ++iterations;
  }
  if (sources_of(g) != before) {
    state.SkipWithError("the user's graph was not restored");
    return;
  }
  const double n = static_cast<double>(g.n_nodes()) * static_cast<double>(iterations);
  state.counters["nodes"] = static_cast<double>(g.n_nodes());
  state.counters["splits"] = static_cast<double>(splits);
  state.counters["ns_per_node"] = split_cpu / n;
  state.counters["cycle_ns_per_node"] = cycle_cpu / n;
  Row& r = row(n_layer);
  r.nodes = g.n_nodes();
  r.splits = splits;
  r.inputs = inputs;
  r.max_split_input_bytes = max_in_bytes;
  r.graph_input_bytes = 0;
  for (const Tensor* t : g.leafs()) {
    if ((t->flags & kFlagInput) != 0) r.graph_input_bytes += align64(nbytes(*t));
  }
  keep_min(r.split_ns, split_cpu / n);
  keep_min(r.cycle_ns, cycle_cpu / n);
}

// ---- Scheduler::reserve_size (dry run) or Scheduler::reserve (real buffers): split + planner graph + plan ----
void BM_Reserve(benchmark::State& state, int n_layer, bool dry) {
  Model& mod = model(n_layer);
  Graph& g = mod.graph();
  auto sched = Scheduler::create(backends().list());
  if (!sched.ok()) {
    state.SkipWithError(sched.status().to_string().c_str());
    return;
  }
  Scheduler& s = **sched;
  const std::vector<const Tensor*> before = sources_of(g);
  size_t iterations = 0;
  double cpu = 0;
  for (auto _ : state) {
    const double w0 = wall_ns(), c0 = thread_cpu_ns();
    Status st = Status::Ok();
    if (dry) {
      Result<std::vector<size_t>> r = s.reserve_size(g);
      if (!r.ok()) st = r.status();
      benchmark::DoNotOptimize(r);
    } else {
      st = s.reserve(g);
    }
    const double c1 = thread_cpu_ns(), w1 = wall_ns();
    if (!st.ok()) {
      state.SkipWithError(st.to_string().c_str());
      return;
    }
    state.SetIterationTime((w1 - w0) * 1e-9);
    cpu += c1 - c0;
    ++iterations;
  }
  if (sources_of(g) != before) {
    state.SkipWithError("the user's graph was not restored");
    return;
  }
  const double n = static_cast<double>(g.n_nodes()) * static_cast<double>(iterations);
  state.counters["nodes"] = static_cast<double>(g.n_nodes());
  state.counters["ns_per_node"] = cpu / n;
  Row& r = row(n_layer);
  r.nodes = g.n_nodes();
  keep_min(dry ? r.reserve_size_ns : r.reserve_ns, cpu / n);
}

// ---- compute memory: reserve_size summed over the backends, with and without parallel ----
size_t compute_bytes(Graph& g, bool parallel, std::vector<size_t>* per_backend) {
  SchedulerParams params;
  params.parallel = parallel;
  auto sched = Scheduler::create(backends().list(), params);
  if (!sched.ok()) return 0;
  Result<std::vector<size_t>> r = (*sched)->reserve_size(g);
  if (!r.ok()) {
    std::fprintf(stderr, "reserve_size: %s\n", r.status().to_string().c_str());
    return 0;
  }
  *per_backend = *r;
  size_t total = 0;
  for (size_t b : *r) total += b;
  return total;
}

void BM_Memory(benchmark::State& state, int n_layer) {
  Model& mod = model(n_layer);
  Graph& g = mod.graph();
  std::vector<size_t> serial_b, parallel_b;
  size_t serial = 0, parallel = 0;
  for (auto _ : state) {
    const double w0 = wall_ns();
    serial = compute_bytes(g, false, &serial_b);
    parallel = compute_bytes(g, true, &parallel_b);
    state.SetIterationTime((wall_ns() - w0) * 1e-9);
  }
  if (serial == 0 || parallel == 0) {
    state.SkipWithError("reserve_size failed");
    return;
  }
  state.counters["nodes"] = static_cast<double>(g.n_nodes());
  state.counters["bytes_serial"] = static_cast<double>(serial);
  state.counters["bytes_parallel"] = static_cast<double>(parallel);
  state.counters["ratio"] = static_cast<double>(parallel) / static_cast<double>(serial);
  state.counters["gpu_serial"] = static_cast<double>(serial_b[0]);
  state.counters["gpu_parallel"] = static_cast<double>(parallel_b[0]);
  Row& r = row(n_layer);
  r.nodes = g.n_nodes();
  r.bytes_serial = serial;
  r.bytes_parallel = parallel;
}

// ---- --profile: each pass timed alone (thread CPU time, best of a few runs) ----
void profile(int n_layer, int runs) {
  Model& mod = model(n_layer);
  Graph& g = mod.graph();
  sched::BackendList set = backend_list();
  const sched::PassOptions opt;
  const char* names[] = {"plan+ctx", "index", "pass1", "pass2", "pass3", "pass4", "pass5", "restore", "teardown"};
  constexpr int kSteps = 9;
  double best[kSteps];
  std::fill(std::begin(best), std::end(best), 1e300);
  size_t assigned = 0, rewrites = 0;
  // One plan for every run, cleared between runs, as the scheduler keeps its plan across splits. "teardown" is the
  // clear() and the copies' context.
  auto plan = std::make_unique<sched::SchedPlan>();
  for (int r = 0; r < runs; ++r) {
    double t[kSteps + 1];
    t[0] = thread_cpu_ns();
    plan->copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
    t[1] = thread_cpu_ns();
    plan->index(g, set);
    t[2] = thread_cpu_ns();
    (void)sched::pass1_preassign(*plan, g, set, opt);  // (its index() call finds the graph indexed)
    t[3] = thread_cpu_ns();
    sched::pass2_expand(*plan, g, set);
    t[4] = thread_cpu_ns();
    sched::pass3_upgrade(*plan, g, set);
    t[5] = thread_cpu_ns();
    (void)sched::pass4_sources(*plan, g, set);
    t[6] = thread_cpu_ns();
    (void)sched::pass5_splits(*plan, g, set, opt);
    t[7] = thread_cpu_ns();
    assigned = plan->n_assigned();
    rewrites = plan->rewrites.size();
    sched::restore_sources(*plan);
    t[8] = thread_cpu_ns();
    plan->clear();
    plan->copy_ctx.reset();
    t[9] = thread_cpu_ns();
    for (int i = 0; i < kSteps; ++i) best[i] = std::min(best[i], t[i + 1] - t[i]);
  }
  const double n = static_cast<double>(g.n_nodes());
  std::printf("%d layers, %zu nodes, %zu leafs, %zu assignments, %zu rewrites (ns/node):", n_layer, g.n_nodes(),
              g.n_leafs(), assigned, rewrites);
  for (int i = 0; i < kSteps; ++i) std::printf("  %s %.1f", names[i], best[i] / n);
  std::printf("\n");

  // What the data structures cost alone, per node, over one walk of the nodes (the passes make several such walks):
  // the backend of the node and of each source from SchedPlan::assign (a pointer hash map) vs from a dense array
  // indexed by a per-tensor id computed once; supports_op of both backends through the virtual interface.
  plan = std::make_unique<sched::SchedPlan>();
  plan->copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  (void)sched::split_graph(*plan, g, set, opt);
  std::unordered_map<const Tensor*, int32_t> id;
  std::vector<int8_t> dense;
  plan->for_each_assignment([&](const Tensor* t, const sched::Assignment& a) {
    id[t] = static_cast<int32_t>(dense.size());
    dense.push_back(static_cast<int8_t>(a.backend));
  });
  std::vector<int32_t> node_id, src_id;  // per node: its id and kMaxSrc source ids (-1: none)
  for (const Tensor* node : g.nodes()) {
    node_id.push_back(id.count(node) ? id[node] : -1);
    for (const Tensor* src : node->src) src_id.push_back(src != nullptr && id.count(src) ? id[src] : -1);
  }
  sched::restore_sources(*plan);
  double t_map = 1e300, t_dense = 1e300, t_supp = 1e300;
  long sink = 0;
  for (int r = 0; r < runs; ++r) {
    double t0 = thread_cpu_ns();
    for (const Tensor* node : g.nodes()) {
      sink += plan->backend_of(node);
      for (const Tensor* src : node->src) {
        if (src != nullptr) sink += plan->backend_of(src);
      }
    }
    double t1 = thread_cpu_ns();
    for (size_t i = 0; i < node_id.size(); ++i) {
      sink += dense[static_cast<size_t>(node_id[i])];
      for (int j = 0; j < kMaxSrc; ++j) {
        const int32_t sid = src_id[i * kMaxSrc + static_cast<size_t>(j)];
        if (sid >= 0) sink += dense[static_cast<size_t>(sid)];
      }
    }
    double t2 = thread_cpu_ns();
    for (const Tensor* node : g.nodes()) {
      for (int b = 0; b < set.size(); ++b) sink += set.supports_op(b, *node) ? 1 : 0;
    }
    double t3 = thread_cpu_ns();
    t_map = std::min(t_map, t1 - t0);
    t_dense = std::min(t_dense, t2 - t1);
    t_supp = std::min(t_supp, t3 - t2);
  }
  // The questions split_graph asks the backends (through a counting BackendSet), and a floor: the work any scheduler
  // following docs/scheduler.md must do per split, timed alone. It reads every node's sources once, checking each
  // against the graph's recorded position. It reads every leaf's buffer and that buffer's usage. It asks supports_op
  // once per computed node, of the backend the node ends on (pass 4 must know that answer). Deciding, cutting splits
  // and making copies come on top. (It does not prefetch: where the Tensors outgrow the caches it bounds nothing.)
  struct Counting final : sched::BackendSet {
    const sched::BackendList& in;
    mutable size_t op = 0, offload = 0, buft = 0;
    explicit Counting(const sched::BackendList& l) : in(l) {}
    int size() const override { return in.size(); }
    const char* name(int b) const override { return in.name(b); }
    bool supports_op(int b, const Tensor& t) const override { return ++op, in.supports_op(b, t); }
    bool supports_buft(int b, const BufferType& bt) const override { return ++buft, in.supports_buft(b, bt); }
    bool offload_op(int b, const Tensor& t) const override { return ++offload, in.offload_op(b, t); }
    BufferType* compute_buft(int b) const override { return in.compute_buft(b); }
  } counting(set);
  std::vector<int8_t> final_backend;  // per node, as that split placed it
  {
    sched::SchedPlan cp;
    cp.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
    (void)sched::split_graph(cp, g, counting, opt);
    sched::restore_sources(cp);
    for (const Tensor* node : g.nodes()) final_backend.push_back(static_cast<int8_t>(cp.backend_of(node)));
  }
  double f_read = 1e300, f_ask = 1e300;
  std::vector<int32_t> ids(g.n_nodes() * kMaxSrc);
  for (int r = 0; r < runs; ++r) {
    const double t0 = thread_cpu_ns();
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const Tensor& t = *g.node(i);
      const int32_t* pos = g.src_positions(i);
      for (int j = 0; j < kMaxSrc; ++j) {
        int32_t v = -1;
        if (t.src[j] != nullptr) {
          const int64_t p = Graph::position_to_id(pos[j], g.n_nodes(), g.n_leafs());
          const Tensor* at = p < 0                                  ? nullptr
                             : static_cast<size_t>(p) < g.n_nodes() ? g.node(static_cast<size_t>(p))
                                                                    : g.leafs()[static_cast<size_t>(p) - g.n_nodes()];
          v = at == t.src[j] ? static_cast<int32_t>(p) : -2;
        }
        ids[i * kMaxSrc + static_cast<size_t>(j)] = v;
      }
    }
    for (const Tensor* leaf : g.leafs()) {
      const Buffer* b = tensor_buffer(*leaf);
      sink += b != nullptr && b->usage() == BufferUsage::kWeights ? 1 : 0;
    }
    const double t1 = thread_cpu_ns();
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const Tensor& t = *g.node(i);
      if (op_is_view(t.op) || t.op == Op::kNone || final_backend[i] < 0) continue;
      sink += set.supports_op(final_backend[i], t) ? 1 : 0;
    }
    const double t2 = thread_cpu_ns();
    f_read = std::min(f_read, t1 - t0);
    f_ask = std::min(f_ask, t2 - t1);
  }
  benchmark::DoNotOptimize(ids.data());
  benchmark::DoNotOptimize(sink);
  // The planner alone on the user's graph (one buffer type): its positions as hints (each checked against the
  // pointer), taken as exact (no source pointer read), or absent (every source looked up).
  GraphPlanner ga(cpu::buffer_type());
  const GraphNodes hinted(g);
  const GraphNodes::Positions* hp = hinted.positions();
  const GraphNodes exact(g.nodes(), g.leafs(), {hp->src, hp->node_view_src, hp->leaf_view_src, true});
  const GraphNodes none(g.nodes(), g.leafs());
  double t_plan[3] = {1e300, 1e300, 1e300};
  for (int r = 0; r < runs; ++r) {
    int k = 0;
    for (const GraphNodes* gn : {&hinted, &exact, &none}) {
      const double t0 = thread_cpu_ns();
      Result<std::vector<size_t>> sz = ga.reserve_size(*gn);
      t_plan[k] = std::min(t_plan[k], thread_cpu_ns() - t0);
      benchmark::DoNotOptimize(sz);
      ++k;
    }
  }
  std::printf("    planner reserve_size (ns/node): positions as hints %.1f, exact %.1f, none %.1f\n", t_plan[0] / n,
              t_plan[1] / n, t_plan[2] / n);
  std::printf(
      "    one walk (ns/node): node+sources backend via unordered_map %.1f, via dense ids %.1f; "
      "supports_op x %d backends %.1f\n",
      t_map / n, t_dense / n, set.size(), t_supp / n);
  std::printf("    questions per split (per node): supports_op %zu (%.2f), offload_op %zu, supports_buft %zu\n",
              counting.op, static_cast<double>(counting.op) / n, counting.offload, counting.buft);
  std::printf(
      "    floor (ns/node): sources read and checked + leaf buffers %.1f, supports_op once per computed node "
      "%.1f, total %.1f\n",
      f_read / n, f_ask / n, (f_read + f_ask) / n);
}

// ---- --report: the scheduler's splits for a small model (to check the setup) ----
int report(int n_layer) {
  Model& mod = model(n_layer);
  Graph& g = mod.graph();
  const sched::BackendList set = backend_list();
  sched::SchedPlan plan;
  plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  Status s = sched::split_graph(plan, g, set, sched::PassOptions{});
  if (!s.ok()) {
    std::fprintf(stderr, "split_graph: %s\n", s.to_string().c_str());
    return 1;
  }
  std::printf("%zu nodes, %zu leafs, %zu splits\n", g.n_nodes(), g.n_leafs(), plan.splits.size());
  for (size_t k = 0; k < plan.splits.size(); ++k) {
    const sched::Split& sp = plan.splits[k];
    std::printf("split %zu on %s: nodes %zu..%zu, inputs:", k, set.name(sp.backend), sp.i_start, sp.i_end - 1);
    for (const Tensor* t : sp.inputs) std::printf(" %s", t->name);
    std::printf("\n");
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const Tensor* n = g.node(i);
      std::printf("    %-28s %-10s %-5s %s\n", n->name, op_name(n->op), set.name(plan.backend_of(n)),
                  cause_name(plan.cause_of(n)));
    }
  }
  sched::restore_sources(plan);
  return 0;
}

// Layer counts: about 1k, 3k, 10k, 30k and 100k nodes (32 nodes per layer plus 4).
const int kLayers[] = {30, 90, 300, 900, 3000};

}  // namespace

int main(int argc, char** argv) {
  bool want_profile = false;
  int profile_layers = 0;  // 0: every size
  int want_report = 0;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--profile") == 0) {
      want_profile = true;
    } else if (std::strncmp(argv[i], "--profile=", 10) == 0) {
      want_profile = true;
      profile_layers = std::atoi(argv[i] + 10);
      if (profile_layers <= 0) {
        std::fprintf(stderr, "--profile=N: N must be a positive number of layers, not '%s'\n", argv[i] + 10);
        return 2;
      }
    } else if (std::strncmp(argv[i], "--report=", 9) == 0) {
      want_report = std::atoi(argv[i] + 9);
    } else {
      args.push_back(argv[i]);
    }
  }
  int n_args = static_cast<int>(args.size());
  if (want_report > 0) return report(want_report);
  if (want_profile) {
    if (profile_layers > 0) {
      profile(profile_layers, profile_layers >= 900 ? 5 : 20);
    } else {
      for (int layers : kLayers) profile(layers, layers >= 900 ? 5 : 20);
    }
    return 0;
  }

  // Per size: split, reserve_size, reserve, memory (one graph built per size).
  for (int layers : kLayers) {
    const std::string sfx = "/layers:" + std::to_string(layers);
    benchmark::RegisterBenchmark(("sched/split_graph" + sfx).c_str(), BM_Split, layers)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("sched/reserve_size" + sfx).c_str(), BM_Reserve, layers, true)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("sched/reserve" + sfx).c_str(), BM_Reserve, layers, false)
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
    benchmark::RegisterBenchmark(("sched/memory" + sfx).c_str(), BM_Memory, layers)
        ->UseManualTime()
        ->Iterations(1)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&n_args, args.data());
  if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  // The memory target (bench/RESULTS.md, "Scheduler"): parallel <= serial + the per-slot copies that can really be in
  // flight at once. Until the hazard detector can prove a tighter figure, the estimate allows every slot a full set of
  // the largest split's input copies plus the graph inputs: serial + kParallelCopies * (largest split input bytes +
  // graph input bytes).
  std::printf(
      "\n| layers | nodes | splits | split inputs | split_graph ns/node | split+teardown ns/node | reserve_size "
      "ns/node "
      "| reserve ns/node | compute bytes serial | compute bytes parallel | ratio | in-flight estimate | parallel / "
      "estimate |\n");
  std::printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  for (int layers : g_order) {
    const Row& r = g_rows[layers];
    const size_t estimate =
        r.bytes_serial + static_cast<size_t>(kParallelCopies) * (r.max_split_input_bytes + r.graph_input_bytes);
    std::printf("| %d | %zu | %zu | %zu | %.0f | %.0f | %.0f | %.0f | %zu | %zu | %.1f | %zu | %.1f |\n", r.n_layer,
                r.nodes, r.splits, r.inputs, r.split_ns, r.cycle_ns, r.reserve_size_ns, r.reserve_ns, r.bytes_serial,
                r.bytes_parallel, r.bytes_serial > 0 ? double(r.bytes_parallel) / double(r.bytes_serial) : 0.0,
                estimate, estimate > 0 ? double(r.bytes_parallel) / double(estimate) : 0.0);
  }
  return 0;
}
