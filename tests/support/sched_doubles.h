// Test doubles for the scheduler: a "restricted" GPU-like device whose memory is host memory behind a non-host
// buffer type (so data really has to be copied across splits), computed with the reference CPU kernels, refusing
// chosen ops; optional events (host-synchronous) and an offload rule.
#pragma once

#include <cstdlib>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>

#include "tessera/backend.h"
#include "tessera/cpu.h"

namespace tessera::doubles {

class RestrictedDevice;

class RestrictedBufferType final : public BufferType {
 public:
  RestrictedBufferType(RestrictedDevice* dev, std::string name) : dev_(dev), name_(std::move(name)) {}
  const char* name() const override { return name_.c_str(); }
  size_t alignment() const override { return 64; }
  size_t max_size() const override { return max_size_; }
  bool is_host() const override { return false; }
  Device* device() const override;
  size_t max_size_ = SIZE_MAX;
  int live = 0;             // buffers of this type alive now
  int allocs = 0;           // buffers allocated so far
  bool fail_alloc = false;  // every allocation fails like an out-of-memory device

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    if (fail_alloc) return Status(StatusCode::kAllocFailed, name_ + ": injected out of memory");
    ++allocs;
    return std::unique_ptr<Buffer>(std::make_unique<Mem>(this, size));
  }

 private:
  // Host memory, but the type says "not host": the CPU backend refuses to read it directly.
  struct Mem final : HostBuffer {
    Mem(RestrictedBufferType* t, size_t n) : HostBuffer(t, std::aligned_alloc(64, (n + 63) / 64 * 64), n), owner(t) {
      ++owner->live;
    }
    ~Mem() override {
      std::free(base());
      --owner->live;
    }
    RestrictedBufferType* owner;
  };
  RestrictedDevice* dev_;
  std::string name_;
};

// Totals over every event a device made (events are owned by the scheduler; the totals outlive them).
struct EventStats {
  int records = 0, syncs = 0, waits = 0;
  std::map<std::string, int> waits_by;    // backend name -> waits it was asked to make on these events
  std::map<std::string, int> records_by;  // backend name -> records it made
};

// Host-synchronous events: the restricted backend finishes work before returning, so record/wait are trivially
// satisfied; counts calls so tests can see the event flow.
class CountingEvent final : public Event {
 public:
  explicit CountingEvent(Device* d, EventStats* stats = nullptr) : Event(d), stats_(stats) {}
  void record(Backend& b) override {
    ++records;
    if (stats_ != nullptr) {
      ++stats_->records;
      ++stats_->records_by[b.name()];
    }
  }
  void synchronize() override {
    ++syncs;
    if (stats_ != nullptr) ++stats_->syncs;
  }
  void wait(Backend& b) override {
    ++waits;
    if (stats_ != nullptr) {
      ++stats_->waits;
      ++stats_->waits_by[b.name()];
    }
  }
  int records = 0, syncs = 0, waits = 0;

 private:
  EventStats* stats_;
};

class RestrictedDevice final : public Device {
 public:
  explicit RestrictedDevice(std::string name, bool events = false)
      : name_(std::move(name)), buft_(this, name_ + "_buf"), events_(events) {}
  const char* name() const override { return name_.c_str(); }
  const char* description() const override { return "restricted test device"; }
  void memory(size_t* free, size_t* total) const override {
    *free = size_t{1} << 30;
    *total = size_t{1} << 30;
  }
  DeviceType type() const override { return DeviceType::kGpu; }
  DeviceCaps caps() const override {
    DeviceCaps c;
    c.events = events_;
    return c;
  }
  BackendReg* reg() const override { return nullptr; }
  Result<std::unique_ptr<Backend>> init_backend(const std::string& = {}) override;
  BufferType* buffer_type() override { return &buft_; }
  bool supports_op(const Tensor& t) const override { return refused.count(t.op) == 0 && cpu::device()->supports_op(t); }
  bool supports_buft(const BufferType& b) const override { return &b == &buft_ || extra_bufts.count(&b) != 0; }
  bool offload_op(const Tensor& t) const override { return offload && offload(t); }
  std::unique_ptr<Event> event_new() override {
    if (!events_) return nullptr;
    return std::make_unique<CountingEvent>(this, &event_stats);
  }

  std::set<Op> refused;
  std::set<const BufferType*> extra_bufts;  // other buffer types this device can read directly
  std::function<bool(const Tensor&)> offload;
  EventStats event_stats;  // totals over the events this device made
  RestrictedBufferType& buft() { return buft_; }

 private:
  std::string name_;
  RestrictedBufferType buft_;
  bool events_;
};

inline Device* RestrictedBufferType::device() const { return dev_; }

class RestrictedBackend final : public Backend {
 public:
  explicit RestrictedBackend(RestrictedDevice* d) : dev_(d) {}
  const char* name() const override { return dev_->name(); }
  Guid guid() const override { return {{'r', 'e', 's', 't', 'r', 'i', 'c', 't', 'e', 'd'}}; }
  Device* device() const override { return dev_; }
  ComputeStatus graph_compute_async(Graph& g) override {
    ++computes;
    for (const Tensor* n : g.nodes()) {
      if (!op_is_view(n->op) && n->op != Op::kNone && !dev_->supports_op(*n)) {
        set_last_error(std::string(name()) + " cannot run " + describe(*n));
        return ComputeStatus::kFailed;
      }
      // Like a real device: it can only touch memory of the buffer types it supports (a missing scheduler copy
      // shows up here, even though the memory is host memory underneath).
      if (check_buffers && !op_is_view(n->op) && n->op != Op::kNone) {
        for (int j = -1; j < kMaxSrc; ++j) {
          const Tensor* t = j < 0 ? n : n->src[j];
          if (t == nullptr) continue;
          const Buffer* b = tensor_buffer(*t);
          if (b != nullptr && !dev_->supports_buft(*b->type())) {
            set_last_error(std::string(name()) + " cannot read " + describe(*t) + " (buffer type " + b->type()->name() +
                           ") for " + describe(*n));
            return ComputeStatus::kFailed;
          }
        }
      }
    }
    std::string err;
    const ComputeStatus s = cpu::compute_graph_host_memory(g, &err);
    set_last_error(err);
    return s;
  }
  int computes = 0;
  bool check_buffers = true;  // fail a node that touches memory of a buffer type the device does not support

 private:
  RestrictedDevice* dev_;
};

inline Result<std::unique_ptr<Backend>> RestrictedDevice::init_backend(const std::string&) {
  return std::unique_ptr<Backend>(std::make_unique<RestrictedBackend>(this));
}

}  // namespace tessera::doubles
