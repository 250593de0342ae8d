// Header-only GGUF fixtures of real models (models/tessera/models/fixtures.h, docs/gguf.md "Fixtures"): every fixture
// written with gguf::write_file reads back through gguf::read_file as a header-only file holding the same metadata and
// tensor table; its tensor table is consistent with its metadata; its tensor counts per type, bytes and parameter
// counts are checked against numbers from outside (llama.cpp logs of the real files, model cards, papers; each cited
// where it is used, with a tolerance only where the outside number is rounded); and llama-quantize's type rules are
// checked on their own, fallbacks included.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iterator>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"
#include "tessera/gguf.h"
#include "support/tensor_names.h"

using namespace tessera;
using namespace tessera::gguf;
namespace fx = tessera::models::fixtures;

using tessera::test::blk;

namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

File fixture(const std::string& name) {
  Result<File> f = fx::make_fixture(name);
  EXPECT_TRUE(f.ok()) << f.status().to_string();
  return f.ok() ? std::move(f.value()) : File{};
}

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("tessera_fixture_" + std::to_string(getpid()) + "_" + name))
      .string();
}

// What the tests compare with outside numbers.
struct Summary {
  size_t n_tensors = 0;
  std::map<TensorType, int> types;  // tensors per type
  uint64_t bytes = 0;               // the tensors' bytes (llama.cpp's "model size" / "file size": ml.n_bytes)
  int64_t params = 0;               // elements of every tensor (llama.cpp's "model params": ml.n_elements)
  int64_t embedding = 0;            // token_embd.weight
  int64_t output = 0;               // output.weight
  int64_t experts = 0;              // the routed experts' tensors (*_exps.weight and *_exps.bias)
  double gib() const { return static_cast<double>(bytes) / kGiB; }
  double bpw() const { return static_cast<double>(bytes) * 8.0 / static_cast<double>(params); }
};

Summary summarize(const File& f) {
  Summary s;
  s.n_tensors = f.tensors.size();
  for (const TensorInfo& t : f.tensors) {
    ++s.types[t.type];
    s.bytes += t.size;
    s.params += t.n_elements();
    if (t.name == "token_embd.weight") s.embedding += t.n_elements();
    if (t.name == "output.weight") s.output += t.n_elements();
    if (t.name.find("_exps.") != std::string::npos) s.experts += t.n_elements();
  }
  return s;
}

const TensorInfo& tensor(const File& f, const std::string& name) {
  const TensorInfo* t = f.find_tensor(name);
  EXPECT_NE(t, nullptr) << name;
  static const TensorInfo kNone;
  return t != nullptr ? *t : kNone;
}

// A published number shown with `decimals` digits: the count rounded or cut to those digits shows as `shown` (model
// cards do both; llama.cpp's %.2f prints round, and those are checked with EXPECT_NEAR +-0.005 instead).
::testing::AssertionResult ShownAs(double count, double shown, int decimals) {
  const double scale = std::pow(10.0, decimals);
  const double rounded = std::round(count * scale) / scale;
  const double cut = std::floor(count * scale) / scale;
  const double eps = 0.01 / scale;
  if (std::fabs(rounded - shown) < eps || std::fabs(cut - shown) < eps) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << count << " does not show as " << shown << " with " << decimals
                                       << " decimals (rounded " << rounded << ", cut " << cut << ")";
}

int64_t get_int(const File& f, const std::string& key) {
  Result<int64_t> v = f.get_int(key);
  EXPECT_TRUE(v.ok()) << v.status().to_string();
  return v.ok() ? v.value() : -1;
}

// The layers use_more_bits(i, 32) picks in llama-quant.cpp, listed by hand: i < 4, i >= 28, and (i - 4) % 3 == 2.
const std::set<int> kMoreBits32 = {0, 1, 2, 3, 6, 9, 12, 15, 18, 21, 24, 27, 28, 29, 30, 31};

// ---- every fixture ----

class EachFixture : public ::testing::TestWithParam<std::string> {};

std::string param_name(const ::testing::TestParamInfo<std::string>& info) {
  std::string s = info.param;
  for (char& c : s) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return s;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, EachFixture, ::testing::ValuesIn(fx::fixture_names()), param_name);

// Written to a file and read back: a header-only file with the same metadata (the vocabulary arrays skipped at their
// real length) and the same tensor table.
TEST_P(EachFixture, RoundTripsAsHeaderOnlyFile) {
  const File made = fixture(GetParam());
  const std::string path = temp_path(GetParam() + ".gguf");
  ASSERT_TRUE(write_file(path, made).ok());
  Result<File> read = read_file(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  const File& f = read.value();

  EXPECT_EQ(f.data_state(), DataState::kHeaderOnly);
  EXPECT_FALSE(f.has_data);
  EXPECT_EQ(f.file_size, f.header_size);
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.alignment, 32u);
  EXPECT_EQ(f.data_bytes, made.data_bytes);

  ASSERT_EQ(f.metadata.size(), made.metadata.size());
  for (size_t i = 0; i < f.metadata.size(); ++i) {
    const KeyValue& a = f.metadata[i];
    const KeyValue& b = made.metadata[i];
    EXPECT_EQ(a.key, b.key);
    const Array* arr = a.value.as_array();
    if (arr != nullptr && arr->skipped) {
      ASSERT_NE(b.value.as_array(), nullptr) << a.key;
      EXPECT_EQ(arr->type, b.value.as_array()->type) << a.key;
      EXPECT_EQ(arr->size, b.value.as_array()->size) << a.key;
    } else {
      EXPECT_EQ(a.value, b.value) << a.key;
    }
  }
  ASSERT_EQ(f.tensors.size(), made.tensors.size());
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const TensorInfo& a = f.tensors[i];
    const TensorInfo& b = made.tensors[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.n_dims, b.n_dims) << a.name;
    EXPECT_TRUE(std::equal(a.ne, a.ne + gguf::kMaxDims, b.ne)) << a.name;
    EXPECT_EQ(a.type, b.type) << a.name;
    EXPECT_EQ(a.offset, b.offset) << a.name;
    EXPECT_EQ(a.size, b.size) << a.name;
  }

  // The vocabulary: larger than the reader keeps by default (4096 elements), so skipped, at its real length.
  Result<const Array*> tokens = f.get_array("tokenizer.ggml.tokens", ValueType::kString);
  EXPECT_FALSE(tokens.ok());
  const Value* v = f.find_value("tokenizer.ggml.tokens");
  ASSERT_NE(v, nullptr);
  ASSERT_NE(v->as_array(), nullptr);
  EXPECT_TRUE(v->as_array()->skipped);
  EXPECT_EQ(static_cast<int64_t>(v->as_array()->size), tensor(f, "token_embd.weight").ne[1]);
}

// The tensor table agrees with the metadata, and is laid out and ordered as llama-quantize writes it.
TEST_P(EachFixture, TensorTableMatchesMetadata) {
  const File f = fixture(GetParam());
  Result<std::string> arch_r = f.get_string("general.architecture");
  ASSERT_TRUE(arch_r.ok());
  const std::string arch = arch_r.value();
  const int64_t n_layer = get_int(f, arch + ".block_count");
  const int64_t n_embd = get_int(f, arch + ".embedding_length");
  const int64_t n_head = get_int(f, arch + ".attention.head_count");
  const int64_t n_head_kv = get_int(f, arch + ".attention.head_count_kv");
  const int64_t head_dim =
      f.find(arch + ".attention.key_length") != nullptr ? get_int(f, arch + ".attention.key_length") : n_embd / n_head;
  const int64_t n_vocab = static_cast<int64_t>(f.find_value("tokenizer.ggml.tokens")->as_array()->size);

  // llama-quantize's order (weight_name_comparer), offsets at multiples of 32, one after another.
  for (size_t i = 1; i < f.tensors.size(); ++i) {
    EXPECT_TRUE(fx::weight_name_less(f.tensors[i - 1].name, f.tensors[i].name))
        << f.tensors[i - 1].name << " before " << f.tensors[i].name;
  }
  uint64_t offset = 0;
  for (const TensorInfo& t : f.tensors) {
    EXPECT_EQ(t.offset, offset) << t.name;
    offset = (t.offset + t.size + 31) / 32 * 32;
  }

  const TensorInfo& embd = tensor(f, "token_embd.weight");
  EXPECT_EQ(embd.ne[0], n_embd);
  EXPECT_EQ(embd.ne[1], n_vocab);
  if (const TensorInfo* out = f.find_tensor("output.weight")) {
    EXPECT_EQ(out->ne[0], n_embd);
    EXPECT_EQ(out->ne[1], n_vocab);
  }

  // Every block holds the same tensors with the same shapes; 1-D tensors are f32.
  std::map<std::string, std::vector<int64_t>> layer0;
  std::map<std::string, int> per_name;
  for (const TensorInfo& t : f.tensors) {
    if (t.n_dims == 1) {
      EXPECT_EQ(t.type, TensorType::kF32) << t.name;
    }
    int il = -1;
    char rest[64] = {};
    if (std::sscanf(t.name.c_str(), "blk.%d.%63s", &il, rest) != 2) continue;
    EXPECT_GE(il, 0);
    EXPECT_LT(il, n_layer) << t.name;
    ++per_name[rest];
    std::vector<int64_t> ne(t.ne, t.ne + t.n_dims);
    if (il == 0) layer0[rest] = ne;
    EXPECT_EQ(layer0[rest], ne) << t.name;
  }
  for (const auto& [name, n] : per_name) EXPECT_EQ(n, n_layer) << name;

  // The attention projections have the heads of the metadata.
  if (f.find_tensor("blk.0.attn_qkv.weight") != nullptr) {
    EXPECT_EQ(tensor(f, "blk.0.attn_qkv.weight").ne[1], (n_head + 2 * n_head_kv) * head_dim);
  } else {
    EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], n_head * head_dim);
    EXPECT_EQ(tensor(f, "blk.0.attn_k.weight").ne[1], n_head_kv * head_dim);
    EXPECT_EQ(tensor(f, "blk.0.attn_v.weight").ne[1], n_head_kv * head_dim);
    EXPECT_EQ(tensor(f, "blk.0.attn_output.weight").ne[0], n_head * head_dim);
  }
  // Experts: the expert count of the metadata.
  if (const TensorInfo* exps = f.find_tensor("blk.0.ffn_up_exps.weight")) {
    EXPECT_EQ(exps->ne[2], get_int(f, arch + ".expert_count"));
    EXPECT_EQ(tensor(f, "blk.0.ffn_gate_inp.weight").type, TensorType::kF32);
  }
  const int64_t file_type = get_int(f, "general.file_type");
  EXPECT_TRUE(file_type == 15 || file_type == 38) << file_type;
}

// Tessera builds each base's published default metadata-only (build_from_gguf: the graph checked against the file's
// tensor table), at a 4096-token context.
TEST_P(EachFixture, BuildsMetadataOnly) {
  const File f = fixture(GetParam());
  models::GgufRunShape run;
  run.n_ctx = 4096;
  Result<models::LlamaGraph> g = models::build_from_gguf(gguf::Model::of_file(File(f)), run);
  EXPECT_TRUE(g.ok()) << g.status().to_string();
}

// Tensor counts, bytes and parameters, computed independently from the shapes and ggml's block sizes (a Python sketch
// of the same rules, not this code): a pin against accidental changes. The outside numbers are in the tests below.
TEST(Fixtures, PinnedSummaries) {
  struct Pin {
    const char* name;
    size_t n_tensors;
    std::map<TensorType, int> types;
    uint64_t bytes;
    int64_t params;
  };
  using T = TensorType;
  const Pin pins[] = {
      {"llama-3.1-8b-q4_k_m", 292, {{T::kF32, 66}, {T::kQ4_K, 193}, {T::kQ6_K, 33}}, 4912898304, 8030261312},
      {"llama-3.1-70b-q4_k_m",
       724,
       {{T::kF32, 162}, {T::kQ4_K, 441}, {T::kQ5_K, 40}, {T::kQ6_K, 81}},
       42512531712,
       70553706560},
      {"mistral-7b-q4_k_m", 291, {{T::kF32, 65}, {T::kQ4_K, 193}, {T::kQ6_K, 33}}, 4372054016, 7248023552},
      {"mixtral-8x7b-q4_k_m",
       323,
       {{T::kF32, 97}, {T::kQ8_0, 64}, {T::kQ4_K, 113}, {T::kQ5_K, 32}, {T::kQ6_K, 17}},
       28447727616,
       46702792704},
      {"qwen2.5-7b-q4_k_m", 339, {{T::kF32, 141}, {T::kQ4_K, 169}, {T::kQ6_K, 29}}, 4677120000, 7615616512},
      {"qwen3-8b-q4_k_m", 399, {{T::kF32, 145}, {T::kQ4_K, 217}, {T::kQ6_K, 37}}, 5021827072, 8190735360},
      {"qwen3-30b-a3b-q4_k_m", 579, {{T::kF32, 241}, {T::kQ4_K, 289}, {T::kQ6_K, 49}}, 18550716416, 30532122624},
      {"gemma-3-12b-q4_k_m", 626, {{T::kF32, 289}, {T::kQ4_K, 288}, {T::kQ6_K, 49}}, 7294226304, 11766034176},
      {"gpt-oss-20b-mxfp4", 459, {{T::kF32, 289}, {T::kQ8_0, 98}, {T::kMXFP4, 72}}, 12096558336, 20914757184},
      {"phi-3-mini-q4_k_m",
       195,
       {{T::kF32, 65}, {T::kQ4_K, 81}, {T::kQ5_K, 32}, {T::kQ6_K, 17}},
       2392493568,
       3821079552},
  };
  ASSERT_EQ(std::size(pins), 10u);  // the ten fixtures before the catalogue (issue 50, item 4)
  for (const Pin& p : pins) {
    SCOPED_TRACE(p.name);
    const File f = fixture(p.name);
    Summary s = summarize(f);
    EXPECT_EQ(s.n_tensors, p.n_tensors);
    EXPECT_EQ(s.types, p.types);
    EXPECT_EQ(s.bytes, p.bytes);
    EXPECT_EQ(f.data_bytes, p.bytes);  // every tensor's size is a multiple of 32: no padding between them
    EXPECT_EQ(s.params, p.params);
  }
}

TEST(Fixtures, NamesAndUnknownName) {
  // The ten published defaults of before the catalogue come first, in their order; one name per base.
  const std::vector<std::string> names = fx::fixture_names();
  ASSERT_EQ(names.size(), fx::base_names().size());
  EXPECT_EQ(
      std::vector<std::string>(names.begin(), names.begin() + 10),
      (std::vector<std::string>{"llama-3.1-8b-q4_k_m", "llama-3.1-70b-q4_k_m", "mistral-7b-q4_k_m",
                                "mixtral-8x7b-q4_k_m", "qwen2.5-7b-q4_k_m", "qwen3-8b-q4_k_m", "qwen3-30b-a3b-q4_k_m",
                                "gemma-3-12b-q4_k_m", "gpt-oss-20b-mxfp4", "phi-3-mini-q4_k_m"}));
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(names[i].rfind(fx::base_names()[i] + "-", 0), 0u) << names[i];
  for (const char* bad : {"llama-2-7b", "llama-3.1-8b", "llama-3.1-8b-", "llama-3.1-8b-q2_k_s", "llama-3.1-8b-Q4_K_M",
                          "gpt-oss-20b-q4_k_m", "qwen3-32b-mxfp4", "-q4_k_m"}) {
    EXPECT_FALSE(fx::is_fixture_name(bad)) << bad;
    Result<File> none = fx::make_fixture(bad);
    ASSERT_FALSE(none.ok()) << bad;
    EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
    // The message says how names are made -- the bases and the file types -- rather than listing hundreds of names.
    const std::string& m = none.status().message();
    for (const char* part : {"llama-3.1-8b", "qwen3-235b-a22b", "q4_0", "iq4_xs", "gpt-oss-120b", "mxfp4"}) {
      EXPECT_NE(m.find(part), std::string::npos) << part << " in " << m;
    }
    EXPECT_EQ(m.find("llama-3.1-8b-q4_0"), std::string::npos) << m;
    EXPECT_LT(m.size(), 1000u) << m;
  }
}

// The catalogue: every base in every file type (gpt-oss: mxfp4 only), each name builds, says its file type in
// general.file_type, and is what make_fixture and is_fixture_name accept. Every catalogue name of a base has the same
// tensor table but for the types. All 546 names are built (36 bases: 34 in 16 types, gpt-oss's 2 in mxfp4) without
// their vocabulary arrays, which do not depend on the file type and are most of the building time (make_fixture's
// ~150k token strings a base, far slower under the sanitizers); one name per base, its type rotating through the 16,
// is also built whole, and make_fixture's file is that same file with the three arrays.
TEST(Fixtures, EveryCatalogueNameBuilds) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<std::string> names = fx::catalogue_names();
  const std::vector<std::string> types = fx::catalogue_file_types();
  EXPECT_EQ(types.size(), 16u);
  size_t n_mxfp4 = 0;
  for (const std::string& b : fx::base_names()) n_mxfp4 += b.rfind("gpt-oss-", 0) == 0 ? 1 : 0;
  EXPECT_EQ(names.size(), (fx::base_names().size() - n_mxfp4) * types.size() + n_mxfp4);
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()).size(), names.size());
  for (const std::string& n : fx::fixture_names())
    EXPECT_NE(std::find(names.begin(), names.end(), n), names.end()) << n;
  const std::set<std::string> vocab_arrays = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores",
                                              "tokenizer.ggml.token_type"};
  std::map<std::string, std::vector<std::string>> tables;  // base -> tensor names and shapes
  std::set<std::string> whole_types;                       // the types built whole at least once
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(fx::is_fixture_name(name));
    Result<File> f = fx::make_fixture_without_vocab(name);
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const std::string type = name.substr(name.rfind('-') + 1);
    fx::FileType ft{};
    if (type == "mxfp4") {
      ft = fx::FileType::kMXFP4_MOE;
    } else {
      std::string printed = type;  // "q4_k_m" -> llama.cpp's printed "Q4_K - Medium"
      for (char& c : printed) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      static const std::map<std::string, std::string> kPrinted = {
          {"Q2_K", "Q2_K - Medium"},      {"Q3_K_S", "Q3_K - Small"},  {"Q3_K_M", "Q3_K - Medium"},
          {"Q3_K_L", "Q3_K - Large"},     {"Q4_K_S", "Q4_K - Small"},  {"Q4_K_M", "Q4_K - Medium"},
          {"Q5_K_S", "Q5_K - Small"},     {"Q5_K_M", "Q5_K - Medium"}, {"IQ4_NL", "IQ4_NL - 4.5 bpw"},
          {"IQ4_XS", "IQ4_XS - 4.25 bpw"}};
      if (kPrinted.count(printed)) printed = kPrinted.at(printed);
      ASSERT_TRUE(fx::file_type_from_name(printed, &ft)) << printed;
    }
    EXPECT_EQ(get_int(f.value(), "general.file_type"), static_cast<int64_t>(ft));
    std::vector<std::string> table;
    for (const TensorInfo& t : f->tensors) {
      table.push_back(t.name + ":" + std::to_string(t.ne[0]) + "x" + std::to_string(t.ne[1]) + "x" +
                      std::to_string(t.ne[2]));
    }
    const std::string base = name.substr(0, name.rfind('-'));
    if (tables.count(base) == 0) tables[base] = table;
    EXPECT_EQ(tables[base], table);
    for (const KeyValue& kv : f->metadata) EXPECT_EQ(vocab_arrays.count(kv.key), 0u) << kv.key;

    // The base's name built whole: the base with index i in its type i mod 16 (gpt-oss: mxfp4).
    const std::vector<std::string>& bases = fx::base_names();
    const size_t i = static_cast<size_t>(std::find(bases.begin(), bases.end(), base) - bases.begin());
    ASSERT_LT(i, bases.size());
    if (type != "mxfp4" && type != types[i % types.size()]) continue;
    whole_types.insert(type);
    Result<File> whole = fx::make_fixture(name);
    ASSERT_TRUE(whole.ok()) << whole.status().to_string();
    std::vector<const KeyValue*> rest;  // whole's keys less the arrays, in order
    for (const KeyValue& kv : whole->metadata) {
      if (vocab_arrays.count(kv.key) == 0) rest.push_back(&kv);
    }
    ASSERT_EQ(rest.size(), f->metadata.size());
    for (size_t k = 0; k < rest.size(); ++k) {
      EXPECT_EQ(rest[k]->key, f->metadata[k].key);
      EXPECT_TRUE(rest[k]->value == f->metadata[k].value) << rest[k]->key;
    }
    const Value* tokens = whole->find_value("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->type(), ValueType::kArray);
    ASSERT_NE(tokens->as_array(), nullptr);
    EXPECT_GT(tokens->as_array()->values.size(), 1000u);
    EXPECT_NE(whole->find_value("tokenizer.ggml.token_type"), nullptr);
    ASSERT_EQ(whole->tensors.size(), f->tensors.size());
    for (size_t k = 0; k < f->tensors.size(); ++k) {
      EXPECT_EQ(whole->tensors[k].name, f->tensors[k].name);
      EXPECT_EQ(whole->tensors[k].type, f->tensors[k].type);
      EXPECT_EQ(whole->tensors[k].offset, f->tensors[k].offset);
      EXPECT_EQ(whole->tensors[k].size, f->tensors[k].size);
    }
    EXPECT_EQ(whole->data_bytes, f->data_bytes);
  }
  EXPECT_EQ(tables.size(), fx::base_names().size());
  EXPECT_EQ(whole_types.size(), types.size() + 1) << "every type built whole at least once, mxfp4 too";
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ catalogue ] %zu names made in %.2f s\n", names.size(), s);
}

// ---- outside numbers, one model at a time ----

// bartowski's Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf as llama.cpp loads it (mozilla-ai/llamafile issue #516, 2024-08:
// "wrong number of tensors; expected 292", and its log: type f32 66, q4_K 193, q6_K 33; general.file_type 15,
// llama.vocab_size 128256, tokens arr[str,128256]). "model params = 8.03 B" is llama.cpp's print (%.2f, so +-0.005 B)
// for a Llama 3.1 8B in mozilla-ai/llamafile issue #514.
TEST(FixturesOutside, Llama31_8B) {
  const File f = fixture("llama-3.1-8b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 292u);
  EXPECT_EQ(s.types[TensorType::kF32], 66);
  EXPECT_EQ(s.types[TensorType::kQ4_K], 193);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 33);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 8.03, 0.005);
  EXPECT_EQ(get_int(f, "general.file_type"), 15);
  EXPECT_EQ(get_int(f, "llama.vocab_size"), 128256);
  EXPECT_EQ(get_int(f, "llama.context_length"), 131072);
  EXPECT_EQ(f.get_f32("llama.rope.freq_base").value(), 500000.0f);
  // Llama 3.1's rope scaling as a tensor: rope_freqs.weight f32 [64] (the 292nd tensor, absent from Llama 3's 291).
  EXPECT_EQ(tensor(f, "rope_freqs.weight").ne[0], 64);
  // Q4_K_M: attn_v and ffn_down q6_K on use_more_bits' layers, q4_K elsewhere; output q6_K, token_embd q4_K.
  for (int il = 0; il < 32; ++il) {
    const TensorType more = kMoreBits32.count(il) ? TensorType::kQ6_K : TensorType::kQ4_K;
    EXPECT_EQ(tensor(f, blk(il, "attn_v.weight")).type, more) << il;
    EXPECT_EQ(tensor(f, blk(il, "ffn_down.weight")).type, more) << il;
    EXPECT_EQ(tensor(f, blk(il, "attn_k.weight")).type, TensorType::kQ4_K) << il;
  }
  EXPECT_EQ(tensor(f, "output.weight").type, TensorType::kQ6_K);
  EXPECT_EQ(tensor(f, "token_embd.weight").type, TensorType::kQ4_K);
}

// A Llama 3.x 70B file as llama.cpp loads it (ollama/ollama issue #10553: "Llama 3.1 70B Instruct 2024 12", i.e.
// Llama 3.3 70B, the same architecture and shapes): 724 tensors of which 162 f32 (162 + 321 + 155 + 85 + 1 in its
// Q3_K_M mix), "model params = 70.55 B" (+-0.005 B). No Q4_K_M log of it was found: the q4_K/q5_K/q6_K split is
// llama-quantize's rule for LLM_TYPE_70B (attn_v q5_K where it would be q4_K).
TEST(FixturesOutside, Llama31_70B) {
  const File f = fixture("llama-3.1-70b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 724u);
  EXPECT_EQ(s.types[TensorType::kF32], 162);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 70.55, 0.005);
  int q5 = 0, q6 = 0;
  for (int il = 0; il < 80; ++il) {
    const TensorType t = tensor(f, blk(il, "attn_v.weight")).type;
    EXPECT_TRUE(t == TensorType::kQ5_K || t == TensorType::kQ6_K) << il;
    q5 += t == TensorType::kQ5_K;
    q6 += t == TensorType::kQ6_K;
  }
  EXPECT_EQ(q5, 40);
  EXPECT_EQ(q6, 40);
}

// Mistral 7B Q4_K_M files (291 tensors: e.g. llava-v1.6-mistral-7b.Q4_K_M in gokayfem/ComfyUI_VLM_nodes issue #133;
// per-tensor types of a Mistral-7B-architecture Q4_K_M, yarn-mistral-7b-64k, in second-state/WasmEdge-WASINN-examples
// issue #64: blk.29 attn_v q6_K, ffn_down q6_K, attn_k/attn_output/ffn_gate/ffn_up q4_K; blk.30 attn_v q6_K, attn_q
// and attn_k q4_K). Parameters: Hugging Face's count for mistralai/Mistral-7B-Instruct-v0.3, "7.25B params".
TEST(FixturesOutside, Mistral7B) {
  const File f = fixture("mistral-7b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 291u);
  EXPECT_EQ(tensor(f, "blk.29.attn_v.weight").type, TensorType::kQ6_K);
  EXPECT_EQ(tensor(f, "blk.29.ffn_down.weight").type, TensorType::kQ6_K);
  for (const char* w : {"attn_k.weight", "attn_output.weight", "ffn_gate.weight", "ffn_up.weight"}) {
    EXPECT_EQ(tensor(f, blk(29, w)).type, TensorType::kQ4_K) << w;
  }
  EXPECT_EQ(tensor(f, "blk.30.attn_v.weight").type, TensorType::kQ6_K);
  EXPECT_EQ(tensor(f, "blk.30.attn_q.weight").type, TensorType::kQ4_K);
  EXPECT_EQ(tensor(f, "blk.30.attn_k.weight").type, TensorType::kQ4_K);
  EXPECT_EQ(tensor(f, "token_embd.weight").ne[1], 32768);  // v0.3's vocabulary
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 7.25, 2));
}

// Mistral AI, "Mixtral of experts" (2023-12-11): "46.7B total parameters but only uses 12.9B parameters per token"
// (shortened to 0.1 B). Active: everything but the 6 of 8 experts a token does not use. The Q4_K_M types are the
// 8-expert rules of llama-quant.cpp: attn_k and attn_v q8_0, attn_output q5_K (and llama.cpp issue #4495's log of a
// Mixtral file shows blk.31 attn_k and attn_v q8_0).
TEST(FixturesOutside, Mixtral8x7B) {
  const File f = fixture("mixtral-8x7b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 46.7, 1));
  const double active = static_cast<double>(s.params) - static_cast<double>(s.experts) * 6.0 / 8.0;
  EXPECT_TRUE(ShownAs(active / 1e9, 12.9, 1));
  for (int il = 0; il < 32; ++il) {
    EXPECT_EQ(tensor(f, blk(il, "attn_k.weight")).type, TensorType::kQ8_0) << il;
    EXPECT_EQ(tensor(f, blk(il, "attn_v.weight")).type, TensorType::kQ8_0) << il;
    EXPECT_EQ(tensor(f, blk(il, "attn_output.weight")).type, TensorType::kQ5_K) << il;
    EXPECT_EQ(tensor(f, blk(il, "ffn_down_exps.weight")).type,
              kMoreBits32.count(il) ? TensorType::kQ6_K : TensorType::kQ4_K)
        << il;
    EXPECT_EQ(tensor(f, blk(il, "ffn_gate_exps.weight")).ne[2], 8);
  }
  EXPECT_EQ(get_int(f, "llama.expert_count"), 8);
  EXPECT_EQ(get_int(f, "llama.expert_used_count"), 2);
}

// Qwen/Qwen2.5-7B-Instruct model card: "Number of Parameters: 7.61B", "Number of Paramaters (Non-Embedding): 6.53B".
// The card shortens to 0.01 B, cutting one number and rounding the other (the counts are 7.6156 B and 6.5256 B).
TEST(FixturesOutside, Qwen25_7B) {
  Summary s = summarize(fixture("qwen2.5-7b-q4_k_m"));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 7.61, 2));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding - s.output) / 1e9, 6.53, 2));
  EXPECT_EQ(s.types.at(TensorType::kF32), 28 * 5 + 1);  // 2 norms and 3 q/k/v biases per layer, output_norm
}

// Qwen/Qwen3-8B model card: "Number of Parameters: 8.2B", "Number of Paramaters (Non-Embedding): 6.95B" (the counts
// shortened to the digits shown: 8.19 B and 6.946 B).
TEST(FixturesOutside, Qwen3_8B) {
  const File f = fixture("qwen3-8b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 8.2, 1));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding - s.output) / 1e9, 6.95, 2));
  EXPECT_NE(f.find_tensor("output.weight"), nullptr);  // 8B does not tie its embeddings
}

// Qwen/Qwen3-30B-A3B model card: "Number of Parameters: 30.5B in total and 3.3B activated", "Number of Paramaters
// (Non-Embedding): 29.9B", 128 experts of which 8 activated (shortened to 0.1 B: 30.53, 3.35 -- cut, not rounded -- and
// 29.91 B). Active: everything but the 120 of 128 experts a token does not use.
TEST(FixturesOutside, Qwen3_30B_A3B) {
  const File f = fixture("qwen3-30b-a3b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 30.5, 1));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding - s.output) / 1e9, 29.9, 1));
  const double active = static_cast<double>(s.params) - static_cast<double>(s.experts) * 120.0 / 128.0;
  EXPECT_TRUE(ShownAs(active / 1e9, 3.3, 1));
  EXPECT_EQ(get_int(f, "qwen3moe.expert_count"), 128);
  EXPECT_EQ(get_int(f, "qwen3moe.expert_used_count"), 8);
  EXPECT_EQ(get_int(f, "qwen3moe.expert_feed_forward_length"), 768);
  EXPECT_EQ(tensor(f, "blk.0.ffn_down_exps.weight").ne[0], 768);  // 3 q4_K blocks: no fallback
}

// Gemma 3 Technical Report (arXiv:2503.19786), Table 1: Gemma 3 12B has 10,759M non-embedding parameters (in millions).
// Its embedding count there (1,012M) includes the vision projector, which is not in this file: the text model's
// token_embd alone is 3840 x 262208. Tied embeddings: no output.weight, and token_embd takes the output's type (q6_K).
TEST(FixturesOutside, Gemma3_12B) {
  const File f = fixture("gemma-3-12b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding) / 1e6, 10759, 0));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(tensor(f, "token_embd.weight").type, TensorType::kQ6_K);
  EXPECT_EQ(get_int(f, "gemma3.attention.sliding_window"), 1024);
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 16 * 256);  // head_dim 256, not 3840 / 16
}

// ggml-org/gpt-oss-20b-GGUF's gpt-oss-20b-mxfp4.gguf as llama.cpp loads it (reactive-resume/app issue #2708:
// general.file_type 38, type f32 289, q8_0 98, mxfp4 72, "file size = 11.27 GiB (4.63 BPW)", which is the tensors'
// bytes, +-0.005; ik_llama.cpp issue #822: 459 tensors). OpenAI's gpt-oss model card (2025-08), Table 1, gpt-oss-20b:
// MLP 19.12B, attention 0.64B, embed + unembed 1.16B, active 3.61B (the unembedding counted, the embedding not), total
// 20.91B (each shortened to 0.01 B).
TEST(FixturesOutside, GptOss20B) {
  const File f = fixture("gpt-oss-20b-mxfp4");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 459u);
  EXPECT_EQ(s.types[TensorType::kF32], 289);
  EXPECT_EQ(s.types[TensorType::kQ8_0], 98);
  EXPECT_EQ(s.types[TensorType::kMXFP4], 72);
  EXPECT_NEAR(s.gib(), 11.27, 0.005);
  EXPECT_NEAR(s.bpw(), 4.63, 0.005);
  EXPECT_EQ(get_int(f, "general.file_type"), 38);
  EXPECT_EQ(f.get_string("general.architecture").value(), "gpt-oss");

  int64_t mlp = 0, attention = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.name.find(".ffn_") != std::string::npos) mlp += t.n_elements();
    if (t.name.find(".attn_") != std::string::npos) attention += t.n_elements();
  }
  EXPECT_TRUE(ShownAs(static_cast<double>(mlp) / 1e9, 19.12, 2));
  EXPECT_TRUE(ShownAs(static_cast<double>(attention) / 1e9, 0.64, 2));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.embedding + s.output) / 1e9, 1.16, 2));
  const double active = static_cast<double>(s.params - s.embedding) - static_cast<double>(s.experts) * 28.0 / 32.0;
  EXPECT_TRUE(ShownAs(active / 1e9, 3.61, 2));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 20.91, 2));
}

// A Phi-3-mini-4k Q4_K_M file as llama.cpp loads it (llama.cpp PR #11003's log: arch phi3, 195 tensors, 24 keys,
// eos/pad 32000: type f32 65, q4_K 81, q5_K 32, q6_K 17; the 32 q5_K are attn_qkv). Microsoft's model card for
// Phi-3-mini-4k-instruct: "3.8B parameters" (3.82 B shortened).
TEST(FixturesOutside, Phi3Mini) {
  const File f = fixture("phi-3-mini-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 195u);
  EXPECT_EQ(s.types[TensorType::kF32], 65);
  EXPECT_EQ(s.types[TensorType::kQ4_K], 81);
  EXPECT_EQ(s.types[TensorType::kQ5_K], 32);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 17);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 3.8, 1));
  for (int il = 0; il < 32; ++il) EXPECT_EQ(tensor(f, blk(il, "attn_qkv.weight")).type, TensorType::kQ5_K) << il;
}

// ---- the catalogue's other bases (issue 50, item 4) ----

// A published file's size as Hugging Face shows it: decimal GB with three significant digits (8.99 GB). The file holds
// the tensors (the fixture's bytes), the header and the padding before the data; the header of the real file (its
// token strings, merges and chat template) is at most 20 MB for these vocabularies, so the tensor bytes lie in
// [shown - half a unit - 0.02 GB, shown + half a unit].
::testing::AssertionResult FileShownAsGB(uint64_t tensor_bytes, double shown, double unit) {
  const double gb = static_cast<double>(tensor_bytes) / 1e9;
  if (gb <= shown + unit / 2 && gb >= shown - unit / 2 - 0.02) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << gb << " GB of tensors is not a file shown as " << shown << " GB";
}

// Meta's Llama 3.2 model card (as copied in ZHUI/paddlenlp_model_readme meta-llama/Llama-3.2-1B-Instruct/index.md):
// "1B (1.23B)", "3B (3.21B)", "Shared Embeddings: Yes". Tied embeddings: no output.weight, so token_embd takes the
// output's type (q6_K in Q4_K_M); 16 layers x 9 tensors + token_embd, output_norm, rope_freqs = 147 tensors (28 x 9 + 3
// = 255 for 3B).
TEST(FixturesOutside, Llama32_1B_3B) {
  const File f1 = fixture("llama-3.2-1b-q4_k_m");
  Summary s1 = summarize(f1);
  EXPECT_TRUE(ShownAs(static_cast<double>(s1.params) / 1e9, 1.23, 2));
  EXPECT_EQ(s1.n_tensors, 147u);
  EXPECT_EQ(f1.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(tensor(f1, "token_embd.weight").type, TensorType::kQ6_K);
  EXPECT_EQ(tensor(f1, "rope_freqs.weight").ne[0], 32);
  EXPECT_EQ(get_int(f1, "llama.attention.key_length"), 64);
  Summary s3 = summarize(fixture("llama-3.2-3b-q4_k_m"));
  EXPECT_TRUE(ShownAs(static_cast<double>(s3.params) / 1e9, 3.21, 2));
  EXPECT_EQ(s3.n_tensors, 255u);
  EXPECT_EQ(s3.output, 0);
}

// Llama 3.3 70B as llama.cpp loads it (ollama/ollama issue #10553, "Llama 3.1 70B Instruct 2024 12": 724 tensors,
// "model params = 70.55 B", +-0.005 B): Llama 3.1 70B's tensor table, with attention.key_length written.
TEST(FixturesOutside, Llama33_70B) {
  const File f = fixture("llama-3.3-70b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 724u);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 70.55, 0.005);
  EXPECT_EQ(s.bytes, summarize(fixture("llama-3.1-70b-q4_k_m")).bytes);
  EXPECT_EQ(get_int(f, "llama.attention.key_length"), 128);
}

// The Qwen2.5 Instruct model cards (as copied in ZHUI/paddlenlp_model_readme Qwen/Qwen2.5-*-Instruct/index.md and
// Qwen/Qwen2.5-Coder-32B-Instruct/index.md): "Number of Parameters" and "(Non-Embedding)", shortened to the digits
// shown (rounded or cut). Non-embedding: without token_embd and output (the tied 0.5B-3B have no output.weight). The
// non-embedding figures of the 14B, 32B and 72B cards (13.1 B, 31.0 B, 70.0 B) are 0.1 to 0.2 B below the total less
// token_embd and output (13.21 B, 31.21 B, 70.21 B), which no count of their tensors gives (the 7B card's 6.53 B and
// the small ones' agree with it): those three are not checked (-1). The 32B cards' total, "32.5B", is 0.26 B below the
// count of config.json's shapes (32.76 B: 64 layers of 487.6 M and 2 x 5120 x 152064 embeddings), so the 32B and
// Coder-32B totals are checked against it within 0.3 B only (their shapes are also Qwen2.5-14B's 5120 / 40 / 8 heads).
TEST(FixturesOutside, Qwen25Family) {
  struct Card {
    const char* name;
    double total, non_embedding;
    int decimals;
    bool tied;
  };
  for (const Card& c :
       {Card{"qwen2.5-0.5b-q4_k_m", 0.49, 0.36, 2, true}, Card{"qwen2.5-1.5b-q4_k_m", 1.54, 1.31, 2, true},
        Card{"qwen2.5-3b-q4_k_m", 3.09, 2.77, 2, true}, Card{"qwen2.5-14b-q4_k_m", 14.7, -1, 1, false},
        Card{"qwen2.5-32b-q4_k_m", -1, -1, 1, false}, Card{"qwen2.5-72b-q4_k_m", 72.7, -1, 1, false},
        Card{"qwen2.5-coder-32b-q4_k_m", -1, -1, 1, false}}) {
    SCOPED_TRACE(c.name);
    const File f = fixture(c.name);
    Summary s = summarize(f);
    if (c.total > 0) {
      EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, c.total, c.decimals));
    } else {  // the 32B cards' "32.5B" (below)
      EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 32.5, 0.3);
    }
    if (c.non_embedding > 0) {
      EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding - s.output) / 1e9, c.non_embedding, c.decimals));
    }
    EXPECT_EQ(f.find_tensor("output.weight") == nullptr, c.tied);
  }
}

// bartowski's Qwen2.5-14B-Instruct-GGUF on Hugging Face: Qwen2.5-14B-Instruct-Q4_K_M.gguf "8.99 GB" (the same file in
// lmstudio-community/Qwen2.5-14B-Instruct-GGUF) and Qwen2.5-14B-Instruct-Q4_K_S.gguf "8.57 GB" (FileShownAsGB's
// tolerance). bartowski quantizes with an importance matrix, which changes no type of Q4_K_M or Q4_K_S.
TEST(FixturesOutside, Qwen25_14B_FileSizes) {
  EXPECT_TRUE(FileShownAsGB(summarize(fixture("qwen2.5-14b-q4_k_m")).bytes, 8.99, 0.01));
  EXPECT_TRUE(FileShownAsGB(summarize(fixture("qwen2.5-14b-q4_k_s")).bytes, 8.57, 0.01));
}

// Qwen3-0.6B-Q8_0.gguf as llama.cpp loads it (tests/fidelity/41-qwen3-0.6b-q8_0-cpu-lab-report.log): 310 tensors,
// type f32 113, q8_0 197, "file size = 604.15 MiB (8.50 BPW)" (the tensors' bytes, +-0.005 MiB), "model params =
// 596.05 M" (+-0.005 M). Tied embeddings, and 16 heads of 128 (2048) on a 1024 embedding.
TEST(FixturesOutside, Qwen3_06B_Q8_0) {
  const File f = fixture("qwen3-0.6b-q8_0");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 310u);
  EXPECT_EQ(s.types[TensorType::kF32], 113);
  EXPECT_EQ(s.types[TensorType::kQ8_0], 197);
  EXPECT_NEAR(static_cast<double>(s.bytes) / (1024.0 * 1024.0), 604.15, 0.005);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e6, 596.05, 0.005);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 2048);
}

// Qwen/Qwen3-14B model card (as copied in OpenPipe/Qwen3-14B-Instruct README.md): "Number of Parameters: 14.8B",
// "Number of Paramaters (Non-Embedding): 13.2B", 40 layers, 40 / 8 heads.
TEST(FixturesOutside, Qwen3_14B) {
  Summary s = summarize(fixture("qwen3-14b-q4_k_m"));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 14.8, 1));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding - s.output) / 1e9, 13.2, 1));
}

// unsloth's Qwen3-32B-Q4_0.gguf as llama.cpp loads it
// (tests/fidelity/43-qwen3-32b-q4_0-ik-llama-arm-cpu-old-format.log): 707 tensors, type f32 257, q4_0 441, q4_1 8, q6_K
// 1, "model params = 32.762 B" (+-0.0005 B), "model size = 17.413 GiB" (+-0.0005 GiB). unsloth quantizes with an
// importance matrix: the first eighth of the ffn_down (8 of 64) are then q4_1 instead of q4_0 (llama-quant.cpp, Q4_0
// with imatrix), 2 more bytes per 32 values; the fixture, without one, has them q4_0, so the file's size less those
// bytes is compared.
TEST(FixturesOutside, Qwen3_32B_Q4_0) {
  const File f = fixture("qwen3-32b-q4_0");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 707u);
  EXPECT_EQ(s.types[TensorType::kF32], 257);
  EXPECT_EQ(s.types[TensorType::kQ4_0], 441 + 8);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 1);  // output.weight
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 32.762, 0.0005);
  const double q4_1_extra = 8.0 * (25600.0 * 5120.0 / 32.0) * 2.0;
  EXPECT_NEAR((static_cast<double>(s.bytes) + q4_1_extra) / kGiB, 17.413, 0.0005);
}

// Qwen3-235B-A22B as llama.cpp loads it: ubergarm's Qwen3-235B-A22B-Q8_0.gguf (tests/fidelity/37-...-q8_0-...log: 1131
// tensors, type f32 471, q8_0 660, "file size = 232.77 GiB (8.51 BPW)", "model params = 235.09 B", each +-0.005) and a
// Q6_K file of the same tensors (tests/fidelity/33-qwen3moe-235b-q6k-2gpu-fa-q8kv-ot.log, the 128K variant: f32 471,
// q6_K 660, "file size = 179.75 GiB"). NVIDIA's Megatron Bridge page for Qwen3-MoE
// (docs.nvidia.com/nemo/megatron-bridge, models/qwen/qwen3-moe): "235B total, 22B active" (+-0.5 B); 128 experts, 8
// used.
TEST(FixturesOutside, Qwen3_235B_A22B) {
  const File q8 = fixture("qwen3-235b-a22b-q8_0");
  Summary s = summarize(q8);
  EXPECT_EQ(s.n_tensors, 1131u);
  EXPECT_EQ(s.types[TensorType::kF32], 471);
  EXPECT_EQ(s.types[TensorType::kQ8_0], 660);
  EXPECT_NEAR(s.gib(), 232.77, 0.005);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 235.09, 0.005);
  Summary s6 = summarize(fixture("qwen3-235b-a22b-q6_k"));
  EXPECT_EQ(s6.types[TensorType::kQ6_K], 660);
  EXPECT_NEAR(s6.gib(), 179.75, 0.005);
  const double active = static_cast<double>(s.params) - static_cast<double>(s.experts) * 120.0 / 128.0;
  EXPECT_NEAR(active / 1e9, 22.0, 0.5);
}

// Gemma 3 Technical Report (arXiv:2503.19786), Table 1, Gemma 3 1B: 0 vision, 302M embedding and 698M non-embedding
// parameters (in millions): a text-only model of 262144 tokens x 1152, tied.
TEST(FixturesOutside, Gemma3_1B) {
  const File f = fixture("gemma-3-1b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.embedding) / 1e6, 302, 0));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding) / 1e6, 698, 0));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(get_int(f, "gemma3.attention.sliding_window"), 512);
  EXPECT_EQ(f.find_value("gemma3.rope.scaling.type"), nullptr);
}

// unsloth's gpt-oss-120b GGUF as llama.cpp loads it (tests/fidelity/20-gpt-oss-120b-3gpu-ncpumoe-cmdline.log, a BF16
// file of the same tensors: 687 tensors, type f32 433, mxfp4 108 -- its bf16 146 are q8_0 in MXFP4_MOE -- and "model
// params = 116.83 B", +-0.005 B).
TEST(FixturesOutside, GptOss120B) {
  const File f = fixture("gpt-oss-120b-mxfp4");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 687u);
  EXPECT_EQ(s.types[TensorType::kF32], 433);
  EXPECT_EQ(s.types[TensorType::kMXFP4], 108);
  EXPECT_EQ(s.types[TensorType::kQ8_0], 146);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 116.83, 0.005);
  EXPECT_EQ(get_int(f, "gpt-oss.expert_count"), 128);
}

// ---- more published models ----

// A published file's exact size in bytes (Hugging Face's, as ShelbyJenkins/llm_client
// llm_models/src/llm/local/gguf/generated/preset_models.rs copies them from the Hub for bartowski's files): the
// tensors, the header and the padding before the data. The header of these files (token strings, merges, chat template)
// is at most 20 MB, so the tensor bytes lie in [file - 20 MB, file]. (bartowski quantizes with an importance matrix,
// which changes no type of Q4_K_M, Q5_K_M, Q6_K or Q8_0.)
::testing::AssertionResult FileOfBytes(uint64_t tensor_bytes, uint64_t file_bytes) {
  if (tensor_bytes <= file_bytes && tensor_bytes + 20'000'000 >= file_bytes) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << tensor_bytes << " B of tensors is not a file of " << file_bytes << " B ("
                                       << static_cast<double>(file_bytes) - static_cast<double>(tensor_bytes)
                                       << " B for the header)";
}

struct PublishedFile {
  const char* type;  // the catalogue's file type
  uint64_t bytes;    // the published file's size
};

// Each file within the header's bounds, and, exactly: the files of one base and publisher differ only in
// general.file_type's value and the tensors, so file size less tensor bytes (the header and its padding) is the same
// number of bytes in each.
void ExpectPublishedSizes(const std::string& base, std::initializer_list<PublishedFile> files) {
  std::set<int64_t> headers;
  for (const PublishedFile& p : files) {
    SCOPED_TRACE(base + "-" + p.type);
    const uint64_t bytes = summarize(fixture(base + "-" + p.type)).bytes;
    EXPECT_TRUE(FileOfBytes(bytes, p.bytes));
    headers.insert(static_cast<int64_t>(p.bytes) - static_cast<int64_t>(bytes));
  }
  EXPECT_EQ(headers.size(), 1u) << base << ": the files' headers would differ in size";
}

// Mistral-Nemo-Instruct-2407. Its GGUF metadata in ollama/ollama issue #8277: "general.parameter_count": 12247782400
// (convert_hf_to_gguf.py's count of every tensor's elements; chatllm.cpp prints the same "12247782400 (12.2B)
// parameters" in foldl/chatllm.cpp issue #29), attention.key_length 128 on embedding_length 5120 and head_count 32. A
// Q5_K_M file as llama.cpp loads it (llama.cpp issue #8655, with an importance matrix, which changes no Q5_K_M type):
// type f32 81, q5_K 241, q6_K 41. bartowski's Mistral-Nemo-Instruct-2407-GGUF (ShelbyJenkins/llm_client
// preset_models.rs, MISTRAL_NEMO_INSTRUCT_2407): Q4_K_M 7477208192 B, Q5_K_M 8727635072 B, Q6_K 10056213632 B, Q8_0
// 13022372992 B.
TEST(FixturesOutside, MistralNemo12B) {
  const File f = fixture("mistral-nemo-12b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.params, 12247782400);
  EXPECT_EQ(get_int(f, "llama.attention.key_length"), 128);
  EXPECT_EQ(get_int(f, "llama.embedding_length"), 5120);
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 4096);
  EXPECT_EQ(tensor(f, "blk.0.attn_output.weight").ne[0], 4096);
  EXPECT_EQ(f.get_string("tokenizer.ggml.pre").value(), "tekken");
  Summary q5 = summarize(fixture("mistral-nemo-12b-q5_k_m"));
  EXPECT_EQ(q5.n_tensors, 363u);
  EXPECT_EQ(q5.types[TensorType::kF32], 81);
  EXPECT_EQ(q5.types[TensorType::kQ5_K], 241);
  EXPECT_EQ(q5.types[TensorType::kQ6_K], 41);
  ExpectPublishedSizes("mistral-nemo-12b",
                       {{"q4_k_m", 7477208192}, {"q5_k_m", 8727635072}, {"q6_k", 10056213632}, {"q8_0", 13022372992}});
}

// Mistral-Small-24B-Instruct-2501: bartowski's Mistral-Small-24B-Instruct-2501-GGUF (ShelbyJenkins/llm_client
// preset_models.rs, MISTRAL_SMALL_24B_INSTRUCT_2501): Q4_K_M 14333908672 B, Q5_K_M 16763983552 B, Q6_K 19345938112 B,
// Q8_0 25054779072 B. The model card (as copied in OpenMOSE/RWKV-LM-RLHF main/tokenizer/mistralsmall3/README.md):
// "boasting 24B parameters" (rounded). Nemo's attention: 32 heads of 128 on 5120.
TEST(FixturesOutside, MistralSmall24B) {
  const File f = fixture("mistral-small-24b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 24, 0));
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 4096);
  EXPECT_EQ(s.n_tensors, 363u);  // 40 x 9 + token_embd, output_norm, output
  ExpectPublishedSizes(
      "mistral-small-24b",
      {{"q4_k_m", 14333908672}, {"q5_k_m", 16763983552}, {"q6_k", 19345938112}, {"q8_0", 25054779072}});
}

// Phi-3.5-mini-instruct: bartowski's Phi-3.5-mini-instruct-GGUF (ShelbyJenkins/llm_client preset_models.rs,
// PHI_3_5_MINI_INSTRUCT): Q4_K_M 2393232672 B, Q5_K_M 2815276320 B, Q6_K 3135853344 B, Q8_0 4061222688 B -- each 1312 B
// more than the same type of Phi-3-mini-4k-instruct in the same list (2393231360, 2815275008, 3135852032,
// 4061221376): the two rope factor tensors and the attention factor's key. LongRoPE over 131072 / 4096 positions:
// rope.scaling.attn_factor printed "1.190238" (a Phi-4-mini file of the same 131072 / 4096 in ollama/ollama issue
// #12722, kv 1, directly after general.architecture).
TEST(FixturesOutside, Phi35Mini) {
  const File f = fixture("phi-3.5-mini-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 197u);  // Phi-3-mini's 195 and the two factor tensors
  EXPECT_EQ(tensor(f, "rope_factors_long.weight").ne[0], 48);
  EXPECT_EQ(tensor(f, "rope_factors_short.weight").ne[0], 48);
  EXPECT_EQ(tensor(f, "rope_factors_long.weight").type, TensorType::kF32);
  EXPECT_EQ(f.metadata[1].key, "phi3.rope.scaling.attn_factor");
  EXPECT_NEAR(f.get_f32("phi3.rope.scaling.attn_factor").value(), 1.190238, 5e-7);
  EXPECT_EQ(get_int(f, "phi3.context_length"), 131072);
  EXPECT_EQ(get_int(f, "phi3.rope.scaling.original_context_length"), 4096);
  ExpectPublishedSizes("phi-3.5-mini",
                       {{"q4_k_m", 2393232672}, {"q5_k_m", 2815276320}, {"q6_k", 3135853344}, {"q8_0", 4061222688}});
}

// Phi-4 as llama.cpp loads ollama's phi4 (Q4_K_M; jazzwang/snippet md/genai/llm/phi.md, 2025-01-10): 243 tensors, type
// f32 81, q4_K 101, q5_K 40 (attn_qkv), q6_K 21, "model params = 14.66 B", "model size = 8.43 GiB (4.94 BPW)" (each
// +-0.005). bartowski's phi-4-GGUF (ShelbyJenkins/llm_client preset_models.rs, PHI_4): Q4_K_M 9053114816 B, Q5_K_M
// 10604188096 B, Q6_K 12030251456 B, Q8_0 15580500416 B.
TEST(FixturesOutside, Phi4) {
  const File f = fixture("phi-4-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 243u);
  EXPECT_EQ(s.types[TensorType::kF32], 81);
  EXPECT_EQ(s.types[TensorType::kQ4_K], 101);
  EXPECT_EQ(s.types[TensorType::kQ5_K], 40);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 21);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 14.66, 0.005);
  EXPECT_NEAR(s.gib(), 8.43, 0.005);
  EXPECT_NEAR(s.bpw(), 4.94, 0.005);
  EXPECT_EQ(get_int(f, "phi3.attention.sliding_window"), 0);
  EXPECT_EQ(f.find_value("phi3.rope.scaling.attn_factor"), nullptr);
  ExpectPublishedSizes("phi-4",
                       {{"q4_k_m", 9053114816}, {"q5_k_m", 10604188096}, {"q6_k", 12030251456}, {"q8_0", 15580500416}});
}

// unsloth's Qwen3-1.7B-Q4_K_M.gguf as llama.cpp loads it (carlostarrats/Control-LLM Console.md, an app's log): 310
// tensors (tied embeddings: no output.weight), type f32 113, q4_K 168, q6_K 29, "file size = 1.03 GiB (5.12 BPW)",
// "model params = 1.72 B" (each +-0.005; unsloth's importance matrix changes no Q4_K_M type).
TEST(FixturesOutside, Qwen3_17B) {
  const File f = fixture("qwen3-1.7b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 310u);
  EXPECT_EQ(s.types[TensorType::kF32], 113);
  EXPECT_EQ(s.types[TensorType::kQ4_K], 168);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 29);
  EXPECT_NEAR(s.gib(), 1.03, 0.005);
  EXPECT_NEAR(s.bpw(), 5.12, 0.005);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 1.72, 0.005);
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(tensor(f, "token_embd.weight").type, TensorType::kQ6_K);
}

// The Qwen3-4B model card (as copied, for Qwen3-4B-Base, in Robojiang/qwen_mlsys Qwen3-4B-Base/README.md): "Number of
// Parameters: 4.0B", "Number of Paramaters (Non-Embedding): 3.6B", 36 layers, 32 heads for Q and 8 for KV. Tied
// embeddings, so the embedding is token_embd alone.
TEST(FixturesOutside, Qwen3_4B) {
  const File f = fixture("qwen3-4b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 4.0, 1));
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding) / 1e9, 3.6, 1));
  EXPECT_EQ(f.find_tensor("output.weight"), nullptr);
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 32 * 128);  // 4096 on a 2560 embedding
}

// ggml-org/gemma-3-4b-it-GGUF's Q4_K_M as llama.cpp loads it (tests/fidelity/21-gemma3-4b-L4-metadata.log): type f32
// 205, q4_K 204, q6_K 35, "file size = 2.31 GiB (5.12 BPW)" (+-0.005). Gemma 3 Technical Report (arXiv:2503.19786),
// Table 1: Gemma 3 4B has 3,209M non-embedding parameters.
TEST(FixturesOutside, Gemma3_4B) {
  const File f = fixture("gemma-3-4b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_EQ(s.types[TensorType::kF32], 205);
  EXPECT_EQ(s.types[TensorType::kQ4_K], 204);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 35);
  EXPECT_NEAR(s.gib(), 2.31, 0.005);
  EXPECT_NEAR(s.bpw(), 5.12, 0.005);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding) / 1e6, 3209, 0));
  EXPECT_EQ(get_int(f, "gemma3.attention.sliding_window"), 1024);
}

// unsloth's gemma-3-27b-it-Q4_0.gguf as llama.cpp loads it (ikawrakow/ik_llama.cpp issue #539): 808 tensors, type f32
// 373, q4_0 427, q4_1 7, q6_K 1, "model params = 27.009 B" (+-0.0005 B), "model size = 14.539 GiB" (+-0.0005 GiB).
// With an importance matrix the first eighth of the ffn_down (7 of 62) are q4_1 instead of q4_0 (Qwen3_32B_Q4_0), 2
// more bytes per 32 values; the fixture, without one, has them q4_0. Gemma 3 Technical Report, Table 1: 25,600M
// non-embedding parameters.
TEST(FixturesOutside, Gemma3_27B) {
  const File f = fixture("gemma-3-27b-q4_0");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 808u);
  EXPECT_EQ(s.types[TensorType::kF32], 373);
  EXPECT_EQ(s.types[TensorType::kQ4_0], 427 + 7);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 1);  // token_embd (tied: the output's type)
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 27.009, 0.0005);
  const double q4_1_extra = 7.0 * (21504.0 * 5376.0 / 32.0) * 2.0;
  EXPECT_NEAR((static_cast<double>(s.bytes) + q4_1_extra) / kGiB, 14.539, 0.0005);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params - s.embedding) / 1e6, 25600, 0));
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").ne[1], 32 * 128);
}

// A Llama-3.1-405B Q4_0 file as llama.cpp loads it (ArmDeveloperEcosystem/arm-learning-paths
// content/learning-paths/servers-and-cloud-computing/distributed-inference-with-llama-cpp/how-to-3.md): 1138 tensors,
// type f32 254, q4_0 883, q6_K 1, "file size = 213.13 GiB (4.51 BPW)", "model params = 405.85 B" (each +-0.005).
TEST(FixturesOutside, Llama31_405B) {
  const File f = fixture("llama-3.1-405b-q4_0");
  Summary s = summarize(f);
  EXPECT_EQ(s.n_tensors, 1138u);
  EXPECT_EQ(s.types[TensorType::kF32], 254);
  EXPECT_EQ(s.types[TensorType::kQ4_0], 883);
  EXPECT_EQ(s.types[TensorType::kQ6_K], 1);
  EXPECT_NEAR(s.gib(), 213.13, 0.005);
  EXPECT_NEAR(s.bpw(), 4.51, 0.005);
  EXPECT_NEAR(static_cast<double>(s.params) / 1e9, 405.85, 0.005);
  EXPECT_EQ(tensor(f, "rope_freqs.weight").ne[0], 64);
}

// Mistral AI, "Cheaper, Better, Faster, Stronger" (mistral.ai/news/mixtral-8x22b, 2024-04-17), as quoted in the
// model's descriptions: "uses only 39B active parameters out of 141B" (rounded). Active: everything but the 6 of 8
// experts a token does not use. llama.cpp PR #6587 loads a Mixtral-8x22B-v0.1 Q4_0 file of 563 tensors (56 x 10 + 3).
TEST(FixturesOutside, Mixtral8x22B) {
  const File f = fixture("mixtral-8x22b-q4_k_m");
  Summary s = summarize(f);
  EXPECT_TRUE(ShownAs(static_cast<double>(s.params) / 1e9, 141, 0));
  const double active = static_cast<double>(s.params) - static_cast<double>(s.experts) * 6.0 / 8.0;
  EXPECT_TRUE(ShownAs(active / 1e9, 39, 0));
  EXPECT_EQ(s.n_tensors, 563u);
  EXPECT_EQ(get_int(f, "llama.expert_count"), 8);
  EXPECT_EQ(get_int(f, "llama.expert_used_count"), 2);
  EXPECT_EQ(tensor(f, "token_embd.weight").ne[1], 32768);
}

// ---- llama-quantize's rules on their own ----

TEST(FixturesQuant, WeightOrderIsLlamaCpps) {
  EXPECT_TRUE(fx::weight_name_less("output.weight", "output_norm.weight"));
  EXPECT_TRUE(fx::weight_name_less("token_embd.weight", "blk.0.attn_k.weight"));
  EXPECT_TRUE(fx::weight_name_less("blk.0.ffn_up.weight", "blk.1.attn_k.weight"));
  EXPECT_TRUE(fx::weight_name_less("blk.9.ffn_up.weight", "blk.10.attn_k.weight"));  // by number, not text
  EXPECT_FALSE(fx::weight_name_less("blk.10.attn_k.weight", "blk.9.ffn_up.weight"));
  EXPECT_FALSE(fx::weight_name_less("blk.3.a", "blk.3.a"));
}

// Row lengths that are not a whole number of 256-value blocks (tensor_type_fallback): q4_K -> q5_0, q6_K -> q8_0,
// f16 when not even 32 divides; the output takes q8_0 at once. A q8_0 row that 32 does not divide has no fallback.
TEST(FixturesQuant, Fallbacks) {
  using T = TensorType;
  const fx::QuantModel m{"llama", 1, 4, 4, 0};
  const std::vector<fx::SourceTensor> tensors = {
      {"output.weight", {96, 1000}, T::kF16},           // ne0 % 256: q8_0
      {"token_embd.weight", {96, 1000}, T::kF16},       // q4_K -> q5_0
      {"blk.0.attn_q.weight", {100, 96}, T::kF16},      // q4_K -> q5_0 -> f16 (100 % 32)
      {"blk.0.attn_v.weight", {96, 96}, T::kF16},       // layer 0 of 1: q6_K -> q8_0
      {"blk.0.ffn_down.weight", {288, 96}, T::kF16},    // q6_K -> q8_0
      {"blk.0.ffn_up.weight", {512, 96}, T::kF16},      // q4_K fits
      {"blk.0.attn_norm.weight", {96}, T::kF32},        // not quantized
      {"blk.0.ffn_gate_inp.weight", {96, 8}, T::kF32},  // the router is never quantized
      {"blk.0.attn_q.bias", {96}, T::kF32},             // not a weight
  };
  Result<std::vector<T>> types = fx::quantized_types(m, fx::FileType::kQ4_K_M, tensors);
  ASSERT_TRUE(types.ok()) << types.status().to_string();
  EXPECT_EQ(types.value(),
            (std::vector<T>{T::kQ8_0, T::kQ5_0, T::kF16, T::kQ8_0, T::kQ8_0, T::kQ4_K, T::kF32, T::kF32, T::kF32}));

  Result<std::vector<T>> bad =
      fx::quantized_types(m, fx::FileType::kMXFP4_MOE, {{"blk.0.attn_q.weight", {100, 96}, T::kF16}});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("blk.0.attn_q.weight"), std::string::npos) << bad.status().message();
}

// The "more bits" layers follow the attn_v tensors in llama-quantize's order, not the layer numbers in their names
// (dense models): reordering the input changes which tensors get q6_K, as it does in llama.cpp.
TEST(FixturesQuant, AttnVCountsInProcessingOrder) {
  using T = TensorType;
  const fx::QuantModel m{"llama", 16, 4, 4, 0};  // use_more_bits(i, 16): i < 2, i >= 14, (i - 2) % 3 == 2
  std::vector<fx::SourceTensor> tensors;
  for (int il = 15; il >= 0; --il) tensors.push_back({blk(il, "attn_v.weight"), {256, 256}, T::kF16});
  Result<std::vector<T>> types = fx::quantized_types(m, fx::FileType::kQ4_K_M, tensors);
  ASSERT_TRUE(types.ok());
  const std::set<int> more = {0, 1, 4, 7, 10, 13, 14, 15};  // positions in processing order
  for (int i = 0; i < 16; ++i) EXPECT_EQ(types.value()[i], more.count(i) ? T::kQ6_K : T::kQ4_K) << i;
}

// MXFP4_MOE (gpt-oss): 3-D expert tensors mxfp4, every other quantized tensor q8_0 (output and token_embd too).
TEST(FixturesQuant, Mxfp4Moe) {
  const File f = fixture("gpt-oss-20b-mxfp4");
  EXPECT_EQ(tensor(f, "output.weight").type, TensorType::kQ8_0);
  EXPECT_EQ(tensor(f, "token_embd.weight").type, TensorType::kQ8_0);
  EXPECT_EQ(tensor(f, "blk.0.attn_q.weight").type, TensorType::kQ8_0);
  EXPECT_EQ(tensor(f, "blk.0.ffn_down_exps.weight").type, TensorType::kMXFP4);
  EXPECT_EQ(tensor(f, "blk.0.ffn_gate_inp.weight").type, TensorType::kF32);
  EXPECT_EQ(tensor(f, "blk.0.ffn_gate_exps.bias").type, TensorType::kF32);
  EXPECT_EQ(tensor(f, "blk.0.attn_sinks.weight").ne[0], 64);
}

// The synthetic vocabulary, read in full when asked for (the reader's keep_keys).
TEST(Fixtures, SyntheticVocabularyReadsInFull) {
  const File made = fixture("phi-3-mini-q4_k_m");
  const std::string path = temp_path("phi3-vocab.gguf");
  ASSERT_TRUE(write_file(path, made).ok());
  ReadOptions options;
  options.keep_keys = {"tokenizer.ggml.tokens"};
  Result<File> read = read_file(path, options);
  std::filesystem::remove(path);
  ASSERT_TRUE(read.ok()) << read.status().to_string();
  Result<std::vector<std::string>> tokens = read->get_strings("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status().to_string();
  ASSERT_EQ(tokens->size(), 32064u);
  EXPECT_EQ(tokens->front(), "<tok0>");
  EXPECT_EQ(tokens->back(), "<tok32063>");
  EXPECT_EQ(read->get_string("tokenizer.ggml.model").value(), "llama");
}

// make_fixture_without_vocab: the same tensor table (names, types, shapes, offsets, data bytes) and keys, less the
// three vocabulary arrays; the token ids and the tokenizer's name stay. One BPE and one SentencePiece base.
TEST(Fixtures, WithoutVocabHasTheSameTensorsAndNoArrays) {
  for (const char* name : {"qwen3-8b-q4_k_m", "phi-3-mini-q8_0"}) {
    SCOPED_TRACE(name);
    const File whole = fixture(name);
    Result<File> lean = fx::make_fixture_without_vocab(name);
    ASSERT_TRUE(lean.ok()) << lean.status().to_string();
    ASSERT_EQ(lean->tensors.size(), whole.tensors.size());
    for (size_t i = 0; i < whole.tensors.size(); ++i) {
      EXPECT_EQ(lean->tensors[i].name, whole.tensors[i].name);
      EXPECT_EQ(lean->tensors[i].type, whole.tensors[i].type);
      EXPECT_EQ(lean->tensors[i].offset, whole.tensors[i].offset);
      EXPECT_EQ(lean->tensors[i].size, whole.tensors[i].size);
    }
    EXPECT_EQ(lean->data_bytes, whole.data_bytes);
    for (const char* key : {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
      EXPECT_EQ(lean->find_value(key), nullptr) << key;
    }
    EXPECT_NE(whole.find_value("tokenizer.ggml.tokens"), nullptr);
    EXPECT_EQ(lean->get_int("tokenizer.ggml.eos_token_id").value(),
              whole.get_int("tokenizer.ggml.eos_token_id").value());
    EXPECT_EQ(lean->get_string("general.architecture").value(), whole.get_string("general.architecture").value());
  }
  // the next make_fixture has its vocabulary again
  EXPECT_NE(fixture("qwen3-8b-q4_k_m").find_value("tokenizer.ggml.tokens"), nullptr);
  EXPECT_FALSE(fx::make_fixture_without_vocab("no-such-model").ok());
}

}  // namespace
