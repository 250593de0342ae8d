// Reference kernels: CPY, CONT/DUP, GET_ROWS, SET_ROWS.
#include <cstring>
#include <unordered_map>
#include <vector>

#include "ref_ops.h"

namespace tessera::cpu::ref {

namespace {

// Copies a into node in flat order (element n of a -> element n of node); node rows are partitioned among threads.
// Same type: a bit-exact copy of elements (or whole blocks: both ne0 are multiples of 32 so blocks line up), which
// also covers i32 and keeps quantized blocks unchanged. Different types: a -> f32 -> node's type, row by row.
Status copy_flat(const Tensor& node, const Tensor& a, const ComputeParams& p) {
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);

  if (a.type == node.type) {
    const int64_t bs = block_size(a.type);
    const size_t us = unit_size(a.type);
    const int64_t dst_units = node.ne[0] / bs;  // units (elements or blocks) per row
    const int64_t src_units = a.ne[0] / bs;
    for (int64_t r = r0; r < r1; ++r) {
      const RowIdx d = row_idx(node, r);
      for (int64_t u = 0; u < dst_units; ++u) {
        const int64_t f = r * dst_units + u;  // flat unit number, the same in a and node
        const RowIdx s = row_idx(a, f / src_units);
        std::memmove(elem_ptr(node, u * bs, d.i1, d.i2, d.i3), elem_ptr(a, (f % src_units) * bs, s.i1, s.i2, s.i3), us);
      }
    }
    return Status::Ok();
  }

  std::vector<float> row(static_cast<size_t>(node.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    if (a.ne[0] == node.ne[0]) {  // rows correspond one to one
      const RowIdx s = row_idx(a, r);
      load_row(a, s.i1, s.i2, s.i3, row.data());
    } else {
      for (int64_t i0 = 0; i0 < node.ne[0]; ++i0) {
        const int64_t f = r * node.ne[0] + i0;  // flat element number
        const RowIdx s = row_idx(a, f / a.ne[0]);
        row[static_cast<size_t>(i0)] = load_f32(a, f % a.ne[0], s.i1, s.i2, s.i3);
      }
    }
    store_row(node, d.i1, d.i2, d.i3, row.data());
  }
  return Status::Ok();
}

}  // namespace

// The first bad id in flat order is reported, so the message is also the same for every thread.
Status validate_ids(const Tensor& node, const Tensor& ids, int64_t limit) {
  for (int64_t i3 = 0; i3 < ids.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < ids.ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < ids.ne[1]; ++i1) {
        for (int64_t i0 = 0; i0 < ids.ne[0]; ++i0) {
          const int64_t v = load_index(ids, i0, i1, i2, i3);
          if (v < 0 || v >= limit) {
            return TS_ERROR(StatusCode::kFailed,
                            "%s: id %lld at [%lld, %lld, %lld, %lld] of %s is out of range [0, %lld)",
                            describe(node).c_str(), static_cast<long long>(v), static_cast<long long>(i0),
                            static_cast<long long>(i1), static_cast<long long>(i2), static_cast<long long>(i3),
                            describe(ids).c_str(), static_cast<long long>(limit));
          }
        }
      }
    }
  }
  return Status::Ok();
}

// ---- CPY: src0 = a, src1 = b; node is a view of b (or, without src1, a cast: the node has its own memory) ----

bool check_cpy(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if (b == nullptr) {  // a cast: the node is the destination, a's shape
    return src_ok(a) && is_any_type(a->type) && is_any_type(node.type) &&
           (a->type == Type::kI32) == (node.type == Type::kI32) && same_ne(node, *a);
  }
  if (!src_ok(a) || !src_ok(b)) return false;
  if (!is_any_type(a->type) || !is_any_type(b->type)) return false;
  if ((a->type == Type::kI32) != (b->type == Type::kI32)) return false;
  if (nelements(*a) != nelements(*b)) return false;
  return node.type == b->type && same_ne(node, *b);
}

Status run_cpy(const Tensor& node, const ComputeParams& p) { return copy_flat(node, *node.src[0], p); }

// ---- CONT, DUP: src0 = a; node contiguous, a's shape and type ----

bool check_cont(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (!src_ok(a) || !is_any_type(a->type)) return false;
  // CONT may also give the copy another shape of as many elements (cont_4d); DUP keeps the shape
  return node.type == a->type && (same_ne(node, *a) || (node.op == Op::kCont && nelements(node) == nelements(*a)));
}

Status run_cont(const Tensor& node, const ComputeParams& p) { return copy_flat(node, *node.src[0], p); }

// ---- GET_ROWS: src0 = a [ne0, n_rows, ne2, ne3], src1 = ids i32 [n, ne2, ne3] ----

bool check_get_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* ids = node.src[1];
  if (!src_ok(a) || !src_ok(ids)) return false;
  if (!is_any_type(a->type) || ids->type != Type::kI32) return false;
  if (ids->ne[3] != 1 || ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3]) return false;
  if (node.type != (a->type == Type::kI32 ? Type::kI32 : Type::kF32)) return false;
  return node.ne[0] == a->ne[0] && node.ne[1] == ids->ne[0] && node.ne[2] == a->ne[2] && node.ne[3] == a->ne[3];
}

Status run_get_rows(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor& ids = *node.src[1];
  TS_RETURN_IF_ERROR(validate_ids(node, ids, a.ne[1]));

  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> row(static_cast<size_t>(node.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);  // (i, j, k)
    const int64_t id = load_i32(ids, d.i1, d.i2, d.i3, 0);
    if (a.type == Type::kI32) {
      for (int64_t i0 = 0; i0 < node.ne[0]; ++i0) {
        store_i32(node, i0, d.i1, d.i2, d.i3, load_i32(a, i0, id, d.i2, d.i3));
      }
    } else {
      load_row(a, id, d.i2, d.i3, row.data());
      store_row(node, d.i1, d.i2, d.i3, row.data());
    }
  }
  return Status::Ok();
}

// ---- SET_ROWS: src0 = dst [ne0, n_rows, ne2, ne3], src1 = rows f32 [ne0, n, ne2, ne3], src2 = ids i32 [n, ne2, ne3];
// node is a view of dst ----

bool check_set_rows(const Tensor& node) {
  const Tensor* dst = node.src[0];
  const Tensor* rows = node.src[1];
  const Tensor* ids = node.src[2];
  if (!src_ok(dst) || !src_ok(rows) || ids == nullptr) return false;
  // i32 or i64 ids (llama.cpp's are i64; i64 is otherwise a storage-only type, read here as indices only)
  if (ids->type != Type::kI32 && ids->type != Type::kI64) return false;
  if ((ids->ne[0] | ids->ne[1] | ids->ne[2] | ids->ne[3]) < 0) return false;
  if (!is_weight_type(dst->type) || rows->type != Type::kF32) return false;
  if (rows->ne[0] != dst->ne[0] || rows->ne[2] != dst->ne[2] || rows->ne[3] != dst->ne[3]) return false;
  if (ids->ne[0] != rows->ne[1] || ids->ne[1] != rows->ne[2] || ids->ne[2] != rows->ne[3] || ids->ne[3] != 1) {
    return false;
  }
  return node.type == dst->type && same_ne(node, *dst);
}

// Partitioned by source row. When several source rows of one (j, k) slice name the same destination row, the last
// of them wins (as a sequential loop would do) and the others are skipped, so no two threads write the same row.
Status run_set_rows(const Tensor& node, const ComputeParams& p) {
  const Tensor& rows = *node.src[1];
  const Tensor& ids = *node.src[2];
  TS_RETURN_IF_ERROR(validate_ids(node, ids, node.ne[1]));

  int64_t r0, r1;
  partition(row_count(rows), p, &r0, &r1);
  std::vector<float> row(static_cast<size_t>(rows.ne[0]));
  std::unordered_map<int64_t, int64_t> last;  // destination row -> last source row of the current slice
  int64_t slice = -1;
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx s = row_idx(rows, r);  // (i, j, k)
    const int64_t sl = s.i2 + rows.ne[2] * s.i3;
    if (sl != slice) {
      slice = sl;
      last.clear();
      for (int64_t i = 0; i < rows.ne[1]; ++i) last[load_index(ids, i, s.i2, s.i3, 0)] = i;
    }
    const int64_t id = load_index(ids, s.i1, s.i2, s.i3, 0);
    if (last[id] != s.i1) continue;
    load_row(rows, s.i1, s.i2, s.i3, row.data());
    store_row(node, id, s.i2, s.i3, row.data());
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
