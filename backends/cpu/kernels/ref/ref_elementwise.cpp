// Reference kernels: ADD, MUL, DIV (with broadcast), SCALE, UNARY, GLU, ADD_ID, CLAMP. Element-wise math in f32.
#include <algorithm>
#include <cmath>
#include <vector>

#include "ref_ops.h"

namespace tessera::cpu::ref {

namespace {

float silu(float x) { return x / (1.0f + std::exp(-x)); }

float gelu(float x) {
  const float kSqrt2OverPi = 0.79788456080286535588f;  // sqrt(2 / pi)
  // 0.5 x (1 + tanh(y)) written as x / (1 + e^(-2y)): the same function, without the cancellation of 1 + tanh(y)
  // for very negative x (which loses all precision in f32 below x = -5).
  const double y = kSqrt2OverPi * (static_cast<double>(x) + 0.044715 * static_cast<double>(x) * x * x);
  return static_cast<float>(static_cast<double>(x) / (1.0 + std::exp(-2.0 * y)));
}

float apply_unary(UnaryOp op, float x) {
  switch (op) {
    case UnaryOp::kSilu: return silu(x);
    case UnaryOp::kGelu: return gelu(x);
    case UnaryOp::kRelu: return x > 0.0f ? x : 0.0f;
    case UnaryOp::kNeg: return -x;
    default: return x;
  }
}

}  // namespace

// ---- ADD, MUL, DIV: node[i] = a[i] op b[i % b.ne] ----

bool check_binary(const Tensor& node) {
  if (!same_as_float_src0(node)) return false;
  const Tensor& a = *node.src[0];
  const Tensor* b = node.src[1];
  if (!src_ok(b) || !is_float_type(b->type)) return false;
  for (int i = 0; i < kMaxDims; ++i) {
    if (a.ne[i] == b->ne[i]) continue;  // the usual case, without a division
    if (b->ne[i] == 0 || a.ne[i] % b->ne[i] != 0) return false;
  }
  return true;
}

Status run_binary(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0])), y(static_cast<size_t>(b.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    load_row(b, d.i1 % b.ne[1], d.i2 % b.ne[2], d.i3 % b.ne[3], y.data());
    for (int64_t i0 = 0; i0 < a.ne[0]; ++i0) {
      const float u = x[static_cast<size_t>(i0)];
      const float v = y[static_cast<size_t>(i0 % b.ne[0])];
      x[static_cast<size_t>(i0)] = node.op == Op::kAdd ? u + v : node.op == Op::kMul ? u * v : u / v;
    }
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- SCALE: a * s + bias ----

bool check_scale(const Tensor& node) { return same_as_float_src0(node); }

Status run_scale(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const float s = get_op_param<float>(node, 0);
  const float bias = get_op_param<float>(node, 1);
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    for (float& v : x) v = v * s + bias;
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- UNARY: op_params[0] = UnaryOp ----

bool check_unary(const Tensor& node) {
  const int32_t op = node.op_params[0];
  return same_as_float_src0(node) && op >= 0 && op < static_cast<int32_t>(UnaryOp::kCount);
}

Status run_unary(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const auto op = static_cast<UnaryOp>(node.op_params[0]);
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    for (float& v : x) v = apply_unary(op, v);
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- GLU: op_params[0] = GluOp, [1] = swapped. act(a) * b, or on halves of a when src1 is absent.
// SWIGLU_OAI ([2] f32 alpha, [3] f32 limit): x = min(gate, limit), y = clamp(lin, -limit, limit),
// x * sigmoid(alpha x) * (y + 1), in double ----

bool check_glu(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  const int32_t op = node.op_params[0];
  if (op < 0 || op >= static_cast<int32_t>(GluOp::kCount)) return false;
  if (!src_ok(a) || !is_float_type(a->type) || node.type != a->type) return false;
  if (b != nullptr) {
    return src_ok(b) && is_float_type(b->type) && same_ne(*a, *b) && same_ne(node, *a);
  }
  return a->ne[0] % 2 == 0 && node.ne[0] == a->ne[0] / 2 && node.ne[1] == a->ne[1] && node.ne[2] == a->ne[2] &&
         node.ne[3] == a->ne[3];
}

Status run_glu(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor* b = node.src[1];
  const auto op = static_cast<GluOp>(node.op_params[0]);
  const UnaryOp act = op == GluOp::kSwiglu ? UnaryOp::kSilu : UnaryOp::kGelu;
  const double alpha = get_op_param<float>(node, 2);
  const double limit = get_op_param<float>(node, 3);
  const bool swapped = node.op_params[1] != 0;
  const int64_t n = node.ne[0];
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0])), y(static_cast<size_t>(b != nullptr ? b->ne[0] : 0));
  std::vector<float> out(static_cast<size_t>(n));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    const float* gate;  // goes through the activation
    const float* lin;
    if (b != nullptr) {
      load_row(*b, d.i1, d.i2, d.i3, y.data());
      gate = x.data();
      lin = y.data();
    } else {
      gate = swapped ? x.data() + n : x.data();
      lin = swapped ? x.data() : x.data() + n;
    }
    if (op == GluOp::kSwigluOai) {
      for (int64_t i = 0; i < n; ++i) {
        const double x = std::min(static_cast<double>(gate[i]), limit);
        const double y = std::clamp(static_cast<double>(lin[i]), -limit, limit);
        out[static_cast<size_t>(i)] = static_cast<float>(x / (1.0 + std::exp(-alpha * x)) * (y + 1.0));
      }
    } else {
      for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = apply_unary(act, gate[i]) * lin[i];
    }
    store_row(node, d.i1, d.i2, d.i3, out.data());
  }
  return Status::Ok();
}

// ---- ADD_ID: src1 = biases f32 [ne0, n_expert], src2 = ids i32 [n_used, n_tokens]; r[:, i1, i2] = a[:, i1, i2] +
// b[:, ids[i1, i2]]. Every id is checked before anything is written ----

bool check_add_id(const Tensor& node) {
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  const Tensor* ids = node.src[2];
  if (!src_ok(a) || !src_ok(b) || !src_ok(ids)) return false;
  if (a->type != Type::kF32 || b->type != Type::kF32 || ids->type != Type::kI32 || node.type != Type::kF32) {
    return false;
  }
  return same_ne(node, *a) && a->ne[3] == 1 && b->ne[0] == a->ne[0] && b->ne[2] == 1 && b->ne[3] == 1 &&
         ids->ne[0] == a->ne[1] && ids->ne[1] == a->ne[2] && ids->ne[2] == 1 && ids->ne[3] == 1;
}

Status run_add_id(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  TS_RETURN_IF_ERROR(validate_ids(node, ids, b.ne[1]));
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0])), y(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    load_row(b, load_i32(ids, d.i1, d.i2, 0, 0), 0, 0, y.data());
    for (size_t i = 0; i < x.size(); ++i) x[i] += y[i];
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

// ---- CLAMP: op_params [0] f32 min, [1] f32 max; x < min: min, x > max: max, else x (NaN stays NaN). f32 only ----

bool check_clamp(const Tensor& node) {
  const float lo = get_op_param<float>(node, 0);
  const float hi = get_op_param<float>(node, 1);
  return same_as_float_src0(node) && node.type == Type::kF32 && !std::isnan(lo) && !std::isnan(hi) && lo <= hi;
}

Status run_clamp(const Tensor& node, const ComputeParams& p) {
  const Tensor& a = *node.src[0];
  const float lo = get_op_param<float>(node, 0);
  const float hi = get_op_param<float>(node, 1);
  int64_t r0, r1;
  partition(row_count(node), p, &r0, &r1);
  std::vector<float> x(static_cast<size_t>(a.ne[0]));
  for (int64_t r = r0; r < r1; ++r) {
    const RowIdx d = row_idx(node, r);
    load_row(a, d.i1, d.i2, d.i3, x.data());
    for (float& v : x) v = v < lo ? lo : v > hi ? hi : v;
    store_row(node, d.i1, d.i2, d.i3, x.data());
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::ref
