// Op rules of simulated devices: which ops a device supports and which it asks for by op offload (op_rules.h).
#include "tessera/sim/op_rules.h"

#include <algorithm>

#include "sim_impl.h"

namespace tessera::sim {

int64_t batch_size(const Tensor& op) { return op.op == Op::kMulMatId ? op.ne[2] : op.ne[1]; }

namespace {

bool type_in(const std::vector<Type>& list, const Tensor* t) {
  if (list.empty()) return true;
  return t != nullptr && std::find(list.begin(), list.end(), t->type) != list.end();
}

}  // namespace

bool rule_matches(const OpRule& rule, const Tensor& op) {
  if (!listed_or_unset(rule.ops, op.op)) return false;
  if (!type_in(rule.src0_types, op.src[0])) return false;
  if (!type_in(rule.src1_types, op.src[1])) return false;
  if (!type_in(rule.dst_types, &op)) return false;
  const int64_t batch = batch_size(op);
  if (rule.min_batch > 0 && batch < rule.min_batch) return false;
  if (rule.max_batch > 0 && batch > rule.max_batch) return false;
  if (rule.ne0_multiple > 0) {
    const int64_t ne0 = op.src[0] != nullptr ? op.src[0]->ne[0] : op.ne[0];
    if (ne0 % rule.ne0_multiple != 0) return false;
  }
  return true;
}

bool op_allowed_by_rules(const DeviceConfig& cfg, const Tensor& node) {
  for (const OpRule& r : cfg.op_rules) {
    if (rule_matches(r, node)) return r.allow;
  }
  return cfg.default_allow;
}

bool offload_wanted(const DeviceConfig& cfg, const Tensor& node) {
  const OffloadRule& r = cfg.offload;
  return r.enabled && (r.ggml_cuda_batch ? ggml_offload_batch_size(node) : batch_size(node)) >= r.min_batch &&
         listed_or_unset(r.ops, node.op);
}

}  // namespace tessera::sim
