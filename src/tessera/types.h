// Element types, their traits and exact reference conversions (docs/data-model.md, 'Types').
#pragma once

#include <cstddef>
#include <cstdint>

namespace tessera {

enum class Type : int32_t { kF32 = 0, kF16, kBF16, kI32, kQ8_0, kQ4_0, kCount };

constexpr int kTypeCount = static_cast<int>(Type::kCount);
constexpr int64_t kQK = 32;  // values per quantization block (q8_0 and q4_0)

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
  const char* name;
  int64_t block_size;  // values per block (1 for plain types)
  size_t type_size;    // bytes per block
  bool is_quantized;
  bool is_float;       // f32, f16, bf16 (element-addressable floating point)
  ToFloatFn to_float;  // null for i32
  FromFloatFn from_float;
};

const TypeTraits& type_traits(Type type);
inline const char* type_name(Type type) { return type_traits(type).name; }
bool type_is_valid(Type type);
// Parses "f32", "q4_0", ...; returns false when the name is unknown.
bool type_from_name(const char* name, Type* out);
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
