// Kernel table for any CPU: plain C++ (one lane), compiled for the baseline ISA. It is also what a build for a CPU
// without AVX2 (or for ARM, where the compiler vectorises it for NEON) runs.
#include <cstring>

#include "kernel_table.h"

namespace tessera::cpu::opt {
namespace {

constexpr int W = 1;
struct V {
  float v;
};
const float kOnes[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

inline V vzero() { return {0.0f}; }
inline V vset(float x) { return {x}; }
inline V vload(const float* p) { return {*p}; }
inline V vload_n(const float* p, int64_t n) { return {n > 0 ? *p : 0.0f}; }
inline void vstore(float* p, V a) { *p = a.v; }
inline void vstore_n(float* p, V a, int64_t n) {
  if (n > 0) *p = a.v;
}
inline V vadd(V a, V b) { return {a.v + b.v}; }
inline V vsub(V a, V b) { return {a.v - b.v}; }
inline V vmul(V a, V b) { return {a.v * b.v}; }
inline V vdiv(V a, V b) { return {a.v / b.v}; }
inline V vmax(V a, V b) { return {a.v > b.v ? a.v : b.v}; }  // NaN in a gives b, as the x86 max instructions
inline V vfma(V a, V b, V c) { return {a.v * b.v + c.v}; }
inline float vhsum(V a) { return a.v; }
inline float vhmax(V a) { return a.v; }
inline V vexp(V x) { return {__builtin_expf(x.v)}; }
inline V vload_f16(const uint16_t* p) { return {fp16_to_fp32(fp16_t{*p})}; }
inline V vload_f16_n(const uint16_t* p, int64_t n) { return n > 0 ? vload_f16(p) : vzero(); }
inline V vload_bf16(const uint16_t* p) { return {bf16_to_fp32(bf16_t{*p})}; }
inline V vload_bf16_n(const uint16_t* p, int64_t n) { return n > 0 ? vload_bf16(p) : vzero(); }

#include "simd_generic.inc"

float k_dot_q8_q8(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int j = 0; j < 32; ++j) s += static_cast<int32_t>(x[b].qs[j]) * y[b].qs[j];
    acc += static_cast<float>(s) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return acc;
}

float k_dot_q4_q8(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int j = 0; j < 16; ++j) {
      s += ((x[b].qs[j] & 0x0f) - 8) * y[b].qs[j];
      s += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + 16];
    }
    acc += static_cast<float>(s) * (fp16_to_fp32(x[b].d) * fp16_to_fp32(y[b].d));
  }
  return acc;
}

void k_q8_to_f32(const BlockQ8_0* x, float* y, int64_t n) { dequantize_row_q8_0(x, y, n); }
void k_q4_to_f32(const BlockQ4_0* x, float* y, int64_t n) { dequantize_row_q4_0(x, y, n); }

constexpr int kMr = 8;
constexpr int kNr = 4;
void gemm_ukernel(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate) {
  float acc[kNr][kMr];
  for (int j = 0; j < kNr; ++j)
    for (int i = 0; i < kMr; ++i) acc[j][i] = accumulate ? c[j * ldc + i] : 0.0f;
  for (int64_t k = 0; k < kc; ++k) {
    for (int j = 0; j < kNr; ++j) {
      const float b = bp[k * kNr + j];
      for (int i = 0; i < kMr; ++i) acc[j][i] += ap[k * kMr + i] * b;
    }
  }
  for (int j = 0; j < kNr; ++j)
    for (int i = 0; i < kMr; ++i) c[j * ldc + i] = acc[j][i];
}

// One row per kind of kernel, in KernelTable's order.
// clang-format off
const KernelTable kTable = {
    Isa::kPortable, "portable", kMr, kNr, gemm_ukernel, pack_rows_each<kMr>, pack_rows_each<kNr>,
    k_f16_to_f32, k_bf16_to_f32, k_q8_to_f32, k_q4_to_f32,
    k_dot_f32, k_dot_f16, k_dot_bf16, k_dot_q8_q8, k_dot_q4_q8,
    dot_rows_each<BlockQ8_0, k_dot_q8_q8>, dot_rows_each<BlockQ4_0, k_dot_q4_q8>,
    k_binary, k_binary_scalar, k_scale, k_unary, k_glu,
    k_sum, k_sum_sq_dev, k_max, k_scale_add_max, k_exp_sum_scaled, k_axpy, k_axpy_f16,
};
// clang-format on

}  // namespace

const KernelTable* table_portable() { return &kTable; }

}  // namespace tessera::cpu::opt
