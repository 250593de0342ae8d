// One simulated placement experiment (see tessera/harness/session/session.h).
#include "tessera/harness/session/session.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/common/text_table.h"
#include "tessera/harness/graph/graph_data.h"
#include "tessera/harness/placement/allocate.h"
#include "tessera/harness/session/reference.h"
#include "session_detail.h"
#include "tessera/harness/session/split_causes.h"

namespace tessera::harness {

using namespace tessera::sim;

Session::~Session() {
  sched_.reset();
  placement_.buffers.clear();
  backends_.clear();
}

namespace {

// Graph mode: the weights written by SET_ROWS or CPY (through views) are caches; usage ANY rather than WEIGHTS.
std::vector<Tensor*> written_leafs(const Graph& g) {
  std::vector<Tensor*> out;
  for (const Tensor* n : g.nodes()) {
    Tensor* base = n->op == Op::kSetRows ? n->src[0] : n->op == Op::kCpy ? n->src[1] : nullptr;
    if (base == nullptr) continue;
    while (base->view_src != nullptr) base = base->view_src;
    // (a leaf that is not an input; SET_ROWS into a computed tensor writes into the scheduler's memory)
    if (base->op != Op::kNone || (base->flags & kFlagInput) != 0) continue;
    if (std::find(out.begin(), out.end(), base) == out.end()) out.push_back(base);
  }
  return out;
}

// The tensors a loaded graph is checked by: those flagged output, else its last node (flagged output here so that
// the planner keeps it).
std::vector<Tensor*> graph_outputs(LoadedGraph& lg) {
  std::vector<Tensor*> out = lg.outputs;
  if (out.empty() && lg.graph->n_nodes() > 0) {
    Tensor* last = lg.graph->node(lg.graph->n_nodes() - 1);
    set_output(*last);
    out.push_back(last);
  }
  return out;
}

// Leafs flagged input (computed tensors may carry the flag too; they get no data).
std::vector<Tensor*> input_leafs(const LoadedGraph& lg) {
  std::vector<Tensor*> out;
  for (Tensor* t : lg.inputs) {
    if (t->op == Op::kNone && t->view_src == nullptr) out.push_back(t);
  }
  return out;
}

// The fill rules of `leafs` (graph_data.h) with their ids in the serialized graph as keys. The graph's sources must
// be the user's (not planned yet, or reset).
std::vector<std::pair<LeafData, uint64_t>> fill_plan(const LoadedGraph& lg, const std::vector<Tensor*>& leafs) {
  std::unordered_map<const Tensor*, uint64_t> id;
  for (size_t i = 0; i < lg.tensors.size(); ++i) id.emplace(lg.tensors[i], i);
  std::vector<std::pair<LeafData, uint64_t>> out;
  for (const LeafData& d : infer_leaf_data(*lg.graph, leafs)) out.emplace_back(d, id[d.tensor]);
  return out;
}

Status fill_all(const std::vector<std::pair<LeafData, uint64_t>>& plan, uint64_t seed) {
  for (const auto& [d, key] : plan) TS_RETURN_IF_ERROR(fill_leaf(d, seed, key));
  return Status::Ok();
}

Result<std::vector<float>> concat_outputs(const std::vector<Tensor*>& outputs) {
  std::vector<float> all;
  for (const Tensor* t : outputs) {
    auto v = tensor_to_f32(*t);
    if (!v.ok()) return v.status();
    all.insert(all.end(), v.value().begin(), v.value().end());
  }
  return all;
}

// Makes `next` compute with the weights of `first`: each weight leaf of `next` is replaced, wherever it is a source, a
// view's source or a leaf of the graph, by the weight of `first` with the same name (same type and shape). Errors
// name the weight that has no match.
Status share_weights(LoadedGraph& next, const LoadedGraph& first, const std::string& source) {
  std::unordered_map<const Tensor*, Tensor*> to_first;
  for (Tensor* w : next.weights) {
    Tensor* match = nullptr;
    for (Tensor* f : first.weights) {
      if (std::strcmp(f->name, w->name) == 0) match = f;
    }
    if (match == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: weight \"%s\" is not a weight of the first graph",
                      source.c_str(), w->name);
    }
    if (match->type != w->type || !same_shape(*match, *w)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: weight \"%s\" is %s, the first graph's is %s", source.c_str(),
                      w->name, describe(*w).c_str(), describe(*match).c_str());
    }
    to_first.emplace(w, match);
  }
  auto sub = [&](Tensor* t) {
    auto it = to_first.find(t);
    return it == to_first.end() ? t : it->second;
  };
  for (Tensor* t : next.tensors) {
    for (Tensor*& src : t->src) src = src != nullptr ? sub(src) : nullptr;
    if (t->view_src != nullptr) t->view_src = sub(t->view_src);
  }
  const std::vector<Tensor*> nodes = next.graph->nodes(), leafs = next.graph->leafs();
  next.graph->clear();
  for (Tensor* l : leafs) TS_RETURN_IF_ERROR(next.graph->add_leaf(sub(l)));
  for (Tensor* n : nodes) TS_RETURN_IF_ERROR(next.graph->add_node(n));
  next.weights.clear();  // they are the first graph's now
  return Status::Ok();
}

// A memory-backed run computes every node and fills every leaf, so a graph with a tensor of a storage-only type
// (types.h: no kernels on any backend, no conversion to fill it) is refused before anything is filled, naming the
// first such tensor and the way to run it instead. Metadata-only runs take it.
Status refuse_storage_only(const Graph& g, const SessionConfig& config) {
  if (config.sim.mode != MemoryMode::kBacked) return Status::Ok();
  const Tensor* first = nullptr;
  size_t count = 0;
  for (const std::vector<Tensor*>* list : {&g.leafs(), &g.nodes()}) {
    for (const Tensor* t : *list) {
      if (!type_is_valid(t->type) || type_has_kernels(t->type)) continue;
      // an i64 input is written as it is and read as indices (SET_ROWS of llama.cpp's cache indices)
      if (t->type == Type::kI64 && t->op == Op::kNone && (t->flags & kFlagInput) != 0) continue;
      if (first == nullptr) first = t;
      ++count;
    }
  }
  if (first == nullptr) return Status::Ok();
  std::string devices;
  for (const DeviceConfig& d : config.topology.devices) devices += (devices.empty() ? "" : ", ") + d.name;
  const std::string more =
      count > 1 ? format_message(", and %zu more tensors are of storage-only types", count - 1) : std::string();
  return TS_ERROR(StatusCode::kUnsupported,
                  "memory-backed run: '%s' is %s, a type Tessera stores but cannot compute (no kernels on any backend "
                  "of %s: %s)%s; plan, fit and time it in metadata mode (--metadata on the command line, \"run\": "
                  "{\"mode\": \"metadata-only\"} in a scenario file, SimOptions::mode = MemoryMode::kMetadata)",
                  first->name, type_name(first->type), config.topology.name.c_str(), devices.c_str(), more.c_str());
}

}  // namespace

int layer_count(const std::vector<Tensor*>& weights) {
  int n = 0;
  for (const Tensor* w : weights) n = std::max(n, layer_of_name(w->name) + 1);
  return n;
}

// Out of host memory in memory-backed mode (the simulator backs each device's memory with this machine's, the CPU
// reference holds another copy): the error says the way out, metadata-only mode.
Status with_metadata_hint(Status s, const SessionConfig& config) {
  if (s.code() != StatusCode::kAllocFailed || config.sim.mode != MemoryMode::kBacked ||
      s.message().find("out of host memory") == std::string::npos) {
    return s;
  }
  return Status(s.code(), s.message() +
                              "; a memory-backed run holds every weight in this machine's memory: plan, fit and time "
                              "the model without values in metadata mode (--metadata on the command line, \"run\": "
                              "{\"mode\": \"metadata-only\"} in a scenario file)");
}

Status Session::load_next_graph() {
  if (!config_.graph) {
    return Status(StatusCode::kInvalidArgument, "a next graph needs a serialized first graph (\"graph\"), not a model");
  }
  auto lg = graph_from_json(config_.next_graph->text, config_.next_graph->source);
  if (!lg.ok()) return lg.status();
  next_ = std::move(lg).value();
  next_outputs_ = graph_outputs(next_);
  TS_RETURN_IF_ERROR(refuse_storage_only(*next_.graph, config_));
  next_input_fill_ = fill_plan(next_, input_leafs(next_));
  return share_weights(next_, loaded_, config_.next_graph->source);
}

// llama.cpp's -fa auto (src/llama-context.cpp, llama_context's constructor: "resolve automatic Flash Attention use"):
// reserve the graph with flash attention, and if any FLASH_ATTN_EXT node ("fattn-<il>") is assigned to a device other
// than its layer's (the device cannot run it), turn flash attention off; otherwise on. Metadata-only: nothing is
// allocated or filled.
Result<bool> Session::resolve_flash_attn_auto(const SessionConfig& config, const Registry* real_devices) {
  SessionConfig probe = config;
  probe.flash_attn_auto = false;
  probe.model.flash_attn = true;
  if (config.flash_attn_probe_tokens > 0) {
    probe.model.n_tokens = config.flash_attn_probe_tokens;
    probe.model.n_outputs = config.flash_attn_probe_tokens;
  }
  probe.sim.mode = MemoryMode::kMetadata;
  probe.progress = nullptr;
  auto s = create(probe, real_devices);
  if (!s.ok()) return s.status();
  TS_RETURN_IF_ERROR(s.value()->plan());
  const Session& p = *s.value();
  for (size_t i = 0; i < p.graph_->n_nodes(); ++i) {
    const Tensor* n = p.graph_->node(i);
    if (n->op != Op::kFlashAttnExt || std::strncmp(n->name, "fattn-", 6) != 0) continue;
    const int il = std::atoi(n->name + 6);
    if (il < 0 || static_cast<size_t>(il) >= p.placement_.layer_device.size()) continue;
    const Backend* b = p.sched_->get_tensor_backend(n);
    const Device* kv = p.sim_->device(static_cast<size_t>(p.placement_.layer_device[static_cast<size_t>(il)]));
    if (b == nullptr || b->device() != kv) return false;
  }
  return true;
}

Result<std::unique_ptr<Session>> Session::create(const SessionConfig& config, const Registry* real_devices) {
  if (config.flash_attn_auto) {
    if (config.graph) return TS_ERROR(StatusCode::kInvalidArgument, "-fa auto: a serialized graph has its own");
    auto fa = resolve_flash_attn_auto(config, real_devices);
    if (!fa.ok()) return fa.status();
    SessionConfig c = config;
    c.flash_attn_auto = false;
    c.model.flash_attn = fa.value();
    return create(c, real_devices);
  }
  std::unique_ptr<Session> s(new Session());
  s->config_ = config;
  auto sim = Simulator::create(config.topology, config.sim, real_devices);
  if (!sim.ok()) return sim.status();
  s->sim_ = std::move(sim).value();
  auto backends = s->sim_->make_backends();
  if (!backends.ok()) return backends.status();
  s->backends_ = std::move(backends).value();
  const bool backed = config.sim.mode == MemoryMode::kBacked;
  if (config.graph) {
    s->step("reading the graph");
    auto lg = graph_from_json(config.graph->text, config.graph->source);
    if (!lg.ok()) return lg.status();
    s->loaded_ = std::move(lg).value();
    LoadedGraph& g = s->loaded_;
    s->graph_ = s->current_ = g.graph.get();
    s->outputs_ = graph_outputs(g);
    TS_RETURN_IF_ERROR(refuse_storage_only(*g.graph, config));
    const std::vector<Tensor*> caches = written_leafs(*g.graph);
    std::vector<Tensor*> weights;
    for (Tensor* w : g.weights) {
      if (std::find(caches.begin(), caches.end(), w) == caches.end()) weights.push_back(w);
    }
    s->step("placing the weights");
    auto placed = place_model(devices_of(*s->sim_), weights, caches, layer_count(g.weights), config.policy);
    if (!placed.ok()) return with_metadata_hint(placed.status(), config);
    s->placement_ = std::move(placed).value();
    if (backed) {
      s->step("filling the weights with random values");
      TS_RETURN_IF_ERROR(with_metadata_hint(fill_all(fill_plan(g, g.weights), config.model_seed), config));
    }
    s->input_fill_ = fill_plan(g, input_leafs(g));
    if (config.next_graph) TS_RETURN_IF_ERROR(s->load_next_graph());
  } else {
    if (config.next_graph) TS_RETURN_IF_ERROR(s->load_next_graph());  // (the error: a model has no next graph)
    s->step("building the model's graph");
    // The copies of shared weights the placement makes (weight_copies), as the model's own weights.
    models::LlamaConfig& mc = s->config_.model;
    std::vector<std::string> rope_names;
    if (mc.rope_freq_factors) rope_names.push_back("rope_freqs.weight");
    if (mc.rope_factors_ls) rope_names = {"rope_factors_long.weight", "rope_factors_short.weight"};
    auto copies = weight_copies(devices_of(*s->sim_), mc.n_layer, config.policy, mc.tied_output, rope_names);
    if (!copies.ok()) return with_metadata_hint(copies.status(), config);
    mc.output_copy = copies.value().output;
    mc.rope_factor_copy = copies.value().rope_of_layer;
    auto model = models::build_llama(mc);
    if (!model.ok()) return model.status();
    s->model_ = std::move(model).value();
    s->graph_ = s->current_ = s->model_.graph.get();
    s->outputs_ = {s->model_.logits};
    TS_RETURN_IF_ERROR(refuse_storage_only(*s->model_.graph, config));
    s->step("placing the weights");
    std::vector<std::pair<const Tensor*, int>> copy_layers;
    for (const models::LlamaGraph::WeightCopy& c : s->model_.copies) copy_layers.emplace_back(c.copy, c.layer);
    auto placed = place_model(devices_of(*s->sim_), s->model_.weights, s->model_.kv_cache, config.model.n_layer,
                              config.policy, copy_layers);
    if (!placed.ok()) return with_metadata_hint(placed.status(), config);
    s->placement_ = std::move(placed).value();
    if (backed) {
      s->step("filling the weights with random values");
      TS_RETURN_IF_ERROR(with_metadata_hint(models::fill_random(s->model_, config.model_seed), config));
    }
  }
  if (config.parallel_rule && !config.policy.parallel) {
    const int n_copies = config.parallel_rule(s->config_, s->placement_);
    if (n_copies > 1) {
      s->config_.policy.parallel = true;
      s->config_.policy.n_copies = n_copies;
    }
  }
  std::vector<Backend*> bp;
  const std::vector<std::string>& only = config.policy.scheduler_devices;
  for (const std::string& name : only) {
    bool known = false;
    for (auto& b : s->backends_) known = known || name == b->name();
    if (!known) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: scheduler_devices: no device named \"%s\" in topology %s",
                      name.c_str(), config.topology.name.c_str());
    }
  }
  for (auto& b : s->backends_) {
    if (only.empty() || std::find(only.begin(), only.end(), b->name()) != only.end()) bp.push_back(b.get());
  }
  s->step("creating the scheduler");
  auto sched = Scheduler::create(bp, s->config_.policy.scheduler_params());
  if (!sched.ok()) return sched.status();
  s->sched_ = std::move(sched).value();
  TS_RETURN_IF_ERROR(s->apply_pins());
  return s;
}

Status Session::apply_pins() {
  for (const TensorPin& pin : config_.policy.pins) {
    Tensor* t = const_cast<Tensor*>(find_tensor(pin.tensor));
    if (t == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: pin of \"%s\": no tensor of that name in the graph",
                      pin.tensor.c_str());
    }
    Backend* target = nullptr;
    for (int i = 0; i < sched_->n_backends(); ++i) {
      if (pin.device == sched_->backend(i)->name()) target = sched_->backend(i);
    }
    if (target == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "policy: pin of \"%s\": no device named \"%s\"", pin.tensor.c_str(),
                      pin.device.c_str());
    }
    TS_RETURN_IF_ERROR(sched_->set_tensor_backend(t, target));
  }
  if (config_.pin_rule) {
    for (size_t i = 0; i < graph_->n_nodes(); ++i) {
      Tensor* n = graph_->node(i);
      const int d = config_.pin_rule(config_, placement_, *n);
      if (d < 0 || static_cast<size_t>(d) >= backends_.size()) continue;
      Backend* target = backends_[static_cast<size_t>(d)].get();
      if (sched_->backend_index(target) < 0) continue;  // (a device the scheduler was not given)
      TS_RETURN_IF_ERROR(sched_->set_tensor_backend(n, target));
    }
  }
  return Status::Ok();
}

Status Session::plan() {
  step("planning (splits, copies, compute buffers)");
  computed_last_ = -1;
  return with_metadata_hint(sched_->alloc_graph(*graph_), config_);
}

int Session::backend_of_device(size_t device) const { return sched_->backend_index(backends_[device].get()); }

uint64_t evaluation_input_seed(uint64_t model_seed, size_t evaluation) {
  return model_seed + static_cast<uint64_t>(evaluation) * 0x9E3779B97F4A7C15ull;
}

uint64_t Session::next_input_seed() const {
  return config_.per_evaluation_inputs ? evaluation_input_seed(config_.model_seed, computes_.size())
                                       : config_.model_seed;
}

Status Session::set_inputs() {
  inputs_seed_ = next_input_seed();
  if (!config_.graph) return models::set_inputs(model_, models::default_inputs(config_.model, inputs_seed_));
  if (config_.sim.mode != MemoryMode::kBacked) return Status::Ok();
  return fill_all(input_fill_, inputs_seed_);
}

Status Session::set_next_inputs() {
  inputs_seed_ = next_input_seed();
  if (config_.sim.mode != MemoryMode::kBacked) return Status::Ok();
  return fill_all(next_input_fill_, inputs_seed_);
}

// The outputs of the model, or of the serialized graph (or of the next graph, over the first graph's weights),
// computed on the plain CPU backend with the same data. A graph session's computes are replayed in the run's order
// (the outputs are the last one's), so a cache one graph wrote with SET_ROWS is there when the other reads it, as it
// was in the run; each with the seed of its inputs, or with the inputs as they were after a compute-again.
Result<std::vector<float>> cpu_reference(const SessionConfig& config,
                                         const std::vector<Session::Evaluation>& computes) {
  if (config.graph) {
    const bool uses_next = std::any_of(computes.begin(), computes.end(), [](const auto& e) { return e.next; });
    auto r = graph_from_json(config.graph->text, config.graph->source);
    if (!r.ok()) return r.status();
    LoadedGraph first = std::move(r).value();
    std::vector<std::pair<Tensor*, BufferType*>> where;
    for (Tensor* w : first.weights) where.emplace_back(w, cpu::buffer_type());
    auto placed = allocate_tensors(where, BufferUsage::kWeights);
    if (!placed.ok()) return placed.status();
    TS_RETURN_IF_ERROR(fill_all(fill_plan(first, first.weights), config.model_seed));
    LoadedGraph second;
    if (uses_next) {
      auto n = graph_from_json(config.next_graph->text, config.next_graph->source);
      if (!n.ok()) return n.status();
      second = std::move(n).value();
    }
    // Input plans are made before the next graph's weight leafs are replaced by the first graph's.
    const auto first_inputs = fill_plan(first, input_leafs(first));
    const auto second_inputs = uses_next ? fill_plan(second, input_leafs(second)) : decltype(first_inputs){};
    if (uses_next) TS_RETURN_IF_ERROR(share_weights(second, first, config.next_graph->source));
    GraphPlanner planners[2] = {GraphPlanner(cpu::buffer_type()), GraphPlanner(cpu::buffer_type())};
    bool allocated[2] = {false, false};
    auto backend = cpu::make_backend();
    const std::vector<Session::Evaluation> order =
        computes.empty() ? std::vector<Session::Evaluation>{{false, true, config.model_seed}} : computes;
    for (const Session::Evaluation& e : order) {
      LoadedGraph& lg = e.next ? second : first;
      const int i = e.next ? 1 : 0;
      if (!allocated[i]) TS_RETURN_IF_ERROR(planners[i].alloc_graph(*lg.graph));
      allocated[i] = true;
      // (a compute-again reads the inputs as the evaluation before left them: a graph may have written into one)
      if (e.inputs_written) TS_RETURN_IF_ERROR(fill_all(e.next ? second_inputs : first_inputs, e.seed));
      if (backend->graph_compute(*lg.graph) != ComputeStatus::kSuccess) {
        return Status(StatusCode::kFailed, "CPU reference: " + backend->last_error());
      }
    }
    return concat_outputs(graph_outputs(order.back().next ? second : first));
  }
  // (every evaluation of a model writes the same cache slots: the last one's inputs decide the logits)
  return harness::cpu_reference_logits(config.model, config.model_seed,
                                       computes.empty() ? config.model_seed : computes.back().seed);
}

Result<std::vector<float>> Session::read_outputs() const { return concat_outputs(outputs()); }

Result<std::vector<float>> Session::reference_outputs() const {
  if (config_.sim.mode != MemoryMode::kBacked) {
    return Status(StatusCode::kInvalidArgument, "the CPU reference needs memory-backed mode");
  }
  return cpu_reference(config_, computes_);
}

std::vector<DeviceMemory> Session::memory() const {
  std::vector<DeviceMemory> out;
  for (size_t d = 0; d < sim_->device_count(); ++d) {
    DeviceMemory m;
    m.device = sim_->device_config(d).name;
    m.weights = placement_.weight_bytes[d];
    m.cache = placement_.cache_bytes[d];
    m.compute = sched_->buffer_size(backend_of_device(d));  // 0 for a device the scheduler does not use
    const DeviceStats st = sim_->stats(d);
    m.used = st.memory_used;
    m.peak = st.memory_peak;
    m.capacity = st.memory_total;
    for (int ld : placement_.layer_device) m.layers += ld == static_cast<int>(d) ? 1 : 0;
    out.push_back(m);
  }
  return out;
}

std::string Session::summary_table(bool wide) const {
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"layers", Align::kRight, 6},
                   {"weights", Align::kRight, 12},
                   {"kv cache", Align::kRight, 12},
                   {"compute", Align::kRight, 12},
                   {"peak", Align::kRight, 12},
                   {"capacity", Align::kRight, 12}});
  for (const DeviceMemory& m : memory()) {
    table.add({m.device, std::to_string(m.layers), format_bytes(m.weights), format_bytes(m.cache),
               format_bytes(m.compute), format_bytes(m.peak), format_bytes(m.capacity)});
  }
  std::string s = table.render(wide);
  // Unified memory: the members' peaks above overlap in one pool, whose own peak is the figure that must fit.
  const PoolStats pool = sim_->pool_stats();
  if (!pool.members.empty()) {
    std::string names;
    for (size_t m : pool.members) names += (names.empty() ? "" : " + ") + sim_->device_config(m).name;
    std::string line = format_message("(%s, unified memory, counted once): peak %s of %s", names.c_str(),
                                      format_bytes(pool.peak).c_str(), format_bytes(pool.capacity).c_str());
    if (pool.reserved > 0) line += format_message(", %s reserved", format_bytes(pool.reserved).c_str());
    if (pool.margins > 0) line += format_message(", %s fit margins", format_bytes(pool.margins).c_str());
    // (wrapped at 80 columns with the table, each continuation under the text; one line with --wide)
    s += wide ? "host pool  " + line + "\n" : wrap_lines("host pool  ", line, std::string(11, ' '));
  }
  std::string reserved;
  for (size_t d = 0; d < sim_->device_count(); ++d) {
    const DeviceConfig& c = sim_->device_config(d);
    if (c.reserved > 0)
      reserved +=
          format_message("%s%s %s", reserved.empty() ? "" : ", ", c.name.c_str(), format_bytes(c.reserved).c_str());
  }
  if (!reserved.empty()) {
    const std::string line = "reserved by the driver (not counted in peak): " + reserved;
    s += wide ? line + "\n" : wrap_lines("", line, "  ");
  }
  return s;
}

const Tensor* Session::find_tensor(const std::string& name) const {
  const Graph& g = *current_;
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
  // Several nodes may share a name (a builder's per-layer name given twice): each is explained, by graph position.
  std::vector<std::pair<size_t, const Tensor*>> same;
  for (size_t i = 0; i < current_->n_nodes(); ++i) {
    if (name == current_->node(i)->name) same.emplace_back(i, current_->node(i));
  }
  if (same.size() > 1) {
    std::string s =
        format_message("%s: %zu nodes of that name; each by its position in the graph:\n", name.c_str(), same.size());
    for (const auto& [pos, t] : same) s += format_message("node %zu: ", pos) + explain_tensor(*t);
    return s;
  }
  const Tensor* t = find_tensor(name);
  if (t == nullptr) return format_message("%s: no tensor of that name in the graph\n", name.c_str());
  return explain_tensor(*t);
}

// A weight in a split buffer type (-sm row): its rows on each GPU, e.g. ", rows split by gpu0_Split: gpu0 0..127,
// gpu1 128..255" ("" for any other tensor).
std::string Session::split_rows_text(const Tensor& t) const {
  const Buffer* b = tensor_buffer(t);
  if (b == nullptr || !is_split_buffer_type(*b->type())) return "";
  BackendReg* reg = b->type()->device()->reg();
  auto rows = reinterpret_cast<SplitRowsFn>(reg->get_proc_address(kSplitRowsProc));
  if (rows == nullptr) return "";
  std::string s = format_message(", rows split by %s:", b->type()->name());
  const char* sep = " ";
  for (size_t d = 0; d < sim_->device_count(); ++d) {
    int64_t low = 0, high = 0;
    if (!rows(*b->type(), t, *sim_->device(d), &low, &high) || high <= low) continue;
    s += format_message("%s%s %lld..%lld", sep, sim_->device_config(d).name.c_str(), static_cast<long long>(low),
                        static_cast<long long>(high - 1));
    sep = ", ";
  }
  return s;
}

std::string Session::explain_tensor(const Tensor& tensor) const {
  const Tensor* t = &tensor;
  const TensorExplain e = sched_->explain(t);
  std::string s = format_message("%s: %s %s, on %s, cause %s (%s)", t->name, op_name(t->op), describe(*t).c_str(),
                                 e.backend < 0 ? "(unassigned)" : e.backend_name.c_str(), cause_name(e.cause),
                                 cause_description(e.cause));
  if (e.split >= 0) s += format_message(", split %d", e.split);
  if (e.is_copy) s += ", a scheduler copy";
  s += split_rows_text(*t);
  const SourceResolver original = [this](const Tensor* src) {
    const TensorExplain se = sched_->explain(src);
    return se.is_copy && se.copy_of != nullptr ? se.copy_of : src;
  };
  return s + "\n" + op_rule_lines(config_.topology, *t, e.backend_name) +
         buffer_type_rule_lines(config_.topology, *t, e.backend_name, original);
}

double Session::weight_upload_us() const {
  double us = 0;
  const bool model = !config_.graph;
  for (const Tensor* w : model ? model_.weights : loaded_.weights) us += sim_->set_time_us(*w);
  if (model) {
    for (const Tensor* kv : model_.kv_cache) us += sim_->set_time_us(*kv);
  }
  return us;
}

}  // namespace tessera::harness
