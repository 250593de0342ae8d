#include "dyn_allocator.h"

#include <algorithm>
#include <cstdint>

namespace tessera {

DynamicAllocator::DynamicAllocator(size_t alignment, size_t max_chunk_size)
    : alignment_(alignment == 0 ? 1 : alignment),
      // An unbounded type still gets a finite limit so offset arithmetic cannot overflow.
      limit_(std::min(max_chunk_size, SIZE_MAX / 4)) {
  reset();
}

void DynamicAllocator::reset() {
  chunks_.clear();
  in_use_ = 0;
  add_chunk();
}

void DynamicAllocator::add_chunk() {
  Chunk c;
  c.free.push_back({0, limit_});
  chunks_.push_back(std::move(c));
}

size_t DynamicAllocator::total_size() const {
  size_t total = 0;
  for (const Chunk& c : chunks_) total += c.high_water;
  return total;
}

Result<BlockAddress> DynamicAllocator::alloc(size_t size) {
  size = aligned(size);
  if (size > limit_) {
    return TS_ERROR(StatusCode::kAllocFailed, "%zu bytes exceed the maximum buffer size %zu", size, limit_);
  }
  // ggml-alloc's rule (ggml_dyn_tallocr_alloc), to the tie:
  // 1. Best fit among each chunk's free blocks but its last one; a tie goes to the later block, and a chunk with a
  //    fitting block to the later chunk (the best size is per chunk).
  int best_chunk = -1;
  size_t best_block = 0;
  for (size_t c = 0; c < chunks_.size(); ++c) {
    const auto& blocks = chunks_[c].free;
    size_t best_size = SIZE_MAX;
    for (size_t b = 0; b + 1 < blocks.size(); ++b) {
      if (blocks[b].size >= size && blocks[b].size <= best_size) {
        best_chunk = static_cast<int>(c);
        best_block = b;
        best_size = blocks[b].size;
      }
    }
  }
  // 2. Otherwise a chunk's last free block: among those that hold it, one where it ends under the chunk's high-water
  //    mark with the least to spare, else the one that grows least (ties: the first chunk); 3. otherwise a new chunk.
  if (best_chunk < 0) {
    bool fits_under = false;
    size_t best_spare = SIZE_MAX, best_growth = SIZE_MAX;
    for (size_t c = 0; c < chunks_.size(); ++c) {
      const Chunk& ch = chunks_[c];
      if (ch.free.empty()) continue;
      const Block& last = ch.free.back();
      if (last.size < size) continue;
      const size_t end = last.offset + size;
      if (end <= ch.high_water) {
        if (!fits_under || ch.high_water - end < best_spare) {
          fits_under = true;
          best_spare = ch.high_water - end;
          best_chunk = static_cast<int>(c);
          best_block = ch.free.size() - 1;
        }
      } else if (!fits_under && end - ch.high_water < best_growth) {
        best_growth = end - ch.high_water;
        best_chunk = static_cast<int>(c);
        best_block = ch.free.size() - 1;
      }
    }
    if (best_chunk < 0) {
      add_chunk();
      best_chunk = static_cast<int>(chunks_.size()) - 1;
      best_block = 0;
    }
  }
  Chunk& ch = chunks_[static_cast<size_t>(best_chunk)];
  Block& block = ch.free[best_block];
  const BlockAddress addr{best_chunk, block.offset};
  block.offset += size;
  block.size -= size;
  // A block used up entirely disappears (an emptied tail too: the chunk is then exactly full).
  if (block.size == 0) ch.free.erase(ch.free.begin() + static_cast<std::ptrdiff_t>(best_block));
  ch.high_water = std::max(ch.high_water, addr.offset + size);
  in_use_ += size;
  return addr;
}

void DynamicAllocator::free(BlockAddress addr, size_t size) {
  size = aligned(size);
  if (size == 0) return;
  Chunk& ch = chunks_[static_cast<size_t>(addr.chunk)];
  auto& blocks = ch.free;
  auto it = std::lower_bound(blocks.begin(), blocks.end(), addr.offset,
                             [](const Block& b, size_t off) { return b.offset < off; });
  it = blocks.insert(it, Block{addr.offset, size});
  // merge with the next block, then with the previous one
  auto next = it + 1;
  if (next != blocks.end() && it->offset + it->size == next->offset) {
    it->size += next->size;
    blocks.erase(next);
  }
  if (it != blocks.begin()) {
    auto prev = it - 1;
    if (prev->offset + prev->size == it->offset) {
      prev->size += it->size;
      blocks.erase(it);
    }
  }
  in_use_ -= size;
}

}  // namespace tessera
