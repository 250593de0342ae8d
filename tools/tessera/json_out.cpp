// The `tessera` tool's headline and --json objects (docs/json.md).
#include "json_out.h"

#include <cstdio>
#include <fstream>

#include "tessera/gguf.h"
#include "tessera/llama/llama_memory.h"
#include "tessera/harness/topology/topology.h"

namespace tessera::tool {

bool write_chrome_trace(const std::string& path, const sim::Trace& trace, bool quiet_note) {
  std::ofstream out(path);
  out << sim::chrome_trace_json(trace);
  if (!out) {
    std::fprintf(stderr, "tessera: cannot write %s\n", path.c_str());
    return false;
  }
  if (quiet_note) std::fprintf(stderr, "tessera: trace written to %s\n", path.c_str());
  return true;
}

using namespace tessera::harness;
using namespace tessera::llama;
using namespace tessera::scenario;
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
  const std::vector<sim::DeviceConfig>& configs = s.config().topology.devices;
  for (const DeviceMemory& m : s.memory()) {
    size_t reserved = 0;  // the topology's, by name (the rows are in topology order)
    for (const sim::DeviceConfig& d : configs) reserved = d.name == m.device ? d.reserved : reserved;
    devs.push_back({{"device", m.device},
                    {"layers", m.layers},
                    {"weights", m.weights},
                    {"kv_cache", m.cache},
                    {"compute", m.compute},
                    {"peak", m.peak},
                    {"capacity", m.capacity},
                    {"reserved", reserved}});
  }
  return devs;
}

std::string memory_breakdown_text(Session& s, const LlamaContextParams& params, bool llama_log, bool wide) {
  if (s.config().graph) return "";
  auto b = llama_memory_breakdown(s, params);
  if (!b.ok()) return "";
  return (llama_log ? format_llama_log(b.value()) : format_memory_breakdown(b.value(), wide)) + "\n";
}

ojson llama_memory_json(Session& s, const LlamaContextParams& params) {
  if (s.config().graph) return ojson();
  auto r = llama_memory_breakdown(s, params);
  if (!r.ok()) return ojson();
  const MemoryBreakdown& b = r.value();
  static const char* const kKinds[] = {"model", "kv", "output", "compute"};
  ojson buffers = ojson::array();
  for (const LlamaBuffer& lb : b.buffers) {
    ojson o = {
        {"kind", kKinds[static_cast<int>(lb.kind)]}, {"name", lb.name}, {"device", lb.device}, {"bytes", lb.bytes}};
    if (lb.kind == LlamaBuffer::Kind::kKv) {
      o["cache"] = lb.cache.empty() ? ojson() : ojson(lb.cache);
      o["cells"] = lb.cells;
      o["layers"] = lb.layers;
    }
    buffers.push_back(std::move(o));
  }
  ojson rows = ojson::array();
  for (const MemoryBreakdown::Row& r : b.rows()) {
    rows.push_back({{"name", r.name},
                    {"device", r.device},
                    {"model", r.model},
                    {"kv", r.kv},
                    {"compute", r.compute},
                    {"output", r.output},
                    {"total", r.total()}});
  }
  return {{"n_ctx", b.n_ctx},
          {"n_ubatch", b.n_ubatch},
          {"kv_type", b.kv_type},
          {"buffers", buffers},
          {"totals", rows},
          {"graph_nodes", b.graph_nodes},
          {"graph_splits", b.graph_splits},
          {"pipeline_parallel", b.pipeline.on},
          {"n_copies", b.pipeline.n_copies},
          {"pipeline_reason", b.pipeline.on ? ojson() : ojson(b.pipeline.reason)},
          {"planned_parallel", b.planned_parallel}};
}

ojson explained_json(Session& s, const std::vector<std::string>& names) {
  const std::vector<SplitRecord> splits = s.split_records();
  ojson out = ojson::array();
  for (const std::string& name : names) {
    const Tensor* t = s.find_tensor(name);
    if (t == nullptr) continue;
    const TensorExplain e = s.sched().explain(t);
    ojson copied_to = ojson::array();
    for (const SplitRecord& r : splits) {
      for (const SplitRecord::Input& in : r.inputs) {
        if (in.name == name) copied_to.push_back({{"split", r.index}, {"backend", r.backend}});
      }
    }
    out.push_back({{"name", name},
                   {"op", op_name(t->op)},
                   {"backend", e.backend < 0 ? ojson() : ojson(e.backend_name)},
                   {"cause", cause_name(e.cause)},
                   {"cause_text", cause_description(e.cause)},
                   {"split", e.split >= 0 ? ojson(e.split) : ojson()},
                   {"scheduler_copy", e.is_copy},
                   {"copied_to", copied_to},
                   {"plan_reused", e.plan_reused}});
  }
  return out;
}

std::string plan_reuse_text(const Scheduler& s) {
  const PlanReuse r = s.plan_reuse();
  std::string out = format_message("plans: %d full, %d reused (of %d allocations, %d kept now)", r.full_plans, r.reuses,
                                   r.full_plans + r.reuses, r.cached);
  if (r.full_plans + r.reuses > 0) {
    out += r.reused ? "; the last allocation reused the plan" : "; the last allocation planned: " + r.why_not;
  }
  return out + "\n";
}

std::string explain_run_text(Session& s, const std::string& name) {
  const PlanReuse r = s.sched().plan_reuse();
  return s.explain(name) + "  plan: " + (r.reused ? "reused (no split, no placement)" : "new: " + r.why_not) + "\n";
}

bool explained_exist(Session& s, const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (s.find_tensor(name) == nullptr) {
      std::fprintf(stderr, "tessera: --explain %s: no tensor of that name in the graph\n", name.c_str());
      return false;
    }
  }
  return true;
}

ojson plan_reuse_json(const PlanReuse& r) {
  return {{"full_plans", r.full_plans},
          {"reuses", r.reuses},
          {"cached", r.cached},
          {"last_reused", r.reused},
          {"why_not", r.reused || r.full_plans + r.reuses == 0 ? ojson() : ojson(r.why_not)}};
}

// The unified-memory host pool, counted once (null without a unified device).
ojson host_pool_json(Session& s) {
  const PoolStats p = s.sim().pool_stats();
  if (p.members.empty()) return nullptr;
  ojson names = ojson::array();
  for (size_t m : p.members) names.push_back(s.config().topology.devices[m].name);
  return {{"devices", names}, {"capacity", p.capacity}, {"peak", p.peak}, {"reserved", p.reserved}};
}

ojson splits_json(Session& s) {
  ojson out = ojson::array();
  for (const SplitRecord& r : s.split_records()) {
    ojson inputs = ojson::array();
    for (const SplitRecord::Input& in : r.inputs) {
      inputs.push_back({{"name", in.name}, {"bytes", in.bytes}, {"from", in.from}});
    }
    const bool has_nodes = r.end_node > r.first_node;
    out.push_back({{"index", r.index},
                   {"backend", r.backend},
                   {"first_node", r.first_node},
                   {"end_node", r.end_node},
                   {"nodes", r.end_node - r.first_node},
                   {"inputs", inputs},
                   {"first_tensor", has_nodes ? ojson(r.first_tensor) : ojson()},
                   {"last_tensor", has_nodes ? ojson(r.last_tensor) : ojson()},
                   {"reason", r.reason},
                   {"reason_text", r.reason_text},
                   {"cut", r.cut}});
  }
  return out;
}

ojson format_header(const char* format) { return {{"format", format}, {"version", kJsonFormatVersion}}; }

// What the headline says of the workload: layers, context, tokens, attention, KV cache type (null for a serialized
// graph, which has none of these) and the weights by type.
void add_workload(const Session& s, ojson* j) {
  const SessionConfig& c = s.config();
  const bool model = !c.graph;
  (*j)["n_layer"] = model ? ojson(c.model.n_layer) : ojson();
  (*j)["context"] = model ? ojson(c.model.n_ctx) : ojson();
  (*j)["tokens"] = model ? ojson(c.model.n_tokens) : ojson();
  (*j)["flash_attn"] = model ? ojson(c.model.flash_attn) : ojson();
  (*j)["kv_type"] = model ? ojson(c.model.kv_type_text()) : ojson();
  ojson types = ojson::array();
  for (const WeightTypeTotal& t : s.weight_types()) {
    types.push_back({{"type", type_name(t.type)}, {"tensors", t.tensors}, {"bytes", t.bytes}});
  }
  (*j)["weight_types"] = types;
}

// The keys every report of a planned session starts with.
ojson session_json(const char* format, Session& s) {
  ojson j = format_header(format);
  j["topology"] = s.config().topology.name;
  j["model"] = workload_name(s.config());
  add_workload(s, &j);
  return j;
}

ojson split_causes_json(const SplitCauseSummary& summary) {
  auto counts = [](const std::vector<std::pair<std::string, int>>& v) {
    ojson a = ojson::array();
    for (const auto& [name, n] : v) a.push_back({{"name", name}, {"splits", n}});
    return a;
  };
  ojson causes = ojson::array();
  for (const SplitCauseGroup& g : summary.groups) {
    ojson c = {{"cause", split_cause_name(g.cause)},
               {"description", split_cause_description(g.cause)},
               {"splits", g.splits},
               {"top_layers", counts(g.top_layers)},
               {"layers", g.n_layers},
               {"top_ops", counts(g.top_ops)},
               {"option", g.option.empty() ? ojson() : ojson(g.option)},
               {"splits_with_option", g.splits_with_option >= 0 ? ojson(g.splits_with_option) : ojson()},
               {"option_error", g.option_error.empty() ? ojson() : ojson(g.option_error)},
               {"no_option", g.no_option.empty() ? ojson() : ojson(g.no_option)}};
    causes.push_back(std::move(c));
  }
  return {{"splits", summary.splits}, {"causes", causes}};
}

ojson plan_json(Session& s, const std::vector<std::string>& explain, const SplitCauseSummary& causes,
                const LlamaContextParams& params) {
  ojson j = session_json("tessera-plan", s);
  j["splits"] = s.sched().n_splits();
  j["copies"] = s.sched().n_copies();
  j["devices"] = memory_json(s);
  j["host_pool"] = host_pool_json(s);
  j["split_causes"] = split_causes_json(causes);
  j["split_list"] = splits_json(s);
  ojson ex = ojson::array();
  for (const std::string& name : explain) ex.push_back(s.explain(name));
  j["explain"] = ex;
  j["explained"] = explained_json(s, explain);
  j["llama_memory"] = llama_memory_json(s, params);
  return j;
}

ojson run_json(Session& s, const RunStats& st, const TraceSummary& sum, bool numerics_ok,
               const LlamaContextParams& params, const std::vector<std::string>& explain) {
  ojson j = session_json("tessera-run", s);
  j["splits"] = s.sched().n_splits();
  j["devices"] = memory_json(s);
  j["host_pool"] = host_pool_json(s);
  j["makespan_us"] = st.makespan_us;  // the evaluations only (docs/simulator.md "Makespan")
  j["weight_upload_us"] = st.weight_upload_us;
  j["copy_bytes"] = sum.copy_bytes;
  j["races"] = st.races;
  j["numerics_checked"] = st.checked;
  j["nmse"] = st.nmse;
  j["non_finite"] = st.non_finite;
  j["numerics_ok"] = numerics_ok;
  j["plan_reuse"] = plan_reuse_json(s.sched());
  j["explained"] = explained_json(s, explain);
  j["llama_memory"] = llama_memory_json(s, params);
  return j;
}

ojson plan_reuse_json(const Scheduler& s) { return plan_reuse_json(s.plan_reuse()); }

ojson tensor_workload_json(const char* format, const SessionConfig& config, const models::LlamaConfig& m) {
  ojson j = format_header(format);
  j["topology"] = config.topology.name;
  j["model"] = m.name;
  j["n_layer"] = m.n_layer;
  j["context"] = m.n_ctx;
  j["tokens"] = m.n_tokens;
  j["flash_attn"] = m.flash_attn;
  j["kv_type"] = m.kv_type_text();
  return j;
}

ojson run_tensor_json(const SessionConfig& config, const llama::TensorParallelRun& run, const TraceSummary& sum,
                      bool numerics_ok) {
  const models::LlamaConfig& m = run.model;
  ojson j = tensor_workload_json("tessera-run", config, m);
  ojson types = ojson::array();
  for (const harness::WeightTypeTotal& t : run.weight_types) {
    types.push_back({{"type", type_name(t.type)}, {"tensors", t.tensors}, {"bytes", t.bytes}});
  }
  j["weight_types"] = types;
  j["splits"] = run.splits;
  ojson devs = ojson::array();
  const sim::Simulator& s = *run.sim;
  for (size_t i = 0; i < s.device_count(); ++i) {
    const sim::DeviceConfig& d = s.device_config(i);
    const bool gpu = std::find(run.gpus.begin(), run.gpus.end(), i) != run.gpus.end();
    const size_t placed = run.weights[i] + run.cache[i];
    // every GPU of the split holds its slice of every layer
    devs.push_back({{"device", d.name},
                    {"layers", gpu ? m.n_layer : 0},
                    {"weights", run.weights[i]},
                    {"kv_cache", run.cache[i]},
                    {"compute", run.peak[i] > placed ? run.peak[i] - placed : 0},
                    {"peak", run.peak[i]},
                    {"capacity", d.memory},
                    {"reserved", d.reserved}});
  }
  j["devices"] = devs;
  j["host_pool"] = nullptr;
  j["makespan_us"] = sum.makespan_us;
  j["weight_upload_us"] = run.weight_upload_us;
  j["copy_bytes"] = sum.copy_bytes;
  j["races"] = s.races().size();
  j["numerics_checked"] = run.checked;
  j["nmse"] = run.checked ? ojson(run.nmse.nmse) : ojson(0.0);
  j["non_finite"] = run.nmse.non_finite;
  j["numerics_ok"] = numerics_ok;
  j["plan_reuse"] = plan_reuse_json(run.plan_reuse);
  ojson explained = ojson::array();
  for (const auto& on : run.explained) {
    if (!on.found) continue;
    ojson copied_to = ojson::array();
    for (const auto& [split, backend] : on.copied_to) copied_to.push_back({{"split", split}, {"backend", backend}});
    explained.push_back({{"name", on.name},
                         {"op", op_name(on.op)},
                         {"backend", on.where.backend < 0 ? ojson() : ojson(on.where.backend_name)},
                         {"cause", cause_name(on.where.cause)},
                         {"cause_text", cause_description(on.where.cause)},
                         {"split", on.where.split >= 0 ? ojson(on.where.split) : ojson()},
                         {"scheduler_copy", on.where.is_copy},
                         {"copied_to", copied_to},
                         {"plan_reused", on.where.plan_reused}});
  }
  j["explained"] = explained;
  j["llama_memory"] = nullptr;
  j["extra_models"] = nullptr;
  ojson names = ojson::array();
  for (size_t g : run.gpus) names.push_back(s.device_config(g).name);
  j["tensor_parallel"] = {{"gpus", names},
                          {"subgraphs", run.meta.subgraphs},
                          {"reductions", run.meta.reductions},
                          {"reduced_bytes", run.meta.reduced_bytes}};
  return j;
}

ojson fit_json(Session& s, const std::vector<int>& layers_per_device, int cpu_layers) {
  ojson j = session_json("tessera-fit", s);
  j["layers_per_device"] = layers_per_device;
  j["cpu_layers"] = cpu_layers;
  j["devices"] = memory_json(s);
  j["host_pool"] = host_pool_json(s);
  return j;
}

ojson repro_scenario_json(const std::string& name, const std::string& file, const ScenarioOutcome& out) {
  ojson res = ojson::array();
  for (const auto& r : out.results) res.push_back({{"expectation", r.what}, {"ok", r.ok}, {"found", r.detail}});
  return {{"scenario", name}, {"file", file}, {"passed", out.passed}, {"results", res}};
}

ojson repro_json(const ojson& scenarios, int passed, int failed, int not_run) {
  ojson j = format_header("tessera-repro");
  j["scenarios"] = scenarios;
  j["passed"] = passed;
  j["failed"] = failed;
  j["not_run"] = not_run;
  return j;
}

ojson topologies_json() {
  ojson list = ojson::array();
  for (const std::string& name : topology_preset_names()) {
    auto t = topology_preset(name);
    if (!t.ok()) continue;
    ojson devs = ojson::array();
    for (const auto& d : t.value().devices) devs.push_back({{"name", d.name}, {"memory", d.memory}});
    list.push_back({{"name", name}, {"description", t.value().description}, {"devices", devs}});
  }
  ojson j = format_header("tessera-topologies");
  j["topologies"] = list;
  return j;
}

}  // namespace tessera::tool
