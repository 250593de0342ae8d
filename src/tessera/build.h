// Graph-building functions, one per op (docs/ops.md). Each checks shapes and types; on invalid input it records a clear
// error in the context and returns nullptr (see context.h). The exact semantics, which every backend implements and
// every test oracle checks, are in docs/ops.md; the short form is repeated here.
//
// Type sets used below: Float = {f32, f16, bf16}; Weight = Float + every quantized type; Any = every valid type. Weight
// and Any include the storage-only types (types.h): such graphs build, and backends refuse them in supports_op.
#pragma once

#include <cstdint>

#include "tessera/context.h"

namespace tessera {

// ---- views (never compute; alias the source's memory) ----
// Strides nb1..nb3 in bytes; offset in bytes from a's first byte. The span must lie inside a's memory span.
Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset);
Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset);
Tensor* view_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset);
Tensor* view_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2,
                size_t nb3, size_t offset);
// a must be contiguous; element counts must match.
Tensor* reshape_1d(Context& ctx, Tensor* a, int64_t ne0);
Tensor* reshape_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1);
Tensor* reshape_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2);
Tensor* reshape_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
// Dimension i of a becomes dimension axis_i of the result (a permutation of 0..3). Quantized tensors cannot move dim 0.
Tensor* permute(Context& ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3);
// Swaps dimensions 0 and 1 (not for quantized types).
Tensor* transpose(Context& ctx, Tensor* a);

// ---- copies ----
// Copies a into b element by element in flat (row-major, ne0 fastest) order, converting a.type -> b.type. Element
// counts must match; integer types (i8, i16, i32, i64) only to/from integer types. The result is a view of b (same
// shape and type) with op CPY.
Tensor* cpy(Context& ctx, Tensor* a, Tensor* b);
// a converted to `type` in a tensor of its own (ggml_cast): op CPY with no second source, a's shape, contiguous.
// Integer types only to/from integer types; ne0 a multiple of the type's block size.
Tensor* cast(Context& ctx, Tensor* a, Type type);
// A contiguous copy of a (same type, same shape). a: Any.
Tensor* cont(Context& ctx, Tensor* a);
// A contiguous copy of a in the shape [ne0, ne1, ne2, ne3] (ggml_cont_4d): a's elements in flat order, as reshape
// would give them had a been contiguous. Element counts must match; ne0 a multiple of a's block size. a: Any.
Tensor* cont_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
inline Tensor* cont_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1) { return cont_4d(ctx, a, ne0, ne1, 1, 1); }
// Same as cont (kept as its own op, as in the anchor).
Tensor* dup(Context& ctx, Tensor* a);

// ---- element-wise (a: Float, b: Float broadcast to a's shape: a.ne[i] % b.ne[i] == 0; result: a's type/shape) ----
Tensor* add(Context& ctx, Tensor* a, Tensor* b);
Tensor* mul(Context& ctx, Tensor* a, Tensor* b);
Tensor* div(Context& ctx, Tensor* a, Tensor* b);
// Per-expert bias rows (gpt-oss, after MUL_MAT_ID): a f32 [ne0, n_used, n_tokens, 1], b f32 [ne0, n_expert, 1, 1],
// ids i32 [n_used, n_tokens, 1, 1]; r[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]. Result f32, a's shape. An id
// outside [0, n_expert) fails the computation (an error, never a read out of bounds).
Tensor* add_id(Context& ctx, Tensor* a, Tensor* b, Tensor* ids);
// a * s + bias. a: Float.
Tensor* scale(Context& ctx, Tensor* a, float s, float bias = 0.0f);
// ggml_clamp: each element limited to [min, max] (x < min: min; x > max: max; else x, so NaN stays NaN). a: f32;
// result f32, a's shape (op_params [0] f32 min, [1] f32 max). min and max are not NaN, min <= max; either may be
// infinite (llama.cpp's MoE weight normalisation clamps the weights' sum to [6.103515625e-5, +inf]).
Tensor* clamp(Context& ctx, Tensor* a, float min, float max);
// a: Float. SILU x/(1+e^-x); GELU 0.5x(1+tanh(sqrt(2/pi)(x+0.044715x^3))); RELU max(x,0); NEG -x.
Tensor* unary(Context& ctx, Tensor* a, UnaryOp op);
inline Tensor* silu(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::kSilu); }
inline Tensor* gelu(Context& ctx, Tensor* a) { return unary(ctx, a, UnaryOp::kGelu); }
// Gated linear unit. Two-input form: act(a) * b (same shapes). Single-input form (b == nullptr): a.ne0 even, result
// ne0 = a.ne0 / 2, act(first half) * second half (swapped: act(second half) * first half). SWIGLU act = silu, GEGLU
// act = gelu. Result type: a's. SWIGLU_OAI needs its parameters: build it with swiglu_oai (glu refuses it).
Tensor* glu(Context& ctx, Tensor* a, Tensor* b, GluOp op, bool swapped = false);
inline Tensor* swiglu(Context& ctx, Tensor* a, Tensor* b) { return glu(ctx, a, b, GluOp::kSwiglu); }
// gpt-oss's GLU (GLU with op_params [0] SWIGLU_OAI, [1] swapped, [2] f32 alpha, [3] f32 limit), same forms as glu:
// with gate g and linear part l, x = min(g, limit), y = clamp(l, -limit, limit), out = x * sigmoid(alpha x) * (y + 1).
// alpha finite; limit finite and >= 0.
Tensor* swiglu_oai(Context& ctx, Tensor* a, Tensor* b, float alpha, float limit, bool swapped = false);

// ---- reductions / norms (per row of ne0; a: Float; result a's type) ----
// x / sqrt(mean(x^2) + eps)
Tensor* rms_norm(Context& ctx, Tensor* a, float eps);
// (x - mean) / sqrt(var + eps), var the population variance
Tensor* norm(Context& ctx, Tensor* a, float eps);
// result ne0 = 1: the sum of each row
Tensor* sum_rows(Context& ctx, Tensor* a);
// softmax(a * scale + mask) along ne0. mask (optional, f32 or f16): ne0 equal, ne1 >= a.ne1 (row i1 of a uses row i1
// of the mask), broadcast over dims 2,3 (a.ne2 % mask.ne2 == 0, a.ne3 % mask.ne3 == 0). A row of all -inf gives 0s.
// sinks (optional, f32, ne0 = nelements = a.ne2, src2): attention sinks, one logit per head i2 that joins each row's
// denominator unscaled, exp(sinks[i2] - m), m the maximum over the row and the sink; the sink has no output column.
Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask = nullptr, float scale = 1.0f, Tensor* sinks = nullptr);

// ---- positional ----
// Rotary embedding. a: Float [head_dim, n_head, n_tokens, ne3]; pos: i32 [n_tokens]; n_dims even, <= head_dim.
// For i in [0, n_dims/2): theta = pos[t] * freq_scale * freq_base^(-2i/n_dims) / ff[i] (ff = freq_factors, f32
// [n_dims/2], optional, else 1). Pair (x0, x1) = (x[2i], x[2i+1]) in kNormal mode, (x[i], x[i + n_dims/2]) in kNeox
// mode; out0 = x0 cos - x1 sin, out1 = x0 sin + x1 cos. Dims >= n_dims are copied.
Tensor* rope(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode = RopeMode::kNormal,
             float freq_base = 10000.0f, float freq_scale = 1.0f, Tensor* freq_factors = nullptr);

// ---- matmul ----
// a: Weight [K, M, A2, A3]; b: f32 [K, N, B2, B3] with B2 % A2 == 0 and B3 % A3 == 0; result f32 [M, N, B2, B3]:
// r[m, n, i2, i3] = sum_k a[k, m, i2 / (B2/A2), i3 / (B3/A3)] * b[k, n, i2, i3].
Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b);
// Experts. as: Weight [K, M, n_expert]; b: f32 [K, B1, n_tokens] with B1 == 1 or B1 == n_used; ids: i32 [n_used,
// n_tokens] with values in [0, n_expert); result f32 [M, n_used, n_tokens]:
// r[:, e, t] = as[:, :, ids[e, t]]^T . b[:, e % B1, t]. An id out of range makes compute fail (status, no crash).
Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids);

// ---- indexing ----
// a: Any [ne0, n_rows, ne2, ne3]; ids: i32 [n, ne2, ne3]; result [ne0, n, ne2, ne3], f32 (a's type when a is an integer
// type): r[:, i, j, k] = a[:, ids[i, j, k], j, k]. An id out of range makes compute fail.
Tensor* get_rows(Context& ctx, Tensor* a, Tensor* ids);
// Scatter: dst: Weight [ne0, n_rows, ne2, ne3]; rows: f32 [ne0, n, ne2, ne3]; ids: i32 [n, ne2, ne3];
// dst[:, ids[i, j, k], j, k] = rows[:, i, j, k] converted to dst's type. The result is a view of dst with op
// SET_ROWS and sources (dst, rows, ids); other rows of dst are untouched.
Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* rows, Tensor* ids);
// Indices (i32, same shape) that sort each row; ties keep the lower index first (stable). a: Float.
Tensor* argsort(Context& ctx, Tensor* a, SortOrder order);
// Indices (i32, [k, ne1, ne2, ne3]) of the k largest values of each row, largest first, ties lower index first.
Tensor* top_k(Context& ctx, Tensor* a, int k);

// ---- attention ----
// q: f32 [D, n_q, H, B]; k: Weight [D, n_kv, H_kv, B]; v: Weight [Dv, n_kv, H_kv, B]; H % H_kv == 0 (head h uses
// kv head h / (H / H_kv)); mask (optional, f32/f16): [n_kv, >= n_q, 1, 1] added to the scores; sinks (optional, f32
// [H]): an extra logit per head that joins the softmax denominator and contributes no value.
// result f32 [Dv, H, n_q, B]: r[:, h, i, b] = sum_j softmax_j(scale * q_i . k_j + mask[j, i]) v_j.
Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale,
                       Tensor* sinks = nullptr);

}  // namespace tessera
