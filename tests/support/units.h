// Byte units of the tests' expected sizes.
#pragma once

#include <cstddef>

namespace tessera::test {

inline constexpr size_t kMiB = size_t{1} << 20;

}  // namespace tessera::test
