// `tessera plan -sm tensor`: llama.cpp's tensor parallelism over the topology's GPUs (docs/tensor-parallel.md): each
// weight's and cache's split state, the bytes each GPU holds, the reductions an evaluation makes and an estimate of
// its time. With layers or weights left on the CPU (-ngl, -ot ...=CPU, -cmoe, -ncmoe) the meta device is run instead,
// metadata-only, as `run -sm tensor --metadata` runs it. `tessera run -sm tensor`: the meta device's run.
#include <algorithm>
#include <cstdio>

#include "json_out.h"
#include "subcommands.h"
#include "tessera/harness/common/text_table.h"
#include "tessera/harness/session/split_causes.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/builtin.h"
#include "tessera/sim/device_config.h"
#include "tessera/sim/simulator.h"
#include "tessera/sim/trace.h"

namespace tessera::tool {

using harness::SessionConfig;
using harness::TextTable;
using sim::format_bytes;

namespace {

// An --explain name: a weight or cache of the model, else a node of its graph (*node says which); nullptr for none.
const Tensor* find_named(const models::LlamaGraph& g, const std::string& name, bool* node = nullptr) {
  for (const auto* list : {&g.weights, &g.kv_cache}) {
    for (const Tensor* w : *list) {
      if (name == w->name) return w;
    }
  }
  for (const Tensor* n : g.graph->nodes()) {
    if (name != n->name) continue;
    if (node != nullptr) *node = true;
    return n;
  }
  return nullptr;
}

// An --explain tensor of `plan -sm tensor --json`: its split state (null when it has none: not in the graph, or
// `where` says why it is on the CPU) and each GPU's elements along a split axis.
ojson explained_json(const Tensor& t, const SplitState* st, size_t n_gpus, const std::string& where = "") {
  ojson shape = ojson::array();
  for (int64_t n : t.ne) shape.push_back(n);
  ojson per_device = ojson::array();
  if (st != nullptr && st->is_split()) {
    for (size_t k = 0; k < n_gpus; ++k) per_device.push_back(st->on_device(k, n_gpus));
  }
  return {{"name", t.name},
          {"op", op_name(t.op)},
          {"type", type_name(t.type)},
          {"shape", shape},
          {"state", st != nullptr ? ojson(split_axis_name(st->axis)) : ojson(nullptr)},
          {"on_device", st != nullptr && st->is_split() ? per_device : ojson(nullptr)},
          {"text", !where.empty()  ? where
                   : st != nullptr ? st->describe(n_gpus)
                                   : "not in the graph"}};
}

// The meta device's run per device: weights, KV cache, compute (the peak beyond them), peak and the device's memory
// (the topology's: plan may have run on a copy with more).
std::string run_memory_table(const llama::TensorParallelRun& run, const sim::TopologyConfig& topology, bool wide) {
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"weights", Align::kRight, 12},
                   {"kv cache", Align::kRight, 12},
                   {"compute", Align::kRight, 12},
                   {"peak", Align::kRight, 12},
                   {"capacity", Align::kRight, 12}});
  for (size_t i = 0; i < run.peak.size(); ++i) {
    const size_t placed = run.weights[i] + run.cache[i];
    table.add({topology.devices[i].name, format_bytes(run.weights[i]), format_bytes(run.cache[i]),
               format_bytes(run.peak[i] > placed ? run.peak[i] - placed : 0), format_bytes(run.peak[i]),
               format_bytes(topology.devices[i].memory)});
  }
  return table.render(wide);
}

int refuse_plan(const std::string& why) {
  std::fprintf(stderr, "tessera: plan -sm tensor: %s\n", why.c_str());
  return kInputError;
}

// The same model with -sm layer simulated (a run of the scheduler in metadata-only mode) for comparison; < 0 when it
// does not run (a model that does not fit with -sm layer)
double layer_split_us(const SessionConfig& config) {
  SessionConfig layer = config;
  layer.policy.split_mode = harness::SplitMode::kLayer;
  layer.sim.mode = sim::MemoryMode::kMetadata;
  if (auto s = harness::Session::create(layer, &builtin_registry()); s.ok()) {
    if (auto run = s.value()->run(1, false); run.ok()) return run.value().makespan_us;
  }
  return -1;
}

// `plan -sm tensor` with layers or weights on the CPU: the meta device run metadata-only (run_tensor_parallel, one
// evaluation). A device that runs out of memory is reported with the sizes of a second run on the same topology with
// every device's memory made large enough (each device's `fits` is its peak against its real memory).
int plan_tensor_by_run(const SessionConfig& config, const std::vector<std::string>& explain, bool json, bool wide) {
  if (Status st = llama::check_tensor_parallel(config, /*run=*/true); !st.ok()) return refuse_plan(st.message());
  SessionConfig c = config;
  c.sim.mode = sim::MemoryMode::kMetadata;
  c.sim.record_trace = true;
  std::string oom;
  auto r = llama::run_tensor_parallel(c, &builtin_registry(), 1);
  if (!r.ok() && r.status().code() == StatusCode::kAllocFailed) {
    oom = r.status().message();
    for (sim::DeviceConfig& d : c.topology.devices) d.memory = std::max<size_t>(d.memory, size_t{1} << 50);
    r = llama::run_tensor_parallel(c, &builtin_registry(), 1);
  }
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kInvalidArgument) return refuse_plan(r.status().message());
    std::fprintf(stderr, "tessera: plan -sm tensor: the meta device's run failed: %s\n", r.status().message().c_str());
    return 1;
  }
  const llama::TensorParallelRun& run = r.value();
  const sim::Simulator& s = *run.sim;
  const models::LlamaConfig& m = run.model;
  const sim::TraceSummary sum = sim::summarize(s.trace(), run.trace_first, run.trace_last);
  const double layer_us = layer_split_us(config);
  auto on_host = [&](const std::string& name) {
    return std::find(run.host_tensors.begin(), run.host_tensors.end(), name) != run.host_tensors.end();
  };
  // --explain: a weight or cache in the CPU's memory, a node of a layer -ngl leaves on the CPU, else the split state
  // llama.cpp's rules give it on the meta device (the whole graph's plan, as without CPU layers)
  auto built = models::build_llama(m);
  if (!built.ok()) return refuse_plan(built.status().message());
  const models::LlamaGraph& g = built.value();
  Result<llama::TensorParallelMemory> states = Status(StatusCode::kNotFound, "no --explain");
  if (!explain.empty()) states = llama::llama_tensor_parallel(g, m, run.gpus.size(), config.policy.tensor_split);
  struct Explained {
    const Tensor* t;
    std::string where;  // "" on the meta device, else why it is on the CPU
  };
  std::vector<Explained> explained;
  for (const std::string& name : explain) {
    bool node = false;
    const Tensor* found = find_named(g, name, &node);
    if (found == nullptr) return refuse_plan("--explain " + name + ": no weight, cache or node of that name");
    std::string where;
    if (!node && on_host(name)) {
      where = "in the CPU's memory (the token embedding, an override or a layer -ngl leaves on the CPU)";
    } else if (node) {
      const int il = harness::node_layer(found->name);
      if (il >= 0 && static_cast<size_t>(il) < run.cpu_layers.size() && run.cpu_layers[static_cast<size_t>(il)]) {
        where = "in layer " + std::to_string(il) + ", which -ngl leaves on the CPU";
      }
    }
    explained.push_back({found, where});
  }
  auto state_of = [&](const Explained& e) -> const SplitState* {
    return e.where.empty() && states.ok() ? states.value().plan.of(e.t) : nullptr;
  };
  // a device fits when its peak and its driver's reservation are within its memory
  auto fits = [&](size_t i) {
    const sim::DeviceConfig& d = config.topology.devices[i];
    return run.peak[i] + d.reserved <= d.memory;
  };
  std::vector<std::string> over;
  for (size_t i = 0; i < s.device_count(); ++i) {
    if (fits(i)) continue;
    const sim::DeviceConfig& d = config.topology.devices[i];
    over.push_back(d.name + " needs " + format_bytes(run.peak[i] + d.reserved) + " of its " + format_bytes(d.memory) +
                   (d.reserved > 0 ? " (its driver's reservation included)" : ""));
  }
  if (json) {
    ojson j = tensor_workload_json("tessera-plan-tensor", config, m);
    ojson devs = ojson::array();
    for (size_t g_i : run.gpus) {
      const size_t total = run.weights[g_i] + run.cache[g_i];
      const size_t capacity = config.topology.devices[g_i].memory;
      devs.push_back({{"device", s.device_config(g_i).name},
                      {"weights", run.weights[g_i]},
                      {"kv_cache", run.cache[g_i]},
                      {"total", total},
                      {"capacity", capacity},
                      {"fits", fits(g_i)},
                      {"compute", run.peak[g_i] > total ? run.peak[g_i] - total : 0},
                      {"peak", run.peak[g_i]}});
    }
    j["gpus"] = devs;
    size_t cpu = s.device_count();
    for (size_t i = 0; i < s.device_count() && cpu == s.device_count(); ++i) {
      if (std::find(run.gpus.begin(), run.gpus.end(), i) == run.gpus.end()) cpu = i;
    }
    j["host_weights"] = cpu < s.device_count() ? run.weights[cpu] : 0;
    j["host"] = cpu < s.device_count() ? ojson({{"device", s.device_config(cpu).name},
                                                {"weights", run.weights[cpu]},
                                                {"kv_cache", run.cache[cpu]},
                                                {"peak", run.peak[cpu]},
                                                {"capacity", config.topology.devices[cpu].memory},
                                                {"fits", fits(cpu)}})
                                       : ojson(nullptr);
    j["reductions"] = run.meta.reductions;
    j["reduced_bytes"] = run.meta.reduced_bytes;
    j["subgraphs"] = run.meta.subgraphs;
    j["estimate"] = nullptr;
    j["simulated"] = {{"makespan_us", sum.makespan_us},
                      {"splits", run.splits},
                      {"copy_bytes", sum.copy_bytes},
                      {"out_of_memory", oom.empty() ? ojson(nullptr) : ojson(oom)}};
    j["layer_split_us"] = layer_us >= 0 ? ojson(layer_us) : ojson(nullptr);
    ojson ex = ojson::array();
    for (const Explained& e : explained) ex.push_back(explained_json(*e.t, state_of(e), run.gpus.size(), e.where));
    j["explained"] = ex;
    std::printf("%s\n", j.dump(2).c_str());
    return over.empty() ? kOk : 1;
  }
  std::string where_cpu;
  int n_cpu_layers = 0;
  for (bool b : run.cpu_layers) n_cpu_layers += b ? 1 : 0;
  if (n_cpu_layers > 0 || run.output_on_cpu) {
    where_cpu = std::to_string(n_cpu_layers) + " of " + std::to_string(m.n_layer) + " layers" +
                (run.output_on_cpu ? " and the output layer" : "") + " on the CPU";
  }
  if (!config.policy.overrides.empty()) {
    where_cpu += std::string(where_cpu.empty() ? "" : ", ") + std::to_string(config.policy.overrides.size()) +
                 " override(s) to the CPU";
  }
  std::printf(
      "model %s (%d layers, %lld tokens, flash attention; context %lld) on topology %s, -sm tensor over %zu "
      "GPUs (llama.cpp's meta device) with %s, metadata-only\n\n",
      m.name.c_str(), m.n_layer, static_cast<long long>(m.n_tokens), static_cast<long long>(m.n_ctx),
      config.topology.name.c_str(), run.gpus.size(), where_cpu.c_str());
  std::printf("%s", run_memory_table(run, config.topology, wide).c_str());
  std::printf(
      "(a metadata-only run of the meta device, as `tessera run -sm tensor --metadata`: the CPU holds the token "
      "embedding and what -ngl and the overrides leave there; compute: the peak beyond the weights and the cache)\n");
  for (const std::string& d : over) std::printf("does not fit: %s\n", d.c_str());
  if (!oom.empty()) std::printf("(the run on this topology stopped at: %s)\n", oom.c_str());
  std::printf(
      "\n%zu reductions per evaluation (the attention output and the FFN of each layer on the meta device are "
      "partial sums on every GPU), %s of partial results in all\n",
      run.meta.reductions, format_bytes(run.meta.reduced_bytes).c_str());
  std::printf("one evaluation of %lld tokens, simulated on the meta device: %.3f ms (%d splits, %s copied)\n",
              static_cast<long long>(m.n_tokens), sum.makespan_us / 1000, run.splits,
              format_bytes(sum.copy_bytes).c_str());
  if (layer_us >= 0) std::printf("the same with -sm layer (simulated by the scheduler): %.3f ms\n", layer_us / 1000);
  for (const Explained& e : explained) {
    const SplitState* st = state_of(e);
    std::printf("%s: %s %s, %s\n", e.t->name, op_name(e.t->op), describe(*e.t).c_str(),
                !e.where.empty() ? e.where.c_str()
                : st != nullptr  ? st->describe(run.gpus.size()).c_str()
                                 : "not in the graph");
  }
  return over.empty() ? kOk : 1;
}

}  // namespace

int cmd_plan_tensor(const SessionConfig& config, const std::vector<std::string>& explain, bool json, bool wide) {
  auto refuse = refuse_plan;
  const harness::PlacementPolicy& p = config.policy;
  if ((p.n_gpu_layers >= 0 && p.n_gpu_layers < config.model.n_layer + 1) || !p.overrides.empty()) {
    return plan_tensor_by_run(config, explain, json, wide);
  }
  if (Status st = llama::check_tensor_parallel(config); !st.ok()) return refuse(st.message());
  auto r = llama::estimate_tensor_parallel(config, &builtin_registry());
  if (!r.ok() && !config.policy.kv_offload && r.status().message().rfind("tensor parallelism:", 0) == 0) {
    // llama.cpp's meta backend asks the model for the split of the tensors it allocates only: a cache in host memory is
    // copied in as a mirrored input while Q is split by heads, and its flash-attention rule aborts (or, without that
    // assert, each device attends over every head's K with half of Q). GenerelSchwerz/llama.cpp#66 (2026-09) splits
    // a host cache by head.
    std::fprintf(json ? stderr : stdout,
                 "-sm tensor with -nkvo fails in llama.cpp: the KV cache is in host memory, outside the meta device, "
                 "so it is mirrored while Q is split by heads:\n  %s\n(ggml's meta backend asserts there; a fix "
                 "splits a host-resident cache by head: GenerelSchwerz/llama.cpp#66)\n",
                 r.status().message().c_str());
    return 1;
  }
  if (!r.ok()) return refuse(r.status().message());
  const models::LlamaConfig& m = r.value().model;
  const std::vector<size_t>& gpus = r.value().gpus;
  const models::LlamaGraph& g = r.value().graph;
  const llama::TensorParallelMemory& tp = r.value().memory;
  const llama::TensorParallelTime& t = r.value().time;
  const double layer_us = layer_split_us(config);
  // --explain: the tensors by name, each a weight, a cache or a node of the graph
  std::vector<const Tensor*> explained;
  for (const std::string& name : explain) {
    const Tensor* found = find_named(g, name);
    if (found == nullptr) return refuse("--explain " + name + ": no weight, cache or node of that name");
    explained.push_back(found);
  }
  if (json) {
    ojson j = tensor_workload_json("tessera-plan-tensor", config, m);
    ojson devs = ojson::array();
    for (size_t k = 0; k < gpus.size(); ++k) {
      const sim::DeviceConfig& d = config.topology.devices[gpus[k]];
      const size_t total = tp.weights[k] + tp.cache[k];
      devs.push_back({{"device", d.name},
                      {"weights", tp.weights[k]},
                      {"kv_cache", tp.cache[k]},
                      {"total", total},
                      {"capacity", d.memory},
                      {"fits", total <= d.memory}});
    }
    j["gpus"] = devs;
    j["host_weights"] = tp.host_weights;
    j["reductions"] = tp.n_reductions;
    j["reduced_bytes"] = tp.reduced_bytes;
    j["subgraphs"] = tp.plan.n_subgraphs();
    j["estimate"] = {{"compute_us", t.compute_us}, {"reduce_us", t.reduce_us}, {"total_us", t.total_us()}};
    j["layer_split_us"] = layer_us >= 0 ? ojson(layer_us) : ojson(nullptr);
    ojson ex = ojson::array();
    for (const Tensor* e : explained) ex.push_back(explained_json(*e, tp.plan.of(e), gpus.size()));
    j["explained"] = ex;
    std::printf("%s\n", j.dump(2).c_str());
    return kOk;
  }
  std::printf(
      "model %s (%d layers, %lld tokens, flash attention; context %lld) on topology %s, -sm tensor over %zu "
      "GPUs (llama.cpp's meta device), metadata-only\n\n",
      m.name.c_str(), m.n_layer, static_cast<long long>(m.n_tokens), static_cast<long long>(m.n_ctx),
      config.topology.name.c_str(), gpus.size());
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"weights", Align::kRight, 12},
                   {"kv cache", Align::kRight, 12},
                   {"total", Align::kRight, 12},
                   {"capacity", Align::kRight, 12}});
  std::vector<std::string> over;
  for (size_t j = 0; j < gpus.size(); ++j) {
    const sim::DeviceConfig& d = config.topology.devices[gpus[j]];
    const size_t total = tp.weights[j] + tp.cache[j];
    table.add(
        {d.name, format_bytes(tp.weights[j]), format_bytes(tp.cache[j]), format_bytes(total), format_bytes(d.memory)});
    if (total > d.memory) over.push_back(d.name);
  }
  std::printf("%s", table.render(wide).c_str());
  std::printf("host memory: the token embedding, %s (llama.cpp keeps the input layer on the CPU)\n",
              format_bytes(tp.host_weights).c_str());
  for (const std::string& d : over)
    std::printf("does not fit: %s's weights and KV cache exceed its memory\n", d.c_str());
  std::printf(
      "\n%zu reductions per evaluation (the attention output and the FFN of each layer are partial sums on "
      "every GPU), %s of partial results in all\n",
      tp.n_reductions, format_bytes(tp.reduced_bytes).c_str());
  // Time: the estimate of one evaluation on these GPUs, and the same model with -sm layer simulated for comparison.
  std::printf(
      "one evaluation of %lld tokens, estimated: %.3f ms = compute %.3f ms (the slowest GPU between "
      "reductions) + reductions %.3f ms (ring AllReduce over the topology's links)\n",
      static_cast<long long>(m.n_tokens), t.total_us() / 1000, t.compute_us / 1000, t.reduce_us / 1000);
  if (layer_us >= 0) std::printf("the same with -sm layer (simulated by the scheduler): %.3f ms\n", layer_us / 1000);
  std::printf(
      "an estimate beside the scheduler; `tessera run -sm tensor` runs the meta device itself (splits, compute "
      "buffers, the AllReduces' copies, simulated time)\n");
  for (const Tensor* found : explained) {
    const SplitState* s = tp.plan.of(found);
    std::printf("%s: %s %s, %s\n", found->name, op_name(found->op), describe(*found).c_str(),
                s != nullptr ? s->describe(gpus.size()).c_str() : "not in the graph");
  }
  return kOk;
}

int cmd_run_tensor(const SessionConfig& config, int evaluations, bool json, bool wide, const std::string& trace_file,
                   bool quiet_trace_note, const std::vector<std::string>& explain) {
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "tessera: run -sm tensor: %s\n", why.c_str());
    return kInputError;
  };
  if (Status st = llama::check_tensor_parallel(config, /*run=*/true); !st.ok()) return refuse(st.message());
  std::fprintf(stderr, "tessera: running %d evaluation(s) on the meta device...\n", std::max(evaluations, 1));
  auto r = llama::run_tensor_parallel(config, &builtin_registry(), evaluations, explain);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kInvalidArgument) return refuse(r.status().message());
    std::fprintf(stderr, "tessera: the run failed: %s\n", r.status().message().c_str());
    return 1;
  }
  const llama::TensorParallelRun& run = r.value();
  for (const auto& on : run.explained) {
    if (!on.found) return refuse("--explain " + on.name + ": no node or leaf of that name in the graph");
  }
  const sim::Simulator& s = *run.sim;
  const models::LlamaConfig& m = run.model;
  const sim::TraceSummary sum = sim::summarize(s.trace(), run.trace_first, run.trace_last);
  const bool numerics_ok = !run.checked || (run.nmse.nmse <= 1e-4 && !run.nmse.nan_mismatch);
  if (json) {
    if (!trace_file.empty() && !write_chrome_trace(trace_file, s.trace(), true)) return kInputError;
    std::printf("%s\n", run_tensor_json(config, run, sum, numerics_ok).dump(2).c_str());
    return s.races().empty() && numerics_ok ? kOk : 1;
  }
  std::printf(
      "model %s (%d layers, %lld tokens, flash attention; context %lld) on topology %s, -sm tensor over %zu GPUs "
      "(the meta device), %s\n\n",
      m.name.c_str(), m.n_layer, static_cast<long long>(m.n_tokens), static_cast<long long>(m.n_ctx),
      config.topology.name.c_str(), run.gpus.size(), run.checked ? "memory-backed" : "metadata-only");
  std::printf("%s", run_memory_table(run, config.topology, wide).c_str());
  std::printf(
      "(the CPU holds the token embedding, as llama.cpp keeps the input layer there, and what -ngl and the "
      "overrides leave there; compute: the peak beyond the weights and the cache, the AllReduce's scratch "
      "included)\n\n");
  // llama.cpp's lines for the meta device (src/llama-model.cpp, llama-kv-cache.cpp, llama-context.cpp at build
  // ~10470): one "Meta()" line each (the meta device's name misses its devices), the model and KV buffers the
  // largest GPU's share, the compute buffer the whole graph's size, which every GPU allocates
  auto mib = [](size_t b) { return static_cast<double>(b) / 1024.0 / 1024.0; };
  std::printf(
      "as llama.cpp prints them (one \"Meta()\" line: the largest GPU's share; the compute buffer, the whole graph's "
      "size, on every GPU):\n"
      "  load_tensors:       Meta() model buffer size = %10.2f MiB\n"
      "  llama_kv_cache:     Meta() KV buffer size = %10.2f MiB\n"
      "  sched_reserve:      Meta() compute buffer size = %10.2f MiB\n"
      "  sched_reserve:   CUDA_Host compute buffer size = %10.2f MiB\n\n",
      mib(run.meta_weights), mib(run.meta_cache), mib(run.meta_compute), mib(run.cpu_compute));
  std::printf("%d splits; simulated makespan %.3f ms, %s copied\n", run.splits, sum.makespan_us / 1000.0,
              format_bytes(sum.copy_bytes).c_str());
  std::printf(
      "an evaluation: %zu subgraphs on the meta device, %zu AllReduces of %s of partial results (a ring: "
      "each GPU passes chunks to the next)\n",
      run.meta.subgraphs, run.meta.reductions, format_bytes(run.meta.reduced_bytes).c_str());
  std::printf("%s", sim::format_summary(sum, wide).c_str());
  if (run.checked) {
    std::printf("numerics: logits vs the CPU reference: NMSE %.3g%s -> %s\n", run.nmse.nmse,
                run.nmse.nan_mismatch ? " (NaN/Inf mismatch)" : "", numerics_ok ? "ok" : "MISMATCH");
  } else {
    std::printf("numerics: not checked (metadata-only mode has no values)\n");
  }
  std::printf("races: %zu\n", s.races().size());
  if (!s.races().empty()) std::printf("%s", s.races_report(3).c_str());
  for (const auto& on : run.explained) {
    std::string copied;
    for (const auto& [split, backend] : on.copied_to) {
      copied += format_message("%s split %d (%s)", copied.empty() ? ", copied into" : ",", split, backend.c_str());
    }
    std::printf("%s: %s on %s, cause %s (%s)%s%s\n", on.name.c_str(), op_name(on.op),
                on.where.backend < 0 ? "no backend" : on.where.backend_name.c_str(), cause_name(on.where.cause),
                cause_description(on.where.cause),
                on.where.split >= 0 ? format_message(", split %d", on.where.split).c_str() : "", copied.c_str());
  }
  if (!trace_file.empty()) {
    if (!write_chrome_trace(trace_file, s.trace(), quiet_trace_note)) return kInputError;
    if (!quiet_trace_note)
      std::printf("trace written to %s (open it in https://ui.perfetto.dev)\n", trace_file.c_str());
  }
  return s.races().empty() && numerics_ok ? kOk : 1;
}

}  // namespace tessera::tool
