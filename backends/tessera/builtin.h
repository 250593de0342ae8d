// The backends compiled into this build, as a registry (target tessera::backends).
#pragma once

#include <memory>

#include "tessera/registry.h"

namespace tessera {

// A new registry holding every compiled-in backend (CPU; CUDA when built). Tests make their own, so nothing they
// register leaks into another test.
std::unique_ptr<Registry> make_builtin_registry();
// One process-wide registry of the compiled-in backends, for programs that do not need isolation.
Registry& builtin_registry();

}  // namespace tessera
