// The graph memory planner, GraphPlanner: construction, its buffers (grown to a plan's chunk sizes), reserve, the
// compatibility check of a graph with the last plan, and giving tensors their planned addresses. The
// plan itself is made in plan_walk.cpp (the walk) and offline_packing.cpp; the tensors' numbering is graph_index.h's
// (docs/planner.md).
#include <cstdlib>
#include <cstring>
#include <string>

#include "graph_index.h"
#include "tessera/planner.h"

namespace tessera {

size_t GraphPlanner::index_lookups() const { return index_ != nullptr ? index_->lookups : 0; }

GraphIndex& GraphPlanner::index_of(GraphNodes graph) const {
  if (index_ == nullptr) index_ = std::make_unique<GraphIndex>();
  index_->build(graph, check_positions_);
  return *index_;
}

GraphPlanner::GraphPlanner(BufferType* buft) : GraphPlanner(std::vector<BufferType*>{buft}) {}

namespace {

// Whether exact positions are checked (GraphNodes::Positions::exact): always in builds without NDEBUG, else when
// TESSERA_CHECK_POSITIONS=1.
bool check_positions_default() {
#ifndef NDEBUG
  return true;
#else
  const char* v = std::getenv("TESSERA_CHECK_POSITIONS");
  return v != nullptr && std::strcmp(v, "1") == 0;
#endif
}

}  // namespace

GraphPlanner::GraphPlanner(std::vector<BufferType*> bufts)
    : bufts_(std::move(bufts)),
      replicas_(bufts_.size(), 1),
      buffers_(bufts_.size()),
      check_positions_(check_positions_default()) {
  for (auto& sets : buffers_) sets.resize(1);
}

void GraphPlanner::set_replicas(int buft_id, int n) {
  const size_t id = static_cast<size_t>(buft_id);
  if (id >= replicas_.size() || n < 1) return;
  replicas_[id] = n;
  buffers_[id].resize(static_cast<size_t>(n));
}

GraphPlanner::~GraphPlanner() = default;

bool GraphPlanner::is_external(const Tensor* t) const {
  return t->view_src == nullptr && (t->data != nullptr || t->buffer != nullptr) && !owns(tensor_buffer(*t));
}

bool GraphPlanner::owns(const Buffer* buffer) const {
  if (buffer == nullptr) return false;
  for (const auto& sets : buffers_) {
    for (const auto& list : sets) {
      for (const auto& b : list) {
        if (b.get() == buffer) return true;
      }
    }
  }
  return false;
}

size_t GraphPlanner::buffer_size(int buft_id) const {
  size_t total = 0;
  for (const auto& list : buffers_.at(static_cast<size_t>(buft_id))) {
    for (const auto& b : list) total += b->size();
  }
  return total;
}

int GraphPlanner::n_chunks(int buft_id) const {
  return static_cast<int>(buffers_.at(static_cast<size_t>(buft_id)).front().size());
}

Buffer* GraphPlanner::chunk_buffer(int buft_id, int chunk, int replica) const {
  const auto& sets = buffers_.at(static_cast<size_t>(buft_id));
  return sets.at(static_cast<size_t>(replica) % sets.size()).at(static_cast<size_t>(chunk)).get();
}

// Which node or leaf a source is. Reading another INPUT leaf changes no lifetime (INPUT leafs are placed first and
// never freed), so those compare equal whatever their position: a scheduler rotating through per-slot input copies
// keeps its plan.
GraphPlanner::SrcRef GraphPlanner::src_ref(const GraphIndex& index, const Tensor* s, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= index.n_nodes + index.n_leafs) return {SrcRef::kOther, -1};
  if (static_cast<size_t>(id) < index.n_nodes) return {SrcRef::kNode, id};
  if ((s->flags & kFlagInput) != 0) return {SrcRef::kInputLeaf, -1};
  return {SrcRef::kLeaf, id - static_cast<int32_t>(index.n_nodes)};
}

// ---------------------------------------------------------------------------------------------------------------
// Buffers and reserve

Status GraphPlanner::grow_buffers(const Plan& plan) {
  for (size_t b = 0; b < bufts_.size(); ++b) {
    for (auto& list : buffers_[b]) {
      for (size_t c = 0; c < plan.chunk_sizes[b].size(); ++c) {
        const size_t need = plan.chunk_sizes[b][c];
        if (c < list.size() && list[c]->size() >= need) continue;  // buffers grow, never shrink
        Result<std::unique_ptr<Buffer>> buf = bufts_[b]->alloc_buffer(need);
        if (!buf.ok()) {
          return TS_ERROR(StatusCode::kAllocFailed, "planner: buffer type %s, chunk %zu (%zu bytes): %s",
                          bufts_[b]->name(), c, need, buf.status().message().c_str());
        }
        (*buf)->set_usage(BufferUsage::kCompute);
        if (c < list.size()) {
          list[c] = std::move(buf).value();
        } else {
          list.push_back(std::move(buf).value());
        }
      }
    }
  }
  return Status::Ok();
}

Status GraphPlanner::reserve(GraphNodes graph) { return reserve_n(graph, {}, {}); }

Status GraphPlanner::reserve_n(GraphNodes graph, std::span<const int> node_buft_ids,
                               std::span<const int> leaf_buft_ids) {
  Status s = make_plan(graph, node_buft_ids, leaf_buft_ids, &spare_);
  if (s.ok()) s = grow_buffers(spare_);
  if (!s.ok()) {
    plan_.valid = false;
    spare_.valid = false;
    return s;
  }
  std::swap(plan_, spare_);  // the old plan's memory serves the next one
  spare_.valid = false;
  return Status::Ok();
}

Result<std::vector<size_t>> GraphPlanner::reserve_size(GraphNodes graph, std::span<const int> node_buft_ids,
                                                       std::span<const int> leaf_buft_ids) const {
  Status s = make_plan(graph, node_buft_ids, leaf_buft_ids, &spare_);
  spare_.valid = false;
  TS_RETURN_IF_ERROR(s);
  std::vector<size_t> sizes(bufts_.size(), 0);
  for (size_t b = 0; b < bufts_.size(); ++b) {
    for (size_t c : spare_.chunk_sizes[b]) sizes[b] += c;
    sizes[b] *= static_cast<size_t>(replicas_[b]);
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------------------------------
// Compatibility and addresses

std::string GraphPlanner::needs_replan(GraphNodes graph) const {
  if (!plan_.valid) return "no plan (reserve first)";
  if (graph.n_nodes() != plan_.nodes.size() || graph.n_leafs() != plan_.leafs.size()) {
    return format_message("the graph has %zu nodes and %zu leafs, the plan %zu and %zu", graph.n_nodes(),
                          graph.n_leafs(), plan_.nodes.size(), plan_.leafs.size());
  }
  auto check = [&](const Tensor* t, const PlannedTensor& p) -> std::string {
    const bool external_now = is_external(t);
    if (external_now != p.external) {
      return format_message("tensor %s %s externally allocated since the plan", describe(*t).c_str(),
                            external_now ? "became" : "is no longer");
    }
    if ((t->view_src != nullptr) != p.is_view) return "tensor " + describe(*t) + " changed between view and not";
    if (p.external || p.is_view || p.chunk < 0) return {};
    const size_t need = bufts_[static_cast<size_t>(p.buft_id)]->alloc_size(*t);
    if (need > p.size) {
      return format_message("tensor %s needs %zu bytes, the plan has %zu", describe(*t).c_str(), need, p.size);
    }
    return {};
  };
  const GraphIndex& index = index_of(graph);
  if (!index.exact_error.empty()) return "an exact position is wrong: " + index.exact_error;
  size_t other = 0;  // cursor in plan_.others
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    const Tensor* node = graph.node(i);
    const NodePlan& np = plan_.nodes[i];
    if (std::string why = check(node, np.dst); !why.empty()) return why;
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = node->src[j];
      const int32_t sid = index.src[i * kMaxSrc + static_cast<size_t>(j)];
      const SrcRef ref = s != nullptr ? src_ref(index, s, sid) : SrcRef{};
      if (ref.kind != np.ref[j].kind || ref.index != np.ref[j].index) {
        return format_message("source %d of node %zu %s is not the node/leaf it was at plan time", j, i,
                              describe(*node).c_str());
      }
      // A node or leaf source is checked as that node or leaf; others against their own record.
      if (s != nullptr && ref.kind == SrcRef::kOther && other < plan_.others.size()) {
        if (std::string why = check(s, plan_.others[other++].p); !why.empty()) return why;
      }
    }
  }
  for (size_t i = 0; i < graph.n_leafs(); ++i) {
    if (std::string why = check(graph.leaf(i), plan_.leafs[i]); !why.empty()) return why;
  }
  return {};
}

Status GraphPlanner::place_tensor(Tensor& t, const PlannedTensor& p, int replica) {
  if (p.external) return Status::Ok();
  if (t.view_src != nullptr) {
    if (t.buffer != nullptr && !owns(t.buffer)) return Status::Ok();
    t.buffer = nullptr;
    t.data = nullptr;
    return view_init(t);
  }
  if (p.chunk < 0) return Status::Ok();
  Buffer* buf = chunk_buffer(p.buft_id, p.chunk, replica);
  void* addr = static_cast<char*>(buf->base()) + p.offset;
  if (t.buffer == buf && t.data == addr) return Status::Ok();
  if (owns(t.buffer)) {  // placed by an earlier alloc_graph: move it
    t.buffer = nullptr;
    t.data = nullptr;
  }
  return tensor_alloc(*buf, t, addr);
}

Status GraphPlanner::place(GraphNodes graph, int replica) {
  for (size_t i = 0; i < graph.n_leafs(); ++i) {
    TS_RETURN_IF_ERROR(place_tensor(*graph.leaf(i), plan_.leafs[i], replica));
  }
  size_t other = 0;  // cursor in plan_.others (the graph matches the plan: needs_replan passed)
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    Tensor* node = graph.node(i);
    const NodePlan& np = plan_.nodes[i];
    for (int j = 0; j < kMaxSrc; ++j) {
      Tensor* s = node->src[j];
      if (s != nullptr && np.ref[j].kind == SrcRef::kOther && other < plan_.others.size()) {
        TS_RETURN_IF_ERROR(place_tensor(*s, plan_.others[other++].p, replica));
      }
    }
    TS_RETURN_IF_ERROR(place_tensor(*node, np.dst, replica));
  }
  return Status::Ok();
}

Status GraphPlanner::alloc_graph(GraphNodes graph, int replica) {
  if (std::string why = needs_replan(graph); !why.empty()) {
    if (bufts_.size() != 1) {
      return TS_ERROR(StatusCode::kUnsupported, "planner: reserve needed: %s", why.c_str());
    }
    TS_RETURN_IF_ERROR(reserve(graph));
    ++replans_;
  }
  return place(graph, replica < 0 ? 0 : replica);
}

}  // namespace tessera