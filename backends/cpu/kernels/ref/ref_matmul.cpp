// Reference kernels: MUL_MAT, MUL_MAT_ID. Weights are dequantized/converted exactly to f32; dot products accumulate
// in f64 over k in order.
#include <vector>

#include "ref_ops.h"

namespace tessera::cpu::ref {

namespace {

double dot(const float* x, const float* y, int64_t n) {
  double acc = 0.0;
  for (int64_t k = 0; k < n; ++k) acc += static_cast<double>(x[k]) * static_cast<double>(y[k]);
  return acc;
}

constexpr int64_t kChunk = 64;  // result rows sharing one pass over the weight rows

}  // namespace

// ---- MUL_MAT: a Weight [K, M, A2, A3], b f32 [K, N, B2, B3] -> f32 [M, N, B2, B3]
// r[m, n, i2, i3] = sum_k a[k, m, i2 / (B2/A2), i3 / (B3/A3)] * b[k, n, i2, i3] ----

bool check_mul_mat(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (!src_ok(a) || !src_ok(b) || !is_weight_type(a->type) || b->type != Type::kF32) return false;
  if (a->ne[0] != b->ne[0] || a->ne[2] <= 0 || a->ne[3] <= 0) return false;
  // (equal dimensions, the usual case, without a division)
  if ((b->ne[2] != a->ne[2] && b->ne[2] % a->ne[2] != 0) || (b->ne[3] != a->ne[3] && b->ne[3] % a->ne[3] != 0)) {
    return false;
  }
  return node.type == Type::kF32 && node.ne[0] == a->ne[1] && node.ne[1] == b->ne[1] && node.ne[2] == b->ne[2] &&
         node.ne[3] == b->ne[3];
}

// Result rows (n, i2, i3) are partitioned among threads. Each thread walks its rows in chunks of up to kChunk rows
// of one (i2, i3) batch and loads each weight row once per chunk; every result element is the same f64 dot product
// whatever the chunking.
Status run_mul_mat(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0];
  const int64_t M = a.ne[1];
  const int64_t r2 = b.ne[2] / a.ne[2];  // broadcast ratios
  const int64_t r3 = b.ne[3] / a.ne[3];

  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> arow(static_cast<size_t>(K));
  std::vector<float> brows(static_cast<size_t>(kChunk * K));
  std::vector<float> out(static_cast<size_t>(kChunk * M));

  for (int64_t c0 = r0; c0 < r1;) {
    const RowIdx first = row_idx(node, c0);
    // rows c0 .. c1-1: same (i2, i3), at most kChunk of them
    int64_t c1 = c0 + 1;
    while (c1 < r1 && c1 - c0 < kChunk) {
      const RowIdx ri = row_idx(node, c1);
      if (ri.i2 != first.i2 || ri.i3 != first.i3) break;
      ++c1;
    }
    const int64_t nc = c1 - c0;
    for (int64_t c = 0; c < nc; ++c) {
      const RowIdx ri = row_idx(node, c0 + c);
      load_row(b, ri.i1, ri.i2, ri.i3, brows.data() + c * K);
    }
    for (int64_t m = 0; m < M; ++m) {
      load_row(a, m, first.i2 / r2, first.i3 / r3, arow.data());
      for (int64_t c = 0; c < nc; ++c) {
        out[static_cast<size_t>(c * M + m)] = static_cast<float>(dot(arow.data(), brows.data() + c * K, K));
      }
    }
    for (int64_t c = 0; c < nc; ++c) {
      const RowIdx ri = row_idx(node, c0 + c);
      store_row(node, ri.i1, ri.i2, ri.i3, out.data() + c * M);
    }
    c0 = c1;
  }
  return Status::Ok();
}

// ---- MUL_MAT_ID: as Weight [K, M, n_expert], b f32 [K, B1, n_tokens] (B1 = 1 or n_used), ids i32 [n_used,
// n_tokens] -> f32 [M, n_used, n_tokens]; r[:, e, t] = as[:, :, ids[e, t]]^T . b[:, e % B1, t] ----

bool check_mul_mat_id(const Tensor& node) {
  const Tensor* as = node.src[0];
  const Tensor* b = node.src[1];
  const Tensor* ids = node.src[2];
  if (!src_ok(as) || !src_ok(b) || !src_ok(ids)) return false;
  if (!is_weight_type(as->type) || b->type != Type::kF32 || ids->type != Type::kI32) return false;
  if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1) return false;
  const int64_t n_used = ids->ne[0];
  const int64_t n_tokens = ids->ne[1];
  if (as->ne[0] != b->ne[0] || b->ne[2] != n_tokens || (b->ne[1] != 1 && b->ne[1] != n_used)) return false;
  return node.type == Type::kF32 && node.ne[0] == as->ne[1] && node.ne[1] == n_used && node.ne[2] == n_tokens &&
         node.ne[3] == 1;
}

Status run_mul_mat_id(const Tensor& node, const ComputeParams& p) {
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  TS_RETURN_IF_ERROR(validate_ids(node, ids, as.ne[2]));

  const int64_t K = as.ne[0];
  const int64_t M = as.ne[1];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> arow(static_cast<size_t>(K)), brow(static_cast<size_t>(K)), out(static_cast<size_t>(M));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);  // (e, t, 0)
    const int64_t expert = load_i32(ids, d.i1, d.i2, 0, 0);
    load_row(b, d.i1 % b.ne[1], d.i2, 0, brow.data());
    for (int64_t m = 0; m < M; ++m) {
      load_row(as, m, expert, 0, arow.data());
      out[static_cast<size_t>(m)] = static_cast<float>(dot(arow.data(), brow.data(), K));
    }
    store_row(node, d.i1, d.i2, d.i3, out.data());
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
