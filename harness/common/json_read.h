// Reading JSON files with errors that name the source, the location (JSON path, or line:column for syntax) and what
// was expected (shared by the topology, scenario and graph loaders). Inside a parser a problem is thrown as a
// ParseProblem {path, message} and caught once at the public entry point, together with anything nlohmann-json
// throws; parse_json turns syntax errors and duplicate keys into a Status.
#pragma once

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/ops.h"
#include "tessera/harness/common/edit_distance.h"
#include "tessera/harness/common/units.h"
#include "tessera/status.h"
#include "tessera/types.h"

namespace tessera::harness::json_read {

using json = nlohmann::json;

// Small text helpers

inline std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n' || s.front() == '\r'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// "text" for messages: quotes and backslashes escaped, control bytes as \xNN, long text shortened.
inline std::string quote(std::string_view s) {
  constexpr size_t kMax = 60;
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  if (s.size() > kMax) out += "...";
  out += '"';
  return out;
}

inline bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (std::tolower(x) != std::tolower(y)) return false;
  }
  return true;
}

inline std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// Shortest text that reads back to exactly v.
inline std::string number_text(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

inline std::string error_prefix(const std::string& source, const std::string& path) {
  std::string out = source + ": ";
  if (!path.empty()) out += path + ": ";
  return out;
}

struct ParseProblem {
  std::string path;
  std::string message;
};

[[noreturn]] inline void fail(const std::string& path, std::string message) {
  throw ParseProblem{path, std::move(message)};
}

inline std::string child(const std::string& path, std::string_view key) {
  return path.empty() ? std::string(key) : path + "." + std::string(key);
}
inline std::string element(const std::string& path, size_t i) { return path + "[" + std::to_string(i) + "]"; }

// "a string ("eight")", "a number (5)", "an array", ...: what a value is, for "got ..." in messages.
inline std::string describe(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return v.get<bool>() ? "true" : "false";
    case json::value_t::string: return "a string (" + quote(v.get_ref<const std::string&>()) + ")";
    case json::value_t::number_integer: return "a number (" + std::to_string(v.get<int64_t>()) + ")";
    case json::value_t::number_unsigned: return "a number (" + std::to_string(v.get<uint64_t>()) + ")";
    case json::value_t::number_float: return "a number (" + number_text(v.get<double>()) + ")";
    case json::value_t::object: return "an object";
    case json::value_t::array: return "an array";
    default: return "a value of another kind";
  }
}

[[noreturn]] inline void type_fail(const std::string& path, std::string_view expected, const json& got) {
  fail(path, "expected " + std::string(expected) + ", got " + describe(got));
}

using harness::edit_distance;  // (tessera/harness/common/edit_distance.h)

using Keys = std::initializer_list<const char*>;

// The object at `path`, with no keys but `allowed` (typos must not pass silently). `allowed`: any range of const char*.
template <typename KeyRange>
const json& expect_object(const json& v, const std::string& path, const KeyRange& allowed, std::string_view what) {
  if (!v.is_object()) type_fail(path, what, v);
  for (const auto& item : v.items()) {
    const std::string& key = item.key();
    bool known = false;
    for (const char* k : allowed) known = known || key == k;
    if (known) continue;
    std::string msg = "unknown key " + quote(key) + " (expected one of:";
    const char* best = nullptr;
    size_t best_d = 3;  // suggest only close names
    bool first = true;
    for (const char* k : allowed) {
      msg += first ? " " : ", ";
      msg += k;
      first = false;
      const size_t d = edit_distance(lower(key), k);
      if (d < best_d) best_d = d, best = k;
    }
    msg += ")";
    if (best != nullptr) msg += std::string("; did you mean \"") + best + "\"?";
    fail(path, std::move(msg));
  }
  return v;
}
inline const json& expect_object(const json& v, const std::string& path, Keys allowed, std::string_view what) {
  return expect_object<Keys>(v, path, allowed, what);
}

inline const json* member(const json& obj, const char* key) {
  const auto it = obj.find(key);
  return it == obj.end() ? nullptr : &*it;
}

inline const json& required(const json& obj, const std::string& path, const char* key, std::string_view what) {
  const json* v = member(obj, key);
  if (v == nullptr) fail(path, std::string("missing required key \"") + key + "\" (" + std::string(what) + ")");
  return *v;
}

// `what` says what was expected in the error ("a string" unless a caller says more).
inline std::string get_string(const json& v, const std::string& path, std::string_view what = "a string") {
  if (!v.is_string()) type_fail(path, what, v);
  return v.get<std::string>();
}

inline bool get_bool(const json& v, const std::string& path) {
  if (!v.is_boolean()) type_fail(path, "true or false", v);
  return v.get<bool>();
}

// A whole number in [0, max] (JSON numbers only); `what` says what was expected in every error.
inline int64_t get_count(const json& v, const std::string& path, std::string_view what, int64_t max) {
  uint64_t u = 0;
  if (v.is_number_unsigned()) {
    u = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < 0) type_fail(path, what, v);
    u = static_cast<uint64_t>(i);
  } else if (v.is_number_float()) {
    const double d = v.get<double>();
    // 1.8e19 stays below 2^64, where the conversion would overflow.
    if (!(d >= 0 && d < 1.8e19 && std::floor(d) == d)) type_fail(path, what, v);
    u = static_cast<uint64_t>(d);
  } else {
    type_fail(path, what, v);
  }
  if (u > static_cast<uint64_t>(max)) type_fail(path, what, v);
  return static_cast<int64_t>(u);
}

// A whole number >= 0 (JSON numbers only).
inline int64_t get_count(const json& v, const std::string& path) {
  constexpr std::string_view kWhat = "a whole number >= 0";
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(kMax)) {
    type_fail(path, "a whole number below 2^63", v);
  }
  // A float counts only below 9.2e18, a round bound under 2^63.
  if (v.is_number_float() && !(v.get<double>() < 9.2e18)) type_fail(path, kWhat, v);
  return get_count(v, path, kWhat, kMax);
}

// A finite number; a whole number in [-1000000, 1000000] (counts and indices a user writes by hand).
inline double get_number(const json& v, const std::string& path) {
  if (!v.is_number()) type_fail(path, "a number", v);
  const double d = v.get<double>();
  if (!std::isfinite(d)) type_fail(path, "a finite number", v);
  return d;
}

inline int get_int(const json& v, const std::string& path) {
  constexpr std::string_view kWhat = "a whole number between -1000000 and 1000000";
  if (!v.is_number_integer()) type_fail(path, "a whole number", v);
  // An unsigned value above 2^63 - 1 read as int64 wraps (18446744073709551615 would be -1): range-check it unsigned.
  if (v.is_number_unsigned() && v.get<uint64_t>() > 1000000) type_fail(path, kWhat, v);
  const int64_t i = v.get<int64_t>();
  if (i < -1000000 || i > 1000000) type_fail(path, kWhat, v);
  return static_cast<int>(i);
}

constexpr std::string_view kSizeExpected = "a size such as \"8 GiB\", \"512 MiB\" or 4096 (bytes)";
constexpr std::string_view kRateExpected = "a rate such as \"900 GB/s\" or \"25 GiB/s\"";
constexpr std::string_view kDurationExpected = "a duration such as \"5 us\", \"1.5 ms\" or \"200 ns\"";
constexpr std::string_view kFlopsExpected = "a compute rate such as \"50 TFLOP/s\" or \"800 GFLOP/s\"";

inline size_t get_size(const json& v, const std::string& path) {
  if (v.is_string()) {
    Result<size_t> r = parse_size(v.get_ref<const std::string&>());
    if (!r.ok()) fail(path, r.status().message());
    return r.value();
  }
  if (v.is_number_unsigned()) return static_cast<size_t>(v.get<uint64_t>());
  if (v.is_number_integer()) {
    // Unsigned values parse as number_unsigned, so this is negative.
    fail(path, "expected " + std::string(kSizeExpected) + ", got " + describe(v) + " (it cannot be negative)");
  }
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (!(d >= 0))
      fail(path, "expected " + std::string(kSizeExpected) + ", got " + describe(v) + " (it cannot be negative)");
    if (!(d < 18446744073709551616.0)) {
      fail(path, "expected " + std::string(kSizeExpected) + ", got " + describe(v) + " (too large for 64 bits)");
    }
    if (std::floor(d) != d)
      fail(path, "expected " + std::string(kSizeExpected) + ", got " + describe(v) + " (not whole bytes)");
    return static_cast<size_t>(d);
  }
  type_fail(path, kSizeExpected, v);
}

// Rates, durations and flops: a string with a unit, or a number in the base unit.
template <typename Parse>
inline double get_quantity(const json& v, const std::string& path, std::string_view expected, Parse parse) {
  if (v.is_string()) {
    Result<double> r = parse(v.get_ref<const std::string&>());
    if (!r.ok()) fail(path, r.status().message());
    return r.value();
  }
  if (v.is_number()) {
    const double d = v.get<double>();
    if (!(d >= 0) || !std::isfinite(d))
      fail(path, "expected " + std::string(expected) + ", got " + describe(v) + " (it cannot be negative)");
    return d;
  }
  type_fail(path, expected, v);
}

inline double get_rate(const json& v, const std::string& path) {
  return get_quantity(v, path, kRateExpected, parse_rate);
}
inline double get_duration(const json& v, const std::string& path) {
  return get_quantity(v, path, kDurationExpected, parse_duration_us);
}
inline double get_flops(const json& v, const std::string& path) {
  return get_quantity(v, path, kFlopsExpected, parse_flops);
}

// "f32, f16, ...": every type name, for messages.
inline std::string type_names() {
  std::string names;
  for (int i = 0; i < kTypeCount; ++i) names += std::string(i > 0 ? ", " : "") + type_name(static_cast<Type>(i));
  return names;
}

// "VIEW, RESHAPE, ...": every op name, for messages; NONE (a leaf) first when with_none.
inline std::string op_names(bool with_none) {
  std::string names;
  for (int i = with_none ? 0 : 1; i < kOpCount; ++i) {
    names += (names.empty() ? "" : ", ") + std::string(op_name(static_cast<Op>(i)));
  }
  return names;
}

inline Op get_op(const json& v, const std::string& path) {
  if (!v.is_string()) type_fail(path, "an op name such as \"MUL_MAT\"", v);
  const std::string& s = v.get_ref<const std::string&>();
  Op op = Op::kNone;
  if (!op_from_name(s.c_str(), &op) || op == Op::kNone || s.find('\0') != std::string::npos) {
    fail(path, "expected an op name (one of: " + op_names(false) + "), got " + quote(s));
  }
  return op;
}

inline Type get_type(const json& v, const std::string& path) {
  if (!v.is_string()) type_fail(path, "a type name such as \"q4_0\"", v);
  const std::string& s = v.get_ref<const std::string&>();
  Type t = Type::kF32;
  if (!type_from_name(s.c_str(), &t) || s.find('\0') != std::string::npos) {
    fail(path, "expected a type name (one of: " + type_names() + "), got " + quote(s));
  }
  return t;
}

// A file's top-level "version" (scenario and topology files: docs/scenarios.md and docs/topology.md, "Versions"): 0
// when the key is absent, else a whole number from 1 to `newest`. A newer one is refused with a message that names
// the newest this build reads (`files`: "scenario files").
inline int get_version(const json& root, std::string_view files, int newest) {
  const json* v = member(root, "version");
  if (v == nullptr) return 0;
  const std::string expected = "a version number from 1 to " + std::to_string(newest);
  if (!v->is_number_integer()) type_fail("version", expected, *v);
  const bool above = v->is_number_unsigned() ? v->get<uint64_t>() > static_cast<uint64_t>(newest)
                                             : v->get<int64_t>() > static_cast<int64_t>(newest);
  if (above) {
    fail("version", "version " + v->dump() + " is newer than this build of Tessera reads (" + std::string(files) +
                        " up to version " + std::to_string(newest) + "): use a newer Tessera");
  }
  if (v->get<int64_t>() < 1) type_fail("version", expected, *v);
  return static_cast<int>(v->get<int64_t>());
}

// A value as JSON on one line with a space after each ',' and ':' ({"a": [1, 2]}), for messages and for files
// written in the projects' layout; works with json and ordered_json.
template <typename Json>
std::string one_line(const Json& v) {
  if (v.is_object()) {
    std::string out = "{";
    for (auto it = v.begin(); it != v.end(); ++it) {
      out += (out.size() > 1 ? ", " : "") + Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace) + ": " +
             one_line(it.value());
    }
    return out + "}";
  }
  if (v.is_array()) {
    std::string out = "[";
    for (const auto& e : v) out += (out.size() > 1 ? ", " : "") + one_line(e);
    return out + "]";
  }
  return v.dump(-1, ' ', false, Json::error_handler_t::replace);
}

template <typename T, typename Get>
std::vector<T> get_list(const json& v, const std::string& path, std::string_view what, Get get) {
  if (!v.is_array()) type_fail(path, "a list of " + std::string(what), v);
  std::vector<T> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(get(v[i], element(path, i)));
  return out;
}

class DuplicateKeyFinder {
 public:
  bool operator()(int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start: frames_.push_back({false, 0, {}, {}}); break;
      case json::parse_event_t::array_start: frames_.push_back({true, 0, {}, {}}); break;
      case json::parse_event_t::key: {
        if (frames_.empty() || !parsed.is_string()) break;
        Frame& f = frames_.back();
        std::string key = parsed.get<std::string>();
        if (!found_ && !f.keys.insert(key).second) {
          found_ = true;
          path_ = current_path();
          key_ = key;
        }
        f.key = std::move(key);
        break;
      }
      case json::parse_event_t::object_end:
      case json::parse_event_t::array_end:
        if (!frames_.empty()) frames_.pop_back();
        element_done();
        break;
      case json::parse_event_t::value: element_done(); break;
    }
    return true;
  }

  bool found() const { return found_; }
  const std::string& path() const { return path_; }
  const std::string& key() const { return key_; }

 private:
  struct Frame {
    bool array;
    size_t index;
    std::string key;
    std::unordered_set<std::string> keys;
  };

  void element_done() {
    if (!frames_.empty() && frames_.back().array) ++frames_.back().index;
  }

  // The path of the innermost open container.
  std::string current_path() const {
    std::string p;
    for (size_t i = 0; i + 1 < frames_.size(); ++i) {
      p = frames_[i].array ? element(p, frames_[i].index) : child(p, frames_[i].key);
    }
    return p;
  }

  std::vector<Frame> frames_;
  bool found_ = false;
  std::string path_, key_;
};

// "line:column" (1-based) of a byte offset as nlohmann reports it (the count of bytes read; the error is at the
// last one).
inline std::string line_column(std::string_view text, size_t byte) {
  const size_t end = std::min(byte == 0 ? 0 : byte - 1, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < end; ++i) {
    if (text[i] == '\n') ++line, line_start = i + 1;
  }
  return std::to_string(line) + ":" + std::to_string(end - line_start + 1);
}

// The part of nlohmann's message after "parse error at line L, column C: ".
inline std::string syntax_detail(const std::string& what) {
  const size_t at = what.find("parse error");
  if (at == std::string::npos) return what;
  const size_t colon = what.find(": ", at);
  return colon == std::string::npos ? what : what.substr(colon + 2);
}

inline Status invalid(std::string message) { return Status(StatusCode::kInvalidArgument, std::move(message)); }

// Text files larger than this are refused (a device such as /dev/zero would otherwise be read forever).
constexpr size_t kMaxTextFileBytes = size_t{256} << 20;

// Reads a whole file; `what` names it in errors ("topology file"): "PATH: cannot open the topology file: REASON".
// A missing file is kNotFound; a directory, a file over kMaxTextFileBytes or a read error kInvalidArgument.
inline Result<std::string> read_text_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return invalid(path + ": cannot read the " + what + ": it is a directory");
  errno = 0;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    const int err = errno;
    return Status(err == ENOENT ? StatusCode::kNotFound : StatusCode::kInvalidArgument,
                  path + ": cannot open the " + what + ": " + std::strerror(err));
  }
  std::string text;
  char buf[65536];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    text.append(buf, n);
    if (text.size() > kMaxTextFileBytes) {
      std::fclose(f);
      return invalid(path + ": cannot read the " + what + ": larger than 256 MiB");
    }
  }
  const bool failed = std::ferror(f) != 0;
  const int err = errno;
  std::fclose(f);
  if (failed) return invalid(path + ": cannot read the " + what + ": " + std::strerror(err));
  return text;
}

// Parses text into *root. Errors: a syntax error (source:line:column), a duplicate key (source: path), or anything
// else the JSON library throws ("source: cannot read the <content>: ...").
inline Status parse_json(std::string_view text, const std::string& source, json* root,
                         std::string_view content = "JSON") {
  DuplicateKeyFinder duplicates;
  try {
    *root = json::parse(text.begin(), text.end(), std::ref(duplicates));
  } catch (const json::parse_error& e) {
    return invalid(source + ":" + line_column(text, e.byte) + ": JSON syntax error: " + syntax_detail(e.what()));
  } catch (const std::exception& e) {
    return invalid(source + ": cannot read the " + std::string(content) + ": " + e.what());
  }
  if (duplicates.found()) {
    std::string where = duplicates.path().empty() ? "top level" : duplicates.path();
    return invalid(error_prefix(source, where) + "duplicate key " + quote(duplicates.key()) +
                   " (each key may appear once in an object)");
  }
  return Status::Ok();
}

}  // namespace tessera::harness::json_read
