// Graph-building functions: shape and type checks, then a new tensor recording op, sources and parameters.
#include "tessera/build.h"
#include "tessera/rope.h"

#include <cmath>
#include <cstring>

namespace tessera {

namespace {

// The type sets of docs/ops.md. Weight and Any include the storage-only types (types.h): a graph with q6_k weights
// builds; whether a backend computes it is supports_op's question.
bool is_float_type(Type t) { return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16; }
bool is_weight_type(Type t) { return is_float_type(t) || (type_is_valid(t) && type_traits(t).is_quantized); }
bool is_any_type(Type t) { return type_is_valid(t); }
bool is_integer_type(Type t) { return t == Type::kI8 || t == Type::kI16 || t == Type::kI32 || t == Type::kI64; }

std::string dims(const Tensor* t) {
  return format_message("[%lld, %lld, %lld, %lld]", static_cast<long long>(t->ne[0]), static_cast<long long>(t->ne[1]),
                        static_cast<long long>(t->ne[2]), static_cast<long long>(t->ne[3]));
}

// Records an "invalid argument" error naming the op and returns nullptr.
Tensor* bad(Context& ctx, Op op, const std::string& what) {
  return ctx.fail(Status(StatusCode::kInvalidArgument, std::string(op_name(op)) + ": " + what));
}

// Checks a source: non-null (a null means an earlier failure: no new error) and of an allowed type.
enum class TypeSet { kFloat, kWeight, kAny, kF32, kI32, kIndex, kMask };
bool type_in(Type t, TypeSet set) {
  switch (set) {
    case TypeSet::kFloat: return is_float_type(t);
    case TypeSet::kWeight: return is_weight_type(t);
    case TypeSet::kAny: return is_any_type(t);
    case TypeSet::kF32: return t == Type::kF32;
    case TypeSet::kI32: return t == Type::kI32;
    case TypeSet::kIndex: return t == Type::kI32 || t == Type::kI64;
    case TypeSet::kMask: return t == Type::kF32 || t == Type::kF16;
  }
  return false;
}
const char* set_name(TypeSet set) {
  switch (set) {
    case TypeSet::kFloat: return "f32, f16 or bf16";
    case TypeSet::kWeight: return "f32, f16, bf16 or a quantized type";
    case TypeSet::kAny: return "a valid type";
    case TypeSet::kF32: return "f32";
    case TypeSet::kI32: return "i32";
    case TypeSet::kIndex: return "i32 or i64";
    case TypeSet::kMask: return "f32 or f16";
  }
  return "?";
}
bool check_type(Context& ctx, Op op, const char* role, const Tensor* t, TypeSet set) {
  if (type_in(t->type, set)) return true;
  bad(ctx, op,
      format_message("%s %s has type %s, expected %s", role, describe(*t).c_str(), type_name(t->type), set_name(set)));
  return false;
}

// A new computed tensor.
Tensor* make(Context& ctx, Op op, Type type, const int64_t ne[4], std::initializer_list<Tensor*> srcs) {
  Tensor* r = ctx.new_tensor(type, 4, ne);
  if (r == nullptr) return nullptr;
  r->op = op;
  int i = 0;
  for (Tensor* s : srcs) r->src[i++] = s;
  return r;
}

Tensor* make_view(Context& ctx, Op op, Tensor* a, const int64_t ne[4], const size_t nb[4], size_t offset) {
  Tensor* r = ctx.new_view(a, a->type, ne, nb, offset);
  if (r == nullptr) return nullptr;
  r->op = op;
  r->src[0] = a;
  format_name(*r, "%.50s (%s)", a->name,
              op == Op::kView      ? "view"
              : op == Op::kReshape ? "reshaped"
              : op == Op::kPermute ? "permuted"
                                   : "transposed");
  return r;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// views

Tensor* view_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, size_t nb1, size_t nb2,
                size_t nb3, size_t offset) {
  if (a == nullptr) return nullptr;
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  const size_t nb[4] = {a->nb[0], nb1, nb2, nb3};
  Tensor* r = make_view(ctx, Op::kView, a, ne, nb, offset);
  if (r != nullptr) {
    const uint64_t off = offset;
    set_op_param<uint32_t>(*r, 0, static_cast<uint32_t>(off & 0xffffffffu));
    set_op_param<uint32_t>(*r, 1, static_cast<uint32_t>(off >> 32));
  }
  return r;
}
Tensor* view_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1, size_t nb2, size_t offset) {
  if (a == nullptr) return nullptr;
  return view_4d(ctx, a, ne0, ne1, ne2, 1, nb1, nb2, nb2 * static_cast<size_t>(ne2), offset);
}
Tensor* view_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset) {
  if (a == nullptr) return nullptr;
  return view_4d(ctx, a, ne0, ne1, 1, 1, nb1, nb1 * static_cast<size_t>(ne1), nb1 * static_cast<size_t>(ne1), offset);
}
Tensor* view_1d(Context& ctx, Tensor* a, int64_t ne0, size_t offset) {
  if (a == nullptr) return nullptr;
  const size_t rs = row_size(a->type, ne0);
  return view_4d(ctx, a, ne0, 1, 1, 1, rs, rs, rs, offset);
}

// Whether a's elements fit the shape ne (as many elements, the product without overflow, ne0 a whole number of a's
// blocks); else the error in ctx, worded with `verb` ("reshape", "copy"). RESHAPE and CONT to a shape share it.
static bool shape_holds(Context& ctx, Op op, const char* verb, const Tensor& a, const int64_t ne[4]) {
  int64_t n = 1;  // the product with overflow checks (ne0 * ne1 * ne2 * ne3 could wrap to the source's count)
  const bool overflows = __builtin_mul_overflow(ne[0], ne[1], &n) || __builtin_mul_overflow(n, ne[2], &n) ||
                         __builtin_mul_overflow(n, ne[3], &n);
  if (ne[0] < 0 || ne[1] < 0 || ne[2] < 0 || ne[3] < 0 || overflows || n != nelements(a)) {
    bad(ctx, op,
        format_message("cannot %s %s (%lld elements) to [%lld, %lld, %lld, %lld]", verb, describe(a).c_str(),
                       static_cast<long long>(nelements(a)), static_cast<long long>(ne[0]),
                       static_cast<long long>(ne[1]), static_cast<long long>(ne[2]), static_cast<long long>(ne[3])));
    return false;
  }
  const TypeTraits& tt = type_traits(a.type);
  if (ne[0] % tt.block_size != 0) {
    bad(ctx, op,
        format_message("ne0 %lld is not a multiple of the %s block size", static_cast<long long>(ne[0]), tt.name));
    return false;
  }
  return true;
}

Tensor* reshape_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  if (a == nullptr) return nullptr;
  if (!is_contiguous(*a)) return bad(ctx, Op::kReshape, describe(*a) + " is not contiguous");
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  if (!shape_holds(ctx, Op::kReshape, "reshape", *a, ne)) return nullptr;
  size_t nb[4];
  nb[0] = type_traits(a->type).type_size;
  nb[1] = row_size(a->type, ne0);
  nb[2] = nb[1] * static_cast<size_t>(ne1);
  nb[3] = nb[2] * static_cast<size_t>(ne2);
  return make_view(ctx, Op::kReshape, a, ne, nb, 0);
}
Tensor* reshape_3d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2) {
  return reshape_4d(ctx, a, ne0, ne1, ne2, 1);
}
Tensor* reshape_2d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1) { return reshape_4d(ctx, a, ne0, ne1, 1, 1); }
Tensor* reshape_1d(Context& ctx, Tensor* a, int64_t ne0) { return reshape_4d(ctx, a, ne0, 1, 1, 1); }

Tensor* permute(Context& ctx, Tensor* a, int axis0, int axis1, int axis2, int axis3) {
  if (a == nullptr) return nullptr;
  const int axes[4] = {axis0, axis1, axis2, axis3};
  bool seen[4] = {false, false, false, false};
  for (int ax : axes) {
    if (ax < 0 || ax > 3 || seen[ax]) {
      return bad(ctx, Op::kPermute,
                 format_message("axes (%d, %d, %d, %d) are not a permutation of 0..3", axis0, axis1, axis2, axis3));
    }
    seen[ax] = true;
  }
  if (type_traits(a->type).is_quantized && axis0 != 0) {
    return bad(ctx, Op::kPermute, "cannot move dimension 0 of quantized " + describe(*a));
  }
  int64_t ne[4];
  size_t nb[4];
  for (int i = 0; i < 4; ++i) {
    ne[axes[i]] = a->ne[i];
    nb[axes[i]] = a->nb[i];
  }
  Tensor* r = make_view(ctx, Op::kPermute, a, ne, nb, 0);
  if (r != nullptr) {
    for (int i = 0; i < 4; ++i) r->op_params[i] = axes[i];
  }
  return r;
}

Tensor* transpose(Context& ctx, Tensor* a) {
  if (a == nullptr) return nullptr;
  if (type_traits(a->type).is_quantized) return bad(ctx, Op::kTranspose, "cannot transpose quantized " + describe(*a));
  const int64_t ne[4] = {a->ne[1], a->ne[0], a->ne[2], a->ne[3]};
  const size_t nb[4] = {a->nb[1], a->nb[0], a->nb[2], a->nb[3]};
  return make_view(ctx, Op::kTranspose, a, ne, nb, 0);
}

// ---------------------------------------------------------------------------------------------------------------
// copies

Tensor* cpy(Context& ctx, Tensor* a, Tensor* b) {
  if (a == nullptr || b == nullptr) return nullptr;
  if (!check_type(ctx, Op::kCpy, "source", a, TypeSet::kAny) || !check_type(ctx, Op::kCpy, "dest", b, TypeSet::kAny)) {
    return nullptr;
  }
  if (is_integer_type(a->type) != is_integer_type(b->type)) {
    return bad(ctx, Op::kCpy,
               "integer types (i8, i16, i32, i64) can only be copied to and from integer types: " + describe(*a) +
                   " -> " + describe(*b));
  }
  if (nelements(*a) != nelements(*b)) {
    return bad(ctx, Op::kCpy, "element counts differ: " + describe(*a) + " -> " + describe(*b));
  }
  Tensor* r = ctx.new_view(b, b->type, b->ne, b->nb, 0);
  if (r == nullptr) return nullptr;
  r->op = Op::kCpy;
  r->src[0] = a;
  r->src[1] = b;
  format_name(*r, "%.50s (copy)", b->name);
  return r;
}

Tensor* cast(Context& ctx, Tensor* a, Type type) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kCpy, "source", a, TypeSet::kAny)) return nullptr;
  if (!type_is_valid(type) || !type_in(type, TypeSet::kAny)) {
    return bad(ctx, Op::kCpy, std::string("cannot cast to type ") + (type_is_valid(type) ? type_name(type) : "?"));
  }
  if (is_integer_type(a->type) != is_integer_type(type)) {
    return bad(ctx, Op::kCpy,
               "integer types (i8, i16, i32, i64) can only be cast to and from integer types: " + describe(*a) +
                   " -> " + type_name(type));
  }
  if (a->ne[0] % type_traits(type).block_size != 0) {
    return bad(ctx, Op::kCpy,
               format_message("ne0 %lld is not a multiple of the %s block size", static_cast<long long>(a->ne[0]),
                              type_name(type)));
  }
  Tensor* r = make(ctx, Op::kCpy, type, a->ne, {a});
  if (r != nullptr) format_name(*r, "%.50s (cast)", a->name);
  return r;
}

static Tensor* cont_like(Context& ctx, Op op, Tensor* a) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, op, "source", a, TypeSet::kAny)) return nullptr;
  return make(ctx, op, a->type, a->ne, {a});
}
Tensor* cont(Context& ctx, Tensor* a) { return cont_like(ctx, Op::kCont, a); }
Tensor* cont_4d(Context& ctx, Tensor* a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kCont, "source", a, TypeSet::kAny)) return nullptr;
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  if (!shape_holds(ctx, Op::kCont, "copy", *a, ne)) return nullptr;
  return make(ctx, Op::kCont, a->type, ne, {a});
}
Tensor* dup(Context& ctx, Tensor* a) { return cont_like(ctx, Op::kDup, a); }

// ---------------------------------------------------------------------------------------------------------------
// element-wise

static Tensor* binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  if (a == nullptr || b == nullptr) return nullptr;
  if (!check_type(ctx, op, "src0", a, TypeSet::kFloat) || !check_type(ctx, op, "src1", b, TypeSet::kFloat)) {
    return nullptr;
  }
  if (!can_repeat(*b, *a)) {
    return bad(ctx, op, "src1 " + dims(b) + " cannot be broadcast to src0 " + dims(a));
  }
  return make(ctx, op, a->type, a->ne, {a, b});
}
Tensor* add(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::kAdd, a, b); }
Tensor* mul(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::kMul, a, b); }
Tensor* div(Context& ctx, Tensor* a, Tensor* b) { return binary(ctx, Op::kDiv, a, b); }

static Tensor* unary_like(Context& ctx, Op op, Tensor* a) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, op, "src0", a, TypeSet::kFloat)) return nullptr;
  return make(ctx, op, a->type, a->ne, {a});
}

Tensor* scale(Context& ctx, Tensor* a, float s, float bias) {
  Tensor* r = unary_like(ctx, Op::kScale, a);
  if (r != nullptr) {
    set_op_param<float>(*r, 0, s);
    set_op_param<float>(*r, 1, bias);
  }
  return r;
}

Tensor* clamp(Context& ctx, Tensor* a, float min, float max) {
  constexpr Op kOp = Op::kClamp;
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, kOp, "src0", a, TypeSet::kF32)) return nullptr;
  if (std::isnan(min) || std::isnan(max)) {
    return bad(ctx, kOp,
               format_message("min and max must not be NaN, got [%g, %g]", static_cast<double>(min),
                              static_cast<double>(max)));
  }
  if (min > max) {
    return bad(ctx, kOp, format_message("min %g is above max %g", static_cast<double>(min), static_cast<double>(max)));
  }
  Tensor* r = make(ctx, kOp, Type::kF32, a->ne, {a});
  if (r != nullptr) {
    set_op_param<float>(*r, 0, min);
    set_op_param<float>(*r, 1, max);
  }
  return r;
}

Tensor* add_id(Context& ctx, Tensor* a, Tensor* b, Tensor* ids) {
  constexpr Op kOp = Op::kAddId;
  if (a == nullptr || b == nullptr || ids == nullptr) return nullptr;
  if (!check_type(ctx, kOp, "src0", a, TypeSet::kF32) || !check_type(ctx, kOp, "biases", b, TypeSet::kF32) ||
      !check_type(ctx, kOp, "ids", ids, TypeSet::kI32)) {
    return nullptr;
  }
  if (a->ne[3] != 1) return bad(ctx, kOp, "src0 " + dims(a) + " must be [ne0, n_used, n_tokens, 1]");
  if (b->ne[0] != a->ne[0] || b->ne[2] != 1 || b->ne[3] != 1) {
    return bad(ctx, kOp, "biases " + dims(b) + " must be [ne0, n_expert, 1, 1] for src0 " + dims(a));
  }
  if (ids->ne[0] != a->ne[1] || ids->ne[1] != a->ne[2] || ids->ne[2] != 1 || ids->ne[3] != 1) {
    return bad(ctx, kOp, "ids " + dims(ids) + " must be [n_used, n_tokens, 1, 1] of src0 " + dims(a));
  }
  return make(ctx, kOp, Type::kF32, a->ne, {a, b, ids});
}

Tensor* unary(Context& ctx, Tensor* a, UnaryOp op) {
  if (a == nullptr) return nullptr;
  if (static_cast<int>(op) < 0 || op >= UnaryOp::kCount) {
    return bad(ctx, Op::kUnary, format_message("invalid unary op %d", static_cast<int>(op)));
  }
  Tensor* r = unary_like(ctx, Op::kUnary, a);
  if (r != nullptr) r->op_params[0] = static_cast<int32_t>(op);
  return r;
}

static Tensor* glu_impl(Context& ctx, Tensor* a, Tensor* b, GluOp op, bool swapped) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kGlu, "src0", a, TypeSet::kFloat)) return nullptr;
  int64_t ne[4] = {a->ne[0], a->ne[1], a->ne[2], a->ne[3]};
  if (b != nullptr) {
    if (!check_type(ctx, Op::kGlu, "src1", b, TypeSet::kFloat)) return nullptr;
    if (!same_shape(*a, *b)) return bad(ctx, Op::kGlu, "shapes differ: " + dims(a) + " vs " + dims(b));
  } else {
    if (a->ne[0] % 2 != 0) return bad(ctx, Op::kGlu, "single-input form needs an even ne0, got " + dims(a));
    ne[0] = a->ne[0] / 2;
  }
  Tensor* r = b != nullptr ? make(ctx, Op::kGlu, a->type, ne, {a, b}) : make(ctx, Op::kGlu, a->type, ne, {a});
  if (r != nullptr) {
    r->op_params[0] = static_cast<int32_t>(op);
    r->op_params[1] = swapped ? 1 : 0;
  }
  return r;
}

Tensor* glu(Context& ctx, Tensor* a, Tensor* b, GluOp op, bool swapped) {
  if (a == nullptr) return nullptr;
  if (op == GluOp::kSwigluOai) {
    return bad(ctx, Op::kGlu, "SWIGLU_OAI needs alpha and limit: build it with swiglu_oai");
  }
  if (static_cast<int>(op) < 0 || op >= GluOp::kCount) {
    return bad(ctx, Op::kGlu, format_message("invalid glu op %d", static_cast<int>(op)));
  }
  return glu_impl(ctx, a, b, op, swapped);
}

Tensor* swiglu_oai(Context& ctx, Tensor* a, Tensor* b, float alpha, float limit, bool swapped) {
  if (a == nullptr) return nullptr;
  if (!std::isfinite(alpha)) {
    return bad(ctx, Op::kGlu, format_message("SWIGLU_OAI alpha must be finite, got %g", static_cast<double>(alpha)));
  }
  if (!(std::isfinite(limit) && limit >= 0.0f)) {
    return bad(ctx, Op::kGlu,
               format_message("SWIGLU_OAI limit must be finite and >= 0, got %g", static_cast<double>(limit)));
  }
  Tensor* r = glu_impl(ctx, a, b, GluOp::kSwigluOai, swapped);
  if (r != nullptr) {
    set_op_param<float>(*r, 2, alpha);
    set_op_param<float>(*r, 3, limit);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// norms and reductions

static Tensor* norm_like(Context& ctx, Op op, Tensor* a, float eps) {
  if (a != nullptr && !(eps >= 0.0f && std::isfinite(eps))) {
    return bad(ctx, op, format_message("eps must be finite and >= 0, got %g", static_cast<double>(eps)));
  }
  Tensor* r = unary_like(ctx, op, a);
  if (r != nullptr) set_op_param<float>(*r, 0, eps);
  return r;
}
Tensor* rms_norm(Context& ctx, Tensor* a, float eps) { return norm_like(ctx, Op::kRmsNorm, a, eps); }
Tensor* norm(Context& ctx, Tensor* a, float eps) { return norm_like(ctx, Op::kNorm, a, eps); }

Tensor* sum_rows(Context& ctx, Tensor* a) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kSumRows, "src0", a, TypeSet::kFloat)) return nullptr;
  const int64_t ne[4] = {1, a->ne[1], a->ne[2], a->ne[3]};
  return make(ctx, Op::kSumRows, a->type, ne, {a});
}

Tensor* soft_max(Context& ctx, Tensor* a, Tensor* mask, float scale, Tensor* sinks) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kSoftMax, "src0", a, TypeSet::kFloat)) return nullptr;
  if (mask != nullptr) {
    if (!check_type(ctx, Op::kSoftMax, "mask", mask, TypeSet::kMask)) return nullptr;
    if (mask->ne[0] != a->ne[0] || mask->ne[1] < a->ne[1] || mask->ne[2] <= 0 || mask->ne[3] <= 0 ||
        a->ne[2] % mask->ne[2] != 0 || a->ne[3] % mask->ne[3] != 0) {
      return bad(ctx, Op::kSoftMax,
                 "mask " + dims(mask) + " does not fit scores " + dims(a) +
                     " (need equal ne0, ne1 >= scores', dims 2,3 dividing the scores')");
    }
  }
  if (sinks != nullptr) {
    if (!check_type(ctx, Op::kSoftMax, "sinks", sinks, TypeSet::kF32)) return nullptr;
    if (sinks->ne[0] != a->ne[2] || nelements(*sinks) != a->ne[2]) {
      return bad(ctx, Op::kSoftMax, "sinks " + dims(sinks) + " must have one entry per head, ne2 of scores " + dims(a));
    }
  }
  Tensor* r = sinks != nullptr  ? make(ctx, Op::kSoftMax, a->type, a->ne, {a, mask, sinks})
              : mask != nullptr ? make(ctx, Op::kSoftMax, a->type, a->ne, {a, mask})
                                : make(ctx, Op::kSoftMax, a->type, a->ne, {a});
  if (r != nullptr) set_op_param<float>(*r, 0, scale);
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// rope

Tensor* rope(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode, float freq_base, float freq_scale,
             Tensor* freq_factors) {
  return rope_ext(ctx, a, pos, n_dims, mode, freq_base, freq_scale, RopeYarn{}, freq_factors);
}

Tensor* rope_ext(Context& ctx, Tensor* a, Tensor* pos, int n_dims, RopeMode mode, float freq_base, float freq_scale,
                 const RopeYarn& yarn, Tensor* freq_factors) {
  if (a == nullptr || pos == nullptr) return nullptr;
  if (!check_type(ctx, Op::kRope, "src0", a, TypeSet::kFloat) ||
      !check_type(ctx, Op::kRope, "positions", pos, TypeSet::kI32)) {
    return nullptr;
  }
  if (mode != RopeMode::kNormal && mode != RopeMode::kNeox) {
    return bad(ctx, Op::kRope, format_message("invalid mode %d", static_cast<int>(mode)));
  }
  if (n_dims <= 0 || n_dims % 2 != 0 || n_dims > a->ne[0]) {
    return bad(ctx, Op::kRope,
               format_message("n_dims %d must be even, positive and <= head_dim %lld", n_dims,
                              static_cast<long long>(a->ne[0])));
  }
  if (nelements(*pos) != a->ne[2] || pos->ne[0] != a->ne[2]) {
    return bad(ctx, Op::kRope,
               "positions " + dims(pos) + " must be a vector of ne2 = " + std::to_string(a->ne[2]) + " entries for " +
                   dims(a));
  }
  if (!(freq_base > 0.0f) || !std::isfinite(freq_base) || !std::isfinite(freq_scale)) {
    return bad(ctx, Op::kRope, "freq_base must be positive and finite, freq_scale finite");
  }
  if (const char* why = rope_yarn_invalid(yarn, freq_scale)) return bad(ctx, Op::kRope, why);
  if (freq_factors != nullptr) {
    if (!check_type(ctx, Op::kRope, "freq_factors", freq_factors, TypeSet::kF32)) return nullptr;
    if (freq_factors->ne[0] < n_dims / 2) {
      return bad(ctx, Op::kRope,
                 format_message("freq_factors needs >= %d entries, has %lld", n_dims / 2,
                                static_cast<long long>(freq_factors->ne[0])));
    }
  }
  Tensor* r = freq_factors != nullptr ? make(ctx, Op::kRope, a->type, a->ne, {a, pos, freq_factors})
                                      : make(ctx, Op::kRope, a->type, a->ne, {a, pos});
  if (r != nullptr) {
    r->op_params[0] = n_dims;
    r->op_params[1] = static_cast<int32_t>(mode);
    set_op_param<float>(*r, 2, freq_base);
    set_op_param<float>(*r, 3, freq_scale);
    set_rope_yarn(*r, yarn);
  }
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// matmul

Tensor* mul_mat(Context& ctx, Tensor* a, Tensor* b) {
  if (a == nullptr || b == nullptr) return nullptr;
  if (!check_type(ctx, Op::kMulMat, "weight (src0)", a, TypeSet::kWeight) ||
      !check_type(ctx, Op::kMulMat, "src1", b, TypeSet::kF32)) {
    return nullptr;
  }
  if (a->ne[0] != b->ne[0]) {
    return bad(ctx, Op::kMulMat, "inner dimensions differ: src0 " + dims(a) + ", src1 " + dims(b));
  }
  if (a->ne[2] == 0 || a->ne[3] == 0 || b->ne[2] % a->ne[2] != 0 || b->ne[3] % a->ne[3] != 0) {
    return bad(ctx, Op::kMulMat, "src0 " + dims(a) + " cannot be broadcast over the batch dims of src1 " + dims(b));
  }
  const int64_t ne[4] = {a->ne[1], b->ne[1], b->ne[2], b->ne[3]};
  return make(ctx, Op::kMulMat, Type::kF32, ne, {a, b});
}

Tensor* mul_mat_id(Context& ctx, Tensor* as, Tensor* b, Tensor* ids) {
  if (as == nullptr || b == nullptr || ids == nullptr) return nullptr;
  if (!check_type(ctx, Op::kMulMatId, "experts (src0)", as, TypeSet::kWeight) ||
      !check_type(ctx, Op::kMulMatId, "src1", b, TypeSet::kF32) ||
      !check_type(ctx, Op::kMulMatId, "ids", ids, TypeSet::kI32)) {
    return nullptr;
  }
  if (as->ne[3] != 1 || b->ne[3] != 1 || ids->ne[2] != 1 || ids->ne[3] != 1) {
    return bad(ctx, Op::kMulMatId,
               "experts must be 3-D, src1 3-D and ids 2-D: " + dims(as) + ", " + dims(b) + ", " + dims(ids));
  }
  if (as->ne[0] != b->ne[0]) {
    return bad(ctx, Op::kMulMatId, "inner dimensions differ: experts " + dims(as) + ", src1 " + dims(b));
  }
  const int64_t n_used = ids->ne[0];
  const int64_t n_tokens = ids->ne[1];
  if (b->ne[2] != n_tokens || (b->ne[1] != 1 && b->ne[1] != n_used)) {
    return bad(ctx, Op::kMulMatId, "src1 " + dims(b) + " must be [K, 1 or n_used, n_tokens] for ids " + dims(ids));
  }
  const int64_t ne[4] = {as->ne[1], n_used, n_tokens, 1};
  return make(ctx, Op::kMulMatId, Type::kF32, ne, {as, b, ids});
}

// ---------------------------------------------------------------------------------------------------------------
// indexing

Tensor* get_rows(Context& ctx, Tensor* a, Tensor* ids) {
  if (a == nullptr || ids == nullptr) return nullptr;
  if (!check_type(ctx, Op::kGetRows, "src0", a, TypeSet::kAny) ||
      !check_type(ctx, Op::kGetRows, "ids", ids, TypeSet::kI32)) {
    return nullptr;
  }
  if (ids->ne[3] != 1 || ids->ne[1] != a->ne[2] || ids->ne[2] != a->ne[3]) {
    return bad(ctx, Op::kGetRows, "ids " + dims(ids) + " must be [n, ne2, ne3] of src0 " + dims(a));
  }
  const int64_t ne[4] = {a->ne[0], ids->ne[0], a->ne[2], a->ne[3]};
  return make(ctx, Op::kGetRows, is_integer_type(a->type) ? a->type : Type::kF32, ne, {a, ids});
}

Tensor* set_rows(Context& ctx, Tensor* dst, Tensor* rows, Tensor* ids) {
  if (dst == nullptr || rows == nullptr || ids == nullptr) return nullptr;
  if (!check_type(ctx, Op::kSetRows, "destination", dst, TypeSet::kWeight) ||
      !check_type(ctx, Op::kSetRows, "rows", rows, TypeSet::kF32) ||
      !check_type(ctx, Op::kSetRows, "ids", ids, TypeSet::kIndex)) {
    return nullptr;
  }
  if (rows->ne[0] != dst->ne[0] || rows->ne[2] != dst->ne[2] || rows->ne[3] != dst->ne[3]) {
    return bad(ctx, Op::kSetRows, "rows " + dims(rows) + " do not match destination " + dims(dst));
  }
  if (ids->ne[0] != rows->ne[1] || ids->ne[1] != rows->ne[2] || ids->ne[2] != rows->ne[3] || ids->ne[3] != 1) {
    return bad(ctx, Op::kSetRows, "ids " + dims(ids) + " must be [n, ne2, ne3] of rows " + dims(rows));
  }
  Tensor* r = ctx.new_view(dst, dst->type, dst->ne, dst->nb, 0);
  if (r == nullptr) return nullptr;
  r->op = Op::kSetRows;
  r->src[0] = dst;
  r->src[1] = rows;
  r->src[2] = ids;
  format_name(*r, "%.50s (set_rows)", dst->name);
  return r;
}

Tensor* argsort(Context& ctx, Tensor* a, SortOrder order) {
  if (a == nullptr) return nullptr;
  if (order != SortOrder::kAsc && order != SortOrder::kDesc) {
    return bad(ctx, Op::kArgsort, format_message("invalid order %d", static_cast<int>(order)));
  }
  if (!check_type(ctx, Op::kArgsort, "src0", a, TypeSet::kFloat)) return nullptr;
  Tensor* r = make(ctx, Op::kArgsort, Type::kI32, a->ne, {a});
  if (r != nullptr) r->op_params[0] = static_cast<int32_t>(order);
  return r;
}

Tensor* top_k(Context& ctx, Tensor* a, int k) {
  if (a == nullptr) return nullptr;
  if (!check_type(ctx, Op::kTopK, "src0", a, TypeSet::kFloat)) return nullptr;
  if (k < 1 || k > a->ne[0]) {
    return bad(ctx, Op::kTopK,
               format_message("k = %d must be in [1, ne0 = %lld]", k, static_cast<long long>(a->ne[0])));
  }
  const int64_t ne[4] = {k, a->ne[1], a->ne[2], a->ne[3]};
  Tensor* r = make(ctx, Op::kTopK, Type::kI32, ne, {a});
  if (r != nullptr) r->op_params[0] = k;
  return r;
}

// ---------------------------------------------------------------------------------------------------------------
// attention

Tensor* flash_attn_ext(Context& ctx, Tensor* q, Tensor* k, Tensor* v, Tensor* mask, float scale, Tensor* sinks) {
  constexpr Op kOp = Op::kFlashAttnExt;
  if (q == nullptr || k == nullptr || v == nullptr) return nullptr;
  if (!check_type(ctx, kOp, "q", q, TypeSet::kF32) || !check_type(ctx, kOp, "k", k, TypeSet::kWeight) ||
      !check_type(ctx, kOp, "v", v, TypeSet::kWeight)) {
    return nullptr;
  }
  if (k->ne[0] != q->ne[0]) return bad(ctx, kOp, "head sizes of q " + dims(q) + " and k " + dims(k) + " differ");
  if (v->ne[1] != k->ne[1] || v->ne[2] != k->ne[2] || v->ne[3] != k->ne[3]) {
    return bad(ctx, kOp, "k " + dims(k) + " and v " + dims(v) + " must share n_kv, kv heads and batch");
  }
  if (k->ne[2] == 0 || q->ne[2] % k->ne[2] != 0) {
    return bad(
        ctx, kOp,
        "q heads (" + std::to_string(q->ne[2]) + ") must be a multiple of kv heads (" + std::to_string(k->ne[2]) + ")");
  }
  if (k->ne[3] != q->ne[3]) return bad(ctx, kOp, "batch of q " + dims(q) + " and k " + dims(k) + " differ");
  if (mask != nullptr) {
    if (!check_type(ctx, kOp, "mask", mask, TypeSet::kMask)) return nullptr;
    if (mask->ne[0] != k->ne[1] || mask->ne[1] < q->ne[1] || mask->ne[2] != 1 || mask->ne[3] != 1) {
      return bad(ctx, kOp, "mask " + dims(mask) + " must be [n_kv, >= n_q, 1, 1] for q " + dims(q) + ", k " + dims(k));
    }
  }
  if (sinks != nullptr) {
    if (!check_type(ctx, kOp, "sinks", sinks, TypeSet::kF32)) return nullptr;
    if (sinks->ne[0] != q->ne[2] || nelements(*sinks) != q->ne[2]) {
      return bad(ctx, kOp,
                 "sinks " + dims(sinks) + " must have one entry per q head (" + std::to_string(q->ne[2]) + ")");
    }
  }
  if (!std::isfinite(scale)) return bad(ctx, kOp, "scale must be finite");
  const int64_t ne[4] = {v->ne[0], q->ne[2], q->ne[1], q->ne[3]};
  Tensor* r = make(ctx, kOp, Type::kF32, ne, {q, k, v, mask, sinks});
  if (r != nullptr) set_op_param<float>(*r, 0, scale);
  return r;
}

}  // namespace tessera
