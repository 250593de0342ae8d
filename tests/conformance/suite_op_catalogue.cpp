// The backend conformance suite's op catalogue (backend_conformance.h, op_catalogue): every op of docs/ops.md x
// every type combination of its table, as single-op graphs.
#include <cctype>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "conformance/backend_conformance.h"
#include "conformance/suite_util.h"
#include "tessera/rope.h"

namespace tessera::conformance {

namespace {

constexpr Type kFloatTypes[] = {Type::kF32, Type::kF16, Type::kBF16};
constexpr Type kWeightTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0};
constexpr Type kNonQuantTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kI32};

// Test names allow only letters, digits and '_'.
std::string sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

std::vector<OpCase> make_catalogue() {
  std::vector<OpCase> cases;
  auto add_case = [&](Op op, const std::string& name, CaseBuildFn fn) {
    cases.push_back({sanitize(name), op, std::move(fn)});
  };

  // ---- views: the output is the view itself (read through view_src on each backend) ----
  for (Type t : kAllTypes) {
    const std::string s = tn(t);
    add_case(Op::kView, "view_1d_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4);
      return a ? view_1d(b.ctx(), a, 64, a->nb[1]) : nullptr;
    });
    // Second half of each of three rows: non-contiguous.
    add_case(Op::kView, "view_2d_strided_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4);
      return a ? view_2d(b.ctx(), a, 32, 3, a->nb[1], row_size(t, 32)) : nullptr;
    });
    add_case(Op::kView, "view_4d_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4, 3, 2);
      return a ? view_4d(b.ctx(), a, 32, 2, 3, 1, a->nb[1], a->nb[2], a->nb[3], a->nb[3] + a->nb[1] + row_size(t, 32))
               : nullptr;
    });
    add_case(Op::kReshape, "reshape_2d_" + s,
             [t](CaseBuilder& b) { return reshape_2d(b.ctx(), b.input(t, 64, 6), 128, 3); });
    add_case(Op::kReshape, "reshape_4d_" + s,
             [t](CaseBuilder& b) { return reshape_4d(b.ctx(), b.input(t, 64, 6), 32, 2, 3, 2); });
    add_case(Op::kPermute, "permute_0213_" + s,
             [t](CaseBuilder& b) { return permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3); });
  }
  for (Type t : kNonQuantTypes) {
    const std::string s = tn(t);
    add_case(Op::kPermute, "permute_1203_" + s,
             [t](CaseBuilder& b) { return permute(b.ctx(), b.input(t, 6, 3, 4, 2), 1, 2, 0, 3); });
    add_case(Op::kTranspose, "transpose_" + s, [t](CaseBuilder& b) { return transpose(b.ctx(), b.input(t, 16, 5)); });
  }

  // ---- copies ----
  for (Type ta : kWeightTypes) {
    for (Type tb : kWeightTypes) {
      add_case(Op::kCpy, "cpy_" + tn(ta) + "_" + tn(tb), [ta, tb](CaseBuilder& b) {
        return cpy(b.ctx(), b.input(ta, 64, 4), b.input(tb, 128, 2));  // same count, different shape: flat order
      });
    }
  }
  add_case(Op::kCpy, "cpy_i32_i32",
           [](CaseBuilder& b) { return cpy(b.ctx(), b.input(Type::kI32, 64, 4), b.input(Type::kI32, 128, 2)); });
  for (Type ta : kFloatTypes) {
    for (Type tb : kWeightTypes) {
      add_case(Op::kCpy, "cpy_transposed_" + tn(ta) + "_" + tn(tb), [ta, tb](CaseBuilder& b) {
        return cpy(b.ctx(), transpose(b.ctx(), b.input(ta, 8, 64)), b.input(tb, 64, 8));
      });
    }
  }
  add_case(Op::kCpy, "cpy_transposed_i32_i32", [](CaseBuilder& b) {
    return cpy(b.ctx(), transpose(b.ctx(), b.input(Type::kI32, 8, 64)), b.input(Type::kI32, 64, 8));
  });
  for (Type t : kAllTypes) {
    const std::string s = tn(t);
    add_case(Op::kCont, "cont_" + s, [t](CaseBuilder& b) { return cont(b.ctx(), b.input(t, 64, 4, 3)); });
    add_case(Op::kCont, "cont_permuted_" + s,
             [t](CaseBuilder& b) { return cont(b.ctx(), permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3)); });
    add_case(Op::kDup, "dup_permuted_" + s,
             [t](CaseBuilder& b) { return dup(b.ctx(), permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3)); });
  }
  // cast (ggml_cast, a CPY into a tensor of its own: llama.cpp's f32 mask to f16) and cont_4d (another shape in flat
  // order: llama.cpp's heads merged by ggml_cont_2d), a few types each (the copy kernels are CPY's and CONT's)
  for (auto [ta, tb] : {std::pair{Type::kF32, Type::kF16}, {Type::kF16, Type::kF32}, {Type::kF32, Type::kQ8_0}}) {
    add_case(Op::kCpy, "cast_" + tn(ta) + "_" + tn(tb),
             [ta, tb](CaseBuilder& b) { return cast(b.ctx(), b.input(ta, 64, 4, 3), tb); });
  }
  for (Type t : {Type::kF32, Type::kF16, Type::kQ4_0}) {
    add_case(Op::kCont, "cont_4d_permuted_" + tn(t), [t](CaseBuilder& b) {
      return cont_4d(b.ctx(), permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3), 256, 3, 2, 1);
    });
  }
  for (Type t : kNonQuantTypes) {
    add_case(Op::kCont, "cont_transposed_" + tn(t),
             [t](CaseBuilder& b) { return cont(b.ctx(), transpose(b.ctx(), b.input(t, 16, 5))); });
  }

  // ---- element-wise ----
  using BinaryFn = Tensor* (*)(Context&, Tensor*, Tensor*);
  const std::pair<const char*, std::pair<Op, BinaryFn>> binaries[] = {
      {"add", {Op::kAdd, &tessera::add}}, {"mul", {Op::kMul, &tessera::mul}}, {"div", {Op::kDiv, &tessera::div}}};
  for (const auto& [name, opfn] : binaries) {
    const Op op = opfn.first;
    const BinaryFn fn = opfn.second;
    for (Type ta : kFloatTypes) {
      for (Type tb : kFloatTypes) {
        add_case(op, std::string(name) + "_bcast_" + tn(ta) + "_" + tn(tb), [ta, tb, fn](CaseBuilder& b) {
          return fn(b.ctx(), b.input(ta, 64, 4, 3, 2), b.input(tb, 64, 1, 3, 1));
        });
      }
    }
    add_case(op, std::string(name) + "_same_f32_f32", [fn](CaseBuilder& b) {
      return fn(b.ctx(), b.input(Type::kF32, 64, 4, 3, 2), b.input(Type::kF32, 64, 4, 3, 2));
    });
    add_case(op, std::string(name) + "_bcast_dim0_f32_f32", [fn](CaseBuilder& b) {
      return fn(b.ctx(), b.input(Type::kF32, 64, 4, 3, 2), b.input(Type::kF32, 1, 4, 1, 2));
    });
  }
  const std::pair<const char*, UnaryOp> unaries[] = {
      {"silu", UnaryOp::kSilu}, {"gelu", UnaryOp::kGelu}, {"relu", UnaryOp::kRelu}, {"neg", UnaryOp::kNeg}};
  const std::pair<const char*, GluOp> glus[] = {{"swiglu", GluOp::kSwiglu}, {"geglu", GluOp::kGeglu}};
  for (Type t : kFloatTypes) {
    const std::string s = tn(t);
    add_case(Op::kScale, "scale_" + s,
             [t](CaseBuilder& b) { return scale(b.ctx(), b.input(t, 64, 4, 3), 0.75f, 0.25f); });
    for (const auto& [name, u] : unaries) {
      add_case(Op::kUnary, std::string("unary_") + name + "_" + s,
               [t, u = u](CaseBuilder& b) { return unary(b.ctx(), b.input(t, 64, 4, 3), u); });
    }
    for (const auto& [name, g] : glus) {
      const std::string base = std::string("glu_") + name;
      add_case(Op::kGlu, base + "_split_" + s,
               [t, g = g](CaseBuilder& b) { return glu(b.ctx(), b.input(t, 128, 4, 3), nullptr, g, false); });
      add_case(Op::kGlu, base + "_split_swapped_" + s,
               [t, g = g](CaseBuilder& b) { return glu(b.ctx(), b.input(t, 128, 4, 3), nullptr, g, true); });
      add_case(Op::kGlu, base + "_two_inputs_" + s, [t, g = g](CaseBuilder& b) {
        return glu(b.ctx(), b.input(t, 64, 4, 3), b.input(t, 64, 4, 3), g, false);
      });
    }
    // gpt-oss's SWIGLU_OAI: values up to 8 in magnitude against a limit of 3, so both clamps act.
    for (int form = 0; form < 3; ++form) {
      const char* fname[] = {"split", "split_swapped", "two_inputs"};
      add_case(Op::kGlu, std::string("glu_swiglu_oai_") + fname[form] + "_" + s, [t, form](CaseBuilder& b) {
        Tensor* a = b.input(t, form == 2 ? 64 : 128, 4, 3, 1, 8.0f);
        Tensor* l = form == 2 ? b.input(t, 64, 4, 3, 1, 8.0f) : nullptr;
        return swiglu_oai(b.ctx(), a, l, 1.702f, 3.0f, form == 1);
      });
    }

    // ---- reductions / norms ----
    add_case(Op::kRmsNorm, "rms_norm_" + s,
             [t](CaseBuilder& b) { return rms_norm(b.ctx(), b.input(t, 64, 4, 3), 1e-5f); });
    add_case(Op::kNorm, "norm_" + s, [t](CaseBuilder& b) { return norm(b.ctx(), b.input(t, 64, 4, 3), 1e-5f); });
    add_case(Op::kSumRows, "sum_rows_" + s, [t](CaseBuilder& b) { return sum_rows(b.ctx(), b.input(t, 64, 4, 3)); });
    add_case(Op::kSoftMax, "soft_max_" + s,
             [t](CaseBuilder& b) { return soft_max(b.ctx(), b.input(t, 32, 4, 3, 2), nullptr, 1.0f); });
    for (Type tm : {Type::kF32, Type::kF16}) {
      // Mask with more rows than a and broadcast over dim 3.
      add_case(Op::kSoftMax, "soft_max_mask_" + s + "_" + tn(tm), [t, tm](CaseBuilder& b) {
        return soft_max(b.ctx(), b.input(t, 32, 4, 3, 2), b.input(tm, 32, 6, 3, 1), 0.5f);
      });
      // Causal mask with -inf and one row entirely -inf (must give zeros, not NaN).
      add_case(Op::kSoftMax, "soft_max_causal_" + s + "_" + tn(tm), [t, tm](CaseBuilder& b) {
        return soft_max(b.ctx(), b.input(t, 8, 6, 2, 1), b.custom(tm, {8, 6}, causal_mask(2, 5)), 0.125f);
      });
    }
    // Attention sinks (one per head, ne2 = 3), alone and with a causal mask that has a fully masked row.
    add_case(Op::kSoftMax, "soft_max_sinks_" + s, [t](CaseBuilder& b) {
      return soft_max(b.ctx(), b.input(t, 32, 4, 3, 2), nullptr, 0.5f, b.input(Type::kF32, 3, 1, 1, 1, 2.0f));
    });
    add_case(Op::kSoftMax, "soft_max_sinks_causal_" + s, [t](CaseBuilder& b) {
      return soft_max(b.ctx(), b.input(t, 8, 6, 3, 1), b.custom(Type::kF16, {8, 6}, causal_mask(2, 5)), 0.125f,
                      b.input(Type::kF32, 3, 1, 1, 1, 2.0f));
    });

    // ---- positional ----
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      const std::string m = mode == RopeMode::kNormal ? "normal" : "neox";
      add_case(Op::kRope, "rope_" + m + "_" + s,
               [t, mode](CaseBuilder& b) { return rope(b.ctx(), b.input(t, 64, 4, 5), b.indices(100, 5), 64, mode); });
      // Partial rotation (dims >= n_dims copied), other base/scale, frequency factors.
      add_case(Op::kRope, "rope_" + m + "_partial_ff_" + s, [t, mode](CaseBuilder& b) {
        return rope(b.ctx(), b.input(t, 64, 4, 5), b.indices(100, 5), 32, mode, 500000.0f, 0.5f,
                    b.custom(Type::kF32, {16}, uniform_values(1.0f, 3.0f)));
      });
      // YaRN (gpt-oss-20b's: factor 32 over 4096 trained positions, base 150000, ext_factor 1): the ramp's ends
      // fall inside the rotated pairs (low 8, high 18 of 32), positions far beyond 4096; then a partial rotation with
      // frequency factors, ext_factor 0.5 and an attention factor.
      add_case(Op::kRope, "rope_" + m + "_yarn_" + s, [t, mode](CaseBuilder& b) {
        RopeYarn y;
        y.n_ctx_orig = 4096;
        y.ext_factor = 1.0f;
        return rope_ext(b.ctx(), b.input(t, 64, 4, 5), b.indices(100000, 5), 64, mode, 150000.0f, 1.0f / 32.0f, y);
      });
      add_case(Op::kRope, "rope_" + m + "_yarn_partial_ff_" + s, [t, mode](CaseBuilder& b) {
        RopeYarn y;
        y.n_ctx_orig = 2048;
        y.ext_factor = 0.5f;
        y.attn_factor = 0.75f;
        y.beta_fast = 16.0f;
        y.beta_slow = 2.0f;
        return rope_ext(b.ctx(), b.input(t, 64, 4, 5), b.indices(20000, 5), 32, mode, 10000.0f, 0.25f, y,
                        b.custom(Type::kF32, {16}, uniform_values(1.0f, 3.0f)));
      });
    }

    // ---- indexing on Float ----
    for (SortOrder order : {SortOrder::kAsc, SortOrder::kDesc}) {
      // bf16/f16 inputs produce ties: the stable order (lower index first) must agree exactly.
      add_case(Op::kArgsort, std::string("argsort_") + (order == SortOrder::kAsc ? "asc_" : "desc_") + s,
               [t, order](CaseBuilder& b) { return argsort(b.ctx(), b.input(t, 33, 4, 2), order); });
    }
    add_case(Op::kTopK, "top_k_" + s, [t](CaseBuilder& b) { return top_k(b.ctx(), b.input(t, 40, 4, 2), 5); });
  }

  // ---- matmul ----
  for (Type ta : kWeightTypes) {
    const std::string s = tn(ta);
    add_case(Op::kMulMat, "mul_mat_bcast_" + s + "_f32", [ta](CaseBuilder& b) {
      return mul_mat(b.ctx(), b.input(ta, 64, 16, 2, 1), b.input(Type::kF32, 64, 5, 4, 2));
    });
    add_case(Op::kMulMat, "mul_mat_vec_" + s + "_f32",
             [ta](CaseBuilder& b) { return mul_mat(b.ctx(), b.input(ta, 128, 16), b.input(Type::kF32, 128, 1)); });
    // K of 9 blocks of 32: long enough for the grouped block dots of SIMD kernels (8 q4_0 / 4 q8_0 blocks per step),
    // with a remainder
    add_case(Op::kMulMat, "mul_mat_vec_k288_" + s + "_f32",
             [ta](CaseBuilder& b) { return mul_mat(b.ctx(), b.input(ta, 288, 16), b.input(Type::kF32, 288, 2)); });
    for (int64_t b1 : {int64_t{1}, int64_t{2}}) {
      add_case(Op::kMulMatId, "mul_mat_id_b" + std::to_string(b1) + "_" + s + "_f32", [ta, b1](CaseBuilder& b) {
        return mul_mat_id(b.ctx(), b.input(ta, 64, 16, 4), b.input(Type::kF32, 64, b1, 5), b.indices(4, 2, 5));
      });
    }
  }

  // ---- indexing ----
  for (Type t : kAllTypes) {
    add_case(Op::kGetRows, "get_rows_" + tn(t),
             [t](CaseBuilder& b) { return get_rows(b.ctx(), b.input(t, 64, 10, 2, 1), b.indices(10, 6, 2, 1)); });
  }
  for (Type t : kWeightTypes) {
    add_case(Op::kSetRows, "set_rows_" + tn(t), [t](CaseBuilder& b) {
      return set_rows(b.ctx(), b.input(t, 64, 10, 2, 1), b.input(Type::kF32, 64, 4, 2, 1),
                      b.custom(Type::kI32, {4, 2, 1}, distinct_indices(10)));
    });
  }

  // ADD_ID: per-expert bias rows (8 experts, 4 used per token, 5 tokens).
  add_case(Op::kAddId, "add_id_f32", [](CaseBuilder& b) {
    return add_id(b.ctx(), b.input(Type::kF32, 64, 4, 5), b.input(Type::kF32, 64, 8), b.indices(8, 4, 5));
  });
  add_case(Op::kAddId, "add_id_permuted_f32", [](CaseBuilder& b) {
    Tensor* a = permute(b.ctx(), b.input(Type::kF32, 48, 5, 3), 0, 2, 1, 3);  // [48, 3, 5], strided
    return add_id(b.ctx(), a, b.input(Type::kF32, 48, 6), b.indices(6, 3, 5));
  });

  // CLAMP (f32): both bounds inside the values' range (magnitudes 1/8 to 1), llama.cpp's [2^-14, +inf] of the MoE
  // weights' sum, and a strided source.
  add_case(Op::kClamp, "clamp_f32",
           [](CaseBuilder& b) { return clamp(b.ctx(), b.input(Type::kF32, 64, 4, 3), -0.5f, 0.5f); });
  add_case(Op::kClamp, "clamp_min_only_f32",
           [](CaseBuilder& b) { return clamp(b.ctx(), b.input(Type::kF32, 1, 7, 2), 6.103515625e-5f, INFINITY); });
  add_case(Op::kClamp, "clamp_permuted_f32", [](CaseBuilder& b) {
    return clamp(b.ctx(), permute(b.ctx(), b.input(Type::kF32, 48, 5, 3), 0, 2, 1, 3), -INFINITY, 0.25f);
  });

  // ---- attention ----
  const float kq_scale = 0.125f;
  for (Type tk : kWeightTypes) {
    for (Type tv : kWeightTypes) {
      add_case(Op::kFlashAttnExt, "flash_attn_ext_" + tn(tk) + "_" + tn(tv), [tk, tv, kq_scale](CaseBuilder& b) {
        // GQA: 4 query heads over 2 kv heads; mask rows >= n_q.
        return flash_attn_ext(b.ctx(), b.input(Type::kF32, 64, 7, 4, 1), b.input(tk, 64, 12, 2, 1),
                              b.input(tv, 64, 12, 2, 1), b.custom(Type::kF16, {12, 8}, causal_mask(5)), kq_scale);
      });
    }
  }
  auto fa_variant = [&](const std::string& name, int64_t dv, int64_t batch, int mask_kind, bool sinks) {
    add_case(Op::kFlashAttnExt, "flash_attn_ext_f16_f16_" + name, [=](CaseBuilder& b) {
      Tensor* q = b.input(Type::kF32, 64, 7, 4, batch);
      Tensor* k = b.input(Type::kF16, 64, 12, 2, batch);
      Tensor* v = b.input(Type::kF16, dv, 12, 2, batch);
      Tensor* mask = nullptr;
      if (mask_kind == 1) mask = b.custom(Type::kF32, {12, 7}, causal_mask(5));
      if (mask_kind == 2) mask = b.custom(Type::kF16, {12, 8}, causal_mask(5, 3));  // query row 3 fully masked
      Tensor* s = sinks ? b.input(Type::kF32, 4) : nullptr;
      return flash_attn_ext(b.ctx(), q, k, v, mask, kq_scale, s);
    });
  };
  fa_variant("nomask", 64, 1, 0, false);
  fa_variant("mask_f32", 64, 1, 1, false);
  fa_variant("masked_row", 64, 1, 2, false);
  fa_variant("sinks", 64, 1, 1, true);
  fa_variant("sinks_masked_row", 64, 1, 2, true);
  fa_variant("sinks_nomask", 64, 1, 0, true);
  fa_variant("dv32_batch2", 32, 2, 1, false);
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_catalogue() {
  static const std::vector<OpCase> catalogue = make_catalogue();
  return catalogue;
}

}  // namespace tessera::conformance
