// Configuration of simulated devices and topologies. Plain data: the topology loader
// (tessera/harness/topology/topology.h) fills it from a JSON file, tests fill it by hand, and the simulator
// (tessera/sim/simulator.h) builds devices from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/sim/buffer_rules.h"
#include "tessera/sim/cost_model.h"
#include "tessera/sim/op_rules.h"

namespace tessera::sim {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;
constexpr size_t GiB = size_t{1} << 30;

// Capacity, timing and support of one device.
// The largest buffer alignment a device may have (1 GiB): offsets and sizes rounded up to it stay far from 2^64 (an
// alignment of 2^63 wrapped the planner's chunk sizes).
constexpr size_t kMaxAlignment = size_t{1} << 30;

struct DeviceConfig {
  std::string name;  // unique within the topology, e.g. "gpu0" (case-insensitive lookups)
  std::string description;
  DeviceType type = DeviceType::kGpu;
  // Empty: a pure simulated device. Otherwise the name of a real device (e.g. "CPU") seen through this config:
  // memory budget, narrower op set, faults, timings and the hazard detector on top of real computation.
  std::string wraps;
  size_t memory = 8 * GiB;                                // capacity (total); a unified device's cap
  size_t alignment = 256;                                 // a power of two, at most kMaxAlignment
  size_t max_alloc = std::numeric_limits<size_t>::max();  // largest single allocation
  bool host_visible = false;  // buffers are host memory the program may address directly (is_host)
  // Unified memory (docs/topology.md "Unified memory and overheads"): the device's memory is a share of the host pool,
  // the memory of the topology's CPU device (its last). `memory` caps the share (as drivers cap it); an allocation on
  // any device sharing the pool (the CPU included) reduces what the others can allocate.
  bool unified = false;
  // Overheads. `reserved`: taken by the driver or runtime before any allocation (a unified device's comes out of the
  // pool). `unallocatable`: reported free by memory() but never allocatable (allocatable = memory - reserved -
  // unallocatable - used). `fit_margin`: what `tessera fit` leaves free on the device (llama.cpp's --fit-target).
  size_t reserved = 0;
  size_t unallocatable = 0;
  size_t fit_margin = 0;
  // The host the device is on (docs/topology.md "Hosts and remote devices"): empty (or "host") for the local host, the
  // one running the program and the scheduler; otherwise the name of one of TopologyConfig::hosts, reached over the
  // network like a llama.cpp RPC server's device. A remote device's buffers are never host memory here; every copy to
  // or from it crosses the network (its host link is then the link to its own host, e.g. that machine's PCIe).
  std::string host;
  DeviceCaps caps{/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  // Whether the backend copies a tensor from another backend asynchronously (Backend::cpy_tensor_async; with
  // caps.async). false: a backend with asynchronous compute but no such copy, as a ggml backend without
  // cpy_tensor_async, or a copy between two backends of different kinds: the scheduler copies through the host,
  // blocking (docs/scheduler.md, Execution step 3).
  bool cpy_tensor_async = true;
  bool default_allow = true;
  std::vector<OpRule> op_rules;
  // Padding of the main buffer type's tensors (its alloc_size; buffer_rules.h).
  std::vector<PaddingRule> padding;
  // Extra buffer types for weights, each with its own padding and op rules (buffer_rules.h).
  std::vector<BufferTypeConfig> buffer_types;
  OffloadRule offload;
  CostModel cost;
  // Host <-> device link used when no explicit link names this device and "host".
  double host_bandwidth = 25e9;  // bytes/s
  double host_latency_us = 10.0;
  // The GPU's number on the machine the topology was cut from, when the program sees only some of its GPUs
  // (llama.cpp's -dev CUDA1 leaves a topology whose one GPU is still CUDA1); -1: its position among the topology's GPUs
  // (gpu_number()).
  int gpu_number = -1;
  // Row split (llama.cpp's -sm row; docs/simulator.md "Row split"): the rows each GPU's cut of a split matrix is
  // rounded down to. ggml-cuda takes the largest MMQ tile height of the GPUs with a share (get_row_rounding,
  // get_mmq_y_host): 64 on NVIDIA GPUs before Volta (compute capability below 7.0) and on AMD RDNA1, 128 otherwise.
  int row_rounding = 128;
};

// A priced connection. Endpoint "host" means host memory; links are symmetric.
struct LinkConfig {
  std::string a, b;
  double bandwidth = 25e9;  // bytes/s
  double latency_us = 10.0;
};

// A host other than the local one, reached through a network link from the host `via` (empty or "host": the local
// host), like a llama.cpp RPC server (tools/rpc/README.md in ggml-org/llama.cpp). bandwidth 0 means no link: an error.
struct HostConfig {
  std::string name;  // unique among hosts and devices (case-insensitive); not "host"
  std::string description;
  std::string via;        // the host it is reached through
  double bandwidth = 0;   // bytes/s of the network link to `via`
  double latency_us = 0;  // one crossing of that link
};

struct TopologyConfig {
  std::string name;
  std::string description;
  std::vector<DeviceConfig> devices;  // scheduler priority order: first = highest; a CPU device (wrapped) last
  std::vector<LinkConfig> links;
  std::vector<HostConfig> hosts;     // remote hosts (the local host is implicit)
  std::vector<std::string> sources;  // free text: where a preset's figures come from (cited, one entry each)
  // Device <-> device copies without an explicit link go through the host at min(host bandwidths) and the sum of
  // latencies.
};

// The number a program gives device i of t among its GPUs (llama.cpp's CUDA<n>): DeviceConfig::gpu_number when set,
// else its position among the devices that are not CPUs; -1 for a CPU device.
inline int gpu_number(const TopologyConfig& t, size_t i) {
  if (t.devices[i].type == DeviceType::kCpu) return -1;
  if (t.devices[i].gpu_number >= 0) return t.devices[i].gpu_number;
  int n = 0;
  for (size_t k = 0; k < i; ++k) n += t.devices[k].type == DeviceType::kCpu ? 0 : 1;
  return n;
}

}  // namespace tessera::sim
