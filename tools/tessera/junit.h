// JUnit XML for `tessera repro --junit FILE`: one test case per scenario file, the form CI dashboards read (Jenkins,
// GitLab, GitHub test reporters).
#pragma once

#include <string>
#include <vector>

namespace tessera::tool {

struct JunitCase {
  enum class Result { kPassed, kFailed, kError };  // kError: the file could not be read or parsed (not run)
  std::string name;                                // the scenario's name (the file's path when it could not be read)
  std::string file;
  double seconds = 0;
  Result result = Result::kPassed;
  std::string message;  // a failure's or an error's one line
  std::string details;  // the expectations, one a line
};

// A <testsuites> document with one <testsuite> named `suite`; text is escaped, characters XML 1.0 cannot hold become
// '?'.
std::string junit_xml(const std::string& suite, const std::vector<JunitCase>& cases);

}  // namespace tessera::tool
