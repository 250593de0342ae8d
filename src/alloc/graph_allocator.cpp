// The graph memory planner (SPEC 8).
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "prefetch.h"
#include "tensor_id_map.h"
#include "dyn_allocator.h"
#include "tessera/gallocr.h"

namespace tessera {

// The planning walk's record of one tensor.
struct PlanInfo {
  int n_children = 0;
  int n_views = 0;
  bool allocated = false;  // currently holds a block of the plan
  bool external = false;   // has memory that is not the planner's
  bool pinned = false;     // INPUT or OUTPUT, or the root of such a view: never freed
  bool released = false;   // the walk found it dead (no readers or views left)
  bool input = false;      // flagged INPUT (read once here: the walk asks for every source)
  int buft = -1;
  BlockAddress addr;
  size_t size = 0;  // bytes of the block it holds
  int block = -1;   // lifetime record of that block (for the offline placement)
};

// place_offline's working memory, kept from call to call (GraphIndex::offline).
struct OfflineScratch {
  struct Placed {  // a placed block, as a time bucket lists it
    long start, end;
    size_t lo, hi;        // its bytes [lo, hi) in the chunk
    size_t first_bucket;  // the first bucket that lists it
  };
  struct Chunk {
    size_t base = 0;  // bytes taken by lifelong blocks
    size_t top = 0;
    std::vector<std::vector<Placed>> buckets;  // placed finite blocks by time bucket
  };
  struct Key {
    int lifelong_last;  // 0: lifelong
    size_t inv_size;    // SIZE_MAX - size (0 for lifelong blocks)
    long start;
    int id;
  };
  std::vector<Key> keys;
  std::vector<Chunk> chunks;
  std::vector<std::pair<size_t, size_t>> busy;
};

// Dense ids for the tensors of a graph: node i is id i, leaf i is n_nodes + i, then sources and view sources outside
// the graph. The planner keeps its per-tensor records in arrays indexed by these ids. When the graph carries positions
// (GraphNodes::positions) a source's id comes from its position, checked against the pointer; otherwise, or when the
// check fails, from a pointer lookup. The pointer map gets the graph's nodes and leafs only when a lookup needs them.
struct GraphIndex {
  detail::TensorIdMap ids;
  bool map_pending = false;  // the nodes and leafs are not in `ids` yet
  size_t lookups = 0;        // pointer lookups of the last build (GraphAllocator::index_lookups)
  std::vector<Tensor*> tensors;
  std::vector<int32_t> src;   // n_nodes * kMaxSrc, -1: none
  std::vector<uint8_t> nsrc;  // per node: one past its last source slot in use (the walks stop there)
  std::vector<int32_t> vsrc;  // per id, -1: not a view
  size_t n_nodes = 0, n_leafs = 0;
  std::vector<PlanInfo> info;  // make_plan's records, per id (kept here so its memory is reused)
  OfflineScratch offline;      // likewise place_offline's

  void complete_map() {
    map_pending = false;
    lookups += n_nodes + n_leafs;
    bool inserted = false;
    for (size_t i = 0; i < n_nodes + n_leafs; ++i) ids.insert(tensors[i], static_cast<int32_t>(i), &inserted);
  }
  int32_t intern(Tensor* t) {
    if (map_pending) complete_map();
    ++lookups;
    bool inserted = false;
    const int32_t id = ids.insert(t, static_cast<int32_t>(tensors.size()), &inserted);
    if (inserted) tensors.push_back(t);
    return id;
  }
  // The id of t, recorded at position pos (Graph's encoding), when the tensor there is t; else by pointer.
  int32_t resolve(Tensor* t, int32_t pos) {
    const int64_t id = Graph::position_to_id(pos, n_nodes, n_leafs);
    if (id >= 0 && tensors[static_cast<size_t>(id)] == t) return static_cast<int32_t>(id);
    return intern(t);
  }
  // Exact positions (GraphNodes::Positions::exact): each is taken as it is; only kPosUnknown (and a position out of
  // range) is looked up by the pointer. The tensors' source pointers are not read.
  int32_t exact(Tensor* const* slot, int32_t pos) {
    if (pos == Graph::kNoPos) return -1;
    const int64_t id = Graph::position_to_id(pos, n_nodes, n_leafs);
    if (id >= 0) return static_cast<int32_t>(id);
    return *slot != nullptr ? intern(*slot) : -1;
  }
  // With checking on, the first exact position that does not hold its pointer (empty when all do).
  std::string exact_error;
  void check_exact(const GraphNodes::Positions& pos) {
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
  // Node i's source slots when a position needs a lookup (kPosUnknown, or out of range).
  [[gnu::noinline]] void exact_slots(size_t i, const int32_t* p) {
    Tensor* const t = tensors[i];
    int32_t* out = &src[i * kMaxSrc];
    int used = 0;
    for (int j = 0; j < kMaxSrc; ++j) {
      out[j] = exact(&t->src[j], p[j]);
      if (out[j] >= 0) used = j + 1;
    }
    nsrc[i] = static_cast<uint8_t>(used);
  }
  void build_exact(const GraphNodes::Positions& pos) {
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
  void build(GraphNodes g, bool check_exact_positions) {
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
  // Positions as hints (each checked against the pointer), or none (every source looked up).
  void build_checked(const GraphNodes::Positions* pos) {
    for (size_t i = 0; i < n_nodes; ++i) {
      Tensor* const t = tensors[i];
      int32_t* out = &src[i * kMaxSrc];
      for (int j = 0; j < kMaxSrc; ++j) {
        Tensor* s = t->src[j];
        out[j] = s == nullptr ? -1 : pos != nullptr ? resolve(s, pos->src[i * kMaxSrc + static_cast<size_t>(j)])
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
};

size_t GraphAllocator::index_lookups() const { return index_ != nullptr ? index_->lookups : 0; }

GraphIndex& GraphAllocator::index_of(GraphNodes graph) const {
  if (index_ == nullptr) index_ = std::make_unique<GraphIndex>();
  index_->build(graph, check_positions_);
  return *index_;
}

namespace {

// INPUT tensors keep their memory for the whole graph too: the user sets them once and may evaluate again.
bool is_pinned(const Tensor* t) { return (t->flags & (kFlagOutput | kFlagInput)) != 0; }

}  // namespace

GraphAllocator::GraphAllocator(BufferType* buft) : GraphAllocator(std::vector<BufferType*>{buft}) {}

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

GraphAllocator::GraphAllocator(std::vector<BufferType*> bufts)
    : bufts_(std::move(bufts)), replicas_(bufts_.size(), 1), buffers_(bufts_.size()),
      check_positions_(check_positions_default()) {
  for (auto& sets : buffers_) sets.resize(1);
}

void GraphAllocator::set_replicas(int buft_id, int n) {
  const size_t id = static_cast<size_t>(buft_id);
  if (id >= replicas_.size() || n < 1) return;
  replicas_[id] = n;
  buffers_[id].resize(static_cast<size_t>(n));
}

GraphAllocator::~GraphAllocator() = default;

bool GraphAllocator::is_external(const Tensor* t) const {
  return t->view_src == nullptr && (t->data != nullptr || t->buffer != nullptr) && !owns(tensor_buffer(*t));
}

bool GraphAllocator::owns(const Buffer* buffer) const {
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

size_t GraphAllocator::buffer_size(int buft_id) const {
  size_t total = 0;
  for (const auto& list : buffers_.at(static_cast<size_t>(buft_id))) {
    for (const auto& b : list) total += b->size();
  }
  return total;
}

int GraphAllocator::n_chunks(int buft_id) const {
  return static_cast<int>(buffers_.at(static_cast<size_t>(buft_id)).front().size());
}

Buffer* GraphAllocator::chunk_buffer(int buft_id, int chunk, int replica) const {
  const auto& sets = buffers_.at(static_cast<size_t>(buft_id));
  return sets.at(static_cast<size_t>(replica) % sets.size()).at(static_cast<size_t>(chunk)).get();
}

// Which node or leaf a source is. Reading another INPUT leaf changes no lifetime (INPUT leafs are placed first and
// never freed), so those compare equal whatever their position: a scheduler rotating through per-slot input copies
// keeps its plan.
GraphAllocator::SrcRef GraphAllocator::src_ref(const GraphIndex& index, const Tensor* s, int32_t id) {
  if (id < 0 || static_cast<size_t>(id) >= index.n_nodes + index.n_leafs) return {SrcRef::kOther, -1};
  if (static_cast<size_t>(id) < index.n_nodes) return {SrcRef::kNode, id};
  if ((s->flags & kFlagInput) != 0) return {SrcRef::kInputLeaf, -1};
  return {SrcRef::kLeaf, id - static_cast<int32_t>(index.n_nodes)};
}

// ---------------------------------------------------------------------------------------------------------------
// Planning

Status GraphAllocator::make_plan(GraphNodes graph, std::span<const int> node_ids, std::span<const int> leaf_ids,
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

  std::vector<Lifetime> blocks;  // one per block the walk allocated, in allocation order
  long clock = 0;                // ticks at every allocation and free of the walk
  std::vector<size_t> live(n_bufts, 0), peak(n_bufts, 0);  // bytes in blocks per buffer type: now, at most
  std::vector<DynamicAllocator> dyn;
  dyn.reserve(n_bufts);
  for (BufferType* b : bufts_) dyn.emplace_back(b->alignment(), b->max_size());

  // Every tensor the walk looks at has a dense id (GraphIndex) and its record in `info`.
  GraphIndex& ix = index_of(graph);
  if (!ix.exact_error.empty()) {
    return TS_ERROR(StatusCode::kFailed, "graph allocator: internal: an exact position is wrong: %s",
                    ix.exact_error.c_str());
  }
  const auto n_nodes = static_cast<int32_t>(ix.n_nodes);
  const auto n_leafs = static_cast<int32_t>(ix.n_leafs);
  using Info = PlanInfo;
  std::vector<Info>& info = ix.info;
  info.assign(ix.tensors.size(), Info{});
  // On a large graph the Tensors are far beyond the caches: this loop and the walk below prefetch the fields they
  // read a few tensors ahead (detail::tensors_far).
  constexpr size_t kAhead = 16;
  const bool far = detail::tensors_far(ix.tensors.size());
  for (size_t i = 0; far && i < std::min(kAhead, ix.tensors.size()); ++i) {
    detail::prefetch_bytes(ix.tensors[i], offsetof(Tensor, flags), offsetof(Tensor, extra));
  }
  for (size_t i = 0; i < ix.tensors.size(); ++i) {
    if (far && i + kAhead < ix.tensors.size()) {  // flags, view_src, buffer, data
      detail::prefetch_bytes(ix.tensors[i + kAhead], offsetof(Tensor, flags), offsetof(Tensor, extra));
    }
    const Tensor* t = ix.tensors[i];
    info[i].external = is_external(t);
    info[i].pinned = info[i].pinned || is_pinned(t);
    info[i].input = (t->flags & kFlagInput) != 0;
    // A view flagged INPUT or OUTPUT pins the memory of its root as well (an OUTPUT reshape of an intermediate must
    // still hold its values after the graph ran).
    if (ix.vsrc[i] >= 0 && is_pinned(t) && i < ix.n_nodes + ix.n_leafs) info[static_cast<size_t>(ix.vsrc[i])].pinned = true;
  }
  auto src_of = [&](int32_t node, int j) { return ix.src[static_cast<size_t>(node) * kMaxSrc + static_cast<size_t>(j)]; };
  auto n_src = [&](int32_t node) { return static_cast<int>(ix.nsrc[static_cast<size_t>(node)]); };
  auto vsrc_of = [&](int32_t id) { return ix.vsrc[static_cast<size_t>(id)]; };
  auto tensor = [&](int32_t id) { return ix.tensors[static_cast<size_t>(id)]; };
  auto rec = [&](int32_t id) -> Info& { return info[static_cast<size_t>(id)]; };

  Status error;
  auto alloc_tensor = [&](int32_t id, int b) {
    Info& in = rec(id);
    if (in.allocated || vsrc_of(id) >= 0 || in.external || !error.ok()) return;
    const Tensor* t = tensor(id);
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
    live[static_cast<size_t>(b)] += in.size;
    peak[static_cast<size_t>(b)] = std::max(peak[static_cast<size_t>(b)], live[static_cast<size_t>(b)]);
  };
  auto free_tensor = [&](int32_t id) {
    Info& in = rec(id);
    if (!in.allocated || in.pinned || vsrc_of(id) >= 0) return;
    dyn[static_cast<size_t>(in.buft)].free(in.addr, in.size);
    in.allocated = false;
    blocks[static_cast<size_t>(in.block)].end = clock++;
    live[static_cast<size_t>(in.buft)] -= in.size;
  };
  // Takes over the block of a dying source when the op can run in place (SPEC 8). Among several candidates the one
  // at the lowest address wins: the block that stays live grows from the bottom, so the hole the other one leaves
  // is above it and can be reused.
  auto try_inplace = [&](int32_t node_id, int b) {
    const Tensor* node = tensor(node_id);
    if (!op_can_inplace(node->op)) return false;
    int32_t best = -1;
    for (int j = 0; j < n_src(node_id); ++j) {
      const int32_t s = src_of(node_id, j);
      if (s < 0) continue;
      const Info& si = rec(s);
      if (si.pinned || !same_layout(*tensor(s), *node)) continue;
      if (si.n_children != 1 || si.n_views != 0) continue;
      int32_t owner = s;
      if (vsrc_of(s) >= 0) {
        const int32_t root = vsrc_of(s);
        const Info& ri = rec(root);
        if (ri.pinned || ri.n_views != 1 || ri.n_children != 0 || tensor(s)->view_offs != 0) continue;
        owner = root;
      }
      const Info& oi = rec(owner);
      if (!oi.allocated || oi.buft != b) continue;
      if (best >= 0) {
        const Info& bi = rec(best);
        if (std::make_pair(bi.addr.chunk, bi.addr.offset) <= std::make_pair(oi.addr.chunk, oi.addr.offset)) continue;
      }
      best = owner;
    }
    if (best < 0) return false;
    Info& oi = rec(best);
    Info& ni = rec(node_id);
    ni.allocated = true;
    ni.buft = b;
    ni.addr = oi.addr;
    ni.size = oi.size;    // the whole block moves, so freeing the node later frees all of it
    ni.block = oi.block;  // one lifetime: the block lives on in the node
    oi.allocated = false;
    return true;
  };
  auto planned = [&](int32_t id) {
    PlannedTensor p;
    const Info& in = rec(id);
    p.external = in.external;
    p.is_view = vsrc_of(id) >= 0;
    if (in.allocated) {
      p.buft_id = in.buft;
      p.chunk = in.addr.chunk;
      p.offset = in.addr.offset;
      p.size = in.size;
      p.block = in.block;
    }
    return p;
  };

  // 1. Leafs without memory first, then INPUT tensors (they must exist before computation starts); the same walk
  // over the nodes counts every tensor's uses and views (allocation does not depend on the counts).
  for (int32_t i = 0; i < n_leafs; ++i) alloc_tensor(n_nodes + i, leaf_buft(static_cast<size_t>(i)));
  for (int32_t i = 0; i < n_nodes; ++i) {
    if (vsrc_of(i) >= 0) rec(vsrc_of(i)).n_views++;
    if (rec(i).input) alloc_tensor(i, node_buft(static_cast<size_t>(i)));
    for (int j = 0; j < n_src(i); ++j) {
      const int32_t s = src_of(i, j);
      if (s < 0) continue;
      Info& si = rec(s);
      si.n_children++;
      if (si.input) alloc_tensor(s, node_buft(static_cast<size_t>(s < n_nodes ? s : i)));
    }
  }
  // 2. Sources outside the graph (replaced by hand after the graph was built) are like leafs: they get memory before
  // the walk, in the buffer type of their first user, so that what the caller writes into them before computing is
  // not overwritten by a node that ran earlier. So does the root of such a source when it is a view. (The index
  // numbers them after the nodes and leafs: without any, there is nothing to look for.)
  const int32_t n_known = n_nodes + n_leafs;
  if (ix.tensors.size() > static_cast<size_t>(n_known)) {
    for (int32_t i = 0; i < n_nodes; ++i) {
      for (int j = 0; j < n_src(i); ++j) {
        const int32_t s = src_of(i, j);
        if (s < n_known) continue;
        alloc_tensor(s, node_buft(static_cast<size_t>(i)));
        if (vsrc_of(s) >= n_known) alloc_tensor(vsrc_of(s), node_buft(static_cast<size_t>(i)));
      }
    }
  }
  if (!error.ok()) return error;
  // Leafs and outside sources keep the block they got here (a block only moves on to a user that computes in place
  // of it), so their placement is recorded now.
  plan->leafs.assign(graph.n_leafs(), PlannedTensor{});
  for (int32_t i = 0; i < n_leafs; ++i) plan->leafs[static_cast<size_t>(i)] = planned(n_nodes + i);
  std::vector<PlannedTensor> outside(ix.tensors.size() - static_cast<size_t>(n_known));
  for (size_t k = 0; k < outside.size(); ++k) outside[k] = planned(n_known + static_cast<int32_t>(k));

  const long walk_start = clock;  // blocks allocated before this exist from the start

  // 3. Walk the nodes: allocate, record, then free what is no longer used.
  // Every record is written whole by the walk below (a failed walk leaves the plan invalid), so the reused vector is
  // only sized here: a value-initialising assign costs more than the walk's own stores.
  plan->nodes.resize(graph.n_nodes());
  plan->others.clear();
  auto release = [&](int32_t t) {  // t has no users and no views left
    // Dead twice: a reader was listed before t (its count reached zero there, and again when the walk met t), so
    // the release of t would free memory that later nodes still use (for a view: its source, under other views).
    Info& ti = rec(t);
    if (ti.released) {
      if (error.ok()) {
        error = TS_ERROR(StatusCode::kInvalidArgument,
                         "graph allocator: %s is read before it is computed (a node that reads it comes earlier in "
                         "the node list); nodes must be in dependency order",
                         describe(*tensor(t)).c_str());
      }
      return;
    }
    ti.released = true;
    const int32_t v = vsrc_of(t);
    if (v >= 0) {
      Info& ri = rec(v);
      ri.n_views--;
      if (ri.n_views == 0 && ri.n_children == 0) free_tensor(v);
    } else {
      free_tensor(t);
    }
  };
  for (int32_t i = 0; far && i < std::min(n_nodes, static_cast<int32_t>(kAhead)); ++i) {
    detail::prefetch_bytes(tensor(i), 0, offsetof(Tensor, op) + sizeof(Op));
  }
  for (int32_t i = 0; i < n_nodes; ++i) {
    if (far && i + static_cast<int32_t>(kAhead) < n_nodes) {  // type, shape, op (alloc_size, try_inplace)
      detail::prefetch_bytes(tensor(i + static_cast<int32_t>(kAhead)), 0, offsetof(Tensor, op) + sizeof(Op));
    }
    const int b = node_buft(static_cast<size_t>(i));
    if (!rec(i).allocated && vsrc_of(i) < 0 && !rec(i).external && !try_inplace(i, b)) alloc_tensor(i, b);
    if (!error.ok()) return error;

    NodePlan& np = plan->nodes[static_cast<size_t>(i)];
    np.dst = planned(i);
    // The slots from n_src on are empty; the others are recorded, and each source's count of readers drops.
    const int used = n_src(i);
    for (int j = used; j < kMaxSrc; ++j) np.ref[j] = SrcRef{};
    for (int j = 0; j < used; ++j) {
      const int32_t s = src_of(i, j);
      if (s < 0) {
        np.ref[j] = SrcRef{};
        continue;
      }
      if (s < n_nodes) {
        np.ref[j] = {SrcRef::kNode, s};
      } else if (s < n_nodes + n_leafs) {
        np.ref[j] = rec(s).input ? SrcRef{SrcRef::kInputLeaf, -1} : SrcRef{SrcRef::kLeaf, s - n_nodes};
      } else {
        np.ref[j] = {SrcRef::kOther, -1};
        plan->others.push_back({static_cast<size_t>(i), j, outside[static_cast<size_t>(s - n_known)]});
      }
      Info& si = rec(s);
      // the count from the register: reloading it together with n_views as one 8-byte word would wait on this store
      const int left = --si.n_children;
      if (left == 0 && si.n_views == 0) release(s);
    }
    // A node nobody reads is dead once computed.
    const Info& ni = rec(i);
    if (ni.n_children == 0 && ni.n_views == 0) release(i);
    if (!error.ok()) return error;
  }
  plan->chunk_sizes.assign(n_bufts, {});
  for (size_t b = 0; b < n_bufts; ++b) {
    for (int c = 0; c < dyn[b].n_chunks(); ++c) plan->chunk_sizes[b].push_back(dyn[b].chunk_size(c));
  }

  // 4. The walk placed blocks online, in allocation order. Knowing every lifetime now, place them again largest
  // first (offline); per buffer type keep whichever placement needs fewer bytes (or the one set_placement forces).
  // The bytes live at the busiest moment (`peak`, kept by the walk) bound every placement from below: where the
  // online placement needs no more (one chunk of exactly that size), the offline one cannot win and is not computed.
  for (size_t b = 0; b < n_bufts && placement_ != Placement::kOnline; ++b) {
    if (placement_ == Placement::kBest && plan->chunk_sizes[b].size() <= 1 &&
        (plan->chunk_sizes[b].empty() || plan->chunk_sizes[b][0] <= peak[b])) {
      continue;  // the online placement is as small as any can be
    }
    std::vector<BlockAddress> addr;
    std::vector<size_t> sizes;
    place_offline(blocks, static_cast<int>(b), dyn[b].chunk_limit(), walk_start, &addr, &sizes, ix.offline);
    size_t online = 0, offline = 0;
    for (size_t c : plan->chunk_sizes[b]) online += c;
    for (size_t c : sizes) offline += c;
    if (placement_ == Placement::kBest && offline >= online) continue;
    auto apply = [&](PlannedTensor& p) {
      if (p.buft_id == static_cast<int>(b) && p.block >= 0) {
        p.chunk = addr[static_cast<size_t>(p.block)].chunk;
        p.offset = addr[static_cast<size_t>(p.block)].offset;
      }
    };
    for (NodePlan& np : plan->nodes) apply(np.dst);
    for (OtherSrc& o : plan->others) apply(o.p);
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
// time; a bucket holds what the query needs of each block (lifetime and bytes), and a block spanning several buckets
// counts in the first of them that the query visits.
void GraphAllocator::place_offline(const std::vector<Lifetime>& blocks, int b, size_t limit, long walk_start,
                                   std::vector<BlockAddress>* addr, std::vector<size_t>* chunk_sizes,
                                   OfflineScratch& scratch) {
  addr->assign(blocks.size(), BlockAddress{});
  chunk_sizes->clear();
  // The order: lifelong blocks first, in allocation order, then the others by size, largest first, ties by start.
  // Sorted as keys (no look-ups into `blocks` while sorting); the last key, the block's index, makes the order total.
  std::vector<OfflineScratch::Key>& keys = scratch.keys;
  keys.clear();
  long t_end = 1;
  auto lifelong = [&](const Lifetime& l) { return l.end == kForever && l.start < walk_start; };
  for (size_t i = 0; i < blocks.size(); ++i) {
    const Lifetime& l = blocks[i];
    if (l.buft != b) continue;
    const bool ll = lifelong(l);
    keys.push_back({ll ? 0 : 1, ll ? 0 : SIZE_MAX - l.size, l.start, static_cast<int>(i)});
    t_end = std::max(t_end, (l.end != kForever ? l.end : l.start) + 1);
  }
  if (keys.empty()) return;
  std::sort(keys.begin(), keys.end(), [](const OfflineScratch::Key& x, const OfflineScratch::Key& y) {
    return std::tie(x.lifelong_last, x.inv_size, x.start, x.id) < std::tie(y.lifelong_last, y.inv_size, y.start, y.id);
  });
  auto end_of = [&](const Lifetime& l) { return l.end == kForever ? t_end : l.end; };
  constexpr long kBucket = 64;
  const size_t n_buckets = static_cast<size_t>(t_end / kBucket + 1);
  using Placed = OfflineScratch::Placed;
  // Chunks reuse the scratch's bucket lists (their capacity) from call to call.
  std::vector<OfflineScratch::Chunk>& chunks = scratch.chunks;
  size_t n_chunks = 0;
  auto new_chunk = [&]() {
    if (n_chunks == chunks.size()) chunks.emplace_back();
    OfflineScratch::Chunk& ch = chunks[n_chunks++];
    ch.base = ch.top = 0;
    if (ch.buckets.size() < n_buckets) ch.buckets.resize(n_buckets);
    for (size_t k = 0; k < n_buckets; ++k) ch.buckets[k].clear();
  };
  new_chunk();
  std::vector<std::pair<size_t, size_t>>& busy = scratch.busy;  // [offset, end) of conflicting blocks
  for (const OfflineScratch::Key& key : keys) {
    const int id = key.id;
    const Lifetime& lt = blocks[static_cast<size_t>(id)];
    BlockAddress& out = (*addr)[static_cast<size_t>(id)];
    if (lifelong(lt)) {
      // lifelong: stack at the bottom of the first chunk with room
      size_t c = 0;
      while (c < n_chunks && chunks[c].base + lt.size > limit) ++c;
      if (c == n_chunks) new_chunk();
      out = {static_cast<int>(c), chunks[c].base};
      chunks[c].base += lt.size;
      chunks[c].top = std::max(chunks[c].top, chunks[c].base);
      continue;
    }
    const long lt_end = end_of(lt);
    const size_t b0 = static_cast<size_t>(lt.start / kBucket), b1 = static_cast<size_t>(lt_end / kBucket);
    bool placed = false;
    for (size_t c = 0; c < n_chunks && !placed; ++c) {
      OfflineScratch::Chunk& ch = chunks[c];
      busy.clear();
      for (size_t k = b0; k <= b1; ++k) {
        for (const Placed& o : ch.buckets[k]) {
          if (std::max(o.first_bucket, b0) != k) continue;  // counted in an earlier bucket of this query
          if (o.start < lt_end && lt.start < o.end) busy.emplace_back(o.lo, o.hi);
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
      for (size_t k = b0; k <= b1; ++k) ch.buckets[k].push_back({lt.start, lt_end, best, best + lt.size, b0});
      placed = true;
    }
    if (!placed) {
      new_chunk();
      OfflineScratch::Chunk& ch = chunks[n_chunks - 1];
      out = {static_cast<int>(n_chunks) - 1, 0};
      ch.top = lt.size;
      for (size_t k = b0; k <= b1; ++k) ch.buckets[k].push_back({lt.start, lt_end, 0, lt.size, b0});
    }
  }
  for (size_t c = 0; c < n_chunks; ++c) chunk_sizes->push_back(chunks[c].top);
}

Status GraphAllocator::grow_buffers(const Plan& plan) {
  for (size_t b = 0; b < bufts_.size(); ++b) {
    for (auto& list : buffers_[b]) {
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
  }
  return Status::Ok();
}

Status GraphAllocator::reserve(GraphNodes graph) { return reserve_n(graph, {}, {}); }

Status GraphAllocator::reserve_n(GraphNodes graph, std::span<const int> node_buft_ids,
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

Result<std::vector<size_t>> GraphAllocator::reserve_size(GraphNodes graph, std::span<const int> node_buft_ids,
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
// Compatibility and placement

std::string GraphAllocator::needs_replan(GraphNodes graph) const {
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

Status GraphAllocator::place_tensor(Tensor& t, const PlannedTensor& p, int replica) {
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

Status GraphAllocator::place(GraphNodes graph, int replica) {
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

Status GraphAllocator::alloc_graph(GraphNodes graph, int replica) {
  if (std::string why = needs_replan(graph); !why.empty()) {
    if (bufts_.size() != 1) {
      return TS_ERROR(StatusCode::kUnsupported, "graph allocator: reserve needed: %s", why.c_str());
    }
    TS_RETURN_IF_ERROR(reserve(graph));
    ++replans_;
  }
  return place(graph, replica < 0 ? 0 : replica);
}

}  // namespace tessera
