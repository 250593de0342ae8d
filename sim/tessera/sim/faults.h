// Faults the simulator injects (docs/simulator.md, "Faults"): failed allocations and computes, slow copies and
// event waits, hidden free memory, and a dropped event wait for testing the race detector.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ops.h"

namespace tessera::sim {

// Every fault must end in an error status or a correct result.
struct FaultPlan {
  // Allocation faults count the allocations of every device of the simulator, 1-based; 0 disables.
  int64_t fail_alloc_nth = 0;
  std::string fail_alloc_device;     // empty: any device; else only allocations on this device count
  size_t fail_alloc_above = 0;       // allocations of more bytes than this fail (0 disables)
  std::vector<Op> fail_compute_ops;  // a compute containing one of these ops fails (kFailed)
  std::string fail_compute_device;   // empty: any device
  double slow_copy_factor = 1.0;     // copies take this many times longer
  double slow_event_us = 0.0;        // added to every event wait
  size_t hide_free_bytes = 0;        // memory() reports this much less free memory than there is
  // A broken program, for testing the detector: the Nth event wait (1-based, counted over the simulator) does
  // nothing. 0 disables.
  int64_t drop_event_wait_nth = 0;
};

}  // namespace tessera::sim
