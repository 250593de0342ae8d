// A host-memory buffer type for tests: settable name, alignment 32, max size, an allocation that fails on demand,
// buffers that refuse to hold one tensor chosen by name (init_tensor fails, as a device buffer may refuse a layout
// it cannot hold), and a count of live buffers (so a test sees leaks directly; ASan/LSan sees them too).
#pragma once

#include <cstdlib>
#include <memory>
#include <string>

#include "tessera/backend.h"
#include "tessera/cpu.h"

namespace tessera::support {

class TestBufferType : public BufferType {
 public:
  explicit TestBufferType(const char* name = "TestHost", size_t max_size = SIZE_MAX) : max(max_size), name_(name) {}
  int fail_at = -1;  // the allocation index (0-based) that fails
  int allocations = 0;
  int live = 0;
  size_t max;                 // the max allocation size; tests may change it
  std::string refuse_tensor;  // buffers refuse to hold the tensor of this name ("refusing to hold <name>")
  const char* name() const override { return name_; }
  size_t alignment() const override { return 32; }
  size_t max_size() const override { return max; }
  bool is_host() const override { return true; }
  Device* device() const override { return cpu::device(); }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    if (allocations++ == fail_at) return Status(StatusCode::kAllocFailed, std::string(name_) + ": injected failure");
    return std::unique_ptr<Buffer>(std::make_unique<Owned>(this, size));
  }

 private:
  struct Owned : HostBuffer {
    Owned(TestBufferType* t, size_t n) : HostBuffer(t, std::aligned_alloc(32, (n + 31) / 32 * 32), n), owner(t) {
      ++owner->live;
    }
    ~Owned() override {
      std::free(base());
      --owner->live;
    }
    Status init_tensor(Tensor& t) override {
      if (!owner->refuse_tensor.empty() && owner->refuse_tensor == t.name) {
        return Status(StatusCode::kUnsupported, "refusing to hold " + owner->refuse_tensor);
      }
      return Status::Ok();
    }
    TestBufferType* owner;
  };
  const char* name_;
};

}  // namespace tessera::support
