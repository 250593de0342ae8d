// Property tests of the graph memory planner (docs/planner.md) over random valid graphs (tests/support/graph_gen.h).
// A failure prints RapidCheck's seed (rerun with RC_PARAMS="reproduce=...") and the shrunk GraphDesc, a value that
// can be pasted into a regression test; the message carries a dump of the built graph.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <sstream>
#include <unordered_map>

#include "support/graph_gen.h"
#include "support/live_bound.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"
#include "support/host_buffer_type.h"
#include "support/planner_check.h"

using namespace tessera;
using graphgen::BuiltGraph;
using graphgen::GraphDesc;

namespace {

// A second host buffer type: 32-byte alignment and a max allocation size set per test case (forces chunks).
struct SmallHostType final : support::TestBufferType {
  explicit SmallHostType(size_t max) : TestBufferType("SmallHost", max) {}
};

Backend& cpu_backend() {
  static std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  return *backend;
}

// Whether the graphs of properties (1)-(6) may flag views OUTPUT. The planner currently frees (and hands in place
// to a later node) the source of a view flagged OUTPUT, so the output read after compute is overwritten; property
// OutputViewsKeepTheirSourceAlive below shows it. Once the planner keeps the source of an OUTPUT view alive, set
// this to true so that every property covers OUTPUT views too.
constexpr bool kOutputViews = true;

BuiltGraph build_ok(const GraphDesc& desc, bool output_views = kOutputViews) {
  BuiltGraph g = graphgen::build(desc, {.weight_buft = cpu::buffer_type(), .output_views = output_views});
  if (!g.ok()) RC_FAIL("the generator built an invalid graph (generator bug): " + g.status.to_string());
  return g;
}

const Tensor* root_of(const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; }

// Tessera's planner keeps INPUT tensors for the whole graph (never freed, never computed over in place: an input set
// once survives several evaluations; src/tessera/planner.h). The least a planner must do is give them memory before the
// first node; this makes the checks below hold the planner to its stronger promise.
constexpr bool kInputsLiveToEnd = true;

// ---- an independent liveness and reuse check (docs/planner.md), written from the rules, not from the planner ----
// Every tensor whose memory the planner owns is live from its definition (leafs and INPUT tensors: before the first
// node) to its last use (a use of a view is a use of its source; OUTPUT tensors, the sources of OUTPUT views and,
// with kInputsLiveToEnd, INPUT tensors: to the end). Two such tensors may share bytes only when one is dead before
// the other is written, or when the later one is a node computed in place of the earlier at its last use: the op
// can run in place, the earlier tensor is exactly one source of the node (by itself or through one view at offset
// 0), with the same layout and the same address.
std::string check_reuse(const Graph& g, const std::function<bool(const Buffer*)>& planned) {
  const long n = static_cast<long>(g.n_nodes());
  const long kEnd = n;
  struct Life {
    long def = -1;
    long last = -1;
  };
  std::unordered_map<const Tensor*, Life> life;
  auto entry = [&](const Tensor* r, long def) -> Life& {
    auto [it, fresh] = life.try_emplace(r, Life{def, def});
    return it->second;
  };
  for (const Tensor* l : g.leafs()) entry(root_of(l), -1);
  for (long i = 0; i < n; ++i) {
    const Tensor* t = g.node(static_cast<size_t>(i));
    if (t->view_src == nullptr) entry(t, (t->flags & kFlagInput) ? -1 : i);
  }
  for (long i = 0; i < n; ++i) {
    const Tensor* t = g.node(static_cast<size_t>(i));
    for (const Tensor* s : t->src) {
      if (s != nullptr) entry(root_of(s), -1).last = std::max(entry(root_of(s), -1).last, i);
    }
    if (t->view_src != nullptr) entry(t->view_src, -1).last = std::max(entry(t->view_src, -1).last, i);
  }
  for (const Tensor* t : g.leafs()) {
    if (t->flags & kFlagOutput) entry(root_of(t), -1).last = kEnd;
  }
  for (const Tensor* t : g.nodes()) {
    if (t->flags & kFlagOutput) entry(root_of(t), -1).last = kEnd;
  }
  if (kInputsLiveToEnd) {
    for (auto& [t, l] : life) {
      if (t->flags & kFlagInput) l.last = kEnd;
    }
  }
  auto name = [&](const Tensor* t) {
    const Life& l = life[t];
    std::string s = std::string("'") + t->name + "' (live " +
                    (l.def < 0 ? std::string("from the start") : "from step " + std::to_string(l.def));
    s += l.last == kEnd ? " to the end" : " to step " + std::to_string(l.last);
    if (t->flags & kFlagInput) s += ", INPUT";
    if (t->flags & kFlagOutput) s += ", OUTPUT";
    return s + ")";
  };

  // Everything the planner must have placed has memory.
  for (const Tensor* t : g.leafs()) {
    if (t->view_src == nullptr && t->data == nullptr) return std::string("leaf '") + t->name + "' has no memory";
  }
  for (const Tensor* t : g.nodes()) {
    if (t->data == nullptr) return std::string("node '") + t->name + "' has no memory";
  }

  std::vector<const Tensor*> roots;
  for (const auto& [t, l] : life) {
    if (t->view_src == nullptr && t->data != nullptr && planned(tensor_buffer(*t))) roots.push_back(t);
  }
  std::sort(roots.begin(), roots.end(), [&](const Tensor* a, const Tensor* b) {
    const Life &la = life[a], &lb = life[b];
    return la.def != lb.def ? la.def < lb.def : std::strcmp(a->name, b->name) < 0;
  });
  for (size_t i = 0; i < roots.size(); ++i) {
    for (size_t j = i + 1; j < roots.size(); ++j) {
      const Tensor* a = roots[i];  // defined first (or at the same step)
      const Tensor* b = roots[j];
      if (tensor_buffer(*a) != tensor_buffer(*b)) continue;
      const char* a0 = static_cast<const char*>(a->data);
      const char* b0 = static_cast<const char*>(b->data);
      const size_t an = nbytes(*a), bn = nbytes(*b);
      if (an == 0 || bn == 0 || a0 + an <= b0 || b0 + bn <= a0) continue;
      const Life& la = life[a];
      const Life& lb = life[b];
      if (lb.def > la.last) continue;  // a is dead before b is written
      const std::string pair = name(a) + " and " + name(b) + " share bytes";
      if (lb.def < la.last || la.def == lb.def) {
        if (a->flags & kFlagInput) return "INPUT tensor reused while live: " + pair;
        if (a->flags & kFlagOutput) return "OUTPUT tensor reused: " + pair;
        if (la.last == kEnd) return "the source of an OUTPUT view reused: " + pair;
        return "overlap of live tensors: " + pair;
      }
      // b is written at a's last use: only in place.
      if (!op_can_inplace(b->op)) return "in-place reuse by op " + std::string(op_name(b->op)) + ": " + pair;
      const Tensor* via = nullptr;
      int count = 0;
      for (const Tensor* s : b->src) {
        if (s != nullptr && root_of(s) == a) {
          via = s;
          ++count;
        }
      }
      if (count != 1) {
        return "in-place reuse of a tensor that is " + std::to_string(count) + " sources of the node: " + pair;
      }
      if (!same_layout(*via, *b)) return "in-place reuse with a different layout: " + pair;
      if (via->view_src != nullptr && via->view_offs != 0) return "in-place reuse through a view at an offset: " + pair;
      if (via->data != b->data) return "in-place reuse at a different address: " + pair;
    }
  }
  return {};
}

std::string overlap_check(const Graph& g, const GraphPlanner& ga) {
  return check::find_overlap(g, [&](const Tensor* t) { return ga.owns(tensor_buffer(*t)); });
}

// Computes a graph on the CPU backend.
void compute(const BuiltGraph& g, const char* which) {
  Status filled = g.fill_data();
  if (!filled.ok()) fail(g, std::string(which) + ": filling the leafs failed: " + filled.to_string());
  Backend& be = cpu_backend();
  const ComputeStatus cs = be.graph_compute(*g.graph);
  if (cs != ComputeStatus::kSuccess) {
    fail(g, std::string(which) + ": compute failed: " + compute_status_name(cs) + ": " + be.last_error());
  }
}

// Every OUTPUT of `got` equals the same OUTPUT of `want`, bit for bit (read as f32 in flat order).
void expect_same_outputs(const BuiltGraph& got, const BuiltGraph& want) {
  if (got.outputs.size() != want.outputs.size()) fail(got, "the two builds have different outputs (generator bug)");
  for (size_t i = 0; i < got.outputs.size(); ++i) {
    auto a = tensor_to_f32(*got.outputs[i]);
    auto b = tensor_to_f32(*want.outputs[i]);
    if (!a.ok() || !b.ok()) fail(got, std::string("reading output '") + got.outputs[i]->name + "' failed");
    if (a->size() != b->size() ||
        (a->size() != 0 && std::memcmp(a->data(), b->data(), a->size() * sizeof(float)) != 0)) {
      size_t k = 0;
      while (k < a->size() && std::memcmp(&(*a)[k], &(*b)[k], sizeof(float)) == 0) ++k;
      std::ostringstream os;
      os << "output '" << got.outputs[i]->name << "' differs from the one computed with private memory at element " << k
         << ": " << (k < a->size() ? (*a)[k] : 0.0f) << " vs " << (k < b->size() ? (*b)[k] : 0.0f);
      fail(got, os.str());
    }
  }
}

std::vector<void*> external_data(const BuiltGraph& g) {
  std::vector<void*> out;
  for (const Tensor* t : g.externals) out.push_back(t->data);
  return out;
}

}  // namespace

// (1) No two simultaneously live tensors overlap (the shared independent checker of tests/support/planner_check.h).
RC_GTEST_PROP(PlannerProperties, LiveTensorsNeverOverlap, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc);
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.alloc_graph(*g.graph);
  if (!s.ok()) fail(g, "alloc_graph failed: " + s.to_string());
  RC_TAG(g.graph->n_nodes() < 10 ? "< 10 nodes" : g.graph->n_nodes() < 30 ? "10-29 nodes" : ">= 30 nodes");
  if (std::string why = overlap_check(*g.graph, ga); !why.empty()) fail(g, why);
}

// (1b) The same for the online and the offline packing each on its own (GraphPlanner::set_packing): the
// default keeps the smaller of the two, which would hide a defect of the one that loses. The default's total is the
// smaller of the two totals.
RC_GTEST_PROP(PlannerProperties, EachPackingOnItsOwnNeverOverlaps, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc);
  using P = GraphPlanner::Packing;
  size_t total[3] = {0, 0, 0};
  for (P p : {P::kOnline, P::kOffline, P::kBest}) {
    GraphPlanner probe(cpu::buffer_type());
    probe.set_packing(p);
    auto size = probe.reserve_size(*g.graph);
    if (!size.ok()) fail(g, "reserve_size failed: " + size.status().to_string());
    total[static_cast<int>(p)] = (*size)[0];
  }
  if (total[static_cast<int>(P::kBest)] !=
      std::min(total[static_cast<int>(P::kOnline)], total[static_cast<int>(P::kOffline)])) {
    fail(g, "the default packing is not the smaller of online (" + std::to_string(total[1]) + " bytes) and offline (" +
                std::to_string(total[2]) + " bytes): " + std::to_string(total[0]));
  }
  const P p = *rc::gen::element(P::kOnline, P::kOffline);
  RC_TAG(p == P::kOnline ? "online" : "offline");
  GraphPlanner ga(cpu::buffer_type());
  ga.set_packing(p);
  Status s = ga.alloc_graph(*g.graph);
  if (!s.ok()) fail(g, "alloc_graph failed: " + s.to_string());
  if (std::string why = overlap_check(*g.graph, ga); !why.empty()) fail(g, why);
}

// (2) INPUT and OUTPUT tensors are never reused while live; a node shares bytes with a source only in place as
// docs/planner.md allows; tensors with memory of their own are left alone.
RC_GTEST_PROP(PlannerProperties, ReuseOnlyInPlaceAndNeverOfLiveInputsOrOutputs, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc);
  const std::vector<void*> before = external_data(g);
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.alloc_graph(*g.graph);
  if (!s.ok()) fail(g, "alloc_graph failed: " + s.to_string());
  if (external_data(g) != before) fail(g, "the planner moved a tensor that had memory of its own");
  for (const Tensor* t : g.externals) {
    if (ga.owns(t->buffer)) fail(g, std::string("external tensor '") + t->name + "' placed in a planner buffer");
  }
  if (std::string why = check_reuse(*g.graph, [&](const Buffer* b) { return ga.owns(b); }); !why.empty()) {
    fail(g, why);
  }
}

// (3) The planned graph computes the same outputs (bit for bit: the same kernels) as the same graph with every
// tensor in its own memory.
RC_GTEST_PROP(PlannerProperties, PlannedGraphComputesLikePrivateMemory, (const GraphDesc& desc)) {
  BuiltGraph planned = build_ok(desc);
  BuiltGraph priv = build_ok(desc);
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.alloc_graph(*planned.graph);
  if (!s.ok()) fail(planned, "alloc_graph failed: " + s.to_string());
  auto own = alloc_ctx_tensors(*priv.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(priv, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(planned, "planned");
  compute(priv, "private");
  expect_same_outputs(planned, priv);
}

// (4) After reserve with a graph, alloc_graph of the same graph with fewer tokens (every token-dependent dim
// smaller, the same structure) needs no re-plan, overlaps nothing and computes correctly; the measure graph itself
// still fits afterwards.
RC_GTEST_PROP(PlannerProperties, ReserveThenSmallerBatchNeedsNoReplan, (const GraphDesc& desc)) {
  const int tokens = std::clamp(desc.tokens, 1, graphgen::kMaxTokens);
  const int small_tokens = *rc::gen::inRange(1, tokens + 1);
  BuiltGraph big = build_ok(desc);
  BuiltGraph small = build_ok(graphgen::with_tokens(desc, small_tokens));
  BuiltGraph ref = build_ok(graphgen::with_tokens(desc, small_tokens));
  if (big.graph->n_nodes() != small.graph->n_nodes() || big.graph->n_leafs() != small.graph->n_leafs()) {
    fail(small, "generator bug: the structure depends on the token count");
  }
  RC_TAG(small_tokens == tokens ? "same tokens" : "fewer tokens");
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.reserve(*big.graph);
  if (!s.ok()) fail(big, "reserve failed: " + s.to_string());
  const size_t reserved = ga.buffer_size(0);
  if (std::string why = ga.needs_replan(*small.graph); !why.empty()) {
    fail(small, "needs_replan after reserving " + std::to_string(tokens) + " tokens, for " +
                    std::to_string(small_tokens) + ": " + why);
  }
  s = ga.alloc_graph(*small.graph);
  if (!s.ok()) fail(small, "alloc_graph failed: " + s.to_string());
  if (ga.replan_count() != 0) fail(small, "alloc_graph re-planned");
  if (ga.buffer_size(0) != reserved) fail(small, "the buffers changed size");
  if (std::string why = overlap_check(*small.graph, ga); !why.empty()) fail(small, why);
  if (std::string why = check_reuse(*small.graph, [&](const Buffer* b) { return ga.owns(b); }); !why.empty()) {
    fail(small, why);
  }
  auto own = alloc_ctx_tensors(*ref.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(ref, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(small, "small graph in the reserved plan");
  compute(ref, "private");
  expect_same_outputs(small, ref);
  // The measure graph itself is compatible too.
  if (std::string why = ga.needs_replan(*big.graph); !why.empty()) {
    fail(big, "the measure graph needs a re-plan: " + why);
  }
  s = ga.alloc_graph(*big.graph);
  if (!s.ok() || ga.replan_count() != 0) fail(big, "alloc_graph of the measure graph: " + s.to_string());
}

// (4b) The converse: after reserve with a graph, alloc_graph of the same graph with more tokens is placed correctly:
// re-planned when a tensor no longer fits its block (a single-type planner re-plans by itself), never overlapping,
// computing the same outputs as private memory.
RC_GTEST_PROP(PlannerProperties, LargerBatchAfterReserveIsReplannedOrFits, (const GraphDesc& desc)) {
  const int tokens = std::clamp(desc.tokens, 1, graphgen::kMaxTokens);
  const int big_tokens = *rc::gen::inRange(tokens, graphgen::kMaxTokens + 1);
  BuiltGraph small = build_ok(desc);
  BuiltGraph big = build_ok(graphgen::with_tokens(desc, big_tokens));
  BuiltGraph ref = build_ok(graphgen::with_tokens(desc, big_tokens));
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.reserve(*small.graph);
  if (!s.ok()) fail(small, "reserve failed: " + s.to_string());
  const std::string why = ga.needs_replan(*big.graph);
  RC_TAG(why.empty() ? "fits the plan" : "re-planned");
  s = ga.alloc_graph(*big.graph);
  if (!s.ok()) fail(big, "alloc_graph failed: " + s.to_string());
  if (ga.replan_count() != (why.empty() ? 0 : 1)) {
    fail(big,
         "needs_replan said '" + why + "' but alloc_graph re-planned " + std::to_string(ga.replan_count()) + " times");
  }
  if (std::string o = overlap_check(*big.graph, ga); !o.empty()) fail(big, o);
  if (std::string o = check_reuse(*big.graph, [&](const Buffer* b) { return ga.owns(b); }); !o.empty()) fail(big, o);
  auto own = alloc_ctx_tensors(*ref.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(ref, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(big, "larger graph after reserve");
  compute(ref, "private");
  expect_same_outputs(big, ref);
}

// (5) The planned peak is at least the live-bytes lower bound (tests/support/live_bound.h).
RC_GTEST_PROP(PlannerProperties, PlannedPeakIsAtLeastTheLiveBytesBound, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc);
  BufferType* buft = cpu::buffer_type();
  const size_t bound = support::live_bytes_lower_bound(*g.graph, *buft, support::unallocated, kInputsLiveToEnd);
  GraphPlanner ga(buft);
  auto sizes = ga.reserve_size(*g.graph);
  if (!sizes.ok()) fail(g, "reserve_size failed: " + sizes.status().to_string());
  const size_t peak = (*sizes)[0];
  if (peak < bound) {
    fail(g, "planned peak " + std::to_string(peak) + " bytes is below the live-bytes lower bound " +
                std::to_string(bound));
  }
  RC_TAG(peak == bound ? "peak == bound" : peak * 10 <= bound * 11 ? "peak <= 1.1 bound" : "peak > 1.1 bound");
  // The bound computed after alloc_graph (planned = in the planner's buffers) is the same.
  Status s = ga.alloc_graph(*g.graph);
  if (!s.ok()) fail(g, "alloc_graph failed: " + s.to_string());
  if (ga.buffer_size(0) != peak) fail(g, "reserve_size and the reserved buffer size differ");
  const size_t after = support::live_bytes_lower_bound(
      *g.graph, *buft, [&](const Tensor& t) { return ga.owns(t.buffer); }, kInputsLiveToEnd);
  if (after != bound) {
    fail(g, "the bound differs before (" + std::to_string(bound) + ") and after (" + std::to_string(after) +
                ") alloc_graph");
  }
}

// (6) reserve_n over two buffer types (the CPU type and a host type with a small max size: chunks) places every
// tensor in the buffer type it was given, keeps every chunk within the max size, overlaps nothing and computes the
// same outputs as private memory.
RC_GTEST_PROP(PlannerProperties, SeveralBufferTypesWithChunksNeverOverlap, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc);
  const Graph& graph = *g.graph;
  const auto node_ids = *rc::gen::container<std::vector<int>>(graph.n_nodes(), rc::gen::inRange(0, 2));
  const auto leaf_ids = *rc::gen::container<std::vector<int>>(graph.n_leafs(), rc::gen::inRange(0, 2));
  const int factor = *rc::gen::inRange(1, 4);
  size_t largest = 32;
  for (const Tensor* t : graph.nodes()) largest = std::max(largest, nbytes(*t));
  for (const Tensor* t : graph.leafs()) largest = std::max(largest, nbytes(*t));
  const size_t max_size = (largest + 31) / 32 * 32 * static_cast<size_t>(factor);
  SmallHostType small(max_size);
  BufferType* bufts[2] = {cpu::buffer_type(), &small};
  GraphPlanner ga({bufts[0], bufts[1]});
  Status s = ga.reserve_n(graph, node_ids, leaf_ids);
  if (!s.ok()) fail(g, "reserve_n failed: " + s.to_string());
  s = ga.alloc_graph(*g.graph);
  if (!s.ok()) fail(g, "alloc_graph after reserve_n failed: " + s.to_string());
  RC_TAG(ga.n_chunks(1) <= 1 ? "one chunk" : "several chunks");
  for (int c = 0; c < ga.n_chunks(1); ++c) {
    if (ga.chunk_buffer(1, c)->size() > max_size) {
      fail(g, "chunk " + std::to_string(c) + " of SmallHost is larger than its max size " + std::to_string(max_size));
    }
  }
  auto check_type = [&](const Tensor* t, int id, const char* what, size_t i) {
    if (t->view_src != nullptr || !ga.owns(t->buffer)) return;
    if (t->buffer->type() != bufts[id]) {
      fail(g, std::string(what) + " " + std::to_string(i) + " '" + t->name + "' was given " + bufts[id]->name() +
                  " but lives in " + t->buffer->type()->name());
    }
  };
  for (size_t i = 0; i < graph.n_nodes(); ++i) check_type(graph.node(i), node_ids[i], "node", i);
  for (size_t i = 0; i < graph.n_leafs(); ++i) check_type(graph.leaf(i), leaf_ids[i], "leaf", i);
  if (std::string why = overlap_check(graph, ga); !why.empty()) fail(g, why);
  if (std::string why = check_reuse(graph, [&](const Buffer* b) { return ga.owns(b); }); !why.empty()) fail(g, why);
  BuiltGraph priv = build_ok(desc);
  auto own = alloc_ctx_tensors(*priv.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(priv, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(g, "two buffer types");
  compute(priv, "private");
  expect_same_outputs(g, priv);
}

// A view flagged OUTPUT is an output like any other (docs/planner.md: OUTPUT tensors are never freed): the bytes it
// reads (its source's) stay live to the end, nothing is placed over them, and they hold the computed values afterwards.
RC_GTEST_PROP(PlannerProperties, OutputViewsKeepTheirSourceAlive, (const GraphDesc& desc)) {
  BuiltGraph planned = build_ok(desc, true);
  RC_PRE(std::any_of(planned.outputs.begin(), planned.outputs.end(),
                     [](const Tensor* t) { return t->view_src != nullptr; }));
  BuiltGraph priv = build_ok(desc, true);
  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.alloc_graph(*planned.graph);
  if (!s.ok()) fail(planned, "alloc_graph failed: " + s.to_string());
  if (std::string why = check_reuse(*planned.graph, [&](const Buffer* b) { return ga.owns(b); }); !why.empty()) {
    fail(planned, why);
  }
  auto own = alloc_ctx_tensors(*priv.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(priv, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(planned, "planned");
  compute(priv, "private");
  expect_same_outputs(planned, priv);
}

// (4c) A plan is reused for a graph only when every source is the same node or leaf as at plan time (docs/planner.md;
// the anchor decided reuse by position only). The same description with one source rewired to another earlier node of
// the same layout has the same counts, sizes and positions, but other lifetimes: after reserving the original,
// alloc_graph of the rewired graph must re-plan (or fit), overlap nothing live and compute like private memory. Kills
// tests/mutation/defect-reuse-by-position-not-identity.
RC_GTEST_PROP(PlannerProperties, RewiredSourceAfterReserveIsReplannedOrFits, (const GraphDesc& desc)) {
  BuiltGraph orig = build_ok(desc);
  BuiltGraph rewired = build_ok(desc);
  BuiltGraph ref = build_ok(desc);
  // (node i, source j, new source node k): k < i computed (not a view, not a writer), same layout as the old source,
  // another tensor.
  struct Rewire {
    size_t i;
    int j;
    size_t k;
  };
  std::vector<Rewire> candidates;
  const Graph& g = *rewired.graph;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = g.node(i)->src[j];
      // ids (GET_ROWS, SET_ROWS, MUL_MAT_ID): another tensor's values need not be in range, and a kernel refuses them
      if (s == nullptr || s->type == Type::kI32) continue;
      for (size_t k = 0; k < i; ++k) {
        const Tensor* n = g.node(k);
        // not the tensor node i writes into (a SET_ROWS reading its own destination is order-dependent)
        if (n != s && n != g.node(i)->view_src && n->view_src == nullptr && !op_is_view(n->op) && same_layout(*n, *s)) {
          candidates.push_back({i, j, k});
        }
      }
    }
  }
  RC_CLASSIFY(candidates.empty(), "no source to rewire");
  if (candidates.empty()) return;
  const Rewire r = *rc::gen::elementOf(candidates);
  for (BuiltGraph* b : {&rewired, &ref}) b->graph->node(r.i)->src[r.j] = b->graph->node(r.k);

  GraphPlanner ga(cpu::buffer_type());
  Status s = ga.reserve(*orig.graph);
  if (!s.ok()) fail(orig, "reserve failed: " + s.to_string());
  s = ga.alloc_graph(*rewired.graph);
  if (!s.ok()) fail(rewired, "alloc_graph failed: " + s.to_string());
  const std::string what = std::string("after rewiring source ") + std::to_string(r.j) + " of '" + g.node(r.i)->name +
                           "' to '" + g.node(r.k)->name + "': ";
  if (std::string o = overlap_check(*rewired.graph, ga); !o.empty()) fail(rewired, what + o);
  if (std::string o = check_reuse(*rewired.graph, [&](const Buffer* b) { return ga.owns(b); }); !o.empty()) {
    fail(rewired, what + o);
  }
  auto own = alloc_ctx_tensors(*ref.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(ref, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(rewired, "rewired graph in the reserved plan");
  compute(ref, "private");
  expect_same_outputs(rewired, ref);
}

// (6b) Chunks after a re-plan: a buffer type with a small max size (several chunks), reserved for one graph, then
// given another graph: alloc_graph re-plans, and every chunk whose planned size grew must grow, even when the total
// did not (docs/planner.md; the anchor decided on the total size only and missed a chunk that grew). Every tensor
// lies inside its chunk, nothing live overlaps, and the outputs equal private memory. Kills
// tests/mutation/defect-grow-decided-on-total-size.
RC_GTEST_PROP(PlannerProperties, AnotherGraphAfterReserveGrowsEveryChunkItNeeds,
              (const GraphDesc& first, const GraphDesc& second)) {
  BuiltGraph a = build_ok(first);
  BuiltGraph b = build_ok(second);
  size_t largest = 32;
  for (const BuiltGraph* g : {&a, &b}) {
    for (const Tensor* t : g->graph->nodes()) largest = std::max(largest, nbytes(*t));
    for (const Tensor* t : g->graph->leafs()) largest = std::max(largest, nbytes(*t));
  }
  const size_t max_size = (largest + 31) / 32 * 32 * static_cast<size_t>(*rc::gen::inRange(1, 3));
  SmallHostType small(max_size);
  GraphPlanner ga(&small);
  Status s = ga.reserve(*a.graph);
  if (!s.ok()) fail(a, "reserve failed: " + s.to_string());
  s = ga.alloc_graph(*b.graph);
  if (!s.ok()) fail(b, "alloc_graph of another graph after reserve failed: " + s.to_string());
  RC_TAG(ga.n_chunks(0) <= 1 ? "one chunk" : "several chunks");
  auto inside = [&](const Tensor* t) {
    if (t->view_src != nullptr || !ga.owns(t->buffer)) return;
    const char* base = static_cast<const char*>(t->buffer->base());
    const char* data = static_cast<const char*>(t->data);
    if (data < base || data + nbytes(*t) > base + t->buffer->size()) {
      fail(b, std::string("'") + t->name + "' (" + std::to_string(nbytes(*t)) + " bytes at offset " +
                  std::to_string(data - base) + ") does not fit its chunk of " + std::to_string(t->buffer->size()) +
                  " bytes");
    }
  };
  for (const Tensor* t : b.graph->nodes()) inside(t);
  for (const Tensor* t : b.graph->leafs()) inside(t);
  if (std::string why = overlap_check(*b.graph, ga); !why.empty()) fail(b, why);
  if (std::string why = check_reuse(*b.graph, [&](const Buffer* buf) { return ga.owns(buf); }); !why.empty()) {
    fail(b, why);
  }
  BuiltGraph priv = build_ok(second);
  auto own = alloc_ctx_tensors(*priv.ctx, *cpu::buffer_type());
  if (!own.ok()) fail(priv, "alloc_ctx_tensors failed: " + own.status().to_string());
  compute(b, "another graph after reserve, in chunks");
  compute(priv, "private");
  expect_same_outputs(b, priv);
}

// The generator itself: every description builds, and shrinking the token count keeps the structure.
RC_GTEST_PROP(GraphGenerator, EveryDescriptionBuildsAValidGraph, (const GraphDesc& desc)) {
  BuiltGraph g = build_ok(desc, true);
  RC_ASSERT(g.graph->n_nodes() + g.graph->n_leafs() > 0);
  RC_ASSERT(!g.outputs.empty());
  for (const Tensor* t : g.graph->nodes()) {
    if (!cpu_backend().supports_op(*t)) fail(g, std::string("the CPU backend does not support '") + t->name + "'");
  }
  RC_TAG(g.graph->n_nodes() < 10 ? "< 10 nodes" : g.graph->n_nodes() < 30 ? "10-29 nodes" : ">= 30 nodes");
}

TEST(GraphGenerator, BytesDecodeToBuildableDescriptions) {
  std::mt19937 rng(7);
  for (int i = 0; i < 50; ++i) {
    std::vector<uint8_t> bytes(static_cast<size_t>(6 + 7 * (i % 20)));
    for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng());
    const GraphDesc d = graphgen::desc_from_bytes(bytes.data(), bytes.size());
    BuiltGraph g = graphgen::build(d, {.weight_buft = cpu::buffer_type()});
    EXPECT_TRUE(g.ok()) << g.status.to_string() << "\n" << d;
  }
}
