// Plan reuse (docs/scheduler.md, 'Reuse'): a graph evaluated again with the same structure keeps its assignment,
// splits, copies and compute plan; the scheduler only rewrites the nodes' sources to this evaluation's slot copies.
#include <cstring>

#include "reuse.h"
#include "scheduler_impl.h"

namespace tessera {

namespace sched {

std::string structure_difference(const Tensor& now, const unsigned char* then_bytes) {
  Tensor then;  // the recorded bytes as a Tensor (only its structure bytes are meaningful)
  std::memcpy(static_cast<void*>(&then), then_bytes, kStructureBytes);
  if (now.type != then.type) return "type";
  if (std::memcmp(now.ne, then.ne, sizeof now.ne) != 0) return "ne (shape)";
  if (std::memcmp(now.nb, then.nb, sizeof now.nb) != 0) return "nb (strides)";
  if (now.op != then.op) return "op";
  if (std::memcmp(now.op_params, then.op_params, sizeof now.op_params) != 0) return "op_params";
  if (now.flags != then.flags) return "flags";
  for (int j = 0; j < kMaxSrc; ++j) {
    if (now.src[j] != then.src[j]) return "src[" + std::to_string(j) + "]";
  }
  if (now.view_src != then.view_src) return "view_src";
  if (now.view_offs != then.view_offs) return "view_offs";
  if (now.buffer != then.buffer) return "buffer";
  return "";
}

}  // namespace sched

namespace {

std::string describe_position(const Graph& g, size_t i) {
  const bool node = i < g.n_nodes();
  const Tensor* t = node ? g.node(i) : g.leaf(i - g.n_nodes());
  return std::string(node ? "node" : "leaf") + " '" + t->name + "' (" + (node ? "node " : "leaf ") +
         std::to_string(node ? i : i - g.n_nodes()) + ")";
}

}  // namespace

// After a full split and allocation: remember the graph as the user has it (the rewritten sources as they were).
void Scheduler::Impl::record_reuse(const Graph& g) {
  sched::ReuseRecord& r = reuse;
  r.clear();
  if (!params.reuse) return;
  const size_t n = g.n_nodes() + g.n_leafs();
  r.n_nodes = g.n_nodes();
  r.tensors.assign(g.nodes().begin(), g.nodes().end());
  r.tensors.insert(r.tensors.end(), g.leafs().begin(), g.leafs().end());
  r.bytes.resize(n * sched::kStructureBytes);
  for (size_t i = 0; i < n; ++i)
    std::memcpy(&r.bytes[i * sched::kStructureBytes], r.tensors[i], sched::kStructureBytes);
  // The sources as the user had them: in reverse, like restore_sources, so a source rewritten twice ends as the user's.
  for (auto it = plan.rewrites.rbegin(); it != plan.rewrites.rend(); ++it) {
    std::memcpy(&r.bytes[it->node_index * sched::kStructureBytes + offsetof(Tensor, src) +
                         static_cast<size_t>(it->src) * sizeof(Tensor*)],
                &it->original, sizeof(Tensor*));
  }
  // The copy set of each rewrite, so that a later evaluation can read the copies of its own slot.
  std::vector<int32_t>& set_of = r.set_of;
  set_of.assign(plan.n_ids(), -1);
  for (size_t set = 0; set < plan.n_copy_sets(); ++set) {
    for (int s = 0; s < n_copies; ++s) {
      const int32_t id = plan.copy_id_in_set(static_cast<int32_t>(set), s);
      if (id >= 0) set_of[static_cast<size_t>(id)] = static_cast<int32_t>(set);
    }
  }
  r.rewrite_sets.clear();
  for (const auto& w : plan.rewrites) r.rewrite_sets.push_back(set_of[static_cast<size_t>(w.replacement)]);
  r.pins_version = pins_version;
  r.placed_slots = 1u << slot;
  // With pipelining: where the planner put this slot's copies, for the other slots (place_slot_copies)
  for (size_t k = 0; n_copies > 1 && k < sched_nodes.size() + sched_leafs.size(); ++k) {
    const bool node = k < sched_nodes.size();
    const size_t at = node ? k : k - sched_nodes.size();
    const int32_t pid = node ? sched_node_pid[at] : sched_leaf_pid[at];
    if (!plan.is_copy_id(pid) || (node && sched_dep_input[at] >= 0)) continue;
    // (a graph input's copies: every slot's are in every slot's graph, placed by the planner)
    if (plan.copy_set_key(set_of[static_cast<size_t>(pid)]).graph_input) continue;
    r.copy_places.push_back(
        {set_of[static_cast<size_t>(pid)], node ? planner->planned_node(at) : planner->planned_leaf(at)});
  }
  r.valid = true;
}

// The reuse check of alloc_graph (the new slot is chosen). True when the plan is kept: the nodes now read the copies
// of `slot`. Otherwise reuse_why says why, and the caller takes the full path.
bool Scheduler::Impl::try_reuse(Graph& g) {
  sched::ReuseRecord& r = reuse;
  if (!params.reuse) return (reuse_why = "reuse is off (SchedulerParams::reuse)"), false;
  if (graph != &g) return (reuse_why = why_not_cached(g)), false;
  if (!r.valid || !split_done) {
    return (reuse_why = "no plan to reuse (the first evaluation, or after reserve, reset or a failure)"), false;
  }
  if (pins_version != r.pins_version) return (reuse_why = "a pin changed (set_tensor_backend)"), false;
  if (g.n_nodes() != r.n_nodes || g.n_nodes() + g.n_leafs() != r.tensors.size()) {
    reuse_why = "the graph has " + std::to_string(g.n_nodes()) + " nodes and " + std::to_string(g.n_leafs()) +
                " leafs, the plan " + std::to_string(r.n_nodes) + " and " +
                std::to_string(r.tensors.size() - r.n_nodes);
    return false;
  }
  const size_t n = r.tensors.size();
  const auto tensor_at = [&](size_t i) { return i < g.n_nodes() ? g.node(i) : g.leaf(i - g.n_nodes()); };
  // (memcmp only over non-empty ranges: an empty vector's data() may be null, which memcmp must not get.)
  const bool nodes_differ =
      g.n_nodes() > 0 && std::memcmp(g.nodes().data(), r.tensors.data(), g.n_nodes() * sizeof(Tensor*)) != 0;
  const bool leafs_differ = g.n_leafs() > 0 && std::memcmp(g.leafs().data(), r.tensors.data() + g.n_nodes(),
                                                           g.n_leafs() * sizeof(Tensor*)) != 0;
  if (nodes_differ || leafs_differ) {
    for (size_t i = 0; i < n; ++i) {
      if (tensor_at(i) != r.tensors[i]) return (reuse_why = describe_position(g, i) + ": another tensor"), false;
    }
  }
  // A plan taken from the cache: its graph's placements back first (they are structure: the buffers)
  if (!parked.empty()) {
    if (Status s = place_parked(); !s.ok()) return (reuse_why = "placing the graph again: " + s.message()), false;
  }
  // One walk over the tensors in order (pass 5 made the rewrites in node order): a node's rewritten sources back to
  // the user's, its bytes compared with the record, then its sources to this slot's copies. Each Tensor is read once,
  // and on a graph whose Tensors outgrow the caches the walk prefetches them ahead (they need not be adjacent). A
  // rewritten source the user replaced since is the user's from now on (never overwritten again), and a change. On a
  // change the walk stops: the full path restores every rewritten source from the plan.
  const unsigned char* bytes = r.bytes.data();
  const size_t n_rewrites = plan.rewrites.size();
  const bool far = detail::tensors_far(n);
  constexpr size_t kAhead = 8;
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (far && i + kAhead < n) detail::prefetch_bytes(r.tensors[i + kAhead], 0, sched::kStructureBytes);
    Tensor* t = r.tensors[i];
    const size_t k0 = k;
    for (; k < n_rewrites && plan.rewrites[k].node_index == i; ++k) {
      sched::SchedPlan::Rewrite& w = plan.rewrites[k];
      Tensor*& src = t->src[w.src];
      if (src != plan.tensor(w.replacement) && src != w.original) {
        w.original = src;
        reuse_why = describe_position(g, i) + ": src[" + std::to_string(w.src) + "]";
        return false;
      }
      src = w.original;
    }
    if (std::memcmp(t, bytes + i * sched::kStructureBytes, sched::kStructureBytes) != 0) {
      std::string field = sched::structure_difference(*t, bytes + i * sched::kStructureBytes);
      if (field.empty()) field = "padding bytes";  // a Tensor assigned over: padding differs, nothing else
      reuse_why = describe_position(g, i) + ": " + field;
      return false;
    }
    for (size_t q = k0; q < k; ++q) {  // reuse so far: the node reads this slot's copies
      sched::SchedPlan::Rewrite& w = plan.rewrites[q];
      const int32_t set = r.rewrite_sets[q];
      t->src[w.src] = plan.copy_in_set(set, slot);
      w.replacement = plan.copy_id_in_set(set, slot);
    }
  }
  if ((r.placed_slots >> slot & 1u) == 0) {
    // This slot's copies have no addresses yet: the offsets of the planned slot's, in this slot's replica.
    if (Status s = place_slot_copies(slot); !s.ok()) {
      reuse_why = "placing the copies of slot " + std::to_string(slot) + ": " + s.message();
      return false;
    }
    r.placed_slots |= 1u << slot;
  }
  reuse_why.clear();
  return true;
}

}  // namespace tessera
