// Plan reuse (issue 33, bench/RESULTS.md "Scheduler: plan reuse"): the per-evaluation cost of alloc_graph for a graph
// allocated again with the same structure (the reuse check, the slot's source rewrites), against the full path
// (passes 1-5, the planner's graph, the planner's check and placement) of the same graph, in one run; then the decode
// loop of the 7b preset at 1 token on the 2gpu-unequal topology (metadata-only, simulated): scheduler time per
// token with and without reuse.
//
// Part 1 uses the model of bench/sched_model.h (tiny shapes, 30 / 300 / 3000 layers: about 1k, 10k and 100k nodes,
// half the layers on a restricted GPU), serial and parallel (4 slots). Each row: the best of --runs allocations per
// mode (a warm-up allocation first; with reuse, one per slot so that every slot's copies are placed).
//
// Usage: tessera_bench_sched_reuse [--runs=N] [--tokens=N] [--layers=A,B,...]
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <vector>

#include "sched_model.h"
#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::bench;

namespace {

double now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

// Best time of `runs` alloc_graph calls of g (each after a compute-free allocation: alloc_graph twice in a row is
// allowed), in ns; -1 on an error.
double best_alloc_ns(Scheduler& s, Graph& g, int runs, bool expect_reuse) {
  double best = 1e300;
  for (int r = 0; r < runs; ++r) {
    const double t0 = now_ns();
    const Status st = s.alloc_graph(g);
    const double t = now_ns() - t0;
    if (!st.ok() || s.plan_reuse().reused != expect_reuse) {
      std::fprintf(stderr, "alloc_graph: %s (reused %d, why not: %s)\n", st.message().c_str(),
                   s.plan_reuse().reused ? 1 : 0, s.plan_reuse().why_not.c_str());
      return -1;
    }
    best = std::min(best, t);
  }
  return best;
}

struct Row {
  int layers = 0;
  size_t nodes = 0;
  int splits = 0;
  bool parallel = false;
  double full_ns = 0, reused_ns = 0;  // per allocation
};

bool measure(int layers, bool parallel, int runs, Row* row) {
  Model& m = model(layers);
  Graph& g = m.graph();
  // The placeholder buffers have no memory; alloc_graph places the views of the cache (SET_ROWS results) at their
  // source's address, so weights and cache get a fake one. Nothing is computed: no byte is ever read or written.
  for (auto* list : {&m.m.weights, &m.m.kv_cache}) {
    for (Tensor* t : *list) {
      if (t->data == nullptr) t->data = reinterpret_cast<void*>(uintptr_t{1} << 40);
    }
  }
  row->layers = layers;
  row->nodes = g.n_nodes();
  row->parallel = parallel;
  for (bool reuse : {false, true}) {
    SchedulerParams p;
    p.parallel = parallel;
    p.reuse = reuse;
    auto s = Scheduler::create(backends().list(), p);
    if (!s.ok() || !(*s)->reserve(g).ok()) {
      std::fprintf(stderr, "scheduler setup failed\n");
      return false;
    }
    // warm-up: the first allocation plans; with reuse, one more per slot places that slot's copies
    for (int w = 0; w < (reuse ? (*s)->n_copies() + 1 : 1); ++w) {
      if (!(*s)->alloc_graph(g).ok()) {
        std::fprintf(stderr, "alloc_graph: %s\n", (*s)->last_error().c_str());
        return false;
      }
    }
    row->splits = (*s)->n_splits();
    const double t = best_alloc_ns(**s, g, runs, reuse);
    if (t < 0) return false;
    (reuse ? row->reused_ns : row->full_ns) = t;
    (*s)->reset();
  }
  return true;
}

// The 7b decode loop: per token alloc_graph + graph_compute (simulated, metadata-only); the scheduler's time is the
// alloc_graph wall time (the rest is the simulator's). Returns {alloc ns per token, alloc+compute ns per token}.
bool decode_loop(bool reuse, int tokens, double* alloc_ns, double* total_ns, int* splits, size_t* nodes) {
  harness::SessionConfig cfg;
  auto topo = harness::topology_preset("2gpu-unequal");
  auto model_cfg = models::preset("7b");
  if (!topo.ok() || !model_cfg.ok()) return false;
  cfg.topology = *topo;
  cfg.model = *model_cfg;
  cfg.model.n_tokens = 1;
  cfg.sim.mode = sim::MemoryMode::kMetadata;
  cfg.sim.record_trace = false;
  cfg.policy.reuse = reuse;
  auto session = harness::Session::create(cfg, &builtin_registry());
  if (!session.ok()) {
    std::fprintf(stderr, "session: %s\n", session.status().message().c_str());
    return false;
  }
  Scheduler& s = (*session)->sched();
  Graph& g = (*session)->graph();
  double alloc = 0, total = 0;
  for (int t = -1; t < tokens; ++t) {  // token -1: the first (planning) evaluation, not counted
    const double t0 = now_ns();
    if (!s.alloc_graph(g).ok()) return false;
    const double t1 = now_ns();
    if (s.graph_compute(g) != ComputeStatus::kSuccess) return false;
    const double t2 = now_ns();
    if (t >= 0) {
      alloc += t1 - t0;
      total += t2 - t0;
      if (s.plan_reuse().reused != reuse) {
        std::fprintf(stderr, "token %d: reused %d (%s)\n", t, s.plan_reuse().reused ? 1 : 0,
                     s.plan_reuse().why_not.c_str());
        return false;
      }
    }
  }
  *alloc_ns = alloc / tokens;
  *total_ns = total / tokens;
  *splits = s.n_splits();
  *nodes = g.n_nodes();
  return true;
}

// Two graphs in turn (issue 33, deliverable 4): a prompt batch (kTokens) and a decode step (1 token) of the same
// model shape, after one reserve with the prompt batch, alternated `rounds` times; per allocation, the mean
// alloc_graph time with the plan cache (SchedulerParams::plan_cache 4) and without it (1: every switch plans again),
// and the full plans made.
bool alternate(int layers, int rounds, int plan_cache, double* ns_per_alloc, int* full_plans, size_t* nodes) {
  Model prompt(layers), decode(layers, 1);
  for (Model* m : {&prompt, &decode}) {
    for (auto* list : {&m->m.weights, &m->m.kv_cache}) {
      for (Tensor* t : *list) {
        if (t->data == nullptr) t->data = reinterpret_cast<void*>(uintptr_t{1} << 40);
      }
    }
  }
  SchedulerParams p;
  p.plan_cache = plan_cache;
  auto s = Scheduler::create(backends().list(), p);
  if (!s.ok() || !(*s)->reserve(prompt.graph()).ok()) return false;
  double total = 0;
  for (int r = 0; r < rounds; ++r) {
    for (Model* m : {&prompt, &decode}) {
      const double t0 = now_ns();
      if (!(*s)->alloc_graph(m->graph()).ok()) {
        std::fprintf(stderr, "alloc_graph: %s\n", (*s)->last_error().c_str());
        return false;
      }
      total += now_ns() - t0;
    }
  }
  *ns_per_alloc = total / (2.0 * rounds);
  *full_plans = (*s)->plan_reuse().full_plans;
  *nodes = prompt.graph().n_nodes();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  int runs = 20, tokens = 50;
  std::vector<int> layer_counts = {30, 300, 3000};
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--runs=", 7) == 0) {
      runs = std::atoi(argv[i] + 7);
    } else if (std::strncmp(argv[i], "--tokens=", 9) == 0) {
      tokens = std::atoi(argv[i] + 9);
    } else if (std::strncmp(argv[i], "--layers=", 9) == 0) {
      layer_counts.clear();
      for (const char* p = argv[i] + 9; *p != '\0';) {
        layer_counts.push_back(std::atoi(p));
        p = std::strchr(p, ',');
        if (p == nullptr) break;
        ++p;
      }
    } else {
      std::fprintf(stderr, "usage: %s [--runs=N] [--tokens=N] [--layers=A,B,...]\n", argv[0]);
      return 2;
    }
  }
  if (runs < 1 || tokens < 1 || layer_counts.empty() ||
      std::any_of(layer_counts.begin(), layer_counts.end(), [](int l) { return l < 1; })) {
    std::fprintf(stderr, "--runs, --tokens and every --layers count must be positive\n");
    return 2;
  }
  std::printf("| layers | nodes | splits | mode | full split+alloc ns/node | reused alloc ns/node | reused / full |\n");
  std::printf("|---:|---:|---:|---|---:|---:|---:|\n");
  for (int layers : layer_counts) {
    for (bool parallel : {false, true}) {
      Row r;
      if (!measure(layers, parallel, runs, &r)) return 1;
      const double n = static_cast<double>(r.nodes);
      std::printf("| %d | %zu | %d | %s | %.1f | %.2f | %.3f |\n", r.layers, r.nodes, r.splits,
                  parallel ? "parallel" : "serial", r.full_ns / n, r.reused_ns / n, r.reused_ns / r.full_ns);
      std::fflush(stdout);
    }
  }
  std::printf("\n7b, 1 token, 2gpu-unequal, metadata-only: %d tokens after the first\n\n", tokens);
  std::printf(
      "| reuse | nodes | splits | alloc_graph us/token | alloc_graph + compute us/token "
      "|\n|---|---:|---:|---:|---:|\n");
  for (bool reuse : {false, true}) {
    double alloc = 0, total = 0;
    int splits = 0;
    size_t nodes = 0;
    if (!decode_loop(reuse, tokens, &alloc, &total, &splits, &nodes)) return 1;
    std::printf("| %s | %zu | %d | %.1f | %.1f |\n", reuse ? "on" : "off", nodes, splits, alloc / 1e3, total / 1e3);
  }
  std::printf("\nTwo graphs in turn (a batch of %d tokens and a decode step), 10 rounds after one reserve\n\n",
              static_cast<int>(kTokens));
  std::printf("| layers | nodes | plan_cache | full plans | alloc_graph us/allocation |\n|---:|---:|---:|---:|---:|\n");
  for (int layers : layer_counts) {
    for (int cache : {4, 1}) {
      double ns = 0;
      int plans = 0;
      size_t nodes = 0;
      if (!alternate(layers, 10, cache, &ns, &plans, &nodes)) return 1;
      std::printf("| %d | %zu | %d | %d | %.1f |\n", layers, nodes, cache, plans, ns / 1e3);
      std::fflush(stdout);
    }
  }
  return 0;
}
