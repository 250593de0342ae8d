// Op correctness against the float64 oracle: ADD/MUL/DIV, SCALE, UNARY, GLU, RMS_NORM, NORM, SUM_ROWS, SOFT_MAX,
// ROPE, for every Float type (and every a x b Float pair for the binary ops).
#include "unit/cpu/op_oracle.h"

namespace tessera::optest {
namespace {

// ---------------------------------------------------------------------------------------------------------------
// ADD / MUL / DIV: a, b Float (all 9 pairs); result a's type; b broadcast by modulo.

const char* op_str(Op op) {
  switch (op) {
    case Op::kAdd: return "add";
    case Op::kMul: return "mul";
    case Op::kDiv: return "div";
    case Op::kRmsNorm: return "rms_norm";
    case Op::kNorm: return "norm";
    default: return "op";
  }
}

Tensor* build_binary(Context& ctx, Op op, Tensor* a, Tensor* b) {
  switch (op) {
    case Op::kAdd: return add(ctx, a, b);
    case Op::kMul: return mul(ctx, a, b);
    default: return div(ctx, a, b);
  }
}
double apply_binary(Op op, double x, double y) {
  switch (op) {
    case Op::kAdd: return x + y;
    case Op::kMul: return x * y;
    default: return x / y;
  }
}
HT oracle_binary(Op op, const HT& A, const HT& B) {
  HT r(A.ne);
  for_each_index(A.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    r.at(i0, i1, i2, i3) =
        apply_binary(op, A.at(i0, i1, i2, i3), B.at(i0 % B.ne[0], i1 % B.ne[1], i2 % B.ne[2], i3 % B.ne[3]));
  });
  return r;
}

using BinaryParam = std::tuple<Op, Type, Type>;
class OpRefBinary : public testing::TestWithParam<BinaryParam> {};

TEST_P(OpRefBinary, BroadcastOddShapes) {
  const auto [op, ta, tb] = GetParam();
  struct Shapes {
    Shape a, b;
  };
  const Shapes cases[] = {
      {{1, 1, 1, 1}, {1, 1, 1, 1}},  {{7, 3, 2, 1}, {7, 3, 2, 1}}, {{33, 5, 3, 2}, {33, 1, 3, 1}},
      {{96, 4, 2, 3}, {1, 4, 1, 3}}, {{7, 6, 4, 2}, {7, 2, 2, 1}}, {{33, 2, 1, 1}, {1, 1, 1, 1}},
  };
  for (const Shapes& s : cases) {
    SCOPED_TRACE("a " + shape_str(s.a) + " b " + shape_str(s.b));
    OpCase c;
    HT A, B;
    Tensor* a = c.rand_input(ta, s.a, &A);
    Tensor* b = op == Op::kDiv ? c.input(tb, s.b, c.rand_away_from_zero(numel(s.b), 0.5f, 1.5f), &B)
                               : c.rand_input(tb, s.b, &B);
    Tensor* out = build_binary(c.ctx, op, a, b);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, ta);
    expect_nmse(oracle_binary(op, A, B), c.read(out), ta);
  }
}

// Non-contiguous sources: a is a permuted view (rows strided), b a transposed view (nb0 != element size) that is
// also broadcast.
TEST_P(OpRefBinary, NonContiguousSources) {
  const auto [op, ta, tb] = GetParam();
  OpCase c;
  HT Aroot, Broot;
  Tensor* aroot = c.rand_input(ta, {7, 5, 3, 1}, &Aroot);
  Tensor* broot = op == Op::kDiv ? c.input(tb, {3, 7, 1, 1}, c.rand_away_from_zero(21, 0.5f, 1.5f), &Broot)
                                 : c.rand_input(tb, {3, 7, 1, 1}, &Broot);
  Tensor* a = permute(c.ctx, aroot, 0, 2, 1, 3);  // [7, 3, 5, 1]
  Tensor* b = transpose(c.ctx, broot);            // [7, 3, 1, 1]
  Tensor* out = build_binary(c.ctx, op, a, b);
  TS_EXPECT_COMPUTE_OK(c, out);
  const HT A = permute(Aroot, 0, 2, 1, 3), B = transpose(Broot);
  expect_nmse(oracle_binary(op, A, B), c.read(out), ta);
}

std::vector<BinaryParam> binary_params() {
  std::vector<BinaryParam> p;
  for (Op op : {Op::kAdd, Op::kMul, Op::kDiv})
    for (Type ta : kFloatTypes)
      for (Type tb : kFloatTypes) p.emplace_back(op, ta, tb);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllFloatPairs, OpRefBinary, testing::ValuesIn(binary_params()),
                         [](const testing::TestParamInfo<BinaryParam>& i) {
                           return std::string(op_str(std::get<0>(i.param))) + "_" + tname(std::get<1>(i.param)) + "_" +
                                  tname(std::get<2>(i.param));
                         });

// ---------------------------------------------------------------------------------------------------------------
// Single-Float-type ops.
class OpRefFloat : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(FloatTypes, OpRefFloat, testing::ValuesIn(kFloatTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

const Shape kOddShapes[] = {{1, 1, 1, 1}, {7, 3, 1, 1}, {33, 2, 3, 1}, {96, 3, 2, 2}};

TEST_P(OpRefFloat, ScaleWithBias) {
  const Type t = GetParam();
  struct P {
    float s, bias;
  };
  for (const P p : {P{1.75f, -0.375f}, P{-0.5f, 0.0f}, P{3.0f, 2.5f}}) {
    for (const Shape& ne : kOddShapes) {
      SCOPED_TRACE("s=" + std::to_string(p.s) + " bias=" + std::to_string(p.bias) + " " + shape_str(ne));
      OpCase c;
      HT A;
      Tensor* a = c.rand_input(t, ne, &A);
      Tensor* out = scale(c.ctx, a, p.s, p.bias);
      TS_EXPECT_COMPUTE_OK(c, out);
      HT ref(A.ne);
      for (size_t i = 0; i < A.v.size(); ++i) ref.v[i] = A.v[i] * static_cast<double>(p.s) + p.bias;
      expect_nmse(ref, c.read(out), t);
    }
  }
}

TEST_P(OpRefFloat, ScaleNonContiguous) {
  const Type t = GetParam();
  OpCase c;
  HT R;
  Tensor* root = c.rand_input(t, {33, 4, 3, 1}, &R);
  Tensor* out = scale(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), 0.625f, 0.25f);
  TS_EXPECT_COMPUTE_OK(c, out);
  HT ref = permute(R, 0, 2, 1, 3);
  for (double& x : ref.v) x = x * 0.625 + 0.25;
  expect_nmse(ref, c.read(out), t);
}

// ---- UNARY: every op x Float type ----
using UnaryParam = std::tuple<UnaryOp, Type>;
class OpRefUnary : public testing::TestWithParam<UnaryParam> {};

double apply_unary(UnaryOp op, double x) {
  switch (op) {
    case UnaryOp::kSilu: return silu(x);
    case UnaryOp::kGelu: return gelu(x);
    case UnaryOp::kRelu: return x > 0 ? x : 0.0;
    default: return -x;
  }
}
const char* unary_str(UnaryOp op) {
  switch (op) {
    case UnaryOp::kSilu: return "silu";
    case UnaryOp::kGelu: return "gelu";
    case UnaryOp::kRelu: return "relu";
    default: return "neg";
  }
}

TEST_P(OpRefUnary, OddShapesAndPermutedSource) {
  const auto [uop, t] = GetParam();
  for (const Shape& ne : kOddShapes) {
    SCOPED_TRACE(shape_str(ne));
    OpCase c;
    HT A;
    const float r = 5.0f;  // GELU's negative tail included: the kernel must not cancel there
    Tensor* a = c.rand_input(t, ne, &A, -r, r);
    Tensor* out = unary(c.ctx, a, uop);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    HT ref(A.ne);
    for (size_t i = 0; i < A.v.size(); ++i) ref.v[i] = apply_unary(uop, A.v[i]);
    expect_nmse(ref, c.read(out), t);
  }
  {
    SCOPED_TRACE("permuted source");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {33, 3, 4, 1}, &R, -5.0f, 5.0f);
    Tensor* out = unary(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), uop);
    TS_EXPECT_COMPUTE_OK(c, out);
    HT ref = permute(R, 0, 2, 1, 3);
    for (double& x : ref.v) x = apply_unary(uop, x);
    expect_nmse(ref, c.read(out), t);
  }
}

std::vector<UnaryParam> unary_params() {
  std::vector<UnaryParam> p;
  for (UnaryOp op : {UnaryOp::kSilu, UnaryOp::kGelu, UnaryOp::kRelu, UnaryOp::kNeg})
    for (Type t : kFloatTypes) p.emplace_back(op, t);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllOpsAllFloat, OpRefUnary, testing::ValuesIn(unary_params()),
                         [](const testing::TestParamInfo<UnaryParam>& i) {
                           return std::string(unary_str(std::get<0>(i.param))) + "_" + tname(std::get<1>(i.param));
                         });

// ---- GLU: both ops, both forms, swapped, every Float type ----
using GluParam = std::tuple<GluOp, Type>;
class OpRefGlu : public testing::TestWithParam<GluParam> {};

double glu_act(GluOp op, double x) { return op == GluOp::kSwiglu ? silu(x) : gelu(x); }

HT oracle_glu_single(GluOp op, const HT& A, bool swapped) {
  const int64_t h = A.ne[0] / 2;
  HT ref({h, A.ne[1], A.ne[2], A.ne[3]});
  for_each_index(ref.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
    const double first = A.at(i0, i1, i2, i3), second = A.at(i0 + h, i1, i2, i3);
    ref.at(i0, i1, i2, i3) = swapped ? glu_act(op, second) * first : glu_act(op, first) * second;
  });
  return ref;
}

TEST_P(OpRefGlu, SingleInputBothHalves) {
  const auto [gop, t] = GetParam();
  for (bool swapped : {false, true}) {
    for (const Shape& ne : {Shape{2, 1, 1, 1}, Shape{14, 3, 1, 1}, Shape{66, 2, 3, 1}, Shape{96, 2, 1, 2}}) {
      SCOPED_TRACE(std::string(swapped ? "swapped " : "") + shape_str(ne));
      OpCase c;
      HT A;
      const float r = 4.0f;
      Tensor* a = c.rand_input(t, ne, &A, -r, r);
      Tensor* out = glu(c.ctx, a, nullptr, gop, swapped);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, t);
      expect_nmse(oracle_glu_single(gop, A, swapped), c.read(out), t);
    }
    {
      SCOPED_TRACE(std::string(swapped ? "swapped " : "") + "permuted source");
      OpCase c;
      HT R;
      Tensor* root = c.rand_input(t, {34, 3, 5, 1}, &R, -4.0f, 4.0f);
      Tensor* out = glu(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), nullptr, gop, swapped);
      TS_EXPECT_COMPUTE_OK(c, out);
      expect_nmse(oracle_glu_single(gop, permute(R, 0, 2, 1, 3), swapped), c.read(out), t);
    }
  }
}

TEST_P(OpRefGlu, TwoInputs) {
  const auto [gop, t] = GetParam();
  for (const Shape& ne : kOddShapes) {
    SCOPED_TRACE(shape_str(ne));
    OpCase c;
    HT A, B;
    const float r = 4.0f;
    Tensor* a = c.rand_input(t, ne, &A, -r, r);
    Tensor* b = c.rand_input(t, ne, &B, -2.0f, 2.0f);
    Tensor* out = glu(c.ctx, a, b, gop);
    TS_EXPECT_COMPUTE_OK(c, out);
    HT ref(A.ne);
    for (size_t i = 0; i < A.v.size(); ++i) ref.v[i] = glu_act(gop, A.v[i]) * B.v[i];
    expect_nmse(ref, c.read(out), t);
  }
  {
    SCOPED_TRACE("permuted a and b");
    OpCase c;
    HT RA, RB;
    Tensor* ra = c.rand_input(t, {33, 4, 3, 1}, &RA, -4.0f, 4.0f);
    Tensor* rb = c.rand_input(t, {33, 4, 3, 1}, &RB, -2.0f, 2.0f);
    Tensor* out = glu(c.ctx, permute(c.ctx, ra, 0, 2, 1, 3), permute(c.ctx, rb, 0, 2, 1, 3), gop);
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT A = permute(RA, 0, 2, 1, 3), B = permute(RB, 0, 2, 1, 3);
    HT ref(A.ne);
    for (size_t i = 0; i < A.v.size(); ++i) ref.v[i] = glu_act(gop, A.v[i]) * B.v[i];
    expect_nmse(ref, c.read(out), t);
  }
}

std::vector<GluParam> glu_params() {
  std::vector<GluParam> p;
  for (GluOp op : {GluOp::kSwiglu, GluOp::kGeglu})
    for (Type t : kFloatTypes) p.emplace_back(op, t);
  return p;
}
INSTANTIATE_TEST_SUITE_P(BothOpsAllFloat, OpRefGlu, testing::ValuesIn(glu_params()),
                         [](const testing::TestParamInfo<GluParam>& i) {
                           return std::string(std::get<0>(i.param) == GluOp::kSwiglu ? "swiglu" : "geglu") + "_" +
                                  tname(std::get<1>(i.param));
                         });

// ---- RMS_NORM / NORM ----
using NormParam = std::tuple<Op, Type>;
class OpRefNorm : public testing::TestWithParam<NormParam> {};

HT oracle_norm(Op op, const HT& A, double eps) {
  const int64_t n = A.ne[0];
  HT ref(A.ne);
  for (int64_t r = 0; r < numel(A.ne) / n; ++r) {
    const double* x = &A.v[static_cast<size_t>(r * n)];
    double* y = &ref.v[static_cast<size_t>(r * n)];
    if (op == Op::kRmsNorm) {
      double ss = 0;
      for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
      const double f = 1.0 / std::sqrt(ss / n + eps);
      for (int64_t i = 0; i < n; ++i) y[i] = x[i] * f;
    } else {
      double mean = 0, var = 0;
      for (int64_t i = 0; i < n; ++i) mean += x[i];
      mean /= n;
      for (int64_t i = 0; i < n; ++i) var += (x[i] - mean) * (x[i] - mean);
      var /= n;
      const double f = 1.0 / std::sqrt(var + eps);
      for (int64_t i = 0; i < n; ++i) y[i] = (x[i] - mean) * f;
    }
  }
  return ref;
}

TEST_P(OpRefNorm, PerRow) {
  const auto [op, t] = GetParam();
  auto build = [op = op](Context& ctx, Tensor* a, float eps) {
    return op == Op::kRmsNorm ? rms_norm(ctx, a, eps) : norm(ctx, a, eps);
  };
  for (const float eps : {1e-5f, 1e-2f}) {
    for (const Shape& ne : kOddShapes) {
      SCOPED_TRACE("eps=" + std::to_string(eps) + " " + shape_str(ne));
      OpCase c;
      HT A;
      // An offset makes the mean matter for NORM.
      Tensor* a = c.rand_input(t, ne, &A, -1.0f, 3.0f);
      Tensor* out = build(c.ctx, a, eps);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, t);
      expect_nmse(oracle_norm(op, A, eps), c.read(out), t);
    }
  }
  {
    SCOPED_TRACE("permuted source");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {33, 3, 4, 2}, &R, -1.0f, 3.0f);
    Tensor* out = build(c.ctx, permute(c.ctx, root, 0, 3, 1, 2), 1e-5f);
    TS_EXPECT_COMPUTE_OK(c, out);
    expect_nmse(oracle_norm(op, permute(R, 0, 3, 1, 2), 1e-5f), c.read(out), t);
  }
}

std::vector<NormParam> norm_params() {
  std::vector<NormParam> p;
  for (Op op : {Op::kRmsNorm, Op::kNorm})
    for (Type t : kFloatTypes) p.emplace_back(op, t);
  return p;
}
INSTANTIATE_TEST_SUITE_P(BothNormsAllFloat, OpRefNorm, testing::ValuesIn(norm_params()),
                         [](const testing::TestParamInfo<NormParam>& i) {
                           return std::string(op_str(std::get<0>(i.param))) + "_" + tname(std::get<1>(i.param));
                         });

// ---- SUM_ROWS ----
HT oracle_sum_rows(const HT& A) {
  HT ref({1, A.ne[1], A.ne[2], A.ne[3]});
  for_each_index(
      A.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) { ref.at(0, i1, i2, i3) += A.at(i0, i1, i2, i3); });
  return ref;
}

TEST_P(OpRefFloat, SumRows) {
  const Type t = GetParam();
  for (const Shape& ne : kOddShapes) {
    SCOPED_TRACE(shape_str(ne));
    OpCase c;
    HT A;
    Tensor* a = c.rand_input(t, ne, &A, -0.5f, 1.0f);
    Tensor* out = sum_rows(c.ctx, a);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    expect_nmse(oracle_sum_rows(A), c.read(out), t);
  }
  {
    SCOPED_TRACE("transposed source");
    OpCase c;
    HT R;
    Tensor* root = c.rand_input(t, {5, 33, 2, 1}, &R, -0.5f, 1.0f);
    Tensor* out = sum_rows(c.ctx, transpose(c.ctx, root));
    TS_EXPECT_COMPUTE_OK(c, out);
    expect_nmse(oracle_sum_rows(transpose(R)), c.read(out), t);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// SOFT_MAX: a Float x mask {none, f32, f16}; -inf entries, a fully -inf row (-> zeros), mask with more rows than a and
// broadcast over dims 2 (mask ne2 = 1) and 3 (mask ne3 = a ne3).
enum class MaskKind { kNone, kF32, kF16 };
using SoftMaxParam = std::tuple<Type, MaskKind>;
class OpRefSoftMax : public testing::TestWithParam<SoftMaxParam> {};

// softmax(a * scale + mask) per row; row i1 of a uses row i1 of the mask; dims 2, 3 of the mask broadcast.
HT oracle_soft_max(const HT& A, const HT* M, double scale) {
  HT ref(A.ne);
  const Shape& ne = A.ne;
  for (int64_t i3 = 0; i3 < ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
        std::vector<double> z(static_cast<size_t>(ne[0]));
        double m = -INFINITY;
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) {
          double v = A.at(i0, i1, i2, i3) * scale;
          if (M != nullptr) v += M->at(i0, i1, i2 % M->ne[2], i3 % M->ne[3]);
          z[static_cast<size_t>(i0)] = v;
          m = std::max(m, v);
        }
        if (m == -INFINITY) continue;  // all -inf: zeros
        double sum = 0;
        for (double& v : z) sum += (v = std::exp(v - m));
        for (int64_t i0 = 0; i0 < ne[0]; ++i0) ref.at(i0, i1, i2, i3) = z[static_cast<size_t>(i0)] / sum;
      }
  return ref;
}

TEST_P(OpRefSoftMax, MaskScaleInfRows) {
  const auto [t, mk] = GetParam();
  const float kScale = 0.8f;
  const float ninf = -std::numeric_limits<float>::infinity();
  for (const Shape& ne : {Shape{1, 3, 1, 1}, Shape{7, 4, 2, 1}, Shape{33, 5, 2, 3}, Shape{96, 3, 1, 2}}) {
    SCOPED_TRACE(shape_str(ne));
    OpCase c;
    const int64_t dead_row = 1 % ne[1];
    // Input values; without a mask the dead row is -inf in a itself.
    std::vector<float> av = c.rand_floats(numel(ne), -3.0f, 3.0f);
    if (mk == MaskKind::kNone) {
      for (int64_t r = 0; r < numel(ne) / ne[0]; ++r)
        if (r % ne[1] == dead_row)
          for (int64_t i = 0; i < ne[0]; ++i) av[static_cast<size_t>(r * ne[0] + i)] = ninf;
    }
    HT A, M;
    Tensor* a = c.input(t, ne, av, &A);
    Tensor* mask = nullptr;
    if (mk != MaskKind::kNone) {
      const Shape mne{ne[0], ne[1] + 2, 1, ne[3]};
      std::vector<float> mv = c.rand_floats(numel(mne), -2.0f, 2.0f);
      for_each_index(mne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const size_t k = static_cast<size_t>(((i3 * mne[2] + i2) * mne[1] + i1) * mne[0] + i0);
        if (i1 == dead_row || (i0 + i1) % 5 == 4) mv[k] = ninf;
      });
      mask = c.input(mk == MaskKind::kF32 ? Type::kF32 : Type::kF16, mne, mv, &M);
    }
    Tensor* out = soft_max(c.ctx, a, mask, kScale);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, t);
    const HT got = c.read(out);
    expect_nmse(oracle_soft_max(A, mask ? &M : nullptr, kScale), got, t);
    if (ne[1] > 1) {  // the dead row must be exactly zero
      for (int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < ne[2]; ++i2)
          for (int64_t i0 = 0; i0 < ne[0]; ++i0)
            EXPECT_EQ(got.at(i0, dead_row, i2, i3), 0.0) << "fully -inf row, i0=" << i0;
    }
  }
}

TEST_P(OpRefSoftMax, PermutedSource) {
  const auto [t, mk] = GetParam();
  OpCase c;
  HT R, M;
  Tensor* root = c.rand_input(t, {33, 3, 4, 1}, &R, -3.0f, 3.0f);  // -> a [33, 4, 3]
  Tensor* mask = mk == MaskKind::kNone
                     ? nullptr
                     : c.rand_input(mk == MaskKind::kF32 ? Type::kF32 : Type::kF16, {33, 4, 1, 1}, &M, -2.0f, 2.0f);
  Tensor* out = soft_max(c.ctx, permute(c.ctx, root, 0, 2, 1, 3), mask, 1.25f);
  TS_EXPECT_COMPUTE_OK(c, out);
  expect_nmse(oracle_soft_max(permute(R, 0, 2, 1, 3), mask ? &M : nullptr, 1.25f), c.read(out), t);
}

std::vector<SoftMaxParam> softmax_params() {
  std::vector<SoftMaxParam> p;
  for (Type t : kFloatTypes)
    for (MaskKind m : {MaskKind::kNone, MaskKind::kF32, MaskKind::kF16}) p.emplace_back(t, m);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllFloatAllMasks, OpRefSoftMax, testing::ValuesIn(softmax_params()),
                         [](const testing::TestParamInfo<SoftMaxParam>& i) {
                           const MaskKind m = std::get<1>(i.param);
                           return std::string(tname(std::get<0>(i.param))) + "_mask_" +
                                  (m == MaskKind::kNone  ? "none"
                                   : m == MaskKind::kF32 ? "f32"
                                                         : "f16");
                         });

// ---------------------------------------------------------------------------------------------------------------
// ROPE: a Float x mode {normal, neox} x freq_factors {no, yes}; n_dims == head_dim and n_dims < head_dim (odd
// head_dim, tail copied), freq_scale != 1, and a permuted source.
using RopeParam = std::tuple<Type, RopeMode, bool>;
class OpRefRope : public testing::TestWithParam<RopeParam> {};

struct RopeCfg {
  int64_t head_dim, n_head, n_tokens, ne3;
  int n_dims;
  float base, fscale;
};

// theta_i = pos * freq_scale * base^(-2i/n_dims) / ff[i]; pairs (2i, 2i+1) normal, (i, i + n_dims/2) neox.
HT oracle_rope(const HT& A, const std::vector<int32_t>& pos, const RopeCfg& cfg, RopeMode mode, const HT* FF) {
  HT ref = A;  // dims >= n_dims copied
  const int half = cfg.n_dims / 2;
  for (int64_t i3 = 0; i3 < A.ne[3]; ++i3)
    for (int64_t tok = 0; tok < A.ne[2]; ++tok)
      for (int64_t h = 0; h < A.ne[1]; ++h)
        for (int i = 0; i < half; ++i) {
          double theta = pos[static_cast<size_t>(tok)] * static_cast<double>(cfg.fscale) *
                         std::pow(static_cast<double>(cfg.base), -2.0 * i / cfg.n_dims);
          if (FF != nullptr) theta /= FF->v[static_cast<size_t>(i)];
          const int64_t j0 = mode == RopeMode::kNormal ? 2 * i : i;
          const int64_t j1 = mode == RopeMode::kNormal ? 2 * i + 1 : i + half;
          const double x0 = A.at(j0, h, tok, i3), x1 = A.at(j1, h, tok, i3);
          ref.at(j0, h, tok, i3) = x0 * std::cos(theta) - x1 * std::sin(theta);
          ref.at(j1, h, tok, i3) = x0 * std::sin(theta) + x1 * std::cos(theta);
        }
  return ref;
}

TEST_P(OpRefRope, ModesAndFreqFactors) {
  const auto [t, mode, with_ff] = GetParam();
  for (const RopeCfg cfg : {RopeCfg{16, 3, 5, 1, 16, 10000.0f, 1.0f}, RopeCfg{13, 2, 7, 2, 10, 500.0f, 0.5f},
                            RopeCfg{64, 4, 3, 1, 32, 1e6f, 0.25f}, RopeCfg{2, 1, 1, 1, 2, 10000.0f, 1.0f}}) {
    for (const bool permuted : {false, true}) {
      SCOPED_TRACE("head_dim=" + std::to_string(cfg.head_dim) + " n_dims=" + std::to_string(cfg.n_dims) +
                   (permuted ? " permuted source" : ""));
      OpCase c;
      HT A, FF;
      Tensor* a;
      if (permuted) {  // a = permute of [head_dim, n_tokens, n_head, ne3]
        HT R;
        Tensor* root = c.rand_input(t, {cfg.head_dim, cfg.n_tokens, cfg.n_head, cfg.ne3}, &R);
        a = permute(c.ctx, root, 0, 2, 1, 3);
        A = permute(R, 0, 2, 1, 3);
      } else {
        a = c.rand_input(t, {cfg.head_dim, cfg.n_head, cfg.n_tokens, cfg.ne3}, &A);
      }
      std::vector<int32_t> pos(static_cast<size_t>(cfg.n_tokens));
      for (int32_t& p : pos) p = c.rand_int(0, 200);
      Tensor* tpos = c.ids_input({cfg.n_tokens, 1, 1, 1}, pos);
      Tensor* ff = with_ff ? c.rand_input(Type::kF32, {cfg.n_dims / 2, 1, 1, 1}, &FF, 1.0f, 4.0f) : nullptr;
      Tensor* out = rope(c.ctx, a, tpos, cfg.n_dims, mode, cfg.base, cfg.fscale, ff);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, t);
      expect_nmse(oracle_rope(A, pos, cfg, mode, with_ff ? &FF : nullptr), c.read(out), t);
    }
  }
}

std::vector<RopeParam> rope_params() {
  std::vector<RopeParam> p;
  for (Type t : kFloatTypes)
    for (RopeMode m : {RopeMode::kNormal, RopeMode::kNeox})
      for (bool ff : {false, true}) p.emplace_back(t, m, ff);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllFloatBothModes, OpRefRope, testing::ValuesIn(rope_params()),
                         [](const testing::TestParamInfo<RopeParam>& i) {
                           return std::string(tname(std::get<0>(i.param))) +
                                  (std::get<1>(i.param) == RopeMode::kNormal ? "_normal" : "_neox") +
                                  (std::get<2>(i.param) ? "_ff" : "_noff");
                         });

}  // namespace
}  // namespace tessera::optest
