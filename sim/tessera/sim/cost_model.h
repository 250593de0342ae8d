// The cost model of a simulated device: how long one op takes on it (docs/simulator.md, "Time").
#pragma once

#include <vector>

#include "tessera/ops.h"

namespace tessera::sim {

// Time of one op: overhead + max(flops / throughput(type), bytes / bandwidth), or a fixed time from an override.
struct CostModel {
  double launch_overhead_us = 5.0;
  double flops_f32 = 10e12;      // FLOP/s when src[0] (the weight) is f32, f64 or an integer type
  double flops_f16 = 50e12;      // f16 and bf16
  double flops_quant = 40e12;    // quantized types (storage-only ones too)
  double mem_bandwidth = 500e9;  // bytes/s
  struct Override {
    Op op = Op::kNone;
    double overhead_us = -1;  // < 0: the model's
    double flops = -1;        // < 0: the model's throughput for the type
    double fixed_us = -1;     // >= 0: the op always takes this long
  };
  std::vector<Override> overrides;
};

}  // namespace tessera::sim
