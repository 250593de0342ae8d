// Type traits and the exact reference conversions, checked against independent computations (ldexp arithmetic on
// the format definitions), over every f16 bit pattern and random f32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "tessera/types.h"

using namespace tessera;

namespace {

// binary16 value from its definition: (-1)^s * 2^(e-15) * (1 + m/1024), subnormals 2^-14 * m/1024.
double half_value(uint16_t bits) {
  const int s = bits >> 15, e = (bits >> 10) & 31, m = bits & 1023;
  double v;
  if (e == 0) {
    v = std::ldexp(m, -24);
  } else if (e == 31) {
    v = m == 0 ? INFINITY : NAN;
  } else {
    v = std::ldexp(1024 + m, e - 25);
  }
  return s ? -v : v;
}

float bits_to_float(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

}  // namespace

TEST(Types, TraitsMatchTheFormats) {
  EXPECT_STREQ(type_name(Type::kF32), "f32");
  EXPECT_EQ(type_traits(Type::kF16).type_size, 2u);
  EXPECT_EQ(type_traits(Type::kBF16).type_size, 2u);
  EXPECT_EQ(type_traits(Type::kI32).type_size, 4u);
  EXPECT_EQ(type_traits(Type::kQ8_0).block_size, 32);
  EXPECT_EQ(type_traits(Type::kQ8_0).type_size, 34u);  // f16 scale + 32 int8
  EXPECT_EQ(type_traits(Type::kQ4_0).type_size, 18u);  // f16 scale + 16 bytes of nibbles
  EXPECT_TRUE(type_traits(Type::kQ4_0).is_quantized);
  EXPECT_FALSE(type_traits(Type::kF16).is_quantized);
  EXPECT_EQ(row_size(Type::kQ4_0, 4096), 4096u / 32 * 18);
  EXPECT_EQ(row_size(Type::kF16, 7), 14u);
  Type t;
  EXPECT_TRUE(type_from_name("q8_0", &t));
  EXPECT_EQ(t, Type::kQ8_0);
  EXPECT_FALSE(type_from_name("q5_k", &t));
  EXPECT_FALSE(type_is_valid(static_cast<Type>(99)));
  EXPECT_STREQ(type_name(static_cast<Type>(99)), "invalid");
}

TEST(Types, EveryHalfDecodesExactly) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const double expect = half_value(static_cast<uint16_t>(b));
    const float got = fp16_to_fp32({static_cast<uint16_t>(b)});
    if (std::isnan(expect)) {
      ASSERT_TRUE(std::isnan(got)) << b;
    } else {
      ASSERT_EQ(static_cast<double>(got), expect) << "bits " << b;
    }
  }
}

TEST(Types, HalfEncodingRoundsToNearestEven) {
  // Every half round-trips; every midpoint between neighbours rounds to the even one.
  for (uint32_t b = 0; b < 0x7c00; ++b) {
    const float f = static_cast<float>(half_value(static_cast<uint16_t>(b)));
    ASSERT_EQ(fp32_to_fp16(f).bits, b);
    ASSERT_EQ(fp32_to_fp16(-f).bits, b | 0x8000u);
    const double mid = (half_value(static_cast<uint16_t>(b)) + half_value(static_cast<uint16_t>(b + 1))) / 2;
    const uint16_t even = (b % 2 == 0) ? static_cast<uint16_t>(b) : static_cast<uint16_t>(b + 1);
    ASSERT_EQ(fp32_to_fp16(static_cast<float>(mid)).bits, even) << "midpoint above bits " << b;
  }
  EXPECT_EQ(fp32_to_fp16(70000.0f).bits, 0x7c00u);  // overflow -> inf
  EXPECT_EQ(fp32_to_fp16(INFINITY).bits, 0x7c00u);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
  EXPECT_EQ(fp32_to_fp16(1e-9f).bits, 0u);  // below half the smallest subnormal
}

TEST(Types, Bf16RoundsToNearestEven) {
  std::mt19937 rng(7);
  for (int i = 0; i < 200000; ++i) {
    const uint32_t bits = rng();
    const float f = bits_to_float(bits);
    if (!std::isfinite(f)) continue;
    const uint16_t h = fp32_to_bf16(f).bits;
    // independent check: candidates are truncation and truncation + 1 ulp; pick the nearer (even on ties)
    const uint32_t lo = bits & 0xffff0000u;
    const double dlo = std::fabs(double(f) - double(bits_to_float(lo)));
    // IEEE rounding treats the exponent as unbounded: above the largest finite value the upper candidate is 2^128
    // (which then becomes infinity).
    double hi = bits_to_float(lo + 0x10000u);
    if (std::isinf(hi)) hi = std::copysign(std::ldexp(1.0, 128), hi);
    const double dhi = std::fabs(double(f) - hi);
    const uint32_t expect = (dlo < dhi || (dlo == dhi && ((lo >> 16) & 1u) == 0)) ? lo : lo + 0x10000u;
    ASSERT_EQ(h, expect >> 16) << "f32 bits " << bits;
    ASSERT_EQ(bf16_to_fp32({h}), bits_to_float(static_cast<uint32_t>(h) << 16));
  }
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(NAN))));
}

TEST(Types, Q8RoundTripWithinHalfAStep) {
  std::mt19937 rng(11);
  std::normal_distribution<float> dist(0.0f, 3.0f);
  std::vector<float> x(32 * 64), y(x.size());
  for (float& v : x) v = dist(rng);
  std::vector<BlockQ8_0> q(x.size() / 32);
  quantize_row_q8_0(x.data(), q.data(), static_cast<int64_t>(x.size()));
  dequantize_row_q8_0(q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t b = 0; b < q.size(); ++b) {
    double amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double(x[b * 32 + i])));
    // d = amax/127 stored as f16 (relative error <= 2^-11); the error per value is half a step plus the scale's
    // rounding times |q| <= 127.
    const double d = amax / 127;
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(std::fabs(double(x[b * 32 + i]) - y[b * 32 + i]), d / 2 + 127 * d * std::ldexp(1.0, -11) + 1e-7);
    }
  }
}

TEST(Types, Q4RoundTripWithinHalfAStep) {
  std::mt19937 rng(13);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  std::vector<float> x(32 * 64), y(x.size());
  for (float& v : x) v = dist(rng);
  std::vector<BlockQ4_0> q(x.size() / 32);
  quantize_row_q4_0(x.data(), q.data(), static_cast<int64_t>(x.size()));
  dequantize_row_q4_0(q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t b = 0; b < q.size(); ++b) {
    double amax = 0;
    for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(double(x[b * 32 + i])));
    // d = amax/8; nibbles cover [-8d, 7d]: values near +amax may clamp to 7d, an error of up to d; elsewhere d/2.
    const double d = amax / 8;
    for (int i = 0; i < 32; ++i) {
      ASSERT_LE(std::fabs(double(x[b * 32 + i]) - y[b * 32 + i]), d * (1 + 8 * std::ldexp(1.0, -11)) + 1e-7);
    }
  }
  // The value of largest magnitude maps to nibble 0 and comes back up to the f16 rounding of the scale.
  for (size_t b = 0; b < q.size(); ++b) {
    size_t arg = b * 32;
    for (size_t i = b * 32; i < b * 32 + 32; ++i) {
      if (std::fabs(x[i]) > std::fabs(x[arg])) arg = i;
    }
    ASSERT_NEAR(y[arg], x[arg], std::fabs(x[arg]) * std::ldexp(1.0, -11));
  }
}
