// The meta device as a runtime backend (-sm tensor, issue 47; tessera/meta_backend.h): a model's weights, cache and
// graph placed in the meta buffer type, split over N devices by llama.cpp's split states, computed on the meta backend
// (each device its slices, an AllReduce after each partial result) and compared with the same model computed whole
// on one CPU backend (reference kernels). The oracle is independent of the meta backend: it never sees a split. Seeds
// are printed on failure.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/sched.h"
#include "tessera/sim/trace.h"
#include "unit/llama/meta_fixture.h"

using namespace tessera;
using namespace tessera::llama;
using ::testing::HasSubstr;

namespace {

using namespace tessera::meta_testing;

// A small llama whose splits are not trivial: n_embd 256, 4 heads of 64 over 2 KV heads, n_ff 384 (the FFN's
// granularity is 128: 3 pieces), a vocabulary of 320; q4_0 matrices, an f16 cache, flash attention; llama.cpp's graph
// of its newest checked build. kv_heads 8 (n_head 16 of 32, n_embd 512): heads for 8 devices.
models::LlamaConfig small(const char* preset = "tiny", int64_t kv_heads = 2) {
  models::LlamaConfig c = models::preset(preset).value();
  c.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
  c.flash_attn = true;
  c.n_embd = kv_heads == 8 ? 512 : 256;
  c.n_head = kv_heads == 8 ? 16 : 4;
  c.n_head_kv = kv_heads;
  c.n_embd_head = kv_heads == 8 ? 32 : 64;
  c.n_ff = 384;
  c.n_vocab = 320;
  return c;
}

// A preset with llama.cpp's graph and flash attention, its FFN widened to 384 so that the FFN's 128-value granularity
// gives each of 2 or 3 devices a slice.
models::LlamaConfig wide_ffn(const char* preset) {
  models::LlamaConfig c = models::preset(preset).value();
  c.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
  c.flash_attn = true;
  c.n_ff = 384;
  return c;
}

// A model on a meta device over `devices` beside a CPU backend, under the scheduler, as llama.cpp runs -sm tensor: the
// weights `on_host` picks in host memory (placed first, so that the meta buffers take the rest), the other weights
// packed per device, the cache in the meta buffers (or in host memory: cache_on_host, as -nkvo), random values, the
// scheduler over the meta backend and the CPU. Members go in reverse order: the buffers before the meta device.
struct MetaRun {
  models::LlamaGraph m;
  std::unique_ptr<MetaDevice> meta;
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::unique_ptr<Backend> meta_backend, cpu_backend;
  std::unique_ptr<Scheduler> sched;
};
Result<std::unique_ptr<MetaRun>> meta_run(const models::LlamaConfig& c, const std::vector<Device*>& devices,
                                          uint64_t seed, const std::function<bool(const Tensor&)>& on_host,
                                          bool cache_on_host = false) {
  auto r = std::make_unique<MetaRun>();
  auto m = models::build_llama(c);
  if (!m.ok()) return m.status();
  r->m = std::move(m).value();
  auto meta = make_meta_device({.devices = devices, .statics = llama_tensor_split(r->m, c, devices.size(), {})});
  if (!meta.ok()) return meta.status();
  r->meta = std::move(meta).value();
  auto keep = [&](Result<std::unique_ptr<Buffer>> b, BufferUsage usage) -> Status {
    if (!b.ok()) return b.status();
    if (b.value()) b.value()->set_usage(usage);
    r->buffers.push_back(std::move(b).value());
    return Status::Ok();
  };
  BufferType* host = cpu::buffer_type();
  for (Tensor* w : r->m.weights) {
    if (!on_host(*w)) continue;
    auto b = host->alloc_buffer(host->alloc_size(*w));
    if (!b.ok()) return b.status();
    TS_RETURN_IF_ERROR(tensor_alloc(*b.value(), *w, b.value()->base()));
    TS_RETURN_IF_ERROR(keep(std::move(b), BufferUsage::kWeights));
  }
  TS_RETURN_IF_ERROR(keep(meta_alloc_ctx_tensors(*r->m.weights_ctx, *r->meta), BufferUsage::kWeights));
  TS_RETURN_IF_ERROR(keep(
      cache_on_host ? alloc_ctx_tensors(*r->m.cache_ctx, *host) : meta_alloc_ctx_tensors(*r->m.cache_ctx, *r->meta),
      BufferUsage::kAny));
  TS_RETURN_IF_ERROR(models::fill_random(r->m, seed));
  auto mb = r->meta->init_backend();
  if (!mb.ok()) return mb.status();
  r->meta_backend = std::move(mb).value();
  r->cpu_backend = cpu::make_backend({.n_threads = 1, .kernels = cpu::CpuKernels::kReference});
  auto sched = Scheduler::create({r->meta_backend.get(), r->cpu_backend.get()});
  if (!sched.ok()) return sched.status();
  r->sched = std::move(sched).value();
  return r;
}
}  // namespace

// The small llama on 2, 3, 4 and 8 simulated GPUs, even and uneven shares: the logits equal the CPU's whole model.
TEST(MetaBackend, LlamaOnSimulatedGpusEqualsTheCpu) {
  const uint64_t seed = 4711;
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Case {
    int64_t kv_heads;
    size_t n;
    std::vector<double> shares;
  };
  std::vector<float> want;
  int64_t want_of = 0;
  for (const Case& k :
       std::vector<Case>{{2, 2, {}}, {2, 3, {2, 1, 1}}, {8, 3, {}}, {8, 4, {}}, {8, 4, {1, 3, 0, 2}}, {8, 8, {}}}) {
    SCOPED_TRACE("devices " + std::to_string(k.n) + ", kv heads " + std::to_string(k.kv_heads));
    const models::LlamaConfig c = small("tiny", k.kv_heads);
    if (want_of != k.kv_heads) want = reference_logits(c, seed), want_of = k.kv_heads;
    ASSERT_FALSE(want.empty());
    Gpus g(k.n);
    auto got = meta_logits(c, seed, g.devices, k.shares);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LE(nmse(got->v, want), 1e-6);
    EXPECT_EQ(got->stats.reductions, 2u * static_cast<size_t>(c.n_layer));
    EXPECT_TRUE(g.sim->races().empty()) << g.sim->races_report();
  }
}

// Each simulated GPU holds its slices of the weights and of the cache, packed (not a copy of the whole model): for the
// small llama on 2 devices LlamaTensorSplit.StatesAndBytesOfASmallLlamaOnTwoDevices works out 304640 B of weights per
// device (token_embd, 320 x 144 B = 46080, mirrored here: the whole model is in the meta buffers) and 2 layers x K and
// V x 64 values x 2 B x 64 cells = 32768 B of cache. Every slice here is a whole number of the GPUs' 256-byte alignment
// (the norms 1024 B, the q4_0 slices multiples of 128 rows x 144 B), so nothing is padded.
TEST(MetaBackend, EachDeviceHoldsItsSlices) {
  const uint64_t seed = 5;
  Gpus g(2);
  auto got = meta_logits(small(), seed, g.devices, {});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  const size_t want = 304640 + 46080 + 32768;
  for (size_t j = 0; j < 2; ++j) {
    EXPECT_EQ(got->used[j], want) << "device " << j;
  }
}

// The CPU device listed twice: two backends on one device, each holding its slices.
TEST(MetaBackend, TwoBackendsOnOneCpu) {
  const uint64_t seed = 99;
  SCOPED_TRACE("seed " + std::to_string(seed));
  const models::LlamaConfig c = small();
  auto got = meta_logits(c, seed, {cpu::device(), cpu::device()}, {});
  ASSERT_TRUE(got.ok()) << got.status().to_string();
  EXPECT_LE(nmse(got->v, reference_logits(c, seed)), 1e-6);
}

TEST(MetaBackend, BadDeviceListsAreErrors) {
  EXPECT_THAT(make_meta_device({}).status().message(), HasSubstr("0 devices (1 to 16)"));
  EXPECT_THAT(make_meta_device({.devices = {cpu::device(), nullptr}, .statics = {}}).status().message(),
              HasSubstr("device 1 is null"));
  EXPECT_THAT(make_meta_device({.devices = std::vector<Device*>(17, cpu::device()), .statics = {}}).status().message(),
              HasSubstr("17 devices"));
}

// Every architecture preset (llama, MoE, Qwen2's biases, Qwen3's Q/K norms, Qwen3-MoE, Gemma 3's sliding window,
// Phi-3's fused QKV and up + gate, gpt-oss's sinks, expert biases and sliding window) on 2 and 3 simulated GPUs, the
// FFN widened so that its 128-value granularity gives every device a slice.
TEST(MetaBackend, EveryArchitectureEqualsTheCpu) {
  const uint64_t seed = 2027;
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const char* name :
       {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3", "tiny-gpt-oss"}) {
    SCOPED_TRACE(name);
    const models::LlamaConfig c = wide_ffn(name);
    const std::vector<float> want = reference_logits(c, seed);
    for (size_t n : {2, 3}) {
      SCOPED_TRACE("devices " + std::to_string(n));
      Gpus g(n);
      auto got = meta_logits(c, seed, g.devices, {});
      ASSERT_TRUE(got.ok()) << got.status().to_string();
      EXPECT_LE(nmse(got->v, want), 1e-6);
      EXPECT_TRUE(g.sim->races().empty()) << g.sim->races_report();
    }
  }
}

// The meta backend as one backend of the scheduler, as llama.cpp runs -sm tensor: the token embedding in host memory
// (its GET_ROWS on the CPU), every other weight and the cache in the meta buffer type; the scheduler assigns the nodes
// by their weights, copies the CPU's results into the meta device's compute buffer and runs the splits. The logits
// equal the CPU's whole model.
TEST(MetaBackend, UnderTheSchedulerWithTheInputLayerOnTheCpu) {
  const uint64_t seed = 31;
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const char* name : {"tiny", "tiny-gpt-oss"}) {
    SCOPED_TRACE(name);
    models::LlamaConfig c = small(name);
    const std::vector<float> want = reference_logits(c, seed);
    Gpus g(3);
    // token_embd in host memory, the rest of the weights and the cache in meta buffers
    auto run = meta_run(c, g.devices, seed, [](const Tensor& w) { return std::string(w.name) == "token_embd.weight"; });
    ASSERT_TRUE(run.ok()) << run.status().to_string();
    models::LlamaGraph* m = &(*run)->m;
    Scheduler* sched = (*run)->sched.get();
    ASSERT_TRUE(sched->alloc_graph(*m->graph).ok());
    ASSERT_TRUE(models::set_inputs(*m, models::default_inputs(c, seed)).ok());
    ASSERT_EQ(sched->graph_compute(*m->graph), ComputeStatus::kSuccess);
    auto got = tensor_to_f32(*m->logits);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LE(nmse(*got, want), 1e-6);
    // the input layer's GET_ROWS on the CPU, the rest on the meta device
    EXPECT_EQ(sched->n_splits(), 2);
    EXPECT_EQ(sched->explain(m->graph->node(0)).backend, 1) << m->graph->node(0)->name;
    EXPECT_TRUE(g.sim->races().empty()) << g.sim->races_report();
  }
}

// -ncmoe with tensor parallelism (llama.cpp issue #24886, fixed by PR #25028): the first layer's experts in host
// memory, computed on the CPU, the rest on the meta device. The router's choice (ffn_moe_topk, a mirrored view that is
// not contiguous) is computed on the meta device and read back by the scheduler's copy to the CPU; ggml asserted
// contiguity before looking at the state there ("GGML_ASSERT(ggml_is_contiguous(tensor)) failed"), Tessera's meta
// buffer reads a mirrored tensor of any layout from its first device. The logits equal the CPU's whole model.
TEST(MetaBackend, CpuExpertsOfTheFirstLayerAsNcmoe) {
  const uint64_t seed = 77;
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const char* name : {"tiny-moe", "tiny-qwen3moe", "tiny-gpt-oss"}) {
    SCOPED_TRACE(name);
    const models::LlamaConfig c = wide_ffn(name);
    const std::vector<float> want = reference_logits(c, seed);
    Gpus g(2);
    // -ncmoe 1: blk.0.ffn_(up|gate|down)_exps (weights and biases) in host memory
    int on_host = 0;
    auto run = meta_run(c, g.devices, seed, [&](const Tensor& w) {
      const std::string n = w.name;
      const bool host = n.rfind("blk.0.ffn_", 0) == 0 && n.find("_exps") != std::string::npos;
      on_host += host ? 1 : 0;
      return host;
    });
    ASSERT_TRUE(run.ok()) << run.status().to_string();
    ASSERT_GE(on_host, 3);
    models::LlamaGraph* m = &(*run)->m;
    Scheduler* sched = (*run)->sched.get();
    ASSERT_TRUE(sched->alloc_graph(*m->graph).ok());
    ASSERT_TRUE(models::set_inputs(*m, models::default_inputs(c, seed)).ok());
    ASSERT_EQ(sched->graph_compute(*m->graph), ComputeStatus::kSuccess);
    // the router's choice on the meta device, the experts that read it on the CPU
    const Tensor* topk = nullptr;
    const Tensor* gate = nullptr;
    for (const Tensor* t : m->graph->nodes()) {
      if (std::string(t->name) == "ffn_moe_topk-0") topk = t;
      if (t->op == Op::kMulMatId && gate == nullptr) gate = t;
    }
    ASSERT_TRUE(topk != nullptr && gate != nullptr);
    EXPECT_EQ(sched->explain(topk).backend, 0);
    EXPECT_FALSE(is_contiguous(*topk));
    EXPECT_EQ(sched->explain(gate).backend, 1) << gate->name;
    auto got = tensor_to_f32(*m->logits);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    EXPECT_LE(nmse(*got, want), 1e-6);
    EXPECT_TRUE(g.sim->races().empty()) << g.sim->races_report();
  }
}

// Where tensor parallelism pays (issue 47: "the time model shows when tensor parallelism beats layer split on a
// topology"): a 512-token prompt of the 7b preset, metadata-only, simulated on the meta device and with -sm layer by
// the scheduler. On eight GPUs on an NVLink-like switch (450 GB/s, 8x80gb) the GPUs share each layer's work and the
// ring AllReduces are cheap: -sm tensor is faster (measured 20.9 against 30.4 ms). On two RTX 4090s over PCIe 4.0
// every AllReduce crosses 32 GB/s: -sm layer is faster (70.0 against 79.3 ms). The ring's copies run in two rounds
// per step (even senders, then odd); in device order each copy waits for the one before and -sm tensor loses on the
// switch too (44.2 ms).
TEST(MetaBackend, TensorParallelismBeatsLayerSplitOnNvlinkNotOnPcie) {
  auto makespans = [](const char* topology) -> std::pair<double, double> {
    harness::SessionConfig c;
    c.topology = harness::topology_preset(topology).value();
    c.model = models::preset("7b").value();
    c.model.n_tokens = 512;
    c.sim.mode = sim::MemoryMode::kMetadata;
    c.policy.split_mode = harness::SplitMode::kTensor;
    auto tensor = run_tensor_parallel(c, &builtin_registry());
    EXPECT_TRUE(tensor.ok()) << tensor.status().to_string();
    if (!tensor.ok()) return {0, 0};
    const double t = sim::summarize(tensor->sim->trace(), tensor->trace_first, tensor->trace_last).makespan_us;
    c.policy.split_mode = harness::SplitMode::kLayer;
    auto s = harness::Session::create(c, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    if (!s.ok()) return {t, 0};
    auto layer = s.value()->run(1, false);
    EXPECT_TRUE(layer.ok());
    return {t, layer.ok() ? layer->makespan_us : 0};
  };
  const auto [nvlink_tensor, nvlink_layer] = makespans("8x80gb");
  EXPECT_LT(nvlink_tensor, nvlink_layer);
  const auto [pcie_tensor, pcie_layer] = makespans("2x-rtx4090-pcie4");
  EXPECT_GT(pcie_tensor, pcie_layer);
}

// Rope factors (Llama 3.1's rope_freqs) with layer 0 on the CPU: llama.cpp duplicates them onto each layer's buffer
// type, so the layers on the meta device read a copy there and no layer's ROPE reads a weight on the CPU. The run
// cuts 2 splits (the CPU's layer, then the meta device's), as llama.cpp master does (tests/side-by-side/10: 2), not
// one more per meta layer's ROPE (a weight on another backend starts a split); the logits equal the CPU reference's,
// which reads the original factors only.
TEST(MetaBackend, RopeFactorsAreCopiedToTheMetaDeviceWhenLayerZeroIsOnTheCpu) {
  harness::SessionConfig c;
  c.topology = harness::topology_preset("2gpu-unequal").value();
  c.model = models::preset("tiny").value();
  c.model.n_layer = 4;
  c.model.rope_freq_factors = true;
  c.policy.split_mode = harness::SplitMode::kTensor;
  c.policy.n_gpu_layers = 4;  // layers 1-3 and the output layer: layer 0 on the CPU
  c.model_seed = 59;
  SCOPED_TRACE("seed 59");
  auto run = run_tensor_parallel(c, &builtin_registry());
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  EXPECT_EQ(run->model.rope_factor_copy, (std::vector<int>{0, 1, 1, 1}));
  EXPECT_EQ(run->splits, 2);
  ASSERT_TRUE(run->checked);
  EXPECT_LE(run->nmse.nmse, 1e-6);
  EXPECT_FALSE(run->nmse.nan_mismatch);
  EXPECT_TRUE(run->sim->races().empty()) << run->sim->races_report();
}

// A tensor outside the meta buffers is read whole (mirrored), whatever state the application would give it: the meta
// device holds no slices of it. With the KV cache in host memory (-nkvo) the scheduler writes the cache on the CPU and
// copies its views into the meta device's compute buffer, mirrored, while Q is split by heads: flash attention's rule
// fails at the first layer, as ggml's meta backend does (GenerelSchwerz/llama.cpp#66).
TEST(MetaBackend, AStaticTensorOutsideTheMetaBuffersIsReadWhole) {
  const models::LlamaConfig c = small();
  Gpus g(2);
  auto run = meta_run(
      c, g.devices, 1, [](const Tensor&) { return false; }, /*cache_on_host=*/true);
  ASSERT_TRUE(run.ok()) << run.status().to_string();
  Scheduler& sched = *(*run)->sched;
  ASSERT_TRUE(sched.alloc_graph(*(*run)->m.graph).ok());
  ASSERT_TRUE(models::set_inputs((*run)->m, models::default_inputs(c, 1)).ok());
  EXPECT_NE(sched.graph_compute(*(*run)->m.graph), ComputeStatus::kSuccess);
  EXPECT_THAT(sched.last_error(), HasSubstr("Q, K and V are not split by heads"));
}

// The same without the scheduler: a weight the application would split (blk.0.attn_q.weight, by heads) left in host
// memory is read whole by every device, so Q is whole on each and flash attention's rule refuses it, where reading it
// as each device's slice would compute the first device's heads everywhere.
TEST(MetaBackend, AWeightOutsideTheMetaBuffersIsNotTakenForASlice) {
  const models::LlamaConfig c = small();
  Gpus g(2);
  auto m = models::build_llama(c);
  ASSERT_TRUE(m.ok());
  auto meta = make_meta_device({.devices = g.devices, .statics = llama_tensor_split(*m, c, 2, {})});
  ASSERT_TRUE(meta.ok());
  Tensor* wq = m->weights_ctx->find("blk.0.attn_q.weight");
  ASSERT_NE(wq, nullptr);
  auto host = cpu::buffer_type()->alloc_buffer(cpu::buffer_type()->alloc_size(*wq));
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE(tensor_alloc(**host, *wq, (*host)->base()).ok());
  auto wbuf = meta_alloc_ctx_tensors(*m->weights_ctx, **meta);
  auto cbuf = meta_alloc_ctx_tensors(*m->cache_ctx, **meta);
  ASSERT_TRUE(wbuf.ok() && cbuf.ok());
  GraphPlanner planner((*meta)->buffer_type());
  ASSERT_TRUE(planner.alloc_graph(*m->graph).ok());
  auto b = (*meta)->init_backend();
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->graph_compute(*m->graph), ComputeStatus::kFailed);
  EXPECT_THAT((*b)->last_error(), HasSubstr("Q, K and V are not split by heads"));
}
