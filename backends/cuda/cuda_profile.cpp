// See cuda_profile.h.
#include "cuda_profile.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace tessera::cuda {

NodeProfiler::NodeProfiler(std::string backend_name) : name_(std::move(backend_name)) {
  const char* env = std::getenv("TESSERA_CUDA_PROFILE");
  enabled_ = env != nullptr && env[0] != '\0' && std::string(env) != "0";
}

NodeProfiler::~NodeProfiler() {
  if (enabled_ && graphs_ > 0) {
    std::vector<std::pair<std::string, Row>> rows(rows_.begin(), rows_.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
    double total = 0.0;
    for (const auto& r : rows) total += r.second.ms;
    std::fprintf(stderr, "%s profile: %lld graphs, %.3f ms per graph in kernels\n", name_.c_str(),
                 static_cast<long long>(graphs_), total / static_cast<double>(graphs_));
    std::fprintf(stderr, "  %-28s %10s %14s %12s %7s\n", "op (src0 type)", "calls", "us per graph", "us per call",
                 "share");
    for (const auto& [key, row] : rows) {
      std::fprintf(stderr, "  %-28s %10lld %14.2f %12.2f %6.1f%%\n", key.c_str(), static_cast<long long>(row.calls),
                   1000.0 * row.ms / static_cast<double>(graphs_), 1000.0 * row.ms / static_cast<double>(row.calls),
                   total > 0 ? 100.0 * row.ms / total : 0.0);
    }
  }
  for (cudaEvent_t e : pool_) cudaEventDestroy(e);
}

cudaEvent_t NodeProfiler::take() {
  if (used_ == pool_.size()) {
    cudaEvent_t e = nullptr;
    if (cudaEventCreate(&e) != cudaSuccess) return nullptr;
    pool_.push_back(e);
  }
  return pool_[used_++];
}

void NodeProfiler::before(const Tensor& node, cudaStream_t stream) {
  cudaEvent_t e = take();
  if (e == nullptr) return;
  cudaEventRecord(e, stream);
  std::string key = op_name(node.op);
  if (node.src[0] != nullptr) key += std::string(" (") + type_name(node.src[0]->type) + ")";
  keys_.push_back(std::move(key));
}

void NodeProfiler::end_graph(cudaStream_t stream) {
  if (used_ == 0) return;
  cudaEvent_t last = take();
  if (last != nullptr) {
    cudaEventRecord(last, stream);
    cudaEventSynchronize(last);
    for (size_t i = 0; i + 1 < used_; ++i) {
      float ms = 0.0f;
      if (cudaEventElapsedTime(&ms, pool_[i], pool_[i + 1]) != cudaSuccess) continue;
      Row& r = rows_[keys_[i]];
      r.calls += 1;
      r.ms += ms;
    }
    ++graphs_;
  }
  used_ = 0;
  keys_.clear();
}

}  // namespace tessera::cuda
