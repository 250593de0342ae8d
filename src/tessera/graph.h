// Graphs (SPEC 1.4): leafs and nodes in topological order, built by a depth-first walk over sources.
#pragma once

#include <cstddef>
#include <unordered_set>
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

  // The sub-range [i0, i1) of the nodes, without leafs (SPEC 1.4). The view points at the same tensors.
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
  bool visited(const Tensor* t) const { return visited_.count(t) != 0; }
  void clear();

 private:
  Status visit(Tensor* t);

  size_t capacity_;
  std::vector<Tensor*> nodes_;
  std::vector<Tensor*> leafs_;
  std::unordered_set<const Tensor*> visited_;
};

}  // namespace tessera
