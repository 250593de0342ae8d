// Kernels: MUL_MAT (own matrix x vector kernel for small N, cuBLAS otherwise), MUL_MAT_ID, FLASH_ATTN_EXT, and the
// per-node dispatch (launch_node).
//
// MUL_MAT paths (mul_mat_path):
//   N <= kMatvecMaxN            matvec_kernel: one warp per output element, weights read in their own type (q8_0 and
//                               q4_0 decoded block by block), f32 accumulation;
//   f32 weights                 cublasSgemm per batch, straight on the weights (lda = nb1 / 4);
//   f16 weights                 src1 rounded to f16, cublasGemmEx f16 x f16 -> f32 with f32 accumulation;
//   bf16, q8_0, q4_0 weights    dequantized to f32 in stream-ordered scratch memory, then cublasSgemm.
// (bf16 is not run as bf16 x bf16: rounding src1 to bf16 costs an NMSE near 1e-6, the f32 tolerance.)
#include <cuda_fp16.h>

#include "common.cuh"

namespace tessera::cuda::kernels {

namespace {

constexpr int kWarpsPerBlock = 4;

// Dot product of weight row (m, a2, a3) of `a` with row (n, i2, i3) of the f32 tensor `b`, by one warp.
__device__ inline float warp_dot(const TensorDesc& a, int64_t m, int64_t a2, int64_t a3, const TensorDesc& b, int64_t n,
                                 int64_t i2, int64_t i3) {
  const int lane = threadIdx.x % 32;
  const int64_t K = a.ne[0];
  float acc = 0.0f;
  if (is_quant_t(a.type)) {
    for (int64_t blk = lane; blk < K / kQ; blk += 32) {
      const char* p = elem_addr(a, blk * kQ, m, a2, a3);
      const float d = f16_bits_to_f32(load_u16(p));
      float s = 0.0f;
      if (a.type == kTQ8) {
        for (int q = 0; q < kQ; ++q)
          s += static_cast<float>(static_cast<int8_t>(p[2 + q])) * load_f32(b, blk * kQ + q, n, i2, i3);
      } else {
        for (int q = 0; q < kQ / 2; ++q) {
          const uint8_t byte = static_cast<uint8_t>(p[2 + q]);
          s += static_cast<float>((byte & 0x0f) - 8) * load_f32(b, blk * kQ + q, n, i2, i3);
          s += static_cast<float>((byte >> 4) - 8) * load_f32(b, blk * kQ + q + kQ / 2, n, i2, i3);
        }
      }
      acc += s * d;
    }
  } else {
    for (int64_t k = lane; k < K; k += 32) acc += load_f32(a, k, m, a2, a3) * load_f32(b, k, n, i2, i3);
  }
  return warp_sum(acc);
}

// out[m, n, i2, i3] = a[:, m, i2 / r2, i3 / r3] . b[:, n, i2, i3]; blockIdx.y = output row (n, i2, i3).
__global__ void matvec_kernel(TensorDesc a, TensorDesc b, TensorDesc out, int64_t r2, int64_t r3) {
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (m >= a.ne[1]) return;
  int64_t n, i2, i3;
  row_coords(out.ne, blockIdx.y, &n, &i2, &i3);
  const float v = warp_dot(a, m, i2 / r2, i3 / r3, b, n, i2, i3);
  if (threadIdx.x % 32 == 0) store_float(out, m, n, i2, i3, v);
}

// MUL_MAT_ID: out[m, e, t] = as[:, m, ids[e, t]] . b[:, e % B1, t]; blockIdx.y = output row (e, t).
__global__ void mul_mat_id_kernel(TensorDesc as, TensorDesc b, TensorDesc ids, TensorDesc out, IndexError* err,
                                  int32_t node) {
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (m >= as.ne[1]) return;
  int64_t e, t, unused;
  row_coords(out.ne, blockIdx.y, &e, &t, &unused);
  const int32_t expert = load_i32(ids, e, t, 0, 0);
  if (expert < 0 || expert >= as.ne[2]) {
    if (m == 0 && threadIdx.x % 32 == 0) report_index_error(err, node, expert, static_cast<int32_t>(as.ne[2]));
    return;
  }
  const float v = warp_dot(as, m, expert, 0, b, e % b.ne[1], t, 0);
  if (threadIdx.x % 32 == 0) store_float(out, m, e, t, 0, v);
}

__global__ void to_f16_kernel(const float* src, __half* dst, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    dst[i] = __float2half_rn(src[i]);
  }
}

// FLASH_ATTN_EXT: one block per output row (h, i, b), online softmax over tiles of blockDim keys. Each thread scores
// one key of a tile and accumulates output dims tid, tid + blockDim, ... (up to kMaxDvPerThread of them).
constexpr int kFaThreads = 128;
constexpr int kMaxDvPerThread = 4;

__global__ void flash_attn_kernel(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc mask, bool has_mask,
                                  TensorDesc sinks, bool has_sinks, TensorDesc out, float scale, int64_t group) {
  extern __shared__ float smem[];
  const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1];
  float* qs = smem;      // D
  float* sc = smem + D;  // kFaThreads scores
  int64_t h, i, b;
  row_coords(out.ne, blockIdx.x, &h, &i, &b);
  const int64_t hk = h / group;
  for (int64_t c = threadIdx.x; c < D; c += blockDim.x) qs[c] = load_f32(q, c, i, h, b);
  __syncthreads();

  float m = -INFINITY, l = 0.0f;
  float acc[kMaxDvPerThread] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (int64_t j0 = 0; j0 < n_kv; j0 += blockDim.x) {
    const int64_t tile = min(static_cast<int64_t>(blockDim.x), n_kv - j0);
    const int64_t j = j0 + threadIdx.x;
    float s = -INFINITY;
    if (threadIdx.x < tile) {
      float dot = 0.0f;
      for (int64_t c = 0; c < D; ++c) dot += qs[c] * load_f32(k, c, j, hk, b);
      s = scale * dot;
      if (has_mask) s += load_f32(mask, j, i, 0, 0);
    }
    sc[threadIdx.x] = s;
    __syncthreads();
    float tmax = -INFINITY;
    for (int64_t t = 0; t < tile; ++t) tmax = fmaxf(tmax, sc[t]);
    if (tmax != -INFINITY) {
      const float m_new = fmaxf(m, tmax);
      const float corr = expf(m - m_new);  // 0 while m is -inf
      l *= corr;
      for (int r = 0; r < kMaxDvPerThread; ++r) acc[r] *= corr;
      for (int64_t t = 0; t < tile; ++t) {
        const float st = sc[t];
        if (st == -INFINITY) continue;
        const float w = expf(st - m_new);
        l += w;
        for (int r = 0; r < kMaxDvPerThread; ++r) {
          const int64_t c = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
          if (c < Dv) acc[r] += w * load_f32(v, c, j0 + t, hk, b);
        }
      }
      m = m_new;
    }
    __syncthreads();
  }
  if (has_sinks) {
    const float sk = load_f32(sinks, h, 0, 0, 0);
    const float m_new = fmaxf(m, sk);
    if (m_new != -INFINITY) {
      const float corr = expf(m - m_new);
      l = l * corr + expf(sk - m_new);
      for (int r = 0; r < kMaxDvPerThread; ++r) acc[r] *= corr;
    }
    m = m_new;
  }
  for (int r = 0; r < kMaxDvPerThread; ++r) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(r) * blockDim.x;
    if (c < Dv) store_float(out, c, h, i, b, (m == -INFINITY || l == 0.0f) ? 0.0f : acc[r] / l);
  }
}

const char* cublas_name(cublasStatus_t s) {
  switch (s) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    default: return "CUBLAS error";
  }
}

Status cublas_status(cublasStatus_t s, const Tensor& node) {
  if (s == CUBLAS_STATUS_SUCCESS) return Status::Ok();
  return TS_ERROR(StatusCode::kFailed, "cuBLAS error %s (%d) in MUL_MAT for %s", cublas_name(s), static_cast<int>(s),
                  describe(node).c_str());
}

// Stream-ordered scratch memory, freed on the stream when the launcher returns.
class Scratch {
 public:
  explicit Scratch(const LaunchContext& ctx) : ctx_(ctx) {}
  ~Scratch() {
    for (void* p : ptrs_)
      if (p != nullptr) cudaFreeAsync(p, ctx_.stream);
  }
  void* get(size_t bytes, cudaError_t* err) {
    void* p = nullptr;
    *err = scratch_alloc(ctx_, &p, bytes == 0 ? 1 : bytes);
    if (*err != cudaSuccess) return nullptr;
    ptrs_[n_++] = p;
    return p;
  }

 private:
  const LaunchContext& ctx_;
  void* ptrs_[4] = {};
  int n_ = 0;
};

bool rows_contiguous(const Tensor& t, size_t elem) {
  return t.nb[0] == elem && t.nb[1] % elem == 0 && t.nb[1] >= elem * static_cast<size_t>(t.ne[0]);
}

bool fully_contiguous_f32(const Tensor& t) { return t.type == Type::kF32 && is_contiguous(t); }

}  // namespace

MatmulPath mul_mat_path(const Tensor& node) {
  const Tensor& a = *node.src[0];
  if (node.src[1]->ne[1] <= kMatvecMaxN) return MatmulPath::kMatvec;
  if (a.type == Type::kF32 && rows_contiguous(a, 4) && a.nb[2] % 4 == 0 && a.nb[3] % 4 == 0) {
    return MatmulPath::kCublasF32;
  }
  if (a.type == Type::kF16 && rows_contiguous(a, 2) && a.nb[2] % 2 == 0 && a.nb[3] % 2 == 0) {
    return MatmulPath::kCublasF16;
  }
  return MatmulPath::kDequantCublas;
}

Status launch_mul_mat(const Tensor& node, LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1];
  const int64_t B2 = b.ne[2], B3 = b.ne[3];
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  if (nelements(node) == 0) return Status::Ok();
  const MatmulPath path = mul_mat_path(node);

  if (path == MatmulPath::kMatvec && K > 0) {
    Status st;
    if (launch_matvec_fast(node, ctx, &st)) return st;
  }
  if (path == MatmulPath::kMatvec || K == 0) {
    const int64_t rows = N * B2 * B3;
    if (rows > 65535) return TS_ERROR(StatusCode::kUnsupported, "matvec grid too large for %s", describe(node).c_str());
    const dim3 grid(static_cast<unsigned>((M + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(rows));
    matvec_kernel<<<grid, 32 * kWarpsPerBlock, 0, ctx.stream>>>(desc_of(a), desc_of(b), desc_of(node), r2, r3);
    return cuda_status(cudaGetLastError(), "matvec kernel launch", node);
  }

  Scratch scratch(ctx);
  cudaError_t err = cudaSuccess;
  // src1 as contiguous f32 [K, N, B2, B3].
  const float* b32 = static_cast<const float*>(b.data);
  if (!fully_contiguous_f32(b)) {
    float* p = static_cast<float*>(scratch.get(static_cast<size_t>(nelements(b)) * 4, &err));
    if (p == nullptr) return cuda_status(err, "scratch allocation for src1", node);
    TS_RETURN_IF_ERROR(launch_to_f32(desc_of(b), p, ctx.stream));
    b32 = p;
  }
  // src0: its own memory (f32, f16) or a dequantized contiguous f32 copy.
  const void* a_ptr = a.data;
  int64_t lda = 0, a_nb2 = 0, a_nb3 = 0;  // in elements
  if (path == MatmulPath::kCublasF32 || path == MatmulPath::kCublasF16) {
    const int64_t es = path == MatmulPath::kCublasF32 ? 4 : 2;
    lda = static_cast<int64_t>(a.nb[1]) / es;
    a_nb2 = static_cast<int64_t>(a.nb[2]) / es;
    a_nb3 = static_cast<int64_t>(a.nb[3]) / es;
  } else {
    float* p = static_cast<float*>(scratch.get(static_cast<size_t>(nelements(a)) * 4, &err));
    if (p == nullptr) return cuda_status(err, "scratch allocation for dequantized src0", node);
    TS_RETURN_IF_ERROR(launch_to_f32(desc_of(a), p, ctx.stream));
    a_ptr = p;
    lda = K;
    a_nb2 = K * M;
    a_nb3 = K * M * a.ne[2];
  }
  const void* b_ptr = b32;
  if (path == MatmulPath::kCublasF16) {
    const int64_t nb = nelements(b);
    __half* p = static_cast<__half*>(scratch.get(static_cast<size_t>(nb) * 2, &err));
    if (p == nullptr) return cuda_status(err, "scratch allocation for f16 src1", node);
    to_f16_kernel<<<grid_for(nb, 256), 256, 0, ctx.stream>>>(b32, p, nb);
    TS_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "f16 conversion launch", node));
    b_ptr = p;
  }
  TS_RETURN_IF_ERROR(cuda_status(cudaGetLastError(), "MUL_MAT preparation", node));

  // Column-major view: C (M x N, ldc) = A^T (M x K) * B (K x N), A stored K x M with lda.
  const float one = 1.0f, zero = 0.0f;
  const int64_t ldc = static_cast<int64_t>(node.nb[1]) / 4;
  for (int64_t i3 = 0; i3 < B3; ++i3) {
    for (int64_t i2 = 0; i2 < B2; ++i2) {
      const int64_t a_off = (i2 / r2) * a_nb2 + (i3 / r3) * a_nb3;
      const int64_t b_off = (i2 + i3 * B2) * K * N;
      float* c = reinterpret_cast<float*>(static_cast<char*>(node.data) + i2 * node.nb[2] + i3 * node.nb[3]);
      cublasStatus_t s;
      if (path == MatmulPath::kCublasF16) {
        s = cublasGemmEx(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M), static_cast<int>(N),
                         static_cast<int>(K), &one, static_cast<const __half*>(a_ptr) + a_off, CUDA_R_16F,
                         static_cast<int>(lda), static_cast<const __half*>(b_ptr) + b_off, CUDA_R_16F,
                         static_cast<int>(K), &zero, c, CUDA_R_32F, static_cast<int>(ldc), CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT);
      } else {
        s = cublasSgemm(ctx.cublas, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(M), static_cast<int>(N),
                        static_cast<int>(K), &one, static_cast<const float*>(a_ptr) + a_off, static_cast<int>(lda),
                        static_cast<const float*>(b_ptr) + b_off, static_cast<int>(K), &zero, c, static_cast<int>(ldc));
      }
      TS_RETURN_IF_ERROR(cublas_status(s, node));
    }
  }
  return Status::Ok();
}

Status launch_mul_mat_id(const Tensor& node, LaunchContext& ctx) {
  const Tensor& as = *node.src[0];
  const int64_t rows = node.ne[1] * node.ne[2];
  if (rows == 0 || as.ne[1] == 0) return Status::Ok();
  if (rows > 65535)
    return TS_ERROR(StatusCode::kUnsupported, "MUL_MAT_ID grid too large for %s", describe(node).c_str());
  const dim3 grid(static_cast<unsigned>((as.ne[1] + kWarpsPerBlock - 1) / kWarpsPerBlock), static_cast<unsigned>(rows));
  mul_mat_id_kernel<<<grid, 32 * kWarpsPerBlock, 0, ctx.stream>>>(
      desc_of(as), desc_of(*node.src[1]), desc_of(*node.src[2]), desc_of(node), ctx.index_error, ctx.node_index);
  return cuda_status(cudaGetLastError(), "MUL_MAT_ID kernel launch", node);
}

Status launch_flash_attn(const Tensor& node, LaunchContext& ctx) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const int64_t rows = node.ne[1] * node.ne[2] * node.ne[3];
  if (rows == 0 || node.ne[0] == 0) return Status::Ok();
  if (rows > 0x7fffffff) return TS_ERROR(StatusCode::kUnsupported, "too many rows for %s", describe(node).c_str());
  Status st;
  if (launch_flash_attn_fast(node, ctx, &st)) return st;
  const Tensor* mask = node.src[3];
  const Tensor* sinks = node.src[4];
  const size_t shmem = static_cast<size_t>(q.ne[0] + kFaThreads) * sizeof(float);
  flash_attn_kernel<<<static_cast<unsigned>(rows), kFaThreads, shmem, ctx.stream>>>(
      desc_of(q), desc_of(k), desc_of(*node.src[2]), mask ? desc_of(*mask) : desc_of(q), mask != nullptr,
      sinks ? desc_of(*sinks) : desc_of(q), sinks != nullptr, desc_of(node), get_op_param<float>(node, 0),
      q.ne[2] / k.ne[2]);
  return cuda_status(cudaGetLastError(), "FLASH_ATTN_EXT kernel launch", node);
}

Status launch_node(const Tensor& node, LaunchContext& ctx) {
  switch (node.op) {
    case Op::kCpy:
    case Op::kCont:
    case Op::kDup: return launch_cpy(node, ctx);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kScale:
    case Op::kUnary:
    case Op::kGlu: return launch_elementwise(node, ctx);
    case Op::kRmsNorm:
    case Op::kNorm:
    case Op::kSumRows:
    case Op::kSoftMax:
    case Op::kRope: return launch_row_op(node, ctx);
    case Op::kMulMat: return launch_mul_mat(node, ctx);
    case Op::kMulMatId: return launch_mul_mat_id(node, ctx);
    case Op::kGetRows: return launch_get_rows(node, ctx);
    case Op::kSetRows: return launch_set_rows(node, ctx);
    case Op::kArgsort:
    case Op::kTopK: return launch_sort(node, ctx);
    case Op::kFlashAttnExt: return launch_flash_attn(node, ctx);
    case Op::kAddId: return launch_add_id(node, ctx);
    default: break;
  }
  return TS_ERROR(StatusCode::kUnsupported, "CUDA: no kernel for op %s (%s)", op_name(node.op), describe(node).c_str());
}

}  // namespace tessera::cuda::kernels
