// The GGUF writer (docs/gguf.md): header-only files and complete small files, for tests and tools. It refuses what
// the reader refuses, so that what it writes reads back to the same File.
#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "gguf/internal.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

namespace {

using detail::quote;

constexpr uint64_t kMaxCompleteFileBytes = uint64_t{4} << 30;

Status invalid(const std::string& what) { return Status(StatusCode::kInvalidArgument, "gguf writer: " + what); }

std::string kv_field(size_t i, const std::string& key) { return "kv[" + std::to_string(i) + "] " + quote(key); }
std::string tensor_field(size_t i, const std::string& name) {
  return "tensor[" + std::to_string(i) + "] " + quote(name);
}

// A value the reader accepts: known types, arrays whose elements all have the array's type, not skipped, nested at
// most kMaxNesting deep.
Status check_value(const Value& v, int depth, const std::string& where) {
  if (!detail::value_type_is_valid(static_cast<uint32_t>(v.type()))) {
    return invalid(where + ": unknown value type " + std::to_string(static_cast<uint32_t>(v.type())));
  }
  if (const std::string* str = v.as_string(); str != nullptr && str->size() > kMaxStringBytes) {
    return invalid(where + ": a string of " + std::to_string(str->size()) + " bytes (at most " +
                   std::to_string(kMaxStringBytes) + ")");
  }
  const Array* a = v.as_array();
  if (a == nullptr) return Status::Ok();
  if (depth + 1 > kMaxNesting) return invalid(where + ": arrays nested deeper than " + std::to_string(kMaxNesting));
  if (!detail::value_type_is_valid(static_cast<uint32_t>(a->type))) {
    return invalid(where + ": unknown array element type " + std::to_string(static_cast<uint32_t>(a->type)));
  }
  if (a->skipped) {
    return invalid(where + ": the array's " + std::to_string(a->size) +
                   " values were skipped when the file was read (ReadOptions::keep_keys keeps them)");
  }
  if (a->values.size() != a->size) {
    return invalid(where + ": the array says " + std::to_string(a->size) + " elements but holds " +
                   std::to_string(a->values.size()));
  }
  for (size_t j = 0; j < a->values.size(); ++j) {
    const Value& e = a->values[j];
    if (e.type() != a->type) {
      return invalid(where + "[" + std::to_string(j) + "]: element of type " + value_type_name(e.type()) +
                     " in an array of " + value_type_name(a->type));
    }
    if (e.type() == ValueType::kArray || e.type() == ValueType::kString) {
      TS_RETURN_IF_ERROR(check_value(e, depth + 1, where + "[" + std::to_string(j) + "]"));
    }
  }
  return Status::Ok();
}

// The checks of the reader on metadata and tensor infos. Sets sizes[i] and *data_bytes.
Status check_file(const File& f, std::vector<uint64_t>* sizes, uint64_t* data_bytes) {
  if (f.version != 2 && f.version != 3) {
    return invalid("version " + std::to_string(f.version) + " (2 or 3 can be written)");
  }
  std::unordered_map<std::string_view, size_t> keys;
  uint32_t alignment = kDefaultAlignment;
  for (size_t i = 0; i < f.metadata.size(); ++i) {
    const KeyValue& kv = f.metadata[i];
    const std::string where = kv_field(i, kv.key);
    if (kv.key.empty()) return invalid("kv[" + std::to_string(i) + "]: empty key");
    if (kv.key.size() > kMaxKeyLength) {
      return invalid(where + ": key of " + std::to_string(kv.key.size()) + " bytes (at most 65535)");
    }
    auto [it, inserted] = keys.emplace(kv.key, i);
    if (!inserted) return invalid(where + ": duplicate key (kv[" + std::to_string(it->second) + "])");
    TS_RETURN_IF_ERROR(check_value(kv.value, 0, where));
    if (kv.key == kKeyAlignment) {
      if (kv.value.type() != ValueType::kU32) {
        return invalid(where + ": must be u32, not " + value_type_name(kv.value.type()));
      }
      const uint64_t a = *kv.value.as_unsigned();
      if (!detail::is_power_of_two(a)) return invalid(where + ": " + std::to_string(a) + " is not a power of two");
      alignment = static_cast<uint32_t>(a);
    }
  }
  if (f.alignment != alignment) {
    return invalid("File::alignment is " + std::to_string(f.alignment) + " but general.alignment says " +
                   std::to_string(alignment) + " (32 when absent)");
  }
  std::unordered_map<std::string_view, size_t> names;
  sizes->assign(f.tensors.size(), 0);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    const TensorInfo& t = f.tensors[i];
    const std::string where = tensor_field(i, t.name);
    if (t.name.empty()) return invalid("tensor[" + std::to_string(i) + "]: empty name");
    if (t.name.size() > kMaxNameLength) {
      return invalid(where + ": name of " + std::to_string(t.name.size()) + " bytes (at most 63)");
    }
    auto [it, inserted] = names.emplace(t.name, i);
    if (!inserted) return invalid(where + ": duplicate tensor name (tensor[" + std::to_string(it->second) + "])");
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      return invalid(where + ": " + std::to_string(t.n_dims) + " dimensions (1 to 4 allowed)");
    }
    for (uint32_t d = t.n_dims; d < kMaxDims; ++d) {
      if (t.ne[d] != 1) return invalid(where + ": ne[" + std::to_string(d) + "] must be 1 beyond n_dims");
    }
    auto size = tensor_nbytes(static_cast<uint32_t>(t.type), t.dims());
    if (!size.ok()) return Status(size.status().code(), "gguf writer: " + where + ": " + size.status().message());
    (*sizes)[i] = *size;
    if (t.offset % alignment != 0) {
      return invalid(where + ": offset " + std::to_string(t.offset) + " is not a multiple of the alignment " +
                     std::to_string(alignment));
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(t.offset, *size, &end)) return invalid(where + ": offset + size overflows uint64");
  }
  std::vector<size_t> order(f.tensors.size());
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return f.tensors[a].offset != f.tensors[b].offset ? f.tensors[a].offset < f.tensors[b].offset : a < b;
  });
  *data_bytes = 0;
  for (size_t k = 0; k < order.size(); ++k) {
    const size_t i = order[k];
    if (k > 0) {
      const size_t p = order[k - 1];
      if (f.tensors[p].offset + (*sizes)[p] > f.tensors[i].offset) {
        return invalid(tensor_field(std::max(i, p), f.tensors[std::max(i, p)].name) + ": data overlaps tensor[" +
                       std::to_string(std::min(i, p)) + "] " + quote(f.tensors[std::min(i, p)].name));
      }
    }
    *data_bytes = std::max(*data_bytes, f.tensors[i].offset + (*sizes)[i]);
  }
  return Status::Ok();
}

class Out {
 public:
  explicit Out(std::vector<uint8_t>& bytes) : b_(bytes) {}
  template <typename T>
  void scalar(T v) {
    uint8_t raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));  // little-endian hosts only, as the reader
    b_.insert(b_.end(), raw, raw + sizeof(T));
  }
  void string(const std::string& s) {
    scalar<uint64_t>(s.size());
    b_.insert(b_.end(), s.begin(), s.end());
  }
  void value(const Value& v) {
    switch (v.type()) {
      case ValueType::kU8: scalar<uint8_t>(static_cast<uint8_t>(*v.as_unsigned())); return;
      case ValueType::kI8: scalar<int8_t>(static_cast<int8_t>(*v.as_signed())); return;
      case ValueType::kU16: scalar<uint16_t>(static_cast<uint16_t>(*v.as_unsigned())); return;
      case ValueType::kI16: scalar<int16_t>(static_cast<int16_t>(*v.as_signed())); return;
      case ValueType::kU32: scalar<uint32_t>(static_cast<uint32_t>(*v.as_unsigned())); return;
      case ValueType::kI32: scalar<int32_t>(static_cast<int32_t>(*v.as_signed())); return;
      case ValueType::kF32: scalar<float>(*v.as_f32()); return;
      case ValueType::kBool: scalar<uint8_t>(*v.as_bool() ? 1 : 0); return;
      case ValueType::kString: string(*v.as_string()); return;
      case ValueType::kU64: scalar<uint64_t>(*v.as_unsigned()); return;
      case ValueType::kI64: scalar<int64_t>(*v.as_signed()); return;
      case ValueType::kF64: scalar<double>(*v.as_f64()); return;
      case ValueType::kArray: {
        const Array& a = *v.as_array();
        scalar<uint32_t>(static_cast<uint32_t>(a.type));
        scalar<uint64_t>(a.size);
        for (const Value& e : a.values) value(e);
        return;
      }
    }
  }
  void zeros(uint64_t n) { b_.insert(b_.end(), static_cast<size_t>(n), uint8_t{0}); }

 private:
  std::vector<uint8_t>& b_;
};

Result<std::vector<uint8_t>> serialize_impl(const File& f, const std::span<const uint8_t>* data) {
  std::vector<uint64_t> sizes;
  uint64_t data_bytes = 0;
  TS_RETURN_IF_ERROR(check_file(f, &sizes, &data_bytes));
  std::vector<uint8_t> bytes{'G', 'G', 'U', 'F'};  // (inserting them into the empty vector trips GCC 12's
                                                   // -Wstringop-overflow, a false positive)
  Out out(bytes);
  out.scalar<uint32_t>(f.version);
  out.scalar<uint64_t>(f.tensors.size());
  out.scalar<uint64_t>(f.metadata.size());
  for (const KeyValue& kv : f.metadata) {
    out.string(kv.key);
    out.scalar<uint32_t>(static_cast<uint32_t>(kv.value.type()));
    out.value(kv.value);
  }
  for (const TensorInfo& t : f.tensors) {
    out.string(t.name);
    out.scalar<uint32_t>(t.n_dims);
    for (uint32_t d = 0; d < t.n_dims; ++d) out.scalar<int64_t>(t.ne[d]);
    out.scalar<uint32_t>(static_cast<uint32_t>(t.type));
    out.scalar<uint64_t>(t.offset);
  }
  const uint64_t header_size = bytes.size();
  const uint64_t data_offset = detail::align_up(header_size, f.alignment);
  uint64_t data_end = 0;
  if (__builtin_add_overflow(data_offset, data_bytes, &data_end)) {
    return invalid("the data section (" + std::to_string(data_bytes) + " bytes at " + std::to_string(data_offset) +
                   ") ends beyond 2^64");
  }
  if (data != nullptr) {
    if (data->size() != data_bytes) {
      return invalid("the data section has " + std::to_string(data->size()) + " bytes; the tensors need exactly " +
                     std::to_string(data_bytes));
    }
    const uint64_t total = data_offset + detail::align_up(data_bytes, f.alignment);
    if (total > kMaxCompleteFileBytes) {
      return Status(StatusCode::kUnsupported, "gguf writer: a complete file of " + std::to_string(total) +
                                                  " bytes (the writer writes at most 4 GiB)");
    }
    bytes.reserve(static_cast<size_t>(total));
    out.zeros(data_offset - header_size);
    bytes.insert(bytes.end(), data->begin(), data->end());
    out.zeros(total - bytes.size());
  }
  // What was written must read back; a failure here is a writer bug, not the caller's.
  ReadOptions all;
  all.max_array_elements = std::numeric_limits<uint64_t>::max();
  all.require_data = data != nullptr;
  auto back = read_memory(bytes, "gguf writer output", all);
  if (!back.ok()) {
    return Status(StatusCode::kFailed,
                  "gguf writer: internal error: the written file does not read back: " + back.status().message());
  }
  return bytes;
}

Status write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::FILE* fp = std::fopen(path.c_str(), "wb");
  if (fp == nullptr) return TS_ERROR(StatusCode::kFailed, "%s: cannot create: %s", path.c_str(), std::strerror(errno));
  const size_t written = bytes.empty() ? 0 : std::fwrite(bytes.data(), 1, bytes.size(), fp);
  const int write_errno = errno;
  const bool closed = std::fclose(fp) == 0;
  if (written != bytes.size() || !closed) {
    return TS_ERROR(StatusCode::kFailed, "%s: cannot write %zu bytes: %s", path.c_str(), bytes.size(),
                    std::strerror(written != bytes.size() ? write_errno : errno));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<uint8_t>> serialize(const File& file) { return serialize_impl(file, nullptr); }

Result<std::vector<uint8_t>> serialize(const File& file, std::span<const uint8_t> data) {
  return serialize_impl(file, &data);
}

Status write_file(const std::string& path, const File& file) {
  auto bytes = serialize(file);
  if (!bytes.ok()) return bytes.status();
  return write_bytes(path, *bytes);
}

Status write_file(const std::string& path, const File& file, std::span<const uint8_t> data) {
  auto bytes = serialize(file, data);
  if (!bytes.ok()) return bytes.status();
  return write_bytes(path, *bytes);
}

}  // namespace tessera::gguf
