// The dynamic allocator of the graph planner (docs/planner.md, 'Rules'): plans offsets inside chunks of one buffer
// type. Nothing is allocated here; the planner turns each chunk's high-water mark into a real buffer.
#pragma once

#include <cstddef>
#include <vector>

#include "tessera/status.h"

namespace tessera {

struct BlockAddress {
  int chunk = -1;
  size_t offset = 0;
};

class DynamicAllocator {
 public:
  // max_chunk_size: the buffer type's max allocation size (SIZE_MAX = one unbounded chunk).
  DynamicAllocator(size_t alignment, size_t max_chunk_size);

  void reset();
  // Rounds size up to the alignment. ggml-alloc's rule: best fit among each chunk's free blocks but its last (ties:
  // the later block, the later chunk), else a chunk's last block (where it fits under the high-water mark with the
  // least to spare, else where it grows least), else a new chunk. Error when size is above the max chunk size.
  Result<BlockAddress> alloc(size_t size);
  // Returns a block (size rounded the same way); merges it with free neighbours.
  void free(BlockAddress addr, size_t size);

  size_t chunk_limit() const { return limit_; }
  size_t aligned(size_t size) const { return (size + alignment_ - 1) / alignment_ * alignment_; }
  int n_chunks() const { return static_cast<int>(chunks_.size()); }
  // High-water mark of a chunk: the buffer size it needs.
  size_t chunk_size(int chunk) const { return chunks_[static_cast<size_t>(chunk)].high_water; }
  size_t total_size() const;
  // Bytes currently allocated (for tests).
  size_t bytes_in_use() const { return in_use_; }

 private:
  struct Block {
    size_t offset;
    size_t size;
  };
  struct Chunk {
    std::vector<Block> free;  // sorted by offset; a block reaching the chunk limit is the tail
    size_t high_water = 0;
  };
  void add_chunk();

  size_t alignment_;
  size_t limit_;  // usable bytes per chunk
  std::vector<Chunk> chunks_;
  size_t in_use_ = 0;
};

}  // namespace tessera
