// SplitMix64: a 64-bit counter through a bijective mixer; small, fast and deterministic for a given seed on every
// machine and compiler. graph_gen's leaf data and the seeded configuration-space draws (config_space.h) use it.
#pragma once

#include <cstdint>

namespace tessera::test {

struct SplitMix64 {
  using result_type = uint64_t;
  uint64_t state;
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  static constexpr result_type min() { return 0; }
  static constexpr result_type max() { return ~uint64_t{0}; }
  result_type operator()() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [lo, hi] (hi only by rounding) from the top 24 bits of one draw. (std::uniform_real_distribution goes
  // through std::generate_canonical, which computes two long-double logarithms per value: a fifth of the end-to-end
  // fuzzer's time.)
  float uniform(float lo, float hi) { return lo + (hi - lo) * (static_cast<float>((*this)() >> 40) * 0x1p-24f); }
};

}  // namespace tessera::test
