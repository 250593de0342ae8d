// The memory keys of a topology's devices: unified memory, overheads and the fit margin (docs/topology.md "Unified
// memory and overheads"), and the fit margins applied to a whole topology (topology.h).
#include "topology_memory.h"

#include "common/json_read.h"
#include "tessera/harness/topology/topology.h"

namespace tessera::harness {

using namespace tessera::sim;
using namespace json_read;
using ojson = nlohmann::ordered_json;

namespace topology_memory {

void parse(const json& v, const std::string& path, DeviceConfig* d) {
  if (const json* x = member(v, "unified")) d->unified = get_bool(*x, child(path, "unified"));
  if (const json* x = member(v, "reserved")) d->reserved = get_size(*x, child(path, "reserved"));
  if (const json* x = member(v, "unallocatable")) d->unallocatable = get_size(*x, child(path, "unallocatable"));
  if (const json* x = member(v, "fit_margin")) d->fit_margin = get_size(*x, child(path, "fit_margin"));
  if (d->unified && member(v, "memory") == nullptr) d->memory = 0;  // the whole pool (resolve)
}

void resolve(TopologyConfig* t) {
  if (t->devices.empty()) return;
  const DeviceConfig& cpu = t->devices.back();
  for (DeviceConfig& d : t->devices) {
    if (d.unified && d.memory == 0) d.memory = cpu.type == DeviceType::kCpu ? cpu.memory : DeviceConfig{}.memory;
  }
}

namespace {

size_t add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

}  // namespace

Status validate(const TopologyConfig& t) {
  if (t.devices.empty()) return Status::Ok();
  const size_t last = t.devices.size() - 1;
  const DeviceConfig& cpu = t.devices[last];
  size_t pool_reserved = 0;
  std::string pool_members;
  bool any_unified = false;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceConfig& d = t.devices[i];
    const std::string path = element("devices", i);
    if (add(d.reserved, d.unallocatable) >= d.memory) {
      return invalid(child(path, d.reserved > 0 ? "reserved" : "unallocatable") + ": " + format_size(d.reserved) +
                     " reserved and " + format_size(d.unallocatable) + " unallocatable leave nothing of the memory (" +
                     format_size(d.memory) + ") to allocate (rule: reserved + unallocatable < memory)");
    }
    const size_t allocatable = d.memory - d.reserved - d.unallocatable;
    if (d.fit_margin > allocatable) {
      return invalid(child(path, "fit_margin") + ": " + format_size(d.fit_margin) + " is above the " +
                     format_size(allocatable) +
                     " the device can allocate (rule: fit_margin <= memory - reserved - unallocatable)");
    }
    if (!d.unified) continue;
    any_unified = true;
    if (i == last) {
      return invalid(child(path, "unified") + ": the CPU device holds the host pool and cannot share it (rule: only " +
                     "a device before the CPU may be unified)");
    }
    if (cpu.type != DeviceType::kCpu) {
      return invalid(child(path, "unified") + ": a unified-memory device shares the CPU device's memory, and " +
                     "the last device is not the CPU (rule: a unified device needs the CPU device last)");
    }
    if (d.memory > cpu.memory) {
      return invalid(child(path, "memory") + ": the unified-memory share " + format_size(d.memory) +
                     " is above the host pool of " + format_size(cpu.memory) + " (devices[" + std::to_string(last) +
                     "] " + quote(cpu.name) + " memory) (rule: a unified device's memory is at most the pool)");
    }
    pool_reserved = add(pool_reserved, d.reserved);
    pool_members += d.name + " " + format_size(d.reserved) + ", ";
  }
  if (any_unified) {
    pool_reserved = add(pool_reserved, cpu.reserved);
    pool_members += cpu.name + " " + format_size(cpu.reserved);
    if (pool_reserved >= cpu.memory) {
      return invalid(child(element("devices", last), "memory") + ": the reservations of the devices sharing the " +
                     "host pool (" + pool_members + ") come to " + format_size(pool_reserved) +
                     ", leaving nothing of the pool (" + format_size(cpu.memory) +
                     ") (rule: the pool's reservations < the pool)");
    }
  }
  return Status::Ok();
}

void write(const DeviceConfig& d, ojson* o) {
  if (d.unified) (*o)["unified"] = true;
  if (d.reserved > 0) (*o)["reserved"] = format_size(d.reserved);
  if (d.unallocatable > 0) (*o)["unallocatable"] = format_size(d.unallocatable);
  if (d.fit_margin > 0) (*o)["fit_margin"] = format_size(d.fit_margin);
}

}  // namespace topology_memory

std::string fit_margins_note(const TopologyConfig& t) {
  std::string s;
  for (const DeviceConfig& d : t.devices) {
    if (d.fit_margin > 0) s += (s.empty() ? "" : ", ") + d.name + " " + format_size(d.fit_margin);
  }
  return s.empty() ? s : "fit margins (left free): " + s + "\n";
}

}  // namespace tessera::harness
