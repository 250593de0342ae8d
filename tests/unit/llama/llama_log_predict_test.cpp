// The predictions of `tessera compare-log` (tessera/llama/llama_log_predict.h). The log is
// tests/cli/compare-log-synthetic.log: llama.cpp's lines for a small llama model (2 layers, n_embd 512, n_ff 1024,
// 8 heads, 4 KV heads of 64, vocabulary 1000, q8_0 matrices, f32 norms, an output.weight of its own: 21 tensors).
// Every expected size is worked out by hand below from those shapes and llama.cpp's rules, not by the code:
//   q8_0: 34 bytes per 32 values, so a row of 512 values is 544 B and a row of 1024 is 1088 B.
//   token_embd [512, 1000] and output [512, 1000]: 1000 x 544 = 544000 B each; output_norm f32 [512]: 2048 B.
//   a layer: attn_q [512, 512] 278528, attn_k and attn_v [512, 256] 139264 each, attn_output 278528, ffn_gate and
//   ffn_up [512, 1024] 557056 each, ffn_down [1024, 512] 512 x 1088 = 557056, attn_norm and ffn_norm 2048 each:
//   2 x 278528 + 2 x 139264 + 3 x 557056 + 2 x 2048 = 2510848 B. Every size is a multiple of 128 (the CUDA alignment)
//   and of 32 (the file's), so nothing is padded. KV f16, 256 cells: K and V of a layer are 4 x 64 values x 2 B x 256 =
//   131072 B each, 262144 B per layer. The file's order (weight_name_less): output.weight, output_norm.weight,
//   token_embd.weight, blk.0.*, blk.1.*.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "tessera/builtin.h"
#include "tessera/llama/llama_log_predict.h"

using namespace tessera;
using namespace tessera::llama;

namespace {

constexpr double kMiBf = 1024.0 * 1024.0;
constexpr double kLayer = 2510848, kOutput = 544000 + 2048, kEmbd = 544000, kKvLayer = 262144;

std::string synthetic() {
  std::ifstream in(std::string(TESSERA_SOURCE_DIR) + "/tests/cli/compare-log-synthetic.log");
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

std::string replace(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

LogPrediction predict(const std::string& text, int64_t parallel = 0) {
  auto log = parse_llama_log(text, "synthetic.log");
  EXPECT_TRUE(log.ok()) << log.status().message();
  LogPredictOptions o;
  o.real_devices = &builtin_registry();
  o.n_seq_max = parallel;
  auto p = predict_log(log.value(), o);
  EXPECT_TRUE(p.ok()) << p.status().message();
  return p.ok() ? p.value() : LogPrediction{};
}

const LogFigure* find(const LogPrediction& p, const std::string& kind, const std::string& device) {
  for (const LogFigure& f : p.figures) {
    if (f.kind == kind && f.device == device) return &f;
  }
  ADD_FAILURE() << "no figure " << kind << " " << device;
  return nullptr;
}

void expect_mib(const LogPrediction& p, const std::string& kind, const std::string& device, double bytes) {
  const LogFigure* f = find(p, kind, device);
  if (f == nullptr) return;
  ASSERT_TRUE(f->predicted.has_value()) << kind << " " << device << ": " << f->missing;
  EXPECT_NEAR(*f->predicted, bytes / kMiBf, 1e-9) << kind << " " << device;
}

TEST(LlamaLogPredict, EveryLayerOnOneGpuFromThePrintedMetadata) {
  const LogPrediction p = predict(synthetic());
  EXPECT_EQ(p.model, "the printed metadata");
  EXPECT_TRUE(p.unavailable.empty()) << p.unavailable;
  ASSERT_EQ(p.figures.size(), 4u);
  // -ngl 3 of 3: both layers and the output layer on CUDA0; token_embd stays in the mapped file.
  expect_mib(p, "model", "CUDA0", 2 * kLayer + kOutput);
  expect_mib(p, "model", "CPU_Mapped", kEmbd);
  expect_mib(p, "KV", "CUDA0", 2 * kKvLayer);
  expect_mib(p, "output", "CUDA_Host", 1000 * 4);  // n_vocab floats of logits for one sequence
  LogTolerance t;
  for (const LogFigure& f : p.figures) EXPECT_TRUE(within_tolerance(f, t)) << f.kind << " " << f.device;
}

TEST(LlamaLogPredict, PartialOffloadKeepsTheFirstLayerAndTheOutputOnTheCpu) {
  // -ngl 2 of 3: llama.cpp offloads layers from max(n_layer + 1 - 2, 0) = 1: layer 1 only; the output stays on the
  // CPU. The mapped range runs from output.weight (the file's first tensor) to the end of blk.0.
  std::string text = replace(synthetic(), "offloaded 3/3 layers", "offloaded 2/3 layers");
  text = replace(text, "offloading 2 repeating layers", "offloading 1 repeating layers");
  text = replace(text, "load_tensors: offloading output layer to GPU\n", "");
  text = replace(text, "llama_kv_cache:      CUDA0 KV buffer size =     0.50 MiB\n",
                 "llama_kv_cache:        CPU KV buffer size =     0.25 MiB\n"
                 "llama_kv_cache:      CUDA0 KV buffer size =     0.25 MiB\n");
  text = replace(text, "CUDA_Host  output buffer", "CPU  output buffer");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", kLayer);
  expect_mib(p, "model", "CPU_Mapped", kOutput + kEmbd + kLayer);
  expect_mib(p, "KV", "CPU", kKvLayer);
  expect_mib(p, "KV", "CUDA0", kKvLayer);
  expect_mib(p, "output", "CPU", 1000 * 4);
}

TEST(LlamaLogPredict, TwoGpusSplitByTheirFreeMemory) {
  // llama.cpp's default split is each GPU's free memory: 1000 and 3000 MiB give the cumulative fractions 0.25, 1.
  // Layer il of the 3 offloaded goes to the first GPU whose fraction is above il / 3 (std::upper_bound): layer 0
  // (0) to CUDA0, layer 1 (0.33) and the output layer (0.67) to CUDA1.
  std::string text =
      "llama_model_load_from_file_impl: using device CUDA0 (GPU A) - 1000 MiB free\n"
      "llama_model_load_from_file_impl: using device CUDA1 (GPU B) - 3000 MiB free\n" +
      synthetic();
  text = replace(text, "load_tensors:        CUDA0 model buffer size =     5.31 MiB\n",
                 "load_tensors:        CUDA0 model buffer size =     2.39 MiB\n"
                 "load_tensors:        CUDA1 model buffer size =     2.92 MiB\n");
  text = replace(text, "llama_kv_cache:      CUDA0 KV buffer size =     0.50 MiB\n",
                 "llama_kv_cache:      CUDA0 KV buffer size =     0.25 MiB\n"
                 "llama_kv_cache:      CUDA1 KV buffer size =     0.25 MiB\n");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", kLayer);
  expect_mib(p, "model", "CUDA1", kLayer + kOutput);
  expect_mib(p, "KV", "CUDA0", kKvLayer);
  expect_mib(p, "KV", "CUDA1", kKvLayer);
}

TEST(LlamaLogPredict, TheCommandLineGivesTheSplit) {
  // No free memory printed, but -ts 1,3 on the printed command line: the same cumulative fractions 0.25, 1 as above.
  // "-fa" without a value (the switch of 2024's builds) is followed by "-c": not its value.
  std::string text =
      "$ ./llama-cli -m /models/synthetic-q8_0.gguf -ngl 99 -fa -c 256 --tensor-split 1,3\n" + synthetic();
  text = replace(text, "load_tensors:        CUDA0 model buffer size =     5.31 MiB\n",
                 "load_tensors:        CUDA0 model buffer size =     2.39 MiB\n"
                 "load_tensors:        CUDA1 model buffer size =     2.92 MiB\n");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", kLayer);
  expect_mib(p, "model", "CUDA1", kLayer + kOutput);
  // Without -ts the two GPUs' shares are unknown: the per-device figures say which lines would tell.
  const LogPrediction q = predict(replace(text, " --tensor-split 1,3", ""));
  const LogFigure* f = find(q, "model", "CUDA1");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->predicted.has_value());
  EXPECT_NE(f->missing.find("MiB free' lines (or -ts on the command line)"), std::string::npos) << f->missing;
}

TEST(LlamaLogPredict, SplitBuffersMeanSplitModeRow) {
  // Two GPUs of one model ("Device N:" lines, no free memory): an even layer split, cumulative 0.5, 1: layers 0 (0)
  // and 1 (0.33) on CUDA0, the output layer (0.67) on CUDA1. The CUDAn_Split buffers say -sm row: each GPU layer's
  // matrices are in its GPU's split buffer when the GPU holds some of their rows (compute capability 8.6: rounding 128;
  // even shares: a matrix of R rows is cut at R / 2 rounded down to 128: 512 -> 256, 256 -> 128, 1024 -> 512, so
  // CUDA0 has rows of every one; the output's 1000 rows are cut at 384, and CUDA1 has 616). CUDA0_Split: both layers'
  // matrices, 2 x (2 x 278528 + 2 x 139264 + 3 x 557056) = 5013504 B; CUDA0: the norms, 4 x 2048 B; CUDA1_Split: the
  // output head, 544000 B (rows of 512 values need no padding); CUDA1: output_norm, 2048 B.
  std::string text =
      "  Device 0: GPU X, compute capability 8.6, VMM: yes\n"
      "  Device 1: GPU X, compute capability 8.6, VMM: yes\n" +
      synthetic();
  text = replace(text, "load_tensors:        CUDA0 model buffer size =     5.31 MiB\n",
                 "load_tensors:  CUDA0_Split model buffer size =     4.78 MiB\n"
                 "load_tensors:  CUDA1_Split model buffer size =     0.52 MiB\n"
                 "load_tensors:        CUDA0 model buffer size =     0.01 MiB\n"
                 "load_tensors:        CUDA1 model buffer size =     0.00 MiB\n");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0_Split", 5013504);
  expect_mib(p, "model", "CUDA1_Split", 544000);
  expect_mib(p, "model", "CUDA0", 4 * 2048);
  expect_mib(p, "model", "CUDA1", 2048);
  expect_mib(p, "KV", "CUDA0", 2 * kKvLayer);
  bool said = false;
  for (const std::string& n : p.notes) said = said || n.find("split mode row") != std::string::npos;
  EXPECT_TRUE(said);
}

TEST(LlamaLogPredict, KAndVCachesOfDifferentTypesArePredicted) {
  // type_k q8_0, type_v f16 (-ctk q8_0 alone): each cache of its own type, by hand arithmetic.
  const LogPrediction p = predict(
      "llama_kv_cache_init: kv_size = 256, offload = 1, type_k = 'q8_0', type_v = 'f16', "
      "n_layer = 2, can_shift = 1\n" +
      synthetic());
  // kKvLayer is K and V in f16: half of it is one cache's 65536 values at 2 B; K in q8_0 is 65536 x 34/32 B.
  expect_mib(p, "KV", "CUDA0", 2 * (kKvLayer / 2 + 65536.0 * 34 / 32));
  expect_mib(p, "model", "CUDA0", 2 * kLayer + kOutput);
}

TEST(LlamaLogPredict, AFailedModelAllocationIsTheWholeBuffer) {
  // The CUDA0 model buffer llama.cpp tried to allocate: 2 layers + the output layer = 5567744 B.
  const std::string text =
      replace(synthetic(), "load_tensors:        CUDA0 model buffer size =     5.31 MiB\n",
              "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 5.31 MiB on device 0: cudaMalloc failed: out "
              "of memory\nalloc_tensor_range: failed to allocate CUDA0 buffer of size 5567744\n");
  const LogPrediction p = predict(text);
  const LogFigure* f = find(p, "failed model", "CUDA0");
  ASSERT_NE(f, nullptr);
  EXPECT_DOUBLE_EQ(f->printed, 5567744 / kMiBf);
  ASSERT_TRUE(f->predicted.has_value()) << f->missing;
  EXPECT_NEAR(*f->predicted, 5567744 / kMiBf, 1e-9);
}

TEST(LlamaLogPredict, AFigureOffByMoreThanItsToleranceIsReported) {
  // 5.31 printed as 5.50 MiB: 5567744 B = 5.3098 MiB is 3.46 % below it.
  const LogPrediction p = predict(replace(synthetic(), "=     5.31 MiB", "=     5.50 MiB"));
  const LogFigure* f = find(p, "model", "CUDA0");
  ASSERT_NE(f, nullptr);
  LogTolerance t;
  EXPECT_FALSE(within_tolerance(*f, t));
  EXPECT_NEAR(f->percent(), (5567744 / kMiBf - 5.5) / 5.5 * 100, 1e-9);
  t.memory_pct = 3.5;
  EXPECT_TRUE(within_tolerance(*f, t));
}

TEST(LlamaLogPredict, WhatALogLacksIsNamed) {
  // Without the FFN size the model cannot be built: every figure says which line is missing.
  const LogPrediction p = predict(replace(
      synthetic(), "llama_model_loader: - kv   4:                  llama.feed_forward_length u32              = 1024\n",
      ""));
  EXPECT_NE(p.unavailable.find("'print_info: n_ff = N' (or the kv line llama.feed_forward_length)"), std::string::npos)
      << p.unavailable;
  for (const LogFigure& f : p.figures) {
    EXPECT_FALSE(f.predicted.has_value());
    EXPECT_NE(f.missing.find("n_ff"), std::string::npos) << f.missing;
  }
  // Type counts that fit no graph of the metadata (22 tensors: neither 21, untied, nor 20, tied) are refused.
  const LogPrediction q = predict(replace(synthetic(), "- type q8_0:   16 tensors", "- type q8_0:   17 tensors"));
  EXPECT_NE(q.unavailable.find("match no llama graph"), std::string::npos) << q.unavailable;
  // Without n_ctx the KV cache is not predicted, the model buffers are.
  const LogPrediction r = predict(replace(synthetic(), "llama_context: n_ctx         = 256\n", ""));
  const LogFigure* kv = find(r, "KV", "CUDA0");
  ASSERT_NE(kv, nullptr);
  EXPECT_FALSE(kv->predicted.has_value());
  EXPECT_NE(kv->missing.find("'n_ctx = N'"), std::string::npos) << kv->missing;
  expect_mib(r, "model", "CUDA0", 2 * kLayer + kOutput);
}

TEST(LlamaLogPredict, AModelFileThatCannotBeReadIsAnInputError) {
  auto log = parse_llama_log(synthetic(), "synthetic.log");
  ASSERT_TRUE(log.ok());
  LogPredictOptions o;
  o.model_file = "/nonexistent/model.gguf";
  o.real_devices = &builtin_registry();
  auto p = predict_log(log.value(), o);
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("/nonexistent/model.gguf"), std::string::npos) << p.status().message();
}

TEST(LlamaLogPredict, UnderscoresInALongOptionAndTheKvCacheThatFailed) {
  // "--n_gpu_layers 1" is llama.cpp's -ngl 1: only the output layer on the GPU (its 546048 B), both layers on the CPU.
  std::string text = replace(synthetic(),
                             "load_tensors: offloading 2 repeating layers to GPU\n"
                             "load_tensors: offloading output layer to GPU\n"
                             "load_tensors: offloaded 3/3 layers to GPU\n",
                             "");
  text = "[me@box llama.cpp]$ ./llama-cli -m /models/synthetic-q8_0.gguf --n_gpu_layers 1\n" + text;
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", kOutput);
  // The KV cache (2 layers x 262144 B on the GPU with -ngl 3) fails: the failed allocation is compared with it.
  const std::string kv_fail = replace(synthetic(), "llama_kv_cache:      CUDA0 KV buffer size =     0.50 MiB\n",
                                      "alloc_tensor_range: failed to allocate CUDA0 buffer of size 524288\n"
                                      "llama_kv_cache: failed to allocate buffer for kv cache\n");
  const LogPrediction q = predict(kv_fail);
  const LogFigure* f = find(q, "failed KV", "CUDA0");
  ASSERT_NE(f, nullptr);
  ASSERT_TRUE(f->predicted.has_value()) << f->missing;
  EXPECT_NEAR(*f->predicted, 2 * kKvLayer / kMiBf, 1e-9);
}

// The output buffer holds a row per sequence (llama.cpp's output_reserve(n_seq_max)): 4 x 1000 floats with
// "n_seq_max = 4"; the same from n_ctx / n_ctx_per_seq (256 / 64) when n_seq_max is not printed, or from --parallel.
// An ollama log (its journal prefix) adds n_embd = 512 floats per row (ollama's llama.cpp returns embeddings; its
// printed output buffers, tests/fidelity/22-24, are (n_vocab + n_embd) x 4 sequences x 4 B).
TEST(LlamaLogPredict, TheOutputBufferHasARowPerSequence) {
  const std::string four = replace(synthetic(), "n_seq_max     = 1", "n_seq_max     = 4");
  expect_mib(predict(four), "output", "CUDA_Host", 4 * 1000 * 4);
  const std::string per_seq =
      replace(synthetic(), "llama_context: n_seq_max     = 1\n",
              "llama_context: n_ctx_per_seq (64) < n_ctx_train (4096) -- the full capacity of the model will not be "
              "utilized\n");
  expect_mib(predict(per_seq), "output", "CUDA_Host", 4 * 1000 * 4);
  const std::string unprinted = replace(synthetic(), "llama_context: n_seq_max     = 1\n", "");
  expect_mib(predict(unprinted), "output", "CUDA_Host", 1000 * 4);
  expect_mib(predict(unprinted, 2), "output", "CUDA_Host", 2 * 1000 * 4);
  const std::string ollama = "Dec 31 01:58:00 host ollama[555324]: " + four;
  expect_mib(predict(ollama), "output", "CUDA_Host", 4 * (1000 + 512) * 4);
  // Before build 2540 (llama.cpp PR #6122, tests/fidelity/25-32) a row for every token of the batch: n_batch 256.
  expect_mib(predict("main: build = 2459 (d199ca79)\n" + four), "output", "CUDA_Host", 256 * 1000 * 4);
  expect_mib(predict("main: build = 2540 (557410b8)\n" + four), "output", "CUDA_Host", 4 * 1000 * 4);
}

// A log with type counts but no file type line: the mix whose derived counts equal the printed ones. Q4_K_M on the
// synthetic model (2 layers: use_more_bits(i, 2) holds for layer 1 only): q6_K for blk.1's attn_v and ffn_down and
// for the output, q4_K for the 13 other matrices. q4_K: 144 B per 256 values, q6_K: 210 B. CUDA0 holds both layers
// and the output layer:
//   layer 0: attn_q 512 x 288 = 147456, attn_k and attn_v 256 x 288 = 73728 each, attn_output 147456, ffn_gate and
//            ffn_up 1024 x 288 = 294912 each, ffn_down 512 x 576 = 294912, norms 2 x 2048: 1331200 B;
//   layer 1: attn_v 256 x 420 = 107520 and ffn_down 512 x 840 = 430080 instead: 1331200 + 33792 + 135168 = 1500160 B;
//   output 1000 x 420 = 420000 B, padded to CUDA's 128 B: 420096; output_norm 2048.
TEST(LlamaLogPredict, TheFileTypeFromTheTypeCountsWhenNotPrinted) {
  std::string text = replace(synthetic(), "print_info: file type   = Q8_0\n", "");
  text = replace(text, "llama_model_loader: - type q8_0:   16 tensors\n",
                 "llama_model_loader: - type q4_K:   13 tensors\nllama_model_loader: - type q6_K:    3 tensors\n");
  text = replace(text, "general.file_type u32              = 7\n", "general.quantization_version u32   = 2\n");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", 1331200 + 1500160 + 420096 + 2048);
  bool noted = false;
  for (const std::string& n : p.notes) noted = noted || n.find("no file type printed") != std::string::npos;
  EXPECT_TRUE(noted);
}

// --no-mmap ("(mmap = false)" on the load line): the weights in the CPU's memory are read into the first GPU's host
// buffer (CUDA_Host) instead of being mapped, or into the CPU's own buffer where an -ot sends them. With
// "--n_gpu_layers 1" only the output layer is on CUDA0; token_embd (544000 B) and both layers (2510848 B each) are in
// the CPU's memory, every size a multiple of 32 (no padding).
TEST(LlamaLogPredict, WithoutMmapTheWeightsAreReadIntoHostBuffers) {
  std::string text = replace(synthetic(),
                             "load_tensors: offloading 2 repeating layers to GPU\n"
                             "load_tensors: offloading output layer to GPU\n"
                             "load_tensors: offloaded 3/3 layers to GPU\n",
                             "load_tensors: loading model tensors, this can take a while... (mmap = false)\n");
  text = replace(text, "load_tensors:   CPU_Mapped model buffer size =     0.52 MiB\n",
                 "load_tensors:    CUDA_Host model buffer size =     5.31 MiB\n"
                 "load_tensors:          CPU model buffer size =     2.39 MiB\n");
  const LogPrediction p = predict("$ ./llama-cli -m m.gguf --n_gpu_layers 1 -ot 'blk\\.1\\.=CPU'\n" + text);
  expect_mib(p, "model", "CUDA_Host", 544000 + kLayer);
  expect_mib(p, "model", "CPU", kLayer);
  expect_mib(p, "model", "CUDA0", kOutput);
}

// The 'buffer type overridden' lines place the weights an -ot sent elsewhere when the command line is not in the
// excerpt: layer 1's nine weights to the CPU predict what -ot 'blk\.1\.=CPU' on the command line predicts, and
// CUDA0 keeps layer 0 and the output layer.
TEST(LlamaLogPredict, TheOverriddenLinesStandForTheOt) {
  std::string lines;
  for (const char* w :
       {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}) {
    // the 2025 spelling ("Tensor ... overriden") and the 2026 one ("tensor ... (size type) ... overridden")
    lines += std::string(w[0] == 'a' ? "Tensor blk.1." : "tensor blk.1.") + w + ".weight" +
             (w[0] == 'a' ? " buffer type overriden to CPU\n" : " (0 MiB q8_0) buffer type overridden to CPU\n");
  }
  const std::string text = replace(synthetic(), "load_tensors:        CUDA0 model buffer size",
                                   lines + "load_tensors:        CUDA0 model buffer size");
  const LogPrediction by_lines = predict(text);
  const LogPrediction by_ot = predict("$ ./llama-cli -m m.gguf -ngl 99 -ot 'blk\\.1\\.=CPU'\n" + synthetic());
  expect_mib(by_lines, "model", "CUDA0", kLayer + kOutput);
  ASSERT_EQ(by_lines.figures.size(), by_ot.figures.size());
  for (size_t i = 0; i < by_ot.figures.size(); ++i) {
    EXPECT_EQ(by_lines.figures[i].predicted, by_ot.figures[i].predicted)
        << by_ot.figures[i].kind << " " << by_ot.figures[i].device;
  }
  bool noted = false;
  for (const std::string& n : by_lines.notes) noted = noted || n.find("9 weights placed as the") != std::string::npos;
  EXPECT_TRUE(noted);
}

// The split from the 'layer N assigned to device' lines (llama.cpp's load_tensors at debug verbosity) when neither
// free memory nor -ts is printed: layer 0 on CUDA0, layer 1 on CUDA1, and the output layer (not printed) with the
// last one, as -ts 1,2 would place them: CUDA0 one layer, CUDA1 one layer and the output layer.
TEST(LlamaLogPredict, TheLayerAssignmentLinesGiveTheSplit) {
  std::string text = replace(synthetic(), "load_tensors:        CUDA0 model buffer size =     5.31 MiB\n",
                             "load_tensors: layer   0 assigned to device CUDA0, is_swa = 0\n"
                             "load_tensors: layer   1 assigned to device CUDA1, is_swa = 0\n"
                             "load_tensors:        CUDA0 model buffer size =     2.39 MiB\n"
                             "load_tensors:        CUDA1 model buffer size =     2.92 MiB\n");
  const LogPrediction p = predict(text);
  expect_mib(p, "model", "CUDA0", kLayer);
  expect_mib(p, "model", "CUDA1", kLayer + kOutput);
  // Only some layers printed: not the split (and without free memory or -ts, not predicted per device).
  const LogPrediction q = predict(replace(text, "load_tensors: layer   1 assigned to device CUDA1, is_swa = 0\n", ""));
  const LogFigure* f = find(q, "model", "CUDA1");
  ASSERT_NE(f, nullptr);
  EXPECT_FALSE(f->predicted.has_value());
}

}  // namespace
