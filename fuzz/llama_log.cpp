// Fuzz target: the llama.cpp / ollama log reader (docs/compare-log.md). Any text: parse_llama_log returns a record or
// an error naming the source; it never crashes, throws, leaks or hangs. In an accepted record every line is used,
// skipped or listed as unused (none dropped), every line number is within the input and increasing in the unused
// list, figures are finite and non-negative, and the same text with CRLF line ends reads to the same figures.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "tessera/harness/llama_log.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string source = "fuzz.log";
  const std::string text(fuzz::as_text(data, size));
  auto parsed = harness::parse_llama_log(text, source);
  if (!parsed.ok()) {
    const std::string message = parsed.status().to_string();
    FUZZ_CHECK(message.find(source + ":") != std::string::npos, "the error does not name the source: " + message);
    return 0;
  }
  const harness::LlamaLog& log = *parsed;
  FUZZ_CHECK(log.lines_used > 0, "an accepted log with no line used");
  FUZZ_CHECK(log.lines_used + log.lines_skipped + static_cast<int>(log.unused.size()) == log.lines,
             "lines used + skipped + unused != lines: " + std::to_string(log.lines_used) + " + " +
                 std::to_string(log.lines_skipped) + " + " + std::to_string(log.unused.size()) +
                 " != " + std::to_string(log.lines));
  int previous = 0;
  for (const harness::LlamaLogLine& u : log.unused) {
    FUZZ_CHECK(u.line > previous && u.line <= log.lines, "unused line number out of order or range");
    FUZZ_CHECK(!u.text.empty(), "an empty line listed as unused");
    previous = u.line;
  }
  for (const harness::LlamaLogBuffer& b : log.figures.buffers) {
    FUZZ_CHECK(std::isfinite(b.mib) && b.mib >= 0, "a buffer size not finite or negative");
    FUZZ_CHECK(b.line >= 1 && b.line <= log.lines && !b.device.empty() && !b.kind.empty(), "a malformed buffer");
  }
  for (const harness::LlamaLogFailedAlloc& a : log.failed_allocs) {
    FUZZ_CHECK(a.line >= 1 && a.line <= log.lines, "a failed allocation's line out of range");
    FUZZ_CHECK(!a.mib || (std::isfinite(*a.mib) && *a.mib >= 0), "a failed allocation size not finite");
  }
  // CRLF line ends read the same (the figures and the unused lines).
  std::string crlf;
  crlf.reserve(text.size() * 2);
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto again = harness::parse_llama_log(crlf, source);
  FUZZ_CHECK(again.ok(), "the CRLF text is not read: " + again.status().to_string());
  FUZZ_CHECK(again->figures.buffers.size() == log.figures.buffers.size(), "CRLF changes the buffers");
  for (size_t i = 0; i < log.figures.buffers.size(); ++i) {
    FUZZ_CHECK(again->figures.buffers[i].mib == log.figures.buffers[i].mib &&
                   again->figures.buffers[i].device == log.figures.buffers[i].device,
               "CRLF changes a buffer");
  }
  FUZZ_CHECK(again->unused.size() == log.unused.size(), "CRLF changes the unused lines");
  FUZZ_CHECK(again->failed_allocs.size() == log.failed_allocs.size(), "CRLF changes the failed allocations");
  return 0;
}
