// Progress of the `tessera` tool's long steps on a terminal: a step that has lasted longer than a threshold (1 s, or
// the seconds in the environment variable TESSERA_PROGRESS_AFTER) is shown on standard error with its elapsed time,
// and ends with "done in N s". Silent when standard error is not a terminal or when the report is JSON.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

namespace tessera::tool {

class Progress {
 public:
  // Shows progress when `enabled` and standard error is a terminal.
  explicit Progress(bool enabled);
  ~Progress();  // ends the current step
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // A step begins (and the one before it ends).
  void step(const std::string& name);
  // The current step ends; nothing runs until the next step().
  void done();

 private:
  using Clock = std::chrono::steady_clock;
  void watch();
  void finish_locked();  // ends the current step's line, if it was shown

  std::mutex mu_;
  std::condition_variable cv_;
  std::thread watcher_;
  std::chrono::milliseconds after_{1000};
  std::string name_;  // the current step; empty when none
  Clock::time_point start_;
  bool shown_ = false;  // the current step's line is on the terminal
  bool stop_ = false;
};

}  // namespace tessera::tool
