// `tessera calibrate` (docs/calibrate.md): this machine's real CPU backend measured with a short suite of ops, written
// as a simulated device's description (a topology file's device entry), and checked: the fixture graphs timed on the
// real backend against the same graphs simulated with that description.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "tessera/sim/device_config.h"
#include "tessera/status.h"

namespace tessera {
class Registry;
}

namespace tessera::harness {

struct CalibrateOptions {
  int threads = 0;  // the CPU backend's threads, and the check graphs' fill's (0: one per hardware thread)
  int repeats = 7;  // timed rounds after a warm-up round, each running every measurement once; the median is kept
  std::function<void(const std::string&)> progress;  // a line per measurement (null: none)
};

// One measurement: its name, the median of the repeats, their spread ((max - min) / median) and the unit.
struct Measurement {
  std::string name, unit, what;
  double value = 0;
  double spread = 0;
};

struct Calibration {
  // A wrapped CPU ("wraps": "CPU", type cpu) whose cost model is the measurements: launch overhead, FLOP rates,
  // bandwidth, and the kernel classes' shares (docs/simulator.md, "Kernel classes").
  sim::DeviceConfig device;
  std::vector<Measurement> measurements;
  double noise = 0;     // the largest spread of the measurements: how far apart two calibrations may be
  std::string kernels;  // the CPU kernels measured (cpu::kernels_name)
  int threads = 0;
};

// One fixture graph (a llama-style decoder layer with its embeddings and head) at `tokens` tokens: timed on the
// real CPU backend, and simulated on a topology of `device` alone (metadata-only; `real_devices`: the registry its
// "wraps": "CPU" names, as Session::create takes it).
struct CheckRow {
  std::string graph;
  int64_t tokens = 0;
  double measured_us = 0, spread = 0, simulated_us = 0;
  double error() const { return measured_us > 0 ? simulated_us / measured_us - 1 : 0; }
};
// The fixture graphs: 1 layer of n_embd 2048, n_ff 5632, 16 heads (4 KV heads), a 32000-token vocabulary, a
// 1024-cell cache, flash attention, q4_0 weights (and f16 ones), at 1 and 512 tokens.
struct CalibrationRun {
  Calibration calibration;
  std::vector<CheckRow> check;  // with `check` only
};
// Measures the CPU backend (the optimised kernels at the best level this CPU has) and, with `check`, the fixture
// graphs in the same rounds (a shared machine's slow moments fall on both alike), then simulates them with the
// measured device. Errors: a graph the backend cannot compute (named).
Result<CalibrationRun> calibrate(const CalibrateOptions& options, bool check, const Registry* real_devices);
// The fixture graphs timed and simulated with a device described before (`tessera calibrate --device FILE`).
Result<std::vector<CheckRow>> check_calibration(const sim::DeviceConfig& device, const CalibrateOptions& options,
                                                const Registry* real_devices);

}  // namespace tessera::harness
