// The seed files of the gguf_reader fuzz target (fuzz/corpus/gguf_reader/), written by make_seeds.cpp: valid files
// made with the writer (header-only and complete, versions 2 and 3, alignment 32 and 64, every value type, nested
// arrays, every tensor type, a split shard, a vocabulary long enough to be skipped) and malformed files made by hand
// (tests/support/gguf_bytes.h), one per family of error.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "support/gguf_bytes.h"
#include "tessera/gguf.h"

namespace tessera::fuzz {

inline std::vector<std::pair<std::string, std::vector<uint8_t>>> gguf_seeds() {
  using namespace gguf;
  std::vector<std::pair<std::string, std::vector<uint8_t>>> seeds;
  auto add = [&](const std::string& name, const File& f, bool with_data) {
    uint64_t end = 0;
    for (const TensorInfo& t : f.tensors) end = std::max(end, t.offset + t.size);
    std::vector<uint8_t> data(end);
    for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7 + 1);
    auto bytes = with_data ? serialize(f, data) : serialize(f);
    if (bytes.ok()) seeds.emplace_back(name, std::move(*bytes));
  };

  // A llama-style header: hyperparameters, a tokenizer, tensors of the usual types (no data).
  File llama;
  llama.set("general.architecture", Value::string("llama"));
  llama.set("general.name", Value::string("tiny"));
  llama.set("llama.context_length", Value::u32(4096));
  llama.set("llama.embedding_length", Value::u32(256));
  llama.set("llama.block_count", Value::u32(1));
  llama.set("llama.attention.head_count", Value::u32(4));
  llama.set("llama.rope.freq_base", Value::f32(10000.0f));
  llama.set("llama.attention.layer_norm_rms_epsilon", Value::f32(1e-5f));
  llama.set("general.file_type", Value::u32(15));
  llama.set("tokenizer.ggml.model", Value::string("gpt2"));
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  for (int i = 0; i < 40; ++i) {
    tokens.push_back("tok" + std::to_string(i));
    scores.push_back(-static_cast<float>(i));
    types.push_back(i < 3 ? 3 : 1);
  }
  llama.set("tokenizer.ggml.tokens", Value::strings(tokens));
  llama.set("tokenizer.ggml.scores", Value::f32s(scores));
  llama.set("tokenizer.ggml.token_type", Value::i32s(types));
  llama.set("tokenizer.ggml.bos_token_id", Value::u32(1));
  llama.set("tokenizer.ggml.add_bos_token", Value::boolean(true));
  llama.add_tensor("token_embd.weight", TensorType::kQ4_K, {256, 40});
  llama.add_tensor("blk.0.attn_norm.weight", TensorType::kF32, {256});
  llama.add_tensor("blk.0.attn_q.weight", TensorType::kQ6_K, {256, 256});
  llama.add_tensor("blk.0.ffn_down.weight", TensorType::kQ8_0, {512, 256});
  llama.add_tensor("output.weight", TensorType::kF16, {256, 40});
  if (llama.layout().ok()) add("llama-header-only.gguf", llama, false);

  // Small complete files: version 3 with alignment 32, version 2 with alignment 64.
  File small;
  small.set("general.architecture", Value::string("test"));
  small.add_tensor("a", TensorType::kF32, {3, 2});
  small.add_tensor("b", TensorType::kQ4_0, {32});
  small.add_tensor("c", TensorType::kI8, {5, 1, 1, 2});
  if (small.layout().ok()) add("complete-v3.gguf", small, true);
  small.version = 2;
  small.alignment = 64;
  small.set(kKeyAlignment, Value::u32(64));
  if (small.layout().ok()) add("complete-v2-align64.gguf", small, true);

  // Every value type, nested arrays (the deepest allowed), a shard's split keys.
  File values;
  values.set("u8", Value::u8(200));
  values.set("i8", Value::i8(-3));
  values.set("u16", Value::u16(60000));
  values.set("i16", Value::i16(-30000));
  values.set("u32", Value::u32(3000000000u));
  values.set("i32", Value::i32(-2000000000));
  values.set("f32", Value::f32(0.25f));
  values.set("bool", Value::boolean(false));
  values.set("string", Value::string("text \xe2\x9c\x93"));
  values.set("u64", Value::u64(1ull << 40));
  values.set("i64", Value::i64(-(1ll << 40)));
  values.set("f64", Value::f64(-2.5));
  values.set("bools", Value::array(ValueType::kBool, {Value::boolean(true), Value::boolean(false)}));
  Value deep = Value::array(ValueType::kU8, {Value::u8(1)});
  for (int i = 1; i < kMaxNesting; ++i) deep = Value::array(ValueType::kArray, {deep});
  values.set("deep", deep);
  values.set(kKeySplitNo, Value::u16(0));
  values.set(kKeySplitCount, Value::u16(1));
  values.set(kKeySplitTensorsCount, Value::i32(1));
  values.add_tensor("t", TensorType::kBF16, {4});
  if (values.layout().ok()) add("every-value-type.gguf", values, true);

  // One tensor of every type (header only).
  File types_file;
  for (const TypeInfo& t : type_table()) {
    if (t.removed) continue;
    types_file.add_tensor(std::string("t.") + t.name, static_cast<TensorType>(t.id), {int64_t{t.block_size} * 2, 3});
  }
  if (types_file.layout().ok()) add("every-tensor-type.gguf", types_file, false);

  // A vocabulary above the default array limit (skipped unless kept).
  File vocab;
  std::vector<int32_t> many(5000, 7);
  vocab.set("tokenizer.ggml.token_type", Value::i32s(many));
  vocab.set("after", Value::u8(1));
  add("large-array.gguf", vocab, false);

  // Malformed by hand, one per family of error.
  using test::GgufBytes;
  seeds.emplace_back("bad-magic.gguf", GgufBytes().raw("GGML").u32(3).u64(0).u64(0).bytes());
  seeds.emplace_back("big-endian.gguf", GgufBytes().raw("GGUF").u32(0x03000000).u64(0).u64(0).bytes());
  seeds.emplace_back("version-1.gguf", GgufBytes().header(1, 0, 0).bytes());
  seeds.emplace_back("huge-count.gguf", GgufBytes().header(3, uint64_t{1} << 60, 1).kv_u32("a", 1).bytes());
  seeds.emplace_back("bool-2.gguf", GgufBytes().header(3, 0, 1).key("b", GgufBytes::kBool).u8(2).bytes());
  seeds.emplace_back("alignment-48.gguf", GgufBytes().header(3, 0, 1).kv_u32("general.alignment", 48).bytes());
  seeds.emplace_back("removed-type.gguf", GgufBytes().header(3, 1, 0).tensor("t", {32}, 31, 0).bytes());
  seeds.emplace_back("overlap.gguf",
                     GgufBytes().header(3, 2, 0).tensor("a", {16}, 0, 32).tensor("b", {16}, 0, 0).bytes());
  seeds.emplace_back("duplicate-key.gguf", GgufBytes().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).bytes());
  if (!seeds.empty() && seeds[1].first == "complete-v3.gguf") {
    std::vector<uint8_t> cut = seeds[1].second;
    cut.resize(cut.size() - 40);
    seeds.emplace_back("truncated-data.gguf", std::move(cut));
  }
  return seeds;
}

}  // namespace tessera::fuzz
