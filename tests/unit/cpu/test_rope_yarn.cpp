// ROPE with YaRN scaling (rope_ext, tessera/rope.h) against an independent float64 oracle written here from the
// formulas, on the reference kernels and on the optimised CPU kernels; hand-worked values of the correction dims, the
// ramp and one rotation; the builder's range checks.
//
// The oracle's source: B. Peng, J. Quesnelle, H. Fan, E. Shippole, "YaRN: Efficient Context Window Extension of
// Large Language Models", arXiv:2309.00071, sections 3.2 ("NTK-by-parts": r(d) = L / lambda_d rotations of pair d
// over the trained context L, gamma ramp between alpha = beta_slow and beta = beta_fast rotations) and 3.4 (the
// temperature sqrt(1/t) = 0.1 ln(s) + 1 on the embeddings), with ggml's conventions for the correction dims (rounded
// outwards, clamped to [0, n_dims - 1]), ext_factor (the weight of extrapolation), attn_factor and the pair index
// as ramp coordinate (ggml-org/ggml src/ggml-cpu/ops.cpp rope_yarn, rope_yarn_ramp; src/ggml.c
// ggml_rope_yarn_corr_dims). Everything is in double, including the correction dims (their floor and ceil agree
// with the library's float ones unless a value lies within float rounding of an integer, which these inputs avoid).
//
// The inputs are random: the seed is printed; rerun with TESSERA_OP_SEED=<seed>.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "backends/cpu/kernels/opt/opt_kernels.h"
#include "tessera/rope.h"
#include "unit/cpu/op_oracle.h"

namespace tessera {
namespace {

using optest::HT;
using optest::OpCase;

constexpr double kPi = 3.14159265358979323846;

struct YarnCfg {
  int64_t head_dim, n_head, n_tokens;
  int n_dims;
  double base, freq_scale;
  int n_ctx_orig;
  double ext_factor, attn_factor, beta_fast, beta_slow;
  int max_pos;
};

// The pair index whose wavelength 2 pi base^(2d/n_dims) fits `rot` times in n_ctx_orig positions.
double corr_dim(const YarnCfg& c, double rot) {
  return c.n_dims * std::log(c.n_ctx_orig / (2.0 * kPi * rot)) / (2.0 * std::log(c.base));
}

HT oracle(const HT& A, const std::vector<int32_t>& pos, const YarnCfg& c, RopeMode mode, const HT* FF) {
  const double low = std::max(0.0, std::floor(corr_dim(c, c.beta_fast)));
  const double high = std::min(static_cast<double>(c.n_dims - 1), std::ceil(corr_dim(c, c.beta_slow)));
  const double mscale = c.attn_factor * (c.ext_factor != 0.0 ? 1.0 + 0.1 * std::log(1.0 / c.freq_scale) : 1.0);
  HT out = A;
  const int half = c.n_dims / 2;
  for (int64_t t = 0; t < A.ne[2]; ++t) {
    for (int64_t h = 0; h < A.ne[1]; ++h) {
      for (int i = 0; i < half; ++i) {
        double extrap = pos[static_cast<size_t>(t)] * std::pow(c.base, -2.0 * i / c.n_dims);
        if (FF != nullptr) extrap /= FF->v[static_cast<size_t>(i)];
        const double interp = c.freq_scale * extrap;
        double gamma = (i - low) / std::max(0.001, high - low);  // 0 at low, 1 at high
        gamma = std::min(1.0, std::max(0.0, gamma));
        const double w = (1.0 - gamma) * c.ext_factor;  // the weight of extrapolation
        const double theta = interp * (1.0 - w) + extrap * w;
        const int64_t j0 = mode == RopeMode::kNormal ? 2 * i : i;
        const int64_t j1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
        const double x0 = A.at(j0, h, t), x1 = A.at(j1, h, t);
        out.at(j0, h, t) = mscale * (x0 * std::cos(theta) - x1 * std::sin(theta));
        out.at(j1, h, t) = mscale * (x0 * std::sin(theta) + x1 * std::cos(theta));
      }
    }
  }
  return out;
}

RopeYarn yarn_of(const YarnCfg& c) {
  RopeYarn y;
  y.n_ctx_orig = c.n_ctx_orig;
  y.ext_factor = static_cast<float>(c.ext_factor);
  y.attn_factor = static_cast<float>(c.attn_factor);
  y.beta_fast = static_cast<float>(c.beta_fast);
  y.beta_slow = static_cast<float>(c.beta_slow);
  return y;
}

// Random configurations around the real ones: gpt-oss-20b's (64 dims, base 150000, factor 32 over 4096), a partial
// rotation with frequency factors, ext_factor below 1 and an attention factor, and random draws.
std::vector<YarnCfg> configs(OpCase& c) {
  std::vector<YarnCfg> v = {
      {64, 3, 5, 64, 150000.0, 1.0 / 32.0, 4096, 1.0, 1.0, 32.0, 1.0, 131072},
      {72, 2, 4, 32, 10000.0, 0.25, 2048, 0.5, 0.75, 16.0, 2.0, 40000},
  };
  for (int k = 0; k < 4; ++k) {
    const int n_dims = 2 * c.rand_int(2, 48);
    const int head_dim = n_dims + 2 * c.rand_int(0, 3);
    const double scale = 1.0 / c.uniform(1.0f, 64.0f);
    const double beta_slow = c.uniform(0.5f, 4.0f);
    v.push_back({head_dim, c.rand_int(1, 4), c.rand_int(1, 6), n_dims, c.uniform(1000.0f, 1e6f), scale,
                 c.rand_int(256, 32768), c.uniform(0.0f, 1.0f), c.uniform(0.5f, 2.0f),
                 beta_slow * c.uniform(4.0f, 32.0f), beta_slow, 200000});
  }
  return v;
}

void check_against_oracle(cpu::CpuKernels kernels) {
  OpCase seed_case;
  std::printf("rope yarn oracle: seed %u (rerun with TESSERA_OP_SEED=%u)\n", seed_case.seed, seed_case.seed);
  for (const YarnCfg& cfg : configs(seed_case)) {
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      for (bool with_ff : {false, true}) {
        for (Type t : {Type::kF32, Type::kF16}) {
          SCOPED_TRACE("n_dims=" + std::to_string(cfg.n_dims) + " head_dim=" + std::to_string(cfg.head_dim) +
                       " n_ctx_orig=" + std::to_string(cfg.n_ctx_orig) + " ext=" + std::to_string(cfg.ext_factor) +
                       (mode == RopeMode::kNeox ? " neox" : " normal") + (with_ff ? " ff" : "") + " " +
                       optest::tname(t));
          OpCase c;
          c.kernels = kernels;
          HT A, FF;
          Tensor* a = c.rand_input(t, {cfg.head_dim, cfg.n_head, cfg.n_tokens, 1}, &A);
          std::vector<int32_t> pos(static_cast<size_t>(cfg.n_tokens));
          for (int32_t& p : pos) p = c.rand_int(0, cfg.max_pos);
          Tensor* tpos = c.ids_input({cfg.n_tokens, 1, 1, 1}, pos);
          Tensor* ff = with_ff ? c.rand_input(Type::kF32, {cfg.n_dims / 2, 1, 1, 1}, &FF, 1.0f, 4.0f) : nullptr;
          Tensor* out = rope_ext(c.ctx, a, tpos, cfg.n_dims, mode, static_cast<float>(cfg.base),
                                 static_cast<float>(cfg.freq_scale), yarn_of(cfg), ff);
          TS_EXPECT_COMPUTE_OK(c, out);
          if (kernels != cpu::CpuKernels::kReference && t == Type::kF32) {
            EXPECT_TRUE(cpu::opt::supports(*out)) << "the optimised kernel should take " << describe(*out);
          }
          // The oracle takes the library's float parameters as stored (the configs are doubles).
          YarnCfg stored = cfg;
          stored.base = static_cast<float>(cfg.base);
          stored.freq_scale = static_cast<float>(cfg.freq_scale);
          stored.ext_factor = static_cast<float>(cfg.ext_factor);
          stored.attn_factor = static_cast<float>(cfg.attn_factor);
          stored.beta_fast = static_cast<float>(cfg.beta_fast);
          stored.beta_slow = static_cast<float>(cfg.beta_slow);
          optest::expect_nmse(oracle(A, pos, stored, mode, with_ff ? &FF : nullptr), c.read(out), t);
        }
      }
    }
  }
}

TEST(RopeYarn, ReferenceKernelMatchesTheFloat64Oracle) { check_against_oracle(cpu::CpuKernels::kReference); }

TEST(RopeYarn, OptimisedKernelMatchesTheFloat64Oracle) { check_against_oracle(cpu::CpuKernels::kAuto); }

// gpt-oss-20b: n_dims 64, base 150000, n_ctx_orig 4096. corr(32) = 64 ln(4096 / (2 pi 32)) / (2 ln 150000) =
// 64 x 3.01415 / 23.83678 = 8.0928, floored to 8; corr(1) = 64 ln(4096 / (2 pi)) / (2 ln 150000) = 64 x 6.47989 /
// 23.83678 = 17.398, ceiled to 18.
TEST(RopeYarn, HandWorkedCorrectionDimsAndRamp) {
  const RopeCorrDims d = rope_yarn_corr_dims(64, 4096, 150000.0f, 32.0f, 1.0f);
  EXPECT_EQ(d.low, 8.0f);
  EXPECT_EQ(d.high, 18.0f);
  EXPECT_EQ(rope_yarn_ramp(d.low, d.high, 0), 1.0);   // far below low: extrapolates
  EXPECT_EQ(rope_yarn_ramp(d.low, d.high, 8), 1.0);   // at low: still all extrapolation
  EXPECT_EQ(rope_yarn_ramp(d.low, d.high, 13), 0.5);  // half way: (13 - 8) / (18 - 8)
  EXPECT_EQ(rope_yarn_ramp(d.low, d.high, 18), 0.0);  // at high: all interpolation
  EXPECT_EQ(rope_yarn_ramp(d.low, d.high, 31), 0.0);
  // Clamping: n_dims 4, base 10000, n_ctx_orig 64: corr(32) = 4 ln(64 / 201.06) / 18.42 = -0.249 -> floor -1 ->
  // 0; corr(1) = 4 ln(10.186) / 18.42 = 0.504 -> ceil 1.
  const RopeCorrDims e = rope_yarn_corr_dims(4, 64, 10000.0f, 32.0f, 1.0f);
  EXPECT_EQ(e.low, 0.0f);
  EXPECT_EQ(e.high, 1.0f);
  // YaRN's temperature for factor 32: 1 + 0.1 ln 32 = 1.3465736.
  RopeYarn y;
  y.n_ctx_orig = 4096;
  y.ext_factor = 1.0f;
  EXPECT_NEAR(rope_yarn_mscale(y, 1.0f / 32.0f), 1.3465736, 1e-6);
  y.ext_factor = 0.0f;
  y.attn_factor = 0.5f;
  EXPECT_EQ(rope_yarn_mscale(y, 1.0f / 32.0f), 0.5);  // no temperature without extrapolation
}

// One rotation by hand: n_dims = head_dim = 4, base 10000, freq_scale 1/2, n_ctx_orig 64 (low 0, high 1, above),
// ext_factor 1, position 1, x = (1, 0, 1, 0), normal mode. Pair 0 extrapolates: theta = 1; pair 1 interpolates:
// theta = 1/2 x 10000^(-1/2) = 0.005. mscale = 1 + 0.1 ln 2 = 1.0693147. Out = mscale (cos 1, sin 1, cos 0.005,
// sin 0.005) = (0.5777532, 0.8997973, 1.0693014, 0.0053466) (cos 1 = 0.5403023, sin 1 = 0.8414710, cos 0.005 =
// 0.9999875, sin 0.005 = 0.0049999792).
TEST(RopeYarn, HandWorkedRotation) {
  for (cpu::CpuKernels k : {cpu::CpuKernels::kReference, cpu::CpuKernels::kAuto}) {
    OpCase c;
    c.kernels = k;
    Tensor* a = c.input(Type::kF32, {4, 1, 1, 1}, {1.0f, 0.0f, 1.0f, 0.0f});
    Tensor* pos = c.ids_input({1, 1, 1, 1}, {1});
    RopeYarn y;
    y.n_ctx_orig = 64;
    y.ext_factor = 1.0f;
    Tensor* out = rope_ext(c.ctx, a, pos, 4, RopeMode::kNormal, 10000.0f, 0.5f, y);
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT r = c.read(out);
    const double want[4] = {0.5777532, 0.8997973, 1.0693014, 0.0053466};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(r.v[static_cast<size_t>(i)], want[i], 2e-7) << "element " << i;
  }
}

TEST(RopeYarn, BuilderRefusesBadParameters) {
  struct Bad {
    const char* what;
    RopeYarn y;
    float freq_scale;
  };
  std::vector<Bad> bad;
  auto add = [&](const char* what, float freq_scale, auto edit) {
    RopeYarn y;
    y.n_ctx_orig = 4096;
    y.ext_factor = 1.0f;
    edit(y);
    bad.push_back({what, y, freq_scale});
  };
  add("ext_factor", 0.5f, [](RopeYarn& y) { y.ext_factor = 1.5f; });
  add("ext_factor", 0.5f, [](RopeYarn& y) { y.ext_factor = -0.1f; });
  add("attn_factor", 0.5f, [](RopeYarn& y) { y.attn_factor = 0.0f; });
  add("attn_factor", 0.5f, [](RopeYarn& y) { y.attn_factor = INFINITY; });
  add("beta_fast", 0.5f, [](RopeYarn& y) { y.beta_fast = -1.0f; });
  add("beta_slow", 0.5f, [](RopeYarn& y) { y.beta_slow = NAN; });
  add("n_ctx_orig", 0.5f, [](RopeYarn& y) { y.n_ctx_orig = -1; });
  add("n_ctx_orig", 0.5f, [](RopeYarn& y) { y.n_ctx_orig = 0; });
  add("freq_scale", 0.0f, [](RopeYarn&) {});
  for (const Bad& b : bad) {
    Context ctx(ContextParams{.no_alloc = true});
    const int64_t ne[4] = {8, 2, 3, 1};
    const int64_t np[1] = {3};
    Tensor* a = ctx.new_tensor(Type::kF32, 4, ne);
    Tensor* pos = ctx.new_tensor(Type::kI32, 1, np);
    EXPECT_EQ(rope_ext(ctx, a, pos, 8, RopeMode::kNeox, 10000.0f, b.freq_scale, b.y), nullptr) << b.what;
    EXPECT_FALSE(ctx.ok());
    EXPECT_NE(ctx.status().message().find(b.what), std::string::npos) << ctx.status().message();
  }
  // The defaults keep the four-parameter form; YaRN fills slots 4..8 and reads back.
  Context ctx(ContextParams{.no_alloc = true});
  const int64_t ne[4] = {8, 2, 3, 1};
  const int64_t np[1] = {3};
  Tensor* a = ctx.new_tensor(Type::kF32, 4, ne);
  Tensor* pos = ctx.new_tensor(Type::kI32, 1, np);
  Tensor* plain = rope(ctx, a, pos, 8, RopeMode::kNeox);
  ASSERT_NE(plain, nullptr);
  for (int i = 4; i < kMaxOpParams; ++i) EXPECT_EQ(plain->op_params[i], 0) << i;
  RopeYarn y;
  y.n_ctx_orig = 4096;
  y.ext_factor = 1.0f;
  y.beta_fast = 16.0f;
  Tensor* yr = rope_ext(ctx, a, pos, 8, RopeMode::kNeox, 150000.0f, 1.0f / 32.0f, y);
  ASSERT_NE(yr, nullptr);
  EXPECT_EQ(yr->op_params[4], 4096);
  const RopeYarn back = rope_yarn_of(*yr);
  EXPECT_EQ(back.ext_factor, 1.0f);
  EXPECT_EQ(back.attn_factor, 1.0f);
  EXPECT_EQ(back.beta_fast, 16.0f);
  EXPECT_EQ(back.beta_slow, 1.0f);
}

}  // namespace
}  // namespace tessera
