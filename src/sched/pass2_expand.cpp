// Pass 2 (docs/scheduler.md, 'Pass 2'): grow assigned runs over unassigned neighbours, GPU-like backends first.
#include "plan.h"

namespace tessera::sched {

namespace {

// One sweep over the non-view nodes. only_non_last: carry only backends other than the last (meeting a node on the
// last clears current).
template <typename It>
void sweep(SchedPlan& plan, const BackendSet& bs, It begin, It end, bool only_non_last) {
  const int last = bs.last();
  int cur = -1;
  for (It it = begin; it != end; ++it) {
    const int32_t id = *it;
    const int b = plan.backend(id);
    if (b >= 0) {
      cur = (only_non_last && b == last) ? -1 : b;
    } else if (cur >= 0 && plan.supports(bs, id, cur)) {
      plan.set_id(id, cur, Cause::kExpanded);
    }
  }
}

}  // namespace

void pass2_expand(SchedPlan& plan, const Graph& g, const BackendSet& bs) {
  plan.index(g, bs);
  const std::vector<int32_t>& nodes = plan.compute_nodes();
  sweep(plan, bs, nodes.begin(), nodes.end(), true);
  sweep(plan, bs, nodes.rbegin(), nodes.rend(), true);
  sweep(plan, bs, nodes.begin(), nodes.end(), false);
  sweep(plan, bs, nodes.rbegin(), nodes.rend(), false);
}

}  // namespace tessera::sched
