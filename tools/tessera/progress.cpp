// Progress of long steps on a terminal (see progress.h).
#include "progress.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <system_error>

namespace tessera::tool {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

Progress::Progress(bool enabled) {
  if (!enabled || isatty(STDERR_FILENO) == 0) return;
  if (const char* env = std::getenv("TESSERA_PROGRESS_AFTER")) {
    char* end = nullptr;
    const double s = std::strtod(env, &end);
    if (end != env && *end == '\0' && s >= 0 && s < 1e6)
      after_ = std::chrono::milliseconds(static_cast<long>(s * 1000));
  }
  try {
    watcher_ = std::thread([this] { watch(); });
  } catch (const std::system_error&) {
    // no progress then
  }
}

Progress::~Progress() {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_locked();
    stop_ = true;
  }
  cv_.notify_all();
  watcher_.join();
}

void Progress::step(const std::string& name) {
  if (!watcher_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    finish_locked();
    name_ = name;
    start_ = Clock::now();
  }
  cv_.notify_all();
}

void Progress::done() {
  if (!watcher_.joinable()) return;
  std::lock_guard<std::mutex> lock(mu_);
  finish_locked();
}

// A step that lasted at least the threshold gets its line, even where the watcher had no turn to show it.
void Progress::finish_locked() {
  if (name_.empty()) return;
  const double s = seconds_since(start_);
  if (shown_ || s * 1000 >= static_cast<double>(after_.count())) {
    std::fprintf(stderr, "\rtessera: %s... done in %.1f s\033[K\n", name_.c_str(), s);
    std::fflush(stderr);
  }
  shown_ = false;
  name_.clear();
}

void Progress::watch() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stop_) {
    if (!name_.empty()) {
      const double s = seconds_since(start_);
      if (s * 1000 >= static_cast<double>(after_.count())) {
        std::fprintf(stderr, "\rtessera: %s... %.0f s\033[K", name_.c_str(), s);
        std::fflush(stderr);
        shown_ = true;
      }
    }
    // A new step wakes the watcher so that a threshold of 0 shows it at once.
    const auto wait =
        name_.empty() || shown_ ? std::chrono::milliseconds(500) : std::min(after_, std::chrono::milliseconds(500));
    cv_.wait_for(lock, wait);
  }
}

}  // namespace tessera::tool
