// The llama.cpp / ollama log reader (tessera/llama/llama_log.h, docs/compare-log.md): line cleaning and the
// dispatch of each line to the element it prints. Hand-written scanning, no std::regex (long pasted lines must not
// recurse). The pieces a line is made of are in llama_log_scan.h.
#include "tessera/llama/llama_log.h"

#include <fstream>
#include <sstream>

#include "llama_log_scan.h"

namespace tessera::llama {

using namespace llama_log_scan;

namespace {

// Journal prefix: "Apr 17 23:09:42 host ollama[2840147]: ".
bool strip_journal(std::string_view& s) {
  static const char* kMonths[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};
  if (s.size() < 16) return false;
  bool month = false;
  for (const char* m : kMonths) month = month || s.substr(0, 3) == m;
  if (!month || s[3] != ' ') return false;
  std::string_view rest = s.substr(4);
  trim_left(rest);
  int64_t day = 0;
  if (!take_int(rest, day) || rest.empty() || rest[0] != ' ') return false;
  trim_left(rest);
  // HH:MM:SS
  if (rest.size() < 9 || rest[2] != ':' || rest[5] != ':') return false;
  rest.remove_prefix(8);
  const size_t end = rest.find("]: ");
  if (end == std::string_view::npos || end > 160) return false;
  s = rest.substr(end + 3);
  return true;
}

// docker compose: "ollama  | ".
bool strip_compose(std::string_view& s) {
  const size_t bar = s.find(" | ");
  if (bar == std::string_view::npos || bar == 0 || bar > 64) return false;
  std::string_view name = s.substr(0, bar);
  while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
  for (char c : name) {
    if (!(is_ident(c) || c == '-' || c == '.')) return false;
  }
  if (name.empty()) return false;
  s = s.substr(bar + 3);
  return true;
}

// llama.cpp's common_log with timestamps: "0.00.035.060 I ", or an ISO timestamp "2025-01-10T16:31:02.292Z ".
bool strip_timestamp(std::string_view& s) {
  if (s.empty() || !is_digit(s[0])) return false;
  size_t i = 0;
  int dots = 0, dashes = 0, colons = 0;
  while (i < s.size() && s[i] != ' ') {
    const char c = s[i];
    if (c == '.')
      ++dots;
    else if (c == '-')
      ++dashes;
    else if (c == ':')
      ++colons;
    else if (!(is_digit(c) || c == 'T' || c == 'Z' || c == '+'))
      return false;
    ++i;
  }
  if (i >= s.size()) return false;
  std::string_view rest = s.substr(i + 1);
  if (dots == 3 && dashes == 0 && colons == 0) {  // "0.00.035.060 I "
    if (rest.size() >= 2 && std::string_view("IWEDN").find(rest[0]) != std::string_view::npos && rest[1] == ' ') {
      s = rest.substr(2);
      return true;
    }
    return false;
  }
  if (dashes == 2 && (colons >= 2 || s.substr(0, i).find('T') != std::string_view::npos || colons == 0)) {
    // a date, maybe followed by a time token
    if (colons == 0 && rest.size() > 8 && is_digit(rest[0]) && rest[2] == ':') {
      const size_t sp = rest.find(' ');
      if (sp == std::string_view::npos) return false;
      rest = rest.substr(sp + 1);
    }
    s = rest;
    return true;
  }
  return false;
}

}  // namespace

std::string clean_log_line(std::string_view raw) {
  std::string out;
  out.reserve(raw.size());
  for (size_t i = 0; i < raw.size(); ++i) {
    const char c = raw[i];
    if (c == '\x1b') {  // CSI: ESC [ parameters final-byte
      if (i + 1 < raw.size() && raw[i + 1] == '[') {
        size_t j = i + 2;
        while (j < raw.size() && !(raw[j] >= '@' && raw[j] <= '~')) ++j;
        i = j;
      }
      continue;
    }
    if (c == '\r') continue;
    out += c;
  }
  std::string_view s(out);
  trim_left(s);
  for (int round = 0; round < 3; ++round) {
    const bool stripped = strip_journal(s) || strip_compose(s) || strip_timestamp(s);
    trim_left(s);
    if (!stripped) break;
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return std::string(s);
}

Result<LlamaLog> parse_llama_log(std::string_view text, const std::string& source) {
  LlamaLog log;
  log.source = source;
  Reader reader(log);
  bool header = true;                                  // the fidelity files' leading "# " lines
  std::vector<std::pair<int, std::string>> continued;  // the lines of a command continued with '\' so far
  size_t pos = 0;
  int number = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++number;
    if (raw.find('\0') != std::string_view::npos) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: line %d: a NUL byte: not a text log", source.c_str(), number);
    }
    // ollama's runner (its journal or docker prefix, its Go lines, its model store): see LlamaLog::ollama.
    if (!log.ollama &&
        (raw.find("ollama[") != std::string_view::npos || raw.find("ollama  |") != std::string_view::npos ||
         raw.find("source=server.go") != std::string_view::npos ||
         raw.find("source=runner.go") != std::string_view::npos ||
         raw.find(".ollama/models/blobs") != std::string_view::npos ||
         raw.find(".ollama\\models\\blobs") != std::string_view::npos)) {
      log.ollama = true;
    }
    const std::string line = clean_log_line(raw);
    if (line.empty()) {
      ++log.lines_skipped;
      continue;
    }
    if (header && line.rfind("# ", 0) == 0) {
      ++log.lines_skipped;
      continue;
    }
    header = false;
    if (line.rfind("[... cut by Tessera", 0) == 0) {
      ++log.lines_skipped;
      continue;
    }
    // A command continued over several lines ("./llama-cli \", "  -ngl 99 \", ...): joined, and read as one.
    if (!continued.empty() || (line.size() > 1 && line.back() == '\\')) {
      continued.emplace_back(number, line);
      if (line.back() == '\\') continue;
      std::string joined;
      for (const auto& [n, l] : continued) {
        joined += l.back() == '\\' ? l.substr(0, l.size() - 1) : l;
      }
      std::vector<std::pair<int, std::string>> lines;
      lines.swap(continued);
      if (!log.command && llama_log_scan::is_command_line(joined)) {
        log.command = LogText{joined, lines.front().first};
        log.lines_used += static_cast<int>(lines.size());
        continue;
      }
      for (const auto& [n, l] : lines) {
        if (reader.line(l, n)) {
          ++log.lines_used;
        } else {
          log.unused.push_back({n, l});
        }
      }
      continue;
    }
    if (log.draft_line == 0 && line.find("loading draft model") != std::string::npos) log.draft_line = number;
    if (log.draft_line != 0) {
      // llama-server loads a draft model after the main one: its metadata, devices and buffers are not the main
      // model's, so from there on lines are listed as not used.
      log.unused.push_back({number, line});
    } else if (reader.line(line, number)) {
      ++log.lines_used;
    } else {
      log.unused.push_back({number, line});
    }
  }
  for (const auto& [n, l] : continued) log.unused.push_back({n, l});  // a continuation the text ends in
  log.lines = number;
  reader.finish();
  if (log.lines_used == 0) {
    return TS_ERROR(StatusCode::kInvalidArgument,
                    "%s: no llama.cpp log line found in %d lines (expected e.g. 'load_tensors: CUDA0 model buffer "
                    "size = ... MiB' or 'llama_context: n_ctx = ...')",
                    source.c_str(), number);
  }
  return log;
}

Result<LlamaLog> read_llama_log_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return TS_ERROR(StatusCode::kNotFound, "%s: cannot open the log file", path.c_str());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) return TS_ERROR(StatusCode::kInvalidArgument, "%s: cannot read the log file", path.c_str());
  return parse_llama_log(ss.str(), path);
}

}  // namespace tessera::llama
