// Tensors, contexts, views and graph building: shapes, strides, errors and graph order.
#include <gtest/gtest.h>

#include <limits>
#include <string>
#include <vector>

#include "tessera/build.h"
#include "tessera/graph.h"

using namespace tessera;

TEST(Tensor, ContiguousStridesAndSizes) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_3d(Type::kF16, 5, 3, 2);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->nb[0], 2u);
  EXPECT_EQ(a->nb[1], 10u);
  EXPECT_EQ(a->nb[2], 30u);
  EXPECT_EQ(a->nb[3], 60u);
  EXPECT_EQ(nbytes(*a), 60u);
  EXPECT_EQ(nelements(*a), 30);
  EXPECT_EQ(nrows(*a), 6);
  EXPECT_EQ(n_dims(*a), 3);
  EXPECT_TRUE(is_contiguous(*a));
  EXPECT_EQ(a->data, nullptr);  // no_alloc
  Tensor* q = ctx.new_tensor_2d(Type::kQ4_0, 64, 3);
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->nb[0], 18u);
  EXPECT_EQ(q->nb[1], 36u);
  EXPECT_EQ(nbytes(*q), 108u);
}

TEST(Tensor, NonContiguousSpanIsFirstToLastElement) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 4, 3);
  Tensor* t = transpose(ctx, a);
  ASSERT_NE(t, nullptr);
  EXPECT_FALSE(is_contiguous(*t));
  EXPECT_TRUE(is_transposed(*t));
  // elements at byte offsets i0*16 + i1*4: last at 2*16 + 3*4 = 44, span 48
  EXPECT_EQ(nbytes(*t), 48u);
  Tensor* v = view_2d(ctx, a, 2, 3, a->nb[1], 4);  // columns 1..2 of each row
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(nbytes(*v), 2u * 16 + 8);
}

TEST(Tensor, HostContextOwnsAlignedMemoryAndHonoursItsLimit) {
  Context ctx({.no_alloc = false, .mem_size = 1024});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 100);
  ASSERT_NE(a, nullptr);
  ASSERT_NE(a->data, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a->data) % 64, 0u);
  static_cast<float*>(a->data)[99] = 1.0f;  // writable (ASan checks the bounds)
  EXPECT_EQ(ctx.new_tensor_1d(Type::kF32, 1000), nullptr);
  EXPECT_EQ(ctx.status().code(), StatusCode::kAllocFailed);
  EXPECT_NE(ctx.status().message().find("out of host memory"), std::string::npos);
}

TEST(Tensor, NamesAreTruncatedAndFound) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 1);
  set_name(*a, std::string(100, 'x'));
  EXPECT_EQ(std::string(a->name).size(), 63u);
  format_name(*a, "blk.%d.attn_q", 7);
  EXPECT_STREQ(a->name, "blk.7.attn_q");
  EXPECT_EQ(ctx.find("blk.7.attn_q"), a);
  EXPECT_EQ(ctx.find("nope"), nullptr);
}

TEST(Tensor, InvalidCreationIsAClearError) {
  Context ctx({.no_alloc = true});
  const int64_t ne[2] = {33, 2};
  EXPECT_EQ(ctx.new_tensor(Type::kQ8_0, 2, ne), nullptr);
  EXPECT_EQ(ctx.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(ctx.status().message().find("multiple of the block size"), std::string::npos) << ctx.status().message();
  ctx.clear_error();
  EXPECT_EQ(ctx.new_tensor(Type::kF32, 5, ne), nullptr);
  EXPECT_NE(ctx.status().message().find("n_dims"), std::string::npos);
  ctx.clear_error();
  const int64_t neg[1] = {-1};
  EXPECT_EQ(ctx.new_tensor(Type::kF32, 1, neg), nullptr);
  ctx.clear_error();
  EXPECT_EQ(ctx.new_tensor_1d(static_cast<Type>(42), 4), nullptr);
  ctx.clear_error();
  const int64_t huge[4] = {int64_t(1) << 40, int64_t(1) << 40, int64_t(1) << 40, 1};
  EXPECT_EQ(ctx.new_tensor(Type::kF32, 4, huge), nullptr);
  EXPECT_NE(ctx.status().message().find("overflows"), std::string::npos);
}

// The byte size of a tensor near 2^64 through its first row alone (ne0 / block size * type size): it must either fit,
// with nbytes equal to the exact product, or be refused as an overflow. Before the check covered the first product,
// an f32 tensor of 2^62 + 1 elements got nbytes 4 (a 4-byte buffer any kernel would write far past). The expected
// size is computed in 128 bits, independently of the code under test.
TEST(Context, FirstRowSizeNearTwoToTheSixtyFourIsExactOrRefused) {
  Context ctx({.no_alloc = true});
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int ti = 0; ti < kTypeCount; ++ti) {
    const Type type = static_cast<Type>(ti);
    const TypeTraits& tt = type_traits(type);
    const int64_t bs = tt.block_size;
    std::vector<int64_t> lengths;
    for (int64_t base :
         {int64_t{1} << 60, int64_t{1} << 61, int64_t{1} << 62, (int64_t{1} << 62) + (int64_t{1} << 61), kMax}) {
      const int64_t aligned = base / bs * bs;
      for (int64_t k : {int64_t{-1}, int64_t{0}, int64_t{1}}) {
        if (k > 0 && aligned > kMax - bs) continue;
        if (aligned + k * bs > 0) lengths.push_back(aligned + k * bs);
      }
    }
    for (int64_t ne0 : lengths) {
      SCOPED_TRACE(std::string(tt.name) + " ne0 = " + std::to_string(ne0));
      const unsigned __int128 exact = static_cast<unsigned __int128>(ne0 / bs) * tt.type_size;
      Tensor* t = ctx.new_tensor_1d(type, ne0);
      if (t == nullptr) {
        EXPECT_NE(ctx.status().message().find("overflows"), std::string::npos) << ctx.status().message();
        ctx.clear_error();
        continue;
      }
      EXPECT_EQ(static_cast<unsigned __int128>(nbytes(*t)), exact);
      EXPECT_LE(exact, static_cast<unsigned __int128>(std::numeric_limits<size_t>::max() >> 2));
    }
  }
  // The case from the report, through the 2-D entry point too.
  EXPECT_EQ(ctx.new_tensor_1d(Type::kF32, (int64_t{1} << 62) + 1), nullptr);
  ctx.clear_error();
  EXPECT_EQ(ctx.new_tensor_2d(Type::kF32, int64_t{1} << 62, 1), nullptr);
  ctx.clear_error();
}

// A view whose byte span or element count does not fit in 64 bits is refused, not wrapped into a small span that
// passes the bounds check: ne1 = 2^62 rows of 4 bytes span 2^64 bytes, which wrapped to 0 and made a view of 2^62
// elements over a 64-byte tensor.
TEST(Views, SpanOrElementCountOverflowIsRefused) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 16);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(view_4d(ctx, a, 1, int64_t{1} << 62, 1, 1, 4, 0, 0, 0), nullptr);
  EXPECT_NE(ctx.status().message().find("overflows"), std::string::npos) << ctx.status().message();
  ctx.clear_error();
  // Zero strides alias one element; 2^40 x 2^40 of them is more elements than int64 holds.
  EXPECT_EQ(view_4d(ctx, a, 1, int64_t{1} << 40, int64_t{1} << 40, 1, 0, 0, 0, 0), nullptr);
  EXPECT_NE(ctx.status().message().find("overflows"), std::string::npos) << ctx.status().message();
  ctx.clear_error();
  // Within range, a stride past the end is the usual out-of-range error, and a fitting view still works.
  EXPECT_EQ(view_2d(ctx, a, 4, 5, 16, 0), nullptr);
  EXPECT_EQ(ctx.status().code(), StatusCode::kOutOfRange);
  ctx.clear_error();
  Tensor* v = view_2d(ctx, a, 4, 4, 16, 0);
  ASSERT_NE(v, nullptr);
  EXPECT_EQ(nbytes(*v), 64u);
}

TEST(Views, AliasTheRootWithAccumulatedOffset) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 8, 4);
  Tensor* v1 = view_1d(ctx, a, 16, 32);  // rows 1..2
  Tensor* v2 = view_1d(ctx, v1, 4, 8);   // 2 floats into v1
  ASSERT_NE(v2, nullptr);
  EXPECT_EQ(v1->view_src, a);
  EXPECT_EQ(v2->view_src, a);  // the root, never a view
  EXPECT_EQ(v2->src[0], v1);   // the immediate parent stays a source
  EXPECT_EQ(v2->view_offs, 40u);
  EXPECT_EQ(v2->op, Op::kView);
  EXPECT_EQ(view_1d(ctx, a, 9, 100), nullptr);  // beyond the source
  EXPECT_EQ(ctx.status().code(), StatusCode::kOutOfRange);
}

TEST(Views, ReshapePermuteTranspose) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_3d(Type::kF32, 6, 4, 2);
  Tensor* r = reshape_2d(ctx, a, 12, 4);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->ne[0], 12);
  EXPECT_EQ(r->nb[1], 48u);
  Tensor* p = permute(ctx, a, 2, 0, 1, 3);  // dim0 -> 2, dim1 -> 0, dim2 -> 1
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(p->ne[2], 6);
  EXPECT_EQ(p->ne[0], 4);
  EXPECT_EQ(p->ne[1], 2);
  EXPECT_EQ(p->nb[2], 4u);
  EXPECT_EQ(reshape_2d(ctx, p, 8, 6), nullptr);  // not contiguous
  ctx.clear_error();
  EXPECT_EQ(reshape_2d(ctx, a, 5, 5), nullptr);  // element count
  ctx.clear_error();
  EXPECT_EQ(permute(ctx, a, 0, 0, 1, 2), nullptr);  // not a permutation
  ctx.clear_error();
  Tensor* q = ctx.new_tensor_2d(Type::kQ8_0, 32, 2);
  EXPECT_EQ(transpose(ctx, q), nullptr);
  EXPECT_NE(ctx.status().message().find("quantized"), std::string::npos);
}

TEST(Build, ShapeAndTypeErrorsAreStickyAndNamed) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 8, 3);
  Tensor* b = ctx.new_tensor_2d(Type::kF32, 5, 3);
  set_name(*b, "bias");
  EXPECT_EQ(add(ctx, a, b), nullptr);
  ASSERT_FALSE(ctx.ok());
  const std::string msg = ctx.status().message();
  EXPECT_NE(msg.find("ADD"), std::string::npos) << msg;
  EXPECT_NE(msg.find("broadcast"), std::string::npos) << msg;
  // Later builders given the failed result return nullptr and keep the first error.
  EXPECT_EQ(silu(ctx, add(ctx, a, b)), nullptr);
  EXPECT_EQ(ctx.status().message(), msg);
  Graph g;
  EXPECT_FALSE(g.build_forward(nullptr).ok());
}

TEST(Build, EmptyMaskDimensionsAreAnErrorNotADivisionByZero) {
  // Found by the serialized-graph loader's fuzz sweep: a mask with ne2 == 0 divided by zero in soft_max's check.
  Context ctx({.no_alloc = true});
  Tensor* scores = ctx.new_tensor_3d(Type::kF32, 8, 4, 2);
  const int64_t ne[4] = {8, 4, 0, 1};
  Tensor* mask = ctx.new_tensor(Type::kF16, 3, ne);
  ASSERT_NE(mask, nullptr) << ctx.status().to_string();
  EXPECT_EQ(soft_max(ctx, scores, mask, 1.0f), nullptr);
  EXPECT_NE(ctx.status().message().find("does not fit"), std::string::npos) << ctx.status().to_string();
}

TEST(Build, TypeRulesOfTheOpTable) {
  Context ctx({.no_alloc = true});
  Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 3);
  Tensor* xi = ctx.new_tensor_2d(Type::kI32, 64, 3);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  Tensor* fids = ctx.new_tensor_1d(Type::kF32, 2);
  ASSERT_NE(mul_mat(ctx, w, x), nullptr);
  EXPECT_EQ(mul_mat(ctx, w, xi), nullptr);  // src1 must be f32
  ctx.clear_error();
  EXPECT_EQ(mul_mat(ctx, x, ctx.new_tensor_2d(Type::kF32, 63, 2)), nullptr);  // K mismatch
  ctx.clear_error();
  EXPECT_EQ(add(ctx, w, w), nullptr);  // element-wise ops are Float only
  ctx.clear_error();
  EXPECT_EQ(get_rows(ctx, w, fids), nullptr);  // ids must be i32
  ctx.clear_error();
  EXPECT_NE(get_rows(ctx, w, ids), nullptr);
  EXPECT_EQ(cpy(ctx, x, xi), nullptr);  // f32 -> i32 is not a conversion
  ctx.clear_error();
  EXPECT_EQ(top_k(ctx, x, 65), nullptr);
  ctx.clear_error();
  EXPECT_EQ(rope(ctx, ctx.new_tensor_3d(Type::kF32, 8, 2, 3), ids, 8), nullptr);  // 3 tokens, 2 positions
  ctx.clear_error();
  EXPECT_EQ(rms_norm(ctx, x, -1.0f), nullptr);
}

// Storage-only types (types.h) are in the Weight and Any sets: graphs with q6_k weights build; the Float set stays
// f32, f16 and bf16, and integer types copy only to and from integer types.
TEST(Build, StorageOnlyTypesInTheTypeSets) {
  Context ctx({.no_alloc = true});
  Tensor* q6 = ctx.new_tensor_2d(Type::kQ6_K, 256, 16);
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 256, 3);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 2);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  Tensor* p = mul_mat(ctx, q6, x);
  ASSERT_NE(p, nullptr) << ctx.status().to_string();
  EXPECT_EQ(p->type, Type::kF32);
  EXPECT_EQ(p->ne[0], 16);
  Tensor* r = get_rows(ctx, q6, ids);
  ASSERT_NE(r, nullptr) << ctx.status().to_string();
  EXPECT_EQ(r->type, Type::kF32);
  EXPECT_NE(set_rows(ctx, q6, ctx.new_tensor_2d(Type::kF32, 256, 2), ids), nullptr) << ctx.status().to_string();
  EXPECT_NE(cont(ctx, q6), nullptr);
  EXPECT_NE(cpy(ctx, x, ctx.new_tensor_2d(Type::kIQ4_XS, 256, 3)), nullptr) << ctx.status().to_string();
  Tensor* experts = ctx.new_tensor_3d(Type::kMXFP4, 256, 8, 4);
  EXPECT_NE(mul_mat_id(ctx, experts, ctx.new_tensor_3d(Type::kF32, 256, 2, 3), ctx.new_tensor_2d(Type::kI32, 2, 3)),
            nullptr)
      << ctx.status().to_string();
  // An integer table keeps its type through GET_ROWS (like i32).
  Tensor* i8 = ctx.new_tensor_2d(Type::kI8, 16, 4);
  Tensor* r8 = get_rows(ctx, i8, ids);
  ASSERT_NE(r8, nullptr) << ctx.status().to_string();
  EXPECT_EQ(r8->type, Type::kI8);
  EXPECT_EQ(get_rows(ctx, ctx.new_tensor_2d(Type::kF64, 16, 4), ids)->type, Type::kF32);
  EXPECT_NE(cpy(ctx, i8, ctx.new_tensor_2d(Type::kI64, 16, 4)), nullptr) << ctx.status().to_string();
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();

  EXPECT_EQ(cpy(ctx, i8, ctx.new_tensor_2d(Type::kF32, 16, 4)), nullptr);
  EXPECT_NE(ctx.status().message().find("integer types (i8, i16, i32, i64) can only be copied to and from integer"),
            std::string::npos)
      << ctx.status().to_string();
  ctx.clear_error();
  Tensor* f64 = ctx.new_tensor_2d(Type::kF64, 16, 4);
  EXPECT_EQ(add(ctx, f64, f64), nullptr);
  EXPECT_NE(ctx.status().message().find("has type f64, expected f32, f16 or bf16"), std::string::npos)
      << ctx.status().to_string();
  ctx.clear_error();
  EXPECT_EQ(mul_mat(ctx, ctx.new_tensor_2d(Type::kI16, 256, 4), x), nullptr);
  EXPECT_NE(ctx.status().message().find("has type i16, expected f32, f16, bf16 or a quantized type"), std::string::npos)
      << ctx.status().to_string();
  ctx.clear_error();
  EXPECT_EQ(mul_mat(ctx, f64, ctx.new_tensor_2d(Type::kF32, 16, 2)), nullptr);  // f64 is in Any only
  ctx.clear_error();
  EXPECT_EQ(ctx.new_tensor_1d(Type::kQ6_K, 128), nullptr) << "ne0 must be a multiple of 256";
  EXPECT_NE(ctx.status().message().find("q6_k"), std::string::npos) << ctx.status().to_string();
  ctx.clear_error();
  EXPECT_EQ(transpose(ctx, q6), nullptr);  // quantized: dim 0 stays
}

TEST(Build, ResultShapesAndParams) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_4d(Type::kF16, 32, 5, 2, 1);  // weight, broadcast over batch 4
  Tensor* b = ctx.new_tensor_4d(Type::kF32, 32, 3, 4, 1);
  Tensor* mm = mul_mat(ctx, a, b);
  ASSERT_NE(mm, nullptr);
  EXPECT_EQ(mm->ne[0], 5);
  EXPECT_EQ(mm->ne[1], 3);
  EXPECT_EQ(mm->ne[2], 4);
  EXPECT_EQ(mm->type, Type::kF32);
  EXPECT_EQ(mm->src[0], a);
  Tensor* s = scale(ctx, b, 0.5f, 2.0f);
  EXPECT_EQ(get_op_param<float>(*s, 0), 0.5f);
  EXPECT_EQ(get_op_param<float>(*s, 1), 2.0f);
  Tensor* g = glu(ctx, b, nullptr, GluOp::kSwiglu, true);
  EXPECT_EQ(g->ne[0], 16);
  EXPECT_EQ(g->op_params[1], 1);
  Tensor* q = ctx.new_tensor_4d(Type::kF32, 64, 7, 8, 1);
  Tensor* k = ctx.new_tensor_4d(Type::kF16, 64, 20, 2, 1);
  Tensor* v = ctx.new_tensor_4d(Type::kF16, 48, 20, 2, 1);
  Tensor* fa = flash_attn_ext(ctx, q, k, v, nullptr, 0.125f, ctx.new_tensor_1d(Type::kF32, 8));
  ASSERT_NE(fa, nullptr) << ctx.status().message();
  EXPECT_EQ(fa->ne[0], 48);
  EXPECT_EQ(fa->ne[1], 8);
  EXPECT_EQ(fa->ne[2], 7);
  EXPECT_EQ(fa->src[3], nullptr);
  EXPECT_NE(fa->src[4], nullptr);
  Tensor* kv = ctx.new_tensor_2d(Type::kF16, 64, 100);
  Tensor* rows = ctx.new_tensor_2d(Type::kF32, 64, 3);
  Tensor* idx = ctx.new_tensor_1d(Type::kI32, 3);
  Tensor* sr = set_rows(ctx, kv, rows, idx);
  ASSERT_NE(sr, nullptr);
  EXPECT_EQ(sr->view_src, kv);
  EXPECT_EQ(sr->src[0], kv);
  EXPECT_TRUE(same_layout(*sr, *kv));
  Tensor* c = cpy(ctx, rows, ctx.new_tensor_1d(Type::kQ8_0, 192));
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->op, Op::kCpy);
  EXPECT_EQ(c->type, Type::kQ8_0);
}

TEST(Graph, TopologicalOrderLeafsAndDedup) {
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 4);
  Tensor* w = ctx.new_tensor_1d(Type::kF32, 4);
  Tensor* a = mul(ctx, x, w);
  Tensor* b = add(ctx, a, x);
  Tensor* c = add(ctx, b, a);
  Graph g;
  ASSERT_TRUE(g.build_forward(c).ok());
  ASSERT_TRUE(g.build_forward(b).ok());  // already visited: no duplicates
  ASSERT_EQ(g.n_leafs(), 2u);
  EXPECT_EQ(g.leaf(0), x);
  EXPECT_EQ(g.leaf(1), w);
  ASSERT_EQ(g.n_nodes(), 3u);
  EXPECT_EQ(g.node(0), a);
  EXPECT_EQ(g.node(1), b);
  EXPECT_EQ(g.node(2), c);
  EXPECT_EQ(g.node_at(-1), c);
  EXPECT_TRUE(g.visited(w));
  Graph v = g.view(1, 3);
  EXPECT_EQ(v.n_nodes(), 2u);
  EXPECT_EQ(v.n_leafs(), 0u);
  EXPECT_EQ(v.node(0), b);
}

TEST(Graph, DeepChainsDoNotOverflowTheStackAndCapacityIsAnError) {
  Context ctx({.no_alloc = true});
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 2);
  for (int i = 0; i < 100000; ++i) t = scale(ctx, t, 1.0f);
  Graph big(200000);
  ASSERT_TRUE(big.build_forward(t).ok());
  EXPECT_EQ(big.n_nodes(), 100000u);
  Graph small(1000);
  Status s = small.build_forward(t);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_NE(s.message().find("graph is full"), std::string::npos);
}

TEST(Graph, OrderIsDeterministic) {
  auto build = [](std::vector<std::string>& names) {
    Context ctx({.no_alloc = true});
    Tensor* x = ctx.new_tensor_2d(Type::kF32, 8, 2);
    set_name(*x, "x");
    Tensor* h = x;
    for (int l = 0; l < 5; ++l) {
      Tensor* w = ctx.new_tensor_2d(Type::kF32, 8, 8);
      format_name(*w, "w%d", l);
      Tensor* y = mul_mat(ctx, w, h);
      format_name(*y, "y%d", l);
      h = add(ctx, y, h);
      format_name(*h, "h%d", l);
    }
    Graph g;
    EXPECT_TRUE(g.build_forward(h).ok());
    for (Tensor* t : g.leafs()) names.push_back(t->name);
    for (Tensor* t : g.nodes()) names.push_back(t->name);
  };
  std::vector<std::string> a, b;
  build(a);
  build(b);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.front(), "w4");  // depth-first from the output: the last layer's weight is its first source
}

// The positions the scheduler numbers sources by (hand-worked on a 3-node graph): node p is p, leaf p is -2 - p,
// a null source kNoPos, and a view keeps the places of the nodes inside its range only.
TEST(Graph, PositionsOfSourcesAndViewSourcesAreRecordedWhenANodeIsAdded) {
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 4, 2);  // leaf 0
  Tensor* w = ctx.new_tensor_2d(Type::kF32, 4, 2);  // leaf 1
  Tensor* a = mul(ctx, x, w);                       // node 0
  Tensor* r = reshape_1d(ctx, a, 8);                // node 1, a view of a
  Tensor* b = add(ctx, r, reshape_1d(ctx, x, 8));   // node 3 (node 2: the reshape of x, a view of leaf 0)
  Graph g;
  ASSERT_TRUE(g.build_forward(b).ok());
  ASSERT_EQ(g.n_nodes(), 4u);
  ASSERT_EQ(g.n_leafs(), 2u);
  EXPECT_EQ(g.position(x), -2);
  EXPECT_EQ(g.position(w), -3);
  EXPECT_EQ(g.position(a), 0);
  EXPECT_EQ(g.position(r), 1);
  EXPECT_EQ(g.position(b), 3);
  Tensor outsider;
  EXPECT_EQ(g.position(&outsider), Graph::kPosUnknown);
  EXPECT_EQ(g.src_positions(0)[0], -2);
  EXPECT_EQ(g.src_positions(0)[1], -3);
  EXPECT_EQ(g.src_positions(0)[2], Graph::kNoPos);
  EXPECT_EQ(g.src_positions(1)[0], 0);  // the reshape reads a
  EXPECT_EQ(g.node_view_src_position(1), 0);
  EXPECT_EQ(g.node_view_src_position(2), -2);  // the reshape of x aliases leaf 0
  EXPECT_EQ(g.node_view_src_position(0), Graph::kNoPos);
  EXPECT_EQ(g.src_positions(3)[0], 1);
  EXPECT_EQ(g.src_positions(3)[1], 2);
  EXPECT_EQ(g.leaf_view_src_position(0), Graph::kNoPos);

  Graph v = g.view(1, 4);  // nodes 1..3 become 0..2; node 0 and the leafs are not in the view
  EXPECT_EQ(v.position(r), 0);
  EXPECT_EQ(v.position(a), Graph::kPosUnknown);
  EXPECT_EQ(v.src_positions(0)[0], Graph::kPosUnknown);
  EXPECT_EQ(v.node_view_src_position(0), Graph::kPosUnknown);
  EXPECT_EQ(v.src_positions(2)[0], 0);
  EXPECT_EQ(v.src_positions(2)[1], 1);
  EXPECT_EQ(v.src_positions(2)[2], Graph::kNoPos);

  g.clear();
  EXPECT_EQ(g.position(a), Graph::kPosUnknown);
  EXPECT_FALSE(g.visited(x));
}
