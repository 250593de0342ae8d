// llama.cpp's graph by build (llama/tessera/llama/llama_cpp_graph.h): the switches at the builds of the changes
// that set them, and the node counts llama.cpp printed in users' logs (tests/fidelity/, each log's header cites it),
// built here from the tiny presets with the logs' layer and expert counts (a node count depends on the layers, the
// experts used, the architecture, flash attention and the build, not on the sizes). That the graphs compute the same
// decoder step is test_qwen_oracle.cpp's and test_gpt_oss_oracle.cpp's LlamaCppGraph tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
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
  EXPECT_FALSE(g(6582).moe_weights_early);
  EXPECT_TRUE(g(6583).moe_weights_early);
  EXPECT_FALSE(g(6843).moe_weights_clamp);
  EXPECT_TRUE(g(6844).moe_weights_clamp);
  EXPECT_FALSE(g(7043).v_before_k);
  EXPECT_TRUE(g(7044).v_before_k);
  EXPECT_FALSE(g(7818).inp_embd_input);
  EXPECT_TRUE(g(7819).inp_embd_input);
  EXPECT_FALSE(g(8618).kv_rotation);
  EXPECT_TRUE(g(8619).kv_rotation);
  EXPECT_FALSE(g(8698).kv_rotation_swa_inputs);
  EXPECT_TRUE(g(8699).kv_rotation_swa_inputs);
  EXPECT_FALSE(g(9026).rotation_cont);
  EXPECT_TRUE(g(9027).rotation_cont);
  EXPECT_FALSE(g(9409).mask_f16);
  EXPECT_TRUE(g(9410).mask_f16);
  EXPECT_FALSE(g(9488).cuda_fa_f16_copies);
  EXPECT_TRUE(g(9489).cuda_fa_f16_copies);
  EXPECT_FALSE(g(10157).out_ids_after_layers);
  EXPECT_TRUE(g(10158).out_ids_after_layers);
  EXPECT_TRUE(g(10149).fa_sinks_decide);
  EXPECT_FALSE(g(10150).fa_sinks_decide);
  // before the oldest build checked (2459): 2459's graph
  const LlamaCppGraph old = g(1500);
  EXPECT_EQ(old.build, 1500);
  EXPECT_TRUE(old.v_store_reshape && old.kv_cpy && old.split_glu && old.qkv_cont && !old.out_ids_always &&
              !old.moe_weights_clamp && !old.kv_rotation);
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

// The default build (llama::kLlamaCppNewestBuild: plans of GGUF files, logs without a build line) is the newest build
// read: no switch changes after it, so its graph is that of every later build. A switch added for a newer build without
// moving the default fails here.
TEST(LlamaCppGraph, TheDefaultBuildHasEverySwitch) {
  EXPECT_EQ(llama::kLlamaCppNewestBuild, 10470);  // llama.cpp master 34af94cd9 (2026-08-17), docs/compare-log.md
  const LlamaCppGraph newest = llama_cpp_graph(llama::kLlamaCppNewestBuild);
  const LlamaCppGraph later = llama_cpp_graph(1000000);
  auto switches = [](const LlamaCppGraph& g) {
    return std::vector<bool>{g.out_ids_always,
                             g.kv_cpy,
                             g.k_write_reshape,
                             g.v_store_reshape,
                             g.v_reshape_3d,
                             g.kv_permutes,
                             g.q_stream_view,
                             g.split_glu,
                             g.qkv_cont,
                             g.fused_v_cont,
                             g.fused_v_cont_3d,
                             g.v_before_k,
                             g.inp_embd_input,
                             g.mask_f16,
                             g.moe_weights_clamp,
                             g.moe_weights_early,
                             g.cuda_fa_f16_copies,
                             g.out_ids_after_layers,
                             g.fa_sinks_decide,
                             g.kv_rotation,
                             g.kv_rotation_swa_inputs,
                             g.rotation_cont};
  };
  EXPECT_EQ(switches(newest), switches(later));
  // every switch is listed above (the size rounded up to the int's alignment: four switches more change it)
  EXPECT_EQ(sizeof(LlamaCppGraph), (sizeof(int) + 22 * sizeof(bool) + alignof(int) - 1) / alignof(int) * alignof(int))
      << "a switch was added to LlamaCppGraph: list it here";
  EXPECT_TRUE(newest.moe_weights_clamp && newest.moe_weights_early && newest.v_before_k && newest.inp_embd_input &&
              newest.mask_f16 && newest.kv_rotation && newest.cuda_fa_f16_copies && newest.out_ids_after_layers &&
              !newest.fa_sinks_decide);
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
// From 6583 (PR #16130) build_moe_ffn adds the experts' weights to the graph right after the ARGSORT ("call early so
// that topk-moe can be used"), before the experts' products; before, the DFS from the weighted MUL reached the
// products first (the weights are its second source). The same nodes either way, in another order.
TEST(LlamaCppGraph, MoeWeightsAddedBeforeTheExpertsFrom6583) {
  // per layer: the positions of ffn_moe_weights (the GET_ROWS), of its last node before the MUL, and of ffn_moe_up
  auto positions = [](const LlamaConfig& c) {
    Result<LlamaGraph> m = build_llama(c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    std::map<std::string, size_t> at;
    std::vector<std::string> names;
    if (!m.ok()) return std::make_pair(at, names);
    const Graph& g = *m.value().graph;
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      at[g.node(i)->name] = i;
      names.emplace_back(g.node(i)->name);
    }
    return std::make_pair(at, names);
  };
  for (const char* name : {"tiny-qwen3moe", "tiny-gpt-oss"}) {
    SCOPED_TRACE(name);
    LlamaConfig c = preset(name).value();
    c.n_layer = 2;
    c.llama_cpp = llama_cpp_graph(6583);
    const auto [now, names_now] = positions(c);
    c.llama_cpp = llama_cpp_graph(6582);
    const auto [before, names_before] = positions(c);
    EXPECT_EQ(names_now.size(), names_before.size()) << "only the order changes";
    for (int il = 0; il < 2; ++il) {
      const std::string w = "ffn_moe_weights-" + std::to_string(il), up = "ffn_moe_up-" + std::to_string(il);
      ASSERT_TRUE(now.count(w) && now.count(up) && before.count(w) && before.count(up)) << il;
      EXPECT_LT(now.at(w), now.at(up)) << il;
      EXPECT_GT(before.at(w), before.at(up)) << il;
    }
  }
}

// The cache indices as llama.cpp makes them from 6071 (build_input_k_idxs, build_input_v_idxs): i64, K's and V's apart
// (V's [n_tokens] with flash attention, one per element of a transposed V without), one set per cache with sliding
// window layers; Tessera's own graph: one i32 input for K and V. (Side by side with build 10470 the host and GPU
// compute buffers of gemma and gpt-oss are then exact; with i32 and one set they were up to 2 GiB off.)
TEST(LlamaCppGraph, CacheIndicesAreI64PerCacheFrom6071) {
  for (bool fa : {true, false}) {
    SCOPED_TRACE(fa ? "flash attention" : "no flash attention");
    LlamaConfig c = preset("tiny-gemma3").value();
    c.flash_attn = fa;
    c.llama_cpp = llama_cpp_graph(6071);
    Result<LlamaGraph> m = build_llama(c);
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    const LlamaGraph& g = m.value();
    const int64_t T = c.n_tokens, n_v = fa ? T : c.n_embd_kv() * T;
    for (const Tensor* t : {g.kv_idxs, g.v_idxs, g.kv_idxs_swa, g.v_idxs_swa}) {
      ASSERT_NE(t, nullptr);
      EXPECT_EQ(t->type, Type::kI64) << t->name;
    }
    EXPECT_EQ(g.kv_idxs->ne[0], T);
    EXPECT_EQ(g.kv_idxs_swa->ne[0], T);
    EXPECT_EQ(g.v_idxs->ne[0], n_v);
    EXPECT_EQ(g.v_idxs_swa->ne[0], n_v);
    // every SET_ROWS reads its own cache's: K by the k indices, V by the v ones
    int writes = 0;
    for (size_t i = 0; i < g.graph->n_nodes(); ++i) {
      const Tensor* n = g.graph->node(i);
      if (n->op != Op::kSetRows) continue;
      ++writes;
      const bool v = std::string(n->name).find("cache_v") != std::string::npos;
      const int il = g.layer_of(n->src[0]->view_src != nullptr ? n->src[0]->view_src : n->src[0]);
      ASSERT_GE(il, 0) << n->name;
      const bool swa = c.is_swa(il);
      EXPECT_EQ(n->src[2], v ? (swa ? g.v_idxs_swa : g.v_idxs) : (swa ? g.kv_idxs_swa : g.kv_idxs)) << n->name;
    }
    EXPECT_EQ(writes, 2 * c.n_layer);
    c.llama_cpp.reset();  // Tessera's own graph
    Result<LlamaGraph> own = build_llama(c);
    ASSERT_TRUE(own.ok()) << own.status().to_string();
    EXPECT_EQ(own.value().kv_idxs->type, Type::kI32);
    EXPECT_EQ(own.value().v_idxs, nullptr);
    EXPECT_EQ(own.value().kv_idxs_swa, nullptr);
  }
}

TEST(LlamaCppGraph, MoeWeightsSumClampedFrom6844) {
  // What each CLAMP node is (copied out: the graph is gone when the lambda returns).
  struct Clamp {
    std::string name, src_name;
    float min = 0, max = 0;
    Op src_op = Op::kNone;
    int64_t ne0 = 0, ne1 = 0;
  };
  auto clamps = [](const LlamaConfig& c) {
    Result<LlamaGraph> m = build_llama(c);
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    std::vector<Clamp> out;
    if (!m.ok()) return out;
    const Graph& g = *m.value().graph;
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const Tensor* n = g.node(i);
      if (n->op != Op::kClamp) continue;
      Clamp k{n->name, "", get_op_param<float>(*n, 0), get_op_param<float>(*n, 1), Op::kNone, n->ne[0], n->ne[1]};
      if (n->src[0] != nullptr) {
        k.src_name = n->src[0]->name;
        k.src_op = n->src[0]->op;
      }
      out.push_back(k);
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
  const std::vector<Clamp> cl = clamps(c);
  ASSERT_EQ(cl.size(), 3u);
  for (int il = 0; il < 3; ++il) {
    const Clamp& n = cl[static_cast<size_t>(il)];
    EXPECT_EQ(n.name, "ffn_moe_weights_sum_clamped-" + std::to_string(il));
    EXPECT_EQ(n.min, 6.103515625e-5f);
    EXPECT_EQ(n.max, INFINITY);
    EXPECT_EQ(n.src_op, Op::kSumRows);
    EXPECT_EQ(n.src_name, "ffn_moe_weights_sum-" + std::to_string(il));
    EXPECT_EQ(n.ne0, 1);
    if (il < 2) {  // (the last layer may keep only the output rows)
      EXPECT_EQ(n.ne1, c.n_tokens);
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

// A tiny model of llama.cpp build `build` with heads of `head` values (n_embd_head) and K and V caches of types k and v
// (-ctk, -ctv).
LlamaConfig rotation_config(const char* preset_name, int n_layer, int build, bool fa, Type k, Type v, int64_t head) {
  LlamaConfig c = preset(preset_name).value();
  c.n_layer = n_layer;
  c.flash_attn = fa;
  c.kv_type = k;
  c.v_cache_type = v;
  c.n_embd_head = head;
  if (build > 0) c.llama_cpp = llama_cpp_graph(build);
  return c;
}

int64_t node_count(const LlamaConfig& c) {
  Result<LlamaGraph> m = build_llama(c);
  EXPECT_TRUE(m.ok()) << m.status().to_string();
  return m.ok() ? static_cast<int64_t>(m.value().graph->n_nodes()) : -1;
}

// The nodes of g that read t (as a source).
std::vector<const Tensor*> readers(const Graph& g, const Tensor* t) {
  std::vector<const Tensor*> out;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    const Tensor* n = g.node(i);
    if (std::find(std::begin(n->src), std::end(n->src), t) != std::end(n->src)) out.push_back(n);
  }
  return out;
}

// 8619's rotations (PR #21038) as llama_kv_cache decides them: K (Q and K rotated, three nodes each) when the K cache's
// type is quantized and the head size a multiple of 64, V (V and the attention output) likewise with the V cache's
// type, with or without flash attention (a quantized V needs it); none in 8618's graph, in Tessera's own, or for a head
// size that 64 does not divide (32, phi3's 96).
TEST(LlamaCppGraph, KvRotationNodesFrom8619) {
  const Type f16 = Type::kF16, q8 = Type::kQ8_0, q4 = Type::kQ4_0;
  auto delta = [](const char* p, int n_layer, int build, bool fa, Type k, Type v, int64_t head) {
    return node_count(rotation_config(p, n_layer, build, fa, k, v, head)) -
           node_count(rotation_config(p, n_layer, build, fa, f16, f16, head));
  };
  EXPECT_EQ(delta("tiny", 3, 8619, true, q8, q8, 64), 3 * 12);  // -ctk q8_0 -ctv q8_0 -fa: 12 per layer
  EXPECT_EQ(delta("tiny", 3, 8619, true, q4, q4, 128), 3 * 12);
  EXPECT_EQ(delta("tiny", 3, 10470, true, q8, q8, 256), 3 * 12);
  EXPECT_EQ(delta("tiny", 3, 8619, true, q8, f16, 64), 3 * 6);               // -ctk q8_0: Q and K
  EXPECT_EQ(delta("tiny", 3, 8619, false, q8, f16, 64), 3 * 6);              // (without flash attention too)
  EXPECT_EQ(delta("tiny", 3, 8619, true, f16, q8, 64), 3 * 6);               // -ctv q8_0: V and the attention output
  EXPECT_EQ(delta("tiny", 3, 8619, true, Type::kBF16, Type::kBF16, 64), 0);  // not quantized
  EXPECT_EQ(delta("tiny", 3, 8618, true, q8, q8, 64), 0);
  EXPECT_EQ(delta("tiny", 3, 8619, true, q8, q8, 32), 0);  // (tiny's heads of 16 hold no q8_0 block)
  EXPECT_EQ(delta("tiny", 3, 8619, true, q8, q8, 96), 0);  // phi3's 96
  EXPECT_EQ(delta("tiny", 3, 0, true, q8, q8, 64), 0);     // Tessera's own graph
  EXPECT_EQ(delta("tiny-qwen3", 3, 9849, true, q8, q8, 128), 3 * 12);
  EXPECT_EQ(delta("tiny-qwen3moe", 3, 9849, false, q8, f16, 128), 3 * 6);
  // iSWA (gpt-oss, gemma3): every layer, by one cache's matrices or the other's, and one build's count as the next's
  EXPECT_EQ(delta("tiny-gpt-oss", 4, 8619, true, q8, q8, 64), 4 * 12);
  EXPECT_EQ(delta("tiny-gemma3", 6, 8699, true, q8, q8, 64), 6 * 12);
  EXPECT_EQ(node_count(rotation_config("tiny-gpt-oss", 4, 8698, true, q8, q8, 64)),
            node_count(rotation_config("tiny-gpt-oss", 4, 8699, true, q8, q8, 64)));
  // the sizes of the matrices: the largest power of two >= 64 dividing the head size for K, 64 for V
  for (auto [head, k_dim] : {std::pair<int64_t, int64_t>{64, 64}, {128, 128}, {192, 64}, {256, 256}, {320, 64}}) {
    const LlamaConfig c = rotation_config("tiny", 1, 8619, true, q8, q8, head);
    EXPECT_EQ(c.k_rot_dim(), k_dim) << head;
    EXPECT_EQ(c.v_rot_dim(), 64) << head;
  }
  EXPECT_EQ(rotation_config("tiny", 1, 8619, true, q8, f16, 64).v_rot_dim(), 0);
  EXPECT_EQ(rotation_config("tiny", 1, 8619, true, f16, q8, 64).k_rot_dim(), 0);
  EXPECT_EQ(rotation_config("tiny", 1, 8618, true, q8, q8, 64).k_rot_dim(), 0);
  EXPECT_EQ(rotation_config("tiny", 1, 0, true, q8, q8, 64).k_rot_dim(), 0);
}

// The rotations op by op (llama_mul_mat_hadamard; 8619's ggml_mul_mat_aux): a RESHAPE of the roped Q, the roped K, V
// and the attention output to rows of nrot values, a MUL_MAT by the f32 input (attn_inp_k_rot [128, 128] for heads of
// 128, attn_inp_v_rot [64, 64]), a RESHAPE back; the cache is written with the rotated K and V, and wo reads the
// rotated output. The inputs are leafs of the graph and among its inputs.
TEST(LlamaCppGraph, KvRotationOps) {
  const LlamaConfig c = rotation_config("tiny", 2, 8619, true, Type::kQ8_0, Type::kQ8_0, 128);
  Result<LlamaGraph> r = build_llama(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const LlamaGraph& m = r.value();
  const Graph& g = *m.graph;
  ASSERT_NE(m.k_rot, nullptr);
  ASSERT_NE(m.v_rot, nullptr);
  EXPECT_EQ(m.k_rot_swa, nullptr);
  EXPECT_EQ(m.v_rot_swa, nullptr);
  const std::vector<Tensor*> inputs = m.inputs();
  for (auto [t, name, n] : {std::tuple{m.k_rot, "attn_inp_k_rot", 128}, {m.v_rot, "attn_inp_v_rot", 64}}) {
    EXPECT_STREQ(t->name, name);
    EXPECT_EQ(t->type, Type::kF32);
    EXPECT_EQ(t->ne[0], n);
    EXPECT_EQ(t->ne[1], n);
    EXPECT_TRUE(t->flags & kFlagInput);
    EXPECT_NE(std::find(inputs.begin(), inputs.end(), t), inputs.end()) << name;
    bool leaf = false;
    for (size_t i = 0; i < g.n_leafs(); ++i) leaf = leaf || g.leaf(i) == t;
    EXPECT_TRUE(leaf) << name;
  }
  // each rotation: what it rotates (by name) -> the RESHAPE back, per layer
  for (int il = 0; il < c.n_layer; ++il) {
    const std::string l = "-" + std::to_string(il);
    std::map<std::string, const Tensor*> back;  // the rotated tensor's name -> the rotation's last RESHAPE
    for (const Tensor* rot : {m.k_rot, m.v_rot}) {
      for (const Tensor* mm : readers(g, rot)) {
        EXPECT_EQ(mm->op, Op::kMulMat);
        EXPECT_EQ(mm->src[0], rot);
        const Tensor* rows = mm->src[1];
        ASSERT_EQ(rows->op, Op::kReshape);
        EXPECT_EQ(rows->ne[0], rot->ne[0]);
        const Tensor* x = rows->src[0];
        const std::vector<const Tensor*> after = readers(g, mm);
        ASSERT_EQ(after.size(), 1u);
        EXPECT_EQ(after[0]->op, Op::kReshape);
        for (int d = 0; d < 4; ++d) EXPECT_EQ(after[0]->ne[d], x->ne[d]);
        back[x->name] = after[0];
      }
    }
    const std::string q_name = "Qcur_rope" + l, k_name = "Kcur_rope" + l, v_name = "Vcur" + l + " (reshaped)";
    ASSERT_TRUE(back.count(q_name) && back.count(k_name) && back.count(v_name)) << il;
    // the attention output (FLASH_ATTN_EXT's, merged by a RESHAPE) rotated, then wo
    const LlamaLayer& ly = m.layers[static_cast<size_t>(il)];
    const std::vector<const Tensor*> wo = readers(g, ly.wo);
    ASSERT_EQ(wo.size(), 1u);
    const Tensor* out_back = wo[0]->src[1];
    ASSERT_EQ(out_back->op, Op::kReshape);
    const Tensor* out_mm = out_back->src[0];
    ASSERT_EQ(out_mm->op, Op::kMulMat);
    EXPECT_EQ(out_mm->src[0], m.v_rot);
    EXPECT_EQ(out_mm->src[1]->src[0]->src[0]->op, Op::kFlashAttnExt);
    // the cache writes read the rotated K and V (SET_ROWS of 2d views of them)
    for (auto [cache, what] : {std::pair{ly.k_cache, k_name}, std::pair{ly.v_cache, v_name}}) {
      const std::vector<const Tensor*> w = readers(g, cache);
      const auto set = std::find_if(w.begin(), w.end(), [](const Tensor* n) { return n->op == Op::kSetRows; });
      ASSERT_NE(set, w.end()) << what;
      EXPECT_EQ((*set)->src[1]->op, Op::kView);
      EXPECT_EQ((*set)->src[1]->src[0], back[what]) << what;
    }
    // and the attention Q (viewed per stream, permuted) is the rotated one
    const Tensor* fa = out_mm->src[1]->src[0]->src[0];
    EXPECT_EQ(fa->src[0]->src[0]->src[0], back[q_name]);
  }
  // Q, K and V rotations and the output's: 12 MUL_MATs more than the f16 cache's graph, 24 RESHAPEs
  EXPECT_EQ(readers(g, m.k_rot).size() + readers(g, m.v_rot).size(), 4u * static_cast<size_t>(c.n_layer));
}

// An iSWA model (gpt-oss: sliding-window layers 0 and 2) rotates every layer; 8619-8698 by the non-SWA cache's matrices
// (no inputs of the SWA cache), from 8699 (PR #21513) the sliding-window layers by their own cache's, two more inputs
// (leafs, no node). A model with only sliding-window layers has no non-SWA matrices from 8699.
TEST(LlamaCppGraph, KvRotationSwaInputsFrom8699) {
  for (int build : {8698, 8699}) {
    const LlamaConfig c = rotation_config("tiny-gpt-oss", 4, build, true, Type::kQ8_0, Type::kQ8_0, 64);
    Result<LlamaGraph> r = build_llama(c);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const LlamaGraph& m = r.value();
    ASSERT_NE(m.k_rot, nullptr);
    ASSERT_NE(m.v_rot, nullptr);
    const bool own = build >= 8699;
    EXPECT_EQ(m.k_rot_swa != nullptr, own);
    EXPECT_EQ(m.v_rot_swa != nullptr, own);
    if (own) {
      EXPECT_STREQ(m.k_rot_swa->name, "attn_inp_k_rot_swa");
      EXPECT_STREQ(m.v_rot_swa->name, "attn_inp_v_rot_swa");
      EXPECT_EQ(m.k_rot_swa->ne[0], 64);
      EXPECT_EQ(m.v_rot_swa->ne[0], 64);
    }
    // the layer of each rotation, from the name of what it rotates ("Kcur_rope-2" -> 2; the output: "... (reshaped)"
    // of the attention's merge, read by the layer's wo)
    auto layers_of = [&](const Tensor* rot) {
      std::vector<int> out;
      if (rot == nullptr) return out;
      for (const Tensor* mm : readers(*m.graph, rot)) {
        const std::string n = mm->src[1]->src[0]->name;
        const size_t dash = n.find('-');
        out.push_back(dash == std::string::npos ? -1 : std::stoi(n.substr(dash + 1)));
      }
      std::sort(out.begin(), out.end());
      return out;
    };
    const std::vector<int> global = own ? std::vector<int>{1, 1, 3, 3} : std::vector<int>{0, 0, 1, 1, 2, 2, 3, 3};
    EXPECT_EQ(layers_of(m.k_rot), global) << build;
    if (own) {
      EXPECT_EQ(layers_of(m.k_rot_swa), (std::vector<int>{0, 0, 2, 2}));
    }
    EXPECT_EQ(readers(*m.graph, m.v_rot).size() + (own ? readers(*m.graph, m.v_rot_swa).size() : 0), 8u);
  }
  // tiny-gemma3 with 3 layers: all three sliding-window ones
  for (int build : {8698, 8699}) {
    const LlamaConfig c = rotation_config("tiny-gemma3", 3, build, true, Type::kQ8_0, Type::kQ8_0, 64);
    Result<LlamaGraph> r = build_llama(c);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r.value().k_rot != nullptr, build < 8699);
    EXPECT_EQ(r.value().k_rot_swa != nullptr, build >= 8699);
    for (const Tensor* t : r.value().inputs())
      EXPECT_STRNE(t->name, build < 8699 ? "attn_inp_k_rot_swa" : "attn_inp_k_rot");
  }
}

// A fused QKV projection's V is a strided view (phi3, from 6410): 9027 (PR #22630) copies it to rows by CONT for its
// rotation; before, ggml_reshape_2d asserted on it (llama.cpp aborted), and Tessera refuses to build that graph.
TEST(LlamaCppGraph, KvRotationOfAFusedVCopiedFrom9027) {
  LlamaConfig c = rotation_config("tiny-phi3", 2, 9026, true, Type::kQ8_0, Type::kQ8_0, 64);
  Result<LlamaGraph> bad = build_llama(c);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("not contiguous"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("9027"), std::string::npos) << bad.status().message();
  c.v_cache_type = Type::kF16;  // K alone: Q and K are roped, contiguous
  EXPECT_EQ(node_count(c) - node_count(rotation_config("tiny-phi3", 2, 9026, true, Type::kF16, Type::kF16, 64)), 2 * 6);
  c = rotation_config("tiny-phi3", 2, 9027, true, Type::kQ8_0, Type::kQ8_0, 64);
  Result<LlamaGraph> r = build_llama(c);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(node_count(c) - node_count(rotation_config("tiny-phi3", 2, 9027, true, Type::kF16, Type::kF16, 64)),
            2 * 12);
  int conts = 0;
  for (const Tensor* mm : readers(*r.value().graph, r.value().v_rot)) {
    const Tensor* rows = mm->src[1];
    if (rows->op != Op::kCont) continue;
    ++conts;
    EXPECT_EQ(rows->src[0]->op, Op::kView);  // the V view of the fused projection
    EXPECT_EQ(rows->ne[0], 64);
  }
  EXPECT_EQ(conts, 2);
}

// gpt-oss-20b with a q8_0 cache (-ctk q8_0 -ctv q8_0, flash attention): 12 nodes more per layer, 288 over its 24.
// A comparison at a recent master printed 1637 (f16: 1352 there, by its author's account). 1637 is this graph from
// 10158 on: the f16 count 1352 (8185's log, above) lost the masks' two casts at 9410 and a GET_ROWS at 10158, 1349,
// and 1349 + 288 = 1637; 1640 for builds 8619-9409 and 1638 for 9410-10157. (The rotation inputs are leafs.) The same
// from the real file's header (the gpt-oss-20b fixture).
TEST(LlamaCppGraph, GptOss20bQ8CacheNodeCount) {
  auto oss = [](int build, Type t) {
    LlamaConfig c = rotation_config("tiny-gpt-oss", 24, build, true, t, t, 64);
    c.n_expert = 8;
    c.n_expert_used = 4;
    return node_count(c);
  };
  EXPECT_EQ(oss(8185, Type::kF16), 1352);
  EXPECT_EQ(oss(10470, Type::kF16), 1349);
  EXPECT_EQ(oss(10470, Type::kQ8_0), 1637);
  EXPECT_EQ(oss(10158, Type::kQ8_0), 1637);
  EXPECT_EQ(oss(10157, Type::kQ8_0), 1638);
  EXPECT_EQ(oss(9409, Type::kQ8_0), 1640);
  EXPECT_EQ(oss(8619, Type::kQ8_0), 1640);
  EXPECT_EQ(oss(8618, Type::kQ8_0), 1352);

  auto file = fixtures::make_fixture_without_vocab("gpt-oss-20b-mxfp4");
  ASSERT_TRUE(file.ok()) << file.status().to_string();
  const gguf::Model model = gguf::Model::of_file(std::move(file).value());
  for (auto [t, want] : {std::pair{Type::kF16, 1349}, std::pair{Type::kQ8_0, 1637}}) {
    Result<LlamaConfig> c = llama_config_from_gguf(model, {.n_ctx = 4096, .n_tokens = 512, .kv_type = t});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c.value().head_dim(), 64);
    c.value().llama_cpp = llama_cpp_graph(10470);
    EXPECT_EQ(node_count(c.value()), want) << type_name(t);
  }
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
