// The offline packing of the graph planner: GraphPlanner::pack_offline places again, knowing every lifetime,
// the blocks the planning walk placed online; make_plan keeps whichever packing needs fewer bytes
// (docs/planner.md, "Rules": Packing; "Packing cost").
#include <algorithm>
#include <tuple>

#include "graph_index.h"

namespace tessera {

// Greedy by size: blocks of buffer type b, largest first (ties: earlier start), each at the lowest-waste gap among
// the already placed blocks whose lifetimes overlap its own, in the first chunk where it fits. Blocks that exist from
// the start to the end (placed before the walk and never freed) are stacked at the bottom first: they overlap
// everything. Placed blocks are indexed by time bucket, so each block's search only looks at blocks live around the
// same time; a bucket holds what the query needs of each block (lifetime and bytes), and a block spanning several
// buckets counts in the first of them that the query visits.
void GraphPlanner::pack_offline(const std::vector<Lifetime>& blocks, int b, size_t limit, long walk_start,
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

}  // namespace tessera
