// The backend conformance suite instantiated for the CPU backend: with its default kernels at the default thread count
// and at three threads (the thread pool must not change results, docs/architecture.md, "CPU kernel dispatch":
// Determinism), and with the optimised kernels at every SIMD level (they must pass the conformance suite too). The
// reference side of every comparison is a fresh CPU backend running the reference kernels.
#include <string>

#include "conformance/backend_conformance.h"
#include "tessera/cpu.h"

namespace {

using tessera::cpu::CpuKernels;

tessera::conformance::BackendFactory cpu_factory(const char* name, int n_threads, CpuKernels kernels) {
  tessera::conformance::BackendFactory f;
  f.name = name;
  f.make = [n_threads, kernels](std::string* skip_reason) -> std::unique_ptr<tessera::Backend> {
    if (kernels != CpuKernels::kAuto && kernels != CpuKernels::kReference &&
        static_cast<int>(kernels) > static_cast<int>(tessera::cpu::best_kernels())) {
      *skip_reason = std::string("this CPU or build has no ") + tessera::cpu::kernels_name(kernels) +
                     " kernels (best: " + tessera::cpu::kernels_name(tessera::cpu::best_kernels()) + ")";
      return nullptr;
    }
    tessera::cpu::CpuBackendParams params;
    params.n_threads = n_threads;
    params.kernels = kernels;
    return tessera::cpu::make_backend(params);
  };
  f.expect_full_op_support = true;  // a reference kernel for every op and type
  // The optimised kernels quantize the activations of a quantized matrix x vector (quantized_activation_nmse).
  // The default kernels (kAuto) are the reference kernels unless TESSERA_CPU_ISA selects optimised ones.
  f.nmse_override = tessera::conformance::quantized_activation_nmse;
  return f;
}

}  // namespace

TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(Cpu, cpu_factory("Cpu", 0, CpuKernels::kAuto),
                                        cpu_factory("Cpu3Threads", 3, CpuKernels::kAuto),
                                        cpu_factory("CpuOptAvx512", 0, CpuKernels::kAvx512),
                                        cpu_factory("CpuOptAvx2", 3, CpuKernels::kAvx2),
                                        cpu_factory("CpuOptPortable", 2, CpuKernels::kPortable));
