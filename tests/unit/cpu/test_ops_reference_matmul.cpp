// Op correctness against the float64 oracle: MUL_MAT (a in every Weight type), MUL_MAT_ID (every Weight type, B1 == 1
// and B1 == n_used), FLASH_ATTN_EXT (k x v in every pair of Weight types, GQA, masks f32/f16, sinks).
#include "unit/cpu/op_oracle.h"

namespace tessera::optest {
namespace {

class OpRefWeight : public testing::TestWithParam<Type> {};
INSTANTIATE_TEST_SUITE_P(WeightTypes, OpRefWeight, testing::ValuesIn(kWeightTypes),
                         [](const testing::TestParamInfo<Type>& i) { return std::string(tname(i.param)); });

// r[m, n, i2, i3] = sum_k a[k, m, i2 / (B2/A2), i3 / (B3/A3)] * b[k, n, i2, i3]
HT oracle_mul_mat(const HT& A, const HT& B) {
  const int64_t K = A.ne[0], M = A.ne[1], N = B.ne[1], B2 = B.ne[2], B3 = B.ne[3];
  const int64_t r2 = B2 / A.ne[2], r3 = B3 / A.ne[3];
  HT r({M, N, B2, B3});
  for (int64_t i3 = 0; i3 < B3; ++i3)
    for (int64_t i2 = 0; i2 < B2; ++i2)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t m = 0; m < M; ++m) {
          double s = 0;
          for (int64_t k = 0; k < K; ++k) s += A.at(k, m, i2 / r2, i3 / r3) * B.at(k, n, i2, i3);
          r.at(m, n, i2, i3) = s;
        }
  return r;
}

TEST_P(OpRefWeight, MulMatBatchBroadcast) {
  const Type ta = GetParam();
  struct Cfg {
    int64_t K, M, N, A2, A3, B2, B3;
  };
  std::vector<Cfg> cfgs = {
      {64, 7, 5, 2, 1, 6, 2}, {96, 1, 1, 1, 1, 1, 1}, {32, 33, 3, 3, 2, 3, 2}, {64, 4, 9, 1, 1, 4, 1}};
  if (!is_quant(ta)) cfgs.push_back({33, 3, 2, 1, 1, 1, 1}), cfgs.push_back({1, 5, 7, 2, 1, 2, 3});
  for (const Cfg& g : cfgs) {
    SCOPED_TRACE("K=" + std::to_string(g.K) + " M=" + std::to_string(g.M) + " N=" + std::to_string(g.N) +
                 " A2=" + std::to_string(g.A2) + " A3=" + std::to_string(g.A3) + " B2=" + std::to_string(g.B2) +
                 " B3=" + std::to_string(g.B3));
    OpCase c;
    HT A, B;
    Tensor* a = c.rand_input(ta, {g.K, g.M, g.A2, g.A3}, &A);
    Tensor* b = c.rand_input(Type::kF32, {g.K, g.N, g.B2, g.B3}, &B);
    Tensor* out = mul_mat(c.ctx, a, b);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, Type::kF32);
    expect_nmse(oracle_mul_mat(A, B), c.read(out), Type::kF32);
  }
}

// Non-contiguous operands: a a permuted view (rows strided, allowed for quantized types: axis0 stays 0), b a
// transposed view (nb0 != 4), and b a permuted view.
TEST_P(OpRefWeight, MulMatNonContiguous) {
  const Type ta = GetParam();
  const int64_t K = 64, M = 5, N = 3, B2 = 4;
  {
    SCOPED_TRACE("a permuted, b transposed");
    OpCase c;
    HT Ar, Br;
    Tensor* aroot = c.rand_input(ta, {K, 2, M, 1}, &Ar);          // -> a [K, M, 2]
    Tensor* broot = c.rand_input(Type::kF32, {N, K, 2, 1}, &Br);  // -> b [K, N, 2]
    Tensor* out = mul_mat(c.ctx, permute(c.ctx, aroot, 0, 2, 1, 3), transpose(c.ctx, broot));
    TS_EXPECT_COMPUTE_OK(c, out);
    expect_nmse(oracle_mul_mat(permute(Ar, 0, 2, 1, 3), transpose(Br)), c.read(out), Type::kF32);
  }
  {
    SCOPED_TRACE("b permuted (batch), a contiguous");
    OpCase c;
    HT A, Br;
    Tensor* a = c.rand_input(ta, {K, M, 2, 1}, &A);
    Tensor* broot = c.rand_input(Type::kF32, {K, B2, N, 1}, &Br);  // -> b [K, N, B2]
    Tensor* out = mul_mat(c.ctx, a, permute(c.ctx, broot, 0, 2, 1, 3));
    TS_EXPECT_COMPUTE_OK(c, out);
    expect_nmse(oracle_mul_mat(A, permute(Br, 0, 2, 1, 3)), c.read(out), Type::kF32);
  }
}

// ---- MUL_MAT_ID ----
using MmidParam = std::tuple<Type, bool>;  // as type, B1 == 1 (else B1 == n_used)
class OpRefMulMatId : public testing::TestWithParam<MmidParam> {};

TEST_P(OpRefMulMatId, Experts) {
  const auto [ta, b1_one] = GetParam();
  struct Cfg {
    int64_t K, M, n_expert, n_used, n_tokens;
    bool permuted_b = false;
  };
  for (const Cfg g : {Cfg{64, 9, 4, 2, 5}, Cfg{32, 3, 8, 3, 1}, Cfg{96, 17, 3, 3, 4}, Cfg{64, 6, 5, 2, 3, true}}) {
    SCOPED_TRACE("K=" + std::to_string(g.K) + " M=" + std::to_string(g.M) + " n_expert=" + std::to_string(g.n_expert) +
                 " n_used=" + std::to_string(g.n_used) + " n_tokens=" + std::to_string(g.n_tokens) +
                 (g.permuted_b ? " permuted b" : ""));
    OpCase c;
    const int64_t B1 = b1_one ? 1 : g.n_used;
    HT AS, B;
    Tensor* as = c.rand_input(ta, {g.K, g.M, g.n_expert, 1}, &AS);
    Tensor* b;
    if (g.permuted_b) {
      HT R;
      b = permute(c.ctx, c.rand_input(Type::kF32, {g.K, g.n_tokens, B1, 1}, &R), 0, 2, 1, 3);
      B = permute(R, 0, 2, 1, 3);
    } else {
      b = c.rand_input(Type::kF32, {g.K, B1, g.n_tokens, 1}, &B);
    }
    // Distinct experts per token, random order.
    std::vector<int32_t> ids;
    for (int64_t t = 0; t < g.n_tokens; ++t) {
      std::vector<int32_t> e(static_cast<size_t>(g.n_expert));
      std::iota(e.begin(), e.end(), 0);
      std::shuffle(e.begin(), e.end(), c.rng);
      ids.insert(ids.end(), e.begin(), e.begin() + g.n_used);
    }
    Tensor* tids = c.ids_input({g.n_used, g.n_tokens, 1, 1}, ids);
    Tensor* out = mul_mat_id(c.ctx, as, b, tids);
    TS_EXPECT_COMPUTE_OK(c, out);
    EXPECT_EQ(out->type, Type::kF32);
    HT ref({g.M, g.n_used, g.n_tokens, 1});
    for (int64_t t = 0; t < g.n_tokens; ++t)
      for (int64_t e = 0; e < g.n_used; ++e) {
        const int32_t x = ids[static_cast<size_t>(t * g.n_used + e)];
        for (int64_t m = 0; m < g.M; ++m) {
          double s = 0;
          for (int64_t k = 0; k < g.K; ++k) s += AS.at(k, m, x) * B.at(k, e % B1, t);
          ref.at(m, e, t) = s;
        }
      }
    expect_nmse(ref, c.read(out), Type::kF32);
  }
}

std::vector<MmidParam> mmid_params() {
  std::vector<MmidParam> p;
  for (Type t : kWeightTypes)
    for (bool one : {true, false}) p.emplace_back(t, one);
  return p;
}
INSTANTIATE_TEST_SUITE_P(WeightTypesBothB1, OpRefMulMatId, testing::ValuesIn(mmid_params()),
                         [](const testing::TestParamInfo<MmidParam>& i) {
                           return std::string(tname(std::get<0>(i.param))) +
                                  (std::get<1>(i.param) ? "_b1_one" : "_b1_n_used");
                         });

// ---- FLASH_ATTN_EXT ----
using FaParam = std::tuple<Type, Type>;  // k type, v type
class OpRefFlashAttn : public testing::TestWithParam<FaParam> {};

enum class FaMask { kNone, kF32, kF16 };

// r[:, h, i, b] = sum_j softmax_j(scale q_i . k_j + mask[j, i]) v_j, kv head h / (H / H_kv); a sink joins the
// denominator as exp(sink[h] - m) with m the maximum over scores and sink; all -inf (no sink) gives zeros.
HT oracle_flash_attn(const HT& Q, const HT& K, const HT& V, const HT* M, const HT* S, double scale) {
  const int64_t D = Q.ne[0], n_q = Q.ne[1], H = Q.ne[2], B = Q.ne[3];
  const int64_t n_kv = K.ne[1], H_kv = K.ne[2], Dv = V.ne[0];
  HT ref({Dv, H, n_q, B});
  const int64_t gqa = H / H_kv;
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < H; ++h)
      for (int64_t i = 0; i < n_q; ++i) {
        const int64_t hk = h / gqa;
        std::vector<double> s(static_cast<size_t>(n_kv));
        double m = S != nullptr ? S->v[static_cast<size_t>(h)] : -INFINITY;
        for (int64_t j = 0; j < n_kv; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < D; ++d) dot += Q.at(d, i, h, b) * K.at(d, j, hk, b);
          double sc = scale * dot;
          if (M != nullptr) sc += M->at(j, i);
          s[static_cast<size_t>(j)] = sc;
          m = std::max(m, sc);
        }
        if (m == -INFINITY) continue;
        double den = S != nullptr ? std::exp(S->v[static_cast<size_t>(h)] - m) : 0.0;
        for (double& x : s) den += (x = std::exp(x - m));
        for (int64_t d = 0; d < Dv; ++d) {
          double acc = 0;
          for (int64_t j = 0; j < n_kv; ++j) acc += s[static_cast<size_t>(j)] * V.at(d, j, hk, b);
          ref.at(d, h, i, b) = acc / den;
        }
      }
  return ref;
}

TEST_P(OpRefFlashAttn, GqaMaskSinks) {
  const auto [tk, tv] = GetParam();
  struct Variant {
    FaMask mask;
    bool sinks;
    bool views;  // q a permuted view, k and v views into a longer cache
    const char* name;
  };
  const Variant variants[] = {{FaMask::kNone, false, false, "plain"},
                              {FaMask::kF32, false, false, "mask f32"},
                              {FaMask::kF16, false, false, "mask f16"},
                              {FaMask::kNone, true, false, "sinks"},
                              {FaMask::kF16, true, false, "mask f16 + sinks"},
                              {FaMask::kF32, true, false, "mask f32 + sinks"},
                              {FaMask::kF16, true, true, "views + mask f16 + sinks"}};
  struct Dims {
    int64_t D, Dv, n_q, n_kv, H, H_kv, B;
  };
  const float ninf = -std::numeric_limits<float>::infinity();
  for (const Dims dm : {Dims{64, 32, 5, 37, 4, 2, 2}, Dims{32, 64, 1, 7, 2, 2, 1}, Dims{64, 64, 3, 1, 4, 1, 1}}) {
    for (const Variant& var : variants) {
      SCOPED_TRACE(std::string(var.name) + " D=" + std::to_string(dm.D) + " Dv=" + std::to_string(dm.Dv) +
                   " n_q=" + std::to_string(dm.n_q) + " n_kv=" + std::to_string(dm.n_kv) +
                   " H=" + std::to_string(dm.H) + " H_kv=" + std::to_string(dm.H_kv) + " B=" + std::to_string(dm.B));
      OpCase c;
      HT Q, K, V, M, S;
      Tensor *q, *k, *v;
      if (var.views) {
        const int64_t cache = dm.n_kv + 5, skip = 2;  // k, v = rows [skip, skip + n_kv) of a longer cache
        HT QR, KC, VC;
        q = permute(c.ctx, c.rand_input(Type::kF32, {dm.D, dm.H, dm.n_q, dm.B}, &QR), 0, 2, 1, 3);
        Q = permute(QR, 0, 2, 1, 3);
        Tensor* kc = c.rand_input(tk, {dm.D, cache, dm.H_kv, dm.B}, &KC);
        Tensor* vc = c.rand_input(tv, {dm.Dv, cache, dm.H_kv, dm.B}, &VC);
        k = view_4d(c.ctx, kc, dm.D, dm.n_kv, dm.H_kv, dm.B, kc->nb[1], kc->nb[2], kc->nb[3], skip * kc->nb[1]);
        v = view_4d(c.ctx, vc, dm.Dv, dm.n_kv, dm.H_kv, dm.B, vc->nb[1], vc->nb[2], vc->nb[3], skip * vc->nb[1]);
        K = strided(KC, {dm.D, dm.n_kv, dm.H_kv, dm.B}, {1, dm.D, dm.D * cache, dm.D * cache * dm.H_kv}, skip * dm.D);
        V = strided(VC, {dm.Dv, dm.n_kv, dm.H_kv, dm.B}, {1, dm.Dv, dm.Dv * cache, dm.Dv * cache * dm.H_kv},
                    skip * dm.Dv);
      } else {
        q = c.rand_input(Type::kF32, {dm.D, dm.n_q, dm.H, dm.B}, &Q);
        k = c.rand_input(tk, {dm.D, dm.n_kv, dm.H_kv, dm.B}, &K);
        v = c.rand_input(tv, {dm.Dv, dm.n_kv, dm.H_kv, dm.B}, &V);
      }
      Tensor* mask = nullptr;
      const int64_t dead_q = dm.n_q > 1 ? 1 : -1;  // a query row whose scores are all -inf
      if (var.mask != FaMask::kNone) {
        const Shape mne{dm.n_kv, dm.n_q + 3, 1, 1};  // more rows than queries
        std::vector<float> mv = c.rand_floats(numel(mne), -1.0f, 1.0f);
        for (int64_t i = 0; i < mne[1]; ++i)
          for (int64_t j = 0; j < mne[0]; ++j)
            if (i == dead_q || (j > i + dm.n_kv / 2 && j != 0)) mv[static_cast<size_t>(i * mne[0] + j)] = ninf;
        mask = c.input(var.mask == FaMask::kF32 ? Type::kF32 : Type::kF16, mne, mv, &M);
      }
      Tensor* sinks = var.sinks ? c.rand_input(Type::kF32, {dm.H, 1, 1, 1}, &S, -2.0f, 2.0f) : nullptr;
      const float scale = 1.0f / std::sqrt(static_cast<float>(dm.D));
      Tensor* out = flash_attn_ext(c.ctx, q, k, v, mask, scale, sinks);
      TS_EXPECT_COMPUTE_OK(c, out);
      EXPECT_EQ(out->type, Type::kF32);
      const HT got = c.read(out);
      expect_nmse(oracle_flash_attn(Q, K, V, mask ? &M : nullptr, sinks ? &S : nullptr, scale), got, Type::kF32);
      if (mask != nullptr && dead_q >= 0) {
        for (int64_t b = 0; b < dm.B; ++b)
          for (int64_t h = 0; h < dm.H; ++h)
            for (int64_t d = 0; d < dm.Dv; ++d) EXPECT_EQ(got.at(d, h, dead_q, b), 0.0) << "all -inf query row";
      }
    }
  }
}

std::vector<FaParam> fa_params() {
  std::vector<FaParam> p;
  for (Type tk : kWeightTypes)
    for (Type tv : kWeightTypes) p.emplace_back(tk, tv);
  return p;
}
INSTANTIATE_TEST_SUITE_P(AllKvWeightPairs, OpRefFlashAttn, testing::ValuesIn(fa_params()),
                         [](const testing::TestParamInfo<FaParam>& i) {
                           return std::string("k_") + tname(std::get<0>(i.param)) + "_v_" + tname(std::get<1>(i.param));
                         });

}  // namespace
}  // namespace tessera::optest
