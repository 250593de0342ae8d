// The CPU backend: buffer types, device, backend (stream), registration.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <thread>

#include "opt/opt_kernels.h"
#include "ref/ref_kernels.h"
#include "tessera/cpu.h"
#include "thread_pool.h"

namespace tessera::cpu {

namespace {

constexpr Guid kCpuGuid = {
    {0x74, 0x65, 0x73, 0x73, 0x65, 0x72, 0x61, 0x2d, 0x63, 0x70, 0x75, 0x00, 0x00, 0x00, 0x00, 0x01}};

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

// ---- buffers ----

// Host memory owned by the buffer (freed with it).
class CpuBuffer final : public HostBuffer {
 public:
  CpuBuffer(BufferType* type, void* mem, size_t size) : HostBuffer(type, mem, size) {}
  ~CpuBuffer() override { std::free(base()); }
};

// Host memory not owned (freeing the buffer does not free the memory: docs/interfaces.md, 'Buffers from host memory').
class MappedBuffer final : public HostBuffer {
 public:
  MappedBuffer(BufferType* type, void* mem, size_t size) : HostBuffer(type, mem, size) {}
};

class CpuBufferType final : public BufferType {
 public:
  explicit CpuBufferType(Device* dev) : device_(dev) {}
  const char* name() const override { return "CPU"; }
  size_t alignment() const override { return kCpuAlignment; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    void* mem = std::aligned_alloc(kCpuAlignment, align_up(size, kCpuAlignment));
    if (mem == nullptr) {
      return TS_ERROR(StatusCode::kAllocFailed, "CPU: out of host memory allocating %zu bytes", size);
    }
    return std::unique_ptr<Buffer>(std::make_unique<CpuBuffer>(this, mem, size));
  }

 private:
  Device* device_;
};

// The type of buffers that wrap user memory; it cannot allocate by itself.
class MappedBufferType final : public BufferType {
 public:
  explicit MappedBufferType(Device* dev) : device_(dev) {}
  const char* name() const override { return "CPU_Mapped"; }
  size_t alignment() const override { return kCpuAlignment; }
  bool is_host() const override { return true; }
  Device* device() const override { return device_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t) override {
    return Status(StatusCode::kUnsupported, "CPU_Mapped buffers wrap existing memory: use buffer_from_host_ptr");
  }

 private:
  Device* device_;
};

// ---- backend ----

Status check_node(const Tensor& node, bool require_host_buffers) {
  if (!ref::supports(node)) {
    return TS_ERROR(StatusCode::kUnsupported, "op %s is not supported by the CPU backend for %s", op_name(node.op),
                    describe(node).c_str());
  }
  if (node.data == nullptr) return TS_ERROR(StatusCode::kFailed, "%s is not allocated", describe(node).c_str());
  for (const Tensor* s : node.src) {
    if (s != nullptr && s->data == nullptr && !is_empty(*s)) {
      return TS_ERROR(StatusCode::kFailed, "source %s of %s is not allocated", describe(*s).c_str(),
                      describe(node).c_str());
    }
    if (require_host_buffers && s != nullptr && tensor_buffer(*s) != nullptr && !tensor_buffer(*s)->is_host()) {
      return TS_ERROR(StatusCode::kFailed, "source %s of %s is in non-host buffer type %s", describe(*s).c_str(),
                      describe(node).c_str(), tensor_buffer(*s)->type()->name());
    }
  }
  return Status::Ok();
}

// The node loop shared by the backend and compute_graph_host_memory.
template <typename ComputeFn>
ComputeStatus run_graph(Graph& graph, bool require_host_buffers, bool (*abort_cb)(void*), void* abort_user,
                        ComputeFn compute, std::string* err) {
  err->clear();
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    if (abort_cb != nullptr && abort_cb(abort_user)) {
      *err = format_message("CPU: aborted by the abort callback before node %zu", i);
      return ComputeStatus::kAborted;
    }
    Tensor* node = graph.node(i);
    if (node->op == Op::kNone || op_is_view(node->op) || is_empty(*node)) continue;
    Status s = check_node(*node, require_host_buffers);
    if (s.ok()) s = compute(*node);
    if (!s.ok()) {
      *err = format_message("CPU: node %zu: %s", i, s.message().c_str());
      return ComputeStatus::kFailed;
    }
  }
  return ComputeStatus::kSuccess;
}

// Growable 64-byte-aligned scratch memory for the optimised kernels; reused from node to node and run to run.
class WorkBuffer {
 public:
  WorkBuffer() = default;
  WorkBuffer(const WorkBuffer&) = delete;
  WorkBuffer& operator=(const WorkBuffer&) = delete;
  ~WorkBuffer() { std::free(data_); }
  // Null (with size() unchanged) when the memory cannot be had.
  void* reserve(size_t bytes) {
    if (bytes <= size_) return data_;
    void* p = std::aligned_alloc(kCpuAlignment, align_up(bytes, kCpuAlignment));
    if (p == nullptr) return nullptr;
    std::free(data_);
    data_ = p;
    size_ = bytes;
    return data_;
  }
  void* data() const { return data_; }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

CpuKernels resolve_kernels(CpuKernels k) {
  if (k == CpuKernels::kAuto) {
    k = CpuKernels::kReference;
    if (const char* env = std::getenv("TESSERA_CPU_ISA")) {
      const std::string v = env;
      if (v == "portable")
        k = CpuKernels::kPortable;
      else if (v == "avx2")
        k = CpuKernels::kAvx2;
      else if (v == "avx512")
        k = CpuKernels::kAvx512;
    }
  }
  if (k != CpuKernels::kReference && static_cast<int>(k) > static_cast<int>(best_kernels())) return best_kernels();
  return k;
}

const opt::KernelTable* table_of(CpuKernels k) {
  switch (k) {
    case CpuKernels::kPortable: return opt::table_for(opt::Isa::kPortable);
    case CpuKernels::kAvx2: return opt::table_for(opt::Isa::kAvx2);
    case CpuKernels::kAvx512: return opt::table_for(opt::Isa::kAvx512);
    default: return nullptr;
  }
}

class CpuBackend final : public Backend {
 public:
  CpuBackend(Device* dev, int n_threads, CpuKernels kernels) : device_(dev) {
    set_threads(n_threads);
    set_kernels(kernels);
  }

  const char* name() const override { return "CPU"; }
  Guid guid() const override { return kCpuGuid; }
  Device* device() const override { return device_; }

  ComputeStatus graph_compute_async(Graph& graph) override { return compute_with(graph, work_); }

  // A plan keeps the node list, so a graph can be recomputed without re-walking it, and its own work buffer, sized
  // at creation for the largest node (grown later if the thread count or the kernels change).
  struct CpuPlan final : GraphPlan {
    Graph graph;
    WorkBuffer work;
  };
  Result<std::unique_ptr<GraphPlan>> plan_create(const Graph& graph) override {
    auto plan = std::make_unique<CpuPlan>();
    plan->graph = graph.view(0, graph.n_nodes());
    size_t need = 0;
    for (size_t i = 0; i < plan->graph.n_nodes(); ++i) need = std::max(need, work_size(*plan->graph.node(i)));
    if (need > 0 && plan->work.reserve(need) == nullptr) {
      return TS_ERROR(StatusCode::kAllocFailed, "CPU: out of host memory for a %zu-byte work buffer", need);
    }
    return std::unique_ptr<GraphPlan>(std::move(plan));
  }
  ComputeStatus plan_compute(GraphPlan& plan) override {
    CpuPlan& p = static_cast<CpuPlan&>(plan);
    return compute_with(p.graph, p.work);
  }

  void set_threads(int n) { n_threads_ = n < 1 ? 1 : n; }
  int threads() const { return n_threads_; }
  void set_kernels(CpuKernels k) {
    kernels_ = resolve_kernels(k);
    table_ = table_of(kernels_);
  }
  CpuKernels kernels() const { return kernels_; }
  void set_abort(bool (*cb)(void*), void* user) {
    abort_cb_ = cb;
    abort_user_ = user;
  }

 private:
  ComputeStatus compute_with(Graph& graph, WorkBuffer& work) {
    std::string err;
    const ComputeStatus s = run_graph(
        graph, /*require_host_buffers=*/true, abort_cb_, abort_user_,
        [&](const Tensor& n) { return compute_node(n, work); }, &err);
    set_last_error(std::move(err));
    return s;
  }

  // Work bytes of a node on the optimised path (0 when it runs on the reference kernels).
  size_t work_size(const Tensor& node) const {
    if (table_ == nullptr || node.op == Op::kNone || op_is_view(node.op) || !opt::supports(node)) return 0;
    return opt::work_size(node, *table_, n_threads_);
  }

  Status compute_node(const Tensor& node, WorkBuffer& work) {
    const int nth = n_threads_;
    if (table_ != nullptr && opt::supports(node)) {
      const size_t need = opt::work_size(node, *table_, nth);
      if (need > 0 && work.reserve(need) == nullptr) {
        return TS_ERROR(StatusCode::kAllocFailed, "out of host memory for a %zu-byte work buffer (%s)", need,
                        describe(node).c_str());
      }
      opt::Params p;
      p.nth = nth;
      p.table = table_;
      p.work = work.data();
      p.work_bytes = work.size();
      p.barrier = &ThreadPool::barrier_fn;
      p.barrier_ctx = &pool_;
      if (nth == 1) return opt::compute(node, p);
      // fresh counters for the node's shared work units (the run's start publishes the stores to the workers)
      for (opt::ClaimCounter& c : claims_) c.next.store(0, std::memory_order_relaxed);
      p.claims = claims_;
      std::vector<Status> results(static_cast<size_t>(nth));
      pool_.run(nth, [&](int ith) {
        opt::Params q = p;
        q.ith = ith;
        results[static_cast<size_t>(ith)] = opt::compute(node, q);
      });
      for (Status& s : results) {
        if (!s.ok()) return s;
      }
      return Status::Ok();
    }
    if (nth == 1) return ref::compute(node, {0, 1});
    std::vector<Status> results(static_cast<size_t>(nth));
    pool_.run(nth, [&](int ith) { results[static_cast<size_t>(ith)] = ref::compute(node, {ith, nth}); });
    for (Status& s : results) {
      if (!s.ok()) return s;
    }
    return Status::Ok();
  }

  Device* device_;
  int n_threads_ = 1;
  CpuKernels kernels_ = CpuKernels::kReference;
  const opt::KernelTable* table_ = nullptr;        // null: reference kernels only
  WorkBuffer work_;                                // for graph_compute_async (plans have their own)
  opt::ClaimCounter claims_[opt::kClaimCounters];  // the running node's work-unit counters (opt::Units)
  bool (*abort_cb_)(void*) = nullptr;
  void* abort_user_ = nullptr;
  ThreadPool pool_;
};

// ---- device ----

std::string read_cpu_model() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("model name", 0) == 0) {
      const size_t colon = line.find(':');
      if (colon != std::string::npos) return line.substr(line.find_first_not_of(" \t", colon + 1));
    }
  }
  return "CPU";
}

int default_threads() {
  const unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

class CpuDevice final : public Device {
 public:
  explicit CpuDevice(BackendReg* reg) : reg_(reg), buft_(this), mapped_buft_(this), description_(read_cpu_model()) {}

  const char* name() const override { return "CPU"; }
  const char* description() const override { return description_.c_str(); }
  void memory(size_t* free, size_t* total) const override {
    const long page = sysconf(_SC_PAGESIZE);
    const long pages = sysconf(_SC_PHYS_PAGES);
    const long avail = sysconf(_SC_AVPHYS_PAGES);
    *total = pages > 0 && page > 0 ? static_cast<size_t>(pages) * static_cast<size_t>(page) : 0;
    *free = avail > 0 && page > 0 ? static_cast<size_t>(avail) * static_cast<size_t>(page) : 0;
    if (*free > *total) *free = *total;
  }
  DeviceType type() const override { return DeviceType::kCpu; }
  DeviceCaps caps() const override {
    DeviceCaps c;
    c.buffer_from_host_ptr = true;
    return c;
  }
  BackendReg* reg() const override { return reg_; }

  Result<std::unique_ptr<Backend>> init_backend(const std::string& params) override {
    int n = default_threads();
    if (!params.empty()) {
      // Accepted: "n_threads=N".
      const std::string key = "n_threads=";
      char* end = nullptr;
      long v = 0;
      if (params.rfind(key, 0) == 0) v = std::strtol(params.c_str() + key.size(), &end, 10);
      if (end == nullptr || *end != '\0' || v < 1 || v > 1024) {
        return TS_ERROR(StatusCode::kInvalidArgument, "CPU: invalid backend parameters '%s' (expected n_threads=N)",
                        params.c_str());
      }
      n = static_cast<int>(v);
    }
    return std::unique_ptr<Backend>(std::make_unique<CpuBackend>(this, n, CpuKernels::kAuto));
  }
  BufferType* buffer_type() override { return &buft_; }
  Result<std::unique_ptr<Buffer>> buffer_from_host_ptr(void* ptr, size_t size, size_t) override {
    if (ptr == nullptr && size != 0) {
      return Status(StatusCode::kInvalidArgument, "CPU: buffer_from_host_ptr with a null pointer");
    }
    if (reinterpret_cast<uintptr_t>(ptr) % alignof(max_align_t) != 0) {
      return TS_ERROR(StatusCode::kInvalidArgument, "CPU: buffer_from_host_ptr: %p is not %zu-byte aligned", ptr,
                      alignof(max_align_t));
    }
    return std::unique_ptr<Buffer>(std::make_unique<MappedBuffer>(&mapped_buft_, ptr, size));
  }
  bool supports_op(const Tensor& op) const override { return ref::supports(op); }
  bool supports_buft(const BufferType& buft) const override { return buft.is_host(); }

 private:
  BackendReg* reg_;
  CpuBufferType buft_;
  MappedBufferType mapped_buft_;
  std::string description_;
};

// ---- registration ----

void ext_set_n_threads(Backend* b, int n) {
  if (b != nullptr) set_n_threads(*b, n);
}
void ext_set_abort_callback(Backend* b, bool (*cb)(void*), void* user) {
  if (b != nullptr) set_abort_callback(*b, cb, user);
}

class CpuReg final : public BackendReg {
 public:
  CpuReg() : device_(this) {}
  const char* name() const override { return "CPU"; }
  size_t device_count() const override { return 1; }
  Device* device(size_t i) const override { return i == 0 ? const_cast<CpuDevice*>(&device_) : nullptr; }
  void* get_proc_address(const char* fn) const override {
    if (std::strcmp(fn, "set_n_threads") == 0) return reinterpret_cast<void*>(&ext_set_n_threads);
    if (std::strcmp(fn, "set_abort_callback") == 0) return reinterpret_cast<void*>(&ext_set_abort_callback);
    return nullptr;
  }

 private:
  CpuDevice device_;
};

CpuBackend* as_cpu(Backend& b) { return is_cpu(b) ? static_cast<CpuBackend*>(&b) : nullptr; }

}  // namespace

BackendReg* registration() {
  static CpuReg reg;
  return &reg;
}
Device* device() { return registration()->device(0); }
BufferType* buffer_type() { return device()->buffer_type(); }

std::unique_ptr<Backend> make_backend(const CpuBackendParams& params) {
  return std::make_unique<CpuBackend>(device(), params.n_threads > 0 ? params.n_threads : default_threads(),
                                      params.kernels);
}

bool is_cpu(const Backend& backend) { return backend.guid() == kCpuGuid; }

void set_n_threads(Backend& backend, int n) {
  if (CpuBackend* b = as_cpu(backend)) b->set_threads(n);
}
int n_threads(const Backend& backend) {
  return is_cpu(backend) ? static_cast<const CpuBackend&>(backend).threads() : 0;
}
CpuKernels kernels(const Backend& backend) {
  return is_cpu(backend) ? static_cast<const CpuBackend&>(backend).kernels() : CpuKernels::kReference;
}
void set_kernels(Backend& backend, CpuKernels k) {
  if (CpuBackend* b = as_cpu(backend)) b->set_kernels(k);
}
const char* kernels_name(CpuKernels k) {
  switch (k) {
    case CpuKernels::kAuto: return "auto";
    case CpuKernels::kReference: return "reference";
    case CpuKernels::kPortable: return "portable";
    case CpuKernels::kAvx2: return "avx2";
    case CpuKernels::kAvx512: return "avx512";
  }
  return "?";
}
CpuKernels best_kernels() {
  switch (opt::detected_isa()) {
    case opt::Isa::kAvx512: return CpuKernels::kAvx512;
    case opt::Isa::kAvx2: return CpuKernels::kAvx2;
    default: return CpuKernels::kPortable;
  }
}

void set_abort_callback(Backend& backend, bool (*callback)(void*), void* user) {
  if (CpuBackend* b = as_cpu(backend)) b->set_abort(callback, user);
}

ComputeStatus compute_graph_host_memory(Graph& graph, std::string* error) {
  std::string err;
  const ComputeStatus s = run_graph(
      graph, /*require_host_buffers=*/false, nullptr, nullptr,
      [](const Tensor& n) {
        return ref::compute(n, {0, 1});
      },
      &err);
  if (error != nullptr) *error = std::move(err);
  return s;
}

Result<std::unique_ptr<Buffer>> buffer_from_ptr(void* ptr, size_t size) {
  return device()->buffer_from_host_ptr(ptr, size, size);
}

}  // namespace tessera::cpu
