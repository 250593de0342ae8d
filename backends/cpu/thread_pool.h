// A small persistent thread pool: run(n, fn) calls fn(i) for i in [0, n) on n threads (the caller is thread 0)
// and returns when all are done. barrier() lets the n threads of a run meet (kernels with phases).
//
// Latency: a run is handed to the workers through an atomic generation counter. Workers spin (with a pause
// instruction) for a short while after each run, so the next node of a graph starts without a wake-up; after that
// they sleep on a condition variable. The caller waits for the workers by spinning, then yielding. The barrier spins,
// then yields, so an oversubscribed machine still makes progress.
#pragma once

#include <atomic>
#include <cstdint>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessera::cpu {

class ThreadPool {
 public:
  ThreadPool() = default;
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void run(int n, const std::function<void(int)>& fn);
  // Called by every thread of the current run (n of them); returns when all n arrived. Memory written before the
  // barrier by any of them is visible to all after it.
  void barrier();
  // For kernels that take a plain function pointer: ctx is the ThreadPool.
  static void barrier_fn(void* ctx) { static_cast<ThreadPool*>(ctx)->barrier(); }

 private:
  void ensure_workers(int n_workers);
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  const std::function<void(int)>* job_ = nullptr;  // stable while a worker taking part in the run runs it
  int job_threads_ = 0;                            // threads taking part in the current job (including the caller)
  // (run number << 16) | thread count of the run: a worker reads both in one load, so a worker that is not part of
  // a run never mistakes a later run's thread count for its own.
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // barrier state (sense by phase counter)
  alignas(64) std::atomic<int> bar_count_{0};
  alignas(64) std::atomic<unsigned> bar_phase_{0};
};

}  // namespace tessera::cpu
