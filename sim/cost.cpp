// Op-support rules, offload rules and the cost model of simulated devices (docs/topology.md).
#include <algorithm>

#include "sim_impl.h"

namespace tessera::sim {

const char* memory_mode_name(MemoryMode mode) {
  switch (mode) {
    case MemoryMode::kBacked: return "memory-backed";
    case MemoryMode::kMetadata: return "metadata-only";
  }
  return "invalid";
}

int64_t batch_size(const Tensor& op) { return op.op == Op::kMulMatId ? op.ne[2] : op.ne[1]; }

namespace {

template <typename T>
bool in(const std::vector<T>& list, T v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

bool type_in(const std::vector<Type>& list, const Tensor* t) {
  if (list.empty()) return true;
  return t != nullptr && std::find(list.begin(), list.end(), t->type) != list.end();
}

}  // namespace

bool rule_matches(const OpRule& rule, const Tensor& op) {
  if (!in(rule.ops, op.op)) return false;
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
  return r.enabled && batch_size(node) >= r.min_batch && in(r.ops, node.op);
}

double op_flops(const Tensor& node) {
  const Tensor* a = node.src[0];
  switch (node.op) {
    case Op::kMulMat:
    case Op::kMulMatId:
      // every output element is a dot product of length K = src0->ne[0]
      return 2.0 * static_cast<double>(a->ne[0]) * static_cast<double>(nelements(node));
    case Op::kFlashAttnExt: {
      // q [D, n_q, H, ...], k [D, n_kv, H_kv, ...]: QK^T and PV, 2 flops per multiply-add each
      const Tensor* k = node.src[1];
      const double d = static_cast<double>(a->ne[0]);
      const double nq = static_cast<double>(a->ne[1]) * static_cast<double>(a->ne[2]) * static_cast<double>(a->ne[3]);
      return 4.0 * d * static_cast<double>(k->ne[1]) * nq;
    }
    case Op::kSoftMax:
    case Op::kRmsNorm:
    case Op::kNorm:
    case Op::kRope:
      return 5.0 * static_cast<double>(nelements(node));
    default:
      return static_cast<double>(nelements(node));
  }
}

double op_time_us(const DeviceConfig& cfg, const Tensor& node) {
  if (node.op == Op::kNone || op_is_view(node.op) || is_empty(node)) return 0.0;
  const CostModel& m = cfg.cost;
  double overhead = m.launch_overhead_us;
  double throughput = m.flops_f32;
  const Type wt = node.src[0] != nullptr ? node.src[0]->type : node.type;
  if (wt == Type::kF16 || wt == Type::kBF16) throughput = m.flops_f16;
  if (type_traits(wt).is_quantized) throughput = m.flops_quant;
  for (const CostModel::Override& o : m.overrides) {
    if (o.op != node.op) continue;
    if (o.fixed_us >= 0) return o.fixed_us;
    if (o.overhead_us >= 0) overhead = o.overhead_us;
    if (o.flops > 0) throughput = o.flops;
  }
  double bytes = static_cast<double>(nbytes(node));
  for (const Tensor* s : node.src) {
    if (s != nullptr) bytes += static_cast<double>(nbytes(*s));
  }
  const double compute_s = throughput > 0 ? op_flops(node) / throughput : 0.0;
  const double memory_s = m.mem_bandwidth > 0 ? bytes / m.mem_bandwidth : 0.0;
  return overhead + std::max(compute_s, memory_s) * 1e6;
}

}  // namespace tessera::sim
