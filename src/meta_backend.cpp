// The meta device, its buffer type and its backend (tessera/meta_backend.h; docs/tensor-parallel.md). Written after
// ggml's meta backend (ggml/src/ggml-backend-meta.cpp): simple tensors per device with the split axis's extent cut to
// the device's slice, subgraphs ended by partial results, and an AllReduce of each partial result.
#include "tessera/meta_backend.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/ops.h"
#include "tessera/types.h"

namespace tessera {

namespace {

constexpr size_t kMaxMetaDevices = 16;  // GGML_BACKEND_META_MAX_DEVICES
constexpr Guid kMetaGuid = {
    {0x6d, 0x65, 0x74, 0x61, 0x2d, 0x74, 0x65, 0x73, 0x73, 0x65, 0x72, 0x61, 0x00, 0x00, 0x00, 0x01}};

class MetaBufferType;

// The simple buffers of a meta buffer: sizes[j] bytes of device j's buffer type each. Errors name the device.
Result<std::vector<std::unique_ptr<Buffer>>> alloc_parts(MetaDevice& meta, const std::vector<size_t>& sizes) {
  std::vector<std::unique_ptr<Buffer>> parts;
  for (size_t j = 0; j < meta.n_devices(); ++j) {
    auto b = meta.device(j)->buffer_type()->alloc_buffer(sizes[j]);
    if (!b.ok()) {
      return Status(b.status().code(), format_message("meta buffer of %zu bytes on %s: %s", sizes[j],
                                                      meta.device(j)->name(), b.status().message().c_str()));
    }
    if (b.value()->is_multi()) {
      return TS_ERROR(StatusCode::kUnsupported, "meta buffer on %s: multi-buffers are not supported",
                      meta.device(j)->name());
    }
    parts.push_back(std::move(b).value());
  }
  return parts;
}

// A meta buffer: one simple buffer per device, each as large as the meta buffer (a tensor's slice sits at the
// tensor's offset in each of them). Its base is an opaque address, used for offsets only.
class MetaBuffer final : public Buffer {
 public:
  MetaBuffer(BufferType* type, size_t size, MetaDevice* meta, std::vector<std::unique_ptr<Buffer>> parts)
      : Buffer(type, size), meta_(meta), parts_(std::move(parts)) {}

  void* base() override { return reinterpret_cast<void*>(kBase); }
  void set_usage(BufferUsage usage) override {
    Buffer::set_usage(usage);
    for (auto& p : parts_) p->set_usage(usage);
  }
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override {
    std::vector<uint8_t> bytes(size, value);
    set_tensor(t, bytes.data(), offset, size);
  }
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override {
    io(t, const_cast<void*>(data), offset, size, /*write=*/true);
  }
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override {
    io(t, data, offset, size, /*write=*/false);
  }
  void clear(uint8_t value) override {
    for (auto& p : parts_) p->clear(value);
  }
  void reset() override {
    for (auto& p : parts_) p->reset();
  }

  Buffer* part(size_t j) const { return parts_[j].get(); }
  // Where t's simple tensor starts in device j's simple buffer: at t's own offset, or, for a tensor placed by
  // meta_alloc_ctx_tensors, where its slices were packed on that device.
  size_t offset_of(const Tensor& t, size_t j) const {
    if (const auto it = packed_.find(&t); it != packed_.end()) return it->second[j];
    return static_cast<size_t>(static_cast<const char*>(t.data) - reinterpret_cast<const char*>(kBase));
  }
  void set_packed(const Tensor* t, std::vector<size_t> offsets) { packed_[t] = std::move(offsets); }
  static void* fake_base() { return reinterpret_cast<void*>(kBase); }

 private:
  static constexpr uintptr_t kBase = uintptr_t{1} << 44;

  void io(const Tensor& t, void* data, size_t offset, size_t size, bool write);

  MetaDevice* meta_;
  std::vector<std::unique_ptr<Buffer>> parts_;
  std::unordered_map<const Tensor*, std::vector<size_t>> packed_;
};

class MetaBufferType final : public BufferType {
 public:
  explicit MetaBufferType(MetaDevice* meta) : meta_(meta) {
    for (size_t j = 0; j < meta->n_devices(); ++j) {
      BufferType* b = meta->device(j)->buffer_type();
      alignment_ = std::max(alignment_, b->alignment());
      max_size_ = std::min(max_size_, b->max_size());
    }
  }
  const char* name() const override { return "Meta"; }
  size_t alignment() const override { return alignment_; }
  size_t max_size() const override { return max_size_; }
  // The full tensor on the device that pads it most: every slice fits in it.
  size_t alloc_size(const Tensor& t) const override {
    size_t n = BufferType::alloc_size(t);
    for (size_t j = 0; j < meta_->n_devices(); ++j) n = std::max(n, meta_->device(j)->buffer_type()->alloc_size(t));
    return n;
  }
  Device* device() const override { return meta_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    auto parts = alloc_parts(*meta_, std::vector<size_t>(meta_->n_devices(), size));
    if (!parts.ok()) return parts.status();
    return std::unique_ptr<Buffer>(std::make_unique<MetaBuffer>(this, size, meta_, std::move(parts).value()));
  }

 private:
  MetaDevice* meta_;
  size_t alignment_ = 1;
  size_t max_size_ = SIZE_MAX;
};

class MetaReg final : public BackendReg {
 public:
  explicit MetaReg(MetaDevice* d) : d_(d) {}
  const char* name() const override { return "Meta"; }
  size_t device_count() const override { return 1; }
  Device* device(size_t) const override { return d_; }

 private:
  MetaDevice* d_;
};

const MetaBuffer* as_meta(const Buffer* b) {
  return b != nullptr && b->type() != nullptr && dynamic_cast<const MetaBufferType*>(b->type()) != nullptr
             ? static_cast<const MetaBuffer*>(b)
             : nullptr;
}

// Along the split axis: which device holds index i, and where in its slice (segments, then repetitions, then
// devices, as ggml lays them out).
struct AxisMap {
  std::vector<uint32_t> owner;
  std::vector<int64_t> local;
};
AxisMap axis_map(const SplitState& s, int64_t extent, size_t n) {
  AxisMap m;
  m.owner.reserve(static_cast<size_t>(extent));
  m.local.reserve(static_cast<size_t>(extent));
  std::vector<int64_t> next(n, 0);
  for (size_t seg = 0; seg < s.nr.size(); ++seg) {
    for (uint32_t r = 0; r < s.nr[seg]; ++r) {
      for (size_t j = 0; j < n; ++j) {
        const int64_t k = s.ne[seg * n + j];
        for (int64_t e = 0; e < k; ++e) {
          m.owner.push_back(static_cast<uint32_t>(j));
          m.local.push_back(next[j]++);
        }
      }
    }
  }
  return m;
}

// The simple tensor of t on device j for I/O: its slice's layout at its offset in the device's simple buffer.
Tensor io_tensor(const Tensor& t, const SplitState& s, size_t j, size_t n, Buffer* part, size_t offset) {
  Tensor x;
  x.type = t.type;
  MetaDevice::slice_layout(t, s, j, n, x.ne, x.nb);
  x.buffer = part;
  x.data = static_cast<char*>(part->base()) + offset;
  std::memcpy(x.name, t.name, sizeof x.name);
  return x;
}

// The offset of t's simple tensor on device j in its simple buffer (ggml: a view's offset scales with the slice when
// it lies beyond the split, not when it is internal to it).
size_t simple_offset(const MetaBuffer& mb, const Tensor& t, const SplitState& s, const SplitState& view_src_state,
                     size_t j, size_t n) {
  if (t.view_src == nullptr) return mb.offset_of(t, j);
  const Tensor& src = *t.view_src;
  size_t offs = t.view_offs;
  if (offs > 0 && s.is_split() && view_src_state.is_split()) {
    const int a = static_cast<int>(s.axis);
    const int a_src = static_cast<int>(view_src_state.axis);
    bool internal = offs <= src.nb[a_src];
    for (int i = 0; i < kMaxDims && !internal; ++i) {
      const size_t dim_size = static_cast<size_t>(t.ne[i]) * t.nb[i];
      if (offs <= dim_size && dim_size < t.nb[a]) internal = true;
    }
    if (!internal && t.ne[a] != 0) {
      offs = static_cast<size_t>(static_cast<unsigned __int128>(offs) * static_cast<uint64_t>(s.on_device(j, n)) /
                                 static_cast<uint64_t>(t.ne[a]));
    }
  }
  return mb.offset_of(src, j) + offs;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// I/O of a meta tensor: mirrored tensors are written to every device and read from the first; partial ones are
// written as 1/n on each device and read as the sum; split ones go slice by slice, row by row.
void MetaBuffer::io(const Tensor& t, void* data, size_t offset, size_t size, bool write) {
  const size_t n = parts_.size();
  const SplitState s = meta_->io_state(t);
  const SplitState vs = t.view_src != nullptr ? meta_->io_state(*t.view_src) : SplitState{};
  auto* bytes = static_cast<char*>(data);
  if (!s.is_split()) {
    if (s.axis == SplitAxis::kPartial && t.type == Type::kF32 && offset % 4 == 0 && size % 4 == 0) {
      std::vector<float> v(size / 4, 0.0f);
      if (write) {
        std::memcpy(v.data(), bytes, size);
        for (float& f : v) f /= static_cast<float>(n);
      }
      std::vector<float> tmp(size / 4);
      for (size_t j = 0; j < n; ++j) {
        Tensor x = io_tensor(t, s, j, n, parts_[j].get(), simple_offset(*this, t, s, vs, j, n));
        if (write) {
          parts_[j]->set_tensor(x, v.data(), offset, size);
        } else {
          parts_[j]->get_tensor(x, tmp.data(), offset, size);
          for (size_t k = 0; k < v.size(); ++k) v[k] += tmp[k];
        }
      }
      if (!write) std::memcpy(bytes, v.data(), size);
      return;
    }
    for (size_t j = 0; j < n; ++j) {
      Tensor x = io_tensor(t, s, j, n, parts_[j].get(), simple_offset(*this, t, s, vs, j, n));
      if (write) {
        parts_[j]->set_tensor(x, bytes, offset, size);
      } else {
        parts_[j]->get_tensor(x, bytes, offset, size);
        return;
      }
    }
    return;
  }
  // Split: walk the tensor's rows (and, split along axis 0, the runs of blocks on one device); copy the part of each
  // contiguous piece that lies in [offset, offset + size).
  const int a = static_cast<int>(s.axis);
  const AxisMap map = axis_map(s, t.ne[a], n);
  std::vector<Tensor> x(n);
  for (size_t j = 0; j < n; ++j) x[j] = io_tensor(t, s, j, n, parts_[j].get(), simple_offset(*this, t, s, vs, j, n));
  const int64_t blck = type_traits(t.type).block_size;
  const size_t block_bytes = type_traits(t.type).type_size;
  const int64_t nblocks = t.ne[0] / blck;
  const bool rows_packed = t.nb[0] == block_bytes;
  const size_t lo = offset;
  const size_t hi = offset + size;
  auto piece = [&](size_t j, size_t meta_pos, size_t simple_pos, size_t len) {
    const size_t b = std::max(meta_pos, lo);
    const size_t e = std::min(meta_pos + len, hi);
    if (b >= e) return;
    const size_t in_simple = simple_pos + (b - meta_pos);
    if (write) {
      parts_[j]->set_tensor(x[j], bytes + (b - lo), in_simple, e - b);
    } else {
      parts_[j]->get_tensor(x[j], bytes + (b - lo), in_simple, e - b);
    }
  };
  int64_t idx[4];
  for (idx[3] = 0; idx[3] < t.ne[3]; ++idx[3]) {
    for (idx[2] = 0; idx[2] < t.ne[2]; ++idx[2]) {
      for (idx[1] = 0; idx[1] < t.ne[1]; ++idx[1]) {
        size_t meta_row = 0;
        for (int d = 1; d < 4; ++d) meta_row += static_cast<size_t>(idx[d]) * t.nb[d];
        if (a != 0) {
          const uint32_t j = map.owner[static_cast<size_t>(idx[a])];
          size_t simple_row = 0;
          for (int d = 1; d < 4; ++d) {
            simple_row += static_cast<size_t>(d == a ? map.local[static_cast<size_t>(idx[a])] : idx[d]) * x[j].nb[d];
          }
          if (rows_packed) {
            piece(j, meta_row, simple_row, static_cast<size_t>(nblocks) * block_bytes);
          } else {
            for (int64_t i0 = 0; i0 < nblocks; ++i0) {
              piece(j, meta_row + static_cast<size_t>(i0) * t.nb[0], simple_row + static_cast<size_t>(i0) * x[j].nb[0],
                    block_bytes);
            }
          }
          continue;
        }
        // split along axis 0 (whole blocks): runs of consecutive blocks on one device
        std::vector<size_t> simple_row(n, 0);
        for (size_t j = 0; j < n; ++j) {
          for (int d = 1; d < 4; ++d) simple_row[j] += static_cast<size_t>(idx[d]) * x[j].nb[d];
        }
        int64_t b0 = 0;
        while (b0 < nblocks) {
          const uint32_t j = map.owner[static_cast<size_t>(b0 * blck)];
          int64_t b1 = b0 + 1;
          while (rows_packed && b1 < nblocks && map.owner[static_cast<size_t>(b1 * blck)] == j) ++b1;
          const int64_t local_block = map.local[static_cast<size_t>(b0 * blck)] / blck;
          piece(j, meta_row + static_cast<size_t>(b0) * t.nb[0],
                simple_row[j] + static_cast<size_t>(local_block) * x[j].nb[0],
                static_cast<size_t>(b1 - b0) * block_bytes);
          b0 = b1;
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The meta backend.
class MetaBackend final : public Backend {
 public:
  MetaBackend(MetaDevice* meta, std::vector<std::unique_ptr<Backend>> backends)
      : meta_(meta), backends_(std::move(backends)) {}

  const char* name() const override { return meta_->name(); }
  Guid guid() const override { return kMetaGuid; }
  Device* device() const override { return meta_; }

  Status synchronize() override {
    Status first = Status::Ok();
    for (auto& b : backends_) {
      Status s = b->synchronize();
      if (!s.ok() && first.ok()) first = s;
    }
    return first;
  }

  ComputeStatus graph_compute_async(Graph& graph) override;

  const MetaComputeStats& stats() const { return stats_; }

 private:
  ComputeStatus failed(std::string msg) {
    set_last_error(std::move(msg));
    return ComputeStatus::kFailed;
  }
  // The simple tensor of t on device j (t itself when it is outside the meta buffers).
  Tensor* simple(Tensor* t, size_t j);
  Status all_reduce(Tensor* node);

  MetaDevice* meta_;
  std::vector<std::unique_ptr<Backend>> backends_;
  // Per computation: each device's simple tensors and the plan they follow.
  std::vector<std::unique_ptr<Context>> ctx_;
  std::vector<std::unordered_map<const Tensor*, Tensor*>> simple_;
  std::vector<std::unique_ptr<Graph>> graphs_;
  std::vector<std::unique_ptr<Buffer>> scratch_;  // per device: the AllReduce's received parts and partial sums
  TensorParallelPlan plan_;
  MetaComputeStats stats_;
};

Tensor* MetaBackend::simple(Tensor* t, size_t j) {
  if (t == nullptr) return nullptr;
  const MetaBuffer* mb = as_meta(tensor_buffer(*t));
  if (mb == nullptr) return t;
  auto& map = simple_[j];
  if (const auto it = map.find(t); it != map.end()) return it->second;
  const size_t n = backends_.size();
  const SplitState* ps = plan_.of(t);
  const SplitState s = ps != nullptr ? *ps : meta_->io_state(*t);
  int64_t ne[4];
  size_t nb[4];
  MetaDevice::slice_layout(*t, s, j, n, ne, nb);
  Tensor* x = ctx_[j]->new_tensor(t->type, 4, ne);
  if (x == nullptr) return nullptr;
  for (int d = 0; d < kMaxDims; ++d) x->nb[d] = nb[d];
  x->op = t->op;
  std::memcpy(x->op_params, t->op_params, sizeof x->op_params);
  x->flags = t->flags;
  std::memcpy(x->name, t->name, sizeof x->name);
  Buffer* part = mb->part(j);
  x->buffer = part;
  map.emplace(t, x);
  if (t->view_src != nullptr) {
    Tensor* vs = simple(t->view_src, j);
    if (vs == nullptr) return nullptr;
    const SplitState* pvs = plan_.of(t->view_src);
    const SplitState vstate = pvs != nullptr ? *pvs : meta_->io_state(*t->view_src);
    x->view_src = vs;
    x->view_offs = simple_offset(*mb, *t, s, vstate, j, n) - mb->offset_of(*t->view_src, j);
    x->data = static_cast<char*>(vs->data) + x->view_offs;
  } else {
    x->data = static_cast<char*>(part->base()) + mb->offset_of(*t, j);
  }
  for (int i = 0; i < kMaxSrc; ++i) {
    if (t->src[i] == nullptr) continue;
    x->src[i] = t->src[i] == t ? x : simple(t->src[i], j);
    if (x->src[i] == nullptr) return nullptr;
  }
  return x;
}

// The AllReduce of a partial result: a ring over the devices in order, as NCCL's ring AllReduce (ggml's meta backend
// hands it to the backend's own AllReduce where there is one: NCCL on CUDA). The result is cut into n chunks. Reduce-
// scatter: in each of n - 1 steps every device sends one chunk to the next device, which adds it to its own; after them
// device j holds the sum of chunk j + 1. All-gather: in n - 1 more steps the summed chunks go round, each copied over
// the next device's chunk. Each device sends and receives 2 (n - 1) / n of the result, and every device ends with the
// same bits (each chunk is summed on one device). The copies are Backend::cpy_tensor_async's (tensor_copy_async): a
// copy runs after the work its source device was given and before what that device is given next; within a step all
// copies are issued before the additions. One chunk of scratch per device receives the reduce-scatter's parts (a copy
// into it waits for that device's previous addition, which read it).
Status MetaBackend::all_reduce(Tensor* node) {
  const size_t n = backends_.size();
  if (node->type != Type::kF32) {
    return TS_ERROR(StatusCode::kUnsupported, "meta backend: the partial result '%s' is %s (an AllReduce adds f32)",
                    node->name, type_name(node->type));
  }
  const size_t bytes = nbytes(*node);
  ++stats_.reductions;
  stats_.reduced_bytes += bytes;
  if (n == 1) return Status::Ok();
  if (!is_contiguous(*node)) {
    return TS_ERROR(StatusCode::kUnsupported, "meta backend: the partial result '%s' is not contiguous", node->name);
  }
  const int64_t total = nelements(*node);
  const int64_t chunk = (total + static_cast<int64_t>(n) - 1) / static_cast<int64_t>(n);
  auto chunk_len = [&](size_t c) {
    const int64_t lo = std::min<int64_t>(static_cast<int64_t>(c) * chunk, total);
    return std::min<int64_t>(lo + chunk, total) - lo;
  };
  if (scratch_.size() != n) scratch_.resize(n);
  for (size_t j = 0; j < n; ++j) {
    BufferType* buft = backends_[j]->device()->buffer_type();
    Tensor probe;
    probe.ne[0] = chunk;
    probe.nb[0] = 4;
    probe.nb[1] = probe.nb[2] = probe.nb[3] = static_cast<size_t>(chunk) * 4;
    const size_t need = std::max<size_t>(buft->alloc_size(probe), 1);
    if (scratch_[j] != nullptr && scratch_[j]->size() >= need) continue;
    TS_RETURN_IF_ERROR(synchronize());  // (the old scratch may still be read)
    auto b = buft->alloc_buffer(need);
    if (!b.ok()) {
      return Status(b.status().code(), format_message("meta backend: AllReduce scratch of %zu bytes on %s: %s", need,
                                                      backends_[j]->device()->name(), b.status().message().c_str()));
    }
    scratch_[j] = std::move(b).value();
  }
  // chunk c of device j's part: a view of its simple tensor
  auto part = [&](size_t j, size_t c) -> Result<Tensor*> {
    Tensor* x = simple_[j].at(node);
    Tensor* v = view_1d(*ctx_[j], x, chunk_len(c), static_cast<size_t>(static_cast<int64_t>(c) * chunk) * 4);
    if (v == nullptr) return ctx_[j]->status();
    TS_RETURN_IF_ERROR(view_init(*v));
    return v;
  };
  auto mod = [&](int64_t v) {
    return static_cast<size_t>(((v % static_cast<int64_t>(n)) + static_cast<int64_t>(n)) % static_cast<int64_t>(n));
  };
  for (int phase = 0; phase < 2; ++phase) {
    for (size_t step = 0; step + 1 < n; ++step) {
      // device j sends chunk (j - step) (reduce-scatter) or (j + 1 - step) (all-gather) to device j + 1
      std::vector<Tensor*> received(n, nullptr);
      std::vector<Tensor*> own(n, nullptr);
      // the even devices send first, then the odd ones: a copy runs on its destination's stream and its source waits
      // for it, so in device order each copy would wait for the one before (a chain of n); this way a step takes two
      // copy times (three with an odd n)
      const size_t evens = (n + 1) / 2;
      for (size_t k = 0; k < n; ++k) {
        const size_t j = k < evens ? 2 * k : 2 * (k - evens) + 1;
        const size_t to = (j + 1) % n;
        const size_t c = mod(static_cast<int64_t>(j) + phase - static_cast<int64_t>(step));
        if (chunk_len(c) == 0) continue;
        auto src = part(j, c);
        if (!src.ok()) return src.status();
        auto dst_own = part(to, c);
        if (!dst_own.ok()) return dst_own.status();
        Tensor* dst = dst_own.value();
        if (phase == 0) {  // into the scratch, to be added
          dst = ctx_[to]->new_tensor_1d(Type::kF32, chunk_len(c));
          if (dst == nullptr) return ctx_[to]->status();
          TS_RETURN_IF_ERROR(tensor_alloc(*scratch_[to], *dst, scratch_[to]->base()));
        }
        TS_RETURN_IF_ERROR(tensor_copy_async(*backends_[j], *backends_[to], *src.value(), *dst));
        received[to] = dst;
        own[to] = dst_own.value();
      }
      if (phase == 1) continue;
      for (size_t j = 0; j < n; ++j) {
        if (received[j] == nullptr) continue;
        Context& c = *ctx_[j];
        // the sum in place of the device's chunk (an element-wise op may write over its first source)
        Tensor* sum = add(c, own[j], received[j]);
        if (sum == nullptr) return c.status();
        sum->buffer = own[j]->buffer;
        sum->data = own[j]->data;
        auto g = std::make_unique<Graph>(1);
        TS_RETURN_IF_ERROR(g->add_node(sum));
        if (backends_[j]->graph_compute_async(*g) != ComputeStatus::kSuccess) {
          return TS_ERROR(StatusCode::kFailed, "meta backend: AllReduce of '%s' on %s: %s", node->name,
                          backends_[j]->name(), backends_[j]->last_error().c_str());
        }
        graphs_.push_back(std::move(g));
      }
    }
  }
  return Status::Ok();
}

ComputeStatus MetaBackend::graph_compute_async(Graph& graph) {
  const size_t n = backends_.size();
  stats_ = {};
  // Plan: weights and caches by the application; tensors outside the meta buffers (the CPU's inputs) are read whole.
  for (Tensor* node : graph.nodes()) {
    if (as_meta(tensor_buffer(*node)) == nullptr) {
      return failed(
          format_message("meta backend: node '%s' (%s) is not in a meta buffer", node->name, op_name(node->op)));
    }
  }
  const StaticSplitFn& statics = meta_->statics();
  auto r = plan_tensor_parallel(graph, n, [&](const Tensor& t) -> std::optional<SplitState> {
    // a tensor outside the meta buffers is read whole, whatever state the application would give it
    const Buffer* b = tensor_buffer(t);
    if (b == nullptr || as_meta(b) == nullptr) return SplitState{};  // mirrored
    if (statics) {
      if (auto s = statics(t)) return s;
    }
    if (!graph.visited(&t)) return meta_->io_state(t);
    return std::nullopt;
  });
  if (!r.ok()) return failed(r.status().message());
  plan_ = std::move(r).value();

  ctx_.clear();
  simple_.assign(n, {});
  for (size_t j = 0; j < n; ++j) ctx_.push_back(std::make_unique<Context>(ContextParams{.no_alloc = true}));
  // Each device's nodes; a node is not computed on a device where one of its split sources has an empty slice (its
  // result there is empty, or a partial sum of nothing: zero).
  std::vector<std::vector<bool>> skipped(n, std::vector<bool>(graph.n_nodes(), false));
  for (size_t j = 0; j < n; ++j) {
    for (size_t i = 0; i < graph.n_nodes(); ++i) {
      Tensor* node = graph.node(i);
      Tensor* x = simple(node, j);
      if (x == nullptr) return failed("meta backend: " + ctx_[j]->status().message());
      bool skip = false;
      for (int k = 0; k < kMaxSrc && !skip; ++k) {
        const Tensor* src = node->src[k];
        if (src == nullptr || src == node) continue;
        const SplitState* ss = plan_.of(src);
        if (ss != nullptr && ss->is_split() && ss->on_device(j, n) == 0) skip = true;
      }
      skipped[j][i] = skip;
      if (skip) ++stats_.skipped_slices;
    }
  }
  // Subgraphs: each ends at a reduction (or at the last node).
  std::vector<size_t> ends = plan_.reductions;
  if (graph.n_nodes() > 0 && (ends.empty() || ends.back() != graph.n_nodes() - 1)) ends.push_back(graph.n_nodes() - 1);
  graphs_.clear();
  size_t start = 0;
  for (size_t e : ends) {
    for (size_t j = 0; j < n; ++j) {
      // A partial sum not computed on this device is zero there: it is cleared before the nodes after it (a delayed
      // AllReduce's ADD_ID of a partial bias, MULs) read it.
      auto g = std::make_unique<Graph>(std::max<size_t>(e + 1 - start, 1));
      for (size_t i = start; i <= e; ++i) {
        Tensor* x = simple_[j].at(graph.node(i));
        if (!skipped[j][i]) {
          (void)g->add_node(x);
          continue;
        }
        if (plan_.of(graph.node(i))->axis != SplitAxis::kPartial) continue;
        if (g->n_nodes() > 0) {
          if (backends_[j]->graph_compute_async(*g) != ComputeStatus::kSuccess) {
            return failed(
                format_message("meta backend: %s: %s", backends_[j]->name(), backends_[j]->last_error().c_str()));
          }
          graphs_.push_back(std::move(g));
          g = std::make_unique<Graph>(std::max<size_t>(e + 1 - i, 1));
        }
        Status st = backends_[j]->synchronize();
        if (st.ok()) st = tensor_memset(*x, 0, 0, nbytes(*x));
        if (!st.ok()) return failed(format_message("meta backend: %s: %s", backends_[j]->name(), st.message().c_str()));
      }
      if (g->n_nodes() > 0 && backends_[j]->graph_compute_async(*g) != ComputeStatus::kSuccess) {
        return failed(format_message("meta backend: %s: %s", backends_[j]->name(), backends_[j]->last_error().c_str()));
      }
      graphs_.push_back(std::move(g));
    }
    ++stats_.subgraphs;
    if (std::binary_search(plan_.reductions.begin(), plan_.reductions.end(), e)) {
      const Status s = all_reduce(graph.node(e));
      if (!s.ok()) return failed(s.message());
    }
    start = e + 1;
  }
  // What the nodes read back as (and later graphs' sources): a reduced node is mirrored now; a partial sum the
  // AllReduce waited for reads as the sum of the devices' parts.
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    const Tensor* node = graph.node(i);
    SplitState s = *plan_.of(node);
    if (std::binary_search(plan_.reductions.begin(), plan_.reductions.end(), i)) s = SplitState{};
    meta_->last_states_[node] = s;
  }
  return ComputeStatus::kSuccess;
}

// ---------------------------------------------------------------------------------------------------------------
// The meta device.
MetaDevice::~MetaDevice() = default;

void MetaDevice::memory(size_t* free, size_t* total) const {
  size_t f = 0;
  size_t t = 0;
  for (Device* d : devices_) {
    size_t df = 0;
    size_t dt = 0;
    d->memory(&df, &dt);
    f += df;
    t += dt;
  }
  *free = f;
  *total = t;
}

DeviceType MetaDevice::type() const { return devices_.front()->type(); }
DeviceCaps MetaDevice::caps() const { return DeviceCaps{}; }
BackendReg* MetaDevice::reg() const { return reg_.get(); }
BufferType* MetaDevice::buffer_type() { return buft_.get(); }

Result<std::unique_ptr<Backend>> MetaDevice::init_backend(const std::string& params) {
  std::vector<std::unique_ptr<Backend>> backends;
  for (Device* d : devices_) {
    auto b = d->init_backend(params);
    if (!b.ok()) {
      return Status(b.status().code(),
                    format_message("meta device: backend of %s: %s", d->name(), b.status().message().c_str()));
    }
    backends.push_back(std::move(b).value());
  }
  return std::unique_ptr<Backend>(std::make_unique<MetaBackend>(this, std::move(backends)));
}

bool MetaDevice::supports_op(const Tensor& op) const {
  return std::all_of(devices_.begin(), devices_.end(), [&](Device* d) { return d->supports_op(op); });
}

bool MetaDevice::supports_buft(const BufferType& buft) const { return &buft == buft_.get(); }

SplitState MetaDevice::io_state(const Tensor& t) const {
  if (statics_) {
    if (auto s = statics_(t)) return *s;
  }
  if (const auto it = last_states_.find(&t); it != last_states_.end()) return it->second;
  return SplitState{};
}

void MetaDevice::slice_layout(const Tensor& t, const SplitState& s, size_t j, size_t n, int64_t ne[4], size_t nb[4]) {
  for (int d = 0; d < kMaxDims; ++d) {
    ne[d] = t.ne[d];
    nb[d] = t.nb[d];
  }
  if (!s.is_split()) return;
  const int a = static_cast<int>(s.axis);
  ne[a] = s.on_device(j, n);
  for (int d = 0; d < kMaxDims; ++d) {
    if (t.nb[d] > t.nb[a] && t.ne[a] != 0) {
      nb[d] = static_cast<size_t>(static_cast<unsigned __int128>(t.nb[d]) * static_cast<uint64_t>(ne[a]) /
                                  static_cast<uint64_t>(t.ne[a]));
    }
  }
}

Result<std::unique_ptr<MetaDevice>> make_meta_device(MetaDeviceParams params) {
  if (params.devices.empty() || params.devices.size() > kMaxMetaDevices) {
    return TS_ERROR(StatusCode::kInvalidArgument, "meta device: %zu devices (1 to %zu)", params.devices.size(),
                    kMaxMetaDevices);
  }
  for (size_t i = 0; i < params.devices.size(); ++i) {
    if (params.devices[i] == nullptr)
      return TS_ERROR(StatusCode::kInvalidArgument, "meta device: device %zu is null", i);
  }
  std::unique_ptr<MetaDevice> m(new MetaDevice());
  m->devices_ = std::move(params.devices);
  m->statics_ = std::move(params.statics);
  m->name_ = "Meta(";
  m->description_ = "tensor parallelism over ";
  for (size_t i = 0; i < m->devices_.size(); ++i) {
    m->name_ += std::string(i == 0 ? "" : ",") + m->devices_[i]->name();
    m->description_ += std::string(i == 0 ? "" : ", ") + m->devices_[i]->name();
  }
  m->name_ += ")";
  m->buft_ = std::make_unique<MetaBufferType>(m.get());
  m->reg_ = std::make_unique<MetaReg>(m.get());
  return m;
}

Result<std::unique_ptr<Buffer>> meta_alloc_ctx_tensors(Context& ctx, MetaDevice& meta) {
  const size_t n = meta.n_devices();
  std::vector<Tensor*> todo;
  for (size_t i = 0; i < ctx.tensor_count(); ++i) {
    Tensor* t = ctx.tensor(i);
    if (t->buffer == nullptr && t->data == nullptr && t->view_src == nullptr) todo.push_back(t);
  }
  if (todo.empty()) return std::unique_ptr<Buffer>();
  // each device's slices, packed one after another at its buffer type's alignment
  std::vector<std::vector<size_t>> offsets(todo.size(), std::vector<size_t>(n, 0));
  std::vector<size_t> size(n, 0);
  for (size_t j = 0; j < n; ++j) {
    BufferType* buft = meta.device(j)->buffer_type();
    const size_t align = buft->alignment();
    for (size_t k = 0; k < todo.size(); ++k) {
      const SplitState s = meta.io_state(*todo[k]);
      Tensor slice = *todo[k];
      MetaDevice::slice_layout(*todo[k], s, j, n, slice.ne, slice.nb);
      size[j] = (size[j] + align - 1) / align * align;
      offsets[k][j] = size[j];
      size[j] += nelements(slice) == 0 ? 0 : buft->alloc_size(slice);
    }
  }
  auto parts = alloc_parts(meta, size);
  if (!parts.ok()) return parts.status();
  const size_t largest = *std::max_element(size.begin(), size.end());
  auto mb =
      std::make_unique<MetaBuffer>(meta.buffer_type(), std::max<size_t>(largest, 1), &meta, std::move(parts).value());
  for (size_t k = 0; k < todo.size(); ++k) {
    mb->set_packed(todo[k], offsets[k]);
    todo[k]->buffer = mb.get();
    todo[k]->data = MetaBuffer::fake_base();
  }
  for (size_t i = 0; i < ctx.tensor_count(); ++i) {
    Tensor* t = ctx.tensor(i);
    if (t->view_src != nullptr && t->buffer == nullptr && t->view_src->buffer == mb.get()) {
      TS_RETURN_IF_ERROR(view_init(*t));
    }
  }
  return std::unique_ptr<Buffer>(std::move(mb));
}

const MetaComputeStats* meta_compute_stats(const Backend& backend) {
  const auto* m = dynamic_cast<const MetaBackend*>(&backend);
  return m == nullptr ? nullptr : &m->stats();
}

}  // namespace tessera
