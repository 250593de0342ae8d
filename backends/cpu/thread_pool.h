// A small persistent thread pool: run(n, fn) calls fn(i) for i in [0, n) on n threads (the caller is thread 0)
// and returns when all are done. Workers sleep between runs.
#pragma once

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

 private:
  void ensure_workers(int n_workers);
  void worker_loop(int index);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable start_cv_;
  std::condition_variable done_cv_;
  const std::function<void(int)>* job_ = nullptr;
  int job_threads_ = 0;      // threads taking part in the current job (including the caller)
  unsigned long generation_ = 0;
  int pending_ = 0;
  bool stop_ = false;
};

}  // namespace tessera::cpu
