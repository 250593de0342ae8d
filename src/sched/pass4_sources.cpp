// Pass 4 (SPEC 9.4): views take their source's backend, sources take their user's, the rest the first backend that
// supports them; a node nothing supports is a scheduling error, never left unassigned.
#include "plan.h"

namespace tessera::sched {

namespace {

int first_supporting(const BackendSet& bs, const Tensor& t) {
  for (int b = 0; b < bs.size(); ++b) {
    if (bs.supports_op(b, t)) return b;
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
  for (const Tensor* node : g.nodes()) {
    if (plan.backend_of(node) < 0) {
      if (node->view_src != nullptr) {
        int b = plan.backend_of(node->view_src);
        if (b < 0) {
          // the view's source has no backend yet either: both go to the first backend that can hold the view
          b = first_supporting(bs, *node);
          if (b < 0) return no_backend(*node);
          plan.set(node->view_src, b, Cause::kFallback);
        }
        plan.set(node, b, Cause::kViewOfSrc);
      } else {
        const int b = first_supporting(bs, *node);
        if (b < 0) return no_backend(*node);
        plan.set(node, b, Cause::kFallback);
      }
    }
    const int nb = plan.backend_of(node);
    for (const Tensor* s : node->src) {
      if (s == nullptr || plan.backend_of(s) >= 0) continue;
      if (s->view_src != nullptr) {
        if (plan.backend_of(s->view_src) < 0) plan.set(s->view_src, nb, Cause::kUser4);
        plan.set(s, plan.backend_of(s->view_src), Cause::kViewOfSrc);
      } else {
        plan.set(s, nb, Cause::kUser4);
      }
    }
  }
  // Every computed node must run where it is supported (a pin or an INPUT flag can ask for the impossible).
  for (const Tensor* node : g.nodes()) {
    if (op_is_view(node->op) || node->op == Op::kNone) continue;
    const int b = plan.backend_of(node);
    if (!bs.supports_op(b, *node)) {
      return TS_ERROR(StatusCode::kUnsupported, "scheduling error: %s is assigned to %s (%s), which does not support op %s",
                      describe(*node).c_str(), bs.name(b), cause_name(plan.cause_of(node)), op_name(node->op));
    }
  }
  return Status::Ok();
}

}  // namespace tessera::sched
