// GGUF metadata values and the File's lookups, typed getters and editing (docs/gguf.md).
#include <cinttypes>
#include <cstring>
#include <limits>

#include "gguf/internal.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

namespace detail {

std::string quote(std::string_view s, size_t max_bytes) {
  std::string out = "'";
  const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c == '\'' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c >= 0x20 && c < 0x7f) {
      out += static_cast<char>(c);
    } else {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\x%02x", c);
      out += buf;
    }
  }
  if (n < s.size()) out += "...";
  out += "'";
  return out;
}

}  // namespace detail

const char* value_type_name(ValueType type) {
  switch (type) {
    case ValueType::kU8: return "u8";
    case ValueType::kI8: return "i8";
    case ValueType::kU16: return "u16";
    case ValueType::kI16: return "i16";
    case ValueType::kU32: return "u32";
    case ValueType::kI32: return "i32";
    case ValueType::kF32: return "f32";
    case ValueType::kBool: return "bool";
    case ValueType::kString: return "string";
    case ValueType::kArray: return "array";
    case ValueType::kU64: return "u64";
    case ValueType::kI64: return "i64";
    case ValueType::kF64: return "f64";
  }
  return "unknown";
}

const char* data_state_name(DataState state) {
  switch (state) {
    case DataState::kHeaderOnly: return "header-only";
    case DataState::kComplete: return "complete";
    case DataState::kTruncated: return "truncated";
  }
  return "unknown";
}

// ---- Value ----

Value Value::array(ValueType type, std::vector<Value> values) {
  Array a;
  a.type = type;
  a.size = values.size();
  a.values = std::move(values);
  return Value(ValueType::kArray, std::move(a));
}

Value Value::strings(const std::vector<std::string>& values) {
  std::vector<Value> items;
  items.reserve(values.size());
  for (const std::string& s : values) items.push_back(Value::string(s));
  return array(ValueType::kString, std::move(items));
}

Value Value::i32s(const std::vector<int32_t>& values) {
  std::vector<Value> items;
  items.reserve(values.size());
  for (int32_t v : values) items.push_back(Value::i32(v));
  return array(ValueType::kI32, std::move(items));
}

Value Value::f32s(const std::vector<float>& values) {
  std::vector<Value> items;
  items.reserve(values.size());
  for (float v : values) items.push_back(Value::f32(v));
  return array(ValueType::kF32, std::move(items));
}

std::optional<uint64_t> Value::as_unsigned() const {
  switch (type_) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64: return std::get<uint64_t>(v_);
    default: return std::nullopt;
  }
}

std::optional<int64_t> Value::as_signed() const {
  switch (type_) {
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64: return std::get<int64_t>(v_);
    default: return std::nullopt;
  }
}

std::optional<float> Value::as_f32() const {
  if (type_ != ValueType::kF32) return std::nullopt;
  return std::get<float>(v_);
}

std::optional<double> Value::as_f64() const {
  if (type_ != ValueType::kF64) return std::nullopt;
  return std::get<double>(v_);
}

std::optional<bool> Value::as_bool() const {
  if (type_ != ValueType::kBool) return std::nullopt;
  return std::get<bool>(v_);
}

const std::string* Value::as_string() const {
  return type_ == ValueType::kString ? &std::get<std::string>(v_) : nullptr;
}

const Array* Value::as_array() const { return type_ == ValueType::kArray ? &std::get<Array>(v_) : nullptr; }

Array* Value::as_array() { return type_ == ValueType::kArray ? &std::get<Array>(v_) : nullptr; }

bool Value::operator==(const Value& other) const {
  if (type_ != other.type_ || v_.index() != other.v_.index()) return false;
  switch (type_) {
    case ValueType::kF32: {
      const float a = std::get<float>(v_), b = std::get<float>(other.v_);
      return std::memcmp(&a, &b, sizeof(a)) == 0;
    }
    case ValueType::kF64: {
      const double a = std::get<double>(v_), b = std::get<double>(other.v_);
      return std::memcmp(&a, &b, sizeof(a)) == 0;
    }
    case ValueType::kArray: {
      const Array& a = std::get<Array>(v_);
      const Array& b = std::get<Array>(other.v_);
      return a.type == b.type && a.size == b.size && a.skipped == b.skipped && a.values == b.values;
    }
    case ValueType::kString: return std::get<std::string>(v_) == std::get<std::string>(other.v_);
    case ValueType::kBool: return std::get<bool>(v_) == std::get<bool>(other.v_);
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64: return std::get<uint64_t>(v_) == std::get<uint64_t>(other.v_);
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64: return std::get<int64_t>(v_) == std::get<int64_t>(other.v_);
  }
  return false;
}

std::string Value::to_string(size_t max_items) const {
  char buf[64];
  switch (type_) {
    case ValueType::kU8:
    case ValueType::kU16:
    case ValueType::kU32:
    case ValueType::kU64: std::snprintf(buf, sizeof(buf), "%" PRIu64, std::get<uint64_t>(v_)); return buf;
    case ValueType::kI8:
    case ValueType::kI16:
    case ValueType::kI32:
    case ValueType::kI64: std::snprintf(buf, sizeof(buf), "%" PRId64, std::get<int64_t>(v_)); return buf;
    case ValueType::kF32: std::snprintf(buf, sizeof(buf), "%.9g", static_cast<double>(std::get<float>(v_))); return buf;
    case ValueType::kF64: std::snprintf(buf, sizeof(buf), "%.17g", std::get<double>(v_)); return buf;
    case ValueType::kBool: return std::get<bool>(v_) ? "true" : "false";
    case ValueType::kString: return detail::quote(std::get<std::string>(v_), 64);
    case ValueType::kArray: {
      const Array& a = std::get<Array>(v_);
      std::string out = "[";
      out += value_type_name(a.type);
      std::snprintf(buf, sizeof(buf), " x %" PRIu64, a.size);
      out += buf;
      if (a.skipped) return out + ", skipped]";
      for (size_t i = 0; i < a.values.size() && i < max_items; ++i) {
        out += i == 0 ? ": " : ", ";
        out += a.values[i].to_string(max_items);
      }
      if (a.values.size() > max_items) out += ", ...";
      return out + "]";
    }
  }
  return "?";
}

// ---- File ----

DataState File::data_state() const {
  if (complete) return DataState::kComplete;
  return has_data ? DataState::kTruncated : DataState::kHeaderOnly;
}

const KeyValue* File::find(std::string_view key) const {
  for (const KeyValue& kv : metadata) {
    if (kv.key == key) return &kv;
  }
  return nullptr;
}

const Value* File::find_value(std::string_view key) const {
  const KeyValue* kv = find(key);
  return kv != nullptr ? &kv->value : nullptr;
}

namespace {

Result<const Value*> typed(const File& f, std::string_view key, ValueType type) {
  const Value* v = f.find_value(key);
  if (v == nullptr) {
    return TS_ERROR(StatusCode::kNotFound, "%s: key %s not found", f.source.c_str(), detail::quote(key).c_str());
  }
  if (v->type() != type) {
    std::string found = value_type_name(v->type());
    if (const Array* a = v->as_array()) found += std::string(" of ") + value_type_name(a->type);
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: key %s: expected %s, found %s", f.source.c_str(),
                    detail::quote(key).c_str(), value_type_name(type), found.c_str());
  }
  return v;
}

template <typename T>
Result<T> get_unsigned(const File& f, std::string_view key, ValueType type) {
  auto v = typed(f, key, type);
  if (!v.ok()) return v.status();
  return static_cast<T>(*(*v)->as_unsigned());
}

template <typename T>
Result<T> get_signed(const File& f, std::string_view key, ValueType type) {
  auto v = typed(f, key, type);
  if (!v.ok()) return v.status();
  return static_cast<T>(*(*v)->as_signed());
}

}  // namespace

Result<uint8_t> File::get_u8(std::string_view key) const { return get_unsigned<uint8_t>(*this, key, ValueType::kU8); }
Result<uint16_t> File::get_u16(std::string_view key) const {
  return get_unsigned<uint16_t>(*this, key, ValueType::kU16);
}
Result<uint32_t> File::get_u32(std::string_view key) const {
  return get_unsigned<uint32_t>(*this, key, ValueType::kU32);
}
Result<uint64_t> File::get_u64(std::string_view key) const {
  return get_unsigned<uint64_t>(*this, key, ValueType::kU64);
}
Result<int8_t> File::get_i8(std::string_view key) const { return get_signed<int8_t>(*this, key, ValueType::kI8); }
Result<int16_t> File::get_i16(std::string_view key) const { return get_signed<int16_t>(*this, key, ValueType::kI16); }
Result<int32_t> File::get_i32(std::string_view key) const { return get_signed<int32_t>(*this, key, ValueType::kI32); }
Result<int64_t> File::get_i64(std::string_view key) const { return get_signed<int64_t>(*this, key, ValueType::kI64); }

Result<float> File::get_f32(std::string_view key) const {
  auto v = typed(*this, key, ValueType::kF32);
  if (!v.ok()) return v.status();
  return *(*v)->as_f32();
}

Result<double> File::get_f64(std::string_view key) const {
  auto v = typed(*this, key, ValueType::kF64);
  if (!v.ok()) return v.status();
  return *(*v)->as_f64();
}

Result<bool> File::get_bool(std::string_view key) const {
  auto v = typed(*this, key, ValueType::kBool);
  if (!v.ok()) return v.status();
  return *(*v)->as_bool();
}

Result<std::string> File::get_string(std::string_view key) const {
  auto v = typed(*this, key, ValueType::kString);
  if (!v.ok()) return v.status();
  return *(*v)->as_string();
}

Result<int64_t> File::get_int(std::string_view key) const {
  const Value* v = find_value(key);
  if (v == nullptr) {
    return TS_ERROR(StatusCode::kNotFound, "%s: key %s not found", source.c_str(), detail::quote(key).c_str());
  }
  if (auto s = v->as_signed()) return *s;
  if (auto u = v->as_unsigned()) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      return TS_ERROR(StatusCode::kOutOfRange, "%s: key %s: %" PRIu64 " does not fit in int64", source.c_str(),
                      detail::quote(key).c_str(), *u);
    }
    return static_cast<int64_t>(*u);
  }
  return TS_ERROR(StatusCode::kInvalidArgument, "%s: key %s: expected an integer, found %s", source.c_str(),
                  detail::quote(key).c_str(), value_type_name(v->type()));
}

Result<const Array*> File::get_array(std::string_view key, ValueType type) const {
  auto v = typed(*this, key, ValueType::kArray);
  if (!v.ok()) return v.status();
  const Array* a = (*v)->as_array();
  if (a->type != type) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: key %s: expected array of %s, found array of %s", source.c_str(),
                    detail::quote(key).c_str(), value_type_name(type), value_type_name(a->type));
  }
  if (a->skipped) {
    return TS_ERROR(StatusCode::kInvalidArgument,
                    "%s: key %s: the array's %" PRIu64
                    " values were not read (more than ReadOptions::max_array_elements; list the key in keep_keys)",
                    source.c_str(), detail::quote(key).c_str(), a->size);
  }
  return a;
}

Result<std::vector<std::string>> File::get_strings(std::string_view key) const {
  auto a = get_array(key, ValueType::kString);
  if (!a.ok()) return a.status();
  std::vector<std::string> out;
  out.reserve((*a)->values.size());
  for (const Value& v : (*a)->values) out.push_back(*v.as_string());
  return out;
}

void File::set(std::string key, Value value) {
  for (KeyValue& kv : metadata) {
    if (kv.key == key) {
      kv.value = std::move(value);
      return;
    }
  }
  metadata.push_back(KeyValue{std::move(key), std::move(value), 0});
}

void File::add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne) {
  TensorInfo t;
  t.name = std::move(name);
  t.type = type;
  t.n_dims = static_cast<uint32_t>(ne.size());  // more than kMaxDims: refused by layout() and the writer
  for (size_t d = 0; d < ne.size() && d < kMaxDims; ++d) t.ne[d] = ne[d];
  tensors.push_back(std::move(t));
}

Status File::layout() {
  uint64_t offset = 0;
  data_bytes = 0;
  for (TensorInfo& t : tensors) {
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      return TS_ERROR(StatusCode::kInvalidArgument, "tensor %s: %u dimensions (1 to %u allowed)",
                      detail::quote(t.name).c_str(), t.n_dims, kMaxDims);
    }
    auto size = tensor_nbytes(static_cast<uint32_t>(t.type), t.dims());
    if (!size.ok()) {
      return Status(size.status().code(), "tensor " + detail::quote(t.name) + ": " + size.status().message());
    }
    t.offset = offset;
    t.size = *size;
    // The next tensor starts at the next multiple of the alignment.
    uint64_t end = 0;
    if (!detail::is_power_of_two(alignment) || __builtin_add_overflow(offset, *size, &end) ||
        end > std::numeric_limits<uint64_t>::max() - alignment) {
      return TS_ERROR(StatusCode::kInvalidArgument, "tensor %s: the data section overflows uint64 (alignment %u)",
                      detail::quote(t.name).c_str(), alignment);
    }
    offset = detail::align_up(end, alignment);
    data_bytes = end;
  }
  return Status::Ok();
}

const TensorInfo* File::find_tensor(std::string_view name) const {
  for (const TensorInfo& t : tensors) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace tessera::gguf
