// The backend conformance suite instantiated for the CPU backend: once with the default thread count and once with
// three threads (the thread pool must not change results, ARCHITECTURE.md "Determinism"). The reference side of
// every comparison is a fresh default CPU backend.
#include "conformance/backend_conformance.h"
#include "tessera/cpu.h"

namespace {

tessera::conformance::BackendFactory cpu_factory(const char* name, int n_threads) {
  tessera::conformance::BackendFactory f;
  f.name = name;
  f.make = [n_threads](std::string* /*skip_reason*/) -> std::unique_ptr<tessera::Backend> {
    tessera::cpu::CpuBackendParams params;
    params.n_threads = n_threads;
    return tessera::cpu::make_backend(params);
  };
  f.expect_full_op_support = true;  // SPEC 11: a reference kernel for every op and type
  return f;
}

}  // namespace

TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(Cpu, cpu_factory("Cpu", 0), cpu_factory("Cpu3Threads", 3));
