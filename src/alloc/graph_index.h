// The graph planner's dense numbering of a graph's tensors (internal to src/alloc), and the planner's per-tensor
// scratch that lives with it. GraphPlanner keeps one GraphIndex and rebuilds it in place for every plan and every
// compatibility check, so its arrays (and the scratch of make_plan and pack_offline) keep their memory from call to
// call (docs/planner.md, "Graphs without a Graph").
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "dyn_allocator.h"
#include "tensor_id_map.h"
#include "tessera/planner.h"

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
  int block = -1;   // lifetime record of that block (for the offline packing)
};

// pack_offline's working memory, kept from call to call (GraphIndex::offline).
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
  size_t lookups = 0;        // pointer lookups of the last build (GraphPlanner::index_lookups)
  std::vector<Tensor*> tensors;
  std::vector<int32_t> src;   // n_nodes * kMaxSrc, -1: none
  std::vector<uint8_t> nsrc;  // per node: one past its last source slot in use (the walks stop there)
  std::vector<int32_t> vsrc;  // per id, -1: not a view
  size_t n_nodes = 0, n_leafs = 0;
  std::vector<PlanInfo> info;  // make_plan's records, per id (kept here so its memory is reused)
  OfflineScratch offline;      // likewise pack_offline's
  // With checking on, the first exact position that does not hold its pointer (empty when all do).
  std::string exact_error;

  // Numbers g's tensors; with check_exact_positions, checks exact positions against the pointers (exact_error).
  void build(GraphNodes g, bool check_exact_positions);

 private:
  void complete_map();
  int32_t intern(Tensor* t);
  // The id of t, recorded at position pos (Graph's encoding), when the tensor there is t; else by pointer.
  int32_t resolve(Tensor* t, int32_t pos);
  // Exact positions (GraphNodes::Positions::exact): each is taken as it is; only kPosUnknown (and a position out of
  // range) is looked up by the pointer. The tensors' source pointers are not read.
  int32_t exact(Tensor* const* slot, int32_t pos);
  void check_exact(const GraphNodes::Positions& pos);
  // Node i's source slots when a position needs a lookup (kPosUnknown, or out of range).
  [[gnu::noinline]] void exact_slots(size_t i, const int32_t* p);
  void build_exact(const GraphNodes::Positions& pos);
  // Positions as hints (each checked against the pointer), or none (every source looked up).
  void build_checked(const GraphNodes::Positions* pos);
};

}  // namespace tessera
