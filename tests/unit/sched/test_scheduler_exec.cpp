// The scheduler end to end with real data: a restricted GPU-like backend + the CPU, against the CPU-only result.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>

#include "support/sched_doubles.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"

using namespace tessera;
using ::testing::HasSubstr;

namespace {

// A small decoder-like model: per layer rms_norm -> q = W x -> rope -> softmax -> silu(W2 .) -> residual.
// Weights of layers < n_cpu_layers live in a CPU host buffer (WEIGHTS), the others in `gpu_buft` (if given).
struct Model {
  Context wctx{{.no_alloc = true}};
  Context ctx{{.no_alloc = true}};
  std::unique_ptr<Buffer> cpu_weights, gpu_weights;
  Graph graph;
  Tensor* x = nullptr;
  Tensor* pos = nullptr;
  Tensor* out = nullptr;
  std::vector<Tensor*> cpu_w, gpu_w;

  Model(int layers, int n_cpu_layers, BufferType* gpu_buft, int64_t tokens = 4) {
    const int64_t d = 32;
    x = ctx.new_tensor_3d(Type::kF32, d, 1, tokens);
    set_name(*x, "x");
    set_input(*x);
    pos = ctx.new_tensor_1d(Type::kI32, tokens);
    set_name(*pos, "pos");
    set_input(*pos);
    Tensor* h = x;
    Context wcpu({.no_alloc = true});
    for (int l = 0; l < layers; ++l) {
      Tensor* w1 = wctx.new_tensor_2d(Type::kF16, d, d);
      Tensor* w2 = wctx.new_tensor_2d(Type::kQ8_0, d, d);
      format_name(*w1, "blk.%d.w1", l);
      format_name(*w2, "blk.%d.w2", l);
      (l < n_cpu_layers || gpu_buft == nullptr ? cpu_w : gpu_w).push_back(w1);
      (l < n_cpu_layers || gpu_buft == nullptr ? cpu_w : gpu_w).push_back(w2);
      Tensor* n = rms_norm(ctx, h, 1e-5f);
      Tensor* q = mul_mat(ctx, w1, reshape_2d(ctx, n, d, tokens));
      Tensor* r = rope(ctx, reshape_3d(ctx, q, d, 1, tokens), pos, d);
      Tensor* p = soft_max(ctx, reshape_2d(ctx, r, d, tokens), nullptr, 0.5f);
      Tensor* f = silu(ctx, mul_mat(ctx, w2, p));
      h = add(ctx, h, reshape_3d(ctx, f, d, 1, tokens));
      format_name(*h, "res.%d", l);
    }
    out = scale(ctx, h, 2.0f);
    set_name(*out, "out");
    set_output(*out);
    EXPECT_TRUE(ctx.ok()) << ctx.status().message();
    EXPECT_TRUE(graph.build_forward(out).ok());
    place(cpu_w, cpu::buffer_type(), cpu_weights);
    place(gpu_w, gpu_buft, gpu_weights);
  }

  // Puts a list of weights into one buffer of buft (usage WEIGHTS).
  void place(const std::vector<Tensor*>& ws, BufferType* buft, std::unique_ptr<Buffer>& buf) {
    if (ws.empty()) return;
    size_t total = 0;
    for (Tensor* w : ws) total += (buft->alloc_size(*w) + 63) / 64 * 64;
    auto b = buft->alloc_buffer(total);
    ASSERT_TRUE(b.ok());
    buf = std::move(b).value();
    buf->set_usage(BufferUsage::kWeights);
    TensorAllocator ta(*buf);
    for (Tensor* w : ws) ASSERT_TRUE(ta.alloc(*w).ok());
  }

  void fill_weights(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(0.0f, 0.3f);
    for (size_t i = 0; i < wctx.tensor_count(); ++i) {
      Tensor* t = wctx.tensor(i);
      std::vector<float> v(static_cast<size_t>(nelements(*t)));
      for (float& f : v) f = dist(rng);
      ASSERT_TRUE(tensor_from_f32(*t, v).ok());
    }
  }
  void set_inputs(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist;
    std::vector<float> v(static_cast<size_t>(nelements(*x)));
    for (float& f : v) f = dist(rng);
    ASSERT_TRUE(tensor_from_f32(*x, v).ok());
    std::vector<int32_t> p(static_cast<size_t>(pos->ne[0]));
    for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int32_t>(rng() % 100);
    ASSERT_TRUE(tensor_set(*pos, p.data(), 0, p.size() * 4).ok());
  }
};

// The reference: the same model computed on the CPU backend alone, every tensor in its own memory.
std::vector<float> cpu_reference(int layers, unsigned wseed, unsigned iseed) {
  Model m(layers, layers, nullptr);
  auto buf = alloc_ctx_tensors(m.ctx, *cpu::buffer_type());
  EXPECT_TRUE(buf.ok());
  m.fill_weights(wseed);
  m.set_inputs(iseed);
  auto cpu = cpu::make_backend({.n_threads = 1});
  EXPECT_EQ(cpu->graph_compute(m.graph), ComputeStatus::kSuccess) << cpu->last_error();
  return *tensor_to_f32(*m.out);
}

}  // namespace

class SchedulerExec : public ::testing::TestWithParam<bool> {};  // parameter: parallel

TEST_P(SchedulerExec, TwoBackendsMatchTheCpuAcrossRepeatedEvaluations) {
  const bool parallel = GetParam();
  doubles::RestrictedDevice gpu_dev("GPU0");
  gpu_dev.refused = {Op::kRope, Op::kSoftMax};  // every layer splits several times
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend({.n_threads = 2});
  const int layers = 4;
  Model m(layers, 2, &gpu_dev.buft());
  m.fill_weights(7);
  auto sched = Scheduler::create({gpu->get(), cpu.get()}, {.bufts = {}, .parallel = parallel});
  ASSERT_TRUE(sched.ok()) << sched.status().message();
  Scheduler& s = **sched;
  ASSERT_TRUE(s.reserve(m.graph).ok());
  const int reserves = s.reserve_count();
  for (unsigned eval = 0; eval < 5; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s.alloc_graph(m.graph).ok()) << s.last_error();
    m.set_inputs(100 + eval);
    ASSERT_EQ(s.graph_compute(m.graph), ComputeStatus::kSuccess) << s.last_error();
    EXPECT_EQ(*tensor_to_f32(*m.out), cpu_reference(layers, 7, 100 + eval));
    if (parallel) {
      EXPECT_EQ(s.current_slot(), static_cast<int>(eval % kParallelCopies));
    }
  }
  EXPECT_GT(s.n_splits(), 4);
  EXPECT_EQ(s.reserve_count(), reserves) << "no re-reserve after reserve with the same graph";
  // The scheduler restores the user's graph: no node reads a scheduler copy after reset.
  s.reset();
  for (Tensor* n : m.graph.nodes()) {
    for (Tensor* src : n->src) {
      if (src != nullptr) {
        EXPECT_EQ(std::string(src->name).find('#'), std::string::npos) << n->name;
      }
    }
  }
}

TEST_P(SchedulerExec, ComputeWithoutAllocAndTwiceInARow) {
  const bool parallel = GetParam();
  doubles::RestrictedDevice gpu_dev("GPU0");
  gpu_dev.refused = {Op::kSoftMax};
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend({.n_threads = 1});
  Model m(3, 1, &gpu_dev.buft());
  m.fill_weights(3);
  auto sched = Scheduler::create({gpu->get(), cpu.get()}, {.bufts = {}, .parallel = parallel});
  ASSERT_TRUE(sched.ok());
  // inputs must be placed before they can be set: the first compute allocates, then we set and compute again
  ASSERT_TRUE((*sched)->alloc_graph(m.graph).ok());
  m.set_inputs(11);
  ASSERT_EQ((*sched)->graph_compute(m.graph), ComputeStatus::kSuccess) << (*sched)->last_error();
  EXPECT_EQ(*tensor_to_f32(*m.out), cpu_reference(3, 3, 11)) << "first";
  const int slot1 = (*sched)->current_slot();
  ASSERT_EQ((*sched)->graph_compute(m.graph), ComputeStatus::kSuccess) << (*sched)->last_error();
  if (parallel) {
    EXPECT_NE((*sched)->current_slot(), slot1) << "each evaluation gets its own slot";
  }
  EXPECT_EQ(*tensor_to_f32(*m.out), cpu_reference(3, 3, 11));
}

namespace {

// Two views of one GPU tensor r: v1 is built before a CPU split, v2 inside it (the graph has it after the split's
// first node) and read there through a copy; a later GPU node reads v1 next to a fresh tensor of r's size.
//   r = x * w (GPU, weight) ; v1 = reshape(r)
//   c1 = soft_max(x) (CPU) ; v2 = view(r, rows 2..3) ; c2 = soft_max(v2) (CPU, reads a copy of v2)
//   g = x * w2 (GPU) ; out = (v1 + g) + x (GPU; reading x again keeps g out of the memory of x's copy)
// The shape of the end_to_end fuzz inputs read-of-cache-view-after-cpy-parallel.bin and
// reshape-read-after-permute-copied-in-its-own-split.bin.
struct ViewReadInItsSplit {
  Context wctx{{.no_alloc = true}};
  Context ctx{{.no_alloc = true}};
  std::unique_ptr<Buffer> weights;
  Graph graph;
  Tensor* x = nullptr;
  Tensor* c2 = nullptr;
  Tensor* out = nullptr;

  explicit ViewReadInItsSplit(BufferType& weight_buft) {
    const int64_t d = 16, rows = 4;
    Tensor* w = wctx.new_tensor_2d(Type::kF32, d, rows);
    Tensor* w2 = wctx.new_tensor_2d(Type::kF32, d, rows);
    set_name(*w, "w");
    set_name(*w2, "w2");
    x = ctx.new_tensor_2d(Type::kF32, d, rows);
    set_name(*x, "x");
    set_input(*x);
    Tensor* r = mul(ctx, x, w);
    set_name(*r, "r");
    Tensor* v1 = reshape_2d(ctx, r, d, rows);
    set_name(*v1, "v1");
    Tensor* c1 = soft_max(ctx, x);
    set_name(*c1, "c1");
    Tensor* v2 = view_2d(ctx, r, d, 2, r->nb[1], 2 * r->nb[1]);
    set_name(*v2, "v2");
    c2 = soft_max(ctx, v2);
    set_name(*c2, "c2");
    set_output(*c2);
    Tensor* g = mul(ctx, x, w2);
    set_name(*g, "g");
    Tensor* h = add(ctx, v1, g);
    set_name(*h, "h");
    out = add(ctx, h, x);
    set_name(*out, "out");
    set_output(*out);
    EXPECT_TRUE(ctx.ok()) << ctx.status().message();
    // One build per output, in this order: v1 before the CPU split, v2 after its first node.
    for (Tensor* t : {v1, c1, c2, out}) EXPECT_TRUE(graph.build_forward(t).ok());
    auto b = alloc_ctx_tensors(wctx, weight_buft);
    EXPECT_TRUE(b.ok()) << b.status().message();
    if (!b.ok()) return;
    weights = std::move(b).value();
    weights->set_usage(BufferUsage::kWeights);
    std::mt19937 rng(5);
    std::normal_distribution<float> dist;
    for (Tensor* t : {w, w2}) {
      std::vector<float> v(static_cast<size_t>(nelements(*t)));
      for (float& f : v) f = dist(rng);
      EXPECT_TRUE(tensor_from_f32(*t, v).ok());
    }
  }
  void set_x(unsigned seed) {
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist;
    std::vector<float> v(static_cast<size_t>(nelements(*x)));
    for (float& f : v) f = dist(rng);
    ASSERT_TRUE(tensor_from_f32(*x, v).ok());
  }
};

}  // namespace

// The planner used to walk the dependency node of v2 (placed before the split's nodes) before v2 itself, release v2
// twice and free r while v1 was still to be read: g took r's memory and v1 + g came out as g + g.
TEST_P(SchedulerExec, AViewCopiedInTheSplitThatHoldsItKeepsItsSourceAliveForItsOtherViews) {
  const bool parallel = GetParam();
  doubles::RestrictedDevice gpu_dev("GPU0");
  gpu_dev.refused = {Op::kSoftMax};
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend({.n_threads = 1});
  ViewReadInItsSplit m(gpu_dev.buft());
  ViewReadInItsSplit ref(*cpu::buffer_type());
  auto ref_buf = alloc_ctx_tensors(ref.ctx, *cpu::buffer_type());
  ASSERT_TRUE(ref_buf.ok());
  auto sched = Scheduler::create({gpu->get(), cpu.get()}, {.bufts = {}, .parallel = parallel});
  ASSERT_TRUE(sched.ok()) << sched.status().message();
  Scheduler& s = **sched;
  for (unsigned eval = 0; eval < 3; ++eval) {
    SCOPED_TRACE("evaluation " + std::to_string(eval));
    ASSERT_TRUE(s.alloc_graph(m.graph).ok()) << s.last_error();
    ASSERT_EQ(s.n_splits(), 3) << s.report();
    ASSERT_EQ(s.splits()[1].inputs.size(), 1u) << s.report();
    EXPECT_STREQ(s.splits()[1].inputs[0]->name, "v2") << s.report();
    m.set_x(40 + eval);
    ASSERT_EQ(s.graph_compute(m.graph), ComputeStatus::kSuccess) << s.last_error();
    ref.set_x(40 + eval);
    ASSERT_EQ(cpu->graph_compute(ref.graph), ComputeStatus::kSuccess) << cpu->last_error();
    EXPECT_EQ(*tensor_to_f32(*m.out), *tensor_to_f32(*ref.out)) << s.report();
    EXPECT_EQ(*tensor_to_f32(*m.c2), *tensor_to_f32(*ref.c2));
  }
}

INSTANTIATE_TEST_SUITE_P(Parallel, SchedulerExec, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "parallel" : "serial"; });

TEST(SchedulerExecErrors, CreationChecks) {
  doubles::RestrictedDevice gpu_dev("GPU0");
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend();
  EXPECT_FALSE(Scheduler::create({}).ok());
  auto last_not_cpu = Scheduler::create({cpu.get(), gpu->get()});
  ASSERT_FALSE(last_not_cpu.ok());
  EXPECT_THAT(last_not_cpu.status().message(), HasSubstr("must be a CPU"));
  auto bad_buft = Scheduler::create({gpu->get(), cpu.get()}, {.bufts = {cpu::buffer_type(), cpu::buffer_type()}});
  ASSERT_FALSE(bad_buft.ok());
  EXPECT_THAT(bad_buft.status().message(), HasSubstr("does not support"));
  // At most kMaxBackends (16): 16 GPU-like backends and the CPU are one too many, refused at creation, not at the
  // first plan.
  std::vector<Backend*> many(static_cast<size_t>(kMaxBackends), gpu->get());
  many.push_back(cpu.get());
  auto too_many = Scheduler::create(many);
  ASSERT_FALSE(too_many.ok());
  EXPECT_THAT(too_many.status().message(), HasSubstr("17 backends, at most 16"));
  many.erase(many.begin());
  EXPECT_TRUE(Scheduler::create(many).ok());
  SchedulerParams few_inputs;
  few_inputs.max_split_inputs = 3;  // below one node's sources
  EXPECT_FALSE(Scheduler::create({gpu->get(), cpu.get()}, few_inputs).ok());
}

TEST(SchedulerExecErrors, WeightInABufferNoBackendCanUseIsAnErrorNotACrash) {
  doubles::RestrictedDevice gpu_dev("GPU0"), stranger("GPU7");
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend();
  Model m(2, 0, &stranger.buft());  // weights on a device the scheduler does not know
  auto sched = Scheduler::create({gpu->get(), cpu.get()});
  ASSERT_TRUE(sched.ok());
  Status s = (*sched)->alloc_graph(m.graph);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("'blk."));                 // names the tensor,
  EXPECT_THAT(s.message(), HasSubstr("buffer type GPU7_buf"));  // its buffer
  EXPECT_THAT(s.message(), HasSubstr("op NONE"));               // and the op
  EXPECT_EQ((*sched)->graph_compute(m.graph), ComputeStatus::kFailed);
  // the user's graph is intact
  for (Tensor* n : m.graph.nodes()) {
    for (Tensor* src : n->src) {
      if (src != nullptr) {
        EXPECT_EQ(std::string(src->name).find('#'), std::string::npos);
      }
    }
  }
}

TEST(SchedulerExecErrors, EvalCallbackObservesAndStops) {
  doubles::RestrictedDevice gpu_dev("GPU0");
  gpu_dev.refused = {Op::kSoftMax};
  auto gpu = gpu_dev.init_backend();
  auto cpu = cpu::make_backend({.n_threads = 1});
  Model m(2, 0, &gpu_dev.buft());
  m.fill_weights(1);
  auto sched = Scheduler::create({gpu->get(), cpu.get()});
  ASSERT_TRUE(sched.ok());
  ASSERT_TRUE((*sched)->alloc_graph(m.graph).ok());
  m.set_inputs(2);
  std::vector<std::string> seen;
  (*sched)->set_eval_callback([&](Tensor* t, bool ask) {
    if (ask) return t->op == Op::kSoftMax;
    seen.push_back(t->name);
    // the observed node is computed: its data is readable now
    auto v = tensor_to_f32(*t);
    EXPECT_TRUE(v.ok());
    double sum = 0;
    for (size_t i = 0; i < 32; ++i) sum += (*v)[i];
    EXPECT_NEAR(sum, 1.0, 1e-5);  // a softmax row
    return seen.size() < 2;       // stop at the second softmax
  });
  EXPECT_EQ((*sched)->graph_compute(m.graph), ComputeStatus::kAborted);
  EXPECT_THAT((*sched)->last_error(), HasSubstr("callback stopped"));
  EXPECT_EQ(seen.size(), 2u);
}
