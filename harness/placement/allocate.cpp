// Allocating chosen tensors in buffers of chosen types (see tessera/harness/placement/allocate.h): the allocation that
// follows a placement policy's choice of buffer types.
#include "tessera/harness/placement/allocate.h"

#include <algorithm>

#include "tessera/alloc.h"

namespace tessera::harness {

namespace {

size_t align_up(size_t n, size_t a) { return (n + a - 1) / a * a; }

}  // namespace

Result<std::vector<std::unique_ptr<Buffer>>> allocate_tensors(const std::vector<std::pair<Tensor*, BufferType*>>& where,
                                                              BufferUsage usage) {
  // Group by buffer type, in order of first appearance.
  std::vector<BufferType*> types;
  std::vector<std::vector<Tensor*>> groups;
  for (const auto& [t, buft] : where) {
    if (t == nullptr || buft == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "allocate_tensors: null tensor or buffer type");
    }
    if (t->buffer != nullptr || t->data != nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "allocate_tensors: %s is already allocated", describe(*t).c_str());
    }
    if (t->view_src != nullptr) continue;  // views follow their source below
    auto it = std::find(types.begin(), types.end(), buft);
    if (it == types.end()) {
      types.push_back(buft);
      groups.emplace_back();
      it = types.end() - 1;
    }
    groups[static_cast<size_t>(it - types.begin())].push_back(t);
  }
  std::vector<std::unique_ptr<Buffer>> out;
  std::vector<Tensor*> placed;
  auto undo = [&]() {
    for (Tensor* t : placed) {
      t->buffer = nullptr;
      t->data = nullptr;
    }
    out.clear();
  };
  for (size_t g = 0; g < types.size(); ++g) {
    BufferType& buft = *types[g];
    const size_t align = buft.alignment();
    // Cut the group into chunks no larger than max_size.
    size_t i = 0;
    const auto& list = groups[g];
    while (i < list.size()) {
      size_t size = 0, j = i;
      while (j < list.size()) {
        const size_t need = align_up(buft.alloc_size(*list[j]), align);
        if (j > i && size + need > buft.max_size()) break;
        size += need;
        ++j;
      }
      auto buf = buft.alloc_buffer(size);
      if (!buf.ok()) {
        undo();
        return TS_ERROR(buf.status().code(), "allocate_tensors: %zu tensors (%zu bytes) in %s: %s", j - i, size,
                        buft.name(), buf.status().message().c_str());
      }
      std::unique_ptr<Buffer> b = std::move(buf).value();
      b->set_usage(usage);
      TensorAllocator talloc(*b);
      for (size_t k = i; k < j; ++k) {
        if (Status s = talloc.alloc(*list[k]); !s.ok()) {
          out.push_back(std::move(b));
          undo();
          return s;
        }
        placed.push_back(list[k]);
      }
      out.push_back(std::move(b));
      i = j;
    }
  }
  for (const auto& [t, buft] : where) {
    if (t->view_src == nullptr || t->buffer != nullptr) continue;
    if (Status s = view_init(*t); !s.ok()) {
      undo();
      return s;
    }
    placed.push_back(t);
  }
  return out;
}

}  // namespace tessera::harness
