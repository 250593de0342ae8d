// Pass 3 (docs/scheduler.md, 'Pass 3'): best fit for unassigned nodes, upgrade of assigned ones through a shared
// compute buffer type.
#include "plan.h"

namespace tessera::sched {

void pass3_upgrade(SchedPlan& plan, const Graph& g, const BackendSet& bs) {
  plan.index(g, bs);
  const int n_backends = bs.size();
  for (const int32_t id : plan.compute_nodes()) {
    const auto node = static_cast<size_t>(id);
    const int cur = plan.backend(id);
    if (cur < 0) {
      int best = -1, best_count = -1;
      for (int b = 0; b < n_backends; ++b) {
        if (!plan.supports(bs, id, b)) continue;
        int count = 0;
        for (int j = 0; j < plan.n_src(node); ++j) {
          const int32_t s = plan.src(node, j);
          if (s < 0) continue;
          const int32_t v = plan.view_src(s);
          const bool assigned = plan.backend(s) >= 0 || (v >= 0 && plan.backend(v) >= 0);
          if (assigned && buffer_supported(plan, bs, s, b)) ++count;
        }
        if (count > best_count) {  // ties keep the higher priority
          best = b;
          best_count = count;
        }
      }
      if (best >= 0) plan.set_id(id, best, Cause::kMostSources);
    } else if (cur > 0 && plan.cause(id) != Cause::kPinned) {
      for (int c = 0; c < cur; ++c) {
        if (bs.compute_buft(c) != bs.compute_buft(cur) || !plan.supports(bs, id, c)) continue;
        bool all = true;
        for (int j = 0; j < plan.n_src(node) && all; ++j) {
          const int32_t s = plan.src(node, j);
          all = s < 0 || buffer_supported(plan, bs, s, c);
        }
        if (all) {
          plan.set_id(id, c, Cause::kUpgraded);
          break;
        }
      }
    }
  }
}

}  // namespace tessera::sched
