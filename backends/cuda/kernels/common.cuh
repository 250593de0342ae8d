// Device-side helpers shared by the kernels: exact f16/bf16 conversions (bit for bit the CPU reference's), element
// loads for every type at any strides, stores for float types, q8_0/q4_0 block quantization, index arithmetic and
// block reductions. Written for clarity first: every kernel reads through these, so one correct copy serves all.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "kernels.h"

namespace tessera::cuda::kernels {

constexpr int32_t kTF32 = 0, kTF16 = 1, kTBF16 = 2, kTI32 = 3, kTQ8 = 4, kTQ4 = 5;
constexpr int kQ = 32;        // values per quantized block
constexpr int kQ8Bytes = 34;  // f16 scale + 32 int8
constexpr int kQ4Bytes = 18;  // f16 scale + 16 bytes of nibbles

__host__ __device__ inline bool is_quant_t(int32_t t) { return t == kTQ8 || t == kTQ4; }

// ---- scalar conversions (mirrors of src/types.cpp) ----

__device__ inline float f16_bits_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {
      const float v = static_cast<float>(mant) * 5.9604644775390625e-08f;  // 2^-24, exact
      bits = __float_as_uint(v) | sign;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  return __uint_as_float(bits);
}

__device__ inline uint16_t f32_to_f16_bits(float f) {
  const uint32_t x = __float_as_uint(f);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  if (abs == 0x7f800000u) return static_cast<uint16_t>(sign | 0x7c00u);
  const int32_t e = static_cast<int32_t>(abs >> 23) - 127;
  if (e >= 16) return static_cast<uint16_t>(sign | 0x7c00u);
  if (e >= -14) {
    const uint32_t mant = abs & 0x7fffffu;
    uint32_t half = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half += 1;
    return static_cast<uint16_t>(sign | half);
  }
  if (e < -25) return sign;
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;
  const int shift = -e - 1;
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) q += 1;
  return static_cast<uint16_t>(sign | q);
}

__device__ inline float bf16_bits_to_f32(uint16_t h) { return __uint_as_float(static_cast<uint32_t>(h) << 16); }

__device__ inline uint16_t f32_to_bf16_bits(float f) {
  uint32_t x = __float_as_uint(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  const uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;
  return static_cast<uint16_t>(x >> 16);
}

// ---- addresses and element access ----

__device__ inline char* elem_addr(const TensorDesc& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const int64_t u = is_quant_t(t.type) ? i0 / kQ : i0;
  return static_cast<char*>(t.data) + u * t.nb[0] + i1 * t.nb[1] + i2 * t.nb[2] + i3 * t.nb[3];
}

__device__ inline uint16_t load_u16(const char* p) {
  // Rows of quantized blocks may sit at any even offset; 2-byte loads are always aligned for f16/bf16 tensors.
  return static_cast<uint16_t>(static_cast<uint8_t>(p[0]) | (static_cast<uint16_t>(static_cast<uint8_t>(p[1])) << 8));
}

// One value as f32 (quantized: decoded from its block; i32: converted).
__device__ inline float load_f32(const TensorDesc& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  const char* p = elem_addr(t, i0, i1, i2, i3);
  switch (t.type) {
    case kTF32: return *reinterpret_cast<const float*>(p);
    case kTF16: return f16_bits_to_f32(*reinterpret_cast<const uint16_t*>(p));
    case kTBF16: return bf16_bits_to_f32(*reinterpret_cast<const uint16_t*>(p));
    case kTI32: return static_cast<float>(*reinterpret_cast<const int32_t*>(p));
    case kTQ8: {
      const float d = f16_bits_to_f32(load_u16(p));
      return static_cast<float>(static_cast<int8_t>(p[2 + i0 % kQ])) * d;
    }
    case kTQ4: {
      const float d = f16_bits_to_f32(load_u16(p));
      const int j = static_cast<int>(i0 % kQ);
      const uint8_t byte = static_cast<uint8_t>(p[2 + (j % 16)]);
      const int nib = j < 16 ? (byte & 0x0f) : (byte >> 4);
      return static_cast<float>(nib - 8) * d;
    }
    default: return 0.0f;
  }
}

__device__ inline int32_t load_i32(const TensorDesc& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
  return *reinterpret_cast<const int32_t*>(elem_addr(t, i0, i1, i2, i3));
}

// Stores one value into a float tensor (f32, f16, bf16) or an i32 tensor (truncation is never used: callers store
// i32 values with store_i32).
__device__ inline void store_float(const TensorDesc& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, float v) {
  char* p = elem_addr(t, i0, i1, i2, i3);
  switch (t.type) {
    case kTF32: *reinterpret_cast<float*>(p) = v; break;
    case kTF16: *reinterpret_cast<uint16_t*>(p) = f32_to_f16_bits(v); break;
    case kTBF16: *reinterpret_cast<uint16_t*>(p) = f32_to_bf16_bits(v); break;
    default: break;
  }
}

__device__ inline void store_i32(const TensorDesc& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int32_t v) {
  *reinterpret_cast<int32_t*>(elem_addr(t, i0, i1, i2, i3)) = v;
}

// Quantizes 32 values into the block at p (q8_0 or q4_0), exactly as quantize_row_q8_0 / quantize_row_q4_0.
__device__ inline void store_block(int32_t type, char* p, const float* x) {
  if (type == kTQ8) {
    float amax = 0.0f;
    for (int i = 0; i < kQ; ++i) amax = fmaxf(amax, fabsf(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    const uint16_t dh = f32_to_f16_bits(d);
    p[0] = static_cast<char>(dh & 0xff);
    p[1] = static_cast<char>(dh >> 8);
    for (int i = 0; i < kQ; ++i) p[2 + i] = static_cast<char>(static_cast<int8_t>(lroundf(x[i] * id)));
    return;
  }
  float amax = 0.0f, mx = 0.0f;
  for (int i = 0; i < kQ; ++i) {
    if (fabsf(x[i]) > amax) {
      amax = fabsf(x[i]);
      mx = x[i];
    }
  }
  const float d = mx / -8.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  const uint16_t dh = f32_to_f16_bits(d);
  p[0] = static_cast<char>(dh & 0xff);
  p[1] = static_cast<char>(dh >> 8);
  for (int i = 0; i < kQ / 2; ++i) {
    long r0 = lroundf(x[i] * id) + 8;
    long r1 = lroundf(x[i + kQ / 2] * id) + 8;
    r0 = r0 < 0 ? 0 : (r0 > 15 ? 15 : r0);
    r1 = r1 < 0 ? 0 : (r1 > 15 ? 15 : r1);
    p[2 + i] = static_cast<char>(static_cast<uint8_t>(r0 | (r1 << 4)));
  }
}

// Flat row r (ne1 fastest) of a shape -> (i1, i2, i3).
__device__ inline void row_coords(const int64_t ne[4], int64_t r, int64_t* i1, int64_t* i2, int64_t* i3) {
  *i1 = r % ne[1];
  r /= ne[1];
  *i2 = r % ne[2];
  *i3 = r / ne[2];
}

// Flat element index (ne0 fastest) -> coordinates.
__device__ inline void flat_coords(const int64_t ne[4], int64_t f, int64_t* i0, int64_t* i1, int64_t* i2, int64_t* i3) {
  *i0 = f % ne[0];
  f /= ne[0];
  *i1 = f % ne[1];
  f /= ne[1];
  *i2 = f % ne[2];
  *i3 = f / ne[2];
}

// Records the first index error (see IndexError).
__device__ inline void report_index_error(IndexError* e, int32_t node, int32_t value, int32_t limit) {
  if (e == nullptr) return;
  if (atomicCAS(&e->flag, 0, 1) == 0) {
    e->node = node;
    e->value = value;
    e->limit = limit;
    __threadfence_system();
  }
}

// ---- reductions ----

__device__ inline float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide sum / max for blockDim.x a multiple of 32 (<= 1024). `scratch` holds 32 floats; every thread gets the
// result. The order of operations is fixed by the block shape, so results are deterministic.
__device__ inline float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ inline float block_max(float v, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, nw = blockDim.x / 32;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < nw ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Grid size for n items at `threads` per block, capped (kernels loop with a grid stride).
inline unsigned grid_for(int64_t n, int threads) {
  int64_t g = (n + threads - 1) / threads;
  if (g < 1) g = 1;
  if (g > 65535 * 16) g = 65535 * 16;
  return static_cast<unsigned>(g);
}

}  // namespace tessera::cuda::kernels
