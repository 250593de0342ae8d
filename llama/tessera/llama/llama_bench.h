// What llama-bench measures, simulated (docs/bench.md): the llama_decode calls one of its tests makes
// (tools/llama-bench/llama-bench.cpp in ggml-org/llama.cpp: test_prompt, test_gen), each ubatch as llama.cpp's
// context forms it (the cache padded to 256 cells, the cells a ubatch attends to), and their simulated time on a
// session's topology.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/harness/session/session.h"
#include "tessera/sim/trace.h"
#include "tessera/status.h"

namespace tessera {
class Registry;
}

namespace tessera::llama {

// One llama-bench test: a prompt of n_prompt tokens, then n_gen tokens generated one at a time, after n_depth tokens
// already in the cache (-d: processed before the timer starts). pp512 is {512, 0, 0}, tg128 {0, 128, 0}, -pg 512,128
// {512, 128, 0}.
struct BenchTest {
  int64_t n_prompt = 0;
  int64_t n_gen = 0;
  int64_t n_depth = 0;
};
// As llama-bench names it: "pp512", "tg128", "pp512+tg128", with " @ d4096" for a depth.
std::string bench_test_name(const BenchTest& t);

// The KV cache llama-bench's context has for a test: n_prompt + n_gen + n_depth cells, padded to 256 as llama.cpp's
// context pads n_ctx (src/llama-context.cpp: GGML_PAD(n_ctx, 256)).
int64_t bench_ctx(const BenchTest& t);

// The cells a ubatch attends to when the cache's highest used cell is `used` (the ubatch's own cells included):
// llama_kv_cache::get_n_kv, min(size, max(256, GGML_PAD(used, 256))).
int64_t bench_n_kv(int64_t n_ctx, int64_t used);

// One evaluation llama-bench's test makes: n_tokens new tokens attending to n_kv cells; `prompt`: a ubatch of the
// prompt (the ubatches of a prompt are in flight together; llama-bench synchronizes once after the last), otherwise
// a generated token (llama-bench synchronizes after each).
struct BenchStep {
  int64_t n_tokens = 0;
  int64_t n_kv = 0;
  bool prompt = false;
};
// The timed evaluations of a test, in order: the prompt in llama_decode calls of n_batch tokens, each in ubatches of
// n_ubatch (llama.cpp's split_simple), then n_gen one-token steps. The depth's own ubatches are not timed and not
// listed; they only fill the cache.
std::vector<BenchStep> bench_steps(const BenchTest& t, int64_t n_batch, int64_t n_ubatch);

// The simulated time of one test.
struct BenchResult {
  double prompt_us = 0;  // the prompt's ubatches, in flight together, until the synchronize after them
  double gen_us = 0;     // the generated tokens, each synchronized
  double time_us() const { return prompt_us + gen_us; }
  // llama-bench's t/s: (n_prompt + n_gen) tokens over the time
  double tokens_per_second = 0;
  int sessions = 0;  // sessions simulated (one per distinct ubatch shape)
  // The model as llama-bench's size and params columns count it: every weight once (llama.cpp's copies of a shared
  // weight on other devices left out), and the type with the most bytes (the model column's file type)
  uint64_t model_bytes = 0;
  uint64_t model_params = 0;
  Type main_type = Type::kF32;
  bool pipelined = false;  // the prompt planned with pipeline parallelism (llama.cpp enables it)
  // Where the time goes, from the simulator's trace (per device: busy time, compute, bytes copied in): the prompt's
  // ubatches in flight (the first prompt session), and one generated token (the first generation session; each
  // token of a test attends to about as many cells). Empty when the test has none.
  sim::TraceSummary prompt_summary, gen_summary;
  std::vector<std::string> notes;  // approximations made, one line each
};

// Simulates test `t` with `base` (the model, topology and placement; its n_ctx, n_tokens and n_kv are set per
// evaluation here; metadata-only memory). The prompt's ubatches run as evaluations in flight of one session, with the
// shape of its middle ubatch when they differ in the cells they attend to (a note says so); the generated tokens as
// single evaluations of one session per distinct n_kv, each multiplied by its count. Errors: the base's (a model that
// does not fit, ...), with the test named.
Result<BenchResult> simulate_bench(const harness::SessionConfig& base, const BenchTest& t, int64_t n_batch,
                                   int64_t n_ubatch, const Registry* real_devices);

}  // namespace tessera::llama
