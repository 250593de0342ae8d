// Pass 2 (SPEC 9.2): grow assigned runs over unassigned neighbours, GPU-like backends first.
#include "plan.h"

namespace tessera::sched {

namespace {

// One sweep. only_non_last: carry only backends other than the last (meeting a node on the last clears current).
template <typename Range>
void sweep(SchedPlan& plan, const BackendSet& bs, const Range& order, bool only_non_last) {
  int cur = -1;
  for (const Tensor* node : order) {
    if (op_is_view(node->op)) continue;
    const int b = plan.backend_of(node);
    if (b >= 0) {
      cur = (only_non_last && b == bs.last()) ? -1 : b;
    } else if (cur >= 0 && bs.supports_op(cur, *node)) {
      plan.set(node, cur, Cause::kExpand);
    }
  }
}

}  // namespace

void pass2_expand(SchedPlan& plan, const Graph& g, const BackendSet& bs) {
  const auto& nodes = g.nodes();
  struct Reversed {  // a backward view of the node list, without copying it
    const std::vector<Tensor*>& v;
    auto begin() const { return v.rbegin(); }
    auto end() const { return v.rend(); }
  } bwd{nodes};
  sweep(plan, bs, nodes, true);
  sweep(plan, bs, bwd, true);
  sweep(plan, bs, nodes, false);
  sweep(plan, bs, bwd, false);
}

}  // namespace tessera::sched
