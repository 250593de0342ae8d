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
  if (pos_.find(root) != nullptr) return Status::Ok();
  std::vector<std::pair<Tensor*, int>> stack;  // tensor, next source index to visit
  pos_.emplace(root, kPosUnknown);
  stack.emplace_back(root, 0);
  while (!stack.empty()) {
    auto& [t, next] = stack.back();
    bool descended = false;
    while (next < kMaxSrc) {
      Tensor* s = t->src[next++];
      if (s != nullptr && pos_.emplace(s, kPosUnknown)) {
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
  for (int j = 0; j < kMaxSrc; ++j) src_pos_.push_back(pos_or_unknown(t->src[j]));
  node_vsrc_pos_.push_back(pos_or_unknown(t->view_src));
  pos_.set(t, static_cast<int32_t>(nodes_.size()));
  nodes_.push_back(t);
  return Status::Ok();
}

Status Graph::add_leaf(Tensor* t) {
  if (leafs_.size() >= capacity_) {
    return TS_ERROR(StatusCode::kOutOfRange, "graph is full: capacity %zu leafs, adding %s", capacity_,
                    describe(*t).c_str());
  }
  leaf_vsrc_pos_.push_back(pos_or_unknown(t->view_src));
  pos_.set(t, leaf_position(leafs_.size()));
  leafs_.push_back(t);
  return Status::Ok();
}

Graph Graph::view(size_t i0, size_t i1) const {
  Graph g(capacity_);
  if (i1 > nodes_.size()) i1 = nodes_.size();
  if (i1 > i0) g.pos_.reserve(i1 - i0);
  auto local = [&](int32_t p) {  // a node inside the range keeps its place; anything else is not in the view
    if (p == kNoPos) return kNoPos;
    return p >= 0 && static_cast<size_t>(p) >= i0 && static_cast<size_t>(p) < i1 ? static_cast<int32_t>(p - i0)
                                                                                 : kPosUnknown;
  };
  for (size_t i = i0; i < i1; ++i) {
    for (int j = 0; j < kMaxSrc; ++j) g.src_pos_.push_back(local(src_pos_[i * kMaxSrc + j]));
    g.node_vsrc_pos_.push_back(local(node_vsrc_pos_[i]));
    g.pos_.set(nodes_[i], static_cast<int32_t>(g.nodes_.size()));
    g.nodes_.push_back(nodes_[i]);
  }
  return g;
}

void Graph::clear() {
  nodes_.clear();
  leafs_.clear();
  pos_.clear();
  src_pos_.clear();
  node_vsrc_pos_.clear();
  leaf_vsrc_pos_.clear();
}

}  // namespace tessera
