// The graph memory planner on llama-style graphs: planned peak bytes vs the live-bytes lower bound
// (efficiency = peak / bound) and planning time per node, for dense and mixture-of-experts models of 7B- and 70B-like
// shapes at 1, 32 and 512 tokens over a KV cache of kNkv slots.
//
// Weights and KV cache are metadata-only but count as externally allocated: each gets a placeholder buffer of a
// buffer type without memory, so the planner leaves them alone. Timing is of GraphPlanner::reserve_size (a dry run:
// liveness + dynamic allocator, nothing allocated).
//
// After the benchmarks a markdown table of all cases is printed (for bench/RESULTS.md). --explain runs no benchmark:
// for every case it prints what an offline greedy-by-size packing of the same blocks would need, and the moment
// the plan reaches its peak (the tensor that set it, the blocks allocated so far, the memory map and its holes).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/models/llama.h"
#include "support/live_bound.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"

using namespace tessera;
using namespace tessera::models;

namespace {

constexpr int64_t kNkv = 4096;  // KV cache slots (n_ctx = n_kv): every case attends to 4096 cached positions

// A buffer type whose buffers have no memory: a tensor pointing at one is "allocated elsewhere" for the planner.
class MetadataBufferType final : public BufferType {
 public:
  const char* name() const override { return "metadata"; }
  size_t alignment() const override { return cpu::kCpuAlignment; }
  Device* device() const override { return cpu::device(); }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t) override {
    return Status(StatusCode::kUnsupported, "metadata buffer type: no memory");
  }
};

class MetadataBuffer final : public Buffer {
 public:
  explicit MetadataBuffer(BufferType* type) : Buffer(type, 0) {}
  void* base() override { return nullptr; }
  void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
  void set_tensor(Tensor&, const void*, size_t, size_t) override {}
  void get_tensor(const Tensor&, void*, size_t, size_t) override {}
  void clear(uint8_t) override {}
};

MetadataBufferType g_metadata_type;
MetadataBuffer g_metadata_buffer(&g_metadata_type);

struct Case {
  std::string model;  // preset name, or "70b-moe" (70B shapes with 8 experts, 2 used)
  int64_t tokens;
  bool flash_attn;
  int n_layer = 0;  // 0 = the preset's
  std::string label() const {
    std::string s = model + (flash_attn ? "/fa" : "/no-fa") + "/tokens:" + std::to_string(tokens);
    if (n_layer > 0) s += "/layers:" + std::to_string(n_layer);
    return s;
  }
};

LlamaConfig config_of(const Case& c) {
  const bool moe70 = c.model == "70b-moe";
  Result<LlamaConfig> p = preset(moe70 ? "70b" : c.model);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.status().to_string().c_str());
    std::exit(2);
  }
  LlamaConfig cfg = *p;
  if (moe70) {
    cfg.name = "70b-moe";
    cfg.n_expert = 8;
    cfg.n_expert_used = 2;
  }
  cfg.n_ctx = kNkv;
  cfg.n_kv = kNkv;
  cfg.n_tokens = c.tokens;
  cfg.flash_attn = c.flash_attn;
  if (c.n_layer > 0) cfg.n_layer = c.n_layer;
  return cfg;
}

LlamaGraph build_metadata_only(const LlamaConfig& cfg) {
  Result<LlamaGraph> m = build_llama(cfg);
  if (!m.ok()) {
    std::fprintf(stderr, "build_llama(%s): %s\n", cfg.name.c_str(), m.status().to_string().c_str());
    std::exit(2);
  }
  for (Tensor* t : m->weights) t->buffer = &g_metadata_buffer;
  for (Tensor* t : m->kv_cache) t->buffer = &g_metadata_buffer;
  return std::move(m).value();
}

struct Row {
  std::string model, attn;
  int64_t tokens;
  int n_layer;
  size_t nodes;
  double peak_mib, bound_mib, efficiency, ns_per_node;
};
// One row per case. Google Benchmark calls a case several times (to pick the iteration count, and once per
// repetition); the table keeps the lowest ns/node, the least disturbed by other work on the machine.
std::vector<std::string> g_order;
std::map<std::string, Row> g_rows;

constexpr double kMiB = 1024.0 * 1024.0;

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

void BM_Planner(benchmark::State& state, Case c) {
  const LlamaConfig cfg = config_of(c);
  LlamaGraph m = build_metadata_only(cfg);
  const Graph& g = *m.graph;
  GraphPlanner planner(cpu::buffer_type());
  Result<std::vector<size_t>> sizes = planner.reserve_size(g);
  if (!sizes.ok()) {
    state.SkipWithError(sizes.status().to_string().c_str());
    return;
  }
  const size_t peak = (*sizes)[0];
  const size_t bound = support::live_bytes_lower_bound(g, *cpu::buffer_type());

  // Thread CPU time rather than wall time: the machine is shared (2 cores), and planning is single-threaded.
  size_t iterations = 0;
  const double t0 = thread_cpu_ns();
  for (auto _ : state) {
    Result<std::vector<size_t>> r = planner.reserve_size(g);
    benchmark::DoNotOptimize(r);
    ++iterations;
  }
  const double ns = thread_cpu_ns() - t0;
  const double ns_per_node = ns / static_cast<double>(iterations) / static_cast<double>(g.n_nodes());
  const double efficiency = bound > 0 ? static_cast<double>(peak) / static_cast<double>(bound) : 0.0;

  state.counters["nodes"] = static_cast<double>(g.n_nodes());
  state.counters["peak_MiB"] = static_cast<double>(peak) / kMiB;
  state.counters["bound_MiB"] = static_cast<double>(bound) / kMiB;
  state.counters["efficiency"] = efficiency;
  state.counters["ns_per_node"] = ns_per_node;
  const bool first = !g_rows.count(c.label());
  if (first) g_order.push_back(c.label());
  const double best_ns = first ? ns_per_node : std::min(ns_per_node, g_rows[c.label()].ns_per_node);
  g_rows[c.label()] = Row{cfg.name,
                          c.flash_attn ? "FA" : "MUL_MAT+SOFT_MAX",
                          c.tokens,
                          cfg.n_layer,
                          g.n_nodes(),
                          static_cast<double>(peak) / kMiB,
                          static_cast<double>(bound) / kMiB,
                          efficiency,
                          best_ns};
}

// ---- --explain: the moment the plan reaches its peak ----

// Plans for real (reserve keeps the per-tensor plan) without memory: buffers with a fake base that nothing reads.
class PlanOnlyBufferType final : public BufferType {
 public:
  const char* name() const override { return "plan-only"; }
  size_t alignment() const override { return cpu::buffer_type()->alignment(); }
  size_t alloc_size(const Tensor& t) const override { return cpu::buffer_type()->alloc_size(t); }
  Device* device() const override { return cpu::device(); }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    struct Fake final : Buffer {
      using Buffer::Buffer;
      void* base() override { return reinterpret_cast<void*>(uintptr_t{1} << 40); }
      void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
      void set_tensor(Tensor&, const void*, size_t, size_t) override {}
      void get_tensor(const Tensor&, void*, size_t, size_t) override {}
      void clear(uint8_t) override {}
    };
    return std::unique_ptr<Buffer>(std::make_unique<Fake>(this, size));
  }
};

// Diagnosis only (the reference bound is support/live_bound.h). One planned block: a tensor the plan placed, with the
// steps it is live (computed here from the graph alone). The CPU type has no max size, so there is one chunk.
struct Block {
  const Tensor* t;
  long def, last;
  size_t offset, size;
};

std::vector<Block> planned_blocks(const Graph& g, const GraphPlanner& planner) {
  std::unordered_map<const Tensor*, long> last_use;
  auto root = [](const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; };
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    for (const Tensor* src : n->src) {
      if (src != nullptr) last_use[root(src)] = static_cast<long>(i);
    }
    if (n->view_src != nullptr) last_use[n->view_src] = static_cast<long>(i);
  }
  const long end = static_cast<long>(g.n_nodes());
  std::vector<Block> blocks;
  auto add = [&](const Tensor* t, long def, const PlannedTensor& p) {
    if (p.chunk < 0) return;
    long last = last_use.count(t) ? last_use[t] : def;
    if (t->flags & (kFlagOutput | kFlagInput)) last = end;  // the planner keeps outputs and inputs to the end
    blocks.push_back({t, def, last, p.offset, p.size});
  };
  for (size_t i = 0; i < g.n_leafs(); ++i) add(g.leaf(i), -1, planner.planned_leaf(i));
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    add(n, (n->flags & kFlagInput) ? -1 : static_cast<long>(i), planner.planned_node(i));
  }
  return blocks;
}

// What an offline planner could do with the same blocks and lifetimes: greedy by size (largest first, each at the
// best-fitting gap among the already placed blocks live at the same time; Pisarchyk & Lee 2020, TFLite's "greedy by
// size"). A node computed in place continues its source's block (same offset and size, defined at the source's last
// step), so such chains are placed as one block. Quadratic: fine for a diagnosis. Returns the peak bytes.
size_t greedy_by_size_peak(const std::vector<Block>& blocks, size_t* n_chains) {
  struct Chain {
    long def, last;
    size_t size, offset = 0;
  };
  std::vector<const Block*> order;
  for (const Block& b : blocks) order.push_back(&b);
  std::stable_sort(order.begin(), order.end(), [](const Block* a, const Block* b) { return a->def < b->def; });
  std::vector<Chain> chains;
  std::unordered_map<size_t, size_t> open;  // offset -> the chain whose block is there now
  for (const Block* b : order) {
    auto it = open.find(b->offset);
    if (it != open.end() && chains[it->second].last == b->def && chains[it->second].size == b->size) {
      chains[it->second].last = std::max(chains[it->second].last, b->last);
      continue;
    }
    open[b->offset] = chains.size();
    chains.push_back({b->def, b->last, b->size});
  }
  *n_chains = chains.size();
  std::vector<size_t> idx(chains.size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    const Chain &x = chains[a], &y = chains[b];
    return x.size != y.size ? x.size > y.size : x.last - x.def > y.last - y.def;
  });
  std::vector<size_t> placed;
  size_t total = 0;
  for (size_t i : idx) {
    Chain& c = chains[i];
    std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of placed chains live at the same time
    for (size_t j : placed) {
      const Chain& o = chains[j];
      if (o.def <= c.last && c.def <= o.last) busy.emplace_back(o.offset, o.offset + o.size);
    }
    std::sort(busy.begin(), busy.end());
    size_t cursor = 0, best = SIZE_MAX, best_gap = SIZE_MAX;
    for (auto [lo, hi] : busy) {
      if (lo > cursor && lo - cursor >= c.size && lo - cursor < best_gap) {
        best = cursor;
        best_gap = lo - cursor;
      }
      cursor = std::max(cursor, hi);
    }
    c.offset = best != SIZE_MAX ? best : cursor;
    total = std::max(total, c.offset + c.size);
    placed.push_back(i);
  }
  return total;
}

// The block that sets the peak (the highest end; the earliest if several), the blocks allocated up to its step, and
// the memory map at that step with its holes.
void print_peak_map(std::vector<Block> blocks) {
  std::sort(blocks.begin(), blocks.end(),
            [](const Block& a, const Block& b) { return a.offset != b.offset ? a.offset < b.offset : a.def < b.def; });
  const Block* top = nullptr;
  for (const Block& b : blocks) {
    if (top == nullptr || b.offset + b.size > top->offset + top->size ||
        (b.offset + b.size == top->offset + top->size && b.def < top->def)) {
      top = &b;
    }
  }
  if (top == nullptr) return;
  const long step = top->def;
  std::printf("peak set by %s (%.2f MiB at offset %.2f MiB), allocated at step %ld\n", describe(*top->t).c_str(),
              top->size / kMiB, top->offset / kMiB, step);
  std::printf("blocks allocated up to that step (step, offset MiB, size MiB, tensor, live steps):\n");
  std::vector<const Block*> by_def;
  for (const Block& b : blocks) {
    if (b.def <= step) by_def.push_back(&b);
  }
  std::stable_sort(by_def.begin(), by_def.end(), [](const Block* a, const Block* b) { return a->def < b->def; });
  for (const Block* b : by_def) {
    std::printf("    %4ld %9.2f %9.2f   %-48s %ld..%ld\n", b->def, b->offset / kMiB, b->size / kMiB,
                describe(*b->t).c_str(), b->def, b->last);
  }
  // Live at the step; a node computed in place shares its source's block (same offset): count the block once.
  std::vector<const Block*> live;
  size_t live_bytes = 0;
  for (const Block& b : blocks) {
    if (b.def <= step && step <= b.last && (live.empty() || live.back()->offset != b.offset)) {
      live.push_back(&b);
      live_bytes += b.size;
    }
  }
  std::printf("live at that step: %zu blocks, %.2f MiB; memory map (offset MiB, size MiB, tensor, live steps):\n",
              live.size(), live_bytes / kMiB);
  size_t cursor = 0;
  for (const Block* b : live) {
    if (b->offset > cursor) std::printf("    %9.2f %9.2f   -- hole --\n", cursor / kMiB, (b->offset - cursor) / kMiB);
    std::printf("    %9.2f %9.2f   %-48s %ld..%ld\n", b->offset / kMiB, b->size / kMiB, describe(*b->t).c_str(), b->def,
                b->last);
    cursor = std::max(cursor, b->offset + b->size);
  }
}

void explain_peak(const Graph& g) {
  PlanOnlyBufferType type;
  GraphPlanner planner(&type);
  if (Status s = planner.reserve(g); !s.ok()) {
    std::printf("reserve: %s\n", s.to_string().c_str());
    return;
  }
  const std::vector<Block> blocks = planned_blocks(g, planner);
  size_t n_chains = 0;
  const size_t gbs = greedy_by_size_peak(blocks, &n_chains);
  std::printf("offline greedy-by-size over the same %zu blocks (%zu after in-place chains): %.2f MiB\n", blocks.size(),
              n_chains, gbs / kMiB);
  print_peak_map(blocks);
}

void explain(const Case& c) {
  const LlamaConfig cfg = config_of(c);
  LlamaGraph m = build_metadata_only(cfg);
  const Graph& g = *m.graph;
  GraphPlanner planner(cpu::buffer_type());
  Result<std::vector<size_t>> sizes = planner.reserve_size(g);
  if (!sizes.ok()) return;
  const size_t peak = (*sizes)[0];
  const size_t bound = support::live_bytes_lower_bound(g, *cpu::buffer_type());
  std::printf("\n== %s: %zu nodes, peak %.2f MiB, bound %.2f MiB, efficiency %.4f\n", c.label().c_str(), g.n_nodes(),
              peak / kMiB, bound / kMiB, bound ? double(peak) / double(bound) : 0.0);
  explain_peak(g);
}

}  // namespace

int main(int argc, char** argv) {
  bool want_explain = false;
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--explain") == 0) {
      want_explain = true;
    } else {
      args.push_back(argv[i]);
    }
  }
  int n_args = static_cast<int>(args.size());

  std::vector<Case> cases;
  for (const char* model : {"7b", "8x7b-moe", "70b", "70b-moe"}) {
    for (int64_t tokens : {1, 32, 512}) cases.push_back({model, tokens, true});
  }
  for (const char* model : {"7b", "8x7b-moe"}) {
    for (int64_t tokens : {1, 32, 512}) cases.push_back({model, tokens, false});
  }
  // Planning time against graph size: the 7B shapes at 32 tokens with 8 .. 256 layers.
  for (int layers : {8, 16, 32, 64, 128, 256}) cases.push_back({"7b", 32, true, layers});

  if (want_explain) {
    for (const Case& c : cases) {
      if (c.n_layer == 0) explain(c);
    }
    return 0;
  }
  for (const Case& c : cases) {
    benchmark::RegisterBenchmark(("planner/" + c.label()).c_str(), BM_Planner, c)->Unit(benchmark::kMicrosecond);
  }
  benchmark::Initialize(&n_args, args.data());
  if (benchmark::ReportUnrecognizedArguments(n_args, args.data())) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();

  std::printf("\n| model | attention | layers | tokens | nodes | peak MiB | bound MiB | efficiency | ns/node |\n");
  std::printf("|---|---|---:|---:|---:|---:|---:|---:|---:|\n");
  for (const std::string& label : g_order) {
    const Row& r = g_rows[label];
    std::printf("| %s | %s | %d | %lld | %zu | %.2f | %.2f | %.4f | %.0f |\n", r.model.c_str(), r.attn.c_str(),
                r.n_layer, static_cast<long long>(r.tokens), r.nodes, r.peak_mib, r.bound_mib, r.efficiency,
                r.ns_per_node);
  }
  return 0;
}
