// llama-bench's tests simulated (tessera/llama/llama_bench.h): the evaluations each test makes, worked out by hand from
// llama-bench's and llama.cpp's rules, and their time taken from sessions built here directly.
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/llama/llama_bench.h"
#include "tessera/sim/trace.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_memory.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/models/llama.h"

using namespace tessera;
using namespace tessera::harness;
using namespace tessera::llama;

namespace {

SessionConfig base(const char* topology, int64_t n_ctx, bool llama_rules = false) {
  SessionConfig c;
  c.topology = load_topology(topology).value();
  c.model = models::preset("7b").value();
  c.model.n_ctx = n_ctx;
  c.policy.n_gpu_layers = -1;
  c.sim.mode = sim::MemoryMode::kMetadata;
  if (llama_rules) use_llama_cpp_rules(c, kLlamaCppNewestBuild, LlamaContextParams{});
  return c;
}

// One session's makespan for `evaluations` of a shape, built without llama_bench.
double direct(SessionConfig c, int64_t n_tokens, int64_t n_kv, int evaluations = 1) {
  c.model.n_tokens = n_tokens;
  c.model.n_kv = n_kv;
  c.model.n_outputs = 1;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  if (!s.ok()) return 0;
  auto r = (*s)->run(evaluations, false);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? r.value().makespan_us : 0;
}

}  // namespace

TEST(LlamaBench, TestNamesAsLlamaBenchPrintsThem) {
  EXPECT_EQ(bench_test_name({512, 0, 0}), "pp512");
  EXPECT_EQ(bench_test_name({0, 128, 0}), "tg128");
  EXPECT_EQ(bench_test_name({512, 128, 0}), "pp512+tg128");
  EXPECT_EQ(bench_test_name({512, 0, 4096}), "pp512 @ d4096");
  EXPECT_EQ(bench_test_name({0, 32, 16384}), "tg32 @ d16384");
}

// llama-bench asks for n_prompt + n_gen + n_depth cells; llama.cpp's context pads them to 256.
TEST(LlamaBench, TheCacheIsTheTestsTokensPaddedTo256) {
  EXPECT_EQ(bench_ctx({512, 0, 0}), 512);
  EXPECT_EQ(bench_ctx({0, 128, 0}), 256);
  EXPECT_EQ(bench_ctx({512, 128, 0}), 768);
  EXPECT_EQ(bench_ctx({512, 0, 4096}), 4608);
  EXPECT_EQ(bench_ctx({0, 128, 4096}), 4352);
  EXPECT_EQ(bench_ctx({1, 0, 0}), 256);
  // get_n_kv: at least 256, the used cells padded to 256, at most the cache
  EXPECT_EQ(bench_n_kv(4352, 1), 256);
  EXPECT_EQ(bench_n_kv(4352, 4097), 4352);
  EXPECT_EQ(bench_n_kv(768, 600), 768);
  EXPECT_EQ(bench_n_kv(512, 300), 512);
}

TEST(LlamaBench, APromptIsUbatchesOfItsBatches) {
  // pp2048, -b 2048 -ub 512: one llama_decode, four ubatches attending to 512, 1024, 1536 and 2048 cells
  std::vector<BenchStep> s = bench_steps({2048, 0, 0}, 2048, 512);
  ASSERT_EQ(s.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s[i].n_tokens, 512);
    EXPECT_EQ(s[i].n_kv, 512 * static_cast<int64_t>(i + 1));
    EXPECT_TRUE(s[i].prompt);
  }
  // pp600: a ubatch of 512 (cells 512), then 88 (used 600, padded 768, the whole 768-cell cache)
  s = bench_steps({600, 0, 0}, 2048, 512);
  ASSERT_EQ(s.size(), 2u);
  EXPECT_EQ(s[0].n_tokens, 512);
  EXPECT_EQ(s[0].n_kv, 512);
  EXPECT_EQ(s[1].n_tokens, 88);
  EXPECT_EQ(s[1].n_kv, 768);
  // -b 256 -ub 512: the ubatch is at most the batch, four llama_decode calls of 256
  s = bench_steps({1024, 0, 0}, 256, 512);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[3].n_tokens, 256);
  EXPECT_EQ(s[3].n_kv, 1024);
  // -b 300: batches of 300, 300, 300, 124, each one ubatch (ub 512 > 300)
  s = bench_steps({1024, 0, 0}, 300, 512);
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[3].n_tokens, 124);
}

TEST(LlamaBench, GeneratedTokensAreOneAtATimeAfterTheDepth) {
  std::vector<BenchStep> s = bench_steps({0, 128, 0}, 2048, 512);
  ASSERT_EQ(s.size(), 128u);
  for (const BenchStep& b : s) {
    EXPECT_EQ(b.n_tokens, 1);
    EXPECT_EQ(b.n_kv, 256);
    EXPECT_FALSE(b.prompt);
  }
  // tg128 @ d4096: a 4352-cell cache; cells 4097..4224 used, every step attends to all 4352
  s = bench_steps({0, 128, 4096}, 2048, 512);
  ASSERT_EQ(s.size(), 128u);
  EXPECT_EQ(s.front().n_kv, 4352);
  EXPECT_EQ(s.back().n_kv, 4352);
  // pp512+tg128: the prompt, then the tokens after it (cells 513..640 -> 768)
  s = bench_steps({512, 128, 0}, 2048, 512);
  ASSERT_EQ(s.size(), 129u);
  EXPECT_TRUE(s[0].prompt);
  EXPECT_EQ(s[0].n_kv, 512);
  EXPECT_EQ(s[1].n_kv, 768);
  EXPECT_EQ(s[128].n_kv, 768);
}

// The times add up as llama-bench times them: a prompt's ubatches until one synchronize, each generated token on its
// own; t/s is tokens over that time.
TEST(LlamaBench, TimesAreTheSessionsMakespans) {
  auto pp = simulate_bench(base("1gpu", 512), {512, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(pp.ok()) << pp.status().to_string();
  const double pp_direct = direct(base("1gpu", 512), 512, 512);
  EXPECT_GT(pp_direct, 0);
  EXPECT_DOUBLE_EQ(pp.value().prompt_us, pp_direct);
  EXPECT_EQ(pp.value().gen_us, 0);
  EXPECT_DOUBLE_EQ(pp.value().tokens_per_second, 512 / (pp_direct * 1e-6));
  EXPECT_EQ(pp.value().sessions, 1);
  EXPECT_FALSE(pp.value().pipelined);

  // where the time goes: the prompt's session, its makespan the prompt's time; no generation
  EXPECT_DOUBLE_EQ(pp.value().prompt_summary.makespan_us, pp_direct);
  EXPECT_EQ(pp.value().gen_summary.n_events, 0u);

  auto tg = simulate_bench(base("1gpu", 256), {0, 8, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(tg.ok()) << tg.status().to_string();
  const double step = direct(base("1gpu", 256), 1, 256);
  EXPECT_DOUBLE_EQ(tg.value().gen_us, 8 * step);
  // one generated token's session: its makespan is one step; the GPU is busy for most of it
  EXPECT_DOUBLE_EQ(tg.value().gen_summary.makespan_us, step);
  EXPECT_EQ(tg.value().prompt_summary.n_events, 0u);
  double gpu_busy = 0;
  for (const sim::DeviceSummary& d : tg.value().gen_summary.devices) {
    if (d.name == "gpu0") gpu_busy = d.busy_us;
  }
  EXPECT_GT(gpu_busy, 0.5 * step);
  EXPECT_LE(gpu_busy, step);
  EXPECT_DOUBLE_EQ(tg.value().tokens_per_second, 8 / (8 * step * 1e-6));
  // the model's columns: Llama-2-7B's shapes (4096 x 32000 embeddings, 32 layers of 4 x 4096^2 + 3 x 4096 x 11008,
  // norms): 6,738,415,616 parameters, as llama-bench prints "6.74 B" for llama 7B
  EXPECT_EQ(tg.value().model_params, 6738415616u);
}

// A generated token on a GPU with no launch overhead and unbounded arithmetic reads its weights and the cache once at
// the GPU's bandwidth. Llama-2-7B in q4_0 (18 bytes per 32 values), worked out by hand: 32 layers of 4 x 4096^2 +
// 3 x 4096 x 11008 values = 3,642,753,024 bytes, the output 32000 x 4096 = 73,728,000 bytes, the f32 norms
// 1,064,960 bytes (token_embd stays on the CPU: one row read); the f16 cache of 256 cells, K and V of 4096 values in 32
// layers, 134,217,728 bytes. 3,851,763,712 bytes at 1e12 B/s: 3851.76 us, 259.62 t/s. The token's four inputs cross
// the preset's PCIe link (about 10 us of latency each: 40 us, 1 %) and the activations are a few MiB: under 2 % in
// all. (Before the cost of SET_ROWS counted only the rows it writes, the 64 cache writes read the whole 2 MiB cache
// twice each: 4176 us.)
TEST(LlamaBench, AGeneratedTokenReadsItsWeightsOnceAtTheBandwidth) {
  SessionConfig c = base("1gpu", 256);
  for (sim::DeviceConfig& d : c.topology.devices) {
    d.cost.launch_overhead_us = 0;
    d.cost.flops_f32 = d.cost.flops_f16 = d.cost.flops_quant = 1e18;
    if (d.type != DeviceType::kCpu) d.cost.mem_bandwidth = 1e12;
  }
  auto tg = simulate_bench(c, {0, 16, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(tg.ok()) << tg.status().to_string();
  const double by_hand_us = 3851763712.0 / 1e12 * 1e6;
  EXPECT_GE(tg.value().gen_summary.makespan_us, by_hand_us);
  EXPECT_LE(tg.value().gen_summary.makespan_us, 1.02 * by_hand_us);
  EXPECT_NEAR(tg.value().tokens_per_second, 1e6 / by_hand_us, 0.02 * 1e6 / by_hand_us);
}

// On 8 GPUs with llama.cpp's pipeline parallelism the four ubatches of pp2048 overlap: well under four times one
// ubatch of the same shape; on one GPU there is nothing to overlap with.
TEST(LlamaBench, APromptsUbatchesOverlapOnSeveralGpus) {
  auto pp = simulate_bench(base("8x80gb", 2048, true), {2048, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(pp.ok()) << pp.status().to_string();
  EXPECT_TRUE(pp.value().pipelined);
  const double one = direct(base("8x80gb", 2048, true), 512, 1024);  // the middle ubatch's shape
  EXPECT_LT(pp.value().prompt_us, 0.6 * 4 * one) << "one ubatch " << one << " us";
  ASSERT_EQ(pp.value().notes.size(), 1u);
  EXPECT_NE(pp.value().notes[0].find("1024 of 512..2048"), std::string::npos) << pp.value().notes[0];

  auto single = simulate_bench(base("1gpu", 2048, true), {2048, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(single.ok()) << single.status().to_string();
  EXPECT_FALSE(single.value().pipelined);
  const double one_gpu = direct(base("1gpu", 2048, true), 512, 1024);
  EXPECT_GT(single.value().prompt_us, 0.95 * 4 * one_gpu);
}

TEST(LlamaBench, ErrorsNameTheTest) {
  auto none = simulate_bench(base("1gpu", 256), {0, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), StatusCode::kInvalidArgument);
  SessionConfig small = base("1gpu", 512);
  small.topology.devices.front().memory = uint64_t{1} << 30;  // 1 GiB: 7B's 3.5 GiB of weights do not fit
  auto oom = simulate_bench(small, {512, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_FALSE(oom.ok());
  EXPECT_EQ(oom.status().message().rfind("pp512: ", 0), 0u) << oom.status().message();
}

// -sm tensor: the evaluations run on the meta device (run_tensor_parallel, metadata-only), one after another (the
// meta device is one backend): pp2048 in four ubatches of 512 is the makespan of four evaluations of a 512-token
// graph at the middle ubatch's cells; the model columns are those of the other split modes (Llama-2-7B: 6738415616
// parameters).
TEST(LlamaBench, TensorParallelTestsRunTheMetaDevice) {
  SessionConfig c = base("8x80gb", 2048);
  c.policy.split_mode = SplitMode::kTensor;
  auto pp = simulate_bench(c, {2048, 0, 0}, 2048, 512, &builtin_registry());
  ASSERT_TRUE(pp.ok()) << pp.status().to_string();
  SessionConfig one = c;
  one.model.n_ctx = 2048;
  one.model.n_tokens = 512;
  one.model.n_kv = bench_steps({2048, 0, 0}, 2048, 512)[1].n_kv;  // (the middle of 4: index (4 - 1) / 2)
  one.model.n_outputs = 1;
  one.sim.mode = sim::MemoryMode::kMetadata;
  auto run = run_tensor_parallel(one, &builtin_registry(), 4);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_DOUBLE_EQ(pp->prompt_us, sim::summarize(run->sim->trace(), run->trace_first, run->trace_last).makespan_us);
  EXPECT_FALSE(pp->pipelined);
  EXPECT_EQ(pp->model_params, 6738415616u);
}
