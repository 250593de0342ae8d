// Simulated devices, backends (streams) and events (docs/simulator.md); their memory (buffer types, buffers) is
// sim_memory.cpp.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <unordered_map>

#include "sim_impl.h"
#include "tessera/cpu.h"

namespace tessera::sim {

namespace {

constexpr Guid kSimGuid = {
    {0x74, 0x65, 0x73, 0x73, 0x65, 0x72, 0x61, 0x2d, 0x73, 0x69, 0x6d, 0x00, 0x00, 0x00, 0x00, 0x01}};
// Durations are at least this long, so that a command always ends after it starts (ordering by end time then
// respects every dependency).
constexpr double kMinDurationUs = 1e-3;

bool is_compute_node(const Tensor& n) { return n.op != Op::kNone && !op_is_view(n.op) && !is_empty(n); }

// A copy of the nodes of a graph as they are at submission (sources, data pointers, parameters), so the computation
// applied later sees the arguments it was launched with, like a real kernel launch.
struct Snapshot {
  std::deque<Tensor> tensors;
  Graph graph;
  explicit Snapshot(size_t n) : graph(n + 1) {}
};

std::shared_ptr<Snapshot> snapshot(const Graph& g) {
  auto snap = std::make_shared<Snapshot>(g.n_nodes());
  std::unordered_map<const Tensor*, Tensor*> copies;
  auto clone = [&](const Tensor* t) {
    auto it = copies.find(t);
    if (it != copies.end()) return it->second;
    snap->tensors.push_back(*t);
    Tensor* c = &snap->tensors.back();
    copies.emplace(t, c);
    return c;
  };
  for (Tensor* n : g.nodes()) {
    if (!is_compute_node(*n)) continue;
    Tensor* c = clone(n);
    for (int j = 0; j < kMaxSrc; ++j) {
      if (n->src[j] != nullptr) c->src[j] = clone(n->src[j]);
    }
    (void)snap->graph.add_node(c);
  }
  return snap;
}

// ---- stand-ins for storage-only types ----
// Storage-only types (types.h) have no kernels. A metadata-only simulation computes nothing, so a simulated device
// judges a node with such tensors by a stand-in: the same node with each storage-only tensor (the node, its sources,
// its view source) replaced by one of the same shape in a type with kernels of the same kind. The cost model and the
// topology's op rules still see the real node (its bytes, its types).

bool is_storage_only(const Tensor* t) { return t != nullptr && type_is_valid(t->type) && !type_has_kernels(t->type); }

bool has_storage_only(const Tensor& n) {
  if (is_storage_only(&n) || is_storage_only(n.view_src)) return true;
  for (const Tensor* s : n.src) {
    if (is_storage_only(s)) return true;
  }
  return false;
}

// Whether the storage-only tensors of n (has_storage_only) are all i64 sources: i64 indices, which the CPU reference
// kernels read where an op takes them (SET_ROWS: llama.cpp's cache indices), so a memory-backed device asks the
// kernels about the node as it is.
bool storage_only_is_i64_sources(const Tensor& n) {
  if (is_storage_only(&n) || is_storage_only(n.view_src)) return false;
  for (const Tensor* s : n.src) {
    if (is_storage_only(s) && s->type != Type::kI64) return false;
  }
  return true;
}

// A stride of `nb` bytes of type `from`, as the bytes of as many values of type `to`.
size_t scale_stride(size_t nb, const TypeTraits& from, const TypeTraits& to) {
  const size_t values = nb / from.type_size * static_cast<size_t>(from.block_size);
  return values / static_cast<size_t>(to.block_size) * to.type_size;
}

// t in its stand-in type: nb[0] is the stand-in's block (quantized: blocks stay contiguous along dim 0) and the other
// strides (and the view offset) are scaled by the bytes per value; an element type scales nb[0] too (a permuted view
// keeps its layout).
void to_stand_in(Tensor& t) {
  const TypeTraits& from = type_traits(t.type);
  t.type = stand_in_type(t.type);
  const TypeTraits& to = type_traits(t.type);
  for (int i = 0; i < kMaxDims; ++i) t.nb[i] = scale_stride(t.nb[i], from, to);
  if (from.is_quantized) t.nb[0] = to.type_size;
  t.view_offs = scale_stride(t.view_offs, from, to);
}

// The node and the copies its sources point to.
struct StandIn {
  Tensor node;
  Tensor srcs[kMaxSrc];
  Tensor view_src;

  explicit StandIn(const Tensor& n) : node(n) {
    if (is_storage_only(&node)) to_stand_in(node);
    for (int i = 0; i < kMaxSrc; ++i) {
      if (!is_storage_only(n.src[i])) continue;
      srcs[i] = *n.src[i];
      to_stand_in(srcs[i]);
      node.src[i] = &srcs[i];
    }
    if (is_storage_only(n.view_src)) {
      view_src = *n.view_src;
      to_stand_in(view_src);
      node.view_src = &view_src;
    }
  }
};

}  // namespace

Type stand_in_type(Type type) {
  if (type_has_kernels(type) || !type_is_valid(type)) return type;
  const TypeTraits& tt = type_traits(type);
  if (tt.is_quantized) return Type::kQ4_0;
  return tt.is_float ? Type::kF32 : Type::kI32;
}

// =====================================================================================================================
// Device

SimDevice::SimDevice(Simulator::Impl* sim, int index, DeviceConfig cfg, Device* real)
    : sim_(sim),
      index_(index),
      cfg_(std::move(cfg)),
      real_(real),
      main_(this, SimBufferType::Kind::kMain, cfg_.name),
      mapped_(this, SimBufferType::Kind::kMapped, cfg_.name + "_Mapped") {
  if (cfg_.caps.host_buffer)
    host_ = std::make_unique<SimBufferType>(this, SimBufferType::Kind::kHost, cfg_.name + "_Host");
  for (size_t i = 0; i < cfg_.buffer_types.size(); ++i) {
    extras_.push_back(std::make_unique<SimBufferType>(this, SimBufferType::Kind::kExtra, cfg_.buffer_types[i].name,
                                                      static_cast<int>(i)));
  }
  description_ = cfg_.description.empty() ? format_message("simulated %s (%s)", device_type_name(cfg_.type),
                                                           format_bytes(cfg_.memory).c_str())
                                          : cfg_.description;
  if (!cfg_.wraps.empty()) description_ += format_message(" [wraps %s]", cfg_.wraps.c_str());
  stats.memory_total = cfg_.memory;
}

BackendReg* SimDevice::reg() const { return sim_->reg.get(); }

std::vector<BufferType*> SimDevice::extra_buffer_types() {
  std::vector<BufferType*> out;
  for (auto& b : extras_) out.push_back(b.get());
  return out;
}

Result<std::unique_ptr<Backend>> SimDevice::init_backend(const std::string& params) {
  std::unique_ptr<Backend> inner;
  if (real_ != nullptr) {
    auto r = real_->init_backend(params);
    if (!r.ok()) {
      return TS_ERROR(StatusCode::kFailed, "%s: the wrapped device %s: %s", cfg_.name.c_str(), real_->name(),
                      r.status().message().c_str());
    }
    inner = std::move(r).value();
  }
  int serial = 0;
  for (SimBackend* b : sim_->streams) serial += b->sim_device() == this ? 1 : 0;
  return std::unique_ptr<Backend>(std::make_unique<SimBackend>(this, std::move(inner), serial));
}

Result<std::unique_ptr<Buffer>> SimDevice::buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size) {
  if (!cfg_.caps.buffer_from_host_ptr) return Device::buffer_from_host_ptr(ptr, size, max_tensor_size);
  if (ptr == nullptr || size == 0) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: buffer_from_host_ptr needs memory (got %p, %zu bytes)",
                    cfg_.name.c_str(), ptr, size);
  }
  return std::unique_ptr<Buffer>(
      std::make_unique<SimBuffer>(&mapped_, size, SimBuffer::Memory::kExternal, ptr, nullptr));
}

bool SimDevice::supports_op(const Tensor& op) const {
  // Never claim what the kernels cannot compute: the wrapped device's own answer, or the CPU reference kernels'.
  // Storage-only tensors: memory-backed devices compute, so they say no; in metadata-only mode the kernels are asked
  // about the node's stand-in (above).
  // Row split: only a MUL_MAT reads a split tensor, as its 2-D weight, on a device holding some of its rows
  // (ggml-cuda's supports_op; which device computes it is supports_buft's: the main device).
  for (int i = 0; i < kMaxSrc; ++i) {
    const SimBufferType* split = split_type_of(op.src[i]);
    if (split == nullptr) continue;
    if (op.op != Op::kMulMat || i != 0 || op.src[0]->ne[2] != 1 || op.src[0]->ne[3] != 1) return false;
    const SplitLayout& layout = *split->split();
    const int k = layout.position(index_);
    if (k < 0) return false;
    int64_t low = 0, high = 0;
    layout.rows(*op.src[0], static_cast<size_t>(k), &low, &high);
    if (high <= low) return false;
  }
  bool can;
  const bool storage_only = has_storage_only(op);
  if (storage_only && sim_->opt.mode == MemoryMode::kMetadata) {
    const StandIn stand_in(op);
    can = real_ != nullptr ? real_->supports_op(stand_in.node) : cpu::device()->supports_op(stand_in.node);
  } else {
    if (storage_only && !storage_only_is_i64_sources(op)) return false;
    can = real_ != nullptr ? real_->supports_op(op) : cpu::device()->supports_op(op);
  }
  // Leafs and views compute nothing: the rules are about kernels. The rules see the real types.
  if (op.op == Op::kNone || op_is_view(op.op)) return can;
  if (!can || !op_allowed_by_rules(cfg_, op)) return false;
  // A source in one of this device's extra buffer types: that buffer type's op rules decide too (ggml's CPU backend
  // refuses an op on a repacked weight unless the repacked kernels take it).
  for (const Tensor* s : op.src) {
    if (s == nullptr) continue;
    const Buffer* b = tensor_buffer(*s);
    const auto* bt = b != nullptr ? dynamic_cast<const SimBufferType*>(b->type()) : nullptr;
    if (bt == nullptr || bt->sim_device() != this || bt->kind() != SimBufferType::Kind::kExtra) continue;
    if (!buffer_type_allows(*bt->extra_config(), op)) return false;
  }
  return true;
}

bool SimDevice::supports_buft(const BufferType& buft) const {
  if (&buft == &main_ || &buft == &mapped_) return true;
  const auto* split = dynamic_cast<const SimBufferType*>(&buft);
  if (split != nullptr && split->kind() == SimBufferType::Kind::kSplit) return split->sim_device() == this;
  for (const auto& e : extras_) {
    if (&buft == e.get()) return true;
  }
  // A device computing on host memory can read any host buffer.
  return cfg_.host_visible && buft.is_host();
}

std::unique_ptr<Event> SimDevice::event_new() {
  if (!cfg_.caps.events) return nullptr;
  return std::make_unique<SimEvent>(this);
}

// =====================================================================================================================
// Backend (stream)

SimBackend::SimBackend(SimDevice* dev, std::unique_ptr<Backend> inner, int serial)
    : dev_(dev), inner_(std::move(inner)), deferred_error_(std::make_shared<std::string>()) {
  Simulator::Impl& s = *dev_->sim();
  name_ = dev_->config().name;
  const std::string stream = format_message("%s/s%d", name_.c_str(), serial);
  agent_ = s.hz.add_agent(stream);
  track_ = s.add_track(stream, dev_->index());
  s.streams.push_back(this);
}

SimBackend::~SimBackend() {
  Simulator::Impl& s = *dev_->sim();
  s.flush();  // pending work may use the wrapped backend
  s.streams.erase(std::remove(s.streams.begin(), s.streams.end(), this), s.streams.end());
}

Guid SimBackend::guid() const { return kSimGuid; }

double SimBackend::begin(const CommandDesc& description) {
  Simulator::Impl& s = *dev_->sim();
  s.hz.sync(agent_, HazardTracker::kHost);  // the stream sees what the host did before submitting
  s.hz.begin_command(agent_, description);
  ++dev_->stats.n_commands;
  return std::max(s.now, ready_) + s.jitter();
}

double SimBackend::end(double start, double duration_us) {
  const double e = start + std::max(duration_us, kMinDurationUs);
  TS_DEBUG_ASSERT(e >= ready_,
                  "simulator clock: the last end of stream %s went back from %g us to %g us in %s "
                  "(seed %llu)",
                  name_.c_str(), ready_, e, dev_->sim()->hz.describe_command(dev_->sim()->hz.current_command()).c_str(),
                  static_cast<unsigned long long>(dev_->sim()->opt.seed));
  ready_ = e;
  return e;
}

namespace {

// A synchronous device makes the host wait for each command.
void complete_if_sync(SimBackend& b, Simulator::Impl& s, bool async, double end) {
  if (async) return;
  s.advance_host(end);
  s.hz.sync(HazardTracker::kHost, b.agent());
}

}  // namespace

void SimBackend::set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) {
  Simulator::Impl& s = *dev_->sim();
  SimBuffer* b = sim_buffer_of(&s, t);
  if (b == nullptr || !dev_->config().caps.async) {
    Backend::set_tensor_async(t, data, offset, size);
    return;
  }
  const double start = begin(CommandDesc{"set_async", t.name, nullptr, size, 0});
  s.hz.access(b->hazard_id(), b->offset_of(t) + offset, size, true, t.name);
  s.access_host_pointer(data, size, false);  // this stream reads the source bytes when it runs the command
  const double e = end(start, s.copy_time_us(-1, dev_->index(), size));
  if (s.opt.record_trace) s.add_event(TraceKind::kSet, track_, format_message("set %s", t.name), start, e, size);
  s.push(e, [b, tc = t, data, offset, size] { b->write_bytes(tc, offset, data, size); });
}

void SimBackend::get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) {
  Simulator::Impl& s = *dev_->sim();
  SimBuffer* b = sim_buffer_of(&s, t);
  if (b == nullptr || !dev_->config().caps.async) {
    Backend::get_tensor_async(t, data, offset, size);
    return;
  }
  const double start = begin(CommandDesc{"get_async", t.name, nullptr, size, 0});
  s.hz.access(b->hazard_id(), b->offset_of(t) + offset, size, false, t.name);
  s.access_host_pointer(data, size, true);  // and writes the destination bytes
  const double e = end(start, s.copy_time_us(dev_->index(), -1, size));
  if (s.opt.record_trace) s.add_event(TraceKind::kGet, track_, format_message("get %s", t.name), start, e, size);
  s.push(e, [b, tc = t, data, offset, size] { b->read_bytes(tc, offset, data, size); });
}

// The copy runs on this (the destination's) stream, ordered after everything already submitted to the source's
// stream, and the source's later work is ordered after the copy (so it cannot overwrite the source too early): the
// contract of Backend::cpy_tensor_async.
bool SimBackend::cpy_tensor_async(Backend* src_backend, const Tensor& src, Tensor& dst) {
  Simulator::Impl& s = *dev_->sim();
  if (!dev_->config().caps.async || !dev_->config().cpy_tensor_async) return false;
  auto* sbk = dynamic_cast<SimBackend*>(src_backend);
  if (sbk == nullptr || sbk->sim_device()->sim() != &s) return false;
  SimBuffer* sb = sim_buffer_of(&s, src);
  SimBuffer* db = sim_buffer_of(&s, dst);
  if (sb == nullptr || db == nullptr) return false;
  const size_t n = nbytes(src);
  if (sbk != this) s.hz.sync(agent_, sbk->agent());
  wait_until(sbk->ready());
  const double start = begin(CommandDesc{"copy", src.name, dst.name, n, 0});
  s.hz.access(sb->hazard_id(), sb->offset_of(src), n, false, src.name);
  s.hz.access(db->hazard_id(), db->offset_of(dst), n, true, dst.name);
  const double e = end(start, s.copy_time_us(sb->sim_device()->index(), dev_->index(), n));
  if (sbk != this) {
    s.hz.sync(sbk->agent(), agent_);
    sbk->wait_until(e);
  }
  if (s.opt.record_trace) {
    s.add_event(TraceKind::kCopy, track_, format_message("copy %s -> %s", src.name, dst.name), start, e, n,
                sb->sim_device()->index());
    s.note_copy(dst);
  }
  s.push(e, [sb, db, sc = src, dc = dst, n] {
    std::vector<uint8_t> tmp(n);
    sb->read_bytes(sc, 0, tmp.data(), n);
    db->write_bytes(dc, 0, tmp.data(), n);
  });
  return true;
}

Status SimBackend::synchronize() {
  ++dev_->sim()->counters.synchronizes;
  wait_idle();
  if (deferred_error_->empty()) return Status::Ok();
  Status failed(StatusCode::kFailed, *deferred_error_);
  deferred_error_->clear();
  return failed;
}

void SimBackend::wait_idle() {
  Simulator::Impl& s = *dev_->sim();
  if (ready_ > s.now && s.opt.record_trace) {
    s.add_event(TraceKind::kWait, 0, format_message("synchronize %s", name_.c_str()), s.now, ready_, 0);
  }
  s.advance_host(ready_);  // applies this stream's queued commands
  s.hz.sync(HazardTracker::kHost, agent_);
}

// The compute event just added, node by node (each node's time by the cost model, in graph order), with a flow from
// the copy that wrote each source the node reads (docs/simulator.md "Timeline").
void SimBackend::trace_ops(const Graph& graph, double start) {
  Simulator::Impl& s = *dev_->sim();
  Trace& tr = s.trace;
  const int event = static_cast<int>(tr.events.size()) - 1;
  double t = start;
  for (const Tensor* n : graph.nodes()) {
    if (!is_compute_node(*n)) continue;
    const double dur = node_time_us(*dev_, *n);
    const int op = static_cast<int>(tr.ops.size());
    tr.ops.push_back({event, format_message("%s %s", op_name(n->op), n->name), t, t + dur});
    for (const Tensor* src : n->src) {
      if (src == nullptr) continue;
      const void* data = src->view_src != nullptr && src->view_offs == 0 ? src->view_src->data : src->data;
      auto it = s.copied_to.find(src->data);
      if (it == s.copied_to.end()) it = s.copied_to.find(data);
      if (it == s.copied_to.end()) continue;
      const TraceEvent& copy = tr.events[static_cast<size_t>(it->second)];
      TraceFlow f;
      f.kind = FlowKind::kCopy;
      f.from_track = copy.track, f.from_us = copy.start_us, f.from_event = it->second;
      f.to_track = track_, f.to_us = t, f.to_op = op;
      tr.flows.push_back(f);
    }
    s.copied_to.erase(n->data);  // what a later node reads there is no longer the copy
    t += dur;
  }
}

ComputeStatus SimBackend::graph_compute_async(Graph& graph) {
  Simulator::Impl& s = *dev_->sim();
  set_last_error({});
  if (!deferred_error_->empty()) {
    set_last_error(*deferred_error_);
    deferred_error_->clear();
    return ComputeStatus::kFailed;
  }
  const DeviceConfig& cfg = dev_->config();
  // Checks a real device would fail on (or crash on): unsupported ops, unallocated tensors, memory it cannot read.
  double cost = 0.0;
  size_t n_compute = 0;
  const Tensor* first = nullptr;
  const Tensor* last = nullptr;
  for (Tensor* n : graph.nodes()) {
    if (!is_compute_node(*n)) continue;
    if (!dev_->supports_op(*n)) {
      set_last_error(format_message("%s: does not support %s", name_.c_str(), describe(*n).c_str()));
      return ComputeStatus::kFailed;
    }
    for (int j = -1; j < kMaxSrc; ++j) {
      const Tensor* t = j < 0 ? n : n->src[j];
      if (t == nullptr || is_empty(*t)) continue;
      Buffer* b = tensor_buffer(*t);
      if (b == nullptr || t->data == nullptr) {
        set_last_error(
            format_message("%s: %s of %s is not allocated", name_.c_str(), describe(*t).c_str(), describe(*n).c_str()));
        return ComputeStatus::kFailed;
      }
      if (!dev_->supports_buft(*b->type())) {
        set_last_error(format_message("%s: %s of %s is in buffer type %s, which this device cannot access",
                                      name_.c_str(), describe(*t).c_str(), describe(*n).c_str(), b->type()->name()));
        return ComputeStatus::kFailed;
      }
    }
    const auto& failing = s.opt.faults.fail_compute_ops;
    if (std::find(failing.begin(), failing.end(), n->op) != failing.end() &&
        (s.opt.faults.fail_compute_device.empty() || same_name(s.opt.faults.fail_compute_device, cfg.name))) {
      set_last_error(format_message("%s: injected fault: compute of %s fails (seed %llu)", name_.c_str(),
                                    describe(*n).c_str(), static_cast<unsigned long long>(s.opt.seed)));
      return ComputeStatus::kFailed;
    }
    cost += node_time_us(*dev_, *n);
    if (first == nullptr) first = n;
    last = n;
    ++n_compute;
  }
  if (n_compute == 0) return ComputeStatus::kSuccess;

  const double start = begin(CommandDesc{n_compute == 1 ? op_name(first->op) : "compute", first->name,
                                         n_compute == 1 ? nullptr : last->name, 0, n_compute});
  for (Tensor* n : graph.nodes()) {
    if (!is_compute_node(*n)) continue;
    for (const Tensor* src : n->src) {
      if (src == nullptr || is_empty(*src)) continue;
      if (SimBuffer* b = sim_buffer_of(&s, *src))
        s.hz.access(b->hazard_id(), b->offset_of(*src), nbytes(*src), false, src->name);
    }
    if (SimBuffer* b = sim_buffer_of(&s, *n)) s.hz.access(b->hazard_id(), b->offset_of(*n), nbytes(*n), true, n->name);
  }
  const double e = end(start, cost);
  if (s.opt.record_trace) {
    s.add_event(TraceKind::kCompute, track_,
                n_compute == 1 ? format_message("%s %s", op_name(first->op), first->name)
                               : format_message("%zu nodes %s .. %s", n_compute, first->name, last->name),
                start, e, 0);
    trace_ops(graph, start);
  }
  if (s.opt.mode == MemoryMode::kBacked) {
    std::shared_ptr<Snapshot> snap = snapshot(graph);
    Backend* inner = inner_.get();
    std::shared_ptr<std::string> deferred = deferred_error_;
    Simulator::Impl* sp = &s;
    std::string stream = name_;
    s.push(e, [snap, inner, deferred, sp, stream] {
      std::string err;
      ComputeStatus st;
      if (inner != nullptr) {
        st = inner->graph_compute(snap->graph);
        if (st != ComputeStatus::kSuccess) err = inner->last_error();
      } else {
        st = cpu::compute_graph_host_memory(snap->graph, &err);
      }
      if (st != ComputeStatus::kSuccess) {
        *deferred = format_message("%s: a queued computation failed when it ran: %s", stream.c_str(), err.c_str());
        sp->errors.push_back(*deferred);
      }
    });
  } else {
    s.push(e, nullptr);
  }
  complete_if_sync(*this, s, cfg.caps.async, e);
  if (!cfg.caps.async && !deferred_error_->empty()) {
    set_last_error(*deferred_error_);
    deferred_error_->clear();
    return ComputeStatus::kFailed;
  }
  return ComputeStatus::kSuccess;
}

// =====================================================================================================================
// Events

SimBackend* SimEvent::as_sim(Backend& backend, const char* what) {
  auto* b = dynamic_cast<SimBackend*>(&backend);
  if (b == nullptr || b->sim_device()->sim() != dev_->sim()) {
    dev_->sim()->errors.push_back(
        format_message("event of %s: %s on backend %s, which is not a stream of this "
                       "simulator (ignored)",
                       dev_->name(), what, backend.name()));
    return nullptr;
  }
  return b;
}

void SimEvent::record(Backend& backend) {
  SimBackend* b = as_sim(backend, "record");
  if (b == nullptr) return;
  HazardTracker& hz = dev_->sim()->hz;
  hz.sync(b->agent(), HazardTracker::kHost);
  clock_ = hz.release(b->agent());
  time_ = b->ready();
  recorded_ = true;
  track_ = b->track();
}

void SimEvent::wait(Backend& backend) {
  SimBackend* b = as_sim(backend, "wait");
  if (b == nullptr || !recorded_) return;
  Simulator::Impl& s = *dev_->sim();
  ++s.n_event_waits;
  ++s.counters.event_waits;
  if (s.opt.faults.drop_event_wait_nth > 0 && s.n_event_waits == s.opt.faults.drop_event_wait_nth) return;
  s.hz.sync(b->agent(), HazardTracker::kHost);
  s.hz.acquire(b->agent(), clock_);
  const double t = time_ + s.opt.faults.slow_event_us;
  const double from = std::max(b->ready(), s.now);
  if (t > from) s.add_event(TraceKind::kWait, b->track(), "event wait", from, t, 0);
  add_flow(b->track(), from);
  b->wait_until(t);
}

void SimEvent::add_flow(int to_track, double to_us) {
  Simulator::Impl& s = *dev_->sim();
  if (!s.opt.record_trace) return;
  TraceFlow f;
  f.kind = FlowKind::kEvent;
  f.from_track = track_, f.from_us = time_;
  f.to_track = to_track, f.to_us = to_us;
  s.trace.flows.push_back(f);
}

void SimEvent::synchronize() {
  if (!recorded_) return;
  Simulator::Impl& s = *dev_->sim();
  ++s.counters.event_synchronizes;
  const double t = time_ + s.opt.faults.slow_event_us;
  if (t > s.now) s.add_event(TraceKind::kWait, 0, "event synchronize", s.now, t, 0);
  add_flow(0, s.now);
  s.advance_host(t);
  s.hz.acquire(HazardTracker::kHost, clock_);
}

}  // namespace tessera::sim
