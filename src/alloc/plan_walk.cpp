// The graph planner's plan: GraphPlanner::make_plan and its steps. A plan says where every tensor the planner owns
// lives (buffer type, chunk, offset) and how large each chunk must be; the rules it follows are docs/planner.md's
// ("Rules", "Before the walk", "Packing cost"). make_plan runs the steps of PlanWalk in order, as the scheduler runs
// its passes: each step decides one thing and hands the next what it needs.
#include <algorithm>
#include <cstddef>
#include <span>
#include <utility>
#include <vector>

#include "graph_index.h"
#include "prefetch.h"

namespace tessera {

namespace {

// INPUT tensors keep their memory for the whole graph too: the user sets them once and may evaluate again.
bool is_pinned(const Tensor* t) { return (t->flags & (kFlagOutput | kFlagInput)) != 0; }

// On a large graph the Tensors are far beyond the caches: the record loop and the node walk prefetch the fields they
// read this many tensors ahead (detail::tensors_far).
constexpr size_t kAhead = 16;

// What the caller can get wrong, refused before anything is planned: no buffer type or a null one, a list of buffer
// type ids whose length is not the graph's (an empty list means id 0 for all), an id out of range.
Status check_arguments(const std::vector<BufferType*>& bufts, GraphNodes graph, std::span<const int> node_ids,
                       std::span<const int> leaf_ids) {
  const size_t n_bufts = bufts.size();
  if (n_bufts == 0) return Status(StatusCode::kInvalidArgument, "planner: no buffer types");
  for (BufferType* b : bufts) {
    if (b == nullptr) return Status(StatusCode::kInvalidArgument, "planner: null buffer type");
  }
  if (!node_ids.empty() && node_ids.size() != graph.n_nodes()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "planner: %zu node buffer ids for %zu nodes", node_ids.size(),
                    graph.n_nodes());
  }
  if (!leaf_ids.empty() && leaf_ids.size() != graph.n_leafs()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "planner: %zu leaf buffer ids for %zu leafs", leaf_ids.size(),
                    graph.n_leafs());
  }
  for (std::span<const int> ids : {node_ids, leaf_ids}) {
    for (int id : ids) {
      if (id < 0 || static_cast<size_t>(id) >= n_bufts) {
        return TS_ERROR(StatusCode::kInvalidArgument, "planner: buffer type id %d out of range [0, %zu)", id, n_bufts);
      }
    }
  }
  return Status::Ok();
}

}  // namespace

// make_plan's working state, and its steps in the order make_plan runs them. Every tensor the walk looks at has a
// dense id (GraphIndex) and its record in `info`. Blocks are placed online, as the walk allocates and frees, by one
// DynamicAllocator per buffer type; each block's lifetime is recorded on a clock that ticks at every allocation and
// free, so that the last step can place the same blocks again knowing all of them.
struct GraphPlanner::PlanWalk {
  PlanWalk(const GraphPlanner& ga, GraphIndex& ix, std::span<const int> node_ids, std::span<const int> leaf_ids,
           Plan* plan)
      : ga(ga),
        ix(ix),
        info(ix.info),
        node_ids(node_ids),
        leaf_ids(leaf_ids),
        plan(plan),
        n_bufts(ga.bufts_.size()),
        n_nodes(static_cast<int32_t>(ix.n_nodes)),
        n_leafs(static_cast<int32_t>(ix.n_leafs)),
        n_known(n_nodes + n_leafs),
        far(detail::tensors_far(ix.tensors.size())),
        live(n_bufts, 0),
        peak(n_bufts, 0) {
    dyn.reserve(n_bufts);
    for (BufferType* b : ga.bufts_) dyn.emplace_back(b->alignment(), b->max_size());
    info.assign(ix.tensors.size(), PlanInfo{});
  }

  // Step 0. What each tensor brings to the plan, read from its Tensor once: whether it has memory of its own
  // (external: never touched), whether it is pinned (INPUT or OUTPUT, or with free_inputs OUTPUT only: never freed nor
  // computed over in place), and
  // whether it is an INPUT (placed before the walk). Pinning a view pins its root too.
  void record_tensors() {
    for (size_t i = 0; far && i < std::min(kAhead, ix.tensors.size()); ++i) {
      detail::prefetch_bytes(ix.tensors[i], offsetof(Tensor, flags), offsetof(Tensor, extra));
    }
    for (size_t i = 0; i < ix.tensors.size(); ++i) {
      if (far && i + kAhead < ix.tensors.size()) {  // flags, view_src, buffer, data
        detail::prefetch_bytes(ix.tensors[i + kAhead], offsetof(Tensor, flags), offsetof(Tensor, extra));
      }
      const Tensor* t = ix.tensors[i];
      info[i].external = ga.is_external(t);
      // (with free_inputs, ggml-alloc's rule: only OUTPUT pins)
      const bool pins = ga.free_inputs_ ? (t->flags & kFlagOutput) != 0 : is_pinned(t);
      info[i].pinned = info[i].pinned || pins;
      info[i].input = (t->flags & kFlagInput) != 0;
      // A view flagged INPUT or OUTPUT pins the memory of its root as well (an OUTPUT reshape of an intermediate must
      // still hold its values after the graph ran).
      if (ix.vsrc[i] >= 0 && pins && i < ix.n_nodes + ix.n_leafs) {
        info[static_cast<size_t>(ix.vsrc[i])].pinned = true;
      }
    }
  }

  // Step 1. Leafs without memory first, then INPUT tensors: they must exist before computation starts, so they get
  // their blocks before any node's. The same pass over the nodes counts every tensor's readers and views, which
  // the walk's liveness needs (allocation does not depend on the counts).
  Status place_leafs_and_inputs() {
    for (int32_t i = 0; i < n_leafs; ++i) alloc_tensor(n_nodes + i, leaf_buft(static_cast<size_t>(i)));
    for (int32_t i = 0; i < n_nodes; ++i) {
      if (vsrc_of(i) >= 0) rec(vsrc_of(i)).n_views++;
      if (rec(i).input) alloc_tensor(i, node_buft(static_cast<size_t>(i)));
      for (int j = 0; j < n_src(i); ++j) {
        const int32_t s = src_of(i, j);
        if (s < 0) continue;
        PlanInfo& si = rec(s);
        si.n_children++;
        if (si.input) alloc_tensor(s, node_buft(static_cast<size_t>(s < n_nodes ? s : i)));
      }
    }
    return error;
  }

  // Step 2. Sources outside the graph (replaced by hand after the graph was built) are like leafs: they get memory
  // before the walk, in the buffer type of their first user, so that what the caller writes into them before
  // computing is not overwritten by a node that ran earlier. So does the root of such a source when it is a view.
  // (The index numbers them after the nodes and leafs: without any, there is nothing to look for.)
  Status place_outside_sources() {
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
    return error;
  }

  // Leafs and outside sources keep the block they got in steps 1 and 2 (a block only moves on to a user that computes
  // in place of it), so their offsets are recorded now; blocks allocated so far exist from the start (walk_start).
  void record_placed_before_walk() {
    plan->leafs.assign(static_cast<size_t>(n_leafs), PlannedTensor{});
    for (int32_t i = 0; i < n_leafs; ++i) plan->leafs[static_cast<size_t>(i)] = planned(n_nodes + i);
    outside.resize(ix.tensors.size() - static_cast<size_t>(n_known));
    for (size_t k = 0; k < outside.size(); ++k) outside[k] = planned(n_known + static_cast<int32_t>(k));
    walk_start = clock;
  }

  // Step 3. The walk over the nodes in order: each node gets a block (in place of a dying source when it can, else
  // a new one), its plan and its sources' identities are recorded, then every tensor whose last reader this was is
  // freed, so later nodes reuse its memory. A failure stops the walk and leaves the plan invalid.
  Status walk_nodes() {
    // Every record is written whole below, so the reused vector is only sized here: a value-initialising assign
    // costs more than the walk's own stores.
    plan->nodes.resize(static_cast<size_t>(n_nodes));
    plan->others.clear();
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
        PlanInfo& si = rec(s);
        // the count from the register: reloading it together with n_views as one 8-byte word would wait on this store
        const int left = --si.n_children;
        if (left == 0 && si.n_views == 0) release(s);
      }
      // A node nobody reads is dead once computed.
      const PlanInfo& ni = rec(i);
      if (ni.n_children == 0 && ni.n_views == 0) release(i);
      if (!error.ok()) return error;
    }
    return Status::Ok();
  }

  // Step 4. The walk placed blocks online, in allocation order. Knowing every lifetime now, place them again largest
  // first (offline, pack_offline); per buffer type keep whichever packing needs fewer bytes, or the one
  // set_packing forces (kOffline: always the offline one; kOnline: never computed).
  void choose_packing() {
    plan->chunk_sizes.assign(n_bufts, {});
    for (size_t b = 0; b < n_bufts; ++b) {
      for (int c = 0; c < dyn[b].n_chunks(); ++c) plan->chunk_sizes[b].push_back(dyn[b].chunk_size(c));
    }
    for (size_t b = 0; b < n_bufts && ga.packing_ != Packing::kOnline; ++b) {
      if (ga.packing_ == Packing::kBest && online_is_smallest(b)) continue;
      std::vector<BlockAddress> addr;
      std::vector<size_t> sizes;
      pack_offline(blocks, static_cast<int>(b), dyn[b].chunk_limit(), walk_start, &addr, &sizes, ix.offline);
      size_t online = 0, offline = 0;
      for (size_t c : plan->chunk_sizes[b]) online += c;
      for (size_t c : sizes) offline += c;
      if (ga.packing_ == Packing::kBest && offline >= online) continue;
      apply_offline(b, addr, std::move(sizes));
    }
  }

 private:
  // The bytes live at the busiest moment (`peak`, kept as the walk allocates and frees) bound every packing from
  // below: where the online packing of buffer type b needs no more (one chunk of exactly that size), the offline
  // one cannot win and need not be computed.
  bool online_is_smallest(size_t b) const {
    return plan->chunk_sizes[b].size() <= 1 && (plan->chunk_sizes[b].empty() || plan->chunk_sizes[b][0] <= peak[b]);
  }

  // Moves every planned tensor of buffer type b to its block's offline address, and takes the offline chunk sizes.
  void apply_offline(size_t b, const std::vector<BlockAddress>& addr, std::vector<size_t> sizes) {
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

  // A new block for tensor id in buffer type b, unless it has memory already (a block of the plan, a view's, or its
  // own) or an earlier allocation failed; starts the block's lifetime.
  void alloc_tensor(int32_t id, int b) {
    PlanInfo& in = rec(id);
    if (in.allocated || vsrc_of(id) >= 0 || in.external || !error.ok()) return;
    const Tensor* t = tensor(id);
    const size_t need = ga.bufts_[static_cast<size_t>(b)]->alloc_size(*t);
    Result<BlockAddress> addr = dyn[static_cast<size_t>(b)].alloc(need);
    if (!addr.ok()) {
      error = TS_ERROR(StatusCode::kAllocFailed, "planner: tensor %s in buffer type %s: %s", describe(*t).c_str(),
                       ga.bufts_[static_cast<size_t>(b)]->name(), addr.status().message().c_str());
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
  }

  // Returns the block of tensor id (not a pinned one, not a view's) and ends its lifetime.
  void free_tensor(int32_t id) {
    PlanInfo& in = rec(id);
    if (!in.allocated || in.pinned || vsrc_of(id) >= 0) return;
    dyn[static_cast<size_t>(in.buft)].free(in.addr, in.size);
    in.allocated = false;
    blocks[static_cast<size_t>(in.block)].end = clock++;
    live[static_cast<size_t>(in.buft)] -= in.size;
  }

  // Takes over the block of a dying source when the op can run in place (docs/planner.md, "Rules": In place). Among
  // several candidates the one at the lowest address wins: the block that stays live grows from the bottom, so the
  // hole the other one leaves is above it and can be reused. With ggml-alloc's rule (set_ggml_inplace) the first
  // source that qualifies wins, and a view never does (ggml_gallocr_allocate_node asks ggml_gallocr_is_own of the
  // source, which a view, never allocated itself, is not).
  bool try_inplace(int32_t node_id, int b) {
    const Tensor* node = tensor(node_id);
    if (!op_can_inplace(node->op)) return false;
    int32_t best = -1;
    // (ADD_ID only over its first source: its second is gathered by index, so rows written could still be read)
    const int n_candidates = node->op == Op::kAddId ? 1 : n_src(node_id);
    for (int j = 0; j < n_candidates; ++j) {
      const int32_t s = src_of(node_id, j);
      if (s < 0) continue;
      const PlanInfo& si = rec(s);
      if (si.pinned || !same_layout(*tensor(s), *node)) continue;
      if (si.n_children != 1 || si.n_views != 0) continue;
      if (ga.ggml_inplace_ && vsrc_of(s) >= 0) continue;
      int32_t owner = s;
      if (vsrc_of(s) >= 0) {
        const int32_t root = vsrc_of(s);
        const PlanInfo& ri = rec(root);
        if (ri.pinned || ri.n_views != 1 || ri.n_children != 0 || tensor(s)->view_offs != 0) continue;
        owner = root;
      }
      const PlanInfo& oi = rec(owner);
      if (!oi.allocated || oi.buft != b) continue;
      // The buffer type may pad the node more than its source (alloc_size per op): the block must hold all of it.
      if (ga.bufts_[static_cast<size_t>(b)]->alloc_size(*node) > oi.size) continue;
      if (best >= 0) {
        const PlanInfo& bi = rec(best);
        if (std::make_pair(bi.addr.chunk, bi.addr.offset) <= std::make_pair(oi.addr.chunk, oi.addr.offset)) continue;
      }
      best = owner;
      if (ga.ggml_inplace_) break;
    }
    if (best < 0) return false;
    PlanInfo& oi = rec(best);
    PlanInfo& ni = rec(node_id);
    ni.allocated = true;
    ni.buft = b;
    ni.addr = oi.addr;
    ni.size = oi.size;    // the whole block moves, so freeing the node later frees all of it
    ni.block = oi.block;  // one lifetime: the block lives on in the node
    oi.allocated = false;
    return true;
  }

  // t has no readers and no views left: frees its block, or for a view, drops one view of its root and frees the
  // root when that was the last use.
  void release(int32_t t) {
    // Dead twice: a reader was listed before t (its count reached zero there, and again when the walk met t), so
    // the release of t would free memory that later nodes still use (for a view: its source, under other views).
    PlanInfo& ti = rec(t);
    if (ti.released) {
      if (error.ok()) {
        error = TS_ERROR(StatusCode::kInvalidArgument,
                         "planner: %s is read before it is computed (a node that reads it comes earlier in "
                         "the node list); nodes must be in dependency order",
                         describe(*tensor(t)).c_str());
      }
      return;
    }
    ti.released = true;
    const int32_t v = vsrc_of(t);
    if (v >= 0) {
      PlanInfo& ri = rec(v);
      ri.n_views--;
      if (ri.n_views == 0 && ri.n_children == 0) free_tensor(v);
    } else {
      free_tensor(t);
    }
  }

  // Where tensor id is now, as the plan records it.
  PlannedTensor planned(int32_t id) const {
    PlannedTensor p;
    const PlanInfo& in = rec(id);
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
  }

  int node_buft(size_t i) const { return node_ids.empty() ? 0 : node_ids[i]; }
  int leaf_buft(size_t i) const { return leaf_ids.empty() ? 0 : leaf_ids[i]; }
  int32_t src_of(int32_t node, int j) const {
    return ix.src[static_cast<size_t>(node) * kMaxSrc + static_cast<size_t>(j)];
  }
  int n_src(int32_t node) const { return static_cast<int>(ix.nsrc[static_cast<size_t>(node)]); }
  int32_t vsrc_of(int32_t id) const { return ix.vsrc[static_cast<size_t>(id)]; }
  const Tensor* tensor(int32_t id) const { return ix.tensors[static_cast<size_t>(id)]; }
  PlanInfo& rec(int32_t id) { return info[static_cast<size_t>(id)]; }
  const PlanInfo& rec(int32_t id) const { return info[static_cast<size_t>(id)]; }

  const GraphPlanner& ga;
  GraphIndex& ix;
  std::vector<PlanInfo>& info;              // per id (ix.info)
  std::span<const int> node_ids, leaf_ids;  // buffer type id per node / leaf; empty: 0 for all
  Plan* plan;
  const size_t n_bufts;
  const int32_t n_nodes, n_leafs, n_known;  // ids from n_known on: tensors outside the graph
  const bool far;                           // prefetch (detail::tensors_far)
  std::vector<DynamicAllocator> dyn;        // the online packing, per buffer type
  std::vector<Lifetime> blocks;             // one per block allocated, in allocation order
  long clock = 0;                           // ticks at every allocation and free
  long walk_start = 0;                      // blocks allocated before this exist from the start
  std::vector<size_t> live, peak;           // bytes in blocks per buffer type: now, at most
  std::vector<PlannedTensor> outside;       // the placement of each tensor outside the graph (id n_known + k)
  Status error;                             // the first failure; once set, alloc_tensor does nothing
};

// Plans graph into *plan, which is valid only when this returns Ok (a failure leaves it partly written). node_ids and
// leaf_ids give each node's and leaf's buffer type id (empty: 0 for all).
Status GraphPlanner::make_plan(GraphNodes graph, std::span<const int> node_ids, std::span<const int> leaf_ids,
                               Plan* plan) const {
  TS_RETURN_IF_ERROR(check_arguments(bufts_, graph, node_ids, leaf_ids));
  GraphIndex& ix = index_of(graph);
  if (!ix.exact_error.empty()) {
    return TS_ERROR(StatusCode::kFailed, "planner: internal: an exact position is wrong: %s", ix.exact_error.c_str());
  }
  PlanWalk walk(*this, ix, node_ids, leaf_ids, plan);
  walk.record_tensors();
  TS_RETURN_IF_ERROR(walk.place_leafs_and_inputs());
  TS_RETURN_IF_ERROR(walk.place_outside_sources());
  walk.record_placed_before_walk();
  TS_RETURN_IF_ERROR(walk.walk_nodes());
  walk.choose_packing();
  plan->valid = true;
  return Status::Ok();
}

}  // namespace tessera
