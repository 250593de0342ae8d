// The simulated timeline: Chrome trace export and the per-device summary (tessera/sim/trace.h).
#include "tessera/sim/trace.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <utility>

namespace tessera::sim {

const char* trace_kind_name(TraceKind kind) {
  switch (kind) {
    case TraceKind::kCompute: return "compute";
    case TraceKind::kCopy: return "copy";
    case TraceKind::kSet: return "set";
    case TraceKind::kGet: return "get";
    case TraceKind::kMemset: return "memset";
    case TraceKind::kWait: return "wait";
    case TraceKind::kCount: break;
  }
  return "unknown";
}

namespace {

// Length of the valid UTF-8 sequence at s[i] (0 when it is not one): overlong forms, surrogates and code points
// above U+10FFFF are invalid, as JSON parsers require.
size_t utf8_sequence(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  const size_t left = s.size() - i;
  auto cont = [&](size_t k) { return (b(i + k) & 0xC0) == 0x80; };
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(1) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(1) || !cont(2)) return 0;
    if (c == 0xE0 && b(i + 1) < 0xA0) return 0;   // overlong
    if (c == 0xED && b(i + 1) >= 0xA0) return 0;  // surrogate
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(1) || !cont(2) || !cont(3)) return 0;
    if (c == 0xF0 && b(i + 1) < 0x90) return 0;   // overlong
    if (c == 0xF4 && b(i + 1) >= 0x90) return 0;  // above U+10FFFF
    return 4;
  }
  return 0;
}

// A JSON string literal: quotes, backslashes and control characters escaped; bytes that are not UTF-8 become U+FFFD.
void append_json_string(std::string* out, const std::string& s) {
  *out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      switch (c) {
        case '"': *out += "\\\""; break;
        case '\\': *out += "\\\\"; break;
        case '\n': *out += "\\n"; break;
        case '\r': *out += "\\r"; break;
        case '\t': *out += "\\t"; break;
        case '\b': *out += "\\b"; break;
        case '\f': *out += "\\f"; break;
        default:
          if (c < 0x20) {
            char buf[8];
            std::snprintf(buf, sizeof buf, "\\u%04x", c);
            *out += buf;
          } else {
            *out += static_cast<char>(c);
          }
      }
      ++i;
      continue;
    }
    const size_t n = utf8_sequence(s, i);
    if (n == 0) {
      *out += "\\ufffd";
      ++i;
    } else {
      out->append(s, i, n);
      i += n;
    }
  }
  *out += '"';
}

// A JSON number (shortest form that reads back exactly); non-finite values, which JSON cannot hold, become 0.
void append_number(std::string* out, double v) {
  if (!std::isfinite(v)) v = 0;
  if (v == 0) v = 0;  // no "-0"
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  out->append(buf, r.ptr);
}

bool valid_track(const Trace& trace, int track) {
  return track >= 0 && static_cast<size_t>(track) < trace.tracks.size();
}

// The start of a complete event, up to its "dur" (the caller adds what follows and the closing brace).
void append_slice(std::string* out, const std::string& name, const char* cat, int track, double start, double end) {
  *out += ",\n{\"name\":";
  append_json_string(out, name);
  *out += ",\"cat\":\"";
  *out += cat;
  *out += "\",\"ph\":\"X\",\"pid\":1,\"tid\":";
  *out += std::to_string(static_cast<int64_t>(track) + 1);
  *out += ",\"ts\":";
  append_number(out, start);
  *out += ",\"dur\":";
  const double dur = end - start;
  append_number(out, dur > 0 ? dur : 0);
}

}  // namespace

std::string chrome_trace_json(const Trace& trace) {
  std::string out;
  out.reserve(128 + 64 * trace.tracks.size() + 160 * trace.events.size());
  out += "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n";
  out += R"({"name":"process_name","ph":"M","pid":1,"tid":0,"args":{"name":"tessera sim"}})";
  for (size_t i = 0; i < trace.tracks.size(); ++i) {
    const std::string tid = std::to_string(i + 1);
    out += ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid + ",\"args\":{\"name\":";
    append_json_string(&out, trace.tracks[i].name);
    out += "}},\n{\"name\":\"thread_sort_index\",\"ph\":\"M\",\"pid\":1,\"tid\":" + tid +
           ",\"args\":{\"sort_index\":" + tid + "}}";
  }
  // The ops of each compute event, by event (they are recorded in event order).
  std::vector<std::pair<size_t, size_t>> ops_of(trace.events.size(), {0, 0});
  for (size_t i = 0; i < trace.ops.size(); ++i) {
    const int ev = trace.ops[i].event;
    if (ev < 0 || static_cast<size_t>(ev) >= trace.events.size()) continue;
    auto& r = ops_of[static_cast<size_t>(ev)];
    if (r.first == r.second) r.first = i;
    r.second = i + 1;
  }
  for (size_t k = 0; k < trace.events.size(); ++k) {
    const TraceEvent& e = trace.events[k];
    append_slice(&out, e.name, trace_kind_name(e.kind), e.track, e.start_us, e.end_us);
    out += ",\"args\":{\"bytes\":" + std::to_string(e.bytes) + "}}";
    for (size_t i = ops_of[k].first; i < ops_of[k].second; ++i) {
      const TraceOp& op = trace.ops[i];
      if (op.event != static_cast<int>(k)) continue;
      append_slice(&out, op.name, "op", e.track, op.start_us, op.end_us);
      out += ",\"args\":{\"op\":" + std::to_string(i) + "}}";
    }
  }
  for (size_t i = 0; i < trace.flows.size(); ++i) {
    const TraceFlow& f = trace.flows[i];
    const bool event = f.kind == FlowKind::kEvent;
    const char* cat = event ? "event" : "copy";
    if (event) {
      append_slice(&out, "event record", "event", f.from_track, f.from_us, f.from_us);
      out += "}";
    }
    const std::string id = std::to_string(i + 1);
    for (int end = 0; end < 2; ++end) {
      out += ",\n{\"name\":\"";
      out += cat;
      out += "\",\"cat\":\"";
      out += cat;
      out += end == 0 ? "\",\"ph\":\"s\"" : "\",\"ph\":\"f\"";
      if (end == 1 && !event) out += ",\"bp\":\"e\"";
      out += ",\"id\":" + id + ",\"pid\":1,\"tid\":";
      out += std::to_string(static_cast<int64_t>(end == 0 ? f.from_track : f.to_track) + 1);
      out += ",\"ts\":";
      append_number(&out, end == 0 ? f.from_us : f.to_us);
      out += "}";
    }
  }
  for (const TraceCounter& c : trace.counters) {
    if (c.device < 0 || static_cast<size_t>(c.device) >= trace.devices.size()) continue;
    out += ",\n{\"name\":";
    append_json_string(&out, "memory " + trace.devices[static_cast<size_t>(c.device)]);
    out += ",\"ph\":\"C\",\"pid\":1,\"ts\":";
    append_number(&out, c.time_us);
    out += ",\"args\":{\"bytes\":" + std::to_string(c.bytes) + "}}";
  }
  out += "\n]}\n";
  return out;
}

TraceSummary summarize(const Trace& trace) { return summarize(trace, 0, trace.events.size()); }

TraceSummary summarize(const Trace& trace, size_t first_event, size_t last_event) {
  last_event = std::min(last_event, trace.events.size());
  first_event = std::min(first_event, last_event);
  TraceSummary s;
  s.n_events = last_event - first_event;
  s.devices.resize(trace.devices.size());
  for (size_t i = 0; i < trace.devices.size(); ++i) s.devices[i].name = trace.devices[i];

  // Busy intervals per device, merged after sorting (overlapping streams of one device count once).
  std::vector<std::vector<std::pair<double, double>>> busy(trace.devices.size());
  double first = 0, last = 0;
  bool any = false;
  for (size_t k = first_event; k < last_event; ++k) {
    const TraceEvent& e = trace.events[k];
    const double start = e.start_us, end = std::max(e.end_us, e.start_us);
    if (std::isfinite(start) && std::isfinite(end)) {
      first = any ? std::min(first, start) : start;
      last = any ? std::max(last, end) : end;
      any = true;
    }
    if (e.kind == TraceKind::kCopy || e.kind == TraceKind::kSet || e.kind == TraceKind::kGet) s.copy_bytes += e.bytes;
    if (!valid_track(trace, e.track)) continue;
    const int dev = trace.tracks[static_cast<size_t>(e.track)].device;
    if (dev < 0 || static_cast<size_t>(dev) >= trace.devices.size()) continue;
    DeviceSummary& d = s.devices[static_cast<size_t>(dev)];
    ++d.n_commands;
    switch (e.kind) {
      case TraceKind::kCompute: d.compute_us += end - start; break;
      case TraceKind::kCopy:
      case TraceKind::kSet: d.copy_bytes_in += e.bytes; break;
      case TraceKind::kGet: d.copy_bytes_out += e.bytes; break;
      default: break;
    }
    if (e.kind != TraceKind::kWait && std::isfinite(start) && std::isfinite(end) && end > start) {
      busy[static_cast<size_t>(dev)].emplace_back(start, end);
    }
  }
  for (size_t i = 0; i < busy.size(); ++i) {
    auto& iv = busy[i];
    std::sort(iv.begin(), iv.end());
    double total = 0, cur_start = 0, cur_end = 0;
    bool open = false;
    for (const auto& [a, b] : iv) {
      if (open && a <= cur_end) {
        cur_end = std::max(cur_end, b);
        continue;
      }
      if (open) total += cur_end - cur_start;
      cur_start = a, cur_end = b, open = true;
    }
    if (open) total += cur_end - cur_start;
    s.devices[i].busy_us = total;
  }
  s.makespan_us = any ? last - first : 0;
  return s;
}

namespace {

std::string human_bytes(size_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = static_cast<double>(bytes);
  int u = 0;
  while (v >= 1024 && u < 5) v /= 1024, ++u;
  char buf[32];
  if (u == 0) {
    std::snprintf(buf, sizeof buf, "%zu B", bytes);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f %s", v, units[u]);
  }
  return buf;
}

}  // namespace

std::string format_summary(const TraceSummary& summary, bool wide) {
  std::string out;
  char line[256];
  if (wide) {
    size_t width = 6;
    for (const DeviceSummary& d : summary.devices) width = std::max(width, std::min<size_t>(d.name.size(), 40));
    const int w = static_cast<int>(width);
    std::snprintf(line, sizeof line, "%-*s %14s %14s %12s %12s %9s\n", w, "device", "busy (us)", "compute (us)",
                  "bytes in", "bytes out", "commands");
    out += line;
    for (const DeviceSummary& d : summary.devices) {
      const double busy_pct = summary.makespan_us > 0 ? 100.0 * d.busy_us / summary.makespan_us : 0.0;
      std::snprintf(line, sizeof line, "%-*.*s %14.3f %14.3f %12s %12s %9zu  (%.1f%% busy)\n", w, w, d.name.c_str(),
                    d.busy_us, d.compute_us, human_bytes(d.copy_bytes_in).c_str(),
                    human_bytes(d.copy_bytes_out).c_str(), d.n_commands, busy_pct);
      out += line;
    }
  } else {
    // The cells first, then each column as wide as its widest cell (the device names cut to 40 characters).
    std::vector<std::vector<std::string>> rows = {
        {"device", "busy (us)", "compute (us)", "bytes in", "bytes out", "commands", ""}};
    for (const DeviceSummary& d : summary.devices) {
      const double busy_pct = summary.makespan_us > 0 ? 100.0 * d.busy_us / summary.makespan_us : 0.0;
      auto fixed = [](double v) {
        char b[64];
        std::snprintf(b, sizeof b, "%.3f", v);
        return std::string(b);
      };
      char pct[64];
      std::snprintf(pct, sizeof pct, "(%.1f%% busy)", busy_pct);
      rows.push_back({d.name.substr(0, 40), fixed(d.busy_us), fixed(d.compute_us), human_bytes(d.copy_bytes_in),
                      human_bytes(d.copy_bytes_out), std::to_string(d.n_commands), pct});
    }
    std::vector<size_t> width(rows[0].size(), 0);
    for (const auto& r : rows) {
      for (size_t c = 0; c < r.size(); ++c) width[c] = std::max(width[c], r[c].size());
    }
    size_t total = 0;
    for (size_t w : width) total += w;
    const size_t gap = total + 2 * (width.size() - 1) <= 80 ? 2 : 1;
    for (const auto& r : rows) {
      std::string s;
      for (size_t c = 0; c < r.size(); ++c) {
        const std::string fill(width[c] - r[c].size(), ' ');
        if (c > 0) s += std::string(gap, ' ');
        s += c == 0 || c + 1 == r.size() ? r[c] + fill : fill + r[c];  // the device and the busy share: left
      }
      while (!s.empty() && s.back() == ' ') s.pop_back();
      out += s + "\n";
    }
  }
  std::snprintf(line, sizeof line, "makespan: %.3f us, copy volume: %s, events: %zu\n", summary.makespan_us,
                human_bytes(summary.copy_bytes).c_str(), summary.n_events);
  out += line;
  return out;
}

}  // namespace tessera::sim
