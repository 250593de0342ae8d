// Helpers shared by the GGUF reader, writer and model reader (not installed).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "tessera/gguf.h"

namespace tessera::gguf::detail {

// `s` in double quotes for a message: printable ASCII as is, \" \\ and every other byte as \xNN; cut after max_bytes
// with "..." (keys and names come from untrusted files).
std::string quote(std::string_view s, size_t max_bytes = 64);

inline bool is_power_of_two(uint64_t v) { return v != 0 && (v & (v - 1)) == 0; }

inline bool value_type_is_valid(uint32_t t) { return t <= kMaxValueType; }

// The fewest bytes one value of the type takes in a file (a string: its u64 length; an array: type and length).
inline uint64_t min_value_bytes(ValueType t) {
  switch (t) {
    case ValueType::kU8:
    case ValueType::kI8:
    case ValueType::kBool: return 1;
    case ValueType::kU16:
    case ValueType::kI16: return 2;
    case ValueType::kU32:
    case ValueType::kI32:
    case ValueType::kF32: return 4;
    case ValueType::kU64:
    case ValueType::kI64:
    case ValueType::kF64:
    case ValueType::kString: return 8;
    case ValueType::kArray: return 12;
  }
  return 1;
}

// The fixed size of a scalar value type in a file; 0 for string and array.
inline uint64_t scalar_bytes(ValueType t) {
  return t == ValueType::kString || t == ValueType::kArray ? 0 : min_value_bytes(t);
}

// The fewest bytes of one metadata pair (key length, a 1-byte key, value type, a 1-byte value) and of one tensor
// info (name length, a 1-byte name, n_dims, one dimension, type, offset).
inline constexpr uint64_t kMinKeyValueBytes = 8 + 1 + 4 + 1;
inline constexpr uint64_t kMinTensorInfoBytes = 8 + 1 + 4 + 8 + 4 + 8;
inline constexpr uint64_t kHeaderBytes = 4 + 4 + 8 + 8;

inline uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

}  // namespace tessera::gguf::detail
