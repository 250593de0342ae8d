#include "tessera/builtin.h"

#include "tessera/cpu.h"
#ifdef TESSERA_HAVE_CUDA
#include "tessera/cuda.h"
#endif

namespace tessera {

std::unique_ptr<Registry> make_builtin_registry() {
  auto r = std::make_unique<Registry>();
  // The CPU registration is process-wide and outlives every registry.
  Status s = r->add_unowned(cpu::registration());
  TS_ASSERT(s.ok(), "%s", s.message().c_str());
#ifdef TESSERA_HAVE_CUDA
  // One device per visible GPU; none (and no error) without a GPU or a driver.
  s = r->add_unowned(cuda::registration());
  TS_ASSERT(s.ok(), "%s", s.message().c_str());
#endif
  return r;
}

Registry& builtin_registry() {
  static std::unique_ptr<Registry> r = make_builtin_registry();
  return *r;
}

}  // namespace tessera
