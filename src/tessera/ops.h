// The op set and its metadata. Exact semantics of every op: docs/ops.md.
#pragma once

#include <cstdint>

namespace tessera {

enum class Op : int32_t {
  kNone = 0,  // leaf
  // views (never compute; alias view_src)
  kView,
  kReshape,
  kPermute,
  kTranspose,
  // copies
  kCpy,
  kCont,
  kDup,
  // element-wise
  kAdd,
  kMul,
  kDiv,
  kScale,
  kUnary,
  kGlu,
  // reductions / norms
  kRmsNorm,
  kNorm,
  kSumRows,
  kSoftMax,
  // positional
  kRope,
  // matmul
  kMulMat,
  kMulMatId,
  // indexing
  kGetRows,
  kSetRows,
  kArgsort,
  kTopK,
  // attention
  kFlashAttnExt,
  // element-wise, per-expert rows (appended: op numbers stay stable)
  kAddId,
  // element-wise, clamp to [min, max] (appended: op numbers stay stable)
  kClamp,
  kCount
};

constexpr int kOpCount = static_cast<int>(Op::kCount);

enum class UnaryOp : int32_t { kSilu = 0, kGelu, kRelu, kNeg, kCount };
enum class GluOp : int32_t { kSwiglu = 0, kGeglu, kSwigluOai, kCount };
enum class SortOrder : int32_t { kAsc = 0, kDesc };
enum class RopeMode : int32_t { kNormal = 0, kNeox = 2 };

struct OpTraits {
  const char* name;
  int min_src;       // required sources
  int max_src;       // sources including optional ones
  bool is_view;      // never computes; output aliases view_src
  bool can_inplace;  // output may reuse the memory of a source with the same layout
};

const OpTraits& op_traits(Op op);
inline const char* op_name(Op op) { return op_traits(op).name; }
inline bool op_is_view(Op op) { return op_traits(op).is_view; }
inline bool op_can_inplace(Op op) { return op_traits(op).can_inplace; }
const char* unary_op_name(UnaryOp op);
const char* glu_op_name(GluOp op);
bool op_from_name(const char* name, Op* out);

}  // namespace tessera
