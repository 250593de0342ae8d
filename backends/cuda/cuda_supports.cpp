// supports_op of the CUDA backend: the op table of docs/ops.md (the same sources, types and shapes the reference
// kernels accept) narrowed by what the CUDA kernels can launch (grid limits, flash-attention head sizes, naturally
// aligned element strides). Host code only: callable and testable without a GPU.
#include <climits>

#include "tessera/cuda.h"
#include "tessera/rope.h"

namespace tessera::cuda {

namespace {

constexpr int64_t kMaxGridY = 65535;   // matvec / MUL_MAT_ID rows
constexpr int64_t kMaxRows = INT_MAX;  // one block per row
constexpr int64_t kMaxFlashDv = 512;   // 128 threads x 4 output values
constexpr int64_t kMaxFlashD = 8192;   // q row in shared memory (32 KiB) + the score tile
constexpr int64_t kMatvecMaxN = 8;     // must match kernels::kMatvecMaxN

// A type with kernels; storage-only types (types.h) are never claimed.
bool type_known(Type t) { return type_has_kernels(t); }
bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
bool is_float(Type t) { return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16; }
bool is_weight(Type t) { return is_float(t) || is_quant(t); }
bool is_any(Type t) { return is_weight(t) || t == Type::kI32; }

size_t unit_size(Type t) {
  switch (t) {
    case Type::kF32:
    case Type::kI32: return 4;
    case Type::kF16:
    case Type::kBF16: return 2;
    case Type::kQ8_0: return sizeof(BlockQ8_0);
    case Type::kQ4_0: return sizeof(BlockQ4_0);
    default: return 0;
  }
}

// Known type, non-negative dims; quantized: ne0 a multiple of 32 with contiguous blocks. Element types: strides and
// the view offset multiples of the element size (kernels load elements with aligned accesses).
bool layout_ok(const Tensor* t) {
  if (t == nullptr || !type_known(t->type)) return false;
  for (int i = 0; i < kMaxDims; ++i) {
    if (t->ne[i] < 0) return false;
  }
  const size_t us = unit_size(t->type);
  if (is_quant(t->type)) return t->ne[0] % kQK == 0 && t->nb[0] == us;
  for (int i = 0; i < kMaxDims; ++i) {
    if (t->nb[i] % us != 0) return false;
  }
  return t->view_offs % us == 0;
}

bool same_ne(const Tensor& a, const Tensor& b) {
  return a.ne[0] == b.ne[0] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}
int64_t rows_of(const Tensor& t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

bool same_as_float_src0(const Tensor& n) {
  const Tensor* a = n.src[0];
  return layout_ok(a) && is_float(a->type) && n.type == a->type && same_ne(n, *a);
}

bool check_cpy(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  if (b == nullptr) {  // a cast: the node is the destination, a's shape
    return layout_ok(a) && is_any(a->type) && is_any(n.type) && (a->type == Type::kI32) == (n.type == Type::kI32) &&
           same_ne(n, *a);
  }
  if (!layout_ok(a) || !layout_ok(b) || !is_any(a->type) || !is_any(b->type)) return false;
  if ((a->type == Type::kI32) != (b->type == Type::kI32)) return false;
  return nelements(*a) == nelements(*b) && n.type == b->type && same_ne(n, *b);
}

bool check_cont(const Tensor& n) {
  const Tensor* a = n.src[0];
  // CONT may also give the copy another shape of as many elements (cont_4d); DUP keeps the shape
  return layout_ok(a) && is_any(a->type) && n.type == a->type &&
         (same_ne(n, *a) || (n.op == Op::kCont && nelements(n) == nelements(*a)));
}

bool check_binary(const Tensor& n) {
  if (!same_as_float_src0(n)) return false;
  const Tensor& a = *n.src[0];
  const Tensor* b = n.src[1];
  if (!layout_ok(b) || !is_float(b->type)) return false;
  for (int i = 0; i < kMaxDims; ++i) {
    if (b->ne[i] == 0 ? a.ne[i] != 0 : a.ne[i] % b->ne[i] != 0) return false;
  }
  return true;
}

bool check_glu(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  const int32_t op = n.op_params[0];
  if (op < 0 || op >= static_cast<int32_t>(GluOp::kCount)) return false;
  if (!layout_ok(a) || !is_float(a->type) || n.type != a->type) return false;
  if (b != nullptr) return layout_ok(b) && is_float(b->type) && same_ne(*a, *b) && same_ne(n, *a);
  return a->ne[0] % 2 == 0 && n.ne[0] == a->ne[0] / 2 && n.ne[1] == a->ne[1] && n.ne[2] == a->ne[2] &&
         n.ne[3] == a->ne[3];
}

bool check_soft_max(const Tensor& n) {
  if (!same_as_float_src0(n)) return false;
  const Tensor& a = *n.src[0];
  const Tensor* m = n.src[1];
  const Tensor* sk = n.src[2];
  if (sk != nullptr &&
      (!layout_ok(sk) || sk->type != Type::kF32 || sk->ne[0] != a.ne[2] || nelements(*sk) != a.ne[2])) {
    return false;
  }
  if (m == nullptr) return true;
  if (!layout_ok(m) || (m->type != Type::kF32 && m->type != Type::kF16)) return false;
  return m->ne[0] == a.ne[0] && m->ne[1] >= a.ne[1] && m->ne[2] > 0 && m->ne[3] > 0 && a.ne[2] % m->ne[2] == 0 &&
         a.ne[3] % m->ne[3] == 0;
}

bool check_rope(const Tensor& n) {
  if (!same_as_float_src0(n)) return false;
  const Tensor& a = *n.src[0];
  const Tensor* pos = n.src[1];
  const Tensor* ff = n.src[2];
  const int32_t n_dims = n.op_params[0];
  const int32_t mode = n.op_params[1];
  if (mode != static_cast<int32_t>(RopeMode::kNormal) && mode != static_cast<int32_t>(RopeMode::kNeox)) return false;
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a.ne[0]) return false;
  if (!layout_ok(pos) || pos->type != Type::kI32 || pos->ne[0] != a.ne[2] || nelements(*pos) != a.ne[2]) return false;
  if (ff != nullptr && (!layout_ok(ff) || ff->type != Type::kF32 || ff->ne[0] < n_dims / 2)) return false;
  return rope_yarn_invalid(rope_yarn_of(n), get_op_param<float>(n, 3)) == nullptr;
}

bool check_mul_mat(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  if (!layout_ok(a) || !layout_ok(b) || !is_weight(a->type) || b->type != Type::kF32) return false;
  if (a->ne[0] != b->ne[0] || a->ne[2] <= 0 || a->ne[3] <= 0) return false;
  if (b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) return false;
  if (n.type != Type::kF32 || n.ne[0] != a->ne[1] || n.ne[1] != b->ne[1] || n.ne[2] != b->ne[2] ||
      n.ne[3] != b->ne[3]) {
    return false;
  }
  if (!is_contiguous(n)) return false;  // cuBLAS writes whole columns
  if (b->ne[1] <= kMatvecMaxN) return rows_of(n) <= kMaxGridY;
  return a->ne[0] <= INT_MAX && a->ne[1] <= INT_MAX && b->ne[1] <= INT_MAX;
}

bool check_mul_mat_id(const Tensor& n) {
  const Tensor* as = n.src[0];
  const Tensor* b = n.src[1];
  const Tensor* ids = n.src[2];
  if (!layout_ok(as) || !layout_ok(b) || !layout_ok(ids)) return false;
  if (!is_weight(as->type) || b->type != Type::kF32 || ids->type != Type::kI32) return false;
  if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1) return false;
  const int64_t n_used = ids->ne[0];
  const int64_t n_tokens = ids->ne[1];
  if (as->ne[0] != b->ne[0] || b->ne[2] != n_tokens || (b->ne[1] != 1 && b->ne[1] != n_used)) return false;
  if (n.type != Type::kF32 || n.ne[0] != as->ne[1] || n.ne[1] != n_used || n.ne[2] != n_tokens || n.ne[3] != 1) {
    return false;
  }
  return n_used * n_tokens <= kMaxGridY;
}

bool check_get_rows(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* ids = n.src[1];
  if (!layout_ok(a) || !layout_ok(ids) || !is_any(a->type) || ids->type != Type::kI32) return false;
  if (ids->ne[3] != 1 || ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3]) return false;
  if (n.type != (a->type == Type::kI32 ? Type::kI32 : Type::kF32)) return false;
  return n.ne[0] == a->ne[0] && n.ne[1] == ids->ne[0] && n.ne[2] == a->ne[2] && n.ne[3] == a->ne[3];
}

bool check_add_id(const Tensor& n) {
  const Tensor* a = n.src[0];
  const Tensor* b = n.src[1];
  const Tensor* ids = n.src[2];
  if (!layout_ok(a) || !layout_ok(b) || !layout_ok(ids)) return false;
  if (a->type != Type::kF32 || b->type != Type::kF32 || ids->type != Type::kI32 || n.type != Type::kF32) return false;
  return same_ne(n, *a) && a->ne[3] == 1 && b->ne[0] == a->ne[0] && b->ne[2] == 1 && b->ne[3] == 1 &&
         ids->ne[0] == a->ne[1] && ids->ne[1] == a->ne[2] && ids->ne[2] == 1 && ids->ne[3] == 1;
}

bool check_set_rows(const Tensor& n) {
  const Tensor* dst = n.src[0];
  const Tensor* rows = n.src[1];
  const Tensor* ids = n.src[2];
  if (!layout_ok(dst) || !layout_ok(rows) || !layout_ok(ids)) return false;
  if (!is_weight(dst->type) || rows->type != Type::kF32 || ids->type != Type::kI32) return false;
  if (rows->ne[0] != dst->ne[0] || rows->ne[2] != dst->ne[2] || rows->ne[3] != dst->ne[3]) return false;
  if (ids->ne[0] != rows->ne[1] || ids->ne[1] != rows->ne[2] || ids->ne[2] != rows->ne[3] || ids->ne[3] != 1) {
    return false;
  }
  return n.type == dst->type && same_ne(n, *dst) && rows_of(*rows) <= kMaxRows;
}

bool check_sort(const Tensor& n) {
  const Tensor* a = n.src[0];
  if (!layout_ok(a) || !is_float(a->type) || n.type != Type::kI32 || rows_of(*a) > kMaxRows) return false;
  if (n.op == Op::kArgsort) {
    const int32_t order = n.op_params[0];
    if (order != static_cast<int32_t>(SortOrder::kAsc) && order != static_cast<int32_t>(SortOrder::kDesc)) {
      return false;
    }
    return same_ne(n, *a);
  }
  const int64_t k = n.op_params[0];
  return k == n.ne[0] && k <= a->ne[0] && n.ne[1] == a->ne[1] && n.ne[2] == a->ne[2] && n.ne[3] == a->ne[3];
}

bool check_flash_attn(const Tensor& n) {
  const Tensor* q = n.src[0];
  const Tensor* k = n.src[1];
  const Tensor* v = n.src[2];
  const Tensor* mask = n.src[3];
  const Tensor* sinks = n.src[4];
  if (!layout_ok(q) || !layout_ok(k) || !layout_ok(v)) return false;
  if (q->type != Type::kF32 || !is_weight(k->type) || !is_weight(v->type)) return false;
  if (k->ne[0] != q->ne[0] || v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) return false;
  if (k->ne[2] <= 0 || q->ne[2] % k->ne[2] != 0 || k->ne[3] != q->ne[3]) return false;
  if (mask != nullptr) {
    if (!layout_ok(mask) || (mask->type != Type::kF32 && mask->type != Type::kF16)) return false;
    if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] || mask->ne[2] != 1 || mask->ne[3] != 1) return false;
  }
  if (sinks != nullptr) {
    if (!layout_ok(sinks) || sinks->type != Type::kF32) return false;
    if (sinks->ne[0] != q->ne[2] || nelements(*sinks) != q->ne[2]) return false;
  }
  if (n.type != Type::kF32 || n.ne[0] != v->ne[0] || n.ne[1] != q->ne[2] || n.ne[2] != q->ne[1] ||
      n.ne[3] != q->ne[3]) {
    return false;
  }
  return v->ne[0] <= kMaxFlashDv && q->ne[0] <= kMaxFlashD && rows_of(n) <= kMaxRows;
}

}  // namespace

bool supports_node(const Tensor& n) {
  const int op = static_cast<int>(n.op);
  if (op < 0 || op >= kOpCount || !layout_ok(&n)) return false;
  switch (n.op) {
    case Op::kNone:
    case Op::kView:
    case Op::kReshape: return true;
    case Op::kPermute: return !is_quant(n.type) || n.op_params[0] == 0;
    case Op::kTranspose: return !is_quant(n.type);
    case Op::kCpy: return check_cpy(n);
    case Op::kCont:
    case Op::kDup: return check_cont(n);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: return check_binary(n);
    case Op::kScale:
    case Op::kRmsNorm:
    case Op::kNorm: return same_as_float_src0(n) && rows_of(n) <= kMaxRows;
    case Op::kUnary: {
      const int32_t u = n.op_params[0];
      return same_as_float_src0(n) && u >= 0 && u < static_cast<int32_t>(UnaryOp::kCount);
    }
    case Op::kGlu: return check_glu(n);
    case Op::kSumRows: {
      const Tensor* a = n.src[0];
      return layout_ok(a) && is_float(a->type) && n.type == a->type && n.ne[0] == 1 && n.ne[1] == a->ne[1] &&
             n.ne[2] == a->ne[2] && n.ne[3] == a->ne[3] && rows_of(n) <= kMaxRows;
    }
    case Op::kSoftMax: return check_soft_max(n) && rows_of(n) <= kMaxRows;
    case Op::kRope: return check_rope(n) && rows_of(n) <= kMaxRows;
    case Op::kMulMat: return check_mul_mat(n);
    case Op::kMulMatId: return check_mul_mat_id(n);
    case Op::kGetRows: return check_get_rows(n);
    case Op::kSetRows: return check_set_rows(n);
    case Op::kArgsort:
    case Op::kTopK: return check_sort(n);
    case Op::kFlashAttnExt: return check_flash_attn(n);
    case Op::kAddId: return check_add_id(n);
    // No CUDA kernel yet: CLAMP was added in a session without a GPU, and a CUDA kernel lands only once it has run on
    // one (the scheduler places a CLAMP on the CPU meanwhile; tests/gpu/cuda_conformance.cpp lists it).
    case Op::kClamp: return false;
    case Op::kCount: return false;
  }
  return false;
}

int64_t offload_batch_size(const Tensor& op) { return ggml_offload_batch_size(op); }

}  // namespace tessera::cuda
