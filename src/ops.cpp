#include "tessera/ops.h"

#include <strings.h>

namespace tessera {

namespace {
// One row per op, in Op order: name, min_src, max_src, is_view, can_inplace.
// clang-format off
const OpTraits kOps[kOpCount] = {
    {"NONE", 0, 0, false, false},
    {"VIEW", 1, 1, true, false},
    {"RESHAPE", 1, 1, true, false},
    {"PERMUTE", 1, 1, true, false},
    {"TRANSPOSE", 1, 1, true, false},
    {"CPY", 1, 2, false, false},  // one source: a cast (the node is the destination)
    {"CONT", 1, 1, false, false},
    {"DUP", 1, 1, false, false},
    {"ADD", 2, 2, false, true},
    {"MUL", 2, 2, false, true},
    {"DIV", 2, 2, false, true},
    {"SCALE", 1, 1, false, true},
    {"UNARY", 1, 1, false, true},
    {"GLU", 1, 2, false, false},
    {"RMS_NORM", 1, 1, false, true},
    {"NORM", 1, 1, false, false},
    {"SUM_ROWS", 1, 1, false, false},
    {"SOFT_MAX", 1, 3, false, true},
    {"ROPE", 2, 3, false, true},
    {"MUL_MAT", 2, 2, false, false},
    {"MUL_MAT_ID", 3, 3, false, false},
    {"GET_ROWS", 2, 2, false, false},
    {"SET_ROWS", 3, 3, false, false},
    {"ARGSORT", 1, 1, false, false},
    {"TOP_K", 1, 1, false, false},
    {"FLASH_ATTN_EXT", 3, 5, false, false},
    {"ADD_ID", 3, 3, false, true},
    {"CLAMP", 1, 1, false, false},
};
// clang-format on
}  // namespace

const OpTraits& op_traits(Op op) {
  static const OpTraits kInvalid = {"INVALID", 0, 0, false, false};
  const int i = static_cast<int>(op);
  return (i >= 0 && i < kOpCount) ? kOps[i] : kInvalid;
}

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::kSilu: return "SILU";
    case UnaryOp::kGelu: return "GELU";
    case UnaryOp::kRelu: return "RELU";
    case UnaryOp::kNeg: return "NEG";
    default: return "INVALID";
  }
}

const char* glu_op_name(GluOp op) {
  switch (op) {
    case GluOp::kSwiglu: return "SWIGLU";
    case GluOp::kGeglu: return "GEGLU";
    case GluOp::kSwigluOai: return "SWIGLU_OAI";
    default: return "INVALID";
  }
}

bool op_from_name(const char* name, Op* out) {
  for (int i = 0; i < kOpCount; ++i) {
    if (strcasecmp(name, kOps[i].name) == 0) {
      *out = static_cast<Op>(i);
      return true;
    }
  }
  return false;
}

}  // namespace tessera
