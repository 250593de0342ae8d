// The plan verifier (plan.h): what each pass of the scheduler guarantees, checked on the plan it left. split_graph runs
// it after every pass in builds with TESSERA_CHECK_INVARIANTS (Debug, sanitizers); the rules are docs/scheduler.md's.
// Every check is linear in the plan (its ids, the nodes' sources, the splits, copy sets and rewrites) and never asks
// supports_op: where a rule depends on it, it reads the answers the passes memoised.
#include <algorithm>
#include <string>
#include <vector>

#include "plan.h"

namespace tessera::sched {

namespace {

// The pass that sets a cause (0: set before pass 1, or no assignment).
int pass_setting(Cause c) {
  switch (c) {
    case Cause::kUnassigned:
    case Cause::kPinned: return 0;
    case Cause::kHasBuffer:
    case Cause::kViewSourceHasBuffer:
    case Cause::kInput:
    case Cause::kWeight:
    case Cause::kOpOffload: return 1;
    case Cause::kExpanded: return 2;
    case Cause::kMostSources:
    case Cause::kUpgraded: return 3;
    case Cause::kViewOfSource:
    case Cause::kConsumer:
    case Cause::kFallback: return 4;
    case Cause::kCopy: return 5;
    case Cause::kCount: break;
  }
  return 99;
}

// A broken invariant: the verifier's functions return its message ("" when every invariant holds).
#define VERIFY(cond, invariant, ...)                                       \
  do {                                                                     \
    if (!(cond)) return violation(invariant, format_message(__VA_ARGS__)); \
  } while (0)

class Verify {
 public:
  Verify(int pass, const SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt)
      : pass_(pass), plan_(plan), g_(g), bs_(bs), opt_(opt) {}

  std::string common() const;
  std::string pass1() const;
  std::string changes(const std::vector<int8_t>& backend, const std::vector<Cause>& cause) const;
  std::string pass4() const;
  std::string pass5() const;

 private:
  std::string violation(const char* invariant, const std::string& detail) const {
    return format_message("after pass %d: %s: %s", pass_, invariant, detail.c_str());
  }
  // "'name' (id N)"
  std::string who(int32_t id) const {
    const Tensor* t = id >= 0 && static_cast<size_t>(id) < plan_.n_ids() ? plan_.tensor(id) : nullptr;
    const char* name = t == nullptr ? "(no tensor)" : t->name[0] != '\0' ? t->name : "(unnamed)";
    return format_message("'%s' (id %d)", name, id);
  }
  std::string on(int b) const {
    if (b < 0) return "no backend";
    if (b >= bs_.size()) return format_message("backend %d (of %d)", b, bs_.size());
    return bs_.name(b);
  }
  static const char* name_of(const BufferType* buft) { return buft != nullptr ? buft->name() : "(none)"; }
  static const char* name_of(const Tensor* t) { return t != nullptr ? t->name : "(null)"; }
  std::string assignment(int b, Cause c) const { return format_message("%s [%s]", on(b).c_str(), cause_name(c)); }
  // A tensor backend b reads without a copy: on b, or in memory b can use.
  bool readable(int32_t id, int b) const { return plan_.backend(id) == b || buffer_supported(plan_, bs_, id, b); }
  bool is_writer(int32_t id) const {  // a node writing into its view source (CPY, SET_ROWS), which pass 4 places
    return static_cast<size_t>(id) < plan_.n_nodes() && plan_.view_src(id) >= 0 && !plan_.has(id, SchedPlan::kViewOp) &&
           !plan_.has(id, SchedPlan::kNoneOp) && plan_.fixed_buft(plan_.root(id)) == nullptr;
  }

  int pass_;
  const SchedPlan& plan_;
  const Graph& g_;
  const BackendSet& bs_;
  const PassOptions& opt_;
};

// After every pass: assignments are well-formed, and each cause comes from a pass that has run.
std::string Verify::common() const {
  VERIFY(plan_.n_nodes() == g_.n_nodes() && plan_.n_leafs() == g_.n_leafs(), "the plan indexes the graph",
         "the plan has %zu nodes and %zu leafs, the graph %zu and %zu", plan_.n_nodes(), plan_.n_leafs(), g_.n_nodes(),
         g_.n_leafs());
  const int n_backends = bs_.size();
  for (int32_t id = 0, n = static_cast<int32_t>(plan_.n_ids()); id < n; ++id) {
    const int b = plan_.backend(id);
    const Cause c = plan_.cause(id);
    VERIFY(b >= -1 && b < n_backends, "a backend is one of the set", "%s is on backend %d of %d", who(id).c_str(), b,
           n_backends);
    VERIFY(c < Cause::kCount, "a cause is a known one", "%s has cause %d", who(id).c_str(), static_cast<int>(c));
    VERIFY((b >= 0) == (c != Cause::kUnassigned), "a tensor has a backend exactly when it has a cause", "%s is %s",
           who(id).c_str(), assignment(b, c).c_str());
    VERIFY(pass_setting(c) <= pass_, "a cause comes from a pass that has run", "%s is %s", who(id).c_str(),
           assignment(b, c).c_str());
    VERIFY(plan_.is_copy_id(id) == (c == Cause::kCopy), "exactly the scheduler's copies have cause copy",
           "%s is %s and %s a copy", who(id).c_str(), assignment(b, c).c_str(), plan_.is_copy_id(id) ? "is" : "not");
  }
  return {};
}

// Right after pass 1: every cause of pass 1 is its rule's, and each rule that applies was applied. (Pass 4 may later
// move a destination with its writers and keep its cause, so these hold only here.)
std::string Verify::pass1() const {
  const auto n_graph = static_cast<int32_t>(plan_.n_nodes() + plan_.n_leafs());
  const int last = bs_.last();
  for (int32_t id = 0, n = static_cast<int32_t>(plan_.n_ids()); id < n; ++id) {
    const int b = plan_.backend(id);
    const Cause c = plan_.cause(id);
    const int32_t v = plan_.view_src(id);
    if (pass_setting(c) == 1) {
      VERIFY(id < n_graph, "pass 1 assigns only the graph's nodes and leafs", "%s (outside the graph) is %s",
             who(id).c_str(), assignment(b, c).c_str());
    }
    const int supported = plan_.supports_answer(id, b);
    switch (c) {
      case Cause::kHasBuffer: {
        const BufferType* buft = plan_.fixed_buft(id);
        VERIFY(v < 0 && buft != nullptr && plan_.can_use(bs_, buft, b) && supported != 0,
               "1.dst: a tensor with memory runs on a backend that can use it and its op", "%s is %s, buffer type %s",
               who(id).c_str(), assignment(b, c).c_str(), name_of(buft));
        break;
      }
      case Cause::kViewSourceHasBuffer: {
        const BufferType* buft = v >= 0 ? plan_.fixed_buft(v) : nullptr;
        VERIFY(buft != nullptr && plan_.can_use(bs_, buft, b) && supported != 0,
               "1.vsrc: a view of memory runs on a backend that can use that memory and its op",
               "%s is %s, view of %s in buffer type %s", who(id).c_str(), assignment(b, c).c_str(), who(v).c_str(),
               name_of(buft));
        break;
      }
      case Cause::kInput:
        VERIFY(plan_.has(id, SchedPlan::kInputFlag) && b == last, "1.inp: a graph input starts on the last backend",
               "%s is %s%s", who(id).c_str(), assignment(b, c).c_str(),
               plan_.has(id, SchedPlan::kInputFlag) ? "" : " without the INPUT flag");
        break;
      case Cause::kWeight:
      case Cause::kOpOffload: {
        const int32_t w = plan_.deciding_weight(id);
        const BufferType* buft = w >= 0 ? plan_.fixed_buft(w) : nullptr;
        if (c == Cause::kWeight) {
          VERIFY(buft != nullptr && plan_.can_use(bs_, buft, b) && supported != 0,
                 "1.wgt: a node runs where its deciding weight's memory can be used", "%s is %s, deciding weight %s",
                 who(id).c_str(), assignment(b, c).c_str(), who(w).c_str());
        } else {
          VERIFY(
              opt_.op_offload && w >= 0 && plan_.has(w, SchedPlan::kHostBuffer) && b < last && supported != 0,
              "1.off: only an op whose deciding weight is in host memory is offloaded, to a backend that supports it",
              "%s is %s, deciding weight %s%s", who(id).c_str(), assignment(b, c).c_str(), who(w).c_str(),
              opt_.op_offload ? "" : ", op_offload off");
        }
        break;
      }
      default: break;
    }
    if (id >= n_graph || c == Cause::kPinned) continue;
    // the rules that always assign (or fail the pass), in pass 1's order
    if (v < 0 && plan_.fixed_buft(id) != nullptr) {
      VERIFY(c == Cause::kHasBuffer, "1.dst: every tensor with memory is assigned by it", "%s (buffer type %s) is %s",
             who(id).c_str(), plan_.fixed_buft(id)->name(), assignment(b, c).c_str());
    } else if (v >= 0 && plan_.fixed_buft(v) != nullptr) {
      VERIFY(c == Cause::kViewSourceHasBuffer, "1.vsrc: every view of memory is assigned by it",
             "%s (view of %s) is %s", who(id).c_str(), who(v).c_str(), assignment(b, c).c_str());
    } else if (plan_.has(id, SchedPlan::kInputFlag)) {
      VERIFY(c == Cause::kInput, "1.inp: every graph input without memory starts on the last backend", "%s is %s",
             who(id).c_str(), assignment(b, c).c_str());
    }
  }
  return {};
}

// From pass 2 on: what changed since the previous pass is what this pass may change.
std::string Verify::changes(const std::vector<int8_t>& backend, const std::vector<Cause>& cause) const {
  // Pass 4 moves a destination with its writers (and the destination's views) and keeps the destination's cause.
  std::vector<uint8_t> written;
  if (pass_ == 4) {
    written.assign(plan_.n_ids(), 0);
    for (int32_t id = 0, n = static_cast<int32_t>(plan_.n_nodes()); id < n; ++id) {
      if (is_writer(id)) written[static_cast<size_t>(plan_.root(id))] = 1;
    }
  }
  for (size_t k = 0; k < backend.size(); ++k) {
    const auto id = static_cast<int32_t>(k);
    const int b0 = backend[k], b1 = plan_.backend(id);
    const Cause c0 = cause[k], c1 = plan_.cause(id);
    if (b0 == b1 && c0 == c1) continue;
    const std::string what = format_message("%s went from %s to %s", who(id).c_str(), assignment(b0, c0).c_str(),
                                            assignment(b1, c1).c_str());
    VERIFY(c0 != Cause::kPinned, "a pin never moves", "%s", what.c_str());
    const bool computed = static_cast<size_t>(id) < plan_.n_nodes() && !plan_.has(id, SchedPlan::kViewOp);
    const bool supported = b1 >= 0 && plan_.supports_answer(id, b1) != 0;
    switch (pass_) {
      case 2:
        VERIFY(c0 == Cause::kUnassigned && c1 == Cause::kExpanded && computed && supported,
               "2.exp: pass 2 only assigns unassigned computed nodes, to a backend that supports them", "%s",
               what.c_str());
        break;
      case 3:
        VERIFY(computed && supported &&
                   ((c0 == Cause::kUnassigned && c1 == Cause::kMostSources) ||
                    (c0 != Cause::kUnassigned && c1 == Cause::kUpgraded && b1 < b0 &&
                     bs_.compute_buft(b1) == bs_.compute_buft(b0))),
               "3.best / 3.upg: pass 3 assigns unassigned nodes, or moves a node up to a backend sharing its compute "
               "buffer type",
               "%s", what.c_str());
        break;
      case 4:
        if (c0 == Cause::kUnassigned) {
          VERIFY(pass_setting(c1) == 4, "pass 4 assigns with its own causes", "%s", what.c_str());
        } else {
          const bool view_of_written = static_cast<size_t>(id) < plan_.n_nodes() && plan_.has(id, SchedPlan::kViewOp) &&
                                       plan_.view_src(id) >= 0 && written[static_cast<size_t>(plan_.root(id))] != 0;
          VERIFY((written[k] != 0 && c1 == c0) || (c1 == Cause::kViewOfSource && (is_writer(id) || view_of_written)),
                 "pass 4 moves an assigned tensor only to put the writers of a destination and the destination "
                 "(with its views) on one backend",
                 "%s", what.c_str());
        }
        break;
      default: VERIFY(false, "pass 5 changes no assignment", "%s", what.c_str());
    }
  }
  if (pass_ == 5) {  // what it adds are copies
    for (size_t id = backend.size(); id < plan_.n_ids(); ++id) {
      VERIFY(plan_.is_copy_id(static_cast<int32_t>(id)), "pass 5 adds only copies", "%s is new and not a copy",
             who(static_cast<int32_t>(id)).c_str());
    }
  }
  return {};
}

// After pass 4: nothing the splits will read is unassigned, every computed node runs where it is supported, writers
// run where their destination lives, views placed by pass 4 where their source lives.
std::string Verify::pass4() const {
  for (int32_t id = 0, n = static_cast<int32_t>(plan_.n_nodes()); id < n; ++id) {
    const int b = plan_.backend(id);
    VERIFY(b >= 0, "every node has a backend", "node %s has none", who(id).c_str());
    for (int j = 0, ns = plan_.n_src(static_cast<size_t>(id)); j < ns; ++j) {
      const int32_t s = plan_.src(static_cast<size_t>(id), j);
      VERIFY(s < 0 || plan_.backend(s) >= 0, "every source of a node has a backend", "source %d %s of node %s has none",
             j, who(s).c_str(), who(id).c_str());
    }
    if (!plan_.has(id, SchedPlan::kViewOp) && !plan_.has(id, SchedPlan::kNoneOp)) {
      // pass 4 asks supports_op of every computed node on its backend (memoised below backend 16)
      const int answer = plan_.supports_answer(id, b);
      VERIFY(answer == 1 || (b >= 16 && answer < 0), "every computed node runs on a backend that supports it",
             "%s is %s, and supports_op %s", who(id).c_str(), assignment(b, plan_.cause(id)).c_str(),
             answer == 0 ? "said no" : "was never asked");
    }
    const int32_t v = plan_.view_src(id);
    if (is_writer(id) && plan_.backend(plan_.root(id)) >= 0) {
      const int32_t r = plan_.root(id);
      VERIFY(b == plan_.backend(r), "a node that writes into a tensor runs where that tensor lives",
             "%s is %s, its destination %s is %s", who(id).c_str(), assignment(b, plan_.cause(id)).c_str(),
             who(r).c_str(), assignment(plan_.backend(r), plan_.cause(r)).c_str());
    } else if (v >= 0 && plan_.has(id, SchedPlan::kViewOp) && plan_.cause(id) == Cause::kViewOfSource) {
      VERIFY(b == plan_.backend(v), "4.vsrc: a view placed by pass 4 is on its source's backend",
             "%s is %s, its source %s is %s", who(id).c_str(), assignment(b, plan_.cause(id)).c_str(), who(v).c_str(),
             assignment(plan_.backend(v), plan_.cause(v)).c_str());
    }
  }
  return {};
}

// After pass 5: the splits cut the node list, their inputs have their copies, and every source a node's backend
// cannot read is read through a copy it can.
std::string Verify::pass5() const {
  const size_t n = g_.n_nodes();
  const size_t n_copies = static_cast<size_t>(std::clamp(opt_.n_copies, 1, static_cast<int>(kParallelCopies)));
  const auto n_ids = static_cast<int32_t>(plan_.n_ids());
  const auto n_sets = static_cast<int32_t>(plan_.n_copy_sets());
  VERIFY(plan_.node_split.size() == n, "every node has a split", "node_split has %zu entries for %zu nodes",
         plan_.node_split.size(), n);
  VERIFY(plan_.splits.empty() == (n == 0), "a graph with nodes has splits, an empty one none", "%zu splits, %zu nodes",
         plan_.splits.size(), n);
  // Scheduler::create keeps max_split_inputs at kMaxSrc or more: below that one node's sources could exceed it.
  const size_t max_inputs = static_cast<size_t>(std::max(opt_.max_split_inputs, kMaxSrc));
  size_t next = 0;
  for (size_t k = 0; k < plan_.splits.size(); ++k) {
    const Split& sp = plan_.splits[k];
    VERIFY(sp.backend >= 0 && sp.backend < bs_.size(), "a split runs on a backend of the set", "split %zu is on %s", k,
           on(sp.backend).c_str());
    VERIFY(sp.i_start == next && sp.i_end > sp.i_start && sp.i_end <= n,
           "split ranges are contiguous, in order, not empty and cover every node once",
           "split %zu covers nodes [%zu, %zu), expected to start at %zu (%zu nodes)", k, sp.i_start, sp.i_end, next, n);
    next = sp.i_end;
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const auto id = static_cast<int32_t>(i);
      VERIFY(plan_.node_split[i] == static_cast<int>(k), "node_split names the split that holds the node",
             "node %s is in split %zu, node_split says %d", who(id).c_str(), k, plan_.node_split[i]);
      VERIFY(plan_.has(id, SchedPlan::kViewOp) || plan_.backend(id) == sp.backend,
             "a split's computed nodes run on its backend", "node %s is %s in split %zu on %s", who(id).c_str(),
             assignment(plan_.backend(id), plan_.cause(id)).c_str(), k, on(sp.backend).c_str());
    }
    const size_t n_in = sp.inputs.size();
    VERIFY(sp.input_ids.size() == n_in && sp.input_copies.size() == n_in && sp.input_sets.size() == n_in,
           "a split's input lists are parallel", "split %zu: %zu inputs, %zu ids, %zu copy lists, %zu copy sets", k,
           n_in, sp.input_ids.size(), sp.input_copies.size(), sp.input_sets.size());
    VERIFY(n_in <= max_inputs, "a split has at most max_split_inputs inputs", "split %zu on %s has %zu (max %zu)", k,
           on(sp.backend).c_str(), n_in, max_inputs);
    for (size_t q = 0; q < n_in; ++q) {
      const int32_t id = sp.input_ids[q];
      VERIFY(id >= 0 && id < n_ids && plan_.user_tensor(id) == sp.inputs[q], "a split input is the tensor its id names",
             "split %zu input %zu: id %d, tensor '%s'", k, q, id, name_of(sp.inputs[q]));
      VERIFY(!readable(id, sp.backend), "a split input is a tensor the split's backend cannot read",
             "split %zu on %s copies %s (%s)", k, on(sp.backend).c_str(), who(id).c_str(),
             assignment(plan_.backend(id), plan_.cause(id)).c_str());
      const int32_t set = sp.input_sets[q];
      VERIFY(set >= 0 && set < n_sets, "each split input has a copy set", "split %zu input %s: set %d of %d", k,
             who(id).c_str(), set, n_sets);
      const SchedPlan::CopySetKey& key = plan_.copy_set_key(set);
      VERIFY(key.id == id && key.backend == sp.backend && !key.graph_input,
             "each split input's copies are its copies on the split's backend",
             "split %zu on %s input %s reads set %d: copies of %s on %s%s", k, on(sp.backend).c_str(), who(id).c_str(),
             set, who(key.id).c_str(), on(key.backend).c_str(), key.graph_input ? " (graph input)" : "");
      for (size_t c = 0; c < n_copies; ++c) {
        VERIFY(sp.input_copies[q][c] != nullptr && sp.input_copies[q][c] == plan_.copy_in_set(set, static_cast<int>(c)),
               "each split input's copy exists, one per slot", "split %zu input %s slot %zu", k, who(id).c_str(), c);
      }
    }
  }
  VERIFY(next == n, "split ranges are contiguous, in order, not empty and cover every node once",
         "the splits end at node %zu of %zu", next, n);

  for (int32_t set = 0; set < n_sets; ++set) {
    const SchedPlan::CopySetKey& key = plan_.copy_set_key(set);
    VERIFY(key.id >= 0 && key.id < n_ids && key.backend >= 0 && key.backend < bs_.size(),
           "a copy set copies a tensor of the plan to a backend of the set", "set %d: id %d to %s", set, key.id,
           on(key.backend).c_str());
    for (size_t c = 0; c < kParallelCopies; ++c) {
      const int32_t cid = plan_.copy_id_in_set(set, static_cast<int>(c));
      if (c >= n_copies) {
        VERIFY(cid < 0, "a copy set has one copy per slot", "set %d (of %s) has a copy for slot %zu of %zu", set,
               who(key.id).c_str(), c, n_copies);
        continue;
      }
      VERIFY(cid >= 0 && cid < n_ids && plan_.tensor(cid) != nullptr &&
                 plan_.tensor(cid) == plan_.copy_in_set(set, static_cast<int>(c)),
             "every copy exists, one per slot", "set %d (of %s on %s) slot %zu: copy id %d", set, who(key.id).c_str(),
             on(key.backend).c_str(), c, cid);
      if (key.graph_input && c == 0) {
        VERIFY(cid == key.id, "a graph input's slot 0 is the input itself", "set %d (of %s) slot 0 is %s", set,
               who(key.id).c_str(), who(cid).c_str());
        continue;
      }
      VERIFY(plan_.backend(cid) == key.backend && plan_.copy_origin(cid) == key.id,
             "a copy is on its set's backend and copies its set's tensor",
             "copy %s is %s and copies %s; set %d is %s on %s", who(cid).c_str(),
             assignment(plan_.backend(cid), plan_.cause(cid)).c_str(), who(plan_.copy_origin(cid)).c_str(), set,
             who(key.id).c_str(), on(key.backend).c_str());
    }
  }

  const bool pipelined = opt_.n_copies > 1;
  VERIFY(plan_.graph_inputs.size() == plan_.graph_input_ids.size() && (pipelined || plan_.graph_inputs.empty()),
         "graph inputs get their own copies only when pipelined", "%zu graph inputs, %zu ids, %d copies",
         plan_.graph_inputs.size(), plan_.graph_input_ids.size(), opt_.n_copies);
  for (size_t q = 0; q < plan_.graph_input_ids.size(); ++q) {
    const int32_t id = plan_.graph_input_ids[q];
    VERIFY(id >= 0 && id < n_ids && plan_.user_tensor(id) == plan_.graph_inputs[q] &&
               plan_.has(id, SchedPlan::kInputFlag) && plan_.has(id, SchedPlan::kNoneOp),
           "a graph input with its own copies is a leaf flagged INPUT", "graph input %zu: %s", q, who(id).c_str());
    const int32_t set = plan_.copy_set(id, plan_.backend(id));
    VERIFY(set >= 0 && plan_.copy_set_key(set).graph_input, "a graph input's copies are on its own backend",
           "graph input %s (%s) has no such copy set", who(id).c_str(),
           assignment(plan_.backend(id), plan_.cause(id)).c_str());
  }

  // Each node source read through a copy (a bit per source slot), checked rewrite by rewrite.
  static_assert(kMaxSrc <= 16, "a source mask per node fits 16 bits");
  std::vector<uint16_t> rewritten(n, 0);
  for (size_t r = 0; r < plan_.rewrites.size(); ++r) {
    const SchedPlan::Rewrite& w = plan_.rewrites[r];
    const size_t i = w.node_index;
    VERIFY(i < n && g_.node(i) == w.node && w.src >= 0 && w.src < plan_.n_src(i), "a rewrite names a source of a node",
           "rewrite %zu: node index %zu of %zu, source %d", r, i, n, w.src);
    const auto node = static_cast<int32_t>(i);
    const int32_t s = plan_.src(i, w.src);
    VERIFY(s >= 0 && plan_.user_tensor(s) == w.original, "a rewrite keeps the user's source to restore",
           "rewrite %zu of node %s source %d", r, who(node).c_str(), w.src);
    const int32_t rep = w.replacement;
    // (a graph input's slot 0 is the input itself: rewritten to itself, so that the other slots' copies replace it)
    const int32_t own_set = s >= 0 ? plan_.copy_set(s, plan_.backend(s)) : -1;
    const bool input_slot0 = rep == s && own_set >= 0 && plan_.copy_set_key(own_set).graph_input;
    VERIFY(rep >= 0 && rep < n_ids && (plan_.copy_origin(rep) == s || input_slot0),
           "a source is rewritten to a copy of itself", "node %s source %d %s reads %s", who(node).c_str(), w.src,
           who(s).c_str(), who(rep).c_str());
    VERIFY(w.node->src[w.src] == plan_.user_tensor(rep), "a rewritten node reads its copy",
           "node %s source %d reads '%s', not the copy %s", who(node).c_str(), w.src, name_of(w.node->src[w.src]),
           who(rep).c_str());
    VERIFY((rewritten[i] >> w.src & 1u) == 0, "a source is rewritten once", "node %s source %d", who(node).c_str(),
           w.src);
    rewritten[i] = static_cast<uint16_t>(rewritten[i] | 1u << w.src);
    VERIFY(readable(rep, plan_.backend(node)), "a node reads a copy its backend can read", "node %s (%s) reads %s (%s)",
           who(node).c_str(), on(plan_.backend(node)).c_str(), who(rep).c_str(), on(plan_.backend(rep)).c_str());
  }
  for (size_t i = 0; i < n; ++i) {
    const auto node = static_cast<int32_t>(i);
    if (plan_.has(node, SchedPlan::kViewOp)) continue;
    const int b = plan_.backend(node);
    for (int j = 0, ns = plan_.n_src(i); j < ns; ++j) {
      const int32_t s = plan_.src(i, j);
      VERIFY(s < 0 || readable(s, b) || (rewritten[i] >> j & 1u) != 0,
             "every source a node's backend cannot read is read through a copy", "node %s (%s) source %d %s (%s)",
             who(node).c_str(), on(b).c_str(), j, who(s).c_str(), on(plan_.backend(s)).c_str());  // (s >= 0 here)
    }
  }
  return {};
}

#undef VERIFY

}  // namespace

std::string PlanVerifier::check(int pass, const SchedPlan& plan, const Graph& g, const BackendSet& bs,
                                const PassOptions& opt) {
  const Verify v(pass, plan, g, bs, opt);
  std::string broken = v.common();
  if (broken.empty() && pass == 1) broken = v.pass1();
  // (the previous call's snapshot is comparable only when it was taken after the previous pass of this split)
  if (broken.empty() && pass >= 2 && last_pass_ == pass - 1) broken = v.changes(backend_, cause_);
  if (broken.empty() && pass == 4) broken = v.pass4();
  if (broken.empty() && pass == 5) broken = v.pass5();
  backend_.resize(plan.n_ids());
  cause_.resize(plan.n_ids());
  for (size_t id = 0; id < plan.n_ids(); ++id) {
    backend_[id] = static_cast<int8_t>(plan.backend(static_cast<int32_t>(id)));
    cause_[id] = plan.cause(static_cast<int32_t>(id));
  }
  last_pass_ = pass;
  return broken;
}

}  // namespace tessera::sched
