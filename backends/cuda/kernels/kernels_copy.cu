// Kernels: CPY / CONT / DUP (flat-order copies with type conversion), GET_ROWS, SET_ROWS, and the any-type -> f32
// conversion the matmul paths use.
#include <cstdio>

#include "common.cuh"

namespace tessera::cuda::kernels {

namespace {

constexpr int kThreads = 256;

// Same type, not quantized: unit n of src -> unit n of dst (bit-exact; covers i32).
__global__ void copy_units(TensorDesc src, TensorDesc dst, int64_t n, int unit) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t a0, a1, a2, a3, b0, b1, b2, b3;
    flat_coords(src.ne, f, &a0, &a1, &a2, &a3);
    flat_coords(dst.ne, f, &b0, &b1, &b2, &b3);
    const char* s = elem_addr(src, a0, a1, a2, a3);
    char* d = elem_addr(dst, b0, b1, b2, b3);
    for (int i = 0; i < unit; ++i) d[i] = s[i];
  }
}

// Same quantized type: block n of src -> block n of dst (both ne0 are multiples of 32, so blocks line up).
__global__ void copy_blocks(TensorDesc src, TensorDesc dst, int64_t nblocks, int bytes) {
  const int64_t sb = src.ne[0] / kQ, db = dst.ne[0] / kQ;
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < nblocks;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t s1, s2, s3, d1, d2, d3;
    row_coords(src.ne, f / sb, &s1, &s2, &s3);
    row_coords(dst.ne, f / db, &d1, &d2, &d3);
    const char* s = elem_addr(src, (f % sb) * kQ, s1, s2, s3);
    char* d = elem_addr(dst, (f % db) * kQ, d1, d2, d3);
    for (int i = 0; i < bytes; ++i) d[i] = s[i];
  }
}

// Converting copy into a float destination: element n of src (any non-i32 type) -> element n of dst.
__global__ void convert_to_float(TensorDesc src, TensorDesc dst, int64_t n) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t a0, a1, a2, a3, b0, b1, b2, b3;
    flat_coords(src.ne, f, &a0, &a1, &a2, &a3);
    flat_coords(dst.ne, f, &b0, &b1, &b2, &b3);
    store_float(dst, b0, b1, b2, b3, load_f32(src, a0, a1, a2, a3));
  }
}

// Converting copy into a quantized destination: one thread per destination block gathers 32 values in flat order.
__global__ void convert_to_quant(TensorDesc src, TensorDesc dst, int64_t nblocks) {
  const int64_t db = dst.ne[0] / kQ;
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < nblocks;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float x[kQ];
    for (int i = 0; i < kQ; ++i) {
      int64_t a0, a1, a2, a3;
      flat_coords(src.ne, f * kQ + i, &a0, &a1, &a2, &a3);
      x[i] = load_f32(src, a0, a1, a2, a3);
    }
    int64_t d1, d2, d3;
    row_coords(dst.ne, f / db, &d1, &d2, &d3);
    store_block(dst.type, elem_addr(dst, (f % db) * kQ, d1, d2, d3), x);
  }
}

// Contiguous f32 output in flat order.
__global__ void to_f32_kernel(TensorDesc src, float* dst, int64_t n) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t a0, a1, a2, a3;
    flat_coords(src.ne, f, &a0, &a1, &a2, &a3);
    dst[f] = load_f32(src, a0, a1, a2, a3);
  }
}

// GET_ROWS: r[:, i, j, k] = a[:, ids[i, j, k], j, k]. One thread per output element.
__global__ void get_rows_kernel(TensorDesc a, TensorDesc ids, TensorDesc out, int64_t n, IndexError* err,
                                int32_t node) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    const int32_t id = load_i32(ids, i1, i2, i3, 0);
    if (id < 0 || id >= a.ne[1]) {
      report_index_error(err, node, id, static_cast<int32_t>(a.ne[1]));
      continue;
    }
    if (a.type == kTI32) {
      store_i32(out, i0, i1, i2, i3, load_i32(a, i0, id, i2, i3));
    } else {
      store_float(out, i0, i1, i2, i3, load_f32(a, i0, id, i2, i3));
    }
  }
}

// ADD_ID: r[:, i1, i2] = a[:, i1, i2] + b[:, ids[i1, i2]]. One thread per output element; an id out of range is
// reported and its row left unwritten (the computation fails).
__global__ void add_id_kernel(TensorDesc a, TensorDesc b, TensorDesc ids, TensorDesc out, int64_t n, IndexError* err,
                              int32_t node) {
  for (int64_t f = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; f < n;
       f += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    int64_t i0, i1, i2, i3;
    flat_coords(out.ne, f, &i0, &i1, &i2, &i3);
    const int32_t id = load_i32(ids, i1, i2, 0, 0);
    if (id < 0 || id >= b.ne[1]) {
      report_index_error(err, node, id, static_cast<int32_t>(b.ne[1]));
      continue;
    }
    store_float(out, i0, i1, i2, i3, load_f32(a, i0, i1, i2, i3) + load_f32(b, i0, id, 0, 0));
  }
}

// SET_ROWS: dst[:, ids[i, j, k], j, k] = rows[:, i, j, k]. One block per source row; when several rows of one (j, k)
// slice name the same destination row, the last one wins (as a sequential loop would), the others are skipped.
__global__ void set_rows_kernel(TensorDesc dst, TensorDesc rows, TensorDesc ids, IndexError* err, int32_t node) {
  const int64_t r = blockIdx.x;
  int64_t i, j, k;
  row_coords(rows.ne, r, &i, &j, &k);
  const int32_t id = load_i32(ids, i, j, k, 0);
  __shared__ int skip;
  if (threadIdx.x == 0) {
    skip = 0;
    if (id < 0 || id >= dst.ne[1]) {
      report_index_error(err, node, id, static_cast<int32_t>(dst.ne[1]));
      skip = 1;
    } else {
      for (int64_t later = i + 1; later < rows.ne[1]; ++later) {
        if (load_i32(ids, later, j, k, 0) == id) {
          skip = 1;
          break;
        }
      }
    }
  }
  __syncthreads();
  if (skip) return;
  if (is_quant_t(dst.type)) {
    for (int64_t b = threadIdx.x; b < dst.ne[0] / kQ; b += blockDim.x) {
      float x[kQ];
      for (int q = 0; q < kQ; ++q) x[q] = load_f32(rows, b * kQ + q, i, j, k);
      store_block(dst.type, elem_addr(dst, b * kQ, id, j, k), x);
    }
  } else {
    for (int64_t c = threadIdx.x; c < dst.ne[0]; c += blockDim.x) {
      store_float(dst, c, id, j, k, load_f32(rows, c, i, j, k));
    }
  }
}

int unit_bytes(int32_t type) {
  switch (type) {
    case kTF32:
    case kTI32: return 4;
    case kTF16:
    case kTBF16: return 2;
    case kTQ8: return kQ8Bytes;
    case kTQ4: return kQ4Bytes;
    default: return 0;
  }
}

}  // namespace

cudaError_t scratch_alloc(const LaunchContext& ctx, void** p, size_t bytes) {
  if (ctx.pool != nullptr) return cudaMallocFromPoolAsync(p, bytes, ctx.pool, ctx.stream);
  return cudaMallocAsync(p, bytes, ctx.stream);
}

Status cuda_status(cudaError_t err, const char* what, const Tensor& node) {
  if (err == cudaSuccess) return Status::Ok();
  return TS_ERROR(StatusCode::kFailed, "CUDA error %s (%s) in %s for %s", cudaGetErrorName(err),
                  cudaGetErrorString(err), what, describe(node).c_str());
}

Status launch_cpy(const Tensor& node, LaunchContext& ctx) {
  const Tensor& a = *node.src[0];
  const TensorDesc s = desc_of(a), d = desc_of(node);
  const int64_t n = nelements(node);
  if (a.type == node.type) {
    if (is_quant_t(d.type)) {
      const int64_t nb = n / kQ;
      copy_blocks<<<grid_for(nb, kThreads), kThreads, 0, ctx.stream>>>(s, d, nb, unit_bytes(d.type));
    } else {
      copy_units<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(s, d, n, unit_bytes(d.type));
    }
  } else if (is_quant_t(d.type)) {
    const int64_t nb = n / kQ;
    convert_to_quant<<<grid_for(nb, kThreads), kThreads, 0, ctx.stream>>>(s, d, nb);
  } else {
    convert_to_float<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(s, d, n);
  }
  return cuda_status(cudaGetLastError(), "copy kernel launch", node);
}

Status launch_to_f32(const TensorDesc& src, float* dst, cudaStream_t stream) {
  const int64_t n = src.ne[0] * src.ne[1] * src.ne[2] * src.ne[3];
  if (n == 0) return Status::Ok();
  to_f32_kernel<<<grid_for(n, kThreads), kThreads, 0, stream>>>(src, dst, n);
  const cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess) {
    return TS_ERROR(StatusCode::kFailed, "CUDA error %s (%s) launching the f32 conversion", cudaGetErrorName(e),
                    cudaGetErrorString(e));
  }
  return Status::Ok();
}

Status launch_get_rows(const Tensor& node, LaunchContext& ctx) {
  const int64_t n = nelements(node);
  if (n == 0) return Status::Ok();
  get_rows_kernel<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(
      desc_of(*node.src[0]), desc_of(*node.src[1]), desc_of(node), n, ctx.index_error, ctx.node_index);
  return cuda_status(cudaGetLastError(), "GET_ROWS kernel launch", node);
}

Status launch_add_id(const Tensor& node, LaunchContext& ctx) {
  const int64_t n = nelements(node);
  if (n == 0) return Status::Ok();
  add_id_kernel<<<grid_for(n, kThreads), kThreads, 0, ctx.stream>>>(desc_of(*node.src[0]), desc_of(*node.src[1]),
                                                                    desc_of(*node.src[2]), desc_of(node), n,
                                                                    ctx.index_error, ctx.node_index);
  return cuda_status(cudaGetLastError(), "ADD_ID kernel launch", node);
}

Status launch_set_rows(const Tensor& node, LaunchContext& ctx) {
  const Tensor& rows = *node.src[1];
  const int64_t nrows_src = rows.ne[1] * rows.ne[2] * rows.ne[3];
  if (nrows_src == 0) return Status::Ok();
  if (nrows_src > 0x7fffffff) {
    return TS_ERROR(StatusCode::kUnsupported, "SET_ROWS with %lld source rows is beyond the grid limit (%s)",
                    static_cast<long long>(nrows_src), describe(node).c_str());
  }
  set_rows_kernel<<<static_cast<unsigned>(nrows_src), 128, 0, ctx.stream>>>(
      desc_of(node), desc_of(rows), desc_of(*node.src[2]), ctx.index_error, ctx.node_index);
  return cuda_status(cudaGetLastError(), "SET_ROWS kernel launch", node);
}

}  // namespace tessera::cuda::kernels
