// The FMA-peak kernel of the CPU benchmarks: 16 independent FMA chains on 16-lane AVX-512 vectors, registers only
// (enough chains to cover latency x throughput on current cores). Shared by cpu_kernels_bench.cpp and
// bench/tools/gemm_ab.cpp, so both hold the GEMM against the same ceiling. x86-64 only.
#pragma once

#include <cstdint>

#if defined(__x86_64__)
#include <immintrin.h>

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"  // GCC 12: false positives inside its AVX-512 intrinsic headers
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
__attribute__((target("avx512f"))) inline float fma_loop_avx512(int64_t iters) {
  __m512 a[16];
  for (int j = 0; j < 16; ++j) a[j] = _mm512_set1_ps(static_cast<float>(j) * 1e-3f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < 16; ++j) a[j] = _mm512_fmadd_ps(a[j], x, y);
  }
  __m512 s = a[0];
  for (int j = 1; j < 16; ++j) s = _mm512_add_ps(s, a[j]);
  return _mm512_reduce_add_ps(s);
}
#pragma GCC diagnostic pop
#endif
