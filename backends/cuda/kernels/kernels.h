// Internal interface between the CUDA backend (host C++) and its kernels (.cu). Every launcher enqueues work on the
// backend's stream and returns at once; a launch error becomes a Status naming the node.
//
// Kernels see tensors as TensorDesc: data pointer, type, ne and byte strides. Element (i0, i1, i2, i3) lives at
// data + i0 / block_size * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3, as in the CPU reference kernels.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera::cuda::kernels {

struct TensorDesc {
  void* data;
  int32_t type;  // tessera::Type
  int64_t ne[4];
  int64_t nb[4];
};

inline TensorDesc desc_of(const Tensor& t) {
  TensorDesc d{};
  d.data = t.data;
  d.type = static_cast<int32_t>(t.type);
  for (int i = 0; i < 4; ++i) {
    d.ne[i] = t.ne[i];
    d.nb[i] = static_cast<int64_t>(t.nb[i]);
  }
  return d;
}

// Index errors found by a kernel (GET_ROWS, SET_ROWS, MUL_MAT_ID): the kernel skips the row (nothing is written out
// of bounds) and records the first bad id here. Lives in mapped pinned host memory; the backend reads it after the
// stream has drained.
struct IndexError {
  int32_t flag;   // 0 = none
  int32_t node;   // index of the node in the graph
  int32_t value;  // the bad id
  int32_t limit;  // its valid range [0, limit)
};

// What a launcher needs besides the node.
struct LaunchContext {
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  IndexError* index_error = nullptr;  // device-visible address of the backend's IndexError
  int32_t node_index = 0;
  int sm_count = 1;
  // The backend's stream-ordered pool for scratch memory (kept between graphs; null: the device's default pool).
  cudaMemPool_t pool = nullptr;
};

// Stream-ordered scratch memory from ctx.pool (or the default pool).
cudaError_t scratch_alloc(const LaunchContext& ctx, void** p, size_t bytes);

// Runs one compute node (never a view or a leaf). The caller has checked supports(node).
Status launch_node(const Tensor& node, LaunchContext& ctx);

// Per-group launchers (kernels_copy.cu, kernels_rows.cu, kernels_matmul.cu).
Status launch_cpy(const Tensor& node, LaunchContext& ctx);  // CPY, CONT, DUP
Status launch_get_rows(const Tensor& node, LaunchContext& ctx);
Status launch_set_rows(const Tensor& node, LaunchContext& ctx);
Status launch_add_id(const Tensor& node, LaunchContext& ctx);
Status launch_elementwise(const Tensor& node, LaunchContext& ctx);  // ADD, MUL, DIV, SCALE, UNARY, GLU
Status launch_row_op(const Tensor& node, LaunchContext& ctx);       // RMS_NORM, NORM, SUM_ROWS, SOFT_MAX, ROPE
Status launch_sort(const Tensor& node, LaunchContext& ctx);         // ARGSORT, TOP_K
Status launch_mul_mat(const Tensor& node, LaunchContext& ctx);
Status launch_mul_mat_id(const Tensor& node, LaunchContext& ctx);
Status launch_flash_attn(const Tensor& node, LaunchContext& ctx);

// Fast paths (kernels_fast.cu): each returns false, launching nothing, when the node is outside its preconditions;
// otherwise it launches and sets *st.
bool launch_matvec_fast(const Tensor& node, LaunchContext& ctx, Status* st);      // MUL_MAT, N <= kMatvecMaxN
bool launch_flash_attn_fast(const Tensor& node, LaunchContext& ctx, Status* st);  // f16/f32 K and V, D, Dv <= 256
bool launch_binary_fast(const Tensor& node, LaunchContext& ctx, Status* st);      // contiguous f32 ADD/MUL/DIV

// Converts any tensor (any type, any strides) to a contiguous f32 array of nelements(t) values in flat order.
Status launch_to_f32(const TensorDesc& src, float* dst, cudaStream_t stream);

// The MUL_MAT strategy for a node (exposed for tests and docs): matrix x vector kernel for small N, else cuBLAS.
enum class MatmulPath { kMatvec, kCublasF32, kCublasF16, kDequantCublas };
MatmulPath mul_mat_path(const Tensor& node);
constexpr int64_t kMatvecMaxN = 8;  // N (src1 columns per batch) up to which the own matvec kernel runs

// "CUDA error <name> (<string>) in <what> for <node>" as a status.
Status cuda_status(cudaError_t err, const char* what, const Tensor& node);

}  // namespace tessera::cuda::kernels
