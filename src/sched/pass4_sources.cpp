// Pass 4 (docs/scheduler.md, 'Pass 4'): views take their source's backend, sources take their user's, the rest the
// first backend that supports them; a node nothing supports is a scheduling error, never left unassigned.
#include <string>
#include <unordered_map>

#include "plan.h"

namespace tessera::sched {

namespace {

int first_supporting(SchedPlan& plan, const BackendSet& bs, int32_t id) {
  for (int b = 0; b < bs.size(); ++b) {
    if (plan.supports(bs, id, b)) return b;
  }
  return -1;
}

Status no_backend(const Tensor& t) {
  const Buffer* buf = tensor_buffer(t);
  return TS_ERROR(StatusCode::kUnsupported, "scheduling error: no backend supports op %s for tensor %s%s%s",
                  op_name(t.op), describe(t).c_str(), buf != nullptr ? " in buffer type " : "",
                  buf != nullptr ? buf->type()->name() : "");
}

}  // namespace

Status pass4_sources(SchedPlan& plan, const Graph& g, const BackendSet& bs) {
  plan.index(g, bs);
  const auto n = static_cast<int32_t>(plan.n_nodes());
  for (int32_t id = 0; id < n; ++id) {
    if (plan.backend(id) < 0) {
      const int32_t v = plan.view_src(id);
      if (v >= 0) {
        int b = plan.backend(v);
        if (b < 0) {
          // the view's source has no backend yet either: both go to the first backend that can hold the view
          b = first_supporting(plan, bs, id);
          if (b < 0) return no_backend(*plan.tensor(id));
          plan.set_id(v, b, Cause::kFallback);
        }
        plan.set_id(id, b, Cause::kViewOfSource);
      } else {
        const int b = first_supporting(plan, bs, id);
        if (b < 0) return no_backend(*plan.tensor(id));
        plan.set_id(id, b, Cause::kFallback);
      }
    }
    const int nb = plan.backend(id);
    for (int j = 0, ns = plan.n_src(static_cast<size_t>(id)); j < ns; ++j) {
      const int32_t s = plan.src(static_cast<size_t>(id), j);
      if (s < 0 || plan.backend(s) >= 0) continue;
      const int32_t v = plan.view_src(s);
      if (v >= 0) {
        if (plan.backend(v) < 0) plan.set_id(v, nb, Cause::kConsumer);
        plan.set_id(s, plan.backend(v), Cause::kViewOfSource);
      } else {
        plan.set_id(s, nb, Cause::kConsumer);
      }
    }
  }
  // A node that writes into another tensor (CPY, SET_ROWS: its view_src) runs where that tensor lives, whichever
  // pass assigned the two: its result is that tensor's memory. (Pre-allocated destinations were settled by pass 1.)
  // A destination may have several writers (a cache written by SET_ROWS, then by a CPY): the destination and all of
  // them need one backend. Candidates in order: the destination's backend (the writers move to it), then each
  // writer's backend (the destination, with its views, moves), then any backend; the first that can run every writer
  // and hold the destination without moving a pinned tensor wins.
  std::vector<int32_t> roots;                 // destinations, in order of their first writer
  std::vector<std::vector<int32_t>> writers;  // per destination, in node order
  std::unordered_map<int32_t, size_t> group_of;
  for (int32_t id = 0; id < n; ++id) {
    if (plan.view_src(id) < 0 || plan.has(id, SchedPlan::kViewOp) || plan.has(id, SchedPlan::kNoneOp)) continue;
    const int32_t root = plan.root(id);
    if (plan.fixed_buft(root) != nullptr || plan.backend(root) < 0) continue;
    const auto [it, added] = group_of.emplace(root, roots.size());
    if (added) {
      roots.push_back(root);
      writers.emplace_back();
    }
    writers[it->second].push_back(id);
  }
  for (size_t r = 0; r < roots.size(); ++r) {
    const int32_t root = roots[r];
    const Tensor& root_t = *plan.tensor(root);
    const std::vector<int32_t>& ws = writers[r];
    const int rb = plan.backend(root);
    const bool root_pinned = plan.cause(root) == Cause::kPinned;
    auto fits = [&](int b) {
      if (root_pinned && b != rb) return false;
      if (root_t.op != Op::kNone && !plan.supports(bs, root, b)) return false;
      for (const int32_t w : ws) {
        if (plan.cause(w) == Cause::kPinned && plan.backend(w) != b) return false;
        if (!plan.supports(bs, w, b)) return false;
      }
      return true;
    };
    int target = fits(rb) ? rb : -1;
    for (size_t k = 0; k < ws.size() && target < 0; ++k) {
      if (fits(plan.backend(ws[k]))) target = plan.backend(ws[k]);
    }
    for (int b = 0; b < bs.size() && target < 0; ++b) {
      if (fits(b)) target = b;
    }
    if (target < 0) {
      std::string who;
      for (const int32_t w : ws) {
        who += format_message("%s%s on %s (%s)", who.empty() ? "" : ", ", plan.tensor(w)->name,
                              bs.name(plan.backend(w)), cause_name(plan.cause(w)));
      }
      return TS_ERROR(StatusCode::kUnsupported,
                      "scheduling error: no backend can hold %s (on %s, %s) and run every node that writes into it: "
                      "%s",
                      describe(root_t).c_str(), bs.name(rb), cause_name(plan.cause(root)), who.c_str());
    }
    if (target != rb) {
      plan.set_id(root, target, plan.cause(root));
      for (int32_t v = 0; v < n; ++v) {
        if (plan.has(v, SchedPlan::kViewOp) && plan.view_src(v) >= 0 && plan.root(v) == root) {
          plan.set_id(v, target, Cause::kViewOfSource);
        }
      }
    }
    for (const int32_t w : ws) {
      if (plan.backend(w) != target) plan.set_id(w, target, Cause::kViewOfSource);
    }
  }
  // Every computed node must run where it is supported (a pin or an INPUT flag can ask for the impossible).
  for (const int32_t id : plan.compute_nodes()) {
    if (plan.has(id, SchedPlan::kNoneOp)) continue;
    const int b = plan.backend(id);
    if (!plan.supports(bs, id, b)) {
      const Tensor& node = *plan.tensor(id);
      return TS_ERROR(StatusCode::kUnsupported,
                      "scheduling error: %s is assigned to %s (%s), which does not support op %s",
                      describe(node).c_str(), bs.name(b), cause_name(plan.cause(id)), op_name(node.op));
    }
  }
  return Status::Ok();
}

}  // namespace tessera::sched
