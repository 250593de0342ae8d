// llama.cpp's graph by build (llama/tessera/llama/llama_cpp_graph.h): the switches at the builds of the changes
// that set them, and the node counts llama.cpp printed in users' logs (tests/fidelity/, each log's header cites it),
// built here from the tiny presets with the logs' layer and expert counts (a node count depends on the layers, the
// experts used, the architecture, flash attention and the build, not on the sizes). That the graphs compute the same
// decoder step is test_qwen_oracle.cpp's and test_gpt_oss_oracle.cpp's LlamaCppGraph tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <vector>
#include <string>

#include "tessera/models/llama.h"
#include "tessera/llama/llama_cpp_graph.h"

using namespace tessera;
using namespace tessera::models;
using tessera::llama::llama_cpp_graph;

namespace {

// Each switch flips at the first build of its change (llama_cpp_graph.cpp names the pull requests).
TEST(LlamaCppGraph, SwitchesFlipAtTheBuildsOfTheirChanges) {
  auto g = [](int b) { return llama_cpp_graph(b); };
  EXPECT_FALSE(g(2539).out_ids_always);
  EXPECT_TRUE(g(2540).out_ids_always);
  EXPECT_TRUE(g(2571).v_store_reshape);
  EXPECT_FALSE(g(2572).v_store_reshape);
  EXPECT_FALSE(g(4918).v_store_reshape);
  EXPECT_FALSE(g(4918).v_reshape_3d);
  EXPECT_TRUE(g(4919).v_store_reshape);
  EXPECT_TRUE(g(4919).v_reshape_3d);
  EXPECT_FALSE(g(5428).kv_permutes);
  EXPECT_TRUE(g(5429).kv_permutes);
  EXPECT_TRUE(g(5775).split_glu);
  EXPECT_FALSE(g(5776).split_glu);
  EXPECT_FALSE(g(5816).k_write_reshape);
  EXPECT_TRUE(g(5817).k_write_reshape);
  EXPECT_TRUE(g(5836).qkv_cont);
  EXPECT_FALSE(g(5837).qkv_cont);
  EXPECT_TRUE(g(5837).fused_v_cont);
  EXPECT_FALSE(g(5912).q_stream_view);
  EXPECT_TRUE(g(5913).q_stream_view);
  EXPECT_TRUE(g(6070).kv_cpy);
  EXPECT_FALSE(g(6071).kv_cpy);
  EXPECT_FALSE(g(6071).k_write_reshape);  // (a switch of the VIEW + CPY writes)
  EXPECT_FALSE(g(6071).v_store_reshape);
  EXPECT_FALSE(g(6194).fused_v_cont_3d);
  EXPECT_TRUE(g(6195).fused_v_cont_3d);
  EXPECT_TRUE(g(6409).fused_v_cont);
  EXPECT_FALSE(g(6410).fused_v_cont);
  EXPECT_FALSE(g(6410).fused_v_cont_3d);
  EXPECT_FALSE(g(6843).moe_weights_clamp);
  EXPECT_TRUE(g(6844).moe_weights_clamp);
  EXPECT_FALSE(g(7043).v_before_k);
  EXPECT_TRUE(g(7044).v_before_k);
  EXPECT_FALSE(g(7818).inp_embd_input);
  EXPECT_TRUE(g(7819).inp_embd_input);
  EXPECT_FALSE(g(9409).mask_f16);
  EXPECT_TRUE(g(9410).mask_f16);
  EXPECT_FALSE(g(9488).cuda_fa_f16_copies);
  EXPECT_TRUE(g(9489).cuda_fa_f16_copies);
  EXPECT_FALSE(g(10157).out_ids_after_layers);
  EXPECT_TRUE(g(10158).out_ids_after_layers);
  // before the oldest build checked (2459): 2459's graph
  const LlamaCppGraph old = g(1500);
  EXPECT_EQ(old.build, 1500);
  EXPECT_TRUE(old.v_store_reshape && old.kv_cpy && old.split_glu && old.qkv_cont && !old.out_ids_always &&
              !old.moe_weights_clamp);
}

struct PrintedCount {
  const char* log;  // tests/fidelity/ (the source of the printed count)
  const char* preset;
  int n_layer;
  int n_expert, n_expert_used;  // 0: the preset's
  int build;
  bool flash_attn;
  size_t printed_nodes;
};

LlamaConfig config_of(const PrintedCount& p) {
  LlamaConfig c = preset(p.preset).value();
  c.n_layer = p.n_layer;
  if (p.n_expert > 0) {
    c.n_expert = p.n_expert;
    c.n_expert_used = p.n_expert_used;
  }
  c.flash_attn = p.flash_attn;
  c.llama_cpp = llama_cpp_graph(p.build);
  return c;
}

// llama.cpp's "graph nodes = N" of the logs, reproduced by the graph of the log's build.
TEST(LlamaCppGraph, NodeCountsAreThePrintedOnes) {
  const PrintedCount cases[] = {
      {"25-open-llama-7b-f16-v100-ci", "tiny", 32, 0, 0, 2459, false, 1060},
      {"42-qwen2-0.5b-q5_k_m-riscv-cpu-fa", "tiny-qwen2", 24, 0, 0, 3673, true, 751},
      {"23-qwen2.5-7b-ollama-cpu-only (ollama 0.4.0: b3862)", "tiny-qwen2", 28, 0, 0, 3862, false, 986},
      {"24-llama3.1-8b-dolphin3-ollama-1gpu (b4419)", "tiny", 32, 0, 0, 4419, false, 1030},
      {"45-phi3-mini-4k-q4_k_m-cpu (b4014-b4462)", "tiny-phi3", 32, 0, 0, 4400, false, 1286},
      {"33-qwen3moe-235b-q6k-2gpu-fa-q8kv-ot", "tiny-qwen3moe", 94, 16, 8, 5271, true, 5741},
      {"46-qwen3moe-30b-a3b-q4_k_m-3090ti-fa", "tiny-qwen3moe", 48, 16, 8, 5274, true, 2935},
      {"47-qwen3moe-30b-a3b-q5_k_m-windows-cpu", "tiny-qwen3moe", 48, 16, 8, 5273, false, 3126},
      {"34-qwen3moe-30b-a3b-q4km-2gpu-ot-exps-cpu", "tiny-qwen3moe", 48, 16, 8, 5622, false, 3222},
      {"41-qwen3-0.6b-q8_0-cpu-lab-report", "tiny-qwen3", 28, 0, 0, 5605, false, 1126},
      {"44-gpt-oss-20b-mxfp4-1gpu-ncpumoe-fa-iswa", "tiny-gpt-oss", 24, 8, 4, 6699, true, 1352},
      // Logs of 2026 builds (Metal and Vulkan runs, whose node counts are the backend-independent graph's), not in
      // tests/fidelity/ (compare-log reads no MTL0 / Vulkan0 buffers yet): "graph nodes  = 1266" of Qwen3-8B Q4_K_M,
      // build 9849 (799fcc04a), -fa auto (enabled), -ub 2048, in HilbertraumAI/HilbertRaum eval/results/hardware/
      // i9-9900x-rtx-3090-24gb-128gb/issue399-arch-sweep-qwen3-8b-instruct-q4.stderr.log (commit 175efe3f);
      // "graph nodes  = 3030" of Qwen3-30B-A3B Q4_K_M (48 layers, 128 experts, 8 used), build 9849 (799fcc04a),
      // -fa auto (enabled), n_ctx 8192, -ub 2048, in the same directory's
      // issue399-arch-sweep-qwen3-30b-a3b-q4.stderr.log (commit 9c72f774); "graph nodes  = 1352" of gpt-oss-20b
      // MXFP4, build 8185 (2afcdb977), flash attention on, in ontouchstart/rabbit-holes docs/hello_c_in_memory/2.log
      // (commit 96c2960e). Between 6699 and these builds the dense graph lost the mask's cast (9410) and gained an
      // input no node reads (7819, a leaf: no node); the MoE graph also gained a CLAMP per layer (6844).
      {"HilbertRaum qwen3-8b Vulkan (b9849)", "tiny-qwen3", 36, 0, 0, 9849, true, 1266},
      {"HilbertRaum qwen3-30b-a3b Vulkan (b9849)", "tiny-qwen3moe", 48, 16, 8, 9849, true, 3030},
      {"rabbit-holes gpt-oss-20b Metal (b8185)", "tiny-gpt-oss", 24, 8, 4, 8185, true, 1352},
  };
  for (const PrintedCount& p : cases) {
    Result<LlamaGraph> m = build_llama(config_of(p));
    ASSERT_TRUE(m.ok()) << p.log << ": " << m.status().to_string();
    EXPECT_EQ(m.value().graph->n_nodes(), p.printed_nodes) << p.log << " (build " << p.build << ")";
  }
}

// The node and buffer changes of llama.cpp's graph after 6699, as its source makes them (the pull requests in
// llama_cpp_graph.cpp): a CLAMP of the MoE weights' sum in every layer whose expert weights are normalised (6844:
// qwen3moe and Mixtral, not gpt-oss); with flash attention the f16 masks need no cast (9410: one CPY fewer, two for
// an iSWA model); the unused embeddings input is a leaf (7819: no node, and n_embd x n_tokens f32 of host memory);
// gpt-oss's two GET_ROWS in the last layer become one after it (10158); V before K changes no count (7044).
TEST(LlamaCppGraph, ChangesAfter6699) {
  auto nodes = [](const char* preset_name, int n_layer, int build, bool fa) {
    LlamaConfig c = preset(preset_name).value();
    c.n_layer = n_layer;
    c.flash_attn = fa;
    c.n_tokens = 8;  // some outputs dropped: inp_out_ids present in every build from 2540
    c.llama_cpp = llama_cpp_graph(build);
    Result<LlamaGraph> m = build_llama(c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return m.ok() ? static_cast<int64_t>(m.value().graph->n_nodes()) : -1;
  };
  for (bool fa : {true, false}) {
    EXPECT_EQ(nodes("tiny-qwen3moe", 4, 6844, fa) - nodes("tiny-qwen3moe", 4, 6843, fa), 4);
    EXPECT_EQ(nodes("tiny-moe", 4, 6844, fa) - nodes("tiny-moe", 4, 6843, fa), 4);      // Mixtral: llama with experts
    EXPECT_EQ(nodes("tiny-gpt-oss", 4, 6844, fa), nodes("tiny-gpt-oss", 4, 6843, fa));  // softmax weights, no norm
    EXPECT_EQ(nodes("tiny-qwen3", 4, 6844, fa), nodes("tiny-qwen3", 4, 6843, fa));      // no experts
  }
  EXPECT_EQ(nodes("tiny-qwen3", 4, 9409, true) - nodes("tiny-qwen3", 4, 9410, true), 1);
  EXPECT_EQ(nodes("tiny-qwen3", 4, 9409, false), nodes("tiny-qwen3", 4, 9410, false));
  EXPECT_EQ(nodes("tiny-gpt-oss", 4, 9409, true) - nodes("tiny-gpt-oss", 4, 9410, true), 2);
  EXPECT_EQ(nodes("tiny-gpt-oss", 4, 10157, true) - nodes("tiny-gpt-oss", 4, 10158, true), 1);
  EXPECT_EQ(nodes("tiny-qwen3", 4, 10157, true), nodes("tiny-qwen3", 4, 10158, true));  // gpt-oss's alone
  EXPECT_EQ(nodes("tiny-qwen3", 4, 7043, false), nodes("tiny-qwen3", 4, 7044, false));
  EXPECT_EQ(nodes("tiny-qwen3", 4, 7818, false), nodes("tiny-qwen3", 4, 7819, false));

  // 7819: the input is in the graph (a leaf), of the inputs to fill, f32 [n_embd, n_tokens], read by no node
  LlamaConfig c = preset("tiny-qwen3").value();
  c.llama_cpp = llama_cpp_graph(7819);
  Result<LlamaGraph> m = build_llama(c);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  const Tensor* embd = m.value().embd;
  ASSERT_NE(embd, nullptr);
  EXPECT_EQ(embd->type, Type::kF32);
  EXPECT_EQ(embd->ne[0], c.n_embd);
  EXPECT_EQ(embd->ne[1], c.n_tokens);
  const std::vector<Tensor*> inputs = m.value().inputs();
  EXPECT_NE(std::find(inputs.begin(), inputs.end(), embd), inputs.end());
  bool leaf = false;
  for (size_t i = 0; i < m.value().graph->n_leafs(); ++i) leaf = leaf || m.value().graph->leaf(i) == embd;
  EXPECT_TRUE(leaf);
  for (size_t i = 0; i < m.value().graph->n_nodes(); ++i) {
    for (const Tensor* s : m.value().graph->node(i)->src) EXPECT_NE(s, embd);
  }
  c.llama_cpp = llama_cpp_graph(7818);
  EXPECT_EQ(build_llama(c).value().embd, nullptr);
}

// 6844's CLAMP (PR #16655) as build_moe_ffn makes it: in each layer, ffn_moe_weights_sum (SUM_ROWS) clamped to
// [6.103515625e-5, +inf] as ffn_moe_weights_sum_clamped, and the DIV (ffn_moe_weights_norm) by the clamped sum; none
// in 6843's graph, in Tessera's own, or where the weights are not normalised.
TEST(LlamaCppGraph, MoeWeightsSumClampedFrom6844) {
  auto clamps = [](const LlamaConfig& c) {
    Result<LlamaGraph> m = build_llama(c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    std::vector<const Tensor*> out;
    if (!m.ok()) return out;
    const Graph& g = *m.value().graph;
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const Tensor* n = g.node(i);
      if (n->op == Op::kClamp) out.push_back(n);
    }
    // every DIV of the normalisation divides by the clamped sum when there is one
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const Tensor* n = g.node(i);
      if (n->op != Op::kDiv || std::string(n->name).rfind("ffn_moe_weights_norm", 0) != 0) continue;
      EXPECT_EQ(n->src[1]->op, out.empty() ? Op::kSumRows : Op::kClamp) << n->name;
    }
    return out;
  };
  LlamaConfig c = preset("tiny-qwen3moe").value();
  c.n_layer = 3;
  c.llama_cpp = llama_cpp_graph(6844);
  const std::vector<const Tensor*> cl = clamps(c);
  ASSERT_EQ(cl.size(), 3u);
  for (int il = 0; il < 3; ++il) {
    const Tensor* n = cl[static_cast<size_t>(il)];
    EXPECT_EQ(std::string(n->name), "ffn_moe_weights_sum_clamped-" + std::to_string(il));
    EXPECT_EQ(get_op_param<float>(*n, 0), 6.103515625e-5f);
    EXPECT_EQ(get_op_param<float>(*n, 1), INFINITY);
    ASSERT_NE(n->src[0], nullptr);
    EXPECT_EQ(n->src[0]->op, Op::kSumRows);
    EXPECT_EQ(std::string(n->src[0]->name), "ffn_moe_weights_sum-" + std::to_string(il));
    EXPECT_EQ(n->ne[0], 1);
    if (il < 2) {  // (the last layer may keep only the output rows)
      EXPECT_EQ(n->ne[1], c.n_tokens);
    }
  }
  c.llama_cpp = llama_cpp_graph(6843);
  EXPECT_TRUE(clamps(c).empty());
  c.llama_cpp.reset();  // Tessera's own graph
  EXPECT_TRUE(clamps(c).empty());
  LlamaConfig oss = preset("tiny-gpt-oss").value();
  oss.llama_cpp = llama_cpp_graph(10470);
  EXPECT_TRUE(clamps(oss).empty());
}

// One layer of build 2459's llama graph, op by op, as llama.cpp's source of that build makes it (llm_build_kv_store,
// llm_build_kqv, llm_build_ffn): Q, K and V projections, rope, K written by VIEW + CPY, V reshaped, transposed and
// written by VIEW + CPY, the cache read by two VIEWs (V transposed: no copy), Q permuted, MUL_MAT, SOFT_MAX, MUL_MAT,
// PERMUTE and one CONT; SILU + MUL in the FFN. Outside the layers: GET_ROWS, RMS_NORM + MUL, MUL_MAT.
TEST(LlamaCppGraph, Build2459LayerOps) {
  LlamaConfig c = preset("tiny").value();
  c.n_layer = 3;
  c.flash_attn = false;
  c.llama_cpp = llama_cpp_graph(2459);
  Result<LlamaGraph> m = build_llama(c);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  std::map<std::string, size_t> ops;
  for (size_t i = 0; i < m.value().graph->n_nodes(); ++i) {
    const Tensor* n = m.value().graph->node(i);
    std::string name = op_name(n->op);
    if (n->op == Op::kUnary) name += std::string("_") + unary_op_name(static_cast<UnaryOp>(n->op_params[0]));
    ++ops[name];
  }
  const std::map<std::string, size_t> per_layer = {
      {"RMS_NORM", 2},  {"MUL", 3},     {"MUL_MAT", 9},  {"RESHAPE", 3}, {"ROPE", 2},       {"VIEW", 4}, {"CPY", 2},
      {"TRANSPOSE", 1}, {"PERMUTE", 2}, {"SOFT_MAX", 1}, {"CONT", 1},    {"UNARY_SILU", 1}, {"ADD", 2}};
  std::map<std::string, size_t> want;
  for (const auto& [op, n] : per_layer) want[op] = n * 3;
  ++want["GET_ROWS"];
  ++want["RMS_NORM"];
  ++want["MUL"];
  ++want["MUL_MAT"];
  EXPECT_EQ(ops, want);
}

// Tessera's own graph is untouched by the switches (llama_cpp unset), and switches of no build (< 1) are refused.
TEST(LlamaCppGraph, BuildZeroIsTesserasGraphAndNegativeIsRefused) {
  LlamaConfig c = preset("tiny").value();
  c.flash_attn = false;
  const size_t own = build_llama(c).value().graph->n_nodes();
  EXPECT_EQ(own, static_cast<size_t>(c.n_layer) * 32 + 4);  // 32 per layer (docs/compare-log.md)
  c.llama_cpp = LlamaCppGraph{};                            // build 0
  Result<LlamaGraph> bad = build_llama(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("llama_cpp.build"), std::string::npos) << bad.status().message();
}

}  // namespace
