// llama-quantize's type choice for the file types beyond the fixtures' Q4_K_M and MXFP4_MOE (fixtures.h,
// quantized_types; the rules are llama.cpp src/llama-quant.cpp at 007dbbf3, llama_tensor_get_type_impl). Each
// expectation is worked out by hand from those rules on a 32-layer llama with grouped-query attention (Llama 3 8B's
// and Mistral 7B's shapes: 4096 wide, FFN 14336, 8 KV heads of 128) and, where a user's log prints a published file's
// tensor types, checked against that print (cited at each test).
//
// The "more bits" layers of 32 (use_more_bits): i < 4, i >= 28, and (i - 4) % 3 == 2, i.e. 0-3, 6, 9, 12, 15, 18, 21,
// 24, 27, 28-31: 16 layers.
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "support/tensor_names.h"

using namespace tessera;
using gguf::TensorType;
namespace fx = tessera::models::fixtures;

using tessera::test::blk;

namespace {

// The 8B-shaped llama in llama-quantize's order (weight_name_less): token_embd, output, output_norm, then by layer.
std::vector<fx::SourceTensor> llama_32(int64_t vocab = 32000) {
  using T = TensorType;
  std::vector<fx::SourceTensor> t = {{"output.weight", {4096, vocab}, T::kF16},
                                     {"output_norm.weight", {4096}, T::kF32},
                                     {"token_embd.weight", {4096, vocab}, T::kF16}};
  for (int il = 0; il < 32; ++il) {
    t.push_back({blk(il, "attn_k.weight"), {4096, 1024}, T::kF16});
    t.push_back({blk(il, "attn_norm.weight"), {4096}, T::kF32});
    t.push_back({blk(il, "attn_output.weight"), {4096, 4096}, T::kF16});
    t.push_back({blk(il, "attn_q.weight"), {4096, 4096}, T::kF16});
    t.push_back({blk(il, "attn_v.weight"), {4096, 1024}, T::kF16});
    t.push_back({blk(il, "ffn_down.weight"), {14336, 4096}, T::kF16});
    t.push_back({blk(il, "ffn_gate.weight"), {4096, 14336}, T::kF16});
    t.push_back({blk(il, "ffn_norm.weight"), {4096}, T::kF32});
    t.push_back({blk(il, "ffn_up.weight"), {4096, 14336}, T::kF16});
  }
  return t;
}

const fx::QuantModel kLlama{"llama", 32, 32, 8, 0};

struct Typed {
  std::map<std::string, TensorType> by_name;
  std::map<TensorType, int> counts;
};

Typed quantize(fx::FileType ftype, const fx::QuantModel& m = kLlama) {
  const std::vector<fx::SourceTensor> src = llama_32();
  Result<std::vector<TensorType>> types = fx::quantized_types(m, ftype, src);
  EXPECT_TRUE(types.ok()) << types.status().to_string();
  Typed out;
  if (!types.ok()) return out;
  for (size_t i = 0; i < src.size(); ++i) {
    out.by_name[src[i].name] = types.value()[i];
    ++out.counts[types.value()[i]];
  }
  return out;
}

}  // namespace

// Q5_K_M: q5_K everywhere, q6_K for attn_v and ffn_down on the 16 "more bits" layers and for the output: 65 f32,
// 193 q5_K (226 matrices - 33), 33 q6_K. SciSharp/LLamaSharp#35 (turn 9) prints a Mistral-7B-shaped Q5_K_M file:
// blk.29 and blk.30 attn_v q6_K, blk.30 ffn_down q6_K, blk.30 attn_k / attn_q / ffn_gate q5_K, output q6_K.
TEST(QuantTypes, Q5KM) {
  const Typed t = quantize(fx::FileType::kQ5_K_M);
  EXPECT_EQ(t.counts.at(TensorType::kF32), 65);
  EXPECT_EQ(t.counts.at(TensorType::kQ5_K), 193);
  EXPECT_EQ(t.counts.at(TensorType::kQ6_K), 33);
  EXPECT_EQ(t.by_name.at("blk.29.attn_v.weight"), TensorType::kQ6_K);
  EXPECT_EQ(t.by_name.at("blk.30.attn_v.weight"), TensorType::kQ6_K);
  EXPECT_EQ(t.by_name.at("blk.30.ffn_down.weight"), TensorType::kQ6_K);
  EXPECT_EQ(t.by_name.at("blk.30.attn_k.weight"), TensorType::kQ5_K);
  EXPECT_EQ(t.by_name.at("blk.30.ffn_gate.weight"), TensorType::kQ5_K);
  EXPECT_EQ(t.by_name.at("output.weight"), TensorType::kQ6_K);
  EXPECT_EQ(t.by_name.at("token_embd.weight"), TensorType::kQ5_K);    // untied: the default type
  EXPECT_EQ(t.by_name.at("blk.5.attn_v.weight"), TensorType::kQ5_K);  // (5 - 4) % 3 == 1: not a "more bits" layer
}

// Q5_K_S and Q3_K_S: the default type everywhere but the output (q6_K). ollama/ollama PR #814 (turn 32) prints a
// Mistral-7B-shaped q5_K file with blk.3 attn_v and ffn_down q5_K (a "more bits" layer: Q5_K_S, not Q5_K_M);
// PromtEngineer/localGPT#793 (turn 0) a Llama-3-8B-shaped q3_K file with blk.4 attn_v, attn_output, ffn_down q3_K.
TEST(QuantTypes, Q5KSAndQ3KS) {
  const Typed s5 = quantize(fx::FileType::kQ5_K_S);
  EXPECT_EQ(s5.counts.at(TensorType::kQ5_K), 225);
  EXPECT_EQ(s5.counts.at(TensorType::kQ6_K), 1);
  EXPECT_EQ(s5.by_name.at("blk.3.attn_v.weight"), TensorType::kQ5_K);
  EXPECT_EQ(s5.by_name.at("blk.3.ffn_down.weight"), TensorType::kQ5_K);
  const Typed s3 = quantize(fx::FileType::kQ3_K_S);
  EXPECT_EQ(s3.counts.at(TensorType::kQ3_K), 225);
  EXPECT_EQ(s3.by_name.at("blk.4.attn_v.weight"), TensorType::kQ3_K);
  EXPECT_EQ(s3.by_name.at("blk.4.attn_output.weight"), TensorType::kQ3_K);
  EXPECT_EQ(s3.by_name.at("output.weight"), TensorType::kQ6_K);
}

// Q3_K_M: attn_v q5_K for the first two, q4_K after; ffn_down q5_K below n/16 = 2, q4_K after; attn_output q4_K;
// the rest q3_K, output q6_K: q5_K 4, q4_K 30 + 30 + 32 = 92, q3_K 4 x 32 + 1 = 129, q6_K 1.
TEST(QuantTypes, Q3KM) {
  const Typed t = quantize(fx::FileType::kQ3_K_M);
  EXPECT_EQ(t.counts.at(TensorType::kQ5_K), 4);
  EXPECT_EQ(t.counts.at(TensorType::kQ4_K), 92);
  EXPECT_EQ(t.counts.at(TensorType::kQ3_K), 129);
  EXPECT_EQ(t.counts.at(TensorType::kQ6_K), 1);
  EXPECT_EQ(t.by_name.at("blk.1.attn_v.weight"), TensorType::kQ5_K);
  EXPECT_EQ(t.by_name.at("blk.2.attn_v.weight"), TensorType::kQ4_K);
  EXPECT_EQ(t.by_name.at("blk.1.ffn_down.weight"), TensorType::kQ5_K);
  EXPECT_EQ(t.by_name.at("blk.2.ffn_down.weight"), TensorType::kQ4_K);
}

// Q4_K_S: attn_v q5_K for the first four; ffn_down q5_K below n/8 = 4; the rest q4_K, output q6_K.
// Q3_K_L: attn_v, ffn_down and attn_output q5_K, the rest q3_K.
TEST(QuantTypes, Q4KSAndQ3KL) {
  const Typed s = quantize(fx::FileType::kQ4_K_S);
  EXPECT_EQ(s.counts.at(TensorType::kQ5_K), 8);
  EXPECT_EQ(s.counts.at(TensorType::kQ4_K), 217);
  EXPECT_EQ(s.by_name.at("blk.3.ffn_down.weight"), TensorType::kQ5_K);
  EXPECT_EQ(s.by_name.at("blk.4.ffn_down.weight"), TensorType::kQ4_K);
  const Typed l = quantize(fx::FileType::kQ3_K_L);
  EXPECT_EQ(l.counts.at(TensorType::kQ5_K), 96);
  EXPECT_EQ(l.counts.at(TensorType::kQ3_K), 129);
}

// Q2_K with 4 query heads per KV head (n_gqa 4): attn_v q4_K, ffn_down and attn_output q3_K, the rest q2_K.
TEST(QuantTypes, Q2K) {
  const Typed t = quantize(fx::FileType::kQ2_K);
  EXPECT_EQ(t.counts.at(TensorType::kQ4_K), 32);
  EXPECT_EQ(t.counts.at(TensorType::kQ3_K), 64);
  EXPECT_EQ(t.counts.at(TensorType::kQ2_K), 129);
  const Typed mha = quantize(fx::FileType::kQ2_K, {"llama", 32, 32, 32, 0});  // n_gqa 1: attn_v q3_K
  EXPECT_EQ(mha.by_name.at("blk.7.attn_v.weight"), TensorType::kQ3_K);
}

// Single-type files: Q8_0 keeps q8_0 for the output too; Q6_K and the legacy types put q6_K there.
TEST(QuantTypes, SingleTypeFiles) {
  const Typed q8 = quantize(fx::FileType::kQ8_0);
  EXPECT_EQ(q8.counts.at(TensorType::kQ8_0), 226);
  const Typed q6 = quantize(fx::FileType::kQ6_K);
  EXPECT_EQ(q6.counts.at(TensorType::kQ6_K), 226);
  const Typed q40 = quantize(fx::FileType::kQ4_0);
  EXPECT_EQ(q40.counts.at(TensorType::kQ4_0), 225);
  EXPECT_EQ(q40.by_name.at("output.weight"), TensorType::kQ6_K);
}

// An importance matrix changes ffn_down of the first eighth (n/8 = 4 layers): IQ4_XS keeps iq4_xs with one and takes
// q5_K without; Q4_0 takes q4_1 with one. IQ4_XS's attn_v is q5_K at n_gqa >= 4.
TEST(QuantTypes, ImportanceMatrixRules) {
  const Typed xs = quantize(fx::FileType::kIQ4_XS);
  EXPECT_EQ(xs.by_name.at("blk.3.ffn_down.weight"), TensorType::kQ5_K);
  EXPECT_EQ(xs.by_name.at("blk.4.ffn_down.weight"), TensorType::kIQ4_XS);
  EXPECT_EQ(xs.by_name.at("blk.20.attn_v.weight"), TensorType::kQ5_K);
  fx::QuantModel with = kLlama;
  with.has_imatrix = true;
  const Typed xs_i = quantize(fx::FileType::kIQ4_XS, with);
  EXPECT_EQ(xs_i.by_name.at("blk.3.ffn_down.weight"), TensorType::kIQ4_XS);
  const Typed q40_i = quantize(fx::FileType::kQ4_0, with);
  EXPECT_EQ(q40_i.by_name.at("blk.3.ffn_down.weight"), TensorType::kQ4_1);
  EXPECT_EQ(q40_i.by_name.at("blk.4.ffn_down.weight"), TensorType::kQ4_0);
  EXPECT_EQ(q40_i.counts.at(TensorType::kQ4_1), 4);
}

// Mixtral (8 experts): attn_v and attn_k q8_0, attn_output q5_K for Q4_K_S (its ffn_down: the layer from the name).
TEST(QuantTypes, EightExperts) {
  const Typed t = quantize(fx::FileType::kQ4_K_S, {"llama", 32, 32, 8, 8});
  EXPECT_EQ(t.by_name.at("blk.9.attn_v.weight"), TensorType::kQ8_0);
  EXPECT_EQ(t.by_name.at("blk.9.attn_k.weight"), TensorType::kQ8_0);
  EXPECT_EQ(t.by_name.at("blk.9.attn_output.weight"), TensorType::kQ5_K);
  EXPECT_EQ(t.by_name.at("blk.2.ffn_down.weight"), TensorType::kQ5_K);
}

// llama.cpp's printed file type names (llama_model_ftype_name).
TEST(QuantTypes, FileTypeNames) {
  fx::FileType f;
  ASSERT_TRUE(fx::file_type_from_name("Q5_K - Medium", &f));
  EXPECT_EQ(f, fx::FileType::kQ5_K_M);
  ASSERT_TRUE(fx::file_type_from_name("q4_k - small", &f));
  EXPECT_EQ(f, fx::FileType::kQ4_K_S);
  ASSERT_TRUE(fx::file_type_from_name("IQ4_XS - 4.25 bpw", &f));
  EXPECT_EQ(f, fx::FileType::kIQ4_XS);
  ASSERT_TRUE(fx::file_type_from_name("Q8_0 (guessed)", &f));
  EXPECT_EQ(f, fx::FileType::kQ8_0);
  ASSERT_TRUE(fx::file_type_from_name("MXFP4 MoE", &f));
  EXPECT_EQ(f, fx::FileType::kMXFP4_MOE);
  EXPECT_FALSE(fx::file_type_from_name("IQ2_XXS - 2.0625 bpw", &f));
  EXPECT_FALSE(fx::file_type_from_name("F16", &f));
  EXPECT_FALSE(fx::file_type_from_name("", &f));
}
