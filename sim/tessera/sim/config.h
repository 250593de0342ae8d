// Configuration of simulated devices and topologies (docs/topology.md). Plain data: the topology loader fills it from a
// JSON file, tests fill it by hand, and the simulator (tessera/sim/simulator.h) builds devices from it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/ops.h"
#include "tessera/types.h"

namespace tessera::sim {

constexpr size_t KiB = size_t{1} << 10;
constexpr size_t MiB = size_t{1} << 20;
constexpr size_t GiB = size_t{1} << 30;

// Memory-backed: buffers hold real bytes (host memory that is not host-visible to the program), compute runs the CPU
// reference kernels, results can be checked. Metadata-only: no bytes; capacity accounting, timing and hazard
// tracking only (reads give zeros), so very large models can be planned and simulated.
enum class MemoryMode { kBacked = 0, kMetadata };
const char* memory_mode_name(MemoryMode mode);

// One op-support rule. A rule matches a node when every field that is set matches (empty lists and zero limits are
// unset). Rules are tried in order; the first that matches decides (allow or deny); when none matches, the device's
// `default_allow` decides. Whatever the rules say, a simulated device never claims an op its kernels cannot compute.
struct OpRule {
  bool allow = true;
  std::vector<Op> ops;           // the node's op
  std::vector<Type> src0_types;  // the type of src[0]
  std::vector<Type> src1_types;  // the type of src[1]
  std::vector<Type> dst_types;   // the node's own type
  int64_t min_batch = 0;         // batch_size(node) >= min_batch
  int64_t max_batch = 0;         // batch_size(node) <= max_batch
  int64_t ne0_multiple = 0;      // node->src[0]->ne[0] (the node's own ne[0] when it has no source) % ne0_multiple == 0
  std::string note;              // why the rule exists (shown by explain tools)
};

// The batch size an op works on (as used by offload rules): ne[2] for MUL_MAT_ID, else ne[1].
int64_t batch_size(const Tensor& op);
// Whether rule matches op (all set fields hold).
bool rule_matches(const OpRule& rule, const Tensor& op);

// When the device asks for an op whose weights sit in host memory (the scheduler's op_offload).
struct OffloadRule {
  bool enabled = false;
  int64_t min_batch = 32;  // batch_size(op) >= min_batch
  std::vector<Op> ops;     // empty: any op
};

// Time of one op: overhead + max(flops / throughput(type), bytes / bandwidth), or a fixed time from an override.
struct CostModel {
  double launch_overhead_us = 5.0;
  double flops_f32 = 10e12;  // FLOP/s when src[0] (the weight) is f32 or i32
  double flops_f16 = 50e12;  // f16 and bf16
  double flops_quant = 40e12;  // q8_0 and q4_0
  double mem_bandwidth = 500e9;  // bytes/s
  struct Override {
    Op op = Op::kNone;
    double overhead_us = -1;  // < 0: the model's
    double flops = -1;        // < 0: the model's throughput for the type
    double fixed_us = -1;     // >= 0: the op always takes this long
  };
  std::vector<Override> overrides;
};

// Capacity, timing and support of one device.
struct DeviceConfig {
  std::string name;  // unique within the topology, e.g. "gpu0" (case-insensitive lookups)
  std::string description;
  DeviceType type = DeviceType::kGpu;
  // Empty: a pure simulated device. Otherwise the name of a real device (e.g. "CPU") seen through this config:
  // memory budget, narrower op set, faults, timings and the hazard detector on top of real computation.
  std::string wraps;
  size_t memory = 8 * GiB;  // capacity (total)
  size_t alignment = 256;
  size_t max_alloc = std::numeric_limits<size_t>::max();  // largest single allocation
  bool host_visible = false;  // buffers are host memory the program may address directly (is_host)
  DeviceCaps caps{/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  bool default_allow = true;
  std::vector<OpRule> op_rules;
  OffloadRule offload;
  CostModel cost;
  // Host <-> device link used when no explicit link names this device and "host".
  double host_bandwidth = 25e9;  // bytes/s
  double host_latency_us = 10.0;
};

// A priced connection. Endpoint "host" means host memory; links are symmetric.
struct LinkConfig {
  std::string a, b;
  double bandwidth = 25e9;  // bytes/s
  double latency_us = 10.0;
};

struct TopologyConfig {
  std::string name;
  std::string description;
  std::vector<DeviceConfig> devices;  // scheduler priority order: first = highest; a CPU device (wrapped) last
  std::vector<LinkConfig> links;
  // Device <-> device copies without an explicit link go through the host at min(host bandwidths) and the sum of
  // latencies.
};

// ---------------------------------------------------------------------------------------------------------------
// Faults (docs/simulator.md, 'Faults'): every fault must end in an error status or a correct result.
struct FaultPlan {
  // Allocation faults count the allocations of every device of the simulator, 1-based; 0 disables.
  int64_t fail_alloc_nth = 0;
  std::string fail_alloc_device;        // empty: any device; else only allocations on this device count
  size_t fail_alloc_above = 0;          // allocations of more bytes than this fail (0 disables)
  std::vector<Op> fail_compute_ops;     // a compute containing one of these ops fails (kFailed)
  std::string fail_compute_device;      // empty: any device
  double slow_copy_factor = 1.0;        // copies take this many times longer
  double slow_event_us = 0.0;           // added to every event wait
  size_t hide_free_bytes = 0;           // memory() reports this much less free memory than there is
  // A broken program, for testing the detector: the Nth event wait (1-based, counted over the simulator) does
  // nothing. 0 disables.
  int64_t drop_event_wait_nth = 0;
};

// Options of one simulator run.
struct SimOptions {
  uint64_t seed = 1;
  MemoryMode mode = MemoryMode::kBacked;
  // Adversarial mode: every command gets a random extra delay in [0, max_jitter_us] (chosen by the seed), which
  // changes which stream runs first whenever the program leaves the order open.
  bool adversarial = false;
  double max_jitter_us = 50.0;
  bool record_trace = true;
  FaultPlan faults;
};

}  // namespace tessera::sim
