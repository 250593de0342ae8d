// Pass 3 (SPEC 9.3): best fit for unassigned nodes, upgrade of assigned ones through a shared compute buffer type.
#include "plan.h"

namespace tessera::sched {

void pass3_upgrade(SchedPlan& plan, const Graph& g, const BackendSet& bs) {
  for (const Tensor* node : g.nodes()) {
    if (op_is_view(node->op)) continue;
    const int cur = plan.backend_of(node);
    if (cur < 0) {
      int best = -1, best_count = -1;
      for (int b = 0; b < bs.size(); ++b) {
        if (!bs.supports_op(b, *node)) continue;
        int count = 0;
        for (const Tensor* s : node->src) {
          if (s == nullptr) continue;
          const bool assigned = plan.backend_of(s) >= 0 || (s->view_src != nullptr && plan.backend_of(s->view_src) >= 0);
          if (assigned && buffer_supported(plan, bs, *s, b)) ++count;
        }
        if (count > best_count) {  // ties keep the higher priority
          best = b;
          best_count = count;
        }
      }
      if (best >= 0) plan.set(node, best, Cause::kBest);
    } else if (plan.cause_of(node) != Cause::kUser) {
      for (int c = 0; c < cur; ++c) {
        if (bs.compute_buft(c) != bs.compute_buft(cur) || !bs.supports_op(c, *node)) continue;
        bool all = true;
        for (const Tensor* s : node->src) {
          if (s != nullptr && !buffer_supported(plan, bs, *s, c)) {
            all = false;
            break;
          }
        }
        if (all) {
          plan.set(node, c, Cause::kUpgrade);
          break;
        }
      }
    }
  }
}

}  // namespace tessera::sched
