// The graph memory planner (docs/planner.md): plans the intermediate tensors of a graph into one set of buffers per
// buffer type, reusing the memory of tensors whose users are done, then places tensors at their planned addresses.
// INPUT and OUTPUT tensors are placed for the whole graph (never freed, never computed over in place), so an input
// set once survives any number of evaluations.
#pragma once

#include <memory>
#include <span>
#include <vector>

#include "tessera/backend.h"
#include "tessera/graph.h"

namespace tessera {

class DynamicAllocator;
struct BlockAddress;
struct GraphIndex;
struct OfflineScratch;

// The nodes and leafs the planner works on: a Graph's, or lists the caller built (the scheduler's planner graph, which
// needs no Graph and its duplicate check). Converts implicitly from a Graph, which must outlive it.
//
// Optionally it carries where each node's sources and each tensor's view source are in these lists (positions
// encoded as Graph's: p >= 0 node p, p <= -2 leaf -2 - p, Graph::kNoPos none, Graph::kPosUnknown not known), so the
// planner numbers the tensors without a pointer lookup. A Graph supplies its own; a position is checked against the
// pointer before it is used, so a stale one costs a lookup, never a wrong plan. Positions marked `exact` are taken as
// they are, without reading the tensors' source pointers (only kPosUnknown is looked up): for a caller that derived
// them from the tensors moments before (the scheduler, for its own graph). The planner checks exact positions too
// when built without NDEBUG, or with TESSERA_CHECK_POSITIONS=1 in the environment: a wrong one is then an error.
class GraphNodes {
 public:
  struct Positions {
    std::span<const int32_t> src;            // kMaxSrc per node
    std::span<const int32_t> node_view_src;  // per node
    std::span<const int32_t> leaf_view_src;  // per leaf
    bool exact = false;
    bool valid(size_t n_nodes, size_t n_leafs) const {
      return src.size() == n_nodes * kMaxSrc && node_view_src.size() == n_nodes && leaf_view_src.size() == n_leafs;
    }
  };
  GraphNodes(const Graph& g)  // NOLINT(google-explicit-constructor)
      : nodes_(g.nodes()),
        leafs_(g.leafs()),
        pos_{g.all_src_positions(), g.node_view_src_positions(), g.leaf_view_src_positions(), false} {}
  GraphNodes(std::span<Tensor* const> nodes, std::span<Tensor* const> leafs) : nodes_(nodes), leafs_(leafs) {}
  GraphNodes(std::span<Tensor* const> nodes, std::span<Tensor* const> leafs, Positions pos)
      : nodes_(nodes), leafs_(leafs), pos_(pos) {}
  std::span<Tensor* const> nodes() const { return nodes_; }
  std::span<Tensor* const> leafs() const { return leafs_; }
  size_t n_nodes() const { return nodes_.size(); }
  size_t n_leafs() const { return leafs_.size(); }
  Tensor* node(size_t i) const { return nodes_[i]; }
  Tensor* leaf(size_t i) const { return leafs_[i]; }
  // The positions, when they cover these lists (empty spans otherwise).
  const Positions* positions() const { return pos_.valid(n_nodes(), n_leafs()) ? &pos_ : nullptr; }

 private:
  std::span<Tensor* const> nodes_;
  std::span<Tensor* const> leafs_;
  Positions pos_;
};

// Where the plan put one tensor.
struct PlannedTensor {
  int buft_id = -1;
  int chunk = -1;  // -1: not placed by the planner (external, view, or never allocated)
  size_t offset = 0;
  size_t size = 0;        // bytes of the block it owns (>= what it needs)
  bool external = false;  // had data or a buffer of its own at plan time
  bool is_view = false;
  int block = -1;  // the planner's lifetime record of the block (internal)
};

class GraphPlanner {
 public:
  // One buffer type; every node and leaf uses it.
  explicit GraphPlanner(BufferType* buft);
  // Several buffer types; reserve_n says which one each node and leaf uses.
  explicit GraphPlanner(std::vector<BufferType*> bufts);
  ~GraphPlanner();
  GraphPlanner(const GraphPlanner&) = delete;
  GraphPlanner& operator=(const GraphPlanner&) = delete;

  // Plans with a measure graph (usually the worst case) and grows the buffers to the planned chunk sizes (never
  // shrinks them). Errors: a buffer type id out of range, a tensor above a type's max size, an allocation failure
  // (the planner then holds no plan; its buffers stay valid and are freed with it).
  Status reserve(GraphNodes graph);
  Status reserve_n(GraphNodes graph, std::span<const int> node_buft_ids, std::span<const int> leaf_buft_ids);
  // Dry run: the bytes each buffer type would need for this graph. Nothing is allocated or changed.
  Result<std::vector<size_t>> reserve_size(GraphNodes graph, std::span<const int> node_buft_ids = {},
                                           std::span<const int> leaf_buft_ids = {}) const;

  // Places every tensor of the graph at its planned address. When the graph is incompatible with the last plan
  // (see needs_replan), a single-type planner re-plans (reserve) first; a several-type planner returns kUnsupported
  // ("reserve needed") because only the caller knows the buffer type of each tensor. Tensors of a replicated buffer
  // type id (set_replicas) are placed at their planned offsets in the buffers of `replica` (modulo the count).
  Status alloc_graph(GraphNodes graph, int replica = 0);
  // Pointer lookups the planner needed the last time it numbered a graph's tensors (reserve, reserve_size,
  // alloc_graph's check): 0 when the graph's positions (GraphNodes::positions) were all right.
  size_t index_lookups() const;
  // Whether exact positions are checked against the pointers (default: see GraphNodes); for tests.
  void set_check_positions(bool on) { check_positions_ = on; }
  // Gives buffer type id `buft_id` n >= 1 identical sets of buffers (call before reserve; default 1). Every set is
  // grown to the planned chunk sizes; alloc_graph picks one. The scheduler uses this for the per-slot regions of its
  // in-flight input copies: one plan, n disjoint copies of the memory. reserve_size and buffer_size count all sets.
  void set_replicas(int buft_id, int n);
  int replicas(int buft_id) const { return replicas_.at(static_cast<size_t>(buft_id)); }
  // How the plan packs blocks into the buffers (docs/planner.md, "Rules": Packing). The planning walk packs them
  // online, in allocation order; knowing every lifetime afterwards, the planner also packs them offline (largest
  // first). kBest (the default) keeps, per buffer type, whichever needs fewer bytes; kOnline and kOffline force one, so
  // that tests and tools can see each on its own (kBest would hide a defect of the one that loses). Takes effect at
  // the next plan.
  enum class Packing { kBest, kOnline, kOffline };
  void set_packing(Packing p) { packing_ = p; }
  // Whether INPUT tensors are freed after their last reader, as ggml-alloc frees them (placed first all the same; only
  // OUTPUT tensors are then never freed). Off (the default), inputs live for the whole evaluation. For predicting
  // ggml-alloc's buffer sizes; takes effect at the next plan.
  void set_free_inputs(bool on) { free_inputs_ = on; }
  bool free_inputs() const { return free_inputs_; }
  // ggml-alloc's in-place rule: a node computed in place takes the block of its first source that qualifies, never a
  // view's (docs/planner.md, "Rules"). Off: the qualifying block at the lowest address, a view's root included.
  void set_ggml_inplace(bool on) { ggml_inplace_ = on; }
  bool ggml_inplace() const { return ggml_inplace_; }
  Packing packing() const { return packing_; }
  // Why the graph cannot be placed with the last plan, or an empty string when it can: node or leaf counts differ,
  // a tensor needs more bytes than planned (so a chunk would have to grow), the graph's structure differs (a source
  // is a different node or leaf than at plan time), or a tensor's external allocation changed.
  std::string needs_replan(GraphNodes graph) const;
  // Number of re-plans alloc_graph made by itself (for tests and the debug switch of the scheduler).
  int replan_count() const { return replans_; }

  size_t n_bufts() const { return bufts_.size(); }
  // Bytes of the buffers of a buffer type (all chunks, all replicas).
  size_t buffer_size(int buft_id) const;
  int n_chunks(int buft_id) const;
  Buffer* chunk_buffer(int buft_id, int chunk, int replica = 0) const;
  // True when the buffer is one this planner allocated.
  bool owns(const Buffer* buffer) const;
  // A tensor the planner leaves alone: it has memory that is not one of the planner's buffers.
  bool is_external(const Tensor* t) const;
  // The plan of node i / leaf i (valid after reserve).
  const PlannedTensor& planned_node(size_t i) const { return plan_.nodes[i].dst; }
  const PlannedTensor& planned_leaf(size_t i) const { return plan_.leafs[i]; }
  bool has_plan() const { return plan_.valid; }

 private:
  // A source of a node at plan time: which node or leaf of the graph it was (kOther: not in the graph).
  struct SrcRef {
    enum Kind : int8_t { kNone, kNode, kLeaf, kInputLeaf, kOther } kind = kNone;
    int32_t index = -1;
  };
  struct NodePlan {
    PlannedTensor dst;
    SrcRef ref[kMaxSrc];
  };
  // The plan of a source that is neither a node nor a leaf of the graph (kOther). A node or leaf source needs no
  // record of its own: its node's or leaf's record says where it is.
  struct OtherSrc {
    size_t node;
    int src;
    PlannedTensor p;
  };
  struct Plan {
    bool valid = false;
    std::vector<NodePlan> nodes;
    std::vector<PlannedTensor> leafs;
    std::vector<OtherSrc> others;  // in node order, then source order
    // per buffer type, per chunk: bytes needed
    std::vector<std::vector<size_t>> chunk_sizes;
  };

  static SrcRef src_ref(const GraphIndex& index, const Tensor* s, int32_t id);  // id: s's id in index
  struct PlanWalk;  // make_plan's state and steps (src/alloc/plan_walk.cpp)
  // Lifetime of one block in the planning walk's clock ([start, end); end = kForever when never freed).
  static constexpr long kForever = 1L << 62;
  struct Lifetime {
    int buft;
    size_t size;
    long start;
    long end;
  };
  static void pack_offline(const std::vector<Lifetime>& blocks, int buft, size_t limit, long walk_start,
                           std::vector<BlockAddress>* addr, std::vector<size_t>* chunk_sizes, OfflineScratch& scratch);
  Status make_plan(GraphNodes graph, std::span<const int> node_ids, std::span<const int> leaf_ids, Plan* plan) const;
  // The dense index of a graph (tensor ids, source ids), rebuilt in place for every plan and check.
  GraphIndex& index_of(GraphNodes graph) const;
  Status grow_buffers(const Plan& plan);
  Status place(GraphNodes graph, int replica);
  Status place_tensor(Tensor& t, const PlannedTensor& p, int replica);

  std::vector<BufferType*> bufts_;
  std::vector<int> replicas_;  // sets of buffers per buffer type id
  // chunk buffers per buffer type id and replica: buffers_[id][replica][chunk]
  std::vector<std::vector<std::vector<std::unique_ptr<Buffer>>>> buffers_;
  Plan plan_;
  int replans_ = 0;
  Packing packing_ = Packing::kBest;
  bool free_inputs_ = false;
  bool ggml_inplace_ = false;
  bool check_positions_ = false;               // check exact positions (GraphNodes::Positions::exact)
  mutable std::unique_ptr<GraphIndex> index_;  // scratch, reused across calls
  mutable Plan spare_;                         // the plan under construction (its memory reused across calls)
};

}  // namespace tessera
