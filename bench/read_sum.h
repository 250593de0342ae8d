// The read-only ceiling of the CPU benchmarks: a sum over n floats with four independent AVX2 accumulators (plain
// loads, no stores), the bandwidth limit of a kernel that only streams its input. Shared by cpu_kernels_bench.cpp and
// bench/tools/matvec_stream_ab.cpp, so both hold their kernels against the same ceiling.
#pragma once

#include <cstddef>

#if defined(__x86_64__)
#include <immintrin.h>

__attribute__((target("avx2"))) inline float read_sum(const float* p, size_t n) {
  __m256 s0 = _mm256_setzero_ps(), s1 = s0, s2 = s0, s3 = s0;
  for (size_t i = 0; i + 32 <= n; i += 32) {
    s0 = _mm256_add_ps(s0, _mm256_loadu_ps(p + i));
    s1 = _mm256_add_ps(s1, _mm256_loadu_ps(p + i + 8));
    s2 = _mm256_add_ps(s2, _mm256_loadu_ps(p + i + 16));
    s3 = _mm256_add_ps(s3, _mm256_loadu_ps(p + i + 24));
  }
  const __m256 s = _mm256_add_ps(_mm256_add_ps(s0, s1), _mm256_add_ps(s2, s3));
  float out[8];
  _mm256_storeu_ps(out, s);
  return out[0] + out[1] + out[2] + out[3] + out[4] + out[5] + out[6] + out[7];
}
#else
inline float read_sum(const float* p, size_t n) {
  float s = 0;
  for (size_t i = 0; i < n; ++i) s += p[i];
  return s;
}
#endif
