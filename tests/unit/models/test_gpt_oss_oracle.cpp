// The gpt-oss decoder (models/llama.cpp with LlamaConfig's gpt-oss switches, the tiny-gpt-oss preset) against an
// independent oracle: one decoder step written out here in plain loops over the same weights, cache and inputs, from
// Hugging Face transformers' GptOss modelling (models/gpt_oss/modeling_gpt_oss.py), which llama.cpp's gpt-oss graph
// reproduces:
//   - attention: q = Wq x + bq, k = Wk x + bk, v = Wv x + bv; NEOX rope ("rotate_half") on every layer with the same
//     base; the scores q.k / sqrt(head_dim) plus the mask, then the layer's sink for each head joins the softmax as an
//     extra logit (eager_attention_forward: the scores concatenated with the sinks, the maximum subtracted, softmax,
//     the sink's column dropped); out = Wo att + bo;
//   - sliding-window layers: layer_types alternate "sliding_attention" (layer 0) and "full_attention", the sliding
//     ones seeing the positions (p - window, p];
//   - the FFN input norm is post_attention_layernorm (RMS);
//   - router: logits = Wr x + br, the top k experts by logit, their weights the softmax over those k logits
//     (GptOssTopKRouter);
//   - expert: gate = Wg x + bg, up = Wu x + bu, gate clamped above at limit, up clamped to [-limit, limit],
//     out = Wd ((up + 1) * gate * sigmoid(alpha gate)) + bd (GptOssExperts, alpha 1.702, limit 7).
//   - YaRN (rope_scaling rope_type "yarn"): transformers' _compute_yarn_parameters (modeling_rope_utils.py), written
//     out below: the inverse frequencies mix the extrapolated 1 / base^(2i/d) and the interpolated ones divided by
//     factor, by 1 - ramp over [low, high] with low = floor(corr(beta_fast)), high = ceil(corr(beta_slow)),
//     corr(r) = d ln(L / (2 pi r)) / (2 ln base), L = original_max_position_embeddings (truncate true, the default,
//     which is also what llama.cpp does); cos and sin are multiplied by attention_factor = 0.1 ln(factor) + 1.
// Nothing here uses Tessera's ops: the weights are read back as floats and everything else is computed in doubles.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/models/llama.h"
#include "tessera/planner.h"
#include "support/tensor_names.h"

using namespace tessera;
using namespace tessera::models;

using tessera::test::blk;

namespace {

using Vec = std::vector<double>;
using Weights = std::map<std::string, std::vector<float>>;

const std::vector<float>& get(const Weights& w, const std::string& name) {
  static const std::vector<float> none;
  auto it = w.find(name);
  EXPECT_NE(it, w.end()) << name;
  return it == w.end() ? none : it->second;
}

// W x + b for a weight of GGUF shape [n_in, n_out] starting at w_off, and its bias (n_out values from b_off; none
// when b is null).
Vec affine(const std::vector<float>& w, int64_t n_in, int64_t n_out, const Vec& x, size_t w_off = 0,
           const std::vector<float>* b = nullptr, size_t b_off = 0) {
  Vec y(static_cast<size_t>(n_out), 0.0);
  for (int64_t j = 0; j < n_out; ++j) {
    double s = b != nullptr ? (*b)[b_off + static_cast<size_t>(j)] : 0.0;
    for (int64_t i = 0; i < n_in; ++i) s += static_cast<double>(w[w_off + static_cast<size_t>(j * n_in + i)]) * x[i];
    y[static_cast<size_t>(j)] = s;
  }
  return y;
}

Vec rms_norm(const Vec& x, const std::vector<float>& g, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  Vec y(x.size());
  for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * g[i];
  return y;
}

// The rotary embedding's inverse frequencies and the factor on cos and sin (HF's rope_init_fn): default rope, or YaRN
// when yarn_factor > 0 (yarn_factor, yarn_orig_ctx, beta_fast, beta_slow from the model's rope_scaling).
struct Rotary {
  Vec inv_freq;
  double attention_factor = 1.0;
};

Rotary rotary(size_t hd, double base, double yarn_factor, double yarn_orig_ctx, double beta_fast, double beta_slow) {
  Rotary r;
  const size_t half = hd / 2;
  for (size_t i = 0; i < half; ++i) r.inv_freq.push_back(1.0 / std::pow(base, 2.0 * i / static_cast<double>(hd)));
  if (yarn_factor <= 0.0) return r;
  const double pi = 3.14159265358979323846, d = static_cast<double>(hd);
  auto corr = [&](double rot) { return d * std::log(yarn_orig_ctx / (rot * 2.0 * pi)) / (2.0 * std::log(base)); };
  const double low = std::max(std::floor(corr(beta_fast)), 0.0);
  const double high = std::min(std::ceil(corr(beta_slow)), d - 1.0);
  for (size_t i = 0; i < half; ++i) {
    const double hi = low == high ? high + 0.001 : high;
    const double linear = std::clamp((static_cast<double>(i) - low) / (hi - low), 0.0, 1.0);
    const double extrapolation_factor = 1.0 - linear;
    const double extrap = r.inv_freq[i], interp = r.inv_freq[i] / yarn_factor;
    r.inv_freq[i] = interp * (1.0 - extrapolation_factor) + extrap * extrapolation_factor;
  }
  r.attention_factor = 0.1 * std::log(yarn_factor) + 1.0;
  return r;
}

// rotate_half rope of one head x[from, from + hd): value i pairs with value i + hd / 2.
void rope_neox(Vec& x, size_t from, size_t hd, int pos, const Rotary& r) {
  for (size_t i = 0; i < hd / 2; ++i) {
    const double theta = pos * r.inv_freq[i];
    const double c = std::cos(theta) * r.attention_factor, s = std::sin(theta) * r.attention_factor;
    const double x0 = x[from + i], x1 = x[from + i + hd / 2];
    x[from + i] = x0 * c - x1 * s;
    x[from + i + hd / 2] = x0 * s + x1 * c;
  }
}

struct Model {
  Weights w;
  std::vector<std::vector<float>> k_cache, v_cache;
};

// yarn_factor 0: plain rope; else YaRN with that factor over yarn_orig_ctx trained positions, beta 32 / 1 (HF's
// defaults and gpt-oss's config).
std::vector<double> oracle_logits(const LlamaConfig& c, const Model& m, const LlamaInputs& in, double yarn_factor = 0,
                                  double yarn_orig_ctx = 0) {
  const int64_t T = c.n_tokens, E = c.n_embd, hd = c.head_dim(), nkv = c.kv_len(), F = c.n_ff;
  const int64_t nq = hd * c.n_head, nk = hd * c.n_head_kv;
  const double alpha = 1.702, limit = 7.0;
  const Rotary rot = rotary(static_cast<size_t>(hd), c.rope_base, yarn_factor, yarn_orig_ctx, 32.0, 1.0);
  std::vector<Vec> x(static_cast<size_t>(T));
  const std::vector<float>& emb = get(m.w, "token_embd.weight");
  for (int64_t t = 0; t < T; ++t) x[t].assign(emb.begin() + in.tokens[t] * E, emb.begin() + (in.tokens[t] + 1) * E);
  std::vector<std::vector<float>> kc = m.k_cache, vc = m.v_cache;
  for (int il = 0; il < c.n_layer; ++il) {
    auto W = [&](const char* what) -> const std::vector<float>& { return get(m.w, blk(il, what)); };
    const bool sliding = il % 2 == 0;  // layer_types: sliding, full, sliding, full
    const std::vector<float>& mask = sliding ? in.mask_swa : in.mask;
    std::vector<Vec> q(static_cast<size_t>(T));
    for (int64_t t = 0; t < T; ++t) {
      const Vec h = rms_norm(x[t], W("attn_norm.weight"), c.norm_eps);
      q[t] = affine(W("attn_q.weight"), E, nq, h, 0, &W("attn_q.bias"));
      Vec k = affine(W("attn_k.weight"), E, nk, h, 0, &W("attn_k.bias"));
      const Vec v = affine(W("attn_v.weight"), E, nk, h, 0, &W("attn_v.bias"));
      for (int64_t hh = 0; hh < c.n_head; ++hh) rope_neox(q[t], hh * hd, hd, in.pos[t], rot);
      for (int64_t hh = 0; hh < c.n_head_kv; ++hh) rope_neox(k, hh * hd, hd, in.pos[t], rot);
      const size_t slot = static_cast<size_t>(in.kv_idxs[t] * nk);
      for (int64_t i = 0; i < nk; ++i) {
        kc[il][slot + i] = static_cast<float>(k[i]);
        vc[il][slot + i] = static_cast<float>(v[i]);
      }
    }
    const std::vector<float>& sinks = W("attn_sinks.weight");
    for (int64_t t = 0; t < T; ++t) {
      Vec att(static_cast<size_t>(nq), 0.0);
      for (int64_t hh = 0; hh < c.n_head; ++hh) {
        const int64_t g = hh / (c.n_head / c.n_head_kv);
        Vec s(static_cast<size_t>(nkv));
        double mx = sinks[hh];
        for (int64_t j = 0; j < nkv; ++j) {
          double d = 0;
          for (int64_t i = 0; i < hd; ++i) d += q[t][hh * hd + i] * kc[il][j * nk + g * hd + i];
          s[j] = d / std::sqrt(static_cast<double>(hd)) + mask[t * nkv + j];
          mx = std::max(mx, s[j]);
        }
        double sum = std::exp(sinks[hh] - mx);  // the sink's share, with no value
        for (double& e : s) sum += (e = std::exp(e - mx));
        for (int64_t j = 0; j < nkv; ++j) {
          for (int64_t i = 0; i < hd; ++i) att[hh * hd + i] += s[j] / sum * vc[il][j * nk + g * hd + i];
        }
      }
      const Vec o = affine(W("attn_output.weight"), nq, E, att, 0, &W("attn_output.bias"));
      for (int64_t i = 0; i < E; ++i) x[t][i] += o[i];
      const Vec f = rms_norm(x[t], W("post_attention_norm.weight"), c.norm_eps);
      const Vec r = affine(W("ffn_gate_inp.weight"), E, c.n_expert, f, 0, &W("ffn_gate_inp.bias"));
      std::vector<int> order(static_cast<size_t>(c.n_expert));
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return r[a] > r[b]; });
      const int K = c.n_expert_used;
      double rmax = -INFINITY, rsum = 0;
      for (int k = 0; k < K; ++k) rmax = std::max(rmax, r[order[k]]);
      for (int k = 0; k < K; ++k) rsum += std::exp(r[order[k]] - rmax);
      Vec out(static_cast<size_t>(E), 0.0);
      for (int k = 0; k < K; ++k) {
        const int e = order[k];
        const double we = std::exp(r[e] - rmax) / rsum;
        const size_t off = static_cast<size_t>(e) * static_cast<size_t>(E * F);
        const Vec gate = affine(W("ffn_gate_exps.weight"), E, F, f, off, &W("ffn_gate_exps.bias"), e * F);
        const Vec up = affine(W("ffn_up_exps.weight"), E, F, f, off, &W("ffn_up_exps.bias"), e * F);
        Vec a(static_cast<size_t>(F));
        for (int64_t i = 0; i < F; ++i) {
          const double gg = std::min(gate[i], limit), uu = std::clamp(up[i], -limit, limit);
          a[i] = (uu + 1.0) * gg / (1.0 + std::exp(-alpha * gg));
        }
        const Vec d = affine(W("ffn_down_exps.weight"), F, E, a, off, &W("ffn_down_exps.bias"), e * E);
        for (int64_t i = 0; i < E; ++i) out[i] += we * d[i];
      }
      for (int64_t i = 0; i < E; ++i) x[t][i] += out[i];
    }
  }
  std::vector<double> logits;
  for (int64_t t = T - c.outputs(); t < T; ++t) {
    const Vec h = rms_norm(x[t], get(m.w, "output_norm.weight"), c.norm_eps);
    const Vec l = affine(get(m.w, "output.weight"), E, c.n_vocab, h);
    logits.insert(logits.end(), l.begin(), l.end());
  }
  return logits;
}

// The model built, filled and computed on the CPU backend; the NMSE of its logits against the oracle's.
double nmse_against_oracle(LlamaConfig c, uint64_t seed, double yarn_factor = 0, double yarn_orig_ctx = 0) {
  c.weight_type = Type::kF32;  // exact weights and cache: the comparison is of the graph, not of quantization
  c.kv_type = Type::kF32;
  Result<LlamaGraph> built = build_llama(c);
  EXPECT_TRUE(built.ok()) << built.status().to_string();
  if (!built.ok()) return INFINITY;
  LlamaGraph& g = built.value();
  auto wbuf = alloc_ctx_tensors(*g.weights_ctx, *cpu::buffer_type());  // (held while in use)
  EXPECT_TRUE(wbuf.ok());
  auto cbuf = alloc_ctx_tensors(*g.cache_ctx, *cpu::buffer_type());  // (held while in use)
  EXPECT_TRUE(cbuf.ok());
  EXPECT_TRUE(fill_random(g, seed).ok());
  Model m;
  for (Tensor* w : g.weights) m.w[w->name] = tensor_to_f32(*w).value();
  for (const LlamaLayer& l : g.layers) {
    m.k_cache.push_back(tensor_to_f32(*l.k_cache).value());
    std::vector<float> vc = tensor_to_f32(*l.v_cache).value();
    if (c.llama_cpp && !c.flash_attn) {
      // llama.cpp's V cache without flash attention holds V transposed (dim d of slot s at d * n_ctx + s); the oracle
      // reads [n_embd_kv] per slot
      const int64_t nk = c.n_embd_kv();
      std::vector<float> by_slot(vc.size());
      for (int64_t s = 0; s < c.n_ctx; ++s) {
        for (int64_t d = 0; d < nk; ++d) {
          by_slot[static_cast<size_t>(s * nk + d)] = vc[static_cast<size_t>(d * c.n_ctx + s)];
        }
      }
      vc = std::move(by_slot);
    }
    m.v_cache.push_back(std::move(vc));
  }
  GraphPlanner planner(cpu::buffer_type());
  EXPECT_TRUE(planner.alloc_graph(*g.graph).ok());
  const LlamaInputs in = default_inputs(c, seed);
  EXPECT_TRUE(set_inputs(g, in).ok());
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 2});
  EXPECT_EQ(backend->graph_compute(*g.graph), ComputeStatus::kSuccess) << backend->last_error();
  const std::vector<float> got = tensor_to_f32(*g.logits).value();
  const std::vector<double> want = oracle_logits(c, m, in, yarn_factor, yarn_orig_ctx);
  EXPECT_EQ(got.size(), want.size());
  if (got.size() != want.size()) return INFINITY;
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    err += (got[i] - want[i]) * (got[i] - want[i]);
    ref += want[i] * want[i];
  }
  EXPECT_GT(ref, 0.0);
  return err / ref;
}

TEST(GptOssOracle, LogitsEqualTheOracles) {
  for (bool fa : {true, false}) {
    LlamaConfig c = preset("tiny-gpt-oss").value();
    c.flash_attn = fa;
    EXPECT_LT(nmse_against_oracle(c, 7), 1e-8) << (fa ? "flash" : "matmul/softmax");
    c.n_outputs = 3;  // only the last rows: the out_ids path
    EXPECT_LT(nmse_against_oracle(c, 8), 1e-8) << (fa ? "flash" : "matmul/softmax");
  }
}

// llama.cpp's gpt-oss graphs (llama_cpp_graph.h; gpt-oss arrived at build 6096, so after SET_ROWS became the
// default): argsort + view expert choice, the masks cast for flash attention, the permuted cache reads, a transposed V
// written by element without flash attention, and an earlier build's graph as well (every switch of its era).
TEST(GptOssOracle, LlamaCppGraphsEqualTheOracles) {
  for (int build : {5913, 6071, 6699}) {
    for (bool fa : {true, false}) {
      LlamaConfig c = preset("tiny-gpt-oss").value();
      c.flash_attn = fa;
      c.llama_cpp = llama::llama_cpp_graph(build);
      EXPECT_LT(nmse_against_oracle(c, 7), 1e-8) << (fa ? "flash" : "matmul/softmax") << " build " << build;
      c.n_outputs = 3;
      EXPECT_LT(nmse_against_oracle(c, 8), 1e-8) << (fa ? "flash" : "matmul/softmax") << " build " << build;
    }
  }
}

// YaRN as gpt-oss-20b has it (factor 32 over 4096 trained positions, beta 32 / 1) on the tiny model's 16 pairs per
// head (head_dim 32, base 150000): corr(32) = 32 ln(4096 / 201.06) / 23.84 = 4.05 -> low 4, corr(1) = 32 ln(651.9) /
// 23.84 = 8.70 -> high 9, the ramp inside the pairs; and over 16 trained positions: corr(32) = -3.40 -> low 0,
// corr(1) = 1.25 -> high 2, almost all pairs interpolated.
TEST(GptOssOracle, LogitsWithYarnEqualTheOracles) {
  for (bool fa : {true, false}) {
    for (int orig : {4096, 16}) {
      LlamaConfig c = preset("tiny-gpt-oss").value();
      c.flash_attn = fa;
      c.rope_scale = c.rope_scale_swa = 1.0f / 32.0f;
      c.rope_yarn.n_ctx_orig = orig;
      c.rope_yarn.ext_factor = 1.0f;
      EXPECT_LT(nmse_against_oracle(c, 9, 32.0, orig), 1e-8) << (fa ? "flash" : "matmul/softmax") << " orig " << orig;
    }
  }
}

// The preset is what the oracle assumes: alternating windows smaller than the cache, 2 of 4 experts, heads of 32.
TEST(GptOssOracle, PresetShape) {
  const LlamaConfig c = preset("tiny-gpt-oss").value();
  EXPECT_EQ(c.n_layer, 4);
  for (int il = 0; il < 4; ++il) EXPECT_EQ(c.is_swa(il), il % 2 == 0) << il;
  EXPECT_LT(c.n_swa + c.n_tokens, c.kv_len());
  EXPECT_EQ(c.head_dim(), 32);
  EXPECT_EQ(c.n_embd_q(), 128);
  EXPECT_EQ(c.n_expert_used, 2);
  EXPECT_EQ(c.rope_base_swa, c.rope_base);
  EXPECT_EQ(c.rope_scale, 1.0f);
  EXPECT_EQ(c.rope_mode, RopeMode::kNeox);
}

}  // namespace
