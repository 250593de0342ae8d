// Context: an arena that owns tensors (stable addresses) and, unless no_alloc, their host memory.
//
// Errors while building are sticky: a building function that is given invalid input records the first error in the
// context and returns nullptr; any function given a nullptr source returns nullptr without a new error. Build a whole
// graph, then check status() once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera {

struct ContextParams {
  bool no_alloc = false;  // metadata only: data placed later by an allocator
  size_t mem_size = 0;    // host bytes the context may own (0 = no limit); ignored when no_alloc
};

class Context {
 public:
  explicit Context(ContextParams params = {});
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  bool no_alloc() const { return params_.no_alloc; }

  // A new tensor with contiguous strides. Errors (recorded, nullptr returned): invalid type, ne < 0, n_dims outside
  // 1..4, a quantized ne0 that is not a multiple of the block size, host memory beyond mem_size.
  Tensor* new_tensor(Type type, int n_dims, const int64_t* ne);
  Tensor* new_tensor_1d(Type type, int64_t ne0);
  Tensor* new_tensor_2d(Type type, int64_t ne0, int64_t ne1);
  Tensor* new_tensor_3d(Type type, int64_t ne0, int64_t ne1, int64_t ne2);
  Tensor* new_tensor_4d(Type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3);
  // Same type and shape as t, contiguous, new memory.
  Tensor* dup_tensor(const Tensor* t);
  // A tensor aliasing src's memory (view_src resolved to the root) with the given shape and strides.
  // Used by the view ops; checks that the span lies inside the source.
  Tensor* new_view(Tensor* src, Type type, const int64_t ne[4], const size_t nb[4], size_t offset);

  // Sticky error state.
  const Status& status() const { return status_; }
  bool ok() const { return status_.ok(); }
  // Records err if no error is recorded yet; returns nullptr for convenient `return ctx.fail(...)`.
  Tensor* fail(Status err);
  void clear_error() { status_ = Status::Ok(); }

  // Every tensor of the context, in creation order.
  size_t tensor_count() const { return count_; }
  Tensor* tensor(size_t i) { return &blocks_[i / kBlock][i % kBlock]; }
  Tensor* find(const char* name);  // first tensor with that name, or nullptr
  size_t host_bytes_used() const { return host_used_; }

 private:
  void* alloc_host(size_t size);
  Tensor& add_tensor();  // a fresh default tensor at the end

  ContextParams params_;
  // Tensors in blocks of kBlock (addresses stay valid as it grows; one allocation per block, neighbours adjacent).
  static constexpr size_t kBlock = 64;
  std::vector<std::unique_ptr<Tensor[]>> blocks_;
  size_t count_ = 0;
  struct AlignedFree {
    void operator()(void* p) const;
  };
  std::vector<std::unique_ptr<void, AlignedFree>> host_blocks_;
  size_t host_used_ = 0;
  Status status_;
};

}  // namespace tessera
