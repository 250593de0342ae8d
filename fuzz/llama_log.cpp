// Fuzz target: the llama.cpp / ollama log reader (docs/compare-log.md). Any text: parse_llama_log returns a record or
// an error naming the source; it never crashes, throws, leaks or hangs. In an accepted record every line is used,
// skipped or listed as unused (none dropped), every line number is within the input and increasing in the unused
// list, figures are finite and non-negative, and the same text with CRLF line ends reads to the same figures. A
// record of a small model (the printed metadata and context kept small, so one input stays fast) is also predicted
// (tessera/llama/llama_log_predict.h): an error names the source, and every predicted figure is finite.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "tessera/builtin.h"
#include "tessera/llama/llama_log.h"
#include "tessera/llama/llama_log_predict.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string source = "fuzz.log";
  const std::string text(fuzz::as_text(data, size));
  auto parsed = llama::parse_llama_log(text, source);
  if (!parsed.ok()) {
    const std::string message = parsed.status().to_string();
    FUZZ_CHECK(message.find(source + ":") != std::string::npos, "the error does not name the source: " + message);
    return 0;
  }
  const llama::LlamaLog& log = *parsed;
  FUZZ_CHECK(log.lines_used > 0, "an accepted log with no line used");
  FUZZ_CHECK(log.lines_used + log.lines_skipped + static_cast<int>(log.unused.size()) == log.lines,
             "lines used + skipped + unused != lines: " + std::to_string(log.lines_used) + " + " +
                 std::to_string(log.lines_skipped) + " + " + std::to_string(log.unused.size()) +
                 " != " + std::to_string(log.lines));
  int previous = 0;
  for (const llama::LlamaLogLine& u : log.unused) {
    FUZZ_CHECK(u.line > previous && u.line <= log.lines, "unused line number out of order or range");
    FUZZ_CHECK(!u.text.empty(), "an empty line listed as unused");
    previous = u.line;
  }
  for (const llama::LlamaLogBuffer& b : log.figures.buffers) {
    FUZZ_CHECK(std::isfinite(b.mib) && b.mib >= 0, "a buffer size not finite or negative");
    FUZZ_CHECK(b.line >= 1 && b.line <= log.lines && !b.device.empty() && !b.kind.empty(), "a malformed buffer");
  }
  for (const llama::LlamaLogFailedAlloc& a : log.failed_allocs) {
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
  auto again = llama::parse_llama_log(crlf, source);
  FUZZ_CHECK(again.ok(), "the CRLF text is not read: " + again.status().to_string());
  FUZZ_CHECK(again->figures.buffers.size() == log.figures.buffers.size(), "CRLF changes the buffers");
  for (size_t i = 0; i < log.figures.buffers.size(); ++i) {
    FUZZ_CHECK(again->figures.buffers[i].mib == log.figures.buffers[i].mib &&
                   again->figures.buffers[i].device == log.figures.buffers[i].device,
               "CRLF changes a buffer");
  }
  FUZZ_CHECK(again->unused.size() == log.unused.size(), "CRLF changes the unused lines");
  FUZZ_CHECK(again->failed_allocs.size() == log.failed_allocs.size(), "CRLF changes the failed allocations");

  // Predictions, for small models only: every hyperparameter the metadata prints, and the context, bounded.
  auto small = [](const std::optional<int64_t>& v, int64_t most) { return !v || (*v >= 0 && *v <= most); };
  bool bounded =
      small(log.model.n_layer, 4) && small(log.model.n_embd, 1024) && small(log.model.n_vocab, 4096) &&
      small(log.model.n_expert, 8) && small(log.context.n_ctx, 4096) && small(log.context.kv_size, 4096) &&
      small(log.context.n_batch, 4096) && small(log.context.n_ubatch, 4096) &&
      small(log.context.offloaded_layers ? std::optional<int64_t>(log.context.offloaded_layers->value) : std::nullopt,
            64) &&
      small(log.context.repeating_offloaded, 64);
  for (const auto& [key, value] : log.model.kv) {
    // Any other number in the metadata (feed_forward_length, head sizes, ...) is bounded too.
    int64_t n = 0;
    bool digits = !value.empty() && value.size() < 19;
    for (char c : value) digits = digits && c >= '0' && c <= '9';
    if (digits) n = std::stoll(value);
    bounded = bounded && (!digits || n <= 4096 || key.find("token_id") != std::string::npos);
  }
  for (const auto& [key, value] : log.model.info) bounded = bounded && value.size() < 6;
  if (!bounded) return 0;
  llama::LogPredictOptions options;
  options.real_devices = &builtin_registry();
  // (no identification among the published models: it builds their headers and plans models of billions of
  // parameters, seconds per input; tests/CMakeLists.txt's cli.compare_log.identifies_* cover it)
  options.identify = false;
  auto predicted = llama::predict_log(log, options);
  if (!predicted.ok()) {
    const std::string message = predicted.status().to_string();
    FUZZ_CHECK(message.find(source) != std::string::npos, "a prediction error does not name the source: " + message);
    return 0;
  }
  for (const llama::LogFigure& f : predicted->figures) {
    FUZZ_CHECK(!f.predicted || std::isfinite(*f.predicted), "a predicted figure is not finite");
    FUZZ_CHECK(f.predicted.has_value() || !f.missing.empty(), "a figure neither predicted nor saying what is missing");
  }
  return 0;
}
