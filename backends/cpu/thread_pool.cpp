#include "thread_pool.h"

namespace tessera::cpu {

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
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
  std::unique_lock<std::mutex> lock(mu_);
  ensure_workers(n - 1);
  job_ = &fn;
  job_threads_ = n;
  pending_ = n - 1;
  ++generation_;
  lock.unlock();
  start_cv_.notify_all();
  fn(0);
  lock.lock();
  done_cv_.wait(lock, [this] { return pending_ == 0; });
  job_ = nullptr;
}

void ThreadPool::worker_loop(int index) {
  unsigned long seen = 0;
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    start_cv_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    if (index >= job_threads_) continue;  // this job uses fewer threads
    const std::function<void(int)>* job = job_;
    lock.unlock();
    (*job)(index);
    lock.lock();
    if (--pending_ == 0) done_cv_.notify_one();
  }
}

}  // namespace tessera::cpu
