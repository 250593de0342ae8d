// Scenario expectations on what a run measures (time, traffic, synchronizations, plans) and comparisons of two runs
// of one scenario (A/B): "expect": {"metrics": [...]} and "compare": {"with": {...}, "expect": [...]}.
// Format: docs/scenarios.md ("Time and traffic", "Comparisons").
#pragma once

#include <string>
#include <vector>

#include "tessera/harness/placement/policy.h"

namespace tessera::scenario {

// One bound of a metric expectation: the measured value (of the variant, in a comparison) against a number in the
// metric's unit (microseconds, bytes or a count), the base run's value ("base") or a multiple of it (the ratios).
struct MetricBound {
  enum class Op { kAtMost, kAtLeast, kEquals };
  Op op = Op::kAtMost;
  double value = 0;   // when neither `base` nor `ratio`
  bool base = false;  // comparisons only: the base run's value
  double ratio = -1;  // comparisons only, >= 0 when given: ratio x the base run's value
};

struct MetricExpect {
  std::string path;      // where it was written ("expect.metrics[2]"): names it in the results
  std::string metric;    // "makespan", "copy_bytes", ... (docs/scenarios.md lists them)
  std::string device;    // compute_bytes, peak_memory: the device
  std::string from, to;  // copy_bytes, copies: only copies from / to this device ("host": the program's memory)
  int split = -1;        // split_copy_bytes: this split; -1: the split that copies in the most
  std::vector<MetricBound> bounds;
};

// "compare": the scenario is run a second time with the policy keys of "with" applied over its own policy (the
// variant), and each expectation compares a metric of the variant with the same metric of the base run.
struct Comparison {
  harness::PlacementPolicy policy;  // the variant's policy
  std::string with;                 // the "with" object as written, for the results
  std::vector<MetricExpect> expect;
};

}  // namespace tessera::scenario
