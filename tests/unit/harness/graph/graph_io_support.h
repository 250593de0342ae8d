// Helpers of the graph-file tests that read a written graph's JSON (graph_io_rope_test.cpp, graph_io_clamp_test.cpp)
// or a tensor's bytes (graph_io_test.cpp).
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/backend.h"
#include "tessera/tensor.h"

namespace tessera::test {

// A tensor's bytes, read through tensor_get.
inline std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> b(nbytes(t));
  EXPECT_TRUE(tensor_get(t, b.data(), 0, b.size()).ok());
  return b;
}

// A float's bits as the graph format stores float op params (an int32).
inline int32_t f32_bits(float v) {
  int32_t b;
  std::memcpy(&b, &v, 4);
  return b;
}

// The index of the tensor named `name` in a graph file's "tensors" (a test failure, and 0, when there is none).
inline size_t index_of(const nlohmann::ordered_json& j, const std::string& name) {
  const nlohmann::ordered_json& ts = j["tensors"];
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i]["name"] == name) return i;
  }
  ADD_FAILURE() << "no tensor " << name;
  return 0;
}

}  // namespace tessera::test
