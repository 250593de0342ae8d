// Invariants of a GGUF File the reader accepted (docs/gguf.md), shared by the unit tests
// (tests/unit/core/test_gguf.cpp) and the fuzz target (fuzz/gguf_reader.cpp). Each check returns "" when it holds, else
// what is violated.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <unordered_set>
#include <vector>

#include "tessera/gguf.h"

namespace tessera::test {

inline std::string gguf_value_violation(const gguf::Value& v, int depth) {
  const gguf::Array* a = v.as_array();
  if (a == nullptr) return "";
  if (depth + 1 > gguf::kMaxNesting) return "arrays nested deeper than kMaxNesting";
  if (a->skipped) return a->values.empty() ? "" : "a skipped array holds values";
  if (a->values.size() != a->size) return "an array's size differs from its values";
  for (const gguf::Value& e : a->values) {
    if (e.type() != a->type) return "an array element of another type than the array's";
    if (e.type() == gguf::ValueType::kArray) {
      std::string why = gguf_value_violation(e, depth + 1);
      if (!why.empty()) return why;
    }
  }
  return "";
}

// A File read from `bytes`: the header's fields are in range, the tensors' ranges lie inside the data section and
// are disjoint, and the data flags agree with the sizes.
inline std::string gguf_file_violation(const gguf::File& f, std::span<const uint8_t> bytes) {
  using namespace gguf;
  if (f.version != 2 && f.version != 3) return "version " + std::to_string(f.version);
  if (f.file_size != bytes.size()) return "file_size differs from the input's size";
  if (f.alignment == 0 || (f.alignment & (f.alignment - 1)) != 0) return "alignment not a power of two";
  const Value* a = f.find_value(kKeyAlignment);
  if ((a == nullptr ? kDefaultAlignment : a->as_unsigned().value_or(0)) != f.alignment) {
    return "alignment differs from general.alignment";
  }
  if (f.header_size < 24 || f.header_size > f.file_size) return "header_size outside the file";
  if (f.data_offset % f.alignment != 0 || f.data_offset < f.header_size ||
      f.data_offset - f.header_size >= f.alignment) {
    return "data_offset is not header_size rounded up to the alignment";
  }
  std::unordered_set<std::string> keys;
  for (const KeyValue& kv : f.metadata) {
    if (kv.key.empty() || kv.key.size() > kMaxKeyLength) return "a key of bad length";
    if (!keys.insert(kv.key).second) return "duplicate key " + kv.key;
    std::string why = gguf_value_violation(kv.value, 0);
    if (!why.empty()) return "key " + kv.key + ": " + why;
  }
  std::unordered_set<std::string> names;
  uint64_t data_bytes = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.name.empty() || t.name.size() > kMaxNameLength) return "a tensor name of bad length";
    if (!names.insert(t.name).second) return "duplicate tensor " + t.name;
    if (t.n_dims == 0 || t.n_dims > gguf::kMaxDims) return "tensor " + t.name + ": n_dims out of range";
    for (uint32_t d = 0; d < gguf::kMaxDims; ++d) {
      if (d < t.n_dims ? t.ne[d] <= 0 : t.ne[d] != 1) return "tensor " + t.name + ": bad ne";
    }
    if (!type_is_valid(static_cast<uint32_t>(t.type))) return "tensor " + t.name + ": bad type";
    auto size = tensor_nbytes(static_cast<uint32_t>(t.type), t.dims());
    if (!size.ok() || *size != t.size) return "tensor " + t.name + ": size differs from tensor_nbytes";
    if (t.offset % f.alignment != 0) return "tensor " + t.name + ": offset not aligned";
    if (t.offset + t.size < t.offset) return "tensor " + t.name + ": range overflows";
    data_bytes = std::max(data_bytes, t.offset + t.size);
  }
  if (data_bytes != f.data_bytes) return "data_bytes is not the largest tensor end";
  if (f.data_offset + f.data_bytes < f.data_offset) return "the data section's end overflows";
  // Every tensor's range inside the data section, no two overlapping.
  std::vector<size_t> order(f.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t x, size_t y) { return f.tensors[x].offset < f.tensors[y].offset; });
  for (size_t k = 1; k < order.size(); ++k) {
    const TensorInfo& p = f.tensors[order[k - 1]];
    if (p.offset + p.size > f.tensors[order[k]].offset)
      return "tensors " + p.name + " and " + f.tensors[order[k]].name + " overlap";
  }
  if (f.has_data != (f.file_size > f.data_offset)) return "has_data disagrees with the sizes";
  if (f.complete != (f.data_bytes == 0 || f.data_offset + f.data_bytes <= f.file_size)) {
    return "complete disagrees with the sizes";
  }
  if (f.complete && f.data_bytes != 0 && f.data_offset + f.data_bytes > bytes.size()) return "complete past the end";
  return "";
}

// The structure two reads must agree on (not the source name, nor KeyValue::offset).
inline std::string gguf_structure_difference(const gguf::File& a, const gguf::File& b) {
  if (a.version != b.version) return "version";
  if (a.alignment != b.alignment) return "alignment";
  if (a.header_size != b.header_size) return "header_size";
  if (a.data_offset != b.data_offset) return "data_offset";
  if (a.data_bytes != b.data_bytes) return "data_bytes";
  if (a.metadata.size() != b.metadata.size()) return "metadata count";
  for (size_t i = 0; i < a.metadata.size(); ++i) {
    if (a.metadata[i].key != b.metadata[i].key) return "key " + std::to_string(i);
    if (!(a.metadata[i].value == b.metadata[i].value)) return "value of " + a.metadata[i].key;
  }
  if (a.tensors.size() != b.tensors.size()) return "tensor count";
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    const gguf::TensorInfo& x = a.tensors[i];
    const gguf::TensorInfo& y = b.tensors[i];
    if (x.name != y.name || x.n_dims != y.n_dims || x.type != y.type || x.offset != y.offset || x.size != y.size ||
        !std::equal(x.ne, x.ne + gguf::kMaxDims, y.ne)) {
      return "tensor " + std::to_string(i);
    }
  }
  return "";
}

}  // namespace tessera::test
