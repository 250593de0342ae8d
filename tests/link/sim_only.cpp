// Links only tessera::sim (and what it depends on: the core and the CPU backend's kernels), no backend registry and
// no harness: the simulator must stand on its own. Builds a one-GPU topology in code, adds two vectors on the
// simulated GPU and checks the sums, which are exact in f32 for these small integers.
#include <cstdio>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/graph_copy.h"
#include "tessera/sim/simulator.h"

using namespace tessera;

int main() {
  sim::TopologyConfig topology;
  topology.name = "link-check";
  sim::DeviceConfig gpu;
  gpu.name = "gpu0";
  gpu.memory = 64 * sim::MiB;
  topology.devices.push_back(gpu);
  auto simulator = sim::Simulator::create(topology, {}, /*real=*/nullptr);
  if (!simulator.ok()) {
    std::fprintf(stderr, "sim_only: %s\n", simulator.status().to_string().c_str());
    return 1;
  }
  auto backends = simulator.value()->make_backends();
  if (!backends.ok() || backends.value().size() != 1) {
    std::fprintf(stderr, "sim_only: expected one backend\n");
    return 1;
  }
  Backend& backend = *backends.value()[0];

  Context ctx{{.no_alloc = true}};
  const int64_t n = 8;
  Tensor* a = ctx.new_tensor_1d(Type::kF32, n);
  Tensor* b = ctx.new_tensor_1d(Type::kF32, n);
  Tensor* sum = add(ctx, a, b);
  Graph graph;
  if (!ctx.status().ok() || !graph.build_forward(sum).ok()) {
    std::fprintf(stderr, "sim_only: building the graph failed\n");
    return 1;
  }
  auto buffer = alloc_ctx_tensors(ctx, *backend.device()->buffer_type());
  if (!buffer.ok()) {
    std::fprintf(stderr, "sim_only: %s\n", buffer.status().to_string().c_str());
    return 1;
  }
  std::vector<float> va(n), vb(n);
  for (int64_t i = 0; i < n; ++i) {
    va[static_cast<size_t>(i)] = static_cast<float>(i);
    vb[static_cast<size_t>(i)] = static_cast<float>(100 * i);
  }
  if (!tensor_from_f32(*a, va).ok() || !tensor_from_f32(*b, vb).ok() ||
      backend.graph_compute(graph) != ComputeStatus::kSuccess) {
    std::fprintf(stderr, "sim_only: computing on the simulated GPU failed: %s\n", backend.last_error().c_str());
    return 1;
  }
  auto out = tensor_to_f32(*sum);
  if (!out.ok()) return 1;
  for (int64_t i = 0; i < n; ++i) {
    if (out.value()[static_cast<size_t>(i)] != static_cast<float>(101 * i)) {
      std::fprintf(stderr, "sim_only: element %lld is %g, expected %lld\n", static_cast<long long>(i),
                   static_cast<double>(out.value()[static_cast<size_t>(i)]), static_cast<long long>(101 * i));
      return 1;
    }
  }
  std::printf("sim_only: ok (8 sums on a simulated GPU, no registry linked)\n");
  return 0;
}
