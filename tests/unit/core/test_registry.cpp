// Registry (docs/interfaces.md): lookups, init_best, extension functions, run-time and scoped registration, and the CPU
// device's properties.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tessera/builtin.h"
#include "tessera/cpu.h"

using namespace tessera;
using ::testing::HasSubstr;
using ::testing::NiceMock;
using ::testing::Return;

namespace {

class MockDevice : public Device {
 public:
  MOCK_METHOD(const char*, name, (), (const, override));
  MOCK_METHOD(const char*, description, (), (const, override));
  MOCK_METHOD(void, memory, (size_t*, size_t*), (const, override));
  MOCK_METHOD(DeviceType, type, (), (const, override));
  MOCK_METHOD(DeviceCaps, caps, (), (const, override));
  MOCK_METHOD(BackendReg*, reg, (), (const, override));
  MOCK_METHOD(Result<std::unique_ptr<Backend>>, init_backend, (const std::string&), (override));
  MOCK_METHOD(BufferType*, buffer_type, (), (override));
  MOCK_METHOD(bool, supports_op, (const Tensor&), (const, override));
  MOCK_METHOD(bool, supports_buft, (const BufferType&), (const, override));
};

// A registration made at run time: nothing recompiled.
class TestReg : public BackendReg {
 public:
  explicit TestReg(const char* name) : name_(name) {
    ON_CALL(gpu, name()).WillByDefault(Return("FakeGPU0"));
    ON_CALL(gpu, type()).WillByDefault(Return(DeviceType::kGpu));
    ON_CALL(gpu, init_backend(::testing::_)).WillByDefault([](const std::string&) {
      return Result<std::unique_ptr<Backend>>(Status(StatusCode::kUnsupported, "FakeGPU0: no streams in this test"));
    });
  }
  const char* name() const override { return name_; }
  size_t device_count() const override { return 1; }
  Device* device(size_t i) const override { return i == 0 ? const_cast<NiceMock<MockDevice>*>(&gpu) : nullptr; }
  void* get_proc_address(const char* fn) const override {
    return std::string(fn) == "answer" ? reinterpret_cast<void*>(&answer) : nullptr;
  }
  static int answer() { return 42; }
  NiceMock<MockDevice> gpu;

 private:
  const char* name_;
};

}  // namespace

TEST(Registry, BuiltinHasTheCpu) {
  auto reg = make_builtin_registry();
  ASSERT_GE(reg->reg_count(), 1u);
  EXPECT_NE(reg->reg_by_name("cpu"), nullptr);  // case-insensitive
  Device* cpu_dev = reg->device_by_name("CPU");
  ASSERT_NE(cpu_dev, nullptr);
  EXPECT_EQ(reg->device_by_type(DeviceType::kCpu), cpu_dev);
  auto best = reg->init_best();
  ASSERT_TRUE(best.ok()) << best.status().message();
  EXPECT_TRUE(cpu::is_cpu(**best));
  auto by_type = reg->init_by_type(DeviceType::kCpu);
  ASSERT_TRUE(by_type.ok());
  auto bad = reg->init_by_name("NoSuchDevice");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(bad.status().message(), HasSubstr("known: CPU"));
}

TEST(Registry, ExtensionFunctionsByName) {
  auto reg = make_builtin_registry();
  auto set_threads = reinterpret_cast<SetNThreadsFn>(reg->get_proc_address("CPU", "set_n_threads"));
  ASSERT_NE(set_threads, nullptr);
  auto backend = cpu::make_backend({.n_threads = 1});
  set_threads(backend.get(), 3);
  EXPECT_EQ(cpu::n_threads(*backend), 3);
  EXPECT_EQ(reg->get_proc_address("CPU", "no_such_function"), nullptr);
  EXPECT_EQ(reg->get_proc_address("NoReg", "set_n_threads"), nullptr);
}

TEST(Registry, CpuBackendParams) {
  auto reg = make_builtin_registry();
  auto b = reg->init_by_name("CPU", "n_threads=2");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(cpu::n_threads(**b), 2);
  auto bad = reg->init_by_name("CPU", "threads=lots");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("n_threads=N"));
}

TEST(Registry, ScopedRegistrationDisappearsAfterwards) {
  auto reg = make_builtin_registry();
  const size_t before = reg->device_count();
  TestReg fake("Fake");
  {
    auto scoped = reg->add_scoped(&fake);
    ASSERT_TRUE(scoped.ok());
    EXPECT_EQ(reg->device_count(), before + 1);
    EXPECT_EQ(reg->device_by_name("fakegpu0"), &fake.gpu);
    EXPECT_EQ(reg->device_by_type(DeviceType::kGpu), &fake.gpu);
    auto fn = reinterpret_cast<int (*)()>(reg->get_proc_address("Fake", "answer"));
    ASSERT_NE(fn, nullptr);
    EXPECT_EQ(fn(), 42);
    // init_best prefers the GPU; its failure is reported, not hidden.
    auto best = reg->init_best();
    ASSERT_FALSE(best.ok());
    EXPECT_THAT(best.status().message(), HasSubstr("FakeGPU0"));
    // The same name twice is refused.
    TestReg twin("fake");
    EXPECT_FALSE(reg->add_scoped(&twin).ok());
  }
  EXPECT_EQ(reg->device_count(), before);
  EXPECT_EQ(reg->device_by_name("FakeGPU0"), nullptr);
  EXPECT_FALSE(reg->remove(&fake).ok());
}

TEST(Registry, OwnedRegistrationsAndRemoval) {
  Registry reg;
  EXPECT_FALSE(reg.init_best().ok());
  auto owned = std::make_unique<TestReg>("Owned");
  BackendReg* raw = owned.get();
  ASSERT_TRUE(reg.add(std::move(owned)).ok());
  EXPECT_EQ(reg.reg_count(), 1u);
  EXPECT_FALSE(reg.add(nullptr).ok());
  ASSERT_TRUE(reg.remove(raw).ok());
  EXPECT_EQ(reg.reg_count(), 0u);
}

TEST(CpuDevice, PropertiesComeFromTheOs) {
  Device* d = cpu::device();
  DeviceProps p = d->props();
  EXPECT_EQ(p.name, "CPU");
  EXPECT_FALSE(p.description.empty());
  EXPECT_GT(p.memory_total, 0u);
  EXPECT_LE(p.memory_free, p.memory_total);
  EXPECT_EQ(p.type, DeviceType::kCpu);
  EXPECT_TRUE(p.caps.buffer_from_host_ptr);
  EXPECT_FALSE(p.caps.events);
  EXPECT_EQ(d->event_new(), nullptr);  // no events on the CPU
  EXPECT_TRUE(d->supports_buft(*cpu::buffer_type()));
  EXPECT_EQ(d->reg(), cpu::registration());
}
