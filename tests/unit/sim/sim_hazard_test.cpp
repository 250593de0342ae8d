// The hazard detector (docs/simulator.md): the tracker alone on hand-written access sequences, then through simulated
// backends: sequences that must be flagged (missing wait before a copy, missing synchronize before a read-back,
// another stream reusing a range, a free while work is in flight) and the same sequences made correct with event
// chains or synchronisation, which must not be.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "unit/sim/sim_fixture.h"
#include "tessera/build.h"
#include "tessera/sim/hazard.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using ::testing::HasSubstr;

namespace {

// ---- the tracker alone ----

struct TrackerTest : ::testing::Test {
  HazardTracker hz;
  int s1 = hz.add_agent("s1");
  int s2 = hz.add_agent("s2");
  uint64_t buf = hz.new_buffer("buf");

  void access(int agent, size_t off, size_t size, bool write, const char* what = "t") {
    hz.begin_command(agent, std::string("cmd on ") + hz.agent_name(agent));
    hz.access(buf, off, size, write, what);
  }
};

TEST_F(TrackerTest, UnorderedWritesOnTwoStreamsRace) {
  access(s1, 0, 100, true, "a");
  access(s2, 50, 100, true, "b");
  ASSERT_EQ(hz.race_count(), 1u);
  const Race& r = hz.races()[0];
  EXPECT_EQ(r.offset, 50u);  // the overlap only
  EXPECT_EQ(r.size, 50u);
  EXPECT_EQ(r.first.tensor, "a");
  EXPECT_EQ(r.second.tensor, "b");
  EXPECT_EQ(r.first.agent, "s1");
  EXPECT_EQ(r.second.agent, "s2");
  EXPECT_TRUE(r.first.write && r.second.write);
}

TEST_F(TrackerTest, DisjointRangesAndReadsDoNotRace) {
  access(s1, 0, 100, true);
  access(s2, 100, 100, true);  // adjacent, not overlapping
  access(s1, 300, 10, false);
  access(s2, 300, 10, false);  // two reads
  EXPECT_EQ(hz.race_count(), 0u);
}

TEST_F(TrackerTest, StreamOrderOrdersItsOwnAccesses) {
  access(s1, 0, 64, true);
  access(s1, 0, 64, false);
  access(s1, 0, 64, true);
  EXPECT_EQ(hz.race_count(), 0u);
}

TEST_F(TrackerTest, ReleaseAcquireOrdersAcrossStreams) {
  access(s1, 0, 64, true);
  const VectorClock event = hz.release(s1);  // event record on s1
  hz.acquire(s2, event);                     // event wait on s2
  access(s2, 0, 64, false);
  EXPECT_EQ(hz.race_count(), 0u);
  // Work of s1 after the record is not covered by the event.
  access(s1, 0, 64, true);
  EXPECT_EQ(hz.race_count(), 1u);
  EXPECT_FALSE(hz.races()[0].first.write);  // s2's read, then s1's unordered write
}

TEST_F(TrackerTest, ReadThenUnorderedWriteRaces) {
  access(s1, 0, 64, false, "reader");
  access(s2, 0, 64, true, "writer");
  ASSERT_EQ(hz.race_count(), 1u);
  EXPECT_FALSE(hz.races()[0].first.write);
  EXPECT_TRUE(hz.races()[0].second.write);
}

TEST_F(TrackerTest, HostSyncOrdersLaterHostAccess) {
  access(s1, 0, 64, true);
  hz.sync(HazardTracker::kHost, s1);  // host synchronizes the stream
  access(HazardTracker::kHost, 0, 64, false);
  EXPECT_EQ(hz.race_count(), 0u);
}

TEST_F(TrackerTest, SameCommandPairReportedOnceWithTheWholeRange) {
  access(s1, 0, 64, true);
  hz.begin_command(s2, "two accesses");
  hz.access(buf, 0, 16, true, "x");
  hz.access(buf, 32, 16, true, "x");
  ASSERT_EQ(hz.race_count(), 1u);
  EXPECT_EQ(hz.races()[0].offset, 0u);
  EXPECT_EQ(hz.races()[0].size, 48u);
}

TEST_F(TrackerTest, ReportNamesCommandsTensorsBufferAndSeed) {
  hz.set_seed(77);
  access(s1, 0, 8, true, "alpha");
  access(s2, 0, 8, false, "beta");
  ASSERT_EQ(hz.race_count(), 1u);
  const std::string text = hz.races()[0].to_string();
  EXPECT_THAT(text, HasSubstr("buf"));
  EXPECT_THAT(text, HasSubstr("seed 77"));
  EXPECT_THAT(text, HasSubstr("write of alpha by s1 in cmd on s1"));
  EXPECT_THAT(text, HasSubstr("read of beta by s2 in cmd on s2"));
}

TEST_F(TrackerTest, FreedBufferForgetsItsHistory) {
  access(s1, 0, 64, true);
  hz.free_buffer(buf);
  access(s2, 0, 64, true);  // unknown buffer: ignored
  EXPECT_EQ(hz.race_count(), 0u);
}

// ---- through simulated backends ----

struct SimHazard : ::testing::Test {
  std::unique_ptr<Simulator> sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  std::unique_ptr<Backend> b0 = sim->device(0)->init_backend({}).value();
  std::unique_ptr<Backend> b1 = sim->device(1)->init_backend({}).value();
  BufferType& g0 = *sim->device(0)->buffer_type();
  BufferType& g1 = *sim->device(1)->buffer_type();
  std::vector<float> xv = random_values(64, 11);

  size_t races() const { return sim->races().size(); }
};

// cpy_tensor_async orders the copy after the work of the source backend it is given (backend.h). A producer on
// another stream still needs an event wait: without it the copy reads too early.
TEST_F(SimHazard, MissingWaitBeforeCopyIsARace) {
  auto producer = sim->device(0)->init_backend({}).value();  // gpu0/s1
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  set_name(*op.out, "x2");
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(producer->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  ASSERT_TRUE(b1->cpy_tensor_async(b0.get(), *op.out, *dst[0]));  // no wait for the producer's stream
  ASSERT_GE(races(), 1u);
  const Race& r = sim->races()[0];
  EXPECT_EQ(r.first.tensor, "x2");
  EXPECT_EQ(r.first.agent, "gpu0/s1");
  EXPECT_EQ(r.second.agent, "gpu1/s0");
  EXPECT_EQ(r.seed, sim->seed());
}

TEST_F(SimHazard, HostCopyWithoutSynchronizeIsARace) {
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(b0->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  ASSERT_TRUE(tensor_copy(*op.out, *dst[0]).ok());  // blocking copy by the host, gpu0 not synchronized
  ASSERT_GE(races(), 1u);
  EXPECT_EQ(sim->races()[0].first.agent, "gpu0/s0");
  EXPECT_EQ(sim->races()[0].second.agent, "host");
}

TEST_F(SimHazard, AsyncCopyFromTheProducingStreamIsOrderedByContract) {
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(b0->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  ASSERT_TRUE(b1->cpy_tensor_async(b0.get(), *op.out, *dst[0]));
  // and the source stream may not overwrite the source before the copy has read it
  OneOp overwrite(g0, [&](Context& c) { return cpy(c, scale(c, in[0], 5.0f), op.out); });
  ASSERT_EQ(b0->graph_compute_async(overwrite.graph), ComputeStatus::kSuccess);
  EXPECT_TRUE(b1->synchronize().ok());
  EXPECT_EQ(races(), 0u) << sim->races_report();
  const std::vector<float> got = get_f32(*dst[0]);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2.0f * xv[i]) << i;
}

TEST_F(SimHazard, EventChainBeforeCopyIsClean) {
  auto producer = sim->device(0)->init_backend({}).value();
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  Vectors dst(g1, {"x2_copy"});
  auto ev = sim->device(0)->event_new();
  ASSERT_NE(ev, nullptr);
  ASSERT_EQ(producer->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  ev->record(*producer);
  ev->wait(*b1);
  ASSERT_TRUE(b1->cpy_tensor_async(b0.get(), *op.out, *dst[0]));
  EXPECT_TRUE(b1->synchronize().ok());
  EXPECT_EQ(races(), 0u) << sim->races_report();
  const std::vector<float> got = get_f32(*dst[0]);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2.0f * xv[i]) << i;
  EXPECT_EQ(races(), 0u) << sim->races_report();
}

TEST_F(SimHazard, MissingSynchronizeBeforeReadBackIsARaceAndReadsStaleData) {
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  ASSERT_EQ(b0->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  const std::vector<float> early = get_f32(*op.out);  // no synchronize
  ASSERT_EQ(races(), 1u);
  EXPECT_TRUE(sim->races()[0].first.write);
  EXPECT_EQ(sim->races()[0].second.agent, "host");
  // The computation had not happened yet in virtual time: the host saw fresh (NaN) memory, not the result.
  EXPECT_TRUE(std::isnan(early[0]));
  EXPECT_TRUE(b0->synchronize().ok());
  const std::vector<float> late = get_f32(*op.out);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_FLOAT_EQ(late[i], 2.0f * xv[i]) << i;
  EXPECT_EQ(races(), 1u) << "the read after synchronize is ordered";
}

TEST_F(SimHazard, AnotherStreamReusingARangeIsARace) {
  auto b0b = sim->device(0)->init_backend({}).value();
  Vectors in(g0, {"x", "w"});
  set_f32(*in[0], xv);
  set_f32(*in[1], xv);
  OneOp reader(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  OneOp writer(g0, [&](Context& c) { return cpy(c, scale(c, in[1], 3.0f), in[0]); });  // overwrites x
  ASSERT_EQ(b0->graph_compute_async(reader.graph), ComputeStatus::kSuccess);
  ASSERT_EQ(b0b->graph_compute_async(writer.graph), ComputeStatus::kSuccess);
  ASSERT_GE(races(), 1u);
  const Race& r = sim->races()[0];
  EXPECT_EQ(r.first.agent, "gpu0/s0");
  EXPECT_EQ(r.second.agent, "gpu0/s1");
  EXPECT_FALSE(r.first.write);
  EXPECT_TRUE(r.second.write);
}

TEST_F(SimHazard, AnotherStreamReusingARangeAfterAnEventIsClean) {
  auto b0b = sim->device(0)->init_backend({}).value();
  Vectors in(g0, {"x", "w"});
  set_f32(*in[0], xv);
  set_f32(*in[1], xv);
  OneOp reader(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  OneOp writer(g0, [&](Context& c) { return cpy(c, scale(c, in[1], 3.0f), in[0]); });
  auto ev = sim->device(0)->event_new();
  ASSERT_EQ(b0->graph_compute_async(reader.graph), ComputeStatus::kSuccess);
  ev->record(*b0);
  ev->wait(*b0b);
  ASSERT_EQ(b0b->graph_compute_async(writer.graph), ComputeStatus::kSuccess);
  sim->finish();
  EXPECT_EQ(races(), 0u) << sim->races_report();
  const std::vector<float> r = get_f32(*reader.out);
  const std::vector<float> x = get_f32(*in[0]);
  for (size_t i = 0; i < xv.size(); ++i) {
    ASSERT_FLOAT_EQ(r[i], 2.0f * xv[i]) << "the reader saw the old x";
    ASSERT_FLOAT_EQ(x[i], 3.0f * xv[i]) << "then the writer replaced it";
  }
}

TEST_F(SimHazard, FreeingMemoryWhileWorkIsInFlightIsARace) {
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  auto op = std::make_unique<OneOp>(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  ASSERT_EQ(b0->graph_compute_async(op->graph), ComputeStatus::kSuccess);
  op.reset();  // frees the output buffer, no synchronize
  ASSERT_GE(races(), 1u);
  EXPECT_THAT(sim->races().back().second.description, HasSubstr("free of buffer"));
}

TEST_F(SimHazard, SynchronousDeviceNeedsNoWaits) {
  DeviceConfig acc = gpu("acc");
  acc.type = DeviceType::kAccel;
  acc.caps = {/*async=*/false, false, false, /*events=*/false};
  auto s = make_sim(topology({acc, wrapped_cpu()}));
  auto b = s->device(0)->init_backend({}).value();
  Vectors in(*s->device(0)->buffer_type(), {"x"});
  set_f32(*in[0], xv);
  OneOp op(*s->device(0)->buffer_type(), [&](Context& c) { return scale(c, in[0], 2.0f); });
  ASSERT_EQ(b->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  const std::vector<float> got = get_f32(*op.out);
  EXPECT_EQ(s->races().size(), 0u) << s->races_report();
  EXPECT_FLOAT_EQ(got[3], 2.0f * xv[3]);
  EXPECT_EQ(s->device(0)->event_new(), nullptr);
}

TEST_F(SimHazard, HostWriteWhileAStreamReadsIsARace) {
  Vectors in(g0, {"x"});
  set_f32(*in[0], xv);
  OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
  ASSERT_EQ(b0->graph_compute_async(op.graph), ComputeStatus::kSuccess);
  set_f32(*in[0], random_values(64, 12));  // the user overwrites the input before the stream read it
  ASSERT_EQ(races(), 1u);
  EXPECT_EQ(sim->races()[0].first.agent, "gpu0/s0");
  EXPECT_EQ(sim->races()[0].second.agent, "host");
}

// A host pointer handed to a set or get is an access to the buffer it points into when the host addresses that
// buffer directly (docs/simulator.md, "The hazard detector"): tensor_copy from a host-visible buffer memcpys from the
// source's own bytes. Before this was tracked, the end-to-end fuzzer found a host copy of a graph input that an
// asynchronous CPU had still to write into by its wrong output alone.
struct SimHostPointerHazard : ::testing::Test {
  std::unique_ptr<Simulator> sim = make_sim(topology({host_visible_gpu("gpu0"), gpu("gpu1"), wrapped_cpu()}));
  std::unique_ptr<Backend> b0 = sim->device(0)->init_backend({}).value();
  std::unique_ptr<Backend> b1 = sim->device(1)->init_backend({}).value();
  BufferType& g0 = *sim->device(0)->buffer_type();
  BufferType& g1 = *sim->device(1)->buffer_type();
  std::vector<float> xv = random_values(64, 21);
  // x (the values xv) and x2 = 2 x, both in gpu0's host-visible memory; start_x2() submits x2 to gpu0's stream
  Vectors in{g0, {"x"}};
  OneOp op{g0, [this](Context& c) { return scale(c, in[0], 2.0f); }};

  static DeviceConfig host_visible_gpu(const std::string& name) {
    DeviceConfig d = gpu(name);
    d.host_visible = true;
    return d;
  }
  void SetUp() override {
    set_f32(*in[0], xv);
    set_name(*op.out, "x2");
  }
  ComputeStatus start_x2() { return b0->graph_compute_async(op.graph); }
  size_t races() const { return sim->races().size(); }
};

TEST_F(SimHostPointerHazard, TheBufferTypeIsHostMemory) {
  // (what makes tensor_copy read the source through its pointer: tessera/backend.cpp)
  ASSERT_TRUE(g0.is_host());
  ASSERT_FALSE(g1.is_host());
}

TEST_F(SimHostPointerHazard, HostCopyOutOfABufferAStreamStillWritesIsARace) {
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(start_x2(), ComputeStatus::kSuccess);
  ASSERT_TRUE(tensor_copy(*op.out, *dst[0]).ok());  // the host reads x2's bytes; gpu0 not synchronized
  ASSERT_EQ(races(), 1u) << sim->races_report();
  const Race& r = sim->races()[0];
  EXPECT_EQ(r.first.agent, "gpu0/s0");
  EXPECT_TRUE(r.first.write);
  EXPECT_EQ(r.first.tensor, "x2");
  EXPECT_EQ(r.second.agent, "host");
  EXPECT_FALSE(r.second.write);
  EXPECT_EQ(r.second.tensor, "(through a host pointer)");
  EXPECT_EQ(r.size, 64 * sizeof(float));
}

TEST_F(SimHostPointerHazard, HostCopyOutOfABufferAfterASynchronizeIsClean) {
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(start_x2(), ComputeStatus::kSuccess);
  ASSERT_TRUE(b0->synchronize().ok());
  ASSERT_TRUE(tensor_copy(*op.out, *dst[0]).ok());
  EXPECT_EQ(races(), 0u) << sim->races_report();
  const std::vector<float> got = get_f32(*dst[0]);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_FLOAT_EQ(got[i], 2.0f * xv[i]) << i;
}

TEST_F(SimHostPointerHazard, HostCopyIntoABufferAStreamStillReadsIsARace) {
  Vectors src(g1, {"next_x"});
  set_f32(*src[0], random_values(64, 22));
  ASSERT_EQ(start_x2(), ComputeStatus::kSuccess);
  // tensor_copy into a host buffer: gpu1's buffer gets the destination's pointer and writes x's bytes through it
  ASSERT_TRUE(tensor_copy(*src[0], *in[0]).ok());
  ASSERT_EQ(races(), 1u) << sim->races_report();
  const Race& r = sim->races()[0];
  EXPECT_EQ(r.first.agent, "gpu0/s0");
  EXPECT_FALSE(r.first.write);
  EXPECT_EQ(r.first.tensor, "x");
  EXPECT_EQ(r.second.agent, "host");
  EXPECT_TRUE(r.second.write);
}

TEST_F(SimHostPointerHazard, AnAsyncSetFromABufferAnotherStreamWritesIsARaceUnlessOrdered) {
  Vectors dst(g1, {"x2_copy"});
  ASSERT_EQ(start_x2(), ComputeStatus::kSuccess);
  // gpu1's stream reads x2's bytes when it runs the set: nothing orders it after gpu0's write
  b1->set_tensor_async(*dst[0], op.out->data, 0, nbytes(*op.out));
  ASSERT_EQ(races(), 1u) << sim->races_report();
  EXPECT_EQ(sim->races()[0].first.agent, "gpu0/s0");
  EXPECT_EQ(sim->races()[0].second.agent, "gpu1/s0");
  EXPECT_FALSE(sim->races()[0].second.write);
  ASSERT_TRUE(b1->synchronize().ok());
  ASSERT_TRUE(b0->synchronize().ok());

  // the same after an event: ordered, and the copy holds the product
  auto ev = sim->device(0)->event_new();
  ASSERT_NE(ev, nullptr);
  OneOp again(g0, [&](Context& c) { return scale(c, in[0], 3.0f); });
  ASSERT_EQ(b0->graph_compute_async(again.graph), ComputeStatus::kSuccess);
  ev->record(*b0);
  ev->wait(*b1);
  b1->set_tensor_async(*dst[0], again.out->data, 0, nbytes(*again.out));
  ASSERT_TRUE(b1->synchronize().ok());
  EXPECT_EQ(races(), 1u) << sim->races_report();
  const std::vector<float> got = get_f32(*dst[0]);
  for (size_t i = 0; i < xv.size(); ++i) ASSERT_FLOAT_EQ(got[i], 3.0f * xv[i]) << i;
}

TEST_F(SimHostPointerHazard, APointerOutsideEveryBufferIsNotTracked) {
  ASSERT_EQ(start_x2(), ComputeStatus::kSuccess);
  std::vector<float> mine = random_values(64, 23);
  Vectors dst(g1, {"y"});
  dst[0]->buffer->set_tensor(*dst[0], mine.data(), 0, mine.size() * sizeof(float));  // the program's own memory
  EXPECT_EQ(races(), 0u) << sim->races_report();
  ASSERT_TRUE(b0->synchronize().ok());
}

}  // namespace
