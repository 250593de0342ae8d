// Element access for the reference kernels: type predicates, layout checks, the row partition among threads, and
// loaders/storers that read or write any supported type at any strides through the exact conversions of types.h.
//
// Address of element (i0, i1, i2, i3) = (char*)t.data + i0 / block_size * nb0 + i1 * nb1 + i2 * nb2 + i3 * nb3
// (for quantized types nb0 is the size of one 32-value block and blocks are contiguous along dim 0).
#pragma once

#include <cstdint>

#include "ref_kernels.h"

namespace tessera::cpu::ref {

// ---- types ----
// Inline: the scheduler asks supports_op once per node and backend, and these checks are most of that question.
// a type with kernels (safe to pass to type_traits); storage-only types (types.h) are not computed here
inline bool type_known(Type t) { return type_has_kernels(t); }
inline bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
inline bool is_float_type(Type t) { return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16; }  // Float
inline bool is_weight_type(Type t) { return is_float_type(t) || is_quant(t); }    // Weight = Float + {q8_0, q4_0}
inline bool is_any_type(Type t) { return is_weight_type(t) || t == Type::kI32; }  // Any = Weight + {i32}
inline int64_t block_size(Type t) { return is_quant(t) ? kQK : 1; }  // values per block (32 for quantized, else 1)
size_t unit_size(Type t);                                            // bytes per block (quantized) or per element

// Dimensions non-negative; quantized: ne0 a multiple of 32 and nb0 equal to the block size in bytes.
inline bool layout_ok(const Tensor& t) {
  static_assert(kMaxDims == 4, "the sign test below names every dimension");
  if (!type_known(t.type)) return false;
  if ((t.ne[0] | t.ne[1] | t.ne[2] | t.ne[3]) < 0) return false;  // any negative dimension
  return !is_quant(t.type) || (t.ne[0] % kQK == 0 && t.nb[0] == unit_size(t.type));
}
// A present source with a known type and a sane layout.
inline bool src_ok(const Tensor* t) { return t != nullptr && layout_ok(*t); }

// ---- rows and the thread partition ----
int64_t row_count(const Tensor& t);  // ne1 * ne2 * ne3
struct RowIdx {
  int64_t i1, i2, i3;
};
// Row r (flattened over ne1, ne2, ne3 with ne1 fastest) of a tensor with this shape.
RowIdx row_idx(const Tensor& t, int64_t r);
// Contiguous share [r0, r1) of n items for thread ith of nth.
void partition(int64_t n, const ComputeParams& p, int64_t* r0, int64_t* r1);

// ---- element access ----
char* elem_ptr(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);  // i0 at a block start if quantized
// One value as f32 (quantized: decoded from its block; i32: converted).
float load_f32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
// One i32 value (t must be i32).
int32_t load_i32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
void store_i32(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3, int32_t v);
// One index value of an i32 or i64 tensor (SET_ROWS takes either, as ggml does; llama.cpp's are i64).
int64_t load_index(const Tensor& t, int64_t i0, int64_t i1, int64_t i2, int64_t i3);
// Row (i1, i2, i3) of t as t.ne0 floats.
void load_row(const Tensor& t, int64_t i1, int64_t i2, int64_t i3, float* out);
// Writes t.ne0 floats into row (i1, i2, i3) of t through t's reference conversion (quantized: whole row). Not for i32.
void store_row(const Tensor& t, int64_t i1, int64_t i2, int64_t i3, const float* in);

}  // namespace tessera::cpu::ref
