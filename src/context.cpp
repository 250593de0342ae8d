#include "tessera/context.h"

#include <cstdlib>
#include <cstring>
#include <limits>

namespace tessera {

namespace {
constexpr size_t kHostAlignment = 64;

bool mul_overflows(size_t a, size_t b, size_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

void Context::AlignedFree::operator()(void* p) const { std::free(p); }

Context::Context(ContextParams params) : params_(params) {}
Context::~Context() = default;

Tensor* Context::fail(Status err) {
  if (status_.ok()) status_ = std::move(err);
  return nullptr;
}

void* Context::alloc_host(size_t size) {
  const size_t rounded = (size + kHostAlignment - 1) / kHostAlignment * kHostAlignment;
  if (params_.mem_size != 0 && host_used_ + rounded > params_.mem_size) return nullptr;
  void* p = std::aligned_alloc(kHostAlignment, rounded == 0 ? kHostAlignment : rounded);
  if (p == nullptr) return nullptr;
  host_blocks_.emplace_back(p);
  host_used_ += rounded;
  return p;
}

Tensor* Context::new_tensor(Type type, int n, const int64_t* ne) {
  if (!type_is_valid(type))
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: invalid type %d", static_cast<int>(type)));
  if (n < 1 || n > kMaxDims) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: n_dims must be 1..4, got %d", n));
  }
  const TypeTraits& tt = type_traits(type);
  int64_t shape[kMaxDims] = {1, 1, 1, 1};
  for (int i = 0; i < n; ++i) {
    if (ne[i] < 0) {
      return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: ne[%d] = %lld is negative", i,
                           static_cast<long long>(ne[i])));
    }
    shape[i] = ne[i];
  }
  // The extents' product, zeros counted as ones, is at most 2^62: nelements() and nrows() cannot overflow (a
  // quantized type packs more elements than bytes, so the byte check below does not imply it), and no kernel walks
  // 2^64 rows of an empty tensor.
  int64_t extent = 1;
  for (int i = 0; i < kMaxDims; ++i) {
    if (__builtin_mul_overflow(extent, shape[i] == 0 ? 1 : shape[i], &extent) || extent > (int64_t{1} << 62)) {
      return fail(TS_ERROR(StatusCode::kInvalidArgument,
                           "new_tensor: the element count of a %s tensor [%lld, %lld, %lld, %lld] overflows 2^62",
                           tt.name, static_cast<long long>(shape[0]), static_cast<long long>(shape[1]),
                           static_cast<long long>(shape[2]), static_cast<long long>(shape[3])));
    }
  }
  if (shape[0] % tt.block_size != 0) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument,
                         "new_tensor: %s row length ne0 = %lld is not a multiple of the block size %lld", tt.name,
                         static_cast<long long>(shape[0]), static_cast<long long>(tt.block_size)));
  }
  // strides, with overflow checks (a fuzzer can ask for absurd shapes)
  size_t nb[kMaxDims];
  nb[0] = tt.type_size;
  size_t acc = 0;
  if (mul_overflows(static_cast<size_t>(shape[0] / tt.block_size), tt.type_size, &acc)) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: size of a %s tensor overflows", tt.name));
  }
  nb[1] = acc;
  for (int i = 1; i < kMaxDims; ++i) {
    if (i > 1) nb[i] = acc;
    if (mul_overflows(acc, static_cast<size_t>(shape[i]), &acc)) {
      return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: size of a %s tensor overflows", tt.name));
    }
  }
  if (acc > (std::numeric_limits<size_t>::max() >> 2)) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "new_tensor: size of a %s tensor overflows", tt.name));
  }
  void* data = nullptr;
  if (!params_.no_alloc) {
    data = alloc_host(acc);
    if (data == nullptr) {
      return fail(TS_ERROR(StatusCode::kAllocFailed,
                           "new_tensor: context out of host memory (%zu bytes needed, %zu of %zu used)", acc,
                           host_used_, params_.mem_size));
    }
  }
  Tensor& t = add_tensor();
  t.type = type;
  for (int i = 0; i < kMaxDims; ++i) {
    t.ne[i] = shape[i];
    t.nb[i] = nb[i];
  }
  t.data = data;
  return &t;
}

Tensor* Context::new_tensor_1d(Type type, int64_t ne0) { return new_tensor(type, 1, &ne0); }
Tensor* Context::new_tensor_2d(Type type, int64_t ne0, int64_t ne1) {
  const int64_t ne[2] = {ne0, ne1};
  return new_tensor(type, 2, ne);
}
Tensor* Context::new_tensor_3d(Type type, int64_t ne0, int64_t ne1, int64_t ne2) {
  const int64_t ne[3] = {ne0, ne1, ne2};
  return new_tensor(type, 3, ne);
}
Tensor* Context::new_tensor_4d(Type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  return new_tensor(type, 4, ne);
}

Tensor* Context::dup_tensor(const Tensor* t) {
  if (t == nullptr) return nullptr;
  return new_tensor(t->type, kMaxDims, t->ne);
}

Tensor* Context::new_view(Tensor* src, Type type, const int64_t ne[4], const size_t nb[4], size_t offset) {
  if (src == nullptr) return nullptr;
  Tensor* root = src->view_src != nullptr ? src->view_src : src;
  const size_t base_offs = src->view_src != nullptr ? src->view_offs : 0;
  Tensor probe;
  probe.type = type;
  for (int i = 0; i < kMaxDims; ++i) {
    if (ne[i] < 0) {
      return fail(TS_ERROR(StatusCode::kInvalidArgument, "view of %s: ne[%d] is negative", describe(*src).c_str(), i));
    }
    probe.ne[i] = ne[i];
    probe.nb[i] = nb[i];
  }
  if (probe.ne[0] % type_traits(type).block_size != 0) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "view of %s: ne0 %lld is not a multiple of the %s block size",
                         describe(*src).c_str(), static_cast<long long>(ne[0]), type_name(type)));
  }
  size_t span = 0;
  if (!checked_nbytes(probe, &span)) {
    return fail(TS_ERROR(StatusCode::kInvalidArgument, "view of %s: its element count or byte span overflows",
                         describe(*src).c_str()));
  }
  if (offset > nbytes(*src) || span > nbytes(*src) - offset) {
    return fail(TS_ERROR(StatusCode::kOutOfRange, "view of %s: bytes [%zu, %zu) exceed the source's %zu bytes",
                         describe(*src).c_str(), offset, offset + span, nbytes(*src)));
  }
  Tensor& t = add_tensor();
  t = probe;
  t.view_src = root;
  t.view_offs = base_offs + offset;
  if (root->data != nullptr) t.data = static_cast<char*>(root->data) + t.view_offs;
  t.buffer = root->buffer;
  return &t;
}

Tensor& Context::add_tensor() {
  if (count_ == blocks_.size() * kBlock) blocks_.push_back(std::make_unique<Tensor[]>(kBlock));
  Tensor& t = blocks_[count_ / kBlock][count_ % kBlock];
  ++count_;
  return t;
}

Tensor* Context::find(const char* name) {
  for (size_t i = 0; i < count_; ++i) {
    if (std::strcmp(tensor(i)->name, name) == 0) return tensor(i);
  }
  return nullptr;
}

}  // namespace tessera
