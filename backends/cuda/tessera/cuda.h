// The CUDA backend: one device per visible GPU ("CUDA0", "CUDA1", ...), a device-memory buffer type with
// accounting and a maximum allocation size, a pinned host buffer type, one stream per backend, events, async
// set/get, device-to-device and peer copies through cpy_tensor_async, offload_op with a batch threshold, an honest
// supports_op, and kernels for every op of docs/ops.md (cuBLAS for float matmul). See docs/cuda.md.
//
// With no GPU or no driver the registration exists and has zero devices; unavailable_reason() says why. Nothing in
// this header needs a GPU to be called.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "tessera/backend.h"

namespace tessera::cuda {

constexpr size_t kCudaAlignment = 256;
// offload_op: a device asks for an op whose weights are in host memory when its batch is at least this.
constexpr int64_t kDefaultOffloadMinBatch = 32;

// The CUDA registration (process-wide; its devices are discovered once, on first use).
BackendReg* registration();
// Number of CUDA devices (0 without a GPU or a driver).
int device_count();
// Why there are no devices ("" when there are some): e.g. "cudaGetDeviceCount: no CUDA-capable device is detected".
std::string unavailable_reason();
// Device i (nullptr when out of range).
Device* device(int index);
// Its VRAM buffer type ("CUDA<i>") and pinned host buffer type ("CUDA<i>_Host"); nullptr when out of range.
BufferType* buffer_type(int index);
BufferType* host_buffer_type(int index);

// Device-memory accounting of the VRAM buffer type: bytes currently allocated through it, and the largest single
// allocation it accepts (default: the device's total memory). set_max_buffer_size(i, 0) restores the default.
size_t allocated_bytes(int index);
size_t max_buffer_size(int index);
void set_max_buffer_size(int index, size_t bytes);

struct CudaBackendParams {
  int device = 0;
  int64_t offload_min_batch = kDefaultOffloadMinBatch;
};
// A backend (one stream) on a device. Errors: no such device, CUDA errors creating the stream or cuBLAS handle.
Result<std::unique_ptr<Backend>> make_backend(const CudaBackendParams& params = {});
bool is_cuda(const Backend& backend);

// The op support check behind supports_op (no GPU needed): op, types, shapes and the kernels' launch limits.
bool supports_node(const Tensor& node);
// The batch size offload_op compares with the threshold: ggml_offload_batch_size (tessera/backend.h; N for MUL_MAT,
// tokens for MUL_MAT_ID and ROPE, 0 for GET_ROWS, rows otherwise).
int64_t offload_batch_size(const Tensor& op);

}  // namespace tessera::cuda
