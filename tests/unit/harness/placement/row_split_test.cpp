// Row split (llama.cpp's -sm row, issue 47): the simulator's split buffer type cuts rows as ggml-cuda's split buffer
// type does (ggml/src/ggml-cuda/ggml-cuda.cu, get_row_rounding / get_row_split / the split buffer type's
// get_alloc_size), the placement puts each GPU layer's matrices in its GPU's split buffer type as llama.cpp's loader
// does (src/llama-model.cpp, make_gpu_buft_list and weight_buft_supported), every GPU holds its rows, and a run with
// split weights computes what the CPU reference computes. The expected values are worked out by hand below.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/session/session.h"
#include "tessera/models/llama.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

DeviceConfig rounded_gpu(const std::string& name, int rounding, size_t memory = 1 * GiB) {
  DeviceConfig d = gpu(name, memory);
  d.row_rounding = rounding;
  return d;
}

BufferType* split_type(Simulator& sim, size_t main, std::vector<float> shares) {
  auto fn = reinterpret_cast<SplitBufferTypeFn>(sim.registration()->get_proc_address(kSplitBufferTypeProc));
  return fn != nullptr ? fn(sim.device(main), shares.data(), shares.size()) : nullptr;
}

size_t bytes_on(Simulator& sim, const BufferType& split, const Tensor& t, size_t device) {
  auto fn = reinterpret_cast<SplitBytesFn>(sim.registration()->get_proc_address(kSplitBytesProc));
  return fn(split, t, *sim.device(device));
}

// Four GPUs of the same memory (the default shares: cumulative 0, 0.25, 0.5, 0.75) with compute capability below 7.0
// (rounding 64), as the four Tesla K80s of tests/fidelity/02-4gpu-rowsplit.log.
TEST(RowSplit, RowsAreCutAtTheSharesRoundedDown) {
  auto sim = make_sim(topology({rounded_gpu("gpu0", 64), rounded_gpu("gpu1", 64), rounded_gpu("gpu2", 64),
                                rounded_gpu("gpu3", 64), wrapped_cpu()}));
  BufferType* split = split_type(*sim, 1, {});
  ASSERT_NE(split, nullptr);
  EXPECT_STREQ(split->name(), "gpu1_Split");
  EXPECT_EQ(split->device(), sim->device(1));
  EXPECT_EQ(split_type(*sim, 1, {}), split) << "one buffer type per main device and shares";
  EXPECT_NE(split_type(*sim, 1, {3, 1, 1, 1}), split);
  EXPECT_EQ(split_type(*sim, 4, {}), nullptr) << "the CPU is no main device";
  Context ctx{{.no_alloc = true}};
  // Qwen3-30B-A3B's expert router, f32 [2048, 128]: cuts at 128 x 0.25 = 32 -> 0, 64 -> 64, 96 -> 64. gpu0 gets rows
  // [0, 0), gpu1 [0, 64), gpu2 [64, 64), gpu3 [64, 128): 64 rows of 8 KiB on gpu1 and gpu3.
  Tensor* router = ctx.new_tensor_2d(Type::kF32, 2048, 128);
  EXPECT_EQ(bytes_on(*sim, *split, *router, 0), 0u);
  EXPECT_EQ(bytes_on(*sim, *split, *router, 1), 64u * 8192);
  EXPECT_EQ(bytes_on(*sim, *split, *router, 2), 0u);
  EXPECT_EQ(bytes_on(*sim, *split, *router, 3), 64u * 8192);
  EXPECT_EQ(bytes_on(*sim, *split, *router, 4), 0u);
  EXPECT_EQ(split->alloc_size(*router), 128u * 8192);
  // A q8_0 [2048, 4096] matrix: 1024 rows of 2048 / 32 x 34 = 2176 bytes each.
  Tensor* q = ctx.new_tensor_2d(Type::kQ8_0, 2048, 4096);
  for (size_t d = 0; d < 4; ++d) EXPECT_EQ(bytes_on(*sim, *split, *q, d), 1024u * 2176) << d;
  // Rows of 2000 values (not a multiple of 512): each slice is padded by 512 - 2000 % 512 = 48 values of its type
  // (f16: 96 bytes), whatever the type. f16 [2000, 256]: 64 rows each, 64 x 4000 + 96 bytes.
  Tensor* h = ctx.new_tensor_2d(Type::kF16, 2000, 256);
  for (size_t d = 0; d < 4; ++d) EXPECT_EQ(bytes_on(*sim, *split, *h, d), 64u * 4000 + 96) << d;
  EXPECT_EQ(split->alloc_size(*h), 4 * (64u * 4000 + 96));
}

// -ts 3,1 on two GPUs of 128-row rounding: cumulative shares 0, 0.75. 4096 rows: gpu0 [0, 3072), gpu1 [3072, 4096).
// 1000 rows: the cut 750 rounds down to 640. A GPU of rounding 64 beside one of 128 rounds to 128 (the largest).
TEST(RowSplit, UnevenSharesAndTheLargestRounding) {
  auto sim = make_sim(topology({rounded_gpu("gpu0", 64), gpu("gpu1"), wrapped_cpu()}));
  BufferType* split = split_type(*sim, 0, {3, 1});
  ASSERT_NE(split, nullptr);
  Context ctx{{.no_alloc = true}};
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 512, 4096);
  EXPECT_EQ(bytes_on(*sim, *split, *a, 0), 3072u * 2048);
  EXPECT_EQ(bytes_on(*sim, *split, *a, 1), 1024u * 2048);
  Tensor* b = ctx.new_tensor_2d(Type::kF32, 512, 1000);
  EXPECT_EQ(bytes_on(*sim, *split, *b, 0), 640u * 2048);
  EXPECT_EQ(bytes_on(*sim, *split, *b, 1), 360u * 2048);
  // -ts 0,1: gpu0 has no share, so only gpu1's rounding counts; gpu1 takes every row.
  BufferType* last = split_type(*sim, 1, {0, 1});
  EXPECT_EQ(bytes_on(*sim, *last, *b, 0), 0u);
  EXPECT_EQ(bytes_on(*sim, *last, *b, 1), 1000u * 2048);
}

// What the simulated GPUs say about split weights (ggml-cuda's supports_op and supports_buft): the main device takes
// the buffer type; a MUL_MAT reading a split weight is supported by a device holding some of its rows; no other op
// reads a split tensor.
TEST(RowSplit, OnlyAMulMatOnADeviceWithRowsReadsASplitWeight) {
  auto sim = make_sim(topology({rounded_gpu("gpu0", 64), rounded_gpu("gpu1", 64), rounded_gpu("gpu2", 64),
                                rounded_gpu("gpu3", 64), wrapped_cpu()}));
  BufferType* split = split_type(*sim, 0, {});
  ASSERT_NE(split, nullptr);
  EXPECT_TRUE(sim->device(0)->supports_buft(*split));
  EXPECT_FALSE(sim->device(1)->supports_buft(*split));
  auto dummy = split->alloc_buffer(0);
  ASSERT_TRUE(dummy.ok());
  Context ctx{{.no_alloc = true}};
  Tensor* router = ctx.new_tensor_2d(Type::kF32, 2048, 128);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 2048, 7);
  Tensor* mm = mul_mat(ctx, router, x);
  Tensor* sc = scale(ctx, router, 2.0f);
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(sc, nullptr);
  router->buffer = dummy.value().get();
  // rows of the router: gpu1 and gpu3 only (the first test)
  EXPECT_FALSE(sim->device(0)->supports_op(*mm));
  EXPECT_TRUE(sim->device(1)->supports_op(*mm));
  EXPECT_FALSE(sim->device(2)->supports_op(*mm));
  EXPECT_TRUE(sim->device(3)->supports_op(*mm));
  EXPECT_FALSE(sim->device(1)->supports_op(*sc));
  router->buffer = nullptr;
  EXPECT_TRUE(sim->device(0)->supports_op(*mm));
}

// A placement of tiny Qwen3 MoE (8 layers) with -sm row over two GPUs: each GPU layer's 2-D matrices (attention, the
// expert router) and the output head in the layer's GPU's split buffer type; norms and 3-D experts in the GPU's own
// memory; the token embedding on the CPU. Each GPU's weight bytes count its rows of every split matrix.
TEST(RowSplit, MatricesOfEachGpuLayerGoToItsSplitBufferType) {
  auto sim = make_sim(topology({gpu("gpu0", 4 * GiB), gpu("gpu1", 4 * GiB), wrapped_cpu()}));
  models::LlamaConfig c = models::preset("tiny-qwen3moe").value();
  c.n_layer = 8;
  models::LlamaGraph m = models::build_llama(c).value();
  PlacementPolicy p;
  p.split_mode = SplitMode::kRow;
  auto placed = place_model(devices_of(*sim), m.weights, m.kv_cache, c.n_layer, p);
  ASSERT_TRUE(placed.ok()) << placed.status().to_string();
  const Placement& pl = placed.value();
  std::vector<size_t> want_weights(3, 0);
  int matrices = 0;
  for (const auto& [t, buft] : pl.where) {
    const std::string name = t->name;
    if (name.rfind("cache_", 0) == 0) continue;
    const int layer = m.layer_of(t);
    const int dev = layer >= 0                     ? pl.layer_device.at(static_cast<size_t>(layer))
                    : name.rfind("output", 0) == 0 ? pl.output_device
                                                   : 2;
    const bool matrix = t->ne[1] > 1 && t->ne[2] == 1 && name != "token_embd.weight";
    if (dev == 2) {
      EXPECT_EQ(buft, sim->device(2)->buffer_type()) << name;
      want_weights[2] += buft->alloc_size(*t);
    } else if (matrix && (dev == 1 || t->ne[1] / 2 >= 128)) {
      // equal memory, rounding 128: gpu0's rows are the first half rounded down to 128 (none below 256 rows: such a
      // matrix of a gpu0 layer is not split), gpu1's the rest
      ++matrices;
      EXPECT_STREQ(buft->name(), dev == 0 ? "gpu0_Split" : "gpu1_Split") << name;
      EXPECT_TRUE(is_split_buffer_type(*buft)) << name;
      const int64_t rows = t->ne[1];
      const int64_t cut = rows / 2 - (rows / 2) % 128;
      // each GPU's slice padded to whole 512-value rows
      const size_t pad = t->ne[0] % 512 == 0 ? 0 : row_size(t->type, 512 - t->ne[0] % 512);
      if (cut > 0) want_weights[0] += static_cast<size_t>(cut) * row_size(t->type, t->ne[0]) + pad;
      want_weights[1] += static_cast<size_t>(rows - cut) * row_size(t->type, t->ne[0]) + pad;
    } else {
      EXPECT_EQ(buft, sim->device(static_cast<size_t>(dev))->buffer_type()) << name;
      EXPECT_FALSE(is_split_buffer_type(*buft)) << name;
      want_weights[static_cast<size_t>(dev)] += buft->alloc_size(*t);
    }
  }
  // gpu1's layers' q, k, v, o and router, the output head (on gpu1), and gpu0's matrices of 256 rows or more
  int gpu1_layers = 0;
  for (int d : pl.layer_device) gpu1_layers += d == 1 ? 1 : 0;
  int big_on_gpu0 = 0;
  for (const auto& [t, buft] : pl.where) {
    const int layer = m.layer_of(t);
    big_on_gpu0 +=
        layer >= 0 && pl.layer_device.at(static_cast<size_t>(layer)) == 0 && t->ne[2] == 1 && t->ne[1] >= 256 ? 1 : 0;
  }
  EXPECT_GT(gpu1_layers, 0);
  EXPECT_EQ(matrices, gpu1_layers * 5 + 1 + big_on_gpu0);
  EXPECT_EQ(pl.weight_bytes, want_weights);
}

// -sm row on a GPU whose registration has no split buffer type (here a GPU wrapping the real CPU) is refused with
// llama.cpp's words; with no GPU at all there is nothing to split.
TEST(RowSplit, AGpuWithoutSplitBuffersIsRefused) {
  DeviceConfig wrapped = wrapped_cpu();
  wrapped.name = "gpu0";
  wrapped.type = DeviceType::kGpu;
  auto sim = make_sim(topology({wrapped, wrapped_cpu()}));
  Context ctx{{.no_alloc = true}};
  Tensor* w = ctx.new_tensor_2d(Type::kF32, 16, 16);
  set_name(*w, "blk.0.attn_q.weight");
  PlacementPolicy p;
  p.split_mode = SplitMode::kRow;
  auto placed = place_model(devices_of(*sim), {w}, {}, 1, p);
  ASSERT_FALSE(placed.ok());
  EXPECT_THAT(placed.status().message(), HasSubstr("device gpu0 does not support split buffers"));
  auto cpu_only = make_sim(topology({wrapped_cpu()}));
  EXPECT_TRUE(place_model(devices_of(*cpu_only), {w}, {}, 1, p).ok());
}

// A tensor placed in a split buffer takes its rows' bytes on every GPU holding some (and gives them back with the
// buffer); a GPU without room for its rows fails the placement, naming the tensor and the GPU.
TEST(RowSplit, EachGpuHoldsItsRowsAndCanRunOutOfMemory) {
  auto sim = make_sim(topology({gpu("gpu0", 64 * MiB), gpu("gpu1", 16 * MiB), wrapped_cpu()}));
  BufferType* split = split_type(*sim, 0, {1, 1});
  ASSERT_NE(split, nullptr);
  Context ctx{{.no_alloc = true}};
  Tensor* w = ctx.new_tensor_2d(Type::kF32, 1024, 4096);  // 16 MiB: 8 MiB a GPU
  set_name(*w, "blk.0.attn_q.weight");
  {
    auto buf = split->alloc_buffer(split->alloc_size(*w));
    ASSERT_TRUE(buf.ok()) << buf.status().to_string();
    EXPECT_EQ(sim->stats(0).memory_used, 0u) << "the buffer itself takes nothing";
    ASSERT_TRUE(tensor_alloc(*buf.value(), *w, buf.value()->base()).ok());
    EXPECT_EQ(sim->stats(0).memory_used, 8 * MiB);
    EXPECT_EQ(sim->stats(1).memory_used, 8 * MiB);
    w->buffer = nullptr;
    w->data = nullptr;
  }
  EXPECT_EQ(sim->stats(0).memory_used, 0u);
  EXPECT_EQ(sim->stats(1).memory_used, 0u);
  Tensor* big = ctx.new_tensor_2d(Type::kF32, 1024, 12288);  // 48 MiB: 24 MiB a GPU, gpu1 has 16
  set_name(*big, "blk.0.ffn_up.weight");
  auto buf = split->alloc_buffer(split->alloc_size(*big));
  ASSERT_TRUE(buf.ok());
  Status st = tensor_alloc(*buf.value(), *big, buf.value()->base());
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(st.message(), HasSubstr("blk.0.ffn_up.weight"));
  EXPECT_THAT(st.message(), HasSubstr("gpu1: out of memory"));
  EXPECT_EQ(sim->stats(0).memory_used, 0u) << "gpu0's rows given back";
}

// The tiny models of every architecture with -sm row on 2 and 3 GPUs, uneven shares, every layer or some offloaded,
// rows rounded to 128 (the tiny matrices then go whole to one GPU or stay unsplit) or to 1 (every GPU gets rows of
// every matrix, cut where the shares fall): the logits equal the CPU reference, and no race is reported.
TEST(RowSplit, RunsMatchTheCpuReference) {
  for (const char* model : {"tiny", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3", "tiny-gpt-oss"}) {
    for (int n_gpus : {2, 3}) {
      for (int ngl : {-1, 3}) {
        const int rounding = ngl < 0 ? 1 : 128;
        std::vector<DeviceConfig> devices;
        for (int g = 0; g < n_gpus; ++g) devices.push_back(rounded_gpu("gpu" + std::to_string(g), rounding));
        devices.push_back(wrapped_cpu());
        SessionConfig cfg;
        cfg.topology = topology(devices);
        cfg.model = models::preset(model).value();
        cfg.policy.split_mode = SplitMode::kRow;
        cfg.policy.n_gpu_layers = ngl;
        cfg.policy.tensor_split = n_gpus == 2 ? std::vector<double>{3, 1} : std::vector<double>{1, 2, 1};
        const std::string where = std::string(model) + " on " + std::to_string(n_gpus) + " GPUs, -ngl " +
                                  std::to_string(ngl) + ", rounding " + std::to_string(rounding);
        auto s = Session::create(cfg, &builtin_registry());
        ASSERT_TRUE(s.ok()) << where << ": " << s.status().to_string();
        int split_weights = 0;
        for (const auto& [t, buft] : (*s)->placement().where) split_weights += is_split_buffer_type(*buft) ? 1 : 0;
        EXPECT_GT(split_weights, 0) << where;
        auto r = (*s)->run();
        ASSERT_TRUE(r.ok()) << where << ": " << r.status().to_string();
        EXPECT_EQ(r->races, 0u) << where;
        ASSERT_TRUE(r->checked) << where;
        EXPECT_TRUE(r->matches_reference(1e-6)) << where << ": NMSE " << r->nmse;
      }
    }
  }
}

}  // namespace
