// Tensor parallelism (-sm tensor, issue 47): the split states llama.cpp gives a model's weights and caches
// (src/llama-model.cpp, llama_meta_device_get_split_state), the states the graph's nodes take from them and where the
// reductions go (ggml-backend-meta.cpp's rules, tessera/meta.h), and the bytes each device holds. Every expected value
// is worked out by hand in the comments.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/meta.h"
#include "tessera/models/llama.h"

using namespace tessera;
using namespace tessera::llama;
using ::testing::HasSubstr;

namespace {

// A small llama: 2 layers, n_embd 256, 4 heads of 64 over 2 KV heads (n_gqa 2), n_ff 384, vocabulary 320, q4_0
// matrices (18 bytes per 32 values), f32 norms, a 64-cell f16 cache; llama.cpp's graph of its newest checked build.
models::LlamaConfig split_small() {
  models::LlamaConfig c = models::preset("tiny").value();
  c.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
  c.n_layer = 2;
  c.n_embd = 256;
  c.n_head = 4;
  c.n_head_kv = 2;
  c.n_embd_head = 64;
  c.n_ff = 384;
  c.n_vocab = 320;
  return c;
}

const Tensor* node(const models::LlamaGraph& m, const char* name) {
  for (const Tensor* n : m.graph->nodes()) {
    if (std::string(n->name) == name) return n;
  }
  ADD_FAILURE() << "no node " << name;
  return nullptr;
}

const Tensor* weight(const models::LlamaGraph& m, const char* name) {
  for (const Tensor* w : m.weights) {
    if (std::string(w->name) == name) return w;
  }
  ADD_FAILURE() << "no weight " << name;
  return nullptr;
}

std::string state(const TensorParallelMemory& r, const Tensor* t) {
  const SplitState* s = t != nullptr ? r.plan.of(t) : nullptr;
  return s != nullptr ? s->describe(r.plan.n_devices) : "none";
}

// Two devices, even shares. Attention: a KV head's group is n_gqa x 64 = 128 Q values; the granularity starts at the
// q4_0 block (32) and doubles while below 128 and 2 x it < 128: 64; whole groups: lcm(128, 64) = 128 for Q and the
// attention output, 128 / n_gqa = 64 for K, V and the cache. The FFN's granularity is lcm(32, 128) = 128. Cuts at
// half, rounded down: Q 256 -> 128 | 128; K, V 128 -> 64 | 64; FFN 384 -> 192, rounded to 128: 128 | 256 in layer 0,
// and in layer 1 the rotation (il % 2 = 1) gives device 1 the first slice: 256 | 128. The output head (granularity 1,
// rotation n_layer % 2 = 0): 320 -> 160 | 160.
TEST(LlamaTensorSplit, StatesAndBytesOfASmallLlamaOnTwoDevices) {
  const models::LlamaConfig c = split_small();
  auto m = models::build_llama(c);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto r = llama_tensor_parallel(m.value(), c, 2, {});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_q.weight")), "axis 1 {128, 128}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_k.weight")), "axis 1 {64, 64}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_output.weight")), "axis 0 {128, 128}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.ffn_up.weight")), "axis 1 {128, 256}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.ffn_down.weight")), "axis 0 {128, 256}");
  EXPECT_EQ(state(*r, weight(*m, "blk.1.ffn_gate.weight")), "axis 1 {256, 128}");
  EXPECT_EQ(state(*r, weight(*m, "output.weight")), "axis 1 {160, 160}");
  EXPECT_EQ(state(*r, weight(*m, "token_embd.weight")), "mirrored");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_norm.weight")), "mirrored");
  // The nodes: Q, K, V are split by heads, flash attention's output by heads (axis 1 of [64, 4 heads, tokens]: 2 | 2),
  // the attention output and the FFN's down projection are partial sums, reduced; the residual stream mirrored; the
  // logits split by vocabulary rows as the output head.
  EXPECT_EQ(state(*r, node(*m, "Qcur-0")), "axis 0 {128, 128}");
  EXPECT_EQ(state(*r, node(*m, "fattn-0")), "axis 1 {2, 2}");
  EXPECT_EQ(state(*r, node(*m, "attn_out-0")), "partial");
  EXPECT_EQ(state(*r, node(*m, "ffn_inp-0")), "mirrored");
  EXPECT_EQ(state(*r, node(*m, "ffn_out-1")), "partial");
  EXPECT_EQ(state(*r, node(*m, "result_output")), "axis 0 {160, 160}");
  // 2 reductions a layer (after the attention output and after the FFN), so 5 subgraphs. Each reduces [256, n_tokens]
  // floats.
  ASSERT_EQ(r->n_reductions, 4u);
  EXPECT_EQ(r->plan.n_subgraphs(), 5u);
  EXPECT_EQ(std::string(m->graph->node(r->plan.reductions[0])->name), "attn_out-0");
  EXPECT_EQ(r->reduced_bytes, 4u * 256 * static_cast<size_t>(c.n_tokens) * 4);
  // Bytes (q4_0: 144 B per 256 values, 72 B per 128): the norms (2 x 2 + 1) x 1024 = 5120 on both; layer 0 on device
  // 0: Q 128 x 144 + K, V 2 x 64 x 144 + output 256 x 72 + gate, up 2 x 128 x 144 + down 256 x 72 = 110592, on device 1
  // with the FFN's 256: 55296 + 3 x 36864 = 165888; layer 1 the other way round; the head 160 x 144 = 23040 each.
  // 5120 + 110592 + 165888 + 23040 = 304640 on each. The token embedding, 320 x 144 = 46080, stays in host memory.
  EXPECT_EQ(r->weights, (std::vector<size_t>{304640, 304640}));
  EXPECT_EQ(r->host_weights, 46080u);
  // The cache: 2 layers x K and V x 64 values x 2 B x 64 cells each.
  EXPECT_EQ(r->cache, (std::vector<size_t>{2u * 2 * 64 * 2 * 64, 2u * 2 * 64 * 2 * 64}));
}

// Three devices at -ts 2,1,1. The KV groups are whole: Q's cuts 256 x 2/4 = 128 and 256 x 3/4 = 192, rounded to 128,
// give 128 | 0 | 128 (the middle device gets no head: 2 groups over 3 devices), K and V 64 | 0 | 64, the FFN 384 x 2/4
// = 192 -> 128 and 288 -> 256: 128 | 128 | 128. The output head's rotation is n_layer % 3 = 2: its shares in order are
// device 2's, 0's, 1's (1, 2, 1): cuts 80 and 240, so device 2 gets 80, device 0 160 and device 1 the last 80.
TEST(LlamaTensorSplit, UnevenSharesGqaGroupsAndRotation) {
  const models::LlamaConfig c = split_small();
  auto m = models::build_llama(c);
  ASSERT_TRUE(m.ok());
  auto r = llama_tensor_parallel(m.value(), c, 3, {2, 1, 1});
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_q.weight")), "axis 1 {128, 0, 128}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.attn_v.weight")), "axis 1 {64, 0, 64}");
  EXPECT_EQ(state(*r, weight(*m, "blk.0.ffn_down.weight")), "axis 0 {128, 128, 128}");
  EXPECT_EQ(state(*r, weight(*m, "output.weight")), "axis 1 {160, 80, 80}");
  EXPECT_EQ(state(*r, node(*m, "fattn-0")), "axis 1 {2, 0, 2}");
  EXPECT_EQ(r->n_reductions, 4u);
}

// Every architecture's tiny model and the 7b and 70b presets on 2, 3, 4 and 8 devices: planned without error, with two
// reductions a layer, and each split weight's slices add up to the whole (the bytes of the unsplit tensor; a mirrored
// one on every device).
TEST(LlamaTensorSplit, EveryArchitectureOnTwoToEightDevices) {
  for (const char* name :
       {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3", "tiny-gpt-oss"}) {
    for (size_t n : {2, 3, 4, 8}) {
      models::LlamaConfig c = models::preset(name).value();
      c.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
      auto m = models::build_llama(c);
      ASSERT_TRUE(m.ok()) << name;
      const std::string where = std::string(name) + " on " + std::to_string(n) + " devices";
      auto r = llama_tensor_parallel(m.value(), c, n, {});
      ASSERT_TRUE(r.ok()) << where << ": " << r.status().to_string();
      EXPECT_EQ(r->n_reductions, 2u * static_cast<size_t>(c.n_layer)) << where;
      const StaticSplitFn fn = llama_tensor_split(m.value(), c, n, {});
      for (const Tensor* w : m->weights) {
        std::optional<SplitState> s = fn(*w);
        ASSERT_TRUE(s.has_value()) << w->name;
        size_t sum = 0;
        for (size_t j = 0; j < n; ++j) sum += split_bytes(*w, *s, j, n);
        const size_t whole = row_size(w->type, w->ne[0]) * static_cast<size_t>(w->ne[1] * w->ne[2] * w->ne[3]);
        EXPECT_EQ(sum, s->is_split() ? whole : n * whole) << where << ": " << w->name << " " << s->describe(n);
      }
    }
  }
}

// One KV head (multi-query attention, e.g. Gemma 3 1B): the cache [64, cells] split along axis 0 as {64} on one device
// is viewed as K [64, 1 head, cells], whose one head leaves no head axis: ggml's rules (a contiguous view is a reshape;
// the first axis whose extent covers the slice is axis 0) keep K split along axis 0, and flash attention needs K split
// by heads. ggml aborts there; Tessera refuses the model with the node's name.
TEST(LlamaTensorSplit, OneKvHeadIsRefused) {
  models::LlamaConfig c = split_small();
  c.n_head_kv = 1;
  c.n_head = 4;
  auto m = models::build_llama(c);
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  auto r = llama_tensor_parallel(m.value(), c, 2, {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("FLASH_ATTN_EXT 'fattn-0': Q, K and V are not split by heads"));
}

// -sm tensor with -nkvo, an upstream defect (GenerelSchwerz/llama.cpp#66, 2026-09: "--split-mode tensor together with
// --no-kv-offload either aborts or silently returns wrong output on any model with more than one KV head"): the cache
// is in host memory, so the meta backend never asks the model how to split it; it and its views are read whole
// (mirrored) while Q is split by heads, and flash attention's rule fails at the first layer.
TEST(LlamaTensorSplit, NoKvOffloadMirrorsTheCacheWhileQIsSplitByHeads) {
  const models::LlamaConfig c = split_small();
  auto m = models::build_llama(c);
  ASSERT_TRUE(m.ok());
  auto r = llama_tensor_parallel(m.value(), c, 2, {}, /*kv_offload=*/false);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("FLASH_ATTN_EXT 'fattn-0': Q, K and V are not split by heads"));
  EXPECT_THAT(r.status().message(), HasSubstr("k-0 (mirrored)"));
  EXPECT_THAT(r.status().message(), HasSubstr("(axis 2 {2, 2})"));
}

// The propagation rules over a hand-made graph: W1 [8, 6] split along axis 1 as {2, 4} times a mirrored x [8, 3] is
// split along axis 0 as {2, 4}; W2 [6, 5] split along axis 0 as {2, 4} times that is a partial sum (one reduction, two
// subgraphs); a row-wise op over rows split along axis 0, and a static split that does not add up, are errors naming
// the tensor.
TEST(TensorParallel, HandMadeGraphAndItsErrors) {
  Context ctx{{.no_alloc = true}};
  Tensor* w1 = ctx.new_tensor_2d(Type::kF32, 8, 6);
  Tensor* w2 = ctx.new_tensor_2d(Type::kF32, 6, 5);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 8, 3);
  set_name(*w1, "w1");
  set_name(*w2, "w2");
  set_name(*x, "x");
  Tensor* y = mul_mat(ctx, w1, x);
  set_name(*y, "y");
  Tensor* z = mul_mat(ctx, w2, y);
  set_name(*z, "z");
  Tensor* out = scale(ctx, z, 2.0f);
  Graph g(16);
  ASSERT_TRUE(g.build_forward(out).ok());
  const StaticSplitFn statics = [&](const Tensor& t) -> std::optional<SplitState> {
    if (&t == w1) return SplitState{SplitAxis::k1, {2, 4}, {1}};
    if (&t == w2) return SplitState{SplitAxis::k0, {2, 4}, {1}};
    return std::nullopt;
  };
  auto p = plan_tensor_parallel(g, 2, statics);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  EXPECT_EQ(p->of(x)->describe(2), "mirrored");
  EXPECT_EQ(p->of(y)->describe(2), "axis 0 {2, 4}");
  EXPECT_EQ(p->of(z)->describe(2), "partial");
  EXPECT_EQ(p->of(out)->describe(2), "mirrored");
  ASSERT_EQ(p->reductions.size(), 1u);
  EXPECT_EQ(g.node(p->reductions[0]), z);
  EXPECT_EQ(p->n_subgraphs(), 2u);

  Tensor* n = rms_norm(ctx, w2, 1e-5f);
  set_name(*n, "n");
  Graph g2(8);
  ASSERT_TRUE(g2.build_forward(n).ok());
  auto e = plan_tensor_parallel(g2, 2, statics);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("RMS_NORM 'n': a row-wise op over rows split along axis 0"));

  const StaticSplitFn wrong = [&](const Tensor& t) -> std::optional<SplitState> {
    if (&t == w1) return SplitState{SplitAxis::k1, {2, 3}, {1}};
    return std::nullopt;
  };
  e = plan_tensor_parallel(g, 2, wrong);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr("'w1': its slices add up to 5 along axis 1, not 6"));
  EXPECT_FALSE(plan_tensor_parallel(g, 17, statics).ok());
}

// The time estimate over the hand-made graph of TensorParallel.HandMadeGraphAndItsErrors on two GPUs whose MUL_MAT
// takes a fixed 10 us and SCALE 3 us, linked at 1 GB/s with 5 us of latency: the first subgraph (y, z) takes 20 us on
// each GPU, then z's 60 bytes are reduced by a ring of 2 x (2 - 1) = 2 steps of 30 bytes, each 5 + 30 / 1e9 s = 5.03
// us; the second subgraph (the SCALE of the reduced z) 3 us. Compute 23 us, reductions 10.06 us.
TEST(TensorParallel, TimeOfSubgraphsAndRingReductions) {
  Context ctx{{.no_alloc = true}};
  Tensor* w1 = ctx.new_tensor_2d(Type::kF32, 8, 6);
  Tensor* w2 = ctx.new_tensor_2d(Type::kF32, 6, 5);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 8, 3);
  Tensor* y = mul_mat(ctx, w1, x);
  Tensor* z = mul_mat(ctx, w2, y);
  Tensor* out = scale(ctx, z, 2.0f);
  models::LlamaGraph m;
  m.graph = std::make_unique<Graph>(16);
  ASSERT_TRUE(m.graph->build_forward(out).ok());
  const StaticSplitFn statics = [&](const Tensor& t) -> std::optional<SplitState> {
    if (&t == w1) return SplitState{SplitAxis::k1, {2, 4}, {1}};
    if (&t == w2) return SplitState{SplitAxis::k0, {2, 4}, {1}};
    return std::nullopt;
  };
  auto p = plan_tensor_parallel(*m.graph, 2, statics);
  ASSERT_TRUE(p.ok()) << p.status().to_string();
  sim::TopologyConfig topo;
  topo.name = "two";
  for (const char* name : {"gpu0", "gpu1"}) {
    sim::DeviceConfig d;
    d.name = name;
    d.cost.overrides = {{Op::kMulMat, -1, -1, 10.0}, {Op::kScale, -1, -1, 3.0}};
    topo.devices.push_back(d);
  }
  sim::DeviceConfig cpu;
  cpu.name = "cpu";
  cpu.type = DeviceType::kCpu;
  topo.devices.push_back(cpu);
  topo.links.push_back({"gpu0", "gpu1", 1e9, 5.0});
  sim::SimOptions opt;
  opt.mode = sim::MemoryMode::kMetadata;
  auto simulator = sim::Simulator::create(topo, opt);
  ASSERT_TRUE(simulator.ok()) << simulator.status().to_string();
  auto t = tensor_parallel_time(m, p.value(), *simulator.value(), {0, 1});
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_NEAR(t->compute_us, 23.0, 1e-9);
  EXPECT_NEAR(t->reduce_us, 2 * (5.0 + 30.0 / 1e9 * 1e6), 1e-9);
}

}  // namespace
