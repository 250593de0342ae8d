// Buffers, tensor I/O bounds, the linear tensor allocator and context placement (docs/interfaces.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <numeric>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "support/host_buffer_type.h"
#include "tessera/cpu.h"

using namespace tessera;
using ::testing::HasSubstr;

using support::TestBufferType;

TEST(Buffer, ZeroSizeIsAValidDummy) {
  auto b = cpu::buffer_type()->alloc_buffer(0);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->base(), nullptr);
  EXPECT_EQ((*b)->size(), 0u);
  (*b)->clear(7);  // no-op, no crash
}

TEST(Buffer, CpuBuffersAre64ByteAlignedHostMemory) {
  BufferType* bt = cpu::buffer_type();
  EXPECT_EQ(bt->alignment(), 64u);
  EXPECT_TRUE(bt->is_host());
  EXPECT_STREQ(bt->name(), "CPU");
  auto b = bt->alloc_buffer(1000);
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>((*b)->base()) % 64, 0u);
  (*b)->clear(0xab);
  EXPECT_EQ(static_cast<uint8_t*>((*b)->base())[999], 0xab);
  (*b)->set_usage(BufferUsage::kWeights);
  EXPECT_EQ((*b)->usage(), BufferUsage::kWeights);
}

TEST(Buffer, AboveMaxSizeIsAnError) {
  TestBufferType bt;
  bt.max = 100;
  auto b = bt.alloc_buffer(101);
  ASSERT_FALSE(b.ok());
  EXPECT_EQ(b.status().code(), StatusCode::kAllocFailed);
  EXPECT_THAT(b.status().message(), HasSubstr("maximum allocation size"));
  EXPECT_EQ(bt.live, 0);
}

TEST(Buffer, FromHostPointerDoesNotOwnTheMemory) {
  alignas(64) static float host[64];
  auto b = cpu::buffer_from_ptr(host, sizeof host);
  ASSERT_TRUE(b.ok()) << b.status().message();
  EXPECT_STREQ((*b)->type()->name(), "CPU_Mapped");
  Context ctx({.no_alloc = true});
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 64);
  ASSERT_TRUE(tensor_alloc(**b, *t, (*b)->base()).ok());
  const float v = 3.5f;
  ASSERT_TRUE(tensor_set(*t, &v, 4 * 10, 4).ok());
  EXPECT_EQ(host[10], 3.5f);  // writes land in the user's memory
  b->reset();                 // freeing the buffer must not free `host` (ASan would report a bad free)
  EXPECT_FALSE(cpu::buffer_from_ptr(nullptr, 16).ok());
}

TEST(TensorIO, BoundsAndAllocationErrorsNameTheTensor) {
  Context ctx({.no_alloc = true});
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 8);
  set_name(*t, "logits");
  float buf[16] = {};
  Status s = tensor_set(*t, buf, 0, 32);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.message(), HasSubstr("logits"));
  EXPECT_THAT(s.message(), HasSubstr("not allocated"));
  auto b = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(b.ok());
  EXPECT_TRUE(tensor_set(*t, buf, 0, 32).ok());
  s = tensor_set(*t, buf, 4, 32);
  EXPECT_EQ(s.code(), StatusCode::kOutOfRange);
  EXPECT_THAT(s.message(), HasSubstr("logits"));
  EXPECT_EQ(tensor_get(*t, buf, 33, 0).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(tensor_memset(*t, 0, 0, 64).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(tensor_get(*t, nullptr, 0, 4).code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(tensor_get(*t, nullptr, 0, 0).ok());  // empty range is fine
}

TEST(TensorIO, ViewsReadAndWriteThroughTheirSource) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 4, 4);
  Tensor* row2 = view_1d(ctx, a, 4, 2 * a->nb[1]);
  auto b = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(row2->buffer, a->buffer);
  EXPECT_EQ(row2->data, static_cast<char*>(a->data) + 32);
  const float v[4] = {1, 2, 3, 4};
  ASSERT_TRUE(tensor_set(*row2, v, 0, sizeof v).ok());
  float all[16];
  ASSERT_TRUE(tensor_get(*a, all, 0, sizeof all).ok());
  EXPECT_EQ(all[8], 1);
  EXPECT_EQ(all[11], 4);
}

TEST(TensorIO, CopyRequiresTheSameLayout) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 4);
  Tensor* b = ctx.new_tensor_1d(Type::kF32, 4);
  Tensor* c = ctx.new_tensor_1d(Type::kF16, 4);
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok());
  const float v[4] = {1, -2, 3, -4};
  ASSERT_TRUE(tensor_set(*a, v, 0, 16).ok());
  ASSERT_TRUE(tensor_copy(*a, *b).ok());
  float out[4];
  ASSERT_TRUE(tensor_get(*b, out, 0, 16).ok());
  EXPECT_EQ(std::memcmp(out, v, 16), 0);
  Status s = tensor_copy(*a, *c);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("layouts differ"));
}

TEST(TensorAllocator, PacksAlignedAndNeverOverflows) {
  TestBufferType bt;
  auto buf = bt.alloc_buffer(100);
  ASSERT_TRUE(buf.ok());
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 5);   // 20 bytes -> next at 32
  Tensor* b = ctx.new_tensor_1d(Type::kF32, 10);  // 40 bytes at 32 -> next at 96
  Tensor* c = ctx.new_tensor_1d(Type::kF32, 2);   // 8 bytes at 96: does not fit in 100
  set_name(*c, "too_big");
  TensorAllocator talloc(**buf);
  ASSERT_TRUE(talloc.alloc(*a).ok());
  ASSERT_TRUE(talloc.alloc(*b).ok());
  EXPECT_EQ(static_cast<char*>(b->data) - static_cast<char*>(a->data), 32);
  Status s = talloc.alloc(*c);
  EXPECT_EQ(s.code(), StatusCode::kAllocFailed);
  EXPECT_THAT(s.message(), HasSubstr("too_big"));
  EXPECT_EQ(c->buffer, nullptr);
}

TEST(ContextAlloc, ChunksIntoAMultiBufferAtMaxSize) {
  TestBufferType bt;
  bt.max = 256;
  Context ctx({.no_alloc = true});
  std::vector<Tensor*> ts;
  for (int i = 0; i < 10; ++i) ts.push_back(ctx.new_tensor_1d(Type::kF32, 24));  // 96 bytes each, 2 per chunk
  Tensor* v = view_1d(ctx, ts[9], 4, 16);
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_TRUE(buf.ok()) << buf.status().message();
  ASSERT_TRUE((*buf)->is_multi());
  auto* multi = static_cast<MultiBuffer*>(buf->get());
  EXPECT_EQ(multi->part_count(), 5u);
  EXPECT_EQ(bt.live, 5);
  for (size_t p = 0; p < multi->part_count(); ++p) EXPECT_LE(multi->part(p)->size(), 256u);
  for (Tensor* t : ts) {
    ASSERT_NE(t->buffer, nullptr);
    EXPECT_FALSE(t->buffer->is_multi());  // tensors live in the parts
  }
  EXPECT_EQ(v->data, static_cast<char*>(ts[9]->data) + 16);
  multi->set_usage(BufferUsage::kWeights);
  for (size_t p = 0; p < multi->part_count(); ++p) EXPECT_EQ(multi->part(p)->usage(), BufferUsage::kWeights);
  // clearing applies to every part
  multi->clear(0x11);
  uint8_t byte = 0;
  ASSERT_TRUE(tensor_get(*ts[9], &byte, 95, 1).ok());
  EXPECT_EQ(byte, 0x11);
  buf->reset();
  EXPECT_EQ(bt.live, 0);  // freeing the multi-buffer frees every part
}

TEST(ContextAlloc, TensorAboveMaxSizeIsAnErrorAndNothingLeaks) {
  TestBufferType bt;
  bt.max = 256;
  Context ctx({.no_alloc = true});
  ctx.new_tensor_1d(Type::kF32, 8);
  Tensor* big = ctx.new_tensor_1d(Type::kF32, 100);
  set_name(*big, "token_embd.weight");
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_FALSE(buf.ok());
  EXPECT_THAT(buf.status().message(), HasSubstr("token_embd.weight"));
  EXPECT_THAT(buf.status().message(), HasSubstr("maximum allocation size"));
  EXPECT_EQ(bt.live, 0);
  EXPECT_EQ(big->buffer, nullptr);
}

TEST(ContextAlloc, FailedChunkAllocationFreesTheOthersAndPlacesNothing) {
  for (int fail_at = 0; fail_at < 3; ++fail_at) {
    TestBufferType bt;
    bt.max = 128;
    bt.fail_at = fail_at;
    Context ctx({.no_alloc = true});
    std::vector<Tensor*> ts;
    for (int i = 0; i < 3; ++i) ts.push_back(ctx.new_tensor_1d(Type::kF32, 32));  // 128 bytes: one per chunk
    auto buf = alloc_ctx_tensors(ctx, bt);
    ASSERT_FALSE(buf.ok());
    EXPECT_THAT(buf.status().message(), HasSubstr("injected failure"));
    EXPECT_EQ(bt.live, 0) << "fail_at " << fail_at;
    for (Tensor* t : ts) EXPECT_EQ(t->data, nullptr);
  }
}

TEST(ContextAlloc, NothingToAllocateReturnsNoBuffer) {
  Context ctx({.no_alloc = true});
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok());
  EXPECT_EQ(buf->get(), nullptr);
}

TEST(ContextAlloc, SkipsTensorsThatAlreadyHaveMemory) {
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 16);
  auto first = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(first.ok());
  void* where = a->data;
  Tensor* b = ctx.new_tensor_1d(Type::kF32, 16);
  auto second = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(a->data, where);
  EXPECT_EQ(b->buffer, second->get());
}

TEST(TensorAllocator, AnOffsetAlignedPastTheEndIsAnErrorNotAnUnderflow) {
  TestBufferType bt;
  auto buf = bt.alloc_buffer(90);
  ASSERT_TRUE(buf.ok());
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 20);  // 80 bytes: the next offset, aligned to 32, is 96 > 90
  Tensor* empty = ctx.new_tensor_1d(Type::kF32, 0);
  set_name(*empty, "empty");
  TensorAllocator talloc(**buf);
  ASSERT_TRUE(talloc.alloc(*a).ok());
  EXPECT_EQ(talloc.offset(), 96u);
  // Even a tensor of 0 bytes does not fit: 90 - 96 must not wrap around to a huge number of free bytes.
  Status s = talloc.alloc(*empty);
  EXPECT_EQ(s.code(), StatusCode::kAllocFailed);
  EXPECT_THAT(s.message(), HasSubstr("empty"));
  EXPECT_THAT(s.message(), HasSubstr("has 0 of 90 bytes left"));
  EXPECT_EQ(empty->buffer, nullptr);
}

TEST(ContextAlloc, ATensorTheBufferRefusesUndoesEveryTensorPlacedBeforeIt) {
  support::TestBufferType bt("Refusing");
  bt.refuse_tensor = "refused";
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 16);
  Tensor* b = ctx.new_tensor_1d(Type::kF32, 16);
  Tensor* c = ctx.new_tensor_1d(Type::kF32, 16);
  set_name(*c, "refused");
  Tensor* d = ctx.new_tensor_1d(Type::kF32, 16);
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(buf.status().message(), HasSubstr("refusing to hold refused"));
  for (Tensor* t : {a, b, c, d}) {  // a and b were placed before c failed: no pointer into the freed buffer is left
    EXPECT_EQ(t->buffer, nullptr) << t->name;
    EXPECT_EQ(t->data, nullptr) << t->name;
  }
  EXPECT_EQ(bt.live, 0);
}

TEST(ContextAlloc, AViewTheBufferRefusesUndoesTheTensorsPlacedBeforeIt) {
  support::TestBufferType bt("Refusing");
  bt.refuse_tensor = "refused_view";
  Context ctx({.no_alloc = true});
  Tensor* a = ctx.new_tensor_1d(Type::kF32, 16);
  Tensor* b = ctx.new_tensor_1d(Type::kF32, 16);
  Tensor* ok_view = view_1d(ctx, a, 4, 0);  // placed, then undone
  Tensor* v = view_1d(ctx, b, 4, 16);
  set_name(*v, "refused_view");
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_FALSE(buf.ok());
  EXPECT_THAT(buf.status().message(), HasSubstr("refusing to hold refused_view"));
  // v itself included: a view the buffer refuses must not keep pointing into the buffer that was just freed.
  for (Tensor* t : {a, b, ok_view, v}) {
    EXPECT_EQ(t->buffer, nullptr) << t->name;
    EXPECT_EQ(t->data, nullptr) << t->name;
  }
  EXPECT_EQ(bt.live, 0);
}

// Views made before their (foreign) source got memory: the context has nothing of its own to allocate, only views.
TEST(ContextAlloc, ViewsOfTensorsAllocatedSinceArePlacedWithoutANewBuffer) {
  Context wctx({.no_alloc = true});
  Tensor* w = wctx.new_tensor_2d(Type::kF32, 8, 4);
  Context ctx({.no_alloc = true});
  Tensor* row = view_1d(ctx, w, 8, 2 * w->nb[1]);
  ASSERT_EQ(row->buffer, nullptr);
  auto wbuf = alloc_ctx_tensors(wctx, *cpu::buffer_type());
  ASSERT_TRUE(wbuf.ok());
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().message();
  EXPECT_EQ(buf->get(), nullptr);  // nothing of its own to allocate
  EXPECT_EQ(row->buffer, wbuf->get());
  EXPECT_EQ(row->data, static_cast<char*>(w->data) + 64);
}

TEST(ContextAlloc, AViewOfALaterAllocatedTensorThatTheBufferRefusesIsAnError) {
  support::TestBufferType bt("Refusing");
  bt.refuse_tensor = "refused_view";
  Context wctx({.no_alloc = true});
  Tensor* w = wctx.new_tensor_1d(Type::kF32, 16);
  Context ctx({.no_alloc = true});
  Tensor* v = view_1d(ctx, w, 4, 0);
  set_name(*v, "refused_view");
  auto wbuf = alloc_ctx_tensors(wctx, bt);
  ASSERT_TRUE(wbuf.ok()) << wbuf.status().message();
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_FALSE(buf.ok());
  EXPECT_EQ(buf.status().code(), StatusCode::kUnsupported);
  EXPECT_THAT(buf.status().message(), HasSubstr("refusing to hold refused_view"));
  EXPECT_EQ(bt.live, 1);  // only w's buffer
  EXPECT_NE(w->buffer, nullptr);
}

TEST(ContextAlloc, LeavesPlacedViewsAndViewsOfUnplacedForeignTensorsAlone) {
  Context wctx({.no_alloc = true});
  Tensor* w = wctx.new_tensor_1d(Type::kF32, 16);
  auto wbuf = alloc_ctx_tensors(wctx, *cpu::buffer_type());
  ASSERT_TRUE(wbuf.ok());
  Context other({.no_alloc = true});
  Tensor* unplaced = other.new_tensor_1d(Type::kF32, 16);

  Context ctx({.no_alloc = true});
  Tensor* placed_view = view_1d(ctx, w, 4, 16);
  ASSERT_TRUE(view_init(*placed_view).ok());  // placed by hand before, at w + 16
  Tensor* orphan = view_1d(ctx, unplaced, 4, 0);
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 4);
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().message();
  EXPECT_EQ(t->buffer, buf->get());
  EXPECT_EQ(placed_view->buffer, wbuf->get());
  EXPECT_EQ(placed_view->data, static_cast<char*>(w->data) + 16);
  EXPECT_EQ(orphan->buffer, nullptr);  // its source has no memory: nothing to view yet
  EXPECT_EQ(orphan->data, nullptr);
  EXPECT_EQ(unplaced->buffer, nullptr);  // and the source is not this context's to allocate
}

TEST(ContextAlloc, SkipsAnEmptyTensorAlreadyPlacedInAnEmptyBuffer) {
  auto dummy = cpu::buffer_type()->alloc_buffer(0);
  ASSERT_TRUE(dummy.ok());
  Context ctx({.no_alloc = true});
  Tensor* empty = ctx.new_tensor_1d(Type::kF32, 0);
  ASSERT_TRUE(tensor_alloc(**dummy, *empty, nullptr).ok());
  ASSERT_EQ(empty->data, nullptr);  // a buffer but no data: still allocated
  Tensor* t = ctx.new_tensor_1d(Type::kF32, 8);
  TestBufferType bt;
  auto buf = alloc_ctx_tensors(ctx, bt);
  ASSERT_TRUE(buf.ok()) << buf.status().message();
  EXPECT_EQ(empty->buffer, dummy->get());
  EXPECT_EQ(t->buffer, buf->get());
  EXPECT_EQ((*buf)->size(), 32u);  // t alone
}
