#include "tessera/registry.h"

#include <algorithm>
#include <strings.h>

namespace tessera {

ScopedRegistration::ScopedRegistration(ScopedRegistration&& o) noexcept : registry_(o.registry_), reg_(o.reg_) {
  o.registry_ = nullptr;
  o.reg_ = nullptr;
}

ScopedRegistration& ScopedRegistration::operator=(ScopedRegistration&& o) noexcept {
  if (this != &o) {
    release();
    registry_ = o.registry_;
    reg_ = o.reg_;
    o.registry_ = nullptr;
    o.reg_ = nullptr;
  }
  return *this;
}

ScopedRegistration::~ScopedRegistration() { release(); }

void ScopedRegistration::release() {
  if (registry_ != nullptr && reg_ != nullptr) (void)registry_->remove(reg_);
  registry_ = nullptr;
  reg_ = nullptr;
}

Status Registry::add(std::unique_ptr<BackendReg> reg) {
  if (reg == nullptr) return Status(StatusCode::kInvalidArgument, "registry: null registration");
  if (reg_by_name(reg->name()) != nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "registry: a registration named '%s' already exists", reg->name());
  }
  BackendReg* raw = reg.get();
  regs_.push_back({raw, std::move(reg)});
  return Status::Ok();
}

Status Registry::add_unowned(BackendReg* reg) {
  if (reg == nullptr) return Status(StatusCode::kInvalidArgument, "registry: null registration");
  if (reg_by_name(reg->name()) != nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "registry: a registration named '%s' already exists", reg->name());
  }
  regs_.push_back({reg, nullptr});
  return Status::Ok();
}

Result<ScopedRegistration> Registry::add_scoped(BackendReg* reg) {
  TS_RETURN_IF_ERROR(add_unowned(reg));
  return ScopedRegistration(this, reg);
}

Status Registry::remove(BackendReg* reg) {
  auto it = std::find_if(regs_.begin(), regs_.end(), [&](const Entry& e) { return e.reg == reg; });
  if (it == regs_.end()) return Status(StatusCode::kNotFound, "registry: registration is not registered");
  regs_.erase(it);
  return Status::Ok();
}

BackendReg* Registry::reg_by_name(const std::string& name) const {
  for (const Entry& e : regs_) {
    if (strcasecmp(e.reg->name(), name.c_str()) == 0) return e.reg;
  }
  return nullptr;
}

size_t Registry::device_count() const {
  size_t n = 0;
  for (const Entry& e : regs_) n += e.reg->device_count();
  return n;
}

Device* Registry::device(size_t i) const {
  for (const Entry& e : regs_) {
    if (i < e.reg->device_count()) return e.reg->device(i);
    i -= e.reg->device_count();
  }
  return nullptr;
}

std::vector<Device*> Registry::devices() const {
  std::vector<Device*> out;
  for (const Entry& e : regs_) {
    for (size_t i = 0; i < e.reg->device_count(); ++i) out.push_back(e.reg->device(i));
  }
  return out;
}

Device* Registry::device_by_name(const std::string& name) const {
  for (Device* d : devices()) {
    if (strcasecmp(d->name(), name.c_str()) == 0) return d;
  }
  return nullptr;
}

Device* Registry::device_by_type(DeviceType type) const {
  for (Device* d : devices()) {
    if (d->type() == type) return d;
  }
  return nullptr;
}

void* Registry::get_proc_address(const std::string& reg_name, const char* fn_name) const {
  BackendReg* r = reg_by_name(reg_name);
  return r != nullptr ? r->get_proc_address(fn_name) : nullptr;
}

Result<std::unique_ptr<Backend>> Registry::init_by_name(const std::string& device_name,
                                                        const std::string& params) const {
  Device* d = device_by_name(device_name);
  if (d == nullptr) {
    std::string known;
    for (Device* dev : devices()) known += std::string(known.empty() ? "" : ", ") + dev->name();
    return TS_ERROR(StatusCode::kNotFound, "no device named '%s' (known: %s)", device_name.c_str(),
                    known.empty() ? "none" : known.c_str());
  }
  return d->init_backend(params);
}

Result<std::unique_ptr<Backend>> Registry::init_by_type(DeviceType type, const std::string& params) const {
  Device* d = device_by_type(type);
  if (d == nullptr) return TS_ERROR(StatusCode::kNotFound, "no device of type %s", device_type_name(type));
  return d->init_backend(params);
}

Result<std::unique_ptr<Backend>> Registry::init_best() const {
  for (DeviceType t : {DeviceType::kGpu, DeviceType::kIgpu, DeviceType::kCpu}) {
    if (device_by_type(t) != nullptr) return init_by_type(t);
  }
  return Status(StatusCode::kNotFound, "no GPU, integrated GPU or CPU device is registered");
}

}  // namespace tessera
