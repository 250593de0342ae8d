// The GGUF reader (docs/gguf.md): header, metadata and tensor table of versions 2 and 3, from a file through a small
// buffered reader over pread, or from memory. Every field is checked where it is read, and every count against the
// bytes left before anything is allocated for it; errors are "SOURCE: offset N: FIELD: what".
//
// Over 600 lines on purpose: one parser over one input, each check next to the field it reads, so that a reviewer
// of an untrusted-input path sees every bound in one place (the input layer and the parser would split, but every
// parse step uses both).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdarg>
#include <cstring>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "gguf/internal.h"
#include "tessera/gguf.h"

namespace tessera::gguf {

namespace {

using detail::quote;

// ---- input: memory, or a file read through a buffer ----

class Input {
 public:
  explicit Input(std::span<const uint8_t> bytes) : in_memory_(true), mem_(bytes.data()), size_(bytes.size()) {}
  // The buffer is no larger than the file (nor than 64 MiB, nor smaller than a byte).
  Input(int fd, uint64_t size, size_t buffer_bytes)
      : fd_(fd), size_(size), buf_(std::clamp<uint64_t>(std::min<uint64_t>(buffer_bytes, size), 1, 64u << 20)) {}

  uint64_t pos() const { return pos_; }
  uint64_t size() const { return size_; }
  uint64_t left() const { return size_ - pos_; }
  int io_errno() const { return io_errno_; }

  // Reads n <= left() bytes (the caller checks). False on an I/O error (io_errno()); a file that shrank while being
  // read is one (EIO).
  bool read(void* dst, uint64_t n) {
    auto* out = static_cast<uint8_t*>(dst);
    if (in_memory_) {
      if (n > 0) std::memcpy(out, mem_ + pos_, n);
      pos_ += n;
      return true;
    }
    while (n > 0) {
      if (pos_ >= buf_start_ && pos_ < buf_start_ + buf_len_) {
        const uint64_t at = pos_ - buf_start_;
        const uint64_t take = std::min<uint64_t>(n, buf_len_ - at);
        std::memcpy(out, buf_.data() + at, take);
        out += take;
        pos_ += take;
        n -= take;
      } else if (n >= buf_.size()) {
        // A large read (a long string) goes straight into its destination.
        if (!pread_all(out, n, pos_)) return false;
        out += n;
        pos_ += n;
        n = 0;
      } else {
        const uint64_t want = std::min<uint64_t>(buf_.size(), size_ - pos_);
        if (!pread_all(buf_.data(), want, pos_)) return false;
        buf_start_ = pos_;
        buf_len_ = want;
      }
    }
    return true;
  }

  // Moves forward by n <= left() bytes.
  void skip(uint64_t n) { pos_ += n; }

 private:
  bool pread_all(uint8_t* dst, uint64_t n, uint64_t offset) {
    while (n > 0) {
      const size_t chunk = static_cast<size_t>(std::min<uint64_t>(n, 1u << 30));
      const ssize_t got = ::pread(fd_, dst, chunk, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        io_errno_ = got < 0 ? errno : EIO;
        return false;
      }
      dst += got;
      offset += static_cast<uint64_t>(got);
      n -= static_cast<uint64_t>(got);
    }
    return true;
  }

  bool in_memory_ = false;
  const uint8_t* mem_ = nullptr;
  int fd_ = -1;
  uint64_t size_ = 0;
  uint64_t pos_ = 0;
  std::vector<uint8_t> buf_;
  uint64_t buf_start_ = 0;
  uint64_t buf_len_ = 0;
  int io_errno_ = 0;
};

template <typename T>
T load_le(const uint8_t* p) {
  // Little-endian hosts only (as ggml): the bytes are the value.
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

uint32_t byte_swap32(uint32_t v) { return __builtin_bswap32(v); }

// The elements still to be stored under one top-level array (ReadOptions::max_array_elements).
struct Budget {
  uint64_t left = 0;
  bool exceeded = false;
};

// ---- the parser ----

class Parser {
 public:
  Parser(Input& in, const std::string& source, const ReadOptions& options)
      : in_(in), source_(source), options_(options) {}

  Result<File> parse() {
    File f;
    f.source = source_;
    f.file_size = in_.size();
    TS_RETURN_IF_ERROR(parse_header(f));
    for (uint64_t i = 0; i < n_kv_; ++i) TS_RETURN_IF_ERROR(parse_kv(f, i));
    for (uint64_t i = 0; i < n_tensors_; ++i) TS_RETURN_IF_ERROR(parse_tensor_info(f, i));
    f.header_size = in_.pos();
    f.data_offset = detail::align_up(f.header_size, f.alignment);
    TS_RETURN_IF_ERROR(check_data_layout(f));
    f.has_data = f.file_size > f.data_offset;
    f.complete = f.data_bytes == 0 || f.data_offset + f.data_bytes <= f.file_size;
    if (options_.require_data && !f.complete) return missing_data(f);
    return f;
  }

 private:
  // "SOURCE: offset N: FIELD: what"
  Status error(StatusCode code, uint64_t offset, const std::string& field, const char* fmt, ...)
      __attribute__((format(printf, 5, 6))) {
    va_list args;
    va_start(args, fmt);
    va_list copy;
    va_copy(copy, args);
    const int n = std::vsnprintf(nullptr, 0, fmt, copy);
    va_end(copy);
    std::string what(n > 0 ? static_cast<size_t>(n) : 0, '\0');
    if (n > 0) std::vsnprintf(what.data(), what.size() + 1, fmt, args);
    va_end(args);
    return Status(code, source_ + ": offset " + std::to_string(offset) + ": " + field + ": " + what);
  }

  // Checks that n bytes are left at the position; the error names the field (made only on failure).
  template <typename Field>
  Status need(uint64_t n, const Field& field) {
    if (in_.left() >= n) return Status::Ok();
    return error(StatusCode::kOutOfRange, in_.pos(), field(), "truncated: needs %" PRIu64 " bytes, %" PRIu64 " left", n,
                 in_.left());
  }

  template <typename Field>
  Status read_bytes(void* dst, uint64_t n, const Field& field) {
    TS_RETURN_IF_ERROR(need(n, field));
    const uint64_t at = in_.pos();
    if (!in_.read(dst, n)) {
      return error(StatusCode::kFailed, at, field(), "read error: %s", std::strerror(in_.io_errno()));
    }
    return Status::Ok();
  }

  template <typename T, typename Field>
  Status read_scalar(T* out, const Field& field) {
    uint8_t b[sizeof(T)];
    TS_RETURN_IF_ERROR(read_bytes(b, sizeof(T), field));
    *out = load_le<T>(b);
    return Status::Ok();
  }

  // A string: u64 length, then the bytes. out == nullptr: checked and skipped. A length above max_len (keys, tensor
  // names) or above ReadOptions::max_string_bytes is an error, and so is 0 when !allow_empty.
  template <typename Field>
  Status read_string(std::string* out, const Field& field, uint64_t max_len, bool allow_empty) {
    const uint64_t len_at = in_.pos();
    uint64_t len = 0;
    TS_RETURN_IF_ERROR(read_scalar(&len, [&] { return field() + " length"; }));
    if (len == 0 && !allow_empty) return error(StatusCode::kInvalidArgument, len_at, field(), "empty");
    if (len > max_len) {
      return error(StatusCode::kInvalidArgument, len_at, field(), "length %" PRIu64 " (at most %" PRIu64 " bytes)", len,
                   max_len);
    }
    if (len > in_.left()) {
      return error(StatusCode::kOutOfRange, len_at, field() + " length",
                   "%" PRIu64 " bytes, but only %" PRIu64 " are left in the file", len, in_.left());
    }
    if (len > options_.max_string_bytes) {
      return error(StatusCode::kUnsupported, len_at, field() + " length",
                   "a string of %" PRIu64 " bytes (at most %" PRIu64 ": ReadOptions::max_string_bytes)", len,
                   options_.max_string_bytes);
    }
    if (out == nullptr) {
      in_.skip(len);
      return Status::Ok();
    }
    out->resize(static_cast<size_t>(len));
    return read_bytes(out->data(), len, field);
  }

  Status parse_header(File& f) {
    uint8_t magic[4];
    if (in_.size() < 4) {
      // A prefix of "GGUF" is a truncated file, anything else is not GGUF.
      uint8_t head[4] = {};
      TS_RETURN_IF_ERROR(read_bytes(head, in_.size(), [] { return std::string("magic"); }));
      if (std::memcmp(head, "GGUF", static_cast<size_t>(in_.size())) == 0) {
        return error(StatusCode::kOutOfRange, 0, "magic", "truncated: needs 4 bytes, %" PRIu64 " left", in_.size());
      }
      return error(StatusCode::kInvalidArgument, 0, "magic",
                   "not a GGUF file (%" PRIu64 " bytes; a GGUF file starts with \"GGUF\")", in_.size());
    }
    TS_RETURN_IF_ERROR(read_bytes(magic, 4, [] { return std::string("magic"); }));
    if (std::memcmp(magic, "FUGG", 4) == 0) {
      return error(StatusCode::kUnsupported, 0, "magic",
                   "\"FUGG\" is a byte-swapped \"GGUF\": big-endian GGUF files are not supported");
    }
    if (std::memcmp(magic, "GGUF", 4) != 0) {
      return error(StatusCode::kInvalidArgument, 0, "magic", "not a GGUF file (starts with %s, not \"GGUF\")",
                   quote(std::string_view(reinterpret_cast<const char*>(magic), 4)).c_str());
    }
    uint32_t version = 0;
    TS_RETURN_IF_ERROR(read_scalar(&version, [] { return std::string("version"); }));
    if (version != 2 && version != 3) {
      const uint32_t swapped = byte_swap32(version);
      if (swapped >= 1 && swapped <= 3) {
        return error(StatusCode::kUnsupported, 4, "version",
                     "%u is version %u byte-swapped: big-endian GGUF files are not supported", version, swapped);
      }
      if (version == 1) {
        return error(StatusCode::kUnsupported, 4, "version",
                     "GGUF version 1 (the old format with 32-bit counts) is not supported; re-convert the model");
      }
      return error(StatusCode::kUnsupported, 4, "version", "unknown GGUF version %u (this reader knows 2 and 3)",
                   version);
    }
    f.version = version;
    TS_RETURN_IF_ERROR(read_scalar(&n_tensors_, [] { return std::string("tensor_count"); }));
    TS_RETURN_IF_ERROR(read_scalar(&n_kv_, [] { return std::string("kv_count"); }));
    // Every count is checked against the bytes left before anything is read or allocated for it: a tensor info
    // takes at least 33 bytes, a key/value pair at least 14.
    const uint64_t left = in_.left();
    if (n_tensors_ > left / detail::kMinTensorInfoBytes) {
      return error(StatusCode::kOutOfRange, 8, "tensor_count",
                   "%" PRIu64 " tensors need at least %" PRIu64 " bytes each, but only %" PRIu64
                   " bytes follow the header",
                   n_tensors_, detail::kMinTensorInfoBytes, left);
    }
    const uint64_t left_for_kv = left - n_tensors_ * detail::kMinTensorInfoBytes;
    if (n_kv_ > left_for_kv / detail::kMinKeyValueBytes) {
      std::string after = "the header";
      if (n_tensors_ > 0) {
        after += " and the " + std::to_string(n_tensors_) + " tensor infos' " +
                 std::to_string(n_tensors_ * detail::kMinTensorInfoBytes) + " bytes at least";
      }
      return error(StatusCode::kOutOfRange, 16, "kv_count",
                   "%" PRIu64 " key/value pairs need at least %" PRIu64 " bytes each, but only %" PRIu64
                   " bytes follow %s",
                   n_kv_, detail::kMinKeyValueBytes, left_for_kv, after.c_str());
    }
    return Status::Ok();
  }

  std::string kv_field(uint64_t i) const { return "kv[" + std::to_string(i) + "]"; }
  std::string kv_field(uint64_t i, const std::string& key) const { return kv_field(i) + " " + quote(key); }

  Status parse_kv(File& f, uint64_t i) {
    const uint64_t kv_at = in_.pos();
    KeyValue kv;
    kv.offset = kv_at;
    TS_RETURN_IF_ERROR(read_string(
        &kv.key, [&] { return kv_field(i) + " key"; }, kMaxKeyLength, false));
    auto [it, inserted] = key_offsets_.emplace(kv.key, kv_at);
    if (!inserted) {
      return error(StatusCode::kInvalidArgument, kv_at, kv_field(i) + " key",
                   "duplicate key %s (first at offset %" PRIu64 ")", quote(kv.key).c_str(), it->second);
    }
    const uint64_t type_at = in_.pos();
    uint32_t type = 0;
    TS_RETURN_IF_ERROR(read_scalar(&type, [&] { return kv_field(i, kv.key) + " type"; }));
    if (!detail::value_type_is_valid(type)) {
      return error(StatusCode::kInvalidArgument, type_at, kv_field(i, kv.key) + " type",
                   "unknown value type %u (0 to %u)", type, kMaxValueType);
    }
    const auto vtype = static_cast<ValueType>(type);
    const bool is_alignment = kv.key == kKeyAlignment;
    if (is_alignment && vtype != ValueType::kU32) {
      return error(StatusCode::kInvalidArgument, type_at, kv_field(i, kv.key) + " type", "must be u32, not %s",
                   value_type_name(vtype));
    }
    const uint64_t value_at = in_.pos();
    Budget budget;
    budget.left = std::numeric_limits<uint64_t>::max();
    if (vtype == ValueType::kArray &&
        std::find(options_.keep_keys.begin(), options_.keep_keys.end(), kv.key) == options_.keep_keys.end()) {
      budget.left = options_.max_array_elements;
    }
    path_.clear();
    auto field = [&] { return element_field(i, kv.key); };
    TS_RETURN_IF_ERROR(parse_value(vtype, 0, &kv.value, budget, field));
    if (budget.exceeded) {
      Array* a = kv.value.as_array();
      a->values.clear();
      a->values.shrink_to_fit();
      a->skipped = true;
    }
    if (is_alignment) {
      const uint64_t a = *kv.value.as_unsigned();
      if (!detail::is_power_of_two(a)) {
        return error(StatusCode::kInvalidArgument, value_at, kv_field(i, kv.key) + " value",
                     "%" PRIu64 " is not a power of two", a);
      }
      f.alignment = static_cast<uint32_t>(a);
    }
    f.metadata.push_back(std::move(kv));
    return Status::Ok();
  }

  // "kv[3] 'key' value" or, inside arrays, "kv[3] 'key' value[7][2]".
  std::string element_field(uint64_t i, const std::string& key) const {
    std::string s = kv_field(i, key) + " value";
    for (uint64_t p : path_) s += "[" + std::to_string(p) + "]";
    return s;
  }

  // One value of type t. out == nullptr: checked, not stored. depth: arrays around it.
  template <typename Field>
  Status parse_value(ValueType t, int depth, Value* out, Budget& budget, const Field& field) {
    const uint64_t at = in_.pos();
    switch (t) {
      case ValueType::kU8: return scalar<uint8_t>(out, field, [](uint8_t v) { return Value::u8(v); });
      case ValueType::kI8: return scalar<int8_t>(out, field, [](int8_t v) { return Value::i8(v); });
      case ValueType::kU16: return scalar<uint16_t>(out, field, [](uint16_t v) { return Value::u16(v); });
      case ValueType::kI16: return scalar<int16_t>(out, field, [](int16_t v) { return Value::i16(v); });
      case ValueType::kU32: return scalar<uint32_t>(out, field, [](uint32_t v) { return Value::u32(v); });
      case ValueType::kI32: return scalar<int32_t>(out, field, [](int32_t v) { return Value::i32(v); });
      case ValueType::kF32: return scalar<float>(out, field, [](float v) { return Value::f32(v); });
      case ValueType::kU64: return scalar<uint64_t>(out, field, [](uint64_t v) { return Value::u64(v); });
      case ValueType::kI64: return scalar<int64_t>(out, field, [](int64_t v) { return Value::i64(v); });
      case ValueType::kF64: return scalar<double>(out, field, [](double v) { return Value::f64(v); });
      case ValueType::kBool: {
        uint8_t b = 0;
        TS_RETURN_IF_ERROR(read_scalar(&b, field));
        if (b > 1) return error(StatusCode::kInvalidArgument, at, field(), "bool %u (must be 0 or 1)", b);
        if (out != nullptr) *out = Value::boolean(b == 1);
        return Status::Ok();
      }
      case ValueType::kString: {
        if (out == nullptr) return read_string(nullptr, field, std::numeric_limits<uint64_t>::max(), true);
        std::string s;
        TS_RETURN_IF_ERROR(read_string(&s, field, std::numeric_limits<uint64_t>::max(), true));
        *out = Value::string(std::move(s));
        return Status::Ok();
      }
      case ValueType::kArray: return parse_array(depth + 1, out, budget, field);
    }
    return error(StatusCode::kInvalidArgument, at, field(), "unknown value type %u", static_cast<uint32_t>(t));
  }

  template <typename T, typename Field, typename Make>
  Status scalar(Value* out, const Field& field, const Make& make) {
    T v{};
    TS_RETURN_IF_ERROR(read_scalar(&v, field));
    if (out != nullptr) *out = make(v);
    return Status::Ok();
  }

  template <typename Field>
  Status parse_array(int depth, Value* out, Budget& budget, const Field& field) {
    const uint64_t type_at = in_.pos();
    if (depth > kMaxNesting) {
      return error(StatusCode::kInvalidArgument, type_at, field(), "arrays nested deeper than %d", kMaxNesting);
    }
    uint32_t type = 0;
    TS_RETURN_IF_ERROR(read_scalar(&type, [&] { return field() + " array type"; }));
    if (!detail::value_type_is_valid(type)) {
      return error(StatusCode::kInvalidArgument, type_at, field() + " array type", "unknown value type %u (0 to %u)",
                   type, kMaxValueType);
    }
    const auto elem = static_cast<ValueType>(type);
    const uint64_t count_at = in_.pos();
    uint64_t count = 0;
    TS_RETURN_IF_ERROR(read_scalar(&count, [&] { return field() + " array length"; }));
    const uint64_t min_bytes = detail::min_value_bytes(elem);
    if (count > in_.left() / min_bytes) {
      return error(StatusCode::kOutOfRange, count_at, field() + " array length",
                   "%" PRIu64 " elements of type %s need at least %" PRIu64 " bytes each, but only %" PRIu64
                   " bytes are left in the file",
                   count, value_type_name(elem), min_bytes, in_.left());
    }
    Array* arr = nullptr;
    if (out != nullptr) {
      Array a;
      a.type = elem;
      a.size = count;
      *out = Value::array(std::move(a));
      arr = out->as_array();
      // Values are stored while the top-level array's budget lasts; once it is exceeded nothing more is stored (the
      // caller marks the top-level array skipped), but every element is still checked.
      if (budget.exceeded || count > budget.left) {
        budget.exceeded = true;
      } else {
        budget.left -= count;
      }
    }
    const bool store = arr != nullptr && !budget.exceeded;
    if (!store && detail::scalar_bytes(elem) != 0 && elem != ValueType::kBool) {
      in_.skip(count * detail::scalar_bytes(elem));  // count * size <= left, checked above
      return Status::Ok();
    }
    // (count is within both the budget and the bytes left: a vocabulary's 150k strings are stored without regrowth)
    if (store) arr->values.reserve(count);
    path_.push_back(0);
    for (uint64_t j = 0; j < count; ++j) {
      path_.back() = j;
      Value* slot = nullptr;
      if (store && !budget.exceeded) {
        arr->values.emplace_back();
        slot = &arr->values.back();
      }
      TS_RETURN_IF_ERROR(parse_value(elem, depth, slot, budget, field));
    }
    path_.pop_back();
    return Status::Ok();
  }

  std::string tensor_field(uint64_t i) const { return "tensor[" + std::to_string(i) + "]"; }
  std::string tensor_field(uint64_t i, const std::string& name) const { return tensor_field(i) + " " + quote(name); }

  Status parse_tensor_info(File& f, uint64_t i) {
    TensorInfo t;
    const uint64_t name_at = in_.pos();
    TS_RETURN_IF_ERROR(read_string(
        &t.name, [&] { return tensor_field(i) + " name"; }, kMaxNameLength, false));
    auto [it, inserted] = tensor_index_.emplace(t.name, i);
    if (!inserted) {
      return error(StatusCode::kInvalidArgument, name_at, tensor_field(i) + " name",
                   "duplicate tensor name %s (tensor[%" PRIu64 "])", quote(t.name).c_str(), it->second);
    }
    const std::string field = tensor_field(i, t.name);
    const uint64_t n_dims_at = in_.pos();
    TS_RETURN_IF_ERROR(read_scalar(&t.n_dims, [&] { return field + " n_dims"; }));
    if (t.n_dims == 0 || t.n_dims > kMaxDims) {
      return error(StatusCode::kInvalidArgument, n_dims_at, field + " n_dims", "%u (1 to %u allowed)", t.n_dims,
                   kMaxDims);
    }
    uint64_t dim_at[kMaxDims] = {};
    int64_t elements = 1;
    for (uint32_t d = 0; d < t.n_dims; ++d) {
      dim_at[d] = in_.pos();
      const std::string dim_field = field + " ne[" + std::to_string(d) + "]";
      TS_RETURN_IF_ERROR(read_scalar(&t.ne[d], [&] { return dim_field; }));
      if (t.ne[d] <= 0) {
        return error(StatusCode::kInvalidArgument, dim_at[d], dim_field, "%" PRId64 " (must be > 0)", t.ne[d]);
      }
      if (__builtin_mul_overflow(elements, t.ne[d], &elements)) {
        return error(StatusCode::kInvalidArgument, dim_at[d], dim_field,
                     "%" PRId64 ": the element count overflows int64", t.ne[d]);
      }
    }
    const uint64_t type_at = in_.pos();
    uint32_t type = 0;
    TS_RETURN_IF_ERROR(read_scalar(&type, [&] { return field + " type"; }));
    const TypeInfo* info = type_info(type);
    if (info == nullptr) {
      return error(StatusCode::kInvalidArgument, type_at, field + " type", "unknown tensor type %u", type);
    }
    if (info->removed) {
      return error(StatusCode::kUnsupported, type_at, field + " type",
                   "type %u (%s) was removed from GGUF; re-convert the model", type, info->name);
    }
    t.type = static_cast<TensorType>(type);
    if (t.ne[0] % info->block_size != 0) {
      return error(StatusCode::kInvalidArgument, dim_at[0], field + " ne[0]",
                   "%" PRId64 " is not a whole number of %s blocks (%u values)", t.ne[0], info->name, info->block_size);
    }
    auto size = tensor_nbytes(type, t.dims());
    if (!size.ok()) {
      return error(StatusCode::kInvalidArgument, type_at, field + " type", "%s x %s: %s", info->name,
                   dims_string(t).c_str(), size.status().message().c_str());
    }
    t.size = *size;
    const uint64_t offset_at = in_.pos();
    TS_RETURN_IF_ERROR(read_scalar(&t.offset, [&] { return field + " offset"; }));
    if (t.offset % f.alignment != 0) {
      return error(StatusCode::kInvalidArgument, offset_at, field + " offset",
                   "%" PRIu64 " is not a multiple of the alignment %u", t.offset, f.alignment);
    }
    uint64_t end = 0;
    if (__builtin_add_overflow(t.offset, t.size, &end)) {
      return error(StatusCode::kInvalidArgument, offset_at, field + " offset",
                   "%" PRIu64 " + %" PRIu64 " bytes overflows uint64", t.offset, t.size);
    }
    offset_at_.push_back(offset_at);
    f.tensors.push_back(std::move(t));
    return Status::Ok();
  }

  static std::string dims_string(const TensorInfo& t) {
    std::string s = "[";
    for (uint32_t d = 0; d < t.n_dims; ++d) s += (d ? ", " : "") + std::to_string(t.ne[d]);
    return s + "]";
  }

  // Tensor ranges in the data section: disjoint, and the section's end representable as a file offset.
  Status check_data_layout(File& f) {
    std::vector<size_t> order(f.tensors.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
      return f.tensors[a].offset != f.tensors[b].offset ? f.tensors[a].offset < f.tensors[b].offset : a < b;
    });
    uint64_t data_bytes = 0;
    for (size_t k = 0; k < order.size(); ++k) {
      const TensorInfo& t = f.tensors[order[k]];
      const uint64_t end = t.offset + t.size;  // no overflow: checked when read
      if (k > 0) {
        const size_t prev_i = order[k - 1];
        const TensorInfo& prev = f.tensors[prev_i];
        if (prev.offset + prev.size > t.offset) {
          // Name the tensor that comes later in the file.
          const size_t later = std::max(prev_i, order[k]), earlier = std::min(prev_i, order[k]);
          const TensorInfo& a = f.tensors[later];
          const TensorInfo& b = f.tensors[earlier];
          return error(StatusCode::kInvalidArgument, offset_at_[later], tensor_field(later, a.name) + " offset",
                       "data [%" PRIu64 ", %" PRIu64 ") overlaps tensor[%zu] %s [%" PRIu64 ", %" PRIu64 ")", a.offset,
                       a.offset + a.size, earlier, quote(b.name).c_str(), b.offset, b.offset + b.size);
        }
      }
      uint64_t file_end = 0;
      if (__builtin_add_overflow(f.data_offset, end, &file_end)) {
        const size_t i = order[k];
        return error(StatusCode::kInvalidArgument, offset_at_[i], tensor_field(i, t.name) + " offset",
                     "the data section at %" PRIu64 " + %" PRIu64 " overflows uint64", f.data_offset, end);
      }
      data_bytes = std::max(data_bytes, end);
    }
    f.data_bytes = data_bytes;
    return Status::Ok();
  }

  Status missing_data(const File& f) {
    if (!f.has_data) {
      return error(StatusCode::kOutOfRange, f.file_size, "data",
                   "the file has no data section (header only): the tensors need %" PRIu64
                   " bytes from offset %" PRIu64,
                   f.data_bytes, f.data_offset);
    }
    // The first tensor (by offset) whose bytes are not all there.
    size_t first = f.tensors.size();
    for (size_t i = 0; i < f.tensors.size(); ++i) {
      const TensorInfo& t = f.tensors[i];
      if (f.data_offset + t.offset + t.size > f.file_size &&
          (first == f.tensors.size() || t.offset < f.tensors[first].offset)) {
        first = i;
      }
    }
    const TensorInfo& t = f.tensors[first];
    return error(StatusCode::kOutOfRange, f.data_offset + t.offset, tensor_field(first, t.name) + " data",
                 "truncated: needs bytes [%" PRIu64 ", %" PRIu64 "), the file ends at %" PRIu64,
                 f.data_offset + t.offset, f.data_offset + t.offset + t.size, f.file_size);
  }

  Input& in_;
  const std::string& source_;
  const ReadOptions& options_;
  uint64_t n_tensors_ = 0;
  uint64_t n_kv_ = 0;
  std::unordered_map<std::string, uint64_t> key_offsets_;
  std::unordered_map<std::string, uint64_t> tensor_index_;
  std::vector<uint64_t> offset_at_;  // where each tensor's offset field is
  std::vector<uint64_t> path_;       // element indices inside the array being read
};

class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) ::close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Opens a regular file for reading and gives its size.
Status open_file(const std::string& path, int* fd_out, uint64_t* size_out) {
  int fd;
  do {
    fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  } while (fd < 0 && errno == EINTR);
  if (fd < 0) {
    const int e = errno;
    return TS_ERROR(e == ENOENT ? StatusCode::kNotFound : StatusCode::kFailed, "%s: cannot open: %s", path.c_str(),
                    std::strerror(e));
  }
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    return TS_ERROR(StatusCode::kFailed, "%s: cannot stat: %s", path.c_str(), std::strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: not a regular file", path.c_str());
  }
  *fd_out = fd;
  *size_out = static_cast<uint64_t>(st.st_size);
  return Status::Ok();
}

// Where a tensor's bytes are in the file, if they are all there.
Result<uint64_t> tensor_file_offset(const File& file, const TensorInfo& tensor, uint64_t file_size) {
  uint64_t start = 0, end = 0;
  if (__builtin_add_overflow(file.data_offset, tensor.offset, &start) ||
      __builtin_add_overflow(start, tensor.size, &end) || end > file_size) {
    return TS_ERROR(StatusCode::kOutOfRange,
                    "%s: offset %" PRIu64 ": tensor %s data: %s: needs bytes [%" PRIu64 ", %" PRIu64
                    "), the file ends at %" PRIu64,
                    file.source.c_str(), start, quote(tensor.name).c_str(),
                    file_size <= file.data_offset ? "the file has no data section (header only)" : "truncated", start,
                    end, file_size);
  }
  return start;
}

}  // namespace

Result<File> read_memory(std::span<const uint8_t> bytes, const std::string& name, const ReadOptions& options) {
  Input in(bytes);
  Parser parser(in, name, options);
  return parser.parse();
}

Result<File> read_file(const std::string& path, const ReadOptions& options) {
  int fd = -1;
  uint64_t size = 0;
  TS_RETURN_IF_ERROR(open_file(path, &fd, &size));
  Fd guard(fd);
  Input in(fd, size, options.io_buffer_bytes);
  Parser parser(in, path, options);
  return parser.parse();
}

Result<std::vector<uint8_t>> read_tensor_data(const std::string& path, const File& file, const TensorInfo& tensor) {
  int fd = -1;
  uint64_t size = 0;
  TS_RETURN_IF_ERROR(open_file(path, &fd, &size));
  Fd guard(fd);
  auto start = tensor_file_offset(file, tensor, size);
  if (!start.ok()) return start.status();
  std::vector<uint8_t> out(static_cast<size_t>(tensor.size));
  Input in(fd, size, 0);
  in.skip(*start);
  if (!in.read(out.data(), tensor.size)) {
    return TS_ERROR(StatusCode::kFailed, "%s: offset %" PRIu64 ": tensor %s data: read error: %s", path.c_str(), *start,
                    quote(tensor.name).c_str(), std::strerror(in.io_errno()));
  }
  return out;
}

Result<std::span<const uint8_t>> tensor_data(std::span<const uint8_t> bytes, const File& file,
                                             const TensorInfo& tensor) {
  auto start = tensor_file_offset(file, tensor, bytes.size());
  if (!start.ok()) return start.status();
  return bytes.subspan(static_cast<size_t>(*start), static_cast<size_t>(tensor.size));
}

}  // namespace tessera::gguf
