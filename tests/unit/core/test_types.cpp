// Type traits and the exact reference conversions, checked against independent computations (ldexp arithmetic on
// the format definitions), over every f16 bit pattern and random f32 values.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iterator>
#include <random>

#include "tessera/gguf.h"
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
  EXPECT_FALSE(type_from_name("q4_k_m", &t));  // a llama.cpp file type (a mix), not a tensor type
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

// ---- storage-only types (the other GGUF tensor types) ----

namespace {

// One row per type: the GGUF id and the block layout of ggml's block struct (ggml-org/ggml src/ggml-common.h), with
// the bytes per block written as the sum of the struct's fields (QK_K = 256; ggml_half is 2 bytes), independently of
// the table in src/types.cpp.
struct Layout {
  Type type;
  const char* name;
  int gguf_id;
  int64_t block_size;
  size_t bytes;
};
constexpr int64_t QK_K = 256;
constexpr size_t kHalfBytes = 2;
const Layout kLayouts[] = {
    {Type::kF32, "f32", 0, 1, 4},
    {Type::kF16, "f16", 1, 1, 2},
    {Type::kBF16, "bf16", 30, 1, 2},
    {Type::kI32, "i32", 26, 1, 4},
    {Type::kQ8_0, "q8_0", 8, 32, kHalfBytes + 32},                                    // d, qs[32]
    {Type::kQ4_0, "q4_0", 2, 32, kHalfBytes + 32 / 2},                                // d, qs[16]
    {Type::kQ4_1, "q4_1", 3, 32, kHalfBytes + kHalfBytes + 32 / 2},                   // d, m, qs[16]
    {Type::kQ5_0, "q5_0", 6, 32, kHalfBytes + 4 + 32 / 2},                            // d, qh[4], qs[16]
    {Type::kQ5_1, "q5_1", 7, 32, kHalfBytes + kHalfBytes + 4 + 32 / 2},               // d, m, qh[4], qs[16]
    {Type::kQ8_1, "q8_1", 9, 32, kHalfBytes + kHalfBytes + 32},                       // d, s, qs[32]
    {Type::kQ2_K, "q2_k", 10, QK_K, QK_K / 16 + QK_K / 4 + kHalfBytes + kHalfBytes},  // scales 16, qs 64, d, dmin
    {Type::kQ3_K, "q3_k", 11, QK_K, QK_K / 8 + QK_K / 4 + 12 + kHalfBytes},           // hmask 32, qs 64, scales 12, d
    {Type::kQ4_K, "q4_k", 12, QK_K, kHalfBytes + kHalfBytes + 12 + QK_K / 2},         // d, dmin, scales 12, qs 128
    {Type::kQ5_K, "q5_k", 13, QK_K,
     kHalfBytes + kHalfBytes + 12 + QK_K / 8 + QK_K / 2},                           // d, dmin, scales, qh 32, qs 128
    {Type::kQ6_K, "q6_k", 14, QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + kHalfBytes},  // ql 128, qh 64, scales 16, d
    {Type::kQ8_K, "q8_k", 15, QK_K, 4 + QK_K + QK_K / 16 * 2},                      // float d, qs 256, bsums 16 x i16
    {Type::kIQ2_XXS, "iq2_xxs", 16, QK_K, kHalfBytes + QK_K / 8 * 2},               // d, qs 32 x u16
    {Type::kIQ2_XS, "iq2_xs", 17, QK_K, kHalfBytes + QK_K / 8 * 2 + QK_K / 32},     // d, qs 32 x u16, scales 8
    {Type::kIQ3_XXS, "iq3_xxs", 18, QK_K, kHalfBytes + 3 * QK_K / 8},               // d, qs 96
    {Type::kIQ1_S, "iq1_s", 19, QK_K, kHalfBytes + QK_K / 8 + QK_K / 32 * 2},       // d, qs 32, qh 8 x u16
    {Type::kIQ4_NL, "iq4_nl", 20, 32, kHalfBytes + 32 / 2},                         // d, qs 16
    {Type::kIQ3_S, "iq3_s", 21, QK_K,
     kHalfBytes + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64},                        // d, qs, qh, signs, scales
    {Type::kIQ2_S, "iq2_s", 22, QK_K, kHalfBytes + QK_K / 4 + QK_K / 32 + QK_K / 32},  // d, qs 64, qh 8, scales 8
    {Type::kIQ4_XS, "iq4_xs", 23, QK_K, kHalfBytes + 2 + QK_K / 64 + QK_K / 2},  // d, scales_h u16, scales_l 4, qs 128
    {Type::kI8, "i8", 24, 1, 1},
    {Type::kI16, "i16", 25, 1, 2},
    {Type::kI64, "i64", 27, 1, 8},
    {Type::kF64, "f64", 28, 1, 8},
    {Type::kIQ1_M, "iq1_m", 29, QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},                     // qs 32, qh 16, scales 8
    {Type::kTQ1_0, "tq1_0", 34, QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + kHalfBytes},  // qs 48, qh 4, d
    {Type::kTQ2_0, "tq2_0", 35, QK_K, QK_K / 4 + kHalfBytes},                                // qs 64, d
    {Type::kMXFP4, "mxfp4", 39, 32, 1 + 32 / 2},                                             // e (E8M0), qs 16
    {Type::kNVFP4, "nvfp4", 40, 64, 64 / 16 + 64 / 2},     // d[4] (UE4M3, one per 16 values), qs 32
    {Type::kQ1_0, "q1_0", 41, 128, kHalfBytes + 128 / 8},  // d, qs 16
    {Type::kQ2_0, "q2_0", 42, 64, kHalfBytes + 64 / 4},    // d, qs 16
};

}  // namespace

TEST(Types, EveryTypeHasTheGgmlBlockLayoutAndGgufId) {
  ASSERT_EQ(std::size(kLayouts), static_cast<size_t>(kTypeCount)) << "one row per type";
  for (const Layout& l : kLayouts) {
    SCOPED_TRACE(l.name);
    const TypeTraits& tt = type_traits(l.type);
    EXPECT_STREQ(tt.name, l.name);
    EXPECT_EQ(tt.gguf_id, l.gguf_id);
    EXPECT_EQ(tt.block_size, l.block_size);
    EXPECT_EQ(tt.type_size, l.bytes);
    EXPECT_EQ(tt.is_quantized, l.block_size > 1);
    EXPECT_EQ(row_size(l.type, 4 * l.block_size), 4 * l.bytes);
  }
  // Hand-checked totals of a few (docs/data-model.md's table).
  EXPECT_EQ(type_traits(Type::kQ6_K).type_size, 210u);  // ql 128 + qh 64 + scales 16 + d 2
  EXPECT_EQ(type_traits(Type::kQ4_K).type_size, 144u);  // d 2 + dmin 2 + scales 12 + qs 128
  EXPECT_EQ(type_traits(Type::kQ8_K).type_size, 292u);  // d 4 + qs 256 + bsums 32
  EXPECT_EQ(type_traits(Type::kTQ1_0).type_size, 54u);  // qs 48 + qh 4 + d 2
  EXPECT_EQ(type_traits(Type::kNVFP4).type_size, 36u);  // d 4 + qs 32
}

TEST(Types, TheSixTypesWithKernelsKeepTheirValuesAndConversions) {
  EXPECT_EQ(kKernelTypeCount, 6);
  EXPECT_EQ(kTypeCount, 35);  // every GGUF tensor type (ids 0..42 less the eight removed ones)
  EXPECT_EQ(static_cast<int>(Type::kF32), 0);
  EXPECT_EQ(static_cast<int>(Type::kF16), 1);
  EXPECT_EQ(static_cast<int>(Type::kBF16), 2);
  EXPECT_EQ(static_cast<int>(Type::kI32), 3);
  EXPECT_EQ(static_cast<int>(Type::kQ8_0), 4);
  EXPECT_EQ(static_cast<int>(Type::kQ4_0), 5);
  EXPECT_EQ(static_cast<int>(Type::kQ4_1), 6);  // the storage-only types follow, in GGUF id order
  EXPECT_EQ(static_cast<int>(Type::kQ2_0), kTypeCount - 1);
  for (int i = 0; i < kTypeCount; ++i) {
    const Type t = static_cast<Type>(i);
    SCOPED_TRACE(type_name(t));
    EXPECT_TRUE(type_is_valid(t));
    EXPECT_EQ(type_has_kernels(t), i < kKernelTypeCount);
    if (!type_has_kernels(t)) {
      EXPECT_EQ(type_traits(t).to_float, nullptr);
      EXPECT_EQ(type_traits(t).from_float, nullptr);
    } else if (t != Type::kI32) {
      EXPECT_NE(type_traits(t).to_float, nullptr);
      EXPECT_NE(type_traits(t).from_float, nullptr);
    }
    if (i > kKernelTypeCount) {
      EXPECT_LT(type_traits(static_cast<Type>(i - 1)).gguf_id, type_traits(t).gguf_id)
          << "storage-only types are in GGUF id order";
    }
  }
  EXPECT_FALSE(type_has_kernels(Type::kCount));
  EXPECT_FALSE(type_has_kernels(static_cast<Type>(-1)));
  EXPECT_TRUE(type_traits(Type::kF64).is_float);
  EXPECT_FALSE(type_traits(Type::kI8).is_float);
  EXPECT_FALSE(type_traits(Type::kI64).is_quantized);
}

// Tessera's type table (src/types.cpp) and the GGUF reader's (src/gguf/types.cpp) each list the sizes of the same
// types: both are checked against ggml's block structs above and in test_gguf.cpp; here they must also agree with
// each other, row for row, so that a tensor read from a file gets the bytes the planner gives it.
TEST(Types, TheGgufTableAgreesWithTesseraTypes) {
  int gguf_types = 0;
  for (const gguf::TypeInfo& info : gguf::type_table()) {
    if (info.removed) continue;
    ++gguf_types;
    SCOPED_TRACE(info.name);
    Type t = Type::kCount;
    ASSERT_TRUE(type_from_gguf_id(static_cast<int>(info.id), &t));
    EXPECT_STRCASEEQ(type_name(t), info.name);
    EXPECT_EQ(type_traits(t).block_size, static_cast<int64_t>(info.block_size));
    EXPECT_EQ(type_traits(t).type_size, static_cast<size_t>(info.type_size));
  }
  EXPECT_EQ(gguf_types, kTypeCount);  // every Tessera type is a GGUF type, and the reverse
}

TEST(Types, NamesAndGgufIdsRoundTrip) {
  for (int i = 0; i < kTypeCount; ++i) {
    const Type t = static_cast<Type>(i);
    SCOPED_TRACE(type_name(t));
    Type back = Type::kCount;
    ASSERT_TRUE(type_from_name(type_name(t), &back));
    EXPECT_EQ(back, t);
    back = Type::kCount;
    ASSERT_TRUE(type_from_gguf_id(type_traits(t).gguf_id, &back));
    EXPECT_EQ(back, t);
  }
  Type t = Type::kF32;
  EXPECT_TRUE(type_from_name("q6_K", &t));  // as ggml prints it
  EXPECT_EQ(t, Type::kQ6_K);
  EXPECT_TRUE(type_from_name("IQ2_XXS", &t));
  EXPECT_EQ(t, Type::kIQ2_XXS);
  t = Type::kF32;
  for (const char* unknown : {"q4_k_m", "q9_0", "q4_2", "q4_0_4_4", "iq4_nl_4_4", "f8", "", "invalid", "q6_k "}) {
    EXPECT_FALSE(type_from_name(unknown, &t)) << '"' << unknown << '"';
  }
  EXPECT_EQ(t, Type::kF32) << "a failed parse leaves the output alone";
  // The ids GGUF removed (q4_2, q4_3, the repacked q4_0 and iq4_nl variants) and ids out of range.
  for (int id : {4, 5, 31, 32, 33, 36, 37, 38, 43, 100, -1}) {
    EXPECT_FALSE(type_from_gguf_id(id, &t)) << id;
  }
  EXPECT_EQ(t, Type::kF32);
  EXPECT_EQ(type_traits(static_cast<Type>(99)).gguf_id, -1);
}
