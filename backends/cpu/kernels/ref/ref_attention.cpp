// Reference kernel: FLASH_ATTN_EXT, computed the plain way (scores, softmax, weighted sum of values) in f64.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ref_ops.h"

namespace tessera::cpu::ref {

// Sources: q f32 [D, n_q, H, B], k Weight [D, n_kv, H_kv, B], v Weight [Dv, n_kv, H_kv, B], mask (optional, f32/f16)
// [n_kv, >= n_q, 1, 1], sinks (optional, f32 [H]). op_params[0] = f32 scale. Result f32 [Dv, H, n_q, B].
bool check_flash_attn_ext(const Tensor& node) {
  const Tensor* q = node.src[0];
  const Tensor* k = node.src[1];
  const Tensor* v = node.src[2];
  const Tensor* mask = node.src[3];
  const Tensor* sinks = node.src[4];
  if (!src_ok(q) || !src_ok(k) || !src_ok(v)) return false;
  if (q->type != Type::kF32 || !is_weight_type(k->type) || !is_weight_type(v->type)) return false;
  if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) return false;
  if (k->ne[2] <= 0 || q->ne[2] % k->ne[2] != 0 || k->ne[3] != q->ne[3]) return false;
  if (mask != nullptr) {
    if (!src_ok(mask) || (mask->type != Type::kF32 && mask->type != Type::kF16)) return false;
    if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] || mask->ne[2] != 1 || mask->ne[3] != 1) return false;
  }
  if (sinks != nullptr) {
    if (!src_ok(sinks) || sinks->type != Type::kF32) return false;
    if (sinks->ne[0] != q->ne[2] || nelements(*sinks) != q->ne[2]) return false;
  }
  return node.type == Type::kF32 && node.ne[0] == v->ne[0] && node.ne[1] == q->ne[2] && node.ne[2] == q->ne[1] &&
         node.ne[3] == q->ne[3];
}

// Result rows (h, i, b) are partitioned among threads. For query i of head h (kv head h / (H / H_kv)):
//   s_j = scale * q_i . k_j + mask[j, i];  m = max(max_j s_j, sink[h]);
//   r = sum_j exp(s_j - m) v_j / (exp(sink[h] - m) + sum_j exp(s_j - m)).
// Keys with s_j = -inf contribute nothing; when m = -inf (no finite score, no sink) the row is zero.
Status run_flash_attn_ext(const Tensor& node, const ComputeParams& p) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const Tensor* mask = node.src[3];
  const Tensor* sinks = node.src[4];
  const double scale = get_op_param<float>(node, 0);
  const int64_t D = q.ne[0];
  const int64_t Dv = v.ne[0];
  const int64_t n_kv = k.ne[1];
  const int64_t group = q.ne[2] / k.ne[2];  // q heads per kv head

  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> qrow(static_cast<size_t>(D)), krow(static_cast<size_t>(D)), vrow(static_cast<size_t>(Dv));
  std::vector<double> s(static_cast<size_t>(n_kv)), acc(static_cast<size_t>(Dv));
  std::vector<float> out(static_cast<size_t>(Dv));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);  // (h, i, b)
    const int64_t h = d.i1, i = d.i2, b = d.i3;
    const int64_t hk = h / group;
    load_row(q, i, h, b, qrow.data());

    double m = -INFINITY;
    for (int64_t j = 0; j < n_kv; ++j) {
      load_row(k, j, hk, b, krow.data());
      double dotp = 0.0;
      for (int64_t c = 0; c < D; ++c) {
        dotp += static_cast<double>(qrow[static_cast<size_t>(c)]) * krow[static_cast<size_t>(c)];
      }
      double sj = scale * dotp;
      if (mask != nullptr) sj += load_f32(*mask, j, i, 0, 0);
      s[static_cast<size_t>(j)] = sj;
      if (sj > m) m = sj;
    }
    const double sink = sinks != nullptr ? static_cast<double>(load_f32(*sinks, h, 0, 0, 0)) : -INFINITY;
    if (sink > m) m = sink;

    std::fill(acc.begin(), acc.end(), 0.0);
    if (m != -INFINITY) {
      double denom = sinks != nullptr ? std::exp(sink - m) : 0.0;
      for (int64_t j = 0; j < n_kv; ++j) {
        const double sj = s[static_cast<size_t>(j)];
        if (sj == -INFINITY) continue;
        const double w = std::exp(sj - m);
        denom += w;
        load_row(v, j, hk, b, vrow.data());
        for (int64_t c = 0; c < Dv; ++c) acc[static_cast<size_t>(c)] += w * vrow[static_cast<size_t>(c)];
      }
      for (double& a : acc) a /= denom;
    }
    for (int64_t c = 0; c < Dv; ++c) out[static_cast<size_t>(c)] = static_cast<float>(acc[static_cast<size_t>(c)]);
    store_row(node, h, i, b, out.data());
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
