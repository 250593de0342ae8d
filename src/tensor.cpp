#include "tessera/tensor.h"

#include <cstdarg>
#include <cstdio>

#include "tessera/status.h"

namespace tessera {

int64_t nelements(const Tensor& t) { return t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]; }
int64_t nrows(const Tensor& t) { return t.ne[1] * t.ne[2] * t.ne[3]; }

bool is_empty(const Tensor& t) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (t.ne[i] == 0) return true;
  }
  return false;
}

size_t nbytes(const Tensor& t) {
  if (is_empty(t)) return 0;
  const TypeTraits& tt = type_traits(t.type);
  // first block of the first row through the last block of the last row
  size_t bytes = static_cast<size_t>(t.ne[0] / tt.block_size - 1) * t.nb[0] + tt.type_size;
  for (int i = 1; i < kMaxDims; ++i) bytes += static_cast<size_t>(t.ne[i] - 1) * t.nb[i];
  return bytes;
}

bool checked_nbytes(const Tensor& t, size_t* out) {
  int64_t elements = 1, extent = 1;  // extent: zeros counted as ones (nrows of an empty tensor must not overflow)
  for (int i = 0; i < kMaxDims; ++i) {
    if (t.ne[i] < 0 || __builtin_mul_overflow(elements, t.ne[i], &elements)) return false;
    if (__builtin_mul_overflow(extent, t.ne[i] == 0 ? 1 : t.ne[i], &extent)) return false;
  }
  if (elements == 0) {
    *out = 0;
    return true;
  }
  const TypeTraits& tt = type_traits(t.type);
  size_t bytes = tt.type_size;
  for (int i = 0; i < kMaxDims; ++i) {
    const size_t steps = static_cast<size_t>(i == 0 ? t.ne[0] / tt.block_size - 1 : t.ne[i] - 1);
    size_t part = 0;
    if (__builtin_mul_overflow(steps, t.nb[i], &part) || __builtin_add_overflow(bytes, part, &bytes)) return false;
  }
  *out = bytes;
  return true;
}

int n_dims(const Tensor& t) {
  for (int i = kMaxDims - 1; i >= 1; --i) {
    if (t.ne[i] > 1) return i + 1;
  }
  return 1;
}

size_t tensor_row_size(const Tensor& t) { return row_size(t.type, t.ne[0]); }

bool is_contiguous(const Tensor& t) {
  const TypeTraits& tt = type_traits(t.type);
  size_t next = tt.type_size;
  if (t.ne[0] != tt.block_size && t.nb[0] != next) return false;
  next *= static_cast<size_t>(t.ne[0] / tt.block_size);
  for (int i = 1; i < kMaxDims; ++i) {
    if (t.ne[i] != 1 && t.nb[i] != next) return false;
    next *= static_cast<size_t>(t.ne[i]);
  }
  return true;
}

bool is_transposed(const Tensor& t) { return t.nb[0] > t.nb[1]; }

bool is_permuted(const Tensor& t) { return t.nb[0] > t.nb[1] || t.nb[1] > t.nb[2] || t.nb[2] > t.nb[3]; }

bool same_shape(const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (a.ne[i] != b.ne[i]) return false;
  }
  return true;
}

bool same_layout(const Tensor& a, const Tensor& b) {
  if (a.type != b.type) return false;
  for (int i = 0; i < kMaxDims; ++i) {
    if (a.ne[i] != b.ne[i] || a.nb[i] != b.nb[i]) return false;
  }
  return true;
}

bool can_repeat(const Tensor& a, const Tensor& b) {
  for (int i = 0; i < kMaxDims; ++i) {
    if (a.ne[i] == 0) return false;
    if (b.ne[i] % a.ne[i] != 0) return false;
  }
  return true;
}

bool is_view(const Tensor& t) { return t.view_src != nullptr; }

void set_name(Tensor& t, const std::string& name) {
  const size_t n = name.size() < kMaxName - 1 ? name.size() : kMaxName - 1;
  std::memcpy(t.name, name.data(), n);
  t.name[n] = '\0';
}

void format_name(Tensor& t, const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(t.name, kMaxName, fmt, args);
  va_end(args);
}

std::string describe(const Tensor& t) {
  return format_message("'%s' [%s %lld x %lld x %lld x %lld, op %s]", t.name[0] ? t.name : "(unnamed)",
                        type_name(t.type), static_cast<long long>(t.ne[0]), static_cast<long long>(t.ne[1]),
                        static_cast<long long>(t.ne[2]), static_cast<long long>(t.ne[3]), op_name(t.op));
}

}  // namespace tessera
