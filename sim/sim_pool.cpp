// Memory accounting of simulated devices (docs/simulator.md "Memory"): each device's own limit (its memory less the
// driver's reservation and the memory reported free that cannot be allocated) and the host pool that unified-memory
// devices share with the CPU device, counted once.
#include <algorithm>

#include "sim_impl.h"

namespace tessera::sim {

namespace {

size_t sub(size_t a, size_t b) { return a > b ? a - b : 0; }
size_t add(size_t a, size_t b) { return a > SIZE_MAX - b ? SIZE_MAX : a + b; }

}  // namespace

bool Simulator::Impl::in_pool(int device) const {
  return std::find(pool.members.begin(), pool.members.end(), static_cast<size_t>(device)) != pool.members.end();
}

// Called once the devices exist: the pool's members are the unified devices and the CPU device (the last device of
// type cpu), when there is at least one unified device.
void init_pool(Simulator::Impl* s) {
  int cpu = -1;
  for (size_t i = 0; i < s->topo.devices.size(); ++i) {
    if (s->topo.devices[i].type == DeviceType::kCpu) cpu = static_cast<int>(i);
  }
  for (size_t i = 0; i < s->topo.devices.size(); ++i) {
    if (s->topo.devices[i].unified) s->pool.members.push_back(i);
  }
  if (s->pool.members.empty() || cpu < 0) {
    s->pool.members.clear();
    return;
  }
  s->pool.members.push_back(static_cast<size_t>(cpu));
  s->pool.capacity = s->topo.devices[static_cast<size_t>(cpu)].memory;
  for (size_t m : s->pool.members) {
    s->pool.reserved = add(s->pool.reserved, s->topo.devices[m].reserved);
    if (s->opt.fit_margins) s->pool.margins = add(s->pool.margins, s->topo.devices[m].fit_margin);
  }
}

size_t SimDevice::taken_before_use() const { return add(cfg_.reserved, sim_->opt.fit_margins ? cfg_.fit_margin : 0); }

void SimDevice::memory(size_t* free, size_t* total) const {
  const size_t hide = sim_->opt.faults.hide_free_bytes;
  // Reported free memory includes the unallocatable part (that is what makes it unallocatable).
  size_t f = sub(sub(cfg_.memory, taken_before_use()), add(stats.memory_used, hide));
  if (sim_->in_pool(index_)) {
    const PoolStats& p = sim_->pool;
    f = std::min(f, sub(sub(p.capacity, add(p.reserved, p.margins)), add(p.used, hide)));
  }
  if (free != nullptr) *free = f;
  if (total != nullptr) *total = cfg_.memory;
}

Status SimDevice::reserve_memory(size_t size) {
  TS_DEBUG_ASSERT(stats.memory_used <= cfg_.memory, "simulated memory: device %s uses %zu bytes of its %zu (seed %llu)",
                  cfg_.name.c_str(), stats.memory_used, cfg_.memory, static_cast<unsigned long long>(sim_->opt.seed));
  const size_t allocatable = sub(sub(cfg_.memory, taken_before_use()), cfg_.unallocatable);
  const size_t free = sub(allocatable, stats.memory_used);
  if (size > free) {
    std::string overheads;
    if (cfg_.reserved > 0)
      overheads += format_message(", %s reserved by the driver", format_bytes(cfg_.reserved).c_str());
    if (sim_->opt.fit_margins && cfg_.fit_margin > 0)
      overheads += format_message(", %s fit margin", format_bytes(cfg_.fit_margin).c_str());
    if (cfg_.unallocatable > 0) {
      overheads += format_message(", %s reported free but not allocatable", format_bytes(cfg_.unallocatable).c_str());
    }
    return TS_ERROR(StatusCode::kAllocFailed, "%s: out of memory: asked %s, free %s of %s%s", cfg_.name.c_str(),
                    format_bytes(size).c_str(), format_bytes(free).c_str(), format_bytes(cfg_.memory).c_str(),
                    overheads.c_str());
  }
  const bool pooled = sim_->in_pool(index_);
  if (pooled) {
    PoolStats& p = sim_->pool;
    const size_t pool_free = sub(sub(p.capacity, add(p.reserved, p.margins)), p.used);
    if (size > pool_free) {
      std::string users;
      for (size_t m : p.members) {
        users += format_message("%s%s %s", users.empty() ? "" : ", ", sim_->devices[m]->config().name.c_str(),
                                format_bytes(sim_->devices[m]->stats.memory_used).c_str());
      }
      return TS_ERROR(StatusCode::kAllocFailed,
                      "%s: out of memory: asked %s, free %s of the host memory pool of %s that it shares (in use: "
                      "%s; reserved %s%s)",
                      cfg_.name.c_str(), format_bytes(size).c_str(), format_bytes(pool_free).c_str(),
                      format_bytes(p.capacity).c_str(), users.c_str(), format_bytes(p.reserved).c_str(),
                      p.margins > 0 ? format_message(", fit margins %s", format_bytes(p.margins).c_str()).c_str() : "");
    }
    p.used += size;
    p.peak = std::max(p.peak, p.used);
  }
  stats.memory_used += size;
  stats.memory_peak = std::max(stats.memory_peak, stats.memory_used);
  sim_->note_memory(index_, stats.memory_used);
  return Status::Ok();
}

void SimDevice::release_memory(size_t size) {
  TS_DEBUG_ASSERT(size <= stats.memory_used,
                  "simulated memory: device %s releases %zu bytes, more than the %zu it "
                  "uses (seed %llu)",
                  cfg_.name.c_str(), size, stats.memory_used, static_cast<unsigned long long>(sim_->opt.seed));
  const size_t n = std::min(size, stats.memory_used);
  stats.memory_used -= n;
  if (sim_->in_pool(index_)) sim_->pool.used -= std::min(n, sim_->pool.used);
  sim_->note_memory(index_, stats.memory_used);
}

PoolStats Simulator::pool_stats() const { return impl_->pool; }

}  // namespace tessera::sim
