// cuBLAS loaded at the first cuBLAS call (cublas_loader.h): forwarding definitions of the cuBLAS functions the
// project calls, with the prototypes of <cublas_v2.h>, so that nothing links libcublas. A new cuBLAS call in the
// backend, the kernels or the benchmarks needs its forwarder here (the link fails without one).
#include "cublas_loader.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <string>
#include <type_traits>

#define TESSERA_CUBLAS_STRINGIFY2(x) #x
#define TESSERA_CUBLAS_STRINGIFY(x) TESSERA_CUBLAS_STRINGIFY2(x)

namespace tessera::cuda {

namespace {

constexpr const char* kCublasFile = "libcublas.so." TESSERA_CUBLAS_STRINGIFY(CUBLAS_VER_MAJOR);

using CreateFn = decltype(&cublasCreate_v2);
using DestroyFn = decltype(&cublasDestroy_v2);
using SetStreamFn = decltype(&cublasSetStream_v2);
using SgemmFn = decltype(&cublasSgemm_v2);
// cublasGemmEx is overloaded (<cublas_api.h> adds an inline C++ one taking a cudaDataType compute type): the C one.
using GemmExFn = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int, const void*,
                                    const void*, cudaDataType, int, const void*, cudaDataType, int, const void*, void*,
                                    cudaDataType, int, cublasComputeType_t, cublasGemmAlgo_t);
[[maybe_unused]] constexpr GemmExFn kGemmExHasThisType = &cublasGemmEx;  // does not compile if the header differs

struct Cublas {
  void* library = nullptr;  // never closed once loaded for the process: handles may live until exit
  CreateFn create = nullptr;
  DestroyFn destroy = nullptr;
  SetStreamFn set_stream = nullptr;
  SgemmFn sgemm = nullptr;
  GemmExFn gemm_ex = nullptr;
  std::string error;  // "" when loaded
};

std::string dl_message(const std::string& file) {
  const char* e = dlerror();
  const std::string text = e != nullptr ? e : "unknown error";
  return text.find(file) != std::string::npos ? text : file + ": " + text;
}

// Opens `file` and resolves every function; on failure nothing stays open and `error` says why.
Cublas open_cublas(const std::string& file) {
  Cublas c;
  dlerror();
  c.library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (c.library == nullptr) {
    c.error = dl_message(file);
    return c;
  }
  const auto resolve = [&c, &file](auto& fn, const char* name) {
    if (!c.error.empty()) return;
    dlerror();
    void* p = dlsym(c.library, name);
    if (p == nullptr) {
      c.error = dl_message(file);
      if (c.error.find(name) == std::string::npos) c.error += std::string(" (") + name + ")";
      return;
    }
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(p);
  };
  resolve(c.create, "cublasCreate_v2");
  resolve(c.destroy, "cublasDestroy_v2");
  resolve(c.set_stream, "cublasSetStream_v2");
  resolve(c.sgemm, "cublasSgemm_v2");
  resolve(c.gemm_ex, "cublasGemmEx");
  if (!c.error.empty()) {
    dlclose(c.library);
    Cublas failed;
    failed.error = c.error;
    return failed;
  }
  return c;
}

// The process's cuBLAS, loaded on first use (a function-local static: thread-safe, once).
const Cublas& loaded() {
  static const Cublas c = [] {
    Cublas first = open_cublas(kCublasFile);
    if (first.error.empty()) return first;
    const std::string beside = cublas_beside_cudart();
    if (beside.empty()) {
      first.error += "; the directory of libcudart is unknown";
      return first;
    }
    Cublas second = open_cublas(beside);
    if (second.error.empty()) return second;
    second.error = first.error + "; " + second.error;
    return second;
  }();
  return c;
}

}  // namespace

const char* cublas_file_name() { return kCublasFile; }

bool cublas_load() { return loaded().error.empty(); }

std::string cublas_load_error() { return loaded().error; }

std::string cublas_beside_cudart() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&cudaRuntimeGetVersion), &info) == 0 || info.dli_fname == nullptr) return "";
  const std::string cudart = info.dli_fname;
  const size_t slash = cudart.rfind('/');
  if (slash == std::string::npos) return "";
  return cudart.substr(0, slash + 1) + kCublasFile;
}

std::string cublas_try_load(const std::string& file) {
  Cublas c = open_cublas(file);
  if (c.library != nullptr) dlclose(c.library);
  return c.error;
}

}  // namespace tessera::cuda

// The forwarders: the C functions of <cublas_v2.h> (its macros map cublasCreate to cublasCreate_v2 and so on). Inside
// extern "C", a parameter list that differs from the header's does not compile.
extern "C" {

cublasStatus_t CUBLASWINAPI cublasCreate_v2(cublasHandle_t* handle) {
  const auto& c = tessera::cuda::loaded();
  return c.create != nullptr ? c.create(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasDestroy_v2(cublasHandle_t handle) {
  const auto& c = tessera::cuda::loaded();
  return c.destroy != nullptr ? c.destroy(handle) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSetStream_v2(cublasHandle_t handle, cudaStream_t streamId) {
  const auto& c = tessera::cuda::loaded();
  return c.set_stream != nullptr ? c.set_stream(handle, streamId) : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasSgemm_v2(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                           int m, int n, int k, const float* alpha, const float* A, int lda,
                                           const float* B, int ldb, const float* beta, float* C, int ldc) {
  const auto& c = tessera::cuda::loaded();
  return c.sgemm != nullptr ? c.sgemm(handle, transa, transb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc)
                            : CUBLAS_STATUS_NOT_INITIALIZED;
}

cublasStatus_t CUBLASWINAPI cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb,
                                         int m, int n, int k, const void* alpha, const void* A, cudaDataType Atype,
                                         int lda, const void* B, cudaDataType Btype, int ldb, const void* beta, void* C,
                                         cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                                         cublasGemmAlgo_t algo) {
  const auto& c = tessera::cuda::loaded();
  return c.gemm_ex != nullptr ? c.gemm_ex(handle, transa, transb, m, n, k, alpha, A, Atype, lda, B, Btype, ldb, beta, C,
                                          Ctype, ldc, computeType, algo)
                              : CUBLAS_STATUS_NOT_INITIALIZED;
}

}  // extern "C"
