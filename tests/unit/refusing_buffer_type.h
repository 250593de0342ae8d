// A host-memory buffer type whose buffers refuse to hold one tensor, chosen by name (init_tensor fails, as a device
// buffer may refuse a layout it cannot hold), with a count of live buffers. For tests of what a placement does when
// a buffer refuses a tensor part-way.
#pragma once

#include <cstdlib>
#include <memory>
#include <string>
#include <utility>

#include "tessera/backend.h"
#include "tessera/cpu.h"

namespace tessera::support {

class RefusingBufferType : public BufferType {
 public:
  explicit RefusingBufferType(std::string refused) : refused_(std::move(refused)) {}
  int live = 0;
  const char* name() const override { return "Refusing"; }
  size_t alignment() const override { return 32; }
  size_t max_size() const override { return SIZE_MAX; }
  bool is_host() const override { return true; }
  Device* device() const override { return cpu::device(); }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    return std::unique_ptr<Buffer>(std::make_unique<Owned>(this, size));
  }

 private:
  struct Owned : HostBuffer {
    Owned(RefusingBufferType* t, size_t n)
        : HostBuffer(t, std::aligned_alloc(32, (n + 31) / 32 * 32), n), owner(t) {
      ++owner->live;
    }
    ~Owned() override {
      std::free(base());
      --owner->live;
    }
    Status init_tensor(Tensor& t) override {
      if (owner->refused_ == t.name) return Status(StatusCode::kUnsupported, "refusing to hold " + owner->refused_);
      return Status::Ok();
    }
    RefusingBufferType* owner;
  };
  std::string refused_;
};

}  // namespace tessera::support
