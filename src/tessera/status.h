// Status and Result: how every library entry point reports failure (bad user input never aborts).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace tessera {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // bad shapes, types, parameters, API misuse
  kOutOfRange,       // byte range outside a tensor or buffer
  kAllocFailed,      // an allocation failed (out of memory, size above the type's maximum)
  kUnsupported,      // the backend or device cannot do this
  kFailed,           // a computation failed
  kAborted,          // the user's abort callback stopped the computation
  kNotFound,         // lookup by name or type found nothing
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return {}; }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code>: <message>", for printing.
  std::string to_string() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

// printf-style message builder used by the error helpers below.
std::string format_message(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

#define TS_ERROR(code, ...) ::tessera::Status((code), ::tessera::format_message(__VA_ARGS__))

// Propagate a non-ok Status.
#define TS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::tessera::Status ts_status_ = (expr);   \
    if (!ts_status_.ok()) return ts_status_; \
  } while (0)

// A value or an error.
template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : value_(std::move(value)) {}         // NOLINT(google-explicit-constructor)
  Result(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    if (status_.ok()) status_ = Status(StatusCode::kFailed, "Result constructed from an ok Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }
  T& value() & { return *value_; }
  T&& value() && { return std::move(*value_); }
  const T& value() const& { return *value_; }
  T* operator->() { return &*value_; }
  T& operator*() { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

// Internal invariant check (never used for user input): prints file, line and message, then aborts.
[[noreturn]] void assert_fail(const char* file, int line, const char* cond, const std::string& msg);

#define TS_ASSERT(cond, ...)                                                                                   \
  do {                                                                                                         \
    if (!(cond)) ::tessera::assert_fail(__FILE__, __LINE__, #cond, ::tessera::format_message("" __VA_ARGS__)); \
  } while (0)

// Invariant checks that cost more than a comparison (the scheduler's plan verifier after each pass, the simulator's
// clock, queue and memory checks) are compiled in when TESSERA_CHECK_INVARIANTS is 1: by default in builds without
// NDEBUG (Debug) and in sanitizer builds (CMake defines it there from TESSERA_SANITIZE); the CMake option of the same
// name forces it on or off. Release builds do not evaluate them.
#ifndef TESSERA_CHECK_INVARIANTS
#ifdef NDEBUG
#define TESSERA_CHECK_INVARIANTS 0
#else
#define TESSERA_CHECK_INVARIANTS 1
#endif
#endif
inline constexpr bool kCheckInvariants = TESSERA_CHECK_INVARIANTS != 0;

// TS_ASSERT in builds with TESSERA_CHECK_INVARIANTS, nothing otherwise (the condition and message are still compiled,
// so they cannot rot, but never evaluated). The message names the invariant and what breaks it (tensor, device,
// command; in the simulator the seed).
#define TS_DEBUG_ASSERT(cond, ...)                                           \
  do {                                                                       \
    if constexpr (::tessera::kCheckInvariants) TS_ASSERT(cond, __VA_ARGS__); \
  } while (0)

}  // namespace tessera
