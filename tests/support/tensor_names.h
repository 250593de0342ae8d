// Names of a llama.cpp model's tensors, as the tests spell them.
#pragma once

#include <string>

namespace tessera::test {

// "blk.<il>.<what>": a layer's tensor.
inline std::string blk(int il, const char* what) { return "blk." + std::to_string(il) + "." + what; }

}  // namespace tessera::test
