// Simulated timeline (docs/simulator.md): every command with start and end in virtual time, per track (the host thread
// and each stream); exported as Chrome trace event JSON (opens in Perfetto / chrome://tracing) and summarised as
// per-device busy time, copy volume and makespan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessera::sim {

enum class TraceKind : uint8_t {
  kCompute = 0,  // a graph (or part of one) on a stream
  kCopy,         // device <-> device copy on a stream
  kSet,          // host -> device
  kGet,          // device -> host
  kMemset,
  kWait,  // a stream or the host waiting for an event / a stream
  kCount
};
const char* trace_kind_name(TraceKind kind);

struct TraceEvent {
  TraceKind kind = TraceKind::kCompute;
  int track = 0;        // index into Trace::tracks
  std::string name;     // e.g. "MUL_MAT blk.0.attn_q" or "copy x -> gpu1"
  double start_us = 0;  // virtual time, microseconds
  double end_us = 0;    // >= start_us
  size_t bytes = 0;     // bytes moved (copies, set, get, memset) or touched (compute)
  int peer = -1;        // a copy's source device (index into Trace::devices; the destination is the track's)
};

struct TraceTrack {
  std::string name;  // "host", "gpu0/stream0", ...
  int device = -1;   // index into Trace::devices, -1 for the host
};

struct Trace {
  std::vector<std::string> devices;  // device names
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;  // in submission order
};

// Chrome trace event format ("traceEvents" with complete events "ph":"X", microsecond timestamps, one tid per track,
// thread_name metadata for every track, pid 1). Always valid JSON (names are escaped).
std::string chrome_trace_json(const Trace& trace);

struct DeviceSummary {
  std::string name;
  double busy_us = 0;         // union of the intervals of its tracks' compute/copy/set/get/memset events
  double compute_us = 0;      // sum of compute event durations
  size_t copy_bytes_in = 0;   // bytes of copies and sets landing on the device
  size_t copy_bytes_out = 0;  // bytes of gets leaving it (and copies whose source is it, when known: not tracked)
  size_t n_commands = 0;
};

struct TraceSummary {
  std::vector<DeviceSummary> devices;
  double makespan_us = 0;  // latest end - earliest start over all events (0 when there are none)
  size_t copy_bytes = 0;   // all copy/set/get bytes
  size_t n_events = 0;
};

TraceSummary summarize(const Trace& trace);
// A small fixed-width table: device, busy, compute, bytes in/out, commands, then makespan and total copy volume.
std::string format_summary(const TraceSummary& summary);

}  // namespace tessera::sim
