// Tessera's backend conformance suite (Tessera::conformance) instantiated for HostDev: every property test
// (buffers, tensor I/O, copies, events, graph compute, supports_op honesty, ...) and every op x type case of the op
// catalogue, each compared with a fresh CPU backend.
#include <memory>
#include <string>

#include "hostdev.h"
#include "tessera/conformance/backend_conformance.h"

namespace {

tessera::conformance::BackendFactory hostdev_factory() {
  tessera::conformance::BackendFactory f;
  f.name = "HostDev";
  f.make = [](std::string* skip_reason) -> std::unique_ptr<tessera::Backend> {
    // The registration owns the device, and the device must outlive every backend made from it: one per process.
    static const std::unique_ptr<tessera::BackendReg> reg = hostdev::make_registration();
    auto backend = reg->device(0)->init_backend({});
    if (!backend.ok()) {
      *skip_reason = backend.status().message();
      return nullptr;
    }
    return std::move(backend).value();
  };
  f.expect_full_op_support = true;  // it computes with the CPU reference kernels, which cover every op and type
  return f;
}

}  // namespace

TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(HostDev, hostdev_factory());
