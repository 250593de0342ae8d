// Pass 4 (SPEC 9.4): views take their source's backend, sources take their user's, the rest the first backend that
// supports them; a node nothing supports is a scheduling error, never left unassigned.
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
        plan.set_id(id, b, Cause::kViewOfSrc);
      } else {
        const int b = first_supporting(plan, bs, id);
        if (b < 0) return no_backend(*plan.tensor(id));
        plan.set_id(id, b, Cause::kFallback);
      }
    }
    const int nb = plan.backend(id);
    for (int j = 0; j < kMaxSrc; ++j) {
      const int32_t s = plan.src(static_cast<size_t>(id), j);
      if (s < 0 || plan.backend(s) >= 0) continue;
      const int32_t v = plan.view_src(s);
      if (v >= 0) {
        if (plan.backend(v) < 0) plan.set_id(v, nb, Cause::kUser4);
        plan.set_id(s, plan.backend(v), Cause::kViewOfSrc);
      } else {
        plan.set_id(s, nb, Cause::kUser4);
      }
    }
  }
  // A node that writes into another tensor (CPY, SET_ROWS: its view_src) runs where that tensor lives, whichever
  // pass assigned the two: its result is that tensor's memory. (Pre-allocated destinations were settled by pass 1.)
  // The writer moves to the destination's backend when that backend supports it; otherwise the destination (with its
  // views) moves to the writer's backend when that one supports the destination's op and nobody pinned it.
  auto root_of = [](const Tensor* t) {
    while (t->view_src != nullptr) t = t->view_src;
    return t;
  };
  for (int32_t id = 0; id < n; ++id) {
    if (plan.view_src(id) < 0 || plan.has(id, SchedPlan::kViewOp) || plan.has(id, SchedPlan::kNoneOp)) continue;
    const Tensor* node = plan.tensor(id);
    const Tensor* root = root_of(node);
    const int rb = plan.backend_of(root);
    const int nb = plan.backend_of(node);
    if (bs.fixed_buffer(*root) != nullptr || rb < 0 || rb == nb) continue;
    const bool node_free = plan.cause_of(node) != Cause::kUser;
    const bool root_free = plan.cause_of(root) != Cause::kUser;
    auto root_runs_on = [&](int b) { return root->op == Op::kNone || bs.supports_op(b, *root); };
    auto move_root = [&](int b) {
      plan.set(root, b, plan.cause_of(root));
      for (const Tensor* v : g.nodes()) {
        if (op_is_view(v->op) && root_of(v) == root) plan.set(v, b, Cause::kViewOfSrc);
      }
    };
    int both = -1;  // the first backend that can run the writer and hold the destination
    for (int b = 0; b < bs.size() && both < 0; ++b) {
      if (bs.supports_op(b, *node) && root_runs_on(b)) both = b;
    }
    if (node_free && bs.supports_op(rb, *node)) {
      plan.set(node, rb, Cause::kViewOfSrc);
    } else if (root_free && root_runs_on(nb)) {
      move_root(nb);
    } else if (node_free && root_free && both >= 0) {
      move_root(both);
      plan.set(node, both, Cause::kViewOfSrc);
    } else {
      return TS_ERROR(StatusCode::kUnsupported,
                      "scheduling error: %s writes into %s, but %s (%s) cannot run it and %s (%s) cannot take %s",
                      describe(*node).c_str(), describe(*root).c_str(), bs.name(rb), cause_name(plan.cause_of(root)),
                      bs.name(nb), cause_name(plan.cause_of(node)), root->name);
    }
  }
  // Every computed node must run where it is supported (a pin or an INPUT flag can ask for the impossible).
  for (const int32_t id : plan.compute_nodes()) {
    if (plan.has(id, SchedPlan::kNoneOp)) continue;
    const int b = plan.backend(id);
    if (!plan.supports(bs, id, b)) {
      const Tensor& node = *plan.tensor(id);
      return TS_ERROR(StatusCode::kUnsupported, "scheduling error: %s is assigned to %s (%s), which does not support op %s",
                      describe(node).c_str(), bs.name(b), cause_name(plan.cause(id)), op_name(node.op));
    }
  }
  return Status::Ok();
}

}  // namespace tessera::sched
