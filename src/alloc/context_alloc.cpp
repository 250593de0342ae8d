// The linear tensor allocator and whole-context placement (docs/interfaces.md, 'Placing tensors in buffers').
#include <vector>

#include "tessera/alloc.h"

namespace tessera {

namespace {
size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }
}  // namespace

TensorAllocator::TensorAllocator(Buffer& buffer)
    : buffer_(buffer), alignment_(buffer.alignment() == 0 ? 1 : buffer.alignment()), offset_(0) {
  // The first tensor goes at the first aligned address of the buffer.
  const auto base = reinterpret_cast<uintptr_t>(buffer.base());
  offset_ = align_up(base, alignment_) - base;
}

Status TensorAllocator::alloc(Tensor& t) {
  if (t.view_src != nullptr) return view_init(t);
  const size_t size = buffer_.type()->alloc_size(t);
  if (offset_ > buffer_.size() || size > buffer_.size() - offset_) {
    return TS_ERROR(StatusCode::kAllocFailed,
                    "tensor allocator: %s needs %zu bytes but buffer %s has %zu of %zu bytes left", describe(t).c_str(),
                    size, buffer_.type()->name(),
                    buffer_.size() - (offset_ > buffer_.size() ? buffer_.size() : offset_), buffer_.size());
  }
  TS_RETURN_IF_ERROR(tensor_alloc(buffer_, t, static_cast<char*>(buffer_.base()) + offset_));
  offset_ = align_up(offset_ + size, alignment_);
  return Status::Ok();
}

Result<std::unique_ptr<Buffer>> alloc_ctx_tensors(Context& ctx, BufferType& buft) {
  const size_t alignment = buft.alignment() == 0 ? 1 : buft.alignment();
  const size_t max_size = buft.max_size();

  // 1. Plan: which tensors go into which chunk, at which offset. Nothing is allocated yet, so an error leaks nothing.
  struct Placement {
    Tensor* t;
    size_t chunk;
    size_t offset;
  };
  std::vector<Placement> placements;
  std::vector<size_t> chunk_sizes;
  for (size_t i = 0; i < ctx.tensor_count(); ++i) {
    Tensor* t = ctx.tensor(i);
    if (t->data != nullptr || t->buffer != nullptr || t->view_src != nullptr) continue;
    const size_t size = align_up(buft.alloc_size(*t), alignment);
    if (size > max_size) {
      return TS_ERROR(StatusCode::kAllocFailed,
                      "alloc_ctx_tensors: tensor %s needs %zu bytes, more than the maximum allocation size %zu of "
                      "buffer type %s",
                      describe(*t).c_str(), size, max_size, buft.name());
    }
    if (chunk_sizes.empty() || chunk_sizes.back() + size > max_size) chunk_sizes.push_back(0);
    placements.push_back({t, chunk_sizes.size() - 1, chunk_sizes.back()});
    chunk_sizes.back() += size;
  }
  // Views get their memory from their (now allocated) sources; on failure `placed` lists what to undo.
  std::vector<Tensor*> placed;
  auto init_views = [&]() -> Status {
    for (size_t i = 0; i < ctx.tensor_count(); ++i) {
      Tensor* t = ctx.tensor(i);
      if (t->view_src != nullptr && t->buffer == nullptr && t->view_src->buffer != nullptr) {
        TS_RETURN_IF_ERROR(view_init(*t));
        placed.push_back(t);
      }
    }
    return Status::Ok();
  };
  if (placements.empty()) {
    TS_RETURN_IF_ERROR(init_views());  // views of tensors allocated earlier
    return std::unique_ptr<Buffer>();
  }

  // 2. Allocate every chunk (unique_ptrs free them all on failure).
  std::vector<std::unique_ptr<Buffer>> buffers;
  for (size_t c = 0; c < chunk_sizes.size(); ++c) {
    Result<std::unique_ptr<Buffer>> b = buft.alloc_buffer(chunk_sizes[c]);
    if (!b.ok()) {
      return TS_ERROR(StatusCode::kAllocFailed, "alloc_ctx_tensors: buffer %zu of %zu (%zu bytes) of type %s: %s",
                      c + 1, chunk_sizes.size(), chunk_sizes[c], buft.name(), b.status().message().c_str());
    }
    buffers.push_back(std::move(b).value());
  }

  // 3. Place tensors, then views (after their sources). Undo everything on failure.
  auto undo = [&](Status s) -> Status {
    for (Tensor* t : placed) {
      t->buffer = nullptr;
      t->data = nullptr;
    }
    return s;
  };
  for (const Placement& p : placements) {
    Buffer& b = *buffers[p.chunk];
    Status s = tensor_alloc(b, *p.t, static_cast<char*>(b.base()) + p.offset);
    if (!s.ok()) return undo(s);
    placed.push_back(p.t);
  }
  if (Status s = init_views(); !s.ok()) return undo(s);
  if (buffers.size() == 1) return std::move(buffers.front());
  return std::unique_ptr<Buffer>(std::make_unique<MultiBuffer>(std::move(buffers)));
}

Result<std::unique_ptr<Buffer>> alloc_ctx_tensors(Context& ctx, Backend& backend) {
  return alloc_ctx_tensors(ctx, *backend.default_buffer_type());
}

}  // namespace tessera
