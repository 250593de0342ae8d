// One definition of the makespan (docs/simulator.md "Makespan"): the simulated time of the evaluations, without the
// weight upload, the same in memory-backed and metadata-only mode; the upload is its own figure, worked out by hand.
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"
#include "tessera/sim/trace.h"

using namespace tessera;
using namespace tessera::harness;

namespace {

RunStats run_tiny(sim::MemoryMode mode, sim::Trace* trace = nullptr) {
  SessionConfig c;
  c.topology = load_topology("1gpu").value();
  c.model = models::preset("tiny").value();
  c.policy.n_gpu_layers = -1;
  c.sim.mode = mode;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return {};
  auto r = (*s)->run(2, true);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (trace != nullptr) *trace = (*s)->sim().trace();
  return r.ok() ? r.value() : RunStats{};
}

}  // namespace

TEST(Makespan, TheSameInBothMemoryModesWithTheUploadOnItsOwn) {
  sim::Trace backed_trace;
  const RunStats backed = run_tiny(sim::MemoryMode::kBacked, &backed_trace);
  const RunStats meta = run_tiny(sim::MemoryMode::kMetadata);
  // The cost model reads no values, so the evaluations take the same simulated time, exactly.
  EXPECT_GT(backed.makespan_us, 0.0);
  EXPECT_EQ(backed.makespan_us, meta.makespan_us);
  // tiny on 1gpu, every layer on gpu0: 2 x 9 layer weights + output_norm + output + 2 x 2 cache tensors = 24 tensors,
  // 50.75 KiB + 16 KiB = 68352 bytes, over the 25 GB/s, 10 us host link: 24 x 10 us + 68352 / 25e9 s = 242.73408 us
  // (token_embd stays in host memory, which costs nothing to write).
  EXPECT_NEAR(backed.weight_upload_us, 242.73408, 1e-6);
  EXPECT_NEAR(meta.weight_upload_us, 242.73408, 1e-6);
  // Memory-backed mode really spends that filling the weights and cache, before the evaluations' first event.
  double sets = 0;
  for (size_t i = 0; i < backed.trace_first; ++i) {
    const sim::TraceEvent& e = backed_trace.events[i];
    if (e.kind == sim::TraceKind::kSet && e.name.rfind("set inp_", 0) != 0) sets += e.end_us - e.start_us;
  }
  EXPECT_NEAR(sets, 242.73408, 1e-6);
  // And none of it is in the makespan: the evaluations start after the upload ended.
  ASSERT_LT(backed.trace_first, backed.trace_last);
  EXPECT_GE(backed_trace.events[backed.trace_first].start_us, 242.73408);
}
