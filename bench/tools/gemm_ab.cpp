// In-process A/B of two builds of the CPU backend's f32 GEMM schedule.
//
// Across processes, a GEMM measured on this shared VM moves by several percent from one run to the next, as much as
// the schedule changes worth trying. Here both variants run in one process on the backend's own thread pool,
// alternately, each pass paired with a pass of the FMA-peak kernel shared by the same threads, so they meet the same
// machine. Variant A is the library's MUL_MAT (backends/cpu/kernels/opt/opt_matmul.cpp in build/rel); variant B is
// the same source (or a modified copy) compiled again with other flags and its entry points renamed (see gemm_ab.sh,
// which builds and runs this). Both must give bit-identical products: the schedule only moves work between threads.
//
// Usage: gemm_ab [iterations=20] [n=1024] [threads=2]
// Prints the median GFLOPS of A, B and the peak, and the median per-iteration ratios A/peak, B/peak, B/A.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "../fma_loop.h"
#include "ab_common.h"
#include "kernels/opt/opt_kernels.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "thread_pool.h"

namespace tessera::cpu::opt {  // variant B (opt_matmul.cpp with its entry points renamed)
Status run_mul_mat_b(const Tensor& node, const Params& p);
size_t work_size_mul_mat_b(const Tensor& node, const KernelTable& t, int nth);
}  // namespace tessera::cpu::opt

namespace {

namespace opt = tessera::cpu::opt;
using tessera::Tensor;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = std::max(1, ab::arg(argc, argv, 1, 20));
  const int n = ab::arg(argc, argv, 2, 1024);
  const int nth = ab::arg(argc, argv, 3, 2);
  if (n < 64 || n > 8192 || nth < 1 || nth > 64) {
    std::fprintf(stderr, "gemm_ab: n %d (64..8192) or threads %d (1..64) out of range\n", n, nth);
    return 2;
  }
  const opt::KernelTable* table = opt::table_avx512();
  if (table == nullptr) {
    std::fprintf(stderr, "gemm_ab: this CPU or build has no AVX-512 table\n");
    return 2;
  }
  tessera::Context ctx;
  Tensor* a = ctx.new_tensor_2d(tessera::Type::kF32, n, n);
  Tensor* b = ctx.new_tensor_2d(tessera::Type::kF32, n, n);
  Tensor* c = tessera::mul_mat(ctx, a, b);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (Tensor* t : {a, b}) {
    float* d = static_cast<float*>(t->data);
    for (int64_t i = 0; i < static_cast<int64_t>(n) * n; ++i) d[i] = dist(rng);
  }
  using RunFn = tessera::Status (*)(const Tensor&, const opt::Params&);
  const RunFn run[2] = {&opt::run_mul_mat, &opt::run_mul_mat_b};
  const size_t work_bytes =
      std::max(opt::work_size_mul_mat(*c, *table, nth), opt::work_size_mul_mat_b(*c, *table, nth));
  void* work = std::aligned_alloc(64, (work_bytes + 63) / 64 * 64);
  tessera::cpu::ThreadPool pool;
  opt::ClaimCounter claims[opt::kClaimCounters];
  std::vector<tessera::Status> status(static_cast<size_t>(nth));
  auto pass = [&](int v) {
    for (auto& cl : claims) cl.next.store(0, std::memory_order_relaxed);
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(nth, [&](int ith) {
      opt::Params p;
      p.ith = ith;
      p.nth = nth;
      p.table = table;
      p.work = work;
      p.work_bytes = work_bytes;
      p.barrier = &tessera::cpu::ThreadPool::barrier_fn;
      p.barrier_ctx = &pool;
      p.claims = nth > 1 ? claims : nullptr;
      status[static_cast<size_t>(ith)] = run[v](*c, p);
    });
    const double s = seconds_since(t0);
    for (const auto& st : status) {
      if (!st.ok()) {
        std::fprintf(stderr, "gemm_ab: variant %c failed: %s\n", "AB"[v], st.message().c_str());
        std::exit(1);
      }
    }
    return s;
  };
  // The FMA-peak kernel in chunks of about a quarter of a millisecond taken from a shared counter, for 1 / 0.7 of the
  // GEMM's flops (so a pass lasts about as long as a GEMM at 70 % of the peak).
  const double flops = 2.0 * n * n * n;
  constexpr int64_t kChunk = 100'000;  // iterations of fma_loop_avx512: 512 flops each
  const int64_t peak_iters = std::max<int64_t>(kChunk, static_cast<int64_t>(flops / 512.0 / 0.7));
  std::atomic<int64_t> next{0};
  std::atomic<float> sink{0};
  auto peak = [&] {
    next.store(0);
    const auto t0 = std::chrono::steady_clock::now();
    pool.run(nth, [&](int) {
      for (int64_t lo; (lo = next.fetch_add(kChunk)) < peak_iters;) {
        sink.store(fma_loop_avx512(std::min(kChunk, peak_iters - lo)));
      }
    });
    return seconds_since(t0);
  };
  // Warm-up, and the check that both schedules give the same bits.
  const size_t bytes = static_cast<size_t>(n) * n * sizeof(float);
  std::vector<float> out_a(static_cast<size_t>(n) * n);
  pass(0);
  std::memcpy(out_a.data(), c->data, bytes);
  pass(1);
  if (std::memcmp(out_a.data(), c->data, bytes) != 0) {
    std::fprintf(stderr, "gemm_ab: variants A and B give different products (n %d, %d threads)\n", n, nth);
    return 1;
  }
  peak();
  const double peak_flops = 512.0 * static_cast<double>(peak_iters);
  const ab::Medians m = ab::run(iters, flops, peak_flops, pass, peak);
  std::printf(
      "gemm %d^3, %d threads, %d iterations: GFLOPS median A %.1f  B %.1f  peak %.1f | ratio median A %.3f  "
      "B %.3f  B/A %.3f\n",
      n, nth, iters, m.rate[0] * 1e-9, m.rate[1] * 1e-9, m.rate[2] * 1e-9, m.ratio[0], m.ratio[1], m.ratio[2]);
  std::free(work);
  return 0;
}
