// The timeline's detail (docs/simulator.md "Timeline"): per-op slices inside a compute, flows from an event record to
// its wait and synchronize and from a copy to the node reading it, and a memory counter per device, checked on a
// small program whose times are worked out by hand from the cost figures, then through the Chrome trace JSON.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "unit/sim/sim_fixture.h"
#include "tessera/build.h"
#include "tessera/sim/simulator.h"
#include "tessera/sim/trace.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using json = nlohmann::json;

namespace {

// Two GPUs with cost_device()'s figures (5 us launch, 10 TFLOP/s f32, 500 GB/s) and a 100 GB/s, 2 us link.
//   gpu0: x = a + b; y = 2 y (one compute of two nodes), then an event recorded;
//   gpu1: waits for the event, copies y into y1, computes z = 3 y1; the host synchronizes on the event.
// Times (the host's clock stays at 0: nothing synchronous runs before the synchronize):
//   ADD of 64 f32: 5 us + 3 x 256 B / 500 GB/s = 5.001536 us, [0, 5.001536]
//   SCALE of 64 f32: 5 us + 2 x 256 B / 500 GB/s = 5.001024 us, [5.001536, 10.00256]; the event completes at 10.00256
//   gpu1 waits [0, 10.00256]; the copy of 256 B: 2 us + 256 B / 100 GB/s = 2.00256 us, [10.00256, 12.00512]
//   SCALE z on gpu1: [12.00512, 17.006144]
struct Program {
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<Backend> b0, b1;
  std::unique_ptr<OneOp> op0, op1;

  Program() {
    DeviceConfig g1 = cost_device();
    g1.name = "gpu1";
    TopologyConfig t = topology({cost_device(), g1});
    t.links = {LinkConfig{"gpu0", "gpu1", 100e9, 2.0}};
    sim = make_sim(t);
    b0 = sim->device(0)->init_backend({}).value();
    b1 = sim->device(1)->init_backend({}).value();
    op0 = std::make_unique<OneOp>(*sim->device(0)->buffer_type(), [](Context& c) {
      Tensor* a = c.new_tensor_1d(Type::kF32, 64);
      Tensor* b = c.new_tensor_1d(Type::kF32, 64);
      set_name(*a, "a");
      set_name(*b, "b");
      Tensor* x = add(c, a, b);
      set_name(*x, "x");
      Tensor* y = scale(c, x, 2.0f);
      set_name(*y, "y");
      return y;
    });
    op1 = std::make_unique<OneOp>(*sim->device(1)->buffer_type(), [](Context& c) {
      Tensor* y1 = c.new_tensor_1d(Type::kF32, 64);
      set_name(*y1, "y1");
      Tensor* z = scale(c, y1, 3.0f);
      set_name(*z, "z");
      return z;
    });
  }

  void run() {
    ASSERT_EQ(sim->now_us(), 0.0);
    ASSERT_EQ(b0->graph_compute_async(op0->graph), ComputeStatus::kSuccess) << b0->last_error();
    auto ev = sim->device(0)->event_new();
    ASSERT_NE(ev, nullptr);
    ev->record(*b0);
    ev->wait(*b1);
    ASSERT_TRUE(b1->cpy_tensor_async(b0.get(), *op0->out, *op1->ctx.find("y1")));
    ASSERT_EQ(b1->graph_compute_async(op1->graph), ComputeStatus::kSuccess) << b1->last_error();
    ev->synchronize();
    ASSERT_TRUE(b1->synchronize().ok());
  }
};

int track_named(const Trace& t, const std::string& prefix) {
  for (size_t i = 0; i < t.tracks.size(); ++i) {
    if (t.tracks[i].name.rfind(prefix, 0) == 0) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace

TEST(SimTraceDetail, OpsFlowsAndMemoryCountersOfAHandWorkedProgram) {
  Program p;
  ASSERT_NE(p.op1, nullptr);
  p.run();
  const Trace& t = p.sim->trace();
  const int host = 0, s0 = track_named(t, "gpu0"), s1 = track_named(t, "gpu1");
  ASSERT_GE(s0, 1);
  ASSERT_GE(s1, 1);

  // Per-op slices: three nodes in two compute events.
  ASSERT_EQ(t.ops.size(), 3u);
  EXPECT_EQ(t.ops[0].name, "ADD x");
  EXPECT_NEAR(t.ops[0].start_us, 0.0, 1e-9);
  EXPECT_NEAR(t.ops[0].end_us, 5.001536, 1e-9);
  EXPECT_EQ(t.ops[1].name, "SCALE y");
  EXPECT_NEAR(t.ops[1].start_us, 5.001536, 1e-9);
  EXPECT_NEAR(t.ops[1].end_us, 10.00256, 1e-9);
  EXPECT_EQ(t.ops[2].name, "SCALE z");
  EXPECT_NEAR(t.ops[2].start_us, 12.00512, 1e-9);
  EXPECT_NEAR(t.ops[2].end_us, 17.006144, 1e-9);
  EXPECT_EQ(t.ops[0].event, t.ops[1].event);
  EXPECT_EQ(t.events[static_cast<size_t>(t.ops[0].event)].track, s0);
  EXPECT_EQ(t.events[static_cast<size_t>(t.ops[2].event)].track, s1);

  // Flows: record -> wait (gpu1 starts waiting at 0), the copy -> SCALE z, record -> the host's synchronize.
  ASSERT_EQ(t.flows.size(), 3u);
  const TraceFlow& wait = t.flows[0];
  EXPECT_EQ(wait.kind, FlowKind::kEvent);
  EXPECT_EQ(wait.from_track, s0);
  EXPECT_NEAR(wait.from_us, 10.00256, 1e-9);
  EXPECT_EQ(wait.to_track, s1);
  EXPECT_NEAR(wait.to_us, 0.0, 1e-9);
  const TraceFlow& copy = t.flows[1];
  EXPECT_EQ(copy.kind, FlowKind::kCopy);
  EXPECT_EQ(copy.from_track, s1);
  EXPECT_NEAR(copy.from_us, 10.00256, 1e-9);
  ASSERT_GE(copy.from_event, 0);
  EXPECT_EQ(t.events[static_cast<size_t>(copy.from_event)].name, "copy y -> y1");
  EXPECT_NEAR(t.events[static_cast<size_t>(copy.from_event)].end_us, 12.00512, 1e-9);
  EXPECT_EQ(copy.to_op, 2);
  EXPECT_EQ(copy.to_track, s1);
  EXPECT_NEAR(copy.to_us, 12.00512, 1e-9);
  const TraceFlow& sync = t.flows[2];
  EXPECT_EQ(sync.kind, FlowKind::kEvent);
  EXPECT_EQ(sync.from_track, s0);
  EXPECT_NEAR(sync.from_us, 10.00256, 1e-9);
  EXPECT_EQ(sync.to_track, host);
  EXPECT_NEAR(sync.to_us, 0.0, 1e-9);

  // Memory: gpu0's buffer holds a, b, x, y (4 x 256 B, alignment 256), gpu1's y1 and z (2 x 256 B), both at time 0.
  ASSERT_GE(t.counters.size(), 2u);
  EXPECT_EQ(t.counters[0].device, 0);
  EXPECT_EQ(t.counters[0].bytes, 1024u);
  EXPECT_EQ(t.counters[0].time_us, 0.0);
  EXPECT_EQ(t.counters[1].device, 1);
  EXPECT_EQ(t.counters[1].bytes, 512u);
}

TEST(SimTraceDetail, ChromeJsonCarriesOpsFlowsAndCounters) {
  Program p;
  ASSERT_NE(p.op1, nullptr);
  p.run();
  const Trace& t = p.sim->trace();
  const int tid0 = track_named(t, "gpu0") + 1, tid1 = track_named(t, "gpu1") + 1;
  const json j = json::parse(chrome_trace_json(t));
  std::vector<json> ops, records;
  std::map<int, std::vector<json>> flows;  // id -> [start, end]
  std::vector<json> counters;
  for (const json& e : j.at("traceEvents")) {
    const std::string ph = e.at("ph");
    if (ph == "X" && e.at("cat") == "op") ops.push_back(e);
    if (ph == "X" && e.at("name") == "event record") records.push_back(e);
    if (ph == "s" || ph == "f") flows[e.at("id").get<int>()].push_back(e);
    if (ph == "C") counters.push_back(e);
  }
  ASSERT_EQ(ops.size(), 3u);
  EXPECT_EQ(ops[0].at("name"), "ADD x");
  EXPECT_EQ(ops[0].at("tid"), tid0);
  EXPECT_NEAR(ops[1].at("ts").get<double>(), 5.001536, 1e-9);
  EXPECT_NEAR(ops[1].at("dur").get<double>(), 5.001024, 1e-9);
  EXPECT_EQ(ops[2].at("name"), "SCALE z");
  EXPECT_EQ(ops[2].at("tid"), tid1);

  // Two event flows (each from a zero-length "event record" slice on gpu0 at 10.00256) and one copy flow.
  ASSERT_EQ(records.size(), 2u);
  for (const json& r : records) {
    EXPECT_EQ(r.at("tid"), tid0);
    EXPECT_NEAR(r.at("ts").get<double>(), 10.00256, 1e-9);
    EXPECT_EQ(r.at("dur").get<double>(), 0.0);
  }
  ASSERT_EQ(flows.size(), 3u);
  int n_event = 0, n_copy = 0;
  for (const auto& [id, pair] : flows) {
    ASSERT_EQ(pair.size(), 2u) << id;
    EXPECT_EQ(pair[0].at("ph"), "s");
    EXPECT_EQ(pair[1].at("ph"), "f");
    EXPECT_EQ(pair[0].at("cat"), pair[1].at("cat"));
    if (pair[0].at("cat") == "event") {
      ++n_event;
      EXPECT_EQ(pair[0].at("tid"), tid0);
      EXPECT_NEAR(pair[0].at("ts").get<double>(), 10.00256, 1e-9);
      EXPECT_EQ(pair[1].at("ts").get<double>(), 0.0);
      EXPECT_FALSE(pair[1].contains("bp"));  // binds to the next slice: the wait
    } else {
      ++n_copy;
      EXPECT_EQ(pair[0].at("tid"), tid1);
      EXPECT_NEAR(pair[0].at("ts").get<double>(), 10.00256, 1e-9);
      EXPECT_EQ(pair[1].at("tid"), tid1);
      EXPECT_NEAR(pair[1].at("ts").get<double>(), 12.00512, 1e-9);
      EXPECT_EQ(pair[1].at("bp"), "e");  // inside SCALE z's slice
    }
  }
  EXPECT_EQ(n_event, 2);
  EXPECT_EQ(n_copy, 1);

  ASSERT_GE(counters.size(), 2u);
  EXPECT_EQ(counters[0].at("name"), "memory gpu0");
  EXPECT_EQ(counters[0].at("args").at("bytes"), 1024);
  EXPECT_EQ(counters[1].at("name"), "memory gpu1");
  EXPECT_EQ(counters[1].at("args").at("bytes"), 512);
}
