// Plan reuse (docs/scheduler.md, 'Reuse'): what the scheduler remembers of the graph it planned, so that a graph of
// the same structure evaluated again keeps the plan and only takes this evaluation's copy slot.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/graph.h"
#include "tessera/planner.h"
#include "tessera/tensor.h"

namespace tessera::sched {

// The bytes of a Tensor that make its structure: type, shape, strides, op, op parameters, flags, sources, view source
// and offset, and buffer (its memory: a weight moved to another buffer changes placement). Not data, extra or name.
inline constexpr size_t kStructureBytes = offsetof(Tensor, data);
static_assert(offsetof(Tensor, type) == 0 && offsetof(Tensor, buffer) < kStructureBytes,
              "the structure bytes run from type to buffer");

struct ReuseRecord {
  bool valid = false;
  std::vector<Tensor*> tensors;  // the graph's nodes, then its leafs, as planned
  // kStructureBytes per tensor, as the user had it (sources before pass 5's rewrites), buffers after the placement
  std::vector<unsigned char> bytes;
  size_t n_nodes = 0;
  std::vector<int32_t> rewrite_sets;  // per plan rewrite: the copy set whose copy the node reads
  std::vector<int32_t> set_of;        // per plan id: the copy set of a copy, -1 for other tensors
  uint64_t pins_version = 0;
  uint32_t placed_slots = 0;  // bit s: this plan's copies of slot s have addresses
  // With pipelining: where the planner put each copy of the planned slot (copy set, planned block), so the copies of
  // another slot get the same offsets in that slot's replica without the planner (whose plan may be another graph's)
  struct CopyPlace {
    int32_t set;
    PlannedTensor where;
  };
  std::vector<CopyPlace> copy_places;
  void clear() {
    valid = false;
    placed_slots = 0;
    copy_places.clear();
  }
};

// The first difference between a tensor and its recorded bytes, as "<field>" ("op", "ne", "src[1]", "buffer"...), or
// "" when none.
std::string structure_difference(const Tensor& now, const unsigned char* then);

}  // namespace tessera::sched
