// Buffer type rules of simulated devices (sim/tessera/sim/buffer_rules.h, docs/topology.md "Buffer types and
// padding"): the padding rules behind a buffer type's alloc_size, and extra buffer types for weights with op rules of
// their own. Every expected size is worked out by hand in the comment next to it (q4_0: 32 values in 18 bytes).
#include <gtest/gtest.h>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/sim/buffer_rules.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;

namespace {

PaddingRule row_rule(std::vector<Type> types, int64_t multiple) {
  PaddingRule r;
  r.types = std::move(types);
  r.row_multiple = multiple;
  return r;
}

PaddingRule extra_rule(std::vector<Op> ops, std::vector<Type> types, size_t extra) {
  PaddingRule r;
  r.ops = std::move(ops);
  r.types = std::move(types);
  r.extra = extra;
  return r;
}

// The CPU with a repacked weight type that takes only MUL_MAT on q4_0 weights (like ggml's CPU_REPACK).
DeviceConfig cpu_with_repack() {
  DeviceConfig c = wrapped_cpu();
  BufferTypeConfig repack;
  repack.name = "CPU_REPACK";
  repack.default_allow = false;
  OpRule mm;
  mm.allow = true;
  mm.ops = {Op::kMulMat};
  mm.src0_types = {Type::kQ4_0};
  mm.note = "repacked q4_0 GEMM";
  repack.op_rules = {mm};
  repack.padding = {extra_rule({}, {}, 64)};
  c.buffer_types = {repack};
  return c;
}

}  // namespace

TEST(SimBufferTypes, PaddingBytesOfEachRuleWorkedOutByHand) {
  Nodes n;
  const std::vector<PaddingRule> rules = {row_rule({Type::kQ4_0}, 512), extra_rule({Op::kMulMat}, {}, 100),
                                          extra_rule({}, {Type::kF32}, 8)};
  // q4_0 [4096 x 10]: 4096 % 512 == 0, nothing to pad.
  EXPECT_EQ(padding_bytes(rules, *n.leaf(Type::kQ4_0, 4096, 10)), 0u);
  // q4_0 [4160 x 3]: 4160 % 512 = 64, so 448 values are missing: 14 blocks of 18 bytes = 252.
  EXPECT_EQ(padding_bytes(rules, *n.leaf(Type::kQ4_0, 4160, 3)), 252u);
  // MUL_MAT's f32 result: the second rule (first match) adds 100; the third would have added 8.
  EXPECT_EQ(padding_bytes(rules, *n.mul_mat_node(Type::kF32, 64, 16, 8)), 100u);
  // An f32 leaf: only the third rule matches.
  EXPECT_EQ(padding_bytes(rules, *n.leaf(Type::kF32, 64, 2)), 8u);
  // An f16 leaf: no rule matches.
  EXPECT_EQ(padding_bytes(rules, *n.leaf(Type::kF16, 64, 2)), 0u);
  // The row rule on f32 (a block of one value): [100 x 2] pads to 128, 28 values of 4 bytes = 112.
  EXPECT_EQ(padding_bytes({row_rule({}, 128)}, *n.leaf(Type::kF32, 100, 2)), 112u);
}

// f16_kv_copies (ggml-cuda's FLASH_ATTN_EXT alloc size from llama.cpp build 9489: fattn.cu and fattn-common.cuh at
// 34af94cd9): the output padded to 128 bytes, then n_elements(K) x 2 bytes, padded to 128 again, then the same for V.
TEST(SimBufferTypes, FlashAttentionF16CopiesWorkedOutByHand) {
  Context ctx{{.no_alloc = true}};
  PaddingRule r;
  r.ops = {Op::kFlashAttnExt};
  r.f16_kv_copies = true;
  // Q f32 [64 (head), 8 tokens, 4 heads]; K and V [64, 256 cells, 2 KV heads]; mask f16 [256, 8].
  auto fa = [&](Type kv, int64_t tokens) {
    Tensor* q = ctx.new_tensor_3d(Type::kF32, 64, tokens, 4);
    Tensor* k = ctx.new_tensor_3d(kv, 64, 256, 2);
    Tensor* v = ctx.new_tensor_3d(kv, 64, 256, 2);
    Tensor* mask = ctx.new_tensor_2d(Type::kF16, 256, tokens);
    Tensor* out = flash_attn_ext(ctx, q, k, v, mask, 0.125f);
    EXPECT_NE(out, nullptr) << ctx.status().to_string();
    return out;
  };
  // q8_0 K and V, 8 query rows (the batch kernels): the output f32 [64, 4, 8] is 8192 B (a multiple of 128), then K's
  // 64 x 256 x 2 = 32768 values as f16 (65536 B), then V's (65536 B): 131072 B of padding.
  EXPECT_EQ(padding_bytes({r}, *fa(Type::kQ8_0, 8)), 131072u);
  // f16 K and V: nothing to copy.
  EXPECT_EQ(padding_bytes({r}, *fa(Type::kF16, 8)), 0u);
  // 2 query rows (the vector kernel reads q8_0 itself): nothing; f32 K and V are still copied.
  EXPECT_EQ(padding_bytes({r}, *fa(Type::kQ8_0, 2)), 0u);
  EXPECT_EQ(padding_bytes({r}, *fa(Type::kF32, 2)), 131072u);
  // An output that is not a multiple of 128 bytes: V f16 of head 40 and K q8_0 of head 64 (sizes only), 3 query rows,
  // one head: the output f32 [40, 1, 3] is 480 B, padded to 512 (32 B), then K's 64 x 256 values as f16 (32768 B); V
  // is f16: 32800 B.
  Tensor* q = ctx.new_tensor_3d(Type::kF32, 64, 3, 1);
  Tensor* k = ctx.new_tensor_3d(Type::kQ8_0, 64, 256, 1);
  Tensor* v = ctx.new_tensor_3d(Type::kF16, 40, 256, 1);
  Tensor* out = flash_attn_ext(ctx, q, k, v, ctx.new_tensor_2d(Type::kF16, 256, 3), 0.125f);
  ASSERT_NE(out, nullptr) << ctx.status().to_string();
  EXPECT_EQ(padding_bytes({r}, *out), 32800u);
  // Any other op: the rule does not apply (its ops say FLASH_ATTN_EXT; without ops f16_kv_copies adds nothing).
  PaddingRule any;
  any.f16_kv_copies = true;
  Nodes n;
  EXPECT_EQ(padding_bytes({any}, *n.add_node(64, 8)), 0u);
}

// metal_extras (ggml-metal's get_alloc_size at llama.cpp build 8198: ggml-metal.cpp and ggml-metal-ops.cpp), worked
// out by hand from llama.cpp's formulas: MUL_MAT_ID 4 x n_expert + 4 x n_expert x tokens; FLASH_ATTN_EXT
// 64 x (K nb1 x ne2 x ne3 + V's + 2 x mask ne1 x ne2 x ne3) + PAD(ceil(rows / q) x ceil(mask ne0 / c) x ne2 x ne3, 32)
// + 4 x min(rows, 32) x heads x 32 x (V ne0 + 2), with (q, c) = (1, 32) below 20 rows for a head size that 32
// divides, else (8, 64); ARGSORT its own size again; TOP_K 8 B per source element instead of its own size.
TEST(SimBufferTypes, MetalExtrasWorkedOutByHand) {
  Context ctx{{.no_alloc = true}};
  PaddingRule r;
  r.metal_extras = true;
  // Q f32 [64 (head), rows, 4 heads]; K and V f16 [64, 256 cells, 2 KV heads] (nb1 = 128 B); mask f16 [256, rows].
  auto fa = [&](int64_t rows) {
    Tensor* q = ctx.new_tensor_3d(Type::kF32, 64, rows, 4);
    Tensor* k = ctx.new_tensor_3d(Type::kF16, 64, 256, 2);
    Tensor* v = ctx.new_tensor_3d(Type::kF16, 64, 256, 2);
    Tensor* out = flash_attn_ext(ctx, q, k, v, ctx.new_tensor_2d(Type::kF16, 256, rows), 0.125f);
    EXPECT_NE(out, nullptr) << ctx.status().to_string();
    return out;
  };
  // 8 rows (the vector kernel's map): 64 x (128 x 2 + 128 x 2 + 2 x 8) = 33792; 8 x 8 = 64 (a multiple of 32);
  // 4 x 8 x 4 x 32 x 66 = 270336: 304192 B.
  EXPECT_EQ(padding_bytes({r}, *fa(8)), 304192u);
  // 32 rows: 64 x (256 + 256 + 64) = 36864; ceil(32 / 8) x ceil(256 / 64) = 16, padded to 32; 4 x 32 x 4 x 32 x 66 =
  // 1081344: 1118240 B.
  EXPECT_EQ(padding_bytes({r}, *fa(32)), 1118240u);
  // MUL_MAT_ID of 8 experts [64, 16, 8], 2 used of 5 tokens: 4 x 8 + 4 x 8 x 5 = 192 B.
  Tensor* as = ctx.new_tensor_3d(Type::kF16, 64, 16, 8);
  Tensor* b = ctx.new_tensor_3d(Type::kF32, 64, 2, 5);
  Tensor* ids = ctx.new_tensor_2d(Type::kI32, 2, 5);
  Tensor* mm = mul_mat_id(ctx, as, b, ids);
  ASSERT_NE(mm, nullptr) << ctx.status().to_string();
  EXPECT_EQ(padding_bytes({r}, *mm), 192u);
  // ARGSORT of f32 [10, 3]: its i32 [10, 3] (120 B) again; TOP_K 2 of it: 30 x 8 = 240 B instead of i32 [2, 3] (24 B).
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 10, 3);
  EXPECT_EQ(padding_bytes({r}, *argsort(ctx, a, SortOrder::kDesc)), 120u);
  EXPECT_EQ(padding_bytes({r}, *top_k(ctx, a, 2)), 216u);
  // Any other node: nothing.
  Nodes n;
  EXPECT_EQ(padding_bytes({r}, *n.add_node(64, 8)), 0u);
}

TEST(SimBufferTypes, MainBufferTypeAllocSizeAndMemoryCountThePadding) {
  DeviceConfig g = gpu("gpu0");
  g.padding = {row_rule({Type::kQ4_0}, 512)};
  auto sim = make_sim(topology({g, wrapped_cpu()}));
  ASSERT_NE(sim, nullptr);
  Device* dev = sim->device(0);
  BufferType* bt = dev->buffer_type();
  Context ctx{{.no_alloc = true}};
  Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 4160, 3);  // nbytes 130 blocks x 18 x 3 rows = 7020
  Tensor* v = ctx.new_tensor_1d(Type::kF32, 64);        // 256 bytes, no rule
  EXPECT_EQ(nbytes(*w), 7020u);
  EXPECT_EQ(bt->alloc_size(*w), 7020u + 252u);
  EXPECT_EQ(bt->alloc_size(*v), 256u);
  size_t free0 = 0, total = 0;
  dev->memory(&free0, &total);
  auto buf = alloc_ctx_tensors(ctx, *bt);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  // Each tensor's alloc_size rounded up to the alignment 256: 7272 -> 7424, 256 -> 256; one buffer of 7680 bytes.
  EXPECT_EQ(buf.value()->size(), 7680u);
  size_t free1 = 0;
  dev->memory(&free1, &total);
  EXPECT_EQ(free0 - free1, 7680u);
  // The host and mapped buffer types of a device never pad.
  g.caps.host_buffer = true;
  auto sim2 = make_sim(topology({g, wrapped_cpu()}));
  ASSERT_NE(sim2, nullptr);
  EXPECT_EQ(sim2->device(0)->host_buffer_type()->alloc_size(*w), 7020u);
}

TEST(SimBufferTypes, ExtraBufferTypeIsTheDevicesOwnNeverHostAndCountsItsMemory) {
  auto sim = make_sim(topology({gpu("gpu0"), cpu_with_repack()}));
  ASSERT_NE(sim, nullptr);
  Device* cpu = sim->device(1);
  Device* gpu0 = sim->device(0);
  ASSERT_EQ(cpu->extra_buffer_types().size(), 1u);
  EXPECT_TRUE(gpu0->extra_buffer_types().empty());
  BufferType* repack = cpu->extra_buffer_types()[0];
  EXPECT_STREQ(repack->name(), "CPU_REPACK");
  EXPECT_EQ(repack->device(), cpu);
  EXPECT_FALSE(repack->is_host());
  EXPECT_TRUE(cpu->supports_buft(*repack));
  EXPECT_FALSE(gpu0->supports_buft(*repack));
  Context ctx{{.no_alloc = true}};
  Tensor* w = ctx.new_tensor_2d(Type::kQ4_0, 64, 16);  // 2 blocks x 18 x 16 = 576 bytes, + 64 extra = 640
  EXPECT_EQ(repack->alloc_size(*w), 640u);
  size_t free0 = 0, free1 = 0, total = 0;
  cpu->memory(&free0, &total);
  auto buf = alloc_ctx_tensors(ctx, *repack);
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  cpu->memory(&free1, &total);
  EXPECT_GE(free0 - free1, 640u);  // the wrapped CPU's alignment (64 or more) rounds 640 to itself or above
  EXPECT_EQ(free0 - free1, buf.value()->size());
}

TEST(SimBufferTypes, AnOpOnAWeightInTheExtraTypeRunsOnlyWhereItsRulesAllowIt) {
  auto sim = make_sim(topology({gpu("gpu0"), cpu_with_repack()}));
  ASSERT_NE(sim, nullptr);
  Device* cpu = sim->device(1);
  BufferType* repack = cpu->extra_buffer_types()[0];
  Context wctx{{.no_alloc = true}};
  Tensor* w = wctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  Tensor* wf = wctx.new_tensor_2d(Type::kF32, 64, 16);
  auto wbuf = alloc_ctx_tensors(wctx, *repack);
  ASSERT_TRUE(wbuf.ok()) << wbuf.status().to_string();
  Context ctx{{.no_alloc = true}};
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 4);
  Tensor* ids = ctx.new_tensor_1d(Type::kI32, 4);
  Tensor* mm = mul_mat(ctx, w, x);       // the rule allows it
  Tensor* rows = get_rows(ctx, w, ids);  // no rule matches: the default (deny) refuses it
  Tensor* mmf = mul_mat(ctx, wf, x);     // an f32 weight in the repacked type: refused by the default too
  EXPECT_TRUE(cpu->supports_op(*mm));
  EXPECT_FALSE(cpu->supports_op(*rows));
  EXPECT_FALSE(cpu->supports_op(*mmf));
  // The same ops on weights in the CPU's main buffer type are the CPU's kernels' to take.
  Context mctx{{.no_alloc = true}};
  Tensor* w2 = mctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  auto mbuf = alloc_ctx_tensors(mctx, *cpu->buffer_type());
  ASSERT_TRUE(mbuf.ok());
  EXPECT_TRUE(cpu->supports_op(*get_rows(ctx, w2, ids)));
  // buffer_type_allows names the deciding rule: 0 for MUL_MAT on q4_0, -1 (the default) for GET_ROWS.
  int rule = -2;
  EXPECT_TRUE(buffer_type_allows(cpu_with_repack().buffer_types[0], *mm, &rule));
  EXPECT_EQ(rule, 0);
  EXPECT_FALSE(buffer_type_allows(cpu_with_repack().buffer_types[0], *rows, &rule));
  EXPECT_EQ(rule, -1);
}
