// Dispatch of the reference kernels: supports() runs the op's check, compute() the op's kernel.
#include "ref_kernels.h"

#include "ref_ops.h"

namespace tessera::cpu::ref {

namespace {

bool op_known(Op op) { return static_cast<int>(op) >= 0 && static_cast<int>(op) < kOpCount; }

bool is_view_op(Op op) { return op == Op::kView || op == Op::kReshape || op == Op::kPermute || op == Op::kTranspose; }

}  // namespace

bool supports(const Tensor& node) {
  if (!op_known(node.op) || !layout_ok(node)) return false;
  switch (node.op) {
    case Op::kNone:
    case Op::kView:
    case Op::kReshape: return true;
    case Op::kPermute: return !is_quant(node.type) || node.op_params[0] == 0;  // quantized tensors keep dim 0 in place
    case Op::kTranspose: return !is_quant(node.type);
    case Op::kCpy: return check_cpy(node);
    case Op::kCont:
    case Op::kDup: return check_cont(node);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: return check_binary(node);
    case Op::kScale: return check_scale(node);
    case Op::kUnary: return check_unary(node);
    case Op::kGlu: return check_glu(node);
    case Op::kRmsNorm:
    case Op::kNorm: return check_norm(node);
    case Op::kSumRows: return check_sum_rows(node);
    case Op::kSoftMax: return check_soft_max(node);
    case Op::kRope: return check_rope(node);
    case Op::kMulMat: return check_mul_mat(node);
    case Op::kMulMatId: return check_mul_mat_id(node);
    case Op::kGetRows: return check_get_rows(node);
    case Op::kSetRows: return check_set_rows(node);
    case Op::kArgsort: return check_argsort(node);
    case Op::kTopK: return check_top_k(node);
    case Op::kFlashAttnExt: return check_flash_attn_ext(node);
    case Op::kAddId: return check_add_id(node);
    case Op::kClamp: return check_clamp(node);
    case Op::kCount: return false;
  }
  return false;
}

Status compute(const Tensor& node, const ComputeParams& params) {
  if (!supports(node)) {
    return TS_ERROR(StatusCode::kUnsupported, "%s: not supported by the reference CPU kernels (op, types or shapes)",
                    describe(node).c_str());
  }
  if (params.nth < 1 || params.ith < 0 || params.ith >= params.nth) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: invalid thread index %d of %d", describe(node).c_str(),
                    params.ith, params.nth);
  }
  if (node.op == Op::kNone || is_view_op(node.op)) return Status::Ok();
  // Index ops still validate their ids when the result is empty (an id out of range is an error either way).
  const bool index_op = node.op == Op::kGetRows || node.op == Op::kSetRows || node.op == Op::kMulMatId;
  if (is_empty(node) && !index_op) return Status::Ok();

  // Every non-empty tensor involved must be host-addressable.
  if (!is_empty(node) && node.data == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: result has no data", describe(node).c_str());
  }
  for (int i = 0; i < kMaxSrc; ++i) {
    const Tensor* s = node.src[i];
    if (s != nullptr && !is_empty(*s) && s->data == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: source %d %s has no data", describe(node).c_str(), i,
                      describe(*s).c_str());
    }
  }

  switch (node.op) {
    case Op::kCpy: return run_cpy(node, params);
    case Op::kCont:
    case Op::kDup: return run_cont(node, params);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv: return run_binary(node, params);
    case Op::kScale: return run_scale(node, params);
    case Op::kUnary: return run_unary(node, params);
    case Op::kGlu: return run_glu(node, params);
    case Op::kRmsNorm:
    case Op::kNorm: return run_norm(node, params);
    case Op::kSumRows: return run_sum_rows(node, params);
    case Op::kSoftMax: return run_soft_max(node, params);
    case Op::kRope: return run_rope(node, params);
    case Op::kMulMat: return run_mul_mat(node, params);
    case Op::kMulMatId: return run_mul_mat_id(node, params);
    case Op::kGetRows: return run_get_rows(node, params);
    case Op::kSetRows: return run_set_rows(node, params);
    case Op::kArgsort:
    case Op::kTopK: return run_argsort(node, params);
    case Op::kFlashAttnExt: return run_flash_attn_ext(node, params);
    case Op::kAddId: return run_add_id(node, params);
    case Op::kClamp: return run_clamp(node, params);
    default: break;
  }
  return TS_ERROR(StatusCode::kUnsupported, "%s: no reference kernel", describe(node).c_str());
}

}  // namespace tessera::cpu::ref
