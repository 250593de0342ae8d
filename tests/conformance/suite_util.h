// What the files of the backend conformance suite share beyond backend_conformance.h (which is what a backend's
// instantiation needs): the type list, small helpers and assertions used by more than one area. Defined in
// backend_conformance.cpp.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "conformance/backend_conformance.h"

namespace tessera::conformance {

// The types with kernels (types.h; the storage-only types have a test of their own in suite_supports_op.cpp).
inline constexpr Type kAllTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kI32, Type::kQ8_0, Type::kQ4_0};

inline std::string tn(Type t) { return type_name(t); }

ContextParams no_alloc();

::testing::AssertionResult BytesEqual(const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual);

// alloc_ctx_tensors, with "allocated nothing" as an error (every suite context has tensors).
Result<std::unique_ptr<Buffer>> alloc_on(Context& ctx, BufferType& buft);

// Allocates expr (a Result<std::unique_ptr<Buffer>>) into a new variable var, or fails the test.
#define CONF_ASSIGN_BUFFER(var, expr)                                           \
  std::unique_ptr<Buffer> var;                                                  \
  {                                                                             \
    auto conf_r_ = (expr);                                                      \
    ASSERT_TRUE(conf_r_.ok()) << #expr << ": " << conf_r_.status().to_string(); \
    var = std::move(conf_r_.value());                                           \
    ASSERT_NE(var, nullptr);                                                    \
  }

// Names of the nodes of g the backend does not claim (views included: a backend must accept them).
std::vector<std::string> unclaimed_nodes(const Backend& backend, const Graph& g);
// The strings joined by "; ".
std::string join(const std::vector<std::string>& v);

}  // namespace tessera::conformance
