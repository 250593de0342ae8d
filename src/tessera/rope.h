// ROPE's YaRN parameters (the rest of ggml's rope_ext): how a node stores them and the scalar maths every kernel
// (reference, optimised CPU, the CUDA launcher) shares, so that the correction dims, which are rounded, are computed
// once, the same way everywhere.
//
// YaRN: B. Peng, J. Quesnelle, H. Fan, E. Shippole, "YaRN: Efficient Context Window Extension of Large Language
// Models", arXiv:2309.00071 (2023), section 3.2 to 3.4 ("NTK-by-parts" interpolation and the attention temperature
// sqrt(1/t) = 0.1 ln(s) + 1). The conventions (the correction dims rounded outwards, the ramp over the pair index,
// ext_factor mixing, attn_factor times the temperature multiplying cos and sin) follow ggml's rope_ext
// (ggml-org/ggml, src/ggml-cpu/ops.cpp: rope_yarn, rope_yarn_ramp; src/ggml.c: ggml_rope_yarn_corr_dims), written
// here from their description in docs/ops.md.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "tessera/ops.h"
#include "tessera/tensor.h"

#if defined(__CUDACC__)
#define TESSERA_ROPE_HD __host__ __device__
#else
#define TESSERA_ROPE_HD
#endif

namespace tessera {

// The defaults are plain rope: ext_factor 0 leaves theta = freq_scale * theta_extrap and attn_factor 1 leaves cos and
// sin unscaled; beta_fast 32 and beta_slow 1 are the paper's (and llama.cpp's) defaults.
struct RopeYarn {
  int32_t n_ctx_orig = 0;    // the context the model was trained with (needed when ext_factor != 0)
  float ext_factor = 0.0f;   // how much of the ramp extrapolates: 0 pure interpolation (linear scaling), 1 YaRN
  float attn_factor = 1.0f;  // multiplies cos and sin (with YaRN's temperature when ext_factor != 0)
  float beta_fast = 32.0f;   // rotations over n_ctx_orig above which a pair extrapolates
  float beta_slow = 1.0f;    // rotations below which a pair interpolates
  bool is_default() const {
    return n_ctx_orig == 0 && ext_factor == 0.0f && attn_factor == 1.0f && beta_fast == 32.0f && beta_slow == 1.0f;
  }
};

// op_params of ROPE: [0] n_dims, [1] RopeMode, [2] f32 freq_base, [3] f32 freq_scale, and when the YaRN parameters
// are not the defaults: [4] n_ctx_orig, [5] f32 ext_factor, [6] f32 attn_factor, [7] f32 beta_fast, [8] f32
// beta_slow. Slots 4..8 all zero mean the defaults (attn_factor 0 is refused, so a written set is never all zero):
// graphs without YaRN keep the four-parameter form.
inline bool rope_yarn_slots_zero(const int32_t* p) {
  return p[4] == 0 && p[5] == 0 && p[6] == 0 && p[7] == 0 && p[8] == 0;
}

inline RopeYarn rope_yarn_from_slots(const int32_t* p) {
  RopeYarn y;
  if (rope_yarn_slots_zero(p)) return y;
  auto f = [p](int i) {
    float v;
    std::memcpy(&v, &p[i], 4);
    return v;
  };
  y.n_ctx_orig = p[4];
  y.ext_factor = f(5);
  y.attn_factor = f(6);
  y.beta_fast = f(7);
  y.beta_slow = f(8);
  return y;
}

inline RopeYarn rope_yarn_of(const Tensor& node) { return rope_yarn_from_slots(node.op_params); }

inline void set_rope_yarn(Tensor& node, const RopeYarn& y) {
  for (int i = 4; i <= 8; ++i) node.op_params[i] = 0;
  if (y.is_default()) return;
  node.op_params[4] = y.n_ctx_orig;
  set_op_param<float>(node, 5, y.ext_factor);
  set_op_param<float>(node, 6, y.attn_factor);
  set_op_param<float>(node, 7, y.beta_fast);
  set_op_param<float>(node, 8, y.beta_slow);
}

// Why a YaRN parameter set is invalid (for ROPE's builder and the kernels' checks), or nullptr.
inline const char* rope_yarn_invalid(const RopeYarn& y, float freq_scale) {
  if (!std::isfinite(y.ext_factor) || y.ext_factor < 0.0f || y.ext_factor > 1.0f) return "ext_factor must be in [0, 1]";
  if (!std::isfinite(y.attn_factor) || !(y.attn_factor > 0.0f)) return "attn_factor must be positive and finite";
  if (!std::isfinite(y.beta_fast) || !(y.beta_fast > 0.0f) || !std::isfinite(y.beta_slow) || !(y.beta_slow > 0.0f)) {
    return "beta_fast and beta_slow must be positive and finite";
  }
  if (y.n_ctx_orig < 0) return "n_ctx_orig must be >= 0";
  if (y.ext_factor != 0.0f && y.n_ctx_orig == 0) return "n_ctx_orig must be positive when ext_factor != 0";
  if (y.ext_factor != 0.0f && !(freq_scale > 0.0f)) return "freq_scale must be positive when ext_factor != 0";
  return nullptr;
}

// The pair index i (rotating dims 2i, 2i+1 or i, i + n_dims/2) at which a frequency base^(-2i/n_dims) makes
// n_rot full turns over n_ctx_orig positions: n_ctx_orig * base^(-2i/n_dims) = 2 pi n_rot, solved for i.
inline float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return static_cast<float>(n_dims) * std::log(static_cast<float>(n_ctx_orig) / (n_rot * 2.0f * 3.14159265358979f)) /
         (2.0f * std::log(base));
}

// The ramp's ends: low = floor(corr_dim(beta_fast)) clamped at 0, high = ceil(corr_dim(beta_slow)) clamped at
// n_dims - 1 (float arithmetic, as ggml).
struct RopeCorrDims {
  float low, high;
};
inline RopeCorrDims rope_yarn_corr_dims(int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow) {
  const float start = std::floor(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_fast, freq_base));
  const float end = std::ceil(rope_yarn_corr_dim(n_dims, n_ctx_orig, beta_slow, freq_base));
  return {start > 0.0f ? start : 0.0f, end < static_cast<float>(n_dims - 1) ? end : static_cast<float>(n_dims - 1)};
}

// 1 for pairs i <= low (they extrapolate: high frequencies keep their trained angle), 0 for i >= high (they
// interpolate, scaled by freq_scale), linear between; the span is at least 0.001.
TESSERA_ROPE_HD inline double rope_yarn_ramp(double low, double high, int64_t i) {
  const double span = high - low > 0.001 ? high - low : 0.001;
  double y = (static_cast<double>(i) - low) / span;
  y = y < 0.0 ? 0.0 : (y > 1.0 ? 1.0 : y);
  return 1.0 - y;
}

// The factor on cos and sin: attn_factor, times YaRN's temperature 1 + 0.1 ln(1 / freq_scale) when ext_factor != 0.
inline double rope_yarn_mscale(const RopeYarn& y, float freq_scale) {
  double m = y.attn_factor;
  if (y.ext_factor != 0.0f) m *= 1.0 + 0.1 * std::log(1.0 / static_cast<double>(freq_scale));
  return m;
}

// theta of pair i from its unscaled angle theta_extrap = pos * base^(-2i/n_dims) / freq_factor[i]:
// theta_interp = freq_scale * theta_extrap; mixed by ramp(i) * ext_factor towards theta_extrap.
TESSERA_ROPE_HD inline double rope_yarn_theta(double theta_extrap, double freq_scale, const RopeCorrDims& corr,
                                              int64_t i, double ext_factor) {
  const double interp = freq_scale * theta_extrap;
  if (ext_factor == 0.0) return interp;
  const double mix = rope_yarn_ramp(corr.low, corr.high, i) * ext_factor;
  return interp * (1.0 - mix) + theta_extrap * mix;
}

#if !defined(__CUDACC__)
class Context;

// rope with YaRN scaling (ggml's rope_ext; tessera/rope.h): with theta_extrap = pos[t] * freq_base^(-2i/n_dims) /
// ff[i] and theta_interp = freq_scale * theta_extrap, theta = theta_interp (1 - m) + theta_extrap m where m =
// ramp(i) * ext_factor, ramp 1 at or below the correction dim low, 0 at or above high; cos and sin are multiplied by
// attn_factor, and by 1 + 0.1 ln(1 / freq_scale) when ext_factor != 0. Checked: n_ctx_orig >= 0 (> 0 with
// ext_factor != 0), ext_factor in [0, 1], attn_factor positive, beta_fast and beta_slow positive, all finite, and
// freq_scale positive with ext_factor != 0. With the default RopeYarn it is build.h's rope.
Tensor* rope_ext(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode, float freq_base, float freq_scale,
                 const RopeYarn& yarn, Tensor* freq_factors = nullptr);
#endif

}  // namespace tessera
