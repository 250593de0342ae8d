// How many seeds a sweep of whole simulated runs takes (the adversarial race sweeps of tests/unit/). The default
// build runs every sweep in full; under AddressSanitizer (the coverage and debug-asan builds, ~8x slower per run)
// a quarter of it, at least `min_seeds`: the sanitizers look for memory errors, whose code paths the first seeds
// already take, while the race detector, which is what many seeds are for, runs in full in the default build.
// TESSERA_SWEEP_FULL=1 runs the full sweep under the sanitizers too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace tessera::test {

// `share` is the divisor under the sanitizers (a quarter by default).
inline uint64_t sweep_seeds(uint64_t full, uint64_t min_seeds = 5, uint64_t share = 4) {
#if defined(__SANITIZE_ADDRESS__)
  const char* env = std::getenv("TESSERA_SWEEP_FULL");
  if (env == nullptr || std::strcmp(env, "1") != 0) return std::min(full, std::max(min_seeds, full / share));
#else
  (void)min_seeds;
  (void)share;
#endif
  return full;
}

}  // namespace tessera::test
