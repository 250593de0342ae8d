// Models from GGUF files (models/from_gguf.cpp): the llama family built from a file's keys and tensor table. The
// files are written here, with the tensor table llama.cpp's converter writes for a llama model (names and GGUF shapes
// per tensor, ne[0] first), so the builder's shapes are checked against an independent table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "tessera/models/llama.h"
#include "tessera/planner.h"
#include "unit/models/from_gguf_checks.h"

using namespace tessera;
using namespace tessera::models;
using ::testing::HasSubstr;

namespace {

struct TinyLlama {
  int n_layer = 2;
  int64_t n_embd = 256, n_ff = 512, n_head = 4, n_head_kv = 2, n_vocab = 320;
  int n_expert = 0, n_expert_used = 0;
  int64_t head_dim = 0;     // attention.key_length / value_length (Mistral Nemo: 128 on 5120 / 32); 0: not written
  bool output = true;       // false: tied embeddings
  bool rope_freqs = false;  // Llama 3.1's rope_freqs.weight
  // Types as a Q4_K_M file mixes them: q4_k matrices, q6_k for attn_v / ffn_down / output, f32 vectors.
  gguf::TensorType matrix = gguf::TensorType::kQ4_K;
  gguf::TensorType more_bits = gguf::TensorType::kQ6_K;
};

gguf::File llama_file(const TinyLlama& s) {
  gguf::File f;
  f.source = "tiny-llama.gguf";
  f.set("general.architecture", gguf::Value::string("llama"));
  f.set("general.name", gguf::Value::string("Tiny Llama"));
  f.set("llama.block_count", gguf::Value::u32(static_cast<uint32_t>(s.n_layer)));
  f.set("llama.context_length", gguf::Value::u32(2048));
  f.set("llama.embedding_length", gguf::Value::u32(static_cast<uint32_t>(s.n_embd)));
  f.set("llama.feed_forward_length", gguf::Value::u32(static_cast<uint32_t>(s.n_ff)));
  f.set("llama.attention.head_count", gguf::Value::u32(static_cast<uint32_t>(s.n_head)));
  f.set("llama.attention.head_count_kv", gguf::Value::u32(static_cast<uint32_t>(s.n_head_kv)));
  f.set("llama.rope.freq_base", gguf::Value::f32(500000.0f));
  f.set("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  if (s.n_expert > 0) {
    f.set("llama.expert_count", gguf::Value::u32(static_cast<uint32_t>(s.n_expert)));
    f.set("llama.expert_used_count", gguf::Value::u32(static_cast<uint32_t>(s.n_expert_used)));
  }
  if (s.head_dim > 0) {
    f.set("llama.attention.key_length", gguf::Value::u32(static_cast<uint32_t>(s.head_dim)));
    f.set("llama.attention.value_length", gguf::Value::u32(static_cast<uint32_t>(s.head_dim)));
  }
  // llama.cpp's llama loader: wq [n_embd, n_head * n_embd_head_k], wk / wv [n_embd, n_head_kv * n_embd_head_k],
  // wo [n_head * n_embd_head_k, n_embd], n_embd_head_k from key_length (else n_embd / n_head).
  const int64_t head_dim = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head, n_embd_kv = head_dim * s.n_head_kv;
  const int64_t n_embd_q = head_dim * s.n_head;
  using T = gguf::TensorType;
  f.add_tensor("token_embd.weight", s.matrix, {s.n_embd, s.n_vocab});
  if (s.rope_freqs) f.add_tensor("rope_freqs.weight", T::kF32, {head_dim / 2});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    f.add_tensor(b + "attn_norm.weight", T::kF32, {s.n_embd});
    f.add_tensor(b + "attn_q.weight", s.matrix, {s.n_embd, n_embd_q});
    f.add_tensor(b + "attn_k.weight", s.matrix, {s.n_embd, n_embd_kv});
    f.add_tensor(b + "attn_v.weight", s.more_bits, {s.n_embd, n_embd_kv});
    f.add_tensor(b + "attn_output.weight", s.matrix, {n_embd_q, s.n_embd});
    f.add_tensor(b + "ffn_norm.weight", T::kF32, {s.n_embd});
    if (s.n_expert > 0) {
      f.add_tensor(b + "ffn_gate_inp.weight", T::kF32, {s.n_embd, s.n_expert});
      f.add_tensor(b + "ffn_gate_exps.weight", s.matrix, {s.n_embd, s.n_ff, s.n_expert});
      f.add_tensor(b + "ffn_down_exps.weight", s.more_bits, {s.n_ff, s.n_embd, s.n_expert});
      f.add_tensor(b + "ffn_up_exps.weight", s.matrix, {s.n_embd, s.n_ff, s.n_expert});
    } else {
      f.add_tensor(b + "ffn_gate.weight", s.matrix, {s.n_embd, s.n_ff});
      f.add_tensor(b + "ffn_down.weight", s.more_bits, {s.n_ff, s.n_embd});
      f.add_tensor(b + "ffn_up.weight", s.matrix, {s.n_embd, s.n_ff});
    }
  }
  f.add_tensor("output_norm.weight", T::kF32, {s.n_embd});
  if (s.output) f.add_tensor("output.weight", s.more_bits, {s.n_embd, s.n_vocab});
  EXPECT_TRUE(f.layout().ok());
  return f;
}

// The file as the reader gives it back (header only), as a one-shard model.
gguf::Model model_of(const gguf::File& f) {
  auto bytes = gguf::serialize(f);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  auto read = gguf::read_memory(bytes.value(), f.source);
  EXPECT_TRUE(read.ok()) << read.status().message();
  return gguf::Model::of_file(std::move(read).value());
}

Result<LlamaGraph> build(const gguf::File& f, GgufRunShape run = {}) { return build_from_gguf(model_of(f), run); }

gguf::File without_tensor(gguf::File f, const std::string& name) {
  std::erase_if(f.tensors, [&](const gguf::TensorInfo& t) { return t.name == name; });
  EXPECT_TRUE(f.layout().ok());
  return f;
}

TEST(FromGguf, EveryTensorOfTheFileIsAWeightWithItsShapeAndType) {
  const gguf::File f = llama_file({});
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.name, "Tiny Llama");
  EXPECT_EQ(m->config.n_layer, 2);
  EXPECT_EQ(m->config.n_vocab, 320);
  EXPECT_EQ(m->config.n_head_kv, 2);
  EXPECT_FLOAT_EQ(m->config.rope_base, 500000.0f);
  ASSERT_EQ(m->weights.size(), f.tensors.size());
  uint64_t graph_bytes = 0;
  for (const Tensor* w : m->weights) {
    const gguf::TensorInfo* t = f.find_tensor(w->name);
    ASSERT_NE(t, nullptr) << w->name;
    EXPECT_STREQ(type_name(w->type), gguf::type_name(t->type)) << w->name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(w->ne[d], t->ne[d]) << w->name << " dim " << d;
    graph_bytes += nbytes(*w);
  }
  uint64_t file_bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors) file_bytes += t.size;
  EXPECT_EQ(graph_bytes, file_bytes);
  // the mix: q6_k attn_v in every layer, q4_k attn_q
  EXPECT_EQ(m->layers[1].wv->type, Type::kQ6_K);
  EXPECT_EQ(m->layers[1].wq->type, Type::kQ4_K);
  EXPECT_EQ(m->layers[1].attn_norm->type, Type::kF32);
}

TEST(FromGguf, TheRunShapeComesFromTheOptionsAndTheContextFromTheFile) {
  auto m = build(llama_file({}), {.n_ctx = 0, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.n_ctx, 2048);  // llama.context_length (at most 4096)
  EXPECT_EQ(m->config.n_tokens, 4);
  auto m2 = build(llama_file({}), {.n_ctx = 512, .n_tokens = 1, .flash_attn = false});
  ASSERT_TRUE(m2.ok());
  EXPECT_EQ(m2->config.n_ctx, 512);
  EXPECT_FALSE(m2->config.flash_attn);
}

// llama.cpp's attention mask is an f32 input (build_inp_kq_mask; cast to f16 only for flash attention): a model read
// from a file has it so on the softmax path, which the host and GPU compute buffers of real logs show
// (tests/fidelity/24: CUDA_Host 24.01 MiB = 8 MiB of embeddings + a 16 MiB f32 mask of 8192 x 512; 28: 12.00 MiB =
// 8 + 4 MiB at 2048 x 512). With flash attention the mask stays f16; the built-in presets keep an f16 mask.
TEST(FromGguf, TheSoftmaxMaskIsF32AsInLlamaCpp) {
  auto softmax = build(llama_file({}), {.n_ctx = 512, .n_tokens = 4, .flash_attn = false});
  ASSERT_TRUE(softmax.ok()) << softmax.status().message();
  EXPECT_EQ(softmax->mask->type, Type::kF32);
  auto fa = build(llama_file({}), {.n_ctx = 512, .n_tokens = 4, .flash_attn = true});
  ASSERT_TRUE(fa.ok()) << fa.status().message();
  EXPECT_EQ(fa->mask->type, Type::kF16);
  LlamaConfig preset = models::preset("tiny").value();
  preset.flash_attn = false;
  auto p = build_llama(preset);
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->mask->type, Type::kF16);
}

TEST(FromGguf, MixtureOfExperts) {
  TinyLlama s;
  s.n_expert = 4;
  s.n_expert_used = 2;
  auto m = build(llama_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.n_expert, 4);
  EXPECT_EQ(m->config.n_expert_used, 2);
  EXPECT_EQ(m->layers[0].ffn_down_exps->type, Type::kQ6_K);
  EXPECT_EQ(m->layers[0].ffn_down_exps->ne[2], 4);
}

TEST(FromGguf, TiedEmbeddingsReadTheTokenEmbeddingForTheLogits) {
  TinyLlama s;
  s.output = false;
  auto m = build(llama_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->config.tied_output);
  EXPECT_EQ(m->output, m->tok_embd);
  EXPECT_EQ(m->logits->src[0], m->tok_embd);
}

TEST(FromGguf, RopeFrequencyFactorsAreRopesThirdSource) {
  TinyLlama s;
  s.rope_freqs = true;
  auto m = build(llama_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  ASSERT_NE(m->rope_freqs, nullptr);
  int ropes = 0;
  for (const Tensor* n : m->graph->nodes()) {
    if (n->op != Op::kRope) continue;
    ++ropes;
    EXPECT_EQ(n->src[2], m->rope_freqs) << n->name;
  }
  EXPECT_EQ(ropes, 2 * s.n_layer);  // Q and K of each layer
}

// llama.cpp's loader takes the head size from attention.key_length for every architecture (hparams.n_embd_head_k),
// and llama's tensors follow it: Mistral Nemo and Mistral Small 3 have 32 heads of 128 on a 5120 embedding, so attn_q
// is [5120, 4096] and attn_output [4096, 5120]. Here 4 heads of 128 on 256 (and 3 heads of 64, which do not divide
// 256: fine with key_length); rope rotates all 128 values of each head.
TEST(FromGguf, LlamaHeadsTakeTheirSizeFromKeyLength) {
  TinyLlama s;
  s.head_dim = 128;
  const gguf::File f = llama_file(s);
  auto m = build(f, {.n_ctx = 512, .n_tokens = 4});
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.head_dim(), 128);
  EXPECT_EQ(m->config.n_embd_q(), 512);
  EXPECT_EQ(m->layers[0].wq->ne[0], 256);
  EXPECT_EQ(m->layers[0].wq->ne[1], 512);
  EXPECT_EQ(m->layers[0].wk->ne[1], 256);
  EXPECT_EQ(m->layers[0].wo->ne[0], 512);
  EXPECT_EQ(m->layers[0].wo->ne[1], 256);
  EXPECT_EQ(m->kv_cache[0]->ne[0], 128 * 2);
  int ropes = 0;
  for (const Tensor* n : m->graph->nodes()) {
    if (n->op != Op::kRope) continue;
    ++ropes;
    EXPECT_EQ(n->op_params[0], 128) << n->name;
    EXPECT_EQ(n->op_params[1], static_cast<int32_t>(RopeMode::kNormal)) << n->name;
  }
  EXPECT_EQ(ropes, 2 * s.n_layer);
  // The graph plans on the CPU's buffer type (every node's size and lifetime known).
  GraphPlanner planner(cpu::buffer_type());
  EXPECT_TRUE(planner.alloc_graph(*m->graph).ok());

  s.n_head = 3;  // 256 is not a multiple of 3: fine, the heads are key_length wide
  s.n_head_kv = 1;
  s.head_dim = 64;
  s.matrix = s.more_bits = gguf::TensorType::kQ8_0;  // attn_output's rows of 192 are no whole q4_K block
  m = build(llama_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers[0].wq->ne[1], 192);

  // key_length equal to the quotient is the usual file (Llama 3.3 70B writes it): the same graph as without it.
  TinyLlama q;
  q.head_dim = 64;
  m = build(llama_file(q));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.head_dim(), 64);

  // value_length or rope.dimension_count other than key_length: named (llama.cpp's graph asserts them equal).
  gguf::File bad = llama_file(q);
  bad.set("llama.attention.value_length", gguf::Value::u32(32));
  m = build(bad);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("llama.attention.value_length is 32, not llama.attention.key_length = 64"));
}

// mistralai/Mistral-Nemo-Instruct-2407 (its GGUF metadata in ollama/ollama issue #8277: embedding_length 5120,
// head_count 32, head_count_kv 8, attention.key_length 128, feed_forward_length 14336, block_count 40, 131072 tokens):
// the fixture builds with attn_q [5120, 4096], every tensor of the file used once, and its graph plans.
TEST(FromGguf, MistralNemoFixtureBuildsWithHeadsOf128) {
  auto made = fixtures::make_fixture("mistral-nemo-12b-q4_k_m");
  ASSERT_TRUE(made.ok()) << made.status().message();
  const gguf::File& f = made.value();
  auto m = build(f, {.n_ctx = 4096, .n_tokens = 8});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.n_layer, 40);
  EXPECT_EQ(c.n_embd, 5120);
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.n_head_kv, 8);
  EXPECT_EQ(c.head_dim(), 128);  // not 5120 / 32 = 160
  EXPECT_EQ(c.n_vocab, 131072);
  EXPECT_FLOAT_EQ(c.rope_base, 1000000.0f);
  EXPECT_EQ(m->layers[39].wq->ne[1], 4096);
  EXPECT_EQ(m->layers[39].wo->ne[0], 4096);
  tessera::models::testing::expect_uses_the_file_exactly(m.value(), f);
  GraphPlanner planner(cpu::buffer_type());
  EXPECT_TRUE(planner.alloc_graph(*m->graph).ok());
}

TEST(FromGguf, AnotherArchitectureIsRefusedWithTheListOfSupportedOnes) {
  gguf::File f = llama_file({});
  f.set("general.architecture", gguf::Value::string("mamba"));
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(m.status().message(), HasSubstr("tiny-llama.gguf: architecture 'mamba' is not supported"));
  EXPECT_THAT(m.status().message(), HasSubstr("llama"));
}

TEST(FromGguf, MissingOrInconsistentKeysAreNamed) {
  gguf::File f = llama_file({});
  std::erase_if(f.metadata, [](const gguf::KeyValue& kv) { return kv.key == "llama.block_count"; });
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key llama.block_count"));

  f = llama_file({});
  f.set("llama.attention.head_count", gguf::Value::u32(3));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("llama.embedding_length 256 is not a multiple of llama.attention.head_count 3"));

  f = llama_file({});
  f.set("llama.attention.head_count_kv", gguf::Value::i32s({2, 4}));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("llama.attention.head_count_kv: per-layer values differ"));

  f = llama_file({});
  f.set("llama.attention.head_count_kv", gguf::Value::i32s({2, 2}));  // per layer, all the same: fine
  m = build(f);
  EXPECT_TRUE(m.ok()) << m.status().message();

  f = llama_file({});
  f.set("llama.expert_count", gguf::Value::u64(uint64_t{1} << 32));  // would narrow to 0 experts
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("llama.expert_count: 4294967296 is outside [0, 2^31 - 1]"));

  f = llama_file({});
  f.set("llama.rope.freq_base", gguf::Value::string("fast"));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("llama.rope.freq_base: expected a float, found string"));
}

TEST(FromGguf, AMissingAnUnusedOrAMisshapenTensorIsNamed) {
  auto m = build(without_tensor(llama_file({}), "blk.1.ffn_up.weight"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.1.ffn_up.weight is missing"));

  gguf::File f = llama_file({});
  f.add_tensor("blk.0.attn_q.bias", gguf::TensorType::kF32, {256});
  ASSERT_TRUE(f.layout().ok());
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.attn_q.bias is not used by the llama architecture"));

  f = llama_file({});
  for (gguf::TensorInfo& t : f.tensors) {
    if (t.name == "blk.0.attn_k.weight") t.ne[1] = 256;  // as if 4 KV heads
  }
  ASSERT_TRUE(f.layout().ok());
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.attn_k.weight: the file has [256, 256], the graph"));
  EXPECT_THAT(m.status().message(), HasSubstr("needs [256, 128]"));
}

TEST(FromGguf, ATypeOfNoKernelsBuildsAndTheGraphKeepsIt) {
  TinyLlama s;
  s.matrix = gguf::TensorType::kIQ4_XS;
  s.more_bits = gguf::TensorType::kTQ2_0;
  auto m = build(llama_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers[0].wq->type, Type::kIQ4_XS);
  EXPECT_EQ(m->layers[0].ffn_down->type, Type::kTQ2_0);
}

}  // namespace
