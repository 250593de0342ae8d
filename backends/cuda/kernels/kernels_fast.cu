// Fast paths for the three kernels a decoder step spends its time in, measured on an H200 (bench/RESULTS.md, "CUDA"):
//   matvec_rows_kernel   MUL_MAT with N <= kMatvecMaxN: one warp per weight row computes all N columns (the weights
//                        are read once, not N times), with 16-byte loads of f32/f16/bf16 rows and 2-byte loads of
//                        q8_0/q4_0 blocks;
//   fa_split_kernel      FLASH_ATTN_EXT: a warp per key (lanes over head dims, coalesced), keys split over warps and,
//                        when there are few rows (decode), over blocks too; partial softmax states are merged by
//                        fa_merge_kernel;
//   binary_f32_kernel    ADD/MUL/DIV of contiguous f32 tensors (same shape or one broadcast row) with float4 loads.
// Each launcher returns false (and launches nothing) when its preconditions do not hold; the general kernels in
// kernels_matmul.cu / kernels_rows.cu then run. Results equal the general kernels' up to f32 summation order.
#include <cuda_fp16.h>

#include <algorithm>

#include "common.cuh"

namespace tessera::cuda::kernels {

namespace {

constexpr int kMvWarps = 4;

bool aligned(const void* p, size_t a) { return reinterpret_cast<uintptr_t>(p) % a == 0; }
bool strides_multiple(const Tensor& t, int from, size_t a) {
  for (int i = from; i < 4; ++i)
    if (t.nb[i] % a != 0) return false;
  return true;
}

__device__ inline float4 ld4(const char* p) { return *reinterpret_cast<const float4*>(p); }
__device__ inline float dot4(float4 a, float4 b) { return a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w; }
// f16 -> f32 by the hardware conversion (exact, as f16_bits_to_f32, which is kept for the general kernels: its
// branches made the f16 matvec 1.4x slower than the bf16 one on an H200).
__device__ inline float hw_f16(uint16_t h) { return __half2float(__ushort_as_half(h)); }
__device__ inline float h2f(uint16_t h, bool bf) { return bf ? bf16_bits_to_f32(h) : hw_f16(h); }
// Small integers to float without I2F (quarter rate): 2^23 + u as a float's bits, less 2^23 (+ the offset); exact.
__device__ inline float u8_minus(uint32_t u, float offset) {
  return __uint_as_float(0x4B000000u | u) - (8388608.0f + offset);
}

// out[m, n, i2, i3] = a[:, m, i2 / r2, i3 / r3] . b[:, n, i2, i3] for every n < N; blockIdx.y = (i2, i3).
template <int T>
__global__ void matvec_rows_kernel(TensorDesc a, TensorDesc b, TensorDesc out, int64_t r2, int64_t r3) {
  const int lane = threadIdx.x % 32;
  const int64_t m = static_cast<int64_t>(blockIdx.x) * kMvWarps + threadIdx.x / 32;
  if (m >= a.ne[1]) return;
  const int64_t i2 = blockIdx.y % b.ne[2], i3 = blockIdx.y / b.ne[2];
  const char* arow = static_cast<const char*>(a.data) + m * a.nb[1] + (i2 / r2) * a.nb[2] + (i3 / r3) * a.nb[3];
  const char* bbase = static_cast<const char*>(b.data) + i2 * b.nb[2] + i3 * b.nb[3];
  const int64_t K = a.ne[0];
  const int N = static_cast<int>(b.ne[1]);
  float acc[kMatvecMaxN];
#pragma unroll
  for (int n = 0; n < kMatvecMaxN; ++n) acc[n] = 0.0f;
  if constexpr (T == kTF32) {
    for (int64_t k4 = lane; k4 < K / 4; k4 += 32) {
      const float4 w = ld4(arow + k4 * 16);
#pragma unroll
      for (int n = 0; n < kMatvecMaxN; ++n)
        if (n < N) acc[n] += dot4(w, ld4(bbase + n * b.nb[1] + k4 * 16));
    }
  } else if constexpr (T == kTF16 || T == kTBF16) {
    for (int64_t k8 = lane; k8 < K / 8; k8 += 32) {
      const uint4 raw = *reinterpret_cast<const uint4*>(arow + k8 * 16);
      const uint32_t u[4] = {raw.x, raw.y, raw.z, raw.w};
      float w[8];
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        w[2 * j] = h2f(static_cast<uint16_t>(u[j] & 0xffffu), T == kTBF16);
        w[2 * j + 1] = h2f(static_cast<uint16_t>(u[j] >> 16), T == kTBF16);
      }
#pragma unroll
      for (int n = 0; n < kMatvecMaxN; ++n) {
        if (n < N) {
          const char* bp = bbase + n * b.nb[1] + k8 * 32;
          acc[n] += dot4(make_float4(w[0], w[1], w[2], w[3]), ld4(bp)) +
                    dot4(make_float4(w[4], w[5], w[6], w[7]), ld4(bp + 16));
        }
      }
    }
  } else {
    constexpr int kBytes = T == kTQ8 ? kQ8Bytes : kQ4Bytes;
    for (int64_t blk = lane; blk < K / kQ; blk += 32) {
      const uint16_t* p = reinterpret_cast<const uint16_t*>(arow + blk * kBytes);
      const float d = hw_f16(p[0]);
      float w[kQ];
      if constexpr (T == kTQ8) {
#pragma unroll
        for (int j = 0; j < 16; ++j) {
          const uint16_t v = p[1 + j];
          w[2 * j] = u8_minus((v & 0xffu) ^ 0x80u, 128.0f);  // int8 q = (q xor 0x80) - 128
          w[2 * j + 1] = u8_minus((v >> 8) ^ 0x80u, 128.0f);
        }
      } else {
#pragma unroll
        for (int j = 0; j < 8; ++j) {
          const uint16_t v = p[1 + j];
          w[2 * j] = u8_minus(v & 0x0fu, 8.0f);
          w[2 * j + 16] = u8_minus((v >> 4) & 0x0fu, 8.0f);
          w[2 * j + 1] = u8_minus((v >> 8) & 0x0fu, 8.0f);
          w[2 * j + 17] = u8_minus(v >> 12, 8.0f);
        }
      }
#pragma unroll
      for (int n = 0; n < kMatvecMaxN; ++n) {
        if (n < N) {
          const char* bp = bbase + n * b.nb[1] + blk * kQ * 4;
          float s = 0.0f;
#pragma unroll
          for (int j = 0; j < kQ / 4; ++j)
            s += dot4(make_float4(w[4 * j], w[4 * j + 1], w[4 * j + 2], w[4 * j + 3]), ld4(bp + 16 * j));
          acc[n] += s * d;
        }
      }
    }
  }
#pragma unroll
  for (int n = 0; n < kMatvecMaxN; ++n) {
    if (n < N) {
      const float v = warp_sum(acc[n]);
      if (lane == 0) store_float(out, m, n, i2, i3, v);
    }
  }
}

// ---- flash attention ----

constexpr int kFaWarps = 4;       // warps per block, each over its own keys
constexpr int kFaMaxR = 8;        // head dims per lane: D, Dv <= 256
constexpr int kFaUnroll = 4;      // keys in flight per warp
constexpr int kFaMaxSplits = 64;  // key splits per row (fa_merge_kernel: two per lane of one warp)

struct FaState {
  float m, l;
};

// One output row (h, i, b) = blockIdx.x, keys [blockIdx.y * chunk, ...). partial == nullptr: write `out` (one split);
// else write (m, l, acc[Dv]) of this split to partial[(row * S + split) * (Dv + 2)].
template <int T>
__global__ void fa_split_kernel(TensorDesc q, TensorDesc k, TensorDesc v, TensorDesc mask, bool has_mask,
                                TensorDesc sinks, bool has_sinks, TensorDesc out, float scale, int64_t group,
                                int64_t chunk, float* partial) {
  constexpr size_t es = T == kTF32 ? 4 : 2;
  __shared__ float sm_acc[kFaWarps][kFaMaxR * 32];
  __shared__ FaState sm_st[kFaWarps];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1];
  const int rd = static_cast<int>(D / 32), rv = static_cast<int>(Dv / 32);
  int64_t h, i, b;
  row_coords(out.ne, blockIdx.x, &h, &i, &b);
  const int64_t hk = h / group;
  float qr[kFaMaxR];
#pragma unroll
  for (int r = 0; r < kFaMaxR; ++r) qr[r] = r < rd ? load_f32(q, lane + 32 * r, i, h, b) : 0.0f;
  const char* kbase = static_cast<const char*>(k.data) + hk * k.nb[2] + b * k.nb[3] + lane * es;
  const char* vbase = static_cast<const char*>(v.data) + hk * v.nb[2] + b * v.nb[3] + lane * es;
  const int64_t j_begin = static_cast<int64_t>(blockIdx.y) * chunk;
  const int64_t j_end = min(n_kv, j_begin + chunk);

  float m = -INFINITY, l = 0.0f, acc[kFaMaxR];
#pragma unroll
  for (int r = 0; r < kFaMaxR; ++r) acc[r] = 0.0f;
  for (int64_t j0 = j_begin + warp * kFaUnroll; j0 < j_end; j0 += kFaWarps * kFaUnroll) {
    float s[kFaUnroll];
#pragma unroll
    for (int u = 0; u < kFaUnroll; ++u) {
      const int64_t j = j0 + u;
      float dot = 0.0f;
      if (j < j_end) {
        const char* kp = kbase + j * k.nb[1];
#pragma unroll
        for (int r = 0; r < kFaMaxR; ++r) {
          if (r < rd) {
            const char* e = kp + r * 32 * es;
            const float kv =
                T == kTF32 ? *reinterpret_cast<const float*>(e) : hw_f16(*reinterpret_cast<const uint16_t*>(e));
            dot += qr[r] * kv;
          }
        }
      }
      s[u] = dot;
    }
    float smax = -INFINITY;
#pragma unroll
    for (int u = 0; u < kFaUnroll; ++u) {
      const int64_t j = j0 + u;
      float x = warp_sum(s[u]) * scale;
      if (j >= j_end) {
        x = -INFINITY;
      } else if (has_mask) {
        x += load_f32(mask, j, i, 0, 0);
      }
      s[u] = x;
      smax = fmaxf(smax, x);
    }
    if (smax == -INFINITY) continue;
    const float m_new = fmaxf(m, smax);
    const float corr = expf(m - m_new);  // 0 while m is -inf
    l *= corr;
#pragma unroll
    for (int r = 0; r < kFaMaxR; ++r) acc[r] *= corr;
#pragma unroll
    for (int u = 0; u < kFaUnroll; ++u) {
      if (s[u] == -INFINITY) continue;
      const float w = expf(s[u] - m_new);
      l += w;
      const char* vp = vbase + (j0 + u) * v.nb[1];
#pragma unroll
      for (int r = 0; r < kFaMaxR; ++r) {
        if (r < rv) {
          const char* e = vp + r * 32 * es;
          const float vv =
              T == kTF32 ? *reinterpret_cast<const float*>(e) : hw_f16(*reinterpret_cast<const uint16_t*>(e));
          acc[r] += w * vv;
        }
      }
    }
    m = m_new;
  }
  // Merge the block's warps.
#pragma unroll
  for (int r = 0; r < kFaMaxR; ++r)
    if (r < rv) sm_acc[warp][lane + 32 * r] = acc[r];
  if (lane == 0) sm_st[warp] = FaState{m, l};
  __syncthreads();
  if (warp != 0) return;
  float M = -INFINITY;
  for (int w = 0; w < kFaWarps; ++w) M = fmaxf(M, sm_st[w].m);
  float L = 0.0f, f[kFaWarps];
  for (int w = 0; w < kFaWarps; ++w) {
    f[w] = sm_st[w].m == -INFINITY ? 0.0f : expf(sm_st[w].m - M);
    L += sm_st[w].l * f[w];
  }
#pragma unroll
  for (int r = 0; r < kFaMaxR; ++r) {
    if (r < rv) {
      float a = 0.0f;
      for (int w = 0; w < kFaWarps; ++w) a += sm_acc[w][lane + 32 * r] * f[w];
      acc[r] = a;
    }
  }
  if (partial != nullptr) {
    float* p = partial + (static_cast<int64_t>(blockIdx.x) * gridDim.y + blockIdx.y) * (Dv + 2);
    if (lane == 0) {
      p[0] = M;
      p[1] = L;
    }
#pragma unroll
    for (int r = 0; r < kFaMaxR; ++r)
      if (r < rv) p[2 + lane + 32 * r] = acc[r];
    return;
  }
  if (has_sinks) {
    const float sk = load_f32(sinks, h, 0, 0, 0);
    const float m_new = fmaxf(M, sk);
    if (m_new != -INFINITY) {
      const float corr = M == -INFINITY ? 0.0f : expf(M - m_new);
      L = L * corr + expf(sk - m_new);
#pragma unroll
      for (int r = 0; r < kFaMaxR; ++r) acc[r] *= corr;
    }
    M = m_new;
  }
#pragma unroll
  for (int r = 0; r < kFaMaxR; ++r)
    if (r < rv) store_float(out, lane + 32 * r, h, i, b, (M == -INFINITY || L == 0.0f) ? 0.0f : acc[r] / L);
}

// Merges the S partial states of each row (blockIdx.x), adds the sink, writes the row. The splits' maxima and
// weights go through shared memory once, so each thread's loop over the splits has independent loads only.
__global__ void fa_merge_kernel(const float* partial, int S, TensorDesc sinks, bool has_sinks, TensorDesc out) {
  __shared__ float f[kFaMaxSplits];
  __shared__ float total[2];  // M, L
  const int64_t Dv = out.ne[0];
  int64_t h, i, b;
  row_coords(out.ne, blockIdx.x, &h, &i, &b);
  const float* p = partial + static_cast<int64_t>(blockIdx.x) * S * (Dv + 2);
  if (threadIdx.x < 32) {
    // Warp 0: lane s holds splits s and s + 32 (S <= 64).
    const int lane = threadIdx.x;
    const float m0 = lane < S ? p[lane * (Dv + 2)] : -INFINITY;
    const float m1 = lane + 32 < S ? p[(lane + 32) * (Dv + 2)] : -INFINITY;
    float M = warp_max(fmaxf(m0, m1));
    float sk = -INFINITY;
    if (has_sinks) {
      sk = load_f32(sinks, h, 0, 0, 0);
      M = fmaxf(M, sk);
    }
    const float f0 = m0 == -INFINITY ? 0.0f : expf(m0 - M);
    const float f1 = m1 == -INFINITY ? 0.0f : expf(m1 - M);
    if (lane < S) f[lane] = f0;
    if (lane + 32 < S) f[lane + 32] = f1;
    float L = warp_sum((lane < S ? p[lane * (Dv + 2) + 1] * f0 : 0.0f) +
                       (lane + 32 < S ? p[(lane + 32) * (Dv + 2) + 1] * f1 : 0.0f));
    if (has_sinks && M != -INFINITY) L += expf(sk - M);
    if (lane == 0) {
      total[0] = M;
      total[1] = L;
    }
  }
  __syncthreads();
  const float M = total[0], L = total[1];
  for (int64_t c = threadIdx.x; c < Dv; c += blockDim.x) {
    float a = 0.0f;
#pragma unroll 8
    for (int s = 0; s < S; ++s) a += p[s * (Dv + 2) + 2 + c] * f[s];
    store_float(out, c, h, i, b, (M == -INFINITY || L == 0.0f) ? 0.0f : a / L);
  }
}

// ---- element-wise ----

// op: 0 add, 1 mul, 2 div. b has n4 float4s (same shape) or bn4 < n4 (one row, broadcast).
__global__ void binary_f32_kernel(const float4* a, const float4* b, float4* out, int64_t n4, int64_t bn4, int op) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n4;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const float4 u = a[f];
    const float4 v = b[bn4 == n4 ? f : f % bn4];
    float4 r;
    if (op == 0) {
      r = make_float4(u.x + v.x, u.y + v.y, u.z + v.z, u.w + v.w);
    } else if (op == 1) {
      r = make_float4(u.x * v.x, u.y * v.y, u.z * v.z, u.w * v.w);
    } else {
      r = make_float4(u.x / v.x, u.y / v.y, u.z / v.z, u.w / v.w);
    }
    out[f] = r;
  }
}

}  // namespace

bool launch_matvec_fast(const Tensor& node, LaunchContext& ctx, Status* st) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0];
  if (b.type != Type::kF32 || b.nb[0] != 4 || b.ne[1] > kMatvecMaxN || K == 0) return false;
  if (!aligned(b.data, 16) || !strides_multiple(b, 1, 16)) return false;
  if (a.ne[2] == 0 || a.ne[3] == 0 || b.ne[2] % a.ne[2] != 0 || b.ne[3] % a.ne[3] != 0) return false;
  const int64_t batches = b.ne[2] * b.ne[3];
  if (batches > 65535) return false;
  const dim3 grid(static_cast<unsigned>((a.ne[1] + kMvWarps - 1) / kMvWarps), static_cast<unsigned>(batches));
  const int64_t r2 = b.ne[2] / a.ne[2], r3 = b.ne[3] / a.ne[3];
  const TensorDesc da = desc_of(a), db = desc_of(b), dout = desc_of(node);
  const int threads = 32 * kMvWarps;
  switch (a.type) {
    case Type::kF32:
      if (a.nb[0] != 4 || K % 4 != 0 || !aligned(a.data, 16) || !strides_multiple(a, 1, 16)) return false;
      matvec_rows_kernel<kTF32><<<grid, threads, 0, ctx.stream>>>(da, db, dout, r2, r3);
      break;
    case Type::kF16:
    case Type::kBF16:
      if (a.nb[0] != 2 || K % 8 != 0 || !aligned(a.data, 16) || !strides_multiple(a, 1, 16)) return false;
      if (a.type == Type::kF16) {
        matvec_rows_kernel<kTF16><<<grid, threads, 0, ctx.stream>>>(da, db, dout, r2, r3);
      } else {
        matvec_rows_kernel<kTBF16><<<grid, threads, 0, ctx.stream>>>(da, db, dout, r2, r3);
      }
      break;
    case Type::kQ8_0:
    case Type::kQ4_0: {
      const size_t bytes = a.type == Type::kQ8_0 ? kQ8Bytes : kQ4Bytes;
      if (a.nb[0] != bytes || K % kQ != 0 || !aligned(a.data, 2) || !strides_multiple(a, 1, 2)) return false;
      if (a.type == Type::kQ8_0) {
        matvec_rows_kernel<kTQ8><<<grid, threads, 0, ctx.stream>>>(da, db, dout, r2, r3);
      } else {
        matvec_rows_kernel<kTQ4><<<grid, threads, 0, ctx.stream>>>(da, db, dout, r2, r3);
      }
      break;
    }
    default: return false;
  }
  *st = cuda_status(cudaGetLastError(), "matvec kernel launch", node);
  return true;
}

bool launch_flash_attn_fast(const Tensor& node, LaunchContext& ctx, Status* st) {
  const Tensor& q = *node.src[0];
  const Tensor& k = *node.src[1];
  const Tensor& v = *node.src[2];
  const Tensor* mask = node.src[3];
  const Tensor* sinks = node.src[4];
  const int64_t D = q.ne[0], Dv = v.ne[0], n_kv = k.ne[1];
  if (k.type != v.type || (k.type != Type::kF16 && k.type != Type::kF32)) return false;
  const size_t es = k.type == Type::kF32 ? 4 : 2;
  if (k.nb[0] != es || v.nb[0] != es || D % 32 != 0 || Dv % 32 != 0 || D > 32 * kFaMaxR || Dv > 32 * kFaMaxR)
    return false;
  if (D == 0 || Dv == 0 || n_kv == 0 || k.ne[2] == 0 || q.ne[2] % k.ne[2] != 0) return false;
  const int64_t rows = node.ne[1] * node.ne[2] * node.ne[3];
  if (rows == 0) {
    *st = Status::Ok();
    return true;
  }
  if (rows > 0x7fffffff) return false;
  // Splits over the keys: enough blocks for four per SM, each split at least 256 keys, at most 64 splits.
  int64_t S = (4 * static_cast<int64_t>(ctx.sm_count) + rows - 1) / rows;
  S = std::min<int64_t>({S, (n_kv + 255) / 256, kFaMaxSplits});
  if (S < 1) S = 1;
  const int64_t chunk = (n_kv + S - 1) / S;
  const TensorDesc dq = desc_of(q), dk = desc_of(k), dv = desc_of(v), dout = desc_of(node);
  const TensorDesc dmask = mask ? desc_of(*mask) : dq, dsinks = sinks ? desc_of(*sinks) : dq;
  const float scale = get_op_param<float>(node, 0);
  const int64_t group = q.ne[2] / k.ne[2];
  float* partial = nullptr;
  if (S > 1) {
    const cudaError_t e = scratch_alloc(ctx, reinterpret_cast<void**>(&partial), sizeof(float) * rows * S * (Dv + 2));
    if (e != cudaSuccess) {
      *st = cuda_status(e, "scratch allocation for FLASH_ATTN_EXT splits", node);
      return true;
    }
  }
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(S));
  if (k.type == Type::kF16) {
    fa_split_kernel<kTF16><<<grid, 32 * kFaWarps, 0, ctx.stream>>>(
        dq, dk, dv, dmask, mask != nullptr, dsinks, sinks != nullptr, dout, scale, group, chunk, partial);
  } else {
    fa_split_kernel<kTF32><<<grid, 32 * kFaWarps, 0, ctx.stream>>>(
        dq, dk, dv, dmask, mask != nullptr, dsinks, sinks != nullptr, dout, scale, group, chunk, partial);
  }
  if (S > 1) {
    fa_merge_kernel<<<static_cast<unsigned>(rows), 128, 0, ctx.stream>>>(partial, static_cast<int>(S), dsinks,
                                                                         sinks != nullptr, dout);
    cudaFreeAsync(partial, ctx.stream);
  }
  *st = cuda_status(cudaGetLastError(), "FLASH_ATTN_EXT kernel launch", node);
  return true;
}

bool launch_binary_fast(const Tensor& node, LaunchContext& ctx, Status* st) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  if (node.type != Type::kF32 || a.type != Type::kF32 || b.type != Type::kF32) return false;
  if (!is_contiguous(node) || !is_contiguous(a) || !is_contiguous(b)) return false;
  for (int d = 0; d < 4; ++d)
    if (a.ne[d] != node.ne[d]) return false;
  const int64_t n = nelements(node);
  const bool same = nelements(b) == n && b.ne[0] == a.ne[0] && b.ne[1] == a.ne[1] && b.ne[2] == a.ne[2];
  const bool row = b.ne[0] == a.ne[0] && b.ne[1] == 1 && b.ne[2] == 1 && b.ne[3] == 1;
  if (!same && !row) return false;
  if (n % 4 != 0 || a.ne[0] % 4 != 0 || !aligned(a.data, 16) || !aligned(b.data, 16) || !aligned(node.data, 16)) {
    return false;
  }
  const int op = node.op == Op::kAdd ? 0 : node.op == Op::kMul ? 1 : 2;
  const int64_t n4 = n / 4, bn4 = nelements(b) / 4;
  binary_f32_kernel<<<grid_for(n4, 256), 256, 0, ctx.stream>>>(static_cast<const float4*>(a.data),
                                                               static_cast<const float4*>(b.data),
                                                               static_cast<float4*>(node.data), n4, bn4, op);
  *st = cuda_status(cudaGetLastError(), "element-wise kernel launch", node);
  return true;
}

}  // namespace tessera::cuda::kernels
