// `tessera plan -sm tensor`: llama.cpp's tensor parallelism over the topology's GPUs (docs/tensor-parallel.md): each
// weight's and cache's split state, the bytes each GPU holds and the reductions an evaluation makes. The compute
// buffers, the scheduler's splits and the time are not modelled yet (issue 47), and the report says so.
#include <algorithm>
#include <cstdio>

#include "json_out.h"
#include "subcommands.h"
#include "tessera/harness/common/text_table.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/builtin.h"
#include "tessera/sim/device_config.h"
#include "tessera/sim/simulator.h"
#include "tessera/sim/trace.h"

namespace tessera::tool {

namespace {
constexpr int kOk = 0, kInputError = 2;
}  // namespace

using harness::SessionConfig;
using harness::TextTable;
using sim::format_bytes;

int cmd_plan_tensor(const SessionConfig& config, const std::vector<std::string>& explain, bool json, bool wide) {
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "tessera: plan -sm tensor: %s\n", why.c_str());
    return kInputError;
  };
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
  // The same model with -sm layer simulated (a run of the scheduler in metadata-only mode) for comparison; < 0 when it
  // does not run (a model that does not fit with -sm layer)
  double layer_us = -1;
  SessionConfig layer = config;
  layer.policy.split_mode = harness::SplitMode::kLayer;
  layer.sim.mode = sim::MemoryMode::kMetadata;
  if (auto s = harness::Session::create(layer, &builtin_registry()); s.ok()) {
    if (auto run = s.value()->run(1, false); run.ok()) layer_us = run.value().makespan_us;
  }
  // --explain: the tensors by name, each a weight, a cache or a node of the graph
  std::vector<const Tensor*> explained;
  for (const std::string& name : explain) {
    const Tensor* found = nullptr;
    for (const auto* list : {&g.weights, &g.kv_cache}) {
      for (const Tensor* w : *list) found = found != nullptr ? found : (name == w->name ? w : nullptr);
    }
    for (const Tensor* n : g.graph->nodes()) found = found != nullptr ? found : (name == n->name ? n : nullptr);
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
    for (const Tensor* e : explained) {
      const SplitState* st = tp.plan.of(e);
      ojson shape = ojson::array();
      for (int64_t n : e->ne) shape.push_back(n);
      ojson per_device = ojson::array();
      if (st != nullptr && st->is_split()) {
        for (size_t k = 0; k < gpus.size(); ++k) per_device.push_back(st->on_device(k, gpus.size()));
      }
      ex.push_back({{"name", e->name},
                    {"op", op_name(e->op)},
                    {"type", type_name(e->type)},
                    {"shape", shape},
                    {"state", st != nullptr ? ojson(split_axis_name(st->axis)) : ojson(nullptr)},
                    {"on_device", st != nullptr && st->is_split() ? per_device : ojson(nullptr)},
                    {"text", st != nullptr ? st->describe(gpus.size()) : "not in the graph"}});
    }
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
                   bool quiet_trace_note) {
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "tessera: run -sm tensor: %s\n", why.c_str());
    return kInputError;
  };
  if (Status st = llama::check_tensor_parallel(config, /*run=*/true); !st.ok()) return refuse(st.message());
  std::fprintf(stderr, "tessera: running %d evaluation(s) on the meta device...\n", std::max(evaluations, 1));
  auto r = llama::run_tensor_parallel(config, &builtin_registry(), evaluations);
  if (!r.ok()) {
    if (r.status().code() == StatusCode::kInvalidArgument) return refuse(r.status().message());
    std::fprintf(stderr, "tessera: the run failed: %s\n", r.status().message().c_str());
    return 1;
  }
  const llama::TensorParallelRun& run = r.value();
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
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"weights", Align::kRight, 12},
                   {"kv cache", Align::kRight, 12},
                   {"compute", Align::kRight, 12},
                   {"peak", Align::kRight, 12},
                   {"capacity", Align::kRight, 12}});
  for (size_t i = 0; i < s.device_count(); ++i) {
    const size_t placed = run.weights[i] + run.cache[i];
    table.add({s.device_config(i).name, format_bytes(run.weights[i]), format_bytes(run.cache[i]),
               format_bytes(run.peak[i] > placed ? run.peak[i] - placed : 0), format_bytes(run.peak[i]),
               format_bytes(s.device_config(i).memory)});
  }
  std::printf("%s", table.render(wide).c_str());
  std::printf(
      "(the CPU holds the token embedding, as llama.cpp keeps the input layer there, and what -ngl and the "
      "overrides leave there; compute: the peak beyond the weights and the cache, the AllReduce's scratch "
      "included)\n\n");
  // llama.cpp's lines for the meta device (src/llama-model.cpp, llama-kv-cache.cpp, llama-context.cpp at build
  // ~10470): one "Meta()" line each (the meta device's name misses its devices), the model and KV buffers the
  // largest GPU's share, the compute buffer the whole graph's size, which every GPU allocates
  size_t max_w = 0, max_kv = 0;
  for (size_t g : run.gpus) {
    max_w = std::max(max_w, run.weights[g]);
    max_kv = std::max(max_kv, run.cache[g]);
  }
  auto mib = [](size_t b) { return static_cast<double>(b) / 1024.0 / 1024.0; };
  std::printf(
      "as llama.cpp prints them (one \"Meta()\" line: the largest GPU's share; the compute buffer, the whole graph's "
      "size, on every GPU):\n"
      "  load_tensors:       Meta() model buffer size = %10.2f MiB\n"
      "  llama_kv_cache:     Meta() KV buffer size = %10.2f MiB\n"
      "  sched_reserve:      Meta() compute buffer size = %10.2f MiB\n"
      "  sched_reserve:   CUDA_Host compute buffer size = %10.2f MiB\n\n",
      mib(max_w), mib(max_kv), mib(run.meta_compute), mib(run.cpu_compute));
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
  if (!trace_file.empty()) {
    if (!write_chrome_trace(trace_file, s.trace(), quiet_trace_note)) return kInputError;
    if (!quiet_trace_note)
      std::printf("trace written to %s (open it in https://ui.perfetto.dev)\n", trace_file.c_str());
  }
  return s.races().empty() && numerics_ok ? kOk : 1;
}

}  // namespace tessera::tool
