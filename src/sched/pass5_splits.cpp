// Pass 5 (SPEC 9.5): cut the node list into splits, create per-slot copies of foreign sources, rewrite sources.
#include <algorithm>
#include <cstring>
#include <unordered_set>

#include "plan.h"

namespace tessera::sched {

namespace {

// Per-slot copies of src in backend b (created once): same layout, named <backend>#<tensor>#<slot>.
Status make_copies(SchedPlan& plan, const BackendSet& bs, Tensor* src, int b, int n_copies, bool pipelined) {
  auto& slots = plan.copies[{src, b}];
  for (int c = 0; c < n_copies; ++c) {
    Tensor* cpy = plan.copy_ctx->new_tensor(src->type, kMaxDims, src->ne);
    if (cpy == nullptr) return plan.copy_ctx->status();
    std::memcpy(cpy->nb, src->nb, sizeof cpy->nb);
    format_name(*cpy, "%s#%s#%d", bs.name(b), src->name, c);
    if (pipelined) cpy->flags |= kFlagInput | kFlagOutput;  // never reused: another evaluation may still read it
    slots[static_cast<size_t>(c)] = cpy;
    plan.set(cpy, b, Cause::kCopy);
    plan.copy_origin[cpy] = src;
  }
  return Status::Ok();
}

}  // namespace

Status pass5_splits(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt) {
  plan.splits.clear();
  plan.node_split.assign(g.n_nodes(), -1);
  const bool pipelined = opt.n_copies > 1;

  // Does src need a copy to be read on backend b?
  auto foreign = [&](const Tensor* s, int b) {
    const int sb = plan.backend_of(s);
    return sb != b && !buffer_supported(plan, bs, *s, b);
  };

  // User inputs that a node writes in place (the destination of a CPY or SET_ROWS): they get no per-slot copies, or
  // the write would land in the input while later readers read the copy.
  std::unordered_set<const Tensor*> written;
  if (pipelined) {
    for (const Tensor* n : g.nodes()) {
      if (n->view_src == nullptr || op_is_view(n->op)) continue;
      const Tensor* r = n->view_src;
      while (r->view_src != nullptr) r = r->view_src;
      written.insert(r);
    }
  }

  auto root_of = [](const Tensor* t) {
    while (t->view_src != nullptr) t = t->view_src;
    return t;
  };
  std::unordered_set<const Tensor*> copied_roots;  // roots of the tensors copied for split inputs so far

  Split* cur = nullptr;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    Tensor* node = g.node(i);
    if (op_is_view(node->op)) {
      if (cur != nullptr) plan.node_split[i] = static_cast<int>(plan.splits.size()) - 1;
      continue;
    }
    const int nb = plan.backend_of(node);
    bool need_new = cur == nullptr || nb != cur->backend;
    if (!need_new && !cur->inputs.empty()) {
      int new_inputs = 0;
      for (int j = 0; j < kMaxSrc; ++j) {
        const Tensor* s = node->src[j];
        if (s == nullptr || !foreign(s, nb)) continue;
        // A weight on a backend this one cannot read: start a new split, so the memory of the weights copied for
        // the previous split can be reused.
        if (is_weight(*s) && !is_auxiliary_source(*node, j)) {
          need_new = true;
          break;
        }
        bool repeated = false;  // a source read twice by the node is one input
        for (int k = 0; k < j; ++k) repeated = repeated || node->src[k] == s;
        if (!repeated && plan.copy(s, nb, 0) == nullptr) ++new_inputs;
      }
      // Counted before adding: no split ever exceeds the limit.
      if (static_cast<int>(cur->inputs.size()) + new_inputs > opt.max_split_inputs) need_new = true;
    }
    if (need_new) {
      if (cur != nullptr) cur->i_end = i;
      // The first split starts at node 0: views met before it belong to it (the planner initialises them there).
      plan.splits.push_back(Split{nb, plan.splits.empty() ? 0 : i, i, {}, {}});
      cur = &plan.splits.back();
      for (size_t k = 0; k < i && plan.splits.size() == 1; ++k) plan.node_split[k] = 0;
    }
    plan.node_split[i] = static_cast<int>(plan.splits.size()) - 1;

    for (int j = 0; j < kMaxSrc; ++j) {
      Tensor* s = node->src[j];
      if (s == nullptr) continue;
      const int sb = plan.backend_of(s);
      if (sb < 0) {
        return TS_ERROR(StatusCode::kFailed, "internal: source %s of %s has no backend after pass 4",
                        describe(*s).c_str(), describe(*node).c_str());
      }
      // With pipelining, user inputs get per-slot copies on their own backend, so the user can overwrite them while
      // an earlier evaluation still reads the previous values.
      Tensor* read = s;
      // (Leafs only: a computed tensor flagged input is produced by its node, not written by the user.)
      if (pipelined && s->op == Op::kNone && (s->flags & kFlagInput) != 0 && plan.copy_origin.count(s) == 0 &&
          written.count(s) == 0) {
        if (plan.copy(s, sb, 0) == nullptr) {
          TS_RETURN_IF_ERROR(make_copies(plan, bs, s, sb, opt.n_copies, true));
          plan.graph_inputs.push_back(s);
        }
        if (sb == nb || !foreign(s, nb)) read = plan.copy(s, sb, opt.slot);
      }
      if (foreign(s, nb)) {
        if (plan.copy(s, nb, 0) == nullptr) {
          TS_RETURN_IF_ERROR(make_copies(plan, bs, s, nb, opt.n_copies, pipelined));
          cur->inputs.push_back(s);
          cur->input_copies.push_back(plan.copies[{s, nb}]);
          copied_roots.insert(root_of(s));
        }
        read = plan.copy(s, nb, opt.slot);
      }
      if (read != s) {
        plan.rewrites.push_back({node, j, s});
        node->src[j] = read;
      }
    }
    // A node that writes into a tensor (CPY, SET_ROWS) makes the copies made so far of that tensor and its views
    // stale: later readers on other backends get fresh copies (earlier splits keep theirs in input_copies).
    if (node->view_src != nullptr && copied_roots.count(root_of(node)) != 0) {
      const Tensor* r = root_of(node);
      for (auto it = plan.copies.begin(); it != plan.copies.end();) {
        const bool graph_input_slot = pipelined && it->first.backend == plan.backend_of(it->first.t) &&
                                      std::find(plan.graph_inputs.begin(), plan.graph_inputs.end(), it->first.t) !=
                                          plan.graph_inputs.end();
        if (root_of(it->first.t) == r && !graph_input_slot) {
          it = plan.copies.erase(it);
        } else {
          ++it;
        }
      }
      copied_roots.erase(r);
    }
  }
  if (cur != nullptr) {
    cur->i_end = g.n_nodes();
  } else if (g.n_nodes() > 0) {
    // Only views: one split that computes nothing, so that the planner still gives the views their addresses.
    const int b = plan.backend_of(g.node(0));
    plan.splits.push_back(Split{b >= 0 ? b : bs.last(), 0, g.n_nodes(), {}, {}});
    plan.node_split.assign(g.n_nodes(), 0);
  }
  return Status::Ok();
}

}  // namespace tessera::sched
