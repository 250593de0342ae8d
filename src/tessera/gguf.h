// GGUF model files (docs/gguf.md): the tensor type table, a reader of the header (metadata and tensor table, versions
// 2 and 3, little-endian) from a file or from memory, split models, and a writer of small files for tests and tools.
// Every malformed file is an error "FILE: offset N: FIELD: what" (N the byte offset of the field); nothing aborts or
// throws on bad input, and no count read from a file is trusted before it is checked against the bytes left.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "tessera/status.h"

namespace tessera::gguf {

// ---- tensor types (src/gguf/types.cpp) ----

// The GGUF tensor types (ggml's enum ggml_type). Ids 4, 5, 31-33 and 36-38 were removed from GGUF: they are in the
// table (type_info) under their old names, so that an error can name them, but a file that uses them is refused.
enum class TensorType : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,
  kNVFP4 = 40,
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct TypeInfo {
  uint32_t id = 0;
  const char* name = "";    // ggml's name, lowercase: "q4_k", "iq2_xxs"
  uint32_t block_size = 0;  // values per block (0 for a removed type)
  uint32_t type_size = 0;   // bytes per block (0 for a removed type)
  bool removed = false;     // no longer allowed in GGUF files
};

// Every id the format has used, 0..kMaxTypeId, in id order: 35 types and 8 removed ones.
inline constexpr uint32_t kMaxTypeId = 42;
std::span<const TypeInfo> type_table();
// The row of an id, or nullptr for an id the format never used (above kMaxTypeId).
const TypeInfo* type_info(uint32_t id);
inline const TypeInfo* type_info(TensorType type) { return type_info(static_cast<uint32_t>(type)); }
// The name of an id ("q4_0_4_4" for a removed one), or "unknown".
const char* type_name(uint32_t id);
inline const char* type_name(TensorType type) { return type_name(static_cast<uint32_t>(type)); }
// A type of the format (not removed) by its name.
std::optional<TensorType> type_from_name(std::string_view name);
// Whether a file may use the id: a known id that was not removed.
bool type_is_valid(uint32_t id);
// Bits per weight: type_size * 8 / block_size (4.5 for q4_0, 6.5625 for q6_k); 0 for a removed or unknown id.
double bits_per_weight(uint32_t id);
// The bytes of a tensor of 1..4 dimensions (ne[0] innermost): ne[0] / block_size * type_size * ne[1] * ne[2] * ne[3].
// Errors: an unknown or removed type, a dimension <= 0, ne[0] not a whole number of blocks, an element count that
// overflows int64 or a byte size that overflows uint64.
Result<uint64_t> tensor_nbytes(uint32_t type, std::span<const int64_t> ne);

// ---- metadata values ----

// The 13 value types of GGUF metadata (ids as in the file).
enum class ValueType : uint32_t {
  kU8 = 0,
  kI8 = 1,
  kU16 = 2,
  kI16 = 3,
  kU32 = 4,
  kI32 = 5,
  kF32 = 6,
  kBool = 7,
  kString = 8,
  kArray = 9,
  kU64 = 10,
  kI64 = 11,
  kF64 = 12,
};
inline constexpr uint32_t kMaxValueType = 12;
// "u8", "i8", ..., "string", "array", ..., "f64"; "unknown" beyond.
const char* value_type_name(ValueType type);

class Value;

// An array value: its element type and length as in the file, and the elements unless the reader skipped them (more
// than ReadOptions::max_array_elements, the key not in keep_keys).
struct Array {
  ValueType type = ValueType::kU8;  // element type (kArray: an array of arrays)
  uint64_t size = 0;                // elements in the file
  bool skipped = false;             // the values were not read; values is empty
  std::vector<Value> values;        // size elements, each of type `type`, unless skipped
};

class Value {
 public:
  Value() = default;  // u8 0
  static Value u8(uint8_t v) { return Value(ValueType::kU8, uint64_t{v}); }
  static Value i8(int8_t v) { return Value(ValueType::kI8, int64_t{v}); }
  static Value u16(uint16_t v) { return Value(ValueType::kU16, uint64_t{v}); }
  static Value i16(int16_t v) { return Value(ValueType::kI16, int64_t{v}); }
  static Value u32(uint32_t v) { return Value(ValueType::kU32, uint64_t{v}); }
  static Value i32(int32_t v) { return Value(ValueType::kI32, int64_t{v}); }
  static Value f32(float v) { return Value(ValueType::kF32, v); }
  static Value boolean(bool v) { return Value(ValueType::kBool, v); }
  static Value string(std::string v) { return Value(ValueType::kString, std::move(v)); }
  static Value u64(uint64_t v) { return Value(ValueType::kU64, v); }
  static Value i64(int64_t v) { return Value(ValueType::kI64, v); }
  static Value f64(double v) { return Value(ValueType::kF64, v); }
  // An array of elements of type `type` (the writer refuses an element of another type).
  static Value array(ValueType type, std::vector<Value> values);
  static Value array(Array a) { return Value(ValueType::kArray, std::move(a)); }
  // Arrays of one type from plain values.
  static Value strings(const std::vector<std::string>& values);
  static Value i32s(const std::vector<int32_t>& values);
  static Value f32s(const std::vector<float>& values);

  ValueType type() const { return type_; }
  // The value when it has the matching type, else nothing.
  std::optional<uint64_t> as_unsigned() const;  // u8, u16, u32, u64
  std::optional<int64_t> as_signed() const;     // i8, i16, i32, i64
  std::optional<float> as_f32() const;
  std::optional<double> as_f64() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;
  const Array* as_array() const;
  Array* as_array();

  // Same type and value; floats compare by their bits (NaN equals the same NaN); arrays element by element.
  bool operator==(const Value& other) const;
  // For printing: 42, -1, 0.5, true, "llama" (quoted, escaped, cut at 64 bytes), [i32 x 3: 1, 2, 3],
  // [string x 151936, skipped]; at most max_items elements of an array.
  std::string to_string(size_t max_items = 8) const;

 private:
  using Storage = std::variant<uint64_t, int64_t, float, double, bool, std::string, Array>;
  template <typename T>
  Value(ValueType type, T&& v) : type_(type), v_(std::in_place_type<std::decay_t<T>>, std::forward<T>(v)) {}
  ValueType type_ = ValueType::kU8;
  Storage v_ = uint64_t{0};
};

struct KeyValue {
  std::string key;
  Value value;
  uint64_t offset = 0;  // where the pair starts in the file (read), 0 otherwise
};

// ---- files ----

// The well-known keys this module reads.
inline constexpr const char* kKeyAlignment = "general.alignment";
inline constexpr const char* kKeySplitNo = "split.no";
inline constexpr const char* kKeySplitCount = "split.count";
inline constexpr const char* kKeySplitTensorsCount = "split.tensors.count";

inline constexpr uint32_t kDefaultAlignment = 32;
inline constexpr uint64_t kMaxKeyLength = 65535;  // bytes
inline constexpr uint64_t kMaxNameLength = 63;    // bytes of a tensor name (GGML_MAX_NAME 64 with the NUL)
inline constexpr uint32_t kMaxDims = 4;
inline constexpr int kMaxNesting = 8;                            // arrays within arrays, the outermost counted
inline constexpr uint64_t kMaxStringBytes = uint64_t{16} << 20;  // the reader's default limit; the writer's limit

struct TensorInfo {
  std::string name;
  uint32_t n_dims = 1;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // ne[0] innermost; 1 beyond n_dims
  TensorType type = TensorType::kF32;
  uint64_t offset = 0;  // from the start of the data section, a multiple of the alignment
  uint64_t size = 0;    // bytes (tensor_nbytes), set by the reader and by layout()
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  std::span<const int64_t> dims() const { return {ne, n_dims < kMaxDims ? n_dims : kMaxDims}; }
};

// What the file holds after its tensor table.
enum class DataState {
  kHeaderOnly,  // the file ends at or before the data section: no tensor data (and there are tensors)
  kComplete,    // every tensor's bytes are in the file (also: no tensors)
  kTruncated,   // some of the data, not all
};
const char* data_state_name(DataState state);  // "header-only", "complete", "truncated"

struct File {
  std::string source;  // the path or the name given for memory; errors start with it
  uint32_t version = 3;
  std::vector<KeyValue> metadata;          // in file order
  std::vector<TensorInfo> tensors;         // in file order
  uint32_t alignment = kDefaultAlignment;  // general.alignment, or 32

  // Set by the reader (the writer computes them again):
  uint64_t header_size = 0;  // bytes of the header, metadata and tensor table
  uint64_t data_offset = 0;  // where the data section starts: header_size rounded up to the alignment
  uint64_t data_bytes = 0;   // bytes of the data section the tensors use: the largest offset + size
  uint64_t file_size = 0;    // bytes of the file (or memory) read
  bool has_data = false;     // the file extends past data_offset
  bool complete = false;     // every tensor's bytes are present: data_offset + data_bytes <= file_size
  DataState data_state() const;

  // Metadata lookup.
  const KeyValue* find(std::string_view key) const;
  const Value* find_value(std::string_view key) const;
  // Typed getters: the value of `key` when it has exactly that type. Errors name the file and the key: not found
  // (kNotFound), or "expected u32, found string" (kInvalidArgument).
  Result<uint8_t> get_u8(std::string_view key) const;
  Result<int8_t> get_i8(std::string_view key) const;
  Result<uint16_t> get_u16(std::string_view key) const;
  Result<int16_t> get_i16(std::string_view key) const;
  Result<uint32_t> get_u32(std::string_view key) const;
  Result<int32_t> get_i32(std::string_view key) const;
  Result<float> get_f32(std::string_view key) const;
  Result<bool> get_bool(std::string_view key) const;
  Result<std::string> get_string(std::string_view key) const;
  Result<uint64_t> get_u64(std::string_view key) const;
  Result<int64_t> get_i64(std::string_view key) const;
  Result<double> get_f64(std::string_view key) const;
  // Any integer type, as int64 (a u64 above INT64_MAX is an error): converters differ in the types they write.
  Result<int64_t> get_int(std::string_view key) const;
  // An array whose elements have type `type`; an error too when the reader skipped its values.
  Result<const Array*> get_array(std::string_view key, ValueType type) const;
  Result<std::vector<std::string>> get_strings(std::string_view key) const;

  // Editing (writer input): sets a key (replacing its value, or appending it) / appends a tensor (offset and size
  // are set by layout()).
  void set(std::string key, Value value);
  void add_tensor(std::string name, TensorType type, const std::vector<int64_t>& ne);
  // Places the tensors one after another in their order, each at the next multiple of the alignment (as ggml's
  // writer does), and sets their sizes and data_bytes (the last tensor's end). Errors: what tensor_nbytes refuses.
  Status layout();

  // Tensor lookup.
  const TensorInfo* find_tensor(std::string_view name) const;
};

// ---- reading (src/gguf/reader.cpp) ----

struct ReadOptions {
  // Arrays with more elements than this (counting the elements of nested arrays too) are skipped: their element
  // type and length are kept, their values not (Array::skipped), so that reading the header of a model with a 150k
  // token vocabulary stays small. Keys in keep_keys are always read in full.
  uint64_t max_array_elements = 4096;
  std::vector<std::string> keep_keys;
  // A longer string (any: a key, a value, an array element, skipped or not) is an error: no real model has one, and
  // reading it would take as much memory. The writer refuses strings above kMaxStringBytes.
  uint64_t max_string_bytes = kMaxStringBytes;
  // Also an error when the data section is missing or truncated (by default only the header must be whole).
  bool require_data = false;
  // The buffer of the file reader (pread); tests make it small to cross its edges.
  size_t io_buffer_bytes = 64 * 1024;
};

// Reads the header, metadata and tensor table of a GGUF file (up to the end of the tensor table; the data section is
// not read, only its size is compared with the tensors').
Result<File> read_file(const std::string& path, const ReadOptions& options = {});
// The same from memory; `name` stands for the path in errors and File::source.
Result<File> read_memory(std::span<const uint8_t> bytes, const std::string& name, const ReadOptions& options = {});

// The data of one tensor of a file read by read_file (from `path`) / read_memory (from `bytes`). Errors: the tensor's
// bytes are not all in the file (header-only or truncated), or an I/O error.
Result<std::vector<uint8_t>> read_tensor_data(const std::string& path, const File& file, const TensorInfo& tensor);
Result<std::span<const uint8_t>> tensor_data(std::span<const uint8_t> bytes, const File& file,
                                             const TensorInfo& tensor);

// ---- split models (src/gguf/model.cpp) ----

// A model in one file, or split into shards PREFIX-00001-of-0000N.gguf ... (llama.cpp's gguf-split): each shard holds
// split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32, all shards together); the first shard
// holds the model's metadata.
struct Model {
  std::vector<File> shards;  // by split.no; one for an unsplit file
  struct TensorRef {
    uint32_t shard = 0;
    uint32_t index = 0;  // into shards[shard].tensors
  };
  std::vector<TensorRef> tensors;  // every tensor, shard by shard in file order

  const File& metadata() const { return shards.front(); }
  const TensorInfo& tensor(const TensorRef& ref) const { return shards[ref.shard].tensors[ref.index]; }
  // The tensor named `name` and where it is, or nullptr.
  const TensorInfo* find_tensor(std::string_view name, TensorRef* where = nullptr) const;
  uint64_t n_bytes() const;  // bytes of every tensor
  // A model of one file (read, or made in memory like a fixture): its tensors in file order.
  static Model of_file(File file);
};

// Reads a model given any of its shards (or its only file). Errors: a shard missing or unreadable, a shard whose
// split.no / split.count / split.tensors.count disagree with the others or with its file name, a tensor count that
// differs from split.tensors.count, a tensor name in two shards; and every error of read_file.
Result<Model> read_model(const std::string& path, const ReadOptions& options = {});

// The file name of shard split_no (0-based) of split_count: "%s-%05d-of-%05d.gguf" with split_no + 1.
std::string split_path(std::string_view prefix, uint32_t split_no, uint32_t split_count);
// The prefix of `path` when it is the name of shard split_no (0-based) of split_count, else nothing.
std::optional<std::string> split_prefix(std::string_view path, uint32_t split_no, uint32_t split_count);
// A shard name taken apart: PREFIX-NNNNN-of-MMMMM.gguf (at least five digits each, 1 <= NNNNN <= MMMMM).
struct SplitName {
  std::string prefix;
  uint32_t split_no = 0;  // 0-based
  uint32_t split_count = 0;
};
std::optional<SplitName> parse_split_path(std::string_view path);

// ---- writing (src/gguf/writer.cpp) ----

// The bytes of a header-only file: header, metadata and tensor table, no padding and no data. Tensor sizes, the
// data offset and data_bytes are computed again; File::alignment must agree with general.alignment (32 without it).
// Refused (errors name the key or tensor): everything the reader refuses, a skipped array, an array element of
// another type than the array's, a version other than 2 or 3.
Result<std::vector<uint8_t>> serialize(const File& file);
// A complete file: the header, zero padding up to the data section, `data` (the data section: exactly data_bytes
// bytes, tensor i at its offset) and zero padding to the alignment. At most 4 GiB in all.
Result<std::vector<uint8_t>> serialize(const File& file, std::span<const uint8_t> data);
Status write_file(const std::string& path, const File& file);
Status write_file(const std::string& path, const File& file, std::span<const uint8_t> data);

}  // namespace tessera::gguf
