#include "tessera/builtin.h"

#include "tessera/cpu.h"

namespace tessera {

std::unique_ptr<Registry> make_builtin_registry() {
  auto r = std::make_unique<Registry>();
  // The CPU registration is process-wide and outlives every registry.
  Status s = r->add_unowned(cpu::registration());
  TS_ASSERT(s.ok(), "%s", s.message().c_str());
  return r;
}

Registry& builtin_registry() {
  static std::unique_ptr<Registry> r = make_builtin_registry();
  return *r;
}

}  // namespace tessera
