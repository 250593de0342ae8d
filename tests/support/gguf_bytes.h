// A raw GGUF byte builder for tests and fuzz seeds: writes fields one by one, little-endian, with no checks, so that
// malformed files can be made by hand (docs/gguf.md has the layout). size() before a field is that field's offset.
#pragma once

#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::test {

class GgufBytes {
 public:
  // GGUF value type ids (the file's numbers, spelled out so that tests do not depend on the reader's enum).
  static constexpr uint32_t kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
                            kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12;

  GgufBytes& raw(std::string_view s) {
    b_.insert(b_.end(), s.begin(), s.end());
    return *this;
  }
  GgufBytes& u8(uint8_t v) { return put(v); }
  GgufBytes& u16(uint16_t v) { return put(v); }
  GgufBytes& u32(uint32_t v) { return put(v); }
  GgufBytes& u64(uint64_t v) { return put(v); }
  GgufBytes& i32(int32_t v) { return put(v); }
  GgufBytes& i64(int64_t v) { return put(v); }
  GgufBytes& f32(float v) { return put(v); }
  GgufBytes& f64(double v) { return put(v); }
  // A GGUF string: u64 length, then the bytes.
  GgufBytes& str(std::string_view s) {
    u64(s.size());
    return raw(s);
  }
  GgufBytes& zeros(size_t n) {
    b_.insert(b_.end(), n, uint8_t{0});
    return *this;
  }
  GgufBytes& pad_to(size_t alignment) { return zeros((alignment - b_.size() % alignment) % alignment); }

  // "GGUF", version, tensor count, kv count: 24 bytes.
  GgufBytes& header(uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    raw("GGUF");
    u32(version);
    u64(n_tensors);
    return u64(n_kv);
  }
  // A key and its value type (the value follows).
  GgufBytes& key(std::string_view k, uint32_t type) {
    str(k);
    return u32(type);
  }
  GgufBytes& kv_u32(std::string_view k, uint32_t v) { return key(k, kU32).u32(v); }
  GgufBytes& kv_u16(std::string_view k, uint16_t v) { return key(k, kU16).u16(v); }
  GgufBytes& kv_i32(std::string_view k, int32_t v) { return key(k, kI32).i32(v); }
  GgufBytes& kv_str(std::string_view k, std::string_view v) { return key(k, kString).str(v); }
  // An array's element type and length (the elements follow).
  GgufBytes& array(uint32_t type, uint64_t n) {
    u32(type);
    return u64(n);
  }
  // A tensor info: name, n_dims, ne[], type, offset.
  GgufBytes& tensor(std::string_view name, std::vector<int64_t> ne, uint32_t type, uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(ne.size()));
    for (int64_t d : ne) i64(d);
    u32(type);
    return u64(offset);
  }

  size_t size() const { return b_.size(); }
  const std::vector<uint8_t>& bytes() const { return b_; }
  std::vector<uint8_t>& bytes() { return b_; }
  std::span<const uint8_t> span() const { return b_; }

 private:
  template <typename T>
  GgufBytes& put(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    b_.insert(b_.end(), raw, raw + sizeof(T));
    return *this;
  }

  std::vector<uint8_t> b_;
};

}  // namespace tessera::test
