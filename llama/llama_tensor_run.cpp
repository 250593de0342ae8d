// `run -sm tensor` and `trace -sm tensor`: a llama model on the meta device of the topology's GPUs under the
// scheduler (see tessera/llama/llama_tensor_split.h, run_tensor_parallel; docs/tensor-parallel.md).
#include <algorithm>
#include <cstring>
#include <regex>

#include "tessera/alloc.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/session/reference.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/sched.h"

namespace tessera::llama {

Result<TensorParallelRun> run_tensor_parallel(const harness::SessionConfig& config, const Registry* real,
                                              int evaluations, const std::vector<std::string>& explain,
                                              const std::vector<harness::Session::StepSpec>& steps) {
  TS_RETURN_IF_ERROR(check_tensor_parallel(config, /*run=*/true));
  using Step = harness::Session::Step;
  for (const harness::Session::StepSpec& st : steps) {
    if (st.step == Step::kReserveNext || st.step == Step::kAllocNext || st.step == Step::kComputeNext ||
        st.step == Step::kComputeNextAgain) {
      return TS_ERROR(StatusCode::kInvalidArgument, "-sm tensor: step %s: a run on the meta device has no next graph",
                      harness::Session::step_name(st.step));
    }
  }
  if (!config.policy.kv_offload) {
    return TS_ERROR(StatusCode::kInvalidArgument,
                    "-sm tensor with -nkvo: llama.cpp's meta backend mirrors a KV cache in host memory while Q is "
                    "split by heads and fails (`tessera plan -sm tensor -nkvo` shows where)");
  }
  TensorParallelRun r;
  r.model = config.model;
  r.model.flash_attn = true;
  if (!r.model.llama_cpp) r.model.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
  r.model.rope_factor_copy.clear();
  const bool backed = config.sim.mode == sim::MemoryMode::kBacked;
  auto simulator = sim::Simulator::create(config.topology, config.sim, real);
  if (!simulator.ok()) return simulator.status();
  r.sim = std::move(simulator).value();
  sim::Simulator& s = *r.sim;
  auto backends = s.make_backends();
  if (!backends.ok()) return backends.status();
  std::vector<Device*> gpus;
  size_t cpu = s.device_count();
  for (size_t i = 0; i < s.device_count(); ++i) {
    if (s.device(i)->type() == DeviceType::kCpu) {
      cpu = std::min(cpu, i);
    } else {
      r.gpus.push_back(i);
      gpus.push_back(s.device(i));
    }
  }
  if (cpu == s.device_count()) return TS_ERROR(StatusCode::kInvalidArgument, "-sm tensor: the topology has no CPU");
  // -ngl: which layers stay on the CPU (their weights and KV cache: llama.cpp's dev_layer), by the placement's own
  // rule (harness::layer_devices; the output layer counted inside -ngl), asked as for one GPU: under -sm tensor every
  // offloaded layer goes to the meta device
  harness::PlacementPolicy one_gpu = config.policy;
  one_gpu.split_mode = harness::SplitMode::kNone;
  one_gpu.main_gpu = 0;
  auto ld = harness::layer_devices(harness::devices_of(s), r.model.n_layer, one_gpu);
  if (!ld.ok()) return ld.status();
  const int n_layer = r.model.n_layer;
  const int cpu_index = static_cast<int>(s.device_count()) - 1;  // (layer_devices: the last device is the CPU)
  const bool output_on_cpu = ld.value().back() == cpu_index;
  r.output_on_cpu = output_on_cpu;
  for (int il = 0; il < n_layer; ++il) r.cpu_layers.push_back(ld.value()[static_cast<size_t>(il)] == cpu_index);
  // a tied output head: llama.cpp's copy of token_embd on the output layer's devices (mirrored there; the original
  // stays in the CPU's memory), none when the output layer is on the CPU. The rope factors: llama.cpp creates them
  // with every layer, duplicated onto each layer's buffer type but layer 0's (TENSOR_DUPLICATED, one copy per buffer
  // type): with layer 0 on the CPU, the layers on the meta device read a copy there (mirrored), else every layer reads
  // the original (llama.cpp master side by side: Llama 3.1 8B, -sm tensor -ngl 20, 2 splits).
  if (n_layer > 0 && r.cpu_layers.front() &&
      std::find(r.cpu_layers.begin(), r.cpu_layers.end(), false) != r.cpu_layers.end()) {
    for (int il = 0; il < n_layer; ++il)
      r.model.rope_factor_copy.push_back(r.cpu_layers[static_cast<size_t>(il)] ? 0 : 1);
  }
  r.model.output_copy = r.model.tied_output && !output_on_cpu;
  auto built = models::build_llama(r.model);
  if (!built.ok()) return built.status();
  models::LlamaGraph m = std::move(built).value();
  std::vector<Tensor*> originals;
  for (Tensor* w : m.weights) {
    if (m.copy_of(w) != nullptr) continue;
    originals.push_back(w);
    r.model_bytes += nbytes(*w);
    r.model_params += static_cast<uint64_t>(nelements(*w));
  }
  r.weight_types = harness::weight_type_totals(originals);
  auto meta = make_meta_device(
      {.devices = gpus,
       .statics = llama_tensor_split(m, r.model, gpus.size(), config.policy.tensor_split, config.policy.kv_offload)});
  if (!meta.ok()) return meta.status();
  auto used = [&](std::vector<size_t>* out) {
    out->assign(s.device_count(), 0);
    for (size_t i = 0; i < s.device_count(); ++i) (*out)[i] = s.stats(i).memory_used;
  };
  // the input layer, the overridden weights and the CPU layers in the CPU's memory (placed first: the meta buffers
  // take the rest), every other weight packed per GPU, then the cache
  std::vector<std::regex> to_cpu;
  for (const harness::TensorOverride& o : config.policy.overrides) {
    try {
      to_cpu.emplace_back(o.pattern);
    } catch (const std::regex_error&) {
      return TS_ERROR(StatusCode::kInvalidArgument, "-ot %s: not a valid regular expression", o.pattern.c_str());
    }
  }
  auto on_cpu_layer = [&](const Tensor& t) {
    const int il = harness::layer_of_name(t.name);
    if (il >= 0 && il < n_layer) return ld.value()[static_cast<size_t>(il)] == cpu_index;
    return output_on_cpu && std::strncmp(t.name, "output", 6) == 0;
  };
  auto host_weight = [&](const Tensor& w) {
    if (&w == m.tok_embd || on_cpu_layer(w)) return true;
    return std::any_of(to_cpu.begin(), to_cpu.end(),
                       [&](const std::regex& re) { return std::regex_search(w.name, re); });
  };
  BufferType* host = s.device(cpu)->buffer_type();
  std::vector<std::unique_ptr<Buffer>> host_buffers;
  auto place_on_host = [&](Tensor* t, BufferUsage usage) -> Status {
    auto b = host->alloc_buffer(host->alloc_size(*t));
    if (!b.ok()) return b.status();
    TS_RETURN_IF_ERROR(tensor_alloc(*b.value(), *t, b.value()->base()));
    b.value()->set_usage(usage);
    host_buffers.push_back(std::move(b).value());
    return Status::Ok();
  };
  for (Tensor* w : m.weights) {
    if (m.copy_of(w) == nullptr && host_weight(*w)) {
      TS_RETURN_IF_ERROR(place_on_host(w, BufferUsage::kWeights));
      r.host_tensors.emplace_back(w->name);
    }
  }
  auto wbuf = meta_alloc_ctx_tensors(*m.weights_ctx, *meta.value());
  if (!wbuf.ok()) return wbuf.status();
  if (wbuf.value()) wbuf.value()->set_usage(BufferUsage::kWeights);
  used(&r.weights);
  for (Tensor* kv : m.kv_cache) {
    if (!on_cpu_layer(*kv)) continue;
    TS_RETURN_IF_ERROR(place_on_host(kv, BufferUsage::kAny));
    r.host_tensors.emplace_back(kv->name);
  }
  auto cbuf = meta_alloc_ctx_tensors(*m.cache_ctx, *meta.value());
  if (!cbuf.ok()) return cbuf.status();
  used(&r.cache);
  for (size_t i = 0; i < r.cache.size(); ++i) r.cache[i] -= r.weights[i];
  if (backed) TS_RETURN_IF_ERROR(models::fill_random(m, config.model_seed));
  auto mb = meta.value()->init_backend();
  if (!mb.ok()) return mb.status();
  auto sched = Scheduler::create({mb.value().get(), backends.value()[cpu].get()}, config.policy.scheduler_params());
  if (!sched.ok()) return sched.status();
  r.trace_first = s.trace().events.size();
  Scheduler& sc = *sched.value();
  auto alloc = [&]() -> Status {
    TS_RETURN_IF_ERROR(sc.alloc_graph(*m.graph));
    if (backed) TS_RETURN_IF_ERROR(models::set_inputs(m, models::default_inputs(r.model, config.model_seed)));
    return Status::Ok();
  };
  auto compute = [&]() -> Status {
    if (sc.graph_compute_async(*m.graph) != ComputeStatus::kSuccess)
      return Status(StatusCode::kFailed, sc.last_error());
    return Status::Ok();
  };
  if (steps.empty()) {
    for (int e = 0; e < std::max(evaluations, 1); ++e) {
      TS_RETURN_IF_ERROR(alloc());
      TS_RETURN_IF_ERROR(compute());
    }
  }
  // the steps, as Session::run_one_step and run_steps take them: `fresh` the graph allocated with its inputs written
  // and not computed yet; `computed` the graph computed last with nothing but a synchronize since
  bool fresh = false, computed = false, any_compute = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    const harness::Session::StepSpec& spec = steps[i];
    Status st = Status::Ok();
    switch (spec.step) {
      case Step::kSynchronize: st = sc.synchronize(); break;
      case Step::kReset:
        sc.reset();
        fresh = computed = false;
        break;
      case Step::kReserve:
        fresh = computed = false;
        st = sc.reserve(*m.graph);
        break;
      case Step::kAlloc:
        fresh = computed = false;
        st = alloc();
        fresh = st.ok();
        break;
      case Step::kCompute:
        computed = false;
        if (!fresh) st = alloc();
        fresh = false;
        if (st.ok()) st = compute();
        any_compute = any_compute || st.ok();
        computed = st.ok();
        break;
      case Step::kComputeAgain:
        fresh = false;
        if (config.policy.free_inputs) {
          st = Status(StatusCode::kInvalidArgument,
                      "compute-again needs the graph's inputs kept, and policy free_inputs frees them after their last "
                      "use");
        } else if (!computed) {
          st = Status(StatusCode::kInvalidArgument,
                      "compute-again evaluates the graph computed last once more: a compute must come before it, with "
                      "no reserve, alloc or reset between (a synchronize may)");
        } else {
          st = compute();
          computed = st.ok();
        }
        break;
      default: break;  // (the next graph's steps were refused above)
    }
    TS_RETURN_IF_ERROR(harness::Session::step_outcome(spec, i, st));
  }
  TS_RETURN_IF_ERROR(sc.synchronize());
  s.finish();
  r.trace_last = s.trace().events.size();
  r.splits = sched.value()->n_splits();
  r.graph_nodes = m.graph->n_nodes();
  r.plan_reuse = sched.value()->plan_reuse();
  const std::vector<Scheduler::SplitView> splits =
      explain.empty() ? std::vector<Scheduler::SplitView>{} : sched.value()->splits();
  for (const std::string& name : explain) {
    TensorParallelRun::NodeOn on;
    on.name = name;
    for (const auto* list : {&m.graph->nodes(), &m.graph->leafs()}) {
      for (const Tensor* n : *list) {
        if (on.found || name != n->name) continue;
        on.found = true;
        on.op = n->op;
        on.where = sched.value()->explain(n);
      }
    }
    for (size_t k = 0; k < splits.size(); ++k) {
      for (const Tensor* in : splits[k].inputs) {
        if (name == in->name) {
          on.copied_to.emplace_back(static_cast<int>(k), sched.value()->backend(splits[k].backend)->name());
        }
      }
    }
    r.explained.push_back(std::move(on));
  }
  r.meta_compute = sched.value()->buffer_size(0);
  r.cpu_compute = sched.value()->buffer_size(1);
  for (size_t g : r.gpus) {
    r.meta_weights = std::max(r.meta_weights, r.weights[g]);
    r.meta_cache = std::max(r.meta_cache, r.cache[g]);
  }
  for (size_t g : r.gpus) r.weight_upload_us += s.copy_time_us(-1, static_cast<int>(g), r.weights[g] + r.cache[g]);
  r.meta = *meta_compute_stats(*mb.value());
  r.peak.assign(s.device_count(), 0);
  for (size_t i = 0; i < s.device_count(); ++i) r.peak[i] = s.stats(i).memory_peak;
  if (backed && (steps.empty() || any_compute)) {
    auto want = harness::cpu_reference_logits(r.model, config.model_seed);
    if (!want.ok()) return want.status();
    auto got = tensor_to_f32(*m.logits);
    if (!got.ok()) return got.status();
    r.nmse = nmse(want.value().data(), got.value().data(), std::min(want.value().size(), got.value().size()));
    r.nmse.nan_mismatch = r.nmse.nan_mismatch || want.value().size() != got.value().size();
    r.checked = true;
  }
  // (the scheduler, the backends and the buffers go before the meta device and the simulator they use)
  sched.value().reset();
  mb.value().reset();
  return r;
}

}  // namespace tessera::llama
