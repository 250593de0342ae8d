// Simulated timeline (docs/simulator.md): Chrome trace JSON that parses back with the expected tracks and events (names
// escaped, always valid), and the summary: busy time as the union of intervals per device, bytes, makespan.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "tessera/sim/trace.h"

using namespace tessera::sim;
using ::testing::HasSubstr;
using json = nlohmann::json;

namespace {

TraceEvent ev(TraceKind kind, int track, const std::string& name, double start, double end, size_t bytes = 0) {
  TraceEvent e;
  e.kind = kind;
  e.track = track;
  e.name = name;
  e.start_us = start;
  e.end_us = end;
  e.bytes = bytes;
  return e;
}

// devices gpu0, cpu; tracks: host, gpu0/stream0, gpu0/stream1, cpu/stream0.
Trace two_device_trace() {
  Trace t;
  t.devices = {"gpu0", "cpu"};
  t.tracks = {TraceTrack{"host", -1}, TraceTrack{"gpu0/stream0", 0}, TraceTrack{"gpu0/stream1", 0},
              TraceTrack{"cpu/stream0", 1}};
  return t;
}

json parse_chrome(const Trace& t) {
  const std::string text = chrome_trace_json(t);
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  EXPECT_FALSE(j.is_discarded()) << text;
  return j;
}

std::vector<json> events_with_ph(const json& j, const char* ph) {
  std::vector<json> out;
  for (const json& e : j.at("traceEvents")) {
    if (e.at("ph") == ph) out.push_back(e);
  }
  return out;
}

}  // namespace

TEST(SimTrace, KindNames) {
  EXPECT_STREQ(trace_kind_name(TraceKind::kCompute), "compute");
  EXPECT_STREQ(trace_kind_name(TraceKind::kCopy), "copy");
  EXPECT_STREQ(trace_kind_name(TraceKind::kSet), "set");
  EXPECT_STREQ(trace_kind_name(TraceKind::kGet), "get");
  EXPECT_STREQ(trace_kind_name(TraceKind::kMemset), "memset");
  EXPECT_STREQ(trace_kind_name(TraceKind::kWait), "wait");
  EXPECT_STREQ(trace_kind_name(TraceKind::kCount), "unknown");
}

TEST(SimTrace, ChromeJsonHasTracksAndCompleteEvents) {
  Trace t = two_device_trace();
  t.events = {ev(TraceKind::kSet, 1, "set x", 0, 4, 4096),
              ev(TraceKind::kCompute, 1, "MUL_MAT blk.0.attn_q", 4, 10.5, 1 << 20),
              ev(TraceKind::kCopy, 2, "copy x -> gpu0", 3, 6, 512), ev(TraceKind::kWait, 0, "synchronize", 0, 11),
              ev(TraceKind::kGet, 3, "get y", 11, 12.25, 64)};
  const json j = parse_chrome(t);
  ASSERT_TRUE(j.contains("traceEvents"));

  std::map<int, std::string> thread_names;
  for (const json& m : events_with_ph(j, "M")) {
    EXPECT_EQ(m.at("pid"), 1);
    if (m.at("name") == "thread_name")
      thread_names[m.at("tid").get<int>()] = m.at("args").at("name").get<std::string>();
  }
  const std::map<int, std::string> want_threads = {
      {1, "host"}, {2, "gpu0/stream0"}, {3, "gpu0/stream1"}, {4, "cpu/stream0"}};
  EXPECT_EQ(thread_names, want_threads);

  const std::vector<json> x = events_with_ph(j, "X");
  ASSERT_EQ(x.size(), t.events.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const TraceEvent& e = t.events[i];
    SCOPED_TRACE(e.name);
    EXPECT_EQ(x[i].at("name"), e.name);
    EXPECT_EQ(x[i].at("cat"), trace_kind_name(e.kind));
    EXPECT_EQ(x[i].at("pid"), 1);
    EXPECT_EQ(x[i].at("tid"), e.track + 1);
    EXPECT_DOUBLE_EQ(x[i].at("ts").get<double>(), e.start_us);
    EXPECT_DOUBLE_EQ(x[i].at("dur").get<double>(), e.end_us - e.start_us);
    EXPECT_EQ(x[i].at("args").at("bytes").get<size_t>(), e.bytes);
  }
}

TEST(SimTrace, NamesAreEscapedAndTheJsonStaysValid) {
  Trace t = two_device_trace();
  t.tracks[1].name = "gpu \"zero\"\\stream";
  const std::string odd = std::string("q\"uote\\back\nline\ttab\x01\x1f ctl \xC2\xB5s");
  t.events = {ev(TraceKind::kCompute, 1, odd, 0, 1), ev(TraceKind::kCompute, 1, "bad \xff\xfe utf8 \xC0\xAF", 1, 2),
              ev(TraceKind::kCompute, 1, "truncated \xE2\x82", 2, 3), ev(TraceKind::kCompute, 1, "", 3, 4)};
  const json j = parse_chrome(t);
  const std::vector<json> x = events_with_ph(j, "X");
  ASSERT_EQ(x.size(), 4u);
  EXPECT_EQ(x[0].at("name").get<std::string>(), odd);  // valid UTF-8 comes back byte for byte
  EXPECT_EQ(x[1].at("name").get<std::string>(), "bad \xEF\xBF\xBD\xEF\xBF\xBD utf8 \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(x[2].at("name").get<std::string>(), "truncated \xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(x[3].at("name").get<std::string>(), "");
  bool found = false;
  for (const json& m : events_with_ph(j, "M")) {
    if (m.at("name") == "thread_name" && m.at("tid") == 2) found = m.at("args").at("name") == "gpu \"zero\"\\stream";
  }
  EXPECT_TRUE(found);
}

TEST(SimTrace, EmptyAndDegenerateTracesAreValidJson) {
  EXPECT_EQ(parse_chrome(Trace{}).at("traceEvents").size(), 1u);  // the process name only
  Trace t = two_device_trace();
  const double inf = std::numeric_limits<double>::infinity();
  t.events = {ev(TraceKind::kCompute, 1, "nan", std::nan(""), 1), ev(TraceKind::kCompute, 1, "inf", 0, inf),
              ev(TraceKind::kCompute, 1, "backwards", 5, 2), ev(TraceKind::kCompute, 99, "no such track", 0, 1)};
  const json j = parse_chrome(t);
  const std::vector<json> x = events_with_ph(j, "X");
  ASSERT_EQ(x.size(), 4u);
  EXPECT_EQ(x[0].at("ts"), 0);
  EXPECT_EQ(x[2].at("dur"), 0);  // never negative
  EXPECT_EQ(x[3].at("tid"), 100);
  // The summary skips what it cannot place and stays finite.
  const TraceSummary s = summarize(t);
  EXPECT_TRUE(std::isfinite(s.devices[0].busy_us));
  EXPECT_EQ(s.n_events, 4u);
}

TEST(SimTrace, BusyTimeIsTheUnionOfIntervalsPerDevice) {
  Trace t = two_device_trace();
  t.events = {
      ev(TraceKind::kCompute, 1, "a", 0, 10, 100),  // gpu0: [0,10]
      ev(TraceKind::kCopy, 2, "b", 5, 15, 1000),    // overlaps on the other stream: [0,15]
      ev(TraceKind::kCompute, 2, "c", 6, 8, 10),    // nested: no change
      ev(TraceKind::kWait, 1, "wait", 15, 20),      // waiting is not busy
      ev(TraceKind::kCompute, 1, "d", 20, 30),      // [20,30]
      ev(TraceKind::kMemset, 2, "e", 30, 40, 7),    // touching: [20,40]
      ev(TraceKind::kSet, 1, "f", 50, 50, 300),     // zero length
      ev(TraceKind::kGet, 3, "g", 2, 7, 64),        // cpu: [2,7]
      ev(TraceKind::kCompute, 3, "h", 4, 9),        // cpu: [2,9]
      ev(TraceKind::kWait, 0, "host sync", 0, 60),  // host track: no device
  };
  const TraceSummary s = summarize(t);
  ASSERT_EQ(s.devices.size(), 2u);
  const DeviceSummary& gpu = s.devices[0];
  EXPECT_EQ(gpu.name, "gpu0");
  EXPECT_DOUBLE_EQ(gpu.busy_us, 15 + 20);
  EXPECT_DOUBLE_EQ(gpu.compute_us, 10 + 2 + 10);
  EXPECT_EQ(gpu.copy_bytes_in, 1000u + 300u);
  EXPECT_EQ(gpu.copy_bytes_out, 0u);
  EXPECT_EQ(gpu.n_commands, 7u);
  const DeviceSummary& cpu = s.devices[1];
  EXPECT_EQ(cpu.name, "cpu");
  EXPECT_DOUBLE_EQ(cpu.busy_us, 7);
  EXPECT_DOUBLE_EQ(cpu.compute_us, 5);
  EXPECT_EQ(cpu.copy_bytes_out, 64u);
  EXPECT_EQ(cpu.n_commands, 2u);
  EXPECT_EQ(s.copy_bytes, 1000u + 300u + 64u);  // copies, sets, gets (not memsets)
  EXPECT_EQ(s.n_events, t.events.size());
  EXPECT_DOUBLE_EQ(s.makespan_us, 60);
}

TEST(SimTrace, MakespanIsLatestEndMinusEarliestStart) {
  Trace t = two_device_trace();
  EXPECT_EQ(summarize(t).makespan_us, 0);
  t.events = {ev(TraceKind::kCompute, 1, "a", 12, 20), ev(TraceKind::kCompute, 3, "b", 2.5, 7),
              ev(TraceKind::kCopy, 2, "c", 30, 48.5)};
  EXPECT_DOUBLE_EQ(summarize(t).makespan_us, 46);
}

TEST(SimTrace, FormatSummaryListsDevicesAndTotals) {
  Trace t = two_device_trace();
  t.events = {ev(TraceKind::kCompute, 1, "a", 0, 10), ev(TraceKind::kSet, 2, "b", 0, 5, 3 << 20)};
  const std::string text = format_summary(summarize(t));
  EXPECT_THAT(text, HasSubstr("device"));
  EXPECT_THAT(text, HasSubstr("gpu0"));
  EXPECT_THAT(text, HasSubstr("cpu"));
  EXPECT_THAT(text, HasSubstr("makespan: 10.000 us"));
  EXPECT_THAT(text, HasSubstr("3.00 MiB"));
  EXPECT_THAT(text, HasSubstr("(100.0% busy)"));
}
