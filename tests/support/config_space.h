// The configuration space the scheduler's generated cases draw from (issue 51; docs/testing.md, "Generators and
// their reach"): topologies (1 to 16 devices: GPUs, host-memory accelerators, unified memory, devices on a host over
// the network; links present or absent; async copies and events on or off; op gaps; an extra weight buffer type with
// padding; tight memory; the CPU synchronous or not) and lifecycles (reserve first or not; serial or parallel with 1 to
// 4 copy slots; 1 to 8 evaluations; inputs fixed or changed per evaluation; two graphs alternating; plan reuse on or
// off; a reserve or a new graph while evaluations are in flight; an allocation failing part-way).
//
// One generator for every consumer: the property tests draw through RapidCheck (config_space_rc.h: each choice is a
// RapidCheck draw, so a failing case shrinks choice by choice), the end-to-end fuzzer through its bytes (ByteChoices).
// Each consumer records the buckets its cases reach (record_buckets) into $TESSERA_CONFIG_COVERAGE when that is set;
// scripts/config-coverage collects them into the coverage report.
//
// Header-only and free of RapidCheck and libFuzzer, so that both builds include it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/splitmix64.h"
#include "tessera/harness/session/session.h"
#include "tessera/sim/device_config.h"

namespace tessera::test::space {

// ---- where the choices come from ----

class Choices {
 public:
  virtual ~Choices() = default;
  // An integer in [lo, hi] (inclusive). Implementations shrink towards lo: put the simplest value first.
  virtual int64_t in_range(int64_t lo, int64_t hi) = 0;
  bool flag() { return in_range(0, 1) == 1; }
  // True with probability 1/n (false is the simple value).
  bool one_in(int64_t n) { return in_range(0, n - 1) == n - 1; }
  template <typename T, size_t N>
  const T& pick(const T (&options)[N]) {
    return options[static_cast<size_t>(in_range(0, static_cast<int64_t>(N) - 1))];
  }
};

// From raw bytes (the fuzzers): each choice takes as many bytes as its range needs, little-endian, by modulo;
// missing bytes read as zero, so every input decodes to a valid (and a short input to a simple) configuration.
class ByteChoices : public Choices {
 public:
  ByteChoices(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  int64_t in_range(int64_t lo, int64_t hi) override {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    uint64_t v = 0;
    for (uint64_t r = span - 1; r != 0; r >>= 8) v = (v << 8) | (at_ < size_ ? data_[at_++] : 0u);
    return lo + static_cast<int64_t>(v % span);
  }
  size_t consumed() const { return at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

// From a seed (the unit sweeps): SplitMix64 draws, so case N of a sweep is the same on every machine and compiler.
class SeededChoices : public Choices {
 public:
  explicit SeededChoices(uint64_t seed) : rng_(seed) {}
  int64_t in_range(int64_t lo, int64_t hi) override {
    if (hi <= lo) return lo;
    return lo + static_cast<int64_t>(rng_() % (static_cast<uint64_t>(hi - lo) + 1));
  }

 private:
  SplitMix64 rng_;
};

// ---- the dimensions ----

// Ops a simulated device may refuse (bit i of a deny mask refers to kDenyable[i]).
inline constexpr Op kDenyable[] = {
    Op::kSoftMax, Op::kRope,  Op::kMulMat,       Op::kMulMatId, Op::kGetRows, Op::kSetRows, Op::kArgsort, Op::kTopK,
    Op::kRmsNorm, Op::kNorm,  Op::kFlashAttnExt, Op::kAdd,      Op::kMul,     Op::kCpy,     Op::kCont,    Op::kGlu,
    Op::kUnary,   Op::kScale, Op::kSumRows,      Op::kDiv,      Op::kDup,     Op::kAddId,   Op::kClamp};
inline constexpr int kNumDenyable = sizeof kDenyable / sizeof kDenyable[0];

enum class DeviceKind : uint8_t {
  kGpu,        // discrete memory
  kHostAccel,  // an accelerator computing in host memory (a BLAS backend): host-visible buffers
  kUnified,    // a GPU whose memory is a share of the host pool (an APU, a unified-memory laptop)
  kRemote,     // a GPU on another host, reached over the network (llama.cpp's RPC server)
};
inline const char* device_kind_name(DeviceKind k) {
  switch (k) {
    case DeviceKind::kGpu: return "gpu";
    case DeviceKind::kHostAccel: return "host-memory-accelerator";
    case DeviceKind::kUnified: return "unified-memory";
    case DeviceKind::kRemote: return "remote-host";
  }
  return "?";
}

struct DeviceSpec {
  DeviceKind kind = DeviceKind::kGpu;
  uint32_t deny = 0;  // op-support gaps (bits over kDenyable)
  bool host_visible = false;
  bool async = true;
  bool events = true;
  bool host_buffer = false;
  bool offload = false;          // offload_op for MUL_MAT / MUL_MAT_ID from a batch of 4
  uint8_t memory = 2;            // 0: 64 KiB (allocations may fail), 1: 256 KiB, else 64 MiB
  bool padded_buft = false;      // an extra buffer type for weights ("<name>_PAD"), whose tensors are padded
  bool cpy_tensor_async = true;  // with async: copies from other backends on its stream (else through the host)
};

struct TopologySpec {
  std::vector<DeviceSpec> devices;  // the simulated ones; the wrapped CPU comes last
  bool links = false;               // explicit links between neighbouring devices (else copies go through the host)
  // the wrapped CPU's compute asynchronous, with events: its stream may still read the graph inputs (its own) after
  // graph_compute_async returns (the scheduler's alloc_graph waits for it before the user writes the next ones)
  bool cpu_async = false;
};

struct LifecycleSpec {
  bool reserve = false;  // reserve before the first evaluation
  bool parallel = false;
  int n_copies = 4;  // with parallel: copy slots, 1 to 4
  int evaluations = 1;
  bool per_evaluation_inputs = false;
  bool alternate = false;          // a second graph (another token count, the same weights) every other evaluation
  bool reuse = true;               // SchedulerParams::reuse
  bool reserve_in_flight = false;  // a reserve of the first graph after an evaluation, without a synchronize
  bool next_in_flight = false;     // a reserve of the second graph after an evaluation, without a synchronize
  int fail_alloc_nth = 0;          // the n-th allocation of the simulator fails (0: none)
  // computes of the same graph again right after an evaluation in the middle, without alloc_graph and without
  // writing inputs (Session::Step::kComputeAgain): 0 to 3
  int again = 0;

  bool needs_next_graph() const { return alternate || next_in_flight; }
};

// ---- drawing ----

inline DeviceSpec draw_device(Choices& c) {
  DeviceSpec d;
  d.kind = static_cast<DeviceKind>(c.one_in(3) ? c.in_range(1, 3) : 0);
  // mostly a few gaps; the simple value is none
  if (c.flag()) {
    for (int i = 0, n = static_cast<int>(c.in_range(1, 4)); i < n; ++i) d.deny |= 1u << c.in_range(0, kNumDenyable - 1);
  }
  d.host_visible = d.kind == DeviceKind::kHostAccel || (d.kind == DeviceKind::kGpu && c.one_in(4));
  d.async = !c.one_in(4);
  d.events = !c.one_in(4);
  d.host_buffer = d.kind != DeviceKind::kRemote && c.flag();
  d.offload = c.flag();
  const int64_t m = c.in_range(0, 9);
  d.memory = static_cast<uint8_t>(m == 9 ? 0 : m == 8 ? 1 : 2);
  d.padded_buft = c.one_in(4);
  d.cpy_tensor_async = !c.one_in(4);
  return d;
}

// min_devices / max_devices count the simulated devices (the wrapped CPU comes on top: 1 to 16 devices in all).
inline TopologySpec draw_topology(Choices& c, int min_devices = 0, int max_devices = 15) {
  TopologySpec t;
  // mostly small topologies; one in four up to max_devices
  const int small = std::min(max_devices, 5);
  const int n = static_cast<int>(c.one_in(4) ? c.in_range(min_devices, max_devices) : c.in_range(min_devices, small));
  for (int i = 0; i < n; ++i) t.devices.push_back(draw_device(c));
  t.links = c.flag();
  t.cpu_async = c.one_in(6);
  return t;
}

inline LifecycleSpec draw_lifecycle(Choices& c, int max_evaluations = 8) {
  LifecycleSpec l;
  l.reserve = c.flag();
  l.parallel = c.flag();
  l.n_copies = static_cast<int>(4 - c.in_range(0, 3));
  l.evaluations = static_cast<int>(c.one_in(3) ? c.in_range(1, max_evaluations) : c.in_range(1, 3));
  l.per_evaluation_inputs = c.flag();
  l.alternate = c.one_in(3);
  l.reuse = !c.one_in(3);
  l.reserve_in_flight = c.one_in(4);
  l.next_in_flight = c.one_in(4);
  l.fail_alloc_nth = c.one_in(6) ? static_cast<int>(c.in_range(1, 12)) : 0;
  l.again = c.one_in(3) ? static_cast<int>(c.in_range(1, 3)) : 0;
  return l;
}

// ---- turning a draw into configurations ----

inline std::string device_name(size_t i) { return "gpu" + std::to_string(i); }

inline sim::TopologyConfig make_topology(const TopologySpec& t, const char* generated_by) {
  using namespace sim;
  TopologyConfig out;
  out.name = "generated";
  out.description = std::string("generated by ") + generated_by + " (tests/support/config_space.h)";
  bool remote = false;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceSpec& s = t.devices[i];
    DeviceConfig d;
    d.name = device_name(i);
    d.type = s.kind == DeviceKind::kHostAccel ? DeviceType::kAccel
             : s.kind == DeviceKind::kUnified ? DeviceType::kIgpu
                                              : DeviceType::kGpu;
    d.memory = s.memory == 0 ? 64 * KiB : s.memory == 1 ? 256 * KiB : 64 * MiB;
    d.alignment = 64u << (i % 3);
    d.host_visible = s.host_visible;
    d.unified = s.kind == DeviceKind::kUnified;
    if (s.kind == DeviceKind::kRemote) {
      d.host = "node1";
      remote = true;
    }
    d.caps.async = s.async;
    d.caps.events = s.events;
    d.caps.host_buffer = s.host_buffer;
    d.cpy_tensor_async = s.cpy_tensor_async;
    OpRule r;  // (a rule with no ops would match every op)
    r.allow = false;
    for (int k = 0; k < kNumDenyable; ++k) {
      if ((s.deny >> k) & 1u) r.ops.push_back(kDenyable[k]);
    }
    if (!r.ops.empty()) d.op_rules.push_back(r);
    if (s.offload) {
      d.offload.enabled = true;
      d.offload.min_batch = 4;
      d.offload.ops = {Op::kMulMat, Op::kMulMatId};
    }
    if (s.padded_buft) {
      BufferTypeConfig b;
      b.name = d.name + "_PAD";
      PaddingRule p;
      p.row_multiple = 64;  // as CUDA's MATRIX_ROW_PADDING pads a quantized weight's last row
      p.extra = 32;
      p.note = "generated";
      b.padding.push_back(p);
      d.buffer_types.push_back(b);
    }
    out.devices.push_back(d);
  }
  if (remote) out.hosts.push_back({"node1", "a second machine (generated)", "", 1.25e9, 50.0});
  if (t.links) {
    for (size_t i = 0; i + 1 < t.devices.size(); ++i) {
      if (t.devices[i].kind == DeviceKind::kRemote || t.devices[i + 1].kind == DeviceKind::kRemote) continue;
      out.links.push_back({device_name(i), device_name(i + 1), 50e9, 2.0});
    }
  }
  DeviceConfig cpu;
  cpu.name = "cpu";
  cpu.type = DeviceType::kCpu;
  cpu.wraps = "CPU";
  cpu.memory = 256 * MiB;
  cpu.alignment = 64;
  cpu.host_visible = true;
  cpu.caps.async = t.cpu_async;
  cpu.caps.events = t.cpu_async;
  cpu.caps.buffer_from_host_ptr = true;
  out.devices.push_back(cpu);
  return out;
}

// The buffer types a weight may be placed in: each device's memory, its host buffer type and its padded type when it
// has them, and the CPU's.
inline std::vector<std::string> placement_targets(const TopologySpec& t) {
  std::vector<std::string> out;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    out.push_back(device_name(i));
    if (t.devices[i].host_buffer) out.push_back(device_name(i) + "_Host");
    if (t.devices[i].padded_buft) out.push_back(device_name(i) + "_PAD");
  }
  out.push_back("cpu");
  return out;
}

// The policy fields a lifecycle sets.
inline void apply_lifecycle(const LifecycleSpec& l, harness::PlacementPolicy* policy, sim::SimOptions* sim) {
  policy->parallel = l.parallel;
  policy->n_copies = l.n_copies;
  policy->reuse = l.reuse;
  sim->faults.fail_alloc_nth = l.fail_alloc_nth;
}

// The session steps of a lifecycle: reserve, the evaluations (every other one of the second graph when alternating;
// a compute step allocates and writes inputs first), the computes-again of the same graph after the evaluation in the
// middle, the reserves in flight after an evaluation in the middle (with two or more evaluations), a final
// synchronize (where the outputs are compared with the CPU reference).
inline std::vector<harness::Session::Step> lifecycle_steps(const LifecycleSpec& l) {
  using Step = harness::Session::Step;
  std::vector<Step> steps;
  if (l.reserve) steps.push_back(Step::kReserve);
  const int n = std::max(l.evaluations, 1);
  for (int e = 0; e < n; ++e) {
    const bool next = l.alternate && e % 2 == 1;
    steps.push_back(next ? Step::kComputeNext : Step::kCompute);
    if (e == (n - 1) / 2) {
      for (int k = 0; k < l.again; ++k) steps.push_back(next ? Step::kComputeNextAgain : Step::kComputeAgain);
    }
    // (a reserve drops the allocation the outputs are read from: only between evaluations)
    if (n >= 2 && e == (n - 2) / 2) {
      if (l.reserve_in_flight) steps.push_back(Step::kReserve);
      if (l.next_in_flight) steps.push_back(Step::kReserveNext);
    }
  }
  steps.push_back(Step::kSynchronize);
  return steps;
}

// ---- a drawn case, as a failure prints it ----

// "devices: {gpu deny 0x4 host-visible ... mem 2} ... (linked)"
inline std::string describe(const TopologySpec& t) {
  std::ostringstream os;
  os << "devices:";
  for (const DeviceSpec& d : t.devices) {
    os << " {" << device_kind_name(d.kind) << " deny 0x" << std::hex << d.deny << std::dec
       << (d.host_visible ? " host-visible" : "") << (d.async ? "" : " sync")
       << (d.async && !d.cpy_tensor_async ? " no-cpy-tensor-async" : "") << (d.events ? "" : " no-events")
       << (d.host_buffer ? " host-buffer" : "") << (d.padded_buft ? " padded-buft" : "")
       << (d.offload ? " offload" : "") << " mem " << int(d.memory) << "}";
  }
  os << (t.links ? " (linked)" : "") << (t.cpu_async ? " (asynchronous cpu)" : "");
  return os.str();
}

// "lifecycle: reserve 0, parallel 1 (2 copies), evaluations 3, ..."
inline std::string describe(const LifecycleSpec& l) {
  std::ostringstream os;
  os << "lifecycle: reserve " << l.reserve << ", parallel " << l.parallel << " (" << l.n_copies
     << " copies), evaluations " << l.evaluations << (l.per_evaluation_inputs ? " (inputs per evaluation)" : "")
     << ", alternate " << l.alternate << ", reuse " << l.reuse << ", reserve in flight " << l.reserve_in_flight
     << ", next graph in flight " << l.next_in_flight << ", fail_alloc_nth " << l.fail_alloc_nth << ", computes again "
     << l.again;
  return os.str();
}

// ---- the report's buckets ----

// Every bucket, in the report's order ("dimension:value").
inline std::vector<std::string> all_buckets() {
  return {"devices:1",
          "devices:2",
          "devices:3-4",
          "devices:5-8",
          "devices:9-16",
          "kind:gpu",
          "kind:host-memory-accelerator",
          "kind:unified-memory",
          "kind:remote-host",
          "links:present",
          "links:absent",
          "cpu:sync",
          "cpu:async",
          "async:on",
          "async:off",
          "cpy-tensor-async:on",
          "cpy-tensor-async:off",
          "events:on",
          "events:off",
          "host-visible-gpu:yes",
          "op-gaps:yes",
          "op-gaps:none",
          "padded-buffer-type:yes",
          "tight-memory:yes",
          "tight-memory:no",
          "reserve:yes",
          "reserve:no",
          "mode:serial",
          "mode:parallel-1-copy",
          "mode:parallel-2-copies",
          "mode:parallel-3-copies",
          "mode:parallel-4-copies",
          "evaluations:1",
          "evaluations:2",
          "evaluations:3-4",
          "evaluations:5-8",
          "inputs:fixed",
          "inputs:per-evaluation",
          "graphs:alternating",
          "graphs:one",
          "plan-reuse:on",
          "plan-reuse:off",
          "in-flight:reserve",
          "in-flight:new-graph",
          "alloc-failure:part-way",
          "alloc-failure:none",
          "compute-again:yes",
          "compute-again:no"};
}

inline std::vector<std::string> buckets_of(const TopologySpec& t, const LifecycleSpec& l) {
  std::vector<std::string> b;
  const size_t n = t.devices.size() + 1;
  b.push_back(n == 1   ? "devices:1"
              : n == 2 ? "devices:2"
              : n <= 4 ? "devices:3-4"
              : n <= 8 ? "devices:5-8"
                       : "devices:9-16");
  bool gaps = false, tight = false;
  for (const DeviceSpec& d : t.devices) {
    b.push_back(std::string("kind:") + device_kind_name(d.kind));
    b.push_back(d.async ? "async:on" : "async:off");
    if (d.async) b.push_back(d.cpy_tensor_async ? "cpy-tensor-async:on" : "cpy-tensor-async:off");
    b.push_back(d.events ? "events:on" : "events:off");
    if (d.kind == DeviceKind::kGpu && d.host_visible) b.push_back("host-visible-gpu:yes");
    if (d.padded_buft) b.push_back("padded-buffer-type:yes");
    gaps = gaps || d.deny != 0;
    tight = tight || d.memory == 0;
  }
  if (t.devices.size() >= 2) b.push_back(t.links ? "links:present" : "links:absent");
  b.push_back(t.cpu_async ? "cpu:async" : "cpu:sync");
  b.push_back(gaps ? "op-gaps:yes" : "op-gaps:none");
  b.push_back(tight ? "tight-memory:yes" : "tight-memory:no");
  b.push_back(l.reserve ? "reserve:yes" : "reserve:no");
  if (!l.parallel) {
    b.push_back("mode:serial");
  } else {
    b.push_back(l.n_copies == 1 ? "mode:parallel-1-copy" : "mode:parallel-" + std::to_string(l.n_copies) + "-copies");
  }
  const int e = l.evaluations;
  b.push_back(e <= 1 ? "evaluations:1" : e == 2 ? "evaluations:2" : e <= 4 ? "evaluations:3-4" : "evaluations:5-8");
  b.push_back(l.per_evaluation_inputs ? "inputs:per-evaluation" : "inputs:fixed");
  b.push_back(l.alternate && e >= 2 ? "graphs:alternating" : "graphs:one");
  b.push_back(l.reuse ? "plan-reuse:on" : "plan-reuse:off");
  if (l.reserve_in_flight && e >= 2) b.push_back("in-flight:reserve");
  if (l.next_in_flight && e >= 2) b.push_back("in-flight:new-graph");
  b.push_back(l.fail_alloc_nth > 0 ? "alloc-failure:part-way" : "alloc-failure:none");
  b.push_back(l.again > 0 ? "compute-again:yes" : "compute-again:no");
  std::sort(b.begin(), b.end());
  b.erase(std::unique(b.begin(), b.end()), b.end());
  return b;
}

// Appends the buckets a case reached to $TESSERA_CONFIG_COVERAGE (one "SOURCE<TAB>BUCKET" line per bucket the first
// time this process reaches it, after "(all)<TAB>BUCKET" for every bucket at the process's first call; the file may
// be shared by concurrent processes: each call writes its lines with one append).
// Does nothing when the variable is unset. `source` names the consumer ("property:NoRace...", "fuzz:end_to_end").
inline void record_buckets(const std::string& source, const std::vector<std::string>& buckets) {
  static const char* path = std::getenv("TESSERA_CONFIG_COVERAGE");
  if (path == nullptr || *path == '\0') return;
  static std::mutex mu;
  static std::set<std::string> seen;
  std::lock_guard<std::mutex> lock(mu);
  std::string lines;
  if (seen.empty()) {  // the first line of each process: every bucket, so that the report knows what was not reached
    for (const std::string& b : all_buckets()) lines += "(all)\t" + b + "\n";
  }
  for (const std::string& b : buckets) {
    std::string line = source + "\t" + b + "\n";
    if (seen.insert(line).second) lines += line;
  }
  if (lines.empty()) return;
  if (FILE* f = std::fopen(path, "a")) {
    std::fwrite(lines.data(), 1, lines.size(), f);
    std::fclose(f);
  }
}

}  // namespace tessera::test::space
