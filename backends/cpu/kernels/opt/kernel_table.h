// The inner loops of the optimised CPU kernels, one table per instruction set (portable, AVX2, AVX-512). The drivers
// (opt_*.cpp, compiled for the baseline ISA) walk tensors, partition work among threads and call these functions on
// contiguous rows; only the table_<isa>.cpp files are compiled with ISA flags, and they hold nothing but functions with
// internal linkage plus their table getter (so no inline function compiled for a wider ISA can leak into the rest).
//
// Every function is deterministic: its result depends only on its arguments (a fixed order of operations per call),
// never on which thread calls it or on how the caller split the work.
#pragma once

#include <cstddef>
#include <cstdint>

#include "tessera/types.h"

namespace tessera::cpu::opt {

enum class Isa : int { kPortable = 0, kAvx2 = 1, kAvx512 = 2 };

enum BinaryOp : int { kBinAdd = 0, kBinMul = 1, kBinDiv = 2 };
enum UnaryKind : int { kUnSilu = 0, kUnGelu = 1, kUnRelu = 2, kUnNeg = 3 };  // same order as tessera::UnaryOp

struct KernelTable {
  Isa isa;
  const char* name;

  // ---- f32 GEMM micro-kernel ----
  // C[mr x nr] = (accumulate ? C : 0) + sum_k ap[k][0..mr) (x) bp[k][0..nr), with ap packed as kc rows of mr floats
  // and bp as kc rows of nr floats (both 64-byte aligned). C(i, j) lives at c[j * ldc + i]. Each C element is one
  // fused multiply-add chain over k in order, so tiling and K blocking never change a result.
  int mr;
  int nr;
  void (*gemm_ukernel)(int64_t kc, const float* ap, const float* bp, float* c, int64_t ldc, bool accumulate);
  // Pack kc floats of mr (pack_a) or nr (pack_b) rows for the micro-kernel: ap[k * mr + r] = rows[r][k], bp[k * nr +
  // j] = rows[j][k] (zeros where the row pointer is null). Copies: every table gives the same bits.
  void (*pack_a)(const float* const* rows, int64_t kc, float* ap);
  void (*pack_b)(const float* const* rows, int64_t kc, float* bp);

  // ---- conversions to f32 (n values; quantized: n a multiple of 32, whole blocks) ----
  void (*f16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*bf16_to_f32)(const uint16_t* x, float* y, int64_t n);
  void (*q8_0_to_f32)(const BlockQ8_0* x, float* y, int64_t n);
  void (*q4_0_to_f32)(const BlockQ4_0* x, float* y, int64_t n);

  // ---- dot products (f32 result) ----
  float (*dot_f32)(const float* x, const float* y, int64_t n);
  float (*dot_f16_f32)(const uint16_t* x, const float* y, int64_t n);
  float (*dot_bf16_f32)(const uint16_t* x, const float* y, int64_t n);
  // nb blocks of 32; y holds activations quantized by quantize_row_q8_0 (values in [-127, 127]).
  float (*dot_q8_0_q8_0)(const BlockQ8_0* x, const BlockQ8_0* y, int64_t nb);
  float (*dot_q4_0_q8_0)(const BlockQ4_0* x, const BlockQ8_0* y, int64_t nb);
  // nrows weight rows, row r at x + r * stride bytes, against one activation row: out[r] is bit for bit what the
  // single dot above returns for row r (grouping rows only shares the activation-side work).
  void (*dot_rows_q8_0_q8_0)(const BlockQ8_0* x, size_t stride, int64_t nrows, const BlockQ8_0* y, int64_t nb,
                             float* out);
  void (*dot_rows_q4_0_q8_0)(const BlockQ4_0* x, size_t stride, int64_t nrows, const BlockQ8_0* y, int64_t nb,
                             float* out);

  // ---- element-wise rows (z may equal x or y exactly; no partial overlap) ----
  void (*binary)(int op, const float* x, const float* y, float* z, int64_t n);
  void (*binary_scalar)(int op, const float* x, float y, float* z, int64_t n);
  void (*scale)(const float* x, float s, float b, float* y, int64_t n);  // y = x * s + b (rounded twice)
  void (*unary)(int op, const float* x, float* y, int64_t n);
  void (*glu)(int op, const float* gate, const float* lin, float* y, int64_t n);  // act(gate) * lin; 0 swiglu, 1 geglu

  // ---- reductions ----
  float (*sum)(const float* x, int64_t n);
  float (*sum_sq_dev)(const float* x, float mean, int64_t n);  // sum (x - mean)^2
  float (*max)(const float* x, int64_t n);
  // the largest x * s (+ m[i] when m is not null), a multiply then an add; -inf for n = 0; nothing stored
  float (*scale_add_max)(const float* x, float s, const float* m, int64_t n);
  // z = exp(x * s (+ m[i]) - mx) with x * s (+ m[i]) formed as scale_add_max forms it (0 for -inf); returns the
  // sum; z may be x. With s = 1 and no m it is exp(x - mx) exactly (x * 1 is x).
  float (*exp_sum_scaled)(const float* x, float s, const float* m, float mx, float* z, int64_t n);
  void (*axpy)(float a, const float* x, float* y, int64_t n);  // y += a * x
  void (*axpy_f16)(float a, const uint16_t* x, float* y, int64_t n);
};

namespace {  // internal linkage in every table file: the instantiation is compiled with that file's ISA flags

// A table's dot_rows_* entry for a table without a row-batched kernel: its single-row dot, row after row (so out[r]
// is bit for bit that dot's result, as the entry requires).
template <typename Block, float (*Dot)(const Block*, const BlockQ8_0*, int64_t)>
void dot_rows_each(const Block* x, size_t stride, int64_t nrows, const BlockQ8_0* y, int64_t nb, float* out) {
  for (int64_t r = 0; r < nrows; ++r) {
    out[r] =
        Dot(reinterpret_cast<const Block*>(reinterpret_cast<const char*>(x) + static_cast<size_t>(r) * stride), y, nb);
  }
}

// A table's pack_a / pack_b entry without a transposing kernel (W rows): element by element.
template <int W>
void pack_rows_each(const float* const* rows, int64_t kc, float* out) {
  for (int r = 0; r < W; ++r) {
    const float* row = rows[r];
    for (int64_t k = 0; k < kc; ++k) out[k * W + r] = row != nullptr ? row[k] : 0.0f;
  }
}

}  // namespace

const KernelTable* table_portable();
const KernelTable* table_avx2();    // null when the build has no AVX2 code (not x86)
const KernelTable* table_avx512();  // null when the build has no AVX-512 code (not x86)

}  // namespace tessera::cpu::opt
