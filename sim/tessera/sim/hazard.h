// The hazard detector (docs/simulator.md): happens-before over the host thread and every stream with vector clocks, and
// per-buffer shadow byte ranges. Two accesses to overlapping bytes, at least one a write, that happens-before does not
// order, are a race. It works from the order of API calls (who submitted what after which synchronisation), never from
// wall time, so it works the same for simulated and wrapped real devices.
//
// Clock rules (agent = the host thread or one stream):
//   - every access is stamped with its agent's current epoch (clock[agent][agent]);
//   - release(a) snapshots a's clock (for an event record, a host synchronize, or a submission) and then ticks a, so
//     that later work of a is not covered by the snapshot;
//   - acquire(a, snapshot) joins a snapshot into a's clock (event wait, synchronize, the stream taking the host's
//     knowledge at submission).
// An earlier access (agent b, epoch e) happens before the current access of agent a iff a == b or clock[a][b] >= e.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <deque>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace tessera::sim {

class VectorClock {
 public:
  uint64_t get(size_t agent) const { return agent < c_.size() ? c_[agent] : 0; }
  void set(size_t agent, uint64_t v);
  void join(const VectorClock& o);
  size_t size() const { return c_.size(); }

 private:
  std::vector<uint64_t> c_;
};

struct RaceAccess {
  uint64_t command = 0;     // command id (see HazardTracker::begin_command)
  std::string description;  // the command, e.g. "gpu0/s0 #12 compute (MUL_MAT blk.0.attn_q ...)"
  std::string agent;        // "host" or the stream's name
  std::string tensor;       // tensor name ("" when unknown)
  bool write = false;
};

struct Race {
  RaceAccess first;    // the earlier access (in API order)
  RaceAccess second;   // the access that found the race
  std::string buffer;  // buffer name
  size_t offset = 0;   // overlapping byte range within the buffer
  size_t size = 0;
  uint64_t seed = 0;
  std::string to_string() const;
};

// What a command is, kept compact (formatted only when a race is reported): "<verb> <a> -> <b> (<bytes>), <n> nodes".
struct CommandDesc {
  const char* verb = "";    // a string with static storage: "compute", "copy", "set", ...
  const char* a = nullptr;  // first tensor (or buffer) name, copied
  const char* b = nullptr;  // second name (copies), copied
  size_t bytes = 0;
  size_t nodes = 0;  // computes: number of nodes
};

class HazardTracker {
 public:
  static constexpr int kHost = 0;

  HazardTracker();

  int add_agent(const std::string& name);  // a new stream; returns its id
  int agent_count() const { return static_cast<int>(agents_.size()); }
  const std::string& agent_name(int agent) const { return agents_[static_cast<size_t>(agent)].name; }
  const VectorClock& clock(int agent) const { return agents_[static_cast<size_t>(agent)].clock; }

  // Snapshot agent's clock, then tick it.
  VectorClock release(int agent);
  void acquire(int agent, const VectorClock& snapshot);
  // `to` learns everything `from` did so far (host synchronize of a stream, a stream taking the host's knowledge at
  // submission): acquire(to, release(from)) without a copy of the clock.
  void sync(int to, int from);

  // Commands group accesses for reports.
  uint64_t begin_command(int agent, const CommandDesc& desc);
  uint64_t begin_command(int agent, std::string description);  // free text (tests, rare commands)
  std::string describe_command(uint64_t command) const;
  uint64_t current_command() const { return current_; }  // the last command begun (0: none)

  // Checks an access of the current command against earlier accesses to the same bytes, records races, then records
  // it. buffer: an id from new_buffer. size 0 is ignored.
  void access(uint64_t buffer, size_t offset, size_t size, bool write, const char* tensor);

  uint64_t new_buffer(const std::string& name);
  // Forgets a buffer's shadow (after checking the free as a host write of all of it, done by the caller).
  void free_buffer(uint64_t buffer);

  void set_seed(uint64_t seed) { seed_ = seed; }
  const std::vector<Race>& races() const { return races_; }
  size_t race_count() const { return races_.size(); }
  uint64_t accesses() const { return n_accesses_; }

 private:
  struct Stamp {
    int32_t agent = -1;  // -1: none
    uint32_t name = 0;   // interned tensor name
    uint64_t epoch = 0;
    uint64_t command = 0;
  };
  struct Segment {
    size_t end = 0;
    Stamp write;
    std::vector<Stamp> reads;  // at most one per agent (the latest)
  };
  struct Agent {
    std::string name;
    VectorClock clock;
  };
  struct CommandInfo {
    int32_t agent;
    uint32_t a, b;  // interned names
    const char* verb;
    uint64_t bytes;
    uint64_t nodes;
  };
  struct BufferShadow {
    std::string name;
    std::map<size_t, Segment> segs;  // keyed by start offset; non-overlapping
  };

  bool ordered(const Stamp& earlier, int agent) const;
  void report(const Stamp& earlier, bool earlier_write, const Stamp& now, bool now_write, const BufferShadow& buf,
              size_t lo, size_t hi);
  uint32_t intern(const char* name);
  // Splits the segment containing `at` so that a segment starts exactly at `at` (when one covers it).
  void split_at(std::map<size_t, Segment>& segs, size_t at);

  std::vector<Agent> agents_;
  std::vector<CommandInfo> commands_;                    // index = command id - 1
  std::unordered_map<uint64_t, std::string> free_text_;  // descriptions given as text
  uint64_t current_ = 0;
  std::unordered_map<uint64_t, BufferShadow> buffers_;
  uint64_t next_buffer_ = 1;
  std::deque<std::string> names_{""};  // stable storage for the views below
  std::unordered_map<std::string_view, uint32_t> name_ids_;
  std::vector<Race> races_;
  std::set<std::pair<uint64_t, uint64_t>> reported_;  // command pairs already reported
  uint64_t seed_ = 0;
  uint64_t n_accesses_ = 0;
};

}  // namespace tessera::sim
