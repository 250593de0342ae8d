// Tensor parallelism's split states (llama.cpp's -sm tensor; ggml's meta backend, ggml-backend-meta.cpp;
// docs/tensor-parallel.md). Over N devices each tensor is split along one of its axes (each device holds a slice),
// mirrored (every device holds all of it) or partial (every device holds a partial sum of it, to be reduced). The
// application gives the states of the tensors it allocates statically (weights, caches); every other tensor's state
// follows from its op and its sources' states, by the rules of plan_tensor_parallel. A node whose result is partial
// ends a subgraph: each device computes its subgraph on its slices, then the devices add up their partial results
// (an AllReduce), after which the result is mirrored.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/graph.h"
#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera {

enum class SplitAxis : int { k0 = 0, k1 = 1, k2 = 2, k3 = 3, kMirrored = 10, kPartial = 11 };
const char* split_axis_name(SplitAxis axis);  // "axis 0" .. "axis 3", "mirrored", "partial"

struct SplitState {
  SplitAxis axis = SplitAxis::kMirrored;
  // A split tensor (axes 0-3): the elements along the axis of each segment on each device, ne[s * n_devices + j], and
  // how often each segment repeats, nr[s]; all segments with their repetitions add up to the tensor's extent. Most
  // tensors have one segment; a fused matrix (Q, K and V in one) has one per part, so that each device gets a slice
  // of every part. Empty for mirrored and partial tensors.
  std::vector<int64_t> ne;
  std::vector<uint32_t> nr;

  bool is_split() const { return axis <= SplitAxis::k3; }
  size_t n_segments() const { return nr.size(); }
  // The elements along the split axis on device j (all segments and repetitions).
  int64_t on_device(size_t j, size_t n_devices) const;
  // "axis 1 {64, 64}", "mirrored".
  std::string describe(size_t n_devices) const;
};

// The state of a statically allocated tensor (a weight or a cache), as the application assigns it (llama.cpp's
// llama_meta_device_get_split_state), or of a node computed outside the meta device (on the CPU: the meta device reads
// its result whole, mirrored); std::nullopt for every other tensor (the graph's inputs, which are then mirrored, and
// the nodes whose state the rules give).
using StaticSplitFn = std::function<std::optional<SplitState>(const Tensor& t)>;

struct TensorParallelPlan {
  size_t n_devices = 0;
  // Each leaf's and node's state as computed (a MUL_MAT of two tensors split along axis 0 is partial here).
  std::unordered_map<const Tensor*, SplitState> state;
  // The nodes (indices into the graph's nodes) whose partial result is reduced over the devices (an AllReduce of
  // nbytes each), in graph order: each ends a subgraph. The graph's last node ends the last one.
  std::vector<size_t> reductions;
  size_t n_subgraphs() const;

  const SplitState* of(const Tensor* t) const;
};

// The split states of a graph's tensors over n_devices (1 to 16, as GGML_BACKEND_META_MAX_DEVICES) and where the
// reductions go. Errors (kInvalidArgument, naming the node, its op and its sources' states): a static state whose
// slices do not add up to the tensor's extent or are not whole blocks of its type along axis 0, and a node whose
// sources' states its op cannot combine (ggml aborts there), e.g. a row-wise op (RMS_NORM, SOFT_MAX's rows are
// fine) over a tensor split along axis 0, a MUL_MAT of a matrix split along axis 0 by a mirrored one.
Result<TensorParallelPlan> plan_tensor_parallel(const Graph& graph, size_t n_devices, const StaticSplitFn& statics);

}  // namespace tessera
