// Simulated devices (docs/simulator.md): memory capacity and accounting, host visibility, capabilities, the kernels'
// limits on op support (the op rules themselves: op_rules_test.cpp), the cost model and link pricing, injected faults,
// metadata-only mode, the checks a real device would fail on, registration in a registry and determinism. Expected
// values are computed by hand from the configuration.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <tuple>
#include <utility>

#include <unistd.h>

#include "unit/sim/sim_fixture.h"
#include "sim/sim_impl.h"  // op_time_us
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/registry.h"
#include "tessera/sim/simulator.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using ::testing::HasSubstr;

namespace {

std::unique_ptr<Buffer> must_alloc(BufferType& bt, size_t n) {
  auto r = bt.alloc_buffer(n);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : nullptr;
}

size_t free_of(Device& d) {
  size_t f = 0, t = 0;
  d.memory(&f, &t);
  return f;
}

size_t total_of(Device& d) {
  size_t f = 0, t = 0;
  d.memory(&f, &t);
  return t;
}

// Events of one kind in the trace, in submission order.
std::vector<TraceEvent> events_of(const Simulator& sim, TraceKind kind) {
  std::vector<TraceEvent> out;
  for (const TraceEvent& e : sim.trace().events) {
    if (e.kind == kind) out.push_back(e);
  }
  return out;
}

double rel_err(double got, double want) { return std::fabs(got - want) / std::max(std::fabs(want), 1e-300); }

// A one-device simulator whose device has the given rules.

size_t resident_bytes() {
  std::ifstream f("/proc/self/statm");
  size_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * static_cast<size_t>(sysconf(_SC_PAGESIZE));
}

// =====================================================================================================================
// 1. Memory

TEST(SimDevice, AllocationBeyondFreeCapacityFailsLikeARealOutOfMemory) {
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}));
  Device& d = *sim->device(0);
  BufferType& bt = *d.buffer_type();
  auto a = must_alloc(bt, 600 * KiB);
  ASSERT_NE(a, nullptr);
  auto r = bt.alloc_buffer(500 * KiB);  // 424 KiB are free
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(r.status().message(), HasSubstr("gpu0"));
  EXPECT_THAT(r.status().message(), HasSubstr("out of memory"));
  EXPECT_THAT(r.status().message(), HasSubstr("500.00 KiB"));  // asked
  EXPECT_THAT(r.status().message(), HasSubstr("424.00 KiB"));  // free
  EXPECT_THAT(r.status().message(), HasSubstr("1.00 MiB"));    // capacity
  // The failure took nothing: exactly the free capacity still fits, one byte more does not.
  EXPECT_EQ(free_of(d), 424 * KiB);
  EXPECT_FALSE(bt.alloc_buffer(424 * KiB + 1).ok());
  auto b = must_alloc(bt, 424 * KiB);
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(free_of(d), 0u);
  EXPECT_FALSE(bt.alloc_buffer(1).ok());
  // Freeing gives the memory back.
  a.reset();
  EXPECT_EQ(free_of(d), 600 * KiB);
  EXPECT_TRUE(bt.alloc_buffer(600 * KiB).ok());
}

TEST(SimDevice, MemoryAndStatsFollowAllocAndFree) {
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB), gpu("gpu1", 2 * MiB)}));
  Device& d = *sim->device(0);
  EXPECT_EQ(free_of(d), 1 * MiB);
  EXPECT_EQ(total_of(d), 1 * MiB);
  EXPECT_EQ(total_of(*sim->device(1)), 2 * MiB);
  EXPECT_EQ(sim->stats(0).memory_total, 1 * MiB);
  EXPECT_EQ(sim->stats(0).memory_used, 0u);
  EXPECT_EQ(sim->stats(0).n_allocs, 0u);

  auto a = must_alloc(*d.buffer_type(), 1000);
  auto b = must_alloc(*d.buffer_type(), 3000);
  EXPECT_EQ(free_of(d), 1 * MiB - 4000);
  EXPECT_EQ(total_of(d), 1 * MiB);
  EXPECT_EQ(sim->stats(0).memory_used, 4000u);
  EXPECT_EQ(sim->stats(0).memory_peak, 4000u);
  EXPECT_EQ(sim->stats(0).n_allocs, 2u);
  // The other device is untouched.
  EXPECT_EQ(free_of(*sim->device(1)), 2 * MiB);
  EXPECT_EQ(sim->stats(1).n_allocs, 0u);

  b.reset();
  EXPECT_EQ(free_of(d), 1 * MiB - 1000);
  EXPECT_EQ(sim->stats(0).memory_used, 1000u);
  EXPECT_EQ(sim->stats(0).memory_peak, 4000u);  // the peak stays
  auto c = must_alloc(*d.buffer_type(), 500);
  EXPECT_EQ(sim->stats(0).memory_used, 1500u);
  EXPECT_EQ(sim->stats(0).memory_peak, 4000u);
  EXPECT_EQ(sim->stats(0).n_allocs, 3u);
  a.reset();
  c.reset();
  EXPECT_EQ(free_of(d), 1 * MiB);
  EXPECT_EQ(sim->stats(0).memory_used, 0u);
}

TEST(SimDevice, AlignmentAndMaxAllocComeFromTheConfig) {
  DeviceConfig g = gpu("gpu0", 1 * MiB);
  g.alignment = 512;
  g.max_alloc = 4096;
  auto sim = make_sim(topology({g}));
  BufferType& bt = *sim->device(0)->buffer_type();
  EXPECT_EQ(bt.alignment(), 512u);
  EXPECT_EQ(bt.max_size(), 4096u);
  EXPECT_TRUE(bt.alloc_buffer(4096).ok());
  auto r = bt.alloc_buffer(4097);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(r.status().message(), HasSubstr("4097"));
  EXPECT_EQ(free_of(*sim->device(0)), 1 * MiB) << "a refused allocation takes no memory";
  // Tensors are placed at the alignment: two 256-byte vectors land 512 bytes apart.
  Vectors v(bt, {"a", "b"}, 64);
  ASSERT_NE(v.buffer, nullptr);
  const auto* base = static_cast<const char*>(v.buffer->base());
  EXPECT_EQ(static_cast<const char*>(v[0]->data) - base, 0);
  EXPECT_EQ(static_cast<const char*>(v[1]->data) - base, 512);
}

TEST(SimDevice, ZeroSizeBufferIsValidAndTakesNothing) {
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}));
  auto r = sim->device(0)->buffer_type()->alloc_buffer(0);
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  ASSERT_NE(r.value(), nullptr);
  EXPECT_EQ(r.value()->size(), 0u);
  EXPECT_EQ(free_of(*sim->device(0)), 1 * MiB);
  EXPECT_EQ(sim->stats(0).n_allocs, 0u);
  r.value()->clear(0);  // a no-op, not a crash
}

// =====================================================================================================================
// 2. Host visibility

TEST(SimDevice, PureSimulatedBufferIsNotHostAndRoundTripsExactly) {
  auto sim = make_sim(topology({gpu("gpu0")}));
  BufferType& bt = *sim->device(0)->buffer_type();
  EXPECT_FALSE(bt.is_host());
  Vectors v(bt, {"x"}, 64);
  ASSERT_NE(v.buffer, nullptr);
  EXPECT_FALSE(v.buffer->is_host());
  std::vector<float> x = random_values(64, 3);
  x[0] = -0.0f;
  x[1] = std::numeric_limits<float>::denorm_min();
  x[2] = std::numeric_limits<float>::infinity();
  x[3] = std::numeric_limits<float>::quiet_NaN();
  set_f32(*v[0], x);
  const std::vector<float> got = get_f32(*v[0]);
  ASSERT_EQ(got.size(), x.size());
  EXPECT_EQ(std::memcmp(got.data(), x.data(), x.size() * sizeof(float)), 0);
  // A partial write changes exactly its bytes.
  const float patch[2] = {7.0f, 8.0f};
  ASSERT_TRUE(tensor_set(*v[0], patch, 10 * sizeof(float), sizeof(patch)).ok());
  const std::vector<float> got2 = get_f32(*v[0]);
  for (size_t i = 0; i < x.size(); ++i) {
    const float want = i == 10 ? 7.0f : i == 11 ? 8.0f : x[i];
    ASSERT_EQ(std::memcmp(&got2[i], &want, sizeof(float)), 0) << i;
  }
}

TEST(SimDevice, HostVisibleDeviceBuffersAreHost) {
  DeviceConfig igpu = gpu("igpu0");
  igpu.type = DeviceType::kIgpu;
  igpu.host_visible = true;
  auto sim = make_sim(topology({igpu, gpu("gpu0")}));
  EXPECT_TRUE(sim->device(0)->buffer_type()->is_host());
  EXPECT_FALSE(sim->device(1)->buffer_type()->is_host());
  Vectors v(*sim->device(0)->buffer_type(), {"x"});
  ASSERT_NE(v.buffer, nullptr);
  EXPECT_TRUE(v.buffer->is_host());
  const std::vector<float> x = random_values(64, 4);
  set_f32(*v[0], x);
  EXPECT_EQ(get_f32(*v[0]), x);
}

TEST(SimDevice, WrappedCpuComputesLikeThePlainCpuBackend) {
  constexpr int64_t K = 64, M = 24, N = 8;
  const std::vector<float> av = random_values(K * M, 21), bv = random_values(K * N, 22);
  auto build = [&](Context& c) {
    Tensor* a = c.new_tensor_2d(Type::kF32, K, M);
    Tensor* b = c.new_tensor_2d(Type::kF32, K, N);
    set_name(*a, "a");
    set_name(*b, "b");
    return silu(c, mul_mat(c, a, b));
  };
  // On the simulated wrapped CPU.
  auto sim = make_sim(topology({gpu("gpu0"), wrapped_cpu()}));
  auto sb = sim->device(1)->init_backend({}).value();
  OneOp sop(*sim->device(1)->buffer_type(), build);
  ASSERT_NE(sop.buffer, nullptr);
  EXPECT_TRUE(sop.buffer->is_host());
  set_f32(*sop.ctx.find("a"), av);
  set_f32(*sop.ctx.find("b"), bv);
  ASSERT_EQ(sb->graph_compute(sop.graph), ComputeStatus::kSuccess) << sb->last_error();
  const std::vector<float> got = get_f32(*sop.out);
  // On a plain CPU backend.
  auto cb = cpu::make_backend();
  OneOp cop(*cpu::buffer_type(), build);
  ASSERT_NE(cop.buffer, nullptr);
  set_f32(*cop.ctx.find("a"), av);
  set_f32(*cop.ctx.find("b"), bv);
  ASSERT_EQ(cb->graph_compute(cop.graph), ComputeStatus::kSuccess) << cb->last_error();
  const std::vector<float> want = get_f32(*cop.out);
  ASSERT_EQ(got.size(), static_cast<size_t>(M * N));
  ASSERT_EQ(want.size(), got.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_FLOAT_EQ(got[i], want[i]) << i;
  // And both are the real result: r[m, n] = silu(sum_k a[k, m] b[k, n]).
  for (int64_t m : {int64_t{0}, int64_t{5}, M - 1}) {
    for (int64_t n : {int64_t{0}, N - 1}) {
      double dot = 0;
      for (int64_t k = 0; k < K; ++k) dot += double(av[m * K + k]) * double(bv[n * K + k]);
      const double silu_ref = dot / (1.0 + std::exp(-dot));
      EXPECT_NEAR(got[n * M + m], silu_ref, 1e-4 * std::fabs(silu_ref)) << m << "," << n;
    }
  }
  EXPECT_GE(events_of(*sim, TraceKind::kCompute).size(), 1u) << "the wrapped compute is on the timeline";
}

// =====================================================================================================================
// 3. Capabilities

TEST(SimDevice, EventsOnlyWithTheEventsCapability) {
  DeviceConfig with = gpu("gpu0"), without = gpu("gpu1");
  without.caps.events = false;
  auto sim = make_sim(topology({with, without}));
  auto e = sim->device(0)->event_new();
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->device(), sim->device(0));
  EXPECT_EQ(sim->device(1)->event_new(), nullptr);
  EXPECT_FALSE(sim->device(1)->caps().events);
  EXPECT_TRUE(sim->device(0)->caps().events);
}

TEST(SimDevice, HostBufferTypeOnlyWithTheCapability) {
  DeviceConfig without = gpu("gpu0", 1 * MiB), with = gpu("gpu1", 1 * MiB);
  with.caps.host_buffer = true;
  auto sim = make_sim(topology({without, with}));
  EXPECT_EQ(sim->device(0)->host_buffer_type(), nullptr);
  BufferType* hb = sim->device(1)->host_buffer_type();
  ASSERT_NE(hb, nullptr);
  EXPECT_TRUE(hb->is_host());
  EXPECT_EQ(hb->device(), sim->device(1));
  EXPECT_NE(hb, sim->device(1)->buffer_type());
  // Pinned host memory is not device memory: 2 MiB of it on a 1 MiB device.
  auto b = must_alloc(*hb, 2 * MiB);
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->is_host());
  EXPECT_EQ(free_of(*sim->device(1)), 1 * MiB);
}

TEST(SimDevice, BufferFromHostPtrAliasesUserMemoryOnlyWithTheCapability) {
  DeviceConfig with = gpu("gpu0"), without = gpu("gpu1");
  with.caps.buffer_from_host_ptr = true;
  auto sim = make_sim(topology({with, without}));
  alignas(64) static float user[64];
  std::fill(std::begin(user), std::end(user), 0.0f);

  auto r = sim->device(0)->buffer_from_host_ptr(user, sizeof(user), sizeof(user));
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  std::unique_ptr<Buffer> buf = std::move(r).value();
  EXPECT_EQ(buf->base(), static_cast<void*>(user));
  EXPECT_EQ(buf->size(), sizeof(user));
  EXPECT_TRUE(buf->is_host());
  EXPECT_TRUE(sim->device(0)->supports_buft(*buf->type()));
  EXPECT_FALSE(sim->device(1)->supports_buft(*buf->type()));
  Context ctx({.no_alloc = true});
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 64);
  ASSERT_TRUE(tensor_alloc(*buf, *t, buf->base()).ok());
  const std::vector<float> x = random_values(64, 5);
  set_f32(*t, x);
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(user[i], x[i]) << i;  // the set landed in the user's array
  user[7] = 42.0f;
  EXPECT_EQ(get_f32(*t)[7], 42.0f);  // and the buffer sees the user's writes
  buf.reset();
  EXPECT_EQ(user[7], 42.0f) << "the buffer never frees or clears the user's memory";

  auto no = sim->device(1)->buffer_from_host_ptr(user, sizeof(user), sizeof(user));
  ASSERT_FALSE(no.ok());
  EXPECT_EQ(no.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(no.status().message(), HasSubstr("gpu1"));
  auto null_ptr = sim->device(0)->buffer_from_host_ptr(nullptr, 64, 64);
  EXPECT_FALSE(null_ptr.ok());
}

TEST(SimDevice, SupportsItsOwnBufferTypesButNotAForeignDevicesType) {
  DeviceConfig igpu = gpu("igpu0");
  igpu.host_visible = true;
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1"), igpu}));
  auto other = make_sim(topology({gpu("gpu0")}));
  Device& g0 = *sim->device(0);
  EXPECT_TRUE(g0.supports_buft(*g0.buffer_type()));
  EXPECT_FALSE(g0.supports_buft(*sim->device(1)->buffer_type()));
  EXPECT_FALSE(g0.supports_buft(*other->device(0)->buffer_type())) << "same name, other simulator";
  EXPECT_FALSE(g0.supports_buft(*cpu::buffer_type())) << "plain host memory is not device memory";
  // A host-visible device computes on host memory.
  EXPECT_TRUE(sim->device(2)->supports_buft(*cpu::buffer_type()));
  EXPECT_TRUE(sim->device(2)->supports_buft(*sim->device(2)->buffer_type()));
  EXPECT_FALSE(sim->device(2)->supports_buft(*g0.buffer_type()));
}

// =====================================================================================================================
// 4. Op rules (the rules themselves and how a device consults them: op_rules_test.cpp)

TEST(SimDevice, NeverClaimsAnOpTheCpuKernelsCannotCompute) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 64, 16, 8);
  Tensor* bad = n.ctx.dup_tensor(mm);  // a MUL_MAT with an f16 result: no kernel computes it
  ASSERT_NE(bad, nullptr);
  bad->op = Op::kMulMat;
  bad->src[0] = mm->src[0];
  bad->src[1] = mm->src[1];
  bad->type = Type::kF16;
  ASSERT_TRUE(cpu::device()->supports_op(*mm));
  ASSERT_FALSE(cpu::device()->supports_op(*bad));
  auto sim = sim_with_rules({rule(true, {Op::kMulMat})}, true);
  EXPECT_TRUE(sim->device(0)->supports_op(*mm));
  EXPECT_FALSE(sim->device(0)->supports_op(*bad));
  // The wrapped CPU too.
  auto w = make_sim(topology({wrapped_cpu()}));
  EXPECT_TRUE(w->device(0)->supports_op(*mm));
  EXPECT_FALSE(w->device(0)->supports_op(*bad));
}

// =====================================================================================================================
// 5. Cost model and links

TEST(SimCost, MulMatF32ComputeBound) {
  Nodes n;
  const double K = 4096, M = 4096, N = 512;
  Tensor* mm = n.mul_mat_node(Type::kF32, 4096, 4096, 512);
  // 2 K M N = 17179869184 flops at 10 TFLOP/s: 1717.9869184 us; bytes (K M + K N + M N) * 4 = 83886080 at
  // 500 GB/s: 167.77216 us. Compute-bound.
  const double want = 5.0 + 2.0 * K * M * N / 10e12 * 1e6;
  EXPECT_NEAR(want, 1722.9869184, 1e-6);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *mm), want), 1e-12) << op_time_us(cost_device(), *mm);
}

TEST(SimCost, MulMatF32MemoryBound) {
  Nodes n;
  Tensor* mv = n.mul_mat_node(Type::kF32, 4096, 4096, 1);
  // 2 K M = 33554432 flops: 3.3554432 us; bytes (4096*4096 + 4096 + 4096) * 4 = 67141632: 134.283264 us.
  const double want = 5.0 + 67141632.0 / 500e9 * 1e6;
  EXPECT_NEAR(want, 139.283264, 1e-9);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *mv), want), 1e-12) << op_time_us(cost_device(), *mv);
}

// MUL_MAT_ID reads only the experts its ids can name: experts [4096, 1408, 64] f32 (23068672 B each), 8 used by 1
// token: flops 2 * 4096 * 1408 * 8 = 92274688 (9.2274688 us at 10 TFLOP/s); bytes: 8 experts 184549376 + b (4096 * 8
// * 4 = 131072) + ids (32) + result (1408 * 8 * 4 = 45056) = 184725536 B, 369.451072 us at 500 GB/s. At 40 tokens
// every expert may be read: 64 x 23068672 = 1476395008 + b 5242880 + ids 1280 + result 1802240 = 1483441408 B:
// 2966.882816 us.
TEST(SimCost, MulMatIdReadsTheExpertsItsIdsName) {
  Nodes n;
  Tensor* one = n.mul_mat_id_node(4096, 1408, 64, 8, 1);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *one), 5.0 + 369.451072), 1e-12) << op_time_us(cost_device(), *one);
  Tensor* many = n.mul_mat_id_node(4096, 1408, 64, 8, 40);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *many), 5.0 + 2966.882816), 1e-12) << op_time_us(cost_device(), *many);
}

// GET_ROWS reads the rows its ids name: a q8_0 table of 16 rows of 4096 (4352 B a row); one id reads one row: 4352 +
// ids 4 + result 4096 * 4 = 20740 B, 0.04148 us at 500 GB/s (flops 4096 at 40 TFLOP/s: 0.0001 us). 40 ids may read
// every row: 69632 + 160 + 655360 = 725152 B, 1.450304 us.
TEST(SimCost, GetRowsReadsTheRowsItsIdsName) {
  Nodes n;
  Tensor* one = n.get_rows_node(4096, 1);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *one), 5.0 + 0.04148), 1e-12) << op_time_us(cost_device(), *one);
  Tensor* many = n.get_rows_node(4096, 40);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *many), 5.0 + 1.450304), 1e-12) << op_time_us(cost_device(), *many);
}

// SET_ROWS writes the rows its ids name into the destination (a KV cache): an f16 cache of 32768 cells of 4096 values
// (256 MiB) takes one f32 row of a decoded token: rows 4096 * 4 = 16384 + ids 4 (i32) + the row written in f16
// 4096 * 2 = 8192 B = 24580 B, 0.04916 us at 500 GB/s (flops: one per value written, 4096: under 0.0001 us). 512
// rows of a prompt: 8388608 + 2048 + 4194304 = 12584960 B, 25.16992 us. The cache itself is not read.
TEST(SimCost, SetRowsWritesTheRowsItsIdsName) {
  Nodes n;
  auto set = [&](int64_t rows) {
    Tensor* cache = n.ctx.new_tensor_2d(Type::kF16, 4096, 32768);
    Tensor* r = n.ctx.new_tensor_2d(Type::kF32, 4096, rows);
    Tensor* ids = n.ctx.new_tensor_1d(Type::kI32, rows);
    Tensor* out = set_rows(n.ctx, cache, r, ids);
    EXPECT_NE(out, nullptr) << n.ctx.status().to_string();
    return out;
  };
  Tensor* one = set(1);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *one), 5.0 + 0.04916), 1e-12) << op_time_us(cost_device(), *one);
  Tensor* prompt = set(512);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *prompt), 5.0 + 25.16992), 1e-12) << op_time_us(cost_device(), *prompt);
}

// llama.cpp's kernel classes (docs/simulator.md, "Kernel classes"): a matrix product of up to 8 columns (tokens) is
// a matrix x vector kernel, above that by the weight's type; flash attention by its query rows.
TEST(SimCost, KernelClassesAsGgmlCudaPicksItsKernels) {
  Nodes n;
  EXPECT_EQ(kernel_class(*n.mul_mat_node(Type::kQ4_0, 4096, 4096, 1)), KernelClass::kMatVec);
  EXPECT_EQ(kernel_class(*n.mul_mat_node(Type::kQ4_0, 4096, 4096, 8)), KernelClass::kMatVec);
  EXPECT_EQ(kernel_class(*n.mul_mat_node(Type::kQ4_0, 4096, 4096, 9)), KernelClass::kMatMatQuant);
  EXPECT_EQ(kernel_class(*n.mul_mat_node(Type::kF16, 4096, 4096, 512)), KernelClass::kMatMatFloat);
  EXPECT_EQ(kernel_class(*n.mul_mat_node(Type::kF32, 4096, 4096, 512)), KernelClass::kMatMatFloat);
  EXPECT_EQ(kernel_class(*n.mul_mat_id_node(64, 16, 8, 2, 1)), KernelClass::kMatVec);        // one token
  EXPECT_EQ(kernel_class(*n.mul_mat_id_node(64, 16, 8, 2, 40)), KernelClass::kMatMatFloat);  // f32 experts
  EXPECT_EQ(kernel_class(*n.add_node(64, 64)), KernelClass::kOther);
  EXPECT_EQ(kernel_class(*n.get_rows_node(64, 4)), KernelClass::kOther);
  auto fa = [&](int64_t n_q) {
    Tensor* q = n.ctx.new_tensor_3d(Type::kF32, 128, n_q, 32);
    Tensor* k = n.ctx.new_tensor_3d(Type::kF16, 128, 256, 8);
    Tensor* v = n.ctx.new_tensor_3d(Type::kF16, 128, 256, 8);
    Tensor* r = flash_attn_ext(n.ctx, q, k, v, nullptr, 0.088f);
    EXPECT_NE(r, nullptr) << n.ctx.status().to_string();
    return r;
  };
  EXPECT_EQ(kernel_class(*fa(1)), KernelClass::kAttnDecode);
  EXPECT_EQ(kernel_class(*fa(512)), KernelClass::kAttnPrefill);
  EXPECT_STREQ(kernel_class_name(KernelClass::kMatMatQuant), "mat_mat_quant");
}

// Each class reaches its share of the peaks: the memory-bound 4096 x 4096 f32 matrix x vector at half the bandwidth
// takes 2 x 134.283264 us; the compute-bound 4096 x 4096 x 512 f32 product at a quarter of 10 TFLOP/s takes
// 4 x 1717.9869184 us. Another class's shares do not touch them; an override's FLOP rate is the kernel's own.
TEST(SimCost, EfficiencyScalesItsClassOnly) {
  Nodes n;
  DeviceConfig d = cost_device();
  d.cost.efficiency[static_cast<size_t>(KernelClass::kMatVec)].memory = 0.5;
  d.cost.efficiency[static_cast<size_t>(KernelClass::kMatMatFloat)].compute = 0.25;
  d.cost.efficiency[static_cast<size_t>(KernelClass::kOther)] = {0.1, 0.1};
  Tensor* mv = n.mul_mat_node(Type::kF32, 4096, 4096, 1);
  EXPECT_LT(rel_err(op_time_us(d, *mv), 5.0 + 2 * 134.283264), 1e-12) << op_time_us(d, *mv);
  Tensor* mm = n.mul_mat_node(Type::kF32, 4096, 4096, 512);
  EXPECT_LT(rel_err(op_time_us(d, *mm), 5.0 + 4 * 1717.9869184), 1e-12) << op_time_us(d, *mm);
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 4096, 4096, 512);  // kMatMatQuant: still the peaks
  EXPECT_LT(rel_err(op_time_us(d, *q4), op_time_us(cost_device(), *q4)), 1e-12);
  d.cost.overrides.push_back({Op::kMulMat, -1, /*flops=*/1e12, -1});
  EXPECT_LT(rel_err(op_time_us(d, *mm), 5.0 + 2.0 * 4096 * 4096 * 512 / 1e12 * 1e6), 1e-12) << op_time_us(d, *mm);
}

TEST(SimCost, WeightTypeSelectsTheThroughput) {
  Nodes n;
  const double flops = 2.0 * 4096 * 4096 * 512;
  // q4_0 weights: compute at 40 TFLOP/s = 429.4967296 us > bytes (9437184 + 2 * 8388608) / 500 GB/s = 52.4288 us.
  Tensor* q4 = n.mul_mat_node(Type::kQ4_0, 4096, 4096, 512);
  EXPECT_EQ(nbytes(*q4->src[0]), 4096u / 32 * 18 * 4096);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *q4), 5.0 + flops / 40e12 * 1e6), 1e-12);
  Tensor* q8 = n.mul_mat_node(Type::kQ8_0, 4096, 4096, 512);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *q8), 5.0 + flops / 40e12 * 1e6), 1e-12);
  // f16 weights: 50 TFLOP/s = 343.59738368 us > (33554432 + 2 * 8388608) / 500 GB/s = 100.663296 us.
  Tensor* f16 = n.mul_mat_node(Type::kF16, 4096, 4096, 512);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *f16), 5.0 + 343.59738368), 1e-12);
  Tensor* bf16 = n.mul_mat_node(Type::kBF16, 4096, 4096, 512);
  EXPECT_LT(rel_err(op_time_us(cost_device(), *bf16), 5.0 + 343.59738368), 1e-12);
}

TEST(SimCost, OverridesReplaceTheModel) {
  Nodes n;
  Tensor* mm = n.mul_mat_node(Type::kF32, 4096, 4096, 512);
  Tensor* ad = n.add_node(1024, 1024);
  // ADD of 1 Mi f32: 1048576 flops (0.1048576 us) vs 3 * 4 MiB = 12582912 bytes: 25.165824 us.
  const double add_want = 5.0 + 25.165824;
  DeviceConfig fixed = cost_device();
  fixed.cost.overrides.push_back({Op::kMulMat, -1, -1, /*fixed_us=*/7.0});
  EXPECT_DOUBLE_EQ(op_time_us(fixed, *mm), 7.0);
  EXPECT_LT(rel_err(op_time_us(fixed, *ad), add_want), 1e-12) << "other ops keep the model";
  DeviceConfig tuned = cost_device();
  tuned.cost.overrides.push_back({Op::kMulMat, /*overhead_us=*/1.0, /*flops=*/1e12, -1});
  // 17179869184 flops at 1 TFLOP/s = 17179.869184 us.
  EXPECT_LT(rel_err(op_time_us(tuned, *mm), 1.0 + 17179.869184), 1e-12) << op_time_us(tuned, *mm);
  DeviceConfig overhead_only = cost_device();
  overhead_only.cost.overrides.push_back({Op::kAdd, /*overhead_us=*/0.0, -1, -1});
  EXPECT_LT(rel_err(op_time_us(overhead_only, *ad), 25.165824), 1e-12);
}

TEST(SimCost, ViewsAndLeavesCostNothing) {
  Nodes n;
  Tensor* x = n.ctx.new_tensor_2d(Type::kF32, 64, 64);
  Tensor* r = reshape_1d(n.ctx, x, 64 * 64);
  Tensor* v = view_1d(n.ctx, x, 32, 0);
  Tensor* p = transpose(n.ctx, x);
  ASSERT_TRUE(r != nullptr && v != nullptr && p != nullptr);
  const DeviceConfig d = cost_device();
  EXPECT_EQ(op_time_us(d, *x), 0.0);
  EXPECT_EQ(op_time_us(d, *r), 0.0);
  EXPECT_EQ(op_time_us(d, *v), 0.0);
  EXPECT_EQ(op_time_us(d, *p), 0.0);
  EXPECT_GT(op_time_us(d, *n.scale_node(64)), 5.0);
}

TEST(SimCost, ComputeOnTheTimelineTakesTheModelsTime) {
  auto sim = make_sim(topology({cost_device()}));
  auto b = sim->device(0)->init_backend({}).value();
  OneOp op(*sim->device(0)->buffer_type(), [](Context& c) {
    Tensor* a = c.new_tensor_2d(Type::kF32, 64, 32);
    Tensor* x = c.new_tensor_2d(Type::kF32, 64, 8);
    set_name(*a, "a");
    set_name(*x, "x");
    return mul_mat(c, a, x);
  });
  set_name(*op.out, "y");
  ASSERT_NE(op.buffer, nullptr);
  set_f32(*op.ctx.find("a"), random_values(64 * 32, 1));
  set_f32(*op.ctx.find("x"), random_values(64 * 8, 2));
  ASSERT_EQ(b->graph_compute_async(op.graph), ComputeStatus::kSuccess) << b->last_error();
  const auto ev = events_of(*sim, TraceKind::kCompute);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_THAT(ev[0].name, HasSubstr("MUL_MAT"));
  // bytes (64*32 + 64*8 + 32*8) * 4 = 11264 at 500 GB/s = 0.022528 us > 32768 flops at 10 TFLOP/s.
  EXPECT_NEAR(ev[0].end_us - ev[0].start_us, 5.022528, 1e-9);
  EXPECT_TRUE(b->synchronize().ok());
  EXPECT_NEAR(sim->now_us(), ev[0].end_us, 1e-9);
}

struct TwoGpus {
  std::unique_ptr<Simulator> sim;
  std::unique_ptr<Backend> b0, b1;
  explicit TwoGpus(std::vector<LinkConfig> links, SimOptions o = {}) {
    DeviceConfig g0 = gpu("gpu0"), g1 = gpu("gpu1");
    g0.host_bandwidth = 25e9;
    g0.host_latency_us = 10;
    g1.host_bandwidth = 10e9;
    g1.host_latency_us = 3;
    TopologyConfig t = topology({g0, g1});
    t.links = std::move(links);
    sim = make_sim(t, o);
    b0 = sim->device(0)->init_backend({}).value();
    b1 = sim->device(1)->init_backend({}).value();
  }
  // Copies 2^16 floats (256 KiB) from gpu0 to gpu1; returns the copy's duration; checks the data.
  double copy_duration() {
    constexpr int64_t n = 1 << 16;
    Vectors src(*sim->device(0)->buffer_type(), {"src"}, n);
    Vectors dst(*sim->device(1)->buffer_type(), {"dst"}, n);
    const std::vector<float> x = random_values(n, 9);
    set_f32(*src[0], x);
    const size_t before = events_of(*sim, TraceKind::kCopy).size();
    EXPECT_TRUE(b1->cpy_tensor_async(b0.get(), *src[0], *dst[0]));
    EXPECT_TRUE(b1->synchronize().ok());
    EXPECT_EQ(get_f32(*dst[0]), x) << "the copy moved the data";
    const auto ev = events_of(*sim, TraceKind::kCopy);
    EXPECT_EQ(ev.size(), before + 1);
    if (ev.size() != before + 1) return -1;
    EXPECT_EQ(ev.back().bytes, size_t{n} * 4);
    return ev.back().end_us - ev.back().start_us;
  }
};

TEST(SimCost, CopyOverAnExplicitLinkTakesLatencyPlusBytesOverBandwidth) {
  TwoGpus t({LinkConfig{"gpu0", "gpu1", 100e9, 2.0}});
  // 2 us + 262144 B / 100 GB/s = 2 + 2.62144 us.
  EXPECT_NEAR(t.copy_duration(), 4.62144, 1e-9);
}

TEST(SimCost, LinksAreSymmetricAndCaseInsensitive) {
  TwoGpus t({LinkConfig{"GPU1", "Gpu0", 100e9, 2.0}});
  EXPECT_NEAR(t.copy_duration(), 4.62144, 1e-9);
}

// A device whose backend has no cpy_tensor_async (caps.cpy_tensor_async false) refuses the copy, leaving it to the
// caller (the scheduler copies through the host); its compute and tensor I/O stay asynchronous.
TEST(SimDevice, WithoutCpyTensorAsyncTheCopyIsRefused) {
  DeviceConfig g0 = gpu("gpu0"), g1 = gpu("gpu1");
  g1.cpy_tensor_async = false;
  auto sim = make_sim(topology({g0, g1}), {});
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  Vectors src(*sim->device(0)->buffer_type(), {"src"}, 64);
  Vectors dst(*sim->device(1)->buffer_type(), {"dst"}, 64);
  set_f32(*src[0], random_values(64, 3));
  const size_t before = events_of(*sim, TraceKind::kCopy).size();
  EXPECT_FALSE(b1->cpy_tensor_async(b0.get(), *src[0], *dst[0]));
  EXPECT_EQ(events_of(*sim, TraceKind::kCopy).size(), before) << "nothing was queued";
  EXPECT_TRUE(b0->cpy_tensor_async(b1.get(), *dst[0], *src[0])) << "copies into gpu0 are still asynchronous";
  EXPECT_TRUE(sim->device(1)->props().caps.async);
}

TEST(SimCost, CopyWithoutALinkGoesThroughTheHost) {
  TwoGpus t({});
  // Latencies 10 + 3 us, the slower host link 10 GB/s: 13 + 26.2144 us.
  EXPECT_NEAR(t.copy_duration(), 39.2144, 1e-9);
}

TEST(SimCost, AnExplicitHostLinkReplacesTheDevicesHostLink) {
  TwoGpus t({LinkConfig{"host", "gpu1", 50e9, 1.0}});
  // gpu0: 10 us, 25 GB/s; gpu1 through the explicit link: 1 us, 50 GB/s. 11 + 262144 / 25e9 s = 11 + 10.48576 us.
  EXPECT_NEAR(t.copy_duration(), 21.48576, 1e-9);
}

TEST(SimCost, SynchronousSetAndGetAdvanceTheHostClockByTheHostLinkTime) {
  TwoGpus t({});
  constexpr int64_t n = 1 << 16;
  Vectors v(*t.sim->device(0)->buffer_type(), {"x"}, n);
  const std::vector<float> x = random_values(n, 10);
  const double t0 = t.sim->now_us();
  set_f32(*v[0], x);
  const double t1 = t.sim->now_us();
  // gpu0's host link: 10 us + 262144 B / 25 GB/s = 10 + 10.48576 us.
  EXPECT_NEAR(t1 - t0, 20.48576, 1e-9);
  const std::vector<float> got = get_f32(*v[0]);
  EXPECT_NEAR(t.sim->now_us() - t1, 20.48576, 1e-9);
  EXPECT_EQ(got, x);
  // The same on gpu1 (3 us, 10 GB/s).
  Vectors w(*t.sim->device(1)->buffer_type(), {"w"}, n);
  const double t2 = t.sim->now_us();
  set_f32(*w[0], x);
  EXPECT_NEAR(t.sim->now_us() - t2, 3.0 + 26.2144, 1e-9);
  // A host-visible device's memory is the host's: no transfer time.
  DeviceConfig igpu = gpu("igpu");
  igpu.host_visible = true;
  auto hv = make_sim(topology({igpu}));
  Vectors h(*hv->device(0)->buffer_type(), {"h"}, n);
  set_f32(*h[0], x);
  EXPECT_EQ(hv->now_us(), 0.0);
}

// =====================================================================================================================
// 6. Faults

TEST(SimFaults, FailAllocNthFailsExactlyThatAllocation) {
  SimOptions o;
  o.seed = 1234;
  o.faults.fail_alloc_nth = 2;
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}), o);
  BufferType& bt = *sim->device(0)->buffer_type();
  auto a = bt.alloc_buffer(1000);
  auto b = bt.alloc_buffer(2000);
  auto c = bt.alloc_buffer(3000);
  EXPECT_TRUE(a.ok());
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(b.status().message(), HasSubstr("injected"));
  EXPECT_THAT(b.status().message(), HasSubstr("gpu0"));
  EXPECT_THAT(b.status().message(), HasSubstr("seed 1234"));
  EXPECT_TRUE(c.ok());
  EXPECT_EQ(sim->stats(0).memory_used, 4000u) << "the failed allocation took nothing";
  EXPECT_EQ(sim->stats(0).n_allocs, 2u);
  EXPECT_TRUE(bt.alloc_buffer(2000).ok()) << "only the 2nd fails";
}

TEST(SimFaults, FailAllocDeviceRestrictsTheCount) {
  SimOptions o;
  o.faults.fail_alloc_nth = 2;
  o.faults.fail_alloc_device = "GPU1";
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB), gpu("gpu1", 1 * MiB)}), o);
  BufferType& g0 = *sim->device(0)->buffer_type();
  BufferType& g1 = *sim->device(1)->buffer_type();
  EXPECT_TRUE(g0.alloc_buffer(100).ok());
  EXPECT_TRUE(g0.alloc_buffer(100).ok()) << "gpu0's allocations do not count";
  EXPECT_TRUE(g1.alloc_buffer(100).ok());
  auto r = g1.alloc_buffer(100);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("injected"));
  EXPECT_THAT(r.status().message(), HasSubstr("gpu1"));
  EXPECT_TRUE(g0.alloc_buffer(100).ok());
  EXPECT_TRUE(g1.alloc_buffer(100).ok());
}

TEST(SimFaults, FailAllocAboveFailsLargeAllocationsOnly) {
  SimOptions o;
  o.faults.fail_alloc_above = 4096;
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}), o);
  BufferType& bt = *sim->device(0)->buffer_type();
  auto ok = bt.alloc_buffer(4096);
  EXPECT_TRUE(ok.ok());
  auto r = bt.alloc_buffer(4097);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(r.status().message(), HasSubstr("injected"));
  EXPECT_THAT(r.status().message(), HasSubstr("4097"));
  EXPECT_EQ(sim->stats(0).memory_used, 4096u);
}

struct ScaleOn {
  Vectors in;
  OneOp op;
  std::vector<float> x;
  ScaleOn(BufferType& bt, uint64_t seed)
      : in(bt, {"x"}), op(bt, [this](Context& c) { return scale(c, in[0], 3.0f); }), x(random_values(64, seed)) {
    set_f32(*in[0], x);
  }
  void expect_result() const {
    const std::vector<float> got = get_f32(*op.out);
    for (size_t i = 0; i < x.size(); ++i) ASSERT_FLOAT_EQ(got[i], 3.0f * x[i]) << i;
  }
};

TEST(SimFaults, FailComputeOpsFailsTheComputeNamingTheOp) {
  SimOptions o;
  o.faults.fail_compute_ops = {Op::kMulMat};
  auto sim = make_sim(topology({gpu("gpu0")}), o);
  BufferType& bt = *sim->device(0)->buffer_type();
  auto b = sim->device(0)->init_backend({}).value();
  Vectors in(bt, {"a", "x"}, 64);
  OneOp mm(bt, [&](Context& c) { return mul_mat(c, in[0], in[1]); });
  EXPECT_EQ(b->graph_compute_async(mm.graph), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr("injected"));
  EXPECT_THAT(b->last_error(), HasSubstr("MUL_MAT"));
  EXPECT_TRUE(events_of(*sim, TraceKind::kCompute).empty()) << "nothing ran";
  // Other ops still compute correctly.
  ScaleOn s(bt, 30);
  ASSERT_EQ(b->graph_compute(s.op.graph), ComputeStatus::kSuccess) << b->last_error();
  EXPECT_TRUE(b->last_error().empty());
  s.expect_result();
}

TEST(SimFaults, FailComputeDeviceRestrictsTheFault) {
  SimOptions o;
  o.faults.fail_compute_ops = {Op::kScale};
  o.faults.fail_compute_device = "gpu1";
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1")}), o);
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  ScaleOn s0(*sim->device(0)->buffer_type(), 31);
  ScaleOn s1(*sim->device(1)->buffer_type(), 32);
  ASSERT_EQ(b0->graph_compute(s0.op.graph), ComputeStatus::kSuccess) << b0->last_error();
  s0.expect_result();
  EXPECT_EQ(b1->graph_compute(s1.op.graph), ComputeStatus::kFailed);
  EXPECT_THAT(b1->last_error(), HasSubstr("SCALE"));
  EXPECT_THAT(b1->last_error(), HasSubstr("gpu1"));
}

TEST(SimFaults, SlowCopyFactorScalesCopiesExactlyAndKeepsTheData) {
  SimOptions o;
  o.faults.slow_copy_factor = 3.0;
  TwoGpus t({LinkConfig{"gpu0", "gpu1", 100e9, 2.0}}, o);
  EXPECT_NEAR(t.copy_duration(), 3.0 * 4.62144, 1e-9);  // copy_duration checks the data too
  // Host transfers are copies as well: 3 * (10 + 10.48576) us for 256 KiB to gpu0.
  Vectors v(*t.sim->device(0)->buffer_type(), {"x"}, 1 << 16);
  const double t0 = t.sim->now_us();
  set_f32(*v[0], random_values(1 << 16, 3));
  EXPECT_NEAR(t.sim->now_us() - t0, 3.0 * 20.48576, 1e-9);
}

TEST(SimFaults, SlowEventDelaysEventSynchronizeAndWait) {
  SimOptions o;
  o.faults.slow_event_us = 100.0;
  auto sim = make_sim(topology({cost_device(), gpu("gpu1")}), o);
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  ScaleOn s(*sim->device(0)->buffer_type(), 33);
  auto ev = sim->device(0)->event_new();
  ASSERT_NE(ev, nullptr);
  const double t0 = sim->now_us();
  ASSERT_EQ(b0->graph_compute_async(s.op.graph), ComputeStatus::kSuccess);
  ev->record(*b0);
  // SCALE of 64 f32: 5 us + 512 B / 500 GB/s = 5.001024 us; the event is reached then, seen 100 us later.
  const double reached = t0 + 5.001024;
  ev->wait(*b1);
  auto* sb1 = dynamic_cast<SimBackend*>(b1.get());
  ASSERT_NE(sb1, nullptr);
  EXPECT_NEAR(sb1->ready(), reached + 100.0, 1e-9) << "the waiting stream starts its next work after the delay";
  ev->synchronize();
  EXPECT_NEAR(sim->now_us(), reached + 100.0, 1e-9);
  s.expect_result();
}

TEST(SimFaults, HideFreeBytesReportsLessFreeButAllocationsUseTheRealCapacity) {
  SimOptions o;
  o.faults.hide_free_bytes = 256 * KiB;
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}), o);
  Device& d = *sim->device(0);
  EXPECT_EQ(free_of(d), 768 * KiB);
  EXPECT_EQ(total_of(d), 1 * MiB);
  // The hidden memory is still there (the fault only lies about it).
  auto a = must_alloc(*d.buffer_type(), 900 * KiB);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(free_of(d), 0u) << "900 KiB used + 256 KiB hidden exceeds the capacity: reported free is clamped to 0";
  EXPECT_TRUE(d.buffer_type()->alloc_buffer(124 * KiB).ok());
  EXPECT_FALSE(d.buffer_type()->alloc_buffer(124 * KiB + 1).ok()) << "but not beyond the real capacity";
  a.reset();
  EXPECT_EQ(free_of(d), 768 * KiB);
}

TEST(SimFaults, HideFreeBytesLargerThanTheCapacityReportsNothingFree) {
  SimOptions o;
  o.faults.hide_free_bytes = std::numeric_limits<size_t>::max();  // "hide everything"
  auto sim = make_sim(topology({gpu("gpu0", 1 * MiB)}), o);
  auto b = must_alloc(*sim->device(0)->buffer_type(), 1000);
  EXPECT_EQ(free_of(*sim->device(0)), 0u);
  EXPECT_EQ(total_of(*sim->device(0)), 1 * MiB);
}

TEST(SimFaults, LazyComputeErrorIsReportedOnceBySynchronizeOrTheNextCompute) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1")}));
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  BufferType& bt = *sim->device(0)->buffer_type();
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 8, 4);  // 4 rows
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  Tensor* rows = get_rows(ctx, a, ids);
  ASSERT_NE(rows, nullptr) << ctx.status().to_string();
  set_name(*rows, "rows");
  Graph g;
  ASSERT_TRUE(g.build_forward(rows).ok());
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  set_f32(*a, random_values(32, 7));
  const int32_t idv[2] = {1, 7};  // 7 is out of range
  ASSERT_TRUE(tensor_set(*ids, idv, 0, sizeof(idv)).ok());
  // The checks at submission pass; the kernel fails when it runs (lazily).
  ASSERT_EQ(b0->graph_compute_async(g), ComputeStatus::kSuccess) << b0->last_error();
  EXPECT_TRUE(sim->errors().empty());
  // The synchronize after it reports the failure, once.
  const Status sync = b0->synchronize();
  EXPECT_FALSE(sync.ok());
  EXPECT_THAT(sync.message(), HasSubstr("computation failed when it ran"));
  EXPECT_THAT(sync.message(), HasSubstr("out of range"));
  EXPECT_TRUE(b0->synchronize().ok());
  ASSERT_EQ(sim->errors().size(), 1u);
  EXPECT_THAT(sim->errors()[0], HasSubstr("gpu0"));
  EXPECT_THAT(sim->errors()[0], HasSubstr("rows"));
  // The next compute works again; the other device is unaffected.
  ScaleOn s1(*sim->device(1)->buffer_type(), 34);
  ASSERT_EQ(b1->graph_compute(s1.op.graph), ComputeStatus::kSuccess) << b1->last_error();
  s1.expect_result();
  ScaleOn s0(bt, 35);
  ASSERT_EQ(b0->graph_compute(s0.op.graph), ComputeStatus::kSuccess) << b0->last_error();
  s0.expect_result();
  // Without a synchronize in between, the next compute reports it instead (and the failing one's synchronous
  // graph_compute reports its own failure).
  ASSERT_EQ(b0->graph_compute_async(g), ComputeStatus::kSuccess) << b0->last_error();
  sim->finish();  // runs the queued work without a report
  EXPECT_EQ(b0->graph_compute_async(s0.op.graph), ComputeStatus::kFailed);
  EXPECT_THAT(b0->last_error(), HasSubstr("computation failed when it ran"));
  EXPECT_EQ(b0->graph_compute(g), ComputeStatus::kFailed);
  EXPECT_THAT(b0->last_error(), HasSubstr("out of range"));
  ASSERT_EQ(b0->graph_compute(s0.op.graph), ComputeStatus::kSuccess) << b0->last_error();
  s0.expect_result();
  EXPECT_EQ(sim->errors().size(), 3u);  // each failure is recorded once
}

// =====================================================================================================================
// 7. Metadata-only mode

TEST(SimMetadata, HugeAllocationSucceedsWithoutRealMemoryAndCapacityIsEnforced) {
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  auto sim = make_sim(topology({gpu("gpu0", 80 * GiB)}), o);
  Device& d = *sim->device(0);
  const size_t rss0 = resident_bytes();
  auto big = must_alloc(*d.buffer_type(), 70 * GiB);
  ASSERT_NE(big, nullptr);
  EXPECT_NE(big->base(), nullptr);
  EXPECT_EQ(big->size(), 70 * GiB);
  EXPECT_LT(resident_bytes(), rss0 + 64 * MiB) << "no real memory behind it";
  EXPECT_EQ(free_of(d), 10 * GiB);
  EXPECT_EQ(sim->stats(0).memory_used, 70 * GiB);
  auto over = d.buffer_type()->alloc_buffer(10 * GiB + 1);
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(over.status().message(), HasSubstr("out of memory"));
  // Tensors placed in it: set and get do not crash; reads give zeros.
  Context ctx({.no_alloc = true});
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 64);
  ASSERT_TRUE(tensor_alloc(*big, *t, static_cast<char*>(big->base()) + 60 * GiB).ok());
  set_f32(*t, random_values(64, 8));
  const std::vector<float> got = get_f32(*t);
  EXPECT_EQ(got, std::vector<float>(64, 0.0f));
  big.reset();
  EXPECT_EQ(free_of(d), 80 * GiB);
}

TEST(SimMetadata, ComputeRecordsTimeButNoData) {
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  auto sim = make_sim(topology({cost_device()}), o);
  auto b = sim->device(0)->init_backend({}).value();
  ScaleOn s(*sim->device(0)->buffer_type(), 36);
  ASSERT_EQ(b->graph_compute_async(s.op.graph), ComputeStatus::kSuccess) << b->last_error();
  EXPECT_TRUE(b->synchronize().ok());
  const auto ev = events_of(*sim, TraceKind::kCompute);
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_NEAR(ev[0].end_us - ev[0].start_us, 5.001024, 1e-9);
  EXPECT_GE(sim->now_us(), ev[0].end_us);
  EXPECT_EQ(get_f32(*s.op.out), std::vector<float>(64, 0.0f));
  EXPECT_TRUE(sim->errors().empty());
}

TEST(SimMetadata, HostAddressableBuffersDoNotCrashGenericCopies) {
  SimOptions o;
  o.mode = MemoryMode::kMetadata;
  DeviceConfig igpu = gpu("igpu0");
  igpu.host_visible = true;
  auto sim = make_sim(topology({igpu}), o);
  Vectors src(*sim->device(0)->buffer_type(), {"src"});
  Vectors dst(*cpu::buffer_type(), {"dst"});
  set_f32(*dst[0], std::vector<float>(64, 1.0f));
  const Status s = tensor_copy(*src[0], *dst[0]);  // must not crash
  ASSERT_TRUE(s.ok()) << s.to_string();
  EXPECT_EQ(get_f32(*dst[0]), std::vector<float>(64, 0.0f)) << "metadata-only reads give zeros";
}

// =====================================================================================================================
// 8. Checks a real device would fail on

TEST(SimDevice, SourceInMemoryTheDeviceCannotReadFailsTheCompute) {
  auto sim = make_sim(topology({gpu("gpu0")}));
  auto b = sim->device(0)->init_backend({}).value();
  Vectors host(*cpu::buffer_type(), {"x_host"});
  set_f32(*host[0], random_values(64, 40));
  OneOp op(*sim->device(0)->buffer_type(), [&](Context& c) { return scale(c, host[0], 2.0f); });
  EXPECT_EQ(b->graph_compute_async(op.graph), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr(cpu::buffer_type()->name()));
  EXPECT_THAT(b->last_error(), HasSubstr("x_host"));
  EXPECT_THAT(b->last_error(), HasSubstr("cannot access"));
  EXPECT_TRUE(events_of(*sim, TraceKind::kCompute).empty());
}

TEST(SimDevice, UnsupportedOpFailsTheCompute) {
  auto sim = sim_with_rules({rule(false, {Op::kScale})}, true);
  auto b = sim->device(0)->init_backend({}).value();
  ScaleOn s(*sim->device(0)->buffer_type(), 41);
  EXPECT_EQ(b->graph_compute_async(s.op.graph), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr("does not support"));
  EXPECT_THAT(b->last_error(), HasSubstr("SCALE"));
}

TEST(SimDevice, UnallocatedTensorFailsTheCompute) {
  auto sim = make_sim(topology({gpu("gpu0")}));
  auto b = sim->device(0)->init_backend({}).value();
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 64);
  set_name(*x, "never_placed");
  Graph g;
  ASSERT_TRUE(g.build_forward(scale(ctx, x, 2.0f)).ok());
  EXPECT_EQ(b->graph_compute_async(g), ComputeStatus::kFailed);
  EXPECT_THAT(b->last_error(), HasSubstr("not allocated"));
}

// =====================================================================================================================
// 9. Registry and creation errors

TEST(SimRegistry, ScopedRegistrationExposesTheDevicesForItsLifetime) {
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1")}));
  Registry reg;
  {
    auto h = reg.add_scoped(sim->registration());
    ASSERT_TRUE(h.ok()) << h.status().to_string();
    ScopedRegistration handle = std::move(h).value();
    EXPECT_EQ(reg.reg_by_name("sim"), sim->registration());
    EXPECT_EQ(reg.device_count(), 2u);
    EXPECT_EQ(reg.device_by_name("gpu0"), sim->device(0));
    EXPECT_EQ(reg.device_by_name("GPU1"), sim->device(1));
    EXPECT_EQ(reg.device_by_name("gpu2"), nullptr);
    EXPECT_TRUE(is_simulated(*reg.device_by_name("gpu0")));
    EXPECT_FALSE(is_simulated(*cpu::device()));
    auto be = reg.init_by_name("gpu0");
    ASSERT_TRUE(be.ok()) << be.status().to_string();
    std::unique_ptr<Backend> b = std::move(be).value();
    EXPECT_EQ(b->device(), sim->device(0));
    ScaleOn s(*b->default_buffer_type(), 50);
    ASSERT_EQ(b->graph_compute(s.op.graph), ComputeStatus::kSuccess) << b->last_error();
    s.expect_result();
  }
  EXPECT_EQ(reg.reg_count(), 0u);
  EXPECT_EQ(reg.device_by_name("gpu0"), nullptr);
  EXPECT_FALSE(reg.init_by_name("gpu0").ok());
}

TEST(SimRegistry, CreateRejectsDuplicateNames) {
  auto r = Simulator::create(topology({gpu("gpu0"), gpu("GPU0")}, "dup"));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("two devices named"));
  EXPECT_THAT(r.status().message(), HasSubstr("dup"));
}

TEST(SimRegistry, CreateRejectsAWrapOfAnUnknownDevice) {
  DeviceConfig w = wrapped_cpu();
  w.wraps = "NPU9";
  auto r = Simulator::create(topology({w}), {}, &builtin_registry());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(r.status().message(), HasSubstr("NPU9"));
  EXPECT_THAT(r.status().message(), HasSubstr("cpu"));
}

// The simulator links no backend registry: a wrapped device needs the caller's registry of real devices.
TEST(SimRegistry, CreateRejectsAWrapWithoutARegistryOfRealDevices) {
  auto r = Simulator::create(topology({gpu("gpu0"), wrapped_cpu()}));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("no registry of real devices"));
  EXPECT_TRUE(Simulator::create(topology({gpu("gpu0"), wrapped_cpu()}), {}, &builtin_registry()).ok());
}

TEST(SimRegistry, CreateRejectsABadAlignment) {
  for (size_t align : {size_t{0}, size_t{100}, size_t{384}}) {
    DeviceConfig g = gpu("gpu0");
    g.alignment = align;
    auto r = Simulator::create(topology({g}));
    ASSERT_FALSE(r.ok()) << align;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(r.status().message(), HasSubstr("alignment"));
    EXPECT_THAT(r.status().message(), HasSubstr("gpu0"));
  }
  DeviceConfig ok = gpu("gpu0");
  ok.alignment = 4096;
  EXPECT_TRUE(Simulator::create(topology({ok})).ok());
}

TEST(SimRegistry, CreateRejectsOtherInvalidTopologies) {
  EXPECT_FALSE(Simulator::create(topology({})).ok());
  EXPECT_FALSE(Simulator::create(topology({gpu("")})).ok());
  EXPECT_FALSE(Simulator::create(topology({gpu("host")})).ok());
  EXPECT_FALSE(Simulator::create(topology({gpu("gpu0", 0)})).ok());
  TopologyConfig t = topology({gpu("gpu0")});
  t.links.push_back({"gpu0", "gpu7", 1e9, 1});
  auto r = Simulator::create(t);
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(r.status().message(), HasSubstr("gpu7"));
  t.links = {{"gpu0", "host", 0.0, 1}};
  EXPECT_FALSE(Simulator::create(t).ok());
}

// =====================================================================================================================
// 10. Determinism

// A fixed program over two streams; returns every event's (kind, track, start, end).
std::vector<std::tuple<int, int, double, double>> run_program(uint64_t seed, bool adversarial) {
  SimOptions o;
  o.seed = seed;
  o.adversarial = adversarial;
  o.max_jitter_us = 50.0;
  auto sim = make_sim(topology({gpu("gpu0"), gpu("gpu1")}), o);
  auto b0 = sim->device(0)->init_backend({}).value();
  auto b1 = sim->device(1)->init_backend({}).value();
  BufferType& g0 = *sim->device(0)->buffer_type();
  BufferType& g1 = *sim->device(1)->buffer_type();
  std::vector<float> x = random_values(64, 60);
  {
    Vectors in(g0, {"x"});
    set_f32(*in[0], x);
    OneOp op(g0, [&](Context& c) { return scale(c, in[0], 2.0f); });
    Vectors dst(g1, {"y"});
    OneOp op2(g1, [&](Context& c) { return scale(c, dst[0], 0.5f); });
    auto ev = sim->device(0)->event_new();
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(b0->graph_compute_async(op.graph), ComputeStatus::kSuccess);
      ev->record(*b0);
      ev->wait(*b1);
      EXPECT_TRUE(b1->cpy_tensor_async(b0.get(), *op.out, *dst[0]));
      EXPECT_EQ(b1->graph_compute_async(op2.graph), ComputeStatus::kSuccess);
    }
    sim->finish();
    const std::vector<float> got = get_f32(*op2.out);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_FLOAT_EQ(got[i], x[i]) << i;
    EXPECT_TRUE(sim->races().empty()) << sim->races_report();
  }
  std::vector<std::tuple<int, int, double, double>> out;
  for (const TraceEvent& e : sim->trace().events) out.emplace_back(int(e.kind), e.track, e.start_us, e.end_us);
  return out;
}

TEST(SimDevice, SameSeedGivesTheSameTimelineAndAnotherSeedChangesIt) {
  const auto a = run_program(7, true);
  const auto b = run_program(7, true);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);  // bit for bit
  const auto c = run_program(8, true);
  EXPECT_NE(a, c);
  // The same commands (waits are recorded only when something actually waited, which depends on the delays).
  auto commands = [](const std::vector<std::tuple<int, int, double, double>>& ev) {
    std::vector<std::pair<int, int>> out;
    for (const auto& e : ev) {
      if (std::get<0>(e) != int(TraceKind::kWait)) out.emplace_back(std::get<0>(e), std::get<1>(e));
    }
    return out;
  };
  EXPECT_EQ(commands(a), commands(c));
  EXPECT_EQ(commands(a).size(), 1u + 3u * 3u + 1u) << "a set, per round a compute, a copy and a compute, a get";
  // Without adversarial mode the seed does not matter.
  EXPECT_EQ(run_program(7, false), run_program(8, false));
}

}  // namespace
