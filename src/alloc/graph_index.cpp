// GraphIndex: the graph planner's dense numbering of a graph's tensors (see graph_index.h).
#include "graph_index.h"

namespace tessera {

inline void GraphIndex::complete_map() {
  map_pending = false;
  lookups += n_nodes + n_leafs;
  bool inserted = false;
  for (size_t i = 0; i < n_nodes + n_leafs; ++i) ids.insert(tensors[i], static_cast<int32_t>(i), &inserted);
}

inline int32_t GraphIndex::intern(Tensor* t) {
  if (map_pending) complete_map();
  ++lookups;
  bool inserted = false;
  const int32_t id = ids.insert(t, static_cast<int32_t>(tensors.size()), &inserted);
  if (inserted) tensors.push_back(t);
  return id;
}

inline int32_t GraphIndex::resolve(Tensor* t, int32_t pos) {
  const int64_t id = Graph::position_to_id(pos, n_nodes, n_leafs);
  if (id >= 0 && tensors[static_cast<size_t>(id)] == t) return static_cast<int32_t>(id);
  return intern(t);
}

inline int32_t GraphIndex::exact(Tensor* const* slot, int32_t pos) {
  if (pos == Graph::kNoPos) return -1;
  const int64_t id = Graph::position_to_id(pos, n_nodes, n_leafs);
  if (id >= 0) return static_cast<int32_t>(id);
  return *slot != nullptr ? intern(*slot) : -1;
}

void GraphIndex::check_exact(const GraphNodes::Positions& pos) {
  auto at = [&](int32_t id) { return id < 0 ? nullptr : tensors[static_cast<size_t>(id)]; };
  for (size_t i = 0; i < n_nodes; ++i) {
    const Tensor* t = tensors[i];
    for (int j = 0; j < kMaxSrc; ++j) {
      if (at(src[i * kMaxSrc + static_cast<size_t>(j)]) != t->src[j]) {
        exact_error = format_message("source %d of node %zu %s (position %d)", j, i, describe(*t).c_str(),
                                     pos.src[i * kMaxSrc + static_cast<size_t>(j)]);
        return;
      }
    }
  }
  for (size_t i = 0; i < n_nodes + n_leafs; ++i) {
    if (at(vsrc[i]) != tensors[i]->view_src) {
      exact_error = format_message("the view source of %s %zu %s", i < n_nodes ? "node" : "leaf",
                                   i < n_nodes ? i : i - n_nodes, describe(*tensors[i]).c_str());
      return;
    }
  }
}

void GraphIndex::exact_slots(size_t i, const int32_t* p) {
  Tensor* const t = tensors[i];
  int32_t* out = &src[i * kMaxSrc];
  int used = 0;
  for (int j = 0; j < kMaxSrc; ++j) {
    out[j] = exact(&t->src[j], p[j]);
    if (out[j] >= 0) used = j + 1;
  }
  nsrc[i] = static_cast<uint8_t>(used);
}

void GraphIndex::build_exact(const GraphNodes::Positions& pos) {
  const auto n_graph = static_cast<int64_t>(n_nodes + n_leafs), first_leaf = static_cast<int64_t>(n_nodes);
  for (size_t i = 0; i < n_nodes; ++i) {
    // Arithmetic only (node p is id p, leaf position -2 - l is id n_nodes + l); a position that is none of these
    // sends the node to the lookup path.
    const int32_t* p = &pos.src[i * kMaxSrc];
    int32_t* out = &src[i * kMaxSrc];
    int used = 0;
    bool lookup = false;
    for (int j = 0; j < kMaxSrc; ++j) {
      const int64_t q = p[j];
      const bool node = q >= 0;
      const int64_t id = q == Graph::kNoPos ? -1 : node ? q : first_leaf - 2 - q;
      lookup |= node ? q >= first_leaf : id >= n_graph;  // (a leaf position gives an id >= first_leaf)
      out[j] = static_cast<int32_t>(id);
      used = id >= 0 ? j + 1 : used;
    }
    nsrc[i] = static_cast<uint8_t>(used);
    if (lookup) exact_slots(i, p);
    if (pos.node_view_src[i] != Graph::kNoPos) vsrc[i] = exact(&tensors[i]->view_src, pos.node_view_src[i]);
  }
  for (size_t i = 0; i < n_leafs; ++i) {
    Tensor* const t = tensors[n_nodes + i];
    if (pos.leaf_view_src[i] != Graph::kNoPos) vsrc[n_nodes + i] = exact(&t->view_src, pos.leaf_view_src[i]);
  }
}

void GraphIndex::build(GraphNodes g, bool check_exact_positions) {
  lookups = 0;
  exact_error.clear();
  ids.clear();
  tensors.clear();
  n_nodes = g.n_nodes();
  n_leafs = g.n_leafs();
  const GraphNodes::Positions* pos = g.positions();
  const bool exact_pos = pos != nullptr && pos->exact;
  ids.reserve(n_nodes + n_leafs + n_nodes / 8 + 16);
  tensors.reserve(n_nodes + n_leafs + n_nodes / 8 + 16);
  tensors.insert(tensors.end(), g.nodes().begin(), g.nodes().end());
  tensors.insert(tensors.end(), g.leafs().begin(), g.leafs().end());
  map_pending = true;
  if (pos == nullptr) complete_map();  // every source is looked up anyway
  src.resize(n_nodes * kMaxSrc);
  nsrc.resize(n_nodes);
  vsrc.assign(n_nodes + n_leafs, -1);
  if (exact_pos) {
    build_exact(*pos);
  } else {
    build_checked(pos);
  }
  // sources and view sources outside the graph: their view sources (interning appends, the loop reaches them)
  for (size_t i = n_nodes + n_leafs; i < tensors.size(); ++i) {
    Tensor* v = tensors[i]->view_src;
    const int32_t id = v != nullptr ? intern(v) : -1;
    vsrc.push_back(id);
  }
  if (exact_pos && check_exact_positions) check_exact(*pos);
}

void GraphIndex::build_checked(const GraphNodes::Positions* pos) {
  for (size_t i = 0; i < n_nodes; ++i) {
    Tensor* const t = tensors[i];
    int32_t* out = &src[i * kMaxSrc];
    for (int j = 0; j < kMaxSrc; ++j) {
      Tensor* s = t->src[j];
      out[j] = s == nullptr     ? -1
               : pos != nullptr ? resolve(s, pos->src[i * kMaxSrc + static_cast<size_t>(j)])
                                : intern(s);
    }
    int used = kMaxSrc;
    while (used > 0 && out[used - 1] < 0) --used;
    nsrc[i] = static_cast<uint8_t>(used);
    if (t->view_src != nullptr) {
      vsrc[i] = pos != nullptr ? resolve(t->view_src, pos->node_view_src[i]) : intern(t->view_src);
    }
  }
  for (size_t i = 0; i < n_leafs; ++i) {
    Tensor* v = tensors[n_nodes + i]->view_src;
    if (v != nullptr) vsrc[n_nodes + i] = pos != nullptr ? resolve(v, pos->leaf_view_src[i]) : intern(v);
  }
}

}  // namespace tessera
