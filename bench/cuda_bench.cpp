// CUDA backend benchmarks, built only with the CUDA backend; each skips (SkipWithError) without a GPU.
//   BM_CudaMulMat/<type>/<N>     MUL_MAT of a 4096 x 4096 weight by N columns; counters: FLOP/s
//   BM_CublasSgemm/<N>           raw cublasSgemm of the same shape (the ceiling for the f32 path)
//   BM_CudaAdd/<n>               ADD of two f32 vectors; counter: bytes/s (read 2 + write 1) vs the device's bandwidth
//   BM_CudaFlashAttnDecode/<n_kv> FLASH_ATTN_EXT for one query over n_kv f16 keys, 32 heads of 128; counter: K+V
//   bytes/s BM_CudaLlamaLayer/<tokens>   one 7B-shaped decoder layer (q4_0 weights, f16 cache, flash attention) at 1
//   and 512
//                                tokens, everything on the GPU
//   BM_CpuLlamaLayer/<tokens>    the same layer on the CPU backend, all hardware threads, optimised kernels
// Timings are GPU-synchronous (each iteration ends with synchronize()), after one untimed warm-up run.
#include <benchmark/benchmark.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include <memory>
#include <random>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/cuda.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"

using namespace tessera;

namespace {

std::unique_ptr<Backend> gpu_or_skip(benchmark::State& state) {
  auto b = cuda::make_backend();
  if (!b.ok()) {
    state.SkipWithError(("no CUDA backend: " + b.status().message()).c_str());
    return nullptr;
  }
  return std::move(b).value();
}

ContextParams no_alloc() {
  ContextParams p;
  p.no_alloc = true;
  return p;
}

void fill(Tensor& t, std::mt19937& rng) {
  std::vector<float> v(static_cast<size_t>(nelements(t)));
  std::normal_distribution<float> d(0.0f, 1.0f);
  for (float& x : v) x = d(rng);
  (void)tensor_from_f32(t, v);
}

// Times graph_compute(g) on `backend`, after one untimed run: the first launch of each kernel loads its module (lazy
// loading) and cuBLAS picks and loads its kernels, costing up to ~100 ms once, which a single timed iteration would
// report as the kernel's time. False (the benchmark marked skipped with the backend's error) when a compute fails.
bool time_graph(benchmark::State& state, Backend& backend, Graph& g) {
  if (backend.graph_compute(g) != ComputeStatus::kSuccess) {
    state.SkipWithError(backend.last_error().c_str());
    return false;
  }
  for (auto _ : state) {
    if (backend.graph_compute(g) != ComputeStatus::kSuccess) {
      state.SkipWithError(backend.last_error().c_str());
      return false;
    }
  }
  return true;
}

void BM_CudaMulMat(benchmark::State& state) {
  auto gpu = gpu_or_skip(state);
  if (!gpu) return;
  const auto type = static_cast<Type>(state.range(0));
  const int64_t n = state.range(1), k = 4096, m = 4096;
  Context ctx(no_alloc());
  Tensor* w = ctx.new_tensor_2d(type, k, m);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, k, n);
  Tensor* y = mul_mat(ctx, w, x);
  auto buf = alloc_ctx_tensors(ctx, *gpu->default_buffer_type());
  if (!buf.ok()) return state.SkipWithError(buf.status().message().c_str());
  std::mt19937 rng(1);
  fill(*w, rng);
  fill(*x, rng);
  Graph g;
  (void)g.build_forward(y);
  if (!time_graph(state, *gpu, g)) return;
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * static_cast<double>(m * n * k), benchmark::Counter::kIsIterationInvariantRate);
  state.SetLabel(type_name(type));
}

void BM_CublasSgemm(benchmark::State& state) {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) return state.SkipWithError("no CUDA device visible");
  const int n = static_cast<int>(state.range(0)), k = 4096, m = 4096;
  float *a = nullptr, *b = nullptr, *c = nullptr;
  cudaMalloc(&a, sizeof(float) * k * m);
  cudaMalloc(&b, sizeof(float) * k * n);
  cudaMalloc(&c, sizeof(float) * m * n);
  cudaMemset(a, 0, sizeof(float) * k * m);
  cudaMemset(b, 0, sizeof(float) * k * n);
  cublasHandle_t h;
  cublasCreate(&h);
  const float one = 1.0f, zero = 0.0f;
  cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, k, b, k, &zero, c, m);  // untimed, as above
  cudaDeviceSynchronize();
  for (auto _ : state) {
    cublasSgemm(h, CUBLAS_OP_T, CUBLAS_OP_N, m, n, k, &one, a, k, b, k, &zero, c, m);
    cudaDeviceSynchronize();
  }
  cublasDestroy(h);
  cudaFree(a);
  cudaFree(b);
  cudaFree(c);
  state.counters["FLOP/s"] =
      benchmark::Counter(2.0 * m * n * static_cast<double>(k), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CudaAdd(benchmark::State& state) {
  auto gpu = gpu_or_skip(state);
  if (!gpu) return;
  const int64_t n = state.range(0);
  Context ctx(no_alloc());
  Tensor* a = ctx.new_tensor_1d(Type::kF32, n);
  Tensor* b = ctx.new_tensor_1d(Type::kF32, n);
  Tensor* y = add(ctx, a, b);
  auto buf = alloc_ctx_tensors(ctx, *gpu->default_buffer_type());
  if (!buf.ok()) return state.SkipWithError(buf.status().message().c_str());
  Graph g;
  (void)g.build_forward(y);
  if (!time_graph(state, *gpu, g)) return;
  state.counters["bytes/s"] =
      benchmark::Counter(12.0 * static_cast<double>(n), benchmark::Counter::kIsIterationInvariantRate);
}

// FLASH_ATTN_EXT at decode: 1 query, 32 heads of 128 dims, f16 K and V of n_kv positions (no mask); counter: K and V
// bytes read per second.
void BM_CudaFlashAttnDecode(benchmark::State& state) {
  auto gpu = gpu_or_skip(state);
  if (!gpu) return;
  const int64_t n_kv = state.range(0), d = 128, heads = 32;
  Context ctx(no_alloc());
  Tensor* q = ctx.new_tensor_3d(Type::kF32, d, 1, heads);
  Tensor* k = ctx.new_tensor_3d(Type::kF16, d, n_kv, heads);
  Tensor* v = ctx.new_tensor_3d(Type::kF16, d, n_kv, heads);
  Tensor* y = flash_attn_ext(ctx, q, k, v, nullptr, 0.088f);
  auto buf = alloc_ctx_tensors(ctx, *gpu->default_buffer_type());
  if (!buf.ok()) return state.SkipWithError(buf.status().message().c_str());
  std::mt19937 rng(1);
  fill(*q, rng);
  fill(*k, rng);
  fill(*v, rng);
  Graph g;
  (void)g.build_forward(y);
  if (!time_graph(state, *gpu, g)) return;
  state.counters["bytes/s"] =
      benchmark::Counter(static_cast<double>(nbytes(*k) + nbytes(*v)), benchmark::Counter::kIsIterationInvariantRate);
}

// One 7B-shaped decoder layer (q4_0 weights, f16 cache of 4096 positions, flash attention) on `backend`.
void llama_layer(benchmark::State& state, Backend& backend) {
  models::LlamaConfig c = models::preset("7b").value();
  c.n_layer = 1;
  c.n_ctx = 4096;
  c.n_kv = 4096;
  c.n_tokens = state.range(0);
  c.n_vocab = 256;  // the layer, not the output head
  auto built = models::build_llama(c);
  if (!built.ok()) return state.SkipWithError(built.status().message().c_str());
  models::LlamaGraph& m = built.value();
  BufferType* buft = backend.default_buffer_type();
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *buft);
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *buft);
  if (!wb.ok() || !cb.ok()) return state.SkipWithError("weights or cache do not fit");
  (void)models::fill_random(m, 1);
  GraphPlanner planner(buft);
  if (!planner.alloc_graph(*m.graph).ok()) return state.SkipWithError("compute memory does not fit");
  (void)models::set_inputs(m, models::default_inputs(c, 1));
  if (!time_graph(state, backend, *m.graph)) return;
  state.counters["tokens/s"] =
      benchmark::Counter(static_cast<double>(c.n_tokens), benchmark::Counter::kIsIterationInvariantRate);
}

void BM_CudaLlamaLayer(benchmark::State& state) {
  auto gpu = gpu_or_skip(state);
  if (gpu) llama_layer(state, *gpu);
}

// The same layer on the CPU backend (all hardware threads, the best optimised kernels this CPU has; the backend's
// default is the reference kernels): issue 9's "vs the CPU backend", in the same run.
void BM_CpuLlamaLayer(benchmark::State& state) {
  cpu::CpuBackendParams params;
  params.kernels = cpu::best_kernels();
  auto cpu = cpu::make_backend(params);
  state.SetLabel(std::string(cpu::kernels_name(cpu::kernels(*cpu))) + ", threads " +
                 std::to_string(cpu::n_threads(*cpu)));
  llama_layer(state, *cpu);
}

}  // namespace

BENCHMARK(BM_CudaMulMat)
    ->ArgsProduct({{static_cast<int64_t>(Type::kF32), static_cast<int64_t>(Type::kF16),
                    static_cast<int64_t>(Type::kBF16), static_cast<int64_t>(Type::kQ8_0),
                    static_cast<int64_t>(Type::kQ4_0)},
                   {1, 8, 512}})
    ->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CublasSgemm)->Arg(1)->Arg(8)->Arg(512)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaAdd)->Arg(1 << 20)->Arg(1 << 26)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaFlashAttnDecode)->Arg(4096)->Arg(32768)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_CudaLlamaLayer)->Arg(1)->Arg(512)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_CpuLlamaLayer)->Arg(1)->Arg(512)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
