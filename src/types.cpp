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

const TypeTraits kTraits[kTypeCount] = {
    {"f32", 1, 4, false, true, f32_to_float, f32_from_float},
    {"f16", 1, 2, false, true, f16_to_float, f16_from_float},
    {"bf16", 1, 2, false, true, bf16_to_float, bf16_from_float},
    {"i32", 1, 4, false, false, nullptr, nullptr},
    {"q8_0", kQK, sizeof(BlockQ8_0), true, false, q8_to_float, q8_from_float},
    {"q4_0", kQK, sizeof(BlockQ4_0), true, false, q4_to_float, q4_from_float},
};

}  // namespace

bool type_is_valid(Type type) {
  const int t = static_cast<int>(type);
  return t >= 0 && t < kTypeCount;
}

const TypeTraits& type_traits(Type type) {
  static const TypeTraits kInvalid = {"invalid", 1, 1, false, false, nullptr, nullptr};
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

size_t row_size(Type type, int64_t ne0) {
  const TypeTraits& tt = type_traits(type);
  return static_cast<size_t>(ne0 / tt.block_size) * tt.type_size;
}

}  // namespace tessera
