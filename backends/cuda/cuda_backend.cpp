// The CUDA backend: buffer types (VRAM with accounting, pinned host), buffers, the backend (one stream + a cuBLAS
// handle), events, devices and the registration. Host C++ against the CUDA runtime; kernels live in kernels/*.cu.
//
// Every CUDA API error becomes an error status (or, where the interface returns void, a message on stderr naming the
// call and the tensor) with cudaGetErrorString's text. Zero devices (no GPU, no driver) is not an error.
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "cublas_loader.h"
#include "cuda_profile.h"
#include "kernels/kernels.h"
#include "tessera/cuda.h"

namespace tessera::cuda {

namespace {

constexpr Guid kCudaGuid = {
    {0x74, 0x65, 0x73, 0x73, 0x65, 0x72, 0x61, 0x2d, 0x63, 0x75, 0x64, 0x61, 0x00, 0x00, 0x00, 0x01}};

std::string cuda_error_text(cudaError_t e) {
  return format_message("%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
}

Status cuda_error(cudaError_t e, const char* what) {
  return TS_ERROR(StatusCode::kFailed, "CUDA: %s failed: %s", what, cuda_error_text(e).c_str());
}

// For interface methods that return void: report on stderr (the tensor and the call named), never abort.
void report(cudaError_t e, const char* what, const Tensor* t) {
  if (e == cudaSuccess) return;
  std::fprintf(stderr, "tessera CUDA: %s%s%s failed: %s\n", what, t ? " for " : "", t ? describe(*t).c_str() : "",
               cuda_error_text(e).c_str());
}

class CudaDevice;

// ---- buffers ----

// Device memory of one GPU. Synchronous operations use the per-thread default stream and wait for it; they do not
// order against the backends' streams (synchronize a backend before touching memory it may be using).
class CudaBuffer final : public Buffer {
 public:
  CudaBuffer(BufferType* type, int dev, void* ptr, size_t size, std::atomic<size_t>* accounting)
      : Buffer(type, size), dev_(dev), ptr_(ptr), accounting_(accounting) {}
  ~CudaBuffer() override {
    cudaSetDevice(dev_);
    report(cudaFree(ptr_), "cudaFree", nullptr);
    accounting_->fetch_sub(size());
  }
  void* base() override { return ptr_; }
  int device_index() const { return dev_; }

  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    cudaSetDevice(dev_);
    cudaError_t e = cudaMemsetAsync(static_cast<char*>(t.data) + offset, value, size, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    report(e, "memset_tensor", &t);
  }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    cudaSetDevice(dev_);
    cudaError_t e =
        cudaMemcpyAsync(static_cast<char*>(t.data) + offset, data, size, cudaMemcpyHostToDevice, cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    report(e, "set_tensor", &t);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    cudaSetDevice(dev_);
    cudaError_t e = cudaMemcpyAsync(data, static_cast<const char*>(t.data) + offset, size, cudaMemcpyDeviceToHost,
                                    cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    report(e, "get_tensor", &t);
  }
  // From any CUDA device buffer (same GPU: device-to-device; another GPU: peer copy).
  bool cpy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override {
    cudaSetDevice(dev_);
    cudaError_t e = cudaMemsetAsync(ptr_, value, size(), cudaStreamPerThread);
    if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
    report(e, "clear", nullptr);
  }

 private:
  int dev_;
  void* ptr_;
  std::atomic<size_t>* accounting_;
};

CudaBuffer* as_cuda_buffer(Buffer* b) { return dynamic_cast<CudaBuffer*>(b); }

bool CudaBuffer::cpy_tensor(const Tensor& src, Tensor& dst) {
  CudaBuffer* sb = as_cuda_buffer(tensor_buffer(src));
  if (sb == nullptr) return false;
  const size_t n = nbytes(src);
  cudaSetDevice(dev_);
  cudaError_t e = sb->dev_ == dev_
                      ? cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, cudaStreamPerThread)
                      : cudaMemcpyPeerAsync(dst.data, dev_, src.data, sb->dev_, n, cudaStreamPerThread);
  if (e == cudaSuccess) e = cudaStreamSynchronize(cudaStreamPerThread);
  report(e, "cpy_tensor", &dst);
  return e == cudaSuccess;
}

// Pinned (page-locked) host memory: host-addressable, fast to copy to and from the GPU.
class PinnedBuffer final : public HostBuffer {
 public:
  PinnedBuffer(BufferType* type, void* mem, size_t size) : HostBuffer(type, mem, size) {}
  ~PinnedBuffer() override { report(cudaFreeHost(base()), "cudaFreeHost", nullptr); }
};

class CudaBufferType final : public BufferType {
 public:
  CudaBufferType(Device* dev, int index, size_t total_memory)
      : device_(dev), index_(index), name_(format_message("CUDA%d", index)), total_(total_memory) {}
  const char* name() const override { return name_.c_str(); }
  size_t alignment() const override { return kCudaAlignment; }
  size_t max_size() const override {
    const size_t m = max_.load();
    return m != 0 ? m : (total_ != 0 ? total_ : SIZE_MAX);
  }
  Device* device() const override { return device_; }
  size_t allocated() const { return allocated_.load(); }
  void set_max(size_t bytes) { max_.store(bytes); }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    cudaError_t e = cudaSetDevice(index_);
    void* ptr = nullptr;
    if (e == cudaSuccess) e = cudaMalloc(&ptr, size);
    if (e != cudaSuccess) {
      cudaGetLastError();  // an out-of-memory error is not sticky: clear it
      return TS_ERROR(StatusCode::kAllocFailed, "%s: cudaMalloc of %zu bytes failed: %s", name_.c_str(), size,
                      cuda_error_text(e).c_str());
    }
    allocated_.fetch_add(size);
    return std::unique_ptr<Buffer>(std::make_unique<CudaBuffer>(this, index_, ptr, size, &allocated_));
  }

 private:
  Device* device_;
  int index_;
  std::string name_;
  size_t total_;
  std::atomic<size_t> max_{0};
  std::atomic<size_t> allocated_{0};
};

class PinnedBufferType final : public BufferType {
 public:
  PinnedBufferType(Device* dev, int index) : device_(dev), name_(format_message("CUDA%d_Host", index)) {}
  const char* name() const override { return name_.c_str(); }
  size_t alignment() const override { return 64; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    void* ptr = nullptr;
    const cudaError_t e = cudaMallocHost(&ptr, size);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return TS_ERROR(StatusCode::kAllocFailed, "%s: cudaMallocHost of %zu bytes failed: %s", name_.c_str(), size,
                      cuda_error_text(e).c_str());
    }
    return std::unique_ptr<Buffer>(std::make_unique<PinnedBuffer>(this, ptr, size));
  }

 private:
  Device* device_;
  std::string name_;
};

// ---- backend ----

class CudaBackend;
CudaBackend* as_cuda_backend(Backend* b);

class CudaBackend final : public Backend {
 public:
  CudaBackend(CudaDevice* dev, int index, int64_t offload_min_batch)
      : device_(dev),
        index_(index),
        offload_min_batch_(offload_min_batch),
        name_(format_message("CUDA%d", index)),
        profiler_(name_) {}
  ~CudaBackend() override {
    cudaSetDevice(index_);
    if (stream_ != nullptr) report(cudaStreamSynchronize(stream_), "cudaStreamSynchronize", nullptr);
    if (cublas_ != nullptr) cublasDestroy(cublas_);
    if (copy_event_ != nullptr) cudaEventDestroy(copy_event_);
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    if (index_error_ != nullptr) cudaFreeHost(index_error_);
    if (pool_ != nullptr) cudaMemPoolDestroy(pool_);
  }

  Status init() {
    cudaError_t e = cudaSetDevice(index_);
    if (e != cudaSuccess) return cuda_error(e, "cudaSetDevice");
    if ((e = cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)) != cudaSuccess) {
      return cuda_error(e, "cudaStreamCreateWithFlags");
    }
    if ((e = cudaEventCreateWithFlags(&copy_event_, cudaEventDisableTiming)) != cudaSuccess) {
      return cuda_error(e, "cudaEventCreateWithFlags");
    }
    if ((e = cudaHostAlloc(reinterpret_cast<void**>(&index_error_), sizeof(kernels::IndexError),
                           cudaHostAllocMapped)) != cudaSuccess) {
      return cuda_error(e, "cudaHostAlloc (index error word)");
    }
    std::memset(index_error_, 0, sizeof *index_error_);
    if ((e = cudaHostGetDevicePointer(reinterpret_cast<void**>(&index_error_dev_), index_error_, 0)) != cudaSuccess) {
      return cuda_error(e, "cudaHostGetDevicePointer");
    }
    const cublasStatus_t cs = cublasCreate(&cublas_);
    if (cs != CUBLAS_STATUS_SUCCESS) {
      cublas_ = nullptr;
      const std::string why = cublas_load_error();  // "" unless libcublas could not be loaded (cublas_loader.h)
      return TS_ERROR(StatusCode::kFailed, "CUDA%d: cublasCreate failed (status %d)%s%s", index_, static_cast<int>(cs),
                      why.empty() ? "" : ": ", why.c_str());
    }
    cublasSetStream(cublas_, stream_);
    // Scratch memory (dequantized weights, split attention states) comes from a pool of this backend that keeps its
    // memory between graphs: the default pool returns it to the driver at every synchronize, and mapping it again
    // cost hundreds of microseconds per node (measured on an H200, bench/RESULTS.md).
    cudaMemPoolProps props = {};
    props.allocType = cudaMemAllocationTypePinned;
    props.location.type = cudaMemLocationTypeDevice;
    props.location.id = index_;
    if ((e = cudaMemPoolCreate(&pool_, &props)) != cudaSuccess) {
      pool_ = nullptr;
      return cuda_error(e, "cudaMemPoolCreate");
    }
    uint64_t keep = UINT64_MAX;
    cudaMemPoolSetAttribute(pool_, cudaMemPoolAttrReleaseThreshold, &keep);
    int sms = 1;
    cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, index_);
    sm_count_ = sms;
    return Status::Ok();
  }

  const char* name() const override { return name_.c_str(); }
  Guid guid() const override { return kCudaGuid; }
  Device* device() const override;
  cudaStream_t stream() const { return stream_; }
  int index() const { return index_; }
  int64_t offload_min_batch() const { return offload_min_batch_; }

  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override {
    if (as_cuda_buffer(tensor_buffer(t)) == nullptr) return Backend::set_tensor_async(t, data, offset, size);
    cudaSetDevice(index_);
    report(cudaMemcpyAsync(static_cast<char*>(t.data) + offset, data, size, cudaMemcpyHostToDevice, stream_),
           "set_tensor_async", &t);
  }
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override {
    if (as_cuda_buffer(tensor_buffer(t)) == nullptr) return Backend::get_tensor_async(t, data, offset, size);
    cudaSetDevice(index_);
    report(cudaMemcpyAsync(data, static_cast<const char*>(t.data) + offset, size, cudaMemcpyDeviceToHost, stream_),
           "get_tensor_async", &t);
  }

  // Device-to-device (same GPU) or peer copy between two CUDA backends, ordered as backend.h requires: event on
  // the source stream, wait on this stream, copy on this stream, event on this stream, wait on the source stream.
  bool cpy_tensor_async(Backend* src_backend, const Tensor& src, Tensor& dst) override {
    CudaBackend* sbk = as_cuda_backend(src_backend);
    CudaBuffer* sbuf = as_cuda_buffer(tensor_buffer(src));
    CudaBuffer* dbuf = as_cuda_buffer(tensor_buffer(dst));
    if (sbk == nullptr || sbuf == nullptr || dbuf == nullptr) return false;
    if (sbuf->device_index() != sbk->index_ || dbuf->device_index() != index_) return false;
    const size_t n = nbytes(src);
    cudaError_t e = cudaSuccess;
    if (sbk != this) {
      cudaSetDevice(sbk->index_);
      e = cudaEventRecord(sbk->copy_event_, sbk->stream_);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(stream_, sbk->copy_event_, 0);
    }
    cudaSetDevice(index_);
    if (e == cudaSuccess) {
      e = sbk->index_ == index_ ? cudaMemcpyAsync(dst.data, src.data, n, cudaMemcpyDeviceToDevice, stream_)
                                : cudaMemcpyPeerAsync(dst.data, index_, src.data, sbk->index_, n, stream_);
    }
    if (sbk != this) {
      if (e == cudaSuccess) e = cudaEventRecord(copy_event_, stream_);
      if (e == cudaSuccess) e = cudaStreamWaitEvent(sbk->stream_, copy_event_, 0);
    }
    if (e != cudaSuccess) {
      // The copy may not have been enqueued: leave both streams idle so the caller's blocking fallback is safe.
      report(e, "cpy_tensor_async", &dst);
      cudaGetLastError();
      // (a failure of earlier work, if any, is the same error just reported)
      (void)sbk->synchronize();
      (void)synchronize();
      return false;
    }
    return true;
  }

  Status synchronize() override {
    cudaSetDevice(index_);
    const cudaError_t e = cudaStreamSynchronize(stream_);
    if (e == cudaSuccess) return Status::Ok();
    return TS_ERROR(StatusCode::kFailed, "CUDA%d: queued work failed: %s", index_, cuda_error_text(e).c_str());
  }

  ComputeStatus graph_compute_async(Graph& graph) override {
    set_last_error({});
    cudaError_t e = cudaSetDevice(index_);
    if (e != cudaSuccess) {
      set_last_error(format_message("CUDA%d: cudaSetDevice: %s", index_, cuda_error_text(e).c_str()));
      return ComputeStatus::kFailed;
    }
    kernels::LaunchContext ctx;
    ctx.stream = stream_;
    ctx.cublas = cublas_;
    ctx.index_error = index_error_dev_;
    ctx.sm_count = sm_count_;
    ctx.pool = pool_;
    bool index_ops = false;
    if (profiler_.enabled()) profiler_.begin_graph();
    for (size_t i = 0; i < graph.n_nodes(); ++i) {
      const Tensor* node = graph.node(i);
      if (node->op == Op::kNone || op_is_view(node->op)) continue;
      // Index ops check their ids even with an empty result (as the CPU reference), except ADD_ID (nor does it there).
      const bool checks_when_empty = node->op == Op::kGetRows || node->op == Op::kSetRows || node->op == Op::kMulMatId;
      const bool is_index_op = checks_when_empty || node->op == Op::kAddId;
      if (is_empty(*node) && !checks_when_empty) continue;
      if (!supports_node(*node)) {
        set_last_error(format_message("CUDA%d: node %zu: op %s is not supported by the CUDA backend for %s", index_, i,
                                      op_name(node->op), describe(*node).c_str()));
        return ComputeStatus::kFailed;
      }
      Status s = check_allocated(*node);
      if (s.ok()) {
        if (is_index_op && !index_ops) {
          // The word is only written by index kernels, and the previous graph with one drained the stream.
          std::memset(index_error_, 0, sizeof *index_error_);
          index_ops = true;
        }
        ctx.node_index = static_cast<int32_t>(i);
        if (profiler_.enabled()) profiler_.before(*node, stream_);
        s = kernels::launch_node(*node, ctx);
      }
      if (!s.ok()) {
        set_last_error(format_message("CUDA%d: node %zu: %s", index_, i, s.message().c_str()));
        return ComputeStatus::kFailed;
      }
    }
    if (profiler_.enabled()) profiler_.end_graph(stream_);
    // Index errors are found on the device: with index ops in the graph, wait for it and report the first one.
    if (index_ops) {
      e = cudaStreamSynchronize(stream_);
      if (e != cudaSuccess) {
        set_last_error(format_message("CUDA%d: graph execution failed: %s", index_, cuda_error_text(e).c_str()));
        return ComputeStatus::kFailed;
      }
      const kernels::IndexError err = *index_error_;
      if (err.flag != 0) {
        const Tensor* node =
            err.node >= 0 && static_cast<size_t>(err.node) < graph.n_nodes() ? graph.node(err.node) : nullptr;
        set_last_error(format_message("CUDA%d: node %d: %s: id %d is out of range [0, %d)", index_, err.node,
                                      node ? describe(*node).c_str() : "?", err.value, err.limit));
        return ComputeStatus::kFailed;
      }
    }
    return ComputeStatus::kSuccess;
  }

  bool supports_op(const Tensor& op) const override { return supports_node(op); }
  bool offload_op(const Tensor& op) const override {
    return offload_batch_size(op) >= offload_min_batch_ && supports_node(op);
  }

  void event_record(Event& event) override { event.record(*this); }
  void event_wait(Event& event) override { event.wait(*this); }

 private:
  Status check_allocated(const Tensor& node) const {
    if (node.data == nullptr && !is_empty(node)) {
      return TS_ERROR(StatusCode::kFailed, "%s is not allocated", describe(node).c_str());
    }
    for (const Tensor* s : node.src) {
      if (s == nullptr || is_empty(*s)) continue;
      if (s->data == nullptr) {
        return TS_ERROR(StatusCode::kFailed, "source %s of %s is not allocated", describe(*s).c_str(),
                        describe(node).c_str());
      }
    }
    return Status::Ok();
  }

  CudaDevice* device_;
  int index_;
  int64_t offload_min_batch_;
  std::string name_;
  cudaStream_t stream_ = nullptr;
  cudaEvent_t copy_event_ = nullptr;
  cublasHandle_t cublas_ = nullptr;
  kernels::IndexError* index_error_ = nullptr;      // host address (mapped pinned memory)
  kernels::IndexError* index_error_dev_ = nullptr;  // the same word as the device sees it
  int sm_count_ = 1;
  cudaMemPool_t pool_ = nullptr;  // scratch memory, kept between graphs
  NodeProfiler profiler_;         // TESSERA_CUDA_PROFILE=1 (after name_: it takes the name)
};

CudaBackend* as_cuda_backend(Backend* b) {
  return b != nullptr && b->guid() == kCudaGuid ? static_cast<CudaBackend*>(b) : nullptr;
}

// ---- events ----

class CudaEvent final : public Event {
 public:
  CudaEvent(Device* dev, int index, cudaEvent_t ev) : Event(dev), index_(index), ev_(ev) {}
  ~CudaEvent() override {
    cudaSetDevice(index_);
    cudaEventDestroy(ev_);
  }
  // On a CUDA stream of this event's GPU: the stream's current end. On any other backend (synchronous, or another
  // GPU): that backend is synchronized first, so "now" is the recorded point.
  void record(Backend& backend) override {
    CudaBackend* b = as_cuda_backend(&backend);
    cudaSetDevice(index_);
    if (b != nullptr && b->index() == index_) {
      report(cudaEventRecord(ev_, b->stream()), "cudaEventRecord", nullptr);
      return;
    }
    // record cannot return a failure of that backend's queued work: it is printed, like the CUDA errors here
    if (Status s = backend.synchronize(); !s.ok()) std::fprintf(stderr, "tessera CUDA: %s\n", s.message().c_str());
    report(cudaEventRecord(ev_, cudaStreamPerThread), "cudaEventRecord", nullptr);
  }
  void synchronize() override {
    cudaSetDevice(index_);
    report(cudaEventSynchronize(ev_), "cudaEventSynchronize", nullptr);
  }
  // A CUDA stream (any GPU) waits on the device; any other backend is synchronous: the host waits.
  void wait(Backend& backend) override {
    CudaBackend* b = as_cuda_backend(&backend);
    if (b != nullptr) {
      cudaSetDevice(b->index());
      report(cudaStreamWaitEvent(b->stream(), ev_, 0), "cudaStreamWaitEvent", nullptr);
      return;
    }
    synchronize();
  }

 private:
  int index_;
  cudaEvent_t ev_;
};

// ---- device ----

class CudaDevice final : public Device {
 public:
  CudaDevice(BackendReg* reg, int index, const cudaDeviceProp& prop)
      : reg_(reg),
        index_(index),
        name_(format_message("CUDA%d", index)),
        description_(
            format_message("%s (sm_%d%d, %d SMs)", prop.name, prop.major, prop.minor, prop.multiProcessorCount)),
        buft_(this, index, prop.totalGlobalMem),
        host_buft_(this, index) {}

  const char* name() const override { return name_.c_str(); }
  const char* description() const override { return description_.c_str(); }
  void memory(size_t* free, size_t* total) const override {
    cudaSetDevice(index_);
    size_t f = 0, t = 0;
    const cudaError_t e = cudaMemGetInfo(&f, &t);
    if (e != cudaSuccess) {
      report(e, "cudaMemGetInfo", nullptr);
      f = t = 0;
    }
    *free = f <= t ? f : t;
    *total = t;
  }
  DeviceType type() const override { return DeviceType::kGpu; }
  DeviceCaps caps() const override {
    DeviceCaps c;
    c.async = true;
    c.host_buffer = true;
    c.buffer_from_host_ptr = false;
    c.events = true;
    return c;
  }
  BackendReg* reg() const override { return reg_; }

  Result<std::unique_ptr<Backend>> init_backend(const std::string& params) override {
    int64_t threshold = kDefaultOffloadMinBatch;
    if (!params.empty()) {
      const std::string key = "offload_min_batch=";
      char* end = nullptr;
      long long v = -1;
      if (params.rfind(key, 0) == 0) v = std::strtoll(params.c_str() + key.size(), &end, 10);
      if (end == nullptr || *end != '\0' || v < 0) {
        return TS_ERROR(StatusCode::kInvalidArgument,
                        "%s: invalid backend parameters '%s' (expected offload_min_batch=N)", name_.c_str(),
                        params.c_str());
      }
      threshold = v;
    }
    return make(threshold);
  }
  Result<std::unique_ptr<Backend>> make(int64_t offload_min_batch) {
    auto b = std::make_unique<CudaBackend>(this, index_, offload_min_batch);
    Status s = b->init();
    if (!s.ok()) return s;
    enable_peer_access();
    return std::unique_ptr<Backend>(std::move(b));
  }

  BufferType* buffer_type() override { return &buft_; }
  BufferType* host_buffer_type() override { return &host_buft_; }
  CudaBufferType& vram() { return buft_; }

  bool supports_op(const Tensor& op) const override { return supports_node(op); }
  bool supports_buft(const BufferType& buft) const override { return &buft == &buft_; }
  bool offload_op(const Tensor& op) const override {
    return offload_batch_size(op) >= kDefaultOffloadMinBatch && supports_node(op);
  }
  std::unique_ptr<Event> event_new() override {
    cudaSetDevice(index_);
    cudaEvent_t ev = nullptr;
    const cudaError_t e = cudaEventCreateWithFlags(&ev, cudaEventDisableTiming);
    if (e != cudaSuccess) {
      report(e, "cudaEventCreateWithFlags", nullptr);
      return nullptr;
    }
    return std::make_unique<CudaEvent>(this, index_, ev);
  }

 private:
  // Direct peer access where the hardware allows it (once per device); peer copies work without it (staged).
  void enable_peer_access() {
    std::call_once(peer_once_, [this] {
      int n = 0;
      if (cudaGetDeviceCount(&n) != cudaSuccess) return;
      cudaSetDevice(index_);
      for (int j = 0; j < n; ++j) {
        int can = 0;
        if (j != index_ && cudaDeviceCanAccessPeer(&can, index_, j) == cudaSuccess && can) {
          if (cudaDeviceEnablePeerAccess(j, 0) != cudaSuccess) cudaGetLastError();  // already enabled is fine
        }
      }
    });
  }

  BackendReg* reg_;
  int index_;
  std::string name_;
  std::string description_;
  CudaBufferType buft_;
  PinnedBufferType host_buft_;
  std::once_flag peer_once_;
};

Device* CudaBackend::device() const { return device_; }

// ---- registration ----

class CudaReg final : public BackendReg {
 public:
  CudaReg() {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      reason_ = format_message("cudaGetDeviceCount: %s", cuda_error_text(e).c_str());
      return;
    }
    if (n == 0) {
      reason_ = "no CUDA device visible";
      return;
    }
    for (int i = 0; i < n; ++i) {
      cudaDeviceProp prop{};
      const cudaError_t pe = cudaGetDeviceProperties(&prop, i);
      if (pe != cudaSuccess) {
        std::fprintf(stderr, "tessera CUDA: device %d skipped: cudaGetDeviceProperties: %s\n", i,
                     cuda_error_text(pe).c_str());
        continue;
      }
      devices_.push_back(std::make_unique<CudaDevice>(this, i, prop));
    }
    if (devices_.empty()) reason_ = "no usable CUDA device";
  }
  const char* name() const override { return "CUDA"; }
  size_t device_count() const override { return devices_.size(); }
  Device* device(size_t i) const override { return i < devices_.size() ? devices_[i].get() : nullptr; }
  CudaDevice* cuda_device(int i) const {
    return i >= 0 && static_cast<size_t>(i) < devices_.size() ? devices_[static_cast<size_t>(i)].get() : nullptr;
  }
  const std::string& reason() const { return reason_; }

 private:
  std::vector<std::unique_ptr<CudaDevice>> devices_;
  std::string reason_;
};

CudaReg& reg_instance() {
  static CudaReg reg;
  return reg;
}

}  // namespace

BackendReg* registration() { return &reg_instance(); }
int device_count() { return static_cast<int>(reg_instance().device_count()); }
std::string unavailable_reason() { return reg_instance().reason(); }
Device* device(int index) { return reg_instance().cuda_device(index); }

BufferType* buffer_type(int index) {
  CudaDevice* d = reg_instance().cuda_device(index);
  return d ? d->buffer_type() : nullptr;
}
BufferType* host_buffer_type(int index) {
  CudaDevice* d = reg_instance().cuda_device(index);
  return d ? d->host_buffer_type() : nullptr;
}
size_t allocated_bytes(int index) {
  CudaDevice* d = reg_instance().cuda_device(index);
  return d ? d->vram().allocated() : 0;
}
size_t max_buffer_size(int index) {
  CudaDevice* d = reg_instance().cuda_device(index);
  return d ? d->vram().max_size() : 0;
}
void set_max_buffer_size(int index, size_t bytes) {
  if (CudaDevice* d = reg_instance().cuda_device(index)) d->vram().set_max(bytes);
}

Result<std::unique_ptr<Backend>> make_backend(const CudaBackendParams& params) {
  CudaDevice* d = reg_instance().cuda_device(params.device);
  if (d == nullptr) {
    const std::string why = reg_instance().reason();
    return TS_ERROR(StatusCode::kNotFound, "CUDA: no device %d (%d visible%s%s)", params.device, device_count(),
                    why.empty() ? "" : ": ", why.c_str());
  }
  if (params.offload_min_batch < 0) {
    return TS_ERROR(StatusCode::kInvalidArgument, "CUDA: offload_min_batch must be >= 0 (got %lld)",
                    static_cast<long long>(params.offload_min_batch));
  }
  return d->make(params.offload_min_batch);
}

bool is_cuda(const Backend& backend) { return backend.guid() == kCudaGuid; }

}  // namespace tessera::cuda
