// A small open-addressing hash map keyed by pointers (internal). The scheduler and the planner look up per-tensor
// records for every node of graphs with up to 100k nodes; std::unordered_map's node allocations and pointer chasing
// dominated their time. Linear probing, power-of-two capacity, load factor <= 1/2, no erase (clear() keeps capacity).
// Unlike std::unordered_map, inserting may move every value: do not hold a reference across an insertion. (V must
// not be bool: std::vector<bool> has no references.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace tessera::detail {

template <typename V>
class PtrMap {
 public:
  explicit PtrMap(size_t expected = 16) { reserve(expected); }

  // Pre-sizes for n keys.
  void reserve(size_t n) {
    size_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    if (cap > keys_.size()) rehash(cap);
  }
  size_t size() const { return size_; }
  void clear() {
    std::fill(keys_.begin(), keys_.end(), nullptr);
    size_ = 0;
  }

  V* find(const void* key) {
    const size_t i = probe(key);
    return keys_[i] == key ? &values_[i] : nullptr;
  }
  const V* find(const void* key) const {
    const size_t i = probe(key);
    return keys_[i] == key ? &values_[i] : nullptr;
  }
  bool contains(const void* key) const { return find(key) != nullptr; }

  // The value for key, inserted value-initialised when missing.
  V& operator[](const void* key) {
    size_t i = probe(key);
    if (keys_[i] == key) return values_[i];
    if (2 * (size_ + 1) > keys_.size()) {
      rehash(keys_.size() * 2);
      i = probe(key);
    }
    keys_[i] = key;
    values_[i] = V{};
    ++size_;
    return values_[i];
  }

  template <typename Fn>
  void for_each(Fn fn) const {
    for (size_t i = 0; i < keys_.size(); ++i) {
      if (keys_[i] != nullptr) fn(keys_[i], values_[i]);
    }
  }

 private:
  static size_t hash(const void* p) {
    auto x = static_cast<uint64_t>(reinterpret_cast<uintptr_t>(p));
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return static_cast<size_t>(x);
  }
  // The slot holding key, or the empty slot where it would go.
  size_t probe(const void* key) const {
    const size_t mask = keys_.size() - 1;
    size_t i = hash(key) & mask;
    while (keys_[i] != nullptr && keys_[i] != key) i = (i + 1) & mask;
    return i;
  }
  void rehash(size_t cap) {
    std::vector<const void*> old_keys(cap, nullptr);
    std::vector<V> old_values(cap);
    old_keys.swap(keys_);
    old_values.swap(values_);
    size_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_keys[i] != nullptr) {
        const size_t j = probe(old_keys[i]);
        keys_[j] = old_keys[i];
        values_[j] = std::move(old_values[i]);
        ++size_;
      }
    }
  }

  std::vector<const void*> keys_;
  std::vector<V> values_;
  size_t size_ = 0;
};

}  // namespace tessera::detail
