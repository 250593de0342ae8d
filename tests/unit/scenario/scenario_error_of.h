// The error a scenario text is refused with (a test failure when it is accepted), for the scenario parser's tests.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "tessera/scenario/scenario.h"

namespace tessera::scenario::test {

inline std::string error_of(const std::string& text) {
  auto s = parse_scenario(text, "case.json");
  EXPECT_FALSE(s.ok()) << "accepted: " << text;
  return s.ok() ? std::string() : s.status().message();
}

}  // namespace tessera::scenario::test
