// HostDev (hostdev.h): buffers, buffer type, backend, device and registration.
#include "hostdev.h"

#include <cstdlib>
#include <string>

#include "tessera/cpu.h"

namespace hostdev {

namespace {

using tessera::Backend;
using tessera::BackendReg;
using tessera::Buffer;
using tessera::BufferType;
using tessera::ComputeStatus;
using tessera::Device;
using tessera::DeviceCaps;
using tessera::DeviceType;
using tessera::Graph;
using tessera::Guid;
using tessera::Result;
using tessera::StatusCode;
using tessera::Tensor;

constexpr Guid kGuid = {{'h', 'o', 's', 't', 'd', 'e', 'v', '-', 'c', 'o', 'n', 's', 'u', 'm', 'e', 'r'}};
// What the device reports as its memory: the buffer type allocates from the heap, so this is a budget for the
// scheduler and the placement policies, not a hard limit.
constexpr size_t kMemory = size_t{1} << 30;

// Host memory owned by the buffer; the byte-range operations are HostBuffer's memcpy / memset.
class HostDevBuffer final : public tessera::HostBuffer {
 public:
  HostDevBuffer(BufferType* type, void* mem, size_t size) : HostBuffer(type, mem, size) {}
  ~HostDevBuffer() override { std::free(base()); }
};

class HostDevBufferType final : public BufferType {
 public:
  explicit HostDevBufferType(Device* device) : device_(device) {}
  const char* name() const override { return "HOSTDEV"; }
  size_t alignment() const override { return kAlignment; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    void* mem = std::aligned_alloc(kAlignment, (size + kAlignment - 1) / kAlignment * kAlignment);
    if (mem == nullptr) return TS_ERROR(StatusCode::kAllocFailed, "HOSTDEV: out of memory allocating %zu bytes", size);
    return std::unique_ptr<Buffer>(std::make_unique<HostDevBuffer>(this, mem, size));
  }

 private:
  Device* device_;
};

// A stream of the device. Compute is synchronous: the CPU backend it delegates to has finished when it returns.
class HostDevBackend final : public Backend {
 public:
  explicit HostDevBackend(Device* device) : device_(device) {
    tessera::cpu::CpuBackendParams params;
    params.kernels = tessera::cpu::CpuKernels::kReference;
    cpu_ = tessera::cpu::make_backend(params);
  }
  const char* name() const override { return "HOSTDEV"; }
  Guid guid() const override { return kGuid; }
  Device* device() const override { return device_; }

  ComputeStatus graph_compute_async(Graph& graph) override {
    const ComputeStatus status = cpu_->graph_compute(graph);
    set_last_error(status == ComputeStatus::kSuccess ? std::string() : "HOSTDEV: " + cpu_->last_error());
    return status;
  }

 private:
  Device* device_;
  std::unique_ptr<Backend> cpu_;
};

class HostDevDevice final : public Device {
 public:
  explicit HostDevDevice(BackendReg* reg) : reg_(reg), buft_(this) {}
  const char* name() const override { return "HOSTDEV"; }
  const char* description() const override { return "host memory, computed by the CPU reference kernels"; }
  void memory(size_t* free, size_t* total) const override {
    if (free != nullptr) *free = kMemory;
    if (total != nullptr) *total = kMemory;
  }
  DeviceType type() const override { return DeviceType::kAccel; }
  DeviceCaps caps() const override { return {}; }  // synchronous, no events, no host-pointer buffers
  BackendReg* reg() const override { return reg_; }

  Result<std::unique_ptr<Backend>> init_backend(const std::string& params) override {
    if (!params.empty()) {
      return TS_ERROR(StatusCode::kInvalidArgument, "HOSTDEV takes no backend parameters (got \"%s\")", params.c_str());
    }
    return std::unique_ptr<Backend>(std::make_unique<HostDevBackend>(this));
  }
  BufferType* buffer_type() override { return &buft_; }

  // Exactly what the CPU reference kernels compute.
  bool supports_op(const Tensor& op) const override { return tessera::cpu::device()->supports_op(op); }
  // The kernels read and write through host pointers, so any host memory will do.
  bool supports_buft(const BufferType& buft) const override { return buft.is_host(); }

 private:
  BackendReg* reg_;
  HostDevBufferType buft_;
};

class HostDevReg final : public BackendReg {
 public:
  HostDevReg() : device_(std::make_unique<HostDevDevice>(this)) {}
  const char* name() const override { return "HostDev"; }
  size_t device_count() const override { return 1; }
  Device* device(size_t i) const override { return i == 0 ? device_.get() : nullptr; }

 private:
  std::unique_ptr<HostDevDevice> device_;
};

}  // namespace

std::unique_ptr<BackendReg> make_registration() { return std::make_unique<HostDevReg>(); }

bool is_hostdev(const Backend& backend) { return backend.guid() == kGuid; }

}  // namespace hostdev
