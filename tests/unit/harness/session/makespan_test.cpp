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
  // The cost model reads no values, so the evaluations take the same simulated time: the same durations, added from
  // another start (memory-backed mode's evaluations start after the upload, metadata-only mode's at 0), so equal up to
  // the rounding of the absolute times (a last bit: 236.36108800000002 against ...05 us).
  EXPECT_GT(backed.makespan_us, 0.0);
  EXPECT_NEAR(backed.makespan_us, meta.makespan_us, 1e-9 * backed.makespan_us);
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

namespace {

// The makespan of `evaluations` evaluations in flight of a 512-token batch of the 7b preset, every layer on the GPUs
// of `topology` (metadata-only: only time and memory).
double makespan_7b(const char* topology, int evaluations, bool parallel, double* single = nullptr) {
  SessionConfig c;
  c.topology = load_topology(topology).value();
  c.model = models::preset("7b").value();
  c.model.n_tokens = 512;
  c.policy.n_gpu_layers = -1;
  c.policy.parallel = parallel;
  c.sim.mode = sim::MemoryMode::kMetadata;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return 0;
  auto r = (*s)->run(evaluations, false);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  if (!r.ok()) return 0;
  EXPECT_EQ(r.value().races, 0u) << topology;
  if (single != nullptr) {
    auto one = Session::create(c, &builtin_registry());
    EXPECT_TRUE(one.ok());
    if (one.ok()) {
      auto r1 = (*one)->run(1, false);
      *single = r1.ok() ? r1.value().makespan_us : 0;
    }
  }
  return r.value().makespan_us;
}

}  // namespace

// Issue 46: evaluations in flight overlap, as a prompt's ubatches do in llama.cpp. With pipeline parallelism (4 copy
// slots) the host never waits for an earlier evaluation, so on 8 GPUs each GPU starts the next ubatch as soon as it
// finished its layers of the one before. Without it, the host waits for each split's backend to finish the previous
// evaluation before it writes that split's inputs (ggml waits the same way: ggml_backend_synchronize of the split
// backend without events), so the host reaches GPU 0 of evaluation k+1 only after the last GPU took evaluation k.
TEST(Makespan, PipelineParallelismOverlapsEvaluationsOnEightGpus) {
  double single = 0;
  const double serial = makespan_7b("8x80gb", 4, false, &single);
  const double pipelined = makespan_7b("8x80gb", 4, true);
  ASSERT_GT(single, 0);
  // Measured (`tessera run -m 7b --metadata --tokens 512 -t 8x80gb --evaluations 1|4 [--parallel]`): one evaluation
  // 31.1 ms; four 70.1 ms serial, 45.8 ms pipelined (118.4 ms pipelined before issue 46, when the host waited for
  // each split's predecessor before writing its inputs). The bounds say what must hold: the pipelined run well under
  // four single evaluations, and well under the serial run.
  EXPECT_LT(pipelined, 0.75 * 4 * single) << "single " << single << " us, pipelined " << pipelined << " us";
  EXPECT_LT(pipelined, 0.75 * serial) << "serial " << serial << " us, pipelined " << pipelined << " us";
  EXPECT_LE(serial, 4 * single * 1.001);
}

// On two GPUs stream order alone already overlaps them: the host waits for gpu1 to finish evaluation k before it
// writes evaluation k+1's inputs for gpu1, by which time gpu0 has taken k+1 (and with one copy slot ggml's
// synchronize of the split backend waits the same). So both runs are well under four single evaluations; the copy
// slots buy nothing more here (the makespan is gpu0's four ubatches plus gpu1's last). Measured on 2x-rtx4090-pcie4:
// one evaluation 70.8 ms, four 182.1 ms with and without --parallel (283 ms without any overlap).
TEST(Makespan, TwoGpusOverlapEvaluationsWithOrWithoutCopySlots) {
  double single = 0;
  const double serial = makespan_7b("2x-rtx4090-pcie4", 4, false, &single);
  const double pipelined = makespan_7b("2x-rtx4090-pcie4", 4, true);
  ASSERT_GT(single, 0);
  EXPECT_LT(serial, 0.75 * 4 * single) << "single " << single << " us, serial " << serial << " us";
  EXPECT_LT(pipelined, 0.75 * 4 * single) << "single " << single << " us, pipelined " << pipelined << " us";
}
