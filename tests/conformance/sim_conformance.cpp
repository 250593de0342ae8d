// The backend conformance suite instantiated for simulated devices (docs/simulator.md): a pure simulated GPU
// (memory-backed: its memory is not host-visible, so every value goes through the interface, and computation runs the
// CPU reference kernels lazily on the virtual clock) in plain and adversarial mode, and the real CPU device wrapped by
// the simulator, and a unified-memory integrated GPU whose host-visible memory is a share of the CPU device's (the host
// pool, docs/topology.md "Unified memory and overheads"), and a remote GPU on another host reached over 10 GbE, as
// llama.cpp's RPC backend reaches an rpc-server's device (docs/topology.md "Hosts and remote devices": no host buffer
// type, no buffers from host pointers, never host memory; every copy crosses the network). Each factory keeps one
// simulator for the whole process (devices must outlive their backends).
#include <string>

#include "conformance/backend_conformance.h"
#include "tessera/sim/simulator.h"
#include "tessera/builtin.h"

namespace {

using tessera::sim::DeviceConfig;
using tessera::sim::SimOptions;
using tessera::sim::Simulator;
using tessera::sim::TopologyConfig;

DeviceConfig gpu_config() {
  DeviceConfig d;
  d.name = "simgpu";
  d.type = tessera::DeviceType::kGpu;
  d.memory = 4 * tessera::sim::GiB;
  d.alignment = 256;
  d.caps = {/*async=*/true, /*host_buffer=*/true, /*buffer_from_host_ptr=*/true, /*events=*/true};
  return d;
}

DeviceConfig wrapped_cpu_config() {
  DeviceConfig d;
  d.name = "simcpu";
  d.type = tessera::DeviceType::kCpu;
  d.wraps = "CPU";
  d.memory = 16 * tessera::sim::GiB;
  d.alignment = 64;
  d.host_visible = true;
  d.caps = {/*async=*/false, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/false};
  return d;
}

// An integrated GPU sharing the host pool: up to 4 GiB of the CPU device's 16 GiB, its buffers host memory.
DeviceConfig unified_gpu_config() {
  DeviceConfig d = gpu_config();
  d.name = "simigpu";
  d.type = tessera::DeviceType::kIgpu;
  d.unified = true;
  d.host_visible = true;
  d.reserved = 64 * tessera::sim::MiB;
  return d;
}

// A GPU on host "node1", 10 GbE away (1.25 GB/s, 50 us), with llama.cpp's RPC device's capabilities.
DeviceConfig remote_gpu_config() {
  DeviceConfig d = gpu_config();
  d.name = "simrpc";
  d.host = "node1";
  d.caps = {/*async=*/false, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/false};
  return d;
}

Simulator* process_simulator(const char* which, bool adversarial) {
  static std::unique_ptr<Simulator> gpu, gpu_adv, cpu, igpu, rpc;
  const std::string w = which;
  std::unique_ptr<Simulator>& slot = w == "cpu"    ? cpu
                                     : w == "igpu" ? igpu
                                     : w == "rpc"  ? rpc
                                                   : (adversarial ? gpu_adv : gpu);
  if (!slot) {
    TopologyConfig t;
    t.name = std::string("conformance-") + which;
    if (w == "gpu") t.devices.push_back(gpu_config());
    if (w == "igpu") t.devices.push_back(unified_gpu_config());
    if (w == "rpc") {
      t.devices.push_back(remote_gpu_config());
      t.hosts.push_back({"node1", "", "", 1.25e9, 50.0});
    }
    t.devices.push_back(wrapped_cpu_config());
    SimOptions o;
    o.seed = 1234;
    o.adversarial = adversarial;
    o.record_trace = false;  // one simulator serves every test: keep its memory flat
    auto s = Simulator::create(t, o, &tessera::builtin_registry());
    if (!s.ok()) return nullptr;
    slot = std::move(s).value();
  }
  return slot.get();
}

tessera::conformance::BackendFactory sim_factory(const char* name, const char* which, bool adversarial) {
  tessera::conformance::BackendFactory f;
  f.name = name;
  f.make = [which, adversarial](std::string* skip_reason) -> std::unique_ptr<tessera::Backend> {
    Simulator* s = process_simulator(which, adversarial);
    if (s == nullptr) {
      *skip_reason = "the simulator could not be created";
      return nullptr;
    }
    auto b = s->device(0)->init_backend({});
    if (!b.ok()) {
      *skip_reason = b.status().message();
      return nullptr;
    }
    return std::move(b).value();
  };
  f.expect_full_op_support = true;  // simulated devices compute with the reference kernels; no rules deny here
  // The wrapped CPU device computes with the CPU backend's default kernels: the optimised ones when TESSERA_CPU_ISA
  // selects them.
  if (std::string(which) == "cpu") f.nmse_override = tessera::conformance::quantized_activation_nmse;
  return f;
}

}  // namespace

TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(Sim, sim_factory("SimGpu", "gpu", false),
                                        sim_factory("SimGpuAdversarial", "gpu", true),
                                        sim_factory("WrappedCpu", "cpu", false),
                                        sim_factory("SimUnifiedGpu", "igpu", false),
                                        sim_factory("SimRemoteGpu", "rpc", false));
