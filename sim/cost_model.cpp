// The cost model of simulated devices: the time of one op (cost_model.h, docs/simulator.md "Time").
#include "tessera/sim/cost_model.h"

#include <algorithm>

#include "sim_impl.h"

namespace tessera::sim {

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
    case Op::kSetRows:
      // an element per value written (the rows given), not per element of the destination it is a view of
      return node.src[1] != nullptr ? static_cast<double>(nelements(*node.src[1])) : 0.0;
    case Op::kSoftMax:
    case Op::kRmsNorm:
    case Op::kNorm:
    case Op::kRope: return 5.0 * static_cast<double>(nelements(node));
    default: return static_cast<double>(nelements(node));
  }
}

const char* kernel_class_name(KernelClass c) {
  switch (c) {
    case KernelClass::kMatVec: return "mat_vec";
    case KernelClass::kMatMatQuant: return "mat_mat_quant";
    case KernelClass::kMatMatFloat: return "mat_mat_float";
    case KernelClass::kAttnDecode: return "attn_decode";
    case KernelClass::kAttnPrefill: return "attn_prefill";
    case KernelClass::kOther: return "other";
  }
  return "?";
}

KernelClass kernel_class(const Tensor& node) {
  // ggml-cuda's MMVQ_MAX_BATCH_SIZE (8): a matrix product of up to 8 columns is a matrix x vector kernel
  constexpr int64_t kVecMax = 8;
  const Tensor* a = node.src[0];
  const Tensor* b = node.src[1];
  if ((node.op == Op::kMulMat || node.op == Op::kMulMatId) && a != nullptr && b != nullptr) {
    // MUL_MAT: the columns of b; MUL_MAT_ID: its tokens (b [K, B1, n_tokens])
    const int64_t cols = node.op == Op::kMulMat ? b->ne[1] : b->ne[2];
    if (cols <= kVecMax) return KernelClass::kMatVec;
    return type_traits(a->type).is_quantized ? KernelClass::kMatMatQuant : KernelClass::kMatMatFloat;
  }
  if (node.op == Op::kFlashAttnExt && a != nullptr) {
    return a->ne[1] <= kVecMax ? KernelClass::kAttnDecode : KernelClass::kAttnPrefill;
  }
  return KernelClass::kOther;
}

double op_time_us(const DeviceConfig& cfg, const Tensor& node) {
  if (node.op == Op::kNone || op_is_view(node.op) || is_empty(node)) return 0.0;
  const CostModel& m = cfg.cost;
  double overhead = m.launch_overhead_us;
  double throughput = m.flops_f32;
  const Type wt = node.src[0] != nullptr ? node.src[0]->type : node.type;
  if (wt == Type::kF16 || wt == Type::kBF16) throughput = m.flops_f16;
  if (type_traits(wt).is_quantized) throughput = m.flops_quant;
  bool given_flops = false;  // an override's rate is the kernel's own: no efficiency scales it
  for (const CostModel::Override& o : m.overrides) {
    if (o.op != node.op) continue;
    if (o.fixed_us >= 0) return o.fixed_us;
    if (o.overhead_us >= 0) overhead = o.overhead_us;
    if (o.flops > 0) {
      throughput = o.flops;
      given_flops = true;
    }
  }
  double bytes = static_cast<double>(nbytes(node));
  for (const Tensor* s : node.src) {
    if (s != nullptr) bytes += static_cast<double>(nbytes(*s));
  }
  if (node.op == Op::kGetRows && node.src[1] != nullptr && node.src[0]->ne[0] > 0) {
    // the rows read: at most one per id (the token embeddings' GET_ROWS of one token reads one row of the table, not
    // the table: issue 46, where every decoded token paid for reading the whole of token_embd)
    const double rows = static_cast<double>(nelements(*node.src[0]) / node.src[0]->ne[0]);
    const double touched = std::min(rows, static_cast<double>(nelements(*node.src[1])));
    bytes -= static_cast<double>(nbytes(*node.src[0])) * (1.0 - touched / rows);
  }
  if (node.op == Op::kSetRows && node.src[0] != nullptr && node.src[1] != nullptr && node.src[2] != nullptr) {
    // the rows written, one per id, in the destination's type; the destination (the node is a view of it, src[0] is
    // it) is not read. A decoded token's K and V rows are 2 x 8 KiB a layer of Llama-2-7B's f16 cache, not the
    // cache's 2 MiB at 256 cells twice over (issue 46: 64 such writes took 6.5 % of the token's time, and at 32768
    // cells more than the weights)
    bytes = static_cast<double>(nbytes(*node.src[1]) + nbytes(*node.src[2])) +
            static_cast<double>(nelements(*node.src[2])) *
                static_cast<double>(row_size(node.src[0]->type, node.src[0]->ne[0]));
  }
  if (node.op == Op::kMulMatId && node.src[2] != nullptr && node.src[0]->ne[2] > 0) {
    // the experts read: at most one per (token, slot) of the ids, never more than there are. A decoded token of a
    // 128-expert model with 8 used reads 8 of them, not the whole tensor (issue 46: Qwen3-30B-A3B's experts on the
    // CPU decoded at a tenth of the speed the bandwidth allows).
    const double n_expert = static_cast<double>(node.src[0]->ne[2]);
    const double touched = std::min(n_expert, static_cast<double>(nelements(*node.src[2])));
    bytes -= static_cast<double>(nbytes(*node.src[0])) * (1.0 - touched / n_expert);
  }
  const Efficiency& e = m.efficiency[static_cast<size_t>(kernel_class(node))];
  const double compute_s = throughput > 0 ? op_flops(node) / (throughput * (given_flops ? 1.0 : e.compute)) : 0.0;
  const double memory_s = m.mem_bandwidth > 0 ? bytes / (m.mem_bandwidth * e.memory) : 0.0;
  return overhead + std::max(compute_s, memory_s) * 1e6;
}

}  // namespace tessera::sim
