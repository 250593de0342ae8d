#include "tessera/graph.h"

#include <utility>

namespace tessera {

Status Graph::build_forward(Tensor* t) {
  if (t == nullptr) {
    return Status(StatusCode::kInvalidArgument, "build_forward: null tensor (did building it fail? check the context)");
  }
  return visit(t);
}

// Iterative depth-first walk (graphs can be tens of thousands of nodes deep): sources in order, then the tensor.
Status Graph::visit(Tensor* root) {
  if (visited_.count(root) != 0) return Status::Ok();
  std::vector<std::pair<Tensor*, int>> stack;  // tensor, next source index to visit
  visited_.insert(root);
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    bool descended = false;
    while (next < kMaxSrc) {
      Tensor* s = t->src[next++];
      if (s != nullptr && visited_.insert(s).second) {
        stack.emplace_back(s, 0);
        descended = true;
        break;
      }
    }
    if (descended) continue;
    Tensor* done = t;
    stack.pop_back();
    const bool is_leaf = done->op == Op::kNone && (done->flags & kFlagParam) == 0;
    TS_RETURN_IF_ERROR(is_leaf ? add_leaf(done) : add_node(done));
  }
  return Status::Ok();
}

Status Graph::add_node(Tensor* t) {
  if (nodes_.size() >= capacity_) {
    return TS_ERROR(StatusCode::kOutOfRange, "graph is full: capacity %zu nodes, adding %s", capacity_,
                    describe(*t).c_str());
  }
  nodes_.push_back(t);
  visited_.insert(t);
  return Status::Ok();
}

Status Graph::add_leaf(Tensor* t) {
  if (leafs_.size() >= capacity_) {
    return TS_ERROR(StatusCode::kOutOfRange, "graph is full: capacity %zu leafs, adding %s", capacity_,
                    describe(*t).c_str());
  }
  leafs_.push_back(t);
  visited_.insert(t);
  return Status::Ok();
}

Graph Graph::view(size_t i0, size_t i1) const {
  Graph g(capacity_);
  if (i1 > nodes_.size()) i1 = nodes_.size();
  for (size_t i = i0; i < i1; ++i) {
    g.nodes_.push_back(nodes_[i]);
    g.visited_.insert(nodes_[i]);
  }
  return g;
}

void Graph::clear() {
  nodes_.clear();
  leafs_.clear();
  visited_.clear();
}

}  // namespace tessera
