#include "tessera/types.h"

#include <cmath>
#include <cstring>
#include <strings.h>

namespace tessera {

// ---- scalar conversions (written from the IEEE 754 binary16 / bfloat16 definitions) ----

float fp16_to_fp32(fp16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h.bits & 0x8000u) << 16;
  const uint32_t exp = (h.bits >> 10) & 0x1fu;
  const uint32_t mant = h.bits & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;  // +-0
    } else {
      // subnormal: value = mant * 2^-24, exact in f32
      float v = static_cast<float>(mant) * 0x1p-24f;
      std::memcpy(&bits, &v, 4);
      bits |= sign;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf / nan (payload kept)
  } else {
    bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

fp16_t fp32_to_fp16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  const uint32_t abs = x & 0x7fffffffu;
  if (abs > 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu))};  // NaN stays NaN
  if (abs == 0x7f800000u) return {static_cast<uint16_t>(sign | 0x7c00u)};
  const int32_t e = static_cast<int32_t>(abs >> 23) - 127;      // unbiased exponent
  if (e >= 16) return {static_cast<uint16_t>(sign | 0x7c00u)};  // overflow -> inf
  if (e >= -14) {
    // normal half: keep 10 mantissa bits, round to nearest even on the 13 dropped bits
    uint32_t mant = abs & 0x7fffffu;
    uint32_t half = (static_cast<uint32_t>(e + 15) << 10) | (mant >> 13);
    const uint32_t rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1u))) half += 1;  // may carry into exponent / to inf: correct
    return {static_cast<uint16_t>(sign | half)};
  }
  // subnormal half (or zero): value / 2^-24 rounded to nearest even integer
  if (e < -25) return {sign};
  const uint32_t mant = (abs & 0x7fffffu) | 0x800000u;  // 24-bit significand, value = mant * 2^(e-23)
  const int shift = -e - 1;                             // to units of 2^-24: mant >> (-(e-23) - 24) = >> (-e - 1)
  uint32_t q = mant >> shift;
  const uint32_t rest = mant & ((1u << shift) - 1u);
  const uint32_t halfway = 1u << (shift - 1);
  if (rest > halfway || (rest == halfway && (q & 1u))) q += 1;
  return {static_cast<uint16_t>(sign | q)};
}

float bf16_to_fp32(bf16_t h) {
  const uint32_t bits = static_cast<uint32_t>(h.bits) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bf16_t fp32_to_bf16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  if ((x & 0x7fffffffu) > 0x7f800000u) return {static_cast<uint16_t>((x >> 16) | 0x40u)};  // quiet NaN
  const uint32_t lsb = (x >> 16) & 1u;
  x += 0x7fffu + lsb;  // round to nearest even; overflow rounds to inf
  return {static_cast<uint16_t>(x >> 16)};
}

// ---- quantization ----

void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0.0f;
    for (int i = 0; i < kQK; ++i) amax = std::fmax(amax, std::fabs(x[i]));
    const float d = amax / 127.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int i = 0; i < kQK; ++i) dst[b].qs[i] = static_cast<int8_t>(std::lround(x[i] * id));
  }
}

void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int i = 0; i < kQK; ++i) dst[b * kQK + i] = static_cast<float>(src[b].qs[i]) * d;
  }
}

void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float* x = src + b * kQK;
    float amax = 0.0f, max = 0.0f;  // max: the signed value of largest magnitude
    for (int i = 0; i < kQK; ++i) {
      if (std::fabs(x[i]) > amax) {
        amax = std::fabs(x[i]);
        max = x[i];
      }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    dst[b].d = fp32_to_fp16(d);
    for (int i = 0; i < kQK / 2; ++i) {
      auto q = [&](float v) {
        long r = std::lround(v * id) + 8;
        return static_cast<uint8_t>(r < 0 ? 0 : (r > 15 ? 15 : r));
      };
      dst[b].qs[i] = static_cast<uint8_t>(q(x[i]) | (q(x[i + kQK / 2]) << 4));
    }
  }
}

void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n) {
  for (int64_t b = 0; b < n / kQK; ++b) {
    const float d = fp16_to_fp32(src[b].d);
    for (int i = 0; i < kQK / 2; ++i) {
      dst[b * kQK + i] = static_cast<float>((src[b].qs[i] & 0x0f) - 8) * d;
      dst[b * kQK + i + kQK / 2] = static_cast<float>((src[b].qs[i] >> 4) - 8) * d;
    }
  }
}

// ---- row converters for the traits table ----
namespace {

void f32_to_float(const void* s, float* d, int64_t n) { std::memcpy(d, s, static_cast<size_t>(n) * 4); }
void f32_from_float(const float* s, void* d, int64_t n) { std::memcpy(d, s, static_cast<size_t>(n) * 4); }
void f16_to_float(const void* s, float* d, int64_t n) {
  const auto* h = static_cast<const fp16_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = fp16_to_fp32(h[i]);
}
void f16_from_float(const float* s, void* d, int64_t n) {
  auto* h = static_cast<fp16_t*>(d);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(s[i]);
}
void bf16_to_float(const void* s, float* d, int64_t n) {
  const auto* h = static_cast<const bf16_t*>(s);
  for (int64_t i = 0; i < n; ++i) d[i] = bf16_to_fp32(h[i]);
}
void bf16_from_float(const float* s, void* d, int64_t n) {
  auto* h = static_cast<bf16_t*>(d);
  for (int64_t i = 0; i < n; ++i) h[i] = fp32_to_bf16(s[i]);
}
void q8_to_float(const void* s, float* d, int64_t n) { dequantize_row_q8_0(static_cast<const BlockQ8_0*>(s), d, n); }
void q8_from_float(const float* s, void* d, int64_t n) { quantize_row_q8_0(s, static_cast<BlockQ8_0*>(d), n); }
void q4_to_float(const void* s, float* d, int64_t n) { dequantize_row_q4_0(static_cast<const BlockQ4_0*>(s), d, n); }
void q4_from_float(const float* s, void* d, int64_t n) { quantize_row_q4_0(s, static_cast<BlockQ4_0*>(d), n); }

// Sizes of the storage-only types: values per block and bytes per block of ggml's block structs, from ggml-org/ggml
// src/ggml-common.h (block_q4_1 ... block_q2_0; QK_K = 256 values per super-block), and the GGUF ids of
// include/ggml.h (enum ggml_type). tests/unit/core/test_types.cpp checks each size against the sum of its struct's
// fields.
constexpr int64_t kQK_K = 256;

// name, block size, bytes per block, quantized, float, to f32, from f32, GGUF id
const TypeTraits kTraits[] = {
    {"f32", 1, 4, false, true, f32_to_float, f32_from_float, 0},
    {"f16", 1, 2, false, true, f16_to_float, f16_from_float, 1},
    {"bf16", 1, 2, false, true, bf16_to_float, bf16_from_float, 30},
    {"i32", 1, 4, false, false, nullptr, nullptr, 26},
    {"q8_0", kQK, sizeof(BlockQ8_0), true, false, q8_to_float, q8_from_float, 8},
    {"q4_0", kQK, sizeof(BlockQ4_0), true, false, q4_to_float, q4_from_float, 2},
    // storage-only
    {"q4_1", 32, 20, true, false, nullptr, nullptr, 3},
    {"q5_0", 32, 22, true, false, nullptr, nullptr, 6},
    {"q5_1", 32, 24, true, false, nullptr, nullptr, 7},
    {"q8_1", 32, 36, true, false, nullptr, nullptr, 9},
    {"q2_k", kQK_K, 84, true, false, nullptr, nullptr, 10},
    {"q3_k", kQK_K, 110, true, false, nullptr, nullptr, 11},
    {"q4_k", kQK_K, 144, true, false, nullptr, nullptr, 12},
    {"q5_k", kQK_K, 176, true, false, nullptr, nullptr, 13},
    {"q6_k", kQK_K, 210, true, false, nullptr, nullptr, 14},
    {"q8_k", kQK_K, 292, true, false, nullptr, nullptr, 15},
    {"iq2_xxs", kQK_K, 66, true, false, nullptr, nullptr, 16},
    {"iq2_xs", kQK_K, 74, true, false, nullptr, nullptr, 17},
    {"iq3_xxs", kQK_K, 98, true, false, nullptr, nullptr, 18},
    {"iq1_s", kQK_K, 50, true, false, nullptr, nullptr, 19},
    {"iq4_nl", 32, 18, true, false, nullptr, nullptr, 20},
    {"iq3_s", kQK_K, 110, true, false, nullptr, nullptr, 21},
    {"iq2_s", kQK_K, 82, true, false, nullptr, nullptr, 22},
    {"iq4_xs", kQK_K, 136, true, false, nullptr, nullptr, 23},
    {"i8", 1, 1, false, false, nullptr, nullptr, 24},
    {"i16", 1, 2, false, false, nullptr, nullptr, 25},
    {"i64", 1, 8, false, false, nullptr, nullptr, 27},
    {"f64", 1, 8, false, true, nullptr, nullptr, 28},
    {"iq1_m", kQK_K, 56, true, false, nullptr, nullptr, 29},
    {"tq1_0", kQK_K, 54, true, false, nullptr, nullptr, 34},
    {"tq2_0", kQK_K, 66, true, false, nullptr, nullptr, 35},
    {"mxfp4", 32, 17, true, false, nullptr, nullptr, 39},
    {"nvfp4", 64, 36, true, false, nullptr, nullptr, 40},
    {"q1_0", 128, 18, true, false, nullptr, nullptr, 41},
    {"q2_0", 64, 18, true, false, nullptr, nullptr, 42},
};
static_assert(sizeof(kTraits) / sizeof(kTraits[0]) == kTypeCount, "one row per type, in enumerator order");

}  // namespace

bool type_is_valid(Type type) {
  const int t = static_cast<int>(type);
  return t >= 0 && t < kTypeCount;
}

const TypeTraits& type_traits(Type type) {
  static const TypeTraits kInvalid = {"invalid", 1, 1, false, false, nullptr, nullptr, -1};
  return type_is_valid(type) ? kTraits[static_cast<int>(type)] : kInvalid;
}

bool type_from_name(const char* name, Type* out) {
  for (int i = 0; i < kTypeCount; ++i) {
    if (strcasecmp(name, kTraits[i].name) == 0) {
      *out = static_cast<Type>(i);
      return true;
    }
  }
  return false;
}

bool type_from_gguf_id(int id, Type* out) {
  for (int i = 0; i < kTypeCount; ++i) {
    if (kTraits[i].gguf_id == id) {
      *out = static_cast<Type>(i);
      return true;
    }
  }
  return false;
}

size_t row_size(Type type, int64_t ne0) {
  const TypeTraits& tt = type_traits(type);
  return static_cast<size_t>(ne0 / tt.block_size) * tt.type_size;
}

}  // namespace tessera
