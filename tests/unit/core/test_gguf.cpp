// GGUF files (src/tessera/gguf.h, docs/gguf.md): the type table against the block structs' fields written out here,
// writer -> reader round trips of every value type, skipped and kept arrays, the file reader against the memory
// reader, data states, split models, every malformed category at its hand-counted byte offset, every prefix of a
// valid file, and seeded random corruption.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <fstream>
#include <limits>
#include <random>

#include "support/gguf_bytes.h"
#include "support/gguf_check.h"
#include "tessera/gguf.h"

using namespace tessera;
using namespace tessera::gguf;
using tessera::test::GgufBytes;

namespace {

constexpr uint64_t kHalf = 2;  // ggml_half

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_gguf_" + std::to_string(getpid()) + "_" + name)).string();
}

void write_bytes(const std::string& path, std::span<const uint8_t> bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

ReadOptions require_data() {
  ReadOptions o;
  o.require_data = true;
  return o;
}

// The message of a failed read of `bytes` (or "" when it parses).
std::string error_of(std::span<const uint8_t> bytes, const ReadOptions& options = {}) {
  auto f = read_memory(bytes, "m.gguf", options);
  return f.ok() ? std::string() : f.status().message();
}

// A file using every metadata value type and four tensors of three types; layout() places the tensors.
File sample_file() {
  File f;
  f.set("general.architecture", Value::string("llama"));
  f.set("general.name", Value::string("tiny \"test\"\n\x01\xff"));
  f.set("u8", Value::u8(255));
  f.set("i8", Value::i8(-128));
  f.set("u16", Value::u16(65535));
  f.set("i16", Value::i16(-32768));
  f.set("u32", Value::u32(4000000000u));
  f.set("i32", Value::i32(std::numeric_limits<int32_t>::min()));
  f.set("f32", Value::f32(-0.0f));
  f.set("bool.true", Value::boolean(true));
  f.set("bool.false", Value::boolean(false));
  f.set("u64", Value::u64(std::numeric_limits<uint64_t>::max()));
  f.set("i64", Value::i64(std::numeric_limits<int64_t>::min()));
  f.set("f64", Value::f64(1e300));
  f.set("empty.string", Value::string(""));
  f.set("tokens", Value::strings({"<s>", "</s>", "hello", ""}));
  f.set("scores", Value::f32s({0.5f, -1.25f, std::numeric_limits<float>::quiet_NaN()}));
  f.set("ids", Value::i32s({1, -2, 3}));
  f.set("empty.array", Value::array(ValueType::kU64, {}));
  f.set("nested", Value::array(ValueType::kArray, {Value::i32s({1, 2}), Value::strings({"x"}),
                                                   Value::array(ValueType::kBool, {Value::boolean(true)})}));
  f.add_tensor("token_embd.weight", TensorType::kQ4_K, {256, 4});
  f.add_tensor("blk.0.attn_q.weight", TensorType::kQ8_0, {64, 3});
  f.add_tensor("output_norm.weight", TensorType::kF32, {5});
  f.add_tensor("blk.0.ffn_up.weight", TensorType::kF16, {3, 2, 2, 1});
  EXPECT_TRUE(f.layout().ok());
  return f;
}

// Data for a file's tensors: tensor i's bytes are i + 1, padding zero.
std::vector<uint8_t> sample_data(const File& f) {
  uint64_t end = 0;
  for (const TensorInfo& t : f.tensors) end = std::max(end, t.offset + t.size);
  std::vector<uint8_t> data(end, 0);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    std::fill(data.begin() + f.tensors[i].offset, data.begin() + f.tensors[i].offset + f.tensors[i].size,
              static_cast<uint8_t>(i + 1));
  }
  return data;
}

std::vector<uint8_t> sample_bytes(bool with_data) {
  File f = sample_file();
  auto bytes = with_data ? serialize(f, sample_data(f)) : serialize(f);
  EXPECT_TRUE(bytes.ok()) << bytes.status().to_string();
  return bytes.ok() ? *bytes : std::vector<uint8_t>{};
}

}  // namespace

// ---- the type table ----

// Bytes per block from the fields of ggml's block structs (src/ggml-common.h), written out field by field: an
// oracle independent of the table in src/gguf/types.cpp.
TEST(GgufTypes, BytesPerBlockEqualTheBlockStructsFields) {
  constexpr uint64_t QK_K = 256;
  struct Row {
    TensorType type;
    const char* name;
    uint64_t block;
    uint64_t bytes;
  };
  const Row rows[] = {
      {TensorType::kF32, "f32", 1, 4},
      {TensorType::kF16, "f16", 1, kHalf},
      {TensorType::kQ4_0, "q4_0", 32, kHalf + 32 / 2},                             // d, qs
      {TensorType::kQ4_1, "q4_1", 32, 2 * kHalf + 32 / 2},                         // d, m, qs
      {TensorType::kQ5_0, "q5_0", 32, kHalf + 4 + 32 / 2},                         // d, qh[4], qs
      {TensorType::kQ5_1, "q5_1", 32, 2 * kHalf + 4 + 32 / 2},                     // d, m, qh[4], qs
      {TensorType::kQ8_0, "q8_0", 32, kHalf + 32},                                 // d, qs
      {TensorType::kQ8_1, "q8_1", 32, 2 * kHalf + 32},                             // d, s, qs
      {TensorType::kQ2_K, "q2_k", QK_K, QK_K / 16 + QK_K / 4 + 2 * kHalf},         // scales, qs, d, dmin
      {TensorType::kQ3_K, "q3_k", QK_K, QK_K / 8 + QK_K / 4 + 12 + kHalf},         // hmask, qs, scales[12], d
      {TensorType::kQ4_K, "q4_k", QK_K, 2 * kHalf + 12 + QK_K / 2},                // d, dmin, scales[12], qs
      {TensorType::kQ5_K, "q5_k", QK_K, 2 * kHalf + 12 + QK_K / 8 + QK_K / 2},     // d, dmin, scales, qh, qs
      {TensorType::kQ6_K, "q6_k", QK_K, QK_K / 2 + QK_K / 4 + QK_K / 16 + kHalf},  // ql, qh, scales, d
      {TensorType::kQ8_K, "q8_k", QK_K, 4 + QK_K + QK_K / 16 * 2},                 // float d, qs, int16 bsums
      {TensorType::kIQ2_XXS, "iq2_xxs", QK_K, kHalf + QK_K / 8 * 2},               // d, uint16 qs
      {TensorType::kIQ2_XS, "iq2_xs", QK_K, kHalf + QK_K / 8 * 2 + QK_K / 32},     // d, uint16 qs, scales
      {TensorType::kIQ3_XXS, "iq3_xxs", QK_K, kHalf + 3 * QK_K / 8},               // d, qs
      {TensorType::kIQ1_S, "iq1_s", QK_K, kHalf + QK_K / 8 + QK_K / 32 * 2},       // d, qs, uint16 qh
      {TensorType::kIQ4_NL, "iq4_nl", 32, kHalf + 32 / 2},                         // d, qs
      {TensorType::kIQ3_S, "iq3_s", QK_K, kHalf + QK_K / 4 + QK_K / 32 + QK_K / 8 + QK_K / 64},  // d qs qh signs sc
      {TensorType::kIQ2_S, "iq2_s", QK_K, kHalf + QK_K / 4 + QK_K / 32 + QK_K / 32},             // d, qs, qh, scales
      {TensorType::kIQ4_XS, "iq4_xs", QK_K, kHalf + 2 + QK_K / 64 + QK_K / 2},  // d, scales_h, scales_l, qs
      {TensorType::kI8, "i8", 1, 1},
      {TensorType::kI16, "i16", 1, 2},
      {TensorType::kI32, "i32", 1, 4},
      {TensorType::kI64, "i64", 1, 8},
      {TensorType::kF64, "f64", 1, 8},
      {TensorType::kIQ1_M, "iq1_m", QK_K, QK_K / 8 + QK_K / 16 + QK_K / 32},  // qs, qh, scales
      {TensorType::kBF16, "bf16", 1, 2},
      {TensorType::kTQ1_0, "tq1_0", QK_K, (QK_K - 4 * QK_K / 64) / 5 + QK_K / 64 + kHalf},  // qs, qh, d
      {TensorType::kTQ2_0, "tq2_0", QK_K, QK_K / 4 + kHalf},                                // qs, d
      {TensorType::kMXFP4, "mxfp4", 32, 1 + 32 / 2},                                        // e, qs
      {TensorType::kNVFP4, "nvfp4", 64, 64 / 16 + 64 / 2},                                  // d[4], qs
      {TensorType::kQ1_0, "q1_0", 128, kHalf + 128 / 8},                                    // d, qs
      {TensorType::kQ2_0, "q2_0", 64, kHalf + 64 / 4},                                      // d, qs
  };
  EXPECT_EQ(std::size(rows), 35u);
  for (const Row& r : rows) {
    SCOPED_TRACE(r.name);
    const TypeInfo* t = type_info(r.type);
    ASSERT_NE(t, nullptr);
    EXPECT_STREQ(t->name, r.name);
    EXPECT_EQ(t->block_size, r.block);
    EXPECT_EQ(t->type_size, r.bytes);
    EXPECT_FALSE(t->removed);
    EXPECT_TRUE(type_is_valid(static_cast<uint32_t>(r.type)));
    EXPECT_EQ(type_from_name(r.name), r.type);
  }
}

TEST(GgufTypes, RemovedAndUnknownIds) {
  const std::pair<uint32_t, const char*> removed[] = {{4, "q4_2"},        {5, "q4_3"},       {31, "q4_0_4_4"},
                                                      {32, "q4_0_4_8"},   {33, "q4_0_8_8"},  {36, "iq4_nl_4_4"},
                                                      {37, "iq4_nl_4_8"}, {38, "iq4_nl_8_8"}};
  for (const auto& [id, name] : removed) {
    EXPECT_TRUE(type_info(id)->removed) << id;
    EXPECT_STREQ(type_name(id), name);
    EXPECT_FALSE(type_is_valid(id));
    EXPECT_FALSE(type_from_name(name).has_value());
    EXPECT_EQ(bits_per_weight(id), 0.0);
  }
  EXPECT_EQ(type_table().size(), 43u);
  EXPECT_EQ(type_info(43), nullptr);
  EXPECT_STREQ(type_name(1000), "unknown");
  EXPECT_FALSE(type_is_valid(43));
  auto r = tensor_nbytes(31, std::vector<int64_t>{32});
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "type 31 (q4_0_4_4) was removed from GGUF; re-convert the model");
}

TEST(GgufTypes, BitsPerWeightMatchTheFormatsComments) {
  // "Effectively N bits per weight" / "N bpw" in ggml-common.h.
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kQ2_K)), 2.625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kQ3_K)), 3.4375);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kQ4_K)), 4.5);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kQ5_K)), 5.5);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kQ6_K)), 6.5625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kTQ1_0)), 1.6875);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kTQ2_0)), 2.0625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ2_XXS)), 2.0625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ2_XS)), 2.3125);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ2_S)), 2.5625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ3_XXS)), 3.0625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ3_S)), 3.4375);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ1_S)), 1.5625);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kIQ1_M)), 1.75);
  EXPECT_DOUBLE_EQ(bits_per_weight(static_cast<uint32_t>(TensorType::kF16)), 16.0);
}

TEST(GgufTypes, TensorBytes) {
  EXPECT_EQ(*tensor_nbytes(static_cast<uint32_t>(TensorType::kQ4_0), std::vector<int64_t>{4096, 11008}),
            4096u / 32 * 18 * 11008);
  EXPECT_EQ(*tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{3, 5, 7, 2}),
            3u * 5 * 7 * 2 * 4);
  // ne[0] not a whole number of blocks, a zero or negative dimension, too many dimensions.
  EXPECT_FALSE(tensor_nbytes(static_cast<uint32_t>(TensorType::kQ4_K), std::vector<int64_t>{128}).ok());
  EXPECT_FALSE(tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{4, 0}).ok());
  EXPECT_FALSE(tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{-4}).ok());
  EXPECT_FALSE(tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{1, 1, 1, 1, 1}).ok());
  EXPECT_FALSE(tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{}).ok());
  // 2^62 f32 values: the element count fits int64, the bytes (2^64) do not fit uint64.
  auto big = tensor_nbytes(static_cast<uint32_t>(TensorType::kF32), std::vector<int64_t>{int64_t{1} << 62});
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("overflows uint64"), std::string::npos);
  // 2^32 x 2^32 elements overflow int64.
  auto many =
      tensor_nbytes(static_cast<uint32_t>(TensorType::kI8), std::vector<int64_t>{int64_t{1} << 32, int64_t{1} << 32});
  ASSERT_FALSE(many.ok());
  EXPECT_NE(many.status().message().find("overflows int64"), std::string::npos);
}

// ---- round trips ----

TEST(GgufReader, RoundTripsEveryValueType) {
  const File f = sample_file();
  auto bytes = serialize(f);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  ReadOptions all;
  all.max_array_elements = std::numeric_limits<uint64_t>::max();
  auto back = read_memory(*bytes, "rt.gguf", all);
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->source, "rt.gguf");
  EXPECT_EQ(back->version, 3u);
  ASSERT_EQ(back->metadata.size(), f.metadata.size());
  for (size_t i = 0; i < f.metadata.size(); ++i) {
    EXPECT_EQ(back->metadata[i].key, f.metadata[i].key);
    EXPECT_TRUE(back->metadata[i].value == f.metadata[i].value)
        << f.metadata[i].key << ": " << back->metadata[i].value.to_string() << " vs "
        << f.metadata[i].value.to_string();
  }
  EXPECT_EQ(test::gguf_structure_difference(f, *back), "header_size");  // f was never read: no header_size
  EXPECT_EQ(test::gguf_file_violation(*back, *bytes), "");
  // Exact: writing what was read gives the same bytes.
  auto again = serialize(*back);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(*again, *bytes);
  // Typed getters.
  EXPECT_EQ(*back->get_u8("u8"), 255);
  EXPECT_EQ(*back->get_i8("i8"), -128);
  EXPECT_EQ(*back->get_u16("u16"), 65535);
  EXPECT_EQ(*back->get_i16("i16"), -32768);
  EXPECT_EQ(*back->get_u32("u32"), 4000000000u);
  EXPECT_EQ(*back->get_i32("i32"), std::numeric_limits<int32_t>::min());
  EXPECT_TRUE(std::signbit(*back->get_f32("f32")));
  EXPECT_EQ(*back->get_bool("bool.true"), true);
  EXPECT_EQ(*back->get_bool("bool.false"), false);
  EXPECT_EQ(*back->get_u64("u64"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(*back->get_i64("i64"), std::numeric_limits<int64_t>::min());
  EXPECT_EQ(*back->get_f64("f64"), 1e300);
  EXPECT_EQ(*back->get_string("general.name"), "tiny \"test\"\n\x01\xff");
  EXPECT_EQ(*back->get_strings("tokens"), (std::vector<std::string>{"<s>", "</s>", "hello", ""}));
  EXPECT_TRUE(std::isnan((*back->get_array("scores", ValueType::kF32))->values[2].as_f32().value()));
  EXPECT_EQ(*back->get_int("u32"), 4000000000);
  EXPECT_EQ(*back->get_int("i8"), -128);
  EXPECT_FALSE(back->get_int("u64").ok());  // above INT64_MAX
  // Tensors.
  ASSERT_EQ(back->tensors.size(), 4u);
  const TensorInfo* q = back->find_tensor("token_embd.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, TensorType::kQ4_K);
  EXPECT_EQ(q->n_dims, 2u);
  EXPECT_EQ(q->ne[1], 4);
  EXPECT_EQ(q->size, 4u * 144);
  EXPECT_EQ(q->offset, 0u);
  EXPECT_EQ(back->tensors[1].offset, 576u);        // 4 * 144 = 576, already a multiple of 32
  EXPECT_EQ(back->tensors[2].offset, 576u + 224);  // q8_0: 2 blocks x 3 rows x 34 = 204 bytes, padded to 224
  EXPECT_EQ(back->find_tensor("nope"), nullptr);
  EXPECT_EQ(back->data_state(), DataState::kHeaderOnly);
  EXPECT_FALSE(back->has_data);
  EXPECT_FALSE(back->complete);
}

TEST(GgufReader, Version2ReadsAsVersion3AndValueToString) {
  File f = sample_file();
  f.version = 2;
  auto bytes = serialize(f);
  ASSERT_TRUE(bytes.ok());
  auto back = read_memory(*bytes, "v2.gguf");
  ASSERT_TRUE(back.ok()) << back.status().to_string();
  EXPECT_EQ(back->version, 2u);
  EXPECT_EQ(back->find_value("ids")->to_string(), "[i32 x 3: 1, -2, 3]");
  EXPECT_EQ(back->find_value("general.name")->to_string(), "'tiny \"test\"\\x0a\\x01\\xff'");
  EXPECT_EQ(back->find_value("bool.true")->to_string(), "true");
  EXPECT_EQ(back->find_value("nested")->to_string(1), "[array x 3: [i32 x 2: 1, ...], ...]");
}

TEST(GgufReader, GettersNameTheKeyAndBothTypes) {
  auto f = read_memory(sample_bytes(false), "g.gguf");
  ASSERT_TRUE(f.ok());
  auto missing = f->get_u32("general.nothing");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(), "g.gguf: key 'general.nothing' not found");
  auto wrong = f->get_u32("general.architecture");
  ASSERT_FALSE(wrong.ok());
  EXPECT_EQ(wrong.status().message(), "g.gguf: key 'general.architecture': expected u32, found string");
  auto arr = f->get_array("tokens", ValueType::kI32);
  ASSERT_FALSE(arr.ok());
  EXPECT_EQ(arr.status().message(), "g.gguf: key 'tokens': expected array of i32, found array of string");
  EXPECT_EQ(f->get_string("ids").status().message(), "g.gguf: key 'ids': expected string, found array of i32");
  EXPECT_FALSE(f->get_int("general.architecture").ok());
}

TEST(GgufReader, LargeArraysAreSkippedUnlessKept) {
  File f;
  std::vector<std::string> vocab;
  for (int i = 0; i < 5000; ++i) vocab.push_back("tok" + std::to_string(i));
  f.set("tokenizer.ggml.tokens", Value::strings(vocab));
  std::vector<int32_t> types(5000, 1);
  f.set("tokenizer.ggml.token_type", Value::i32s(types));
  // Nested: 3 arrays of 2 = 3 + 6 elements in all.
  f.set("nested", Value::array(ValueType::kArray, {Value::i32s({1, 2}), Value::i32s({3, 4}), Value::i32s({5, 6})}));
  f.set("after", Value::u32(7));
  auto bytes = serialize(f);
  ASSERT_TRUE(bytes.ok());

  auto skipped = read_memory(*bytes, "vocab.gguf");  // default: at most 4096 elements
  ASSERT_TRUE(skipped.ok()) << skipped.status().to_string();
  const Array* tokens = skipped->find_value("tokenizer.ggml.tokens")->as_array();
  ASSERT_NE(tokens, nullptr);
  EXPECT_TRUE(tokens->skipped);
  EXPECT_EQ(tokens->type, ValueType::kString);
  EXPECT_EQ(tokens->size, 5000u);
  EXPECT_TRUE(tokens->values.empty());
  EXPECT_TRUE(skipped->find_value("tokenizer.ggml.token_type")->as_array()->skipped);
  EXPECT_FALSE(skipped->find_value("nested")->as_array()->skipped);
  EXPECT_EQ(*skipped->get_u32("after"), 7u);  // reading went on at the right place
  auto denied = skipped->get_strings("tokenizer.ggml.tokens");
  ASSERT_FALSE(denied.ok());
  EXPECT_NE(denied.status().message().find("keep_keys"), std::string::npos);
  EXPECT_EQ(skipped->find_value("tokenizer.ggml.tokens")->to_string(), "[string x 5000, skipped]");
  // A skipped array cannot be written.
  EXPECT_FALSE(serialize(*skipped).ok());

  ReadOptions keep;
  keep.keep_keys = {"tokenizer.ggml.tokens"};
  auto kept = read_memory(*bytes, "vocab.gguf", keep);
  ASSERT_TRUE(kept.ok());
  auto strings = kept->get_strings("tokenizer.ggml.tokens");
  ASSERT_TRUE(strings.ok());
  EXPECT_EQ(strings->size(), 5000u);
  EXPECT_EQ((*strings)[4999], "tok4999");
  EXPECT_TRUE(kept->find_value("tokenizer.ggml.token_type")->as_array()->skipped);

  // The budget counts nested elements: 3 + 6 = 9 > 8.
  ReadOptions small;
  small.max_array_elements = 8;
  auto nested = read_memory(*bytes, "vocab.gguf", small);
  ASSERT_TRUE(nested.ok());
  const Array* n = nested->find_value("nested")->as_array();
  EXPECT_TRUE(n->skipped);
  EXPECT_EQ(n->size, 3u);
  EXPECT_EQ(n->type, ValueType::kArray);
  small.max_array_elements = 9;
  EXPECT_FALSE(read_memory(*bytes, "vocab.gguf", small)->find_value("nested")->as_array()->skipped);
}

TEST(GgufReader, FileReaderMatchesMemoryReaderAtAnyBufferSize) {
  const std::vector<uint8_t> bytes = sample_bytes(true);
  const std::string path = temp_path("buffers.gguf");
  write_bytes(path, bytes);
  auto mem = read_memory(bytes, path);
  ASSERT_TRUE(mem.ok());
  for (size_t buffer : {size_t{1}, size_t{3}, size_t{7}, size_t{64}, size_t{64 * 1024}}) {
    SCOPED_TRACE("buffer " + std::to_string(buffer));
    ReadOptions o;
    o.io_buffer_bytes = buffer;
    auto f = read_file(path, o);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(test::gguf_structure_difference(*f, *mem), "");
    EXPECT_EQ(f->source, path);
    EXPECT_TRUE(f->complete);
    // Errors too: a truncated copy fails the same way through either reader.
    const std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + 100);
    write_bytes(path, cut);
    auto bad_file = read_file(path, o);
    auto bad_mem = read_memory(cut, path);
    ASSERT_FALSE(bad_file.ok());
    EXPECT_EQ(bad_file.status().message(), bad_mem.status().message());
    write_bytes(path, bytes);
  }
  auto missing = read_file(temp_path("does-not-exist.gguf"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  auto dir = read_file(std::filesystem::temp_directory_path().string());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.status().message().find("not a regular file"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(GgufReader, DataSectionHeaderOnlyCompleteOrTruncated) {
  File f = sample_file();
  const std::vector<uint8_t> data = sample_data(f);
  auto full = serialize(f, data);
  ASSERT_TRUE(full.ok()) << full.status().to_string();
  auto c = read_memory(*full, "c.gguf");
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->data_state(), DataState::kComplete);
  EXPECT_TRUE(c->has_data);
  EXPECT_EQ(c->data_offset % 32, 0u);
  EXPECT_EQ(c->data_bytes, data.size());
  EXPECT_EQ(c->file_size, full->size());
  EXPECT_EQ(c->file_size, c->data_offset + (data.size() + 31) / 32 * 32);  // padded to the alignment
  auto t2 = tensor_data(*full, *c, c->tensors[2]);
  ASSERT_TRUE(t2.ok());
  EXPECT_EQ(t2->size(), 20u);
  EXPECT_EQ((*t2)[0], 3);
  EXPECT_TRUE(read_memory(*full, "c.gguf", require_data()).ok());

  // Header only: the file ends before the data section.
  auto header = serialize(f);
  ASSERT_TRUE(header.ok());
  auto h = read_memory(*header, "h.gguf");
  ASSERT_TRUE(h.ok());
  EXPECT_EQ(h->data_state(), DataState::kHeaderOnly);
  EXPECT_EQ(h->data_offset, c->data_offset);
  EXPECT_EQ(h->header_size, header->size());
  auto h_data = read_memory(*header, "h.gguf", require_data());
  ASSERT_FALSE(h_data.ok());
  EXPECT_EQ(h_data.status().code(), StatusCode::kOutOfRange);
  EXPECT_NE(h_data.status().message().find("no data section (header only)"), std::string::npos);
  EXPECT_FALSE(tensor_data(*header, *h, h->tensors[0]).ok());

  // Truncated: the last tensor (by offset) cut short.
  std::vector<uint8_t> cut(full->begin(), full->begin() + static_cast<long>(c->data_offset + data.size() - 1));
  auto t = read_memory(cut, "t.gguf");
  ASSERT_TRUE(t.ok());
  EXPECT_EQ(t->data_state(), DataState::kTruncated);
  EXPECT_TRUE(t->has_data);
  EXPECT_FALSE(t->complete);
  auto t_data = read_memory(cut, "t.gguf", require_data());
  ASSERT_FALSE(t_data.ok());
  const TensorInfo& last = c->tensors[3];
  EXPECT_EQ(t_data.status().message(), "t.gguf: offset " + std::to_string(c->data_offset + last.offset) +
                                           ": tensor[3] 'blk.0.ffn_up.weight' data: truncated: needs bytes [" +
                                           std::to_string(c->data_offset + last.offset) + ", " +
                                           std::to_string(c->data_offset + last.offset + last.size) +
                                           "), the file ends at " + std::to_string(cut.size()));
  EXPECT_TRUE(tensor_data(cut, *t, t->tensors[0]).ok());
  EXPECT_FALSE(tensor_data(cut, *t, t->tensors[3]).ok());

  // From a file.
  const std::string path = temp_path("data.gguf");
  ASSERT_TRUE(write_file(path, f, data).ok());
  auto from_file = read_file(path);
  ASSERT_TRUE(from_file.ok());
  auto d1 = read_tensor_data(path, *from_file, from_file->tensors[1]);
  ASSERT_TRUE(d1.ok()) << d1.status().to_string();
  EXPECT_EQ(*d1, std::vector<uint8_t>(204, 2));
  ASSERT_TRUE(write_file(path, f).ok());
  EXPECT_FALSE(read_tensor_data(path, *from_file, from_file->tensors[1]).ok());
  std::filesystem::remove(path);
}

TEST(GgufReader, NamesAndPrinting) {
  const char* names[] = {"u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "string", "array", "u64", "i64", "f64"};
  for (uint32_t t = 0; t <= kMaxValueType; ++t) EXPECT_STREQ(value_type_name(static_cast<ValueType>(t)), names[t]);
  EXPECT_STREQ(value_type_name(static_cast<ValueType>(13)), "unknown");
  EXPECT_STREQ(data_state_name(DataState::kHeaderOnly), "header-only");
  EXPECT_STREQ(data_state_name(DataState::kComplete), "complete");
  EXPECT_STREQ(data_state_name(DataState::kTruncated), "truncated");
  EXPECT_EQ(Value::u64(18446744073709551615ull).to_string(), "18446744073709551615");
  EXPECT_EQ(Value::i16(-7).to_string(), "-7");
  EXPECT_EQ(Value::f32(0.1f).to_string(), "0.100000001");
  EXPECT_EQ(Value::f64(0.1).to_string(), "0.10000000000000001");
  EXPECT_EQ(Value::string(std::string(70, 'a')).to_string(), "'" + std::string(64, 'a') + "...'");
  EXPECT_EQ(Value().to_string(), "0");
  // Accessors answer only for their own types.
  EXPECT_FALSE(Value::i32(1).as_unsigned().has_value());
  EXPECT_FALSE(Value::u32(1).as_signed().has_value());
  EXPECT_FALSE(Value::f64(1).as_f32().has_value());
  EXPECT_FALSE(Value::f32(1).as_f64().has_value());
  EXPECT_FALSE(Value::u8(1).as_bool().has_value());
  EXPECT_EQ(Value::u8(1).as_string(), nullptr);
  EXPECT_EQ(Value::u8(1).as_array(), nullptr);
  EXPECT_FALSE(Value::u16(1) == Value::u32(1));
  EXPECT_TRUE(Value::f32(std::numeric_limits<float>::quiet_NaN()) ==
              Value::f32(std::numeric_limits<float>::quiet_NaN()));
  EXPECT_FALSE(Value::f64(0.0) == Value::f64(-0.0));
  File f;
  EXPECT_EQ(f.get_int("x").status().code(), StatusCode::kNotFound);
  f.set("x", Value::u8(1));
  f.set("x", Value::u8(2));  // replaces
  EXPECT_EQ(f.metadata.size(), 1u);
  EXPECT_EQ(*f.get_u8("x"), 2);
}

TEST(GgufWriter, LayoutErrors) {
  File f;
  f.add_tensor("five", TensorType::kF32, {1, 1, 1, 1, 1});
  EXPECT_NE(f.layout().message().find("5 dimensions"), std::string::npos);
  f.tensors.clear();
  f.add_tensor("q", TensorType::kQ4_0, {31});
  EXPECT_NE(f.layout().message().find("tensor 'q': ne[0] = 31 is not a whole number"), std::string::npos);
  f.tensors.clear();
  f.add_tensor("a", TensorType::kI8, {int64_t{1} << 62});
  f.add_tensor("b", TensorType::kI8, {int64_t{1} << 62});
  f.add_tensor("c", TensorType::kI8, {int64_t{1} << 62});
  f.add_tensor("d", TensorType::kI8, {int64_t{1} << 62});
  EXPECT_NE(f.layout().message().find("the data section overflows uint64"), std::string::npos);
}

// ---- the writer refuses what the reader refuses ----

TEST(GgufWriter, RefusesWhatTheReaderRefuses) {
  auto refused = [](File f, const std::string& what) {
    auto bytes = serialize(f);
    EXPECT_FALSE(bytes.ok()) << what;
    if (!bytes.ok()) {
      EXPECT_NE(bytes.status().message().find(what), std::string::npos) << bytes.status().message();
    }
  };
  File base;
  base.add_tensor("a", TensorType::kF32, {8});
  ASSERT_TRUE(base.layout().ok());
  ASSERT_TRUE(serialize(base).ok());
  File f = base;
  f.version = 1;
  refused(f, "version 1");
  f = base;
  f.set("", Value::u8(1));
  refused(f, "empty key");
  f = base;
  f.set(std::string(65536, 'k'), Value::u8(1));
  refused(f, "key of 65536 bytes");
  f = base;
  f.metadata.push_back({"dup", Value::u8(1)});
  f.metadata.push_back({"dup", Value::u8(2)});
  refused(f, "duplicate key");
  f = base;
  f.set("mixed", Value::array(ValueType::kU8, {Value::u8(1), Value::u16(2)}));
  refused(f, "element of type u16 in an array of u8");
  f = base;
  Array lying;
  lying.type = ValueType::kU8;
  lying.size = 3;
  f.set("lying", Value::array(lying));
  refused(f, "says 3 elements but holds 0");
  f = base;
  Value deep = Value::array(ValueType::kU8, {});
  for (int i = 0; i < kMaxNesting; ++i) deep = Value::array(ValueType::kArray, {deep});
  f.set("deep", deep);  // 9 levels
  refused(f, "nested deeper than 8");
  f = base;
  f.set("general.alignment", Value::u64(64));
  refused(f, "must be u32");
  f = base;
  f.set("general.alignment", Value::u32(48));
  refused(f, "not a power of two");
  f = base;
  f.set("general.alignment", Value::u32(64));  // File::alignment still 32
  refused(f, "File::alignment is 32 but general.alignment says 64");
  f = base;
  f.tensors[0].name = "";
  refused(f, "empty name");
  f = base;
  f.tensors[0].name = std::string(64, 'n');
  refused(f, "name of 64 bytes");
  f = base;
  f.add_tensor("a", TensorType::kF32, {8});
  f.tensors[1].offset = 32;
  refused(f, "duplicate tensor name");
  f = base;
  f.tensors[0].n_dims = 5;
  refused(f, "5 dimensions");
  f = base;
  f.tensors[0].ne[0] = 0;
  refused(f, "ne[0] is 0");
  f = base;
  f.tensors[0].type = static_cast<TensorType>(31);
  refused(f, "type 31 (q4_0_4_4) was removed");
  f = base;
  f.tensors[0].type = static_cast<TensorType>(77);
  refused(f, "unknown tensor type 77");
  f = base;
  f.tensors[0].type = TensorType::kQ4_0;
  refused(f, "not a whole number of q4_0 blocks");
  f = base;
  f.tensors[0].offset = 16;
  refused(f, "not a multiple of the alignment 32");
  f = base;
  f.add_tensor("b", TensorType::kF32, {16});
  f.tensors[1].offset = 0;
  refused(f, "tensor[1] 'b': data overlaps tensor[0] 'a'");
  f = base;
  f.set("long", Value::strings({std::string(kMaxStringBytes + 1, 's')}));
  refused(f, "kv[0] 'long'[0]: a string of 16777217 bytes (at most 16777216)");
  // Data of the wrong size.
  auto wrong = serialize(base, std::vector<uint8_t>(31));
  ASSERT_FALSE(wrong.ok());
  EXPECT_NE(wrong.status().message().find("the tensors need exactly 32"), std::string::npos);
  // A tensor beyond 4 GiB cannot be written with data (and is not allocated for).
  File huge;
  huge.add_tensor("h", TensorType::kI8, {int64_t{5} << 30});
  ASSERT_TRUE(huge.layout().ok());
  EXPECT_TRUE(serialize(huge).ok());  // header only is fine
}

// ---- malformed files: each at its field's byte offset ----
// Offsets: the header is magic 0..3, version 4..7, tensor_count 8..15, kv_count 16..23; the first key/value pair
// starts at 24 with its key length (8 bytes), the key at 32, then the value type (4 bytes), then the value.

TEST(GgufMalformed, Header) {
  EXPECT_EQ(error_of(GgufBytes().raw("GGML").u32(3).u64(0).u64(0).span()),
            "m.gguf: offset 0: magic: not a GGUF file (starts with 'GGML', not \"GGUF\")");
  EXPECT_EQ(error_of(GgufBytes().raw("FUGG").u32(3).u64(0).u64(0).span()),
            "m.gguf: offset 0: magic: \"FUGG\" is a byte-swapped \"GGUF\": big-endian GGUF files are not supported");
  EXPECT_EQ(error_of(GgufBytes().raw("GG").span()), "m.gguf: offset 0: magic: truncated: needs 4 bytes, 2 left");
  EXPECT_EQ(error_of(GgufBytes().raw("PK").span()),
            "m.gguf: offset 0: magic: not a GGUF file (2 bytes; a GGUF file starts with \"GGUF\")");
  EXPECT_NE(error_of(std::span<const uint8_t>()).find("offset 0: magic"), std::string::npos);
  // Version at 4: big-endian 3 is 0x03000000 read little-endian.
  EXPECT_EQ(error_of(GgufBytes().raw("GGUF").u32(0x03000000).u64(0).u64(0).span()),
            "m.gguf: offset 4: version: 50331648 is version 3 byte-swapped: big-endian GGUF files are not supported");
  EXPECT_EQ(error_of(GgufBytes().header(1, 0, 0).span()),
            "m.gguf: offset 4: version: GGUF version 1 (the old format with 32-bit counts) is not supported; "
            "re-convert the model");
  EXPECT_EQ(error_of(GgufBytes().header(4, 0, 0).span()),
            "m.gguf: offset 4: version: unknown GGUF version 4 (this reader knows 2 and 3)");
  // Counts at 8 and 16 against the bytes after the header (here 0 + 40 padding bytes): fail at once, no allocation.
  EXPECT_EQ(error_of(GgufBytes().header(3, uint64_t{1} << 60, 0).zeros(40).span()),
            "m.gguf: offset 8: tensor_count: 1152921504606846976 tensors need at least 33 bytes each, but only 40 "
            "bytes follow the header");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, uint64_t{1} << 60).zeros(40).span()),
            "m.gguf: offset 16: kv_count: 1152921504606846976 key/value pairs need at least 14 bytes each, but only "
            "40 bytes follow the header");
  // One tensor (33 bytes at least) leaves 7 of 40 bytes: not enough for one pair.
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 1).zeros(40).span()),
            "m.gguf: offset 16: kv_count: 1 key/value pairs need at least 14 bytes each, but only 7 bytes follow the "
            "header and the 1 tensor infos' 33 bytes at least");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 0).span()), "");  // an empty file is fine
}

TEST(GgufMalformed, Keys) {
  // Key length 0 at 24.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).u64(0).zeros(8).span()), "m.gguf: offset 24: kv[0] key: empty");
  // Key length 65536 at 24 (checked before the bytes left).
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).u64(65536).zeros(8).span()),
            "m.gguf: offset 24: kv[0] key: length 65536 (at most 65535 bytes)");
  // Key length 100 at 24 with 6 bytes after it.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).u64(100).zeros(6).span()),
            "m.gguf: offset 24: kv[0] key length: 100 bytes, but only 6 are left in the file");
  // Duplicate: the first pair "a" u32 takes 24..40 (8 + 1 + 4 + 4 = 17 bytes), the second starts at 41.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 2).kv_u32("a", 1).kv_u32("a", 2).span()),
            "m.gguf: offset 41: kv[1] key: duplicate key 'a' (first at offset 24)");
  // A key with unprintable bytes is escaped in messages.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("\n'", 13).u8(0).span()),
            "m.gguf: offset 34: kv[0] '\\x0a\\'' type: unknown value type 13 (0 to 12)");
}

TEST(GgufMalformed, Values) {
  // Key "a" (1 byte) at 32, type at 33, value at 37.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("a", 13).u8(0).span()),
            "m.gguf: offset 33: kv[0] 'a' type: unknown value type 13 (0 to 12)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kBool).u8(2).span()),
            "m.gguf: offset 37: kv[0] 'a' value: bool 2 (must be 0 or 1)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kString).u64(1000).raw("abc").span()),
            "m.gguf: offset 37: kv[0] 'a' value length: 1000 bytes, but only 3 are left in the file");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kU64).u32(0).span()),
            "m.gguf: offset 37: kv[0] 'a' value: truncated: needs 8 bytes, 4 left");
  ReadOptions short_strings;
  short_strings.max_string_bytes = 2;
  EXPECT_EQ(
      error_of(GgufBytes().header(3, 0, 1).kv_str("a", "abc").span(), short_strings),
      "m.gguf: offset 37: kv[0] 'a' value length: a string of 3 bytes (at most 2: ReadOptions::max_string_bytes)");
  // Arrays: element type at 37, length at 41, elements from 49.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kArray).array(13, 0).span()),
            "m.gguf: offset 37: kv[0] 'a' value array type: unknown value type 13 (0 to 12)");
  EXPECT_EQ(error_of(GgufBytes()
                         .header(3, 0, 1)
                         .key("a", GgufBytes::kArray)
                         .array(GgufBytes::kU32, uint64_t{1} << 40)
                         .zeros(16)
                         .span()),
            "m.gguf: offset 41: kv[0] 'a' value array length: 1099511627776 elements of type u32 need at least 4 "
            "bytes each, but only 16 bytes are left in the file");
  // A bool inside an array: element 1 at 50.
  EXPECT_EQ(
      error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kArray).array(GgufBytes::kBool, 2).u8(1).u8(7).span()),
      "m.gguf: offset 50: kv[0] 'a' value[1]: bool 7 (must be 0 or 1)");
  // ... and in a skipped array too (every element is checked even when not stored).
  ReadOptions skip;
  skip.max_array_elements = 1;
  EXPECT_EQ(
      error_of(GgufBytes().header(3, 0, 1).key("a", GgufBytes::kArray).array(GgufBytes::kBool, 2).u8(1).u8(7).span(),
               skip),
      "m.gguf: offset 50: kv[0] 'a' value[1]: bool 7 (must be 0 or 1)");
  // A string element whose length runs past the end: element 0 at 49, its length 8 bytes, then 2 bytes.
  EXPECT_EQ(
      error_of(
          GgufBytes().header(3, 0, 1).key("a", GgufBytes::kArray).array(GgufBytes::kString, 1).u64(5).raw("ab").span()),
      "m.gguf: offset 49: kv[0] 'a' value[0] length: 5 bytes, but only 2 are left in the file");
}

TEST(GgufMalformed, NestingDeeperThanEight) {
  // Array headers (12 bytes each) from 37: the k-th at 37 + 12 (k - 1); the 9th at 133.
  GgufBytes ok;
  ok.header(3, 0, 1).key("n", GgufBytes::kArray);
  for (int k = 1; k < 8; ++k) ok.array(GgufBytes::kArray, 1);
  ok.array(GgufBytes::kU8, 0);  // the 8th: allowed
  EXPECT_EQ(error_of(ok.span()), "");
  GgufBytes deep;
  deep.header(3, 0, 1).key("n", GgufBytes::kArray);
  for (int k = 1; k <= 8; ++k) deep.array(GgufBytes::kArray, 1);
  ASSERT_EQ(deep.size(), 133u);
  deep.array(GgufBytes::kU8, 0);
  EXPECT_EQ(error_of(deep.span()),
            "m.gguf: offset 133: kv[0] 'n' value[0][0][0][0][0][0][0][0]: arrays nested deeper than 8");
}

TEST(GgufMalformed, Alignment) {
  // "general.alignment" is 17 bytes: key at 32, type at 49, value at 53.
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).kv_str("general.alignment", "32").span()),
            "m.gguf: offset 49: kv[0] 'general.alignment' type: must be u32, not string");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).kv_u32("general.alignment", 48).span()),
            "m.gguf: offset 53: kv[0] 'general.alignment' value: 48 is not a power of two");
  EXPECT_EQ(error_of(GgufBytes().header(3, 0, 1).kv_u32("general.alignment", 0).span()),
            "m.gguf: offset 53: kv[0] 'general.alignment' value: 0 is not a power of two");
  // A valid alignment of 64 moves the data section and checks offsets against 64: the pair takes 24..56, the tensor
  // "t" (f32, 16 values) starts at 57, its offset field at 57 + 8 + 1 + 4 + 8 + 4 = 82.
  auto ok = read_memory(GgufBytes().header(3, 1, 1).kv_u32("general.alignment", 64).tensor("t", {16}, 0, 64).span(),
                        "m.gguf");
  ASSERT_TRUE(ok.ok()) << ok.status().to_string();
  EXPECT_EQ(ok->alignment, 64u);
  EXPECT_EQ(ok->header_size, 90u);
  EXPECT_EQ(ok->data_offset, 128u);
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 1).kv_u32("general.alignment", 64).tensor("t", {16}, 0, 32).span()),
            "m.gguf: offset 82: tensor[0] 't' offset: 32 is not a multiple of the alignment 64");
}

// Tensor infos: with no metadata the first starts at 24: name length 24, name at 32; for the name "t": n_dims at
// 33, ne[0] at 37, ne[1] at 45, ...; with one dimension the type is at 45 and the offset at 49 (the info ends at 57).
TEST(GgufMalformed, TensorInfos) {
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("", {4}, 0, 0).zeros(8).span()),
            "m.gguf: offset 24: tensor[0] name: empty");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor(std::string(64, 'x'), {4}, 0, 0).span()),
            "m.gguf: offset 24: tensor[0] name: length 64 (at most 63 bytes)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor(std::string(63, 'x'), {4}, 0, 0).span()), "");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {}, 0, 0).zeros(16).span()),
            "m.gguf: offset 33: tensor[0] 't' n_dims: 0 (1 to 4 allowed)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {1, 1, 1, 1, 1}, 0, 0).span()),
            "m.gguf: offset 33: tensor[0] 't' n_dims: 5 (1 to 4 allowed)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {0}, 0, 0).span()),
            "m.gguf: offset 37: tensor[0] 't' ne[0]: 0 (must be > 0)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {4, -3}, 0, 0).span()),
            "m.gguf: offset 45: tensor[0] 't' ne[1]: -3 (must be > 0)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {int64_t{1} << 32, int64_t{1} << 32}, 0, 0).span()),
            "m.gguf: offset 45: tensor[0] 't' ne[1]: 4294967296: the element count overflows int64");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {int64_t{1} << 62}, 0, 0).span()),
            "m.gguf: offset 45: tensor[0] 't' type: f32 x [4611686018427387904]: the byte size overflows uint64 at "
            "ne[0] = 4611686018427387904");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {4}, 43, 0).span()),
            "m.gguf: offset 45: tensor[0] 't' type: unknown tensor type 43");
  const std::string removed = error_of(GgufBytes().header(3, 1, 0).tensor("t", {32}, 31, 0).span());
  EXPECT_EQ(removed,
            "m.gguf: offset 45: tensor[0] 't' type: type 31 (q4_0_4_4) was removed from GGUF; re-convert the model");
  EXPECT_EQ(read_memory(GgufBytes().header(3, 1, 0).tensor("t", {32}, 36, 0).span(), "m.gguf").status().code(),
            StatusCode::kUnsupported);
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {33}, 2, 0).span()),
            "m.gguf: offset 37: tensor[0] 't' ne[0]: 33 is not a whole number of q4_0 blocks (32 values)");
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {4}, 0, 16).span()),
            "m.gguf: offset 49: tensor[0] 't' offset: 16 is not a multiple of the alignment 32");
  // offset + size overflows uint64 (2^64 - 32 + 64 bytes).
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {16}, 0, ~uint64_t{31}).span()),
            "m.gguf: offset 49: tensor[0] 't' offset: 18446744073709551584 + 64 bytes overflows uint64");
  // The data section (at 64: the info ends at 57) plus the tensor's end (2^64 - 32) overflows.
  EXPECT_EQ(error_of(GgufBytes().header(3, 1, 0).tensor("t", {4}, 0, ~uint64_t{63}).span()),
            "m.gguf: offset 49: tensor[0] 't' offset: the data section at 64 + 18446744073709551568 overflows uint64");
}

// Two tensors: "a" from 24 to 57, "b" from 57 (name at 57, n_dims at 66, ne[0] at 70, type at 78, offset at 82).
TEST(GgufMalformed, TwoTensors) {
  EXPECT_EQ(error_of(GgufBytes().header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("a", {8}, 0, 32).span()),
            "m.gguf: offset 57: tensor[1] name: duplicate tensor name 'a' (tensor[0])");
  EXPECT_EQ(error_of(GgufBytes().header(3, 2, 0).tensor("a", {8}, 0, 0).tensor("b", {8}, 0, 0).span()),
            "m.gguf: offset 82: tensor[1] 'b' offset: data [0, 32) overlaps tensor[0] 'a' [0, 32)");
  // "a" is 64 bytes at 0, "b" at 32: partial overlap; the later tensor in the file is named even when it comes
  // first in the data.
  EXPECT_EQ(error_of(GgufBytes().header(3, 2, 0).tensor("a", {16}, 0, 32).tensor("b", {16}, 0, 0).span()),
            "m.gguf: offset 82: tensor[1] 'b' offset: data [0, 64) overlaps tensor[0] 'a' [32, 96)");
  // Gaps and any order are fine.
  auto ok = read_memory(GgufBytes().header(3, 2, 0).tensor("a", {8}, 0, 96).tensor("b", {8}, 0, 0).span(), "m.gguf");
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->data_bytes, 128u);
}

// Every proper prefix of a valid file shorter than its header fails with an offset; longer ones parse, header-only
// up to the data section, then truncated, then complete.
TEST(GgufMalformed, EveryPrefixFailsCleanly) {
  const std::vector<uint8_t> bytes = sample_bytes(true);
  auto full = read_memory(bytes, "p.gguf");
  ASSERT_TRUE(full.ok());
  for (size_t n = 0; n <= bytes.size(); ++n) {
    SCOPED_TRACE("prefix of " + std::to_string(n) + " bytes");
    const std::span<const uint8_t> prefix(bytes.data(), n);
    auto f = read_memory(prefix, "p.gguf");
    if (n < full->header_size) {
      ASSERT_FALSE(f.ok());
      EXPECT_EQ(f.status().message().rfind("p.gguf: offset ", 0), 0u) << f.status().message();
      // Truncated fields, or counts and lengths that point past the end.
      EXPECT_EQ(f.status().code(), StatusCode::kOutOfRange) << f.status().message();
      continue;
    }
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_EQ(test::gguf_structure_difference(*f, *full), "");
    EXPECT_EQ(test::gguf_file_violation(*f, prefix), "");
    const DataState expect = n <= full->data_offset                     ? DataState::kHeaderOnly
                             : n < full->data_offset + full->data_bytes ? DataState::kTruncated
                                                                        : DataState::kComplete;
    EXPECT_EQ(f->data_state(), expect);
    EXPECT_EQ(read_memory(prefix, "p.gguf", require_data()).ok(), expect == DataState::kComplete);
  }
}

// Random byte corruption (seeded) never crashes; errors carry the source and an offset; what parses holds the
// invariants and writes back to the same structure.
TEST(GgufMalformed, RandomCorruptionNeverCrashes) {
  const std::vector<uint8_t> bytes = sample_bytes(true);
  // A fixed seed by default (the suite stays deterministic); TESSERA_GGUF_SEED=N explores others.
  const char* env = std::getenv("TESSERA_GGUF_SEED");
  const uint32_t seed = env != nullptr ? static_cast<uint32_t>(std::strtoul(env, nullptr, 10)) : 30;
  SCOPED_TRACE("seed " + std::to_string(seed) + " (rerun: TESSERA_GGUF_SEED=" + std::to_string(seed) + ")");
  std::mt19937 rng(seed);
  int parsed = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    SCOPED_TRACE("iteration " + std::to_string(iter));
    std::vector<uint8_t> b = bytes;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the header (where the structure is), sometimes anywhere.
      const size_t at = rng() % 2 ? rng() % 400 : rng() % b.size();
      b[at] = rng() % 3 == 0 ? static_cast<uint8_t>(rng()) : static_cast<uint8_t>(b[at] ^ (1u << (rng() % 8)));
    }
    if (rng() % 4 == 0) b.resize(rng() % b.size());
    ReadOptions o;
    o.max_array_elements = rng() % 8;
    auto f = read_memory(b, "r.gguf", o);
    if (!f.ok()) {
      EXPECT_EQ(f.status().message().rfind("r.gguf: offset ", 0), 0u) << f.status().message();
      continue;
    }
    ++parsed;
    ASSERT_EQ(test::gguf_file_violation(*f, b), "");
    ReadOptions all;
    all.max_array_elements = std::numeric_limits<uint64_t>::max();
    auto whole = read_memory(b, "r.gguf", all);
    ASSERT_TRUE(whole.ok());
    auto written = serialize(*whole);
    ASSERT_TRUE(written.ok()) << written.status().to_string();
    ASSERT_TRUE(std::equal(written->begin(), written->end(), b.begin()));  // the header, byte for byte
    auto again = read_memory(*written, "w.gguf", all);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(test::gguf_structure_difference(*again, *whole), "");
  }
  EXPECT_GT(parsed, 0);
}

// ---- split models ----

namespace {

// Writes a model split into `count` shards under `prefix`; shard s holds tensors "t<s>.<k>" (k < per_shard). edit
// changes shard s's File before it is written.
void write_split(const std::string& prefix, uint16_t count, int per_shard,
                 const std::function<void(uint16_t, File&)>& edit = nullptr) {
  for (uint16_t s = 0; s < count; ++s) {
    File f;
    if (s == 0) f.set("general.architecture", Value::string("llama"));
    f.set(kKeySplitNo, Value::u16(s));
    f.set(kKeySplitCount, Value::u16(count));
    f.set(kKeySplitTensorsCount, Value::i32(count * per_shard));
    for (int k = 0; k < per_shard; ++k) {
      f.add_tensor("t" + std::to_string(s) + "." + std::to_string(k), TensorType::kF32, {8});
    }
    ASSERT_TRUE(f.layout().ok());
    if (edit) edit(s, f);
    ASSERT_TRUE(write_file(split_path(prefix, s, count), f, sample_data(f)).ok());
  }
}

void remove_split(const std::string& prefix, uint16_t count) {
  for (uint16_t s = 0; s < count; ++s) std::filesystem::remove(split_path(prefix, s, count));
}

}  // namespace

TEST(GgufModel, SplitNames) {
  EXPECT_EQ(split_path("/m/llama", 0, 3), "/m/llama-00001-of-00003.gguf");
  EXPECT_EQ(split_path("x", 99999, 100000), "x-100000-of-100000.gguf");
  EXPECT_EQ(split_prefix("/m/llama-00002-of-00003.gguf", 1, 3), "/m/llama");
  EXPECT_FALSE(split_prefix("/m/llama-00002-of-00003.gguf", 0, 3).has_value());
  EXPECT_FALSE(split_prefix("-00002-of-00003.gguf", 1, 3).has_value());
  auto n = parse_split_path("dir/a-b-00003-of-00010.gguf");
  ASSERT_TRUE(n.has_value());
  EXPECT_EQ(n->prefix, "dir/a-b");
  EXPECT_EQ(n->split_no, 2u);
  EXPECT_EQ(n->split_count, 10u);
  EXPECT_FALSE(parse_split_path("a-00000-of-00003.gguf").has_value());  // 1-based
  EXPECT_FALSE(parse_split_path("a-00004-of-00003.gguf").has_value());
  EXPECT_FALSE(parse_split_path("a-0001-of-0003.gguf").has_value());  // five digits at least
  EXPECT_FALSE(parse_split_path("a-00001-of-00003.bin").has_value());
  EXPECT_FALSE(parse_split_path("a.gguf").has_value());
}

TEST(GgufModel, ReadsEveryShardFromAnyShard) {
  const std::string prefix = temp_path("split");
  write_split(prefix, 3, 2);
  for (uint16_t given = 0; given < 3; ++given) {
    SCOPED_TRACE("given shard " + std::to_string(given));
    auto m = read_model(split_path(prefix, given, 3));
    ASSERT_TRUE(m.ok()) << m.status().to_string();
    ASSERT_EQ(m->shards.size(), 3u);
    EXPECT_EQ(m->shards[2].source, split_path(prefix, 2, 3));
    EXPECT_EQ(*m->metadata().get_string("general.architecture"), "llama");
    ASSERT_EQ(m->tensors.size(), 6u);
    EXPECT_EQ(m->tensor(m->tensors[3]).name, "t1.1");
    Model::TensorRef where;
    const TensorInfo* t = m->find_tensor("t2.0", &where);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(where.shard, 2u);
    EXPECT_EQ(where.index, 0u);
    EXPECT_EQ(m->n_bytes(), 6u * 32);
    EXPECT_EQ(m->find_tensor("t3.0"), nullptr);
  }
  // An unsplit file is a model of one shard.
  const std::string single = temp_path("single.gguf");
  File f = sample_file();
  ASSERT_TRUE(write_file(single, f).ok());
  auto one = read_model(single);
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(one->shards.size(), 1u);
  EXPECT_EQ(one->tensors.size(), 4u);
  std::filesystem::remove(single);
  remove_split(prefix, 3);
}

TEST(GgufModel, SplitErrors) {
  const std::string prefix = temp_path("bad");
  // A missing shard.
  write_split(prefix, 3, 1);
  std::filesystem::remove(split_path(prefix, 1, 3));
  auto missing = read_model(split_path(prefix, 0, 3));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("shard 2 of 3 is missing"), std::string::npos)
      << missing.status().message();
  remove_split(prefix, 3);
  // A shard that says it is another shard.
  write_split(prefix, 3, 1, [](uint16_t s, File& f) {
    if (s == 2) f.set(kKeySplitNo, Value::u16(1));
  });
  auto wrong_no = read_model(split_path(prefix, 0, 3));
  ASSERT_FALSE(wrong_no.ok());
  EXPECT_NE(wrong_no.status().message().find("but the file is shard 3 of 3"), std::string::npos)
      << wrong_no.status().message();
  remove_split(prefix, 3);
  // Disagreeing counts.
  write_split(prefix, 3, 1, [](uint16_t s, File& f) {
    if (s == 1) f.set(kKeySplitTensorsCount, Value::i32(4));
  });
  auto wrong_total = read_model(split_path(prefix, 0, 3));
  ASSERT_FALSE(wrong_total.ok());
  EXPECT_NE(wrong_total.status().message().find("split.tensors.count 4"), std::string::npos);
  remove_split(prefix, 3);
  write_split(prefix, 3, 1, [](uint16_t, File& f) { f.set(kKeySplitTensorsCount, Value::i32(5)); });
  auto total = read_model(split_path(prefix, 0, 3));
  ASSERT_FALSE(total.ok());
  EXPECT_NE(total.status().message().find("split.tensors.count is 5, but the 3 shard(s) hold 3 tensors"),
            std::string::npos)
      << total.status().message();
  remove_split(prefix, 3);
  // A tensor in two shards.
  write_split(prefix, 2, 1, [](uint16_t s, File& f) {
    if (s == 1) f.tensors[0].name = "t0.0";
  });
  auto dup = read_model(split_path(prefix, 1, 2));
  ASSERT_FALSE(dup.ok());
  EXPECT_NE(dup.status().message().find("tensor 't0.0' is also in"), std::string::npos) << dup.status().message();
  remove_split(prefix, 2);
  // A split key of the wrong type names the key and both types.
  write_split(prefix, 2, 1, [](uint16_t s, File& f) {
    if (s == 1) f.set(kKeySplitCount, Value::u32(2));
  });
  auto typed = read_model(split_path(prefix, 0, 2));
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("key 'split.count': expected u16, found u32"), std::string::npos)
      << typed.status().message();
  remove_split(prefix, 2);
  // split.no out of range, and a file whose name does not match its split keys.
  write_split(prefix, 2, 1, [](uint16_t s, File& f) {
    if (s == 0) f.set(kKeySplitNo, Value::u16(2));
  });
  EXPECT_NE(read_model(split_path(prefix, 0, 2)).status().message().find("split.no 2 of split.count 2"),
            std::string::npos);
  remove_split(prefix, 2);
  const std::string renamed = temp_path("renamed.gguf");
  write_split(prefix, 2, 1);
  std::filesystem::rename(split_path(prefix, 0, 2), renamed);
  auto name = read_model(renamed);
  ASSERT_FALSE(name.ok());
  EXPECT_NE(name.status().message().find("does not end in -00001-of-00002.gguf"), std::string::npos)
      << name.status().message();
  std::filesystem::remove(renamed);
  remove_split(prefix, 2);
}
