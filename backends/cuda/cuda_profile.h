// Opt-in per-op timing of the CUDA backend (TESSERA_CUDA_PROFILE=1): a CUDA event before every launched node and one
// after the last; after each graph the stream is waited for and each node's time is added to its op (and weight
// type). The table goes to stderr when the backend is destroyed. Off (the default), it costs one branch per node.
#pragma once

#include <cuda_runtime.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tessera/ops.h"
#include "tessera/tensor.h"
#include "tessera/types.h"

namespace tessera::cuda {

class NodeProfiler {
 public:
  explicit NodeProfiler(std::string backend_name);
  ~NodeProfiler();
  NodeProfiler(const NodeProfiler&) = delete;
  NodeProfiler& operator=(const NodeProfiler&) = delete;

  bool enabled() const { return enabled_; }
  // Called at the start of a graph (drops what a failed graph left).
  void begin_graph() {
    used_ = 0;
    keys_.clear();
  }
  // Called before launching `node` on `stream` (enabled only).
  void before(const Tensor& node, cudaStream_t stream);
  // Called after the graph's last launch: waits for the stream and accumulates.
  void end_graph(cudaStream_t stream);

 private:
  struct Row {
    int64_t calls = 0;
    double ms = 0.0;
  };
  bool enabled_ = false;
  std::string name_;
  std::vector<cudaEvent_t> pool_;
  std::vector<std::string> keys_;  // key of the node launched after pool_[i]
  size_t used_ = 0;
  int64_t graphs_ = 0;
  std::map<std::string, Row> rows_;
  cudaEvent_t take();
};

}  // namespace tessera::cuda
