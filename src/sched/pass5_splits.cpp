// Pass 5: cut the node list into splits, create per-slot copies of foreign sources, rewrite sources
// (docs/scheduler.md, the paragraphs on pass 5 and compute memory).
#include <algorithm>
#include <cstring>

#include "plan.h"

namespace tessera::sched {

namespace {

// "<backend>#<tensor>#<slot>", truncated to the name's capacity like format_name (no printf: pass 5 names every
// copy of every split).
void copy_name(Tensor& cpy, const char* backend, const char* tensor, int slot) {
  char* out = cpy.name;
  char* const end = cpy.name + kMaxName - 1;
  for (const char* p = backend; *p != '\0' && out < end; ++p) *out++ = *p;
  if (out < end) *out++ = '#';
  for (const char* p = tensor; *p != '\0' && out < end; ++p) *out++ = *p;
  if (out < end) *out++ = '#';
  char digits[12];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + slot % 10);
    slot /= 10;
  } while (slot > 0);
  while (n > 0 && out < end) *out++ = digits[--n];
  *out = '\0';
}

// The Tensors of the copy sets from `first` on (registered by the loop of pass 5): per slot, same layout as the
// tensor copied, named <backend>#<tensor>#<slot>. A graph input's own copies (pipelined) are flagged INPUT|OUTPUT:
// written before the first split, alive for the whole evaluation; its slot 0 is the input itself. Split inputs'
// copies are ordinary tensors for the planner (the scheduler puts each slot's in its own region).
// Made in one run after the loop rather than one set at a time inside it: the tensors copied were last read by
// index, so on a large graph each is a cache miss; here the next ones are prefetched while one is copied.
Status make_copies(SchedPlan& plan, const BackendSet& bs, size_t first) {
  constexpr size_t kAhead = 8;
  const size_t n = plan.n_copy_sets();
  auto prefetch = [&](size_t set) {
    const Tensor* t = plan.tensor(plan.copy_set_key(static_cast<int32_t>(set)).id);
    detail::prefetch_bytes(t, 0, offsetof(Tensor, op));  // type, ne, nb
    detail::prefetch_bytes(t, offsetof(Tensor, name), sizeof(Tensor));
  };
  for (size_t set = first; set < std::min(n, first + kAhead); ++set) prefetch(set);
  for (size_t set = first; set < n; ++set) {
    if (set + kAhead < n) prefetch(set + kAhead);
    const auto k = static_cast<int32_t>(set);
    const SchedPlan::CopySetKey key = plan.copy_set_key(k);
    const Tensor& src = *plan.tensor(key.id);
    for (int c = 0; c < static_cast<int>(kParallelCopies) && plan.copy_id_in_set(k, c) >= 0; ++c) {
      if (key.graph_input && c == 0) {
        // slot 0 is the input itself, flagged OUTPUT as ggml flags it: kept for the whole evaluation, also where
        // the planner frees inputs after their last reader (its readers differ by slot; the user writes it anyway)
        Tensor* in = plan.user_tensor(key.id);
        in->flags |= kFlagOutput;
        plan.set_copy(k, 0, in);
        continue;
      }
      Tensor* cpy = plan.copy_ctx->new_tensor(src.type, kMaxDims, src.ne);
      if (cpy == nullptr) return plan.copy_ctx->status();
      std::memcpy(cpy->nb, src.nb, sizeof cpy->nb);
      copy_name(*cpy, bs.name(key.backend), src.name, c);
      if (key.graph_input) cpy->flags |= kFlagInput | kFlagOutput;
      plan.set_copy(k, c, cpy);
    }
  }
  return Status::Ok();
}

// Pass 5's walk over the nodes: the split being filled, and what the walk must remember about the copies it made.
// add_node takes the nodes in order; each step of it decides one thing (docs/scheduler.md, the paragraph on pass 5).
class SplitCutter {
 public:
  SplitCutter(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt)
      : plan(plan),
        g(g),
        bs(bs),
        opt(opt),
        pipelined(opt.n_copies > 1),
        slot(static_cast<size_t>(opt.slot)),
        copied_root(plan.scratch_flags()) {
    if (pipelined) mark_written_inputs();
    copied_root.assign(plan.n_ids(), 0);
  }

  // Node i: into the current split or a new one, then its sources read through copies where they must.
  Status add_node(size_t i) {
    const auto id = static_cast<int32_t>(i);
    if (plan.has(id, SchedPlan::kViewOp)) {
      plan.node_split[i] = cur_split;
      return Status::Ok();
    }
    const int nb = plan.backend(id);
    const int n_src = plan.n_src(i);
    SplitReason reason = SplitReason::kFirst;
    if (needs_new_split(i, nb, n_src, &reason)) start_split(i, nb, reason);
    plan.node_split[i] = cur_split;
    TS_RETURN_IF_ERROR(route_sources(i, nb, n_src));
    drop_stale_copies(id);
    return Status::Ok();
  }

  // Ends the last split at the end of the graph. A graph of views only still gets one split, which computes nothing,
  // so that the planner gives the views their addresses.
  void finish() {
    if (cur != nullptr) {
      cur->i_end = g.n_nodes();
    } else if (g.n_nodes() > 0) {
      const int b = plan.backend(0);
      plan.new_split(b >= 0 ? b : bs.last(), 0, g.n_nodes());
      plan.node_split.assign(g.n_nodes(), 0);
    }
  }

 private:
  // Does source s need a copy to be read on backend b?
  bool foreign(int32_t s, int b) const { return plan.backend(s) != b && !buffer_supported(plan, bs, s, b); }

  // User inputs that a node writes in place (the destination of a CPY or SET_ROWS): they get no per-slot copies, or
  // the write would land in the input while later readers read the copy. By id; ids of tensors met later (copies)
  // are never written.
  void mark_written_inputs() {
    written.assign(g.n_nodes() + g.n_leafs(), 0);
    for (size_t i = 0; i < g.n_nodes(); ++i) {
      const auto id = static_cast<int32_t>(i);
      if (plan.view_src(id) >= 0 && !plan.has(id, SchedPlan::kViewOp)) {
        const auto r = static_cast<size_t>(plan.root(id));
        if (r < written.size()) written[r] = 1;
      }
    }
  }
  bool is_written(int32_t id) const {
    return static_cast<size_t>(id) < written.size() && written[static_cast<size_t>(id)] != 0;
  }

  // Roots of the tensors copied for split inputs so far.
  void mark_copied_root(int32_t r) {
    const auto k = static_cast<size_t>(r);
    if (k >= copied_root.size()) copied_root.resize(std::max(k + 1, plan.n_ids()), 0);
    n_copied_roots += copied_root[k] == 0 ? 1 : 0;
    copied_root[k] = 1;
  }
  bool is_copied_root(int32_t r) const {
    const auto k = static_cast<size_t>(r);
    return n_copied_roots != 0 && k < copied_root.size() && copied_root[k] != 0;
  }

  // Whether node i (on backend nb) starts a new split, and why: on a change of backend; on the same backend when a
  // weight it reads must be copied (so the memory of the weights copied for the previous split can be reused), or
  // when its new inputs would pass max_split_inputs. *reason is set when it does.
  bool needs_new_split(size_t i, int nb, int n_src, SplitReason* reason) const {
    if (cur == nullptr) {
      *reason = SplitReason::kFirst;
      return true;
    }
    if (nb != cur->backend) {
      *reason = SplitReason::kBackend;
      return true;
    }
    if (cur->inputs.empty()) return false;
    int new_inputs = 0;
    for (int j = 0; j < n_src; ++j) {
      const int32_t s = plan.src(i, j);
      if (s < 0 || !foreign(s, nb)) continue;
      // A weight on a backend this one cannot read: start a new split, so the memory of the weights copied for
      // the previous split can be reused. Any weight, auxiliary ones too (ROPE's frequency factors, FA's sinks): ggml
      // exempts them from placement (pass 1) only, not here (ggml_backend_sched_split_graph).
      if (plan.has(s, SchedPlan::kIsWeight)) {
        *reason = SplitReason::kWeightCopy;
        return true;
      }
      bool repeated = false;  // a source read twice by the node is one input
      for (int k = 0; k < j; ++k) repeated = repeated || plan.src(i, k) == s;
      if (!repeated && plan.copy_set(s, nb) < 0) ++new_inputs;
    }
    // Counted before adding: no split ever exceeds the limit.
    *reason = SplitReason::kInputLimit;
    return static_cast<int>(cur->inputs.size()) + new_inputs > opt.max_split_inputs;
  }

  void start_split(size_t i, int nb, SplitReason reason) {
    if (cur != nullptr) cur->i_end = i;
    // The first split starts at node 0: views met before it belong to it (the planner initialises them there).
    cur = &plan.new_split(nb, plan.splits.empty() ? 0 : i, i);
    cur->reason = reason;
    ++cur_split;
    if (cur_split == 0) {
      for (size_t k = 0; k < i; ++k) plan.node_split[k] = 0;
    }
  }

  // Node i's sources that it cannot read where they are get a copy on its backend nb (an input of the current
  // split, made once per tensor, backend and slot); with pipelining, user inputs are read through their per-slot
  // copies. Each source read through a copy is recorded as a rewrite.
  //
  // The node's Tensor is only written (a source rewritten), never read: its sources are in the plan
  // (plan.user_tensor(s) is the pointer node->src[j] holds), and on a large graph each first read of a Tensor is a
  // cache miss that stalls, where a store does not.
  Status route_sources(size_t i, int nb, int n_src) {
    for (int j = 0; j < n_src; ++j) {
      const int32_t s = plan.src(i, j);
      if (s < 0) continue;
      const int sb = plan.backend(s);
      if (sb < 0) {
        return TS_ERROR(StatusCode::kFailed, "internal: source %s of %s has no backend after pass 4",
                        describe(*plan.tensor(s)).c_str(), describe(*g.node(i)).c_str());
      }
      // With pipelining, user inputs get per-slot copies on their own backend, so the user can overwrite them while
      // an earlier evaluation still reads the previous values.
      int32_t read_id = -1;  // the copy to read instead, if any
      // (Leafs only: a computed tensor flagged input is produced by its node, not written by the user.)
      if (pipelined && plan.has(s, SchedPlan::kNoneOp) && plan.has(s, SchedPlan::kInputFlag) && !plan.is_copy_id(s) &&
          !is_written(s)) {
        int32_t set = plan.copy_set(s, sb);
        if (set < 0) {
          set = plan.add_copy_set(s, sb, opt.n_copies, true);
          plan.graph_inputs.push_back(plan.user_tensor(s));
          plan.graph_input_ids.push_back(s);
        }
        if (sb == nb || !foreign(s, nb)) read_id = plan.copy_id_in_set(set, static_cast<int>(slot));
      }
      if (foreign(s, nb)) {
        int32_t set = plan.copy_set(s, nb);
        if (set < 0) {
          set = plan.add_copy_set(s, nb, opt.n_copies, false);
          cur->inputs.push_back(plan.user_tensor(s));
          cur->input_ids.push_back(s);
          cur->input_sets.push_back(set);  // (input_copies: once the copies exist)
          mark_copied_root(plan.root(s));
        }
        read_id = plan.copy_id_in_set(set, static_cast<int>(slot));
      }
      // (the copy's Tensor, and so the rewrite itself, comes after the walk)
      if (read_id >= 0) plan.rewrites.push_back({g.node(i), j, plan.user_tensor(s), i, read_id});
    }
    return Status::Ok();
  }

  // A node that writes into a tensor (CPY, SET_ROWS) makes the copies made so far of that tensor and its views
  // stale: later readers on other backends get fresh copies (earlier splits keep theirs in input_copies). A graph
  // input's own per-slot copies stay.
  void drop_stale_copies(int32_t id) {
    if (plan.view_src(id) >= 0 && is_copied_root(plan.root(id))) {
      const int32_t r = plan.root(id);
      for (size_t set = 0; set < plan.n_copy_sets(); ++set) {
        const auto k = static_cast<int32_t>(set);
        if (!plan.copy_set_live(k) || plan.copy_set_key(k).graph_input) continue;
        if (plan.root(plan.copy_set_key(k).id) == r) plan.drop_copy_set(k);
      }
      copied_root[static_cast<size_t>(r)] = 0;
      --n_copied_roots;
    }
  }

  SchedPlan& plan;
  Graph& g;
  const BackendSet& bs;
  const PassOptions& opt;
  const bool pipelined;
  const size_t slot;
  std::vector<uint8_t> written;  // per id: a user input written in place (mark_written_inputs; pipelined only)
  // per id: a root of a tensor copied for a split input (the plan's scratch; ids grow as copies are made)
  std::vector<uint8_t>& copied_root;
  size_t n_copied_roots = 0;
  Split* cur = nullptr;  // the split being filled
  int cur_split = -1;
};

}  // namespace

Status pass5_splits(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt) {
  plan.index(g, bs);
  if (bs.size() > static_cast<int>(SchedPlan::kMaxBackendsPerCopy)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "scheduler: %d backends, at most %zu", bs.size(),
                    SchedPlan::kMaxBackendsPerCopy);
  }
  plan.recycle_splits();
  plan.node_split.assign(g.n_nodes(), -1);
  const size_t first_set = plan.n_copy_sets(), first_rewrite = plan.rewrites.size();

  SplitCutter cutter(plan, g, bs, opt);
  for (size_t i = 0; i < g.n_nodes(); ++i) TS_RETURN_IF_ERROR(cutter.add_node(i));
  cutter.finish();

  // The copies' Tensors, then the splits' lists of them and the source rewrites (the nodes' Tensors are only
  // written: a store that misses the cache does not stall).
  TS_RETURN_IF_ERROR(make_copies(plan, bs, first_set));
  for (Split& sp : plan.splits) {
    sp.input_copies.resize(sp.input_sets.size());
    for (size_t k = 0; k < sp.input_sets.size(); ++k) sp.input_copies[k] = plan.copy_set_copies(sp.input_sets[k]);
  }
  for (size_t r = first_rewrite; r < plan.rewrites.size(); ++r) {
    const SchedPlan::Rewrite& w = plan.rewrites[r];
    w.node->src[w.src] = plan.user_tensor(w.replacement);
  }
  return Status::Ok();
}

}  // namespace tessera::sched
