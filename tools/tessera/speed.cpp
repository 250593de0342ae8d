// The speed a placement is expected to have (docs/bench.md "Speed in plan and fit"): llama-bench's pp512 and tg128
// simulated on the placement of a plan or of a fit candidate, and where each test's time goes.
#include <algorithm>
#include <cstdio>

#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/sim/simulator.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::llama;

namespace {

std::string ms(double us) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f ms", us / 1000.0);
  return buf;
}

// The devices of a test's summary by busy time, the busiest first; devices busy for nothing are left out.
std::vector<const sim::DeviceSummary*> by_busy(const sim::TraceSummary& s) {
  std::vector<const sim::DeviceSummary*> out;
  for (const sim::DeviceSummary& d : s.devices) {
    if (d.busy_us > 0) out.push_back(&d);
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const sim::DeviceSummary* a, const sim::DeviceSummary* b) { return a->busy_us > b->busy_us; });
  return out;
}

}  // namespace

Result<PlacementSpeed> placement_speed(const harness::SessionConfig& planned, bool llama_rules,
                                       const LlamaContextParams& params, const Registry* real_devices) {
  if (planned.graph) {
    return Status(StatusCode::kInvalidArgument, "a serialized graph has no prompt or generated tokens to time");
  }
  harness::SessionConfig c = planned;
  if (llama_rules) use_llama_cpp_rules(c, kLlamaCppNewestBuild, params);
  c.progress = nullptr;
  PlacementSpeed out;
  out.n_batch = std::max<int64_t>(1, params.n_batch);
  out.n_ubatch = std::max<int64_t>(1, std::min(params.n_ubatch, out.n_batch));
  const size_t at = c.topology.name.find(" --kernels ");
  if (at != std::string::npos) out.kernels = c.topology.name.substr(at + 11);
  auto pp = simulate_bench(c, {512, 0, 0}, out.n_batch, out.n_ubatch, real_devices);
  if (!pp.ok()) return pp.status();
  auto tg = simulate_bench(c, {0, 128, 0}, out.n_batch, out.n_ubatch, real_devices);
  if (!tg.ok()) return tg.status();
  out.pp = std::move(pp).value();
  out.tg = std::move(tg).value();
  return out;
}

std::string speed_breakdown(const sim::TraceSummary& s, size_t max_devices) {
  std::vector<const sim::DeviceSummary*> busy = by_busy(s);
  // a device busy for under 1 % of the time says nothing about where it goes
  std::erase_if(busy, [&s](const sim::DeviceSummary* d) { return d->busy_us < 0.01 * s.makespan_us; });
  std::string out;
  for (size_t i = 0; i < busy.size() && i < max_devices; ++i) {
    out += (out.empty() ? "" : ", ") + busy[i]->name + " " + ms(busy[i]->busy_us);
  }
  if (busy.size() > max_devices) out += format_message(" and %zu more", busy.size() - max_devices);
  return "busy " + (out.empty() ? std::string("none") : out) + "; " + sim::format_bytes(s.copy_bytes) + " copied";
}

std::string bottleneck(const sim::TraceSummary& s) {
  const std::vector<const sim::DeviceSummary*> busy = by_busy(s);
  return busy.empty() ? "" : busy.front()->name;
}

std::string speed_text(const PlacementSpeed& s) {
  std::string out = format_message("speed (simulated: llama-bench's tests at depth 0 with -b %lld -ub %lld):\n",
                                   static_cast<long long>(s.n_batch), static_cast<long long>(s.n_ubatch));
  out += format_message("  pp512 %10.2f t/s  the prompt in %s\n                    %s\n", s.pp.tokens_per_second,
                        ms(s.pp.time_us()).c_str(), speed_breakdown(s.pp.prompt_summary, 2).c_str());
  out += format_message("  tg128 %10.2f t/s  a token in %s\n                    %s\n", s.tg.tokens_per_second,
                        ms(s.tg.gen_summary.makespan_us).c_str(), speed_breakdown(s.tg.gen_summary, 2).c_str());
  out += s.kernels.empty() ? "  (the devices' peaks, no kernel profile; `--kernels first-fit`: the profile\n"
                             "  fitted to published llama-bench rows. docs/bench.md: how far to trust them)\n"
                           : "  (kernel profile " + s.kernels + "; docs/bench.md says how far to trust it)\n";
  return out;
}

nlohmann::ordered_json speed_json(const PlacementSpeed& s) {
  using ojson = nlohmann::ordered_json;
  auto summary = [](const sim::TraceSummary& t) {
    ojson devices = ojson::array();
    for (const sim::DeviceSummary& d : t.devices) {
      devices.push_back({{"device", d.name},
                         {"busy_us", d.busy_us},
                         {"compute_us", d.compute_us},
                         {"copy_bytes_in", d.copy_bytes_in}});
    }
    return ojson{{"time_us", t.makespan_us}, {"copy_bytes", t.copy_bytes}, {"devices", devices}};
  };
  ojson j;
  j["n_batch"] = s.n_batch;
  j["n_ubatch"] = s.n_ubatch;
  j["kernels"] = s.kernels.empty() ? ojson(nullptr) : ojson(s.kernels);
  j["pipeline_parallel"] = s.pp.pipelined;
  j["pp512"] = {{"tokens_per_second", s.pp.tokens_per_second},
                {"time_us", s.pp.time_us()},
                {"prompt", summary(s.pp.prompt_summary)}};
  j["tg128"] = {
      {"tokens_per_second", s.tg.tokens_per_second}, {"time_us", s.tg.time_us()}, {"token", summary(s.tg.gen_summary)}};
  return j;
}

}  // namespace tessera::tool
