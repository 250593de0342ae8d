// The optimised CPU kernels against this machine's limits, in one run:
//   ceilings: FMA peak (a register-only AVX-512/AVX2 kernel) and memory bandwidth (STREAM-like copy; also a read-only
//   sum, the ceiling of a matrix x vector that only streams weights);
//   f32 GEMM (1024^3 and 3072^3) as a fraction of FMA peak and against OpenBLAS sgemm (when built with it);
//   q4_0 / q8_0 matrix x vector at 7B shapes (K 4096, M 11008) as a fraction of bandwidth, and their block dots alone
//   in cache (AVX2 vs AVX-512 VNNI table);
//   element-wise ops as a fraction of bandwidth; one llama-style layer at 1 and 512 tokens, optimised vs reference.
// Counters: GFLOPS, GBps (bytes the op must move / time), and frac (of the ceiling measured in the same run).
// The *Paired benchmarks (GEMM, matrix x vector from DRAM, element-wise) time a ceiling pass (the FMA-peak kernel, or
// a read or copy pass that moves as many bytes) right before every compute of the graph, and report the median of
// the per-pair ratios: on a shared machine the cores and the bandwidth left to a process change within seconds, and
// these are the ratios to hold against the targets (bench/RESULTS.md, "CPU kernels against the machine's limits").
// Their ceiling passes share the work among the threads in chunks taken as they go (run_shared), as the kernels do.
// Threads: every multi-threaded number uses kThreads (the machine's 2 cores).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif
#ifdef TESSERA_BENCH_OPENBLAS
#include <cblas.h>
extern "C" void openblas_set_num_threads(int);
#endif

#include "fma_loop.h"
#include "read_sum.h"
#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/cpu.h"
#include "tessera/graph.h"
#include "tessera/graph_copy.h"
#include "../backends/cpu/kernels/opt/opt_kernels.h"  // the kernel tables, for the block-dot benchmark

using namespace tessera;

namespace {

const int kThreads = static_cast<int>(std::min(2u, std::max(1u, std::thread::hardware_concurrency())));

// Ceilings measured once, read by the ratio counters.
double g_peak_gflops = 0;  // kThreads threads
double g_copy_gbps = 0;    // kThreads threads, bytes read + written
double g_read_gbps = 0;    // kThreads threads, bytes read

template <typename F>
double run_threads(int n, F f) {  // seconds, all threads started together
  std::atomic<int> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> ts;
  double secs[64] = {};
  for (int i = 0; i < n; ++i) {
    ts.emplace_back([&, i] {
      ready.fetch_add(1);
      while (!go.load()) {
      }
      const auto t0 = std::chrono::steady_clock::now();
      f(i);
      secs[i] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    });
  }
  while (ready.load() != n) {
  }
  go.store(true);
  for (auto& t : ts) t.join();
  return *std::max_element(secs, secs + n);
}

// [0, total) on kThreads threads (started together) that take chunks of `chunk` from a shared counter as they go,
// as the optimised kernels take their work units (opt::Units): a thread slowed by another program leaves more of
// the work to the other, so a pass measures the machine as it is at the moment rather than its slowest core.
template <typename F>
double run_shared(int n_threads, size_t total, size_t chunk, F f) {
  std::atomic<size_t> next{0};
  return run_threads(n_threads, [&](int) {
    for (size_t lo = next.fetch_add(chunk); lo < total; lo = next.fetch_add(chunk)) f(lo, std::min(total, lo + chunk));
  });
}

// ---- ceilings ----

void BM_Ceiling_FmaPeak(benchmark::State& state) {
#if defined(__x86_64__)
  if (cpu::best_kernels() != cpu::CpuKernels::kAvx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  const int n = static_cast<int>(state.range(0));
  const int64_t iters = 20'000'000;
  double best = 1e30;
  std::atomic<float> sink{0};
  for (auto _ : state) {
    const double s = run_threads(n, [&](int) { sink.store(fma_loop_avx512(iters)); });
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  const double gflops = 2.0 * 16 * 16 * static_cast<double>(iters) * n / best * 1e-9;
  state.counters["GFLOPS"] = gflops;
  // The ceiling of kThreads threads: the better of the measured run and kThreads x the one-thread run (on a shared
  // machine the multi-threaded run often loses a core for a while).
  if (n == 1) g_peak_gflops = gflops * kThreads;
  if (n == kThreads) g_peak_gflops = std::max(g_peak_gflops, gflops);
#else
  state.SkipWithError("x86 only");
#endif
}
BENCHMARK(BM_Ceiling_FmaPeak)->Arg(1)->Arg(2)->UseManualTime()->Iterations(15)->Unit(benchmark::kMillisecond);

constexpr size_t kStreamFloats = size_t{32} << 20;  // 128 MiB per array, far beyond the caches

#if defined(__x86_64__)
// STREAM's copy: plain vector loads and stores (glibc's memcpy switches to non-temporal stores on arrays this large,
// which this VM runs at about half the speed of ordinary stores).
__attribute__((target("avx2"))) void copy_loop(const float* a, float* b, size_t n) {
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_ps(b + i, _mm256_loadu_ps(a + i));
    _mm256_storeu_ps(b + i + 8, _mm256_loadu_ps(a + i + 8));
    _mm256_storeu_ps(b + i + 16, _mm256_loadu_ps(a + i + 16));
    _mm256_storeu_ps(b + i + 24, _mm256_loadu_ps(a + i + 24));
  }
  for (; i < n; ++i) b[i] = a[i];
}
#else
void copy_loop(const float* a, float* b, size_t n) {
  for (size_t i = 0; i < n; ++i) b[i] = a[i];
}
#endif

// The copy ceiling is the better of the two ways to copy, each timed alternately (bytes read + written).
void BM_Ceiling_StreamCopy(benchmark::State& state) {
  const int n = kThreads;
  std::vector<float> a(kStreamFloats, 1.0f), b(kStreamFloats, 0.0f);
  double best_memcpy = 1e30, best_loop = 1e30;
  bool use_loop = false;
  for (auto _ : state) {
    const double s = run_threads(n, [&](int i) {
      const size_t lo = kStreamFloats * i / n, hi = kStreamFloats * (i + 1) / n;
      if (use_loop) {
        copy_loop(a.data() + lo, b.data() + lo, hi - lo);
      } else {
        std::memcpy(b.data() + lo, a.data() + lo, (hi - lo) * 4);
      }
    });
    double& best = use_loop ? best_loop : best_memcpy;
    best = std::min(best, s);
    use_loop = !use_loop;
    state.SetIterationTime(s);
  }
  benchmark::DoNotOptimize(b.data());
  const double bytes = 2.0 * kStreamFloats * 4;
  g_copy_gbps = bytes / std::min(best_memcpy, best_loop) * 1e-9;
  state.counters["GBps"] = g_copy_gbps;
  state.counters["GBps_memcpy"] = bytes / best_memcpy * 1e-9;
  state.counters["GBps_loop"] = bytes / best_loop * 1e-9;
}
BENCHMARK(BM_Ceiling_StreamCopy)->UseManualTime()->Iterations(20)->Unit(benchmark::kMillisecond);

void BM_Ceiling_StreamRead(benchmark::State& state) {
  const int n = kThreads;
  std::vector<float> a(kStreamFloats, 1.0f);
  std::atomic<float> sink{0};
  double best = 1e30;
  for (auto _ : state) {
    const double s = run_threads(n, [&](int i) {
      const size_t lo = kStreamFloats * i / n, hi = kStreamFloats * (i + 1) / n;
      sink.store(read_sum(a.data() + lo, hi - lo));
    });
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  g_read_gbps = 1.0 * kStreamFloats * 4 / best * 1e-9;
  state.counters["GBps"] = g_read_gbps;
}
BENCHMARK(BM_Ceiling_StreamRead)->UseManualTime()->Iterations(10)->Unit(benchmark::kMillisecond);

// ---- graphs on the CPU backend ----

// A context whose tensors are allocated in one CPU buffer, filled with random values.
struct Bench {
  Context ctx{ContextParams{.no_alloc = true}};
  Graph graph;
  std::unique_ptr<Buffer> buf;
  std::unique_ptr<Backend> backend;

  bool finish(Tensor* out, cpu::CpuKernels kernels, int n_threads = kThreads) {
    if (!ctx.ok() || !graph.build_forward(out).ok()) return false;
    auto b = alloc_ctx_tensors(ctx, *cpu::buffer_type());
    if (!b.ok()) return false;
    buf = std::move(b.value());
    std::mt19937 rng(42);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (size_t i = 0; i < ctx.tensor_count(); ++i) {
      Tensor* t = ctx.tensor(i);
      if (t->op != Op::kNone || t->data == nullptr) continue;
      if (t->type == Type::kI32) {
        std::vector<int32_t> v(static_cast<size_t>(nelements(*t)));
        for (size_t j = 0; j < v.size(); ++j) v[j] = static_cast<int32_t>(j % static_cast<size_t>(t->ne[0]));
        (void)tensor_set(*t, v.data(), 0, v.size() * 4);
        continue;
      }
      std::vector<float> v(static_cast<size_t>(nelements(*t)));
      for (float& x : v) x = dist(rng) * 0.1f;
      (void)tensor_from_f32(*t, v);
    }
    backend = cpu::make_backend({.n_threads = n_threads, .kernels = kernels});
    return true;
  }
  double run() {  // seconds of one compute
    const auto t0 = std::chrono::steady_clock::now();
    const ComputeStatus s = backend->graph_compute(graph);
    const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return s == ComputeStatus::kSuccess ? secs : -1.0;
  }
};

template <typename Build>
void time_graph(benchmark::State& state, cpu::CpuKernels kernels, Build build, double flops, double bytes,
                bool vs_bandwidth_read, bool warm_up = true, int n_threads = kThreads) {
  Bench b;
  Tensor* out = build(b.ctx);
  if (!b.finish(out, kernels, n_threads)) {
    state.SkipWithError("graph build/alloc failed");
    return;
  }
  if (warm_up) b.run();  // work buffer, pages
  double best = 1e30, total = 0;
  int64_t runs = 0;
  for (auto _ : state) {
    const double s = b.run();
    total += s;
    ++runs;
    if (s < 0) {
      state.SkipWithError(b.backend->last_error().c_str());
      return;
    }
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  if (flops > 0) {
    state.counters["GFLOPS"] = flops / best * 1e-9;
    if (g_peak_gflops > 0) state.counters["frac_peak"] = flops / best * 1e-9 / g_peak_gflops;
  }
  if (bytes > 0) {
    const double gbps = bytes / best * 1e-9;
    state.counters["GBps"] = gbps;
    // From the mean time: the best iteration may find part of the operands in a cache (see BM_MatVecStream).
    if (runs > 0) state.counters["GBps_mean"] = bytes / (total / static_cast<double>(runs)) * 1e-9;
    const double ceil = vs_bandwidth_read ? g_read_gbps : g_copy_gbps;
    if (ceil > 0) state.counters["frac_bw"] = gbps / ceil;
    if (g_copy_gbps > 0) state.counters["frac_copy_bw"] = gbps / g_copy_gbps;
  }
}

// ---- GEMM ----

void BM_Gemm_F32(benchmark::State& state) {
  const int64_t n = state.range(0);
  time_graph(
      state, cpu::best_kernels(),
      [n](Context& ctx) {
        return mul_mat(ctx, ctx.new_tensor_2d(Type::kF32, n, n), ctx.new_tensor_2d(Type::kF32, n, n));
      },
      2.0 * n * n * n, 0, false);
}
BENCHMARK(BM_Gemm_F32)->Arg(1024)->Arg(3072)->UseManualTime()->MinTime(2.0)->Unit(benchmark::kMillisecond);

#ifdef TESSERA_BENCH_OPENBLAS
void BM_Gemm_F32_OpenBLAS(benchmark::State& state) {
  const int64_t n = state.range(0);
  openblas_set_num_threads(kThreads);
  std::vector<float> a(static_cast<size_t>(n * n)), b(a.size()), c(a.size());
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-0.1f, 0.1f);
  for (float& x : a) x = dist(rng);
  for (float& x : b) x = dist(rng);
  // Same product as MUL_MAT: C[n][m] = sum_k B[n][k] A[m][k] (both operands K-contiguous).
  auto gemm = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, static_cast<int>(n), static_cast<int>(n), static_cast<int>(n),
                1.0f, b.data(), static_cast<int>(n), a.data(), static_cast<int>(n), 0.0f, c.data(),
                static_cast<int>(n));
  };
  gemm();
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    gemm();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  const double gflops = 2.0 * n * n * n / best * 1e-9;
  state.counters["GFLOPS"] = gflops;
  if (g_peak_gflops > 0) state.counters["frac_peak"] = gflops / g_peak_gflops;
}
BENCHMARK(BM_Gemm_F32_OpenBLAS)->Arg(1024)->Arg(3072)->UseManualTime()->MinTime(2.0)->Unit(benchmark::kMillisecond);
#endif

// ---- quantized matrix x vector, 7B shapes ----

void BM_MatVec(benchmark::State& state) {
  const Type w = static_cast<Type>(state.range(0));
  const int64_t K = 4096, M = 11008;
  const double bytes = static_cast<double>(row_size(w, K)) * M;
  time_graph(
      state, cpu::best_kernels(),
      [&](Context& ctx) { return mul_mat(ctx, ctx.new_tensor_2d(w, K, M), ctx.new_tensor_2d(Type::kF32, K, 1)); },
      2.0 * K * M, bytes, true);
  state.SetLabel(type_name(w));
}
BENCHMARK(BM_MatVec)
    ->Arg(static_cast<int>(Type::kQ4_0))
    ->Arg(static_cast<int>(Type::kQ8_0))
    ->Arg(static_cast<int>(Type::kF16))
    ->UseManualTime()
    ->MinTime(1.0)
    ->Unit(benchmark::kMillisecond);

// The same shapes as one model's layers would stream them: a graph of n independent matrices (n chosen so they
// total at least 384 MiB, beyond any cache of the host) times one vector, the products summed. Each matrix comes
// from DRAM because the others evicted it since its last use, and the thread pool stays busy between them (no
// wake-up per call). This is the figure to hold against the 70 % of bandwidth target; GBps_mean is from the mean
// time of a whole graph.
// n matrices K x M of type w times one vector, the products summed (see BM_MatVecStream).
Tensor* stream_graph(Context& ctx, Type w, int64_t K, int64_t M, int n) {
  Tensor* x = ctx.new_tensor_2d(Type::kF32, K, 1);
  Tensor* sum = nullptr;
  for (int i = 0; i < n; ++i) {
    Tensor* y = mul_mat(ctx, ctx.new_tensor_2d(w, K, M), x);
    sum = sum == nullptr ? y : add(ctx, sum, y);
  }
  return sum;
}

void BM_MatVecStream(benchmark::State& state) {
  const Type w = static_cast<Type>(state.range(0));
  const int64_t K = 4096, M = 11008;
  const double one = static_cast<double>(row_size(w, K)) * M;
  const int n = static_cast<int>(std::ceil(384.0 * (1 << 20) / one));
  time_graph(
      state, cpu::best_kernels(), [&](Context& ctx) { return stream_graph(ctx, w, K, M, n); }, 2.0 * K * M * n, one * n,
      true);
  state.SetLabel(std::string(type_name(w)) + " x" + std::to_string(n));
}
BENCHMARK(BM_MatVecStream)
    ->Arg(static_cast<int>(Type::kQ4_0))
    ->Arg(static_cast<int>(Type::kQ8_0))
    ->Arg(static_cast<int>(Type::kF16))
    ->UseManualTime()
    ->MinTime(2.0)
    ->Unit(benchmark::kMillisecond);

// A graph against the machine's bandwidth measured in the same moment. On a shared VM the bandwidth left to this
// process changes from second to second (the read ceiling alone spread 68-95 GB/s within a few minutes), so a ceiling
// measured once at start and a graph timed a minute later compare two different machines. Here every iteration is a
// pair: a ceiling pass that moves the same number of bytes as the graph (a read-only sum, or a STREAM copy, over
// separate arrays, so also from DRAM, by the same number of threads), then one compute of the graph. Each pair gives
// a ratio, graph GB/s / ceiling GB/s; the counters are the median ratio over the pairs, the ratio of the mean times,
// the extremes, and each side's mean GB/s.
struct CeilingPass {
  explicit CeilingPass(double bytes, bool copy)
      : floats(static_cast<size_t>(copy ? bytes / 8 : bytes / 4)), a(floats, 1.0f), b(copy ? floats : 0, 0.0f) {}
  double run() {                                // seconds
    constexpr size_t kChunk = size_t{1} << 18;  // floats: 1 MiB
    return run_shared(kThreads, floats, kChunk, [&](size_t lo, size_t hi) {
      if (b.empty()) {
        sink.store(read_sum(a.data() + lo, hi - lo));
      } else {
        copy_loop(a.data() + lo, b.data() + lo, hi - lo);
      }
    });
  }
  size_t floats;
  std::vector<float> a, b;
  std::atomic<float> sink{0};
};

// ceiling() returns the seconds of one ceiling pass that does ceiling_work (bytes or flops); one compute of the
// graph does graph_work of the same unit. Counters: the ratios of the rates (graph / ceiling), and each side's mean
// rate as <unit>_mean and ceiling_<unit>_mean.
template <typename Ceiling>
void time_graph_paired(benchmark::State& state, Bench& b, double graph_work, double ceiling_work, Ceiling ceiling,
                       const std::string& unit) {
  b.run();  // work buffer, pages
  ceiling();
  std::vector<double> ratios;
  double t_ceiling = 0, t_graph = 0;
  for (auto _ : state) {
    const double c = ceiling();
    const double g = b.run();
    if (g < 0) {
      state.SkipWithError(b.backend->last_error().c_str());
      return;
    }
    t_ceiling += c;
    t_graph += g;
    ratios.push_back((graph_work / g) / (ceiling_work / c));
    state.SetIterationTime(g);
    // Untimed: the pool's workers spin for a while after a run; let them go to sleep before the next ceiling pass,
    // so they take no cycles from it (which would lower the ceiling and flatter the ratio).
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  if (ratios.empty()) return;
  std::sort(ratios.begin(), ratios.end());
  const size_t m = ratios.size();
  const auto n = static_cast<double>(m);
  state.counters["frac_median"] = m % 2 == 1 ? ratios[m / 2] : 0.5 * (ratios[m / 2 - 1] + ratios[m / 2]);
  state.counters["frac_of_means"] = (graph_work * n / t_graph) / (ceiling_work * n / t_ceiling);
  state.counters["frac_min"] = ratios.front();
  state.counters["frac_max"] = ratios.back();
  state.counters[unit + "_mean"] = graph_work * n / t_graph * 1e-9;
  state.counters["ceiling_" + unit + "_mean"] = ceiling_work * n / t_ceiling * 1e-9;
}

// Paired with a read-only pass (copy = false) or a STREAM copy (copy = true) that moves as many bytes.
void time_graph_paired_bw(benchmark::State& state, Bench& b, double bytes, bool copy) {
  CeilingPass pass(bytes, copy);
  time_graph_paired(
      state, b, bytes, bytes, [&] { return pass.run(); }, "GBps");
  benchmark::DoNotOptimize(pass.b.data());
}

// BM_MatVecStream paired with a read-only pass over as many bytes as the weights.
void BM_MatVecPaired(benchmark::State& state) {
  const Type w = static_cast<Type>(state.range(0));
  const int64_t K = 4096, M = 11008;
  const double one = static_cast<double>(row_size(w, K)) * M;
  const int n = static_cast<int>(std::ceil(384.0 * (1 << 20) / one));
  Bench b;
  if (!b.finish(stream_graph(b.ctx, w, K, M, n), cpu::best_kernels())) {
    state.SkipWithError("graph build/alloc failed");
    return;
  }
  time_graph_paired_bw(state, b, one * n, false);
  state.SetLabel(std::string(type_name(w)) + " x" + std::to_string(n));
}
BENCHMARK(BM_MatVecPaired)
    ->Arg(static_cast<int>(Type::kQ4_0))
    ->Arg(static_cast<int>(Type::kQ8_0))
    ->Arg(static_cast<int>(Type::kF16))
    ->UseManualTime()
    ->Iterations(40)
    ->Unit(benchmark::kMillisecond);

// BM_Gemm_F32 paired with a pass of the FMA-peak kernel shared by the threads (about 5 ms): the fraction of the peak
// that the machine gives this process at the same moment.
void BM_GemmPaired(benchmark::State& state) {
#if defined(__x86_64__)
  if (cpu::best_kernels() != cpu::CpuKernels::kAvx512) {
    state.SkipWithError("no AVX-512 on this CPU");
    return;
  }
  const int64_t n = state.range(0);
  Bench b;
  if (!b.finish(mul_mat(b.ctx, b.ctx.new_tensor_2d(Type::kF32, n, n), b.ctx.new_tensor_2d(Type::kF32, n, n)),
                cpu::best_kernels())) {
    state.SkipWithError("graph build/alloc failed");
    return;
  }
  const int64_t iters = 2'000'000;
  std::atomic<float> sink{0};
  constexpr size_t kChunk = 100'000;  // iterations, about a quarter of a millisecond
  auto peak_pass = [&] {
    return run_shared(kThreads, static_cast<size_t>(iters) * kThreads, kChunk,
                      [&](size_t lo, size_t hi) { sink.store(fma_loop_avx512(static_cast<int64_t>(hi - lo))); });
  };
  time_graph_paired(state, b, 2.0 * n * n * n, 2.0 * 16 * 16 * static_cast<double>(iters) * kThreads, peak_pass,
                    "GFLOPS");
#else
  state.SkipWithError("x86 only");
#endif
}
BENCHMARK(BM_GemmPaired)->Arg(1024)->Iterations(40)->UseManualTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_GemmPaired)->Arg(3072)->Iterations(8)->UseManualTime()->Unit(benchmark::kMillisecond);

// The quantized block dots alone, one thread, weights in cache (K 4096, M 128: 288 KiB q4_0, 544 KiB q8_0): the
// kernel's own speed, which bounds a matrix x vector when memory is not the limit. Arg 1 is the table: 1 avx2 (the
// 256-bit maddubs/madd dots that the AVX-512 table also used before session 5), 2 avx512 (VNNI). ns_per_block: time
// per 32-value weight block; GBps: weight bytes per second.
void BM_QuantDotKernel(benchmark::State& state) {
  const Type w = static_cast<Type>(state.range(0));
  const auto isa = static_cast<cpu::opt::Isa>(state.range(1));
  const cpu::opt::KernelTable* t = cpu::opt::table_for(isa);
  if (t == nullptr) {
    state.SkipWithError("table not available on this CPU");
    return;
  }
  const int64_t nb = 4096 / 32, M = 128;
  std::mt19937 rng(42);
  std::vector<BlockQ8_0> y(static_cast<size_t>(nb)), x8(w == Type::kQ8_0 ? static_cast<size_t>(nb * M) : 0);
  std::vector<BlockQ4_0> x4(w == Type::kQ4_0 ? static_cast<size_t>(nb * M) : 0);
  auto fill = [&](int8_t* q, int n) {
    for (int i = 0; i < n; ++i) q[i] = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  };
  for (BlockQ8_0& b : y) {
    b.d = fp32_to_fp16(0.01f);
    fill(b.qs, 32);
  }
  for (BlockQ8_0& b : x8) {
    b.d = fp32_to_fp16(0.02f);
    fill(b.qs, 32);
  }
  for (BlockQ4_0& b : x4) {
    b.d = fp32_to_fp16(0.02f);
    fill(reinterpret_cast<int8_t*>(b.qs), 16);
  }
  std::vector<float> out(static_cast<size_t>(M));
  double best = 1e30;
  for (auto _ : state) {
    const auto t0 = std::chrono::steady_clock::now();
    if (w == Type::kQ8_0) {
      t->dot_rows_q8_0_q8_0(x8.data(), nb * sizeof(BlockQ8_0), M, y.data(), nb, out.data());
    } else {
      t->dot_rows_q4_0_q8_0(x4.data(), nb * sizeof(BlockQ4_0), M, y.data(), nb, out.data());
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    benchmark::DoNotOptimize(out.data());
    best = std::min(best, s);
    state.SetIterationTime(s);
  }
  const double bytes = static_cast<double>(row_size(w, nb * 32)) * M;
  state.counters["GBps"] = bytes / best * 1e-9;
  state.counters["ns_per_block"] = best * 1e9 / static_cast<double>(nb * M);
  state.SetLabel(std::string(type_name(w)) + " " + t->name);
}
BENCHMARK(BM_QuantDotKernel)
    ->Args({static_cast<int>(Type::kQ4_0), static_cast<int>(cpu::opt::Isa::kAvx2)})
    ->Args({static_cast<int>(Type::kQ4_0), static_cast<int>(cpu::opt::Isa::kAvx512)})
    ->Args({static_cast<int>(Type::kQ8_0), static_cast<int>(cpu::opt::Isa::kAvx2)})
    ->Args({static_cast<int>(Type::kQ8_0), static_cast<int>(cpu::opt::Isa::kAvx512)})
    ->UseManualTime()
    ->MinTime(0.3)
    ->Unit(benchmark::kMicrosecond);

// ---- element-wise, 16 Mi f32 values (far beyond the caches) ----

constexpr int64_t kEwRows = 4096, kEwCols = 4096;  // 16 Mi values, 64 MiB per tensor
const char* const kEwNames[] = {"add", "mul", "scale", "silu", "rms_norm", "soft_max", "swiglu"};
// Bytes read + written (STREAM's convention): three tensors for the binary ops and swiglu, two for the others.
double elementwise_bytes(int which) {
  const double t = static_cast<double>(kEwRows * kEwCols) * 4;
  return (which == 0 || which == 1 || which == 6) ? 3 * t : 2 * t;
}
Tensor* elementwise_graph(Context& ctx, int which) {
  Tensor* a = ctx.new_tensor_2d(Type::kF32, kEwCols, kEwRows);
  switch (which) {
    case 0: return add(ctx, a, ctx.new_tensor_2d(Type::kF32, kEwCols, kEwRows));
    case 1: return mul(ctx, a, ctx.new_tensor_2d(Type::kF32, kEwCols, kEwRows));
    case 2: return scale(ctx, a, 0.5f, 0.25f);
    case 3: return silu(ctx, a);
    case 4: return rms_norm(ctx, a, 1e-5f);
    case 5: return soft_max(ctx, a, nullptr, 1.0f);
    default: return swiglu(ctx, a, ctx.new_tensor_2d(Type::kF32, kEwCols, kEwRows));
  }
}

void BM_Elementwise(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  time_graph(
      state, cpu::best_kernels(), [&](Context& ctx) { return elementwise_graph(ctx, which); }, 0,
      elementwise_bytes(which), false);
  state.SetLabel(kEwNames[which]);
}
BENCHMARK(BM_Elementwise)->DenseRange(0, 6)->UseManualTime()->MinTime(0.5)->Unit(benchmark::kMillisecond);

// BM_Elementwise paired with a STREAM copy that moves as many bytes (see time_graph_paired).
void BM_ElementwisePaired(benchmark::State& state) {
  const int which = static_cast<int>(state.range(0));
  Bench b;
  if (!b.finish(elementwise_graph(b.ctx, which), cpu::best_kernels())) {
    state.SkipWithError("graph build/alloc failed");
    return;
  }
  time_graph_paired_bw(state, b, elementwise_bytes(which), true);
  state.SetLabel(kEwNames[which]);
}
BENCHMARK(BM_ElementwisePaired)->DenseRange(0, 6)->UseManualTime()->Iterations(40)->Unit(benchmark::kMillisecond);

// ---- one llama-style layer ----

// x [dim, T] -> attention (q, k, v, rope, flash attention over the T tokens with a causal mask, wo) + residual ->
// SwiGLU feed-forward + residual. Weights q4_0 (norm weights f32).
Tensor* llama_layer(Context& ctx, int64_t dim, int64_t ff, int64_t heads, int64_t T) {
  const int64_t hd = dim / heads;
  Tensor* x = ctx.new_tensor_2d(Type::kF32, dim, T);
  Tensor* pos = ctx.new_tensor_1d(Type::kI32, T);
  Tensor* mask = ctx.new_tensor_2d(Type::kF16, T, T);
  auto w = [&](int64_t k, int64_t m) { return ctx.new_tensor_2d(Type::kQ4_0, k, m); };
  Tensor* n1 = mul(ctx, rms_norm(ctx, x, 1e-5f), ctx.new_tensor_1d(Type::kF32, dim));
  Tensor* q = rope(ctx, reshape_3d(ctx, mul_mat(ctx, w(dim, dim), n1), hd, heads, T), pos, static_cast<int>(hd));
  Tensor* k = rope(ctx, reshape_3d(ctx, mul_mat(ctx, w(dim, dim), n1), hd, heads, T), pos, static_cast<int>(hd));
  Tensor* v = reshape_3d(ctx, mul_mat(ctx, w(dim, dim), n1), hd, heads, T);
  Tensor* att = flash_attn_ext(ctx, permute(ctx, q, 0, 2, 1, 3), permute(ctx, k, 0, 2, 1, 3),
                               permute(ctx, v, 0, 2, 1, 3), mask, 1.0f / std::sqrt(static_cast<float>(hd)));
  Tensor* h = add(ctx, x, mul_mat(ctx, w(dim, dim), reshape_2d(ctx, att, dim, T)));
  Tensor* n2 = mul(ctx, rms_norm(ctx, h, 1e-5f), ctx.new_tensor_1d(Type::kF32, dim));
  Tensor* g = swiglu(ctx, mul_mat(ctx, w(dim, ff), n2), mul_mat(ctx, w(dim, ff), n2));
  return add(ctx, h, mul_mat(ctx, w(ff, dim), g));
}

// range(0): tokens; range(1): 1 = optimised, 0 = reference; range(2): dim (ff = 2.6875 dim, head dim 128).
void BM_LlamaLayer(benchmark::State& state) {
  const int64_t T = state.range(0), dim = state.range(2);
  const bool opt = state.range(1) != 0;
  const int64_t ff = dim * 43 / 16;
  time_graph(
      state, opt ? cpu::best_kernels() : cpu::CpuKernels::kReference,
      [&](Context& ctx) { return llama_layer(ctx, dim, ff, dim / 128, T); },
      2.0 * T * (4.0 * dim * dim + 3.0 * dim * ff), 0, false, /*warm_up=*/opt);
  state.SetLabel(opt ? "optimised" : "reference");
}
BENCHMARK(BM_LlamaLayer)
    ->Args({1, 1, 4096})
    ->Args({1, 0, 4096})
    ->Args({512, 1, 4096})
    ->Args({512, 1, 1024})
    ->UseManualTime()
    ->Iterations(3)
    ->Unit(benchmark::kMillisecond);
// The reference kernels at 512 tokens take seconds even at dim 1024: one iteration.
BENCHMARK(BM_LlamaLayer)->Args({512, 0, 1024})->UseManualTime()->Iterations(1)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
