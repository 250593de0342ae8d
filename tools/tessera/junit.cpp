// JUnit XML reports (see junit.h).
#include "junit.h"

#include <cstdio>

namespace tessera::tool {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default: out += c < 0x20 && c != '\t' && c != '\n' && c != '\r' ? '?' : ch;
    }
  }
  return out;
}

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3f", s);
  return buf;
}

}  // namespace

std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases) {
  size_t failures = 0, errors = 0;
  double total = 0;
  for (const JunitCase& c : cases) {
    failures += c.result == JunitCase::Result::kFailed ? 1 : 0;
    errors += c.result == JunitCase::Result::kError ? 1 : 0;
    total += c.seconds;
  }
  const std::string counts = "tests=\"" + std::to_string(cases.size()) + "\" failures=\"" + std::to_string(failures) +
                             "\" errors=\"" + std::to_string(errors) + "\"";
  std::string x = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n";
  x += "<testsuites name=\"" + escape(suite) + "\" " + counts + " time=\"" + seconds(total) + "\">\n";
  x += "  <testsuite name=\"" + escape(suite) + "\" " + counts + " skipped=\"0\" time=\"" + seconds(total) + "\">\n";
  for (const JunitCase& c : cases) {
    x += "    <testcase classname=\"scenario\" name=\"" + escape(c.name) + "\" file=\"" + escape(c.file) +
         "\" time=\"" + seconds(c.seconds) + "\"";
    if (c.result == JunitCase::Result::kPassed) {
      x +=
          c.details.empty() ? "/>\n" : ">\n      <system-out>" + escape(c.details) + "</system-out>\n    </testcase>\n";
      continue;
    }
    const bool failed = c.result == JunitCase::Result::kFailed;
    x += ">\n      <" + std::string(failed ? "failure" : "error") + " type=\"" +
         (failed ? "expectation" : "input error") + "\" message=\"" + escape(c.message) + "\">" + escape(c.details) +
         "</" + (failed ? "failure" : "error") + ">\n    </testcase>\n";
  }
  return x + "  </testsuite>\n</testsuites>\n";
}

}  // namespace tessera::tool
