// The plan cache (docs/scheduler.md, 'Plan cache'): a plan per graph, for a program that alternates graphs (a prompt
// batch and a decode step, a draft and a main model). Allocating another graph parks the current plan (its graph gets
// its sources and placements back) and takes that graph's parked plan, if any, which then goes through the reuse
// check like the graph planned last. At most SchedulerParams::plan_cache plans, the least recently used out first.
#include <algorithm>
#include <cstring>

#include "scheduler_impl.h"

namespace tessera {

namespace {
constexpr size_t kForgottenKept = 2 * kMaxCachedPlans;  // graphs remembered for why_not after their plan left
}  // namespace

size_t Scheduler::Impl::compute_bytes() const {
  size_t total = 0;
  for (size_t u = 0; u < planner->n_bufts(); ++u) total += planner->buffer_size(static_cast<int>(u));
  return total;
}

void Scheduler::Impl::forget(const Graph* g, std::string why) {
  if (g == nullptr) return;
  std::erase_if(forgotten, [&](const auto& f) { return f.first == g; });
  if (forgotten.size() >= kForgottenKept) forgotten.erase(forgotten.begin());
  forgotten.emplace_back(g, std::move(why));
}

void Scheduler::Impl::drop_cache(const std::string& why) {
  for (const auto& e : cache) forget(e->graph, why);
  cache.clear();
}

std::string Scheduler::Impl::why_not_cached(const Graph& g) const {
  for (const auto& [fg, why] : forgotten) {
    if (fg == &g) return "another graph than the planned one; its plan " + why;
  }
  if (!switched) return "no plan to reuse (the first evaluation, or after reserve, reset or a failure)";
  return params.plan_cache > 1 ? "another graph than the planned one (no plan of it in the cache)"
                               : "another graph than the planned one";
}

// The current plan into the cache: its graph's sources as the user had them and the placements released (recorded
// for switch_plan), so the graph is the user's again and may be freed. A plan that cannot be kept is reset.
void Scheduler::Impl::park() {
  if (graph == nullptr) return;
  if (!params.reuse || params.plan_cache <= 1 || !split_done || !reuse.valid) {
    reset_plan();
    return;
  }
  // sources: as restore_sources, keeping the rewrites (try_reuse gives the nodes a slot's copies again)
  for (auto it = plan.rewrites.rbegin(); it != plan.rewrites.rend(); ++it) it->node->src[it->src] = it->original;
  parked.clear();
  if (placed) {
    const std::vector<Tensor*>& ts = reuse.tensors;
    for (size_t i = 0; i < ts.size(); ++i) {
      Tensor* t = ts[i];
      if (planner->owns(tensor_buffer(*t))) {
        parked.push_back({i, t->buffer, t->data});
        t->buffer = nullptr;
        t->data = nullptr;
      }
    }
  }
  placed = false;
  allocated = false;
  computed = false;
  if (cache.size() + 1 >= static_cast<size_t>(params.plan_cache)) {  // full: the least recently used goes
    forget(cache.back()->graph, "was evicted (least recently used of " + std::to_string(params.plan_cache) + ")");
    cache.pop_back();
  }
  auto e = std::make_unique<sched::PlanState>();
  std::swap(static_cast<sched::PlanState&>(*this), *e);
  cache.insert(cache.begin(), std::move(e));
}

// Another graph is allocated: its parked plan (if any) out of the cache first, so that parking the current plan
// cannot evict it, then the current plan parked, then g's plan made the current one.
bool Scheduler::Impl::switch_plan(const Graph& g) {
  std::unique_ptr<sched::PlanState> e;
  auto it = std::find_if(cache.begin(), cache.end(), [&](const auto& c) { return c->graph == &g; });
  if (it != cache.end()) {
    e = std::move(*it);
    cache.erase(it);
  }
  park();
  if (e == nullptr) return false;
  reset_plan();  // (nothing current after park)
  std::swap(static_cast<sched::PlanState&>(*this), *e);
  return true;
}

// The placements park released, back where they were: tensors first, then views (from their source). A tensor the
// user has given memory since keeps it (the reuse check then sees its buffer).
Status Scheduler::Impl::place_parked() {
  placed = true;
  for (const bool views : {false, true}) {
    for (const sched::PlanState::Placement& p : parked) {
      Tensor* t = reuse.tensors[p.index];
      if ((t->view_src != nullptr) != views || t->buffer != nullptr || t->data != nullptr) continue;
      TS_RETURN_IF_ERROR(views ? view_init(*t) : tensor_alloc(*p.buffer, *t, p.data));
    }
  }
  parked.clear();
  return Status::Ok();
}

Status Scheduler::Impl::place_slot_copies(int s) {
  for (const sched::ReuseRecord::CopyPlace& c : reuse.copy_places) {
    Tensor* t = plan.copy_in_set(c.set, s);
    if (c.where.chunk < 0 || c.where.external || c.where.is_view || t->buffer != nullptr) continue;
    Buffer* buf = planner->chunk_buffer(c.where.buft_id, c.where.chunk, s);
    TS_RETURN_IF_ERROR(tensor_alloc(*buf, *t, static_cast<char*>(buf->base()) + c.where.offset));
  }
  return Status::Ok();
}

}  // namespace tessera
