// The llama.cpp / ollama log reader (llama/llama_log.cpp): one test per format element, each on an excerpt of a
// real log of tests/fidelity/ (the file named in the test; its header cites the public issue), with the figures
// read by hand from the excerpt; and the cleaning of prefixes, colour codes, CRLF and truncated lines.
#include <gtest/gtest.h>

#include <string>

#include "tessera/llama/llama_log.h"
#include "tessera/llama/llama_log_predict.h"
#include "llama/llama_log_scan.h"

using namespace tessera;
using namespace tessera::llama;

namespace {

LlamaLog parse_ok(const std::string& text) {
  auto r = parse_llama_log(text, "test.log");
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : LlamaLog{};
}

// tests/fidelity/01 (llama.cpp#13729, b5466): the 2025 load_tensors lines.
TEST(LlamaLog, ModelBuffersAndOffloadNewFormat) {
  const LlamaLog log = parse_ok(
      "load_tensors: offloading 30 repeating layers to GPU\n"
      "load_tensors: offloaded 30/49 layers to GPU\n"
      "load_tensors:        CUDA0 model buffer size = 10750.86 MiB\n"
      "load_tensors:   CPU_Mapped model buffer size =  6940.48 MiB\n");
  ASSERT_EQ(log.figures.buffers.size(), 2u);
  EXPECT_EQ(log.figures.buffers[0].device, "CUDA0");
  EXPECT_EQ(log.figures.buffers[0].kind, "model");
  EXPECT_DOUBLE_EQ(log.figures.buffers[0].mib, 10750.86);
  EXPECT_EQ(log.figures.buffers[0].line, 3);
  EXPECT_EQ(log.figures.buffers[1].device, "CPU_Mapped");
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 6940.48);
  ASSERT_TRUE(log.context.offloaded_layers);
  EXPECT_EQ(log.context.offloaded_layers->value, 30);
  EXPECT_EQ(log.context.offload_total, 49);
  EXPECT_EQ(log.context.repeating_offloaded, 30);
  EXPECT_FALSE(log.context.output_offloaded);
  EXPECT_TRUE(log.unused.empty());
}

// Issue 50: a log printed under a locale with a decimal comma reads the same figures; a comma between numbers that
// no unit follows is no decimal comma.
TEST(LlamaLog, DecimalCommas) {
  const LlamaLog log = parse_ok(
      "load_tensors: offloaded 30/49 layers to GPU\n"
      "load_tensors:        CUDA0 model buffer size = 10750,86 MiB\n"
      "load_tensors:   CPU_Mapped model buffer size =  6940,48 MiB\n"
      "llama_kv_cache:      CUDA0 KV buffer size =  1024,00 MiB\n");
  ASSERT_EQ(log.figures.buffers.size(), 3u);
  EXPECT_DOUBLE_EQ(log.figures.buffers[0].mib, 10750.86);
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 6940.48);
  EXPECT_DOUBLE_EQ(log.figures.buffers[2].mib, 1024.0);
  EXPECT_TRUE(log.unused.empty());
  std::string_view list = "3,1 x";
  double v = 0;
  ASSERT_TRUE(llama_log_scan::take_number(list, v));
  EXPECT_EQ(v, 3.0);
  EXPECT_EQ(list, ",1 x");
}

// tests/fidelity/03 (llama.cpp PR#6122): the 2024 format prints no kind on the weights' lines.
TEST(LlamaLog, ModelBuffersOldFormatAndNonRepeatingLayers) {
  const LlamaLog log = parse_ok(
      "llm_load_tensors: offloading 40 repeating layers to GPU\n"
      "llm_load_tensors: offloading non-repeating layers to GPU\n"
      "llm_load_tensors: offloaded 41/41 layers to GPU\n"
      "llm_load_tensors:        CPU buffer size =  1640.62 MiB\n"
      "llm_load_tensors:      CUDA1 buffer size = 13989.53 MiB\n");
  ASSERT_EQ(log.figures.buffers.size(), 2u);
  EXPECT_EQ(log.figures.buffers[0].kind, "model");
  EXPECT_EQ(log.figures.buffers[1].device, "CUDA1");
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 13989.53);
  EXPECT_TRUE(log.context.output_offloaded);
  EXPECT_EQ(log.context.offloaded_layers->value, 41);
}

// tests/fidelity/03 and 06 (llama.cpp#11200): KV, output and compute buffers, pipeline parallelism, nodes, splits.
TEST(LlamaLog, ContextBuffersGraphAndCopies) {
  const LlamaLog log = parse_ok(
      "llama_kv_cache_init: kv_size = 32768, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 64, "
      "can_shift = 1\n"
      "llama_kv_cache_init:      CUDA0 KV buffer size =  2788.00 MiB\n"
      "llama_new_context_with_model: KV self size  = 4352.00 MiB, K (q8_0): 2176.00 MiB, V (q8_0): 2176.00 MiB\n"
      "llama_new_context_with_model:  CUDA_Host  output buffer size =     0.58 MiB\n"
      "llama_new_context_with_model: pipeline parallelism enabled (n_copies=4)\n"
      "llama_new_context_with_model:      CUDA1 compute buffer size =   237.51 MiB\n"
      "llama_new_context_with_model: graph nodes  = 1991\n"
      "llama_new_context_with_model: graph splits = 3\n");
  EXPECT_EQ(log.context.kv_size, 32768);
  EXPECT_EQ(log.context.type_k, "q8_0");
  EXPECT_EQ(log.context.type_v, "q8_0");
  ASSERT_EQ(log.figures.buffers.size(), 3u);
  EXPECT_EQ(log.figures.buffers[0].kind, "KV");
  EXPECT_EQ(log.figures.buffers[1].kind, "output");
  EXPECT_EQ(log.figures.buffers[1].device, "CUDA_Host");
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 0.58);
  EXPECT_EQ(log.figures.buffers[2].kind, "compute");
  EXPECT_DOUBLE_EQ(log.figures.buffers[2].mib, 237.51);
  ASSERT_EQ(log.context.kv_caches.size(), 1u);
  EXPECT_DOUBLE_EQ(log.context.kv_caches[0].mib, 4352.0);
  EXPECT_DOUBLE_EQ(log.context.kv_caches[0].k_mib, 2176.0);
  EXPECT_EQ(log.context.n_copies->value, 4);
  EXPECT_EQ(log.figures.graph_nodes->value, 1991);
  EXPECT_EQ(log.figures.graph_splits->value, 3);
  EXPECT_EQ(log.figures.graph_splits->line, 8);
  EXPECT_TRUE(log.unused.empty());
}

// tests/fidelity/04 (llama.cpp PR#4957, January 2024): "graph splits (measure): 5"; tests/fidelity/05: "input".
TEST(LlamaLog, OldSplitsAndInputBuffer) {
  const LlamaLog log = parse_ok(
      "llama_new_context_with_model: graph splits (measure): 5\n"
      "llama_new_context_with_model:        CPU input buffer size   =     9.01 MiB\n");
  EXPECT_EQ(log.figures.graph_splits->value, 5);
  ASSERT_EQ(log.figures.buffers.size(), 1u);
  EXPECT_EQ(log.figures.buffers[0].kind, "input");
  EXPECT_DOUBLE_EQ(log.figures.buffers[0].mib, 9.01);
}

// tests/fidelity/18 (llama.cpp#21730): the 2026 KV cache total and the iSWA cache sizes.
TEST(LlamaLog, KvCacheNewFormatAndIswa) {
  const LlamaLog log = parse_ok(
      "llama_kv_cache:      CUDA1 KV buffer size =  1024.00 MiB\n"
      "llama_kv_cache: size = 2048.00 MiB (131072 cells,   4 layers,  1/1 seqs), K (f16): 1024.00 MiB, V (f16): "
      "1024.00 MiB\n"
      "llama_kv_cache_iswa: creating     SWA KV cache, size = 1024 cells\n");
  ASSERT_EQ(log.context.kv_caches.size(), 1u);
  const LlamaLogKvCache& kv = log.context.kv_caches[0];
  EXPECT_DOUBLE_EQ(kv.mib, 2048.0);
  EXPECT_EQ(kv.cells, 131072);
  EXPECT_EQ(kv.layers, 4);
  EXPECT_EQ(kv.type_v, "f16");
  EXPECT_DOUBLE_EQ(kv.v_mib, 1024.0);
  EXPECT_EQ(log.context.kv_cells_swa, 1024);
  EXPECT_FALSE(log.context.kv_cells_non_swa);
  EXPECT_EQ(log.context.type_k, "f16");  // from the total, no kv_size line
}

// tests/fidelity/17 (koboldcpp#2262) and 12 (ollama#8447): the context parameters of both formats.
TEST(LlamaLog, ContextParameters) {
  const LlamaLog a = parse_ok(
      "llama_context: n_seq_max     = 1\n"
      "llama_context: n_ctx         = 65792\n"
      "llama_context: n_batch       = 1024\n"
      "llama_context: n_ubatch      = 512\n"
      "llama_context: flash_attn    = enabled\n"
      "llama_context: kv_unified    = true\n");
  EXPECT_EQ(a.context.n_ctx, 65792);
  EXPECT_EQ(a.context.n_batch, 1024);
  EXPECT_EQ(a.context.n_ubatch, 512);
  EXPECT_EQ(a.context.n_seq_max, 1);
  EXPECT_EQ(a.context.flash_attn, "enabled");
  EXPECT_EQ(a.context.params.back().first, "kv_unified");
  const LlamaLog b = parse_ok(
      "llama_new_context_with_model: n_ctx         = 2048\n"
      "llama_new_context_with_model: flash_attn    = 0\n");
  EXPECT_EQ(b.context.n_ctx, 2048);
  EXPECT_EQ(b.context.flash_attn, "0");
}

// tests/fidelity/19 (ik_llama.cpp PR#370) and 21 (llama.cpp PR#22790): the metadata, both formats.
TEST(LlamaLog, ModelMetadata) {
  const LlamaLog a = parse_ok(
      "llama_model_loader: - kv  46:                                split.count u16              = 4\n"
      "llama_model_loader: - type  f32:  471 tensors\n"
      "llama_model_loader: - type q6_K:  660 tensors\n"
      "llm_load_print_meta: arch             = qwen3moe\n"
      "llm_load_print_meta: n_ctx_train      = 131072\n"
      "llm_load_print_meta: n_embd           = 4096\n"
      "llm_load_print_meta: n_layer          = 94\n"
      "llm_load_print_meta: n_head           = 64\n"
      "llm_load_print_meta: n_head_kv        = 4\n"
      "llm_load_print_meta: n_swa            = 0\n");
  EXPECT_EQ(a.model.arch, "qwen3moe");
  EXPECT_EQ(a.model.n_layer, 94);
  EXPECT_EQ(a.model.n_embd, 4096);
  EXPECT_EQ(a.model.n_head, 64);
  EXPECT_EQ(a.model.n_head_kv, 4);
  EXPECT_EQ(a.model.n_swa, 0);
  EXPECT_EQ(a.model.n_ctx_train, 131072);
  ASSERT_EQ(a.model.kv.size(), 1u);
  EXPECT_EQ(a.model.kv[0].first, "split.count");
  EXPECT_EQ(a.model.kv[0].second, "4");
  ASSERT_EQ(a.model.tensor_types.size(), 2u);
  EXPECT_EQ(a.model.tensor_types[1].first, "q6_K");
  EXPECT_EQ(a.model.tensor_types[1].second, 660);
  const LlamaLog b = parse_ok(
      "print_info: file type   = Q4_K - Medium\n"
      "print_info: file size   = 2.31 GiB (5.12 BPW)\n");
  EXPECT_EQ(b.model.file_type, "Q4_K - Medium");
  EXPECT_EQ(b.model.file_size, "2.31 GiB (5.12 BPW)");
}

// The GGUF keys when no print_info line says it (an excerpt cut before print_info). The values are those of the
// Qwen3-30B-A3B header (48 blocks, 128 experts, 8 used) as llama_model_loader prints them.
TEST(LlamaLog, ModelFieldsFromGgufKeys) {
  const LlamaLog log = parse_ok(
      "llama_model_loader: - kv   0:                       general.architecture str              = qwen3moe\n"
      "llama_model_loader: - kv   1:                      qwen3moe.block_count u32              = 48\n"
      "llama_model_loader: - kv   2:                     qwen3moe.expert_count u32              = 128\n"
      "llama_model_loader: - kv   3:                qwen3moe.expert_used_count u32              = 8\n");
  EXPECT_EQ(log.model.arch, "qwen3moe");
  EXPECT_EQ(log.model.n_layer, 48);
  EXPECT_EQ(log.model.n_expert, 128);
  EXPECT_EQ(log.model.n_expert_used, 8);
}

// tests/fidelity/20 (llama.cpp#15125, b6096) and 21: devices, free memory, bus id, build, command line, model path.
TEST(LlamaLog, DevicesBuildCommand) {
  const LlamaLog log = parse_ok(
      "$ ./llama-cli -hf unsloth/gpt-oss-120b-GGUF:BF16 -ngl 99 --n-cpu-moe 30 --tensor-split 9,1\n"
      "  Device 1: NVIDIA GeForce RTX 3060, compute capability 8.6, VMM: yes\n"
      "build: 6096 (fd1234cb) with cc (Debian 12.2.0-14+deb12u1) 12.2.0 for x86_64-linux-gnu\n"
      "llama_model_load_from_file_impl: using device CUDA0 (NVIDIA GeForce RTX 3090) - 22532 MiB free\n"
      "llama_prepare_model_devices: using device CUDA0 (NVIDIA L4) (0000:31:00.0) - 22371 MiB free\n"
      "llama_model_loader: loaded meta data with 37 key-value pairs and 687 tensors from /m/gpt-oss.gguf (version "
      "GGUF V3 (latest))\n");
  ASSERT_TRUE(log.command);
  EXPECT_EQ(log.command->line, 1);
  ASSERT_TRUE(log.build);
  EXPECT_EQ(log.build->text.substr(0, 15), "6096 (fd1234cb)");
  ASSERT_EQ(log.devices.size(), 3u);
  EXPECT_EQ(log.devices[0].index, 1);
  EXPECT_EQ(log.devices[0].description, "NVIDIA GeForce RTX 3060, compute capability 8.6, VMM: yes");
  EXPECT_EQ(log.devices[1].name, "CUDA0");
  EXPECT_EQ(log.devices[1].description, "NVIDIA GeForce RTX 3090");
  EXPECT_EQ(log.devices[1].free_mib, 22532);
  EXPECT_EQ(log.devices[2].description, "NVIDIA L4");
  EXPECT_EQ(log.devices[2].bus_id, "0000:31:00.0");
  EXPECT_EQ(log.devices[2].free_mib, 22371);
  EXPECT_EQ(log.model.path, "/m/gpt-oss.gguf");
}

// tests/fidelity/08 (llama.cpp#20431): the weights' failed allocation, both lines joined; 144817.04 MiB is
// 151851674624 B / 2^20 rounded (151851674624 / 1048576 = 144817.04).
TEST(LlamaLog, FailedModelAllocation) {
  const LlamaLog log = parse_ok(
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 144817.04 MiB on device 0: cudaMalloc failed: out of "
      "memory\n"
      "alloc_tensor_range: failed to allocate CUDA0 buffer of size 151851674624\n"
      "llama_model_load: error loading model: unable to allocate CUDA0 buffer\n");
  ASSERT_EQ(log.failed_allocs.size(), 1u);
  const LlamaLogFailedAlloc& a = log.failed_allocs[0];
  EXPECT_EQ(a.device, "CUDA0");
  EXPECT_EQ(a.device_index, 0);
  EXPECT_DOUBLE_EQ(*a.mib, 144817.04);
  EXPECT_EQ(*a.bytes, 151851674624ull);
  EXPECT_EQ(a.stage, "model");
  EXPECT_EQ(a.line, 1);
  ASSERT_EQ(log.errors.size(), 1u);
  EXPECT_EQ(log.errors[0].line, 3);
}

// tests/fidelity/11 (ollama#15284): two compute allocations fail one after the other (ggml_gallocr_reserve_n_impl).
TEST(LlamaLog, FailedComputeAllocationsOnTwoDevices) {
  const LlamaLog log = parse_ok(
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 19123.94 MiB on device 1: cudaMalloc failed: out of "
      "memory\n"
      "ggml_gallocr_reserve_n_impl: failed to allocate CUDA1 buffer of size 20052907008\n"
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16990.01 MiB on device 2: cudaMalloc failed: out of "
      "memory\n"
      "ggml_gallocr_reserve_n_impl: failed to allocate CUDA2 buffer of size 17815312384\n");
  ASSERT_EQ(log.failed_allocs.size(), 2u);
  EXPECT_EQ(log.failed_allocs[0].device, "CUDA1");
  EXPECT_EQ(log.failed_allocs[0].stage, "compute");
  EXPECT_EQ(*log.failed_allocs[0].bytes, 20052907008ull);
  EXPECT_EQ(log.failed_allocs[1].device, "CUDA2");
  EXPECT_EQ(log.failed_allocs[1].device_index, 2);
  EXPECT_DOUBLE_EQ(*log.failed_allocs[1].mib, 16990.01);
}

// Prefixes: ollama's journal (tests/fidelity/13, 15), docker compose (12), llama.cpp's timestamps, ISO timestamps.
TEST(LlamaLog, CleanPrefixes) {
  EXPECT_EQ(clean_log_line("Jan 10 16:31:02 node1 ollama[119046]: llama_new_context_with_model: graph splits = 3"),
            "llama_new_context_with_model: graph splits = 3");
  EXPECT_EQ(clean_log_line("Apr 17 23:09:42 athena ollama.listener[2840147]:   Device 0: NVIDIA RTX A6000"),
            "Device 0: NVIDIA RTX A6000");
  EXPECT_EQ(clean_log_line("ollama  | llm_load_tensors: offloaded 1/62 layers to GPU"),
            "llm_load_tensors: offloaded 1/62 layers to GPU");
  EXPECT_EQ(clean_log_line("0.00.035.060 I llama_context: n_ctx = 4096"), "llama_context: n_ctx = 4096");
  EXPECT_EQ(clean_log_line("2025-01-10T16:31:02.292+01:00 llama_context: n_ctx = 4096"), "llama_context: n_ctx = 4096");
  EXPECT_EQ(clean_log_line("2025-01-10 16:31:02 llama_context: n_ctx = 4096"), "llama_context: n_ctx = 4096");
  // Not prefixes: a table row, ollama's own lines.
  EXPECT_EQ(clean_log_line("|   512 |    128 |"), "|   512 |    128 |");
  EXPECT_EQ(clean_log_line("[GIN] 2024/12/31 - 01:58:01 | 200 |"), "[GIN] 2024/12/31 - 01:58:01 | 200 |");
}

// ANSI colour codes and CRLF line ends (a log copied from a Windows terminal).
TEST(LlamaLog, ColourAndCrlf) {
  const LlamaLog log = parse_ok(
      "\x1b[32mllama_context:\x1b[0m      CUDA0 compute buffer size =  1958.63 MiB\r\n"
      "llama_context: graph splits = 5\r\n");
  ASSERT_EQ(log.figures.buffers.size(), 1u);
  EXPECT_DOUBLE_EQ(log.figures.buffers[0].mib, 1958.63);
  EXPECT_EQ(log.figures.graph_splits->value, 5);
  EXPECT_EQ(log.lines, 2);
}

// A truncated last line, and lines the reader cannot use, are listed with their line numbers; the fidelity files'
// header and cut markers are skipped.
TEST(LlamaLog, UnusedAndTruncatedLines) {
  const LlamaLog log = parse_ok(
      "# source: https://example.invalid\n"
      "llama_context: graph nodes  = 3126\n"
      "[... cut by Tessera: unknown number of lines ...]\n"
      "# not a header any more\n"
      "\n"
      "llama_context:      CUDA0 compute buffer size =  1958");
  EXPECT_EQ(log.lines, 6);
  EXPECT_EQ(log.lines_used, 1);
  EXPECT_EQ(log.lines_skipped, 3);
  ASSERT_EQ(log.unused.size(), 2u);
  EXPECT_EQ(log.unused[0].line, 4);
  EXPECT_EQ(log.unused[1].line, 6);
  EXPECT_EQ(log.unused[1].text, "llama_context:      CUDA0 compute buffer size =  1958");
  EXPECT_TRUE(log.figures.buffers.empty());
}

TEST(LlamaLog, Errors) {
  auto empty = parse_llama_log("hello\nworld\n", "notes.txt");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.status().message().find("notes.txt: no llama.cpp log line found in 2 lines"), std::string::npos)
      << empty.status().message();
  std::string text = "llama_context: n_ctx = 1\n";
  text += std::string("ab\0c\n", 5);
  auto binary = parse_llama_log(text, "bin.log");
  ASSERT_FALSE(binary.ok());
  EXPECT_EQ(binary.status().message(), "bin.log: line 2: a NUL byte: not a text log");
  auto missing = read_llama_log_file("/nonexistent/x.log");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(), "/nonexistent/x.log: cannot open the log file");
  // A number too long to be a size is not read as one: the line is unused.
  const LlamaLog big = parse_ok(
      "llama_context: graph splits = 1\n"
      "llama_context: CUDA0 compute buffer size = 1234567890123456789012345678901234567890.5 MiB\n");
  EXPECT_TRUE(big.figures.buffers.empty());
  ASSERT_EQ(big.unused.size(), 1u);
}

// Command lines as users paste them (each form from a public thread): a shell prompt before the program
// (llama.cpp#9517), the program in Markdown bold (llama.cpp#11200), the program's path first (llama.cpp PR #22790).
// A log line naming a llama.cpp function, or prose, is not a command.
TEST(LlamaLog, CommandLinesAsUsersPasteThem) {
  for (const char* line : {
           "[gohary@MainPC llama.cpp]$ ./llama-cli -m models/Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf -ngl 999",
           "**llama-server** -a qwenv25coder-32b -ts 10,6 -ngl 99 -c 32768",
           "$ ./build/bin/llama-mtmd-cli -hf ggml-org/gemma-3-4b-it-GGUF --n_gpu_layers 99",
           "./build/bin/llama-server -m /models/x.gguf -c 8192",
           "`llama-cli -m x.gguf -ngl 10`",
           // llama.cpp's CI (ggml-org/ci) prints its commands with the shell's trace prefix
           "+ ./bin/llama-cli -no-cnv --model ../models-mnt/pythia/2.8B/ggml-model-f16.gguf -t 1 -ngl 99 -c 0",
           // a user@host prompt (ik_llama.cpp's github-data, issue #514)
           "(base) mukul@jarvis:~/dev-ai$ ./llama.cpp/llama-cli --model m.gguf -ngl 99",
           // root's prompt (255doesnotexist/bpi-f3_demos, qwen2.md) and PowerShell's (ik_llama.cpp's github-data #380)
           "root@k1:~/llama.cpp# ./llama-cli -m qwen2.gguf -fa -c 32768",
           "PS C:\\neuro\\llama-avx2> ./llama-server.exe -t 8 -c 4096 -m x.gguf",
           // environment assignments before the program (a form seen in users' threads)
           "CUDA_VISIBLE_DEVICES=2 GGML_CUDA_NO_PINNED=1 llama-server -m x.gguf -ngl 80 --no-kv-offload",
       }) {
    const LlamaLog log = parse_ok(std::string(line) + "\nllama_context: n_ctx = 1\n");
    ASSERT_TRUE(log.command) << line;
    EXPECT_EQ(log.command->line, 1) << line;
  }
  // A command continued over several lines with '\' (ik_llama.cpp's github-data, PR #370): one command, its first
  // line's number, every line used.
  const LlamaLog multi = parse_ok(
      "CUDA_VISIBLE_DEVICES=\"0\" \\\n"
      "./build/bin/llama-sweep-bench \\\n"
      "    --model /mnt/x.gguf \\\n"
      "    --no-mmap \\\n"
      "    -ngl 99\n"
      "llama_context: n_ctx = 1\n");
  ASSERT_TRUE(multi.command);
  EXPECT_EQ(multi.command->line, 1);
  EXPECT_NE(multi.command->text.find("--no-mmap"), std::string::npos) << multi.command->text;
  EXPECT_NE(multi.command->text.find("-ngl 99"), std::string::npos) << multi.command->text;
  EXPECT_EQ(multi.lines_used, 6);
  EXPECT_TRUE(multi.unused.empty());
  for (const char* line : {
           "llama_model_loader: - kv   0: general.architecture str = llama",
           "I ran llama-server -ngl 99 and it failed",
           "llama-server: error: unknown argument",
           "./llama-server",
       }) {
    const LlamaLog log = parse_ok(std::string(line) + "\nllama_context: n_ctx = 1\n");
    EXPECT_FALSE(log.command) << line;
  }
}

// tests/fidelity/06 (llama.cpp#11200): llama-server loads a draft model after the main one; the draft's device line
// (and whatever follows) is not read as the main model's.
TEST(LlamaLog, DraftModelLinesAreNotRead) {
  const LlamaLog log = parse_ok(
      "llama_new_context_with_model: graph splits = 3\n"
      "srv    load_model: loading draft model 'qwen2.5-coder:1.5b-instruct-q8_0.gguf'\n"
      "llama_model_load_from_file: using device CUDA1 (NVIDIA GeForce RTX 3090 Ti) - 9866 MiB free\n"
      "llama_new_context_with_model: n_ctx = 32768\n");
  EXPECT_EQ(log.draft_line, 2);
  EXPECT_TRUE(log.devices.empty());
  EXPECT_FALSE(log.context.n_ctx);
  EXPECT_EQ(log.lines_used, 1);
  ASSERT_EQ(log.unused.size(), 3u);
  EXPECT_EQ(log.unused[0].line, 2);
}

// A KV cache that does not fit: alloc_tensor_range fails, then llama_kv_cache_init says the buffer was the cache's
// (llama.cpp src/llama-kv-cache.cpp: "failed to allocate buffer for kv cache").
TEST(LlamaLog, FailedKvCacheAllocation) {
  const LlamaLog log = parse_ok(
      "ggml_backend_cuda_buffer_type_alloc_buffer: allocating 16384.00 MiB on device 0: cudaMalloc failed: out of "
      "memory\n"
      "alloc_tensor_range: failed to allocate CUDA0 buffer of size 17179869184\n"
      "llama_kv_cache_init: failed to allocate buffer for kv cache\n");
  ASSERT_EQ(log.failed_allocs.size(), 1u);
  EXPECT_EQ(log.failed_allocs[0].stage, "kv");
  EXPECT_EQ(*log.failed_allocs[0].bytes, 17179869184ull);
}

// The architecture from its keys' prefix when general.architecture was not printed (llama.cpp#11200's excerpt), and
// the bench tools' parameter line (ik_llama.cpp PR #370, tests/fidelity/19): n_kv_max is the context size.
TEST(LlamaLog, ArchFromKeyPrefixAndBenchParameters) {
  const LlamaLog log = parse_ok(
      "llama_model_loader: - kv  18:                          qwen2.block_count u32              = 64\n"
      "main: n_kv_max = 16384, n_batch = 2048, n_ubatch = 512, flash_attn = 1, n_gpu_layers = 99, n_threads = 32\n");
  EXPECT_EQ(log.model.arch, "qwen2");
  EXPECT_EQ(log.model.n_layer, 64);
  EXPECT_EQ(log.context.n_ctx, 16384);
  EXPECT_EQ(log.context.n_batch, 2048);
  // early 2025's cache line (ggml-org/ci, build 4700s): "init: kv_size = ..."
  const LlamaLog init =
      parse_ok("init: kv_size = 2048, offload = 1, type_k = 'q8_0', type_v = 'q8_0', n_layer = 32, can_shift = 1\n");
  EXPECT_EQ(init.context.kv_size, 2048);
  EXPECT_EQ(init.context.type_k, "q8_0");
  // early 2025's context lines (ggml-org/ci, build 4463): "llama_init_from_model: n_ctx = ..."
  const LlamaLog from_model = parse_ok("llama_init_from_model: n_ctx         = 512\n");
  EXPECT_EQ(from_model.context.n_ctx, 512);
  // tests/fidelity/14 (ollama#11986): "layer N assigned to device CUDAk" lines.
  const LlamaLog layers = parse_ok(
      "load_tensors: layer   0 assigned to device CUDA0, is_swa = 0\n"
      "load_tensors: layer  79 assigned to device CUDA2, is_swa = 0\n");
  ASSERT_EQ(layers.context.layer_devices.size(), 2u);
  EXPECT_EQ(layers.context.layer_devices[1].first, 79);
  EXPECT_EQ(layers.context.layer_devices[1].second, "CUDA2");
}

// tests/fidelity/49 (secext2022/pmks-2, b3617 built without its history): the 2024 Vulkan backend's device list, its
// model buffer named by the device's description, and its failed allocation, whose stage the next line gives.
TEST(LlamaLog, VulkanDevicesBuffersAndFailedKvAllocation) {
  const LlamaLog log = parse_ok(
      "ggml_vulkan: Found 1 Vulkan devices:\n"
      "Vulkan0: Intel(R) HD Graphics 520 (SKL GT2) (Intel open-source Mesa driver) | uma: 1 | fp16: 1 | warp size: 32\n"
      "llm_load_tensors: offloaded 29/29 layers to GPU\n"
      "llm_load_tensors:        CPU buffer size =   552.23 MiB\n"
      "llm_load_tensors: Intel(R) HD Graphics 520 (SKL GT2) buffer size =  7165.44 MiB\n"
      "ggml_vulkan: Device memory allocation of size 1879048192 failed.\n"
      "ggml_vulkan: vk::Device::allocateMemory: ErrorOutOfDeviceMemory\n"
      "llama_kv_cache_init: failed to allocate buffer for kv cache\n");
  ASSERT_EQ(log.devices.size(), 1u);
  EXPECT_EQ(log.devices[0].name, "Vulkan0");
  EXPECT_EQ(log.devices[0].index, 0);
  EXPECT_EQ(log.devices[0].description, "Intel(R) HD Graphics 520 (SKL GT2) (Intel open-source Mesa driver)");
  ASSERT_EQ(log.figures.buffers.size(), 2u);
  EXPECT_EQ(log.figures.buffers[1].device, "Vulkan0");
  EXPECT_EQ(log.figures.buffers[1].kind, "model");
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 7165.44);
  ASSERT_EQ(log.failed_allocs.size(), 1u);
  EXPECT_EQ(log.failed_allocs[0].device, "Vulkan0");
  EXPECT_EQ(log.failed_allocs[0].bytes, 1879048192u);
  EXPECT_EQ(log.failed_allocs[0].stage, "kv");
}

// Several Vulkan devices: the failed allocation names none of them (the line does not say which).
TEST(LlamaLog, VulkanFailureWithSeveralDevicesNamesNone) {
  const LlamaLog log = parse_ok(
      "Vulkan0: AMD Radeon RX 7900 XTX (RADV NAVI31) | uma: 0 | fp16: 1 | warp size: 64\n"
      "Vulkan1: AMD Radeon RX 6800 (RADV NAVI21) | uma: 0 | fp16: 1 | warp size: 64\n"
      "ggml_vulkan: Device memory allocation of size 1024 failed.\n");
  ASSERT_EQ(log.devices.size(), 2u);
  ASSERT_EQ(log.failed_allocs.size(), 1u);
  EXPECT_EQ(log.failed_allocs[0].device, "");
  EXPECT_EQ(log.failed_allocs[0].device_index, -1);
  EXPECT_EQ(log.failed_allocs[0].bytes, 1024u);
}

// llama-cli --version's build line, and llama-server's slots (the context when no n_ctx line was kept).
// llama.cpp's memory breakdown table: a GPU's row, the host's, another buffer type's (llama.cpp's docs/backend/
// snapdragon: "HTP0-REPACK"); rows whose sums do not add up, or that are cut, are not used. A table printed by the fit
// before it changed the parameters is no figure of the run: its figures say so.
TEST(LlamaLog, MemoryBreakdownRows) {
  const LlamaLog log = parse_ok(
      "llama_memory_breakdown_print: | memory breakdown [MiB] | total   free    self   model   context   compute    "
      "unaccounted |\n"
      "llama_memory_breakdown_print: |   - HTP0 (Hexagon)     |  2048 = 2048 + (   0 =     0 +       0 +       0) +"
      "           0 |\n"
      "llama_memory_breakdown_print: |   - Host               |                  439 =   225 +     136 +      77"
      "                |\n"
      "llama_memory_breakdown_print: |   - HTP0-REPACK        |                  504 =   504 +       0 +       0"
      "                |\n"
      "llama_memory_breakdown_print: |   - CUDA0 (RTX 4090)   | 24077 =  945 + (19187 = 17904 +     384 +    8990) +"
      "        3945 |\n"
      "llama_memory_breakdown_print: |   - CUDA1 (RTX 4090)   | 24077 =  945 + (19187 = 17904 +\n");
  ASSERT_EQ(log.figures.breakdown.size(), 3u);
  EXPECT_EQ(log.figures.breakdown[0].device, "HTP0");
  EXPECT_EQ(log.figures.breakdown[0].description, "Hexagon");
  EXPECT_EQ(log.figures.breakdown[0].total.value_or(-1), 2048);
  EXPECT_EQ(log.figures.breakdown[1].device, "Host");
  EXPECT_FALSE(log.figures.breakdown[1].total.has_value());
  EXPECT_EQ(log.figures.breakdown[1].self, 439);
  EXPECT_EQ(log.figures.breakdown[1].model, 225);
  EXPECT_EQ(log.figures.breakdown[1].context, 136);
  EXPECT_EQ(log.figures.breakdown[1].compute, 77);
  EXPECT_EQ(log.figures.breakdown[2].device, "HTP0-REPACK");
  EXPECT_FALSE(log.figures.breakdown[2].fit);
  ASSERT_EQ(log.unused.size(), 2u);  // 17904 + 384 + 8990 is not 19187; the cut row
  EXPECT_EQ(log.unused[0].line, 5);
  EXPECT_FALSE(log.fit_ran);

  const LlamaLog fit = parse_ok(
      "common_params_fit_impl: getting device memory data for initial parameters:\n"
      "common_memory_breakdown_print: |   - CUDA0 (L4)         | 22565 = 22371 + (5619 =  2368 +    2734 +     517) +"
      "       -5425 |\n"
      "common_params_fit_impl: projected to use 5619 MiB of device memory vs. 4000 MiB of free device memory\n");
  ASSERT_EQ(fit.figures.breakdown.size(), 1u);
  EXPECT_TRUE(fit.figures.breakdown[0].fit);
  EXPECT_TRUE(fit.fit_ran);
  EXPECT_FALSE(fit.fit_unchanged);
  auto p = predict_log(fit);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p.value().figures.size(), 3u);
  EXPECT_FALSE(p.value().figures[0].predicted.has_value());
  EXPECT_NE(p.value().figures[0].missing.find("printed by llama.cpp's fit for the parameters it started from"),
            std::string::npos)
      << p.value().figures[0].missing;
}

// -sm tensor: ggml's meta device prints one "Meta()" line per buffer (the largest GPU's share); 2026's llama-server
// prints its build as "build_info: b9008-cd35c1466". Lines from heislera763's log in llama.cpp PR #22616 (2026-05-02,
// Gemma 4 31B on 6 x V100). The buffers are read; this excerpt names no GPU, so the meta device cannot be run and
// each figure says so (tests/side-by-side/08-10: logs of the meta device, predicted).
TEST(LlamaLog, MetaDeviceBuffersAndBuildInfo) {
  const LlamaLog log = parse_ok(
      "build_info: b9008-cd35c1466\n"
      "load_tensors: offloaded 61/61 layers to GPU\n"
      "load_tensors:   CPU_Mapped model buffer size =  1428.00 MiB\n"
      "load_tensors:       Meta() model buffer size =  6400.51 MiB\n");
  ASSERT_TRUE(log.build.has_value());
  EXPECT_EQ(log.build->text, "9008 (cd35c1466)");
  ASSERT_EQ(log.figures.buffers.size(), 2u);
  EXPECT_EQ(log.figures.buffers[1].device, "Meta()");
  EXPECT_EQ(log.figures.buffers[1].kind, "model");
  EXPECT_DOUBLE_EQ(log.figures.buffers[1].mib, 6400.51);
  EXPECT_TRUE(log.unused.empty());
  LogPredictOptions o;
  o.model_file = "llama-3.1-8b-q8_0";
  auto p = predict_log(log, o);
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p.value().figures.size(), 2u);
  for (const LogFigure& f : p.value().figures) {
    EXPECT_FALSE(f.predicted.has_value());
    EXPECT_THAT(f.missing, ::testing::HasSubstr("split mode tensor (the log's Meta() buffers): the meta device cannot "
                                                "be run: no GPU named"));
  }
  // a buffer name with other parentheses is no buffer line
  const LlamaLog other = parse_ok(
      "load_tensors: offloaded 1/1 layers to GPU\n"
      "load_tensors:   Meta(CUDA0) model buffer size =  1.00 MiB\n");
  EXPECT_TRUE(other.figures.buffers.empty());
  EXPECT_EQ(other.unused.size(), 1u);
}

TEST(LlamaLog, VersionLineAndServerSlots) {
  auto log = parse_llama_log(
      "version: 5261 (cb06a3c3)\n"
      "srv          init: initializing slots, n_slots = 2\n"
      "slot         init: id  0 | task -1 | new slot n_ctx_slot = 30016\n"
      "slot         init: id  1 | task -1 | new slot n_ctx_slot = 30016\n",
      "t.log");
  ASSERT_TRUE(log.ok()) << log.status().message();
  ASSERT_TRUE(log->build.has_value());
  EXPECT_EQ(log->build->text, "5261 (cb06a3c3)");
  EXPECT_EQ(log->context.n_slots, 2);
  EXPECT_EQ(log->context.n_ctx_slot, 30016);
  EXPECT_TRUE(log->unused.empty());
}

}  // namespace
