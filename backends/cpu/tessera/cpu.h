// The CPU backend (docs/interfaces.md, 'The CPU backend'): host and mapped buffer types (64-byte alignment), one CPU
// device described from the OS, a backend with a thread count and an abort callback, graph plans, and the registration.
#pragma once

#include <memory>

#include "tessera/backend.h"

namespace tessera::cpu {

constexpr size_t kCpuAlignment = 64;

// The CPU registration (process-wide, immutable: one device "CPU").
BackendReg* registration();
Device* device();
// Host memory buffer type ("CPU"), 64-byte aligned.
BufferType* buffer_type();

// Which kernels a CPU backend runs: the reference kernels only, or the optimised kernels (with the reference kernels
// for whatever they do not cover) at a given SIMD level; a level the CPU lacks is lowered to the best one it has.
// kAuto = the environment variable TESSERA_CPU_ISA=ref|portable|avx2|avx512 when set, else the reference kernels.
// The reference kernels stay the default for now because parts of the test suite (scheduler and simulator tests)
// compare a CPU backend with compute_graph_host_memory bit for bit; the optimised kernels agree with the reference
// within NMSE tolerances only (f32 sums in SIMD lanes; q8_0 activations for quantized matrix x vector).
enum class CpuKernels : int { kAuto = 0, kReference, kPortable, kAvx2, kAvx512 };
const char* kernels_name(CpuKernels k);
// The best optimised level this build and this CPU support (kPortable, kAvx2 or kAvx512).
CpuKernels best_kernels();

struct CpuBackendParams {
  int n_threads = 0;  // 0 = number of hardware threads
  CpuKernels kernels = CpuKernels::kAuto;
};
std::unique_ptr<Backend> make_backend(const CpuBackendParams& params = {});
bool is_cpu(const Backend& backend);

// Extension functions (also reachable through get_proc_address("set_n_threads"), "set_abort_callback").
// n_threads < 1 is clamped to 1.
void set_n_threads(Backend& backend, int n_threads);
int n_threads(const Backend& backend);
// The kernels a backend runs (never kAuto); set_kernels resolves kAuto and lowers a level the CPU lacks.
CpuKernels kernels(const Backend& backend);
void set_kernels(Backend& backend, CpuKernels kernels);
// Polled between nodes; returning true stops the computation with ComputeStatus::kAborted.
void set_abort_callback(Backend& backend, bool (*callback)(void* user), void* user);

// Computes a graph with the reference kernels (never the optimised ones: this is the oracle path), single-threaded,
// on tensors whose data is host-addressable memory whatever their buffer type says (simulated devices and test
// doubles keep "device" memory in host memory). On failure *error names the node.
ComputeStatus compute_graph_host_memory(Graph& graph, std::string* error);

// Wraps host memory (not owned) as a buffer of the "CPU_Mapped" type.
Result<std::unique_ptr<Buffer>> buffer_from_ptr(void* ptr, size_t size);

}  // namespace tessera::cpu
