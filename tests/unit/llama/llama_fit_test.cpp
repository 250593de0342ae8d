// llama.cpp's fit (tessera/llama/llama_fit.h; docs/fit.md). Two kinds of tests, every expected figure worked out
// by hand:
//   - the algorithm on a synthetic model (round per-tensor sizes, a measuring function written here that places
//     tensors by -ngl/-ts/-ot as llama.cpp does): each step of common/fit.cpp traced in the comments;
//   - the fit of real models' GGUF fixtures (docs/gguf.md "Fixtures") on simulated GPUs, from the published shapes and
//     llama-quantize's Q4_K_M types (the per-layer sizes are worked out in llama_memory_test.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <regex>
#include <string>

#include "tessera/builtin.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using namespace tessera::llama;
using ::testing::HasSubstr;

namespace {

constexpr int64_t kMiB64 = int64_t{1} << 20;

// A synthetic model: n_layer layers of attention `attn` MiB and three FFN tensors (up, gate, down; named *_exps for
// a MoE model), an output layer of `output` MiB, KV `kv` MiB per layer per 1024 cells, no compute buffers. The
// measuring function places each layer on a GPU by -ngl (the last N of the n_layer + 1 layers, output included) and
// -ts (whole layer counts per GPU, in order; without -ts, the user's default: every offloaded layer on GPU 0), then
// each FFN tensor by the first -ot pattern searched in its name (CPU: not on any GPU; CUDA<n>: GPU n).
struct Synthetic {
  int n_layer = 10;
  bool moe = false;
  int64_t attn = 10, up = 30, gate = 30, down = 40, output = 20, kv = 0;
  int64_t n_ctx_train = 4096;
  size_t n_gpus = 1;
  int user_ngl = -1;

  FitMeasure measure() const {
    const Synthetic m = *this;
    return [m](const FitSetting& s) -> Result<std::vector<FitUse>> {
      std::vector<FitUse> use(m.n_gpus);
      const int64_t n_ctx = s.n_ctx > 0 ? s.n_ctx : m.n_ctx_train;
      int ngl = s.placed ? s.n_gpu_layers : m.user_ngl;
      if (ngl < 0) ngl = m.n_layer + 1;
      const int first = m.n_layer + 1 - ngl;
      auto add = [&](size_t g, int64_t mib) {
        use[g].model += mib * kMiB64;
        use[g].total += mib * kMiB64;
      };
      for (int il = first; il <= m.n_layer; ++il) {
        size_t g = 0;
        int at = first;
        for (size_t k = 0; k < s.tensor_split.size(); ++k) {
          at += s.tensor_split[k];
          if (il < at) {
            g = k;
            break;
          }
        }
        if (il == m.n_layer) {
          add(g, m.output);
          continue;
        }
        add(g, m.attn);
        use[g].total += m.kv * n_ctx / 1024 * kMiB64;
        const std::string blk = "blk." + std::to_string(il) + ".";
        const std::string sfx = m.moe ? "_exps.weight" : ".weight";
        for (const auto& [name, mib] :
             {std::pair<std::string, int64_t>{"ffn_up", m.up}, {"ffn_gate", m.gate}, {"ffn_down", m.down}}) {
          size_t dev = g;
          bool on_cpu = false;
          for (const auto& [pattern, buft] : s.overrides) {
            if (!std::regex_search(blk + name + sfx, std::regex(pattern))) continue;
            on_cpu = buft == "CPU";
            if (!on_cpu) dev = static_cast<size_t>(std::stoi(buft.substr(4)));
            break;
          }
          if (!on_cpu) add(dev, mib);
        }
      }
      return use;
    };
  }
};

FitProblem problem(const Synthetic& m, std::vector<int64_t> free_mib, std::vector<int64_t> margin_mib) {
  FitProblem p;
  p.n_layer = m.n_layer;
  p.n_ctx_train = m.n_ctx_train;
  p.n_expert = m.moe ? 8 : 0;
  for (size_t g = 0; g < free_mib.size(); ++g) {
    p.gpus.push_back("CUDA" + std::to_string(g));
    p.free.push_back(free_mib[g] * kMiB64);
    p.margins.push_back(margin_mib[g] * kMiB64);
  }
  return p;
}

std::string flags_of(const FitProblem& p, const FitResult& r) {
  return fit_flags(r.setting, p.n_ctx_train, p.n_layer + 1);
}

}  // namespace

// Everything fits: 10 x (10 + 100) + 20 = 1120 MiB leaves 880 of 2000 MiB free, above the 512 MiB margin. Step 1
// measures once and changes nothing; the flags are the given ones (-c: the training context, -ngl: all 11).
TEST(LlamaFit, NothingToChangeWhenEveryGpuKeepsItsMargin) {
  Synthetic m;
  FitProblem p = problem(m, {2000}, {512});
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kUnchanged);
  EXPECT_EQ(r.value().measurements, 1);
  EXPECT_EQ(flags_of(p, r.value()), "-c 4096 -ngl 11");
}

// Step 2, one GPU: 10 layers of 100 MiB of weights (no FFN split here: attn 100, FFN 0) and 1 MiB of KV per layer per
// 1024 cells, output 50, training context 65536, --fit-ctx 4096, 2048 MiB free, margin 512: the target is 1536 MiB.
// At 65536: 1000 + 50 + 10 x 64 = 1690 MiB (358 free < 512); at 4096: 1090. Interpolated (integer arithmetic on
// bytes): 4096 + 61440 x 446 / 600 = 4096 + 45670 = 49766, rounded down to a multiple of 256: 49664 (one GPU: done).
TEST(LlamaFit, OneGpuShrinksAnUnsetContextByInterpolation) {
  Synthetic m;
  m.attn = 100;
  m.up = m.gate = m.down = 0;
  m.output = 50;
  m.kv = 1;
  m.n_ctx_train = 65536;
  FitProblem p = problem(m, {2048}, {512});
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFitted);
  EXPECT_EQ(r.value().measurements, 2);
  EXPECT_EQ(flags_of(p, r.value()), "-c 49664 -ngl 11");
  EXPECT_THAT(r.value().log, ::testing::Contains(HasSubstr("context size reduced from 65536 to 49664")));
}

// The same model with -c 8192 and -ngl 11 given: 1000 + 50 + 80 = 1130 MiB on a 1536 MiB GPU leaves 406 < 512. The
// context is the user's (no change), and llama.cpp's fit refuses to change -ngl: it fails with its reason.
TEST(LlamaFit, FailsWhenTheUserSetTheLayers) {
  Synthetic m;
  m.attn = 100;
  m.up = m.gate = m.down = 0;
  m.output = 50;
  m.kv = 1;
  FitProblem p = problem(m, {1536}, {512});
  p.n_ctx = 8192;
  p.user_ngl = "11";
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFailed);
  EXPECT_EQ(r.value().failure, "n_gpu_layers already set by user to 11, abort");
  EXPECT_THAT(r.value().log, ::testing::Contains(HasSubstr("context size set by user to 8192 -> no change")));
}

// Step 3, two GPUs, dense, back to front: layers of 100 MiB (attn 10 + FFN 30 + 30 + 30), output 20, -c 4096 given.
// Free 450 and 700 MiB, margins 100: targets 350 and 600. GPU 1 first (it holds the output layer): all 11 layers
// would take 1020 > 600; false position from 0: 11 x 600 / 1020 = 6 (5 layers + output = 520, fits), then
// 5 x 80 / 500 = 0 -> 1: 7 (620, too much): 6. GPU 0 with the 5 left: 500 > 350; 5 x 350 / 500 = 3 (300, fits), then
// 2 x 50 / 200 = 0 -> 1: 4 (400, too much): 3. -ngl 9 (layers 2-9 and the output), -ts 3,6, no -ot.
TEST(LlamaFit, DenseLayersFillTwoGpusBackToFront) {
  Synthetic m;
  m.up = m.gate = m.down = 30;
  m.n_gpus = 2;
  FitProblem p = problem(m, {450, 700}, {100, 100});
  p.n_ctx = 4096;
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFitted);
  EXPECT_EQ(flags_of(p, r.value()), "-c 4096 -ngl 9 -ts 3,6");
  ASSERT_EQ(r.value().layers.size(), 2u);
  EXPECT_EQ(r.value().layers[0].n_layer, 3);
  EXPECT_EQ(r.value().layers[1].n_layer, 6);
}

// Steps 3 and 4, one GPU, MoE: 6 layers of attention 10 MiB and experts up 30, gate 30, down 40; output 20; -c 4096.
// All on the GPU: 6 x 110 + 20 = 680. With every expert on the CPU: 80, a surplus. Step 3 (the last GPU's first
// layer stays whole, the output layer's pattern matches nothing): layer 0 whole, 1-5 dense-only: 110 + 50 + 20 = 180.
// Step 4, by false position on whole layers: k whole layers take 110 k + 10 (6 - k) + 20 = 80 + 100 k.
//   target 400 (free 500): 6 x 220 / 500 = 2 more (3 whole: 380, fits), 4 x 20 / 300 -> 1 (4 whole: 480, no): 3.
//     Partial layer 3: attention + up (380 + 30 = 410, not below 400), so attention alone (380 < 400): layer 3's FFN
//     (pattern ffn_(gate|up|gate_up|down).*) to the CPU.
//   target 415: the same 3 whole layers; attention + up 410 < 415, attention + up + gate 440 is not: ffn_(gate|
//     gate_up|down).* to the CPU.
//   target 445: 6 x 265 / 500 = 3 more (4 whole: 480, no), 3 x 265 / 300 = 2 (380, fits): 3; up 410 and gate 440 both
//     below 445: only ffn_down.* to the CPU.
// Layers 4, 5 and the output (6) keep their experts on the CPU: ffn_(up|down|gate_up|gate)_(ch|)exps.
TEST(LlamaFit, MoeFillsWholeLayersThenOnePartialLayer) {
  Synthetic m;
  m.n_layer = 6;
  m.moe = true;
  const std::string rest =
      "blk\\.4\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU,blk\\.5\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU,"
      "blk\\.6\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU\"";
  const std::pair<int64_t, std::string> cases[] = {
      {500, "-c 4096 -ngl 7 -ot \"blk\\.3\\.ffn_(gate|up|gate_up|down).*=CPU," + rest},
      {515, "-c 4096 -ngl 7 -ot \"blk\\.3\\.ffn_(gate|gate_up|down).*=CPU," + rest},
      {545, "-c 4096 -ngl 7 -ot \"blk\\.3\\.ffn_down.*=CPU," + rest},
  };
  for (const auto& [free, flags] : cases) {
    FitProblem p = problem(m, {free}, {100});
    p.n_ctx = 4096;
    auto r = llama_fit(p, m.measure());
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFitted) << free;
    EXPECT_EQ(flags_of(p, r.value()), flags) << "free " << free;
  }
}

// Step 4 on two GPUs: a partial layer overflows to the next GPU. 4 layers of attention 10 and experts 30 + 30 + 40,
// output 20, -c 4096; free 300 MiB each, margins 50: targets 250. The given options (everything on GPU 0, 460 MiB) do
// not fit; with every expert on the CPU there is a surplus. Step 3: GPU 1 takes all 5 layers dense-only (its first,
// layer 0, whole): 110 + 3 x 10 + 20 = 160; GPU 0 none. Step 4, GPU 0: all whole would be 440 > 250; 4 x 250 / 440 =
// 2 layers (0 and 1: 220, fits; GPU 1 keeps layer 2 whole and 3 dense-only), then 2 x 30 / 220 -> 1 (330, no). One
// more partial layer, layer 2, overflowing to CUDA1: attention + up on GPU 0 is 260, not below 250; attention alone
// 230 (and 100 + 110 + 20 = 230 on GPU 1): taken. GPU 1 then holds layer 3 whole (230 < 250). So -ngl 5 -ts 3,2 and
// layer 2's FFN on CUDA1.
TEST(LlamaFit, MoePartialLayerOverflowsToTheNextGpu) {
  Synthetic m;
  m.n_layer = 4;
  m.moe = true;
  m.n_gpus = 2;
  FitProblem p = problem(m, {300, 300}, {50, 50});
  p.n_ctx = 4096;
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFitted);
  EXPECT_EQ(flags_of(p, r.value()), "-c 4096 -ngl 5 -ts 3,2 -ot \"blk\\.2\\.ffn_(gate|up|gate_up|down).*=CUDA1\"");
  auto use = m.measure()(r.value().setting);
  ASSERT_TRUE(use.ok());
  EXPECT_EQ(use.value()[0].total, 230 * kMiB64);
  EXPECT_EQ(use.value()[1].total, 230 * kMiB64);
}

// The flags as llama-fit-params prints them: -ts without its trailing zeros, and only with more than one GPU left.
TEST(LlamaFit, FlagsDropTrailingZeroShares) {
  FitSetting s;
  s.placed = true;
  s.n_ctx = 8192;
  s.n_gpu_layers = 20;
  s.tensor_split = {20, 0};
  EXPECT_EQ(fit_flags(s, 0, 0), "-c 8192 -ngl 20");
  s.tensor_split = {12, 8, 0};
  EXPECT_EQ(fit_flags(s, 0, 0), "-c 8192 -ngl 20 -ts 12,8");
}

namespace {

// A real model's fit: the fixture built at the training context, on `devices`, with llama.cpp's n_ubatch 512.
struct FixtureFit {
  FitProblem problem;
  FitResult result;
  std::vector<FitUse> use;  // at the result
};

FixtureFit fit_fixture(const std::string& name, std::vector<DeviceConfig> devices, int64_t n_ctx) {
  FixtureFit out;
  auto file = models::fixtures::make_fixture(name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return out;
  const std::string arch = file.value().get_string("general.architecture").value();
  const int64_t n_ctx_train = file.value().get_int(arch + ".context_length").value();
  auto model = gguf::Model::of_file(std::move(file).value());
  models::GgufRunShape run;
  run.n_ctx = 4096;
  run.n_tokens = 512;
  auto built = models::build_from_gguf(model, run);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built.ok()) return out;
  SessionConfig base;
  base.topology = topology(std::move(devices));
  base.model = built.value().config;
  SessionFitInputs in;
  in.n_ctx_train = n_ctx_train;
  in.n_ctx = n_ctx;
  auto p = session_fit_problem(base, in, &builtin_registry());
  EXPECT_TRUE(p.ok()) << p.status().message();
  if (!p.ok()) return out;
  out.problem = p.value();
  const FitMeasure measure = session_fit_measure(base, in, out.problem, &builtin_registry());
  auto r = llama_fit(out.problem, measure);
  EXPECT_TRUE(r.ok()) << r.status().message();
  if (!r.ok()) return out;
  out.result = r.value();
  auto u = measure(out.result.setting);
  EXPECT_TRUE(u.ok()) << u.status().message();
  if (u.ok()) out.use = u.value();
  return out;
}

double mib(int64_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB64); }

}  // namespace

// Llama-3.1-8B Q4_K_M (llama_memory_test.cpp: everything but token_embd on the GPU is 4,617,396,480 B = 4403.49 MiB;
// KV f16 32 layers x (K + V) x 1024 x 2 B = 0.125 MiB per cell) on one 8 GiB GPU, margin 1024 MiB: target 7168 MiB.
// The context is left unset: the training context 131072 (KV 16 GiB) does not fit, so llama.cpp interpolates between
// 131072 and 4096. The GPU's compute buffer is 258.50 MiB at both (the logits of 512 tokens, 128256 x 512 x 4 B =
// 250.5 MiB, and 8 MiB more; llama.cpp prints "CUDA0 compute buffer size = 258.50 MiB" for Llama 3 8B at -ub 512),
// so the use is linear in the context and the interpolation lands where it meets the target:
// (7168 - 4403.49 - 258.5) / 0.125 = 20048 cells, rounded down to a multiple of 256: -c 19968, every layer on the GPU.
// The answer holds for any compute buffer between 236.6 and 268.5 MiB (n_ctx from 19968 to 20223), checked below.
TEST(LlamaFitFixtures, Llama31_8bOneGpuShrinksTheContext) {
  FixtureFit f = fit_fixture("llama-3.1-8b-q4_k_m", {gpu("gpu0", 8 * GiB), wrapped_cpu(64 * GiB)}, 0);
  ASSERT_EQ(f.use.size(), 1u);
  EXPECT_EQ(f.result.outcome, FitResult::Outcome::kFitted);
  EXPECT_EQ(flags_of(f.problem, f.result), "-c 19968 -ngl 33");
  const double compute = mib(f.use[0].total) - 4403.49 - 19968 * 0.125;
  EXPECT_GT(compute, 236.6);
  EXPECT_LT(compute, 268.5);
}

// The same file at -c 4096 (set: no context change) on two GPUs of 2583 and 4016 MiB, margins 1024: targets 1559 and
// 2992 MiB. Per layer: 16 MiB of KV, and 132.5 MiB of weights on the 16 "more bits" layers (0-3, 6, 9, ..., 27,
// 28-31: q6_K attn_v and ffn_down) or 117.03 MiB (q4_K): 148.5 or 133.03 MiB. The output layer (output q6_K,
// output_norm, rope_freqs): 410.99 MiB. Back to front, GPU 1 (compute buffer about 258.5 MiB: the logits) takes the
// output and layers 31 down to 16: 410.99 + 8 x 148.5 + 8 x 133.03 + 258.5 = 2921.7 MiB; with layer 15 (q6) 3070.2 >
// 2992. GPU 0 (compute buffer about 96 MiB, no logits) takes layers 15 down to 6: 4 x 148.5 + 6 x 133.03 + 96 =
// 1488.2; with layer 5 (q4) 1621.2 > 1559. So -ngl 27 (10 + 16 + the output) -ts 10,17. Both GPUs keep about 70 MiB
// of slack either way, checked below on the compute buffers.
TEST(LlamaFitFixtures, Llama31_8bTwoGpusWholeLayersBackToFront) {
  FixtureFit f = fit_fixture("llama-3.1-8b-q4_k_m",
                             {gpu("gpu0", 2583 * MiB), gpu("gpu1", 4016 * MiB), wrapped_cpu(64 * GiB)}, 4096);
  ASSERT_EQ(f.use.size(), 2u);
  EXPECT_EQ(f.result.outcome, FitResult::Outcome::kFitted);
  EXPECT_EQ(flags_of(f.problem, f.result), "-c 4096 -ngl 27 -ts 10,17");
  const double compute0 = mib(f.use[0].total) - (4 * 132.5 + 6 * 117.03125) - 10 * 16;
  const double compute1 = mib(f.use[1].total) - (8 * 132.5 + 8 * 117.03125 + 410.99) - 16 * 16;
  EXPECT_NEAR(compute0, 96, 60);
  EXPECT_NEAR(compute1, 258.5, 60);
}

// Qwen3-30B-A3B Q4_K_M (48 layers, n_embd 2048, 32 heads of 128, 4 KV heads, 128 experts of 768, vocabulary 151936)
// on one 8 GiB GPU, context left unset (training context 40960), margin 1024: target 7168 MiB. Per layer, by hand:
// dense part attn_q and attn_output 2048 x 4096 q4_K (4.5 MiB each), attn_k 2048 x 512 q4_K (0.5625), attn_v the same
// (q6_K, 0.8203, on the 24 "more bits" layers 0-5, 8, 11, ..., 41, 42-47), the router 2048 x 128 f32 (1 MiB), norms
// 17 KiB: 11.14 or 11.40 MiB, 540.98 MiB for all 48; experts gate and up 2048 x 768 x 128 q4_K (108 MiB each), down
// q6_K (157.5 MiB, "more bits" layers) or q4_K (108): 373.5 or 324 MiB. Output 2048 x 151936 q6_K: 243.43 MiB. KV at
// 4096: 48 x 2 x 512 x 4096 x 2 B = 384 MiB; compute 300.75 MiB (the logits of 512 tokens, 151936 x 512 x 4 B =
// 296.75 MiB, and 4 MiB). Even at 4096 cells all of it (17.1 GiB) is far above the target: n_ctx stays at --fit-ctx
// 4096. With every expert on the CPU 540.98 + 243.43 + 384 + 300.75 = 1469 MiB: a surplus, so whole layers are filled
// front to back: layers 0-15 keep their experts (9 "more bits" layers x 373.5 + 7 x 324 = 5629.5 MiB):
// 7098.7 MiB; with layer 16's (324) 7422.7 > 7168. Layer 16 as a partial layer: attention + up (+108) 7206.7 is above
// the target; attention alone (its FFN, the router included, to the CPU: -1 MiB) fits. Layers 17-47 keep their experts
// on the CPU, and the output layer's pattern (blk.48) matches nothing, as llama.cpp writes it.
TEST(LlamaFitFixtures, Qwen3MoeOneGpuWholeLayersThenAttentionOnly) {
  FixtureFit f = fit_fixture("qwen3-30b-a3b-q4_k_m", {gpu("gpu0", 8 * GiB), wrapped_cpu(64 * GiB)}, 0);
  ASSERT_EQ(f.use.size(), 1u);
  EXPECT_EQ(f.result.outcome, FitResult::Outcome::kFitted);
  std::string flags = "-c 4096 -ngl 49 -ot \"blk\\.16\\.ffn_(gate|up|gate_up|down).*=CPU";
  for (int il = 17; il <= 48; ++il)
    flags += ",blk\\." + std::to_string(il) + "\\.ffn_(up|down|gate_up|gate)_(ch|)exps=CPU";
  EXPECT_EQ(flags_of(f.problem, f.result), flags + "\"");
  EXPECT_NEAR(mib(f.use[0].total), 7097.7, 2.0);
}

// Issue 50: a fit that changes nothing prints the user's options back, as llama-fit-params prints the model
// parameters the command line set (it printed -ngl 49 for a user's -ngl 20, and dropped -ot).
TEST(LlamaFit, UnchangedFlagsAreTheUsersOwn) {
  Synthetic m;
  m.user_ngl = 6;
  m.n_gpus = 2;
  FitProblem p = problem(m, {2000, 2000}, {512, 512});
  p.user_ngl = "6";
  p.user_ts = "3,1";
  p.user_ot = "-ot \"ffn_down=CPU\"";
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kUnchanged);
  EXPECT_EQ(fit_flags(r.value().setting, p), "-c 4096 -ngl 6 -ts 3,1 -ot \"ffn_down=CPU\"");
  // -ngl all / auto (not a number) prints every layer; -ts only with several GPUs
  p.user_ngl = "all";
  p.user_ot.clear();
  EXPECT_EQ(fit_flags(r.value().setting, p), "-c 4096 -ngl 11 -ts 3,1");
  FitProblem one = problem(m, {2000}, {512});
  one.user_ts = "3,1";
  EXPECT_EQ(fit_flags(FitSetting{}, one), "-c 4096 -ngl 11");
  // a placed setting prints what the fit chose, whatever the user gave
  FitSetting placed;
  placed.placed = true;
  placed.n_ctx = 2048;
  placed.n_gpu_layers = 4;
  EXPECT_EQ(fit_flags(placed, p), "-c 2048 -ngl 4");
}

// Issue 50: a GPU over its target with no layer on it fails the fit instead of recommending -ngl 0. A margin of 200
// MiB on 100 MiB free leaves a target of -100 MiB: the fill places no layer (0 MiB used), which is still above it.
// The context was set by the user (4096), so step 2 does not apply; llama.cpp's newer fit gives up with this reason.
TEST(LlamaFit, AGpuOverItsTargetWithNoLayerFailsTheFit) {
  Synthetic m;
  FitProblem p = problem(m, {100}, {200});
  p.n_ctx = 4096;
  auto r = llama_fit(p, m.measure());
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r.value().outcome, FitResult::Outcome::kFailed);
  EXPECT_EQ(r.value().failure, "the fitted placement does not fit within the margins at a context size of 4096, abort");
  EXPECT_EQ(r.value().layers.size(), 1u);
  EXPECT_EQ(r.value().layers[0].n_layer, 0);
  EXPECT_FALSE(r.value().setting.placed) << "the user's options stay";
}
