// Backend interfaces (docs/interfaces.md): buffer types, buffers, backends (streams), events, devices, registrations.
// Optional capabilities have defaults (return false / nullptr / Unsupported) rather than null function pointers.
// Ownership: the caller owns buffers, backends and events (unique_ptr); a registration owns its devices, and a device
// owns its buffer types.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/graph.h"
#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera {

class Backend;
class BackendReg;
class Buffer;
class Device;
class Event;

enum class BufferUsage { kAny = 0, kWeights, kCompute };
const char* buffer_usage_name(BufferUsage usage);

// ---------------------------------------------------------------------------------------------------------------
// Buffer type: a kind of memory.
class BufferType {
 public:
  virtual ~BufferType() = default;

  virtual const char* name() const = 0;
  virtual size_t alignment() const = 0;
  // Largest single allocation (SIZE_MAX = unlimited).
  virtual size_t max_size() const { return SIZE_MAX; }
  // Bytes a tensor needs in this type (>= nbytes; a backend may pad).
  virtual size_t alloc_size(const Tensor& t) const;
  // Directly addressable by the CPU.
  virtual bool is_host() const { return false; }
  virtual Device* device() const = 0;

  // Allocates a buffer. size 0 gives a valid dummy buffer with a null base; size > max_size() and a failed
  // allocation give an error status (never an abort).
  Result<std::unique_ptr<Buffer>> alloc_buffer(size_t size);

 protected:
  // Called with 0 < size <= max_size(); must return a buffer with a non-null base or an error.
  virtual Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) = 0;
};

// ---------------------------------------------------------------------------------------------------------------
// Buffer: one allocation of a buffer type. The byte-range methods are raw: the free functions below check bounds
// before calling them.
class Buffer {
 public:
  Buffer(BufferType* type, size_t size) : type_(type), size_(size) {}
  virtual ~Buffer() = default;
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  BufferType* type() const { return type_; }
  size_t size() const { return size_; }
  size_t alignment() const { return type_->alignment(); }
  bool is_host() const { return type_->is_host(); }
  // Base address of the allocation (null only for a zero-size buffer). For non-host memory this is an opaque
  // device address, usable only for offsets.
  virtual void* base() = 0;

  BufferUsage usage() const { return usage_; }
  virtual void set_usage(BufferUsage usage) { usage_ = usage; }

  // Hook called when a tensor is placed in this buffer.
  virtual Status init_tensor(Tensor& /*t*/) { return Status::Ok(); }
  virtual void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) = 0;
  virtual void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) = 0;
  virtual void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) = 0;
  // Copies src into dst (dst in this buffer); false when it cannot copy from src's buffer.
  virtual bool cpy_tensor(const Tensor& /*src*/, Tensor& /*dst*/) { return false; }
  virtual void clear(uint8_t value) = 0;
  virtual void reset() {}
  // Multi-buffers wrap several parts (docs/interfaces.md, 'Multi-buffers').
  virtual bool is_multi() const { return false; }

 private:
  BufferType* type_;
  size_t size_;
  BufferUsage usage_ = BufferUsage::kAny;
};

// A buffer made of several buffers (e.g. weights above the type's max size). Freeing, clearing, resetting and
// setting the usage apply to every part; tensors live in the parts. base() is null.
class MultiBuffer final : public Buffer {
 public:
  explicit MultiBuffer(std::vector<std::unique_ptr<Buffer>> parts);
  void* base() override { return nullptr; }
  void set_usage(BufferUsage usage) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  void clear(uint8_t value) override;
  void reset() override;
  bool is_multi() const override { return true; }
  size_t part_count() const { return parts_.size(); }
  Buffer* part(size_t i) const { return parts_[i].get(); }

 private:
  std::vector<std::unique_ptr<Buffer>> parts_;
};

// Helper for host-memory buffers: byte-range ops are memcpy/memset on base() + tensor offset. Owns nothing; derived
// classes decide where the memory comes from.
class HostBuffer : public Buffer {
 public:
  HostBuffer(BufferType* type, void* base, size_t size) : Buffer(type, size), base_(base) {}
  void* base() override { return base_; }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  bool cpy_tensor(const Tensor& src, Tensor& dst) override;  // from any host buffer
  void clear(uint8_t value) override;

 private:
  void* base_;
};

// ---------------------------------------------------------------------------------------------------------------
// Backend: an execution stream on a device.
enum class ComputeStatus { kSuccess = 0, kFailed, kAllocFailed, kAborted };
const char* compute_status_name(ComputeStatus s);

// Identifies a backend implementation (all CPU backends share one guid).
struct Guid {
  uint8_t bytes[16];
  bool operator==(const Guid& o) const;
  bool operator!=(const Guid& o) const { return !(*this == o); }
};

// Optional precompiled form of a graph for repeated computation.
class GraphPlan {
 public:
  virtual ~GraphPlan() = default;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual const char* name() const = 0;
  virtual Guid guid() const = 0;
  virtual Device* device() const = 0;
  BufferType* default_buffer_type() const;

  // Asynchronous tensor I/O. Defaults: the synchronous buffer operation. Bounds are checked by the free functions.
  virtual void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size);
  virtual void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size);
  // Asynchronous copy between backends (this is dst's backend). false when unsupported: the caller falls back.
  // Ordering contract (the scheduler relies on it): the copy happens after all work already submitted to
  // src_backend and to this backend; later work of this backend sees the copied data; later work of src_backend
  // does not start before the copy has read its source. (A CUDA implementation: event on src, wait on dst, copy on
  // dst, event on dst, wait on src.)
  virtual bool cpy_tensor_async(Backend* /*src_backend*/, const Tensor& /*src*/, Tensor& /*dst*/) { return false; }
  // Waits until all queued work is done. An error when queued work failed after the call that queued it had
  // returned (an asynchronous compute or copy): the failure is reported once, by the first synchronize (or compute)
  // after it happened, never by a later one.
  virtual Status synchronize() { return Status::Ok(); }

  // Computes the graph; may return before the work is done (then synchronize waits, and reports a failure of the
  // work). The status says whether the work was accepted/completed; the message (last_error) says why not.
  virtual ComputeStatus graph_compute_async(Graph& graph) = 0;
  // graph_compute_async + synchronize: a failure while the work ran is this call's failure.
  ComputeStatus graph_compute(Graph& graph);
  // Why the last compute did not succeed (empty after success).
  const std::string& last_error() const { return last_error_; }

  // Graph plans (optional).
  virtual Result<std::unique_ptr<GraphPlan>> plan_create(const Graph& graph);
  virtual ComputeStatus plan_compute(GraphPlan& plan);

  // Capability queries; defaults ask the device.
  virtual bool supports_op(const Tensor& op) const;
  virtual bool supports_buft(const BufferType& buft) const;
  virtual bool offload_op(const Tensor& op) const;

  // Events (only when the device has them).
  virtual void event_record(Event& event);
  virtual void event_wait(Event& event);

 protected:
  void set_last_error(std::string msg) { last_error_ = std::move(msg); }

 private:
  std::string last_error_;
};

// ---------------------------------------------------------------------------------------------------------------
// Event: a point in a backend's queue.
class Event {
 public:
  explicit Event(Device* device) : device_(device) {}
  virtual ~Event() = default;
  Device* device() const { return device_; }
  // Marks the current end of backend's queue.
  virtual void record(Backend& backend) = 0;
  // Blocks the host until the recorded point is reached.
  virtual void synchronize() = 0;
  // Makes backend's later work wait for the recorded point without blocking the host.
  virtual void wait(Backend& backend) = 0;

 private:
  Device* device_;
};

// ---------------------------------------------------------------------------------------------------------------
// Device.
enum class DeviceType { kCpu = 0, kGpu, kIgpu, kAccel };
const char* device_type_name(DeviceType t);

struct DeviceCaps {
  bool async = false;                 // asynchronous compute and tensor I/O
  bool host_buffer = false;           // has a pinned host buffer type
  bool buffer_from_host_ptr = false;  // can wrap host memory it does not own
  bool events = false;                // event_new returns events
};

struct DeviceProps {
  std::string name;
  std::string description;
  size_t memory_free = 0;
  size_t memory_total = 0;
  DeviceType type = DeviceType::kCpu;
  DeviceCaps caps;
};

class Device {
 public:
  virtual ~Device() = default;

  virtual const char* name() const = 0;
  virtual const char* description() const = 0;
  virtual void memory(size_t* free, size_t* total) const = 0;
  virtual DeviceType type() const = 0;
  virtual DeviceCaps caps() const = 0;
  DeviceProps props() const;
  virtual BackendReg* reg() const = 0;

  // params: backend-specific text (may be empty).
  virtual Result<std::unique_ptr<Backend>> init_backend(const std::string& params = {}) = 0;
  virtual BufferType* buffer_type() = 0;
  virtual BufferType* host_buffer_type() { return nullptr; }
  // Extra buffer types for weights (ggml's extra buffer types, e.g. a repacked CPU layout): the device's kernels read
  // them (supports_buft), and supports_op may refuse an op whose source sits in one (docs/interfaces.md).
  virtual std::vector<BufferType*> extra_buffer_types() { return {}; }
  // Wraps memory the device does not own (the buffer never frees it).
  virtual Result<std::unique_ptr<Buffer>> buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size);

  virtual bool supports_op(const Tensor& op) const = 0;
  virtual bool supports_buft(const BufferType& buft) const = 0;
  // The device's wish to take an op whose weights are in host memory (e.g. large batches).
  virtual bool offload_op(const Tensor& /*op*/) const { return false; }
  // nullptr when the device has no events.
  virtual std::unique_ptr<Event> event_new() { return nullptr; }
};

// ---------------------------------------------------------------------------------------------------------------
// Registration: a family of devices plus named extension functions.
class BackendReg {
 public:
  virtual ~BackendReg() = default;
  virtual const char* name() const = 0;
  virtual size_t device_count() const = 0;
  virtual Device* device(size_t i) const = 0;
  // Extension functions by name ("set_n_threads", "extra_bufts", ...); nullptr when unknown.
  virtual void* get_proc_address(const char* /*name*/) const { return nullptr; }
};

// Signatures of well-known extension functions.
using SetNThreadsFn = void (*)(Backend* backend, int n_threads);
using SetAbortCallbackFn = void (*)(Backend* backend, bool (*callback)(void* user), void* user);
// Row split (ggml's "ggml_backend_split_buffer_type", llama.cpp's -sm row; docs/interfaces.md "Split buffer types"):
// a registration whose devices can share a matrix by rows offers both functions by these names.
// SplitBufferTypeFn: the buffer type that splits each tensor's rows over the registration's GPUs (its devices that are
// not CPUs, in order) by `tensor_split` (n raw shares, missing ones 0; all zero: by each GPU's total memory), with
// `main_device` the device whose backend computes the MUL_MATs reading it. Owned by the registration (the same
// pointer for the same arguments); nullptr when main_device is not one of its GPUs.
// SplitBytesFn: the bytes a tensor of such a buffer type takes on `device` (0 when none of its rows are there).
// SplitRowsFn: the rows [*low, *high) of the tensor on `device` (false when `split` is no such buffer type).
constexpr const char* kSplitBufferTypeProc = "split_buffer_type";
constexpr const char* kSplitBytesProc = "split_buffer_bytes";
constexpr const char* kSplitRowsProc = "split_buffer_rows";
using SplitBufferTypeFn = BufferType* (*)(Device* main_device, const float* tensor_split, size_t n);
using SplitBytesFn = size_t (*)(const BufferType& split, const Tensor& t, const Device& device);
using SplitRowsFn = bool (*)(const BufferType& split, const Tensor& t, const Device& device, int64_t* low,
                             int64_t* high);

// ---------------------------------------------------------------------------------------------------------------
// Free functions with bounds checks (docs/interfaces.md, 'Tensor I/O and copies'). Errors name the tensor.
// Byte range [offset, offset + size) of t's nbytes; t must be allocated (in a buffer, directly or through view_src).
Status tensor_set(Tensor& t, const void* data, size_t offset, size_t size);
Status tensor_get(const Tensor& t, void* data, size_t offset, size_t size);
Status tensor_memset(Tensor& t, uint8_t value, size_t offset, size_t size);
// Same as above through a backend's async I/O.
Status tensor_set_async(Backend& backend, Tensor& t, const void* data, size_t offset, size_t size);
Status tensor_get_async(Backend& backend, const Tensor& t, void* data, size_t offset, size_t size);
// Whole-tensor copy between buffers (same layout required): set if src is host, get if dst is host, else dst
// buffer's cpy_tensor, else staged through host memory.
Status tensor_copy(const Tensor& src, Tensor& dst);
// Asynchronous copy: dst_backend's cpy_tensor_async, else synchronize both backends and copy blocking.
Status tensor_copy_async(Backend& src_backend, Backend& dst_backend, const Tensor& src, Tensor& dst);

// Places t at addr inside buffer (addr in [base, base + size - alloc_size]) and runs the buffer's init hook.
Status tensor_alloc(Buffer& buffer, Tensor& t, void* addr);
// Gives a view its buffer and data from its view_src (which must be allocated). When the buffer's init hook refuses
// it, the view is left as it was.
Status view_init(Tensor& t);
// The buffer holding t's bytes (t's own, else its view_src's); nullptr when unallocated.
Buffer* tensor_buffer(const Tensor& t);

// The batch an op works on as llama.cpp's CUDA backend counts it for op offload (ggml-cuda.cu get_op_batch_size):
// 0 for GET_ROWS (never worth a transfer), ne[1] for MUL_MAT, ne[2] for MUL_MAT_ID and ROPE, the rows
// (ne[1] x ne[2] x ne[3]) of any other op. The CUDA backend's offload_op and simulated devices with offload
// "batch": "ggml-cuda" compare it with their threshold.
int64_t ggml_offload_batch_size(const Tensor& op);

}  // namespace tessera
