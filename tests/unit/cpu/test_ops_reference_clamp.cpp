// CLAMP (ggml_clamp; llama.cpp's MoE weight normalisation from build 6844): hand-computed values (infinite bounds,
// infinite and NaN inputs), seeded random inputs against a float64 oracle on contiguous and strided sources, the
// building function's checks and the reference kernels' support check. Every computation runs on the reference
// kernels and on the best optimised level of this CPU.
#include "unit/cpu/op_oracle.h"

#include "tessera/ops.h"

namespace tessera::optest {
namespace {

const float kInf = std::numeric_limits<float>::infinity();

// x < lo: lo; x > hi: hi; else x (a NaN stays NaN).
double clamp_ref(double x, double lo, double hi) { return x < lo ? lo : x > hi ? hi : x; }

// Runs clamp(x, lo, hi) on a [n, 1, 1, 1] f32 input and returns the values.
std::vector<double> clamp_values(int kernels, const std::vector<float>& x, float lo, float hi) {
  OpCase c;
  c.kernels = kernel_set(kernels);
  Tensor* a = c.input(Type::kF32, {static_cast<int64_t>(x.size()), 1, 1, 1}, x);
  Tensor* out = clamp(c.ctx, a, lo, hi);
  EXPECT_EQ(c.run({out}), ComputeStatus::kSuccess) << c.error();
  return c.read(out).v;
}

TEST(OpRefClamp, KnownValues) {
  for (int ks = 0; ks < 2; ++ks) {
    SCOPED_TRACE(ks == 0 ? "reference kernels" : "optimised kernels");
    EXPECT_EQ(clamp_values(ks, {-2.0f, 0.5f, 3.0f}, 0.0f, 1.0f), (std::vector<double>{0.0, 0.5, 1.0}));
    // an infinite max (llama.cpp's clamp of the MoE weights' sum: only the minimum acts)
    EXPECT_EQ(clamp_values(ks, {-2.0f, 0.0f, 0.5f, 3.0f, kInf}, 6.103515625e-5f, kInf),
              (std::vector<double>{6.103515625e-5, 6.103515625e-5, 0.5, 3.0, kInf}));
    // an infinite min; infinite inputs
    EXPECT_EQ(clamp_values(ks, {-kInf, -2.0f, 0.5f, 3.0f, kInf}, -kInf, 1.0f),
              (std::vector<double>{-kInf, -2.0, 0.5, 1.0, 1.0}));
    // both infinite: the identity; min == max: a constant
    EXPECT_EQ(clamp_values(ks, {-kInf, -2.0f, 0.5f, kInf}, -kInf, kInf), (std::vector<double>{-kInf, -2.0, 0.5, kInf}));
    EXPECT_EQ(clamp_values(ks, {-2.0f, 0.25f, 3.0f}, 0.25f, 0.25f), (std::vector<double>{0.25, 0.25, 0.25}));
    // a NaN stays NaN (docs/ops.md); its neighbours are clamped as usual
    const std::vector<double> n = clamp_values(ks, {-2.0f, NAN, 3.0f}, 0.0f, 1.0f);
    ASSERT_EQ(n.size(), 3u);
    EXPECT_EQ(n[0], 0.0);
    EXPECT_TRUE(std::isnan(n[1])) << n[1];
    EXPECT_EQ(n[2], 1.0);
  }
}

// Random values in [-2, 2] clamped to bounds inside that range, one-sided and two-sided, on contiguous and permuted
// (strided) sources of odd shapes, several rows per thread or fewer: exactly the oracle's values.
TEST(OpRefClamp, RandomAgainstTheOracle) {
  struct Bounds {
    float lo, hi;
  };
  const Bounds bounds[] = {{-0.5f, 0.5f}, {6.103515625e-5f, kInf}, {-kInf, -0.25f}, {1.0f, 1.0f}, {-kInf, kInf}};
  for (const Bounds& bd : bounds) {
    for (int variant = 0; variant < 4; ++variant) {  // % 2: permuted source; / 2: kernels
      const bool permuted = variant % 2 == 1;
      SCOPED_TRACE("[" + std::to_string(bd.lo) + ", " + std::to_string(bd.hi) + "]" + (permuted ? " permuted" : "") +
                   " kernels " + std::to_string(variant / 2));
      OpCase c;
      c.kernels = kernel_set(variant / 2);
      HT A;
      Tensor* a;
      if (permuted) {
        HT R;
        a = permute(c.ctx, c.rand_input(Type::kF32, {37, 5, 3, 2}, &R, -2.0f, 2.0f), 0, 2, 1, 3);  // [37, 3, 5, 2]
        A = permute(R, 0, 2, 1, 3);
      } else {
        a = c.rand_input(Type::kF32, {67, 3, 4, 1}, &A, -2.0f, 2.0f);
      }
      Tensor* out = clamp(c.ctx, a, bd.lo, bd.hi);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, Type::kF32);
      HT ref(A.ne);
      for (size_t i = 0; i < A.v.size(); ++i) ref.v[i] = clamp_ref(A.v[i], bd.lo, bd.hi);
      expect_exact(ref, c.read(out));
    }
  }
}

// ---- building ----

TEST(OpBuildClamp, RecordsOpShapeAndBounds) {
  Context ctx({.no_alloc = true});
  Tensor* a = shaped(ctx, Type::kF32, 1, 7, 3, 2);
  Tensor* r = clamp(ctx, a, 6.103515625e-5f, kInf);
  ASSERT_NE(r, nullptr) << ctx.status().to_string();
  EXPECT_EQ(r->op, Op::kClamp);
  EXPECT_EQ(r->type, Type::kF32);
  EXPECT_TRUE(same_shape(*r, *a));
  EXPECT_EQ(r->src[0], a);
  EXPECT_EQ(r->src[1], nullptr);
  EXPECT_EQ(r->view_src, nullptr);  // a tensor of its own (ggml's is a view of a), which may run in place
  EXPECT_EQ(get_op_param<float>(*r, 0), 6.103515625e-5f);
  EXPECT_EQ(get_op_param<float>(*r, 1), kInf);
  // -inf .. +inf and a point interval are valid bounds
  EXPECT_NE(clamp(ctx, a, -kInf, kInf), nullptr);
  EXPECT_NE(clamp(ctx, a, 0.5f, 0.5f), nullptr);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
}

TEST(OpBuildClamp, Metadata) {
  EXPECT_STREQ(op_name(Op::kClamp), "CLAMP");
  EXPECT_EQ(static_cast<int>(Op::kClamp), static_cast<int>(Op::kAddId) + 1);  // appended: op numbers stay stable
  EXPECT_EQ(op_traits(Op::kClamp).min_src, 1);
  EXPECT_EQ(op_traits(Op::kClamp).max_src, 1);
  EXPECT_FALSE(op_is_view(Op::kClamp));
  // not in ggml-alloc's in-place list (ggml_op_can_inplace): llama.cpp's buffers give CLAMP a block of its own
  EXPECT_FALSE(op_can_inplace(Op::kClamp));
  EXPECT_TRUE(op_can_inplace(Op::kAddId));
  Op op = Op::kNone;
  ASSERT_TRUE(op_from_name("clamp", &op));
  EXPECT_EQ(op, Op::kClamp);
}

struct BadClamp {
  const char* name;
  Type type;
  float lo, hi;
  const char* says;  // a part of the message
};

const BadClamp kBadClamps[] = {
    {"f16_source", Type::kF16, 0.0f, 1.0f, "expected f32"},
    {"bf16_source", Type::kBF16, 0.0f, 1.0f, "expected f32"},
    {"i32_source", Type::kI32, 0.0f, 1.0f, "expected f32"},
    {"min_above_max", Type::kF32, 1.0f, 0.0f, "min 1 is above max 0"},
    {"inf_min_above_max", Type::kF32, kInf, 0.0f, "is above max"},
    {"min_above_minus_inf_max", Type::kF32, 0.0f, -kInf, "is above max"},
    {"nan_min", Type::kF32, NAN, 1.0f, "must not be NaN"},
    {"nan_max", Type::kF32, 0.0f, NAN, "must not be NaN"},
};

class OpBuildClampMisuse : public testing::TestWithParam<BadClamp> {};

TEST_P(OpBuildClampMisuse, FailsWithAClearMessage) {
  const BadClamp& m = GetParam();
  Context ctx({.no_alloc = true});
  EXPECT_EQ(clamp(ctx, shaped(ctx, m.type, 8, 2), m.lo, m.hi), nullptr);
  ASSERT_FALSE(ctx.ok()) << "no error recorded";
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ctx.status().message().find("CLAMP"), std::string::npos) << ctx.status().message();
  EXPECT_NE(ctx.status().message().find(m.says), std::string::npos) << ctx.status().message();
}
INSTANTIATE_TEST_SUITE_P(Misuse, OpBuildClampMisuse, testing::ValuesIn(kBadClamps),
                         [](const testing::TestParamInfo<BadClamp>& i) { return std::string(i.param.name); });

TEST(OpBuildClamp, NullSourceIsAnEarlierFailure) {
  Context ctx({.no_alloc = true});
  EXPECT_EQ(clamp(ctx, nullptr, 0.0f, 1.0f), nullptr);
  EXPECT_TRUE(ctx.ok()) << "a null source records no new error";
}

// A node made by hand with bounds the builder refuses, or of another type, is not supported by the CPU kernels.
TEST(OpBuildClamp, KernelsRefuseWhatTheBuilderRefuses) {
  Context ctx({.no_alloc = true});
  Tensor* r = clamp(ctx, shaped(ctx, Type::kF32, 8, 2), 0.0f, 1.0f);
  ASSERT_NE(r, nullptr);
  std::unique_ptr<Backend> b = cpu::make_backend({.n_threads = 1});
  ASSERT_NE(b, nullptr);
  EXPECT_TRUE(b->supports_op(*r));
  for (float lo : {2.0f, std::numeric_limits<float>::quiet_NaN()}) {
    Tensor bad = *r;
    set_op_param<float>(bad, 0, lo);
    EXPECT_FALSE(b->supports_op(bad)) << "min " << lo;
  }
  Tensor half = *r;
  half.type = Type::kF16;
  EXPECT_FALSE(b->supports_op(half));
}

}  // namespace
}  // namespace tessera::optest
