// Element types, their traits and exact reference conversions (docs/data-model.md, 'Types').
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

// The first six types have kernels: exact conversions to and from f32, and every backend computes with them. The
// others are the remaining tensor types of GGUF files, in GGUF id order: storage-only. Tessera creates, places, plans,
// copies and times tensors of them (their sizes are exact), but no backend computes with them and they have no
// conversions (docs/data-model.md, 'Types').
enum class Type : int32_t {
  // types with kernels (0 .. kKernelTypeCount - 1)
  kF32 = 0,
  kF16,
  kBF16,
  kI32,
  kQ8_0,
  kQ4_0,
  // storage-only types
  kQ4_1,
  kQ5_0,
  kQ5_1,
  kQ8_1,
  kQ2_K,
  kQ3_K,
  kQ4_K,
  kQ5_K,
  kQ6_K,
  kQ8_K,
  kIQ2_XXS,
  kIQ2_XS,
  kIQ3_XXS,
  kIQ1_S,
  kIQ4_NL,
  kIQ3_S,
  kIQ2_S,
  kIQ4_XS,
  kI8,
  kI16,
  kI64,
  kF64,
  kIQ1_M,
  kTQ1_0,
  kTQ2_0,
  kMXFP4,
  kNVFP4,
  kQ1_0,
  kQ2_0,
  kCount
};

constexpr int kTypeCount = static_cast<int>(Type::kCount);  // every type, storage-only ones included
constexpr int kKernelTypeCount = 6;                         // the types with kernels: f32 .. q4_0
constexpr int64_t kQK = 32;                                 // values per quantization block (q8_0 and q4_0)

static_assert(static_cast<int>(Type::kQ4_0) + 1 == kKernelTypeCount, "the types with kernels come first");

// Whether backends compute with this type (false for storage-only types and for invalid values).
constexpr bool type_has_kernels(Type type) {
  return static_cast<int>(type) >= 0 && static_cast<int>(type) < kKernelTypeCount;
}

// Storage of one IEEE half / bfloat16 value (raw bits).
struct fp16_t {
  uint16_t bits;
};
struct bf16_t {
  uint16_t bits;
};

// q8_0: one f16 scale d, 32 signed bytes; value = q * d.
struct BlockQ8_0 {
  fp16_t d;
  int8_t qs[kQK];
};
// q4_0: one f16 scale d, 16 bytes holding 32 nibbles; value i (i < 16) is the low nibble of qs[i], value i + 16 the
// high nibble of qs[i]; value = (nibble - 8) * d.
struct BlockQ4_0 {
  fp16_t d;
  uint8_t qs[kQK / 2];
};
static_assert(sizeof(BlockQ8_0) == 34, "q8_0 block must be 34 bytes");
static_assert(sizeof(BlockQ4_0) == 18, "q4_0 block must be 18 bytes");

// Converts n values of a type to f32 / from f32. For quantized types n must be a multiple of the block size and the
// pointers address whole blocks.
using ToFloatFn = void (*)(const void* src, float* dst, int64_t n);
using FromFloatFn = void (*)(const float* src, void* dst, int64_t n);

struct TypeTraits {
  const char* name;    // as ggml names the type, in lower case ("q6_k" where ggml prints "q6_K")
  int64_t block_size;  // values per block (1 for plain types)
  size_t type_size;    // bytes per block
  bool is_quantized;   // block-quantized (every type with block_size > 1)
  bool is_float;       // element-addressable floating point: f32, f16, bf16, f64
  ToFloatFn to_float;  // null for i32 and for every storage-only type
  FromFloatFn from_float;
  int gguf_id;  // the type's id in GGUF files (ggml_type); -1 for the invalid type
};

const TypeTraits& type_traits(Type type);
inline const char* type_name(Type type) { return type_traits(type).name; }
// Any enumerator but kCount, with kernels or storage-only.
bool type_is_valid(Type type);
// Parses "f32", "q4_0", "q6_k", ... (case-insensitive: ggml's "q6_K" too); returns false when the name is unknown.
bool type_from_name(const char* name, Type* out);
// The type of a GGUF tensor type id (ggml_type); returns false for an id that is no type (4, 5, 31..33, 36..38, the
// removed ones, and anything out of range).
bool type_from_gguf_id(int id, Type* out);
// Bytes of a row of ne0 values (ne0 must be a multiple of the block size).
size_t row_size(Type type, int64_t ne0);

// Exact scalar conversions. f32 -> f16 and f32 -> bf16 round to nearest even; NaN stays NaN, overflow gives inf.
float fp16_to_fp32(fp16_t h);
fp16_t fp32_to_fp16(float f);
float bf16_to_fp32(bf16_t h);
bf16_t fp32_to_bf16(float f);

// Reference quantization of whole blocks (n a multiple of 32). d = amax / 127 (q8_0), d = max / -8 where max is the
// signed value of largest magnitude (q4_0); values rounded to nearest.
void quantize_row_q8_0(const float* src, BlockQ8_0* dst, int64_t n);
void dequantize_row_q8_0(const BlockQ8_0* src, float* dst, int64_t n);
void quantize_row_q4_0(const float* src, BlockQ4_0* dst, int64_t n);
void dequantize_row_q4_0(const BlockQ4_0* src, float* dst, int64_t n);

}  // namespace tessera
