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
  // A host-driven command over a link (a synchronous set or get of device memory, a blocking device-to-device copy;
  // its track is the host's): the device it writes (set, copy) or reads (get); -1 otherwise (the track's device).
  int device = -1;
};

struct TraceTrack {
  std::string name;  // "host", "gpu0/stream0", ...
  int device = -1;   // index into Trace::devices, -1 for the host
};

// One node of a compute event: the event's time divided among its nodes by the cost model, in graph order.
struct TraceOp {
  int event = 0;        // index into Trace::events (the compute event it belongs to)
  std::string name;     // "MUL_MAT blk.0.attn_q"
  double start_us = 0;  // within the event's [start, end]
  double end_us = 0;
};

// An arrow between two points of the timeline: an event recorded on one stream and waited for on another stream (or
// synchronized by the host), or a copy and a node that reads what it copied.
enum class FlowKind : uint8_t { kEvent = 0, kCopy };
struct TraceFlow {
  FlowKind kind = FlowKind::kEvent;
  int from_track = 0;   // kEvent: the recording stream, at from_us (the time the event completes)
  double from_us = 0;   // kCopy: the copy event's track and start
  int to_track = 0;     // kEvent: the waiting stream (or the host), at the time it starts waiting
  double to_us = 0;     // kCopy: the consumer op's track and start
  int from_event = -1;  // kCopy: index into Trace::events of the copy
  int to_op = -1;       // kCopy: index into Trace::ops of the consumer
};

// Bytes of a device's memory allocated (its buffers), from the time given on (the host's time of the allocation or
// release).
struct TraceCounter {
  int device = 0;  // index into Trace::devices
  double time_us = 0;
  size_t bytes = 0;
};

struct Trace {
  std::vector<std::string> devices;  // device names
  std::vector<TraceTrack> tracks;
  std::vector<TraceEvent> events;      // in submission order
  std::vector<TraceOp> ops;            // the nodes of the compute events
  std::vector<TraceFlow> flows;        // event record -> wait, copy -> consumer
  std::vector<TraceCounter> counters;  // memory allocated per device, in time order
};

// Chrome trace event format (microsecond timestamps, pid 1, one tid per track with thread_name metadata). Always valid
// JSON (names are escaped). Written:
// - every event as a complete event ("ph":"X", "cat" its kind, "args":{"bytes"}), each compute event followed by its
//   nodes as complete events nested in it ("cat":"op");
// - every flow as a flow start ("ph":"s") and a flow end ("ph":"f") with the same "id", "cat" "event" or "copy": an
//   event flow starts at a zero-length slice "event record" (also "cat":"event") on the recording stream and ends at
//   the next slice of the waiting track ("wait" or the command after it); a copy flow starts in the copy and ends in
//   the consumer's op slice ("bp":"e");
// - every counter as a counter event ("ph":"C", "name":"memory <device>", "args":{"bytes"}).
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
// The same over events [first, last) only (a part of a run, e.g. its evaluations without the weight upload).
TraceSummary summarize(const Trace& trace, size_t first, size_t last);
// A small table: device, busy, compute, bytes in/out, commands, then makespan and total copy volume. Its columns are
// as wide as what they hold, 2 spaces apart (1 when that is wider than 80 columns); `wide`: the fixed widths of the
// tool's --wide.
std::string format_summary(const TraceSummary& summary, bool wide = false);

}  // namespace tessera::sim
