// Reference kernels: ARGSORT, TOP_K. Stable sorts: equal values keep the lower index first. NaNs (never produced by
// valid inputs) are ordered after every number in both orders, so the comparison stays a strict weak order.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "ref_ops.h"

namespace tessera::cpu::ref {

// ---- ARGSORT: op_params[0] = SortOrder; i32 result of a's shape ----

bool check_argsort(const Tensor& node) {
  const Tensor* a = node.src[0];
  const int32_t order = node.op_params[0];
  if (order != static_cast<int32_t>(SortOrder::kAsc) && order != static_cast<int32_t>(SortOrder::kDesc)) return false;
  return src_ok(a) && is_float_type(a->type) && node.type == Type::kI32 && same_ne(node, *a);
}

// ---- TOP_K: op_params[0] = k; i32 result [k, ne1, ne2, ne3]: the indices of the k largest, largest first ----

bool check_top_k(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (!src_ok(a) || !is_float_type(a->type) || node.type != Type::kI32) return false;
  const int64_t k = node.op_params[0];
  return k == node.ne[0] && k <= a->ne[0] && node.ne[1] == a->ne[1] && node.ne[2] == a->ne[2] && node.ne[3] == a->ne[3];
}

// Both ops: sort each row's indices stably (TOP_K: descending) and write the first node.ne0 of them.
Status run_argsort(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const bool desc = node.op == Op::kTopK || node.op_params[0] == static_cast<int32_t>(SortOrder::kDesc);
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0]));
  std::vector<int32_t> idx(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    std::iota(idx.begin(), idx.end(), 0);
    std::stable_sort(idx.begin(), idx.end(), [&](int32_t i, int32_t j) {
      const float u = x[static_cast<size_t>(i)];
      const float v = x[static_cast<size_t>(j)];
      if (std::isnan(u)) return false;
      if (std::isnan(v)) return true;
      return desc ? u > v : u < v;
    });
    for (int64_t i0 = 0; i0 < node.ne[0]; ++i0) store_i32(node, i0, d.i1, d.i2, d.i3, idx[static_cast<size_t>(i0)]);
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
