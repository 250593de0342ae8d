// Kernel table for AVX-512 (F, BW, VL, DQ, VNNI; with AVX2, FMA, F16C). This file alone is compiled with those flags
// (see the top-level CMakeLists.txt); everything in it has internal linkage except table_avx512().
#include "kernel_table.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__) && defined(__AVX512DQ__) && \
    defined(__AVX512VNNI__) && defined(__FMA__) && defined(__F16C__)
#include <immintrin.h>

#include <algorithm>
#include <cstring>

namespace tessera::cpu::opt {
namespace {

constexpr int W = 16;
struct V {
  __m512 v;
};
const float kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

inline __mmask16 tail_mask(int64_t n) { return static_cast<__mmask16>((1u << n) - 1u); }
inline V vzero() { return {_mm512_setzero_ps()}; }
inline V vset(float x) { return {_mm512_set1_ps(x)}; }
inline V vload(const float* p) { return {_mm512_loadu_ps(p)}; }
inline V vload_n(const float* p, int64_t n) { return {_mm512_maskz_loadu_ps(tail_mask(n), p)}; }
inline void vstore(float* p, V a) { _mm512_storeu_ps(p, a.v); }
inline void vstore_n(float* p, V a, int64_t n) { _mm512_mask_storeu_ps(p, tail_mask(n), a.v); }
inline V vadd(V a, V b) { return {_mm512_add_ps(a.v, b.v)}; }
inline V vsub(V a, V b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline V vmul(V a, V b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline V vdiv(V a, V b) { return {_mm512_div_ps(a.v, b.v)}; }
inline V vmax(V a, V b) { return {_mm512_max_ps(a.v, b.v)}; }
inline V vfma(V a, V b, V c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline float hsum256(__m256 a) {
  const __m128 s = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 t = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(t, _mm_movehdup_ps(t)));
}
inline float vhsum(V a) { return hsum256(_mm256_add_ps(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1))); }
inline float vhmax(V a) {
  const __m256 m8 = _mm256_max_ps(_mm512_castps512_ps256(a.v), _mm512_extractf32x8_ps(a.v, 1));
  const __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
  const __m128 m2 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
  return _mm_cvtss_f32(_mm_max_ss(m2, _mm_movehdup_ps(m2)));
}
inline V vload_f16(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)))};
}
inline V vload_f16_n(const uint16_t* p, int64_t n) {
  return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(tail_mask(n), p))};
}
inline V bf16_widen(__m256i h) { return {_mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16))}; }
inline V vload_bf16(const uint16_t* p) { return bf16_widen(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
inline V vload_bf16_n(const uint16_t* p, int64_t n) { return bf16_widen(_mm256_maskz_loadu_epi16(tail_mask(n), p)); }

// e^x: x = n ln2 + r (|r| <= ln2 / 2), e^r by a degree-7 polynomial (the Cephes expf coefficients), times 2^n.
// Below -87.3 the result is 0 (also for -inf); above 88.37 it saturates at about 2^127 * 1.5 (finite).
inline V vexp(V xv) {
  const __m512 x = _mm512_min_ps(_mm512_max_ps(xv.v, _mm512_set1_ps(-87.3f)), _mm512_set1_ps(88.37f));
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  const __m512 y = _mm512_scalef_ps(p, fx);  // p * 2^fx (fx is an integer in [-126, 127]): the same bits as p * 2^n
  const __mmask16 tiny = _mm512_cmp_ps_mask(xv.v, _mm512_set1_ps(-87.3f), _CMP_LT_OQ);
  return {_mm512_mask_blend_ps(tiny, y, _mm512_setzero_ps())};
}

#include "simd_generic.inc"
#define TESSERA_QUANT_VNNI_DOTS
#include "quant_x86.inc"
#include "quant_avx512_vnni.inc"

// 32 x 12 tile: 24 accumulators, two vectors of A and one broadcast of B per k.
constexpr int kMr = 32;
constexpr int kNr = 12;
void gemm_ukernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
  __m512 c0[kNr], c1[kNr];
#pragma GCC unroll 12
  for (int j = 0; j < kNr; ++j) {
    c0[j] = accumulate ? _mm512_loadu_ps(c + j * ldc) : _mm512_setzero_ps();
    c1[j] = accumulate ? _mm512_loadu_ps(c + j * ldc + 16) : _mm512_setzero_ps();
  }
  for (int64_t k = 0; k < kc; ++k) {
    const __m512 a0 = _mm512_load_ps(ap + k * kMr);
    const __m512 a1 = _mm512_load_ps(ap + k * kMr + 16);
    _mm_prefetch(reinterpret_cast<const char*>(ap + k * kMr + 8 * kMr), _MM_HINT_T0);
#pragma GCC unroll 12
    for (int j = 0; j < kNr; ++j) {
      const __m512 b = _mm512_set1_ps(bp[k * kNr + j]);
      c0[j] = _mm512_fmadd_ps(a0, b, c0[j]);
      c1[j] = _mm512_fmadd_ps(a1, b, c1[j]);
    }
  }
#pragma GCC unroll 12
  for (int j = 0; j < kNr; ++j) {
    _mm512_storeu_ps(c + j * ldc, c0[j]);
    _mm512_storeu_ps(c + j * ldc + 16, c1[j]);
  }
}

// Rows 16 at a time, 16 floats each, transposed in registers: unpack pairs of rows, then 4 x 4 blocks within the
// 128-bit lanes, then the lanes themselves.
inline void transpose16(__m512 v[16]) {
  __m512 t[16], u[16];
  for (int i = 0; i < 8; ++i) {
    t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
    t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
  }
  // u[4i + j], lane L: column 4L + j of rows 4i .. 4i + 3
  for (int i = 0; i < 4; ++i) {
    u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0x44);
    u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i], t[4 * i + 2], 0xEE);
    u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
    u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
  }
  // column 4L + j: lane L of u[j], u[4 + j], u[8 + j], u[12 + j]
  for (int j = 0; j < 4; ++j) {
    const __m512 s0 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0x44);
    const __m512 s1 = _mm512_shuffle_f32x4(u[j], u[4 + j], 0xEE);
    const __m512 s2 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0x44);
    const __m512 s3 = _mm512_shuffle_f32x4(u[8 + j], u[12 + j], 0xEE);
    v[j] = _mm512_shuffle_f32x4(s0, s2, 0x88);
    v[4 + j] = _mm512_shuffle_f32x4(s0, s2, 0xDD);
    v[8 + j] = _mm512_shuffle_f32x4(s1, s3, 0x88);
    v[12 + j] = _mm512_shuffle_f32x4(s1, s3, 0xDD);
  }
}

// W rows (pack_a: kMr, pack_b: kNr), 16 at a time (missing ones as zeros); a group of fewer than 16 rows stores
// only its columns of each transposed vector.
template <int W>
void pack_rows(const float* const* rows, int64_t kc, float* out) {
  int64_t k = 0;
  for (; k + 16 <= kc; k += 16) {
    for (int h = 0; h < W; h += 16) {
      const int valid = W - h < 16 ? W - h : 16;
      __m512 v[16];
      for (int i = 0; i < 16; ++i) {
        const float* row = i < valid ? rows[h + i] : nullptr;
        v[i] = row != nullptr ? _mm512_loadu_ps(row + k) : _mm512_setzero_ps();
      }
      transpose16(v);
      const __mmask16 keep = static_cast<__mmask16>((1u << valid) - 1u);
      for (int i = 0; i < 16; ++i) _mm512_mask_storeu_ps(out + (k + i) * W + h, keep, v[i]);
    }
  }
  for (int r = 0; r < W; ++r) {
    for (int64_t kk = k; kk < kc; ++kk) out[kk * W + r] = rows[r] != nullptr ? rows[r][kk] : 0.0f;
  }
}

// One row per kind of kernel, in KernelTable's order.
// clang-format off
const KernelTable kTable = {
    Isa::kAvx512, "avx512", kMr, kNr, gemm_ukernel, pack_rows<kMr>, pack_rows<kNr>,
    k_f16_to_f32, k_bf16_to_f32, k_q8_to_f32, k_q4_to_f32,
    k_dot_f32, k_dot_f16, k_dot_bf16, k_dot_q8_vnni, k_dot_q4_vnni, k_dot_rows_q8_vnni, k_dot_rows_q4_vnni,
    k_binary, k_binary_scalar, k_scale, k_unary, k_glu,
    k_sum, k_sum_sq_dev, k_max, k_scale_add_max, k_exp_sum_scaled, k_axpy, k_axpy_f16,
};
// clang-format on

}  // namespace

const KernelTable* table_avx512() { return &kTable; }

}  // namespace tessera::cpu::opt

#else

namespace tessera::cpu::opt {
const KernelTable* table_avx512() { return nullptr; }
}  // namespace tessera::cpu::opt

#endif
