// cuBLAS, loaded at the first cuBLAS call instead of linked: mapping and relocating libcublas and libcublasLt cost
// every process ~0.1 s and ~210 MiB at startup (`tessera --version` included), though only a CUDA backend on a real
// GPU uses them. cublas_loader.cpp defines the cuBLAS functions the project calls (cublasCreate, cublasDestroy,
// cublasSetStream, cublasSgemm, cublasGemmEx; the prototypes of <cublas_v2.h>); the first call of any of them opens
// libcublas.so.<CUBLAS_VER_MAJOR> (dlopen: the library path, then the directory of the loaded libcudart) and
// resolves them all, once per process. Without the library or one of the functions they return
// CUBLAS_STATUS_NOT_INITIALIZED (cublasCreate leaves the handle as it was), and cublas_load_error() says why.
#pragma once

#include <string>

namespace tessera::cuda {

// The file opened: "libcublas.so.13" for the cuBLAS 13 headers.
const char* cublas_file_name();
// Loads cuBLAS now if no cuBLAS call has yet (once per process, thread-safe): true when the library and every
// forwarded function were found.
bool cublas_load();
// Why the load failed ("" when it succeeded): each file tried, with dlopen's or dlsym's message. Loads cuBLAS if no
// cuBLAS call has yet.
std::string cublas_load_error();
// The second place tried: cublas_file_name() in the directory of the loaded libcudart ("" when that is unknown).
std::string cublas_beside_cudart();
// Opens `file` (a name for the library path, or a path) and resolves every forwarded function, then closes it again;
// the process's own cuBLAS is not affected. "" on success, else why (naming the file, or the missing function).
std::string cublas_try_load(const std::string& file);

}  // namespace tessera::cuda
