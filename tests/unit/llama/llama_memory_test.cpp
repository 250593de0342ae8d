// The memory llama.cpp allocates (tessera/llama/llama_memory.h; docs/scenarios.md, "Memory breakdown"). Every
// expected figure is worked out by hand from the model's published shapes and llama.cpp's rules (cited at each test),
// or read from a log a user posted in a public issue (the URL at the test).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/builtin.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/llama/llama_memory.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/harness/session/session.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "unit/sim/sim_fixture.h"
#include "support/units.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using namespace tessera::llama;
using ::testing::HasSubstr;

using tessera::test::kMiB;

namespace {

// A planned metadata-only session of `model` on `devices` with the placement options (key, text).
std::unique_ptr<Session> planned(const models::LlamaConfig& model, std::vector<DeviceConfig> devices,
                                 const std::vector<std::pair<std::string, std::string>>& options = {}) {
  SessionConfig c;
  c.topology = topology(std::move(devices));
  c.model = model;
  c.sim.mode = MemoryMode::kMetadata;
  for (const auto& [key, text] : options) EXPECT_TRUE(apply_policy_option(key, text, &c.policy).ok()) << key;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return nullptr;
  const Status p = s.value()->plan();
  EXPECT_TRUE(p.ok()) << p.message();
  return std::move(s).value();
}

models::LlamaConfig fixture(const std::string& name, int64_t n_ctx) {
  auto file = models::fixtures::make_fixture(name);
  EXPECT_TRUE(file.ok()) << file.status().message();
  auto model = gguf::Model::of_file(std::move(file).value());
  models::GgufRunShape run;
  run.n_ctx = n_ctx;
  auto built = models::build_from_gguf(model, run);
  EXPECT_TRUE(built.ok()) << built.status().message();
  return built.value().config;
}

const LlamaBuffer* find(const MemoryBreakdown& b, LlamaBuffer::Kind kind, const std::string& name,
                        const std::string& cache = "") {
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == kind && lb.name == name && lb.cache == cache) return &lb;
  }
  return nullptr;
}

size_t bytes_of(const MemoryBreakdown& b, LlamaBuffer::Kind kind, const std::string& name,
                const std::string& cache = "") {
  const LlamaBuffer* lb = find(b, kind, name, cache);
  return lb == nullptr ? 0 : lb->bytes;
}

}  // namespace

// Llama-3.1-8B Q4_K_M on one GPU, everything offloaded. By hand from the published shapes (n_embd 4096, 32 layers,
// 8 KV heads of 128, n_ff 14336, vocabulary 128256) and llama-quantize's Q4_K_M rules (docs/gguf.md, "Fixtures"): the
// CPU holds token_embd alone, q4_K (144 B per 256 values): 128256 x 4096 / 256 x 144 = 295,501,824 B = 281.81 MiB,
// mapped from the file ("CPU_Mapped"). CUDA0 holds the rest: per layer attn_q and attn_output 4096 x 4096 and attn_k
// 4096 x 1024 q4_K, ffn_gate and ffn_up 4096 x 14336 q4_K, attn_v and ffn_down q6_K (210 B per 256) on the 16 "more
// bits" layers (0-3, 28-31 and every third between) else q4_K, two f32 norms of 16 KiB; then output 4096 x 128256
// q6_K, output_norm 16 KiB and rope_freqs 256 B: 4,617,396,480 B = 4403.49 MiB. KV at -c 8192, f16: 32 layers x (K
// + V) x 1024 x 8192 x 2 B = 1024 MiB. The output buffer: 128256 logits x 4 B = 513,024 B (0.49 MiB) in CUDA_Host.
TEST(LlamaMemory, Llama31_8bModelKvAndOutputBuffersByHand) {
  auto s = planned(fixture("llama-3.1-8b-q4_k_m", 8192), {gpu("gpu0", 24 * GiB), wrapped_cpu(64 * GiB)});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const MemoryBreakdown& b = r.value();
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kModel, "CPU_Mapped"), 295501824u);
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kModel, "CUDA0"), 4617396480u);
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kKv, "CUDA0"), 1024 * kMiB);
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kOutput, "CUDA_Host"), 513024u);
  EXPECT_EQ(b.n_ctx, 8192);
  EXPECT_FALSE(b.pipeline.on);  // one GPU
  const std::string log = format_llama_log(b);
  EXPECT_THAT(log, HasSubstr("load_tensors:   CPU_Mapped model buffer size =   281.81 MiB\n"));
  EXPECT_THAT(log, HasSubstr("load_tensors:        CUDA0 model buffer size =  4403.49 MiB\n"));
  EXPECT_THAT(log, HasSubstr("llama_kv_cache:      CUDA0 KV buffer size =  1024.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr("llama_kv_cache: size = 1024.00 MiB (  8192 cells,  32 layers,  1/1 seqs), K (f16):  "
                             "512.00 MiB, V (f16):  512.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr("llama_context:  CUDA_Host  output buffer size =     0.49 MiB\n"));
  EXPECT_THAT(log, HasSubstr("sched_reserve: graph splits = "));
}

// -ot ffn_down=CPU on the same file: the CPU's weights are token_embd and the 32 ffn_down, and llama.cpp maps the
// span of the file from the first to the end of the last of them (get_mapping_range), the GPU tensors between them
// included. The file (llama-quantize's order): output, output_norm, rope_freqs, token_embd, then blk.0 ... blk.31,
// each attn_k, attn_norm, attn_output, attn_q, attn_v, ffn_down, ffn_gate, ffn_norm, ffn_up (every size a multiple
// of 32: no padding). The span is the whole data, 4,912,898,304 B, less output (430,940,160 B), output_norm
// (16,384), rope_freqs (256) before it and blk.31's ffn_gate and ffn_up (33,030,144 B each) and ffn_norm (16,384)
// after it: 4,415,864,832 B = 4211.30 MiB. CUDA0: everything but token_embd and the ffn_down (16 q6_K of 4096 rows x
// 11,760 B, 16 q4_K of 4096 x 8,064 B: 1,299,185,664 B): 3,318,210,816 B.
TEST(LlamaMemory, OverriddenWeightsMapTheFileSpan) {
  auto s = planned(fixture("llama-3.1-8b-q4_k_m", 4096), {gpu("gpu0", 24 * GiB), wrapped_cpu(64 * GiB)},
                   {{"override_tensor", "ffn_down=CPU"}});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(bytes_of(r.value(), LlamaBuffer::Kind::kModel, "CPU_Mapped"), 4415864832u);
  EXPECT_EQ(bytes_of(r.value(), LlamaBuffer::Kind::kModel, "CUDA0"), 3318210816u);
  EXPECT_THAT(r.value().pipeline.reason, HasSubstr("fewer than two GPUs"));
}

// A real log: JamePeng/llama-cpp-python pull request #1 (https://github.com/JamePeng/llama-cpp-python/pull/1), a
// DeepSeek-R1-Distill-Qwen-7B file (qwen2: 28 layers, "n_embd_k_gqa = 512, n_embd_v_gqa = 512" per layer, vocabulary
// 152064: the shapes of Qwen2.5-7B, whose fixture this uses) on one GPU printed
//   llama_kv_cache_init:      CUDA0 KV buffer size =   112.00 MiB
//   llama_init_from_model: KV self size  =  112.00 MiB, K (f16):   56.00 MiB, V (f16):   56.00 MiB
//   llama_init_from_model:  CUDA_Host  output buffer size =     0.58 MiB
// The excerpt does not show n_ctx: 2048 is the context that gives 112 MiB (28 x 2 x 512 x 2048 x 2 B), so the KV line
// checks the layout (one CUDA0 buffer, K and V halves of f16), the output line the vocabulary (152064 x 4 B).
TEST(LlamaMemory, Qwen25_7bKvAndOutputMatchAUsersLog) {
  auto s = planned(fixture("qwen2.5-7b-q4_k_m", 2048), {gpu("gpu0", 24 * GiB), wrapped_cpu(64 * GiB)});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const std::string log = format_llama_log(r.value());
  EXPECT_THAT(log, HasSubstr("     CUDA0 KV buffer size =   112.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr("K (f16):   56.00 MiB, V (f16):   56.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr(" CUDA_Host  output buffer size =     0.58 MiB\n"));
  EXPECT_EQ(bytes_of(r.value(), LlamaBuffer::Kind::kOutput, "CUDA_Host"), 152064u * 4);
}

// A real log: llama.cpp pull request #6122 (https://github.com/ggml-org/llama.cpp/pull/6122, Wuzzooy's comment), a
// Command-R 35B file on two GPUs, "offloaded 41/41 layers to GPU", n_ctx 4096, printed
//   llm_load_tensors:        CPU buffer size =  1640.62 MiB
//   llama_kv_cache_init:      CUDA0 KV buffer size =  1536.00 MiB
//   llama_kv_cache_init:      CUDA1 KV buffer size =  3584.00 MiB
//   llama_new_context_with_model: pipeline parallelism enabled (n_copies=4)
// Command-R's published shapes (config.json): 40 layers, hidden 8192, 64 heads and 64 KV heads (no grouping: a K row
// is 8192 values), vocabulary 256000, tied embeddings. Tessera has no command-r graph, so the llama graph with those
// shapes stands in: the buffers depend on the shapes only. By hand: the CPU maps token_embd alone, q6_K (the type
// llama-quantize gives a tied embedding): 256000 x 8192 / 256 x 210 B = 1,720,320,000 B = 1640.62 MiB; a layer's K and
// V at n_ctx 4096, f16: 2 x 8192 x 4096 x 2 B = 128 MiB, so CUDA0's 12 layers 1536 MiB and CUDA1's 28 layers 3584 MiB
// (the user's split: here -ts 28,72 with every layer and the output layer offloaded, 41 layers: layer il goes to the
// first GPU whose cumulative share is above il / 41, so layers 0-11 to CUDA0 as 11 / 41 < 0.28 <= 12 / 41); two GPUs
// with everything offloaded: pipeline parallelism with 4 copies.
TEST(LlamaMemory, CommandR35bOnTwoGpusMatchesAUsersLog) {
  models::LlamaConfig m;
  m.name = "command-r-35b-shapes";
  m.n_layer = 40;
  m.n_embd = 8192;
  m.n_ff = 22528;
  m.n_head = 64;
  m.n_head_kv = 64;
  m.n_vocab = 256000;
  m.n_ctx = 4096;
  m.n_tokens = 1;
  m.tied_output = true;
  m.weight_types["token_embd.weight"] = Type::kQ6_K;
  auto s =
      planned(m, {gpu("gpu0", 64 * GiB), gpu("gpu1", 64 * GiB), wrapped_cpu(64 * GiB)}, {{"tensor_split", "28,72"}});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok()) << r.status().message();
  const MemoryBreakdown& b = r.value();
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kModel, "CPU_Mapped"), 1720320000u);
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kKv, "CUDA0"), 1536 * kMiB);
  EXPECT_EQ(bytes_of(b, LlamaBuffer::Kind::kKv, "CUDA1"), 3584 * kMiB);
  EXPECT_TRUE(b.pipeline.on) << b.pipeline.reason;
  EXPECT_EQ(b.pipeline.n_copies, 4);
  const std::string log = format_llama_log(b);
  EXPECT_THAT(log, HasSubstr("   CPU_Mapped model buffer size =  1640.62 MiB\n"));
  EXPECT_THAT(log, HasSubstr("     CUDA0 KV buffer size =  1536.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr("     CUDA1 KV buffer size =  3584.00 MiB\n"));
  EXPECT_THAT(log, HasSubstr("pipeline parallelism enabled\n"));
}

// Sliding-window caches (src/llama-kv-cache-iswa.cpp): size_swa = GGML_PAD(min(n_ctx, n_swa + n_ubatch), 256) cells,
// n_ctx with --swa-full. Gemma 3 12B: 48 layers of which every sixth is global (8) and the others slide (40) with a
// window of 1024; 8 KV heads of 256: a K row is 2048 values. At -c 8192 (f16):
//   non-SWA: 8 x 2 x 2048 x 8192 x 2 B = 512 MiB;
//   SWA, -ub 512 (default): min(8192, 1024 + 512) = 1536 cells: 40 x 2 x 2048 x 1536 x 2 B = 480 MiB;
//   SWA, -ub 1024: 2048 cells, 640 MiB; -b 256 (n_ubatch = min(n_batch, 512) = 256): 1280 cells, 400 MiB;
//   SWA, --swa-full: 8192 cells, 2560 MiB; -c 1024: min(1024, 1536) = 1024 cells.
TEST(LlamaMemory, SlidingWindowCachesSizedByTheWindowAndTheMicroBatch) {
  struct Case {
    int64_t n_ctx, n_batch, n_ubatch;
    bool swa_full;
    int64_t cells;
    size_t swa_mib;
  };
  for (const Case& k : {Case{8192, 2048, 512, false, 1536, 480}, Case{8192, 2048, 1024, false, 2048, 640},
                        Case{8192, 256, 512, false, 1280, 400}, Case{8192, 2048, 512, true, 8192, 2560},
                        Case{1024, 2048, 512, false, 1024, 40 * 2 * 2048 * 1024 * 2 / kMiB}}) {
    auto s = planned(fixture("gemma-3-12b-q4_k_m", k.n_ctx), {gpu("gpu0", 48 * GiB), wrapped_cpu(64 * GiB)});
    ASSERT_NE(s, nullptr);
    LlamaContextParams params;
    params.n_batch = k.n_batch;
    params.n_ubatch = k.n_ubatch;
    params.swa_full = k.swa_full;
    auto r = llama_memory_breakdown(*s, params);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LlamaBuffer* base = find(r.value(), LlamaBuffer::Kind::kKv, "CUDA0", "non-SWA");
    const LlamaBuffer* swa = find(r.value(), LlamaBuffer::Kind::kKv, "CUDA0", "SWA");
    ASSERT_NE(base, nullptr);
    ASSERT_NE(swa, nullptr);
    EXPECT_EQ(base->layers, 8);
    EXPECT_EQ(base->cells, k.n_ctx);
    EXPECT_EQ(base->bytes, size_t{8} * 2 * 2048 * static_cast<size_t>(k.n_ctx) * 2);
    EXPECT_EQ(swa->layers, 40);
    EXPECT_EQ(swa->cells, k.cells) << "n_ubatch " << k.n_ubatch;
    EXPECT_EQ(swa->bytes, k.swa_mib * kMiB);
    const std::string log = format_llama_log(r.value());
    EXPECT_THAT(log, HasSubstr("llama_kv_cache_iswa: creating non-SWA KV cache, size = " + std::to_string(k.n_ctx) +
                               " cells\n"));
    EXPECT_THAT(log, HasSubstr("llama_kv_cache_iswa: creating     SWA KV cache, size = " + std::to_string(k.cells) +
                               " cells\n"));
  }
}

// -nkvo: the caches in host memory, a "CPU" KV buffer (llama_kv_cache: offload false -> the CPU buffer type).
TEST(LlamaMemory, NoKvOffloadPutsTheKvBufferOnTheCpu) {
  auto s = planned(fixture("llama-3.1-8b-q4_k_m", 4096), {gpu("gpu0", 24 * GiB), wrapped_cpu(64 * GiB)},
                   {{"kv_offload", ""}});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(bytes_of(r.value(), LlamaBuffer::Kind::kKv, "CPU"), 512 * kMiB);  // 32 x 2 x 1024 x 4096 x 2 B
  EXPECT_EQ(bytes_of(r.value(), LlamaBuffer::Kind::kKv, "CUDA0"), 0u);
  EXPECT_FALSE(r.value().pipeline.on);
}

// llama.cpp's pipeline-parallelism rule (src/llama-context.cpp, llama_context's constructor), each condition broken
// once on the tiny model (2 layers) over two GPUs and the CPU.
TEST(LlamaMemory, PipelineParallelismRule) {
  const models::LlamaConfig tiny = models::preset("tiny").value();
  const std::vector<DeviceConfig> two = {gpu("gpu0"), gpu("gpu1"), wrapped_cpu()};
  auto decide = [&](const std::vector<DeviceConfig>& devices,
                    const std::vector<std::pair<std::string, std::string>>& options) {
    auto s = planned(tiny, devices, options);
    return s == nullptr ? PipelineDecision{} : llama_pipeline_parallel(*s);
  };
  PipelineDecision d = decide(two, {});
  EXPECT_TRUE(d.on) << d.reason;
  EXPECT_EQ(d.n_copies, 4);
  EXPECT_THAT(decide({gpu("gpu0"), wrapped_cpu()}, {}).reason, HasSubstr("fewer than two GPUs"));
  // -ngl 2 of 2 layers: the output layer and layer 1; layer 0 stays on the CPU (n_gpu_layers > n_layer fails).
  EXPECT_THAT(decide(two, {{"n_gpu_layers", "2"}}).reason, HasSubstr("not every layer"));
  EXPECT_TRUE(decide(two, {{"n_gpu_layers", "3"}}).on);
  EXPECT_THAT(decide(two, {{"kv_offload", ""}}).reason, HasSubstr("-nkvo"));
  EXPECT_THAT(decide(two, {{"override_tensor", "ffn_up=CUDA0"}}).reason, HasSubstr("tensor overrides"));
  EXPECT_THAT(decide(two, {{"split_mode", "none"}}).reason, HasSubstr("split mode"));
  DeviceConfig no_events = gpu("gpu1");
  no_events.caps.events = false;
  EXPECT_THAT(decide({gpu("gpu0"), no_events, wrapped_cpu()}, {}).reason, HasSubstr("without async compute or events"));
}

// llama.cpp's graph_reserve rounds the prompt graph's tokens up to a multiple of the sequences it reserves for
// (src/llama-context.cpp), the outputs staying n_ubatch: with a unified cache one sequence before build 7190 and
// n_seq_max from it (PR #17276, e072b205: `n_seqs = cparams.kv_unified ? 1 : cparams.n_seq_max` became
// `n_seqs = cparams.n_seq_max`). -np 3 -kvu -ub 512: 513 tokens, 512 outputs; -np 4: 512 tokens.
TEST(LlamaMemory, UnifiedCacheReservesForEverySequenceFromBuild7190) {
  auto shape = [](int build, int64_t n_seq) {
    SessionConfig c;
    c.model = models::preset("7b").value();
    c.model.n_tokens = 512;
    LlamaContextParams p;
    p.n_seq_max = n_seq;
    p.kv_unified = true;
    use_llama_cpp_rules(c, build, p);
    return std::pair<int64_t, int64_t>{c.model.n_tokens, c.model.outputs()};
  };
  EXPECT_EQ(shape(7189, 3), (std::pair<int64_t, int64_t>{512, 512}));
  EXPECT_EQ(shape(7190, 3), (std::pair<int64_t, int64_t>{513, 512}));
  EXPECT_EQ(shape(7190, 4), (std::pair<int64_t, int64_t>{512, 512}));
  EXPECT_EQ(shape(7190, 1), (std::pair<int64_t, int64_t>{512, 512}));
  EXPECT_EQ(shape(10470, 5), (std::pair<int64_t, int64_t>{515, 512}));
}

// Under llama.cpp's rules (use_llama_cpp_rules) a session plans with pipeline parallelism exactly when llama.cpp
// enables it, as its context does once the model is placed: 4 copy slots (GGML_SCHED_MAX_COPIES) on two GPUs with
// every layer offloaded, one with -nkvo or an override; a policy that asks for it itself keeps its own slots. And
// fit's measurements of a setting (llama.cpp's fit builds a real context on a no_alloc model: common/fit.cpp at
// 34af94cd9, lines 29-152) size the compute buffers so: more than the same setting planned without it.
TEST(LlamaMemory, LlamaCppRulesPlanWithPipelineParallelismWhereLlamaCppDoes) {
  const std::vector<DeviceConfig> two = {gpu("gpu0"), gpu("gpu1"), wrapped_cpu()};
  auto slots = [&](const std::vector<std::pair<std::string, std::string>>& options, bool rules) {
    SessionConfig c;
    c.topology = topology(two);
    c.model = models::preset("tiny").value();
    c.sim.mode = MemoryMode::kMetadata;
    for (const auto& [key, text] : options) EXPECT_TRUE(apply_policy_option(key, text, &c.policy).ok()) << key;
    if (rules) use_llama_cpp_rules(c, 6699, LlamaContextParams{});
    auto s = Session::create(c, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().message();
    return s.ok() ? s.value()->sched().n_copies() : -1;
  };
  EXPECT_EQ(slots({}, true), 4);
  EXPECT_EQ(slots({}, false), 1);  // Tessera's own rules: only --parallel
  EXPECT_EQ(slots({{"kv_offload", ""}}, true), 1);
  EXPECT_EQ(slots({{"override_tensor", "ffn_up=CUDA0"}}, true), 1);
  EXPECT_EQ(slots({{"parallel", ""}, {"n_copies", "2"}}, true), 2);

  SessionConfig base;
  base.topology = topology(two);
  base.model = models::preset("tiny").value();
  base.sim.mode = MemoryMode::kMetadata;
  SessionFitInputs in;
  in.n_ctx_train = base.model.n_ctx;
  in.tokens_given = true;
  SessionConfig plain = base;
  use_llama_cpp_rules(base, 6699, in.params);
  auto problem = session_fit_problem(base, in, &builtin_registry());
  ASSERT_TRUE(problem.ok()) << problem.status().message();
  FitSetting all;  // every layer on the GPUs
  all.placed = true;
  auto with_pp = session_fit_measure(base, in, problem.value(), &builtin_registry())(all);
  use_llama_cpp_rules(plain, 6699, in.params);
  plain.parallel_rule = nullptr;
  auto without = session_fit_measure(plain, in, problem.value(), &builtin_registry())(all);
  ASSERT_TRUE(with_pp.ok() && without.ok());
  ASSERT_EQ(with_pp.value().size(), 2u);
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(with_pp.value()[g].model, without.value()[g].model) << g;
    EXPECT_GT(with_pp.value()[g].total, without.value()[g].total) << g;  // the split inputs' copies
  }
}

// From build 9489 ggml-cuda's buffer type reserves, with each FLASH_ATTN_EXT of a batch, f16 copies of a K and V that
// are not f16 (PR #23907; ggml_cuda_flash_attn_ext_get_alloc_size at 34af94cd9, ggml/src/ggml-cuda/fattn.cu:536-565).
// Llama 3.1 8B, one GPU, -fa on, -c 131072, n_ubatch 512: a layer's K and V views are [128, 131072, 8], 2^27 values
// each, 256 MiB as f16; the FA node's own output is f32 [128, 32, 512], 8 MiB. With a q8_0 cache the GPU's compute
// buffer holds at least that node, 520 MiB, where builds before 9489 need 258.50 MiB (the logits, f32 [128256, 512],
// 250.5 MiB, are the peak); with an f16 cache nothing changes.
TEST(LlamaMemory, CudaReservesF16CopiesOfAQuantizedCacheForFlashAttentionFrom9489) {
  auto compute = [](int build, Type kv) {
    SessionConfig c;
    c.topology = topology({gpu("gpu0", 80 * GiB), wrapped_cpu(64 * GiB)});
    c.model = fixture("llama-3.1-8b-q4_k_m", 131072);
    c.model.n_tokens = 512;
    c.model.flash_attn = true;
    c.model.kv_type = kv;
    c.model.v_cache_type = kv;
    c.sim.mode = MemoryMode::kMetadata;
    use_llama_cpp_rules(c, build, LlamaContextParams{});
    auto s = Session::create(c, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok() || !s.value()->plan().ok()) return size_t{0};
    auto b = llama_memory_breakdown(*s.value(), LlamaContextParams{});
    EXPECT_TRUE(b.ok());
    return b.ok() ? bytes_of(b.value(), LlamaBuffer::Kind::kCompute, "CUDA0") : 0;
  };
  const size_t old_q8 = compute(9488, Type::kQ8_0), new_q8 = compute(9489, Type::kQ8_0);
  EXPECT_EQ(old_q8, compute(9488, Type::kF16));
  EXPECT_EQ(compute(9489, Type::kF16), compute(9488, Type::kF16));
  EXPECT_LT(old_q8, 260 * kMiB);
  EXPECT_GE(new_q8, 520 * kMiB);
  EXPECT_LT(new_q8, 700 * kMiB);  // (the node, Q, the mask's GPU copy and the residual stream: 672.01 MiB)
}

// From build 9460 llama.cpp reserves its prompt graph for min(n_ubatch, n_outputs_max) output rows (PR #23861,
// src/llama-context.cpp sched_reserve's n_outputs_pp); llama-server sets n_outputs_max to -np x (1 + draft tokens).
// Llama 3.1 8B, one GPU, -fa on, -c 8192, n_ubatch 512: with every token an output the logits, f32 [128256, 512] =
// 250.5 MiB, are the GPU's peak; with one output row they are 0.49 MiB, and the peak is a layer's FFN (f32
// [14336, 512] = 28 MiB a tensor), so the GPU's compute buffer is far below 250.5 MiB. Before 9460, or with
// n_outputs_max 0 (n_batch) or at least n_ubatch, nothing changes.
TEST(LlamaMemory, TheReserveKeepsNOutputsMaxRowsFrom9460) {
  auto plan = [](int build, int64_t n_outputs_max, int64_t* rows) {
    SessionConfig c;
    c.topology = topology({gpu("gpu0", 80 * GiB), wrapped_cpu(64 * GiB)});
    c.model = fixture("llama-3.1-8b-q4_k_m", 8192);
    c.model.n_tokens = 512;
    c.model.flash_attn = true;
    c.sim.mode = MemoryMode::kMetadata;
    LlamaContextParams p;
    p.n_outputs_max = n_outputs_max;
    use_llama_cpp_rules(c, build, p);
    auto s = Session::create(c, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok() || !s.value()->plan().ok()) return size_t{0};
    for (size_t i = 0; i < s.value()->graph().n_nodes(); ++i) {
      const Tensor* t = s.value()->graph().node(i);
      if (std::string_view(t->name) == "result_output") *rows = t->ne[1];
    }
    auto b = llama_memory_breakdown(*s.value(), p);
    EXPECT_TRUE(b.ok());
    return b.ok() ? bytes_of(b.value(), LlamaBuffer::Kind::kCompute, "CUDA0") : 0;
  };
  int64_t rows_old = 0, rows_new = 0, rows_all = 0, rows_wide = 0;
  const size_t old_one = plan(9459, 1, &rows_old), new_one = plan(9460, 1, &rows_new);
  const size_t new_all = plan(9460, 0, &rows_all), new_wide = plan(9460, 512, &rows_wide);
  EXPECT_EQ(rows_old, 512);
  EXPECT_EQ(rows_new, 1);
  EXPECT_EQ(rows_all, 512);
  EXPECT_EQ(rows_wide, 512);
  EXPECT_GE(old_one, 250 * kMiB + kMiB / 2);
  EXPECT_EQ(new_all, old_one);
  EXPECT_EQ(new_wide, old_one);
  EXPECT_LT(new_one, 150 * kMiB);
  EXPECT_GE(new_one, 28 * kMiB);
}

// The pins of llama.cpp's graph callback (src/llama-context.cpp, graph_get_cb), which its reserve keeps from build 7050
// (PR #17232): with -nkvo and no flash attention the merged heads ("kqv_merged_cont") on the CPU; with full offload
// every "norm" of a layer on that layer's device. Builds before 7050 reserved without them, and llama.cpp's fit
// (ggml_backend_sched_reserve_size, which still resets them) measures without them.
TEST(LlamaMemory, TheReserveKeepsTheGraphCallbacksPinsFrom7050) {
  auto backend_of = [](int build, const std::vector<std::pair<std::string, std::string>>& options, bool fa,
                       const std::string& node, std::vector<DeviceConfig> devices) {
    SessionConfig c;
    c.topology = topology(std::move(devices));
    c.model = models::preset("tiny").value();
    c.model.n_layer = 4;
    c.model.flash_attn = fa;
    c.sim.mode = MemoryMode::kMetadata;
    for (const auto& [key, text] : options) EXPECT_TRUE(apply_policy_option(key, text, &c.policy).ok()) << key;
    use_llama_cpp_rules(c, build, LlamaContextParams{});
    auto s = Session::create(c, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().message();
    if (!s.ok() || !s.value()->plan().ok()) return std::string("?");
    const Tensor* t = nullptr;  // the first node of the name (a layer's attention norm before its FFN norm)
    for (size_t i = 0; i < s.value()->graph().n_nodes() && t == nullptr; ++i) {
      if (node == s.value()->graph().node(i)->name) t = s.value()->graph().node(i);
    }
    EXPECT_NE(t, nullptr) << node;
    const Backend* b = t == nullptr ? nullptr : s.value()->sched().get_tensor_backend(t);
    return b == nullptr ? std::string("none") : b->name();
  };
  const std::vector<DeviceConfig> one = {gpu("gpu0"), wrapped_cpu()};
  EXPECT_EQ(backend_of(7050, {{"kv_offload", ""}}, false, "kqv_merged_cont-2", one), "cpu");
  EXPECT_EQ(backend_of(7049, {{"kv_offload", ""}}, false, "kqv_merged_cont-2", one), "gpu0");
  EXPECT_EQ(backend_of(7050, {}, false, "kqv_merged_cont-2", one), "gpu0");  // the cache offloaded: no pin
  // Two GPUs, 4 layers and the output: act = 5, even shares: layers 0-2 on gpu0, 3 on gpu1. Layer 3's attention norm
  // reads gpu0's residual stream: pinned, it runs on gpu1.
  const std::vector<DeviceConfig> two = {gpu("gpu0"), gpu("gpu1"), wrapped_cpu()};
  EXPECT_EQ(backend_of(7050, {{"tensor_split", "1,1"}}, true, "norm-3", two), "gpu1");
  EXPECT_EQ(backend_of(7049, {{"tensor_split", "1,1"}}, true, "norm-3", two), "gpu0");  // (ggml's expansion)
  SessionConfig c;
  c.topology = topology(two);
  c.model = models::preset("tiny").value();
  use_llama_cpp_rules(c, 7050, LlamaContextParams{});
  EXPECT_TRUE(static_cast<bool>(c.pin_rule));
  SessionFitInputs in;
  in.n_ctx_train = c.model.n_ctx;
  auto problem = session_fit_problem(c, in, &builtin_registry());
  ASSERT_TRUE(problem.ok());
  auto measured = fit_session_config(c, in, problem.value(), FitSetting{}, true);
  ASSERT_TRUE(measured.ok());
  EXPECT_FALSE(static_cast<bool>(measured.value().pin_rule));
  SessionConfig old;
  use_llama_cpp_rules(old, 7049, LlamaContextParams{});
  EXPECT_FALSE(static_cast<bool>(old.pin_rule));
}

// The table: one row per buffer name with its memory, then the totals, graph nodes and splits, pipeline parallelism.
TEST(LlamaMemory, TableNamesEveryBufferAndTheTotals) {
  auto s = planned(models::preset("tiny").value(), {gpu("gpu0"), wrapped_cpu()});
  ASSERT_NE(s, nullptr);
  auto r = llama_memory_breakdown(*s);
  ASSERT_TRUE(r.ok());
  // (each column as wide as its widest cell, 2 spaces apart: docs/scenarios.md "Tables and --wide")
  const std::string t = format_memory_breakdown(r.value());
  EXPECT_THAT(t, HasSubstr("buffer      memory      model         KV    compute    output      total\n"));
  EXPECT_THAT(t, HasSubstr("\nCUDA0       gpu0 "));
  EXPECT_THAT(t, HasSubstr("\nCPU_Mapped  cpu  "));
  EXPECT_THAT(t, HasSubstr("\nCUDA_Host   cpu  "));
  EXPECT_THAT(t, HasSubstr("graph nodes = " + std::to_string(s->graph().n_nodes()) + ", graph splits = 2\n"));
  EXPECT_THAT(t, HasSubstr("pipeline parallelism: off in llama.cpp (fewer than two GPUs)"));
  // --wide: the fixed columns of before, the same rows.
  const std::string w = format_memory_breakdown(r.value(), true);
  EXPECT_THAT(w,
              HasSubstr("buffer       memory            model           KV      compute       output        total\n"));
  EXPECT_THAT(w, HasSubstr("\nCUDA0        gpu0 "));
  EXPECT_THAT(w, HasSubstr("\nCPU_Mapped   cpu  "));
  EXPECT_THAT(w, HasSubstr("\nCUDA_Host    cpu  "));
  EXPECT_THAT(w, HasSubstr("graph nodes = " + std::to_string(s->graph().n_nodes()) + ", graph splits = 2\n"));
}
