// Deterministic simulator (docs/simulator.md): simulated devices built from a topology, each backend a stream with a
// command queue, one virtual clock, one seed for every choice, the hazard detector, the fault plan and the timeline.
//
// How time and data work:
//   - Every command (compute, copy, async set/get) gets a start and an end in virtual time when it is submitted:
//     start = max(host time, the stream's last end, the events it waits for) [+ a seeded random delay in adversarial
//     mode]; end = start + its cost (cost model, links). The host's time advances only when it blocks (synchronize,
//     event synchronize, synchronous buffer I/O).
//   - Pure simulated devices apply a command's effect on memory (memory-backed mode) lazily, in order of end time,
//     when the host's time passes that end. So work the program forgot to wait for really is not done yet when it
//     reads: a missing synchronize or event wait shows up as wrong data, and always as a race in the detector.
//   - Wrapped real devices run the real computation at submission (synchronously), with the same virtual timing and
//     hazard tracking on top.
//   - In metadata-only mode nothing is computed and buffers have no bytes (their address range is reserved without
//     access rights, so a stray dereference faults instead of reading garbage); reads give zeros.
//
// Lifetime: devices belong to the simulator; backends, buffers and events made from them must be destroyed before it.
// Single-threaded: use a simulator (and everything made from it) from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/registry.h"
#include "tessera/sim/device_config.h"
#include "tessera/sim/options.h"
#include "tessera/sim/hazard.h"
#include "tessera/sim/trace.h"
#include "tessera/status.h"

namespace tessera::sim {

struct DeviceStats {
  size_t memory_used = 0;
  size_t memory_peak = 0;
  size_t memory_total = 0;
  size_t n_allocs = 0;
  size_t n_commands = 0;
};

// The host memory pool that unified-memory devices share with the CPU device (DeviceConfig::unified): its capacity is
// the CPU device's memory; used and peak count every member's allocations once (the peak is the pool's, not the sum
// of the members' peaks); reserved is the members' driver reservations, margins their fit margins when
// SimOptions::fit_margins holds (both taken before any allocation). Empty members: no unified device.
struct PoolStats {
  std::vector<size_t> members;  // device indices: the unified devices, then the CPU device
  size_t capacity = 0, used = 0, peak = 0, reserved = 0, margins = 0;
};

// What the program asked of the simulated streams and events, counted since the simulator was made (scenario
// expectations "synchronizations", "event_waits"; docs/scenarios.md).
struct SimCounters {
  uint64_t synchronizes = 0;        // Backend::synchronize calls on a simulated backend (each stream's, counted once)
  uint64_t event_waits = 0;         // Event::wait calls on a recorded event (a stream waiting for another's work)
  uint64_t event_synchronizes = 0;  // Event::synchronize calls on a recorded event (the host waiting for one)
};

class Simulator {
 public:
  // `real`: the registry of real devices that wrapped devices (DeviceConfig::wraps) see through; the simulator links
  // no backend registry of its own, so a program passes the one it links (e.g. builtin_registry()). It may be null
  // when no device wraps a real one. Errors: an invalid topology (validate-like checks), a wrapped device with no
  // registry or whose real device is not in `real`.
  static Result<std::unique_ptr<Simulator>> create(const TopologyConfig& topology, const SimOptions& options = {},
                                                   const Registry* real = nullptr);
  ~Simulator();
  Simulator(const Simulator&) = delete;
  Simulator& operator=(const Simulator&) = delete;

  // The registration holding the devices (owned by the simulator; name "sim"). Register it into a registry with
  // Registry::add_scoped or add_unowned.
  BackendReg* registration() const;
  size_t device_count() const;
  Device* device(size_t i) const;
  Device* device_by_name(const std::string& name) const;  // case-insensitive; nullptr when unknown
  const DeviceConfig& device_config(size_t i) const;
  const TopologyConfig& topology() const;
  const SimOptions& options() const;
  uint64_t seed() const;

  // One backend per device, in topology order (the scheduler's priority order, CPU last).
  Result<std::vector<std::unique_ptr<Backend>>> make_backends();

  // Waits for everything submitted (advances the host's time past every stream) and applies it.
  void finish();

  // Races found so far (each with both commands, tensors, buffer, seed). Clear with clear_races().
  const std::vector<Race>& races() const;
  std::string races_report(size_t max = 5) const;
  // Errors found while applying commands lazily (e.g. a kernel error); they also fail the backend's next call.
  const std::vector<std::string>& errors() const;

  double now_us() const;  // the host's virtual time
  uint64_t commands() const;
  const SimCounters& counters() const;
  DeviceStats stats(size_t device) const;
  PoolStats pool_stats() const;
  const Trace& trace() const;  // the timeline so far (copy it to keep it past the simulator)
  // The virtual time a synchronous write of all of t's bytes from the host takes (Buffer::set_tensor): the link
  // from the host to t's device, 0 for host memory and for a tensor outside this simulator's buffers. The same in
  // both memory modes (the weight upload a run reports).
  double set_time_us(const Tensor& t) const;
  // The cost model's time of a node on device i (0 for leafs and views), and of a copy of `bytes` between devices i and
  // j (-1: host memory) over the topology's links: what a command would take, without submitting one (estimates such
  // as tensor parallelism's, docs/tensor-parallel.md).
  double op_time_us(size_t device, const Tensor& node) const;
  double copy_time_us(int from, int to, size_t bytes) const;

  HazardTracker& hazards();

  struct Impl;
  Impl* impl() const { return impl_.get(); }

 private:
  explicit Simulator(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// Bytes for people: "1.50 GiB", "12.00 KiB", "512 B".
std::string format_bytes(size_t n);

// Is this device (or backend, or buffer type) one of a simulator's?
bool is_simulated(const Device& device);

}  // namespace tessera::sim
