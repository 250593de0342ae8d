// Optimised row ops: ADD/MUL/DIV, SCALE, UNARY, GLU, CLAMP, RMS_NORM/NORM, SOFT_MAX, ROPE, GET_ROWS, FLASH_ATTN_EXT.
// f32 activations with element-contiguous rows (any row strides); other layouts and types use the reference kernels.
// Result rows are taken by the threads in chunks (MyRows); each row is computed by the same sequence of table calls
// whoever computes it. In-place (result over src0) is safe: every table call reads an element before it
// writes the same element, and rows that need a whole input row (norms, soft_max, rope) read it before writing.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "../ref/ref_ops.h"
#include "opt_kernels.h"
#include "tessera/rope.h"

namespace tessera::cpu::opt {

namespace {

bool f32_rows(const Tensor* t) {
  return t != nullptr && t->type == Type::kF32 && t->nb[0] == 4 && reinterpret_cast<uintptr_t>(t->data) % 4 == 0 &&
         t->nb[1] % 4 == 0 && t->nb[2] % 4 == 0 && t->nb[3] % 4 == 0;
}
bool elem_rows(const Tensor* t) {  // f32/f16/bf16 (or i32) with element-contiguous rows at aligned addresses
  if (t == nullptr) return false;
  const size_t u = t->type == Type::kF32 || t->type == Type::kI32 ? 4 : 2;
  if (t->nb[0] != u || reinterpret_cast<uintptr_t>(t->data) % u != 0) return false;
  return t->nb[1] % u == 0 && t->nb[2] % u == 0 && t->nb[3] % u == 0;
}

const float* frow(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return reinterpret_cast<const float*>(row_ptr(t, i1, i2, i3));
}
float* frow_mut(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return reinterpret_cast<float*>(row_ptr_mut(t, i1, i2, i3));
}

// This thread's rows of the result, one by one, taken from the node's rows in chunks (Units): at least 16 KiB of
// result per chunk, or min_rows rows.
class MyRows {
 public:
  MyRows(const Tensor& node, const Params& p, int64_t min_rows = 0)
      : units_(p, 0, ref::row_count(node), min_rows > 0 ? min_rows : 4096 / std::max<int64_t>(1, node.ne[0])) {}
  bool next(int64_t* r) {
    if (++r_ >= end_ && !units_.next(&r_, &end_)) return false;
    *r = r_;
    return true;
  }
  // One past the last row of the current chunk (the rows this thread is sure to compute next).
  int64_t chunk_end() const { return end_; }

 private:
  Units units_;
  int64_t r_ = 0, end_ = 0;
};

// Per-thread scratch: `floats` floats for thread ith.
float* scratch(const Params& p, size_t floats) {
  return reinterpret_cast<float*>(static_cast<char*>(p.work) + static_cast<size_t>(p.ith) * align64(floats * 4));
}

size_t scratch_floats(const Tensor& node) {
  switch (node.op) {
    case Op::kSoftMax: return node.src[1] != nullptr ? static_cast<size_t>(node.ne[0]) : 0;  // f16 mask row
    case Op::kRope: return static_cast<size_t>(node.op_params[0]);                           // cos, sin of n_dims / 2
    default: return 0;
  }
}

}  // namespace

size_t work_size_row_ops(const Tensor& node, int nth) {
  const size_t f = scratch_floats(node);
  return f == 0 ? 0 : static_cast<size_t>(nth) * align64(f * 4);
}

// ---- ADD/MUL/DIV, SCALE, UNARY, GLU, CLAMP ----

bool supports_elementwise(const Tensor& node) {
  if (!f32_rows(&node) || !f32_rows(node.src[0])) return false;
  switch (node.op) {
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: return f32_rows(node.src[1]);
    case Op::kGlu: return node.src[1] == nullptr || f32_rows(node.src[1]);
    default: return true;
  }
}

// gpt-oss's GLU, scalar (one op of a feed-forward block; its matmuls dominate): see docs/ops.md.
static void swiglu_oai_row(const float* g, const float* l, float alpha, float limit, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = std::min(g[i], limit);
    const float y = std::clamp(l[i], -limit, limit);
    z[i] = x / (1.0f + std::exp(-alpha * x)) * (y + 1.0f);
  }
}

// CLAMP, scalar (llama.cpp's MoE graph clamps one value per token): x < lo: lo, x > hi: hi, else x, so NaN stays
// NaN, as in the reference kernel.
static void clamp_row(const float* x, float lo, float hi, float* z, int64_t n) {
  for (int64_t i = 0; i < n; ++i) z[i] = x[i] < lo ? lo : x[i] > hi ? hi : x[i];
}

Status run_elementwise(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& a = *node.src[0];
  const Tensor* b = node.src[1];
  const int64_t n = node.ne[0];
  MyRows rows(node, p);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);
    float* z = frow_mut(node, d.i1, d.i2, d.i3);
    switch (node.op) {
      case Op::kAdd:
      case Op::kMul:
      case Op::kDiv: {
        const int op = node.op == Op::kAdd ? kBinAdd : node.op == Op::kMul ? kBinMul : kBinDiv;
        const float* x = frow(a, d.i1, d.i2, d.i3);
        const float* y = frow(*b, d.i1 % b->ne[1], d.i2 % b->ne[2], d.i3 % b->ne[3]);
        const int64_t nb = b->ne[0];
        if (nb == n) {
          t.binary(op, x, y, z, n);
        } else if (nb == 1) {
          t.binary_scalar(op, x, y[0], z, n);
        } else {
          for (int64_t s = 0; s < n; s += nb) t.binary(op, x + s, y, z + s, nb);
        }
        break;
      }
      case Op::kScale:
        t.scale(frow(a, d.i1, d.i2, d.i3), get_op_param<float>(node, 0), get_op_param<float>(node, 1), z, n);
        break;
      case Op::kUnary: t.unary(node.op_params[0], frow(a, d.i1, d.i2, d.i3), z, n); break;
      case Op::kClamp:
        clamp_row(frow(a, d.i1, d.i2, d.i3), get_op_param<float>(node, 0), get_op_param<float>(node, 1), z, n);
        break;
      case Op::kGlu: {
        const float* x = frow(a, d.i1, d.i2, d.i3);
        if (node.op_params[0] == static_cast<int32_t>(GluOp::kSwigluOai)) {
          const bool swapped = node.op_params[1] != 0;
          const float* g = b != nullptr ? x : swapped ? x + n : x;
          const float* l = b != nullptr ? frow(*b, d.i1, d.i2, d.i3) : swapped ? x : x + n;
          swiglu_oai_row(g, l, get_op_param<float>(node, 2), get_op_param<float>(node, 3), z, n);
        } else if (b != nullptr) {
          t.glu(node.op_params[0], x, frow(*b, d.i1, d.i2, d.i3), z, n);
        } else {
          const bool swapped = node.op_params[1] != 0;
          t.glu(node.op_params[0], swapped ? x + n : x, swapped ? x : x + n, z, n);
        }
        break;
      }
      default: break;
    }
  }
  return Status::Ok();
}

// Rows read more than once (norms, soft_max): after the first pass the row is in the cache, and the hardware
// prefetcher, which follows demand misses, stops fetching the input stream; the next row then starts with cold
// misses. A later pass therefore runs in chunks and asks for the matching chunk of the next input row (null: none)
// as it goes, so the next row arrives while this one computes. fn(c, m) handles elements [c, c + m).
template <typename Fn>
void pass_prefetching_next(const float* next, int64_t n, Fn fn) {
  constexpr int64_t kChunk = 512;  // floats: 2 KiB, 32 cache lines
  constexpr int64_t kLine = 64 / sizeof(float);
  for (int64_t c = 0; c < n; c += kChunk) {
    const int64_t m = std::min(kChunk, n - c);
    if (next != nullptr) {
      for (int64_t k = 0; k < m; k += kLine) __builtin_prefetch(next + c + k);
    }
    fn(c, m);
  }
}

// Row r + 1 of a (f32 rows) if this thread computes it next, else null.
const float* next_row(const Tensor& node, const Tensor& a, int64_t r, const MyRows& rows) {
  if (r + 1 >= rows.chunk_end()) return nullptr;
  const ref::RowIdx d = ref::row_idx(node, r + 1);
  return frow(a, d.i1, d.i2, d.i3);
}

// ---- RMS_NORM, NORM ----

bool supports_norm(const Tensor& node) { return f32_rows(&node) && f32_rows(node.src[0]); }

Status run_norm(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& a = *node.src[0];
  const double eps = get_op_param<float>(node, 0);
  const int64_t n = node.ne[0];
  MyRows rows(node, p);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);
    const float* x = frow(a, d.i1, d.i2, d.i3);
    float* z = frow_mut(node, d.i1, d.i2, d.i3);
    float mean = 0.0f;
    if (node.op == Op::kNorm) mean = static_cast<float>(static_cast<double>(t.sum(x, n)) / static_cast<double>(n));
    const double ss = t.sum_sq_dev(x, mean, n);
    const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
    pass_prefetching_next(next_row(node, a, r, rows), n, [&](int64_t c, int64_t m) {
      if (node.op == Op::kNorm) {
        t.binary_scalar(kBinAdd, x + c, -mean, z + c, m);
        t.scale(z + c, inv, 0.0f, z + c, m);
      } else {
        t.scale(x + c, inv, 0.0f, z + c, m);
      }
    });
  }
  return Status::Ok();
}

// ---- SOFT_MAX ----

bool supports_soft_max(const Tensor& node) {
  const Tensor* m = node.src[1];
  const Tensor* sk = node.src[2];
  return f32_rows(&node) && f32_rows(node.src[0]) && (m == nullptr || elem_rows(m)) &&
         (sk == nullptr || (sk->type == Type::kF32 && nelements(*sk) == node.ne[2]));
}

Status run_soft_max(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& a = *node.src[0];
  const Tensor* m = node.src[1];
  const Tensor* sk = node.src[2];
  const float scale = get_op_param<float>(node, 0);
  const int64_t n = node.ne[0];
  float* mtmp = m != nullptr ? scratch(p, static_cast<size_t>(n)) : nullptr;
  MyRows rows(node, p);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);
    float* z = frow_mut(node, d.i1, d.i2, d.i3);
    const float* mrow = nullptr;
    if (m != nullptr) {
      const char* mr = row_ptr(*m, d.i1, d.i2 % m->ne[2], d.i3 % m->ne[3]);
      if (m->type == Type::kF32) {
        mrow = reinterpret_cast<const float*>(mr);
      } else {
        row_to_f32(t, m->type, mr, mtmp, n);
        mrow = mtmp;
      }
    }
    // Three passes over the row (cache-resident after the first): the max of scale + mask (nothing stored), exp of
    // scale + mask - max with the sum, normalise.
    const float* x = frow(a, d.i1, d.i2, d.i3);
    float mx = t.scale_add_max(x, scale, mrow, n);
    if (mx == -INFINITY) {  // every value -inf: a row of zeros (docs/ops.md)
      std::memset(z, 0, static_cast<size_t>(n) * 4);
      continue;
    }
    float sink = -INFINITY;  // attention sink: joins the maximum and the denominator, no output column
    if (sk != nullptr) std::memcpy(&sink, row_ptr(*sk, 0, 0, 0) + static_cast<size_t>(d.i2) * sk->nb[0], 4);
    if (sink > mx) mx = sink;
    // The exp pass is the long one (compute-bound, the row in L1): the next row is fetched meanwhile. Its sum is
    // taken per chunk, in a fixed order, so it does not depend on the thread count.
    float sum = sk != nullptr ? std::exp(sink - mx) : 0.0f;
    pass_prefetching_next(next_row(node, a, r, rows), n, [&](int64_t c, int64_t k) {
      sum += t.exp_sum_scaled(x + c, scale, mrow != nullptr ? mrow + c : nullptr, mx, z + c, k);
    });
    t.scale(z, 1.0f / sum, 0.0f, z, n);
  }
  return Status::Ok();
}

// ---- ROPE: the angles depend on the position only, so they are computed once per run of rows of one token ----

bool supports_rope(const Tensor& node) {
  const Tensor* ff = node.src[2];
  return f32_rows(&node) && f32_rows(node.src[0]) && elem_rows(node.src[1]) && (ff == nullptr || elem_rows(ff));
}

Status run_rope(const Tensor& node, const Params& p) {
  const Tensor& a = *node.src[0];
  const Tensor& pos = *node.src[1];
  const Tensor* ff = node.src[2];
  const int64_t n_dims = node.op_params[0];
  const bool neox = node.op_params[1] == static_cast<int32_t>(RopeMode::kNeox);
  const double freq_base = get_op_param<float>(node, 2);
  const double freq_scale = get_op_param<float>(node, 3);
  const int64_t half = n_dims / 2;
  const int64_t n = node.ne[0];
  const RopeYarn yarn = rope_yarn_of(node);
  const RopeCorrDims corr = rope_yarn_corr_dims(static_cast<int>(n_dims), yarn.n_ctx_orig, get_op_param<float>(node, 2),
                                                yarn.beta_fast, yarn.beta_slow);
  const double mscale = rope_yarn_mscale(yarn, get_op_param<float>(node, 3));
  float* cs = scratch(p, static_cast<size_t>(n_dims));  // cos[0..half), sin[half..n_dims)
  int64_t cached_token = -1;
  MyRows rows(node, p);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);  // (head, token, i3)
    if (d.i2 != cached_token) {
      int32_t position;
      std::memcpy(&position, row_ptr(pos, 0, 0, 0) + static_cast<size_t>(d.i2) * pos.nb[0], 4);
      for (int64_t i = 0; i < half; ++i) {
        double factor = 1.0;
        if (ff != nullptr) factor = reinterpret_cast<const float*>(row_ptr(*ff, 0, 0, 0))[i];
        const double extrap =
            position * std::pow(freq_base, -2.0 * static_cast<double>(i) / static_cast<double>(n_dims)) / factor;
        const double theta = rope_yarn_theta(extrap, freq_scale, corr, i, yarn.ext_factor);
        cs[i] = static_cast<float>(std::cos(theta) * mscale);
        cs[half + i] = static_cast<float>(std::sin(theta) * mscale);
      }
      cached_token = d.i2;
    }
    const float* x = frow(a, d.i1, d.i2, d.i3);
    float* z = frow_mut(node, d.i1, d.i2, d.i3);
    const int64_t stride = neox ? 1 : 2;  // j0 = i * stride, j1 = j0 + (neox ? half : 1)
    const int64_t off = neox ? half : 1;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t j0 = i * stride;
      const float x0 = x[j0], x1 = x[j0 + off];
      const float c = cs[i], s = cs[half + i];
      z[j0] = x0 * c - x1 * s;
      z[j0 + off] = x0 * s + x1 * c;
    }
    if (z != x && n > n_dims) std::memcpy(z + n_dims, x + n_dims, static_cast<size_t>(n - n_dims) * 4);
  }
  return Status::Ok();
}

// ---- GET_ROWS (weight types to f32) ----

bool supports_get_rows(const Tensor& node) {
  const Tensor* a = node.src[0];
  if (a->type == Type::kI32 || !f32_rows(&node) || !elem_rows(node.src[1])) return false;
  if (a->type == Type::kQ8_0 || a->type == Type::kQ4_0) {
    return reinterpret_cast<uintptr_t>(a->data) % 2 == 0 && a->nb[1] % 2 == 0 && a->nb[2] % 2 == 0 && a->nb[3] % 2 == 0;
  }
  return elem_rows(a);
}

Status run_get_rows(const Tensor& node, const Params& p) {
  const Tensor& a = *node.src[0];
  const Tensor& ids = *node.src[1];
  TS_RETURN_IF_ERROR(ref::validate_ids(node, ids, a.ne[1]));
  MyRows rows(node, p);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);
    int32_t id;
    std::memcpy(&id, row_ptr(ids, d.i2, d.i3, 0) + static_cast<size_t>(d.i1) * ids.nb[0], 4);
    row_to_f32(*p.table, a.type, row_ptr(a, id, d.i2, d.i3), frow_mut(node, d.i1, d.i2, d.i3), node.ne[0]);
  }
  return Status::Ok();
}

// ---- FLASH_ATTN_EXT: q f32, k/v f32/f16/bf16 ----

namespace {
bool kv_ok(const Tensor* t) {
  return t != nullptr && (t->type == Type::kF32 || t->type == Type::kF16 || t->type == Type::kBF16) && elem_rows(t);
}
}  // namespace

bool supports_flash_attn(const Tensor& node) {
  return f32_rows(&node) && f32_rows(node.src[0]) && kv_ok(node.src[1]) && kv_ok(node.src[2]) &&
         (node.src[3] == nullptr || elem_rows(node.src[3])) && (node.src[4] == nullptr || elem_rows(node.src[4]));
}

size_t work_size_flash_attn(const Tensor& node, int nth) {
  const size_t n_kv = static_cast<size_t>(node.src[1]->ne[1]);
  const size_t dv = static_cast<size_t>(node.src[2]->ne[0]);
  return static_cast<size_t>(nth) * align64((2 * n_kv + 2 * dv) * 4);
}

// Per query row: s_j = scale q.k_j + mask; m = max(s, sink); w_j = e^(s_j - m) (0 for -inf);
// r = sum_j w_j v_j / (e^(sink - m) + sum_j w_j). All -inf (and no sink): zeros.
Status run_flash_attn(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const Tensor* mask = node.src[3];
  const Tensor* sinks = node.src[4];
  const float scale = get_op_param<float>(node, 0);
  const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1];
  const int64_t group = q.ne[2] / k.ne[2];
  float* s = scratch(p, static_cast<size_t>(2 * n_kv + 2 * Dv));
  float* mrow = s + n_kv;
  float* acc = mrow + n_kv;
  float* vtmp = acc + Dv;
  MyRows rows(node, p, 1);
  for (int64_t r; rows.next(&r);) {
    const ref::RowIdx d = ref::row_idx(node, r);  // (h, i, b)
    const int64_t h = d.i1, i = d.i2, b = d.i3, hk = h / group;
    const float* qr = frow(q, i, h, b);
    if (mask != nullptr) row_to_f32(t, mask->type, row_ptr(*mask, i, 0, 0), mrow, n_kv);
    for (int64_t j = 0; j < n_kv; ++j) {
      const char* kr = row_ptr(k, j, hk, b);
      float dp;
      switch (k.type) {
        case Type::kF32: dp = t.dot_f32(reinterpret_cast<const float*>(kr), qr, D); break;
        case Type::kF16: dp = t.dot_f16_f32(reinterpret_cast<const uint16_t*>(kr), qr, D); break;
        default: dp = t.dot_bf16_f32(reinterpret_cast<const uint16_t*>(kr), qr, D); break;
      }
      s[j] = scale * dp + (mask != nullptr ? mrow[j] : 0.0f);
    }
    float m = t.max(s, n_kv);
    float sink = -INFINITY;
    if (sinks != nullptr) std::memcpy(&sink, row_ptr(*sinks, 0, 0, 0) + static_cast<size_t>(h) * sinks->nb[0], 4);
    if (sink > m) m = sink;
    float* out = frow_mut(node, h, i, b);
    if (m == -INFINITY) {
      std::memset(out, 0, static_cast<size_t>(Dv) * 4);
      continue;
    }
    float denom = t.exp_sum_scaled(s, 1.0f, nullptr, m, s, n_kv);
    if (sinks != nullptr) denom += std::exp(sink - m);
    std::memset(acc, 0, static_cast<size_t>(Dv) * 4);
    for (int64_t j = 0; j < n_kv; ++j) {
      if (s[j] == 0.0f) continue;  // masked key (or an underflowed weight): contributes nothing
      const char* vr = row_ptr(v, j, hk, b);
      switch (v.type) {
        case Type::kF32: t.axpy(s[j], reinterpret_cast<const float*>(vr), acc, Dv); break;
        case Type::kF16: t.axpy_f16(s[j], reinterpret_cast<const uint16_t*>(vr), acc, Dv); break;
        default:
          t.bf16_to_f32(reinterpret_cast<const uint16_t*>(vr), vtmp, Dv);
          t.axpy(s[j], vtmp, acc, Dv);
          break;
      }
    }
    t.binary_scalar(kBinDiv, acc, denom, out, Dv);
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::opt
