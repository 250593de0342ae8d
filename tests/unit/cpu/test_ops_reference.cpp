// Op tests, part 1: misuse of the building functions. Each invalid build returns nullptr and records a clear error in
// the context; later builders given that nullptr return nullptr without replacing the first error.
// The correctness of every op against the float64 oracle is in test_ops_reference_{elementwise,matmul,index,copy}.cpp.
#include "unit/cpu/op_oracle.h"

namespace tessera::optest {
namespace {

struct Misuse {
  const char* name;
  std::function<Tensor*(Context&)> build;
};

Tensor* T(Context& ctx, Type t, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1) {
  const int64_t ne[4] = {ne0, ne1, ne2, ne3};
  Tensor* x = ctx.new_tensor(t, 4, ne);
  EXPECT_NE(x, nullptr) << "valid tensor creation failed: " << ctx.status().to_string();
  return x;
}

const Misuse kMisuses[] = {
    // tensor creation
    {"quantized_ne0_not_multiple_of_32", [](Context& c) { return c.new_tensor_2d(Q8, 33, 2); }},
    {"q4_0_ne0_16", [](Context& c) { return c.new_tensor_1d(Q4, 16); }},
    {"negative_ne", [](Context& c) { return c.new_tensor_2d(F32, 4, -1); }},
    {"n_dims_5",
     [](Context& c) {
       const int64_t ne[5] = {1, 1, 1, 1, 1};
       return c.new_tensor(F32, 5, ne);
     }},
    // element-wise
    {"add_not_broadcastable", [](Context& c) { return add(c, T(c, F32, 4, 3), T(c, F32, 3, 3)); }},
    {"mul_b_larger_than_a", [](Context& c) { return mul(c, T(c, F32, 4, 1), T(c, F32, 4, 2)); }},
    {"div_i32", [](Context& c) { return div(c, T(c, I32, 4), T(c, I32, 4)); }},
    {"add_quantized", [](Context& c) { return add(c, T(c, Q8, 32), T(c, F32, 32)); }},
    {"unary_i32", [](Context& c) { return unary(c, T(c, I32, 8), UnaryOp::kSilu); }},
    {"scale_q4_0", [](Context& c) { return scale(c, T(c, Q4, 32), 2.0f); }},
    {"glu_single_odd_ne0", [](Context& c) { return glu(c, T(c, F32, 7, 2), nullptr, GluOp::kSwiglu); }},
    {"glu_two_inputs_shape_mismatch",
     [](Context& c) { return glu(c, T(c, F32, 8, 2), T(c, F32, 8, 3), GluOp::kGeglu); }},
    // norms / softmax
    {"rms_norm_i32", [](Context& c) { return rms_norm(c, T(c, I32, 8), 1e-5f); }},
    {"soft_max_mask_ne0_mismatch", [](Context& c) { return soft_max(c, T(c, F32, 8, 4), T(c, F32, 7, 4)); }},
    {"soft_max_mask_too_few_rows", [](Context& c) { return soft_max(c, T(c, F32, 8, 4), T(c, F32, 8, 3)); }},
    {"soft_max_mask_i32", [](Context& c) { return soft_max(c, T(c, F32, 8, 4), T(c, I32, 8, 4)); }},
    // rope
    {"rope_pos_not_i32", [](Context& c) { return rope(c, T(c, F32, 8, 2, 3), T(c, F32, 3), 8); }},
    {"rope_n_dims_odd", [](Context& c) { return rope(c, T(c, F32, 8, 2, 3), T(c, I32, 3), 7); }},
    {"rope_n_dims_above_head_dim", [](Context& c) { return rope(c, T(c, F32, 8, 2, 3), T(c, I32, 3), 10); }},
    {"rope_pos_count_mismatch", [](Context& c) { return rope(c, T(c, F32, 8, 2, 3), T(c, I32, 4), 8); }},
    // matmul
    {"mul_mat_k_mismatch", [](Context& c) { return mul_mat(c, T(c, F32, 64, 4), T(c, F32, 32, 3)); }},
    {"mul_mat_b_not_f32", [](Context& c) { return mul_mat(c, T(c, F32, 32, 4), T(c, F16, 32, 3)); }},
    {"mul_mat_batch_not_divisible", [](Context& c) { return mul_mat(c, T(c, F32, 32, 4, 2), T(c, F32, 32, 3, 3)); }},
    {"mul_mat_a_i32", [](Context& c) { return mul_mat(c, T(c, I32, 32, 4), T(c, F32, 32, 3)); }},
    {"mul_mat_id_ids_not_i32",
     [](Context& c) { return mul_mat_id(c, T(c, Q8, 32, 4, 3), T(c, F32, 32, 1, 2), T(c, F32, 2, 2)); }},
    {"mul_mat_id_bad_b1",
     [](Context& c) { return mul_mat_id(c, T(c, Q8, 32, 4, 3), T(c, F32, 32, 3, 2), T(c, I32, 2, 2)); }},
    // indexing
    {"get_rows_ids_not_i32", [](Context& c) { return get_rows(c, T(c, F32, 8, 4), T(c, F32, 3)); }},
    {"set_rows_dst_i32", [](Context& c) { return set_rows(c, T(c, I32, 8, 4), T(c, F32, 8, 2), T(c, I32, 2)); }},
    {"set_rows_rows_not_f32", [](Context& c) { return set_rows(c, T(c, F16, 8, 4), T(c, F16, 8, 2), T(c, I32, 2)); }},
    {"set_rows_ne0_mismatch", [](Context& c) { return set_rows(c, T(c, F16, 8, 4), T(c, F32, 7, 2), T(c, I32, 2)); }},
    {"argsort_i32", [](Context& c) { return argsort(c, T(c, I32, 8), SortOrder::kAsc); }},
    {"top_k_k_above_ne0", [](Context& c) { return top_k(c, T(c, F32, 8, 2), 9); }},
    // attention
    {"flash_attn_heads_not_divisible",
     [](Context& c) {
       return flash_attn_ext(c, T(c, F32, 32, 2, 3), T(c, F16, 32, 5, 2), T(c, F16, 32, 5, 2), nullptr, 1.0f);
     }},
    {"flash_attn_q_not_f32",
     [](Context& c) {
       return flash_attn_ext(c, T(c, F16, 32, 2, 2), T(c, F16, 32, 5, 2), T(c, F16, 32, 5, 2), nullptr, 1.0f);
     }},
    {"flash_attn_k_v_length_mismatch",
     [](Context& c) {
       return flash_attn_ext(c, T(c, F32, 32, 2, 2), T(c, F16, 32, 5, 2), T(c, F16, 32, 6, 2), nullptr, 1.0f);
     }},
    // copies and views
    {"cpy_i32_to_f32", [](Context& c) { return cpy(c, T(c, I32, 8), T(c, F32, 8)); }},
    {"cpy_f32_to_i32", [](Context& c) { return cpy(c, T(c, F32, 8), T(c, I32, 8)); }},
    {"cpy_count_mismatch", [](Context& c) { return cpy(c, T(c, F32, 8), T(c, F32, 9)); }},
    {"reshape_count_mismatch", [](Context& c) { return reshape_2d(c, T(c, F32, 8, 3), 5, 5); }},
    {"reshape_non_contiguous", [](Context& c) { return reshape_1d(c, transpose(c, T(c, F32, 8, 3)), 24); }},
    {"view_outside_span", [](Context& c) { return view_1d(c, T(c, F32, 8), 8, 4); }},
    {"transpose_quantized", [](Context& c) { return transpose(c, T(c, Q8, 32, 2)); }},
    {"permute_quantized_moves_dim0", [](Context& c) { return permute(c, T(c, Q4, 32, 2), 1, 0, 2, 3); }},
    {"permute_not_a_permutation", [](Context& c) { return permute(c, T(c, F32, 4, 2), 0, 0, 2, 3); }},
};

class OpBuildMisuse : public testing::TestWithParam<Misuse> {};

TEST_P(OpBuildMisuse, ReturnsNullWithErrorAndPropagates) {
  const Misuse& m = GetParam();
  Context ctx({.no_alloc = true});
  ASSERT_TRUE(ctx.ok());
  Tensor* r = m.build(ctx);
  EXPECT_EQ(r, nullptr);
  ASSERT_FALSE(ctx.ok()) << "no error recorded";
  EXPECT_NE(ctx.status().code(), StatusCode::kOk);
  EXPECT_FALSE(ctx.status().message().empty());
  // Sticky: later builders given the nullptr return nullptr and keep the first error.
  const std::string first = ctx.status().message();
  Tensor* ok_tensor = ctx.new_tensor_1d(Type::kF32, 8);
  EXPECT_EQ(add(ctx, r, ok_tensor), nullptr);
  EXPECT_EQ(mul_mat(ctx, r, ok_tensor), nullptr);
  EXPECT_EQ(cont(ctx, r), nullptr);
  EXPECT_EQ(soft_max(ctx, r, nullptr, 1.0f), nullptr);
  EXPECT_EQ(ctx.status().message(), first);
}

INSTANTIATE_TEST_SUITE_P(Cases, OpBuildMisuse, testing::ValuesIn(kMisuses),
                         [](const testing::TestParamInfo<Misuse>& i) { return std::string(i.param.name); });

// A nullptr source (a failed earlier build) gives nullptr without recording a new error (context.h).
TEST(OpBuildNullSource, NoNewError) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 8, 4);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  EXPECT_EQ(add(ctx, a, nullptr), nullptr);
  EXPECT_EQ(add(ctx, nullptr, a), nullptr);
  EXPECT_EQ(unary(ctx, nullptr, UnaryOp::kGelu), nullptr);
  EXPECT_EQ(mul_mat(ctx, nullptr, a), nullptr);
  EXPECT_EQ(get_rows(ctx, a, nullptr), nullptr);
  EXPECT_EQ(set_rows(ctx, a, nullptr, ids), nullptr);
  EXPECT_EQ(rope(ctx, nullptr, ids, 8), nullptr);
  EXPECT_EQ(flash_attn_ext(ctx, nullptr, a, a, nullptr, 1.0f), nullptr);
  EXPECT_EQ(cpy(ctx, nullptr, a), nullptr);
  EXPECT_EQ(permute(ctx, nullptr, 0, 1, 2, 3), nullptr);
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
}

// Valid builds of every op leave the context ok (guards the misuse table against rejecting everything).
TEST(OpBuildValid, EveryOpBuilds) {
  Context ctx({.no_alloc = true});
  Tensor* a = T(ctx, F32, 64, 4, 2);
  Tensor* h = T(ctx, F16, 64, 4, 2);
  Tensor* w = T(ctx, Q4, 64, 5);
  Tensor* ids = T(ctx, I32, 3, 2);
  Tensor* pos = T(ctx, I32, 2);
  const std::vector<Tensor*> outs = {add(ctx, a, h),
                                     mul(ctx, h, a),
                                     div(ctx, a, T(ctx, F32, 64)),
                                     scale(ctx, a, 2.0f, 1.0f),
                                     unary(ctx, h, UnaryOp::kRelu),
                                     glu(ctx, a, nullptr, GluOp::kGeglu, true),
                                     glu(ctx, a, a, GluOp::kSwiglu),
                                     rms_norm(ctx, a, 1e-6f),
                                     norm(ctx, h, 1e-6f),
                                     sum_rows(ctx, a),
                                     soft_max(ctx, a, T(ctx, F16, 64, 6), 0.5f),
                                     rope(ctx, reshape_3d(ctx, T(ctx, F32, 64, 4), 16, 8, 2), pos, 16, RopeMode::kNeox),
                                     mul_mat(ctx, w, a),
                                     mul_mat_id(ctx, T(ctx, Q8, 64, 5, 4), T(ctx, F32, 64, 1, 2), ids),
                                     get_rows(ctx, w, T(ctx, I32, 3)),
                                     set_rows(ctx, T(ctx, Q8, 64, 4), T(ctx, F32, 64, 2), T(ctx, I32, 2)),
                                     argsort(ctx, a, SortOrder::kDesc),
                                     top_k(ctx, a, 3),
                                     flash_attn_ext(ctx, T(ctx, F32, 64, 2, 4), T(ctx, Q8, 64, 7, 2),
                                                    T(ctx, F16, 32, 7, 2), T(ctx, F16, 7, 2), 0.125f, T(ctx, F32, 4)),
                                     cpy(ctx, a, T(ctx, Q8, 512)),
                                     cont(ctx, transpose(ctx, a)),
                                     dup(ctx, w),
                                     view_2d(ctx, a, 8, 3, a->nb[1], 4),
                                     permute(ctx, w, 0, 2, 1, 3)};
  for (size_t i = 0; i < outs.size(); ++i) EXPECT_NE(outs[i], nullptr) << "build " << i;
  EXPECT_TRUE(ctx.ok()) << ctx.status().to_string();
}

}  // namespace
}  // namespace tessera::optest
