// Pass 1, pre-assignment (docs/scheduler.md): dst, view_src, the scheduling error, input, weight, offload (and its
// anchor defects), auxiliary weights, user pins, compute buffers.
#include <cstdint>
#include <map>
#include <utility>

#include "unit/sched/sched_pass_fixture.h"

using ::testing::HasSubstr;

namespace tessera::sched::testing {
namespace {

class SchedPass1 : public SchedPassFixture {
 protected:
  Status run(PassOptions opt = {}) { return pass1_preassign(plan, graph, bs, opt); }
  // A FLASH_ATTN_EXT whose sinks weight (src 4) is in the CPU's memory, GPU0 offloading the op; the graph built.
  Tensor* flash_attn_with_cpu_sinks() {
    offload(kGpu0, Op::kFlashAttnExt);
    Tensor* q = ctx.new_tensor_4d(Type::kF32, 8, 4, 2, 1);
    Tensor* k = ctx.new_tensor_4d(Type::kF16, 8, 4, 2, 1);
    Tensor* v = ctx.new_tensor_4d(Type::kF16, 8, 4, 2, 1);
    Tensor* sinks = ctx.new_tensor_1d(Type::kF32, 2);
    set_name(*sinks, "sinks");
    weights(cpu_buft, {sinks});
    Tensor* fa = named(flash_attn_ext(ctx, q, k, v, nullptr, 0.5f, sinks), "fa");
    EXPECT_NE(fa, nullptr) << ctx.status().message();
    if (fa != nullptr) build(fa);
    return fa;
  }
};

// ---- 1. dst ----

TEST_F(SchedPass1, DstLeafTakesTheBackendOfItsBufferType) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* c = tensor("c");
  place(gpu1_buft, {a});
  place(cpu_buft, {b});
  Tensor* s = named(add(ctx, a, b), "s");
  Tensor* out = named(add(ctx, s, c), "out");
  build(out);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(a, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(b, kCpu, Cause::kHasBuffer));
  // no buffer, no flag, no weight: left for the later passes (a buffer of usage ANY is not a weight)
  EXPECT_TRUE(Unassigned(c));
  EXPECT_TRUE(Unassigned(s));
  EXPECT_TRUE(Unassigned(out));
}

TEST_F(SchedPass1, DstIsTheHighestPriorityBackendSupportingTheBufferTypeAndTheOp) {
  allow_buft(kGpu1, cpu_buft);  // GPU1 can compute from host memory; GPU0 cannot
  refuse(kGpu1, Op::kRmsNorm);
  Tensor* x = tensor("x");
  Tensor* n1 = named(scale(ctx, x, 2.0f), "n1");
  Tensor* n2 = named(rms_norm(ctx, n1, 1e-5f), "n2");
  place(cpu_buft, {x, n1, n2});  // nodes pre-allocated by the user
  build(n2);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(x, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(n1, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(n2, kCpu, Cause::kHasBuffer));  // GPU1 can use the buffer but not run the op
}

TEST_F(SchedPass1, DstComesBeforeTheInputFlagAndWeights) {
  offload(kGpu0, Op::kMulMat);
  Tensor* in = input("in");
  place(gpu0_buft, {in});
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});
  Tensor* y = named(mul_mat(ctx, w, in), "y");
  place(cpu_buft, {y});
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(in, kGpu0, Cause::kHasBuffer));  // not the last backend: its memory is on GPU0
  EXPECT_TRUE(Assigned(w, kGpu1, Cause::kHasBuffer));   // a weight leaf is placed by its own buffer
  EXPECT_TRUE(Assigned(y, kCpu, Cause::kHasBuffer));    // its own buffer, not its weight, decides
}

// ---- 2. view_src ----

TEST_F(SchedPass1, ViewsAndViewsOfViewsTakeTheirSourcesBufferBackend) {
  Tensor* kv = tensor("kv");
  // views created before their source is allocated: view_init gives them the buffer
  Tensor* v1 = named(view_2d(ctx, kv, 8, 4, kv->nb[1], 0), "v1");
  Tensor* v2 = named(reshape_1d(ctx, v1, 32), "v2");    // view of a view
  Tensor* v3 = named(reshape_2d(ctx, v2, 4, 8), "v3");  // view of a view of a view
  Tensor* v4 = named(transpose(ctx, v3), "v4");
  Tensor* out = named(cont(ctx, v4), "out");
  place(gpu1_buft, {kv});
  init_views({v1, v2, v3, v4});
  ASSERT_EQ(v4->view_src, kv);
  ASSERT_EQ(v4->buffer, kv->buffer);
  build(out);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(kv, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(v1, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Assigned(v2, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Assigned(v3, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Assigned(v4, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Unassigned(out));
}

TEST_F(SchedPass1, ViewSrcIsTheHighestPriorityBackendSupportingTheBufferTypeAndTheViewsOp) {
  allow_buft(kGpu1, cpu_buft);
  refuse(kGpu1, Op::kCpy);
  Tensor* x = tensor("x");
  Tensor* cache = tensor("cache");
  place(cpu_buft, {cache});
  // created after the allocation: the views already carry the buffer
  Tensor* store = named(cpy(ctx, x, cache), "store");  // CPY: a computing op whose result is a view of cache
  Tensor* look = named(view_1d(ctx, cache, 16, 0), "look");
  Tensor* out = named(add(ctx, store, x), "out");
  build({out, look});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(cache, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(store, kCpu, Cause::kViewSourceHasBuffer));  // GPU1 can use the memory but refuses CPY
  EXPECT_TRUE(Assigned(look, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Unassigned(x));
}

// ---- 3. scheduling errors (an error status, never an abort) ----

TEST_F(SchedPass1, PreallocatedNodeNoBackendCanRunIsASchedulingError) {
  refuse(kGpu1, Op::kRmsNorm);  // GPU1 is the only backend that can use GPU1_buf
  Tensor* x = tensor("x");
  Tensor* n = named(rms_norm(ctx, x, 1e-5f), "prealloc_norm");
  place(gpu1_buft, {n});
  build(n);
  const Status s = run();
  ExpectSchedulingError(s, {"prealloc_norm", "GPU1_buf", "RMS_NORM"});
}

TEST_F(SchedPass1, LeafInABufferTypeNoBackendSupportsIsASchedulingError) {
  Tensor* x = tensor("stray_leaf");
  place(orphan_buft, {x});
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  build(n);
  const Status s = run();
  ExpectSchedulingError(s, {"stray_leaf", "ORPHAN_buf", "NONE"});
}

TEST_F(SchedPass1, CopyIntoABufferNoBackendCanWriteIsASchedulingError) {
  refuse(kGpu1, Op::kCpy);
  Tensor* x = tensor("x");
  Tensor* cache = tensor("cache");
  place(gpu1_buft, {cache});
  Tensor* store = named(cpy(ctx, x, cache), "kv_store");
  build(store);
  const Status s = run();
  ExpectSchedulingError(s, {"kv_store", "GPU1_buf", "CPY"});
}

TEST_F(SchedPass1, ViewOfAViewNoBackendCanRunIsASchedulingError) {
  refuse(kGpu1, Op::kTranspose);
  Tensor* kv = tensor("kv");
  Tensor* v1 = named(reshape_2d(ctx, kv, 16, 4), "v1");
  Tensor* v2 = named(transpose(ctx, v1), "kv_t");
  place(gpu1_buft, {kv});
  init_views({v1, v2});
  Tensor* out = named(cont(ctx, v2), "out");
  build(out);
  const Status s = run();
  ExpectSchedulingError(s, {"kv_t", "GPU1_buf", "TRANSPOSE"});
}

// ---- 4. input ----

TEST_F(SchedPass1, InputsGoToTheLastBackend) {
  offload(kGpu0, Op::kMulMat);
  Tensor* in = input("in");
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});
  Tensor* n = named(mul_mat(ctx, w, in), "n");
  set_input(*n);  // an INPUT node: the flag comes before its weight
  Tensor* out = named(scale(ctx, n, 1.0f), "out");
  build(out);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(in, kCpu, Cause::kInput));
  EXPECT_TRUE(Assigned(n, kCpu, Cause::kInput));
  EXPECT_TRUE(Unassigned(out));
}

TEST_F(SchedPass1, LastBackendIsTheCpuWhateverTheNumberOfBackends) {
  use_two_backends();
  offload(0, Op::kMulMat);
  Tensor* in = input("in");
  Tensor* w = tensor("w");
  weights(cpu_buft, {w});
  Tensor* y = named(mul_mat(ctx, w, in), "y");
  Tensor* z = named(add(ctx, w, in), "z");
  build({y, z});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(in, 1, Cause::kInput));
  EXPECT_TRUE(Assigned(w, 1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, 0, Cause::kOpOffload));
  EXPECT_TRUE(Assigned(z, 1, Cause::kWeight));
}

// ---- 5. weight ----

TEST_F(SchedPass1, WeightDecidesTheBackendOfTheOpUsingIt) {
  offload(kGpu0, Op::kMulMat);  // offload is only from the last backend's host memory
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(w, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kWeight));
  EXPECT_TRUE(Unassigned(x));
}

TEST_F(SchedPass1, FirstWeightsSourceDecides) {
  Tensor* wa = tensor("wa");
  Tensor* wb = tensor("wb");
  weights(gpu1_buft, {wa});
  weights(gpu0_buft, {wb});
  Tensor* act = tensor("act");
  place(gpu0_buft, {act});  // a user-placed activation: usage ANY, not a weight
  Tensor* s = named(add(ctx, wa, wb), "s");
  Tensor* t = named(add(ctx, wb, wa), "t");
  Tensor* u = named(add(ctx, act, wa), "u");
  build({s, t, u});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(s, kGpu1, Cause::kWeight));
  EXPECT_TRUE(Assigned(t, kGpu0, Cause::kWeight));
  EXPECT_TRUE(Assigned(act, kGpu0, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(u, kGpu1, Cause::kWeight));  // the first WEIGHTS source, not the first source with a buffer
}

TEST_F(SchedPass1, WeightSeenThroughAView) {
  Tensor* w = tensor("w", 8, 16);
  weights(gpu1_buft, {w});
  Tensor* wv = named(view_2d(ctx, w, 8, 8, w->nb[1], 0), "w_half");
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, wv, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(wv, kGpu1, Cause::kViewSourceHasBuffer));
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kWeight));
}

TEST_F(SchedPass1, WeightInHostMemoryAHigherBackendCanUseIsNotAnOffload) {
  allow_buft(kGpu1, cpu_buft);  // e.g. an integrated GPU reading host memory
  offload(kGpu0, Op::kMulMat);
  Tensor* w = tensor("w");
  weights(cpu_buft, {w});
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(w, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kWeight));
}

TEST_F(SchedPass1, WeightNoBackendCanRunWithLeavesTheOpUnassigned) {
  refuse(kGpu1, Op::kMulMat);
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});
  Tensor* x = tensor("x");
  weights(gpu0_buft, {x});  // a second weight, usable: the FIRST weight decides, not the first usable one
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());  // only a tensor's own (or its view source's) memory can make an error
  EXPECT_TRUE(Assigned(w, kGpu1, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(x, kGpu0, Cause::kHasBuffer));
  EXPECT_TRUE(Unassigned(y));
}

// ---- 5. offload ----

TEST_F(SchedPass1, OffloadGoesToTheHighestPriorityBackendThatSupportsAndWantsTheOp) {
  offload(kGpu1, Op::kMulMat);
  offload(kGpu0, Op::kMul);
  offload(kGpu1, Op::kMul);
  Tensor* w = tensor("w");
  weights(cpu_buft, {w});
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  Tensor* z = named(mul(ctx, x, w), "z");
  Tensor* r = named(add(ctx, w, x), "r");  // nobody wants to offload ADD
  build({y, z, r});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(w, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kOpOffload));
  EXPECT_TRUE(Assigned(z, kGpu0, Cause::kOpOffload));
  EXPECT_TRUE(Assigned(r, kCpu, Cause::kWeight));
}

// Anchor defect (docs/scheduler.md): offload to a backend that wants the op but cannot run it.
TEST_F(SchedPass1, OffloadRequiresSupportsOp) {
  offload(kGpu0, Op::kMulMat);
  refuse(kGpu0, Op::kMulMat);
  offload(kGpu1, Op::kMulMat);
  offload(kGpu0, Op::kMul);
  refuse(kGpu0, Op::kMul);
  Tensor* w = tensor("w");
  weights(cpu_buft, {w});
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  Tensor* z = named(mul(ctx, x, w), "z");
  build({y, z});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(y, kGpu1, Cause::kOpOffload));  // GPU0 wants it but refuses it: the next one
  EXPECT_TRUE(Assigned(z, kCpu, Cause::kWeight));      // only GPU0 wants it, and it refuses it: stays on the CPU
}

// Anchor defect (docs/scheduler.md): offload from a weight buffer that is not host memory, though a CPU buffer type.
TEST_F(SchedPass1, NoOffloadFromANonHostWeightBufferOfTheCpu) {
  offload(kGpu0, Op::kMulMat);
  offload(kGpu1, Op::kMulMat);
  Tensor* w = tensor("w");
  weights(cpu_repack_buft, {w});  // only the CPU supports it, but it is not host memory
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(w, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, kCpu, Cause::kWeight));
}

TEST_F(SchedPass1, OffloadFromAnyHostBufferTypeOfTheLastBackend) {
  offload(kGpu0, Op::kMulMat);
  Tensor* w = tensor("w");
  weights(pinned_buft, {w});  // another host type that only the CPU computes from
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(w, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(y, kGpu0, Cause::kOpOffload));
}

TEST_F(SchedPass1, NoOffloadWhenOpOffloadIsOff) {
  offload(kGpu0, Op::kMulMat);
  offload(kGpu1, Op::kMulMat);
  Tensor* w = tensor("w");
  weights(cpu_buft, {w});
  Tensor* x = tensor("x");
  Tensor* y = named(mul_mat(ctx, w, x), "y");
  build(y);
  PassOptions opt;
  opt.op_offload = false;
  ASSERT_TRUE(run(opt).ok());
  EXPECT_TRUE(Assigned(y, kCpu, Cause::kWeight));
}

// ---- 5. auxiliary weights (anchor defect: tiny weights deciding the placement of large ops) ----

TEST_F(SchedPass1, RopeFrequencyFactorsDoNotDecide) {
  offload(kGpu0, Op::kRope);
  offload(kGpu0, Op::kMul);
  Tensor* a = ctx.new_tensor_3d(Type::kF32, 8, 2, 4);
  set_name(*a, "a");
  Tensor* pos = ctx.new_tensor_1d(Type::kI32, 4);
  set_name(*pos, "pos");
  set_input(*pos);
  Tensor* ff = ctx.new_tensor_1d(Type::kF32, 4);
  set_name(*ff, "freq_factors");
  weights(cpu_buft, {ff});
  Tensor* h = named(scale(ctx, a, 1.0f), "h");
  Tensor* r = named(rope(ctx, h, pos, 8, RopeMode::kNeox, 10000.0f, 1.0f, ff), "r");
  ASSERT_EQ(r->src[2], ff);
  // control: the same tensor as an ordinary source does decide
  Tensor* m = named(mul(ctx, ctx.new_tensor_2d(Type::kF32, 4, 2), ff), "m");
  build({r, m});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(ff, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Assigned(pos, kCpu, Cause::kInput));
  EXPECT_TRUE(Unassigned(r));
  EXPECT_TRUE(Assigned(m, kGpu0, Cause::kOpOffload));
}

TEST_F(SchedPass1, FlashAttentionSinksDoNotDecide) {
  Tensor* fa = flash_attn_with_cpu_sinks();
  ASSERT_NE(fa, nullptr);
  Tensor* sinks = fa->src[4];
  ASSERT_NE(sinks, nullptr);
  ASSERT_STREQ(sinks->name, "sinks");
  PassOptions no_offload;
  no_offload.op_offload = false;
  ASSERT_TRUE(run(no_offload).ok());
  EXPECT_TRUE(Assigned(sinks, kCpu, Cause::kHasBuffer));
  EXPECT_TRUE(Unassigned(fa));  // not CPU [weight]
  plan = SchedPlan{};
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Unassigned(fa));  // not GPU0 [offload]
}

// ggml's scheduler before llama.cpp build 10150 (PR #25832): the sinks decide, like any first weight
TEST_F(SchedPass1, FlashAttentionSinksDecideWhenAskedAsOldGgml) {
  Tensor* fa = flash_attn_with_cpu_sinks();
  ASSERT_NE(fa, nullptr);
  PassOptions old_no_offload;
  old_no_offload.op_offload = false;
  old_no_offload.fa_sinks_decide = true;
  ASSERT_TRUE(run(old_no_offload).ok());
  EXPECT_TRUE(Assigned(fa, kCpu, Cause::kWeight));
  PassOptions old;
  old.fa_sinks_decide = true;
  plan = SchedPlan{};
  ASSERT_TRUE(run(old).ok());
  EXPECT_TRUE(Assigned(fa, kGpu0, Cause::kOpOffload));
}

// A SOFT_MAX's sinks (gpt-oss without flash attention) decide as any first weight does: ggml skips only ROPE and
// FLASH_ATTN_EXT by op (ggml_backend_sched_backend_id_from_cur)
TEST_F(SchedPass1, SoftMaxSinksDecide) {
  offload(kGpu0, Op::kSoftMax);
  Tensor* kq = ctx.new_tensor_3d(Type::kF32, 8, 4, 2);
  set_name(*kq, "kq");
  Tensor* sinks = ctx.new_tensor_1d(Type::kF32, 2);
  set_name(*sinks, "sinks");
  weights(cpu_buft, {sinks});
  Tensor* sm = named(soft_max(ctx, kq, nullptr, 0.5f, sinks), "sm");
  ASSERT_NE(sm, nullptr) << ctx.status().message();
  ASSERT_EQ(sm->src[2], sinks);
  PassOptions no_offload;
  no_offload.op_offload = false;
  build(sm);
  ASSERT_TRUE(run(no_offload).ok());
  EXPECT_TRUE(Assigned(sm, kCpu, Cause::kWeight));
  plan = SchedPlan{};
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(sm, kGpu0, Cause::kOpOffload));
}

// ---- user pins ----

TEST_F(SchedPass1, UserPinsAreKept) {
  offload(kGpu0, Op::kMulMat);
  Tensor* in = input("in");
  Tensor* w = tensor("w");
  weights(gpu1_buft, {w});
  Tensor* y = named(mul_mat(ctx, w, in), "y");
  Tensor* bad = named(rms_norm(ctx, y, 1e-5f), "bad");
  refuse(kGpu1, Op::kRmsNorm);
  place(gpu1_buft, {bad});  // would be a scheduling error, but the user decided
  build(bad);
  plan.set(in, kGpu1, Cause::kPinned);
  plan.set(w, kCpu, Cause::kPinned);
  plan.set(y, kGpu0, Cause::kPinned);
  plan.set(bad, kCpu, Cause::kPinned);
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(in, kGpu1, Cause::kPinned));
  EXPECT_TRUE(Assigned(w, kCpu, Cause::kPinned));
  EXPECT_TRUE(Assigned(y, kGpu0, Cause::kPinned));
  EXPECT_TRUE(Assigned(bad, kCpu, Cause::kPinned));
}

// ---- compute buffers count as "no buffer" ----

TEST_F(SchedPass1, TensorsInTheSchedulersComputeBuffersCountAsUnallocated) {
  refuse(kGpu1, Op::kScale);
  refuse(kGpu1, Op::kReshape);
  Tensor* in = input("in");
  Tensor* c = tensor("c");
  Tensor* x = tensor("x");
  compute_buffer(gpu0_buft, {in, c});
  Tensor* n = named(scale(ctx, x, 1.0f), "n");
  compute_buffer(gpu1_buft, {n});  // GPU1 refuses SCALE: would be a scheduling error if this buffer counted
  Tensor* cv = named(reshape_1d(ctx, c, 64), "cv");
  Tensor* nv = named(reshape_1d(ctx, n, 64), "nv");
  Tensor* y = named(mul_mat(ctx, c, in), "y");  // a compute buffer is no weight either
  build({cv, nv, y});
  ASSERT_TRUE(run().ok());
  EXPECT_TRUE(Assigned(in, kCpu, Cause::kInput));  // not GPU0 [dst]
  EXPECT_TRUE(Unassigned(c));
  EXPECT_TRUE(Unassigned(n));
  EXPECT_TRUE(Unassigned(cv));
  EXPECT_TRUE(Unassigned(nv));
  EXPECT_TRUE(Unassigned(y));
}

// ---- 6. otherwise unassigned ----

TEST_F(SchedPass1, EverythingElseStaysUnassigned) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* s = named(add(ctx, a, b), "s");
  Tensor* v = named(transpose(ctx, s), "v");
  Tensor* out = named(cont(ctx, v), "out");
  build(out);
  ASSERT_TRUE(run().ok());
  for (const Tensor* t : {a, b, s, v, out}) EXPECT_TRUE(Unassigned(t));
}

// ---- numbering: the graph's recorded positions are checked against the pointers ----

// The plan numbers sources by the positions the graph recorded when it was built; a source replaced by hand since
// (by another tensor of the graph, or by one outside it) must still be read by its pointer, and decide placement.
TEST_F(SchedPass1, SourcesReplacedAfterTheGraphWasBuiltAreNumberedByTheirPointer) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  Tensor* w = tensor("w");
  place(gpu1_buft, {w}, BufferUsage::kWeights);
  Tensor* s = named(add(ctx, a, b), "s");
  Tensor* out = named(mul(ctx, s, b), "out");
  build(out);
  std::swap(s->src[0], s->src[1]);  // s = b + a: both still in the graph, at each other's recorded position
  out->src[1] = w;                  // out = s * w: w is not in the graph
  ASSERT_TRUE(run().ok());
  const int32_t is = plan.id_of(s), io = plan.id_of(out);
  ASSERT_GE(is, 0);
  ASSERT_GE(io, 0);
  EXPECT_EQ(plan.tensor(plan.src(static_cast<size_t>(is), 0)), b);
  EXPECT_EQ(plan.tensor(plan.src(static_cast<size_t>(is), 1)), a);
  EXPECT_EQ(plan.tensor(plan.src(static_cast<size_t>(io), 0)), s);
  EXPECT_EQ(plan.tensor(plan.src(static_cast<size_t>(io), 1)), w);
  EXPECT_EQ(plan.id_of(w), plan.src(static_cast<size_t>(io), 1));
  // the weight outside the graph decides out's backend; nothing else moved
  EXPECT_TRUE(Assigned(out, kGpu1, Cause::kWeight));
  EXPECT_TRUE(Unassigned(s));
  EXPECT_TRUE(Unassigned(a));
}

// Looking a graph tensor up by pointer after the passes (explain, the report) finds the id the passes used, also
// for a tensor the passes never looked up (the pointer map is filled on demand).
TEST_F(SchedPass1, EveryGraphTensorIsFoundByPointerAfterThePass) {
  Tensor* a = tensor("a");
  Tensor* b = tensor("b");
  place(gpu0_buft, {a});
  Tensor* s = named(add(ctx, a, b), "s");
  Tensor* out = named(scale(ctx, s, 2.0f), "out");
  build(out);
  ASSERT_TRUE(run().ok());
  for (size_t i = 0; i < graph.n_nodes(); ++i) EXPECT_EQ(plan.id_of(graph.node(i)), static_cast<int32_t>(i));
  for (size_t i = 0; i < graph.n_leafs(); ++i) {
    EXPECT_EQ(plan.id_of(graph.leaf(i)), static_cast<int32_t>(graph.n_nodes() + i));
  }
  EXPECT_EQ(plan.backend_of(a), kGpu0);
  Tensor stranger;
  EXPECT_EQ(plan.id_of(&stranger), -1);
}

// On a graph whose Tensors outgrow the caches the plan's index asks most capability questions up front (while it
// holds each Tensor) and the passes ask the rest; on a smaller one the passes ask them all. Either way one memo
// serves both. Over passes 1-4 of a graph with two GPUs, weights in three kinds of buffer, an offloadable op, refused
// ops, views of a cache and a pinned node, no (backend, tensor) question is asked twice, nor a (backend, buffer type)
// one, and the placement is the one the rules give. The parameter: the index asks up front (the threshold forced to
// 0) or not (the threshold never reached).
class SchedPass1Questions : public SchedPass1, public ::testing::WithParamInterface<bool> {};

TEST_P(SchedPass1Questions, EveryCapabilityQuestionIsAskedAtMostOncePerSplit) {
  const detail::ScopedFarBytes far(GetParam() ? 0 : SIZE_MAX);
  using ::testing::_;
  using ::testing::Invoke;
  std::map<std::pair<int, const Tensor*>, int> op_asks, offload_asks;
  ON_CALL(bs, supports_op(_, _)).WillByDefault(Invoke([&](int b, const Tensor& t) {
    ++op_asks[{b, &t}];
    return refused_ops.at(static_cast<size_t>(b)).count(t.op) == 0;
  }));
  ON_CALL(bs, offload_op(_, _)).WillByDefault(Invoke([&](int b, const Tensor& t) {
    ++offload_asks[{b, &t}];
    return offload_ops.at(static_cast<size_t>(b)).count(t.op) != 0;
  }));
  // supports_buft: the plan's memo is the only one (BackendList keeps none)
  std::map<std::pair<int, const BufferType*>, int> buft_asks;
  ON_CALL(bs, supports_buft(_, _)).WillByDefault(Invoke([&](int b, const BufferType& buft) {
    ++buft_asks[{b, &buft}];
    return usable_bufts.at(static_cast<size_t>(b)).count(&buft) != 0;
  }));
  refuse(kGpu0, Op::kSoftMax);
  refuse(kGpu1, Op::kSoftMax);
  refuse(kGpu1, Op::kScale);
  offload(kGpu1, Op::kMulMat);
  Tensor* w_cpu = tensor("w_cpu");
  Tensor* w_gpu0 = tensor("w_gpu0");
  Tensor* w_gpu1 = tensor("w_gpu1", 4, 8);
  Tensor* w_out = tensor("w_out", 4, 8);
  Tensor* cache = tensor("cache");
  weights(cpu_buft, {w_cpu, w_out});
  weights(gpu0_buft, {w_gpu0});
  weights(gpu1_buft, {w_gpu1});
  place(gpu1_buft, {cache});
  Tensor* x = input("x");
  Tensor* h1 = named(mul_mat(ctx, w_cpu, x), "h1");  // offloaded to GPU1
  Tensor* h2 = named(mul(ctx, h1, w_gpu0), "h2");    // GPU0 by its weight
  Tensor* h3 = named(soft_max(ctx, h2), "h3");       // refused by both GPUs: the CPU
  Tensor* h4 = named(scale(ctx, h3, 0.5f), "h4");
  Tensor* kv = named(view_2d(ctx, cache, 8, 4, cache->nb[1], 0), "kv");
  Tensor* h5 = named(mul_mat(ctx, kv, h4), "h5");
  Tensor* h6 = named(add(ctx, h5, w_gpu1), "h6");  // GPU1 by its weight
  Tensor* h7 = named(scale(ctx, h6, 2.0f), "h7");  // GPU1 refuses SCALE
  Tensor* out = named(mul(ctx, h7, w_out), "out");
  build(out);
  plan.set(h4, kGpu0, Cause::kPinned);
  ASSERT_TRUE(run().ok());
  pass2_expand(plan, graph, bs);
  pass3_upgrade(plan, graph, bs);
  ASSERT_TRUE(pass4_sources(plan, graph, bs).ok());
  EXPECT_TRUE(Assigned(h1, kGpu1, Cause::kOpOffload));
  EXPECT_TRUE(Assigned(h2, kGpu0, Cause::kWeight));
  EXPECT_TRUE(Assigned(h4, kGpu0, Cause::kPinned));
  EXPECT_TRUE(Assigned(h6, kGpu1, Cause::kWeight));
  EXPECT_NE(plan.backend_of(h3), kGpu0);
  EXPECT_NE(plan.backend_of(h3), kGpu1);
  EXPECT_NE(plan.backend_of(h7), kGpu1);
  EXPECT_TRUE(Assigned(out, kCpu, Cause::kWeight));
  EXPECT_FALSE(op_asks.empty());
  EXPECT_FALSE(offload_asks.empty());
  for (const auto& [key, n] : op_asks) {
    EXPECT_EQ(n, 1) << "supports_op(" << bname(key.first) << ", " << key.second->name << ") asked " << n << " times";
  }
  for (const auto& [key, n] : offload_asks) {
    EXPECT_EQ(n, 1) << "offload_op(" << bname(key.first) << ", " << key.second->name << ") asked " << n << " times";
  }
  EXPECT_FALSE(buft_asks.empty());
  for (const auto& [key, n] : buft_asks) {
    EXPECT_EQ(n, 1) << "supports_buft(" << bname(key.first) << ", " << key.second->name() << ") asked " << n
                    << " times";
  }
  EXPECT_TRUE(FullyAssigned());  // (asks again itself)
}

INSTANTIATE_TEST_SUITE_P(UpFrontOrNot, SchedPass1Questions, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& p) { return p.param ? "UpFront" : "ByThePasses"; });

}  // namespace
}  // namespace tessera::sched::testing
