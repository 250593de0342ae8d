// One simulated placement experiment (see tessera/sim/session.h).
#include "tessera/sim/session.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/gallocr.h"
#include "tessera/graph_copy.h"

namespace tessera::sim {

Session::~Session() {
  sched_.reset();
  placement_.buffers.clear();
  backends_.clear();
}

Result<std::unique_ptr<Session>> Session::create(const SessionConfig& config) {
  std::unique_ptr<Session> s(new Session());
  s->config_ = config;
  auto sim = Simulator::create(config.topology, config.sim);
  if (!sim.ok()) return sim.status();
  s->sim_ = std::move(sim).value();
  auto backends = s->sim_->make_backends();
  if (!backends.ok()) return backends.status();
  s->backends_ = std::move(backends).value();
  auto model = models::build_llama(config.model);
  if (!model.ok()) return model.status();
  s->model_ = std::move(model).value();
  auto placed = place_model(*s->sim_, s->model_.weights, s->model_.kv_cache, config.model.n_layer, config.policy);
  if (!placed.ok()) return placed.status();
  s->placement_ = std::move(placed).value();
  if (config.sim.mode == MemoryMode::kBacked) TS_RETURN_IF_ERROR(models::fill_random(s->model_, config.model_seed));
  std::vector<Backend*> bp;
  for (auto& b : s->backends_) bp.push_back(b.get());
  auto sched = Scheduler::create(bp, config.policy.scheduler_params());
  if (!sched.ok()) return sched.status();
  s->sched_ = std::move(sched).value();
  return s;
}

Status Session::plan() { return sched_->alloc_graph(*model_.graph); }

namespace {

std::vector<float> cpu_reference(const models::LlamaConfig& c, uint64_t seed, Status* status) {
  auto m = models::build_llama(c);
  if (!m.ok()) {
    *status = m.status();
    return {};
  }
  models::LlamaGraph g = std::move(m).value();
  auto wb = alloc_ctx_tensors(*g.weights_ctx, *cpu::buffer_type());
  auto cb = alloc_ctx_tensors(*g.cache_ctx, *cpu::buffer_type());
  if (!wb.ok() || !cb.ok()) {
    *status = !wb.ok() ? wb.status() : cb.status();
    return {};
  }
  GraphAllocator galloc(cpu::buffer_type());
  Status s = models::fill_random(g, seed);
  if (s.ok()) s = galloc.alloc_graph(*g.graph);
  if (s.ok()) s = models::set_inputs(g, models::default_inputs(c, seed));
  if (!s.ok()) {
    *status = s;
    return {};
  }
  auto backend = cpu::make_backend();
  if (backend->graph_compute(*g.graph) != ComputeStatus::kSuccess) {
    *status = Status(StatusCode::kFailed, "CPU reference: " + backend->last_error());
    return {};
  }
  auto v = tensor_to_f32(*g.logits);
  if (!v.ok()) {
    *status = v.status();
    return {};
  }
  return std::move(v).value();
}

}  // namespace

Result<RunStats> Session::run(int evaluations, bool check_numerics) {
  TS_RETURN_IF_ERROR(plan());
  TS_RETURN_IF_ERROR(models::set_inputs(model_, models::default_inputs(config_.model, config_.model_seed)));
  for (int i = 0; i < std::max(evaluations, 1); ++i) {
    const ComputeStatus cs = sched_->graph_compute_async(*model_.graph);
    if (cs != ComputeStatus::kSuccess) {
      return Status(cs == ComputeStatus::kAllocFailed ? StatusCode::kAllocFailed : StatusCode::kFailed,
                    sched_->last_error());
    }
  }
  sched_->synchronize();
  sim_->finish();
  RunStats r;
  r.makespan_us = summarize(sim_->trace()).makespan_us;
  r.races = sim_->races().size();
  r.errors = sim_->errors();
  if (check_numerics && config_.sim.mode == MemoryMode::kBacked) {
    Status st;
    const std::vector<float> want = cpu_reference(config_.model, config_.model_seed, &st);
    TS_RETURN_IF_ERROR(st);
    auto got = tensor_to_f32(*model_.logits);
    if (!got.ok()) return got.status();
    const NmseResult n = nmse(want.data(), got.value().data(), std::min(want.size(), got.value().size()));
    r.checked = true;
    r.nmse = n.nmse;
    r.nan_mismatch = n.nan_mismatch || want.size() != got.value().size();
  }
  return r;
}

std::vector<DeviceMemory> Session::memory() const {
  std::vector<DeviceMemory> out;
  for (size_t d = 0; d < sim_->device_count(); ++d) {
    DeviceMemory m;
    m.device = sim_->device_config(d).name;
    m.weights = placement_.weight_bytes[d];
    m.cache = placement_.cache_bytes[d];
    m.compute = sched_->buffer_size(static_cast<int>(d));
    const DeviceStats st = sim_->stats(d);
    m.used = st.memory_used;
    m.peak = st.memory_peak;
    m.capacity = st.memory_total;
    for (int ld : placement_.layer_device) m.layers += ld == static_cast<int>(d) ? 1 : 0;
    out.push_back(m);
  }
  return out;
}

std::string Session::summary_table() const {
  std::string s = format_message("%-10s %6s %12s %12s %12s %12s %12s\n", "device", "layers", "weights", "kv cache",
                                 "compute", "peak", "capacity");
  for (const DeviceMemory& m : memory()) {
    s += format_message("%-10s %6d %12s %12s %12s %12s %12s\n", m.device.c_str(), m.layers,
                        format_bytes(m.weights).c_str(), format_bytes(m.cache).c_str(),
                        format_bytes(m.compute).c_str(), format_bytes(m.peak).c_str(),
                        format_bytes(m.capacity).c_str());
  }
  return s;
}

std::string Session::splits_table() const {
  std::string s;
  const auto splits = sched_->splits();
  const Graph& g = *model_.graph;
  for (size_t i = 0; i < splits.size(); ++i) {
    const auto& sp = splits[i];
    s += format_message("split %zu: %s, nodes %zu..%zu (%zu), %zu inputs\n", i, sched_->backend(sp.backend)->name(),
                        sp.i_start, sp.i_end, sp.i_end - sp.i_start, sp.inputs.size());
    for (const Tensor* in : sp.inputs) {
      const TensorExplain e = sched_->explain(in);
      s += format_message("    input %s (%s) from %s\n", in->name, format_bytes(nbytes(*in)).c_str(),
                          e.backend_name.c_str());
    }
    if (sp.i_end > sp.i_start) {
      s += format_message("    first %s, last %s\n", g.node(sp.i_start)->name, g.node(sp.i_end - 1)->name);
    }
  }
  return s;
}

const Tensor* Session::find_tensor(const std::string& name) const {
  const Graph& g = *model_.graph;
  const Tensor* t = nullptr;
  for (const Tensor* n : g.nodes()) {
    if (name == n->name) t = n;
  }
  for (const Tensor* l : g.leafs()) {
    if (t == nullptr && name == l->name) t = l;
  }
  return t;
}

std::string Session::explain(const std::string& name) const {
  const Tensor* t = find_tensor(name);
  if (t == nullptr) return format_message("%s: no tensor of that name in the graph\n", name.c_str());
  const TensorExplain e = sched_->explain(t);
  std::string s = format_message("%s: %s %s, on %s (cause: %s)", t->name, op_name(t->op), describe(*t).c_str(),
                                 e.backend < 0 ? "(unassigned)" : e.backend_name.c_str(), cause_name(e.cause));
  if (e.split >= 0) s += format_message(", split %d", e.split);
  if (e.is_copy) s += ", a scheduler copy";
  return s + "\n";
}

std::string Session::dot() const {
  static const char* kColors[] = {"#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3",
                                  "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5"};
  const Graph& g = *model_.graph;
  std::unordered_map<const Tensor*, size_t> id;
  for (size_t i = 0; i < g.n_nodes(); ++i) id[g.node(i)] = i;
  std::string s = "digraph tessera {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n";
  const auto splits = sched_->splits();
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    const char* color = kColors[static_cast<size_t>(sp.backend) % (sizeof kColors / sizeof kColors[0])];
    s += format_message("  subgraph cluster_%zu {\n    label=\"split %zu: %s (%zu inputs)\";\n", k, k,
                        sched_->backend(sp.backend)->name(), sp.inputs.size());
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const Tensor* n = g.node(i);
      s += format_message("    n%zu [label=\"%s\\n%s\", fillcolor=\"%s\"];\n", i, n->name, op_name(n->op), color);
    }
    s += "  }\n";
  }
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    for (const Tensor* src : g.node(i)->src) {
      if (src == nullptr) continue;
      auto it = id.find(src);
      if (it != id.end()) s += format_message("  n%zu -> n%zu;\n", it->second, i);
    }
  }
  return s + "}\n";
}

}  // namespace tessera::sim
