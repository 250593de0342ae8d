// Sessions with storage-only types (types.h): a model or a serialized graph with q6_k weights is placed, planned and
// timed in metadata-only mode (its bytes exact), and refused by a memory-backed run before anything is filled, with a
// message naming the tensor, its type, the topology and how to run it instead.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/build.h"
#include "tessera/builtin.h"
#include "tessera/context.h"
#include "tessera/harness/graph/graph_io.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/llama.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

// The tiny model widened to a whole number of q6_k blocks (256 values): n_embd 256, n_ff 512, two layers,
// 4 heads of 64, 2 KV heads (n_embd_kv 128), vocabulary 256.
SessionConfig q6_model(sim::MemoryMode mode) {
  SessionConfig c;
  c.topology = load_topology("1gpu").value();
  c.model = models::preset("tiny").value();
  c.model.n_embd = 256;
  c.model.n_ff = 512;
  c.model.weight_type = Type::kQ6_K;
  c.policy.n_gpu_layers = -1;
  c.sim.mode = mode;
  return c;
}

}  // namespace

// Weights by hand (a q6_k row of k values is k / 256 x 210 bytes; the norms are f32):
//   token_embd, output: 256 rows x 210 = 53760 each;
//   per layer: attn_q, attn_output 53760 each, attn_k, attn_v 128 rows x 210 = 26880 each, ffn_gate, ffn_up
//   512 rows x 210 = 107520 each, ffn_down 256 rows x 420 = 107520, two norms 1024 each: 485888;
//   output_norm 1024. Total 53760 + 2 x 485888 + 1024 + 53760 = 1080320.
TEST(SessionStorageTypes, MetadataOnlyModelWithQ6KWeightsIsPlacedAndTimed) {
  auto s = Session::create(q6_model(sim::MemoryMode::kMetadata), &builtin_registry());
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  auto r = (*s)->run(1, false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  EXPECT_GT(r->makespan_us, 0.0);
  EXPECT_FALSE(r->checked);
  size_t weights = 0;
  for (const DeviceMemory& m : (*s)->memory()) weights += m.weights;
  EXPECT_EQ(weights, 1080320u);
  EXPECT_TRUE((*s)->sim().errors().empty());
}

TEST(SessionStorageTypes, MemoryBackedModelWithQ6KWeightsIsRefusedBeforeFilling) {
  auto s = Session::create(q6_model(sim::MemoryMode::kBacked), &builtin_registry());
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), StatusCode::kUnsupported);
  const std::string& msg = s.status().message();
  // The first in the graph's leafs: the model adds each layer's attention early, before the token embedding.
  EXPECT_THAT(msg, HasSubstr("memory-backed run: 'blk.0.attn_q.weight' is q6_k, a type Tessera stores but cannot "
                             "compute (no kernels on any backend of 1gpu: gpu0, cpu)"));
  // the token embedding, 7 per layer and the output head: 16 in all
  EXPECT_THAT(msg, HasSubstr("cpu), and 15 more tensors are of storage-only types; plan"));
  EXPECT_THAT(msg, HasSubstr("plan, fit and time it in metadata mode"));
  EXPECT_THAT(msg, HasSubstr("--metadata"));
  EXPECT_THAT(msg, HasSubstr("\"mode\": \"metadata-only\""));
}

// A serialized graph: x [256, 4] f32 times a q6_k weight named like a llama.cpp tensor.
TEST(SessionStorageTypes, MemoryBackedGraphNamesItsStorageOnlyWeight) {
  Context ctx({.no_alloc = true});
  Tensor* w = ctx.new_tensor_2d(Type::kQ6_K, 256, 32);
  set_name(*w, "blk.0.ffn_down.weight");
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 256, 4);
  set_name(*x, "x");
  set_input(*x);
  Tensor* y = mul_mat(ctx, w, x);
  ASSERT_NE(y, nullptr) << ctx.status().to_string();
  set_output(*y);
  Graph g;
  ASSERT_TRUE(g.build_forward(y).ok());
  SessionConfig c;
  c.topology = load_topology("2gpu-unequal").value();
  c.graph = GraphSource{graph_to_json(g), "q6.json"};
  c.sim.mode = sim::MemoryMode::kBacked;
  auto backed = Session::create(c, &builtin_registry());
  ASSERT_FALSE(backed.ok());
  EXPECT_THAT(backed.status().message(),
              HasSubstr("memory-backed run: 'blk.0.ffn_down.weight' is q6_k, a type Tessera stores but cannot compute "
                        "(no kernels on any backend of 2gpu-unequal: gpu0, gpu1, cpu); plan, fit and time it in "
                        "metadata mode"));
  c.sim.mode = sim::MemoryMode::kMetadata;
  auto meta = Session::create(c, &builtin_registry());
  ASSERT_TRUE(meta.ok()) << meta.status().to_string();
  auto r = (*meta)->run(1, false);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  size_t weights = 0;
  for (const DeviceMemory& m : (*meta)->memory()) weights += m.weights;
  EXPECT_EQ(weights, 32u * 210);  // 32 rows of one 210-byte block
}
