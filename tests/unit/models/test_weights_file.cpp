// The weights of a complete GGUF file (models/weights_file.cpp): a model built from a complete file computes with the
// file's weights; a header-only file's are drawn. The file is written from a model filled with one seed and read back
// into a model filled with another, so equal bytes can only come from the file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/backend.h"
#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/graph_copy.h"
#include "tessera/models/from_gguf.h"
#include "tessera/planner.h"
#include "support/temp_dir.h"

using namespace tessera;
using namespace tessera::models;
using ::testing::HasSubstr;

namespace {

// A tiny preset with a file's mix of types: q4_0 matrices, a q8_0 embedding and output, f16 attn_v, f32 norms.
// "tiny-gpt-oss-yarn": tiny-gpt-oss with gpt-oss-20b's YaRN (factor 32 over 4096 positions) and non-default
// ext_factor, attn_factor and betas, so that every YaRN key has to come back from the file for the same logits.
// "tiny-phi3-longrope": tiny-phi3 with Phi-3.5-mini's LongRoPE attention factor (rope.scaling.attn_factor, 1.19).
LlamaConfig tiny_mixed(const std::string& name) {
  const bool yarn = name == "tiny-gpt-oss-yarn", longrope = name == "tiny-phi3-longrope";
  Result<LlamaConfig> c = preset(yarn ? "tiny-gpt-oss" : longrope ? "tiny-phi3" : name);
  if (yarn) {
    c->rope_scale = c->rope_scale_swa = 1.0f / 32.0f;
    c->rope_yarn = {
        .n_ctx_orig = 4096, .ext_factor = 0.75f, .attn_factor = 0.9f, .beta_fast = 24.0f, .beta_slow = 2.0f};
  }
  if (longrope) c->rope_yarn.attn_factor = 1.19f;
  EXPECT_TRUE(c.ok());
  c->weight_types = {{"token_embd.weight", Type::kQ8_0}, {"output.weight", Type::kQ8_0}};
  for (int il = 0; il < c->n_layer; ++il) {
    c->weight_types["blk." + std::to_string(il) + ".attn_v.weight"] = Type::kF16;
    c->weight_types["blk." + std::to_string(il) + ".attn_qkv.weight"] = Type::kF16;  // (tiny-phi3)
  }
  return *c;
}

// A model with real memory on the CPU (weights, cache, graph), filled by fill_random(seed), with seeded inputs.
struct CpuModel {
  LlamaGraph m;
  std::unique_ptr<Buffer> weights, cache;
  std::unique_ptr<GraphPlanner> planner;
};

void allocate(CpuModel& cm, LlamaGraph m, uint64_t seed) {
  cm.m = std::move(m);
  auto wb = alloc_ctx_tensors(*cm.m.weights_ctx, *cpu::buffer_type());
  ASSERT_TRUE(wb.ok()) << wb.status().to_string();
  cm.weights = std::move(wb).value();
  auto cb = alloc_ctx_tensors(*cm.m.cache_ctx, *cpu::buffer_type());
  ASSERT_TRUE(cb.ok()) << cb.status().to_string();
  cm.cache = std::move(cb).value();
  Status s = fill_random(cm.m, seed);
  ASSERT_TRUE(s.ok()) << s.to_string();
  cm.planner = std::make_unique<GraphPlanner>(cpu::buffer_type());
  ASSERT_TRUE(cm.planner->alloc_graph(*cm.m.graph).ok());
  ASSERT_TRUE(set_inputs(cm.m, default_inputs(cm.m.config, seed)).ok());
}

std::vector<float> logits_of(CpuModel& cm) {
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  EXPECT_EQ(backend->graph_compute(*cm.m.graph), ComputeStatus::kSuccess) << backend->last_error();
  auto logits = tensor_to_f32(*cm.m.logits);
  EXPECT_TRUE(logits.ok());
  return logits.ok() ? logits.value() : std::vector<float>{};
}

std::vector<uint8_t> bytes_of(const Tensor& t) {
  std::vector<uint8_t> b(nbytes(t));
  EXPECT_TRUE(tensor_get(t, b.data(), 0, b.size()).ok());
  return b;
}

std::string write_temp(const std::string& name, const std::vector<uint8_t>& bytes) {
  const std::string path = (std::filesystem::path(tessera::test::temp_dir()) / name).string();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  EXPECT_TRUE(out.good()) << path;
  return path;
}

// The run shape of the preset (so the graph read from the file is the preset's graph).
GgufRunShape run_of(const LlamaConfig& c) {
  return {.n_ctx = c.n_ctx, .n_tokens = c.n_tokens, .n_kv = c.n_kv, .n_outputs = c.n_outputs};
}

// The tiny preset with a file's types, filled with seed 11 on the CPU, and its complete file.
struct Written {
  CpuModel model;
  std::vector<uint8_t> bytes;
};
void write_tiny(Written& w) {
  auto built = build_llama(tiny_mixed("tiny"));
  ASSERT_TRUE(built.ok());
  allocate(w.model, std::move(built).value(), 11);
  auto bytes = complete_gguf(w.model.m);
  ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
  w.bytes = std::move(bytes).value();
}

}  // namespace

TEST(WeightsFile, ACompleteFileComputesWithItsOwnWeights) {
  for (const char* name : {"tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3",
                           "tiny-phi3-longrope", "tiny-gpt-oss-yarn"}) {
    SCOPED_TRACE(name);
    const LlamaConfig c = tiny_mixed(name);
    auto built = build_llama(c);
    ASSERT_TRUE(built.ok()) << built.status().to_string();
    CpuModel original;
    allocate(original, std::move(built).value(), 11);
    const std::vector<float> expected = logits_of(original);
    auto bytes = complete_gguf(original.m);
    ASSERT_TRUE(bytes.ok()) << bytes.status().to_string();
    const std::string path = write_temp(std::string("complete-") + name + ".gguf", bytes.value());

    auto model = gguf::read_model(path);
    ASSERT_TRUE(model.ok()) << model.status().to_string();
    ASSERT_EQ(model->metadata().data_state(), gguf::DataState::kComplete);
    auto from_file = build_from_gguf(model.value(), run_of(c));
    ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
    ASSERT_NE(from_file->config.weights_file, nullptr);

    // Filled with another seed: the weights are still the file's, byte for byte.
    CpuModel other_seed;
    allocate(other_seed, std::move(from_file).value(), 12);
    ASSERT_EQ(other_seed.m.weights.size(), original.m.weights.size());
    for (size_t i = 0; i < original.m.weights.size(); ++i) {
      EXPECT_EQ(bytes_of(*other_seed.m.weights[i]), bytes_of(*original.m.weights[i])) << original.m.weights[i]->name;
    }
    // With the same seed (the same cache and inputs): the same logits, bit for bit.
    auto again = build_from_gguf(model.value(), run_of(c));
    ASSERT_TRUE(again.ok());
    CpuModel same_seed;
    allocate(same_seed, std::move(again).value(), 11);
    EXPECT_EQ(logits_of(same_seed), expected);
  }
}

TEST(WeightsFile, AHeaderOnlyFileHasNoWeightsAndDrawsThem) {
  Written original;
  ASSERT_NO_FATAL_FAILURE(write_tiny(original));
  const LlamaConfig& c = original.model.m.config;
  auto file = gguf::read_memory(original.bytes, "complete.gguf");
  ASSERT_TRUE(file.ok());
  auto header = gguf::serialize(file.value());  // the same file without its data section
  ASSERT_TRUE(header.ok());
  auto header_only = gguf::read_memory(header.value(), "header-only.gguf");
  ASSERT_TRUE(header_only.ok());
  ASSERT_EQ(header_only->data_state(), gguf::DataState::kHeaderOnly);
  auto from_file = build_from_gguf(gguf::Model::of_file(std::move(header_only).value()), run_of(c));
  ASSERT_TRUE(from_file.ok()) << from_file.status().to_string();
  EXPECT_EQ(from_file->config.weights_file, nullptr);
  CpuModel drawn;
  allocate(drawn, std::move(from_file).value(), 12);  // another seed: other weights than the file's
  EXPECT_NE(bytes_of(*drawn.m.weights[1]), bytes_of(*original.model.m.weights[1]));
}

TEST(WeightsFile, AFileThatChangedSinceItWasReadIsAnErrorNamingTheTensor) {
  Written original;
  ASSERT_NO_FATAL_FAILURE(write_tiny(original));
  const LlamaConfig& c = original.model.m.config;
  const std::string path = write_temp("changes.gguf", original.bytes);
  auto model = gguf::read_model(path);
  ASSERT_TRUE(model.ok());
  auto from_file = build_from_gguf(model.value(), run_of(c));
  ASSERT_TRUE(from_file.ok());
  // Cut the file after the first tensor's data: every later tensor is gone.
  std::filesystem::resize_file(path, model->metadata().data_offset + model->metadata().tensors[1].offset);
  LlamaGraph m = std::move(from_file).value();
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());
  ASSERT_TRUE(wb.ok() && cb.ok());
  Status s = fill_random(m, 11);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr(path));
  EXPECT_THAT(s.message(), HasSubstr(model->metadata().tensors[1].name));
}

TEST(WeightsFile, ReadingNeedsAFileAndAllocatedWeights) {
  auto built = build_llama(tiny_mixed("tiny"));
  ASSERT_TRUE(built.ok());
  Status s = read_file_weights(built.value());
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("no complete file"));
  auto bytes = complete_gguf(built.value());  // nothing allocated
  ASSERT_FALSE(bytes.ok());
  EXPECT_THAT(bytes.status().message(), HasSubstr("token_embd.weight is not allocated"));
}
