// The Qwen variants of the decoder (models/llama.cpp with LlamaConfig's architecture switches) against an independent
// oracle: one decoder step written out here in plain loops over the same weights, cache and inputs, from the
// architectures' definitions (Hugging Face transformers' Qwen2 and Qwen3 modelling, which llama.cpp's qwen2, qwen3 and
// qwen3moe graphs reproduce):
//   - qwen2: q = Wq x + bq, k = Wk x + bk, v = Wv x + bv;
//   - qwen3: each head of q and k RMS-normalised over its head_dim values and scaled by q_norm / k_norm, before rope;
//     heads of head_dim values that need not be n_embd / n_head (wq [n_embd, head_dim * n_head]);
//   - NEOX rope ("rotate_half"): value i of a head pairs with value i + head_dim / 2, at angle
//     pos * base^(-2i / head_dim);
//   - phi3 (transformers' Phi3): one qkv_proj whose output is [q | k | v], one gate_up_proj whose output is
//     [gate | up] (silu(gate) * up), LongRoPE frequencies divided by the long or short factors, cos and sin times
//     LongRoPE's scaling factor (Phi3LongRoPEScaledRotaryEmbedding's sqrt(1 + ln(scale) / ln(original)); the config's
//     rope_yarn.attn_factor), and the usual 1 / sqrt(head_dim) on the scores;
//   - llama with heads of their own size (Mistral Nemo: head_dim 128 on 5120 / 32 heads): wq [n_embd, head_dim *
//   n_head];
//   - qwen3moe: softmax router, the top n_expert_used experts, their weights renormalised to sum 1
//     (norm_topk_prob), each a SwiGLU FFN.
// Nothing here uses Tessera's ops: the weights are read back as floats and everything else is computed in doubles.
// The llama preset runs through the same oracle (normal rope, no biases or norms), so a difference between the two
// paths is the switches'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/graph_copy.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/models/from_gguf.h"
#include "tessera/models/llama.h"
#include "tessera/planner.h"
#include "support/tensor_names.h"

using namespace tessera;
using namespace tessera::models;

using tessera::test::blk;

namespace {

using Vec = std::vector<double>;

// The model's values as floats: weights by name, each layer's K and V cache ([n_embd_kv] per slot).
struct Values {
  std::map<std::string, std::vector<float>> w;
  std::vector<std::vector<float>> k_cache, v_cache;
  const std::vector<float>& operator[](const std::string& name) const {
    static const std::vector<float> none;
    auto it = w.find(name);
    EXPECT_NE(it, w.end()) << name;
    return it == w.end() ? none : it->second;
  }
  bool has(const std::string& name) const { return w.count(name) != 0; }
};

// y = W x for a weight of GGUF shape [n_in, n_out] (row j of W is the n_in values from j * n_in), from `offset`.
Vec matvec(const std::vector<float>& w, int64_t n_in, int64_t n_out, const Vec& x, size_t offset = 0) {
  Vec y(static_cast<size_t>(n_out), 0.0);
  for (int64_t j = 0; j < n_out; ++j) {
    double s = 0;
    for (int64_t i = 0; i < n_in; ++i) s += static_cast<double>(w[offset + static_cast<size_t>(j * n_in + i)]) * x[i];
    y[static_cast<size_t>(j)] = s;
  }
  return y;
}

// RMS norm of x[from, from + n) times the weight g (n values), in place.
void rms_norm(Vec& x, size_t from, size_t n, const std::vector<float>& g, double eps) {
  double ss = 0;
  for (size_t i = 0; i < n; ++i) ss += x[from + i] * x[from + i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (size_t i = 0; i < n; ++i) x[from + i] = x[from + i] * r * g[i];
}

// Rope of one head x[from, from + hd): NEOX pairs (i, i + hd / 2), normal pairs (2i, 2i + 1).
// `scale`: linear rope scaling (positions times 1 / factor).
// `factors` (LongRoPE, hd / 2 values or none): each frequency divided by its factor.
// `mscale`: cos and sin multiplied by it (LongRoPE's attention factor; 1 for plain rope).
void rope(Vec& x, size_t from, size_t hd, int pos, double base, double scale, RopeMode mode,
          const std::vector<float>* factors = nullptr, double mscale = 1.0) {
  for (size_t i = 0; i < hd / 2; ++i) {
    double theta = pos * scale * std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
    if (factors != nullptr) theta /= (*factors)[i];
    const size_t a = mode == RopeMode::kNeox ? from + i : from + 2 * i;
    const size_t b = mode == RopeMode::kNeox ? from + i + hd / 2 : from + 2 * i + 1;
    const double x0 = x[a], x1 = x[b];
    const double c = mscale * std::cos(theta), sn = mscale * std::sin(theta);
    x[a] = x0 * c - x1 * sn;
    x[b] = x0 * sn + x1 * c;
  }
}

double silu(double g) { return g / (1.0 + std::exp(-g)); }
// The tanh approximation Gemma's gelu_pytorch_tanh is.
double gelu(double g) { return 0.5 * g * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (g + 0.044715 * g * g * g))); }

// SwiGLU FFN of one expert (or the dense FFN: offset 0); GELU-gated with gelu_gate (gemma3).
Vec swiglu(const Values& v, int il, const char* gate, const char* up, const char* down, const LlamaConfig& c,
           const Vec& x, size_t e, bool gelu_gate = false) {
  const size_t in_off = e * static_cast<size_t>(c.n_embd * c.n_ff);
  Vec g, u;
  if (c.fused_up) {  // phi3's gate_up_proj: the first n_ff outputs are the gate, the next n_ff the up projection
    const Vec gu = matvec(v[blk(il, up)], c.n_embd, 2 * c.n_ff, x);
    g.assign(gu.begin(), gu.begin() + c.n_ff);
    u.assign(gu.begin() + c.n_ff, gu.end());
  } else {
    g = matvec(v[blk(il, gate)], c.n_embd, c.n_ff, x, in_off);
    u = matvec(v[blk(il, up)], c.n_embd, c.n_ff, x, in_off);
  }
  Vec a(g.size());
  for (size_t i = 0; i < a.size(); ++i) a[i] = (gelu_gate ? gelu(g[i]) : silu(g[i])) * u[i];
  return matvec(v[blk(il, down)], c.n_ff, c.n_embd, a, in_off);
}

// The logits of one decoder step [n_vocab * n_outputs], computed from the config's definition.
std::vector<double> oracle_logits(const LlamaConfig& c, const Values& v, const LlamaInputs& in) {
  const int64_t T = c.n_tokens, E = c.n_embd, hd = c.head_dim(), nkv = c.kv_len();
  const int64_t nq = hd * c.n_head, nk = hd * c.n_head_kv;
  std::vector<Vec> x(static_cast<size_t>(T));
  for (int64_t t = 0; t < T; ++t) {
    const std::vector<float>& emb = v["token_embd.weight"];
    x[t].assign(emb.begin() + in.tokens[t] * E, emb.begin() + (in.tokens[t] + 1) * E);
    if (c.embd_scale) {  // gemma: the embeddings times sqrt(hidden_size)
      for (double& e : x[t]) e *= std::sqrt(static_cast<double>(E));
    }
  }
  std::vector<std::vector<float>> kc = v.k_cache, vc = v.v_cache;
  // No YaRN here (test_gpt_oss_oracle.cpp has it): only the attention factor, which scales cos and sin.
  EXPECT_EQ(c.rope_yarn.ext_factor, 0.0f);
  const double mscale = c.rope_yarn.attn_factor;
  for (int il = 0; il < c.n_layer; ++il) {
    // gemma3's sliding-window layers: every layer but each swa_pattern-th, with their own rope and mask.
    const bool swa = c.swa_pattern > 0 && il % c.swa_pattern != c.swa_pattern - 1;
    const double base = swa ? c.rope_base_swa : c.rope_base, rscale = swa ? c.rope_scale_swa : c.rope_scale;
    const std::vector<float>& mask = swa ? in.mask_swa : in.mask;
    // phi3's LongRoPE: the long factors for a context longer than the original one.
    const std::vector<float>* ff = nullptr;
    if (c.rope_factors_ls) ff = &v[c.n_ctx > c.n_ctx_orig ? "rope_factors_long.weight" : "rope_factors_short.weight"];
    // Q, K, V of every new token; K and V go into the cache first (the tokens attend to each other through it).
    std::vector<Vec> q(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      Vec h = x[t];
      rms_norm(h, 0, static_cast<size_t>(E), v[blk(il, "attn_norm.weight")], c.norm_eps);
      Vec k, vv;
      if (c.fused_qkv) {  // phi3's qkv_proj: [q | k | v]
        const Vec qkv = matvec(v[blk(il, "attn_qkv.weight")], E, nq + 2 * nk, h);
        q[t].assign(qkv.begin(), qkv.begin() + nq);
        k.assign(qkv.begin() + nq, qkv.begin() + nq + nk);
        vv.assign(qkv.begin() + nq + nk, qkv.end());
      } else {
        q[t] = matvec(v[blk(il, "attn_q.weight")], E, nq, h);
        k = matvec(v[blk(il, "attn_k.weight")], E, nk, h);
        vv = matvec(v[blk(il, "attn_v.weight")], E, nk, h);
      }
      if (c.attn_bias) {
        for (int64_t i = 0; i < nq; ++i) q[t][i] += v[blk(il, "attn_q.bias")][i];
        for (int64_t i = 0; i < nk; ++i) k[i] += v[blk(il, "attn_k.bias")][i];
        for (int64_t i = 0; i < nk; ++i) vv[i] += v[blk(il, "attn_v.bias")][i];
      }
      for (int64_t hh = 0; hh < c.n_head; ++hh) {
        if (c.attn_qk_norm) rms_norm(q[t], hh * hd, hd, v[blk(il, "attn_q_norm.weight")], c.norm_eps);
        rope(q[t], hh * hd, hd, in.pos[t], base, rscale, c.rope_mode, ff, mscale);
      }
      for (int64_t hh = 0; hh < c.n_head_kv; ++hh) {
        if (c.attn_qk_norm) rms_norm(k, hh * hd, hd, v[blk(il, "attn_k_norm.weight")], c.norm_eps);
        rope(k, hh * hd, hd, in.pos[t], base, rscale, c.rope_mode, ff, mscale);
      }
      const size_t slot = static_cast<size_t>(in.kv_idxs[t] * nk);
      for (int64_t i = 0; i < nk; ++i) {
        kc[il][slot + i] = static_cast<float>(k[i]);
        vc[il][slot + i] = static_cast<float>(vv[i]);
      }
    }
    // gemma3 scales the queries by its own factor (query_pre_attn_scalar^-1/2) instead.
    const double scale = c.attn_scale > 0 ? c.attn_scale : 1.0 / std::sqrt(static_cast<double>(hd));
    for (int64_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(nq), 0.0);
      for (int64_t hh = 0; hh < c.n_head; ++hh) {
        const int64_t g = hh / (c.n_head / c.n_head_kv);
        Vec s(static_cast<size_t>(nkv));
        double mx = -INFINITY;
        for (int64_t j = 0; j < nkv; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[t][hh * hd + i] * kc[il][j * nk + g * hd + i];
          s[j] = d * scale + mask[t * nkv + j];
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j < nkv; ++j) {
          for (int64_t i = 0; i < hd; ++i) att[hh * hd + i] += s[j] / sum * vc[il][j * nk + g * hd + i];
        }
      }
      Vec o = matvec(v[blk(il, "attn_output.weight")], nq, E, att);
      if (c.post_norms) rms_norm(o, 0, static_cast<size_t>(E), v[blk(il, "post_attention_norm.weight")], c.norm_eps);
      for (int64_t i = 0; i < E; ++i) x[t][i] += o[i];
      Vec f = x[t];
      rms_norm(f, 0, static_cast<size_t>(E), v[blk(il, "ffn_norm.weight")], c.norm_eps);
      Vec out(static_cast<size_t>(E), 0.0);
      if (!c.is_moe()) {
        out = swiglu(v, il, "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", c, f, 0, c.ffn_gelu);
      } else {
        Vec p = matvec(v[blk(il, "ffn_gate_inp.weight")], E, c.n_expert, f);
        const double pm = *std::max_element(p.begin(), p.end());
        double ps = 0;
        for (double& e : p) ps += (e = std::exp(e - pm));
        for (double& e : p) e /= ps;
        std::vector<int> order(static_cast<size_t>(c.n_expert));
        std::iota(order.begin(), order.end(), 0);
        std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return p[a] > p[b]; });
        double wsum = 0;
        for (int k = 0; k < c.n_expert_used; ++k) wsum += p[order[k]];
        for (int k = 0; k < c.n_expert_used; ++k) {
          const int e = order[k];
          const double we = c.moe_norm_weights ? p[e] / wsum : p[e];
          const Vec d = swiglu(v, il, "ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight", c, f, e);
          for (int64_t i = 0; i < E; ++i) out[i] += we * d[i];
        }
      }
      if (c.post_norms) rms_norm(out, 0, static_cast<size_t>(E), v[blk(il, "post_ffw_norm.weight")], c.norm_eps);
      for (int64_t i = 0; i < E; ++i) x[t][i] += out[i];
    }
  }
  std::vector<double> logits;
  const std::string out_name = v.has("output.weight") ? "output.weight" : "token_embd.weight";
  for (int64_t t = T - c.outputs(); t < T; ++t) {
    Vec h = x[t];
    rms_norm(h, 0, static_cast<size_t>(E), v["output_norm.weight"], c.norm_eps);
    const Vec l = matvec(v[out_name], E, c.n_vocab, h);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

// The model built, filled and computed on the CPU backend: the relative squared error of its logits against the
// oracle's (sum of squared differences over sum of squares), in *rel. `after_inputs`, when given, may change the
// graph's inputs before the compute.
void oracle_error(const LlamaConfig& c, uint64_t seed, double* rel,
                  const std::function<void(LlamaGraph&)>& after_inputs = {}) {
  *rel = INFINITY;
  Result<LlamaGraph> built = build_llama(c);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  LlamaGraph& m = built.value();
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());
  ASSERT_TRUE(wb.ok() && cb.ok());
  ASSERT_TRUE(fill_random(m, seed).ok());
  Values v;
  for (Tensor* w : m.weights) v.w[w->name] = tensor_to_f32(*w).value();
  for (const LlamaLayer& l : m.layers) {
    v.k_cache.push_back(tensor_to_f32(*l.k_cache).value());
    std::vector<float> vc = tensor_to_f32(*l.v_cache).value();
    if (c.llama_cpp && !c.flash_attn) {
      // llama.cpp's V cache without flash attention holds V transposed: dim d of slot s at d * n_ctx + s; the oracle
      // reads [n_embd_kv] per slot
      const int64_t nk = c.n_embd_kv();
      std::vector<float> by_slot(vc.size());
      for (int64_t s = 0; s < c.n_ctx; ++s) {
        for (int64_t d = 0; d < nk; ++d)
          by_slot[static_cast<size_t>(s * nk + d)] = vc[static_cast<size_t>(d * c.n_ctx + s)];
      }
      vc = std::move(by_slot);
    }
    v.v_cache.push_back(std::move(vc));
  }
  GraphPlanner planner(cpu::buffer_type());
  ASSERT_TRUE(planner.alloc_graph(*m.graph).ok());
  const LlamaInputs in = default_inputs(c, seed);
  ASSERT_TRUE(set_inputs(m, in).ok());
  if (after_inputs) after_inputs(m);
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  ASSERT_EQ(backend->graph_compute(*m.graph), ComputeStatus::kSuccess) << backend->last_error();
  const std::vector<float> got = tensor_to_f32(*m.logits).value();
  const std::vector<double> want = oracle_logits(c, v, in);
  ASSERT_EQ(got.size(), want.size());
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  EXPECT_GT(ref, 0.0);
  *rel = err / ref;
}

// The model's logits and the oracle's, with exact weights and cache: the comparison is of the graph, not of
// quantization.
void compare_with_oracle(LlamaConfig c, uint64_t seed) {
  c.weight_type = Type::kF32;
  c.kv_type = Type::kF32;
  double rel = INFINITY;
  oracle_error(c, seed, &rel);
  EXPECT_LT(rel, 1e-8) << c.name << (c.flash_attn ? " flash" : " matmul/softmax") << " llama.cpp build "
                       << (c.llama_cpp ? c.llama_cpp->build : 0);
}

// A preset's name as a test name ("tiny-qwen3" -> "tiny_qwen3").
std::string preset_test_name(const ::testing::TestParamInfo<std::string>& i) {
  std::string s = i.param;
  std::replace(s.begin(), s.end(), '-', '_');
  return s;
}

class QwenOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(QwenOracle, LogitsEqualTheOracles) {
  for (bool fa : {true, false}) {
    LlamaConfig c = preset(GetParam()).value();
    c.flash_attn = fa;
    compare_with_oracle(c, 7);
    c.n_outputs = 3;  // only the last rows: the out_ids path
    compare_with_oracle(c, 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, QwenOracle,
                         ::testing::Values("tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe",
                                           "tiny-gemma3", "tiny-phi3"),
                         preset_test_name);

// llama.cpp's graphs of other builds (llama_cpp_graph.h: VIEW + CPY cache writes at the head, a transposed V without
// flash attention, SILU + MUL, ARGSORT + VIEW expert choice, the fused projections' CONTs, per-element V indices with
// SET_ROWS, the f32 mask cast for flash attention) compute the same decoder step: the same oracle, every switch on or
// off in one of these builds (llama_cpp_graph.cpp).
class LlamaCppGraphOracle : public ::testing::TestWithParam<std::string> {};

TEST_P(LlamaCppGraphOracle, LogitsEqualTheOraclesInEveryEra) {
  // every switch on in one of these builds and off in another (2459: the 2024 writes; 4919: V as heads; 5429: the
  // permuted reads; 5817: GLU, the K reshape, the fused V copy; 6195: SET_ROWS, streams, one CONT; 6410: V a view;
  // 6844: the MoE weights' sum clamped; 9849: V before K, the unused embeddings input, the f16 masks)
  for (int build : {2459, 4400, 4919, 5429, 5817, 6195, 6410, 6844, 9849}) {
    for (bool fa : {true, false}) {
      LlamaConfig c = preset(GetParam()).value();
      c.flash_attn = fa;
      c.llama_cpp = llama::llama_cpp_graph(build);
      compare_with_oracle(c, 17);
      c.n_outputs = 3;  // only the last rows
      compare_with_oracle(c, 18);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, LlamaCppGraphOracle,
                         ::testing::Values("tiny", "tiny-moe", "tiny-qwen2", "tiny-qwen3", "tiny-qwen3moe",
                                           "tiny-gemma3", "tiny-phi3"),
                         preset_test_name);

// Phi-3.5-mini's LongRoPE (131072 positions over 4096 trained): its attention factor sqrt(1 + ln 32 / ln 4096) scales
// every rope's cos and sin (ROPE's attn_factor with ext_factor 0, as llama.cpp passes it to ggml_rope_ext), on top of
// the long factors tiny-phi3 uses; in every era of llama.cpp's graph, with and without flash attention.
TEST(Phi3LongRope, AttentionFactorEqualsTheOracle) {
  for (int build : {0, 4919, 6410}) {
    for (bool fa : {true, false}) {
      LlamaConfig c = preset("tiny-phi3").value();
      c.rope_yarn.attn_factor = static_cast<float>(std::sqrt(1.0 + std::log(32.0) / std::log(4096.0)));
      c.flash_attn = fa;
      if (build > 0) c.llama_cpp = llama::llama_cpp_graph(build);
      compare_with_oracle(c, 27);
      c.n_outputs = 3;
      compare_with_oracle(c, 28);
    }
  }
}

// llama.cpp from 8619 with a quantized cache (LlamaCppGraph::kv_rotation, PR #21038): Q and K rotated by a normalised
// Walsh-Hadamard matrix H, V and the attention output by another. H is symmetric and orthogonal, so in exact arithmetic
// nothing changes ((Hq).(Hk) = q.k, and H sum_j p_j H v_j = sum_j p_j v_j) and the oracle, which knows nothing of the
// rotations, stays the reference. What the rotations change is which values the cache rounds: the rotated graph's
// logits differ from the oracle's by the cache's quantization error, as those of the same build with the rotations
// off do (llama.cpp's LLAMA_ATTN_ROT_DISABLE=1), on the same weights and tokens. So: both errors nonzero (the cache
// rounds), the rotated one at most 4 times the unrotated one, and the unrotated one below 1e-2 (relative squared
// errors; over seeds 1-7 and 41 of these cases the ratio was 0.64-1.71 and the unrotated error at most 7.4e-3, with
// q4_0; 3e-6 to 4e-5 with q8_0: the rotation moves the same rounding among a head's values), and both far below a wrong
// rotation's (an orthogonal V matrix that is not its own inverse, as a check of the check: 0.13-1.2, at least 134
// times the unrotated error).
// n_kv = n_tokens: the tokens attend only to what this step writes (the cache's earlier slots are random values, which
// the rotated graph reads as rotated vectors and the oracle as plain ones). f32 weights: only the cache rounds.
TEST(LlamaCppGraphRotation, LogitsWithinTheCachesQuantizationNoise) {
  struct Case {
    const char* preset;
    int64_t head;
    Type k, v;
    bool fa;
  };
  const Case cases[] = {
      {"tiny", 64, Type::kQ8_0, Type::kQ8_0, true},        {"tiny", 64, Type::kQ8_0, Type::kF16, false},
      {"tiny-qwen3", 128, Type::kQ4_0, Type::kQ4_0, true}, {"tiny-gemma3", 64, Type::kQ8_0, Type::kQ8_0, true},
      {"tiny-phi3", 64, Type::kQ8_0, Type::kQ8_0, true},   {"tiny-qwen3moe", 64, Type::kQ8_0, Type::kF16, true}};
  for (const Case& k : cases) {
    LlamaConfig c = preset(k.preset).value();
    c.n_embd_head = k.head;
    c.kv_type = k.k;
    c.v_cache_type = k.v;
    c.flash_attn = k.fa;
    c.weight_type = Type::kF32;
    c.n_kv = c.n_tokens;
    c.llama_cpp = llama::llama_cpp_graph(9849);
    ASSERT_GT(c.k_rot_dim(), 0);
    double rotated = INFINITY, plain = INFINITY, wrong = INFINITY;
    oracle_error(c, 41, &rotated);
    LlamaConfig off = c;
    off.llama_cpp->kv_rotation = false;
    oracle_error(off, 41, &plain);
    const std::string what = std::string(k.preset) + " " + type_name(k.k) + "/" + type_name(k.v);
    EXPECT_GT(plain, 0.0) << what;
    EXPECT_GT(rotated, 0.0) << what;
    EXPECT_LT(rotated, 4 * plain) << what << ": rotated " << rotated << ", unrotated " << plain;
    EXPECT_LT(plain, 1e-2) << what;
    if (c.v_rot_dim() == 0) continue;
    // a cyclic shift of each row's 64 values: orthogonal, not its own inverse, so the output is not rotated back
    oracle_error(c, 41, &wrong, [](LlamaGraph& m) {
      std::vector<float> p(64 * 64, 0.0f);
      for (int i = 0; i < 64; ++i) p[static_cast<size_t>(i * 64 + (i + 1) % 64)] = 1.0f;
      for (Tensor* t : {m.v_rot, m.v_rot_swa}) {
        if (t != nullptr) {
          ASSERT_TRUE(tensor_from_f32(*t, p).ok());
        }
      }
    });
    EXPECT_GT(wrong, 30 * plain) << what << ": wrong " << wrong << ", unrotated " << plain;
  }
}

// The rotation inputs hold the normalised Walsh-Hadamard matrices (entry (i, j) of H_n / sqrt(n) is
// (-1)^popcount(i & j) / sqrt(n): Sylvester's construction in closed form), symmetric and their own inverses (H H = I);
// and a rotation node computes H x for each row of nrot values (K of heads of 128: one row per head), on the values the
// graph computes.
TEST(LlamaCppGraphRotation, MatricesAndRotationNodes) {
  LlamaConfig c = preset("tiny").value();
  c.n_layer = 1;
  c.n_embd_head = 128;
  c.kv_type = Type::kQ8_0;
  c.weight_type = Type::kF32;
  c.llama_cpp = llama::llama_cpp_graph(8619);
  Result<LlamaGraph> built = build_llama(c);
  ASSERT_TRUE(built.ok()) << built.status().to_string();
  LlamaGraph& m = built.value();
  ASSERT_NE(m.k_rot, nullptr);
  ASSERT_NE(m.v_rot, nullptr);
  // the K rotation of layer 0 and what it rotates, kept (outputs) to be read after the compute
  Tensor *x = nullptr, *y = nullptr;
  for (Tensor* n : m.graph->nodes()) {
    if (n->op == Op::kMulMat && n->src[0] == m.k_rot && std::string(n->src[1]->src[0]->name) == "Kcur_rope-0") {
      y = n;
      x = n->src[1]->src[0];
    }
  }
  ASSERT_NE(y, nullptr);
  set_output(*x);
  set_output(*y);
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());
  ASSERT_TRUE(wb.ok() && cb.ok());
  ASSERT_TRUE(fill_random(m, 5).ok());
  GraphPlanner planner(cpu::buffer_type());
  ASSERT_TRUE(planner.alloc_graph(*m.graph).ok());
  ASSERT_TRUE(set_inputs(m, default_inputs(c, 5)).ok());
  for (const Tensor* t : {m.k_rot, m.v_rot}) {
    const int64_t n = t->ne[0];
    const std::vector<float> h = tensor_to_f32(*t).value();
    ASSERT_EQ(h.size(), static_cast<size_t>(n * n));
    const double r = 1.0 / std::sqrt(static_cast<double>(n));
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = 0; j < n; ++j) {
        const double want = (__builtin_popcountll(static_cast<uint64_t>(i & j)) % 2 ? -r : r);
        ASSERT_NEAR(h[static_cast<size_t>(i * n + j)], want, 1e-7) << t->name << " " << i << "," << j;
        double hh = 0;
        for (int64_t k = 0; k < n; ++k)
          hh += double(h[static_cast<size_t>(i * n + k)]) * h[static_cast<size_t>(k * n + j)];
        ASSERT_NEAR(hh, i == j ? 1.0 : 0.0, 1e-6) << t->name << " " << i << "," << j;
      }
    }
  }
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  ASSERT_EQ(backend->graph_compute(*m.graph), ComputeStatus::kSuccess) << backend->last_error();
  const std::vector<float> xv = tensor_to_f32(*x).value(), yv = tensor_to_f32(*y).value();
  const std::vector<float> h = tensor_to_f32(*m.k_rot).value();
  ASSERT_EQ(xv.size(), yv.size());
  ASSERT_EQ(xv.size() % 128, 0u);
  double err = 0, ref = 0;
  for (size_t row = 0; row < xv.size() / 128; ++row) {
    for (size_t i = 0; i < 128; ++i) {
      double want = 0;
      for (size_t k = 0; k < 128; ++k) want += double(h[i * 128 + k]) * xv[row * 128 + k];
      err += (yv[row * 128 + i] - want) * (yv[row * 128 + i] - want);
      ref += want * want;
    }
  }
  EXPECT_GT(ref, 0.0);
  EXPECT_LT(err / ref, 1e-10);
}

// A llama file whose attention.key_length is not embedding_length / head_count (Mistral Nemo's 128 on 5120 / 32 heads,
// scaled down: 32 on 64 / 4 heads, so wq is [64, 128]): the config from_gguf reads from its header computes the
// oracle's logits (weights drawn by fill_random, in f32 so that the comparison is of the graph).
TEST(LlamaOwnHeadSize, AFileWithKeyLengthEqualsTheOracle) {
  gguf::File f;
  f.source = "tiny-nemo.gguf";
  auto u32 = [&](const char* k, int64_t v) {
    f.set(std::string("llama.") + k, gguf::Value::u32(static_cast<uint32_t>(v)));
  };
  f.set("general.architecture", gguf::Value::string("llama"));
  u32("block_count", 2);
  u32("context_length", 1024);
  u32("embedding_length", 64);
  u32("feed_forward_length", 128);
  u32("attention.head_count", 4);
  u32("attention.head_count_kv", 2);
  u32("attention.key_length", 32);
  u32("attention.value_length", 32);
  u32("rope.dimension_count", 32);
  f.set("llama.rope.freq_base", gguf::Value::f32(1000000.0f));
  f.set("llama.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-5f));
  using TT = gguf::TensorType;
  f.add_tensor("token_embd.weight", TT::kF32, {64, 256});
  for (int il = 0; il < 2; ++il) {
    const std::string b = "blk." + std::to_string(il) + ".";
    f.add_tensor(b + "attn_norm.weight", TT::kF32, {64});
    f.add_tensor(b + "attn_q.weight", TT::kF32, {64, 128});
    f.add_tensor(b + "attn_k.weight", TT::kF32, {64, 64});
    f.add_tensor(b + "attn_v.weight", TT::kF32, {64, 64});
    f.add_tensor(b + "attn_output.weight", TT::kF32, {128, 64});
    f.add_tensor(b + "ffn_norm.weight", TT::kF32, {64});
    f.add_tensor(b + "ffn_gate.weight", TT::kF32, {64, 128});
    f.add_tensor(b + "ffn_down.weight", TT::kF32, {128, 64});
    f.add_tensor(b + "ffn_up.weight", TT::kF32, {64, 128});
  }
  f.add_tensor("output_norm.weight", TT::kF32, {64});
  f.add_tensor("output.weight", TT::kF32, {64, 256});
  ASSERT_TRUE(f.layout().ok());
  for (bool fa : {true, false}) {
    auto c =
        llama_config_from_gguf(gguf::Model::of_file(gguf::File(f)), {.n_ctx = 64, .n_tokens = 8, .flash_attn = fa});
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->head_dim(), 32);
    EXPECT_EQ(c->n_embd_q(), 128);
    EXPECT_EQ(c->rope_mode, RopeMode::kNormal);
    compare_with_oracle(c.value(), 31);
    LlamaConfig last = c.value();
    last.n_outputs = 3;
    compare_with_oracle(last, 32);
  }
}

// The presets have the switches their architectures need (the oracle above follows the config, so this is what ties
// a preset to its architecture).
TEST(QwenPresets, SwitchesAndShapes) {
  const LlamaConfig q2 = preset("tiny-qwen2").value();
  EXPECT_TRUE(q2.attn_bias);
  EXPECT_FALSE(q2.attn_qk_norm);
  EXPECT_EQ(q2.rope_mode, RopeMode::kNeox);
  const LlamaConfig q3 = preset("tiny-qwen3").value();
  EXPECT_FALSE(q3.attn_bias);
  EXPECT_TRUE(q3.attn_qk_norm);
  EXPECT_EQ(q3.rope_mode, RopeMode::kNeox);
  EXPECT_EQ(q3.head_dim(), 32);  // not n_embd / n_head = 16
  const LlamaGraph m = build_llama(preset("tiny-qwen3moe").value()).value();
  EXPECT_EQ(m.layers[1].wq->ne[0], 64);
  EXPECT_EQ(m.layers[1].wq->ne[1], 128);
  EXPECT_EQ(m.layers[1].wo->ne[0], 128);
  EXPECT_EQ(m.layers[1].wo->ne[1], 64);
  EXPECT_EQ(m.layers[1].attn_q_norm->ne[0], 32);
  EXPECT_EQ(m.layers[1].ffn_gate_exps->ne[2], 4);
  EXPECT_EQ(preset("tiny").value().rope_mode, RopeMode::kNormal);
  // gemma3: five sliding-window layers and a global one (the last), whose window is smaller than the cache.
  const LlamaConfig g = preset("tiny-gemma3").value();
  EXPECT_TRUE(g.attn_qk_norm && g.post_norms && g.ffn_gelu && g.embd_scale && g.tied_output);
  EXPECT_EQ(g.rope_mode, RopeMode::kNeox);
  EXPECT_EQ(g.head_dim(), 32);
  for (int il = 0; il < 5; ++il) EXPECT_TRUE(g.is_swa(il)) << il;
  EXPECT_FALSE(g.is_swa(5));
  EXPECT_LT(g.n_swa + g.n_tokens, g.kv_len());
  const LlamaGraph gm = build_llama(g).value();
  EXPECT_NE(gm.mask_swa, nullptr);
  EXPECT_EQ(gm.output, gm.tok_embd);
  EXPECT_NE(gm.layers[5].attn_post_norm, nullptr);
  EXPECT_NE(gm.layers[5].ffn_post_norm, nullptr);
  // phi3: fused projections, the long LongRoPE factors (64 slots > 32), shared by every layer.
  const LlamaConfig ph = preset("tiny-phi3").value();
  EXPECT_TRUE(ph.fused_qkv && ph.fused_up && ph.rope_factors_ls && ph.rope_long());
  EXPECT_EQ(ph.rope_mode, RopeMode::kNeox);
  const LlamaGraph pm = build_llama(ph).value();
  EXPECT_EQ(pm.layers[1].wqkv->ne[1], 64 + 2 * 32);
  EXPECT_EQ(pm.layers[1].wq, nullptr);
  EXPECT_EQ(pm.layers[1].ffn_gate, nullptr);
  EXPECT_EQ(pm.layers[1].ffn_up->ne[1], 2 * 128);
  EXPECT_EQ(pm.rope_long->ne[0], 8);
  EXPECT_EQ(pm.layer_of(pm.layers[1].wqkv), 1);
}

// The sliding-window mask: a token at position p sees the positions (p - n_swa, p], as llama.cpp's
// LLAMA_SWA_TYPE_STANDARD (masked when p - p_key >= n_swa), and the global mask every position up to p.
TEST(QwenPresets, Gemma3SlidingWindowMask) {
  const LlamaConfig c = preset("tiny-gemma3").value();
  const LlamaInputs in = default_inputs(c, 1);
  const int64_t n_kv = c.kv_len();
  ASSERT_EQ(in.mask_swa.size(), in.mask.size());
  for (int64_t t = 0; t < c.n_tokens; ++t) {
    const int64_t p = in.pos[t];
    for (int64_t j = 0; j < n_kv; ++j) {
      EXPECT_EQ(std::isinf(in.mask[t * n_kv + j]), j > p) << t << " " << j;
      EXPECT_EQ(std::isinf(in.mask_swa[t * n_kv + j]), j > p || p - j >= c.n_swa) << t << " " << j;
    }
  }
}

}  // namespace
