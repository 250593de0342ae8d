// The backend conformance suite, buffers: a buffer type's alignment and sizes, a buffer's lifetime, usage and
// clear, zero-size buffers, and allocations no device can satisfy.
#include <cstdint>
#include <string>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"

namespace tessera::conformance {

TEST_P(BackendConformance, BufferLifecycle) {
  SCOPED_TRACE(trace());
  BufferType& bt = buft();
  const size_t align = bt.alignment();
  ASSERT_GT(align, 0u);
  EXPECT_EQ(align & (align - 1), 0u) << "alignment " << align << " is not a power of two";
  EXPECT_EQ(bt.device(), backend_->device());
  EXPECT_NE(std::string(bt.name()), "");
  for (int64_t n : {1, 7, 64, 1000, 4099, 65541}) {
    SCOPED_TRACE(::testing::Message() << "probe tensor f32 x " << n);
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, n);
    ASSERT_NE(t, nullptr);
    set_name(*t, "clear_probe");
    const size_t size = bt.alloc_size(*t);
    EXPECT_GE(size, nbytes(*t));
    if (size > bt.max_size()) continue;
    CONF_ASSIGN_BUFFER(buf, bt.alloc_buffer(size));
    EXPECT_EQ(buf->type(), &bt);
    EXPECT_GE(buf->size(), size);
    EXPECT_EQ(buf->is_host(), bt.is_host());
    EXPECT_FALSE(buf->is_multi());
    ASSERT_NE(buf->base(), nullptr) << "a non-empty buffer must have a base";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->base()) % align, 0u) << "base not aligned to " << align;

    EXPECT_EQ(buf->usage(), BufferUsage::kAny);
    buf->set_usage(BufferUsage::kWeights);
    EXPECT_EQ(buf->usage(), BufferUsage::kWeights);
    buf->set_usage(BufferUsage::kCompute);
    EXPECT_EQ(buf->usage(), BufferUsage::kCompute);

    TensorAllocator talloc(*buf);
    CONF_ASSERT_OK(talloc.alloc(*t));
    EXPECT_EQ(t->data, buf->base()) << "the first tensor of a linear allocator is placed at offset 0";
    EXPECT_EQ(t->buffer, buf.get());
    EXPECT_EQ(tensor_buffer(*t), buf.get());
    for (int round = 0; round < 2; ++round) {
      const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
      buf->clear(value);
      std::vector<uint8_t> got = read_bytes(*t);
      EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(nbytes(*t), value), got)) << "after clear(" << int(value) << ")";
      if (bt.is_host()) {
        const uint8_t* p = static_cast<const uint8_t*>(buf->base());
        EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(buf->size(), value), std::vector<uint8_t>(p, p + buf->size())))
            << "host buffer memory after clear(" << int(value) << ")";
      }
    }
    buf->reset();
  }
}

TEST_P(BackendConformance, ZeroSizeBuffer) {
  SCOPED_TRACE(trace());
  CONF_ASSIGN_BUFFER(buf, buft().alloc_buffer(0));
  EXPECT_EQ(buf->size(), 0u);
  EXPECT_EQ(buf->base(), nullptr);
  EXPECT_EQ(buf->type(), &buft());
  buf->clear(0xAB);  // no-op, must not crash
  buf->set_usage(BufferUsage::kWeights);
  EXPECT_EQ(buf->usage(), BufferUsage::kWeights);
  buf->reset();
}

TEST_P(BackendConformance, AllocBeyondLimitsFails) {
  SCOPED_TRACE(trace());
  const size_t max = buft().max_size();
  if (max != SIZE_MAX) {
    auto r = buft().alloc_buffer(max + 1);
    EXPECT_FALSE(r.ok()) << "alloc_buffer(max_size() + 1 = " << max + 1 << ") succeeded";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  // Under AddressSanitizer this relies on allocator_may_return_null=1 (set by __asan_default_options in
  // backend_conformance.cpp).
  // Sizes no machine can provide; rounding them up to the alignment must not wrap around to a small allocation.
  for (size_t size : {size_t{1} << 62, SIZE_MAX - 8, SIZE_MAX}) {
    auto r = buft().alloc_buffer(size);
    EXPECT_FALSE(r.ok()) << "alloc_buffer(" << size << ") succeeded";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

}  // namespace tessera::conformance
