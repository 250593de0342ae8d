#include "tessera/status.h"

#include <cstdarg>
#include <vector>

namespace tessera {

const char* status_code_name(StatusCode code) {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid argument";
    case StatusCode::kOutOfRange: return "out of range";
    case StatusCode::kAllocFailed: return "allocation failed";
    case StatusCode::kUnsupported: return "unsupported";
    case StatusCode::kFailed: return "failed";
    case StatusCode::kAborted: return "aborted";
    case StatusCode::kNotFound: return "not found";
  }
  return "unknown";
}

std::string Status::to_string() const {
  if (ok()) return "ok";
  return std::string(status_code_name(code_)) + ": " + message_;
}

std::string format_message(const char* fmt, ...) {
  va_list args;
  va_start(args, fmt);
  va_list copy;
  va_copy(copy, args);
  int n = std::vsnprintf(nullptr, 0, fmt, copy);
  va_end(copy);
  std::string out;
  if (n > 0) {
    std::vector<char> buf(static_cast<size_t>(n) + 1);
    std::vsnprintf(buf.data(), buf.size(), fmt, args);
    out.assign(buf.data(), static_cast<size_t>(n));
  }
  va_end(args);
  return out;
}

void assert_fail(const char* file, int line, const char* cond, const std::string& msg) {
  std::fprintf(stderr, "%s:%d: internal invariant violated: %s%s%s\n", file, line, cond, msg.empty() ? "" : ": ",
               msg.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace tessera
