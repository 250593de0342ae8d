// Graphs (docs/data-model.md, 'Graphs'): leafs and nodes in topological order, built by a depth-first walk over
// sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera {

class Graph {
 public:
  static constexpr size_t kDefaultCapacity = 8192;

  explicit Graph(size_t capacity = kDefaultCapacity) : capacity_(capacity) {}

  // Adds t and everything it depends on (sources first, src[0] before src[1] ...). Tensors already visited are
  // skipped, so calling it for several outputs builds one graph. Errors: null tensor (a failed build), more than
  // capacity nodes or leafs.
  Status build_forward(Tensor* t);

  // Appends a node directly (for code that builds graphs itself, e.g. the scheduler). No dependency walk.
  Status add_node(Tensor* t);
  Status add_leaf(Tensor* t);

  // The sub-range [i0, i1) of the nodes, without leafs (what one split computes), over the same tensors.
  Graph view(size_t i0, size_t i1) const;

  size_t capacity() const { return capacity_; }
  size_t n_nodes() const { return nodes_.size(); }
  size_t n_leafs() const { return leafs_.size(); }
  Tensor* node(size_t i) const { return nodes_[i]; }
  Tensor* leaf(size_t i) const { return leafs_[i]; }
  const std::vector<Tensor*>& nodes() const { return nodes_; }
  const std::vector<Tensor*>& leafs() const { return leafs_; }
  // Negative indices count from the end (node(-1) is the last node).
  Tensor* node_at(long i) const { return nodes_[i < 0 ? static_cast<long>(nodes_.size()) + i : i]; }
  bool visited(const Tensor* t) const { return pos_.count(t) != 0; }
  void clear();

  // ---- positions (for the scheduler: numbering a graph's tensors without a pointer lookup per source) ----
  // A position encodes where a tensor is in this graph: p >= 0 is node p, p <= -2 is leaf -2 - p; kNoPos means no
  // tensor (a null source), kPosUnknown a tensor that was not in the graph when the position was recorded.
  static constexpr int32_t kNoPos = -1;
  static constexpr int32_t kPosUnknown = INT32_MIN;
  static constexpr int32_t leaf_position(size_t i) { return -2 - static_cast<int32_t>(i); }
  // The dense id of a position in lists of n_nodes nodes followed by n_leafs leafs (node p is p, leaf l is
  // n_nodes + l), or -1 for kNoPos, kPosUnknown or a position beyond the lists.
  static int64_t position_to_id(int32_t pos, size_t n_nodes, size_t n_leafs) {
    if (pos >= 0) return static_cast<size_t>(pos) < n_nodes ? pos : -1;
    if (pos == kPosUnknown || pos == kNoPos) return -1;
    const int64_t leaf = -2 - static_cast<int64_t>(pos);
    return static_cast<size_t>(leaf) < n_leafs ? static_cast<int64_t>(n_nodes) + leaf : -1;
  }
  // The position of t, kPosUnknown when t is not in the graph (one hash lookup).
  int32_t position(const Tensor* t) const {
    auto it = pos_.find(t);
    return it == pos_.end() ? kPosUnknown : it->second;
  }
  // The positions of node i's kMaxSrc sources, and of its view source, as they were when node i was added. The
  // tensors may have changed since (a source replaced by hand): a caller checks the pointer at the position against
  // the tensor's before trusting it.
  const int32_t* src_positions(size_t i) const { return &src_pos_[i * kMaxSrc]; }
  int32_t node_view_src_position(size_t i) const { return node_vsrc_pos_[i]; }
  int32_t leaf_view_src_position(size_t i) const { return leaf_vsrc_pos_[i]; }
  const std::vector<int32_t>& all_src_positions() const { return src_pos_; }
  const std::vector<int32_t>& node_view_src_positions() const { return node_vsrc_pos_; }
  const std::vector<int32_t>& leaf_view_src_positions() const { return leaf_vsrc_pos_; }

 private:
  Status visit(Tensor* t);
  int32_t pos_or_unknown(const Tensor* t) const { return t == nullptr ? kNoPos : position(t); }

  size_t capacity_;
  std::vector<Tensor*> nodes_;
  std::vector<Tensor*> leafs_;
  std::unordered_map<const Tensor*, int32_t> pos_;  // every visited tensor; kPosUnknown while on the walk's stack
  std::vector<int32_t> src_pos_;                    // kMaxSrc per node
  std::vector<int32_t> node_vsrc_pos_, leaf_vsrc_pos_;
};

}  // namespace tessera
