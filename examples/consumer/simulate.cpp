// HostDev under Tessera's simulator: the simulator's wrapped devices see real devices through the registry the
// program hands it, so a device of this project's own gets the simulator's memory budget, virtual timings, adversarial
// ordering and hazard (race) detector on top of its real computation.
//   1. Simulator::create over a topology whose device "acc0" wraps HOSTDEV: a small graph computed on it, node by
//      node against the plain CPU backend (compare_graph_backend), with no race and no error.
//   2. A harness session: the "tiny" llama-style model placed on acc0 (every layer) and the wrapped CPU, planned and
//      run by Tessera's scheduler, the logits checked against the CPU reference.
// Exit status 0 when every check holds, 1 otherwise.
#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "hostdev.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/builtin.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"
#include "tessera/sim/simulator.h"

using namespace tessera;

namespace {

int fail(const char* what, const std::string& msg) {
  std::fprintf(stderr, "error: %s: %s\n", what, msg.c_str());
  return 1;
}

sim::DeviceConfig wrapped(const char* name, DeviceType type, const char* real, size_t alignment) {
  sim::DeviceConfig d;
  d.name = name;
  d.type = type;
  d.wraps = real;
  d.memory = 1 * sim::GiB;
  d.alignment = alignment;
  d.host_visible = true;
  d.caps = {/*async=*/false, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/false};
  return d;
}

// 1. The simulator directly.
int run_graph_on_simulator(const Registry& real) {
  sim::TopologyConfig topology;
  topology.name = "hostdev-graph";
  topology.devices.push_back(wrapped("acc0", DeviceType::kAccel, "HOSTDEV", hostdev::kAlignment));
  topology.devices.push_back(wrapped("cpu", DeviceType::kCpu, "CPU", cpu::kCpuAlignment));
  sim::SimOptions options;
  options.seed = 7;
  options.adversarial = true;  // seeded random delays: ordering bugs show up as races or wrong data
  auto simulator = sim::Simulator::create(topology, options, &real);
  if (!simulator.ok()) return fail("Simulator::create", simulator.status().message());
  sim::Simulator& s = **simulator;
  std::printf("simulator: %s: %s\n", s.device(0)->name(), s.device(0)->description());

  auto backend = s.device(0)->init_backend({});
  if (!backend.ok()) return fail("init_backend", backend.status().message());
  std::unique_ptr<Backend> reference = cpu::make_backend();

  // RMS norm, a matrix product with f16 weights, a masked softmax and a residual.
  constexpr int64_t kEmbd = 64, kTokens = 8;
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, kEmbd, kTokens);
  Tensor* norm_w = ctx.new_tensor_1d(Type::kF32, kEmbd);
  Tensor* w = ctx.new_tensor_2d(Type::kF16, kEmbd, kEmbd);
  Tensor* h = mul(ctx, rms_norm(ctx, x, 1e-5f), norm_w);
  Tensor* out = add(ctx, x, soft_max(ctx, mul_mat(ctx, w, h)));
  if (!ctx.ok()) return fail("building the graph", ctx.status().message());
  Graph graph;
  if (Status st = graph.build_forward(out); !st.ok()) return fail("build_forward", st.message());
  auto buffer = alloc_ctx_tensors(ctx, **backend);
  if (!buffer.ok()) return fail("alloc_ctx_tensors", buffer.status().message());

  std::mt19937 rng(42);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  for (Tensor* t : {x, norm_w, w}) {
    std::vector<float> values(static_cast<size_t>(nelements(*t)));
    for (float& v : values) v = dist(rng);
    if (Status st = tensor_from_f32(*t, values); !st.ok()) return fail("setting the leafs", st.message());
  }

  int failures = 0;
  size_t compared = 0;
  Status st = compare_graph_backend(**backend, *reference, graph, [&](size_t i, Tensor& a, Tensor& b) {
    auto r = nmse(a, b);
    ++compared;
    if (!r.ok() || r->nan_mismatch || r->nmse > 1e-6) {
      std::fprintf(stderr, "error: node %zu (%s) differs from the CPU backend: %s\n", i, op_name(a.op),
                   r.ok() ? std::to_string(r->nmse).c_str() : r.status().message().c_str());
      ++failures;
    }
    return true;
  });
  if (!st.ok()) return fail("compare_graph_backend", st.message());
  s.finish();
  if (!s.races().empty()) return fail("hazard detector", s.races_report());
  if (!s.errors().empty()) return fail("simulator", s.errors().front());
  if (failures > 0 || compared == 0) return fail("numerics", std::to_string(failures) + " node(s) differ");
  std::printf("simulator: %zu nodes on acc0 match the CPU backend; %.1f us virtual time, no race\n", compared,
              s.now_us());
  return 0;
}

// 2. A harness session. The topology is written as a topology file would be (docs/topology.md).
const char* kTopology = R"({
  "name": "hostdev-tiny",
  "description": "HostDev seen through the simulator, plus the CPU",
  "devices": [
    {"name": "acc0", "type": "accel", "wraps": "HOSTDEV", "memory": "1 GiB", "alignment": 128, "host_visible": true,
     "caps": {"async": false, "events": false, "host_buffer": false, "from_host_ptr": false},
     "cost": {"launch_overhead": "2 us", "flops_f32": "10 TFLOP/s", "bandwidth": "400 GB/s"}},
    {"name": "cpu", "type": "cpu", "wraps": "CPU", "memory": "16 GiB", "alignment": 64, "host_visible": true,
     "caps": {"async": false, "events": false, "host_buffer": false, "from_host_ptr": true}}
  ],
  "links": []
})";

int run_session(const Registry& real) {
  harness::SessionConfig config;
  auto topology = harness::parse_topology(kTopology, "simulate.cpp (topology)");
  if (!topology.ok()) return fail("parse_topology", topology.status().message());
  config.topology = std::move(topology).value();
  auto model = models::preset("tiny");
  if (!model.ok()) return fail("models::preset", model.status().message());
  config.model = std::move(model).value();
  config.sim.seed = 11;
  auto session = harness::Session::create(config, &real);
  if (!session.ok()) return fail("Session::create", session.status().message());
  if (Status st = (*session)->plan(); !st.ok()) return fail("plan", st.message());
  auto stats = (*session)->run();
  if (!stats.ok()) return fail("run", stats.status().message());
  std::printf("session: %s\n%s", (*session)->describe_workload().c_str(), (*session)->summary_table().c_str());
  if (!stats->errors.empty()) return fail("session", stats->errors.front());
  if (stats->races > 0) return fail("hazard detector", (*session)->sim().races_report());
  if (!stats->checked || stats->nan_mismatch || !(stats->nmse <= 1e-4)) {
    return fail("numerics", "logits vs the CPU reference: NMSE " + std::to_string(stats->nmse));
  }
  std::printf("session: logits match the CPU reference (NMSE %.3g), makespan %.1f us, no race\n", stats->nmse,
              stats->makespan_us);
  return 0;
}

}  // namespace

int main() {
  // The backends compiled into Tessera (Tessera::backends) plus this project's own.
  std::unique_ptr<Registry> registry = make_builtin_registry();
  if (Status st = registry->add(hostdev::make_registration()); !st.ok()) return fail("Registry::add", st.message());
  if (registry->device_by_name("HOSTDEV") == nullptr) return fail("registry", "HOSTDEV is not listed");
  if (int rc = run_graph_on_simulator(*registry); rc != 0) return rc;
  return run_session(*registry);
}
