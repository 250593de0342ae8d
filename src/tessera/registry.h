// Registry (docs/interfaces.md, 'Registrations and the registry'): lists registrations and their devices; finds them by
// name or type; initialises backends. Not a hidden global: a Registry is an ordinary object. builtin_registry()
// (tessera/builtin.h, target tessera::backends) returns one holding the backends compiled in. Scoped registrations let
// a test or a scenario add (simulated) devices for its own lifetime only.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "tessera/backend.h"

namespace tessera {

class Registry;

// Removes its registration from the registry when destroyed.
class ScopedRegistration {
 public:
  ScopedRegistration() = default;
  ScopedRegistration(Registry* registry, BackendReg* reg) : registry_(registry), reg_(reg) {}
  ScopedRegistration(ScopedRegistration&& o) noexcept;
  ScopedRegistration& operator=(ScopedRegistration&& o) noexcept;
  ~ScopedRegistration();
  BackendReg* get() const { return reg_; }

 private:
  void release();
  Registry* registry_ = nullptr;
  BackendReg* reg_ = nullptr;
};

class Registry {
 public:
  Registry() = default;
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  // Takes ownership. Errors: null, or a registration with the same name already present.
  Status add(std::unique_ptr<BackendReg> reg);
  // Registers a registration that outlives the registry (e.g. a compiled-in backend's process-wide one).
  Status add_unowned(BackendReg* reg);
  // Registers a registration the caller owns for the lifetime of the returned handle.
  Result<ScopedRegistration> add_scoped(BackendReg* reg);
  // Removes a registration (owned ones are destroyed). Errors: not registered.
  Status remove(BackendReg* reg);

  size_t reg_count() const { return regs_.size(); }
  BackendReg* reg(size_t i) const { return regs_[i].reg; }
  BackendReg* reg_by_name(const std::string& name) const;  // case-insensitive

  // Devices of every registration, in registration order.
  size_t device_count() const;
  Device* device(size_t i) const;
  std::vector<Device*> devices() const;
  Device* device_by_name(const std::string& name) const;  // case-insensitive
  Device* device_by_type(DeviceType type) const;          // first device of that type

  // Extension function of the registration with that name (nullptr when either is unknown).
  void* get_proc_address(const std::string& reg_name, const char* fn_name) const;

  Result<std::unique_ptr<Backend>> init_by_name(const std::string& device_name, const std::string& params = {}) const;
  Result<std::unique_ptr<Backend>> init_by_type(DeviceType type, const std::string& params = {}) const;
  // GPU first, then integrated GPU, then CPU.
  Result<std::unique_ptr<Backend>> init_best() const;

 private:
  struct Entry {
    BackendReg* reg;
    std::unique_ptr<BackendReg> owned;
  };
  std::vector<Entry> regs_;
};

}  // namespace tessera
