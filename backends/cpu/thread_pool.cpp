#include "thread_pool.h"

#include <chrono>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define TS_CPU_RELAX() _mm_pause()
#elif defined(__aarch64__)
#define TS_CPU_RELAX() asm volatile("yield")
#else
#define TS_CPU_RELAX() ((void)0)
#endif

namespace tessera::cpu {

namespace {
// A worker spins this long after a run before it sleeps: long enough to catch the next node of a graph (the caller
// hands it out within microseconds), short enough not to burn a core between graphs. A time, not a count of pause
// instructions: a pause takes 10 to 140 cycles depending on the CPU (2^14 of them were ~0.8 ms here, half the CPU
// time of the simulator tests on two cores).
constexpr auto kSpinBeforeSleep = std::chrono::microseconds(50);
constexpr int kSpinsPerClockRead = 64;
constexpr int kSpinsBeforeYield = 1 << 10;  // caller and barrier: spin, then yield the core
constexpr int kMaxThreads = 0xffff;         // the thread count shares the generation word
}  // namespace

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_.store(true);
  }
  start_cv_.notify_all();
  for (auto& w : workers_) w.join();
}

void ThreadPool::ensure_workers(int n_workers) {
  while (static_cast<int>(workers_.size()) < n_workers) {
    const int index = static_cast<int>(workers_.size()) + 1;  // worker i runs share i; the caller runs share 0
    workers_.emplace_back([this, index] { worker_loop(index); });
  }
}

void ThreadPool::run(int n, const std::function<void(int)>& fn) {
  if (n <= 1) {
    fn(0);
    return;
  }
  if (n > kMaxThreads) n = kMaxThreads;
  ensure_workers(n - 1);
  {
    // Under the mutex, so a worker that is about to sleep cannot miss the new generation.
    std::lock_guard<std::mutex> lock(mu_);
    job_ = &fn;
    job_threads_ = n;
    pending_.store(n - 1, std::memory_order_relaxed);
    const uint64_t run_number = (generation_.load(std::memory_order_relaxed) >> 16) + 1;
    generation_.store((run_number << 16) | static_cast<uint64_t>(n), std::memory_order_release);
  }
  start_cv_.notify_all();
  fn(0);
  for (int spins = 0; pending_.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinsBeforeYield) {
      TS_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
  job_ = nullptr;
}

void ThreadPool::barrier() {
  const int n = job_threads_;
  if (n <= 1) return;
  const unsigned phase = bar_phase_.load(std::memory_order_acquire);
  if (bar_count_.fetch_add(1, std::memory_order_acq_rel) == n - 1) {
    bar_count_.store(0, std::memory_order_relaxed);
    bar_phase_.fetch_add(1, std::memory_order_acq_rel);
    return;
  }
  for (int spins = 0; bar_phase_.load(std::memory_order_acquire) == phase; ++spins) {
    if (spins < kSpinsBeforeYield) {
      TS_CPU_RELAX();
    } else {
      std::this_thread::yield();
    }
  }
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    // Spin a while for the next run, then sleep.
    uint64_t g = generation_.load(std::memory_order_acquire);
    const auto spin_until = std::chrono::steady_clock::now() + kSpinBeforeSleep;
    for (int spins = 1; g == seen && !stop_.load(std::memory_order_relaxed); ++spins) {
      TS_CPU_RELAX();
      g = generation_.load(std::memory_order_acquire);
      if (spins % kSpinsPerClockRead == 0 && std::chrono::steady_clock::now() >= spin_until) break;
    }
    if (g == seen) {
      std::unique_lock<std::mutex> lock(mu_);
      start_cv_.wait(lock, [&] { return stop_.load() || generation_.load() != seen; });
      if (stop_.load()) return;
      g = generation_.load(std::memory_order_acquire);
    }
    if (stop_.load()) return;
    seen = g;
    if (index >= static_cast<int>(g & 0xffff)) continue;  // this run uses fewer threads
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace tessera::cpu
