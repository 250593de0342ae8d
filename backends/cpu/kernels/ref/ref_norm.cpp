// Reference kernels: RMS_NORM, NORM, SUM_ROWS, SOFT_MAX, ROPE. Sums and statistics in f64.
#include <cmath>
#include <vector>

#include "ref_ops.h"
#include "tessera/rope.h"

namespace tessera::cpu::ref {

// ---- RMS_NORM: x / sqrt(mean(x^2) + eps); NORM: (x - mean) / sqrt(var + eps). op_params[0] = f32 eps ----

bool check_norm(const Tensor& node) { return same_as_float_src0(node); }

Status run_norm(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const double eps = get_op_param<float>(node, 0);
  const int64_t n = a.ne[0];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    double mean = 0.0;  // subtracted by NORM only
    double sum2 = 0.0;
    if (node.op == Op::kNorm) {
      double sum = 0.0;
      for (float v : x) sum += v;
      mean = sum / static_cast<double>(n);
    }
    for (float v : x) sum2 += (v - mean) * (v - mean);
    const double inv = 1.0 / std::sqrt(sum2 / static_cast<double>(n) + eps);
    for (float& v : x) v = static_cast<float>((v - mean) * inv);
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- SUM_ROWS: node [1, ne1, ne2, ne3] ----

bool check_sum_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (!src_ok(a) || !is_float_type(a->type) || node.type != a->type) return false;
  return node.ne[0] == 1 && node.ne[1] == a->ne[1] && node.ne[2] == a->ne[2] && node.ne[3] == a->ne[3];
}

Status run_sum_rows(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    double sum = 0.0;
    for (float v : x) sum += v;
    const float out = static_cast<float>(sum);
    store_row(node, d.i1, d.i2, d.i3, &out);
  }
  return Status::Ok();
}

// ---- SOFT_MAX: softmax(a * scale + mask) along ne0. src1 = mask (optional), src2 = sinks (optional, f32 [ne2]),
// op_params[0] = f32 scale. A sink joins the denominator as exp(sink[i2] - m), m the maximum over row and sink ----

bool check_soft_max(const Tensor& node) {
  if (!same_as_float_src0(node)) return false;
  const Tensor& a = *node.src[0];
  const Tensor* m = node.src[1];
  const Tensor* sk = node.src[2];
  if (sk != nullptr && (!src_ok(sk) || sk->type != Type::kF32 || sk->ne[0] != a.ne[2] || nelements(*sk) != a.ne[2])) {
    return false;
  }
  if (m == nullptr) return true;
  if (!src_ok(m) || (m->type != Type::kF32 && m->type != Type::kF16)) return false;
  // (a mask dimension of 1, the usual case, without a division)
  return m->ne[0] == a.ne[0] && m->ne[1] >= a.ne[1] && m->ne[2] > 0 && m->ne[3] > 0 &&
         (m->ne[2] == 1 || a.ne[2] % m->ne[2] == 0) && (m->ne[3] == 1 || a.ne[3] % m->ne[3] == 0);
}

Status run_soft_max(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor* m = node.src[1];
  const Tensor* sk = node.src[2];
  const float scale = get_op_param<float>(node, 0);
  const int64_t n = a.ne[0];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(n)), mrow(static_cast<size_t>(m != nullptr ? n : 0));
  std::vector<double> e(static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    if (m != nullptr) load_row(*m, d.i1, d.i2 % m->ne[2], d.i3 % m->ne[3], mrow.data());
    bool all_neg_inf = true;
    float mx = -INFINITY;
    for (int64_t i = 0; i < n; ++i) {
      float v = x[static_cast<size_t>(i)] * scale;
      if (m != nullptr) v += mrow[static_cast<size_t>(i)];
      x[static_cast<size_t>(i)] = v;
      if (v != -INFINITY) all_neg_inf = false;
      if (v > mx) mx = v;
    }
    const float sink = sk != nullptr ? load_f32(*sk, d.i2, 0, 0, 0) : -INFINITY;
    if (sink > mx) mx = sink;
    if (all_neg_inf) {
      for (float& v : x) v = 0.0f;
    } else {
      double sum = sk != nullptr ? std::exp(static_cast<double>(sink) - mx) : 0.0;
      for (int64_t i = 0; i < n; ++i) {
        e[static_cast<size_t>(i)] = std::exp(static_cast<double>(x[static_cast<size_t>(i)]) - mx);
        sum += e[static_cast<size_t>(i)];
      }
      for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(e[static_cast<size_t>(i)] / sum);
    }
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- ROPE: src1 = pos i32 [ne2], src2 = freq_factors f32 (optional).
// op_params: [0] n_dims, [1] RopeMode, [2] f32 freq_base, [3] f32 freq_scale, [4..8] YaRN (tessera/rope.h) ----

bool check_rope(const Tensor& node) {
  if (!same_as_float_src0(node)) return false;
  const Tensor& a = *node.src[0];
  const Tensor* pos = node.src[1];
  const Tensor* ff = node.src[2];
  const int32_t n_dims = node.op_params[0];
  const int32_t mode = node.op_params[1];
  if (mode != static_cast<int32_t>(RopeMode::kNormal) && mode != static_cast<int32_t>(RopeMode::kNeox)) return false;
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a.ne[0]) return false;
  if (!src_ok(pos) || pos->type != Type::kI32 || pos->ne[0] != a.ne[2] || nelements(*pos) != a.ne[2]) return false;
  if (ff != nullptr && (!src_ok(ff) || ff->type != Type::kF32 || ff->ne[0] < n_dims / 2)) return false;
  return rope_yarn_invalid(rope_yarn_of(node), get_op_param<float>(node, 3)) == nullptr;
}

Status run_rope(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor& pos = *node.src[1];
  const Tensor* ff = node.src[2];
  const int64_t n_dims = node.op_params[0];
  const bool neox = node.op_params[1] == static_cast<int32_t>(RopeMode::kNeox);
  const double freq_base = get_op_param<float>(node, 2);
  const double freq_scale = get_op_param<float>(node, 3);
  const int64_t half = n_dims / 2;
  const RopeYarn yarn = rope_yarn_of(node);
  const RopeCorrDims corr = rope_yarn_corr_dims(static_cast<int>(n_dims), yarn.n_ctx_orig, get_op_param<float>(node, 2),
                                                yarn.beta_fast, yarn.beta_slow);
  const double mscale = rope_yarn_mscale(yarn, get_op_param<float>(node, 3));
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0])), out(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);  // (head, token, i3)
    load_row(a, d.i1, d.i2, d.i3, x.data());
    out = x;  // dims >= n_dims are copied
    const double position = load_i32(pos, d.i2, 0, 0, 0);
    for (int64_t i = 0; i < half; ++i) {
      const double factor = ff != nullptr ? load_f32(*ff, i, 0, 0, 0) : 1.0;
      const double extrap =
          position * std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims)) / factor;
      const double theta = rope_yarn_theta(extrap, freq_scale, corr, i, yarn.ext_factor);
      const double c = std::cos(theta) * mscale;
      const double s = std::sin(theta) * mscale;
      const int64_t j0 = neox ? i : 2 * i;
      const int64_t j1 = neox ? i + half : 2 * i + 1;
      const double x0 = x[static_cast<size_t>(j0)];
      const double x1 = x[static_cast<size_t>(j1)];
      out[static_cast<size_t>(j0)] = static_cast<float>(x0 * c - x1 * s);
      out[static_cast<size_t>(j1)] = static_cast<float>(x0 * s + x1 * c);
    }
    store_row(node, d.i1, d.i2, d.i3, out.data());
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
