// Scheduler lifecycle: creation, split, reserve, allocation, reset, queries (docs/scheduler.md).
#include <algorithm>
#include <cstdio>
#include <cstring>

#include "scheduler_impl.h"

namespace tessera {

namespace {

// "<input> (dep)", the input's name cut at 40 characters (no printf: one per split input and split).
void dep_name(Tensor& dep, const char* input) {
  constexpr int kKept = 40;
  static_assert(kKept + sizeof(" (dep)") <= kMaxName, "the dependency's name fits");
  char* out = dep.name;
  for (int i = 0; i < kKept && input[i] != '\0'; ++i) *out++ = input[i];
  std::memcpy(out, " (dep)", sizeof(" (dep)"));
}

}  // namespace

const char* cause_name(Cause cause) {
  switch (cause) {
    case Cause::kUnassigned: return "unassigned";
    case Cause::kPinned: return "user";
    case Cause::kHasBuffer: return "1.dst";
    case Cause::kViewSourceHasBuffer: return "1.vsrc";
    case Cause::kInput: return "1.inp";
    case Cause::kWeight: return "1.wgt";
    case Cause::kOpOffload: return "1.off";
    case Cause::kExpanded: return "2.exp";
    case Cause::kMostSources: return "3.best";
    case Cause::kUpgraded: return "3.upg";
    case Cause::kViewOfSource: return "4.vsrc";
    case Cause::kConsumer: return "4.cur";
    case Cause::kFallback: return "4.fallback";
    case Cause::kCopy: return "copy";
    case Cause::kCount: break;
  }
  return "?";
}

const char* cause_description(Cause cause) {
  switch (cause) {
    case Cause::kUnassigned: return "not assigned to a backend";
    case Cause::kPinned: return "user pin: placed with set_tensor_backend (--pin)";
    case Cause::kHasBuffer: return "has memory: the first backend that can use its buffer and run its op";
    case Cause::kViewSourceHasBuffer: return "view of memory: the first backend that can use its source's buffer";
    case Cause::kInput: return "graph input: written by the user from the host, on the last backend";
    case Cause::kWeight: return "weight: the backend of the buffer holding its first weight";
    case Cause::kOpOffload: return "op offload: a faster backend takes an op whose weight is in host memory";
    case Cause::kExpanded: return "expansion: grown from a neighbouring node's backend";
    case Cause::kMostSources: return "best fit: the backend where most of its sources already are";
    case Cause::kUpgraded: return "upgrade: a higher-priority backend sharing the compute buffer type";
    case Cause::kViewOfSource: return "view or writer: follows the tensor it views or writes into";
    case Cause::kConsumer: return "source: takes the backend of the node that uses it";
    case Cause::kFallback: return "fallback: the first backend that supports the op";
    case Cause::kCopy: return "copy: a copy the scheduler made for another backend";
    case Cause::kCount: break;
  }
  return "?";
}

const char* split_reason_name(SplitReason reason) {
  switch (reason) {
    case SplitReason::kFirst: return "first";
    case SplitReason::kBackend: return "backend";
    case SplitReason::kWeightCopy: return "weight";
    case SplitReason::kInputLimit: return "inputs";
  }
  return "?";
}

const char* split_reason_description(SplitReason reason) {
  switch (reason) {
    case SplitReason::kFirst: return "the graph's first split";
    case SplitReason::kBackend: return "the node runs on another backend than the split before";
    case SplitReason::kWeightCopy: return "a weight the node reads is copied from memory this backend cannot use";
    case SplitReason::kInputLimit: return "the node's new inputs would take the split past max_split_inputs";
  }
  return "?";
}

Scheduler::Scheduler(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

Scheduler::~Scheduler() {
  if (impl_ != nullptr) {
    impl_->sync_all();
    impl_->reset_plan();
  }
}

Result<std::unique_ptr<Scheduler>> Scheduler::create(std::vector<Backend*> backends, SchedulerParams params) {
  if (backends.empty()) return Status(StatusCode::kInvalidArgument, "scheduler: no backends");
  if (backends.size() > static_cast<size_t>(kMaxBackends)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: %zu backends, at most %d", backends.size(), kMaxBackends);
  }
  for (size_t i = 0; i < backends.size(); ++i) {
    if (backends[i] == nullptr) return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: backend %zu is null", i);
  }
  if (backends.back()->device()->type() != DeviceType::kCpu) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: the last backend (%s) must be a CPU device",
                    backends.back()->name());
  }
  if (!params.bufts.empty() && params.bufts.size() != backends.size()) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: %zu buffer types for %zu backends", params.bufts.size(),
                    backends.size());
  }
  if (params.max_split_inputs < kMaxSrc) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: max_split_inputs %d is below %d (one node's sources)",
                    params.max_split_inputs, kMaxSrc);
  }
  if (params.plan_cache < 1 || params.plan_cache > kMaxCachedPlans) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: plan_cache %d is outside 1 to %d (plans kept)",
                    params.plan_cache, kMaxCachedPlans);
  }
  if (params.n_copies < 1 || params.n_copies > kParallelCopies) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: n_copies %d is outside 1 to %d (in-flight copy slots)",
                    params.n_copies, kParallelCopies);
  }
  auto impl = std::make_unique<Impl>();
  impl->backends = backends;
  for (size_t i = 0; i < backends.size(); ++i) {
    BufferType* buft = params.bufts.empty() ? backends[i]->default_buffer_type() : params.bufts[i];
    if (buft == nullptr || !backends[i]->supports_buft(*buft)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: backend %s does not support its compute buffer type %s",
                      backends[i]->name(), buft != nullptr ? buft->name() : "(null)");
    }
    impl->bufts.push_back(buft);
    int id = -1;
    for (size_t u = 0; u < impl->unique_bufts.size(); ++u) {
      if (impl->unique_bufts[u] == buft) id = static_cast<int>(u);
    }
    if (id < 0) {
      id = static_cast<int>(impl->unique_bufts.size());
      impl->unique_bufts.push_back(buft);
    }
    impl->buft_id.push_back(id);
  }
  impl->params = std::move(params);
  if (impl->params.free_inputs) impl->params.reuse = false;  // (SchedulerParams::free_inputs)
  impl->n_copies = impl->params.parallel ? impl->params.n_copies : 1;
  impl->n_unique = impl->unique_bufts.size();
  if (impl->n_copies > 1) {
    // one copy region per compute buffer type, same type, planned like ordinary compute memory
    for (size_t u = 0; u < impl->n_unique; ++u) impl->unique_bufts.push_back(impl->unique_bufts[u]);
  }
  impl->planner = std::make_unique<GraphPlanner>(impl->unique_bufts);
  if (impl->params.online_packing) impl->planner->set_packing(GraphPlanner::Packing::kOnline);
  impl->planner->set_free_inputs(impl->params.free_inputs);
  impl->planner->set_ggml_inplace(impl->params.ggml_inplace);
  for (size_t u = 0; u < impl->n_unique && impl->n_copies > 1; ++u) {
    impl->planner->set_replicas(impl->region_id(static_cast<int>(u)), impl->n_copies);
  }
  GraphPlanner* planner = impl->planner.get();
  impl->set = std::make_unique<sched::BackendList>(impl->backends, impl->bufts,
                                                   [planner](const Buffer* b) { return planner->owns(b); });
  impl->events.resize(backends.size());
  for (size_t i = 0; i < backends.size(); ++i) {
    for (int c = 0; c < impl->n_copies; ++c) impl->events[i].push_back(backends[i]->device()->event_new());
  }
  return std::unique_ptr<Scheduler>(new Scheduler(std::move(impl)));
}

// ---------------------------------------------------------------------------------------------------------------

void Scheduler::Impl::reset_plan() {
  sched::restore_sources(plan);
  // Release the placements this scheduler made in the user's graph: its compute buffers may be replaced by a later
  // reserve (or freed with the scheduler), and a tensor must never keep pointing into them. Only an allocation
  // places tensors (a reserve or a dry run does not), so without one since the last reset there is nothing to release.
  if (graph != nullptr && placed) {
    for (const auto* list : {&graph->nodes(), &graph->leafs()}) {
      for (Tensor* t : *list) {
        if (planner->owns(tensor_buffer(*t))) {
          t->buffer = nullptr;
          t->data = nullptr;
        }
      }
    }
  }
  placed = false;
  reuse.clear();
  plan.clear();  // keeps the arrays' capacity for the next split
  plan.copy_ctx.reset();
  graph = nullptr;
  split_done = false;
  allocated = false;
  computed = false;
}

Status Scheduler::Impl::split(Graph& g, int slot_for_sources) {
  reset_plan();
  plan.copy_ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  for (const auto& [t, b] : pins) plan.set(t, b, Cause::kPinned);
  sched::PassOptions opt;
  opt.op_offload = params.op_offload;
  opt.fa_sinks_decide = params.fa_sinks_decide;
  opt.max_split_inputs = params.max_split_inputs;
  opt.n_copies = n_copies;
  opt.slot = slot_for_sources;
  graph = &g;
  Status s = sched::split_graph(plan, g, *set, opt);
  if (!s.ok()) {
    reset_plan();
    return s;
  }
  split_done = true;
  build_sched_graph(g, slot_for_sources);
  return Status::Ok();
}

// The graph the planner sees (docs/scheduler.md, 'Compute memory'): per split, a dependency node per input (keeping the
// source alive until it is copied) and the input's copy, then the split's nodes; then, with pipelining, the graph
// inputs' copies as leafs; then the original leafs.
//
// Copies are ordinary tensors for the planner: placed when their split starts and freed after their last reader, so
// their memory is reused within the evaluation. With pipelining they are planned in the copy region of their backend's
// buffer type instead of its compute memory; the region has one replica per slot, and this evaluation's copies are
// placed in the replica of its slot (Impl::do_alloc). A slot's copies can then be written while an evaluation of
// another slot still reads its own, and the plan (the same graph structure for every slot) serves every slot. The
// graph inputs' copies are written before the first split, so they are leafs, flagged INPUT|OUTPUT: alive for the
// whole evaluation. All slots' are listed, in compute memory (slot 0's is the input itself), as ggml lists them.
void Scheduler::Impl::build_sched_graph(const Graph& g, int s_slot) {
  size_t n_inputs = 0;
  for (const auto& sp : plan.splits) n_inputs += sp.inputs.size();
  for (auto* v : {&sched_nodes, &sched_leafs}) v->clear();
  for (auto* v : {&node_ids, &leaf_ids, &node_backends, &leaf_backends}) v->clear();
  for (auto* v : {&sched_node_pid, &sched_leaf_pid, &sched_dep_input}) v->clear();
  const size_t n_sched_nodes = g.n_nodes() + 2 * n_inputs,
               n_sched_leafs = g.n_leafs() + plan.graph_inputs.size() * static_cast<size_t>(n_copies);
  sched_nodes.reserve(n_sched_nodes);
  sched_leafs.reserve(n_sched_leafs);
  for (auto* v : {&node_ids, &node_backends}) v->reserve(n_sched_nodes);
  for (auto* v : {&sched_node_pid, &sched_dep_input}) v->reserve(n_sched_nodes);
  for (auto* v : {&leaf_ids, &leaf_backends}) v->reserve(n_sched_leafs);
  sched_leaf_pid.reserve(n_sched_leafs);
  // node i of g has id i, leaf i id n_nodes + i (SchedPlan::index)
  auto bid_of = [&](int b) { return buft_id[static_cast<size_t>(b < 0 ? static_cast<int>(backends.size()) - 1 : b)]; };

  // The dependency nodes read their inputs' Tensors, which on a large graph are far beyond the caches by now: the
  // inputs of a few splits ahead are prefetched.
  constexpr size_t kAhead = 4;
  const bool far = detail::tensors_far(g.n_nodes() + g.n_leafs());
  for (size_t si = 0; si < plan.splits.size(); ++si) {
    const sched::Split& sp = plan.splits[si];
    if (far && si + kAhead < plan.splits.size()) {
      for (const Tensor* in : plan.splits[si + kAhead].inputs) detail::prefetch_bytes(in, 0, sizeof(Tensor));
    }
    for (size_t k = 0; k < sp.inputs.size(); ++k) {
      Tensor* in = sp.inputs[k];
      // A view op among this split's own nodes (pass 5 puts a view in the split where the graph has it, and the
      // split may read it through a copy) comes after the split's input copies in the list: a dependency node
      // here would read it before the planner has walked it, so the planner would release it twice (once after
      // its last reader, the dependency node, once when it walks the view and finds no reader left) and free its
      // view source while other views of that source are still to be read. The view itself, walked later, keeps
      // its source alive past the copy.
      const int32_t in_id = sp.input_ids[k];
      const bool later_in_split =
          in_id >= 0 && static_cast<size_t>(in_id) >= sp.i_start && static_cast<size_t>(in_id) < sp.i_end;
      if (!later_in_split) {
        // a view of the input as dependency node: "used" here, so the planner keeps the source until the copy
        Tensor* dep = plan.copy_ctx->new_view(in, in->type, in->ne, in->nb, 0);
        if (dep == nullptr) continue;  // cannot happen: same shape as its source
        dep->op = Op::kView;
        dep->src[0] = in;
        dep_name(*dep, in->name);
        const int in_backend = plan.backend(in_id);
        const int32_t dep_id = plan.add_new(dep);
        plan.set_id(dep_id, in_backend, Cause::kCopy);
        add_sched_node(dep, dep_id, in_id, bid_of(in_backend), in_backend);
      }
      // the copy is placed when its split starts, and freed after its last reader
      add_sched_node(sp.input_copies[k][static_cast<size_t>(s_slot)], plan.copy_id_in_set(sp.input_sets[k], s_slot), -1,
                     region_id(buft_id[static_cast<size_t>(sp.backend)]), sp.backend);
    }
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const int b = plan.backend(static_cast<int32_t>(i));
      add_sched_node(g.node(i), static_cast<int32_t>(i), -1, bid_of(b), b);
    }
  }
  // With pipelining, each graph input's copies of every slot, the input itself (slot 0) first, as ggml lists them:
  // pinned for the whole evaluation in its backend's compute memory, the same list in every slot's graph
  auto graph_input_set = [&](int32_t id, int b) {
    const int32_t set = plan.copy_set(id, b);
    return set >= 0 && plan.copy_set_key(set).graph_input ? set : -1;
  };
  for (const int32_t id : plan.graph_input_ids) {
    const int b = plan.backend(id);
    const int32_t set = graph_input_set(id, b);
    for (int c = 0; c < n_copies; ++c) {
      add_sched_leaf(plan.copy_in_set(set, c), plan.copy_id_in_set(set, c), bid_of(b), b);
    }
  }
  for (size_t i = 0; i < g.n_leafs(); ++i) {
    const auto id = static_cast<int32_t>(g.n_nodes() + i);
    const int b = plan.backend(id);
    if (b >= 0 && !plan.graph_input_ids.empty() && graph_input_set(id, b) >= 0) continue;  // listed above
    add_sched_leaf(g.leaf(i), id, bid_of(b), b);
  }
  record_sched_positions(g);
}

// The planner graph's positions, from the plan's ids: every tensor of the lists has one (user nodes and leafs, the
// dependency nodes, the copies); the plan knows each user node's sources and view source, and pass 5's rewrites say
// which copy replaced a source. The planner takes these positions as exact, without reading the tensors' source
// pointers: SchedPlan::index resolved the plan's ids against those pointers in this split, and pass 5's rewrites are
// the only change since. A source outside the lists is kPosUnknown, which the planner looks up. Builds without NDEBUG
// (and TESSERA_CHECK_POSITIONS=1) make the planner check every position, so the tests catch a case missed here.
void Scheduler::Impl::record_sched_positions(const Graph& g) {
  sched_pos.assign(plan.n_ids(), Graph::kPosUnknown);
  for (size_t k = 0; k < sched_nodes.size(); ++k) {
    sched_pos[static_cast<size_t>(sched_node_pid[k])] = static_cast<int32_t>(k);
  }
  for (size_t k = 0; k < sched_leafs.size(); ++k) {
    sched_pos[static_cast<size_t>(sched_leaf_pid[k])] = Graph::leaf_position(k);
  }
  auto pos_of = [&](int32_t id) {
    if (id < 0) return Graph::kNoPos;
    return static_cast<size_t>(id) < sched_pos.size() ? sched_pos[static_cast<size_t>(id)] : Graph::kPosUnknown;
  };
  const auto n_user = static_cast<int32_t>(g.n_nodes());
  sched_src_pos.assign(sched_nodes.size() * kMaxSrc, Graph::kNoPos);
  sched_node_vsrc_pos.assign(sched_nodes.size(), Graph::kNoPos);
  for (size_t k = 0; k < sched_nodes.size(); ++k) {
    const int32_t pid = sched_node_pid[k];
    int32_t* out = &sched_src_pos[k * kMaxSrc];
    if (pid < n_user) {  // a node of the user's graph (sources as the user had them; rewrites below)
      const auto node = static_cast<size_t>(pid);
      for (int j = 0; j < plan.n_src(node); ++j) out[j] = pos_of(plan.src(node, j));
      sched_node_vsrc_pos[k] = pos_of(plan.view_src(pid));
    } else if (const int32_t in = sched_dep_input[k]; in >= 0) {  // a dependency node: a view of its input
      out[0] = pos_of(in);
      sched_node_vsrc_pos[k] = pos_of(plan.root(in));
    }  // a copy: no sources, not a view
  }
  for (const auto& r : plan.rewrites) {
    const int32_t k = pos_of(static_cast<int32_t>(r.node_index));
    if (k >= 0) sched_src_pos[static_cast<size_t>(k) * kMaxSrc + static_cast<size_t>(r.src)] = pos_of(r.replacement);
  }
  sched_leaf_vsrc_pos.assign(sched_leafs.size(), Graph::kNoPos);
  for (size_t k = 0; k < sched_leafs.size(); ++k) {
    const int32_t pid = sched_leaf_pid[k];
    if (pid < static_cast<int32_t>(g.n_nodes() + g.n_leafs())) sched_leaf_vsrc_pos[k] = pos_of(plan.view_src(pid));
  }
}

// Backend of every node and leaf of the planner's graph, for the re-reserve rule of the next allocation.
void Scheduler::Impl::record_backends() {
  prev_node_backends = node_backends;  // recorded by build_sched_graph
  prev_leaf_backends = leaf_backends;
}

Status Scheduler::Impl::do_alloc(Graph& g) {
  // The slot of this evaluation is chosen at allocation (rotating), never at compute.
  slot = next_slot;
  next_slot = (next_slot + 1) % n_copies;
  last_reused = false;
  switched = false;
  if (graph != &g) {
    // Another graph: its memory is laid out by another plan, so an evaluation in flight may still read where this
    // one's inputs (written by the host after this call) or nodes go. Wait for them, then the current plan into the
    // cache and g's (if cached) out.
    switched = graph != nullptr && split_done;
    if (graph != nullptr) sync_all();
    switch_plan(g);
  }
  if (try_reuse(g)) {  // same structure: keep the plan (the nodes now read this slot's copies)
    last_reused = true;
    ++reuses;
    allocated = true;
    computed = false;
    return Status::Ok();
  }
  if (params.debug_reserve && reuse.valid) std::fprintf(stderr, "tessera scheduler: new plan: %s\n", reuse_why.c_str());
  TS_RETURN_IF_ERROR(split(g, slot));

  // Re-reserve when an assignment moved to another buffer type, or the planner says the graph does not fit.
  std::string why;
  const std::vector<int> before_nodes = std::move(prev_node_backends);
  const std::vector<int> before_leafs = std::move(prev_leaf_backends);
  record_backends();
  auto moved = [&](const std::vector<int>& now, const std::vector<int>& before) {
    if (now.size() != before.size()) return false;  // counts: the planner's check reports them
    for (size_t i = 0; i < now.size(); ++i) {
      if (now[i] != before[i] && (now[i] < 0 || before[i] < 0 ||
                                  buft_id[static_cast<size_t>(now[i])] != buft_id[static_cast<size_t>(before[i])])) {
        return true;
      }
    }
    return false;
  };
  if (moved(prev_node_backends, before_nodes) || moved(prev_leaf_backends, before_leafs)) {
    why = "a node or leaf moved to a backend with another buffer type";
  } else {
    why = planner->needs_replan(sched_graph());
  }
  if (!why.empty()) {
    sync_all(&replan_syncs);  // nothing may still use the buffers a re-reserve replaces
    if (params.debug_reserve) std::fprintf(stderr, "tessera scheduler: re-reserve: %s\n", why.c_str());
    const size_t bytes_before = compute_bytes();
    Status s = planner->reserve_n(sched_graph(), node_ids, leaf_ids);
    ++reserves;
    // grown buffers replace the old ones: the cached plans' addresses are gone
    if (compute_bytes() != bytes_before) drop_cache("was dropped: the compute buffers grew (a graph outgrew them)");
    if (!s.ok()) {
      reset_plan();
      return Status(StatusCode::kAllocFailed, "scheduler: " + s.message());
    }
  }
  placed = true;                                         // (a failed allocation may have placed some tensors too)
  Status s = planner->alloc_graph(sched_graph(), slot);  // this slot's replica of the copy regions
  if (!s.ok()) {
    reset_plan();
    return Status(StatusCode::kAllocFailed, "scheduler: " + s.message());
  }
  allocated = true;
  computed = false;
  ++full_plans;
  record_reuse(g);
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------------------------

Status Scheduler::reserve(Graph& measure_graph) {
  Impl& m = *impl_;
  m.sync_idle();
  m.drop_cache("was dropped by reserve");
  Status s = m.split(measure_graph, 0);
  if (s.ok()) {
    ++m.explicit_reserves;
    s = m.planner->reserve_n(m.sched_graph(), m.node_ids, m.leaf_ids);
    ++m.reserves;
    m.record_backends();
  }
  m.reset_plan();  // keeps the user's pins
  return s;
}

Result<std::vector<size_t>> Scheduler::reserve_size(Graph& graph) {
  Impl& m = *impl_;
  m.sync_idle();
  m.drop_cache("was dropped by reserve_size");
  TS_RETURN_IF_ERROR(m.split(graph, 0));
  Result<std::vector<size_t>> sizes = m.planner->reserve_size(m.sched_graph(), m.node_ids, m.leaf_ids);
  m.reset_plan();
  if (!sizes.ok()) return sizes.status();
  std::vector<size_t> per_backend(m.backends.size());
  for (size_t b = 0; b < m.backends.size(); ++b) {
    const int u = m.buft_id[b];
    per_backend[b] = (*sizes)[static_cast<size_t>(u)];
    if (m.n_copies > 1) per_backend[b] += (*sizes)[static_cast<size_t>(m.region_id(u))];  // all slots' regions
  }
  return per_backend;
}

Status Scheduler::alloc_graph(Graph& graph) {
  // The user writes the inputs after this returns: a backend still reading one in place must be done first.
  Status s = impl_->wait_for_inplace_input_readers();
  if (s.ok()) s = impl_->do_alloc(graph);
  if (!s.ok()) impl_->last_error = s.message();
  return s;
}

ComputeStatus Scheduler::graph_compute_async(Graph& graph) {
  Impl& m = *impl_;
  if (!m.allocated || m.graph != &graph || m.computed) {
    m.note_inplace_input_readers();  // (the evaluation in flight: the next alloc_graph waits for its readers too)
    Status s = m.do_alloc(graph);
    if (!s.ok()) {
      return m.fail(s.code() == StatusCode::kAllocFailed ? ComputeStatus::kAllocFailed : ComputeStatus::kFailed,
                    s.message());
    }
  }
  m.computed = true;
  return m.execute();
}

ComputeStatus Scheduler::graph_compute(Graph& graph) {
  const ComputeStatus s = graph_compute_async(graph);
  const Status sync = synchronize();
  // A failure while the queued work ran is this evaluation's failure (never the next one's).
  if (s == ComputeStatus::kSuccess && !sync.ok()) return impl_->fail(ComputeStatus::kFailed, sync.message());
  return s;
}

const std::string& Scheduler::last_error() const { return impl_->last_error; }

void Scheduler::Impl::sync_all(int* count) {
  for (Backend* b : backends) {
    const Status s = b->synchronize();
    if (count != nullptr) ++*count;
    if (!s.ok() && pending_error.empty()) pending_error = "scheduler: " + s.message();
  }
}

void Scheduler::Impl::sync_idle() {
  sync_all();
  if (!allocated) next_slot = 0;  // nothing allocated: the rotation starts again at slot 0
}

Status Scheduler::synchronize() {
  Impl& m = *impl_;
  m.sync_idle();
  if (m.pending_error.empty()) return Status::Ok();
  Status failed(StatusCode::kFailed, m.pending_error);
  m.pending_error.clear();
  return failed;
}

void Scheduler::reset() {
  impl_->sync_idle();
  impl_->reset_plan();
  impl_->drop_cache("was dropped by reset");
  impl_->pins.clear();
}

Status Scheduler::set_tensor_backend(Tensor* t, Backend* backend) {
  if (t == nullptr) return Status(StatusCode::kInvalidArgument, "set_tensor_backend: null tensor");
  const int b = backend_index(backend);
  if (b < 0) {
    return TS_ERROR(StatusCode::kInvalidArgument, "set_tensor_backend: %s is not one of the scheduler's backends",
                    backend != nullptr ? backend->name() : "(null)");
  }
  auto [it, added] = impl_->pins.try_emplace(t, b);
  if (added || it->second != b) ++impl_->pins_version;  // a changed pin: the next allocation plans again
  it->second = b;
  if (impl_->split_done) impl_->plan.set(t, b, Cause::kPinned);
  return Status::Ok();
}

Backend* Scheduler::get_tensor_backend(const Tensor* t) const {
  int b = impl_->plan.backend_of(t);
  if (b < 0) {
    auto it = impl_->pins.find(t);
    if (it != impl_->pins.end()) b = it->second;
  }
  return b < 0 ? nullptr : impl_->backends[static_cast<size_t>(b)];
}

int Scheduler::n_backends() const { return static_cast<int>(impl_->backends.size()); }
Backend* Scheduler::backend(int i) const {
  return i >= 0 && i < n_backends() ? impl_->backends[static_cast<size_t>(i)] : nullptr;
}
int Scheduler::backend_index(const Backend* b) const {
  for (int i = 0; i < n_backends(); ++i) {
    if (impl_->backends[static_cast<size_t>(i)] == b) return i;
  }
  return -1;
}
int Scheduler::n_splits() const { return static_cast<int>(impl_->plan.splits.size()); }
int Scheduler::n_copies() const { return impl_->n_copies; }
int Scheduler::current_slot() const { return impl_->slot; }
int Scheduler::reserve_count() const { return impl_->reserves; }
int Scheduler::replan_count() const { return impl_->reserves - impl_->explicit_reserves; }
int Scheduler::replan_synchronizations() const { return impl_->replan_syncs; }
size_t Scheduler::planner_index_lookups() const { return impl_->planner->index_lookups(); }
size_t Scheduler::buffer_size(int backend) const {
  if (backend < 0 || backend >= n_backends()) return 0;
  const Impl& m = *impl_;
  const int u = m.buft_id[static_cast<size_t>(backend)];
  size_t total = m.planner->buffer_size(u);
  if (m.n_copies > 1) total += m.planner->buffer_size(m.region_id(u));  // all slots' copy regions
  return total;
}
void Scheduler::set_eval_callback(EvalCallback callback) { impl_->callback = std::move(callback); }
PlanReuse Scheduler::plan_reuse() const {
  const Impl& m = *impl_;
  const int current = m.graph != nullptr && m.reuse.valid ? 1 : 0;
  return {m.last_reused, m.last_reused ? std::string() : m.reuse_why, m.reuses, m.full_plans,
          static_cast<int>(m.cache.size()) + current};
}

std::vector<Scheduler::SplitView> Scheduler::splits() const {
  std::vector<SplitView> out;
  for (const auto& s : impl_->plan.splits) {
    SplitView v{s.backend, s.i_start, s.i_end, {}, s.reason};
    for (const Tensor* t : s.inputs) v.inputs.push_back(t);
    out.push_back(std::move(v));
  }
  return out;
}

TensorExplain Scheduler::explain(const Tensor* t) const {
  const Impl& m = *impl_;
  TensorExplain e;
  const int32_t id = m.plan.id_of(t);  // (one lookup: the split-cause summary explains every node)
  e.backend = id < 0 ? -1 : m.plan.backend(id);
  e.cause = id < 0 ? Cause::kUnassigned : m.plan.cause(id);
  if (e.backend < 0) {
    auto it = m.pins.find(t);
    if (it != m.pins.end()) {
      e.backend = it->second;
      e.cause = Cause::kPinned;
    }
  }
  if (e.backend >= 0) e.backend_name = m.backends[static_cast<size_t>(e.backend)]->name();
  e.plan_reused = m.last_reused;
  e.is_copy = m.plan.is_copy_id(id);
  if (e.is_copy) e.copy_of = m.plan.tensor(m.plan.copy_origin(id));
  if (m.graph != nullptr && !m.plan.node_split.empty()) {
    // The plan numbers the graph's nodes 0..n-1 (SchedPlan::index): a node's id is its position, so this is a lookup,
    // not a scan of the graph (the split-cause summary explains every node: a scan made `plan` quadratic, issue 51).
    const size_t n = std::min(m.graph->n_nodes(), m.plan.node_split.size());
    if (id >= 0 && static_cast<size_t>(id) < n && m.graph->node(static_cast<size_t>(id)) == t) {
      e.split = m.plan.node_split[static_cast<size_t>(id)];
    }
  }
  return e;
}

}  // namespace tessera
