// CUDA backend tests beyond the conformance suite. The first group needs no GPU (registration with zero devices,
// supports_op over the op catalogue, the offload threshold, cuBLAS loaded at the first call); the rest skips with a
// reason when no GPU is visible: memory accounting and the maximum allocation size, pinned host memory, stream ordering
// of cpy_tensor_async between two streams and between two GPUs, index errors as statuses, and op x type at larger
// shapes (every matmul path, flash attention over several key tiles, long softmax and sort rows) against the CPU
// reference.
#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <random>

#include "conformance/backend_conformance.h"
#include "cublas_loader.h"
#include "cuda_test_util.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/builtin.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"

using namespace tessera;
using namespace tessera::conformance;

namespace {

ContextParams no_alloc() {
  ContextParams p;
  p.no_alloc = true;
  return p;
}

// ---------------------------------------------------------------------------------------------------------------
// Without a GPU.

TEST(CudaRegistration, ExistsWithOneDevicePerGpuOrNone) {
  BackendReg* reg = cuda::registration();
  ASSERT_NE(reg, nullptr);
  EXPECT_STREQ(reg->name(), "CUDA");
  EXPECT_EQ(static_cast<int>(reg->device_count()), cuda::device_count());
  if (cuda::device_count() == 0) {
    EXPECT_FALSE(cuda::unavailable_reason().empty()) << "zero devices must say why";
    EXPECT_EQ(reg->device(0), nullptr);
    EXPECT_EQ(cuda::buffer_type(0), nullptr);
    EXPECT_EQ(cuda::allocated_bytes(0), 0u);
  } else {
    EXPECT_TRUE(cuda::unavailable_reason().empty());
  }
  for (size_t i = 0; i < reg->device_count(); ++i) {
    Device* d = reg->device(i);
    ASSERT_NE(d, nullptr);
    EXPECT_EQ(std::string(d->name()), "CUDA" + std::to_string(i));
    EXPECT_EQ(d->type(), DeviceType::kGpu);
    EXPECT_EQ(d->reg(), reg);
    EXPECT_TRUE(d->caps().events);
    EXPECT_TRUE(d->caps().host_buffer);
  }
}

TEST(CudaRegistration, BuiltinRegistryListsItAndStillInitialisesTheCpu) {
  auto r = make_builtin_registry();
  EXPECT_NE(r->reg_by_name("CUDA"), nullptr);
  EXPECT_NE(r->reg_by_name("CPU"), nullptr);
  auto best = r->init_best();
  ASSERT_TRUE(best.ok()) << best.status().to_string();
  if (cuda::device_count() == 0) {
    EXPECT_EQ(best.value()->device()->type(), DeviceType::kCpu);
  } else {
    EXPECT_EQ(best.value()->device()->type(), DeviceType::kGpu);
  }
}

TEST(CudaRegistration, MakeBackendWithoutSuchDeviceIsAnErrorNotACrash) {
  cuda::CudaBackendParams p;
  p.device = cuda::device_count();  // one past the last
  auto b = cuda::make_backend(p);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kNotFound);
  EXPECT_NE(b.status().message().find("no device"), std::string::npos) << b.status().message();
}

// supports_node claims every op x type of the conformance catalogue (the conformance instantiation sets
// expect_full_op_support on that basis) but CLAMP's (no CUDA kernel yet: cuda_conformance.cpp's ops_without_kernels),
// and no leaf-only or unknown op.
TEST(CudaSupports, SupportsEveryCatalogueCase) {
  size_t clamps = 0;
  for (const OpCase& c : op_catalogue()) {
    SCOPED_TRACE("case " + c.name);
    auto inst = instantiate_case(c.build, *cpu::buffer_type());
    ASSERT_TRUE(inst.ok()) << inst.status().to_string();
    for (Tensor* n : inst->graph->nodes()) {
      if (n->op == Op::kClamp) {
        ++clamps;
        EXPECT_FALSE(cuda::supports_node(*n)) << "a CUDA CLAMP kernel: remove it from ops_without_kernels";
        continue;
      }
      EXPECT_TRUE(cuda::supports_node(*n)) << op_name(n->op) << " " << describe(*n);
    }
  }
  EXPECT_GT(clamps, 0u);
}

TEST(CudaSupports, RejectsWhatItCannotRun) {
  Context ctx(no_alloc());
  Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 4);
  Tensor* y = mul_mat(ctx, w, x);
  Tensor* q = ctx.new_tensor_3d(Type::kF32, 1024, 4, 2);
  Tensor* k = ctx.new_tensor_3d(Type::kF16, 1024, 16, 2);
  Tensor* v = ctx.new_tensor_3d(Type::kF16, 1024, 16, 2);  // Dv 1024 > 512: beyond the flash-attention kernel
  Tensor* fa = flash_attn_ext(ctx, q, k, v, nullptr, 0.1f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  EXPECT_TRUE(cuda::supports_node(*y));
  EXPECT_FALSE(cuda::supports_node(*fa)) << "Dv above 512 has no kernel";
  Tensor bad = *y;
  bad.op = static_cast<Op>(1000);
  EXPECT_FALSE(cuda::supports_node(bad));
  bad = *y;
  bad.src[1] = nullptr;
  EXPECT_FALSE(cuda::supports_node(bad));
}

TEST(CudaSupports, OffloadBatchSize) {
  Context ctx(no_alloc());
  Tensor* w = ctx.new_tensor_2d(Type::kQ8_0, 64, 16);
  Tensor* x31 = ctx.new_tensor_2d(Type::kF32, 64, 31);
  Tensor* x32 = ctx.new_tensor_2d(Type::kF32, 64, 32);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 40);
  Tensor* y31 = mul_mat(ctx, w, x31);
  Tensor* y32 = mul_mat(ctx, w, x32);
  Tensor* rows = get_rows(ctx, w, ids);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  EXPECT_EQ(cuda::offload_batch_size(*y31), 31);
  EXPECT_EQ(cuda::offload_batch_size(*y32), 32);
  EXPECT_EQ(cuda::offload_batch_size(*rows), 0) << "GET_ROWS is never worth offloading";
  EXPECT_EQ(cuda::kDefaultOffloadMinBatch, 32);
}

// cuBLAS is not linked but opened at the first cuBLAS call (backends/cuda/cublas_loader.h). The toolkit is installed
// wherever these tests are built, so the library is found, GPU or not.
TEST(CudaCublasLoader, FindsTheLibrary) {
  EXPECT_EQ(std::string(cuda::cublas_file_name()), "libcublas.so." + std::to_string(CUBLAS_VER_MAJOR));
  EXPECT_TRUE(cuda::cublas_load()) << cuda::cublas_load_error();
  EXPECT_EQ(cuda::cublas_load_error(), "");
}

// The forwarded cublasCreate reaches the library: without a GPU it fails with a status, not a crash; with one it
// creates a handle.
TEST(CudaCublasLoader, CreateIsForwarded) {
  cublasHandle_t handle = nullptr;
  const cublasStatus_t s = cublasCreate(&handle);
  if (cuda::device_count() == 0) {
    EXPECT_NE(s, CUBLAS_STATUS_SUCCESS);
  } else {
    ASSERT_EQ(s, CUBLAS_STATUS_SUCCESS);
    EXPECT_NE(handle, nullptr);
    EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  }
}

TEST(CudaCublasLoader, AMissingFileIsAnErrorNamingIt) {
  const std::string file = "libtessera-no-such-cublas.so." + std::to_string(CUBLAS_VER_MAJOR);
  const std::string error = cuda::cublas_try_load(file);
  EXPECT_NE(error.find(file), std::string::npos) << error;
  const std::string path = "/no/such/dir/" + file;
  EXPECT_NE(cuda::cublas_try_load(path).find(path), std::string::npos);
}

// A library without cuBLAS's functions (the CUDA runtime's): the error names the first one missing.
TEST(CudaCublasLoader, ALibraryWithoutTheFunctionsIsAnErrorNamingOne) {
  const std::string cudart = "libcudart.so." + std::to_string(CUDART_VERSION / 1000);
  const std::string error = cuda::cublas_try_load(cudart);
  EXPECT_NE(error.find("cublasCreate_v2"), std::string::npos) << error;
}

// The second place tried is the directory of the loaded libcudart; the toolkit keeps libcublas there too. (The
// process's cuBLAS is loaded first, so that closing the handle of the second open does not unload the library.)
TEST(CudaCublasLoader, SecondPlaceIsBesideTheCudaRuntime) {
  ASSERT_TRUE(cuda::cublas_load()) << cuda::cublas_load_error();
  const std::string path = cuda::cublas_beside_cudart();
  ASSERT_FALSE(path.empty());
  EXPECT_EQ(path.front(), '/') << path;
  const std::filesystem::path p(path);
  EXPECT_EQ(p.filename().string(), cuda::cublas_file_name());
  EXPECT_TRUE(std::filesystem::exists(p.parent_path() / ("libcudart.so." + std::to_string(CUDART_VERSION / 1000))))
      << path;
  if (std::filesystem::exists(p)) {
    EXPECT_EQ(cuda::cublas_try_load(path), "");
  }
}

// ---------------------------------------------------------------------------------------------------------------
// With a GPU.

class CudaBackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason;
    backend_ = cuda::testing::backend_or_reason(&reason);
    if (!backend_) GTEST_SKIP() << reason;
    cpu_ = cpu::make_backend();
    rng_.seed(1234);
  }
  BufferType& vram() { return *backend_->default_buffer_type(); }

  // Builds the case on the GPU and on the CPU, fills both identically, computes both, compares.
  void expect_matches_cpu(const CaseBuildFn& build, double tol) {
    auto be = instantiate_case(build, vram());
    ASSERT_TRUE(be.ok()) << be.status().to_string();
    for (Tensor* n : be->graph->nodes()) ASSERT_TRUE(backend_->supports_op(*n)) << describe(*n);
    auto ref = instantiate_case(build, *cpu::buffer_type());
    ASSERT_TRUE(ref.ok()) << ref.status().to_string();
    ASSERT_TRUE(fill_leafs_identically(*ref, *be, rng_).ok());
    ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
    ASSERT_EQ(backend_->graph_compute(*be->graph), ComputeStatus::kSuccess) << backend_->last_error();
    EXPECT_TRUE(outputs_match(*ref->out, *be->out, tol));
  }

  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> cpu_;
  std::mt19937 rng_;
};

TEST_F(CudaBackendTest, MemoryAccountingAndMaxAllocation) {
  const size_t before = cuda::allocated_bytes(0);
  {
    auto b = vram().alloc_buffer(3 << 20);
    ASSERT_TRUE(b.ok()) << b.status().to_string();
    EXPECT_EQ(cuda::allocated_bytes(0), before + (3 << 20));
  }
  EXPECT_EQ(cuda::allocated_bytes(0), before);
  size_t free = 0, total = 0;
  backend_->device()->memory(&free, &total);
  EXPECT_GT(total, 0u);
  EXPECT_EQ(vram().max_size(), total) << "default maximum: the device's memory";
  cuda::set_max_buffer_size(0, 1 << 20);
  auto too_big = vram().alloc_buffer(2 << 20);
  cuda::set_max_buffer_size(0, 0);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), StatusCode::kAllocFailed);
  auto oom = vram().alloc_buffer(total);  // all of it can never be had
  EXPECT_FALSE(oom.ok());
  EXPECT_EQ(cuda::allocated_bytes(0), before);
}

TEST_F(CudaBackendTest, PinnedHostBufferFeedsAsyncCopies) {
  BufferType* host = backend_->device()->host_buffer_type();
  ASSERT_NE(host, nullptr);
  EXPECT_TRUE(host->is_host());
  Context ctx(no_alloc());
  Tensor* h = ctx.new_tensor_1d(Type::kF32, 1 << 16);
  auto hb = alloc_ctx_tensors(ctx, *host);
  ASSERT_TRUE(hb.ok()) << hb.status().to_string();
  Context dctx(no_alloc());
  Tensor* d = dctx.new_tensor_1d(Type::kF32, 1 << 16);
  auto db = alloc_ctx_tensors(dctx, vram());
  ASSERT_TRUE(db.ok());
  float* p = static_cast<float*>(h->data);
  for (int i = 0; i < (1 << 16); ++i) p[i] = static_cast<float>(i);
  ASSERT_TRUE(tensor_set_async(*backend_, *d, p, 0, nbytes(*d)).ok());
  std::vector<float> back(1 << 16);
  ASSERT_TRUE(tensor_get_async(*backend_, *d, back.data(), 0, nbytes(*d)).ok());
  ASSERT_TRUE(backend_->synchronize().ok());
  for (int i = 0; i < (1 << 16); ++i) ASSERT_EQ(back[static_cast<size_t>(i)], static_cast<float>(i)) << i;
}

// b1 computes y = 3x, b2 copies y into z with cpy_tensor_async and computes w = z * 2 -- no host synchronization in
// between: the copy's ordering contract (backend.h) alone must make w = 6x.
void check_stream_ordering(Backend& b1, Backend& b2) {
  constexpr int64_t n = 1 << 20;
  Context c1(no_alloc()), c2(no_alloc());
  Tensor* x = c1.new_tensor_1d(Type::kF32, n);
  Tensor* y = scale(c1, x, 3.0f);
  Tensor* z = c2.new_tensor_1d(Type::kF32, n);
  Tensor* w = scale(c2, z, 2.0f);
  ASSERT_TRUE(c1.ok() && c2.ok());
  auto buf1 = alloc_ctx_tensors(c1, *b1.default_buffer_type());
  auto buf2 = alloc_ctx_tensors(c2, *b2.default_buffer_type());
  ASSERT_TRUE(buf1.ok() && buf2.ok());
  std::vector<float> xs(n);
  for (int64_t i = 0; i < n; ++i) xs[static_cast<size_t>(i)] = static_cast<float>(i % 1000) - 500.0f;
  ASSERT_TRUE(tensor_set(*x, xs.data(), 0, nbytes(*x)).ok());
  Graph g1, g2;
  ASSERT_TRUE(g1.build_forward(y).ok());
  ASSERT_TRUE(g2.build_forward(w).ok());
  for (int round = 0; round < 3; ++round) {
    ASSERT_EQ(b1.graph_compute_async(g1), ComputeStatus::kSuccess) << b1.last_error();
    ASSERT_TRUE(tensor_copy_async(b1, b2, *y, *z).ok());
    ASSERT_EQ(b2.graph_compute_async(g2), ComputeStatus::kSuccess) << b2.last_error();
    ASSERT_TRUE(b2.synchronize().ok());
    ASSERT_TRUE(b1.synchronize().ok());
    std::vector<float> ws(n);
    ASSERT_TRUE(tensor_get(*w, ws.data(), 0, nbytes(*w)).ok());
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(ws[static_cast<size_t>(i)], xs[static_cast<size_t>(i)] * 6.0f) << i;
  }
}

TEST_F(CudaBackendTest, CopyBetweenTwoStreamsFollowsTheOrderingContract) {
  auto b2 = cuda::make_backend();
  ASSERT_TRUE(b2.ok()) << b2.status().to_string();
  check_stream_ordering(*backend_, *b2.value());
}

TEST_F(CudaBackendTest, PeerCopyBetweenTwoGpus) {
  TESSERA_REQUIRE_GPU(2);
  cuda::CudaBackendParams p;
  p.device = 1;
  auto b2 = cuda::make_backend(p);
  ASSERT_TRUE(b2.ok()) << b2.status().to_string();
  check_stream_ordering(*backend_, *b2.value());
}

TEST_F(CudaBackendTest, EventsOrderTwoStreams) {
  auto b2r = cuda::make_backend();
  ASSERT_TRUE(b2r.ok());
  Backend& b2 = *b2r.value();
  auto ev = backend_->device()->event_new();
  ASSERT_NE(ev, nullptr);
  constexpr int64_t n = 1 << 20;
  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_1d(Type::kF32, n);
  Tensor* y = scale(ctx, x, 2.0f, 1.0f);  // on stream 1
  Tensor* z = scale(ctx, y, 0.5f);        // on stream 2, after the event
  ASSERT_TRUE(ctx.ok());
  auto buf = alloc_ctx_tensors(ctx, vram());
  ASSERT_TRUE(buf.ok());
  std::vector<float> xs(n, 4.0f);
  ASSERT_TRUE(tensor_set(*x, xs.data(), 0, nbytes(*x)).ok());
  Graph g1, g2;
  ASSERT_TRUE(g1.build_forward(y).ok());
  ASSERT_TRUE(g2.add_node(z).ok());
  ASSERT_EQ(backend_->graph_compute_async(g1), ComputeStatus::kSuccess);
  backend_->event_record(*ev);
  b2.event_wait(*ev);
  ASSERT_EQ(b2.graph_compute_async(g2), ComputeStatus::kSuccess);
  ev->synchronize();
  ASSERT_TRUE(b2.synchronize().ok());
  std::vector<float> zs(n);
  ASSERT_TRUE(tensor_get(*z, zs.data(), 0, nbytes(*z)).ok());
  for (float v : zs) ASSERT_EQ(v, 4.5f);
}

TEST_F(CudaBackendTest, IndexOutOfRangeIsAFailedStatusNamingTheNode) {
  Context ctx(no_alloc());
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 32, 10);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 3);
  Tensor* r = get_rows(ctx, a, ids);
  set_name(*r, "bad_rows");
  ASSERT_TRUE(ctx.ok());
  auto buf = alloc_ctx_tensors(ctx, vram());
  ASSERT_TRUE(buf.ok());
  const int32_t idv[3] = {1, 100, 2};
  ASSERT_TRUE(tensor_set(*ids, idv, 0, sizeof idv).ok());
  Graph g;
  ASSERT_TRUE(g.build_forward(r).ok());
  EXPECT_EQ(backend_->graph_compute(g), ComputeStatus::kFailed);
  EXPECT_NE(backend_->last_error().find("out of range"), std::string::npos) << backend_->last_error();
  EXPECT_NE(backend_->last_error().find("bad_rows"), std::string::npos) << backend_->last_error();
  // The backend stays usable.
  const int32_t good[3] = {1, 9, 2};
  ASSERT_TRUE(tensor_set(*ids, good, 0, sizeof good).ok());
  EXPECT_EQ(backend_->graph_compute(g), ComputeStatus::kSuccess) << backend_->last_error();
}

TEST_F(CudaBackendTest, OffloadOpUsesTheBatchThreshold) {
  Context ctx(no_alloc());
  Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  Tensor* y31 = mul_mat(ctx, w, ctx.new_tensor_2d(Type::kF32, 64, 31));
  Tensor* y32 = mul_mat(ctx, w, ctx.new_tensor_2d(Type::kF32, 64, 32));
  ASSERT_TRUE(ctx.ok());
  EXPECT_FALSE(backend_->offload_op(*y31));
  EXPECT_TRUE(backend_->offload_op(*y32));
  auto b8 = backend_->device()->init_backend("offload_min_batch=8");
  ASSERT_TRUE(b8.ok()) << b8.status().to_string();
  EXPECT_TRUE(b8.value()->offload_op(*y31));
  EXPECT_FALSE(backend_->device()->init_backend("offload_min_batch=x").ok());
}

// Every MUL_MAT path (matvec for N <= 8, cuBLAS f32 / f16 / dequantize + SGEMM above) for every weight type, with
// batch broadcast.
TEST_F(CudaBackendTest, MulMatEveryPathAndType) {
  for (Type t : {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0}) {
    for (int64_t n : {1, 7, 9, 64}) {
      SCOPED_TRACE(::testing::Message() << type_name(t) << " N " << n);
      expect_matches_cpu(
          [t, n](CaseBuilder& b) { return mul_mat(b.ctx(), b.input(t, 256, 96, 2), b.input(Type::kF32, 256, n, 4)); },
          t == Type::kF16 ? 1e-5 : 1e-6);
    }
  }
  // A non-contiguous src1 (permuted) goes through the f32 conversion.
  expect_matches_cpu(
      [](CaseBuilder& b) {
        Tensor* x = b.input(Type::kF32, 64, 3, 40);
        return mul_mat(b.ctx(), b.input(Type::kF32, 64, 32, 1), permute(b.ctx(), x, 0, 2, 1, 3));
      },
      1e-6);
}

TEST_F(CudaBackendTest, MulMatIdAtLargerShapes) {
  for (Type t : {Type::kF16, Type::kQ4_0}) {
    SCOPED_TRACE(type_name(t));
    expect_matches_cpu(
        [t](CaseBuilder& b) {
          Tensor* as = b.input(t, 128, 64, 8);
          Tensor* x = b.input(Type::kF32, 128, 1, 40);
          Tensor* ids = b.indices(8, 2, 40);
          return mul_mat_id(b.ctx(), as, x, ids);
        },
        1e-6);
  }
}

// Several key tiles (n_kv > 128), grouped-query heads, a mask with fully masked rows, sinks, f16 and q8_0 caches.
TEST_F(CudaBackendTest, FlashAttentionOverSeveralKeyTiles) {
  for (Type kv : {Type::kF16, Type::kQ8_0}) {
    for (bool sinks : {false, true}) {
      SCOPED_TRACE(::testing::Message() << type_name(kv) << (sinks ? " sinks" : ""));
      expect_matches_cpu(
          [kv, sinks](CaseBuilder& b) {
            Tensor* q = b.input(Type::kF32, 64, 5, 8, 1);
            Tensor* k = b.input(kv, 64, 300, 2, 1);
            Tensor* v = b.input(kv, 64, 300, 2, 1);
            Tensor* mask = b.custom(Type::kF16, {300, 5}, causal_mask(290, 3));
            Tensor* s = sinks ? b.input(Type::kF32, 8) : nullptr;
            return flash_attn_ext(b.ctx(), q, k, v, mask, 0.125f, s);
          },
          1e-6);
    }
  }
}

// The fast paths (kernels_fast.cu) at a decoder's shapes: matvec with all N columns per warp (N 1 and 8, K 4096, a
// broadcast batch), flash attention split over the keys (few rows, thousands of keys; splits whose keys are all
// masked; a fully masked row; f32 and f16 K/V; sinks) and float4 element-wise ops (same shape and a broadcast row).
TEST_F(CudaBackendTest, FastPathsAtDecoderShapes) {
  for (Type t : {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0}) {
    for (int64_t n : {1, 8}) {
      SCOPED_TRACE(::testing::Message() << type_name(t) << " N " << n);
      expect_matches_cpu(
          [t, n](CaseBuilder& b) { return mul_mat(b.ctx(), b.input(t, 4096, 40, 1), b.input(Type::kF32, 4096, n, 2)); },
          t == Type::kF16 ? 1e-5 : 1e-6);
    }
  }
  for (Type kv : {Type::kF16, Type::kF32}) {
    for (int64_t d : {64, 128, 256}) {
      SCOPED_TRACE(::testing::Message() << type_name(kv) << " D " << d);
      expect_matches_cpu(
          [kv, d](CaseBuilder& b) {
            Tensor* q = b.input(Type::kF32, d, 2, 4, 1);
            Tensor* k = b.input(kv, d, 3000, 2, 1);
            Tensor* v = b.input(kv, d, 3000, 2, 1);
            Tensor* mask = b.custom(Type::kF16, {3000, 2}, causal_mask(700, 1));  // row 1 fully masked
            return flash_attn_ext(b.ctx(), q, k, v, mask, 0.09f, d == 128 ? b.input(Type::kF32, 4) : nullptr);
          },
          1e-6);
    }
  }
  expect_matches_cpu(
      [](CaseBuilder& b) { return add(b.ctx(), b.input(Type::kF32, 4096, 33), b.input(Type::kF32, 4096, 33)); }, 0);
  expect_matches_cpu(
      [](CaseBuilder& b) { return mul(b.ctx(), b.input(Type::kF32, 4096, 33), b.input(Type::kF32, 4096)); }, 0);
  expect_matches_cpu(
      [](CaseBuilder& b) { return div(b.ctx(), b.input(Type::kF32, 512, 3, 5), b.input(Type::kF32, 512)); }, 1e-7);
}

TEST_F(CudaBackendTest, LongRowsSoftmaxNormsSort) {
  expect_matches_cpu([](CaseBuilder& b) { return soft_max(b.ctx(), b.input(Type::kF32, 5000, 3), nullptr, 0.7f); },
                     1e-6);
  expect_matches_cpu([](CaseBuilder& b) { return rms_norm(b.ctx(), b.input(Type::kF32, 4096, 6), 1e-5f); }, 1e-6);
  expect_matches_cpu([](CaseBuilder& b) { return norm(b.ctx(), b.input(Type::kBF16, 3000, 2), 1e-5f); }, 1e-4);
  expect_matches_cpu([](CaseBuilder& b) { return top_k(b.ctx(), b.input(Type::kF32, 1000, 4), 40); }, 0);
  expect_matches_cpu([](CaseBuilder& b) { return argsort(b.ctx(), b.input(Type::kF16, 777, 2), SortOrder::kAsc); }, 0);
  expect_matches_cpu(
      [](CaseBuilder& b) {
        return rope(b.ctx(), b.input(Type::kF32, 128, 8, 64), b.custom(Type::kI32, {64}, int_values(0, 30000)), 128,
                    RopeMode::kNeox, 500000.0f);
      },
      1e-6);
}

}  // namespace
