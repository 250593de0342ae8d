// Software prefetch of Tensors for the walks over large graphs (internal: the scheduler's plan and the graph
// planner). A graph of 100k nodes has over 40 MB of Tensors, far beyond the caches, and each walk reads a few fields
// of every one: without prefetching, every first read of a Tensor waits for memory.
#pragma once

#include <cstddef>

#include "tessera/tensor.h"

namespace tessera::detail {

// A prefetch of the cache line holding p, which the compiler keeps (GCC 12 drops some __builtin_prefetch calls, e.g.
// a loop that does nothing else).
inline void prefetch_line(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#elif defined(__aarch64__)
  asm volatile("prfm pldl1keep, %0" : : "Q"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Every line of t's bytes [from, to).
inline void prefetch_bytes(const Tensor* t, size_t from, size_t to) {
  const char* p = reinterpret_cast<const char*>(t);
  for (size_t off = from; off < to; off += 64) prefetch_line(p + off);
  prefetch_line(p + to - 1);
}

// The bytes of Tensors from which the walks prefetch: below this they find them in the caches, and the prefetches
// only cost (measured on the scheduler benchmark: no gain at 4 MiB of Tensors, 10k nodes; 40 % off the scheduler's
// index at 14 MiB; a 5 % cost at 0.4 MiB). A variable only for the tests, which set it to 0 to run the prefetching
// paths on small graphs.
inline size_t& far_bytes() {
  static size_t bytes = size_t{4} << 20;
  return bytes;
}
// Whether n Tensors are many enough to prefetch.
inline bool tensors_far(size_t n) { return n * sizeof(Tensor) > far_bytes(); }

// Sets far_bytes() for one scope and restores it at the end, whatever happens (tests).
class ScopedFarBytes {
 public:
  explicit ScopedFarBytes(size_t bytes) : saved_(far_bytes()) { far_bytes() = bytes; }
  ~ScopedFarBytes() { far_bytes() = saved_; }
  ScopedFarBytes(const ScopedFarBytes&) = delete;
  ScopedFarBytes& operator=(const ScopedFarBytes&) = delete;

 private:
  size_t saved_;
};

}  // namespace tessera::detail
