// The graph memory planner (SPEC 8).
#include <algorithm>

#include "../ptr_map.h"
#include "dyn_allocator.h"
#include "tessera/gallocr.h"

namespace tessera {

// Index of each node and leaf of a graph.
struct GraphIndex {
  detail::PtrMap<int> nodes;
  detail::PtrMap<int> leafs;
  explicit GraphIndex(const Graph& g) {
    nodes.reserve(g.n_nodes());
    leafs.reserve(g.n_leafs());
    for (size_t i = 0; i < g.n_nodes(); ++i) nodes[g.node(i)] = static_cast<int>(i);
    for (size_t i = 0; i < g.n_leafs(); ++i) leafs[g.leaf(i)] = static_cast<int>(i);
  }
};

namespace {

// INPUT tensors keep their memory for the whole graph too: the user sets them once and may evaluate again.
bool is_pinned(const Tensor* t) { return (t->flags & (kFlagOutput | kFlagInput)) != 0; }

}  // namespace

GraphAllocator::GraphAllocator(BufferType* buft) : GraphAllocator(std::vector<BufferType*>{buft}) {}

GraphAllocator::GraphAllocator(std::vector<BufferType*> bufts) : bufts_(std::move(bufts)), buffers_(bufts_.size()) {}

GraphAllocator::~GraphAllocator() = default;

bool GraphAllocator::is_external(const Tensor* t) const {
  return t->view_src == nullptr && (t->data != nullptr || t->buffer != nullptr) && !owns(tensor_buffer(*t));
}

bool GraphAllocator::owns(const Buffer* buffer) const {
  if (buffer == nullptr) return false;
  for (const auto& list : buffers_) {
    for (const auto& b : list) {
      if (b.get() == buffer) return true;
    }
  }
  return false;
}

size_t GraphAllocator::buffer_size(int buft_id) const {
  size_t total = 0;
  for (const auto& b : buffers_.at(static_cast<size_t>(buft_id))) total += b->size();
  return total;
}

int GraphAllocator::n_chunks(int buft_id) const {
  return static_cast<int>(buffers_.at(static_cast<size_t>(buft_id)).size());
}

Buffer* GraphAllocator::chunk_buffer(int buft_id, int chunk) const {
  return buffers_.at(static_cast<size_t>(buft_id)).at(static_cast<size_t>(chunk)).get();
}

// Which node or leaf a source is. Reading another INPUT leaf changes no lifetime (INPUT leafs are placed first and
// never freed), so those compare equal whatever their position: a scheduler rotating through per-slot input copies
// keeps its plan.
GraphAllocator::SrcRef GraphAllocator::src_ref(const GraphIndex& index, const Tensor* s) {
  if (const int* n = index.nodes.find(s)) return {SrcRef::kNode, *n};
  if (const int* l = index.leafs.find(s)) {
    if ((s->flags & kFlagInput) != 0) return {SrcRef::kInputLeaf, -1};
    return {SrcRef::kLeaf, *l};
  }
  return {SrcRef::kOther, -1};
}

// ---------------------------------------------------------------------------------------------------------------
// Planning

Status GraphAllocator::make_plan(const Graph& graph, std::span<const int> node_ids, std::span<const int> leaf_ids,
                                 Plan* plan) const {
  const size_t n_bufts = bufts_.size();
  if (n_bufts == 0) return Status(StatusCode::kInvalidArgument, "graph allocator: no buffer types");
  for (BufferType* b : bufts_) {
    if (b == nullptr) return Status(StatusCode::kInvalidArgument, "graph allocator: null buffer type");
  }
  if (!node_ids.empty() && node_ids.size() != graph.n_nodes()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "graph allocator: %zu node buffer ids for %zu nodes",
                    node_ids.size(), graph.n_nodes());
  }
  if (!leaf_ids.empty() && leaf_ids.size() != graph.n_leafs()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "graph allocator: %zu leaf buffer ids for %zu leafs",
                    leaf_ids.size(), graph.n_leafs());
  }
  for (std::span<const int> ids : {node_ids, leaf_ids}) {
    for (int id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= n_bufts) {
        return TS_ERROR(StatusCode::kInvalidArgument, "graph allocator: buffer type id %d out of range [0, %zu)", id,
                        n_bufts);
      }
    }
  }
  auto node_buft = [&](size_t i) { return node_ids.empty() ? 0 : node_ids[i]; };
  auto leaf_buft = [&](size_t i) { return leaf_ids.empty() ? 0 : leaf_ids[i]; };

  struct Info {
    int n_children = 0;
    int n_views = 0;
    bool allocated = false;  // currently holds a block of the plan
    int buft = -1;
    BlockAddress addr;
    size_t size = 0;  // bytes of the block it holds
    int block = -1;   // lifetime record of that block (for the offline placement)
  };
  std::vector<Lifetime> blocks;  // one per block the walk allocated, in allocation order
  long clock = 0;                // ticks at every allocation and free of the walk
  detail::PtrMap<Info> info(graph.n_nodes() + graph.n_leafs());
  std::vector<DynamicAllocator> dyn;
  dyn.reserve(n_bufts);
  for (BufferType* b : bufts_) dyn.emplace_back(b->alignment(), b->max_size());

  auto external = [&](const Tensor* t) { return is_external(t); };

  // A view flagged INPUT or OUTPUT pins the memory of its root as well (an OUTPUT reshape of an intermediate must
  // still hold its values after the graph ran).
  detail::PtrMap<char> pinned_roots;
  for (const auto* list : {&graph.nodes(), &graph.leafs()}) {
    for (const Tensor* t : *list) {
      if (t->view_src != nullptr && is_pinned(t)) pinned_roots[t->view_src] = 1;
    }
  }
  auto pinned = [&](const Tensor* t) { return is_pinned(t) || pinned_roots.contains(t); };

  Status error;
  auto alloc_tensor = [&](const Tensor* t, int b) {
    Info& in = info[t];
    if (in.allocated || t->view_src != nullptr || external(t) || !error.ok()) return;
    const size_t need = bufts_[static_cast<size_t>(b)]->alloc_size(*t);
    Result<BlockAddress> addr = dyn[static_cast<size_t>(b)].alloc(need);
    if (!addr.ok()) {
      error = TS_ERROR(StatusCode::kAllocFailed, "graph allocator: tensor %s in buffer type %s: %s",
                       describe(*t).c_str(), bufts_[static_cast<size_t>(b)]->name(), addr.status().message().c_str());
      return;
    }
    in.allocated = true;
    in.buft = b;
    in.addr = *addr;
    in.size = dyn[static_cast<size_t>(b)].aligned(need);
    in.block = static_cast<int>(blocks.size());
    blocks.push_back({b, in.size, clock++, kForever});
  };
  auto free_tensor = [&](const Tensor* t) {
    Info& in = info[t];
    if (!in.allocated || pinned(t) || t->view_src != nullptr) return;
    dyn[static_cast<size_t>(in.buft)].free(in.addr, in.size);
    in.allocated = false;
    blocks[static_cast<size_t>(in.block)].end = clock++;
  };
  // Takes over the block of a dying source when the op can run in place (SPEC 8). Among several candidates the one
  // at the lowest address wins: the block that stays live grows from the bottom, so the hole the other one leaves
  // is above it and can be reused.
  auto try_inplace = [&](const Tensor* node, int b) {
    if (!op_can_inplace(node->op)) return false;
    const Tensor* best = nullptr;
    for (const Tensor* s : node->src) {
      if (s == nullptr || pinned(s) || !same_layout(*s, *node)) continue;
      const Info& si = info[s];
      if (si.n_children != 1 || si.n_views != 0) continue;
      const Tensor* owner = s;
      if (s->view_src != nullptr) {
        const Tensor* root = s->view_src;
        const Info& ri = info[root];
        if (pinned(root) || ri.n_views != 1 || ri.n_children != 0 || s->view_offs != 0) continue;
        owner = root;
      }
      const Info& oi = info[owner];
      if (!oi.allocated || oi.buft != b) continue;
      if (best != nullptr) {
        const Info& bi = info[best];
        if (std::make_pair(bi.addr.chunk, bi.addr.offset) <= std::make_pair(oi.addr.chunk, oi.addr.offset)) continue;
      }
      best = owner;
    }
    if (best == nullptr) return false;
    Info& oi = info[best];
    Info& ni = info[node];
    ni.allocated = true;
    ni.buft = b;
    ni.addr = oi.addr;
    ni.size = oi.size;    // the whole block moves, so freeing the node later frees all of it
    ni.block = oi.block;  // one lifetime: the block lives on in the node
    oi.allocated = false;
    return true;
  };
  auto planned = [&](const Tensor* t) {
    PlannedTensor p;
    p.external = external(t);
    p.is_view = t->view_src != nullptr;
    const Info* in = info.find(t);
    if (in != nullptr && in->allocated) {
      p.buft_id = in->buft;
      p.chunk = in->addr.chunk;
      p.offset = in->addr.offset;
      p.size = in->size;
      p.block = in->block;
    }
    return p;
  };

  const GraphIndex index(graph);
  // 1. Count uses and views. Every tensor the walk will look at gets its record here, so the map never grows (and
  // never moves its records) during the walk.
  for (Tensor* leaf : graph.leafs()) info[leaf];
  for (Tensor* node : graph.nodes()) {
    info[node];
    if (node->view_src != nullptr) info[node->view_src].n_views++;
    for (Tensor* s : node->src) {
      if (s == nullptr) continue;
      info[s].n_children++;
      if (s->view_src != nullptr) info[s->view_src];
    }
  }
  // 2. Leafs without memory first, then INPUT tensors (they must exist before computation starts).
  for (size_t i = 0; i < graph.n_leafs(); ++i) alloc_tensor(graph.leaf(i), leaf_buft(i));
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    Tensor* node = graph.node(i);
    if (node->flags & kFlagInput) alloc_tensor(node, node_buft(i));
    for (Tensor* s : node->src) {
      if (s == nullptr || !(s->flags & kFlagInput)) continue;
      const int* k = index.nodes.find(s);
      alloc_tensor(s, k != nullptr ? node_buft(static_cast<size_t>(*k)) : node_buft(i));
    }
  }
  if (!error.ok()) return error;
  // Leafs keep the block they got here (a block only moves on to a user that computes in place of it).
  plan->leafs.assign(graph.n_leafs(), PlannedTensor{});
  for (size_t i = 0; i < graph.n_leafs(); ++i) plan->leafs[i] = planned(graph.leaf(i));

  const long walk_start = clock;  // blocks allocated before this exist from the start

  // 3. Walk the nodes: allocate, record, then free what is no longer used.
  plan->nodes.assign(graph.n_nodes(), NodePlan{});
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    Tensor* node = graph.node(i);
    const int b = node_buft(i);
    for (Tensor* s : node->src) {
      if (s != nullptr) alloc_tensor(s, b);  // sources outside the graph (rare): placed with their user
    }
    if (!info[node].allocated && node->view_src == nullptr && !external(node) && !try_inplace(node, b)) {
      alloc_tensor(node, b);
    }
    if (!error.ok()) return error;

    NodePlan& np = plan->nodes[i];
    np.dst = planned(node);
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = node->src[j];
      if (s == nullptr) continue;
      np.src[j] = planned(s);
      np.ref[j] = src_ref(index, s);
    }

    auto release = [&](const Tensor* t) {  // t has no users and no views left
      if (t->view_src != nullptr) {
        Info& ri = info[t->view_src];
        ri.n_views--;
        if (ri.n_views == 0 && ri.n_children == 0) free_tensor(t->view_src);
      } else {
        free_tensor(t);
      }
    };
    for (Tensor* s : node->src) {
      if (s == nullptr) continue;
      Info& si = info[s];
      si.n_children--;
      if (si.n_children == 0 && si.n_views == 0) release(s);
    }
    // A node nobody reads is dead once computed.
    const Info& ni = info[node];
    if (ni.n_children == 0 && ni.n_views == 0) release(node);
  }
  plan->chunk_sizes.assign(n_bufts, {});
  for (size_t b = 0; b < n_bufts; ++b) {
    for (int c = 0; c < dyn[b].n_chunks(); ++c) plan->chunk_sizes[b].push_back(dyn[b].chunk_size(c));
  }

  // 4. The walk placed blocks online, in allocation order. Knowing every lifetime now, place them again largest
  // first (offline); per buffer type keep whichever placement needs fewer bytes.
  for (size_t b = 0; b < n_bufts; ++b) {
    std::vector<BlockAddress> addr;
    std::vector<size_t> sizes;
    place_offline(blocks, static_cast<int>(b), dyn[b].chunk_limit(), walk_start, &addr, &sizes);
    size_t online = 0, offline = 0;
    for (size_t c : plan->chunk_sizes[b]) online += c;
    for (size_t c : sizes) offline += c;
    if (offline >= online) continue;
    auto apply = [&](PlannedTensor& p) {
      if (p.buft_id == static_cast<int>(b) && p.block >= 0) {
        p.chunk = addr[static_cast<size_t>(p.block)].chunk;
        p.offset = addr[static_cast<size_t>(p.block)].offset;
      }
    };
    for (NodePlan& np : plan->nodes) {
      apply(np.dst);
      for (PlannedTensor& p : np.src) apply(p);
    }
    for (PlannedTensor& p : plan->leafs) apply(p);
    plan->chunk_sizes[b] = std::move(sizes);
  }
  plan->valid = true;
  return Status::Ok();
}

// Greedy by size: blocks of buffer type b, largest first (ties: earlier start), each at the lowest-waste gap among
// the already placed blocks whose lifetimes overlap its own, in the first chunk where it fits. Blocks that exist from
// the start to the end (placed before the walk and never freed) are stacked at the bottom first: they overlap
// everything. Placed blocks are indexed by time bucket, so each placement only looks at blocks live around the same
// time.
void GraphAllocator::place_offline(const std::vector<Lifetime>& blocks, int b, size_t limit, long walk_start,
                                   std::vector<BlockAddress>* addr, std::vector<size_t>* chunk_sizes) {
  addr->assign(blocks.size(), BlockAddress{});
  chunk_sizes->clear();
  std::vector<int> order;
  long t_end = 1;
  for (size_t i = 0; i < blocks.size(); ++i) {
    if (blocks[i].buft != b) continue;
    order.push_back(static_cast<int>(i));
    t_end = std::max(t_end, (blocks[i].end != kForever ? blocks[i].end : blocks[i].start) + 1);
  }
  if (order.empty()) return;
  auto lifelong = [&](const Lifetime& l) { return l.end == kForever && l.start < walk_start; };
  auto end_of = [&](const Lifetime& l) { return l.end == kForever ? t_end : l.end; };
  std::stable_sort(order.begin(), order.end(), [&](int x, int y) {
    const Lifetime& a = blocks[static_cast<size_t>(x)];
    const Lifetime& c = blocks[static_cast<size_t>(y)];
    const bool fa = lifelong(a), fc = lifelong(c);
    if (fa != fc) return fa;               // lifelong blocks first
    if (fa) return a.start < c.start;      // in allocation order
    if (a.size != c.size) return a.size > c.size;
    return a.start < c.start;
  });
  constexpr long kBucket = 64;
  const size_t n_buckets = static_cast<size_t>(t_end / kBucket + 1);
  struct Chunk {
    size_t base = 0;  // bytes taken by lifelong blocks
    size_t top = 0;
    std::vector<std::vector<int>> buckets;  // placed finite blocks by time bucket
  };
  std::vector<Chunk> chunks;
  auto new_chunk = [&]() {
    chunks.emplace_back();
    chunks.back().buckets.resize(n_buckets);
  };
  new_chunk();
  std::vector<int> seen(blocks.size(), -1);  // de-duplicates candidates per query
  int query = 0;
  std::vector<std::pair<size_t, size_t>> busy;  // [offset, end) of conflicting blocks
  for (int id : order) {
    const Lifetime& lt = blocks[static_cast<size_t>(id)];
    BlockAddress& out = (*addr)[static_cast<size_t>(id)];
    if (lifelong(lt)) {
      // lifelong: stack at the bottom of the first chunk with room
      size_t c = 0;
      while (c < chunks.size() && chunks[c].base + lt.size > limit) ++c;
      if (c == chunks.size()) new_chunk();
      out = {static_cast<int>(c), chunks[c].base};
      chunks[c].base += lt.size;
      chunks[c].top = std::max(chunks[c].top, chunks[c].base);
      continue;
    }
    const long lt_end = end_of(lt);
    const size_t b0 = static_cast<size_t>(lt.start / kBucket), b1 = static_cast<size_t>(lt_end / kBucket);
    bool placed = false;
    for (size_t c = 0; c < chunks.size() && !placed; ++c) {
      Chunk& ch = chunks[c];
      busy.clear();
      ++query;
      for (size_t k = b0; k <= b1; ++k) {
        for (int other : ch.buckets[k]) {
          if (seen[static_cast<size_t>(other)] == query) continue;
          seen[static_cast<size_t>(other)] = query;
          const Lifetime& o = blocks[static_cast<size_t>(other)];
          if (o.start < lt_end && lt.start < end_of(o)) {
            const BlockAddress& oa = (*addr)[static_cast<size_t>(other)];
            busy.emplace_back(oa.offset, oa.offset + o.size);
          }
        }
      }
      std::sort(busy.begin(), busy.end());
      // best fit among the gaps between conflicting blocks, else just above them
      size_t best = SIZE_MAX, best_waste = SIZE_MAX, cursor = ch.base;
      for (const auto& [lo, hi] : busy) {
        if (lo > cursor && lo - cursor >= lt.size && lo - cursor - lt.size < best_waste) {
          best = cursor;
          best_waste = lo - cursor - lt.size;
        }
        cursor = std::max(cursor, hi);
      }
      if (best == SIZE_MAX) best = cursor;
      if (best + lt.size > limit) continue;
      out = {static_cast<int>(c), best};
      ch.top = std::max(ch.top, best + lt.size);
      for (size_t k = b0; k <= b1; ++k) ch.buckets[k].push_back(id);
      placed = true;
    }
    if (!placed) {
      new_chunk();
      Chunk& ch = chunks.back();
      out = {static_cast<int>(chunks.size()) - 1, 0};
      ch.top = lt.size;
      for (size_t k = b0; k <= b1; ++k) ch.buckets[k].push_back(id);
    }
  }
  for (const Chunk& ch : chunks) chunk_sizes->push_back(ch.top);
}

Status GraphAllocator::grow_buffers(const Plan& plan) {
  for (size_t b = 0; b < bufts_.size(); ++b) {
    auto& list = buffers_[b];
    for (size_t c = 0; c < plan.chunk_sizes[b].size(); ++c) {
      const size_t need = plan.chunk_sizes[b][c];
      if (c < list.size() && list[c]->size() >= need) continue;  // buffers grow, never shrink
      Result<std::unique_ptr<Buffer>> buf = bufts_[b]->alloc_buffer(need);
      if (!buf.ok()) {
        return TS_ERROR(StatusCode::kAllocFailed, "graph allocator: buffer type %s, chunk %zu (%zu bytes): %s",
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
  return Status::Ok();
}

Status GraphAllocator::reserve(const Graph& graph) { return reserve_n(graph, {}, {}); }

Status GraphAllocator::reserve_n(const Graph& graph, std::span<const int> node_buft_ids,
                                 std::span<const int> leaf_buft_ids) {
  Plan plan;
  Status s = make_plan(graph, node_buft_ids, leaf_buft_ids, &plan);
  if (s.ok()) s = grow_buffers(plan);
  if (!s.ok()) {
    plan_ = Plan{};
    return s;
  }
  plan_ = std::move(plan);
  return Status::Ok();
}

Result<std::vector<size_t>> GraphAllocator::reserve_size(const Graph& graph, std::span<const int> node_buft_ids,
                                                         std::span<const int> leaf_buft_ids) const {
  Plan plan;
  TS_RETURN_IF_ERROR(make_plan(graph, node_buft_ids, leaf_buft_ids, &plan));
  std::vector<size_t> sizes(bufts_.size(), 0);
  for (size_t b = 0; b < bufts_.size(); ++b) {
    for (size_t c : plan.chunk_sizes[b]) sizes[b] += c;
  }
  return sizes;
}

// ---------------------------------------------------------------------------------------------------------------
// Compatibility and placement

std::string GraphAllocator::needs_replan(const Graph& graph) const {
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
  const GraphIndex index(graph);
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    const Tensor* node = graph.node(i);
    const NodePlan& np = plan_.nodes[i];
    if (std::string why = check(node, np.dst); !why.empty()) return why;
    for (int j = 0; j < kMaxSrc; ++j) {
      const Tensor* s = node->src[j];
      const SrcRef ref = s != nullptr ? src_ref(index, s) : SrcRef{};
      if (ref.kind != np.ref[j].kind || ref.index != np.ref[j].index) {
        return format_message("source %d of node %zu %s is not the node/leaf it was at plan time", j, i,
                              describe(*node).c_str());
      }
      if (s != nullptr) {
        if (std::string why = check(s, np.src[j]); !why.empty()) return why;
      }
    }
  }
  for (size_t i = 0; i < graph.n_leafs(); ++i) {
    if (std::string why = check(graph.leaf(i), plan_.leafs[i]); !why.empty()) return why;
  }
  return {};
}

Status GraphAllocator::place_tensor(Tensor& t, const PlannedTensor& p) {
  if (p.external) return Status::Ok();
  if (t.view_src != nullptr) {
    if (t.buffer != nullptr && !owns(t.buffer)) return Status::Ok();
    t.buffer = nullptr;
    t.data = nullptr;
    return view_init(t);
  }
  if (p.chunk < 0) return Status::Ok();
  Buffer* buf = chunk_buffer(p.buft_id, p.chunk);
  void* addr = static_cast<char*>(buf->base()) + p.offset;
  if (t.buffer == buf && t.data == addr) return Status::Ok();
  if (owns(t.buffer)) {  // placed by an earlier alloc_graph: move it
    t.buffer = nullptr;
    t.data = nullptr;
  }
  return tensor_alloc(*buf, t, addr);
}

Status GraphAllocator::place(Graph& graph) {
  for (size_t i = 0; i < graph.n_leafs(); ++i) TS_RETURN_IF_ERROR(place_tensor(*graph.leaf(i), plan_.leafs[i]));
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    Tensor* node = graph.node(i);
    const NodePlan& np = plan_.nodes[i];
    for (int j = 0; j < kMaxSrc; ++j) {
      Tensor* s = node->src[j];
      if (s != nullptr && np.ref[j].kind == SrcRef::kOther) TS_RETURN_IF_ERROR(place_tensor(*s, np.src[j]));
    }
    TS_RETURN_IF_ERROR(place_tensor(*node, np.dst));
  }
  return Status::Ok();
}

Status GraphAllocator::alloc_graph(Graph& graph) {
  if (std::string why = needs_replan(graph); !why.empty()) {
    if (bufts_.size() != 1) {
      return TS_ERROR(StatusCode::kUnsupported, "graph allocator: reserve needed: %s", why.c_str());
    }
    TS_RETURN_IF_ERROR(reserve(graph));
    ++replans_;
  }
  return place(graph);
}

}  // namespace tessera
