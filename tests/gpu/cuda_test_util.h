// Shared helpers of the CUDA tests: skip (with a reason, never fail) when no GPU is visible.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "tessera/cuda.h"

namespace tessera::cuda::testing {

inline std::string no_gpu_reason() {
  const std::string why = unavailable_reason();
  return "no CUDA device visible" + (why.empty() ? std::string() : " (" + why + ")");
}

// A backend on device 0, or nullptr with *reason set.
inline std::unique_ptr<Backend> backend_or_reason(std::string* reason, int device = 0) {
  if (device_count() <= device) {
    *reason = device == 0 ? no_gpu_reason() : "fewer than " + std::to_string(device + 1) + " CUDA devices visible";
    return nullptr;
  }
  CudaBackendParams p;
  p.device = device;
  auto b = make_backend(p);
  if (!b.ok()) {
    *reason = "CUDA backend could not be created: " + b.status().to_string();
    return nullptr;
  }
  return std::move(b).value();
}

}  // namespace tessera::cuda::testing

// In a test body: skips the test when there is no GPU.
#define TESSERA_REQUIRE_GPU(min_devices)                                                                               \
  do {                                                                                                                 \
    if (::tessera::cuda::device_count() < (min_devices)) {                                                             \
      if ((min_devices) <= 1) GTEST_SKIP() << ::tessera::cuda::testing::no_gpu_reason();                               \
      GTEST_SKIP() << "needs " << (min_devices) << " CUDA devices, " << ::tessera::cuda::device_count() << " visible"; \
    }                                                                                                                  \
  } while (0)
