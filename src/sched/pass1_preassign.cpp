// Pass 1 (SPEC 9.1): pre-assign tensors whose memory, flags or weights decide their backend.
#include "plan.h"

namespace tessera::sched {

namespace {

Status scheduling_error(const Tensor& t, const Buffer& buf) {
  return TS_ERROR(StatusCode::kUnsupported,
                  "scheduling error: tensor %s is pre-allocated in buffer type %s, but no backend that can use that "
                  "buffer type supports op %s",
                  describe(t).c_str(), buf.type()->name(), op_name(t.op));
}

// The backend for one tensor, or -1 (with the cause in *cause), or an error.
Result<int> backend_from_cur(const Tensor& t, const BackendSet& bs, const PassOptions& opt, Cause* cause) {
  // 1. the tensor has a buffer (not one of the scheduler's own compute buffers)
  if (t.view_src == nullptr && bs.fixed_buffer(t) != nullptr) {
    const int b = backend_from_buffer(bs, t, t);
    if (b < 0) return scheduling_error(t, *t.buffer);
    *cause = Cause::kDst;
    return b;
  }
  // 2. a view whose source has a buffer
  if (t.view_src != nullptr && bs.fixed_buffer(*t.view_src) != nullptr) {
    const int b = backend_from_buffer(bs, *t.view_src, t);
    if (b < 0) return scheduling_error(t, *t.view_src->buffer);
    *cause = Cause::kViewSrc;
    return b;
  }
  // 4. graph inputs start on the CPU
  if ((t.flags & kFlagInput) != 0) {
    *cause = Cause::kInput;
    return bs.last();
  }
  // 5. the first weight decides (auxiliary tiny weights never do)
  for (int j = 0; j < kMaxSrc; ++j) {
    const Tensor* s = t.src[j];
    if (s == nullptr || is_auxiliary_source(t, j) || !is_weight(*s)) continue;
    const int b = backend_from_buffer(bs, *s, t);
    const Buffer* wb = tensor_buffer(*s);
    if (b == bs.last() && opt.op_offload && wb->is_host()) {
      for (int o = 0; o < bs.last(); ++o) {
        if (bs.supports_op(o, t) && bs.offload_op(o, t)) {
          *cause = Cause::kOffload;
          return o;
        }
      }
    }
    *cause = b >= 0 ? Cause::kWeight : Cause::kUnassigned;
    return b;
  }
  *cause = Cause::kUnassigned;
  return -1;
}

}  // namespace

Status pass1_preassign(SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt) {
  for (const auto* list : {&g.leafs(), &g.nodes()}) {
    for (const Tensor* t : *list) {
      if (plan.backend_of(t) >= 0) continue;  // pinned by the user
      Cause cause = Cause::kUnassigned;
      Result<int> b = backend_from_cur(*t, bs, opt, &cause);
      if (!b.ok()) return b.status();
      if (*b >= 0) plan.set(t, *b, cause);
    }
  }
  return Status::Ok();
}

}  // namespace tessera::sched
