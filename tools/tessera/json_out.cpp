// The `tessera` tool's headline and --json objects (docs/json.md).
#include "json_out.h"

#include "tessera/gguf.h"
#include "tessera/harness/topology.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::sim;

std::string headline(const Session& s) {
  const SessionConfig& c = s.config();
  std::string weights;
  if (c.sim.mode == MemoryMode::kBacked && !c.graph && c.model.weights_file != nullptr) {
    weights = ", weights from " + c.model.weights_file->metadata().source;
  }
  return format_message("%s on topology %s, %s%s", s.describe_workload().c_str(), c.topology.name.c_str(),
                        memory_mode_name(c.sim.mode), weights.c_str());
}

std::string workload_name(const SessionConfig& c) { return c.graph ? c.graph->source : c.model.name; }

ojson memory_json(Session& s) {
  ojson devs = ojson::array();
  for (const DeviceMemory& m : s.memory()) {
    devs.push_back({{"device", m.device},
                    {"layers", m.layers},
                    {"weights", m.weights},
                    {"kv_cache", m.cache},
                    {"compute", m.compute},
                    {"peak", m.peak},
                    {"capacity", m.capacity}});
  }
  return devs;
}

ojson splits_json(Session& s) {
  ojson out = ojson::array();
  for (const auto& sp : s.sched().splits()) {
    ojson inputs = ojson::array();
    for (const Tensor* in : sp.inputs) inputs.push_back({{"name", in->name}, {"bytes", nbytes(*in)}});
    out.push_back({{"backend", s.sched().backend(sp.backend)->name()},
                   {"first_node", sp.i_start},
                   {"end_node", sp.i_end},
                   {"inputs", inputs}});
  }
  return out;
}

ojson plan_json(Session& s, const std::vector<std::string>& explain) {
  ojson j = {{"topology", s.config().topology.name},
             {"model", workload_name(s.config())},
             {"splits", s.sched().n_splits()},
             {"devices", memory_json(s)},
             {"split_list", splits_json(s)}};
  ojson ex = ojson::array();
  for (const std::string& name : explain) ex.push_back(s.explain(name));
  j["explain"] = ex;
  return j;
}

ojson run_json(Session& s, const RunStats& st, const TraceSummary& sum, bool numerics_ok) {
  return {{"topology", s.config().topology.name},
          {"model", workload_name(s.config())},
          {"splits", s.sched().n_splits()},
          {"devices", memory_json(s)},
          {"makespan_us", sum.makespan_us},
          {"copy_bytes", sum.copy_bytes},
          {"races", st.races},
          {"numerics_checked", st.checked},
          {"nmse", st.nmse},
          {"non_finite", st.non_finite},
          {"numerics_ok", numerics_ok}};
}

ojson fit_json(Session& s, int n_layer, const std::vector<int>& layers_per_device, int cpu_layers) {
  return {{"topology", s.config().topology.name},   {"model", workload_name(s.config())}, {"n_layer", n_layer},
          {"layers_per_device", layers_per_device}, {"cpu_layers", cpu_layers},           {"devices", memory_json(s)}};
}

ojson repro_scenario_json(const std::string& name, const std::string& file, const ScenarioOutcome& out) {
  ojson res = ojson::array();
  for (const auto& r : out.results) res.push_back({{"expectation", r.what}, {"ok", r.ok}, {"found", r.detail}});
  return {{"scenario", name}, {"file", file}, {"passed", out.passed}, {"results", res}};
}

ojson topologies_json() {
  ojson j = ojson::array();
  for (const std::string& name : topology_preset_names()) {
    auto t = topology_preset(name);
    if (!t.ok()) continue;
    ojson devs = ojson::array();
    for (const auto& d : t.value().devices) devs.push_back({{"name", d.name}, {"memory", d.memory}});
    j.push_back({{"name", name}, {"description", t.value().description}, {"devices", devs}});
  }
  return j;
}

}  // namespace tessera::tool
