// Options of one simulator run: the seed, the memory mode, adversarial delays, the timeline and the fault plan.
#pragma once

#include <cstdint>

#include "tessera/sim/faults.h"

namespace tessera::sim {

// Memory-backed: buffers hold real bytes (host memory that is not host-visible to the program), compute runs the CPU
// reference kernels, results can be checked. Metadata-only: no bytes; capacity accounting, timing and hazard
// tracking only (reads give zeros), so very large models can be planned and simulated.
enum class MemoryMode { kBacked = 0, kMetadata };
const char* memory_mode_name(MemoryMode mode);

// Options of one simulator run.
struct SimOptions {
  uint64_t seed = 1;
  MemoryMode mode = MemoryMode::kBacked;
  // Adversarial mode: every command gets a random extra delay in [0, max_jitter_us] (chosen by the seed), which
  // changes which stream runs first whenever the program leaves the order open.
  bool adversarial = false;
  double max_jitter_us = 50.0;
  bool record_trace = true;
  // Each device keeps its DeviceConfig::fit_margin free as well (what `tessera fit` plans with): the margin counts
  // like the driver's reservation, a unified device's in the host pool.
  bool fit_margins = false;
  FaultPlan faults;
};

}  // namespace tessera::sim
