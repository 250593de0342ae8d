// Kernel table for AVX2 + FMA + F16C. This file alone is compiled with those flags (see the top-level
// CMakeLists.txt); everything in it has internal linkage except table_avx2().
#include "kernel_table.h"

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <cstring>

namespace tessera::cpu::opt {
namespace {

constexpr int W = 8;
struct V {
  __m256 v;
};
const float kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
const int32_t kMaskTable[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

inline __m256i tail_mask(int64_t n) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kMaskTable + 8 - n)); }
inline V vzero() { return {_mm256_setzero_ps()}; }
inline V vset(float x) { return {_mm256_set1_ps(x)}; }
inline V vload(const float* p) { return {_mm256_loadu_ps(p)}; }
inline V vload_n(const float* p, int64_t n) { return {_mm256_maskload_ps(p, tail_mask(n))}; }
inline void vstore(float* p, V a) { _mm256_storeu_ps(p, a.v); }
inline void vstore_n(float* p, V a, int64_t n) { _mm256_maskstore_ps(p, tail_mask(n), a.v); }
inline V vadd(V a, V b) { return {_mm256_add_ps(a.v, b.v)}; }
inline V vsub(V a, V b) { return {_mm256_sub_ps(a.v, b.v)}; }
inline V vmul(V a, V b) { return {_mm256_mul_ps(a.v, b.v)}; }
inline V vdiv(V a, V b) { return {_mm256_div_ps(a.v, b.v)}; }
inline V vmax(V a, V b) { return {_mm256_max_ps(a.v, b.v)}; }
inline V vfma(V a, V b, V c) { return {_mm256_fmadd_ps(a.v, b.v, c.v)}; }
inline float hsum256(__m256 a) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
inline float vhsum(V a) { return hsum256(a.v); }
inline float vhmax(V a) {
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(a.v), _mm256_extractf128_ps(a.v, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}
inline __m128i load_u16_n(const uint16_t* p, int64_t n) {
  alignas(16) uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  std::memcpy(tmp, p, static_cast<size_t>(n) * 2);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(tmp));
}
inline V vload_f16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))};
}
inline V vload_f16_n(const uint16_t* p, int64_t n) { return {_mm256_cvtph_ps(load_u16_n(p, n))}; }
inline V bf16_widen(__m128i h) { return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16))}; }
inline V vload_bf16(const uint16_t* p) { return bf16_widen(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
inline V vload_bf16_n(const uint16_t* p, int64_t n) { return bf16_widen(load_u16_n(p, n)); }

// e^x as in table_avx512.cpp: x = n ln2 + r, e^r by the Cephes expf polynomial, times 2^n; 0 below -87.3.
inline V vexp(V xv) {
  const __m256 x = _mm256_min_ps(_mm256_max_ps(xv.v, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.37f));
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  const __m256 tiny = _mm256_cmp_ps(xv.v, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  return {_mm256_andnot_ps(tiny, y)};
}

#include "simd_generic.inc"
#include "quant_x86.inc"

// 16 x 6 tile: 12 accumulators, two vectors of A and one broadcast of B per k.
constexpr int kMr = 16;
constexpr int kNr = 6;
void gemm_ukernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
  __m256 c0[kNr], c1[kNr];
#pragma GCC unroll 6
  for (int j = 0; j < kNr; ++j) {
    c0[j] = accumulate ? _mm256_loadu_ps(c + j * ldc) : _mm256_setzero_ps();
    c1[j] = accumulate ? _mm256_loadu_ps(c + j * ldc + 8) : _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m256 a0 = _mm256_load_ps(ap + k * kMr);
    const __m256 a1 = _mm256_load_ps(ap + k * kMr + 8);
#pragma GCC unroll 6
    for (int j = 0; j < kNr; ++j) {
      const __m256 b = _mm256_broadcast_ss(bp + k * kNr + j);
      c0[j] = _mm256_fmadd_ps(a0, b, c0[j]);
      c1[j] = _mm256_fmadd_ps(a1, b, c1[j]);
    }
  }
#pragma GCC unroll 6
  for (int j = 0; j < kNr; ++j) {
    _mm256_storeu_ps(c + j * ldc, c0[j]);
    _mm256_storeu_ps(c + j * ldc + 8, c1[j]);
  }
}

// One row per kind of kernel, in KernelTable's order.
// clang-format off
const KernelTable kTable = {
    Isa::kAvx2, "avx2", kMr, kNr, gemm_ukernel, pack_rows_each<kMr>, pack_rows_each<kNr>,
    k_f16_to_f32, k_bf16_to_f32, k_q8_to_f32, k_q4_to_f32,
    k_dot_f32, k_dot_f16, k_dot_bf16, k_dot_q8_q8, k_dot_q4_q8,
    dot_rows_each<BlockQ8_0, k_dot_q8_q8>, dot_rows_each<BlockQ4_0, k_dot_q4_q8>,
    k_binary, k_binary_scalar, k_scale, k_unary, k_glu,
    k_sum, k_sum_sq_dev, k_max, k_scale_add_max, k_exp_sum_scaled, k_axpy, k_axpy_f16,
};
// clang-format on

}  // namespace

const KernelTable* table_avx2() { return &kTable; }

}  // namespace tessera::cpu::opt

#else

namespace tessera::cpu::opt {
const KernelTable* table_avx2() { return nullptr; }
}  // namespace tessera::cpu::opt

#endif
