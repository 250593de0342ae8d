// Tensors (docs/data-model.md, 'Tensors'): plain structs that live in a Context arena; graphs link them by pointer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>

#include "tessera/ops.h"
#include "tessera/types.h"

namespace tessera {

class Buffer;

constexpr int kMaxDims = 4;
constexpr int kMaxSrc = 10;
constexpr int kMaxOpParams = 16;  // int32 slots
constexpr int kMaxName = 64;      // including the terminating zero

enum TensorFlag : int32_t {
  kFlagInput = 1 << 0,
  kFlagOutput = 1 << 1,
  kFlagParam = 1 << 2,
};

struct Tensor {
  Type type = Type::kF32;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};  // elements per dimension, ne[0] fastest
  size_t nb[kMaxDims] = {0, 0, 0, 0};   // byte strides; nb[0] = bytes per block

  Op op = Op::kNone;
  int32_t op_params[kMaxOpParams] = {};
  int32_t flags = 0;
  Tensor* src[kMaxSrc] = {};

  Tensor* view_src = nullptr;  // the root tensor whose memory this one aliases (never itself a view)
  size_t view_offs = 0;        // byte offset into view_src

  Buffer* buffer = nullptr;
  void* data = nullptr;
  void* extra = nullptr;  // backend-specific

  char name[kMaxName] = {};
};

// Sizes and shapes.
int64_t nelements(const Tensor& t);
int64_t nrows(const Tensor& t);  // ne1 * ne2 * ne3
size_t nbytes(const Tensor& t);  // span touched from the first to the last element, inclusive
// nbytes() of a tensor whose shape and strides are not trusted yet (a view being made, a file's tensor): false when
// the element count (or the product of the extents with zeros counted as ones: the rows of an empty tensor) does not
// fit in int64 or the span in size_t, so that nothing downstream wraps around.
bool checked_nbytes(const Tensor& t, size_t* out);
int n_dims(const Tensor& t);  // highest dimension with ne > 1, plus one (at least 1)
size_t tensor_row_size(const Tensor& t);
bool is_contiguous(const Tensor& t);  // rows packed, dims in order
bool is_transposed(const Tensor& t);
bool is_permuted(const Tensor& t);
bool same_shape(const Tensor& a, const Tensor& b);
bool same_layout(const Tensor& a, const Tensor& b);  // type, ne and nb equal
// a can be broadcast to b: b.ne[i] % a.ne[i] == 0 for every i.
bool can_repeat(const Tensor& a, const Tensor& b);
bool is_view(const Tensor& t);  // has a view_src
bool is_empty(const Tensor& t);

// Names and flags.
void set_name(Tensor& t, const std::string& name);  // truncated to 63 chars
void format_name(Tensor& t, const char* fmt, ...) __attribute__((format(printf, 2, 3)));
inline const char* get_name(const Tensor& t) { return t.name; }
inline void set_input(Tensor& t) { t.flags |= kFlagInput; }
inline void set_output(Tensor& t) { t.flags |= kFlagOutput; }
inline void set_param(Tensor& t) { t.flags |= kFlagParam; }

// Typed access to op parameters.
template <typename T>
T get_op_param(const Tensor& t, int i) {
  static_assert(sizeof(T) == 4, "op params are 4-byte slots");
  T v;
  std::memcpy(&v, &t.op_params[i], 4);
  return v;
}
template <typename T>
void set_op_param(Tensor& t, int i, T v) {
  static_assert(sizeof(T) == 4, "op params are 4-byte slots");
  std::memcpy(&t.op_params[i], &v, 4);
}

// "name [type ne0 x ne1 x ne2 x ne3]" for messages.
std::string describe(const Tensor& t);

}  // namespace tessera
