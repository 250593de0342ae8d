// Helpers shared by the passes.
#include "plan.h"

namespace tessera::sched {

bool is_weight(const Tensor& t) {
  const Buffer* b = tensor_buffer(t);
  return b != nullptr && b->usage() == BufferUsage::kWeights;
}

bool is_auxiliary_source(const Tensor& node, int src_index) {
  return (node.op == Op::kRope && src_index == 2) || (node.op == Op::kFlashAttnExt && src_index == 4);
}

bool buffer_supported(const SchedPlan& plan, const BackendSet& bs, const Tensor& t, int b) {
  const Buffer* buf = bs.fixed_buffer(t);
  const BufferType* buft = nullptr;
  if (buf != nullptr) {
    buft = buf->type();
  } else {
    int owner = plan.backend_of(&t);
    if (owner < 0 && t.view_src != nullptr) owner = plan.backend_of(t.view_src);
    if (owner >= 0) buft = bs.compute_buft(owner);
  }
  return buft != nullptr && bs.supports_buft(b, *buft);
}

int backend_from_buffer(const BackendSet& bs, const Tensor& buffer_of, const Tensor& op) {
  const Buffer* buf = bs.fixed_buffer(buffer_of);
  if (buf == nullptr) return -1;
  for (int b = 0; b < bs.size(); ++b) {
    if (bs.supports_buft(b, *buf->type()) && bs.supports_op(b, op)) return b;
  }
  return -1;
}

Status split_graph(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt) {
  TS_RETURN_IF_ERROR(pass1_preassign(plan, g, bs, opt));
  pass2_expand(plan, g, bs);
  pass3_upgrade(plan, g, bs);
  TS_RETURN_IF_ERROR(pass4_sources(plan, g, bs));
  return pass5_splits(plan, g, bs, opt);
}

void restore_sources(SchedPlan& plan) {
  // in reverse, so a source rewritten twice ends as the user's original
  for (auto it = plan.rewrites.rbegin(); it != plan.rewrites.rend(); ++it) it->node->src[it->src] = it->original;
  plan.rewrites.clear();
}

}  // namespace tessera::sched
