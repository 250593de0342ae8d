// Internal: the per-op-group support checks and kernels behind ref::supports / ref::compute (ref_kernels.cpp).
//
// A check_* function validates sources, types, shapes and op parameters of a node (the node itself already has a
// known type and a sane layout). A run_* function is only called on a node its check_* accepted, with non-empty
// result, non-null data everywhere and a valid ComputeParams.
#pragma once

#include "access.h"

namespace tessera::cpu::ref {

inline bool same_ne(const Tensor& a, const Tensor& b) {
  return a.ne[0] == b.ne[0] && a.ne[1] == b.ne[1] && a.ne[2] == b.ne[2] && a.ne[3] == b.ne[3];
}

// A node of a's shape and type from a Float src0.
inline bool same_as_float_src0(const Tensor& node) {
  const Tensor* a = node.src[0];
  return src_ok(a) && is_float_type(a->type) && node.type == a->type && same_ne(node, *a);
}

// Fails (kFailed, naming node) unless every element of the i32 tensor ids lies in [0, limit). Every thread checks
// all ids before writing anything, so the outcome never depends on the thread count. Defined in ref_copy.cpp.
Status validate_ids(const Tensor& node, const Tensor& ids, int64_t limit);

// ref_copy.cpp: CPY, CONT/DUP, GET_ROWS, SET_ROWS
bool check_cpy(const Tensor& node);
bool check_cont(const Tensor& node);
bool check_get_rows(const Tensor& node);
bool check_set_rows(const Tensor& node);
Status run_cpy(const Tensor& node, const ComputeParams& p);
Status run_cont(const Tensor& node, const ComputeParams& p);
Status run_get_rows(const Tensor& node, const ComputeParams& p);
Status run_set_rows(const Tensor& node, const ComputeParams& p);

// ref_elementwise.cpp: ADD/MUL/DIV, SCALE, UNARY, GLU, ADD_ID, CLAMP
bool check_binary(const Tensor& node);
bool check_add_id(const Tensor& node);
Status run_add_id(const Tensor& node, const ComputeParams& p);
bool check_clamp(const Tensor& node);
Status run_clamp(const Tensor& node, const ComputeParams& p);
bool check_scale(const Tensor& node);
bool check_unary(const Tensor& node);
bool check_glu(const Tensor& node);
Status run_binary(const Tensor& node, const ComputeParams& p);
Status run_scale(const Tensor& node, const ComputeParams& p);
Status run_unary(const Tensor& node, const ComputeParams& p);
Status run_glu(const Tensor& node, const ComputeParams& p);

// ref_norm.cpp: RMS_NORM, NORM, SUM_ROWS, SOFT_MAX, ROPE
bool check_norm(const Tensor& node);  // RMS_NORM and NORM
bool check_sum_rows(const Tensor& node);
bool check_soft_max(const Tensor& node);
bool check_rope(const Tensor& node);
Status run_norm(const Tensor& node, const ComputeParams& p);
Status run_sum_rows(const Tensor& node, const ComputeParams& p);
Status run_soft_max(const Tensor& node, const ComputeParams& p);
Status run_rope(const Tensor& node, const ComputeParams& p);

// ref_matmul.cpp: MUL_MAT, MUL_MAT_ID
bool check_mul_mat(const Tensor& node);
bool check_mul_mat_id(const Tensor& node);
Status run_mul_mat(const Tensor& node, const ComputeParams& p);
Status run_mul_mat_id(const Tensor& node, const ComputeParams& p);

// ref_sort.cpp: ARGSORT, TOP_K
bool check_argsort(const Tensor& node);
bool check_top_k(const Tensor& node);
Status run_argsort(const Tensor& node, const ComputeParams& p);  // also runs TOP_K

// ref_attention.cpp: FLASH_ATTN_EXT
bool check_flash_attn_ext(const Tensor& node);
Status run_flash_attn_ext(const Tensor& node, const ComputeParams& p);

}  // namespace tessera::cpu::ref
