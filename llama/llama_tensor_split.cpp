// llama.cpp's split states for -sm tensor (tessera/llama/llama_tensor_split.h). The rules are those of
// src/llama-model.cpp, llama_meta_device_get_split_state (master, 2026), for the tensors of Tessera's architectures
// (regular attention; no recurrent layers): which axis, the segments of fused tensors, the granularity of each cut and
// the rotation of the first device, written again here.
#include "tessera/llama/llama_tensor_split.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

#include "tessera/llama/llama_cpp_graph.h"

namespace tessera::llama {

namespace {

// A tensor's axis, and the tensor whose type's block size sets its granularity.
struct Config {
  SplitAxis axis = SplitAxis::kMirrored;
  const Tensor* axis_tensor = nullptr;
};

}  // namespace

StaticSplitFn llama_tensor_split(const models::LlamaGraph& model, const models::LlamaConfig& config, size_t n_devices,
                                 const std::vector<double>& tensor_split, bool kv_offload) {
  auto by_name = std::make_shared<std::unordered_map<std::string, const Tensor*>>();
  auto weights = std::make_shared<std::unordered_set<const Tensor*>>();
  for (const Tensor* w : model.weights) {
    by_name->emplace(w->name, w);  // (the first of a name: copies share it)
    weights->insert(w);
  }
  auto caches = std::make_shared<std::unordered_set<const Tensor*>>(model.kv_cache.begin(), model.kv_cache.end());
  const models::LlamaConfig c = config;
  const size_t n = n_devices;
  const std::vector<double> ts = tensor_split;

  return [by_name, weights, caches, kv_offload, c, n, ts](const Tensor& t) -> std::optional<SplitState> {
    const bool a_cache = caches->count(&t) != 0;
    // -nkvo: the cache, its writes and its views are the CPU's; the meta device reads them whole
    if (!kv_offload && (a_cache || (t.view_src != nullptr && caches->count(t.view_src) != 0))) return SplitState{};
    if (!a_cache && weights->count(&t) == 0) return std::nullopt;
    const std::string_view name = t.name;
    // The layer, the name within it, and the rotation (llama.cpp counts only earlier layers of the same kind, so that a
    // pattern of sliding-window layers does not alias with the device count).
    int il = -1;
    std::string_view rest = name;
    if (name.rfind("blk.", 0) == 0) {
      const size_t dot = name.find('.', 4);
      if (dot == std::string_view::npos) return SplitState{};
      il = std::atoi(std::string(name.substr(4, dot - 4)).c_str());
      rest = name.substr(dot + 1);
    } else if (name.rfind("cache_", 0) == 0) {
      const size_t at = name.find("_l", 6);
      if (at == std::string_view::npos) return SplitState{};
      il = std::atoi(std::string(name.substr(at + 2)).c_str());
    }
    size_t rotation = static_cast<size_t>(c.n_layer) % n;
    if (il >= 0) {
      size_t eff = 0;
      for (int p = 0; p < il; ++p) eff += c.is_swa(p) == c.is_swa(il) ? 1 : 0;
      rotation = eff % n;
    }
    auto layer_tensor = [&](const char* suffix, const char* fallback) -> const Tensor* {
      const std::string prefix = "blk." + std::to_string(il) + ".";
      auto it = by_name->find(prefix + suffix);
      if (it == by_name->end() && fallback != nullptr) it = by_name->find(prefix + fallback);
      return it == by_name->end() ? nullptr : it->second;
    };
    const bool cache = name.rfind("cache_k_l", 0) == 0 || name.rfind("cache_v_l", 0) == 0;
    const bool q_w = rest == "attn_q.weight", kv_w = rest == "attn_k.weight" || rest == "attn_v.weight";
    const bool q_b = rest == "attn_q.bias", kv_b = rest == "attn_k.bias" || rest == "attn_v.bias";
    const bool qkv_w = rest == "attn_qkv.weight", qkv_b = rest == "attn_qkv.bias";
    const bool sinks = rest == "attn_sinks.weight";
    const bool up_gate_w = rest == "ffn_up.weight" || rest == "ffn_up_exps.weight" || rest == "ffn_gate.weight" ||
                           rest == "ffn_gate_exps.weight";
    const bool up_w = rest == "ffn_up.weight" || rest == "ffn_up_exps.weight";
    const bool up_gate_b =
        rest == "ffn_up.bias" || rest == "ffn_up_exps.bias" || rest == "ffn_gate.bias" || rest == "ffn_gate_exps.bias";
    const bool up_b = rest == "ffn_up.bias" || rest == "ffn_up_exps.bias";
    const bool down_w = rest == "ffn_down.weight" || rest == "ffn_down_exps.weight";
    Config cfg;
    const Tensor* attn_out = il >= 0 ? layer_tensor("attn_output.weight", "ssm_out.weight") : nullptr;
    const Tensor* ffn_down = il >= 0 ? layer_tensor("ffn_down.weight", "ffn_down_exps.weight") : nullptr;
    // (a layer's names: `rest` is the whole name of any other tensor, which none of these matches)
    if (q_w || kv_w || qkv_w) {
      cfg = {SplitAxis::k1, attn_out};
    } else if (q_b || kv_b || qkv_b) {
      cfg = {SplitAxis::k0, attn_out};
    } else if (rest == "attn_q_norm.weight" || rest == "attn_k_norm.weight") {
      cfg = {t.ne[1] == 1 ? SplitAxis::kMirrored : SplitAxis::k1, attn_out};
    } else if (cache || sinks) {
      cfg = {SplitAxis::k0, attn_out};
    } else if (rest == "attn_output.weight") {
      cfg = {SplitAxis::k0, &t};
    } else if (rest == "attn_output.bias") {
      cfg = {SplitAxis::kMirrored, &t};
    } else if (up_gate_w) {
      cfg = {SplitAxis::k1, ffn_down};
    } else if (up_gate_b) {
      cfg = {SplitAxis::k0, ffn_down};
    } else if (down_w) {
      cfg = {SplitAxis::k0, ffn_down};
    } else if (rest == "ffn_down.bias") {
      cfg = {SplitAxis::kMirrored, &t};
    } else if (rest == "ffn_down_exps.bias") {
      return SplitState{SplitAxis::kPartial, {}, {}};
    } else if (name == "output.weight") {
      cfg = {SplitAxis::k1, &t};
    } else if (name == "output.bias") {
      cfg = {SplitAxis::k0, &t};
    } else {
      return SplitState{};  // mirrored: norms, routers, the token embedding (and a tied head's copy of it)
    }
    if (cfg.axis == SplitAxis::kMirrored) return SplitState{};
    if (cfg.axis_tensor == nullptr) cfg.axis_tensor = &t;
    const int axis = static_cast<int>(cfg.axis);
    // Segments: a fused QKV is Q then K and V (each cut separately), a fused up + gate is two halves.
    std::vector<std::pair<int64_t, uint32_t>> segments{{t.ne[axis], 1}};
    if (qkv_w || qkv_b) segments = {{c.n_embd_q(), 1}, {c.n_embd_kv(), 2}};
    if ((up_w || up_b) && t.ne[axis] == 2 * c.n_ff) segments = {{c.n_ff, 2}};
    // Granularity: whole heads for attention (at least a block of the type, grown to 128 values while the devices
    // still get some), 128 values (or the block) for the FFN, else 1.
    const int64_t block = type_traits(cfg.axis_tensor->type).block_size;
    std::vector<int64_t> granularity(segments.size(), 1);
    const int64_t n_gqa = c.n_head_kv > 0 ? c.n_head / c.n_head_kv : 1;
    const int64_t n_embd_q = n_gqa * c.head_dim();  // the Q values of one KV head
    int64_t perf = block;
    while (perf < 128 && perf * static_cast<int64_t>(n) < n_embd_q) perf *= 2;
    const int64_t g_q = std::lcm(n_embd_q, perf);
    const int64_t g_kv = g_q / n_gqa;
    if (sinks) {
      granularity = {g_q / n_embd_q * n_gqa};
    } else if (q_w || q_b || rest == "attn_output.weight") {
      granularity = {g_q};
    } else if (kv_w || kv_b || cache) {
      granularity = {g_kv};
    } else if (qkv_w || qkv_b) {
      granularity = {g_q, g_kv};
    } else if (up_gate_w || up_gate_b || down_w) {
      granularity.assign(segments.size(), std::lcm(block, int64_t{128}));
    }
    // The cuts: the -ts shares from the rotation's first device (all zero: even), each rounded down to the
    // granularity, the last device taking the rest.
    std::vector<float> scan(n, 0.0f);
    for (size_t j = 0; j < n; ++j) {
      const size_t d = (j + rotation) % n;
      scan[j] = (d < ts.size() ? static_cast<float>(ts[d]) : 0.0f) + (j > 0 ? scan[j - 1] : 0.0f);
    }
    SplitState s;
    s.axis = cfg.axis;
    s.ne.assign(segments.size() * n, 0);
    for (size_t is = 0; is < segments.size(); ++is) {
      const int64_t ne_s = segments[is].first;
      const int64_t g = granularity[is];
      int64_t low = 0;
      size_t j = 0;
      for (; j + 1 < n; ++j) {
        int64_t high = scan.back() == 0.0f ? ne_s * static_cast<int64_t>(j + 1) / static_cast<int64_t>(n)
                                           : static_cast<int64_t>(static_cast<float>(ne_s) * scan[j] / scan.back());
        if (high % g != 0) high -= high % g;
        s.ne[is * n + (j + rotation) % n] = high - low;
        low = high;
      }
      s.ne[is * n + (j + rotation) % n] = ne_s - low;
      s.nr.push_back(segments[is].second);
    }
    return s;
  };
}

size_t split_bytes(const Tensor& t, const SplitState& s, size_t j, size_t n_devices) {
  int64_t ne[kMaxDims] = {t.ne[0], t.ne[1], t.ne[2], t.ne[3]};
  if (s.is_split()) ne[static_cast<int>(s.axis)] = s.on_device(j, n_devices);
  if (ne[0] == 0) return 0;
  return row_size(t.type, ne[0]) * static_cast<size_t>(ne[1] * ne[2] * ne[3]);
}

Result<TensorParallelMemory> llama_tensor_parallel(const models::LlamaGraph& model, const models::LlamaConfig& config,
                                                   size_t n_devices, const std::vector<double>& tensor_split,
                                                   bool kv_offload) {
  if (model.graph == nullptr) return Status(StatusCode::kInvalidArgument, "tensor parallelism: the model has no graph");
  const StaticSplitFn fn = llama_tensor_split(model, config, n_devices, tensor_split, kv_offload);
  auto plan = plan_tensor_parallel(*model.graph, n_devices, fn);
  if (!plan.ok()) return plan.status();
  TensorParallelMemory m;
  m.weights.assign(n_devices, 0);
  m.cache.assign(n_devices, 0);
  for (const auto* list : {&model.weights, &model.kv_cache}) {
    for (const Tensor* t : *list) {
      std::optional<SplitState> s = fn(*t);
      if (!s) continue;
      if (t == model.tok_embd) {
        m.host_weights += nbytes(*t);
        continue;
      }
      for (size_t j = 0; j < n_devices; ++j) {
        (list == &model.weights ? m.weights : m.cache)[j] += split_bytes(*t, *s, j, n_devices);
      }
    }
  }
  m.n_reductions = plan.value().reductions.size();
  for (size_t i : plan.value().reductions) m.reduced_bytes += nbytes(*model.graph->node(i));
  m.plan = std::move(plan).value();
  return m;
}

namespace {

// t with ne[axis] of its split state's slice on device j, contiguous strides (the cost model counts bytes from them).
Tensor sliced(const Tensor& t, const SplitState* s, size_t j, size_t n) {
  Tensor c = t;
  if (s != nullptr && s->is_split()) c.ne[static_cast<int>(s->axis)] = s->on_device(j, n);
  c.nb[0] = type_traits(c.type).type_size;
  c.nb[1] = row_size(c.type, c.ne[0]);
  for (int d = 2; d < kMaxDims; ++d) c.nb[d] = c.nb[d - 1] * static_cast<size_t>(c.ne[d - 1]);
  return c;
}

}  // namespace

Result<TensorParallelTime> tensor_parallel_time(const models::LlamaGraph& model, const TensorParallelPlan& plan,
                                                const sim::Simulator& sim, const std::vector<size_t>& gpus) {
  const size_t n = plan.n_devices;
  if (gpus.size() != n || model.graph == nullptr) {
    return Status(StatusCode::kInvalidArgument, "tensor parallelism: one GPU per device of the split is needed");
  }
  TensorParallelTime out;
  std::vector<double> device(n, 0.0);
  auto close = [&](size_t reduce_bytes) {
    out.compute_us += *std::max_element(device.begin(), device.end());
    std::fill(device.begin(), device.end(), 0.0);
    if (reduce_bytes == 0 || n < 2) return;
    const size_t chunk = (reduce_bytes + n - 1) / n;
    double step = 0;
    for (size_t j = 0; j < n; ++j) {
      step = std::max(step, sim.copy_time_us(static_cast<int>(gpus[j]), static_cast<int>(gpus[(j + 1) % n]), chunk));
    }
    out.reduce_us += 2.0 * static_cast<double>(n - 1) * step;
  };
  size_t next = 0;  // the next reduction (plan.reductions is in graph order)
  for (size_t i = 0; i < model.graph->n_nodes(); ++i) {
    const Tensor& node = *model.graph->node(i);
    for (size_t j = 0; j < n; ++j) {
      Tensor srcs[kMaxSrc];
      Tensor c = sliced(node, plan.of(&node), j, n);
      if (c.ne[0] * c.ne[1] * c.ne[2] * c.ne[3] == 0) continue;
      for (int k = 0; k < kMaxSrc; ++k) {
        if (node.src[k] == nullptr) continue;
        // (a reduced source is partial, so not split: read whole, as after its AllReduce)
        srcs[k] = sliced(*node.src[k], plan.of(node.src[k]), j, n);
        c.src[k] = &srcs[k];
      }
      device[j] += sim.op_time_us(gpus[j], c);
    }
    if (next < plan.reductions.size() && plan.reductions[next] == i) {
      close(nbytes(node));
      ++next;
    }
  }
  close(0);
  return out;
}

Status check_tensor_parallel(const harness::SessionConfig& config, bool run) {
  auto refuse = [](const std::string& why) { return Status(StatusCode::kInvalidArgument, why); };
  if (config.graph) return refuse("tensor parallelism plans a model (-m), not a serialized graph (--graph)");
  const harness::PlacementPolicy& p = config.policy;
  if (!run && p.n_gpu_layers >= 0 && p.n_gpu_layers < config.model.n_layer + 1) {
    return refuse("the estimate takes every layer on the GPUs: -ngl " + std::to_string(p.n_gpu_layers) +
                  " leaves layers on the CPU (run_tensor_parallel runs them)");
  }
  if (!run && !p.overrides.empty()) {
    return refuse(
        "the estimate takes every weight on the GPUs: tensor overrides (-ot, -cmoe, -ncmoe) leave some on "
        "the CPU (run_tensor_parallel runs them)");
  }
  for (const harness::TensorOverride& o : p.overrides) {
    if (o.target != "CPU" && o.target != "cpu") {
      return refuse("not supported yet: -ot " + o.pattern + "=" + o.target +
                    " (an override to another buffer type than the CPU's under -sm tensor)");
    }
  }
  // llama.cpp enables flash attention for tensor parallelism under -fa auto and refuses it off (src/llama-context.cpp)
  if (!config.model.flash_attn && !config.flash_attn_auto) {
    return refuse("SPLIT_MODE_TENSOR requires flash_attn to be enabled");
  }
  size_t gpus = 0;
  for (const sim::DeviceConfig& d : config.topology.devices) gpus += d.type != DeviceType::kCpu ? 1 : 0;
  if (gpus == 0) return refuse("the topology has no GPU");
  if (gpus > 16) return refuse("at most 16 devices in a meta device (GGML_BACKEND_META_MAX_DEVICES)");
  if (p.tensor_split.size() > gpus) {
    return refuse("-ts has " + std::to_string(p.tensor_split.size()) + " shares for " + std::to_string(gpus) + " GPUs");
  }
  return Status::Ok();
}

Result<TensorParallelEstimate> estimate_tensor_parallel(const harness::SessionConfig& config, const Registry* real) {
  TS_RETURN_IF_ERROR(check_tensor_parallel(config));
  TensorParallelEstimate e;
  e.model = config.model;
  e.model.flash_attn = true;
  if (!e.model.llama_cpp) e.model.llama_cpp = llama_cpp_graph(kLlamaCppNewestBuild);
  for (size_t i = 0; i < config.topology.devices.size(); ++i) {
    if (config.topology.devices[i].type != DeviceType::kCpu) e.gpus.push_back(i);
  }
  auto g = models::build_llama(e.model);
  if (!g.ok()) return g.status();
  e.graph = std::move(g).value();
  auto memory =
      llama_tensor_parallel(e.graph, e.model, e.gpus.size(), config.policy.tensor_split, config.policy.kv_offload);
  if (!memory.ok()) return memory.status();
  e.memory = std::move(memory).value();
  sim::SimOptions opt;
  opt.mode = sim::MemoryMode::kMetadata;
  auto simulator = sim::Simulator::create(config.topology, opt, real);
  if (!simulator.ok()) return simulator.status();
  auto t = tensor_parallel_time(e.graph, e.memory.plan, *simulator.value(), e.gpus);
  if (!t.ok()) return t.status();
  e.time = t.value();
  return e;
}

}  // namespace tessera::llama
