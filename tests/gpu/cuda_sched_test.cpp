// The scheduler with a real CUDA backend: llama-style graphs (models/tessera/models/llama.h: dense and MoE, flash
// attention or MUL_MAT + SOFT_MAX, one token or a batch) over [CUDA, CPU] and [CUDA, simulated GPU, CPU], with and
// without `parallel`, give the CPU-only logits. Layers are spread over the devices (the last layer and the token
// embedding stay on the CPU), so the graph has several splits and cross-device copies in both directions. Also the
// simulator's wrapped CUDA device under the hazard detector. Skipped without a GPU.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "cuda_test_util.h"
#include "tessera/harness/session/reference.h"
#include "tessera/models/llama.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"
#include "tessera/harness/placement/allocate.h"
#include "tessera/sim/simulator.h"
#include "tessera/builtin.h"

using namespace tessera;
using namespace tessera::models;

namespace {

struct Variant {
  std::string name;
  std::string preset;
  bool flash_attn;
  int64_t n_tokens;
  bool parallel;
  bool with_sim;  // [CUDA, simulated GPU, CPU] instead of [CUDA, CPU]
};

void PrintTo(const Variant& v, std::ostream* os) { *os << v.name; }

LlamaConfig config_of(const Variant& v) {
  LlamaConfig c = preset(v.preset).value();
  c.n_layer = 4;
  c.flash_attn = v.flash_attn;
  c.n_tokens = v.n_tokens;
  return c;
}

// The CPU oracle (harness::cpu_reference_logits), which must succeed.
std::vector<float> cpu_logits(const LlamaConfig& c, uint64_t seed) {
  auto r = tessera::harness::cpu_reference_logits(c, seed);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : std::vector<float>();
}

std::unique_ptr<sim::Simulator> make_simulated_gpu() {
  sim::DeviceConfig g;
  g.name = "simgpu";
  g.type = DeviceType::kGpu;
  g.memory = 1 * sim::GiB;
  g.alignment = 256;
  g.caps = {/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  sim::DeviceConfig c;
  c.name = "simcpu";
  c.type = DeviceType::kCpu;
  c.wraps = "CPU";
  c.memory = 4 * sim::GiB;
  c.alignment = 64;
  c.host_visible = true;
  sim::TopologyConfig t;
  t.name = "cuda-plus-sim";
  t.devices = {g, c};
  sim::SimOptions o;
  o.seed = 7;
  o.record_trace = false;
  auto s = sim::Simulator::create(t, o, &builtin_registry());
  return s.ok() ? std::move(s).value() : nullptr;
}

class CudaScheduler : public ::testing::TestWithParam<Variant> {};

TEST_P(CudaScheduler, LlamaLogitsEqualTheCpuOnlyRun) {
  TESSERA_REQUIRE_GPU(1);
  const Variant& v = GetParam();
  const LlamaConfig c = config_of(v);
  const uint64_t seed = 42;
  const std::vector<float> want = cpu_logits(c, seed);

  std::string reason;
  std::unique_ptr<Backend> gpu = cuda::testing::backend_or_reason(&reason);
  ASSERT_NE(gpu, nullptr) << reason;
  std::unique_ptr<Backend> cpu_backend = cpu::make_backend({.n_threads = 2});
  std::unique_ptr<sim::Simulator> simulator;
  std::unique_ptr<Backend> sim_gpu;
  if (v.with_sim) {
    simulator = make_simulated_gpu();
    ASSERT_NE(simulator, nullptr);
    auto b = simulator->device(0)->init_backend({});
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    sim_gpu = std::move(b).value();
  }

  // Layers: the first half on CUDA, then (with the simulator) the simulated GPU, the last layer on the CPU; the
  // output head on CUDA, the token embedding on the CPU.
  LlamaGraph m = build_llama(c).value();
  BufferType* cuda_buft = gpu->default_buffer_type();
  BufferType* cpu_buft = cpu::buffer_type();
  BufferType* sim_buft = sim_gpu ? sim_gpu->default_buffer_type() : cuda_buft;
  auto buft_of_layer = [&](int layer) -> BufferType* {
    if (layer < 0 || layer >= c.n_layer - 1) return cpu_buft;
    return layer < (c.n_layer - 1) / 2 + (v.with_sim ? 0 : 1) ? cuda_buft : sim_buft;
  };
  std::vector<std::pair<Tensor*, BufferType*>> where;
  for (Tensor* w : m.weights) {
    BufferType* b = buft_of_layer(m.layer_of(w));
    if (m.layer_of(w) < 0 && w != m.tok_embd) b = cuda_buft;
    where.emplace_back(w, b);
  }
  auto wb = harness::allocate_tensors(where, BufferUsage::kWeights);
  ASSERT_TRUE(wb.ok()) << wb.status().to_string();
  where.clear();
  for (Tensor* kv : m.kv_cache) where.emplace_back(kv, buft_of_layer(m.layer_of(kv)));
  auto cb = harness::allocate_tensors(where, BufferUsage::kAny);
  ASSERT_TRUE(cb.ok()) << cb.status().to_string();
  ASSERT_TRUE(fill_random(m, seed).ok());

  std::vector<Backend*> backends = {gpu.get()};
  if (sim_gpu) backends.push_back(sim_gpu.get());
  backends.push_back(cpu_backend.get());
  SchedulerParams params;
  params.parallel = v.parallel;
  auto s = Scheduler::create(backends, params);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  Scheduler& sched = *s.value();

  for (int eval = 0; eval < 2; ++eval) {  // twice: the second evaluation reuses the plan (and rotates the slot)
    SCOPED_TRACE(::testing::Message() << "evaluation " << eval);
    ASSERT_TRUE(sched.alloc_graph(*m.graph).ok());
    ASSERT_TRUE(set_inputs(m, default_inputs(c, seed)).ok());
    ASSERT_EQ(sched.graph_compute(*m.graph), ComputeStatus::kSuccess) << sched.last_error();
    EXPECT_GE(sched.n_splits(), 2) << sched.report();
    const std::vector<float> got = tensor_to_f32(*m.logits).value();
    ASSERT_EQ(got.size(), want.size());
    const NmseResult r = nmse(want.data(), got.data(), want.size());
    EXPECT_FALSE(r.nan_mismatch);
    EXPECT_LT(r.nmse, 1e-5) << sched.report();
  }
  // The CUDA backend took the nodes of its layers.
  int on_cuda = 0;
  for (Tensor* n : m.graph->nodes()) on_cuda += sched.explain(n).backend == 0;
  sched.reset();
  EXPECT_GT(on_cuda, 0);
}

// The simulator's wrapped real device (docs/simulator.md) over CUDA0, with the wrapped CPU: the scheduler's event flow
// with `parallel` and several evaluations in flight, on real CUDA streams, is checked by the hazard detector (no race)
// and the logits equal the CPU-only run.
TEST(CudaWrappedBySimulator, NoRaceOnRealStreamsAndCpuResults) {
  TESSERA_REQUIRE_GPU(1);
  LlamaConfig c = preset("tiny").value();
  c.n_layer = 4;
  const uint64_t seed = 9;
  const std::vector<float> want = cpu_logits(c, seed);
  sim::DeviceConfig g;
  g.name = "gpu0";
  g.type = DeviceType::kGpu;
  g.wraps = "CUDA0";
  g.memory = 1 * sim::GiB;
  g.alignment = 256;
  g.caps = {/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  sim::DeviceConfig cpu_cfg;
  cpu_cfg.name = "cpu";
  cpu_cfg.type = DeviceType::kCpu;
  cpu_cfg.wraps = "CPU";
  cpu_cfg.memory = 4 * sim::GiB;
  cpu_cfg.alignment = 64;
  cpu_cfg.host_visible = true;
  sim::TopologyConfig t;
  t.name = "wrapped-cuda";
  t.devices = {g, cpu_cfg};
  for (uint64_t sim_seed : {1, 2, 3}) {
    SCOPED_TRACE(::testing::Message() << "simulator seed " << sim_seed);
    sim::SimOptions o;
    o.seed = sim_seed;
    o.adversarial = true;
    o.record_trace = false;
    auto created = sim::Simulator::create(t, o, &builtin_registry());
    ASSERT_TRUE(created.ok()) << created.status().to_string();
    std::unique_ptr<sim::Simulator> simulator = std::move(created).value();
    auto made = simulator->make_backends();
    ASSERT_TRUE(made.ok()) << made.status().to_string();
    std::vector<std::unique_ptr<Backend>> backends = std::move(made).value();
    LlamaGraph m = build_llama(c).value();
    BufferType* gpu_buft = simulator->device(0)->buffer_type();
    BufferType* cpu_buft = simulator->device(1)->buffer_type();
    std::vector<std::pair<Tensor*, BufferType*>> where;
    for (Tensor* w : m.weights) {
      const int layer = m.layer_of(w);
      where.emplace_back(w,
                         (layer >= 0 && layer < c.n_layer - 1) || (layer < 0 && w != m.tok_embd) ? gpu_buft : cpu_buft);
    }
    auto wb = harness::allocate_tensors(where, BufferUsage::kWeights);
    ASSERT_TRUE(wb.ok()) << wb.status().to_string();
    where.clear();
    for (Tensor* kv : m.kv_cache) where.emplace_back(kv, m.layer_of(kv) < c.n_layer - 1 ? gpu_buft : cpu_buft);
    auto cb = harness::allocate_tensors(where, BufferUsage::kAny);
    ASSERT_TRUE(cb.ok()) << cb.status().to_string();
    ASSERT_TRUE(fill_random(m, seed).ok());
    SchedulerParams p;
    p.parallel = true;
    auto sched = Scheduler::create({backends[0].get(), backends[1].get()}, p);
    ASSERT_TRUE(sched.ok()) << sched.status().to_string();
    ASSERT_TRUE(sched.value()->alloc_graph(*m.graph).ok());
    ASSERT_TRUE(set_inputs(m, default_inputs(c, seed)).ok());
    for (int i = 0; i < 3; ++i) {
      ASSERT_EQ(sched.value()->graph_compute_async(*m.graph), ComputeStatus::kSuccess) << sched.value()->last_error();
    }
    ASSERT_TRUE(sched.value()->synchronize().ok());
    const std::vector<float> got = tensor_to_f32(*m.logits).value();
    const NmseResult r = nmse(want.data(), got.data(), want.size());
    EXPECT_LT(r.nmse, 1e-5);
    EXPECT_TRUE(simulator->races().empty()) << simulator->races_report();
    EXPECT_TRUE(simulator->errors().empty()) << simulator->errors()[0];
    sched.value()->reset();
  }
}

std::vector<Variant> variants() {
  std::vector<Variant> out;
  for (bool with_sim : {false, true}) {
    for (bool parallel : {false, true}) {
      for (const char* p : {"tiny", "tiny-moe"}) {
        for (bool fa : {true, false}) {
          for (int64_t nt : {int64_t{1}, int64_t{8}}) {
            std::string name = std::string(with_sim ? "CudaSimCpu_" : "CudaCpu_") + (p[4] ? "moe_" : "dense_") +
                               (fa ? "fa_" : "softmax_") + std::to_string(nt) + "tok" + (parallel ? "_parallel" : "");
            out.push_back({name, p, fa, nt, parallel, with_sim});
          }
        }
      }
    }
  }
  return out;
}

INSTANTIATE_TEST_SUITE_P(Llama, CudaScheduler, ::testing::ValuesIn(variants()),
                         [](const ::testing::TestParamInfo<Variant>& i) { return i.param.name; });

}  // namespace
