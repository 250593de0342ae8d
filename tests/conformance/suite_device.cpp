// The backend conformance suite, the device: its properties and capabilities, host buffer types and buffers over
// host memory, and a second backend (stream) made from the same device.
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"

namespace tessera::conformance {

TEST_P(BackendConformance, DeviceProperties) {
  SCOPED_TRACE(trace());
  EXPECT_NE(std::string(backend_->name()), "");
  Device* dev = backend_->device();
  EXPECT_NE(std::string(dev->name()), "");
  EXPECT_NE(std::string(dev->description()), "");
  size_t free = 0, total = 0;
  dev->memory(&free, &total);
  EXPECT_GT(total, 0u);
  EXPECT_LE(free, total);
  const DeviceType type = dev->type();
  EXPECT_TRUE(type == DeviceType::kCpu || type == DeviceType::kGpu || type == DeviceType::kIgpu ||
              type == DeviceType::kAccel)
      << static_cast<int>(type);
  const DeviceProps props = dev->props();
  EXPECT_EQ(props.name, dev->name());
  EXPECT_EQ(props.description, dev->description());
  EXPECT_EQ(props.type, type);
  EXPECT_LE(props.memory_free, props.memory_total);
  const DeviceCaps caps = dev->caps();
  EXPECT_EQ(props.caps.async, caps.async);
  EXPECT_EQ(props.caps.events, caps.events);
  EXPECT_EQ(props.caps.host_buffer, caps.host_buffer);
  EXPECT_EQ(props.caps.buffer_from_host_ptr, caps.buffer_from_host_ptr);

  EXPECT_EQ(dev->buffer_type(), backend_->default_buffer_type());
  EXPECT_EQ(dev->buffer_type()->device(), dev);
  EXPECT_TRUE(dev->supports_buft(*dev->buffer_type()));
  EXPECT_TRUE(backend_->supports_buft(*backend_->default_buffer_type()));

  BackendReg* reg = dev->reg();
  ASSERT_NE(reg, nullptr);
  EXPECT_NE(std::string(reg->name()), "");
  bool listed = false;
  for (size_t i = 0; i < reg->device_count(); ++i) listed |= reg->device(i) == dev;
  EXPECT_TRUE(listed) << "the device's registration must list it";
}

TEST_P(BackendConformance, DeviceHostBufferCaps) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  const DeviceCaps caps = dev->caps();

  BufferType* host = dev->host_buffer_type();
  if (!caps.host_buffer) {
    EXPECT_EQ(host, nullptr) << "caps().host_buffer is false but host_buffer_type() is set";
  } else {
    ASSERT_NE(host, nullptr) << "caps().host_buffer is true but host_buffer_type() is null";
    EXPECT_TRUE(host->is_host());
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, 1000);
    ASSERT_NE(t, nullptr);
    CONF_ASSIGN_BUFFER(hb, alloc_on(ctx, *host));
    const std::vector<uint8_t> data = random_bytes(nbytes(*t), rng_);
    CONF_ASSERT_OK(tensor_set(*t, data.data(), 0, data.size()));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*t)));
    EXPECT_EQ(std::memcmp(t->data, data.data(), data.size()), 0) << "host buffer memory is directly addressable";
  }

  // buffer_from_host_ptr: memory the device does not own.
  constexpr size_t kSize = 1 << 16;
  constexpr size_t kHostAlign = 4096;
  std::unique_ptr<uint8_t, decltype(&std::free)> mem(static_cast<uint8_t*>(std::aligned_alloc(kHostAlign, kSize)),
                                                     &std::free);
  ASSERT_NE(mem, nullptr);
  const std::vector<uint8_t> initial = random_bytes(kSize, rng_);
  std::memcpy(mem.get(), initial.data(), kSize);
  auto r = dev->buffer_from_host_ptr(mem.get(), kSize, kSize);
  if (!caps.buffer_from_host_ptr) {
    EXPECT_FALSE(r.ok()) << "caps().buffer_from_host_ptr is false but buffer_from_host_ptr succeeded";
    return;
  }
  ASSERT_TRUE(r.ok()) << "caps().buffer_from_host_ptr is true: " << r.status().to_string();
  {
    std::unique_ptr<Buffer> buf = std::move(r.value());
    ASSERT_NE(buf, nullptr);
    EXPECT_GE(buf->size(), kSize);
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, kSize / 8);
    ASSERT_NE(t, nullptr);
    set_name(*t, "host_ptr_tensor");
    TensorAllocator talloc(*buf);
    CONF_ASSERT_OK(talloc.alloc(*t));
    const size_t n = nbytes(*t);
    EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(initial.begin(), initial.begin() + n), read_bytes(*t)))
        << "the buffer reads the host memory it wraps";
    const std::vector<uint8_t> data = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, data.data(), 0, n));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_EQ(std::memcmp(mem.get(), data.data(), n), 0) << "writes must land in the host memory";
    EXPECT_EQ(std::memcmp(mem.get() + n, initial.data() + n, kSize - n), 0) << "bytes past the tensor untouched";
  }
  // The buffer is gone; the memory is still ours (freed by `mem`, not by the buffer).
  mem.get()[0] ^= 0xFF;
}

TEST_P(BackendConformance, InitBackendFromDevice) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  auto r = dev->init_backend();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Backend& b2 = *r.value();
  EXPECT_EQ(b2.device(), dev);
  EXPECT_NE(std::string(b2.name()), "");
  EXPECT_EQ(b2.guid(), backend_->guid()) << "backends of one implementation share a guid";
  EXPECT_EQ(b2.default_buffer_type(), backend_->default_buffer_type());
  // The new stream computes on memory of the device's buffer type.
  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 3);
  Tensor* y = rms_norm(ctx, x, 1e-5f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  Graph g;
  CONF_ASSERT_OK(g.build_forward(y));
  if (!b2.supports_op(*y)) GTEST_SKIP() << "backend does not claim RMS_NORM f32";
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  CONF_ASSERT_OK(fill_random(*x, rng_));
  ASSERT_EQ(b2.graph_compute(g), ComputeStatus::kSuccess) << b2.last_error();
  auto ys = tensor_to_f32(*y);
  ASSERT_TRUE(ys.ok());
  for (float v : ys.value()) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace tessera::conformance
