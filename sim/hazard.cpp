// Vector clocks and shadow byte ranges (see tessera/sim/hazard.h for the rules).
#include "tessera/sim/hazard.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>

namespace tessera::sim {

void VectorClock::set(size_t agent, uint64_t v) {
  if (agent >= c_.size()) c_.resize(agent + 1, 0);
  c_[agent] = v;
}

void VectorClock::join(const VectorClock& o) {
  if (o.c_.size() > c_.size()) c_.resize(o.c_.size(), 0);
  for (size_t i = 0; i < o.c_.size(); ++i) c_[i] = std::max(c_[i], o.c_[i]);
}

std::string Race::to_string() const {
  char head[256];
  std::snprintf(head, sizeof head, "race on buffer %s bytes [%zu, %zu) (seed %" PRIu64 "):\n", buffer.c_str(), offset,
                offset + size, seed);
  auto line = [](const RaceAccess& a) {
    std::string s = "  ";
    s += a.write ? "write" : "read";
    if (!a.tensor.empty()) s += " of " + a.tensor;
    s += " by " + a.agent + " in " + a.description + "\n";
    return s;
  };
  return std::string(head) + line(first) + line(second) +
         "  neither is ordered before the other (no synchronize, event wait or stream order between them)";
}

HazardTracker::HazardTracker() {
  agents_.push_back({"host", {}});
  agents_[0].clock.set(kHost, 1);
}

int HazardTracker::add_agent(const std::string& name) {
  agents_.push_back({name, {}});
  const int id = static_cast<int>(agents_.size()) - 1;
  agents_.back().clock.set(static_cast<size_t>(id), 1);
  return id;
}

VectorClock HazardTracker::release(int agent) {
  VectorClock& c = agents_[static_cast<size_t>(agent)].clock;
  VectorClock snap = c;
  c.set(static_cast<size_t>(agent), c.get(static_cast<size_t>(agent)) + 1);
  return snap;
}

void HazardTracker::acquire(int agent, const VectorClock& snapshot) {
  agents_[static_cast<size_t>(agent)].clock.join(snapshot);
}

void HazardTracker::sync(int to, int from) {
  VectorClock& f = agents_[static_cast<size_t>(from)].clock;
  agents_[static_cast<size_t>(to)].clock.join(f);
  f.set(static_cast<size_t>(from), f.get(static_cast<size_t>(from)) + 1);
}

uint64_t HazardTracker::begin_command(int agent, const CommandDesc& d) {
  commands_.push_back({agent, intern(d.a), intern(d.b), d.verb, d.bytes, d.nodes});
  current_ = commands_.size();
  return current_;
}

uint64_t HazardTracker::begin_command(int agent, std::string description) {
  const uint64_t id = begin_command(agent, CommandDesc{});
  free_text_[id] = std::move(description);
  return id;
}

std::string HazardTracker::describe_command(uint64_t command) const {
  if (command == 0 || command > commands_.size()) return "?";
  auto ft = free_text_.find(command);
  if (ft != free_text_.end()) return ft->second;
  const CommandInfo& c = commands_[command - 1];
  char buf[64];
  std::snprintf(buf, sizeof buf, "#%" PRIu64 " ", command);
  std::string s = agents_[static_cast<size_t>(c.agent)].name + " " + buf + c.verb;
  if (c.a != 0) s += " " + names_[c.a];
  if (c.b != 0) s += " -> " + names_[c.b];
  if (c.bytes != 0) {
    std::snprintf(buf, sizeof buf, " (%" PRIu64 " bytes)", c.bytes);
    s += buf;
  }
  if (c.nodes > 1) {
    std::snprintf(buf, sizeof buf, ", %" PRIu64 " nodes", c.nodes);
    s += buf;
  }
  return s;
}

uint64_t HazardTracker::new_buffer(const std::string& name) {
  const uint64_t id = next_buffer_++;
  buffers_[id].name = name;
  return id;
}

void HazardTracker::free_buffer(uint64_t buffer) { buffers_.erase(buffer); }

uint32_t HazardTracker::intern(const char* name) {
  if (name == nullptr || name[0] == '\0') return 0;
  auto it = name_ids_.find(std::string_view(name));
  if (it != name_ids_.end()) return it->second;
  const auto id = static_cast<uint32_t>(names_.size());
  names_.emplace_back(name);
  name_ids_.emplace(std::string_view(names_.back()), id);
  return id;
}

bool HazardTracker::ordered(const Stamp& earlier, int agent) const {
  if (earlier.agent < 0 || earlier.agent == agent) return true;
  return agents_[static_cast<size_t>(agent)].clock.get(static_cast<size_t>(earlier.agent)) >= earlier.epoch;
}

void HazardTracker::report(const Stamp& earlier, bool earlier_write, const Stamp& now, bool now_write,
                           const BufferShadow& buf, size_t lo, size_t hi) {
  if (!reported_.insert({earlier.command, now.command}).second) {
    // Same pair of commands: widen the range of the race already reported.
    for (auto it = races_.rbegin(); it != races_.rend(); ++it) {
      if (it->first.command == earlier.command && it->second.command == now.command) {
        const size_t a = std::min(it->offset, lo), b = std::max(it->offset + it->size, hi);
        it->offset = a;
        it->size = b - a;
        break;
      }
    }
    return;
  }
  auto make = [&](const Stamp& s, bool w) {
    RaceAccess a;
    a.command = s.command;
    const CommandInfo& ci = commands_[s.command - 1];
    a.description = describe_command(s.command);
    a.agent = agents_[static_cast<size_t>(ci.agent)].name;
    a.tensor = names_[s.name];
    a.write = w;
    return a;
  };
  Race r;
  r.first = make(earlier, earlier_write);
  r.second = make(now, now_write);
  r.buffer = buf.name;
  r.offset = lo;
  r.size = hi - lo;
  r.seed = seed_;
  races_.push_back(std::move(r));
}

void HazardTracker::split_at(std::map<size_t, Segment>& segs, size_t at) {
  auto it = segs.upper_bound(at);
  if (it == segs.begin()) return;
  --it;
  if (it->first == at || it->second.end <= at) return;
  Segment tail = it->second;  // same stamps, second half
  it->second.end = at;
  segs.emplace(at, std::move(tail));
}

void HazardTracker::access(uint64_t buffer, size_t offset, size_t size, bool write, const char* tensor) {
  if (size == 0 || current_ == 0) return;
  auto bit = buffers_.find(buffer);
  if (bit == buffers_.end()) return;
  ++n_accesses_;
  BufferShadow& buf = bit->second;
  auto& segs = buf.segs;
  const int agent = commands_[current_ - 1].agent;
  Stamp now;
  now.agent = agent;
  now.name = intern(tensor);
  now.epoch = agents_[static_cast<size_t>(agent)].clock.get(static_cast<size_t>(agent));
  now.command = current_;
  const size_t lo = offset, hi = offset + size;

  split_at(segs, lo);
  split_at(segs, hi);
  // Walk the segments inside [lo, hi), check, update, and fill the gaps with fresh segments.
  size_t cursor = lo;
  auto it = segs.lower_bound(lo);
  std::vector<std::pair<size_t, size_t>> gaps;
  for (; it != segs.end() && it->first < hi; ++it) {
    if (it->first > cursor) gaps.emplace_back(cursor, it->first);
    Segment& s = it->second;
    const size_t a = it->first, b = s.end;
    if (s.write.agent >= 0 && !ordered(s.write, agent)) report(s.write, true, now, write, buf, a, b);
    if (write) {
      for (const Stamp& r : s.reads) {
        if (!ordered(r, agent)) report(r, false, now, true, buf, a, b);
      }
      s.write = now;
      s.reads.clear();
    } else {
      bool replaced = false;
      for (Stamp& r : s.reads) {
        if (r.agent == agent) {
          r = now;
          replaced = true;
          break;
        }
      }
      if (!replaced) s.reads.push_back(now);
    }
    cursor = b;
  }
  if (cursor < hi) gaps.emplace_back(cursor, hi);
  for (const auto& [ga, gb] : gaps) {
    Segment s;
    s.end = gb;
    if (write) {
      s.write = now;
    } else {
      s.reads.push_back(now);
    }
    segs.emplace(ga, std::move(s));
  }
}

}  // namespace tessera::sim
