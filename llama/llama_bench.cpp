// What llama-bench measures, simulated (see tessera/llama/llama_bench.h, docs/bench.md).
#include "tessera/llama/llama_bench.h"

#include <algorithm>
#include <utility>

#include "tessera/harness/session/session.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/sim/trace.h"
#include "tessera/status.h"

namespace tessera::llama {

namespace {

constexpr int64_t kPad = 256;  // llama.cpp's context and KV cache padding (GGML_PAD(n_ctx, 256); get_n_kv's 256)

int64_t pad(int64_t n) { return (n + kPad - 1) / kPad * kPad; }

// The simulated makespan of `evaluations` evaluations in flight of one shape (n_tokens tokens attending to n_kv cells
// of the test's cache), the logits of one token each, as llama-bench's batches ask (llama_batch_get_one: the last
// token's logits only).
// -sm tensor: the meta device run (run_tensor_parallel, metadata-only) of the evaluations, one after another on the
// scheduler over the meta backend and the CPU.
Result<sim::TraceSummary> tensor_parallel_makespan(const harness::SessionConfig& c, int evaluations,
                                                   const Registry* real_devices, BenchResult* first) {
  harness::SessionConfig meta = c;
  meta.sim.mode = sim::MemoryMode::kMetadata;
  meta.sim.record_trace = true;  // the makespan is read from the trace's events
  auto r = run_tensor_parallel(meta, real_devices, evaluations);
  if (!r.ok()) return r.status();
  if (first != nullptr && first->sessions == 0) {
    first->model_bytes += r.value().model_bytes;
    first->model_params += r.value().model_params;
    if (!r.value().weight_types.empty()) first->main_type = r.value().weight_types.front().type;
  }
  return sim::summarize(r.value().sim->trace(), r.value().trace_first, r.value().trace_last);
}

// The trace summary of the evaluations (its makespan_us is their simulated time).
Result<sim::TraceSummary> makespan(const harness::SessionConfig& base, int64_t n_ctx, const BenchStep& s,
                                   int evaluations, const Registry* real_devices, BenchResult* first) {
  harness::SessionConfig c = base;
  c.model.n_ctx = n_ctx;
  c.model.n_kv = s.n_kv;
  c.model.n_tokens = s.n_tokens;
  c.model.n_outputs = 1;
  // A sliding-window cache sized for a larger context (plan's speed line times its placement at llama-bench's
  // context): never more cells than the test's whole cache (0: n_ctx).
  if (c.model.n_ctx_swa >= n_ctx) c.model.n_ctx_swa = 0;
  if (c.policy.split_mode == harness::SplitMode::kTensor) {
    return tensor_parallel_makespan(c, evaluations, real_devices, first);
  }
  c.sim.mode = sim::MemoryMode::kMetadata;
  c.sim.record_trace = true;  // the makespan is read from the trace's events
  auto session = harness::Session::create(c, real_devices);
  if (!session.ok()) return session.status();
  auto r = session.value()->run(evaluations, /*check_numerics=*/false);
  if (!r.ok()) return r.status();
  if (first != nullptr && first->sessions == 0) {
    const harness::Session& sn = *session.value();
    first->pipelined = session.value()->sched().n_copies() > 1;
    for (const Tensor* w : sn.model().weights) {
      if (sn.model().copy_of(w) != nullptr) continue;
      first->model_bytes += nbytes(*w);
      first->model_params += static_cast<uint64_t>(nelements(*w));
    }
    const std::vector<harness::WeightTypeTotal> types = sn.weight_types();
    if (!types.empty()) first->main_type = types.front().type;
  }
  return sim::summarize(session.value()->sim().trace(), r.value().trace_first, r.value().trace_last);
}

}  // namespace

std::string bench_test_name(const BenchTest& t) {
  std::string name;
  if (t.n_prompt > 0 && t.n_gen > 0) {
    name = "pp" + std::to_string(t.n_prompt) + "+tg" + std::to_string(t.n_gen);
  } else if (t.n_prompt > 0) {
    name = "pp" + std::to_string(t.n_prompt);
  } else {
    name = "tg" + std::to_string(t.n_gen);
  }
  if (t.n_depth > 0) name += " @ d" + std::to_string(t.n_depth);
  return name;
}

int64_t bench_ctx(const BenchTest& t) { return std::max(kPad, pad(t.n_prompt + t.n_gen + t.n_depth)); }

int64_t bench_n_kv(int64_t n_ctx, int64_t used) { return std::min(n_ctx, std::max(kPad, pad(used))); }

std::vector<BenchStep> bench_steps(const BenchTest& t, int64_t n_batch, int64_t n_ubatch) {
  std::vector<BenchStep> steps;
  const int64_t n_ctx = bench_ctx(t);
  int64_t used = t.n_depth;
  // test_prompt: llama_decode calls of up to n_batch tokens; each is split into ubatches of up to n_ubatch
  // (n_ubatch is at most n_batch in llama.cpp's context)
  const int64_t ub = std::max<int64_t>(1, std::min(n_ubatch, n_batch));
  for (int64_t done = 0; done < t.n_prompt;) {
    const int64_t batch = std::min(n_batch, t.n_prompt - done);
    for (int64_t in_batch = 0; in_batch < batch;) {
      const int64_t n = std::min(ub, batch - in_batch);
      used += n;
      steps.push_back({n, bench_n_kv(n_ctx, used), true});
      in_batch += n;
    }
    done += batch;
  }
  // test_gen: one token per llama_decode, synchronized after each
  for (int64_t i = 0; i < t.n_gen; ++i) {
    used += 1;
    steps.push_back({1, bench_n_kv(n_ctx, used), false});
  }
  return steps;
}

Result<BenchResult> simulate_bench(const harness::SessionConfig& base, const BenchTest& t, int64_t n_batch,
                                   int64_t n_ubatch, const Registry* real_devices) {
  if (t.n_prompt < 0 || t.n_gen < 0 || t.n_depth < 0 || t.n_prompt + t.n_gen <= 0) {
    return Status(StatusCode::kInvalidArgument,
                  "bench: a test needs prompt or generated tokens (and no negative count): " + bench_test_name(t));
  }
  if (n_batch <= 0 || n_ubatch <= 0) {
    return Status(StatusCode::kInvalidArgument, "bench: -b and -ub must be positive");
  }
  const std::string name = bench_test_name(t);
  auto fail = [&name](const Status& s) { return Status(s.code(), name + ": " + s.message()); };
  const int64_t n_ctx = bench_ctx(t);
  const std::vector<BenchStep> steps = bench_steps(t, n_batch, n_ubatch);
  BenchResult out;

  // The prompt: every ubatch in flight, one synchronize after the last (test_prompt). Ubatches of the same size run
  // as evaluations of one session; the cells they attend to grow from one to the next, and one session has one
  // graph, so they take the middle ubatch's (the attention's cost is linear in the cells: the total is right to the
  // first order). A last, smaller ubatch is simulated after them on its own.
  std::vector<BenchStep> prompt;
  for (const BenchStep& s : steps) {
    if (s.prompt) prompt.push_back(s);
  }
  size_t same = 0;
  while (same < prompt.size() && prompt[same].n_tokens == prompt.front().n_tokens) ++same;
  if (same > 0) {
    BenchStep shape = prompt[(same - 1) / 2];
    if (same > 1 && prompt.front().n_kv != prompt[same - 1].n_kv) {
      out.notes.push_back(name + ": the prompt's " + std::to_string(same) + " ubatches simulated with the cells of " +
                          "the middle one (" + std::to_string(shape.n_kv) + " of " +
                          std::to_string(prompt.front().n_kv) + ".." + std::to_string(prompt[same - 1].n_kv) + ")");
    }
    auto us = makespan(base, n_ctx, shape, static_cast<int>(same), real_devices, &out);
    if (!us.ok()) return fail(us.status());
    out.prompt_us += us.value().makespan_us;
    out.prompt_summary = std::move(us).value();
    ++out.sessions;
  }
  for (size_t i = same; i < prompt.size(); ++i) {
    auto us = makespan(base, n_ctx, prompt[i], 1, real_devices, &out);
    if (!us.ok()) return fail(us.status());
    out.prompt_us += us.value().makespan_us;
    if (out.prompt_summary.n_events == 0) out.prompt_summary = std::move(us).value();
    ++out.sessions;
  }

  // The generated tokens: each synchronized, so one evaluation's makespan each; the same n_kv, the same time.
  for (size_t i = 0; i < steps.size();) {
    if (steps[i].prompt) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < steps.size() && !steps[j].prompt && steps[j].n_kv == steps[i].n_kv) ++j;
    auto us = makespan(base, n_ctx, steps[i], 1, real_devices, &out);
    if (!us.ok()) return fail(us.status());
    out.gen_us += us.value().makespan_us * static_cast<double>(j - i);
    if (out.gen_summary.n_events == 0) out.gen_summary = std::move(us).value();
    ++out.sessions;
    i = j;
  }
  const double seconds = out.time_us() * 1e-6;
  out.tokens_per_second = seconds > 0 ? static_cast<double>(t.n_prompt + t.n_gen) / seconds : 0;
  return out;
}

}  // namespace tessera::llama
