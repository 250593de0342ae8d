// Graph copy and backend comparison (docs/interfaces.md, 'Graph copy and backend comparison').
#pragma once

#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/context.h"
#include "tessera/graph.h"

namespace tessera {

// A graph duplicated onto a backend: its own contexts and buffer; views stay views of their copied sources; data of
// every allocated tensor is copied.
struct GraphCopy {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Buffer> buffer;
  std::unique_ptr<Graph> graph;
  // Maps each tensor of the original graph to its copy.
  Tensor* copy_of(const Tensor* original) const;
  std::unordered_map<const Tensor*, Tensor*> map;
};

Result<GraphCopy> graph_copy(Backend& backend, const Graph& graph);

// Called for each computed node i with the result on backend 1 (t1) and backend 2 (t2); return false to stop.
using CompareCallback = std::function<bool(size_t i, Tensor& t1, Tensor& t2)>;

// Copies graph to b2, then for each non-view node computes it alone on b1 (on graph's own tensors) and on b2 (on the
// copy), and calls callback. graph must be allocated in memory b1 can compute on.
Status compare_graph_backend(Backend& b1, Backend& b2, const Graph& graph, const CompareCallback& callback);

// Normalised mean squared error sum((a-b)^2) / sum(a^2), computed in double over the positions where both sides are
// finite. nan_mismatch is set when one side has a NaN/Inf where the other has a finite value (or a different
// non-finite value); non_finite counts the positions where either side is NaN/Inf, matching or not, so that NaN on both
// sides (which NMSE alone reports as 0) can still be refused.
struct NmseResult {
  double nmse = 0.0;
  bool nan_mismatch = false;
  size_t non_finite = 0;
  size_t n = 0;
};
NmseResult nmse(const float* a, const float* b, size_t n);
// Reads both tensors (any non-i32 type, any buffer) as f32 and compares them.
Result<NmseResult> nmse(const Tensor& a, const Tensor& b);
// Reads a tensor (any buffer, any layout) as f32 values in flat order; i32 values converted exactly.
Result<std::vector<float>> tensor_to_f32(const Tensor& t);
// Writes flat-ordered f32 values into a tensor of any type and layout (converting/quantizing).
Status tensor_from_f32(Tensor& t, const std::vector<float>& values);

}  // namespace tessera
