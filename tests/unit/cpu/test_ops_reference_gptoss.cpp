// The ops gpt-oss needs (issue 30), against float64 oracles written here: GLU SWIGLU_OAI, SOFT_MAX with attention
// sinks, ADD_ID; FLASH_ATTN_EXT with sinks equal to the SOFT_MAX-with-sinks attention it fuses; the building
// functions' argument checks for all three.
#include "unit/cpu/op_oracle.h"

namespace tessera::optest {
namespace {

const float kNegInf = -std::numeric_limits<float>::infinity();

// Every test runs on the reference kernels (i = 0) and on the best optimised level of this CPU (i = 1; a node the
// optimised kernels do not take runs on the reference kernels there too).

// ---- SWIGLU_OAI ----

// x = min(g, limit), y = clamp(l, -limit, limit), x * sigmoid(alpha x) * (y + 1).
double swiglu_oai_ref(double g, double l, double alpha, double limit) {
  const double x = g < limit ? g : limit;
  const double y = l < -limit ? -limit : l > limit ? limit : l;
  return x / (1.0 + std::exp(-alpha * x)) * (y + 1.0);
}

class OpRefSwigluOai : public testing::TestWithParam<Type> {};

TEST_P(OpRefSwigluOai, BothFormsSwappedAndBeyondTheLimit) {
  const Type t = GetParam();
  struct P {
    float alpha, limit;
  };
  // gpt-oss's own (1.702, 7); a zero limit (the gate is then <= 0 and the linear part 0); alpha 0 (sigmoid 1/2).
  for (const P prm : {P{1.702f, 7.0f}, P{1.702f, 0.0f}, P{0.0f, 3.0f}, P{-0.5f, 2.5f}}) {
    for (int form = 0; form < 6; ++form) {  // % 3: single, single swapped, two inputs; / 3: kernels
      SCOPED_TRACE("alpha " + std::to_string(prm.alpha) + " limit " + std::to_string(prm.limit) + " form " +
                   std::to_string(form));
      OpCase c;
      c.kernels = kernel_set(form / 3);
      HT A, B;
      // Inputs reach twice the limit on both sides (and beyond 7 for limit 0): the clamps are exercised.
      const float r = std::max(2.0f * prm.limit, 4.0f);
      const int f = form % 3;
      const Shape ne = f == 2 ? Shape{37, 3, 2, 1} : Shape{74, 3, 2, 1};
      Tensor* a = c.rand_input(t, ne, &A, -r, r);
      Tensor* b = f == 2 ? c.rand_input(t, ne, &B, -r, r) : nullptr;
      Tensor* out = swiglu_oai(c.ctx, a, b, prm.alpha, prm.limit, f == 1);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, t);
      const int64_t n = out->ne[0];
      HT ref(shape_of(out));
      for_each_index(ref.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t i3) {
        const double g = f == 2 ? A.at(i0, i1, i2, i3) : A.at(f == 1 ? i0 + n : i0, i1, i2, i3);
        const double l = f == 2 ? B.at(i0, i1, i2, i3) : A.at(f == 1 ? i0 : i0 + n, i1, i2, i3);
        ref.at(i0, i1, i2, i3) = swiglu_oai_ref(g, l, prm.alpha, prm.limit);
      });
      expect_nmse(ref, c.read(out), t);
    }
  }
}

TEST(OpRefSwigluOaiExact, KnownValues) {
  // Hand-computed points: the gate clamped from above only, the linear part on both sides.
  for (int ks = 0; ks < 2; ++ks) {
    OpCase c;
    c.kernels = kernel_set(ks);
    const std::vector<float> g = {10.0f, -10.0f, 0.0f, 2.0f}, l = {10.0f, -10.0f, 5.0f, -1.0f};
    Tensor* a = c.input(Type::kF32, {4, 1, 1, 1}, g);
    Tensor* b = c.input(Type::kF32, {4, 1, 1, 1}, l);
    Tensor* out = swiglu_oai(c.ctx, a, b, 1.0f, 7.0f);
    TS_EXPECT_COMPUTE_OK(c, out);
    const HT got = c.read(out);
    const double sig7 = 1.0 / (1.0 + std::exp(-7.0)), sigm10 = 1.0 / (1.0 + std::exp(10.0));
    const double want[4] = {7.0 * sig7 * 8.0, -10.0 * sigm10 * -6.0, 0.0, 2.0 / (1.0 + std::exp(-2.0)) * 0.0};
    for (int i = 0; i < 4; ++i) EXPECT_NEAR(got.v[static_cast<size_t>(i)], want[i], 1e-5 * (1.0 + std::fabs(want[i])));
  }
}

INSTANTIATE_TEST_SUITE_P(AllFloat, OpRefSwigluOai, testing::ValuesIn(kFloatTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

// ---- SOFT_MAX with sinks ----

// v = a * scale + mask[i0, i1] (mask broadcast over dims 2, 3); m = max(v, sink[i2]);
// exp(v - m) / (exp(sink - m) + sum exp(v - m)); every v -inf: zeros.
HT oracle_soft_max_sinks(const HT& A, const HT* M, const HT& S, double scale) {
  HT ref(A.ne);
  const int64_t n = A.ne[0];
  for (int64_t i3 = 0; i3 < A.ne[3]; ++i3)
    for (int64_t i2 = 0; i2 < A.ne[2]; ++i2)
      for (int64_t i1 = 0; i1 < A.ne[1]; ++i1) {
        std::vector<double> v(static_cast<size_t>(n));
        double m = -INFINITY;
        for (int64_t i = 0; i < n; ++i) {
          v[static_cast<size_t>(i)] = A.at(i, i1, i2, i3) * scale + (M != nullptr ? M->at(i, i1) : 0.0);
          m = std::max(m, v[static_cast<size_t>(i)]);
        }
        if (m == -INFINITY) continue;  // zeros
        const double sink = S.v[static_cast<size_t>(i2)];
        m = std::max(m, sink);
        double den = std::exp(sink - m);
        for (double& x : v) den += (x = std::exp(x - m));
        for (int64_t i = 0; i < n; ++i) ref.at(i, i1, i2, i3) = v[static_cast<size_t>(i)] / den;
      }
  return ref;
}

class OpRefSoftMaxSinks : public testing::TestWithParam<Type> {};

TEST_P(OpRefSoftMaxSinks, RandomAndExtremeSinks) {
  const Type t = GetParam();
  enum SinkKind { kRandom, kHuge, kVeryNegative, kMinusInf, kMixed };
  for (SinkKind kind : {kRandom, kHuge, kVeryNegative, kMinusInf, kMixed}) {
    for (int variant = 0; variant < 4; ++variant) {
      const bool masked = variant % 2 == 1;
      SCOPED_TRACE("sink kind " + std::to_string(kind) + (masked ? " masked" : "") + " kernels " +
                   std::to_string(variant / 2));
      OpCase c;
      c.kernels = kernel_set(variant / 2);
      const Shape ne{37, 5, 4, 2};  // [n_kv, n_q, heads, batch]
      HT A, M, S;
      Tensor* a = c.rand_input(t, ne, &A, -3.0f, 3.0f);
      std::vector<float> sv = c.rand_floats(ne[2], -2.0f, 2.0f);
      for (size_t h = 0; h < sv.size(); ++h) {
        const SinkKind k = kind == kMixed ? static_cast<SinkKind>(h % 4) : kind;
        if (k == kHuge) sv[h] = 1e4f;
        if (k == kVeryNegative) sv[h] = -1e30f;
        if (k == kMinusInf) sv[h] = kNegInf;
      }
      Tensor* sinks = c.input(Type::kF32, {ne[2], 1, 1, 1}, sv, &S);
      Tensor* mask = nullptr;
      if (masked) {  // a causal-like mask with one fully masked row (row 2)
        std::vector<float> mv = c.rand_floats(ne[0] * (ne[1] + 2), -1.0f, 1.0f);
        for (int64_t i = 0; i < ne[1] + 2; ++i)
          for (int64_t j = 0; j < ne[0]; ++j)
            if (i == 2 || j > i + 30) mv[static_cast<size_t>(i * ne[0] + j)] = kNegInf;
        mask = c.input(Type::kF16, {ne[0], ne[1] + 2, 1, 1}, mv, &M);
      }
      const float scale = 0.7f;
      Tensor* out = soft_max(c.ctx, a, mask, scale, sinks);
      ASSERT_NE(out, nullptr) << c.ctx.status().to_string();
      EXPECT_EQ(out->src[2], sinks);
      TS_EXPECT_COMPUTE_OK(c, out);
      const HT got = c.read(out);
      const HT ref = oracle_soft_max_sinks(A, mask ? &M : nullptr, S, scale);
      expect_nmse(ref, got, t);
      // Absolute checks nmse cannot see: a huge sink takes all the mass (rows ~0), a sink of -inf none (rows sum
      // to 1), and a fully masked row is zeros.
      for (int64_t i3 = 0; i3 < ne[3]; ++i3)
        for (int64_t i2 = 0; i2 < ne[2]; ++i2)
          for (int64_t i1 = 0; i1 < ne[1]; ++i1) {
            double sum = 0.0, want = 0.0;
            for (int64_t i = 0; i < ne[0]; ++i) {
              sum += got.at(i, i1, i2, i3);
              want += ref.at(i, i1, i2, i3);
            }
            EXPECT_NEAR(sum, want, 1e-2) << "row sum, row " << i1 << " head " << i2;
            if (sv[static_cast<size_t>(i2)] == kNegInf && !(masked && i1 == 2)) {
              EXPECT_NEAR(sum, 1.0, 1e-2);
            }
            if (sv[static_cast<size_t>(i2)] == 1e4f || (masked && i1 == 2)) {
              EXPECT_EQ(sum, 0.0);
            }
          }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllFloat, OpRefSoftMaxSinks, testing::ValuesIn(kFloatTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

// ---- FLASH_ATTN_EXT with sinks = the unfused attention with SOFT_MAX sinks ----

TEST(OpRefAttentionSinks, FlashAttnEqualsSoftMaxAttention) {
  for (int variant = 0; variant < 4; ++variant) {
    const bool masked = variant % 2 == 1;
    SCOPED_TRACE(std::string(masked ? "masked" : "no mask") + " kernels " + std::to_string(variant / 2));
    OpCase c;
    c.kernels = kernel_set(variant / 2);
    const int64_t D = 32, Dv = 16, n_q = 6, n_kv = 23, H = 4;
    Tensor* q = c.rand_input(Type::kF32, {D, n_q, H, 1});
    Tensor* k = c.rand_input(Type::kF32, {D, n_kv, H, 1});
    Tensor* v = c.rand_input(Type::kF32, {Dv, n_kv, H, 1});
    std::vector<float> sv = c.rand_floats(H, -3.0f, 3.0f);
    sv[1] = 40.0f;  // one head whose sink dominates
    Tensor* sinks = c.input(Type::kF32, {H, 1, 1, 1}, sv);
    Tensor* mask = nullptr;
    if (masked) {
      std::vector<float> mv(static_cast<size_t>(n_kv * n_q), 0.0f);
      for (int64_t i = 0; i < n_q; ++i)
        for (int64_t j = 0; j < n_kv; ++j)
          if (j > i + n_kv - n_q) mv[static_cast<size_t>(i * n_kv + j)] = kNegInf;  // causal
      mask = c.input(Type::kF32, {n_kv, n_q, 1, 1}, mv);
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(D));
    Tensor* fa = flash_attn_ext(c.ctx, q, k, v, mask, scale, sinks);         // [Dv, H, n_q, 1]
    Tensor* kq = soft_max(c.ctx, mul_mat(c.ctx, k, q), mask, scale, sinks);  // [n_kv, n_q, H]
    Tensor* kqv = mul_mat(c.ctx, cont(c.ctx, transpose(c.ctx, v)), kq);      // [Dv, n_q, H]
    Tensor* unfused = cont(c.ctx, permute(c.ctx, kqv, 0, 2, 1, 3));          // [Dv, H, n_q]
    TS_EXPECT_COMPUTE_OK(c, fa, unfused);
    const HT want = c.read(unfused), got = c.read(fa);
    expect_nmse(want, got, Type::kF32);
    double max_diff = 0.0;
    for (size_t i = 0; i < want.v.size(); ++i) max_diff = std::max(max_diff, std::fabs(want.v[i] - got.v[i]));
    EXPECT_LT(max_diff, 1e-5);
  }
}

// ---- ADD_ID ----

TEST(OpRefAddId, PerExpertRowsIdsAtTheEnds) {
  for (bool permuted : {false, true}) {
    SCOPED_TRACE(permuted ? "a a permuted view" : "contiguous a");
    OpCase c;
    const int64_t ne0 = 45, n_used = 3, n_tok = 5, n_exp = 7;
    HT A, B;
    Tensor* a;
    if (permuted) {
      HT R;
      a = permute(c.ctx, c.rand_input(Type::kF32, {ne0, n_tok, n_used, 1}, &R), 0, 2, 1, 3);
      A = permute(R, 0, 2, 1, 3);
    } else {
      a = c.rand_input(Type::kF32, {ne0, n_used, n_tok, 1}, &A);
    }
    Tensor* b = c.rand_input(Type::kF32, {ne0, n_exp, 1, 1}, &B);
    std::vector<int32_t> idv(static_cast<size_t>(n_used * n_tok));
    for (int32_t& x : idv) x = c.rand_int(0, n_exp - 1);
    idv[0] = 0;
    idv[idv.size() - 1] = static_cast<int32_t>(n_exp - 1);
    Tensor* ids = c.ids_input({n_used, n_tok, 1, 1}, idv);
    Tensor* out = add_id(c.ctx, a, b, ids);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, Type::kF32);
    HT ref(A.ne);
    for_each_index(A.ne, [&](int64_t i0, int64_t i1, int64_t i2, int64_t) {
      ref.at(i0, i1, i2) = A.at(i0, i1, i2) + B.at(i0, idv[static_cast<size_t>(i2 * n_used + i1)]);
    });
    expect_nmse(ref, c.read(out), Type::kF32);
  }
}

TEST(OpRefAddId, IdOutOfRangeFailsNamingTheNode) {
  for (int32_t bad : {-1, 4}) {
    SCOPED_TRACE("id " + std::to_string(bad));
    OpCase c;
    Tensor* a = c.rand_input(Type::kF32, {8, 2, 3, 1});
    Tensor* b = c.rand_input(Type::kF32, {8, 4, 1, 1});
    Tensor* ids = c.ids_input({2, 3, 1, 1}, {0, 1, 2, 3, bad, 1});
    Tensor* out = add_id(c.ctx, a, b, ids);
    ASSERT_EQ(c.run({out}), ComputeStatus::kFailed);
    EXPECT_NE(c.error().find("ADD_ID"), std::string::npos) << c.error();
    EXPECT_NE(c.error().find("out of range"), std::string::npos) << c.error();
  }
}

// ---- building: clear errors ----

struct BadBuild {
  const char* name;
  std::function<Tensor*(Context&)> build;
  const char* says;  // a part of the message
};

const BadBuild kBadBuilds[] = {
    {"glu_refuses_swiglu_oai", [](Context& c) { return glu(c, shaped(c, F32, 8, 2), nullptr, GluOp::kSwigluOai); },
     "build it with swiglu_oai"},
    {"swiglu_oai_negative_limit", [](Context& c) { return swiglu_oai(c, shaped(c, F32, 8), nullptr, 1.7f, -1.0f); },
     "limit must be finite and >= 0"},
    {"swiglu_oai_nan_limit", [](Context& c) { return swiglu_oai(c, shaped(c, F32, 8), nullptr, 1.7f, NAN); },
     "limit must be finite"},
    {"swiglu_oai_inf_alpha", [](Context& c) { return swiglu_oai(c, shaped(c, F32, 8), nullptr, INFINITY, 7.0f); },
     "alpha must be finite"},
    {"swiglu_oai_odd_ne0", [](Context& c) { return swiglu_oai(c, shaped(c, F32, 7), nullptr, 1.7f, 7.0f); },
     "even ne0"},
    {"swiglu_oai_shapes_differ",
     [](Context& c) { return swiglu_oai(c, shaped(c, F32, 8), shaped(c, F32, 9), 1.7f, 7.0f); }, "shapes differ"},
    {"soft_max_sinks_wrong_count",
     [](Context& c) { return soft_max(c, shaped(c, F32, 8, 2, 4), nullptr, 1.0f, shaped(c, F32, 3)); },
     "one entry per head"},
    {"soft_max_sinks_2d",
     [](Context& c) { return soft_max(c, shaped(c, F32, 8, 2, 4), nullptr, 1.0f, shaped(c, F32, 4, 2)); },
     "one entry per head"},
    {"soft_max_sinks_f16",
     [](Context& c) { return soft_max(c, shaped(c, F32, 8, 2, 4), nullptr, 1.0f, shaped(c, F16, 4)); }, "sinks"},
    {"add_id_ids_f32",
     [](Context& c) { return add_id(c, shaped(c, F32, 8, 2, 3), shaped(c, F32, 8, 4), shaped(c, F32, 2, 3)); }, "ids"},
    {"add_id_a_f16",
     [](Context& c) { return add_id(c, shaped(c, F16, 8, 2, 3), shaped(c, F32, 8, 4), shaped(c, I32, 2, 3)); }, "src0"},
    {"add_id_b_ne0",
     [](Context& c) { return add_id(c, shaped(c, F32, 8, 2, 3), shaped(c, F32, 9, 4), shaped(c, I32, 2, 3)); },
     "must be [ne0, n_expert, 1, 1]"},
    {"add_id_b_3d",
     [](Context& c) { return add_id(c, shaped(c, F32, 8, 2, 3), shaped(c, F32, 8, 4, 2), shaped(c, I32, 2, 3)); },
     "must be [ne0, n_expert, 1, 1]"},
    {"add_id_ids_shape",
     [](Context& c) { return add_id(c, shaped(c, F32, 8, 2, 3), shaped(c, F32, 8, 4), shaped(c, I32, 3, 2)); },
     "must be [n_used, n_tokens, 1, 1]"},
    {"add_id_a_4d",
     [](Context& c) { return add_id(c, shaped(c, F32, 8, 2, 3, 2), shaped(c, F32, 8, 4), shaped(c, I32, 2, 3)); },
     "must be [ne0, n_used, n_tokens, 1]"},
};

class OpBuildGptOss : public testing::TestWithParam<BadBuild> {};

TEST_P(OpBuildGptOss, FailsWithAClearMessage) {
  const BadBuild& m = GetParam();
  Context ctx({.no_alloc = true});
  EXPECT_EQ(m.build(ctx), nullptr);
  ASSERT_FALSE(ctx.ok()) << "no error recorded";
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ctx.status().message().find(m.says), std::string::npos) << ctx.status().message();
}
INSTANTIATE_TEST_SUITE_P(Misuse, OpBuildGptOss, testing::ValuesIn(kBadBuilds),
                         [](const testing::TestParamInfo<BadBuild>& i) { return std::string(i.param.name); });

TEST(OpBuildGptOss, ValidBuildsRecordTheirParameters) {
  Context ctx({.no_alloc = true});
  Tensor* g = swiglu_oai(ctx, shaped(ctx, F32, 8, 2), nullptr, 1.702f, 7.0f, true);
  ASSERT_NE(g, nullptr) << ctx.status().to_string();
  EXPECT_EQ(g->op, Op::kGlu);
  EXPECT_EQ(g->op_params[0], static_cast<int32_t>(GluOp::kSwigluOai));
  EXPECT_EQ(g->op_params[1], 1);
  EXPECT_EQ(get_op_param<float>(*g, 2), 1.702f);
  EXPECT_EQ(get_op_param<float>(*g, 3), 7.0f);
  EXPECT_EQ(g->ne[0], 4);
  Tensor* s = shaped(ctx, F32, 4);
  Tensor* sm = soft_max(ctx, shaped(ctx, F32, 8, 2, 4), nullptr, 0.5f, s);
  ASSERT_NE(sm, nullptr);
  EXPECT_EQ(sm->src[1], nullptr);
  EXPECT_EQ(sm->src[2], s);
  Tensor* ai = add_id(ctx, shaped(ctx, F32, 8, 2, 3), shaped(ctx, F32, 8, 4), shaped(ctx, I32, 2, 3));
  ASSERT_NE(ai, nullptr) << ctx.status().to_string();
  EXPECT_EQ(ai->op, Op::kAddId);
  EXPECT_STREQ(op_name(Op::kAddId), "ADD_ID");
  EXPECT_STREQ(glu_op_name(GluOp::kSwigluOai), "SWIGLU_OAI");
}

}  // namespace
}  // namespace tessera::optest
