// tessera inspect (harness/inspect/inspect.cpp): the report of a small model written here, whose sizes are worked out
// by hand in each test, and the errors of inspect_file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/gguf.h"
#include "tessera/harness/inspect/inspect.h"
#include "support/temp_dir.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

// Two layers of one q4_0 matrix [64, 32] (64 / 32 x 18 x 32 = 1152 B) and one f32 norm [64] (256 B), and a q8_0
// token embedding [64, 100] (64 / 32 x 34 x 100 = 6800 B) outside the layers: 6800 + 2 x (1152 + 256) = 9616 B of
// tensors in all.
gguf::File small_model() {
  gguf::File f;
  f.source = "small.gguf";
  f.set("general.architecture", gguf::Value::string("llama"));
  f.set("llama.block_count", gguf::Value::u32(2));
  std::vector<std::string> tokens;
  for (int i = 0; i < 5000; ++i) tokens.push_back("t" + std::to_string(i));
  f.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  f.add_tensor("token_embd.weight", gguf::TensorType::kQ8_0, {64, 100});
  for (int il = 0; il < 2; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    f.add_tensor(b + "attn_norm.weight", gguf::TensorType::kF32, {64});
    f.add_tensor(b + "attn_q.weight", gguf::TensorType::kQ4_0, {64, 32});
  }
  EXPECT_TRUE(f.layout().ok());
  return f;
}

gguf::Model read_back(const gguf::File& f, const gguf::ReadOptions& options = {}) {
  auto bytes = gguf::serialize(f);
  EXPECT_TRUE(bytes.ok()) << bytes.status().message();
  auto read = gguf::read_memory(bytes.value(), f.source, options);
  EXPECT_TRUE(read.ok()) << read.status().message();
  return gguf::Model::of_file(std::move(read).value());
}

TEST(Inspect, TextGroupsTensorsByLayerAndTotalsThemPerType) {
  const std::string r = inspect_report(read_back(small_model()), {});
  EXPECT_THAT(r,
              HasSubstr("small.gguf: GGUF v3, header-only, 1 shard, 5 tensors, 9.39 KiB of tensor data, 3 metadata"));
  EXPECT_THAT(r, HasSubstr("[string x 5000, skipped]"));  // over the reader's 4096 elements
  EXPECT_THAT(r, HasSubstr("(outside the layers): 1 tensors, 6.64 KiB"));
  EXPECT_THAT(r, HasSubstr("layer 0: 2 tensors, 1.38 KiB"));  // 1152 + 256 = 1408 B
  EXPECT_THAT(r, HasSubstr("layer 1: 2 tensors, 1.38 KiB"));
  EXPECT_THAT(r, HasSubstr("[64, 100]"));
  // q4_0: 2 tensors, 2 x 2048 elements, 2304 B, 4.5 bits per weight; all: 9616 B x 8 / 10624 elements = 7.2410
  EXPECT_THAT(r, ::testing::ContainsRegex("q4_0 +2 +4096 +2304 +4\\.5000"));
  EXPECT_THAT(r, ::testing::ContainsRegex("q8_0 +1 +6400 +6800 +8\\.5000"));
  EXPECT_THAT(r, ::testing::ContainsRegex("all +5 +10624 +9616 +7\\.2410"));
}

TEST(Inspect, JsonHasEveryTensorAndTheTotals) {
  gguf::ReadOptions keep;
  keep.keep_keys = {"tokenizer.ggml.tokens"};
  const std::string r =
      inspect_report(read_back(small_model(), keep), {.json = true, .arrays = {"tokenizer.ggml.tokens"}});
  const auto j = nlohmann::json::parse(r);
  EXPECT_EQ(j["format"], "tessera-inspect");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["data"], "header-only");
  ASSERT_EQ(j["tensors"].size(), 5u);
  EXPECT_EQ(j["tensors"][0]["name"], "token_embd.weight");
  EXPECT_EQ(j["tensors"][0]["layer"], -1);
  EXPECT_EQ(j["tensors"][0]["bytes"], 6800);
  EXPECT_EQ(j["tensors"][4]["layer"], 1);
  EXPECT_EQ(j["total"]["bytes"], 9616);
  EXPECT_EQ(j["total"]["tensors"], 5);
  const auto& tokens = j["metadata"][2];
  EXPECT_EQ(tokens["key"], "tokenizer.ggml.tokens");
  EXPECT_EQ(tokens["value"]["length"], 5000);
  EXPECT_EQ(tokens["value"]["values"].size(), 5000u);  // asked for in full
  EXPECT_EQ(tokens["value"]["values"][4999], "t4999");
}

TEST(Inspect, FileErrorsNameTheFileOrTheKey) {
  const std::string path = tessera::test::temp_dir() + "tessera-inspect-test.gguf";
  ASSERT_TRUE(gguf::write_file(path, small_model()).ok());
  auto ok = inspect_file(path, {.arrays = {"tokenizer.ggml.tokens"}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_THAT(ok.value(), HasSubstr("'t4999'"));
  auto missing_key = inspect_file(path, {.arrays = {"no.such.key"}});
  ASSERT_FALSE(missing_key.ok());
  EXPECT_THAT(missing_key.status().message(), HasSubstr("--array no.such.key: no such key"));
  auto not_array = inspect_file(path, {.arrays = {"llama.block_count"}});
  ASSERT_FALSE(not_array.ok());
  EXPECT_THAT(not_array.status().message(), HasSubstr("--array llama.block_count: a u32, not an array"));
  std::remove(path.c_str());
  auto missing = inspect_file(path, {});
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr(path));
}

}  // namespace
