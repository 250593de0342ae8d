#include "access.h"

#include <cstring>

namespace tessera::cpu::ref {

// ---- types ----

size_t unit_size(Type t) {
  switch (t) {
    case Type::kF32: return 4;
    case Type::kF16: return 2;
    case Type::kBF16: return 2;
    case Type::kI32: return 4;
    case Type::kQ8_0: return sizeof(BlockQ8_0);
    case Type::kQ4_0: return sizeof(BlockQ4_0);
    default: return 0;
  }
}

// ---- rows and the thread partition ----

int64_t row_count(const Tensor& t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

RowIdx row_idx(const Tensor& t, int64_t r) {
  RowIdx ri;
  ri.i1 = r % t.ne[1];
  r /= t.ne[1];
  ri.i2 = r % t.ne[2];
  ri.i3 = r / t.ne[2];
  return ri;
}

void partition(int64_t n, const ComputeParams& p, int64_t* r0, int64_t* r1) {
  *r0 = n * p.ith / p.nth;
  *r1 = n * (p.ith + 1) / p.nth;
}

// ---- element access ----

char* elem_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<char*>(t.data) + static_cast<size_t>(i0 / block_size(t.type)) * t.nb[0] +
         static_cast<size_t>(i1) * t.nb[1] + static_cast<size_t>(i2) * t.nb[2] + static_cast<size_t>(i3) * t.nb[3];
}

float load_f32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const char* p = elem_ptr(t, i0, i1, i2, i3);
  switch (t.type) {
    case Type::kF32: {
      float v;
      std::memcpy(&v, p, 4);
      return v;
    }
    case Type::kF16: {
      fp16_t h;
      std::memcpy(&h, p, 2);
      return fp16_to_fp32(h);
    }
    case Type::kBF16: {
      bf16_t h;
      std::memcpy(&h, p, 2);
      return bf16_to_fp32(h);
    }
    case Type::kI32: {
      int32_t v;
      std::memcpy(&v, p, 4);
      return static_cast<float>(v);
    }
    case Type::kQ8_0: {  // value = q * d, as dequantize_row_q8_0
      BlockQ8_0 b;
      std::memcpy(&b, p, sizeof b);
      return static_cast<float>(b.qs[i0 % kQK]) * fp16_to_fp32(b.d);
    }
    case Type::kQ4_0: {  // value j < 16: low nibble of qs[j]; j >= 16: high nibble of qs[j - 16]; (nibble - 8) * d
      BlockQ4_0 b;
      std::memcpy(&b, p, sizeof b);
      const int j = static_cast<int>(i0 % kQK);
      const int nib = j < kQK / 2 ? (b.qs[j] & 0x0f) : (b.qs[j - kQK / 2] >> 4);
      return static_cast<float>(nib - 8) * fp16_to_fp32(b.d);
    }
    default: return 0.0f;
  }
}

int32_t load_i32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  int32_t v;
  std::memcpy(&v, elem_ptr(t, i0, i1, i2, i3), 4);
  return v;
}

int64_t load_index(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  if (t.type != Type::kI64) return load_i32(t, i0, i1, i2, i3);
  int64_t v;
  std::memcpy(&v, elem_ptr(t, i0, i1, i2, i3), 8);
  return v;
}

void store_i32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int32_t v) {
  std::memcpy(elem_ptr(t, i0, i1, i2, i3), &v, 4);
}

void load_row(const Tensor& t, int64_t i1, int64_t i2, int64_t i3, float* out) {
  const int64_t n = t.ne[0];
  if (t.type == Type::kQ8_0) {
    const char* p = elem_ptr(t, 0, i1, i2, i3);
    for (int64_t b = 0; b < n / kQK; ++b) {
      BlockQ8_0 blk;  // copied out: rows may sit at any byte offset
      std::memcpy(&blk, p + static_cast<size_t>(b) * sizeof blk, sizeof blk);
      dequantize_row_q8_0(&blk, out + b * kQK, kQK);
    }
    return;
  }
  if (t.type == Type::kQ4_0) {
    const char* p = elem_ptr(t, 0, i1, i2, i3);
    for (int64_t b = 0; b < n / kQK; ++b) {
      BlockQ4_0 blk;
      std::memcpy(&blk, p + static_cast<size_t>(b) * sizeof blk, sizeof blk);
      dequantize_row_q4_0(&blk, out + b * kQK, kQK);
    }
    return;
  }
  // One element type per row: the row's address once, then element i0 at i0 * nb[0] (as elem_ptr computes it for a
  // type whose block is one element), converted as load_f32 converts it.
  const char* p = elem_ptr(t, 0, i1, i2, i3);
  const size_t nb0 = t.nb[0];
  switch (t.type) {
    case Type::kF32:
      for (int64_t i0 = 0; i0 < n; ++i0) std::memcpy(&out[i0], p + static_cast<size_t>(i0) * nb0, 4);
      return;
    case Type::kF16:
      for (int64_t i0 = 0; i0 < n; ++i0) {
        fp16_t h;
        std::memcpy(&h, p + static_cast<size_t>(i0) * nb0, 2);
        out[i0] = fp16_to_fp32(h);
      }
      return;
    case Type::kBF16:
      for (int64_t i0 = 0; i0 < n; ++i0) {
        bf16_t h;
        std::memcpy(&h, p + static_cast<size_t>(i0) * nb0, 2);
        out[i0] = bf16_to_fp32(h);
      }
      return;
    default:
      for (int64_t i0 = 0; i0 < n; ++i0) out[i0] = load_f32(t, i0, i1, i2, i3);
  }
}

void store_row(const Tensor& t, int64_t i1, int64_t i2, int64_t i3, const float* in) {
  const int64_t n = t.ne[0];
  char* row = elem_ptr(t, 0, i1, i2, i3);  // element i0 at i0 * nb[0] for the unquantized types (as elem_ptr)
  const size_t nb0 = t.nb[0];
  switch (t.type) {
    case Type::kF32:
      for (int64_t i0 = 0; i0 < n; ++i0) std::memcpy(row + static_cast<size_t>(i0) * nb0, &in[i0], 4);
      return;
    case Type::kF16:
      for (int64_t i0 = 0; i0 < n; ++i0) {
        const fp16_t h = fp32_to_fp16(in[i0]);
        std::memcpy(row + static_cast<size_t>(i0) * nb0, &h, 2);
      }
      return;
    case Type::kBF16:
      for (int64_t i0 = 0; i0 < n; ++i0) {
        const bf16_t h = fp32_to_bf16(in[i0]);
        std::memcpy(row + static_cast<size_t>(i0) * nb0, &h, 2);
      }
      return;
    case Type::kQ8_0: {
      char* p = elem_ptr(t, 0, i1, i2, i3);
      for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ8_0 blk;
        quantize_row_q8_0(in + b * kQK, &blk, kQK);
        std::memcpy(p + static_cast<size_t>(b) * sizeof blk, &blk, sizeof blk);
      }
      return;
    }
    case Type::kQ4_0: {
      char* p = elem_ptr(t, 0, i1, i2, i3);
      for (int64_t b = 0; b < n / kQK; ++b) {
        BlockQ4_0 blk;
        quantize_row_q4_0(in + b * kQK, &blk, kQK);
        std::memcpy(p + static_cast<size_t>(b) * sizeof blk, &blk, sizeof blk);
      }
      return;
    }
    default: return;  // i32 rows are written with store_i32
  }
}

}  // namespace tessera::cpu::ref
