// Shared fixture for the unit tests of scheduler passes 1-4 (docs/scheduler.md): a GoogleMock BackendSet whose
// supports_op / supports_buft / offload_op are scripted per test, fake buffer types with host memory behind them (so
// tensors can really be placed with the TensorAllocator and views initialised with view_init), and helpers to build
// small graphs and to assert a tensor's backend AND cause in one go.
//
// Default topology: backends [GPU0, GPU1, CPU] (the last is the CPU fallback), each with its own compute buffer type
// (GPU0_buf, GPU1_buf: not host; CPU_buf: host). Each GPU supports only its own compute buffer type, the CPU also
// CPU_REPACK_buf (not host) and PINNED_buf (host); every backend supports every op until a test says otherwise
// (refuse(), allow_buft(), offload, share_gpu0_compute_buft(), ...).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "src/sched/plan.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/sched.h"

namespace tessera::sched::testing {

// A buffer type backed by host memory. `host` only says what is_host() reports (a GPU type says false even though the
// bytes are in host memory here; the passes never touch the bytes).
class FakeBufferType final : public BufferType {
 public:
  FakeBufferType(std::string name, bool host) : name_(std::move(name)), host_(host) {}
  const char* name() const override { return name_.c_str(); }
  size_t alignment() const override { return 32; }
  bool is_host() const override { return host_; }
  Device* device() const override { return nullptr; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override {
    return std::unique_ptr<Buffer>(std::make_unique<Mem>(this, size));
  }

 private:
  struct Mem final : HostBuffer {
    Mem(BufferType* t, size_t n) : HostBuffer(t, std::aligned_alloc(64, (n + 63) / 64 * 64), n) {}
    ~Mem() override { std::free(base()); }
  };
  std::string name_;
  bool host_;
};

class MockBackendSet : public BackendSet {
 public:
  MOCK_METHOD(int, size, (), (const, override));
  MOCK_METHOD(const char*, name, (int b), (const, override));
  MOCK_METHOD(bool, supports_op, (int b, const Tensor& t), (const, override));
  MOCK_METHOD(bool, supports_buft, (int b, const BufferType& buft), (const, override));
  MOCK_METHOD(bool, offload_op, (int b, const Tensor& t), (const, override));
  MOCK_METHOD(BufferType*, compute_buft, (int b), (const, override));
  MOCK_METHOD(bool, is_compute_buffer, (const Buffer* b), (const, override));
};

class SchedPassFixture : public ::testing::Test {
 protected:
  static constexpr int kGpu0 = 0;
  static constexpr int kGpu1 = 1;
  static constexpr int kCpu = 2;

  SchedPassFixture() {
    using ::testing::_;
    using ::testing::Invoke;
    ON_CALL(bs, size()).WillByDefault(Invoke([this] { return static_cast<int>(names.size()); }));
    ON_CALL(bs, name(_)).WillByDefault(Invoke([this](int b) { return names.at(static_cast<size_t>(b)).c_str(); }));
    ON_CALL(bs, supports_op(_, _)).WillByDefault(Invoke([this](int b, const Tensor& t) {
      const auto i = static_cast<size_t>(b);
      return refused_ops.at(i).count(t.op) == 0 && refused_tensors.at(i).count(&t) == 0;
    }));
    ON_CALL(bs, supports_buft(_, _)).WillByDefault(Invoke([this](int b, const BufferType& buft) {
      return usable_bufts.at(static_cast<size_t>(b)).count(&buft) != 0;
    }));
    ON_CALL(bs, offload_op(_, _)).WillByDefault(Invoke([this](int b, const Tensor& t) {
      return offload_ops.at(static_cast<size_t>(b)).count(t.op) != 0;
    }));
    ON_CALL(bs, compute_buft(_)).WillByDefault(Invoke([this](int b) { return compute.at(static_cast<size_t>(b)); }));
    ON_CALL(bs, is_compute_buffer(_)).WillByDefault(Invoke([this](const Buffer* b) {
      return compute_buffers.count(b) != 0;
    }));
  }

  // ---- scripting the backends ----
  void refuse(int b, Op op) { refused_ops.at(static_cast<size_t>(b)).insert(op); }
  void refuse_everywhere(Op op) {
    for (int b = 0; b < n_backends(); ++b) refuse(b, op);
  }
  void refuse_tensor(int b, const Tensor* t) { refused_tensors.at(static_cast<size_t>(b)).insert(t); }
  void allow_buft(int b, const BufferType& buft) { usable_bufts.at(static_cast<size_t>(b)).insert(&buft); }
  void offload(int b, Op op) { offload_ops.at(static_cast<size_t>(b)).insert(op); }
  // GPU1 computes in GPU0's compute buffer type (two streams of one device): the precondition of an upgrade.
  void share_gpu0_compute_buft() {
    compute[kGpu1] = &gpu0_buft;
    allow_buft(kGpu1, gpu0_buft);
  }
  int n_backends() const { return static_cast<int>(names.size()); }
  // [GPU0, CPU]: the CPU (index 1) is the last backend.
  void use_two_backends() {
    names = {"GPU0", "CPU"};
    compute = {&gpu0_buft, &cpu_buft};
    usable_bufts = {{&gpu0_buft}, {&cpu_buft, &cpu_repack_buft, &pinned_buft}};
    refused_ops.resize(2);
    refused_tensors.resize(2);
    offload_ops.resize(2);
  }

  // ---- tensors and buffers ----
  Tensor* tensor(const char* name, int64_t ne0 = 8, int64_t ne1 = 8) {
    Tensor* t = ctx.new_tensor_2d(Type::kF32, ne0, ne1);
    EXPECT_NE(t, nullptr) << ctx.status().message();
    if (t != nullptr) set_name(*t, name);
    return t;
  }
  Tensor* input(const char* name, int64_t ne0 = 8, int64_t ne1 = 8) {
    Tensor* t = tensor(name, ne0, ne1);
    set_input(*t);
    return t;
  }
  static Tensor* named(Tensor* t, const char* name) {
    if (t != nullptr) set_name(*t, name);
    return t;
  }

  // One buffer of `buft` holding `ts` (placed one after another with the TensorAllocator), with the given usage.
  Buffer* place(FakeBufferType& buft, std::initializer_list<Tensor*> ts, BufferUsage usage = BufferUsage::kAny) {
    size_t total = 0;
    for (Tensor* t : ts) total += (buft.alloc_size(*t) + 63) / 64 * 64;
    auto r = buft.alloc_buffer(total);
    EXPECT_TRUE(r.ok()) << r.status().message();
    if (!r.ok()) return nullptr;
    buffers.push_back(std::move(r).value());
    Buffer* buf = buffers.back().get();
    buf->set_usage(usage);
    TensorAllocator ta(*buf);
    for (Tensor* t : ts) {
      const Status s = ta.alloc(*t);
      EXPECT_TRUE(s.ok()) << s.message();
    }
    return buf;
  }
  Buffer* weights(FakeBufferType& buft, std::initializer_list<Tensor*> ts) {
    return place(buft, ts, BufferUsage::kWeights);
  }
  // Views created before their source was allocated get their buffer here.
  static void init_views(std::initializer_list<Tensor*> views) {
    for (Tensor* v : views) {
      const Status s = view_init(*v);
      EXPECT_TRUE(s.ok()) << s.message();
    }
  }
  // A compute buffer of the scheduler's (BackendSet::is_compute_buffer is true for it).
  Buffer* compute_buffer(FakeBufferType& buft, std::initializer_list<Tensor*> ts) {
    Buffer* b = place(buft, ts, BufferUsage::kCompute);
    compute_buffers.insert(b);
    return b;
  }

  void build(std::initializer_list<Tensor*> outs) {
    ASSERT_TRUE(ctx.ok()) << ctx.status().message();
    for (Tensor* t : outs) ASSERT_TRUE(graph.build_forward(t).ok());
  }
  void build(Tensor* out) { build({out}); }

  // ---- assertions ----
  ::testing::AssertionResult Assigned(const Tensor* t, int backend, Cause cause) const {
    const int b = plan.backend_of(t);
    const Cause c = plan.cause_of(t);
    if (b == backend && c == cause) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << (t != nullptr ? t->name : "(null)") << ": expected " << bname(backend)
                                         << " [" << cause_name(cause) << "], got " << bname(b) << " [" << cause_name(c)
                                         << "]";
  }
  ::testing::AssertionResult Unassigned(const Tensor* t) const { return Assigned(t, -1, Cause::kUnassigned); }
  std::string bname(int b) const { return b >= 0 && b < n_backends() ? names[static_cast<size_t>(b)] : "none"; }

  // Pass 4's postcondition: every node, and every source of a node, has a backend; every computed node runs on a
  // backend that supports it.
  ::testing::AssertionResult FullyAssigned() const {
    for (const Tensor* n : graph.nodes()) {
      if (plan.backend_of(n) < 0) return ::testing::AssertionFailure() << "node " << n->name << " unassigned";
      if (!op_is_view(n->op) && n->op != Op::kNone && !bs.supports_op(plan.backend_of(n), *n)) {
        return ::testing::AssertionFailure()
               << "node " << n->name << " on " << bname(plan.backend_of(n)) << " which refuses " << op_name(n->op);
      }
      for (const Tensor* s : n->src) {
        if (s != nullptr && plan.backend_of(s) < 0) {
          return ::testing::AssertionFailure() << "source " << s->name << " of " << n->name << " unassigned";
        }
      }
    }
    return ::testing::AssertionSuccess();
  }

  FakeBufferType gpu0_buft{"GPU0_buf", false};
  FakeBufferType gpu1_buft{"GPU1_buf", false};
  FakeBufferType cpu_buft{"CPU_buf", true};
  // A CPU-only buffer type that is not host memory (like a repacked-weights type): never an offload source.
  FakeBufferType cpu_repack_buft{"CPU_REPACK_buf", false};
  // Host memory of the CPU under another type (like a GPU's pinned host type that only the CPU computes from).
  FakeBufferType pinned_buft{"PINNED_buf", true};
  // A type no backend supports.
  FakeBufferType orphan_buft{"ORPHAN_buf", false};

  std::vector<std::string> names{"GPU0", "GPU1", "CPU"};
  std::vector<BufferType*> compute{&gpu0_buft, &gpu1_buft, &cpu_buft};
  std::vector<std::set<const BufferType*>> usable_bufts{
      {&gpu0_buft}, {&gpu1_buft}, {&cpu_buft, &cpu_repack_buft, &pinned_buft}};
  std::vector<std::set<Op>> refused_ops{{}, {}, {}};
  std::vector<std::set<const Tensor*>> refused_tensors{{}, {}, {}};
  std::vector<std::set<Op>> offload_ops{{}, {}, {}};
  std::set<const Buffer*> compute_buffers;

  ::testing::NiceMock<MockBackendSet> bs;
  Context ctx{{.no_alloc = true}};
  Graph graph;
  SchedPlan plan;
  std::vector<std::unique_ptr<Buffer>> buffers;
};

// A scheduling error: an error status (never an abort) whose message names every given part (tensor, buffer type,
// op).
inline void ExpectSchedulingError(const Status& s, std::initializer_list<const char*> parts) {
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.code(), StatusCode::kUnsupported);
  for (const char* p : parts) EXPECT_THAT(s.message(), ::testing::HasSubstr(p));
}

}  // namespace tessera::sched::testing
