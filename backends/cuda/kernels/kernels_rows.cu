// Kernels: element-wise ops (ADD, MUL, DIV with broadcast, SCALE, UNARY, GLU), row ops (RMS_NORM, NORM, SUM_ROWS,
// SOFT_MAX, ROPE) and sorting (ARGSORT, TOP_K). In-place safety (the planner may give ADD, MUL, DIV, SCALE, UNARY,
// RMS_NORM, SOFT_MAX and ROPE their src0's memory): every output element is written by the thread that read that
// element, after every read of the row it depends on (row ops write only after their last block reduction).
#include "common.cuh"

namespace tessera::cuda::kernels {

namespace {

constexpr int kThreads = 256;

__device__ inline float silu_f(float x) { return x / (1.0f + expf(-x)); }
__device__ inline float gelu_f(float x) {
  // As the reference: x / (1 + e^(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3), evaluated in double.
  const double y = 0.79788456080286535588 * (static_cast<double>(x) + 0.044715 * static_cast<double>(x) * x * x);
  return static_cast<float>(static_cast<double>(x) / (1.0 + exp(-2.0 * y)));
}
__device__ inline float apply_unary(int op, float x) {
  switch (op) {
    case 0: return silu_f(x);
    case 1: return gelu_f(x);
    case 2: return x > 0.0f ? x : 0.0f;
    case 3: return -x;
    default: return x;
  }
}

// op: 0 add, 1 mul, 2 div
__global__ void binary_kernel(TensorDesc a, TensorDesc b, TensorDesc out, int64_t n, int op) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    const float u = load_f32(a, i0, i1, i2, i3);
    const float v = load_f32(b, i0 % b.ne[0], i1 % b.ne[1], i2 % b.ne[2], i3 % b.ne[3]);
    store_float(out, i0, i1, i2, i3, op == 0 ? u + v : op == 1 ? u * v : u / v);
  }
}

__global__ void scale_kernel(TensorDesc a, TensorDesc out, int64_t n, float s, float bias) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    store_float(out, i0, i1, i2, i3, load_f32(a, i0, i1, i2, i3) * s + bias);
  }
}

__global__ void unary_kernel(TensorDesc a, TensorDesc out, int64_t n, int op) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    store_float(out, i0, i1, i2, i3, apply_unary(op, load_f32(a, i0, i1, i2, i3)));
  }
}

// GLU: act(gate) * lin; gate/lin from a and b (two-input form) or from the halves of a. op: GluOp (0 SWIGLU,
// 1 GEGLU, 2 SWIGLU_OAI: min(gate, limit) * sigmoid(alpha min(gate, limit)) * (clamp(lin, -limit, limit) + 1)).
__global__ void glu_kernel(TensorDesc a, TensorDesc b, bool has_b, TensorDesc out, int64_t n, int op, bool swapped,
                           float alpha, float limit) {
  const int64_t half = out.ne[0];
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    float gate, lin;
    if (has_b) {
      gate = load_f32(a, i0, i1, i2, i3);
      lin = load_f32(b, i0, i1, i2, i3);
    } else {
      gate = load_f32(a, swapped ? i0 + half : i0, i1, i2, i3);
      lin = load_f32(a, swapped ? i0 : i0 + half, i1, i2, i3);
    }
    if (op == 2) {
      const float x = fminf(gate, limit);
      const float y = fminf(fmaxf(lin, -limit), limit);
      store_float(out, i0, i1, i2, i3, x / (1.0f + expf(-alpha * x)) * (y + 1.0f));
    } else {
      store_float(out, i0, i1, i2, i3, apply_unary(op == 0 ? 0 : 1, gate) * lin);
    }
  }
}

// RMS_NORM (is_norm false) / NORM (true): one block per row.
__global__ void norm_kernel(TensorDesc a, TensorDesc out, float eps, bool is_norm) {
  __shared__ float scratch[32];
  int64_t i1, i2, i3;
  row_coords(out.ne, blockIdx.x, &i1, &i2, &i3);
  const int64_t n = a.ne[0];
  float mean = 0.0f;
  if (is_norm) {
    float s = 0.0f;
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += load_f32(a, c, i1, i2, i3);
    mean = block_sum(s, scratch) / static_cast<float>(n);
  }
  float s2 = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    const float v = load_f32(a, c, i1, i2, i3) - mean;
    s2 += v * v;
  }
  s2 = block_sum(s2, scratch);
  const float inv = rsqrtf(s2 / static_cast<float>(n) + eps);
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) {
    store_float(out, c, i1, i2, i3, (load_f32(a, c, i1, i2, i3) - mean) * inv);
  }
}

__global__ void sum_rows_kernel(TensorDesc a, TensorDesc out) {
  __shared__ float scratch[32];
  int64_t i1, i2, i3;
  row_coords(out.ne, blockIdx.x, &i1, &i2, &i3);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < a.ne[0]; c += blockDim.x) s += load_f32(a, c, i1, i2, i3);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) store_float(out, 0, i1, i2, i3, s);
}

// SOFT_MAX: softmax(a * scale + mask) per row; a row that is all -inf gives zeros.
// SOFT_MAX: one block per row; a sink (has_sinks, one f32 per head i2) joins the maximum and the denominator.
__global__ void soft_max_kernel(TensorDesc a, TensorDesc mask, bool has_mask, TensorDesc sinks, bool has_sinks,
                                TensorDesc out, float scale) {
  __shared__ float scratch[32];
  int64_t i1, i2, i3;
  row_coords(out.ne, blockIdx.x, &i1, &i2, &i3);
  const int64_t n = a.ne[0];
  auto value = [&](int64_t c) {
    float v = load_f32(a, c, i1, i2, i3) * scale;
    if (has_mask) v += load_f32(mask, c, i1, i2 % mask.ne[2], i3 % mask.ne[3]);
    return v;
  };
  float mx = -INFINITY;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) mx = fmaxf(mx, value(c));
  mx = block_max(mx, scratch);
  if (mx == -INFINITY) {  // every value is -inf (or the row is empty)
    __syncthreads();
    for (int64_t c = threadIdx.x; c < n; c += blockDim.x) store_float(out, c, i1, i2, i3, 0.0f);
    return;
  }
  const float sink = has_sinks ? load_f32(sinks, i2, 0, 0, 0) : -INFINITY;
  mx = fmaxf(mx, sink);
  float s = 0.0f;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) s += expf(value(c) - mx);
  s = block_sum(s, scratch);
  if (has_sinks) s += expf(sink - mx);
  const float inv = 1.0f / s;
  for (int64_t c = threadIdx.x; c < n; c += blockDim.x) store_float(out, c, i1, i2, i3, expf(value(c) - mx) * inv);
}

// ROPE: one thread per rotated pair or copied dimension of one row (head, token, i3).
__global__ void rope_kernel(TensorDesc a, TensorDesc pos, TensorDesc ff, bool has_ff, TensorDesc out, int n_dims,
                            bool neox, float freq_base, float freq_scale) {
  int64_t i1, i2, i3;
  row_coords(out.ne, blockIdx.x, &i1, &i2, &i3);
  const int half = n_dims / 2;
  const double position = static_cast<double>(load_i32(pos, i2, 0, 0, 0));
  for (int64_t c = threadIdx.x; c < half + (a.ne[0] - n_dims); c += blockDim.x) {
    if (c < half) {
      const double factor = has_ff ? static_cast<double>(load_f32(ff, c, 0, 0, 0)) : 1.0;
      const double theta = position * static_cast<double>(freq_scale) *
                           pow(static_cast<double>(freq_base), -2.0 * static_cast<double>(c) / n_dims) / factor;
      double sn, cs;
      sincos(theta, &sn, &cs);
      const int64_t j0 = neox ? c : 2 * c;
      const int64_t j1 = neox ? c + half : 2 * c + 1;
      const double x0 = load_f32(a, j0, i1, i2, i3);
      const double x1 = load_f32(a, j1, i1, i2, i3);
      store_float(out, j0, i1, i2, i3, static_cast<float>(x0 * cs - x1 * sn));
      store_float(out, j1, i1, i2, i3, static_cast<float>(x0 * sn + x1 * cs));
    } else {
      const int64_t j = n_dims + (c - half);
      store_float(out, j, i1, i2, i3, load_f32(a, j, i1, i2, i3));
    }
  }
}

// ARGSORT / TOP_K by rank: element i of a row goes to position rank(i) = the number of elements that sort before it
// (stable: ties keep the lower index first; NaNs after every number). O(n^2) per row, exact and deterministic.
__device__ inline bool sorts_before(float u, int64_t i, float v, int64_t j, bool desc) {
  const bool nu = isnan(u), nv = isnan(v);
  if (nu || nv) return nu && nv ? i < j : nv;
  if (u == v) return i < j;
  return desc ? u > v : u < v;
}

__global__ void rank_sort_kernel(TensorDesc a, TensorDesc out, bool desc) {
  int64_t i1, i2, i3;
  row_coords(a.ne, blockIdx.x, &i1, &i2, &i3);
  const int64_t n = a.ne[0];
  const int64_t k = out.ne[0];
  for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
    const float u = load_f32(a, i, i1, i2, i3);
    int64_t rank = 0;
    for (int64_t j = 0; j < n; ++j) {
      if (j != i && sorts_before(load_f32(a, j, i1, i2, i3), j, u, i, desc)) ++rank;
    }
    if (rank < k) store_i32(out, rank, i1, i2, i3, static_cast<int32_t>(i));
  }
}

Status check_rows(int64_t rows, const Tensor& node) {
  if (rows > 0x7fffffff) {
    return TS_ERROR(StatusCode::kUnsupported, "%s has %lld rows, beyond the grid limit", describe(node).c_str(),
                    static_cast<long long>(rows));
  }
  return Status::Ok();
}

int row_threads(int64_t ne0) { return ne0 >= 1024 ? 512 : ne0 >= 256 ? 256 : ne0 >= 64 ? 64 : 32; }

}  // namespace

Status launch_elementwise(const Tensor& node, LaunchContext& ctx) {
  const int64_t n = nelements(node);
  if (n == 0) return Status::Ok();
  const TensorDesc out = desc_of(node), a = desc_of(*node.src[0]);
  const unsigned grid = grid_for(n, kThreads);
  switch (node.op) {
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: {
      Status st;
      if (launch_binary_fast(node, ctx, &st)) return st;
      const int op = node.op == Op::kAdd ? 0 : node.op == Op::kMul ? 1 : 2;
      binary_kernel<<<grid, kThreads, 0, ctx.stream>>>(a, desc_of(*node.src[1]), out, n, op);
      break;
    }
    case Op::kScale:
      scale_kernel<<<grid, kThreads, 0, ctx.stream>>>(a, out, n, get_op_param<float>(node, 0),
                                                      get_op_param<float>(node, 1));
      break;
    case Op::kUnary: unary_kernel<<<grid, kThreads, 0, ctx.stream>>>(a, out, n, node.op_params[0]); break;
    case Op::kGlu: {
      const bool has_b = node.src[1] != nullptr;
      const TensorDesc b = has_b ? desc_of(*node.src[1]) : a;
      glu_kernel<<<grid, kThreads, 0, ctx.stream>>>(a, b, has_b, out, n, node.op_params[0], node.op_params[1] != 0,
                                                    get_op_param<float>(node, 2), get_op_param<float>(node, 3));
      break;
    }
    default: return TS_ERROR(StatusCode::kUnsupported, "no element-wise kernel for %s", describe(node).c_str());
  }
  return cuda_status(cudaGetLastError(), "element-wise kernel launch", node);
}

Status launch_row_op(const Tensor& node, LaunchContext& ctx) {
  const int64_t rows = node.ne[1] * node.ne[2] * node.ne[3];
  if (rows == 0 || node.ne[0] == 0) return Status::Ok();
  TS_RETURN_IF_ERROR(check_rows(rows, node));
  const TensorDesc out = desc_of(node), a = desc_of(*node.src[0]);
  const unsigned grid = static_cast<unsigned>(rows);
  const int threads = row_threads(node.src[0]->ne[0]);
  switch (node.op) {
    case Op::kRmsNorm:
    case Op::kNorm:
      norm_kernel<<<grid, threads, 0, ctx.stream>>>(a, out, get_op_param<float>(node, 0), node.op == Op::kNorm);
      break;
    case Op::kSumRows: sum_rows_kernel<<<grid, threads, 0, ctx.stream>>>(a, out); break;
    case Op::kSoftMax: {
      const bool has_mask = node.src[1] != nullptr;
      const bool has_sinks = node.src[2] != nullptr;
      soft_max_kernel<<<grid, threads, 0, ctx.stream>>>(a, has_mask ? desc_of(*node.src[1]) : a, has_mask,
                                                        has_sinks ? desc_of(*node.src[2]) : a, has_sinks, out,
                                                        get_op_param<float>(node, 0));
      break;
    }
    case Op::kRope: {
      const bool has_ff = node.src[2] != nullptr;
      rope_kernel<<<grid, 64, 0, ctx.stream>>>(a, desc_of(*node.src[1]), has_ff ? desc_of(*node.src[2]) : a, has_ff,
                                               out, node.op_params[0],
                                               node.op_params[1] == static_cast<int32_t>(RopeMode::kNeox),
                                               get_op_param<float>(node, 2), get_op_param<float>(node, 3));
      break;
    }
    default: return TS_ERROR(StatusCode::kUnsupported, "no row kernel for %s", describe(node).c_str());
  }
  return cuda_status(cudaGetLastError(), "row kernel launch", node);
}

Status launch_sort(const Tensor& node, LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const int64_t rows = a.ne[1] * a.ne[2] * a.ne[3];
  if (rows == 0 || a.ne[0] == 0 || node.ne[0] == 0) return Status::Ok();
  TS_RETURN_IF_ERROR(check_rows(rows, node));
  const bool desc = node.op == Op::kTopK || node.op_params[0] == static_cast<int32_t>(SortOrder::kDesc);
  rank_sort_kernel<<<static_cast<unsigned>(rows), 128, 0, ctx.stream>>>(desc_of(a), desc_of(node), desc);
  return cuda_status(cudaGetLastError(), "sort kernel launch", node);
}

}  // namespace tessera::cuda::kernels
