// The memory of simulated devices: buffer types and buffers (docs/simulator.md, "What a simulated device promises").
// Memory-backed buffers are real host allocations (mmap), filled with a byte that reads as NaN; metadata-only buffers
// have no bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "sim_impl.h"

namespace tessera::sim {

namespace {

// Fresh device memory reads as NaN in every float type (all bits set), so a read of never-written memory shows up.
constexpr uint8_t kFreshByte = 0xFF;

size_t round_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

bool Simulator::Impl::is_reserved(const void* p) const {
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = reserved.upper_bound(a);
  if (it == reserved.begin()) return false;
  --it;
  return a < it->first + it->second;
}

void Simulator::Impl::access_host_pointer(const void* p, size_t n, bool write) {
  if (p == nullptr || n == 0 || host_buffers.empty()) return;
  const auto a = reinterpret_cast<uintptr_t>(p);
  auto it = host_buffers.upper_bound(a);
  if (it == host_buffers.begin()) return;
  --it;
  SimBuffer* b = it->second;
  const uintptr_t base = it->first;
  if (a >= base + b->size()) return;
  const size_t offset = a - base;
  hz.access(b->hazard_id(), offset, std::min(n, b->size() - offset), write, "(through a host pointer)");
}

SimBuffer* sim_buffer_of(const Simulator::Impl* sim, const Tensor& t) {
  auto* b = dynamic_cast<SimBuffer*>(tensor_buffer(t));
  return b != nullptr && b->sim_device()->sim() == sim ? b : nullptr;
}

// =====================================================================================================================
// Buffer types

SimBufferType::SimBufferType(SimDevice* dev, Kind kind, std::string name, int extra)
    : dev_(dev), kind_(kind), name_(std::move(name)), extra_(extra) {}

// A wrapped device's buffers are the real device's, aligned as the real buffer type aligns them: that alignment
// applies (a larger configured one could not be honoured by the real allocation).
size_t SimBufferType::alignment() const {
  if (kind_ == Kind::kSplit) return 128;  // (ggml-cuda's split buffer type)
  if (in_device_memory() && dev_->real() != nullptr) return dev_->real()->buffer_type()->alignment();
  return dev_->config().alignment;
}
size_t SimBufferType::max_size() const { return in_device_memory() ? dev_->config().max_alloc : SIZE_MAX; }
// An extra buffer type is never host memory: its layout is the device kernels' own (buffer_rules.h).
bool SimBufferType::is_host() const {
  if (kind_ == Kind::kExtra || kind_ == Kind::kSplit) return false;
  return kind_ != Kind::kMain || dev_->config().host_visible;
}

size_t SimBufferType::alloc_size(const Tensor& t) const {
  if (kind_ == Kind::kSplit) {
    size_t total = 0;
    for (size_t k = 0; k < split_.gpus.size(); ++k) total += split_.bytes(t, k);
    return std::max(total, nbytes(t));  // (the bytes stay contiguous here)
  }
  const size_t n = nbytes(t);
  const std::vector<PaddingRule>* rules = nullptr;
  if (kind_ == Kind::kMain) rules = &dev_->config().padding;
  if (kind_ == Kind::kExtra) rules = &dev_->config().buffer_types[static_cast<size_t>(extra_)].padding;
  if (rules == nullptr || rules->empty()) return n;
  const size_t pad = padding_bytes(*rules, t);
  return pad > SIZE_MAX - n ? SIZE_MAX : n + pad;  // (saturates: a tensor that large fails its allocation)
}

const BufferTypeConfig* SimBufferType::extra_config() const {
  return kind_ == Kind::kExtra ? &dev_->config().buffer_types[static_cast<size_t>(extra_)] : nullptr;
}
Device* SimBufferType::device() const { return dev_; }

Result<std::unique_ptr<Buffer>> SimBufferType::do_alloc_buffer(size_t size) {
  Simulator::Impl& s = *dev_->sim();
  const FaultPlan& f = s.opt.faults;
  if (kind_ == Kind::kMapped) {
    return TS_ERROR(StatusCode::kUnsupported, "%s: mapped buffers wrap host memory (use buffer_from_host_ptr)",
                    name_.c_str());
  }
  if (in_device_memory()) {
    if (f.fail_alloc_device.empty() || same_name(f.fail_alloc_device, dev_->config().name)) {
      ++s.n_allocs;
      if (f.fail_alloc_nth > 0 && s.n_allocs == f.fail_alloc_nth) {
        return TS_ERROR(StatusCode::kAllocFailed, "%s: injected fault: allocation #%lld of %zu bytes fails (seed %llu)",
                        name_.c_str(), static_cast<long long>(s.n_allocs), size,
                        static_cast<unsigned long long>(s.opt.seed));
      }
    }
    if (f.fail_alloc_above > 0 && size > f.fail_alloc_above) {
      return TS_ERROR(StatusCode::kAllocFailed, "%s: injected fault: allocations above %zu bytes fail (asked %zu)",
                      name_.c_str(), f.fail_alloc_above, size);
    }
    TS_RETURN_IF_ERROR(dev_->reserve_memory(size));
  }
  const size_t align = std::max<size_t>(alignment(), 64);
  std::unique_ptr<Buffer> out;
  if (in_device_memory() && dev_->real() != nullptr) {
    auto inner = dev_->real()->buffer_type()->alloc_buffer(size);
    if (!inner.ok()) {
      dev_->release_memory(size);
      return TS_ERROR(StatusCode::kAllocFailed, "%s: the wrapped device %s failed: %s", name_.c_str(),
                      dev_->real()->name(), inner.status().message().c_str());
    }
    out = std::make_unique<SimBuffer>(this, size, SimBuffer::Memory::kInner, nullptr, std::move(inner).value());
  } else if (s.opt.mode == MemoryMode::kMetadata) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t len = round_up(size, page) + (align > page ? align : 0);
    // Device memory gets no access rights (a stray dereference faults). Host-visible memory may be read directly by
    // code outside the simulator (a copy from a host buffer memcpys from it): it reads as zeros from the shared zero
    // page, committing no memory.
    const int prot = is_host() ? PROT_READ | PROT_WRITE : PROT_NONE;
    void* p = mmap(nullptr, len, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) {
      if (in_device_memory()) dev_->release_memory(size);
      return TS_ERROR(StatusCode::kAllocFailed, "%s: cannot reserve %zu bytes of address space", name_.c_str(), size);
    }
    s.reserved[reinterpret_cast<uintptr_t>(p)] = len;
    out = std::make_unique<SimBuffer>(this, size, SimBuffer::Memory::kReserved, p, nullptr);
  } else {
    void* p = std::aligned_alloc(align, round_up(size, align));
    if (p == nullptr) {
      if (in_device_memory()) dev_->release_memory(size);
      return TS_ERROR(StatusCode::kAllocFailed, "%s: out of host memory backing %zu bytes", name_.c_str(), size);
    }
    std::memset(p, kFreshByte, size);
    out = std::make_unique<SimBuffer>(this, size, SimBuffer::Memory::kOwned, p, nullptr);
  }
  if (in_device_memory()) ++dev_->stats.n_allocs;
  return out;
}

// =====================================================================================================================
// Buffers

SimBuffer::SimBuffer(SimBufferType* type, size_t size, Memory memory, void* mem, std::unique_ptr<Buffer> inner)
    : Buffer(type, size), type_(type), memory_(memory), mem_(static_cast<char*>(mem)), inner_(std::move(inner)) {
  Simulator::Impl& s = *type->sim_device()->sim();
  hz_id_ = s.hz.new_buffer(format_message("%s#%llu", type->name(), static_cast<unsigned long long>(++s.n_buffers)));
  if (type->is_host() && size > 0 && base() != nullptr) s.host_buffers[reinterpret_cast<uintptr_t>(base())] = this;
}

SimBuffer::~SimBuffer() {
  Simulator::Impl& s = *sim_device()->sim();
  // Nothing pending may touch this memory after it is gone: apply what is in flight (the race, if any, is still
  // reported below: freeing is a host write of the whole buffer).
  s.flush();
  if (base() != nullptr) {
    auto it = s.host_buffers.find(reinterpret_cast<uintptr_t>(base()));
    if (it != s.host_buffers.end() && it->second == this) s.host_buffers.erase(it);
  }
  s.hz.begin_command(HazardTracker::kHost, CommandDesc{"free of buffer", type_->name(), nullptr, size(), 0});
  s.hz.access(hz_id_, 0, size(), /*write=*/true, "");
  s.hz.free_buffer(hz_id_);
  if (type_->in_device_memory()) sim_device()->release_memory(size());
  for (auto& [dev, n] : split_taken_) dev->release_memory(n);
  switch (memory_) {
    case Memory::kOwned: std::free(mem_); break;
    case Memory::kReserved: {
      auto it = s.reserved.find(reinterpret_cast<uintptr_t>(mem_));
      if (it != s.reserved.end()) {
        munmap(mem_, it->second);
        s.reserved.erase(it);
      }
      break;
    }
    case Memory::kExternal:
    case Memory::kInner: break;
  }
}

size_t SimBuffer::offset_of(const Tensor& t) const {
  return static_cast<size_t>(static_cast<const char*>(t.data) -
                             static_cast<char*>(const_cast<SimBuffer*>(this)->base()));
}

void SimBuffer::write_bytes(const Tensor& t, size_t offset, const void* data, size_t size) {
  switch (memory_) {
    case Memory::kOwned:
    case Memory::kExternal: std::memcpy(static_cast<char*>(t.data) + offset, data, size); break;
    case Memory::kInner: inner_->set_tensor(const_cast<Tensor&>(t), data, offset, size); break;
    case Memory::kReserved: break;
  }
}

void SimBuffer::read_bytes(const Tensor& t, size_t offset, void* data, size_t size) {
  switch (memory_) {
    case Memory::kOwned:
    case Memory::kExternal: std::memcpy(data, static_cast<const char*>(t.data) + offset, size); break;
    case Memory::kInner: inner_->get_tensor(t, data, offset, size); break;
    case Memory::kReserved:
      if (!sim_device()->sim()->is_reserved(data)) std::memset(data, 0, size);
      break;
  }
}

void SimBuffer::fill_bytes(const Tensor& t, size_t offset, uint8_t value, size_t size) {
  switch (memory_) {
    case Memory::kOwned:
    case Memory::kExternal: std::memset(static_cast<char*>(t.data) + offset, value, size); break;
    case Memory::kInner: inner_->memset_tensor(const_cast<Tensor&>(t), value, offset, size); break;
    case Memory::kReserved: break;
  }
}

double SimBuffer::host_op(TraceKind kind, const Tensor* t, size_t offset, size_t size, bool write, const char* what) {
  Simulator::Impl& s = *sim_device()->sim();
  s.run_until(s.now);
  const char* tname = t != nullptr ? t->name : "";
  s.hz.begin_command(HazardTracker::kHost, CommandDesc{what, tname, type_->name(), size, 0});
  s.hz.access(hz_id_, (t != nullptr ? offset_of(*t) : 0) + offset, size, write, tname);
  const int dev = sim_device()->index();
  const double dur = type_->is_host() ? 0.0 : s.copy_time_us(write ? -1 : dev, write ? dev : -1, size);
  if (s.opt.record_trace) {
    s.add_event(kind, 0, format_message("%s %s", what, tname), s.now, s.now + dur, size);
    if (!type_->is_host()) s.trace.events.back().device = dev;  // bytes over a link, not a host memory access
  }
  return dur;
}

void SimBuffer::memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) {
  const double dur = host_op(TraceKind::kMemset, &t, offset, size, true, "memset");
  fill_bytes(t, offset, value, size);
  Simulator::Impl& s = *sim_device()->sim();
  s.advance_host(s.now + dur);
}

void SimBuffer::set_tensor(Tensor& t, const void* data, size_t offset, size_t size) {
  const double dur = host_op(TraceKind::kSet, &t, offset, size, true, "set");
  sim_device()->sim()->access_host_pointer(data, size, false);  // (the bytes read, when they are a host buffer's)
  write_bytes(t, offset, data, size);
  Simulator::Impl& s = *sim_device()->sim();
  s.advance_host(s.now + dur);
}

void SimBuffer::get_tensor(const Tensor& t, void* data, size_t offset, size_t size) {
  const double dur = host_op(TraceKind::kGet, &t, offset, size, false, "get");
  sim_device()->sim()->access_host_pointer(data, size, true);  // (the bytes written, when they are a host buffer's)
  read_bytes(t, offset, data, size);
  Simulator::Impl& s = *sim_device()->sim();
  s.advance_host(s.now + dur);
}

bool SimBuffer::cpy_tensor(const Tensor& src, Tensor& dst) {
  Simulator::Impl& s = *sim_device()->sim();
  const size_t n = nbytes(src);
  SimBuffer* sb = sim_buffer_of(&s, src);
  if (sb == nullptr) {
    Buffer* b = tensor_buffer(src);
    if (b == nullptr || !b->is_host()) return false;
    set_tensor(dst, src.data, 0, n);  // host memory the program owns: a set from it
    return true;
  }
  // A blocking device-to-device copy driven by the host.
  s.run_until(s.now);
  s.hz.begin_command(HazardTracker::kHost, CommandDesc{"host copy", src.name, dst.name, n, 0});
  s.hz.access(sb->hazard_id(), sb->offset_of(src), n, false, src.name);
  s.hz.access(hz_id_, offset_of(dst), n, true, dst.name);
  std::vector<uint8_t> tmp(n);
  sb->read_bytes(src, 0, tmp.data(), n);
  write_bytes(dst, 0, tmp.data(), n);
  const double dur = s.copy_time_us(sb->sim_device()->index(), sim_device()->index(), n);
  if (s.opt.record_trace) {
    s.add_event(TraceKind::kCopy, 0, format_message("copy %s -> %s", src.name, dst.name), s.now, s.now + dur, n,
                sb->sim_device()->index());
    s.trace.events.back().device = sim_device()->index();
    s.note_copy(dst);
  }
  s.advance_host(s.now + dur);
  return true;
}

void SimBuffer::clear(uint8_t value) {
  Simulator::Impl& s = *sim_device()->sim();
  s.run_until(s.now);
  s.hz.begin_command(HazardTracker::kHost, CommandDesc{"host clear of", type_->name(), nullptr, size(), 0});
  s.hz.access(hz_id_, 0, size(), true, "");
  if (inner_) {
    inner_->clear(value);
  } else if (memory_ != Memory::kReserved && mem_ != nullptr) {
    std::memset(mem_, value, size());
  }
}

}  // namespace tessera::sim
