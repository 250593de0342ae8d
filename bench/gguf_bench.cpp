// GGUF header reading (issue 30): gguf::read_memory and gguf::read_file of a synthetic 1,000-tensor header-only file
// with a tokenizer of 0, 32,000 and 150,000 tokens (tokenizer.ggml.tokens strings "<tokN>", tokenizer.ggml.scores f32,
// tokenizer.ggml.token_type i32). Targets: <= 20 ms per header read at 150k vocabulary, and memory independent of the
// vocabulary size (the reader skips arrays over ReadOptions::max_array_elements unless a key is in keep_keys).
//
// The heap is counted by a global operator new/delete override in this program. Counters per read:
//   allocs     operator new calls during the read
//   peak_KiB   bytes live at the peak during the read, above what was live before it
//   kept_KiB   bytes still held when the read returns: the returned File (and its Result)
//   file_KiB   the size of the file read
// The *_keep_tokens cases ask for the three tokenizer arrays (keep_keys), to show what skipping saves.
#include <benchmark/benchmark.h>

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <new>
#include <string>
#include <vector>

#include "tessera/gguf.h"

// ---- heap accounting: every operator new / delete of the program goes through here ----

namespace {

// Single-threaded counting (the benchmark runs one thread); the header keeps the requested size before each block.
size_t g_live = 0;
size_t g_peak = 0;
size_t g_allocs = 0;

constexpr size_t kHeader = 16;  // keeps malloc's 16-byte alignment

void* counted_alloc(size_t size, size_t align) {
  if (size == 0) size = 1;
  const size_t header = align > kHeader ? align : kHeader;
  void* raw = align > kHeader ? std::aligned_alloc(align, (header + size + align - 1) / align * align)
                              : std::malloc(header + size);
  if (raw == nullptr) return nullptr;
  auto* p = static_cast<unsigned char*>(raw) + header;
  reinterpret_cast<size_t*>(p)[-1] = size;
  g_live += size;
  if (g_live > g_peak) g_peak = g_live;
  ++g_allocs;
  return p;
}

void counted_free(void* ptr, size_t align) {
  if (ptr == nullptr) return;
  auto* p = static_cast<unsigned char*>(ptr);
  g_live -= reinterpret_cast<size_t*>(p)[-1];
  std::free(p - (align > kHeader ? align : kHeader));
}

void* counted_new(size_t size, size_t align) {
  void* p = counted_alloc(size, align);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

}  // namespace

void* operator new(size_t size) { return counted_new(size, 0); }
void* operator new[](size_t size) { return counted_new(size, 0); }
void* operator new(size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, 0); }
void* operator new[](size_t size, const std::nothrow_t&) noexcept { return counted_alloc(size, 0); }
void* operator new(size_t size, std::align_val_t a) { return counted_new(size, static_cast<size_t>(a)); }
void* operator new[](size_t size, std::align_val_t a) { return counted_new(size, static_cast<size_t>(a)); }
void* operator new(size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(size, static_cast<size_t>(a));
}
void* operator new[](size_t size, std::align_val_t a, const std::nothrow_t&) noexcept {
  return counted_alloc(size, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { counted_free(p, 0); }
void operator delete[](void* p) noexcept { counted_free(p, 0); }
void operator delete(void* p, size_t) noexcept { counted_free(p, 0); }
void operator delete[](void* p, size_t) noexcept { counted_free(p, 0); }
void operator delete(void* p, const std::nothrow_t&) noexcept { counted_free(p, 0); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { counted_free(p, 0); }
void operator delete(void* p, std::align_val_t a) noexcept { counted_free(p, static_cast<size_t>(a)); }
void operator delete[](void* p, std::align_val_t a) noexcept { counted_free(p, static_cast<size_t>(a)); }
void operator delete(void* p, size_t, std::align_val_t a) noexcept { counted_free(p, static_cast<size_t>(a)); }
void operator delete[](void* p, size_t, std::align_val_t a) noexcept { counted_free(p, static_cast<size_t>(a)); }
void operator delete(void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
  counted_free(p, static_cast<size_t>(a));
}
void operator delete[](void* p, std::align_val_t a, const std::nothrow_t&) noexcept {
  counted_free(p, static_cast<size_t>(a));
}

namespace {

using namespace tessera;

constexpr double kKiB = 1024.0;

// A llama-like header: general.* and llama.* keys, the tokenizer arrays, and 1,000 tensors (token_embd, output_norm,
// output, then 111 blocks of 9 tensors: 3 + 999 = 1,002, cut at 1,000), q4_k / q6_k / f32 with 70B-like shapes.
gguf::File make_file(int64_t vocab) {
  gguf::File f;
  f.set("general.architecture", gguf::Value::string("llama"));
  f.set("general.name", gguf::Value::string("bench"));
  f.set("llama.block_count", gguf::Value::u32(111));
  f.set("llama.context_length", gguf::Value::u32(131072));
  f.set("llama.embedding_length", gguf::Value::u32(8192));
  f.set("llama.feed_forward_length", gguf::Value::u32(28672));
  f.set("llama.attention.head_count", gguf::Value::u32(64));
  f.set("llama.attention.head_count_kv", gguf::Value::u32(8));
  f.set("llama.rope.freq_base", gguf::Value::f32(500000.0f));
  f.set("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  f.set("general.file_type", gguf::Value::u32(15));
  f.set("tokenizer.ggml.model", gguf::Value::string("gpt2"));
  std::vector<std::string> tokens;
  std::vector<float> scores;
  std::vector<int32_t> types;
  tokens.reserve(static_cast<size_t>(vocab));
  for (int64_t i = 0; i < vocab; ++i) {
    tokens.push_back("<tok" + std::to_string(i) + ">");
    scores.push_back(-static_cast<float>(i));
    types.push_back(1);
  }
  f.set("tokenizer.ggml.tokens", gguf::Value::strings(tokens));
  f.set("tokenizer.ggml.scores", gguf::Value::f32s(scores));
  f.set("tokenizer.ggml.token_type", gguf::Value::i32s(types));
  f.set("tokenizer.ggml.bos_token_id", gguf::Value::u32(1));
  f.set("tokenizer.ggml.eos_token_id", gguf::Value::u32(2));

  const int64_t n_vocab = vocab > 0 ? vocab : 128256;
  const int64_t d = 8192, kv = 1024, ff = 28672;
  f.add_tensor("token_embd.weight", gguf::TensorType::kQ4_K, {d, n_vocab});
  f.add_tensor("output_norm.weight", gguf::TensorType::kF32, {d});
  f.add_tensor("output.weight", gguf::TensorType::kQ6_K, {d, n_vocab});
  for (int layer = 0; f.tensors.size() < 1000; ++layer) {
    const std::string p = "blk." + std::to_string(layer) + ".";
    const struct {
      const char* name;
      gguf::TensorType type;
      std::vector<int64_t> ne;
    } rows[] = {
        {"attn_norm.weight", gguf::TensorType::kF32, {d}},       {"attn_q.weight", gguf::TensorType::kQ4_K, {d, d}},
        {"attn_k.weight", gguf::TensorType::kQ4_K, {d, kv}},     {"attn_v.weight", gguf::TensorType::kQ6_K, {d, kv}},
        {"attn_output.weight", gguf::TensorType::kQ4_K, {d, d}}, {"ffn_norm.weight", gguf::TensorType::kF32, {d}},
        {"ffn_gate.weight", gguf::TensorType::kQ4_K, {d, ff}},   {"ffn_up.weight", gguf::TensorType::kQ4_K, {d, ff}},
        {"ffn_down.weight", gguf::TensorType::kQ6_K, {ff, d}},
    };
    for (const auto& r : rows) {
      if (f.tensors.size() >= 1000) break;
      f.add_tensor(p + r.name, r.type, r.ne);
    }
  }
  if (auto s = f.layout(); !s.ok()) {
    std::fprintf(stderr, "layout: %s\n", s.to_string().c_str());
    std::abort();
  }
  return f;
}

// One header-only file per vocabulary size: its bytes (serialize) and the same bytes on disk (write_file).
struct Fixture {
  std::vector<uint8_t> bytes;
  std::string path;
};

const Fixture& fixture(int64_t vocab) {
  static std::map<int64_t, Fixture> cache;
  auto it = cache.find(vocab);
  if (it != cache.end()) return it->second;
  gguf::File f = make_file(vocab);
  auto bytes = gguf::serialize(f);
  if (!bytes.ok()) {
    std::fprintf(stderr, "serialize: %s\n", bytes.status().to_string().c_str());
    std::abort();
  }
  Fixture fx;
  fx.bytes = std::move(bytes).value();
  fx.path = (std::filesystem::temp_directory_path() /
             ("tessera_bench_gguf_" + std::to_string(getpid()) + "_" + std::to_string(vocab) + ".gguf"))
                .string();
  if (auto s = gguf::write_file(fx.path, f); !s.ok()) {
    std::fprintf(stderr, "write_file: %s\n", s.to_string().c_str());
    std::abort();
  }
  return cache.emplace(vocab, std::move(fx)).first->second;
}

void remove_fixtures() {
  for (int64_t v : {0, 32000, 150000}) {
    std::error_code ec;
    std::filesystem::remove(std::filesystem::temp_directory_path() /
                                ("tessera_bench_gguf_" + std::to_string(getpid()) + "_" + std::to_string(v) + ".gguf"),
                            ec);
  }
}

enum class Source { kMemory, kFile };

void BM_ReadHeader(benchmark::State& state, Source source, bool keep_tokens) {
  const int64_t vocab = state.range(0);
  const Fixture& fx = fixture(vocab);
  gguf::ReadOptions options;
  if (keep_tokens) options.keep_keys = {"tokenizer.ggml.tokens", "tokenizer.ggml.scores", "tokenizer.ggml.token_type"};

  size_t peak = 0, kept = 0, allocs = 0;
  for (auto _ : state) {
    const size_t live0 = g_live, allocs0 = g_allocs;
    g_peak = g_live;
    {
      auto file = source == Source::kMemory ? gguf::read_memory(fx.bytes, "bench.gguf", options)
                                            : gguf::read_file(fx.path, options);
      if (!file.ok() || file.value().tensors.size() != 1000) {
        state.SkipWithError(file.ok() ? "wrong tensor count" : file.status().to_string().c_str());
        break;
      }
      kept = g_live - live0;
      peak = g_peak - live0;
      allocs = g_allocs - allocs0;
      benchmark::DoNotOptimize(file);
    }
  }
  state.counters["allocs"] = static_cast<double>(allocs);
  state.counters["peak_KiB"] = static_cast<double>(peak) / kKiB;
  state.counters["kept_KiB"] = static_cast<double>(kept) / kKiB;
  state.counters["file_KiB"] = static_cast<double>(fx.bytes.size()) / kKiB;
}

}  // namespace

int main(int argc, char** argv) {
  struct Case {
    const char* name;
    Source source;
    bool keep;
  };
  for (const Case c : {Case{"gguf/read_memory", Source::kMemory, false}, Case{"gguf/read_file", Source::kFile, false},
                       Case{"gguf/read_memory_keep_tokens", Source::kMemory, true}}) {
    benchmark::RegisterBenchmark(c.name, BM_ReadHeader, c.source, c.keep)
        ->ArgName("vocab")
        ->Arg(0)
        ->Arg(32000)
        ->Arg(150000)
        ->Unit(benchmark::kMillisecond);
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  remove_fixtures();
  return 0;
}
