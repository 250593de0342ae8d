// Shared pieces of the fuzz targets (docs/fuzzing.md): structure-aware decoding of the fuzzer's bytes and the check
// macro. Header-only and compiler-neutral (no libFuzzer header), so that the same targets build as libFuzzer binaries
// with clang and as replay drivers (fuzz/replay_main.cpp) with any compiler.
//
// Decoding (ByteReader): fields are taken from the front of the input, integers little-endian, each clamped into its
// range by modulo; missing bytes read as zero, so every input decodes to something valid and a short input to a small
// case. rest() hands the unread bytes to a nested decoder (graph_gen's desc_from_bytes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

namespace tessera::fuzz {

class ByteReader {
 public:
  ByteReader(const uint8_t* data, size_t size) : data_(data), size_(size) {}

  uint8_t byte() { return at_ < size_ ? data_[at_++] : uint8_t{0}; }
  bool flag() { return (byte() & 1) != 0; }
  // An integer in [lo, hi] (inclusive) from as many bytes as the range needs.
  int64_t in_range(int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    const uint64_t span = static_cast<uint64_t>(hi - lo) + 1;
    uint64_t v = 0;
    for (uint64_t r = span - 1; r != 0; r >>= 8) v = (v << 8) | byte();
    return lo + static_cast<int64_t>(v % span);
  }
  template <typename T, size_t N>
  const T& pick(const T (&options)[N]) {
    return options[static_cast<size_t>(in_range(0, static_cast<int64_t>(N) - 1))];
  }
  const uint8_t* rest_data() const { return data_ + at_; }
  size_t rest_size() const { return size_ - at_; }
  size_t consumed() const { return at_; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t at_ = 0;
};

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// A violated invariant: print what and where, then abort (libFuzzer saves the input; the replay test fails).
[[noreturn]] inline void fail(const char* file, int line, const std::string& what) {
  std::fprintf(stderr, "fuzz check failed at %s:%d: %s\n", file, line, what.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera::fuzz

#define FUZZ_CHECK(cond, what)                                      \
  do {                                                              \
    if (!(cond)) ::tessera::fuzz::fail(__FILE__, __LINE__, (what)); \
  } while (0)
