// Placing tensors in buffers (docs/interfaces.md, 'Placing tensors in buffers'): the linear tensor allocator and
// whole-context placement.
#pragma once

#include <memory>

#include "tessera/backend.h"
#include "tessera/context.h"

namespace tessera {

// Places tensors one after another in a buffer, each at the buffer type's alignment. Never overflows: a tensor that
// does not fit is an error naming it.
class TensorAllocator {
 public:
  explicit TensorAllocator(Buffer& buffer);
  Status alloc(Tensor& t);
  size_t offset() const { return offset_; }

 private:
  Buffer& buffer_;
  size_t alignment_;
  size_t offset_;
};

// Allocates every not-yet-allocated tensor of ctx (views after their sources) in buffers of buft, packed linearly;
// a new buffer starts where the next tensor would pass buft.max_size(); several buffers come back as one
// MultiBuffer. Returns nullptr (ok) when there was nothing to allocate. Errors: a tensor larger than max_size, an
// allocation failure (nothing leaked, no tensor left half-placed).
Result<std::unique_ptr<Buffer>> alloc_ctx_tensors(Context& ctx, BufferType& buft);
// Same, with buffers of the backend's default type.
Result<std::unique_ptr<Buffer>> alloc_ctx_tensors(Context& ctx, Backend& backend);

}  // namespace tessera
