// The simulator: creation from a topology, the virtual clock and the pending commands, links, the timeline.
#include "tessera/sim/simulator.h"

#include <algorithm>
#include <cmath>
#include <strings.h>

#include "sim_impl.h"

namespace tessera::sim {

namespace {

class SimRegistration final : public BackendReg {
 public:
  explicit SimRegistration(Simulator::Impl* sim) : sim_(sim) {}
  const char* name() const override { return "sim"; }
  size_t device_count() const override { return sim_->devices.size(); }
  Device* device(size_t i) const override { return i < sim_->devices.size() ? sim_->devices[i].get() : nullptr; }
  void* get_proc_address(const char* name) const override { return split_proc_address(name); }

 private:
  Simulator::Impl* sim_;
};

Status check_topology(const TopologyConfig& t) {
  if (t.devices.empty()) return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: no devices", t.name.c_str());
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceConfig& d = t.devices[i];
    if (d.name.empty()) {
      return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: device %zu has no name", t.name.c_str(), i);
    }
    if (same_name(d.name, "host")) {
      return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: device %zu: \"host\" is reserved for links",
                      t.name.c_str(), i);
    }
    for (size_t j = 0; j < i; ++j) {
      if (same_name(t.devices[j].name, d.name)) {
        return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: two devices named %s", t.name.c_str(),
                        d.name.c_str());
      }
    }
    if (d.alignment == 0 || (d.alignment & (d.alignment - 1)) != 0 || d.alignment > kMaxAlignment) {
      return TS_ERROR(StatusCode::kInvalidArgument,
                      "topology %s: device %s: alignment %zu is not a power of two up to 1 GiB", t.name.c_str(),
                      d.name.c_str(), d.alignment);
    }
    if (d.memory == 0 || d.max_alloc == 0) {
      return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: device %s: memory and max_alloc must be > 0",
                      t.name.c_str(), d.name.c_str());
    }
    if (d.unified && (d.type == DeviceType::kCpu || t.devices.back().type != DeviceType::kCpu)) {
      return TS_ERROR(StatusCode::kInvalidArgument,
                      "topology %s: device %s: a unified-memory device shares the host pool of the CPU device, which "
                      "must be the last device and not unified itself",
                      t.name.c_str(), d.name.c_str());
    }
  }
  for (const LinkConfig& l : t.links) {
    for (const std::string* end : {&l.a, &l.b}) {
      bool known = same_name(*end, "host");
      for (const DeviceConfig& d : t.devices) known = known || same_name(d.name, *end);
      if (!known) {
        return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: link %s-%s names unknown device %s", t.name.c_str(),
                        l.a.c_str(), l.b.c_str(), end->c_str());
      }
    }
    if (!(l.bandwidth > 0) || !(l.latency_us >= 0)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "topology %s: link %s-%s: bandwidth must be > 0, latency >= 0",
                      t.name.c_str(), l.a.c_str(), l.b.c_str());
    }
  }
  return check_hosts(t);
}

}  // namespace

const char* memory_mode_name(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::kBacked: return "memory-backed";
    case MemoryMode::kMetadata: return "metadata-only";
  }
  return "invalid";
}

std::string format_bytes(size_t n) {
  if (n >= GiB) return format_message("%.2f GiB", static_cast<double>(n) / static_cast<double>(GiB));
  if (n >= MiB) return format_message("%.2f MiB", static_cast<double>(n) / static_cast<double>(MiB));
  if (n >= KiB) return format_message("%.2f KiB", static_cast<double>(n) / static_cast<double>(KiB));
  return format_message("%zu B", n);
}

// ---- Impl ----

void Simulator::Impl::run_until(double t) {
  TS_DEBUG_ASSERT(now >= applied_until,
                  "simulator clock: host time %g us went back before %g us, the end of a command "
                  "already applied (seed %llu)",
                  now, applied_until, static_cast<unsigned long long>(opt.seed));
  while (!pending.empty() && pending.top().end <= t) {
    // (flush applies commands early, out of this order, and is left out of it)
    TS_DEBUG_ASSERT(pending.top().end >= applied_until,
                    "simulator queue: %s, ending at %g us, is applied after a "
                    "command ending at %g us: pending commands are applied out of end-time order (seed %llu)",
                    hz.describe_command(pending.top().command).c_str(), pending.top().end, applied_until,
                    static_cast<unsigned long long>(opt.seed));
    if constexpr (kCheckInvariants) applied_until = pending.top().end;
    // Move the command out before applying: applying may push nothing, but keep the queue consistent anyway.
    std::function<void()> apply = std::move(const_cast<Pending&>(pending.top()).apply);
    pending.pop();
    if (apply) apply();
  }
}

void Simulator::Impl::advance_host(double t) {
  if (t > now) now = t;
  run_until(now);
}

void Simulator::Impl::flush() {
  while (!pending.empty()) {
    std::function<void()> apply = std::move(const_cast<Pending&>(pending.top()).apply);
    pending.pop();
    if (apply) apply();
  }
}

double Simulator::Impl::jitter() {
  if (!opt.adversarial || !(opt.max_jitter_us > 0)) return 0.0;
  std::uniform_real_distribution<double> d(0.0, opt.max_jitter_us);
  return d(rng);
}

void Simulator::Impl::push(double end, std::function<void()> apply) {
  ++n_commands;
  TS_DEBUG_ASSERT(end >= now, "simulator clock: %s ends at %g us, before the host submitted it at %g us (seed %llu)",
                  hz.describe_command(hz.current_command()).c_str(), end, now,
                  static_cast<unsigned long long>(opt.seed));
  if (opt.mode == MemoryMode::kMetadata || !apply) return;
  pending.push({end, seq++, std::move(apply), hz.current_command()});
}

int Simulator::Impl::add_track(const std::string& name, int device) {
  trace.tracks.push_back({name, device});
  return static_cast<int>(trace.tracks.size()) - 1;
}

void Simulator::Impl::add_event(TraceKind kind, int track, std::string name, double start, double end, size_t bytes,
                                int peer) {
  if (!opt.record_trace) return;
  trace.events.push_back({kind, track, std::move(name), start, end, bytes, peer});
}

void Simulator::Impl::note_copy(const Tensor& dst) {
  if (!opt.record_trace || trace.events.empty() || dst.data == nullptr) return;
  copied_to[dst.data] = static_cast<int>(trace.events.size()) - 1;
}

void Simulator::Impl::note_memory(int device, size_t bytes) {
  if (!opt.record_trace) return;
  trace.counters.push_back({device, now, bytes});
}

// ---- Simulator ----

Simulator::Simulator(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Simulator::~Simulator() {
  // Buffers and backends must be gone; drop whatever is still pending without applying it.
  while (!impl_->pending.empty()) impl_->pending.pop();
}

Result<std::unique_ptr<Simulator>> Simulator::create(const TopologyConfig& topology, const SimOptions& options,
                                                     const Registry* real) {
  TS_RETURN_IF_ERROR(check_topology(topology));
  auto impl = std::make_unique<Impl>();
  impl->topo = topology;
  impl->opt = options;
  impl->rng.seed(options.seed);
  impl->hz.set_seed(options.seed);
  impl->reg = std::make_unique<SimRegistration>(impl.get());
  impl->add_track("host", -1);
  for (size_t i = 0; i < topology.devices.size(); ++i) {
    const DeviceConfig& cfg = topology.devices[i];
    Device* real_dev = nullptr;
    if (!cfg.wraps.empty()) {
      if (real == nullptr) {
        return TS_ERROR(StatusCode::kInvalidArgument,
                        "topology %s: device %s wraps the real device \"%s\", but no registry of real devices was "
                        "given to Simulator::create",
                        topology.name.c_str(), cfg.name.c_str(), cfg.wraps.c_str());
      }
      real_dev = real->device_by_name(cfg.wraps);
      if (real_dev == nullptr) {
        return TS_ERROR(StatusCode::kNotFound, "topology %s: device %s wraps unknown real device \"%s\"",
                        topology.name.c_str(), cfg.name.c_str(), cfg.wraps.c_str());
      }
      if (options.mode == MemoryMode::kMetadata) real_dev = nullptr;  // no real bytes, no real computation
    }
    impl->trace.devices.push_back(cfg.name);
    impl->devices.push_back(std::make_unique<SimDevice>(impl.get(), static_cast<int>(i), cfg, real_dev));
  }
  init_pool(impl.get());
  init_network(impl.get());
  return std::unique_ptr<Simulator>(new Simulator(std::move(impl)));
}

BackendReg* Simulator::registration() const { return impl_->reg.get(); }
size_t Simulator::device_count() const { return impl_->devices.size(); }
Device* Simulator::device(size_t i) const { return i < impl_->devices.size() ? impl_->devices[i].get() : nullptr; }
Device* Simulator::device_by_name(const std::string& name) const {
  for (const auto& d : impl_->devices) {
    if (same_name(d->config().name, name)) return d.get();
  }
  return nullptr;
}
const DeviceConfig& Simulator::device_config(size_t i) const { return impl_->devices[i]->config(); }
const TopologyConfig& Simulator::topology() const { return impl_->topo; }
const SimOptions& Simulator::options() const { return impl_->opt; }
uint64_t Simulator::seed() const { return impl_->opt.seed; }

Result<std::vector<std::unique_ptr<Backend>>> Simulator::make_backends() {
  std::vector<std::unique_ptr<Backend>> out;
  for (const auto& d : impl_->devices) {
    auto b = d->init_backend({});
    if (!b.ok()) return b.status();
    out.push_back(std::move(b).value());
  }
  return out;
}

void Simulator::finish() {
  for (SimBackend* s : impl_->streams) s->wait_idle();
  impl_->flush();
}

const std::vector<Race>& Simulator::races() const { return impl_->hz.races(); }

std::string Simulator::races_report(size_t max) const {
  const auto& r = impl_->hz.races();
  std::string out;
  for (size_t i = 0; i < r.size() && i < max; ++i) out += r[i].to_string() + "\n";
  if (r.size() > max) out += format_message("... and %zu more races\n", r.size() - max);
  return out;
}

const std::vector<std::string>& Simulator::errors() const { return impl_->errors; }
double Simulator::now_us() const { return impl_->now; }
uint64_t Simulator::commands() const { return impl_->n_commands; }
const SimCounters& Simulator::counters() const { return impl_->counters; }
DeviceStats Simulator::stats(size_t device) const { return impl_->devices[device]->stats; }
const Trace& Simulator::trace() const { return impl_->trace; }
HazardTracker& Simulator::hazards() { return impl_->hz; }

double Simulator::op_time_us(size_t device, const Tensor& node) const {
  return device < impl_->devices.size() ? sim::op_time_us(impl_->devices[device]->config(), node) : 0.0;
}

double Simulator::copy_time_us(int from, int to, size_t bytes) const { return impl_->copy_time_us(from, to, bytes); }

double Simulator::set_time_us(const Tensor& t) const {
  const SimBuffer* b = sim_buffer_of(impl_.get(), t);
  if (b == nullptr || tensor_buffer(t)->is_host()) return 0.0;
  return impl_->copy_time_us(-1, b->sim_device()->index(), nbytes(t));
}

bool is_simulated(const Device& device) { return dynamic_cast<const SimDevice*>(&device) != nullptr; }

}  // namespace tessera::sim
