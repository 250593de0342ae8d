// Tensor pointer -> dense id, for the scheduler's plan and the graph planner (internal). Both number every tensor of
// a graph once per call and look up every source reference, on graphs of up to 100k nodes.
//
// Open addressing with linear probing, load factor <= 1/2, key and id in one slot (one cache line per probe), and an
// O(1) clear() (a generation counter), so one map serves every split without re-initialising its memory. (A hash
// keeping address locality was tried: no gain on the benchmark's graphs, and a risk of clustering on regular strides.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace tessera::detail {

class TensorIdMap {
 public:
  // Pre-sizes for n keys (keeps the entries).
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > slots_.size()) rehash(cap);
  }
  void clear() {
    size_ = 0;
    if (++gen_ == 0) {  // wrapped: forget every slot for real
      for (Slot& s : slots_) s.gen = 0;
      gen_ = 1;
    }
  }
  size_t size() const { return size_; }

  // The id of key, or -1.
  int32_t find(const void* key) const {
    if (slots_.empty()) return -1;
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.gen != gen_) return -1;
      if (s.key == key) return s.id;
    }
  }
  // The id of key; when missing, key gets `id` and *inserted is set.
  int32_t insert(const void* key, int32_t id, bool* inserted) {
    if (2 * (size_ + 1) > slots_.size()) rehash(slots_.size() < 16 ? 16 : slots_.size() * 2);
    const size_t mask = slots_.size() - 1;
    for (size_t i = hash(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.gen != gen_) {
        s = {key, id, gen_};
        ++size_;
        *inserted = true;
        return id;
      }
      if (s.key == key) {
        *inserted = false;
        return s.id;
      }
    }
  }

 private:
  struct Slot {
    const void* key = nullptr;
    int32_t id = -1;
    uint32_t gen = 0;  // live when equal to the map's generation
  };
  static size_t hash(const void* p) {
    auto x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  void rehash(size_t cap) {
    std::vector<Slot> old(cap);
    old.swap(slots_);
    const uint32_t old_gen = gen_;
    gen_ = 1;
    size_ = 0;
    for (const Slot& s : old) {
      if (s.gen != old_gen) continue;
      bool inserted = false;
      (void)insert(s.key, s.id, &inserted);
    }
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  uint32_t gen_ = 1;
};

}  // namespace tessera::detail
