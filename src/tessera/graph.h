// Graphs (docs/data-model.md, 'Graphs'): leafs and nodes in topological order, built by a depth-first walk over
// sources.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera {

namespace detail {

// Tensor -> position, for Graph: open addressing with linear probing, load factor <= 1/2, a null key marks an empty
// slot (tensors are never null here). A std::unordered_map node per tensor made it a seventh of `tessera plan`'s time
// on a 3.2M-node graph (issue 51).
class GraphPosMap {
 public:
  // The value of key, or nullptr.
  const int32_t* find(const Tensor* key) const {
    if (slots_.empty()) return nullptr;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == key) return &s.value;
      if (s.key == nullptr) return nullptr;
    }
  }
  // Inserts key with value when it is missing; returns whether it did.
  bool emplace(const Tensor* key, int32_t value) { return slot(key, value, false); }
  // Sets key's value (inserting it when missing).
  void set(const Tensor* key, int32_t value) { (void)slot(key, value, true); }
  size_t size() const { return size_; }
  // Room for n keys without growing.
  void reserve(size_t n) {
    if (2 * n <= slots_.size()) return;
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    std::vector<Slot> old(cap);
    old.swap(slots_);
    size_ = 0;
    for (const Slot& s : old) {
      if (s.key != nullptr) (void)slot(s.key, s.value, false);
    }
  }
  void clear() {
    slots_.clear();
    size_ = 0;
  }

 private:
  struct Slot {
    const Tensor* key = nullptr;
    int32_t value = 0;
  };
  static size_t hash(const Tensor* p) {
    auto x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  bool slot(const Tensor* key, int32_t value, bool overwrite) {
    if (2 * (size_ + 1) > slots_.size()) grow();
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == key) {
        if (overwrite) s.value = value;
        return false;
      }
      if (s.key == nullptr) {
        s = {key, value};
        ++size_;
        return true;
      }
    }
  }
  void grow() { reserve(slots_.empty() ? 8 : slots_.size()); }

  std::vector<Slot> slots_;
  size_t size_ = 0;
};

}  // namespace detail

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
  bool visited(const Tensor* t) const { return pos_.find(t) != nullptr; }
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
    const int32_t* p = pos_.find(t);
    return p == nullptr ? kPosUnknown : *p;
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
  detail::GraphPosMap pos_;       // every visited tensor; kPosUnknown while on the walk's stack
  std::vector<int32_t> src_pos_;  // kMaxSrc per node
  std::vector<int32_t> node_vsrc_pos_, leaf_vsrc_pos_;
};

}  // namespace tessera
