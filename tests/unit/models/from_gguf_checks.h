// Checks shared by the from_gguf tests of each architecture.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <utility>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "tessera/models/llama.h"

namespace tessera::models::testing {

// A real model's header-only fixture (models/fixtures.h) without its vocabulary arrays, which the model builder never
// reads (from_gguf.cpp reads no tokenizer key) and which are most of the time a fixture takes to build and copy (the
// tests copy a file for each key they take out; under the coverage build's sanitizers, 23 s for one gpt-oss test); an
// empty file, with a test failure, for an unknown name.
inline gguf::File fixture(const std::string& name) {
  auto f = fixtures::make_fixture_without_vocab(name);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? std::move(f).value() : gguf::File{};
}

// The model of a file (as one shard), built and checked against the file.
inline Result<LlamaGraph> build(const gguf::File& f, GgufRunShape run = {}) {
  return build_from_gguf(gguf::Model::of_file(gguf::File(f)), run);
}

// The file without a tensor (laid out again) / without a metadata key.
inline gguf::File without_tensor(gguf::File f, const std::string& name) {
  std::erase_if(f.tensors, [&](const gguf::TensorInfo& t) { return t.name == name; });
  EXPECT_TRUE(f.layout().ok());
  return f;
}
inline gguf::File without_key(gguf::File f, const std::string& key) {
  std::erase_if(f.metadata, [&](const gguf::KeyValue& kv) { return kv.key == key; });
  return f;
}

// The graph's nodes of an op.
inline int count_ops(const LlamaGraph& m, Op op) {
  int n = 0;
  for (const Tensor* t : m.graph->nodes()) n += t->op == op ? 1 : 0;
  return n;
}

// Every tensor of the file is a weight of the graph exactly once, with the file's shape and type, and as many bytes as
// the file's tensor data; and the other way round. Each weight is read by exactly one node of the graph (a tied
// token_embd.weight by two: the lookup and the output head).
inline void expect_uses_the_file_exactly(const LlamaGraph& m, const gguf::File& f) {
  std::map<const Tensor*, int> reads;
  for (const Tensor* t : m.graph->nodes()) {
    for (const Tensor* s : t->src) {
      if (s != nullptr) ++reads[s];
    }
  }
  std::map<std::string, int> uses;
  uint64_t graph_bytes = 0;
  for (const Tensor* w : m.weights) {
    ++uses[w->name];
    EXPECT_EQ(reads[w], w == m.tok_embd && m.config.tied_output ? 2 : 1) << w->name << ": read by the graph";
    const gguf::TensorInfo* t = f.find_tensor(w->name);
    ASSERT_NE(t, nullptr) << w->name << " is not in the file";
    EXPECT_STREQ(type_name(w->type), gguf::type_name(t->type)) << w->name;
    for (int d = 0; d < 4; ++d) EXPECT_EQ(w->ne[d], t->ne[d]) << w->name << " dim " << d;
    EXPECT_EQ(nbytes(*w), t->size) << w->name;
    graph_bytes += nbytes(*w);
  }
  uint64_t file_bytes = 0;
  for (const gguf::TensorInfo& t : f.tensors) {
    EXPECT_EQ(uses[t.name], 1) << t.name;
    file_bytes += t.size;
  }
  EXPECT_EQ(m.weights.size(), f.tensors.size());
  EXPECT_EQ(graph_bytes, file_bytes);
}

}  // namespace tessera::models::testing
