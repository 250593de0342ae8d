// Internal to the llama.cpp log reader (llama_log.cpp, llama_log_lines.cpp): scanning helpers over string_view and
// the per-line reader that fills a LlamaLog.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>

#include "tessera/llama/llama_log.h"

namespace tessera::llama::llama_log_scan {

inline bool is_digit(char c) { return c >= '0' && c <= '9'; }
inline bool is_ident(char c) { return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
inline void trim_left(std::string_view& s) {
  while (!s.empty() && (s[0] == ' ' || s[0] == '\t')) s.remove_prefix(1);
}
inline std::string_view trimmed(std::string_view s) {
  trim_left(s);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}
inline bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
// Removes `p` (after leading blanks) when `s` starts with it.
inline bool consume(std::string_view& s, std::string_view p) {
  trim_left(s);
  if (!starts_with(s, p)) return false;
  s.remove_prefix(p.size());
  return true;
}
// A non-negative decimal integer (at most 18 digits: no overflow).
inline bool take_int(std::string_view& s, int64_t& out) {
  trim_left(s);
  size_t i = 0;
  int64_t v = 0;
  while (i < s.size() && is_digit(s[i])) {
    if (i == 18) return false;
    v = v * 10 + (s[i] - '0');
    ++i;
  }
  if (i == 0) return false;
  out = v;
  s.remove_prefix(i);
  return true;
}
// An unsigned integer that fits uint64_t.
inline bool take_u64(std::string_view& s, uint64_t& out) {
  trim_left(s);
  size_t i = 0;
  uint64_t v = 0;
  while (i < s.size() && is_digit(s[i])) {
    const uint64_t d = static_cast<uint64_t>(s[i] - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
    ++i;
  }
  if (i == 0) return false;
  out = v;
  s.remove_prefix(i);
  return true;
}
// A non-negative decimal number "123", "123.45" (as llama.cpp prints MiB), finite.
inline bool take_number(std::string_view& s, double& out) {
  trim_left(s);
  size_t i = 0;
  while (i < s.size() && is_digit(s[i])) ++i;
  if (i == 0 || i > 30) return false;
  bool comma = false;
  if (i < s.size() && s[i] == '.') {
    const size_t frac = ++i;
    while (i < s.size() && is_digit(s[i])) ++i;
    if (i == frac || i > 60) return false;
  } else if (i + 1 < s.size() && s[i] == ',' && is_digit(s[i + 1])) {
    // A decimal comma (a log printed under a locale that writes "4403,49 MiB"): taken only when a unit follows the
    // digits ("MiB", "GiB", "B", ...), so that a list ("3,1") stays two numbers.
    size_t j = i + 1;
    while (j < s.size() && is_digit(s[j])) ++j;
    size_t k = j;
    while (k < s.size() && s[k] == ' ') ++k;
    if (j - i - 1 <= 6 && k < s.size() && (s[k] == 'M' || s[k] == 'G' || s[k] == 'K' || s[k] == 'T' || s[k] == 'B')) {
      i = j;
      comma = true;
    }
  }
  std::string text(s.substr(0, i));
  if (comma) text[text.find(',')] = '.';
  out = std::strtod(text.c_str(), nullptr);
  if (!std::isfinite(out)) return false;
  s.remove_prefix(i);
  return true;
}
// The whole of `s` (trimmed) as an integer.
inline bool whole_int(std::string_view s, int64_t& out) {
  s = trimmed(s);
  return take_int(s, out) && s.empty();
}

// Reads one cleaned line at a time into the log; finish() derives the typed fields.
// Whether the line is a pasted command line (llama_log_lines.cpp).
bool is_command_line(std::string_view s);

class Reader {
 public:
  explicit Reader(LlamaLog& log) : log_(log) {}
  // True when the line was used (its content is in the record).
  bool line(const std::string& text, int number);
  void finish();

 private:
  bool buffer(std::string_view fn, std::string_view body, int n);
  bool offload(std::string_view body, int n);
  bool graph(std::string_view body, int n);
  bool breakdown(std::string_view body, int n);
  bool kv_total(std::string_view fn, std::string_view body, int n);
  bool loader(std::string_view body);
  bool device(std::string_view body, int n);
  bool failed(std::string_view fn, std::string_view body, int n);
  bool error(std::string_view body, int n);
  bool key_values(std::string_view body);

  LlamaLog& log_;
  int last_alloc_line_ = 0;  // the line of the last "allocating X MiB on device N" record
};

}  // namespace tessera::llama::llama_log_scan
