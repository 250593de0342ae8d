// Shared helpers of the op-correctness tests (test_ops_reference_*.cpp): an independent float64 oracle.
//
// The oracle never calls library kernels or library decoders. The only library code it uses to *build inputs* is the
// exact scalar conversions fp32_to_fp16 / fp32_to_bf16 and the reference quantizers quantize_row_q8_0 / q4_0 (to
// produce input bytes); the values the oracle computes with are always decoded from those bytes by the decoders
// below, written from the storage layouts of types.h.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/backend.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/types.h"

namespace tessera::optest {

// The types the op tests name most.
inline constexpr Type F32 = Type::kF32, F16 = Type::kF16, I32 = Type::kI32, Q8 = Type::kQ8_0, Q4 = Type::kQ4_0;

// A 4-d tensor, or nullptr where the context refuses the shape or type (tests of bad builds expect that).
inline Tensor* shaped(Context& ctx, Type t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return ctx.new_tensor(t, 4, ne);
}

// A test's kernel variant: 0 the reference kernels, otherwise the best this machine has.
inline cpu::CpuKernels kernel_set(int i) { return i == 0 ? cpu::CpuKernels::kReference : cpu::best_kernels(); }

using Shape = std::array<int64_t, 4>;

inline int64_t numel(const Shape& ne) { return ne[0] * ne[1] * ne[2] * ne[3]; }
inline Shape shape_of(const Tensor* t) { return {t->ne[0], t->ne[1], t->ne[2], t->ne[3]}; }
inline std::string shape_str(const Shape& s) {
  std::ostringstream os;
  os << "[" << s[0] << "," << s[1] << "," << s[2] << "," << s[3] << "]";
  return os.str();
}

constexpr Type kFloatTypes[] = {Type::kF32, Type::kF16, Type::kBF16};
constexpr Type kWeightTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0};
constexpr Type kAnyTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kI32, Type::kQ8_0, Type::kQ4_0};

inline bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
// Own names (not the library's) so that test names do not depend on code under test.
inline const char* tname(Type t) {
  switch (t) {
    case Type::kF32: return "f32";
    case Type::kF16: return "f16";
    case Type::kBF16: return "bf16";
    case Type::kI32: return "i32";
    case Type::kQ8_0: return "q8_0";
    case Type::kQ4_0: return "q4_0";
    default: return "bad";
  }
}

// Host tensor of the oracle: logical values in flat order (ne0 fastest), as double.
struct HT {
  Shape ne{1, 1, 1, 1};
  std::vector<double> v;
  HT() = default;
  explicit HT(Shape s, double fill = 0.0) : ne(s), v(static_cast<size_t>(numel(s)), fill) {}
  size_t idx(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const {
    return static_cast<size_t>(((i3 * ne[2] + i2) * ne[1] + i1) * ne[0] + i0);
  }
  double& at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) { return v[idx(i0, i1, i2, i3)]; }
  double at(int64_t i0, int64_t i1 = 0, int64_t i2 = 0, int64_t i3 = 0) const { return v[idx(i0, i1, i2, i3)]; }
};

template <typename F>
void for_each_index(const Shape& ne, F&& f) {
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1)
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) f(i0, i1, i2, i3);
}

// ---------------------------------------------------------------------------------------------------------------
// Independent decoders (from the IEEE / bfloat16 definitions and the block layouts of types.h; little endian).
inline double dec_f16(uint16_t h) {
  const int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -24);  // subnormal: m * 2^-24
  } else if (e == 31) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(m + 1024), e - 25);  // 1.m * 2^(e-15)
  }
  return s ? -v : v;
}
inline double dec_bf16(uint16_t h) {
  const int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
  double v;
  if (e == 0) {
    v = std::ldexp(static_cast<double>(m), -133);  // subnormal: m * 2^-7 * 2^-126
  } else if (e == 255) {
    v = m ? std::numeric_limits<double>::quiet_NaN() : std::numeric_limits<double>::infinity();
  } else {
    v = std::ldexp(static_cast<double>(m + 128), e - 134);  // 1.m * 2^(e-127)
  }
  return s ? -v : v;
}
inline uint16_t rd16(const uint8_t* p) { return static_cast<uint16_t>(p[0] | (p[1] << 8)); }

constexpr size_t kQ8Bytes = 34;  // f16 d + 32 x int8
constexpr size_t kQ4Bytes = 18;  // f16 d + 16 bytes of nibbles

// Bytes of n contiguous values of a type (n a multiple of 32 for quantized types).
inline size_t byte_count(Type type, int64_t n) {
  switch (type) {
    case Type::kF32:
    case Type::kI32: return static_cast<size_t>(n) * 4;
    case Type::kF16:
    case Type::kBF16: return static_cast<size_t>(n) * 2;
    case Type::kQ8_0: return static_cast<size_t>(n / 32) * kQ8Bytes;
    case Type::kQ4_0: return static_cast<size_t>(n / 32) * kQ4Bytes;
    default: return 0;
  }
}

// Decodes n contiguous values (whole blocks for quantized types) to double.
inline std::vector<double> decode(Type type, const uint8_t* p, int64_t n) {
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double v = 0;
    switch (type) {
      case Type::kF32: {
        float f;
        std::memcpy(&f, p + 4 * i, 4);
        v = f;
        break;
      }
      case Type::kI32: {
        int32_t k;
        std::memcpy(&k, p + 4 * i, 4);
        v = k;
        break;
      }
      case Type::kF16: v = dec_f16(rd16(p + 2 * i)); break;
      case Type::kBF16: v = dec_bf16(rd16(p + 2 * i)); break;
      case Type::kQ8_0: {
        const uint8_t* b = p + (i / 32) * kQ8Bytes;
        v = static_cast<int8_t>(b[2 + i % 32]) * dec_f16(rd16(b));
        break;
      }
      case Type::kQ4_0: {
        const uint8_t* b = p + (i / 32) * kQ4Bytes;
        const int j = static_cast<int>(i % 32);
        const int nib = j < 16 ? (b[2 + j] & 0xf) : (b[2 + j - 16] >> 4);
        v = (nib - 8) * dec_f16(rd16(b));
        break;
      }
      default: ADD_FAILURE() << "decode: bad type"; break;
    }
    out[static_cast<size_t>(i)] = v;
  }
  return out;
}

// Input bytes from f32 values (library conversions used only here, to build inputs). i32: values truncated.
inline std::vector<uint8_t> encode(Type type, const std::vector<float>& x) {
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<uint8_t> out(byte_count(type, n));
  switch (type) {
    case Type::kF32: std::memcpy(out.data(), x.data(), out.size()); break;
    case Type::kI32:
      for (int64_t i = 0; i < n; ++i) {
        const int32_t k = static_cast<int32_t>(x[i]);
        std::memcpy(out.data() + 4 * i, &k, 4);
      }
      break;
    case Type::kF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = fp32_to_fp16(x[i]).bits;
        std::memcpy(out.data() + 2 * i, &b, 2);
      }
      break;
    case Type::kBF16:
      for (int64_t i = 0; i < n; ++i) {
        const uint16_t b = fp32_to_bf16(x[i]).bits;
        std::memcpy(out.data() + 2 * i, &b, 2);
      }
      break;
    case Type::kQ8_0: {
      std::vector<BlockQ8_0> blocks(static_cast<size_t>(n / 32));
      quantize_row_q8_0(x.data(), blocks.data(), n);
      std::memcpy(out.data(), blocks.data(), out.size());
      break;
    }
    case Type::kQ4_0: {
      std::vector<BlockQ4_0> blocks(static_cast<size_t>(n / 32));
      quantize_row_q4_0(x.data(), blocks.data(), n);
      std::memcpy(out.data(), blocks.data(), out.size());
      break;
    }
    default: ADD_FAILURE() << "encode: bad type"; break;
  }
  return out;
}

// ---------------------------------------------------------------------------------------------------------------
// Oracle view operations (their own index arithmetic, not the library's strides).

// Dimension i of a becomes dimension ax[i] of the result.
inline HT permute(const HT& a, int ax0, int ax1, int ax2, int ax3) {
  const int ax[4] = {ax0, ax1, ax2, ax3};
  Shape ne{};
  for (int i = 0; i < 4; ++i) ne[ax[i]] = a.ne[i];
  HT r(ne);
  for_each_index(a.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const int64_t i[4] = {i0, i1, i2, i3};
    int64_t j[4];
    for (int k = 0; k < 4; ++k) j[ax[k]] = i[k];
    r.at(j[0], j[1], j[2], j[3]) = a.at(i0, i1, i2, i3);
  });
  return r;
}
inline HT transpose(const HT& a) { return permute(a, 1, 0, 2, 3); }
// View of a contiguous root in *value* units: r(i) = root.v[off + sum_k i_k * st[k]].
inline HT strided(const HT& root, Shape ne, std::array<int64_t, 4> st, int64_t off) {
  HT r(ne);
  for_each_index(ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    r.at(i0, i1, i2, i3) = root.v.at(static_cast<size_t>(off + i0 * st[0] + i1 * st[1] + i2 * st[2] + i3 * st[3]));
  });
  return r;
}
inline HT reshaped(const HT& a, Shape ne) {
  HT r = a;
  r.ne = ne;
  EXPECT_EQ(numel(ne), numel(a.ne));
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// Scalar math of the ops (docs/ops.md, build.h), in double.
inline double silu(double x) { return x / (1.0 + std::exp(-x)); }
inline double gelu(double x) {
  const double c = std::sqrt(2.0 / M_PI);
  return 0.5 * x * (1.0 + std::tanh(c * (x + 0.044715 * x * x * x)));
}

// ---------------------------------------------------------------------------------------------------------------
// Comparison.

// NMSE = sum (a - b)^2 / sum a^2 with a the oracle. When the oracle is all zeros the absolute sum is returned.
inline double nmse(const HT& ref, const HT& out) {
  double num = 0, den = 0;
  for (size_t i = 0; i < ref.v.size(); ++i) {
    const double d = ref.v[i] - out.v[i];
    num += d * d;
    den += ref.v[i] * ref.v[i];
  }
  return den > 0 ? num / den : num;
}
inline size_t count_nonfinite(const HT& t) {
  size_t n = 0;
  for (double x : t.v) n += std::isfinite(x) ? 0 : 1;
  return n;
}

// Unit roundoff of storing a value in a type: f16 has 11 significant bits, so round-to-nearest is off by at most
// 2^-11 relative; bf16 has 8 significant bits (7 stored + the implicit one): at most 2^-8 relative.
inline double unit_roundoff(Type t) {
  switch (t) {
    case Type::kF16: return std::ldexp(1.0, -11);
    case Type::kBF16: return std::ldexp(1.0, -8);
    default: return 0.0;
  }
}
// NMSE tolerance of an op whose result is stored in `out`:
// - f32 result: 1e-6 (f32 arithmetic with f64 sums).
// - f16/bf16 result: the f32 result (relative RMS error <= sqrt(1e-6) = 1e-3 by the f32 budget) is then rounded to
//   the output type, which adds a per-element relative error <= u (unit_roundoff). By the triangle inequality in L2,
//   sqrt(NMSE) <= u + 1e-3, so NMSE <= (u + 1e-3)^2: f16 (2^-11 + 1e-3)^2 ~= 2.2e-6, bf16 (2^-8 + 1e-3)^2 ~= 2.4e-5.
//   (The rounding alone bounds NMSE by u^2: 2^-22 for f16, 2^-16 for bf16.)
inline double nmse_tol(Type out) {
  if (out == Type::kF32) return 1e-6;
  const double u = unit_roundoff(out);
  return (u + 1e-3) * (u + 1e-3);
}

inline std::string first_diffs(const HT& ref, const HT& out, int max_lines = 6) {
  std::ostringstream os;
  int shown = 0;
  for (size_t i = 0; i < ref.v.size() && shown < max_lines; ++i) {
    const double a = ref.v[i], b = out.v[i];
    const bool bad = std::isnan(a) != std::isnan(b) || std::fabs(a - b) > 1e-3 * std::max(1.0, std::fabs(a));
    if (bad) {
      const int64_t i0 = static_cast<int64_t>(i) % ref.ne[0];
      const int64_t r = static_cast<int64_t>(i) / ref.ne[0];
      os << "  [flat " << i << ": i0=" << i0 << " row=" << r << "] expected " << a << " got " << b << "\n";
      ++shown;
    }
  }
  return os.str();
}

// NMSE check of a computed result against the oracle (with the result's type tolerance), no NaN/Inf allowed.
inline void expect_nmse(const HT& ref, const HT& out, Type out_type, const std::string& what = {}) {
  ASSERT_EQ(ref.ne, out.ne) << what << ": shape " << shape_str(out.ne) << ", expected " << shape_str(ref.ne);
  EXPECT_EQ(count_nonfinite(out), 0u) << what << ": NaN/Inf in the result\n" << first_diffs(ref, out);
  const double e = nmse(ref, out);
  // The relative bound holds for normal results. An f16 result below 2^-14 is subnormal: it is rounded to a multiple
  // of 2^-24, an absolute error up to 2^-25 per element (bf16 shares f32's exponent range, so it has no such case).
  // Tiny results (e.g. GELU far in its negative tail) therefore add n * (2^-25)^2 / sum(ref^2) to the bound.
  double tol = nmse_tol(out_type);
  if (out_type == Type::kF16) {
    double ref2 = 0;
    for (double a : ref.v) ref2 += a * a;
    const double abs_err = std::ldexp(1.0, -25);
    if (ref2 > 0) tol += static_cast<double>(ref.v.size()) * abs_err * abs_err / ref2;
  }
  EXPECT_LE(e, tol) << what << ": NMSE " << e << " (type " << tname(out_type) << ")\n" << first_diffs(ref, out);
}
// Bit-exact (value-exact) comparison, used where the op moves or converts values exactly.
inline void expect_exact(const HT& ref, const HT& out, const std::string& what = {}) {
  ASSERT_EQ(ref.ne, out.ne) << what << ": shape " << shape_str(out.ne) << ", expected " << shape_str(ref.ne);
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < ref.v.size(); ++i) {
    const bool same = ref.v[i] == out.v[i] || (std::isnan(ref.v[i]) && std::isnan(out.v[i]));
    if (!same) {
      if (bad < 6) os << "  [flat " << i << "] expected " << ref.v[i] << " got " << out.v[i] << "\n";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << ": " << bad << " of " << ref.v.size() << " values differ\n" << os.str();
}

// Quantized output check. x: the f32 values (exact, as double) that were quantized, flat, whole blocks; bytes: what
// the kernel stored. Per docs/types.h:
//   q8_0: d = amax/127 stored as f16 (|d16 - d| <= 2^-11 d, plus 2^-23 d for the f32 division); q = round(x/d) in
//         [-127, 127]. |x - q d16| <= |x - q d| + |q| |d - d16| <= d/2 + (|x|/d + 1/2) d 2^-11 = d/2 + (|x| + d/2)
//         2^-11. (The same bound holds when the kernel rounds x/d16 instead: error <= d16/2 <= d/2 + d 2^-12.)
//   q4_0: d = max/-8 (max = signed value of largest magnitude), q = clamp(round(x/d) + 8, 0, 15), value (q-8) d16.
//         x/d lies in [-8, 8]; without clamping |x - (q-8)d| <= |d|/2; clamped (x/d >= 7.5) the error is
//         (x/d - 7)|d| <= |d|. With the f16 scale: + (|x| + |d|) 2^-11.
// A slack of 2^-20 * amax per element covers f32 rounding of x * (1/d) next to a rounding boundary.
inline void expect_quantized(Type type, const std::vector<double>& x, const uint8_t* bytes, const std::string& what) {
  ASSERT_TRUE(is_quant(type));
  ASSERT_EQ(x.size() % 32, 0u);
  const size_t bsz = type == Type::kQ8_0 ? kQ8Bytes : kQ4Bytes;
  const std::vector<double> got = decode(type, bytes, static_cast<int64_t>(x.size()));
  const double eps16 = std::ldexp(1.0, -11), eps32 = std::ldexp(1.0, -23);
  size_t bad = 0;
  std::ostringstream os;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    double amax = 0, smax = 0;
    for (size_t j = 0; j < 32; ++j) {
      const double v = x[32 * b + j];
      if (std::fabs(v) > amax) {
        amax = std::fabs(v);
        smax = v;
      }
    }
    const double d = type == Type::kQ8_0 ? amax / 127.0 : smax / -8.0;
    const double d16 = dec_f16(rd16(bytes + b * bsz));
    if (std::fabs(d16 - d) > std::fabs(d) * (eps16 + eps32)) {
      if (bad < 6) os << "  block " << b << ": scale " << d16 << ", expected " << d << "\n";
      ++bad;
    }
    if (type == Type::kQ8_0) {
      for (size_t j = 0; j < 32; ++j) {
        if (static_cast<int8_t>(bytes[b * bsz + 2 + j]) == -128) {
          if (bad < 6) os << "  block " << b << " value " << j << ": q = -128 outside [-127, 127]\n";
          ++bad;
        }
      }
    }
    for (size_t j = 0; j < 32; ++j) {
      const double v = x[32 * b + j], g = got[32 * b + j];
      const double ad = std::fabs(d);
      double lim;
      if (type == Type::kQ8_0) {
        lim = ad / 2 + (std::fabs(v) + ad / 2) * eps16;
      } else {
        const double r = d != 0 ? v / d : 0.0;
        lim = ad * std::max(0.5, r - 7.0) + (std::fabs(v) + ad) * eps16;
      }
      lim += amax * std::ldexp(1.0, -20);
      if (!(std::fabs(g - v) <= lim)) {
        if (bad < 6) os << "  block " << b << " value " << j << ": " << g << " for " << v << " (bound " << lim << ")\n";
        ++bad;
      }
    }
  }
  EXPECT_EQ(bad, 0u) << what << " (" << tname(type) << "): " << bad << " violations\n" << os.str();
}

// f16/bf16 output check per element: round to nearest gives |stored - x| <= u |x| (+ half the smallest subnormal).
inline void expect_rounded(Type type, const std::vector<double>& x, const std::vector<double>& got,
                           const std::string& what) {
  const double u = unit_roundoff(type);
  const double tiny = type == Type::kF16 ? std::ldexp(1.0, -25) : std::ldexp(1.0, -134);
  size_t bad = 0;
  std::ostringstream os;
  for (size_t i = 0; i < x.size(); ++i) {
    if (!(std::fabs(got[i] - x[i]) <= u * std::fabs(x[i]) + tiny)) {
      if (bad < 6) os << "  [" << i << "] " << got[i] << " for " << x[i] << "\n";
      ++bad;
    }
  }
  EXPECT_EQ(bad, 0u) << what << " (" << tname(type) << "): " << bad << " values not correctly rounded\n" << os.str();
}

// Checks that `bytes` (n values of `type`, contiguous) hold the f32 values x as stored by the type's reference
// conversion: exact for f32/i32, rounded for f16/bf16, quantized within the block bound for q8_0/q4_0.
inline void expect_stored(Type type, const std::vector<double>& x, const uint8_t* bytes, const std::string& what) {
  const int64_t n = static_cast<int64_t>(x.size());
  if (is_quant(type)) return expect_quantized(type, x, bytes, what);
  const std::vector<double> got = decode(type, bytes, n);
  if (type == Type::kF16 || type == Type::kBF16) {
    expect_rounded(type, x, got, what);
    HT r({n, 1, 1, 1}), o({n, 1, 1, 1});
    r.v = x;
    o.v = got;
    EXPECT_LE(nmse(r, o), unit_roundoff(type) * unit_roundoff(type)) << what;
    return;
  }
  HT r({n, 1, 1, 1}), o({n, 1, 1, 1});
  r.v = x;
  o.v = got;
  expect_exact(r, o, what);
}

// ---------------------------------------------------------------------------------------------------------------
// One op case: a no_alloc context, inputs with random data, a graph on the CPU backend.

inline uint32_t fresh_seed() {
  if (const char* s = std::getenv("TESSERA_OP_SEED")) return static_cast<uint32_t>(std::strtoul(s, nullptr, 10));
  return std::random_device{}();
}

class OpCase {
 public:
  OpCase()
      : seed(fresh_seed()),
        n_threads(1 + static_cast<int>(seed % 4)),
        trace_(__FILE__, __LINE__,
               "random seed: rerun with TESSERA_OP_SEED=" + std::to_string(seed) +
                   " (n_threads=" + std::to_string(n_threads) + ")"),
        rng(seed),
        ctx(ContextParams{.no_alloc = true}) {}

  const uint32_t seed;
  // The thread count also comes from the seed: results must not depend on it (ref_kernels.h).
  const int n_threads;
  // Which kernels run: the backend's default (optimised where supported), or kReference to test those alone.
  cpu::CpuKernels kernels = cpu::CpuKernels::kAuto;

 private:
  testing::ScopedTrace trace_;  // prints the seed with every failure of the case

 public:
  std::mt19937 rng;
  Context ctx;
  Graph graph;
  std::unique_ptr<Backend> backend;
  std::unique_ptr<Buffer> buffer;

  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
  int32_t rand_int(int32_t lo, int32_t hi) { return std::uniform_int_distribution<int32_t>(lo, hi)(rng); }
  std::vector<float> rand_floats(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> x(static_cast<size_t>(n));
    for (float& v : x) v = uniform(lo, hi);
    return x;
  }
  // Magnitudes in [lo, hi], random sign (denominators).
  std::vector<float> rand_away_from_zero(int64_t n, float lo, float hi) {
    std::vector<float> x = rand_floats(n, lo, hi);
    for (float& v : x) v = rand_int(0, 1) ? v : -v;
    return x;
  }

  // A contiguous leaf of `type` holding `vals` (converted/quantized); *exact receives the stored values decoded by the
  // oracle's own decoder.
  Tensor* input(Type type, Shape ne, const std::vector<float>& vals, HT* exact = nullptr) {
    Tensor* t = ctx.new_tensor(type, 4, ne.data());
    if (t == nullptr) {
      ADD_FAILURE() << "new_tensor(" << tname(type) << ", " << shape_str(ne)
                    << ") failed: " << ctx.status().to_string();
      return nullptr;
    }
    EXPECT_EQ(static_cast<int64_t>(vals.size()), numel(ne));
    std::vector<uint8_t> bytes = encode(type, vals);
    if (exact != nullptr) {
      exact->ne = ne;
      exact->v = decode(type, bytes.data(), numel(ne));
    }
    uploads_.push_back({t, std::move(bytes)});
    return t;
  }
  Tensor* rand_input(Type type, Shape ne, HT* exact = nullptr, float lo = -1.0f, float hi = 1.0f) {
    if (type == Type::kI32) {
      std::vector<float> v(static_cast<size_t>(numel(ne)));
      for (float& x : v) x = static_cast<float>(rand_int(-100000, 100000));
      return input(type, ne, v, exact);
    }
    return input(type, ne, rand_floats(numel(ne), lo, hi), exact);
  }
  Tensor* ids_input(Shape ne, const std::vector<int32_t>& ids) {
    std::vector<float> v(ids.begin(), ids.end());
    return input(Type::kI32, ne, v, nullptr);
  }
  // i64 indices (SET_ROWS takes them, as llama.cpp's cache indices are): their bytes, little-endian, as written.
  Tensor* ids64_input(Shape ne, const std::vector<int64_t>& ids) {
    Tensor* t = ctx.new_tensor(Type::kI64, 4, ne.data());
    if (t == nullptr) {
      ADD_FAILURE() << "new_tensor(i64, " << shape_str(ne) << ") failed: " << ctx.status().to_string();
      return nullptr;
    }
    EXPECT_EQ(static_cast<int64_t>(ids.size()), numel(ne));
    std::vector<uint8_t> bytes(ids.size() * sizeof(int64_t));
    std::memcpy(bytes.data(), ids.data(), bytes.size());
    uploads_.push_back({t, std::move(bytes)});
    return t;
  }

  // Builds the graph of `outs`, allocates every tensor of the context on a CPU backend, uploads the inputs and
  // computes. Build errors are test failures.
  ComputeStatus run(std::vector<Tensor*> outs) {
    if (!ctx.ok()) {
      ADD_FAILURE() << "graph build failed: " << ctx.status().to_string();
      return ComputeStatus::kFailed;
    }
    for (Tensor* o : outs) {
      const Status s = graph.build_forward(o);
      if (!s.ok()) {
        ADD_FAILURE() << "build_forward: " << s.to_string();
        return ComputeStatus::kFailed;
      }
    }
    backend = cpu::make_backend({.n_threads = n_threads, .kernels = kernels});
    if (!backend) {
      ADD_FAILURE() << "no CPU backend";
      return ComputeStatus::kFailed;
    }
    auto buf = alloc_ctx_tensors(ctx, *backend);
    if (!buf.ok()) {
      ADD_FAILURE() << "alloc_ctx_tensors: " << buf.status().to_string();
      return ComputeStatus::kFailed;
    }
    buffer = std::move(buf.value());
    for (auto& u : uploads_) {
      const Status s = tensor_set(*u.t, u.bytes.data(), 0, u.bytes.size());
      if (!s.ok()) {
        ADD_FAILURE() << "tensor_set: " << s.to_string();
        return ComputeStatus::kFailed;
      }
    }
    return backend->graph_compute(graph);
  }
  std::string error() const { return backend ? backend->last_error() : std::string("(no backend)"); }

  std::vector<uint8_t> bytes_of(const Tensor* t) {
    const size_t n = nbytes(*t);
    std::vector<uint8_t> b(n);
    const Status s = tensor_get(*t, b.data(), 0, n);
    EXPECT_TRUE(s.ok()) << s.to_string();
    return b;
  }
  // Reads a contiguous tensor and decodes it with the oracle's decoder.
  HT read(const Tensor* t) {
    EXPECT_TRUE(is_contiguous(*t)) << "result is not contiguous";
    HT h(shape_of(t));
    const std::vector<uint8_t> b = bytes_of(t);
    EXPECT_EQ(b.size(), byte_count(t->type, numel(h.ne)));
    if (b.size() < byte_count(t->type, numel(h.ne))) return h;
    h.v = decode(t->type, b.data(), numel(h.ne));
    return h;
  }

 private:
  struct Upload {
    Tensor* t;
    std::vector<uint8_t> bytes;
  };
  std::vector<Upload> uploads_;
};

#define TS_EXPECT_COMPUTE_OK(c, ...) \
  ASSERT_EQ((c).run({__VA_ARGS__}), ::tessera::ComputeStatus::kSuccess) << (c).error()

}  // namespace tessera::optest
