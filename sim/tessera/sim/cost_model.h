// The cost model of a simulated device: how long one op takes on it (docs/simulator.md, "Time").
#pragma once

#include <array>
#include <cstddef>
#include <vector>

#include "tessera/ops.h"

namespace tessera {
struct Tensor;
}

namespace tessera::sim {

// The kernels llama.cpp runs an op with, by class (docs/simulator.md, "Kernel classes"): each reaches its own share of
// the device's peak compute and memory bandwidth.
enum class KernelClass {
  kMatVec,       // MUL_MAT / MUL_MAT_ID of at most 8 columns (tokens): ggml-cuda's MMVQ / MMVF, memory-bound
  kMatMatQuant,  // MUL_MAT / MUL_MAT_ID of more columns, quantized weights: MMQ (integer dot products)
  kMatMatFloat,  // the same with f32 / f16 / bf16 weights: cuBLAS GEMM
  kAttnDecode,   // FLASH_ATTN_EXT of at most 8 query rows
  kAttnPrefill,  // FLASH_ATTN_EXT of more
  kOther,        // everything else: element-wise, norms, rope, softmax, copies, get_rows
};
inline constexpr size_t kKernelClassCount = 6;
// "mat_vec", "mat_mat_quant", "mat_mat_float", "attn_decode", "attn_prefill", "other": the topology keys.
const char* kernel_class_name(KernelClass c);
KernelClass kernel_class(const Tensor& node);

// What a kernel class reaches of the peaks: time = flops / (compute x throughput), bytes / (memory x bandwidth).
struct Efficiency {
  double compute = 1.0;
  double memory = 1.0;
};

// Time of one op: overhead + max(flops / (throughput(type) x compute efficiency), bytes / (bandwidth x memory
// efficiency)), the efficiencies those of the op's kernel class; or a fixed time from an override.
struct CostModel {
  double launch_overhead_us = 5.0;
  double flops_f32 = 10e12;      // FLOP/s when src[0] (the weight) is f32, f64 or an integer type
  double flops_f16 = 50e12;      // f16 and bf16
  double flops_quant = 40e12;    // quantized types (storage-only ones too)
  double mem_bandwidth = 500e9;  // bytes/s
  std::array<Efficiency, kKernelClassCount> efficiency{};  // by KernelClass; 1 (the peaks) by default
  struct Override {
    Op op = Op::kNone;
    double overhead_us = -1;  // < 0: the model's
    double flops = -1;        // < 0: the model's throughput for the type
    double fixed_us = -1;     // >= 0: the op always takes this long
  };
  std::vector<Override> overrides;
};

}  // namespace tessera::sim
