// HostDev: a backend of this project's own, written against Tessera's installed interfaces (tessera/backend.h). Its
// device keeps tensors in its own host-memory buffer type ("HOSTDEV", 128-byte aligned) and computes by handing the
// graph to a CPU backend running the reference kernels -- the smallest real Device / BufferType / Backend /
// BackendReg, standing in for a runtime developer's accelerator.
#pragma once

#include <memory>

#include "tessera/backend.h"

namespace hostdev {

constexpr size_t kAlignment = 128;

// A new registration ("HostDev") owning one device named "HOSTDEV". Give it to a tessera::Registry (Registry::add)
// to make the device visible, e.g. to the simulator's wrapped devices.
std::unique_ptr<tessera::BackendReg> make_registration();

// Is this backend a HostDev backend?
bool is_hostdev(const tessera::Backend& backend);

}  // namespace hostdev
