// An independent check of a planned graph (used by the planner's unit and property tests): computes liveness from
// the graph alone and reports two live tensors whose bytes overlap. Written without the planner's code.
#pragma once

#include <algorithm>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/graph.h"
#include "tessera/ops.h"

namespace tessera::check {

struct Lifetime {
  const Tensor* t;
  long def;   // step that writes it (-1: before the first node: leafs and inputs)
  long last;  // last step that reads it (or a view of it); kEnd for outputs
};
constexpr long kEnd = 1L << 40;

// Lifetimes of every non-view tensor placed in a buffer the predicate accepts.
template <typename IsPlanned>
std::vector<Lifetime> lifetimes(const Graph& g, IsPlanned is_planned) {
  std::unordered_map<const Tensor*, Lifetime> lt;
  auto root = [](const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; };
  auto touch = [&](const Tensor* t, long step, bool is_def) {
    t = root(t);
    auto [it, fresh] = lt.try_emplace(t, Lifetime{t, is_def ? step : -1, step});
    if (!fresh) it->second.last = std::max(it->second.last, step);
  };
  for (size_t i = 0; i < g.n_leafs(); ++i) touch(g.leaf(i), -1, true);
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    if ((n->flags & kFlagInput) != 0) touch(n, -1, true);
  }
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    for (const Tensor* s : n->src) {
      if (s != nullptr) touch(s, static_cast<long>(i), false);
    }
    if (n->view_src == nullptr) {
      touch(n, static_cast<long>(i), true);
    } else {
      touch(n, static_cast<long>(i), false);  // writing through a view (CPY, SET_ROWS) uses its root
    }
  }
  std::vector<Lifetime> out;
  for (auto& [t, l] : lt) {
    if ((t->flags & kFlagOutput) != 0) l.last = kEnd;
    if (t->view_src == nullptr && t->data != nullptr && is_planned(t)) out.push_back(l);
  }
  return out;
}

// "" when no two simultaneously live tensors share bytes, else a description of the first clash. A node may share
// the bytes of a source whose last use it is when its op can run in place and the layouts match. A tensor's bytes are
// size_of(t) from its data pointer (a buffer type's alloc_size: its padding belongs to it), nbytes by default.
template <typename IsPlanned, typename SizeOf>
std::string find_overlap(const Graph& g, IsPlanned is_planned, SizeOf size_of) {
  std::vector<Lifetime> l = lifetimes(g, is_planned);
  auto inplace_ok = [](const Tensor* writer, const Tensor* reader_root) {
    if (!op_can_inplace(writer->op)) return false;
    for (const Tensor* s : writer->src) {
      if (s == nullptr) continue;
      const Tensor* r = s->view_src != nullptr ? s->view_src : s;
      if (r == reader_root && same_layout(*s, *writer)) return true;
    }
    return false;
  };
  for (size_t i = 0; i < l.size(); ++i) {
    for (size_t j = 0; j < l.size(); ++j) {
      if (i == j) continue;
      const Lifetime& a = l[i];
      const Lifetime& b = l[j];
      if (b.def < a.def || (b.def == a.def && j < i)) continue;  // b is written after (or with) a
      const Buffer* ba = tensor_buffer(*a.t);
      const Buffer* bb = tensor_buffer(*b.t);
      if (ba != bb) continue;
      const char* a0 = static_cast<const char*>(a.t->data);
      const char* b0 = static_cast<const char*>(b.t->data);
      const size_t an = std::max<size_t>(size_of(*a.t), 1), bn = std::max<size_t>(size_of(*b.t), 1);
      if (nbytes(*a.t) == 0 || nbytes(*b.t) == 0) continue;
      if (a0 + an <= b0 || b0 + bn <= a0) continue;
      const bool clash = b.def < a.last || (b.def == a.last && !inplace_ok(b.t, a.t)) || a.def == b.def;
      if (clash) {
        return std::string("'") + a.t->name + "' (steps " + std::to_string(a.def) + ".." + std::to_string(a.last) +
               ") and '" + b.t->name + "' (steps " + std::to_string(b.def) + ".." + std::to_string(b.last) +
               ") share bytes";
      }
    }
  }
  return {};
}

template <typename IsPlanned>
std::string find_overlap(const Graph& g, IsPlanned is_planned) {
  return find_overlap(g, is_planned, [](const Tensor& t) { return nbytes(t); });
}

}  // namespace tessera::check
