// Allocating chosen tensors (weights, KV caches) in buffers of chosen types: what follows a placement policy's
// choice ("layers 0-15 on gpu0, the rest on the CPU"); the choice itself is the policy's (policy.h).
#pragma once

#include <memory>
#include <utility>
#include <vector>

#include "tessera/backend.h"
#include "tessera/status.h"

namespace tessera::harness {

// Allocates, for each buffer type named in `where`, buffers holding its tensors packed at the type's alignment (a
// new buffer starts where the next tensor would pass the type's max_size), sets their usage, places the tensors and
// then initialises views of placed tensors. Tensors already allocated are an error. On failure nothing stays
// allocated and no tensor is left half-placed.
Result<std::vector<std::unique_ptr<Buffer>>> allocate_tensors(const std::vector<std::pair<Tensor*, BufferType*>>& where,
                                                              BufferUsage usage);

}  // namespace tessera::harness
