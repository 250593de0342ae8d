// The live-bytes lower bound of a graph (what the planner's peak is measured against), computed from the graph alone,
// without the planner's code.
//
//   size_t live_bytes_lower_bound(graph, alignment, alloc_size, is_planned = unallocated, inputs_to_end = false)
//   size_t live_bytes_lower_bound(graph, buffer_type, is_planned = unallocated, inputs_to_end = false)
//
// Walk the nodes in order. Only tensors the planner places count: non-view tensors accepted by is_planned (by
// default those without data and buffer, i.e. the state before planning; after alloc_graph pass e.g.
// [&](const Tensor& t) { return ga.owns(t.buffer); }). External tensors (weights) and views count nothing.
//   - A tensor is live from the step that computes it to its last use. A use of a view (of a view ...) is a use of
//     its source; a node that writes through a view (CPY, SET_ROWS) uses the view's source at its step.
//   - Inputs are live from the start: leafs (that are planned, i.e. have no memory) and tensors flagged INPUT.
//     With inputs_to_end, tensors flagged INPUT stay live to the end too (Tessera's planner pins them so that an
//     input set once survives several evaluations; the definition is inputs_to_end = false).
//   - Outputs are live to the end: tensors flagged OUTPUT, and the source of a view flagged OUTPUT.
//   - A node computed in place of a dying source adds no bytes at its step: its op can run in place, one of its
//     sources has the same layout (type, ne, nb), that source's memory is planned, not an output, and this step is
//     its last use. (The planner may be stricter; the bound then is only lower.) The node counts from the next step.
//   - Sizes are alloc_size(t) rounded up to the alignment.
// The bound is the peak over the steps (step -1: before the first node, with every input) of the live total. Any
// planner that never overlaps two live tensors needs at least this many bytes.
#pragma once

#include <algorithm>
#include <cstddef>
#include <functional>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/graph.h"
#include "tessera/ops.h"

namespace tessera::support {

using TensorSizeFn = std::function<size_t(const Tensor&)>;
using TensorPredicate = std::function<bool(const Tensor&)>;

// The default is_planned: a tensor the planner would place (no memory of its own yet).
inline bool unallocated(const Tensor& t) { return t.data == nullptr && t.buffer == nullptr; }

struct LiveProfile {
  size_t peak = 0;
  long peak_step = -1;       // -1: before the first node
  std::vector<size_t> live;  // live[0]: before the first node; live[i + 1]: while node i is computed
};

inline LiveProfile live_bytes_profile(const Graph& g, size_t alignment, const TensorSizeFn& alloc_size,
                                      const TensorPredicate& is_planned = unallocated, bool inputs_to_end = false) {
  const long n = static_cast<long>(g.n_nodes());
  const long kEnd = n;  // past the last node: "to the end"
  if (alignment == 0) alignment = 1;
  auto root = [](const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; };
  struct Life {
    long def = 0;
    long last = 0;
    size_t size = 0;
    bool planned = false;
  };
  std::unordered_map<const Tensor*, Life> life;
  life.reserve((g.n_nodes() + g.n_leafs()) * 2);
  auto entry = [&](const Tensor* r, long def) -> Life& {
    auto [it, fresh] = life.try_emplace(r);
    if (fresh) {
      it->second.def = def;
      it->second.last = def;
      it->second.planned = is_planned(*r);
      it->second.size = it->second.planned ? (alloc_size(*r) + alignment - 1) / alignment * alignment : 0;
    }
    return it->second;
  };
  // Definitions: leafs and INPUT tensors at the start, other nodes at their step.
  for (const Tensor* l : g.leafs()) entry(root(l), -1);
  for (long i = 0; i < n; ++i) {
    const Tensor* t = g.node(static_cast<size_t>(i));
    if (t->view_src == nullptr) entry(t, (t->flags & kFlagInput) ? -1 : i);
  }
  auto use = [&](const Tensor* t, long step) {
    Life& l = entry(root(t), -1);  // (a root outside the graph: treated as an input)
    l.last = std::max(l.last, step);
  };
  for (long i = 0; i < n; ++i) {
    const Tensor* t = g.node(static_cast<size_t>(i));
    for (const Tensor* s : t->src) {
      if (s != nullptr) use(s, i);
    }
    if (t->view_src != nullptr) use(t, i);
  }
  auto mark_output = [&](const Tensor* t) {
    if (t->flags & kFlagOutput) entry(root(t), -1).last = kEnd;
    if (inputs_to_end && t->view_src == nullptr && (t->flags & kFlagInput)) entry(t, -1).last = kEnd;
  };
  for (const Tensor* t : g.leafs()) mark_output(t);
  for (const Tensor* t : g.nodes()) mark_output(t);

  // Live totals by a difference array over the steps -1 .. n-1 (index step + 1).
  std::vector<long long> delta(static_cast<size_t>(n) + 2, 0);
  auto add_range = [&](long from, long to, size_t size) {  // steps [from, to], clamped
    to = std::min(to, n - 1);
    if (size == 0 || from > to) return;
    delta[static_cast<size_t>(from + 1)] += static_cast<long long>(size);
    delta[static_cast<size_t>(to + 2)] -= static_cast<long long>(size);
  };
  for (const auto& [t, l] : life) {
    if (!l.planned || t->view_src != nullptr) continue;
    long from = l.def;
    if (from >= 0 && op_can_inplace(t->op)) {
      // computed in place of a dying source with the same layout: no bytes of its own at its step
      for (const Tensor* s : t->src) {
        if (s == nullptr) continue;
        auto it = life.find(root(s));
        if (it == life.end() || root(s) == t) continue;
        const Life& sl = it->second;
        if (sl.planned && sl.last == from && sl.last != kEnd && same_layout(*s, *t)) {
          ++from;
          break;
        }
      }
    }
    // A tensor nobody uses after its definition is still live at its own step.
    add_range(from, std::max(l.last, l.def), l.size);
  }
  LiveProfile p;
  p.live.resize(static_cast<size_t>(n) + 1);
  long long cur = 0;
  for (size_t i = 0; i < p.live.size(); ++i) {
    cur += delta[i];
    p.live[i] = static_cast<size_t>(cur);
    if (p.live[i] > p.peak) {
      p.peak = p.live[i];
      p.peak_step = static_cast<long>(i) - 1;
    }
  }
  return p;
}

inline size_t live_bytes_lower_bound(const Graph& g, size_t alignment, const TensorSizeFn& alloc_size,
                                     const TensorPredicate& is_planned = unallocated, bool inputs_to_end = false) {
  return live_bytes_profile(g, alignment, alloc_size, is_planned, inputs_to_end).peak;
}

// The same with a buffer type's alignment and alloc_size.
inline size_t live_bytes_lower_bound(const Graph& g, const BufferType& buft,
                                     const TensorPredicate& is_planned = unallocated, bool inputs_to_end = false) {
  return live_bytes_lower_bound(
      g, buft.alignment(), [&](const Tensor& t) { return buft.alloc_size(t); }, is_planned, inputs_to_end);
}

}  // namespace tessera::support
