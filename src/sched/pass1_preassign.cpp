// Pass 1 (docs/scheduler.md, 'Pass 1'): pre-assign tensors whose memory, flags or weights decide their backend.
#include "plan.h"

namespace tessera::sched {

namespace {

Status scheduling_error(const Tensor& t, const Buffer& buf) {
  return TS_ERROR(StatusCode::kUnsupported,
                  "scheduling error: tensor %s is pre-allocated in buffer type %s, but no backend that can use that "
                  "buffer type supports op %s",
                  describe(t).c_str(), buf.type()->name(), op_name(t.op));
}

constexpr int kError = -2;

// The backend for one tensor (by id), or -1 (with the cause in *cause), or kError (with the error in *error). `last`
// is bs.last(). (No Result: this runs once per tensor, and the error is the exception.)
int backend_from_cur(SchedPlan& plan, int32_t id, const BackendSet& bs, const PassOptions& opt, int last, Cause* cause,
                     Status* error) {
  const int32_t vsrc = plan.view_src(id);
  // 1. the tensor has a buffer (not one of the scheduler's own compute buffers)
  if (vsrc < 0 && plan.fixed_buft(id) != nullptr) {
    const int b = backend_from_buffer(plan, bs, plan.fixed_buft(id), id);
    if (b < 0) {
      *error = scheduling_error(*plan.tensor(id), *plan.tensor(id)->buffer);
      return kError;
    }
    *cause = Cause::kHasBuffer;
    return b;
  }
  // 2. a view whose source has a buffer
  if (vsrc >= 0 && plan.fixed_buft(vsrc) != nullptr) {
    const int b = backend_from_buffer(plan, bs, plan.fixed_buft(vsrc), id);
    if (b < 0) {
      *error = scheduling_error(*plan.tensor(id), *plan.tensor(vsrc)->buffer);
      return kError;
    }
    *cause = Cause::kViewSourceHasBuffer;
    return b;
  }
  // 4. graph inputs start on the CPU
  if (plan.has(id, SchedPlan::kInputFlag)) {
    *cause = Cause::kInput;
    return last;
  }
  // 5. the first weight decides (auxiliary tiny weights never do)
  const int32_t s = plan.deciding_weight(id);
  if (s < 0) {
    *cause = Cause::kUnassigned;
    return -1;
  }
  const int b = backend_from_buffer(plan, bs, plan.fixed_buft(s), id);
  if (b == last && opt.op_offload && plan.has(s, SchedPlan::kHostBuffer)) {
    for (int o = 0; o < last; ++o) {
      if (plan.offloads(bs, id, o) && plan.supports(bs, id, o)) {
        *cause = Cause::kOpOffload;
        return o;
      }
    }
  }
  *cause = b >= 0 ? Cause::kWeight : Cause::kUnassigned;
  return b;
}

}  // namespace

Status pass1_preassign(SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt) {
  plan.fa_sinks_decide = opt.fa_sinks_decide;  // (before index: it asks about each node's deciding weight)
  plan.index(g, bs);
  const auto n = static_cast<int32_t>(plan.n_nodes()), l = static_cast<int32_t>(plan.n_leafs());
  const int last = bs.last();
  Status error = Status::Ok();
  auto visit = [&](int32_t id) {
    if (plan.backend(id) >= 0) return true;  // pinned by the user
    Cause cause = Cause::kUnassigned;
    const int b = backend_from_cur(plan, id, bs, opt, last, &cause, &error);
    if (b == kError) return false;
    if (b >= 0) plan.set_id(id, b, cause);
    return true;
  };
  for (int32_t i = n; i < n + l; ++i) {  // leafs first
    if (!visit(i)) return error;
  }
  for (int32_t i = 0; i < n; ++i) {
    if (!visit(i)) return error;
  }
  return Status::Ok();
}

}  // namespace tessera::sched
