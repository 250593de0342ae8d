// The log reader over every real log of tests/fidelity/ (issue 31; each file's header cites its public issue): the
// figures it extracts against the values copied by hand from the log text below (buffer lines in log order, graph
// nodes and splits, failed allocations, a few parameters). A log added to tests/fidelity/ without a row here fails.
#include <gtest/gtest.h>

#include <algorithm>
#include <dirent.h>
#include <string>
#include <vector>

#include "tessera/llama/llama_log.h"

using namespace tessera;
using namespace tessera::llama;

namespace {

struct Buf {
  const char* device;
  const char* kind;
  double mib;
};
struct Fail {
  const char* device;
  double mib;  // 0: not printed
  uint64_t bytes;
  const char* stage;
};
struct Expected {
  const char* file;
  std::vector<Buf> buffers;
  int64_t nodes = -1, splits = -1;  // -1: not printed
  std::vector<Fail> fails;
  int64_t n_ctx = -1;
  const char* type_k = "";
  int64_t offloaded = -1;  // "offloaded N/M layers"
  const char* arch = "";
  int64_t n_layer = -1;
};

std::vector<Expected> expected() {
  return {
      {"01-qwen3moe-30b-a3b-partial-1gpu.log",
       {{"CUDA0", "model", 10750.86}, {"CPU_Mapped", "model", 6940.48}},
       -1,
       -1,
       {},
       4096,
       "",
       30},
      {"02-4gpu-rowsplit.log",
       {{"CUDA0_Split", "model", 248.62},
        {"CUDA1_Split", "model", 241.50},
        {"CUDA2_Split", "model", 229.50},
        {"CUDA3_Split", "model", 536.67},
        {"CUDA0", "model", 7969.22},
        {"CUDA1", "model", 7344.20},
        {"CUDA2", "model", 7356.20},
        {"CUDA2", "KV", 703.50},
        {"CUDA3", "KV", 644.88},
        {"CUDA0", "compute", 1958.63},
        {"CUDA1", "compute", 1958.63},
        {"CUDA2", "compute", 1958.63},
        {"CUDA3", "compute", 1958.63},
        {"CUDA_Host", "compute", 62.63}},
       3126,
       5,
       {},
       -1,
       "f16"},
      {"03-2gpu-pipeline-parallel-old-format.log",
       {{"CPU", "model", 1640.62},
        {"CUDA0", "model", 5434.38},
        {"CUDA1", "model", 13989.53},
        {"CUDA0", "KV", 1536.00},
        {"CUDA1", "KV", 3584.00},
        {"CUDA_Host", "output", 1.95},
        {"CUDA0", "compute", 672.01}},
       -1,
       -1,
       {},
       4096,
       "f16",
       41},
      {"04-mixtral-8x7b-partial-10of33-old-format.log",
       {{"CPU", "model", 47324.64},
        {"CUDA0", "model", 14705.94},
        {"CUDA_Host", "KV", 44.00},
        {"CUDA0", "KV", 20.00},
        {"CUDA0", "compute", 108.03},
        {"CUDA_Host", "compute", 109.04}},
       -1,
       5,
       {},
       512,
       "f16",
       10},
      {"05-mixtral-iq2xxs-cpu-only-old-format.log",
       {{"CPU", "model", 11712.97}, {"CPU", "KV", 64.00}, {"CPU", "input", 9.01}, {"CPU", "compute", 114.53}},
       -1,
       -1,
       {},
       512,
       "f16",
       0},
      {"06-64layer-q8kv-2gpu.log",
       {{"CUDA0", "KV", 2788.00},
        {"CUDA1", "KV", 1564.00},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "compute", 233.00},
        {"CUDA1", "compute", 237.51},
        {"CUDA_Host", "compute", 133.01}},
       1991,
       3,
       {},
       -1,
       "q8_0",
       -1,
       "qwen2"},  // no general.architecture line: the prefix of "qwen2.attention.head_count" (line 28)
      {"07-64layer-q8kv-rocm-1gpu.log",
       {{"ROCm0", "KV", 4352.00},
        {"ROCm_Host", "output", 0.58},
        {"ROCm0", "compute", 307.00},
        {"ROCm_Host", "compute", 74.01}},
       1991,
       2,
       {},
       -1,
       "q8_0",
       -1,
       "",
       64},
      {"08-oom-model-buffer-cuda0.log", {}, -1, -1, {{"CUDA0", 144817.04, 151851674624ull, "model"}}},
      {"09-apertus-70b-rocm-2gpu-fa-oom-compute.log", {}, -1, -1, {{"ROCm0", 14136.04, 14822711296ull, "compute"}}},
      {"10-5gpu-oom-compute-old-format.log",
       {{"CUDA_Host", "output", 0.49}},
       -1,
       -1,
       {{"CUDA4", 144.00, 150995968ull, "compute"}},
       -1,
       "f16"},
      {"11-gemma4-31b-ollama-3gpu-oom-compute.log",
       {},
       -1,
       -1,
       {{"CUDA1", 19123.94, 20052907008ull, "compute"}, {"CUDA2", 16990.01, 17815312384ull, "compute"}}},
      {"12-deepseek-class-ollama-partial-1of62-old-format.log",
       {{"CPU_Mapped", "model", 378582.96},
        {"CUDA0", "model", 7106.67},
        {"CPU", "KV", 9600.00},
        {"CUDA0", "KV", 160.00}},
       -1,
       -1,
       {},
       2048,
       "f16",
       1},
      {"13-ollama-2gpu-partial-39of41-old-format.log",
       {{"CPU", "model", 70752.49}, {"CUDA0", "model", 45460.59}},
       -1,
       -1,
       {},
       -1,
       "",
       39},
      {"14-80layer-ollama-2gpu-new-format.log",
       {{"CUDA0", "model", 24277.75}, {"CUDA2", "model", 46151.91}, {"CPU_Mapped", "model", 1064.62}},
       -1,
       -1,
       {},
       -1,
       "",
       81},
      {"15-ollama-2gpu-context-old-format.log",
       {{"CUDA0", "KV", 5120.00},
        {"CUDA1", "KV", 3072.00},
        {"CUDA_Host", "output", 0.60},
        {"CUDA0", "compute", 2896.01},
        {"CUDA1", "compute", 2896.02},
        {"CUDA_Host", "compute", 266.02}},
       2246,
       3,
       {},
       -1,
       "f16"},
      {"16-deepseek-8gpu-ollama-full-offload.log",
       {{"CUDA0", "model", 48928.09},
        {"CUDA1", "model", 70752.48},
        {"CUDA2", "model", 71680.09},
        {"CUDA3", "model", 52215.30},
        {"CUDA4", "model", 45108.64},
        {"CUDA5", "model", 46036.25},
        {"CUDA6", "model", 28426.68}},
       -1,
       -1,
       {},
       -1,
       "",
       62,
       "deepseek2"},
      {"17-gemma4-moe-koboldcpp-1gpu-fa-swa.log",
       {{"CUDA0", "model", 11524.27}, {"CUDA_Host", "model", 2445.64}},
       -1,
       -1,
       {},
       65792,
       "",
       31,
       "gemma4"},
      {"18-gemma4-3gpu-iswa-kv.log",
       {{"CUDA0", "KV", 512.00}, {"CUDA1", "KV", 1024.00}, {"CUDA2", "KV", 512.00}},
       -1,
       -1,
       {},
       -1,
       "f16"},
      {"19-qwen3moe-235b-ik-llama-2gpu-fa-q8kv.log",
       {{"CUDA0", "KV", 816.02},
        {"CUDA1", "KV", 782.02},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "compute", 144.00},
        {"CUDA1", "compute", 312.75},
        {"CUDA_Host", "compute", 120.01}},
       3672,
       336,
       {},
       16384,  // "main: n_kv_max = 16384" (line 53)
       "q8_0",
       -1,
       "qwen3moe",
       94},
      {"20-gpt-oss-120b-3gpu-ncpumoe-cmdline.log", {}, -1, -1, {}, -1, "", -1, "gpt-oss", 36},
      {"21-gemma3-4b-L4-metadata.log", {}, -1, -1, {}, -1, "", -1, "gemma3", 34},
      {"22-ollama-1gpu-full-context-old-format.log",
       {{"CUDA0", "KV", 896.00},
        {"CUDA_Host", "output", 2.00},
        {"CUDA0", "compute", 424.00},
        {"CUDA_Host", "compute", 22.01}},
       902,
       2,
       {},
       -1,
       "f16",
       -1,
       "llama",
       28},
      {"23-qwen2.5-7b-ollama-cpu-only-old-format.log",
       {{"CPU", "model", 4460.45}, {"CPU", "KV", 448.00}, {"CPU", "output", 2.38}, {"CPU", "compute", 492.01}},
       986,
       1,
       {},
       8192,
       "f16"},
      {"24-llama3.1-8b-dolphin3-ollama-1gpu-old-format.log",
       {{"CPU", "model", 281.82},
        {"CUDA0", "model", 4403.50},
        {"CUDA0", "KV", 1024.00},
        {"CUDA_Host", "output", 2.02},
        {"CUDA0", "compute", 560.00},
        {"CUDA_Host", "compute", 24.01}},
       1030,
       2,
       {},
       8192,
       "f16",
       33,
       "llama",
       32},
      {"25-open-llama-7b-f16-v100-ci-old-format.log",
       {{"CPU", "model", 250.00},
        {"CUDA0", "model", 12603.02},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"26-open-llama-7b-q8_0-v100-ci-old-format.log",
       {{"CPU", "model", 132.81},
        {"CUDA0", "model", 6695.84},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"27-open-llama-7b-q4_0-v100-ci-old-format.log",
       {{"CPU", "model", 70.31},
        {"CUDA0", "model", 3577.56},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"28-open-llama-7b-q5_1-perplexity-ctx2048-v100-ci-old-format.log",
       {{"CPU", "model", 93.75},
        {"CUDA0", "model", 4735.56},
        {"CUDA0", "KV", 1024.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 164.00},
        {"CUDA_Host", "compute", 12.00}},
       1060,
       2,
       {},
       2048,
       "f16",
       33,
       "llama",
       32},
      {"29-open-llama-7b-q2_k-v100-ci-old-format.log",
       {{"CPU", "model", 41.02},
        {"CUDA0", "model", 2373.81},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"30-open-llama-7b-q3_k-v100-ci-old-format.log",
       {{"CPU", "model", 53.71},
        {"CUDA0", "model", 3090.81},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"31-open-llama-7b-q4_k-v100-ci-old-format.log",
       {{"CPU", "model", 70.31},
        {"CUDA0", "model", 3820.94},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"32-open-llama-7b-q5_k-v100-ci-old-format.log",
       {{"CPU", "model", 85.94},
        {"CUDA0", "model", 4474.94},
        {"CUDA0", "KV", 256.00},
        {"CUDA_Host", "output", 62.50},
        {"CUDA0", "compute", 70.50},
        {"CUDA_Host", "compute", 9.00}},
       1060,
       2,
       {},
       512,
       "f16",
       33,
       "llama",
       32},
      {"33-qwen3moe-235b-q6k-2gpu-fa-q8kv-ot.log",
       {{"CPU_Mapped", "model", 46604.38},
        {"CPU_Mapped", "model", 47377.52},
        {"CPU_Mapped", "model", 47377.52},
        {"CPU_Mapped", "model", 42166.10},
        {"CUDA0", "model", 15922.41},
        {"CUDA1", "model", 16297.68},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "KV", 816.00},
        {"CUDA1", "KV", 782.00},
        {"CUDA0", "compute", 774.00},
        {"CUDA1", "compute", 304.75},
        {"CUDA_Host", "compute", 40.01}},
       5741,
       463,
       {},
       16384,
       "q8_0",
       95,
       "qwen3moe",
       94},
      {"34-qwen3moe-30b-a3b-q4km-2gpu-ot-exps-cpu.log",
       {{"CPU_Mapped", "model", 17447.91},
        {"CUDA0", "model", 135.76},
        {"CUDA1", "model", 648.66},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "KV", 384.00},
        {"CUDA1", "KV", 1152.00},
        {"CUDA0", "compute", 1080.00},
        {"CUDA1", "compute", 1080.00},
        {"CUDA_Host", "compute", 36.01}},
       3222,
       183,
       {},
       16384,
       "f16",
       49,
       "qwen3moe",
       48},
      {"35-qwen3moe-235b-q6k-cpu-weights-2gpu-fa-q8kv.log",
       {{"CPU_Mapped", "model", 47091.25},
        {"CPU_Mapped", "model", 47433.32},
        {"CPU_Mapped", "model", 47377.52},
        {"CPU_Mapped", "model", 42166.10},
        {"CPU", "output", 0.58},
        {"CPU", "KV", 1598.00},
        {"CUDA0", "compute", 742.00},
        {"CPU", "compute", 304.75},
        {"CUDA_Host", "compute", 65.01}},
       5741,
       1602,
       {},
       16384,
       "q8_0",
       0,
       "qwen3moe",
       94},
      {"36-qwen3moe-235b-q6k-1gpu-ot-fa-q8kv.log",
       {{"CUDA0", "model", 15191.95},
        {"CPU_Mapped", "model", 46604.38},
        {"CPU_Mapped", "model", 47377.52},
        {"CPU_Mapped", "model", 47377.52},
        {"CPU_Mapped", "model", 42166.10},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "KV", 1598.00},
        {"CUDA0", "compute", 774.00},
        {"CPU", "compute", 8.25},
        {"CUDA_Host", "compute", 40.01}},
       5741,
       536,
       {},
       16384,
       "q8_0",
       95,
       "qwen3moe",
       94},
      {"37-qwen3moe-235b-q8_0-1gpu-nommap-ot-fa-q8kv.log",
       {{"CUDA_Host", "model", 630.59},
        {"CUDA0", "model", 41723.89},
        {"CPU", "model", 196001.25},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "KV", 3196.00},
        {"CUDA0", "compute", 1024.00},
        {"CUDA_Host", "compute", 72.01}},
       5741,
       402,
       {},
       32768,
       "q8_0",
       95,
       "qwen3moe",
       94},
      {"41-qwen3-0.6b-q8_0-cpu-lab-report.log",
       {{"CPU_Mapped", "model", 604.15}, {"CPU", "output", 0.58}, {"CPU", "KV", 448.00}, {"CPU", "compute", 298.75}},
       1126,
       1,
       {},
       4096,
       "f16",
       -1,
       "qwen3",
       28},
      {"42-qwen2-0.5b-q5_k_m-riscv-cpu-fa-old-format.log",
       {{"CPU", "model", 394.95}, {"CPU", "KV", 384.00}, {"CPU", "output", 0.58}, {"CPU", "compute", 298.50}},
       751,
       1,
       {},
       32768,
       "f16",
       -1,
       "qwen2",
       24},
      {"43-qwen3-32b-q4_0-ik-llama-arm-cpu-old-format.log",
       {{"CPU", "model", 17830.96}, {"CPU", "KV", 10240.00}, {"CPU", "output", 0.58}, {"CPU", "compute", 5252.01}},
       1989,
       1,
       {},
       40960,
       "f16",
       -1,
       "qwen3",
       64},
      {"44-gpt-oss-20b-mxfp4-1gpu-ncpumoe-fa-iswa.log",
       {{"CUDA0", "model", 1242.03},
        {"CPU_Mapped", "model", 10949.33},
        {"CUDA_Host", "output", 0.77},
        {"CUDA0", "KV", 3072.00},
        {"CUDA0", "KV", 18.00},
        {"CUDA0", "compute", 456.98},
        {"CUDA_Host", "compute", 263.15}},
       1352,
       146,
       {},
       131072,
       "f16",
       25,
       "gpt-oss",
       24},
      {"45-phi3-mini-4k-q4_k_m-cpu-rust-bindings-old-format.log",
       {{"CPU_Mapped", "model", 2281.66}, {"CPU", "KV", 768.00}, {"CPU", "output", 0.12}, {"CPU", "compute", 168.01}},
       1286,
       1,
       {},
       2048,
       "f16",
       -1,
       "phi3",
       32},
      {"46-qwen3moe-30b-a3b-q4_k_m-3090ti-fa-sweep-bench.log",
       {{"CUDA0", "model", 17596.43},
        {"CPU_Mapped", "model", 166.92},
        {"CUDA_Host", "output", 0.58},
        {"CUDA0", "KV", 3072.00},
        {"CUDA0", "compute", 300.75},
        {"CUDA_Host", "compute", 68.01}},
       2935,
       2,
       {},
       32768,
       "f16",
       49,
       "qwen3moe",
       48},
      {"47-qwen3moe-30b-a3b-q5_k_m-windows-cpu.log",
       {{"CPU_Mapped", "model", 20713.44}, {"CPU", "output", 0.58}, {"CPU", "KV", 384.00}, {"CPU", "compute", 300.75}},
       3126,
       1,
       {},
       4096,
       "f16",
       0,
       "qwen3moe",
       48},
      {"48-gpt-oss-20b-ik-llama-1gpu-oom-compute-old-format.log",
       {{"CPU", "model", 10335.57},
        {"CPU", "model", 586.82},
        {"CUDA0", "model", 1242.03},
        {"CUDA0", "KV", 6144.00},
        {"CUDA_Host", "output", 1.53}},
       -1,
       -1,
       {{"CUDA0", 16929.88, 17752270848ull, "compute"}},
       131072,
       "f16",
       25,
       "gpt-oss",
       24},
      {"49-qwen2-7b-q8_0-vulkan-hd520-oom-kv-spliced-old-format.log",
       {{"CPU", "model", 552.23}, {"Vulkan0", "model", 7165.44}},
       -1,
       -1,
       {{"Vulkan0", 0, 1879048192ull, "kv"}},
       32768,
       "",
       29,
       "qwen2",
       28},
      {"50-qwen3moe-30b-a3b-q4_k_m-vulkan-3090-ub2048-fa-fit.log",
       {{"CPU_Mapped", "model", 166.92},
        {"Vulkan0", "model", 17524.42},
        {"Vulkan_Host", "output", 0.58},
        {"Vulkan0", "KV", 768.00},
        {"Vulkan0", "compute", 368.04},
        {"Vulkan_Host", "compute", 64.05}},
       3030,
       2,
       {},
       8192,
       "f16",
       49,
       "qwen3moe",
       48},
      {"51-qwen3-8b-q4_k_m-vulkan-3090-ub2048-fa-fit.log",
       {{"CPU_Mapped", "model", 333.84},
        {"Vulkan0", "model", 4455.34},
        {"Vulkan_Host", "output", 0.58},
        {"Vulkan0", "KV", 1152.00},
        {"Vulkan0", "compute", 384.04},
        {"Vulkan_Host", "compute", 96.05}},
       1266,
       2,
       {},
       8192,
       "f16",
       37,
       "qwen3",
       36},
      {"52-gpt-oss-20b-mxfp4-metal-m5-ncmoe12-nommap-np4.log",
       {{"CPU", "model", 599.48},
        {"CPU_REPACK", "model", 4841.02},
        {"MTL0", "model", 6095.68},
        {"CPU", "output", 3.07},
        {"MTL0", "KV", 768.00},
        {"MTL0", "KV", 24.00},
        {"MTL0", "compute", 398.38},
        {"CPU", "compute", 144.77}},
       1352,
       26,
       {},
       32768,
       "f16",
       25,
       "gpt-oss",
       24},
      {"53-gpt-oss-20b-q4_k_m-metal-m5-mmap-np4-ctx131072.log",
       {{"CPU_Mapped", "model", 379.71},
        {"MTL0_Mapped", "model", 11073.83},
        {"CPU", "output", 3.07},
        {"MTL0", "KV", 3072.00},
        {"MTL0", "KV", 24.00},
        {"MTL0", "compute", 420.83},
        {"CPU", "compute", 269.27}},
       1352,
       2,
       {},
       131072,
       "f16",
       25,
       "gpt-oss",
       24},
      {"54-gpt-oss-20b-mxfp4-metal-m5-mmap-np1-ctx131072.log",
       {{"CPU_Mapped", "model", 586.82},
        {"MTL0_Mapped", "model", 11536.18},
        {"CPU", "output", 0.77},
        {"MTL0", "KV", 3072.00},
        {"MTL0", "KV", 18.00},
        {"MTL0", "compute", 420.08},
        {"CPU", "compute", 268.77}},
       1352,
       2,
       {},
       131072,
       "f16",
       25,
       "gpt-oss",
       24},
  };
}

std::string fidelity_dir() { return TESSERA_SOURCE_DIR "/tests/fidelity/"; }

TEST(LlamaLogFidelity, EveryStoredLogHasExpectations) {
  std::vector<std::string> files;
  DIR* dir = opendir(fidelity_dir().c_str());
  ASSERT_NE(dir, nullptr);
  while (dirent* e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() > 4 && name.substr(name.size() - 4) == ".log") files.push_back(name);
  }
  closedir(dir);
  std::sort(files.begin(), files.end());
  std::vector<std::string> listed;
  for (const Expected& e : expected()) listed.push_back(e.file);
  EXPECT_EQ(files, listed);
}

TEST(LlamaLogFidelity, FiguresMatchTheLogText) {
  for (const Expected& e : expected()) {
    SCOPED_TRACE(e.file);
    auto r = read_llama_log_file(fidelity_dir() + e.file);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const LlamaLog& log = r.value();
    ASSERT_EQ(log.figures.buffers.size(), e.buffers.size());
    for (size_t i = 0; i < e.buffers.size(); ++i) {
      EXPECT_EQ(log.figures.buffers[i].device, e.buffers[i].device) << i;
      EXPECT_EQ(log.figures.buffers[i].kind, e.buffers[i].kind) << i;
      EXPECT_DOUBLE_EQ(log.figures.buffers[i].mib, e.buffers[i].mib) << i;
    }
    EXPECT_EQ(log.figures.graph_nodes ? log.figures.graph_nodes->value : -1, e.nodes);
    EXPECT_EQ(log.figures.graph_splits ? log.figures.graph_splits->value : -1, e.splits);
    ASSERT_EQ(log.failed_allocs.size(), e.fails.size());
    for (size_t i = 0; i < e.fails.size(); ++i) {
      EXPECT_EQ(log.failed_allocs[i].device, e.fails[i].device);
      EXPECT_DOUBLE_EQ(log.failed_allocs[i].mib.value_or(0), e.fails[i].mib);
      EXPECT_EQ(log.failed_allocs[i].bytes.value_or(0), e.fails[i].bytes);
      EXPECT_EQ(log.failed_allocs[i].stage, e.fails[i].stage);
    }
    EXPECT_EQ(log.context.n_ctx.value_or(-1), e.n_ctx);
    EXPECT_EQ(log.context.type_k, e.type_k);
    EXPECT_EQ(log.context.offloaded_layers ? log.context.offloaded_layers->value : -1, e.offloaded);
    EXPECT_EQ(log.model.arch, e.arch);
    EXPECT_EQ(log.model.n_layer.value_or(-1), e.n_layer);
    // Every line is used, skipped or listed.
    EXPECT_EQ(log.lines_used + log.lines_skipped + static_cast<int>(log.unused.size()), log.lines);
  }
}

// llama.cpp's memory breakdown tables (common_memory_breakdown_print / llama_memory_breakdown_print), each row copied
// by hand from the log text: device, total, free, self, model, context, compute (-1: not printed), printed by the fit
// for its starting parameters. The logs without a table have no row.
TEST(LlamaLogFidelity, MemoryBreakdownTablesMatchTheLogText) {
  struct Row {
    const char* device;
    int64_t total, free, self, model, context, compute;
    bool fit;
  };
  const std::vector<std::pair<const char*, std::vector<Row>>> tables = {
      {"21-gemma3-4b-L4-metadata.log",
       {{"CUDA0", 22565, 22371, 5619, 2368, 2734, 517, true}, {"Host", -1, -1, 794, 525, 0, 269, true}}},
      {"50-qwen3moe-30b-a3b-q4_k_m-vulkan-3090-ub2048-fa-fit.log",
       {{"Vulkan0", 24822, 23594, 18660, 17524, 768, 368, true},
        {"Host", -1, -1, 230, 166, 0, 64, true},
        {"Vulkan0", 24822, 4201, 18660, 17524, 768, 368, false},
        {"Host", -1, -1, 230, 166, 0, 64, false}}},
      {"51-qwen3-8b-q4_k_m-vulkan-3090-ub2048-fa-fit.log",
       {{"Vulkan0", 24822, 23593, 5991, 4455, 1152, 384, true},
        {"Host", -1, -1, 429, 333, 0, 96, true},
        {"Vulkan0", 24822, 17188, 5991, 4455, 1152, 384, false},
        {"Host", -1, -1, 429, 333, 0, 96, false}}},
      {"53-gpt-oss-20b-q4_k_m-metal-m5-mmap-np4-ctx131072.log",
       {{"MTL0", 18186, 3594, 14590, 11073, 3096, 420, false}, {"Host", -1, -1, 648, 379, 0, 269, false}}},
      {"54-gpt-oss-20b-mxfp4-metal-m5-mmap-np1-ctx131072.log",
       {{"MTL0", 18186, 3139, 15046, 11536, 3090, 420, false}, {"Host", -1, -1, 855, 586, 0, 268, false}}},
  };
  for (const Expected& e : expected()) {
    SCOPED_TRACE(e.file);
    auto r = read_llama_log_file(fidelity_dir() + e.file);
    ASSERT_TRUE(r.ok()) << r.status().message();
    const std::vector<LlamaLogBreakdownRow>& got = r.value().figures.breakdown;
    auto it = std::find_if(tables.begin(), tables.end(), [&](const auto& t) { return e.file == std::string(t.first); });
    if (it == tables.end()) {
      EXPECT_TRUE(got.empty());
      continue;
    }
    EXPECT_TRUE(r.value().fit_unchanged);
    ASSERT_EQ(got.size(), it->second.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const Row& w = it->second[i];
      EXPECT_EQ(got[i].device, w.device) << i;
      EXPECT_EQ(got[i].total.value_or(-1), w.total) << i;
      EXPECT_EQ(got[i].free.value_or(-1), w.free) << i;
      EXPECT_EQ(got[i].self, w.self) << i;
      EXPECT_EQ(got[i].model, w.model) << i;
      EXPECT_EQ(got[i].context, w.context) << i;
      EXPECT_EQ(got[i].compute, w.compute) << i;
      EXPECT_EQ(got[i].fit, w.fit) << i;
    }
  }
}

// The same logs with CRLF line ends and an ANSI colour code on every line give the same figures.
TEST(LlamaLogFidelity, CrlfAndColourGiveTheSameFigures) {
  for (const Expected& e : expected()) {
    SCOPED_TRACE(e.file);
    auto plain = read_llama_log_file(fidelity_dir() + e.file);
    ASSERT_TRUE(plain.ok());
    FILE* f = std::fopen((fidelity_dir() + e.file).c_str(), "rb");
    ASSERT_NE(f, nullptr);
    std::string text, mangled;
    char buf[4096];
    size_t n = 0;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
    std::fclose(f);
    bool start = true;
    for (char c : text) {
      if (start && c != '#') mangled += "\x1b[0m";
      start = c == '\n';
      if (c == '\n') mangled += '\r';
      mangled += c;
    }
    auto other = parse_llama_log(mangled, e.file);
    ASSERT_TRUE(other.ok());
    ASSERT_EQ(other.value().figures.buffers.size(), plain.value().figures.buffers.size());
    for (size_t i = 0; i < e.buffers.size(); ++i) {
      EXPECT_DOUBLE_EQ(other.value().figures.buffers[i].mib, plain.value().figures.buffers[i].mib);
    }
    EXPECT_EQ(other.value().unused.size(), plain.value().unused.size());
    EXPECT_EQ(other.value().failed_allocs.size(), plain.value().failed_allocs.size());
  }
}

}  // namespace
