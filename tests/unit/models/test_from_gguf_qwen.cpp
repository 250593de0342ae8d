// The Qwen architectures from GGUF files (models/from_gguf.cpp): qwen2, qwen3 and qwen3moe built from the real models'
// header-only fixtures (models/fixtures.cpp) and from small files written here with the tensor table llama.cpp's
// loaders create for each architecture (src/models/qwen2.cpp, qwen3.cpp and qwen3moe.cpp of ggml-org/llama.cpp:
// names and GGUF shapes, ne[0] first).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "unit/models/from_gguf_checks.h"

using namespace tessera;
using namespace tessera::models;
using namespace tessera::models::testing;
using ::testing::HasSubstr;

namespace {

using TT = gguf::TensorType;

gguf::File with_tensor(gguf::File f, const std::string& name, std::vector<int64_t> ne) {
  f.add_tensor(name, TT::kF32, ne);
  EXPECT_TRUE(f.layout().ok());
  return f;
}

// The rope nodes: all of the given mode and size; their count.
int ropes(const LlamaGraph& m, RopeMode mode, int64_t n_rot) {
  int n = 0;
  for (const Tensor* t : m.graph->nodes()) {
    if (t->op != Op::kRope) continue;
    ++n;
    EXPECT_EQ(t->op_params[0], n_rot) << t->name;
    EXPECT_EQ(t->op_params[1], static_cast<int32_t>(mode)) << t->name;
    EXPECT_EQ(t->src[2], nullptr) << t->name << ": the Qwen graphs pass no frequency factors";
  }
  return n;
}

// The node that reads `w` as its source `i` (null when none does).
const Tensor* reader_of(const LlamaGraph& m, const Tensor* w, int i) {
  for (const Tensor* t : m.graph->nodes()) {
    if (t->src[i] == w) return t;
  }
  return nullptr;
}

// ---- the fixtures ----

// Qwen/Qwen2.5-7B-Instruct config.json: hidden_size 3584, intermediate_size 18944, num_hidden_layers 28,
// num_attention_heads 28, num_key_value_heads 4, vocab_size 152064, rope_theta 1000000.0, rms_norm_eps 1e-06,
// tie_word_embeddings false; attention q/k/v projections with biases.
TEST(FromGgufQwen, Qwen25_7bFixtureUsesEveryTensorOnce) {
  const gguf::File f = fixture("qwen2.5-7b-q4_k_m");
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "qwen2");
  EXPECT_EQ(c.n_layer, 28);
  EXPECT_EQ(c.n_embd, 3584);
  EXPECT_EQ(c.n_ff, 18944);
  EXPECT_EQ(c.n_head, 28);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.n_vocab, 152064);
  EXPECT_FLOAT_EQ(c.rope_base, 1000000.0f);
  EXPECT_FLOAT_EQ(c.norm_eps, 1e-6f);
  EXPECT_FALSE(c.tied_output);
  EXPECT_TRUE(c.attn_bias);
  EXPECT_FALSE(c.attn_qk_norm);
  expect_uses_the_file_exactly(m.value(), f);
  EXPECT_EQ(ropes(m.value(), RopeMode::kNeox, 128), 2 * 28);
  // Each bias is added to its projection's MUL_MAT result.
  for (const LlamaLayer& l : m->layers) {
    for (auto [w, b] : {std::pair{l.wq, l.bq}, {l.wk, l.bk}, {l.wv, l.bv}}) {
      ASSERT_NE(b, nullptr);
      const Tensor* add = reader_of(m.value(), b, 1);
      ASSERT_NE(add, nullptr) << b->name;
      EXPECT_EQ(add->op, Op::kAdd) << b->name;
      ASSERT_NE(add->src[0], nullptr);
      EXPECT_EQ(add->src[0]->op, Op::kMulMat) << b->name;
      EXPECT_EQ(add->src[0]->src[0], w) << b->name;
    }
  }
}

// Qwen/Qwen3-8B config.json: hidden_size 4096, intermediate_size 12288, num_hidden_layers 36, num_attention_heads 32,
// num_key_value_heads 8, head_dim 128, vocab_size 151936, rope_theta 1000000, rms_norm_eps 1e-06,
// tie_word_embeddings false.
TEST(FromGgufQwen, Qwen3_8bFixtureUsesEveryTensorOnce) {
  const gguf::File f = fixture("qwen3-8b-q4_k_m");
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "qwen3");
  EXPECT_EQ(c.n_layer, 36);
  EXPECT_EQ(c.n_embd, 4096);
  EXPECT_EQ(c.n_ff, 12288);
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.n_head_kv, 8);
  EXPECT_EQ(c.head_dim(), 128);
  EXPECT_EQ(c.n_vocab, 151936);
  EXPECT_FALSE(c.attn_bias);
  EXPECT_TRUE(c.attn_qk_norm);
  expect_uses_the_file_exactly(m.value(), f);
  EXPECT_EQ(ropes(m.value(), RopeMode::kNeox, 128), 2 * 36);
  // The norms multiply the per-head RMS_NORM of Q and K, and the rope reads that product.
  for (const LlamaLayer& l : m->layers) {
    for (const Tensor* n : {l.attn_q_norm, l.attn_k_norm}) {
      const Tensor* mul = reader_of(m.value(), n, 1);
      ASSERT_NE(mul, nullptr) << n->name;
      EXPECT_EQ(mul->op, Op::kMul);
      EXPECT_EQ(mul->src[0]->op, Op::kRmsNorm);
      EXPECT_EQ(mul->src[0]->ne[0], 128) << "normalised per head";
      const Tensor* r = reader_of(m.value(), mul, 0);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->op, Op::kRope) << n->name;
    }
  }
}

// Qwen/Qwen3-30B-A3B config.json: hidden_size 2048, moe_intermediate_size 768, num_hidden_layers 48,
// num_attention_heads 32, num_key_value_heads 4, head_dim 128 (so Q is 32 x 128 = 4096 wide, twice hidden_size),
// num_experts 128, num_experts_per_tok 8, norm_topk_prob true, vocab_size 151936, tie_word_embeddings false.
TEST(FromGgufQwen, Qwen3_30bA3bFixtureUsesEveryTensorOnce) {
  const gguf::File f = fixture("qwen3-30b-a3b-q4_k_m");
  auto m = build(f, {.n_ctx = 4096});
  ASSERT_TRUE(m.ok()) << m.status().message();
  const LlamaConfig& c = m->config;
  EXPECT_EQ(c.arch, "qwen3moe");
  EXPECT_EQ(c.n_layer, 48);
  EXPECT_EQ(c.n_embd, 2048);
  EXPECT_EQ(c.n_ff, 768);  // per expert: expert_feed_forward_length, not feed_forward_length (6144)
  EXPECT_EQ(c.n_head, 32);
  EXPECT_EQ(c.n_head_kv, 4);
  EXPECT_EQ(c.head_dim(), 128);  // not 2048 / 32 = 64
  EXPECT_EQ(c.n_embd_q(), 4096);
  EXPECT_EQ(c.n_expert, 128);
  EXPECT_EQ(c.n_expert_used, 8);
  EXPECT_TRUE(c.moe_norm_weights);
  EXPECT_TRUE(c.attn_qk_norm);
  expect_uses_the_file_exactly(m.value(), f);
  EXPECT_EQ(ropes(m.value(), RopeMode::kNeox, 128), 2 * 48);
  EXPECT_EQ(m->layers[0].wq->ne[1], 4096);
  EXPECT_EQ(m->layers[0].wo->ne[0], 4096);
  EXPECT_EQ(m->kv_cache[0]->ne[0], 128 * 4);
  // The selected experts' weights are renormalised (llama.cpp passes norm_w = true for qwen3moe): SUM_ROWS, DIV.
  int sums = 0;
  for (const Tensor* t : m->graph->nodes()) sums += t->op == Op::kSumRows ? 1 : 0;
  EXPECT_EQ(sums, 48);
}

TEST(FromGgufQwen, AMissingAnUnusedOrAMisshapenTensorOfAFixtureIsNamed) {
  auto m = build(without_tensor(fixture("qwen2.5-7b-q4_k_m"), "blk.3.attn_k.bias"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.3.attn_k.bias is missing (the graph needs it, [512] f32)"));

  m = build(without_tensor(fixture("qwen3-8b-q4_k_m"), "blk.35.attn_q_norm.weight"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.35.attn_q_norm.weight is missing"));

  m = build(with_tensor(fixture("qwen3-8b-q4_k_m"), "blk.0.attn_q.bias", {4096}));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.attn_q.bias is not used by the qwen3 architecture"));

  m = build(with_tensor(fixture("qwen2.5-7b-q4_k_m"), "blk.0.attn_q_norm.weight", {128}));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.0.attn_q_norm.weight is not used by the qwen2 architecture"));

  m = build(with_tensor(fixture("qwen2.5-7b-q4_k_m"), "rope_freqs.weight", {64}));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor rope_freqs.weight is not used by the qwen2 architecture"));

  gguf::File f = fixture("qwen3-30b-a3b-q4_k_m");
  for (gguf::TensorInfo& t : f.tensors) {
    if (t.name == "blk.7.attn_k_norm.weight") t.ne[0] = 64;  // as if the head size were n_embd / n_head
  }
  ASSERT_TRUE(f.layout().ok());
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tensor blk.7.attn_k_norm.weight: the file has [64], the graph"));
  EXPECT_THAT(m.status().message(), HasSubstr("needs [128]"));
}

// ---- small files ----

struct TinyQwen {
  std::string arch = "qwen3";
  int n_layer = 2;
  int64_t n_embd = 256, n_ff = 512, n_head = 4, n_head_kv = 2, n_vocab = 320;
  int64_t head_dim = 0;  // 0: n_embd / n_head, key_length not written
  int n_expert = 0, n_expert_used = 0;
  int64_t n_ff_exp = 0;  // qwen3moe: expert_feed_forward_length (0: not written)
  bool output = true;
};

// A file as convert_hf_to_gguf.py writes the architecture: the keys, then the tensors in the loader's order.
gguf::File qwen_file(const TinyQwen& s) {
  gguf::File f;
  f.source = "tiny-" + s.arch + ".gguf";
  const std::string p = s.arch + ".";
  auto u32 = [&](const std::string& k, int64_t v) { f.set(p + k, gguf::Value::u32(static_cast<uint32_t>(v))); };
  f.set("general.architecture", gguf::Value::string(s.arch));
  u32("block_count", s.n_layer);
  u32("context_length", 1024);
  u32("embedding_length", s.n_embd);
  u32("feed_forward_length", s.n_ff);
  u32("attention.head_count", s.n_head);
  u32("attention.head_count_kv", s.n_head_kv);
  f.set(p + "rope.freq_base", gguf::Value::f32(1000000.0f));
  f.set(p + "attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f));
  if (s.head_dim > 0) {
    u32("attention.key_length", s.head_dim);
    u32("attention.value_length", s.head_dim);
  }
  if (s.n_expert > 0) {
    u32("expert_count", s.n_expert);
    u32("expert_used_count", s.n_expert_used);
  }
  if (s.n_ff_exp > 0) u32("expert_feed_forward_length", s.n_ff_exp);
  const int64_t hd = s.head_dim > 0 ? s.head_dim : s.n_embd / s.n_head;
  const int64_t nq = hd * s.n_head, nkv = hd * s.n_head_kv;
  const int64_t ff = s.n_expert > 0 ? (s.n_ff_exp > 0 ? s.n_ff_exp : s.n_ff / s.n_expert_used) : s.n_ff;
  f.add_tensor("token_embd.weight", TT::kQ8_0, {s.n_embd, s.n_vocab});
  f.add_tensor("output_norm.weight", TT::kF32, {s.n_embd});
  if (s.output) f.add_tensor("output.weight", TT::kQ6_K, {s.n_embd, s.n_vocab});
  for (int il = 0; il < s.n_layer; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    f.add_tensor(b + "attn_norm.weight", TT::kF32, {s.n_embd});
    f.add_tensor(b + "attn_q.weight", TT::kQ8_0, {s.n_embd, nq});
    f.add_tensor(b + "attn_k.weight", TT::kQ8_0, {s.n_embd, nkv});
    f.add_tensor(b + "attn_v.weight", TT::kQ8_0, {s.n_embd, nkv});
    f.add_tensor(b + "attn_output.weight", TT::kQ8_0, {nq, s.n_embd});
    if (s.arch == "qwen2") {
      f.add_tensor(b + "attn_q.bias", TT::kF32, {nq});
      f.add_tensor(b + "attn_k.bias", TT::kF32, {nkv});
      f.add_tensor(b + "attn_v.bias", TT::kF32, {nkv});
    } else {
      f.add_tensor(b + "attn_k_norm.weight", TT::kF32, {hd});
      f.add_tensor(b + "attn_q_norm.weight", TT::kF32, {hd});
    }
    f.add_tensor(b + "ffn_norm.weight", TT::kF32, {s.n_embd});
    if (s.n_expert > 0) {
      f.add_tensor(b + "ffn_gate_inp.weight", TT::kF32, {s.n_embd, s.n_expert});
      f.add_tensor(b + "ffn_gate_exps.weight", TT::kQ8_0, {s.n_embd, ff, s.n_expert});
      f.add_tensor(b + "ffn_down_exps.weight", TT::kQ8_0, {ff, s.n_embd, s.n_expert});
      f.add_tensor(b + "ffn_up_exps.weight", TT::kQ8_0, {s.n_embd, ff, s.n_expert});
    } else {
      f.add_tensor(b + "ffn_gate.weight", TT::kQ8_0, {s.n_embd, ff});
      f.add_tensor(b + "ffn_down.weight", TT::kQ8_0, {ff, s.n_embd});
      f.add_tensor(b + "ffn_up.weight", TT::kQ8_0, {s.n_embd, ff});
    }
  }
  EXPECT_TRUE(f.layout().ok());
  return f;
}

TEST(FromGgufQwen, EachArchitectureGetsItsSwitches) {
  for (const char* arch : {"qwen2", "qwen3"}) {
    TinyQwen s;
    s.arch = arch;
    const gguf::File f = qwen_file(s);
    auto m = build(f);
    ASSERT_TRUE(m.ok()) << arch << ": " << m.status().message();
    EXPECT_EQ(m->config.arch, arch);
    EXPECT_EQ(m->config.attn_bias, s.arch == "qwen2");
    EXPECT_EQ(m->config.attn_qk_norm, s.arch == "qwen3");
    EXPECT_EQ(m->config.rope_mode, RopeMode::kNeox);
    EXPECT_EQ(ropes(m.value(), RopeMode::kNeox, 64), 4);
    expect_uses_the_file_exactly(m.value(), f);
  }
  TinyQwen s;
  s.arch = "qwen3moe";
  s.n_expert = 8;
  s.n_expert_used = 2;
  s.n_ff_exp = 128;
  const gguf::File f = qwen_file(s);
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.n_ff, 128);
  EXPECT_EQ(m->config.n_expert, 8);
  EXPECT_TRUE(m->config.attn_qk_norm);
  expect_uses_the_file_exactly(m.value(), f);
}

// A complete file (header and data section) read back: each weight of the graph is exactly its tensor's data in the
// file, byte for byte in size, so a loader can copy the file's bytes into the weights as they are.
TEST(FromGgufQwen, EachWeightIsItsTensorsDataInTheFile) {
  TinyQwen s;
  s.arch = "qwen3moe";
  s.n_expert = 4;
  s.n_expert_used = 2;
  s.n_ff_exp = 64;
  s.head_dim = 96;
  const gguf::File f = qwen_file(s);
  uint64_t data_bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors) data_bytes = std::max(data_bytes, t.offset + t.size);
  std::vector<uint8_t> data(data_bytes);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 131 + 7);
  auto bytes = gguf::serialize(f, data);
  ASSERT_TRUE(bytes.ok()) << bytes.status().message();
  gguf::ReadOptions whole;
  whole.require_data = true;
  auto read = gguf::read_memory(bytes.value(), f.source, whole);
  ASSERT_TRUE(read.ok()) << read.status().message();
  const gguf::File back = read.value();
  auto m = build_from_gguf(gguf::Model::of_file(gguf::File(back)), {});
  ASSERT_TRUE(m.ok()) << m.status().message();
  expect_uses_the_file_exactly(m.value(), back);
  for (const Tensor* w : m->weights) {
    auto span = gguf::tensor_data(bytes.value(), back, *back.find_tensor(w->name));
    ASSERT_TRUE(span.ok()) << span.status().message();
    EXPECT_EQ(span.value().size(), nbytes(*w)) << w->name;
  }
}

// Qwen3's head size is attention.key_length, whatever n_embd / n_head is (Qwen3-30B-A3B: 128 where 2048 / 32 = 64;
// here 128 where 256 / 4 = 64, and 64 with 3 heads, which do not divide 256).
TEST(FromGgufQwen, Qwen3HeadsTakeTheirSizeFromKeyLength) {
  TinyQwen s;
  s.head_dim = 128;
  const gguf::File f = qwen_file(s);
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.head_dim(), 128);
  EXPECT_EQ(m->layers[0].wq->ne[1], 512);
  EXPECT_EQ(m->layers[0].wo->ne[0], 512);
  EXPECT_EQ(ropes(m.value(), RopeMode::kNeox, 128), 4);
  expect_uses_the_file_exactly(m.value(), f);

  s.n_head = 3;  // 256 is not a multiple of 3: fine, the heads are key_length wide
  s.n_head_kv = 1;
  s.head_dim = 64;
  m = build(qwen_file(s));
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->layers[0].wq->ne[1], 192);

  // Without key_length, the quotient must be whole.
  m = build(without_key(without_key(qwen_file(s), "qwen3.attention.key_length"), "qwen3.attention.value_length"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("qwen3.embedding_length 256 is not a multiple of qwen3.attention.head_count 3"));

  // qwen2's loader makes wq [n_embd, n_embd]: a key_length of its own is refused.
  TinyQwen q2;
  q2.arch = "qwen2";
  gguf::File f2 = qwen_file(q2);
  f2.set("qwen2.attention.key_length", gguf::Value::u32(128));
  m = build(f2);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("qwen2.attention.key_length is 128, not embedding_length / head_count = 64"));
}

TEST(FromGgufQwen, MissingOrInconsistentKeysAreNamed) {
  TinyQwen moe;
  moe.arch = "qwen3moe";
  moe.n_expert = 8;
  moe.n_expert_used = 2;
  moe.n_ff_exp = 128;
  auto m = build(without_key(qwen_file(moe), "qwen3moe.expert_count"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("tiny-qwen3moe.gguf: missing key qwen3moe.expert_count"));

  gguf::File f = qwen_file(moe);
  f.set("qwen3moe.expert_used_count", gguf::Value::u32(0));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("qwen3moe.expert_used_count is 0: the qwen3moe architecture needs"));

  f = qwen_file(moe);
  f.set("qwen3moe.expert_used_count", gguf::Value::u32(9));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("qwen3moe.expert_used_count 9 is more than qwen3moe.expert_count 8"));

  // Without expert_feed_forward_length, llama.cpp takes feed_forward_length / expert_used_count: 512 / 2 = 256.
  TinyQwen old = moe;
  old.n_ff_exp = 0;
  f = qwen_file(old);
  m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_EQ(m->config.n_ff, 256);
  m = build(without_key(f, "qwen3moe.feed_forward_length"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key qwen3moe.expert_feed_forward_length"));

  TinyQwen q3;
  f = qwen_file(q3);
  f.set("qwen3.attention.key_length", gguf::Value::u32(64));
  f.set("qwen3.attention.value_length", gguf::Value::u32(32));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(),
              HasSubstr("qwen3.attention.value_length is 32, not qwen3.attention.key_length = 64"));

  m = build(without_key(qwen_file(q3), "qwen3.attention.layer_norm_rms_epsilon"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key qwen3.attention.layer_norm_rms_epsilon"));

  m = build(without_key(qwen_file(q3), "qwen3.feed_forward_length"));
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("missing key qwen3.feed_forward_length"));

  TinyQwen q2;
  q2.arch = "qwen2";
  f = qwen_file(q2);
  f.set("qwen2.attention.head_count_kv", gguf::Value::i32s({2, 1}));
  m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m.status().message(), HasSubstr("qwen2.attention.head_count_kv: per-layer values differ"));
}

TEST(FromGgufQwen, TiedEmbeddingsWithoutOutputWeight) {
  TinyQwen s;
  s.arch = "qwen2";  // Qwen2.5-0.5B to 3B tie theirs
  s.output = false;
  const gguf::File f = qwen_file(s);
  auto m = build(f);
  ASSERT_TRUE(m.ok()) << m.status().message();
  EXPECT_TRUE(m->config.tied_output);
  EXPECT_EQ(m->logits->src[0], m->tok_embd);
  expect_uses_the_file_exactly(m.value(), f);
}

TEST(FromGgufQwen, TheSupportedListNamesTheQwenArchitectures) {
  gguf::File f = qwen_file({});
  f.set("general.architecture", gguf::Value::string("qwen2moe"));
  auto m = build(f);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(m.status().message(), HasSubstr("architecture 'qwen2moe' is not supported (Tessera builds: llama, "
                                              "qwen2, qwen3, qwen3moe, gemma3, phi3, gpt-oss)"));
}

}  // namespace
