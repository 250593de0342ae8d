// The backend conformance suite (tests/conformance) instantiated for the CUDA backend on device 0: every property
// test and every op x type of the catalogue against the CPU reference. Without a GPU every test is skipped with the
// reason ("no CUDA device visible (...)").
#include "conformance/backend_conformance.h"
#include "cuda_test_util.h"

namespace {

tessera::conformance::BackendFactory cuda_factory() {
  tessera::conformance::BackendFactory f;
  f.name = "Cuda";
  f.make = [](std::string* skip_reason) { return tessera::cuda::testing::backend_or_reason(skip_reason); };
  // The CUDA kernels cover every op and type of the catalogue (supports_node; checked without a GPU in
  // cuda_backend_test.cpp, SupportsEveryCatalogueCase) but CLAMP: it came in a session without a GPU, and its CUDA
  // kernel lands only once it has run on one (cuda_supports.cpp).
  f.expect_full_op_support = true;
  f.ops_without_kernels = {tessera::Op::kClamp};
  // f16-weight MUL_MAT through cuBLAS rounds src1 to f16 (relative error 2^-12 per product).
  f.nmse_override = [](const tessera::Tensor& node) -> std::optional<double> {
    if (node.op == tessera::Op::kMulMat && node.src[0] != nullptr && node.src[0]->type == tessera::Type::kF16) {
      return 1e-5;
    }
    return std::nullopt;
  };
  return f;
}

}  // namespace

TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(Cuda, cuda_factory());
