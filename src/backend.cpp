#include "tessera/backend.h"

#include <cstring>
#include <vector>

namespace tessera {

const char* buffer_usage_name(BufferUsage usage) {
  switch (usage) {
    case BufferUsage::kAny: return "any";
    case BufferUsage::kWeights: return "weights";
    case BufferUsage::kCompute: return "compute";
  }
  return "?";
}

const char* compute_status_name(ComputeStatus s) {
  switch (s) {
    case ComputeStatus::kSuccess: return "success";
    case ComputeStatus::kFailed: return "failed";
    case ComputeStatus::kAllocFailed: return "alloc failed";
    case ComputeStatus::kAborted: return "aborted";
  }
  return "?";
}

const char* device_type_name(DeviceType t) {
  switch (t) {
    case DeviceType::kCpu: return "CPU";
    case DeviceType::kGpu: return "GPU";
    case DeviceType::kIgpu: return "IGPU";
    case DeviceType::kAccel: return "ACCEL";
  }
  return "?";
}

bool Guid::operator==(const Guid& o) const { return std::memcmp(bytes, o.bytes, sizeof bytes) == 0; }

// ---------------------------------------------------------------------------------------------------------------
// BufferType

size_t BufferType::alloc_size(const Tensor& t) const { return nbytes(t); }

namespace {
// The valid dummy returned for zero-size allocations: null base, every operation a no-op (docs/interfaces.md).
class ZeroSizeBuffer final : public Buffer {
 public:
  explicit ZeroSizeBuffer(BufferType* type) : Buffer(type, 0) {}
  void* base() override { return nullptr; }
  void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
  void set_tensor(Tensor&, const void*, size_t, size_t) override {}
  void get_tensor(const Tensor&, void*, size_t, size_t) override {}
  void clear(uint8_t) override {}
};
}  // namespace

Result<std::unique_ptr<Buffer>> BufferType::alloc_buffer(size_t size) {
  if (size == 0) return std::unique_ptr<Buffer>(std::make_unique<ZeroSizeBuffer>(this));
  if (size > max_size()) {
    return TS_ERROR(StatusCode::kAllocFailed, "%s: cannot allocate %zu bytes: above the maximum allocation size %zu",
                    name(), size, max_size());
  }
  if (size > SIZE_MAX - alignment()) {  // every implementation rounds up to the alignment: that must not wrap
    return TS_ERROR(StatusCode::kAllocFailed, "%s: cannot allocate %zu bytes: the size overflows", name(), size);
  }
  Result<std::unique_ptr<Buffer>> r = do_alloc_buffer(size);
  if (!r.ok()) return r.status();
  if (r.value() == nullptr || r.value()->base() == nullptr) {
    return TS_ERROR(StatusCode::kAllocFailed, "%s: allocation of %zu bytes returned no memory", name(), size);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// MultiBuffer

namespace {
size_t total_size(const std::vector<std::unique_ptr<Buffer>>& parts) {
  size_t s = 0;
  for (const auto& p : parts) s += p->size();
  return s;
}
}  // namespace

MultiBuffer::MultiBuffer(std::vector<std::unique_ptr<Buffer>> parts)
    : Buffer(parts.empty() ? nullptr : parts.front()->type(), total_size(parts)), parts_(std::move(parts)) {}

void MultiBuffer::set_usage(BufferUsage usage) {
  Buffer::set_usage(usage);
  for (auto& p : parts_) p->set_usage(usage);
}
// Tensors live in the parts and never in the multi-buffer itself (its base is null, so tensor_alloc refuses it):
// byte-range operations always go to a part, and these are never reached.
void MultiBuffer::memset_tensor(Tensor&, uint8_t, size_t, size_t) {}
void MultiBuffer::set_tensor(Tensor&, const void*, size_t, size_t) {}
void MultiBuffer::get_tensor(const Tensor&, void*, size_t, size_t) {}
void MultiBuffer::clear(uint8_t value) {
  for (auto& p : parts_) p->clear(value);
}
void MultiBuffer::reset() {
  for (auto& p : parts_) p->reset();
}

// ---------------------------------------------------------------------------------------------------------------
// HostBuffer

void HostBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  std::memset(static_cast<char*>(t.data) + offset, value, size);
}
void HostBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  std::memcpy(static_cast<char*>(t.data) + offset, data, size);
}
void HostBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  std::memcpy(data, static_cast<const char*>(t.data) + offset, size);
}
bool HostBuffer::cpy_tensor(const Tensor& src, Tensor& dst) {
  Buffer* sb = tensor_buffer(src);
  if (sb == nullptr || !sb->is_host()) return false;
  std::memcpy(dst.data, src.data, nbytes(src));
  return true;
}
void HostBuffer::clear(uint8_t value) {
  if (base_ != nullptr) std::memset(base_, value, size());
}

// ---------------------------------------------------------------------------------------------------------------
// Backend defaults

BufferType* Backend::default_buffer_type() const { return device()->buffer_type(); }

void Backend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  tensor_buffer(t)->set_tensor(t, data, offset, size);
}
void Backend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  tensor_buffer(t)->get_tensor(t, data, offset, size);
}

ComputeStatus Backend::graph_compute(Graph& graph) {
  ComputeStatus s = graph_compute_async(graph);
  const Status sync = synchronize();
  if (s == ComputeStatus::kSuccess && !sync.ok()) {
    set_last_error(sync.message());
    return ComputeStatus::kFailed;
  }
  return s;
}

Result<std::unique_ptr<GraphPlan>> Backend::plan_create(const Graph&) {
  return TS_ERROR(StatusCode::kUnsupported, "backend %s has no graph plans", name());
}
ComputeStatus Backend::plan_compute(GraphPlan&) {
  set_last_error(format_message("backend %s has no graph plans", name()));
  return ComputeStatus::kFailed;
}

bool Backend::supports_op(const Tensor& op) const { return device()->supports_op(op); }
bool Backend::supports_buft(const BufferType& buft) const { return device()->supports_buft(buft); }
bool Backend::offload_op(const Tensor& op) const { return device()->offload_op(op); }

int64_t ggml_offload_batch_size(const Tensor& op) {
  switch (op.op) {
    case Op::kGetRows: return 0;
    case Op::kMulMat: return op.ne[1];
    case Op::kMulMatId:
    case Op::kRope: return op.ne[2];
    default: return op.ne[1] * op.ne[2] * op.ne[3];
  }
}

// Events are only created by devices that support them, so a backend without events never receives one.
void Backend::event_record(Event& event) { event.record(*this); }
void Backend::event_wait(Event& event) { event.wait(*this); }

// ---------------------------------------------------------------------------------------------------------------
// Device defaults

DeviceProps Device::props() const {
  DeviceProps p;
  p.name = name();
  p.description = description();
  memory(&p.memory_free, &p.memory_total);
  p.type = type();
  p.caps = caps();
  return p;
}

Result<std::unique_ptr<Buffer>> Device::buffer_from_host_ptr(void*, size_t, size_t) {
  return TS_ERROR(StatusCode::kUnsupported, "device %s cannot wrap host memory in a buffer", name());
}

// ---------------------------------------------------------------------------------------------------------------
// Free functions

Buffer* tensor_buffer(const Tensor& t) {
  if (t.buffer != nullptr) return t.buffer;
  if (t.view_src != nullptr) return t.view_src->buffer;
  return nullptr;
}

namespace {
Status check_range(const Tensor& t, const char* what, size_t offset, size_t size, bool need_data = true) {
  Buffer* b = tensor_buffer(t);
  if (b == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: tensor %s is not allocated (no buffer)", what,
                    describe(t).c_str());
  }
  if (need_data && t.data == nullptr && size != 0) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: tensor %s has a buffer but no data address", what,
                    describe(t).c_str());
  }
  const size_t n = nbytes(t);
  if (offset > n || size > n - offset) {
    return TS_ERROR(StatusCode::kOutOfRange, "%s: bytes [%zu, %zu) are outside tensor %s (%zu bytes)", what, offset,
                    offset + size, describe(t).c_str(), n);
  }
  return Status::Ok();
}
}  // namespace

Status tensor_set(Tensor& t, const void* data, size_t offset, size_t size) {
  TS_RETURN_IF_ERROR(check_range(t, "tensor_set", offset, size));
  if (size == 0) return Status::Ok();
  if (data == nullptr)
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_set: null data for %s", describe(t).c_str());
  tensor_buffer(t)->set_tensor(t, data, offset, size);
  return Status::Ok();
}

Status tensor_get(const Tensor& t, void* data, size_t offset, size_t size) {
  TS_RETURN_IF_ERROR(check_range(t, "tensor_get", offset, size));
  if (size == 0) return Status::Ok();
  if (data == nullptr)
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_get: null data for %s", describe(t).c_str());
  tensor_buffer(t)->get_tensor(t, data, offset, size);
  return Status::Ok();
}

Status tensor_memset(Tensor& t, uint8_t value, size_t offset, size_t size) {
  TS_RETURN_IF_ERROR(check_range(t, "tensor_memset", offset, size));
  if (size == 0) return Status::Ok();
  tensor_buffer(t)->memset_tensor(t, value, offset, size);
  return Status::Ok();
}

Status tensor_set_async(Backend& backend, Tensor& t, const void* data, size_t offset, size_t size) {
  TS_RETURN_IF_ERROR(check_range(t, "tensor_set_async", offset, size));
  if (size == 0) return Status::Ok();
  if (data == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_set_async: null data for %s", describe(t).c_str());
  }
  backend.set_tensor_async(t, data, offset, size);
  return Status::Ok();
}

Status tensor_get_async(Backend& backend, const Tensor& t, void* data, size_t offset, size_t size) {
  TS_RETURN_IF_ERROR(check_range(t, "tensor_get_async", offset, size));
  if (size == 0) return Status::Ok();
  if (data == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_get_async: null data for %s", describe(t).c_str());
  }
  backend.get_tensor_async(t, data, offset, size);
  return Status::Ok();
}

namespace {
Status check_copy(const Tensor& src, const Tensor& dst, const char* what) {
  if (!same_layout(src, dst)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: layouts differ: %s -> %s", what, describe(src).c_str(),
                    describe(dst).c_str());
  }
  TS_RETURN_IF_ERROR(check_range(src, what, 0, nbytes(src)));
  return check_range(dst, what, 0, nbytes(dst));
}
}  // namespace

Status tensor_copy(const Tensor& src, Tensor& dst) {
  TS_RETURN_IF_ERROR(check_copy(src, dst, "tensor_copy"));
  if (&src == &dst || nbytes(src) == 0) return Status::Ok();
  Buffer* sb = tensor_buffer(src);
  Buffer* db = tensor_buffer(dst);
  const size_t n = nbytes(src);
  if (sb->is_host()) {
    db->set_tensor(dst, src.data, 0, n);
  } else if (db->is_host()) {
    sb->get_tensor(src, dst.data, 0, n);
  } else if (!db->cpy_tensor(src, dst)) {
    std::vector<uint8_t> staging(n);
    sb->get_tensor(src, staging.data(), 0, n);
    db->set_tensor(dst, staging.data(), 0, n);
  }
  return Status::Ok();
}

Status tensor_copy_async(Backend& src_backend, Backend& dst_backend, const Tensor& src, Tensor& dst) {
  TS_RETURN_IF_ERROR(check_copy(src, dst, "tensor_copy_async"));
  if (&src == &dst) return Status::Ok();
  if (dst_backend.cpy_tensor_async(&src_backend, src, dst)) return Status::Ok();
  // No native async copy: make both queues idle, then copy blocking.
  TS_RETURN_IF_ERROR(src_backend.synchronize());
  TS_RETURN_IF_ERROR(dst_backend.synchronize());
  return tensor_copy(src, dst);
}

Status tensor_alloc(Buffer& buffer, Tensor& t, void* addr) {
  if (t.buffer != nullptr || t.data != nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_alloc: %s is already allocated", describe(t).c_str());
  }
  if (t.view_src != nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_alloc: %s is a view; use view_init", describe(t).c_str());
  }
  const size_t need = buffer.type()->alloc_size(t);
  char* base = static_cast<char*>(buffer.base());
  if (need > 0 && (base == nullptr || static_cast<char*>(addr) < base ||
                   static_cast<size_t>(static_cast<char*>(addr) - base) > buffer.size() ||
                   need > buffer.size() - static_cast<size_t>(static_cast<char*>(addr) - base))) {
    return TS_ERROR(StatusCode::kOutOfRange, "tensor_alloc: %s (%zu bytes) does not fit buffer %s (%zu bytes) at %p",
                    describe(t).c_str(), need, buffer.type()->name(), buffer.size(), addr);
  }
  t.buffer = &buffer;
  t.data = addr;
  Status s = buffer.init_tensor(t);
  if (!s.ok()) {
    t.buffer = nullptr;
    t.data = nullptr;
  }
  return s;
}

Status view_init(Tensor& t) {
  if (t.view_src == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "view_init: %s is not a view", describe(t).c_str());
  }
  Buffer* b = t.view_src->buffer;
  if (b == nullptr || (t.view_src->data == nullptr && nbytes(*t.view_src) != 0)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "view_init: the source of view %s is not allocated",
                    describe(t).c_str());
  }
  Buffer* const old_buffer = t.buffer;
  void* const old_data = t.data;
  t.buffer = b;
  t.data = static_cast<char*>(t.view_src->data) + t.view_offs;
  Status s = b->init_tensor(t);
  if (!s.ok()) {  // a refused view is left as it was (not pointing into a buffer that may be freed next)
    t.buffer = old_buffer;
    t.data = old_data;
  }
  return s;
}

}  // namespace tessera
