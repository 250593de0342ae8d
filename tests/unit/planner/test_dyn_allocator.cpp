// The planner's dynamic allocator: alignment, best fit, merging, tails, chunks, max-size errors.
#include <gtest/gtest.h>

#include "src/alloc/dyn_allocator.h"

using tessera::BlockAddress;
using tessera::DynamicAllocator;

namespace {
BlockAddress must(tessera::Result<BlockAddress> r) {
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? *r : BlockAddress{};
}
}  // namespace

TEST(DynAllocator, RoundsToTheAlignment) {
  DynamicAllocator d(32, SIZE_MAX);
  EXPECT_EQ(must(d.alloc(1)).offset, 0u);
  EXPECT_EQ(must(d.alloc(33)).offset, 32u);
  EXPECT_EQ(must(d.alloc(1)).offset, 96u);
  EXPECT_EQ(d.chunk_size(0), 128u);
  EXPECT_EQ(d.bytes_in_use(), 128u);
}

TEST(DynAllocator, FreedNeighboursMergeAndAreReused) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(128)), b = must(d.alloc(128)), c = must(d.alloc(128));
  (void)c;
  d.free(a, 128);
  d.free(b, 128);  // merges with a: one inner block [0, 256)
  BlockAddress big = must(d.alloc(256));
  EXPECT_EQ(big.offset, 0u);
  EXPECT_EQ(d.chunk_size(0), 384u);  // no growth
}

TEST(DynAllocator, BestFitAmongInnerBlocks) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(256)), s1 = must(d.alloc(32)), b = must(d.alloc(128)), s2 = must(d.alloc(32));
  (void)s1;
  (void)s2;
  d.free(a, 256);
  d.free(b, 128);
  // 96 bytes fit both holes; the smaller one (128 at offset 288) is the best fit
  EXPECT_EQ(must(d.alloc(96)).offset, 288u);
  // what is left of that hole (32 bytes at 384) stays free and is found again
  EXPECT_EQ(must(d.alloc(32)).offset, 384u);
  EXPECT_EQ(must(d.alloc(256)).offset, 0u);
  EXPECT_EQ(d.chunk_size(0), 448u);
}

// ggml-alloc's tie rule (ggml_dyn_tallocr_alloc, `block->size <= best_fit_size`): of two holes of the best size,
// the later one. llama.cpp's compute buffers are predicted with this allocator, so its choices are ggml's.
TEST(DynAllocator, TiesGoToTheLaterHoleAsInGgmlAlloc) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(128)), s1 = must(d.alloc(32)), b = must(d.alloc(128)), s2 = must(d.alloc(32));
  (void)s1;
  (void)s2;
  d.free(a, 128);
  d.free(b, 128);  // holes [0, 128) and [160, 288)
  EXPECT_EQ(must(d.alloc(96)).offset, 160u);
  EXPECT_EQ(must(d.alloc(128)).offset, 0u);  // the only hole left that holds it
  EXPECT_EQ(d.chunk_size(0), 320u);
}

TEST(DynAllocator, UsesTheTailWhenNoHoleFitsAndGrowsTheChunk) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(64));
  must(d.alloc(64));
  d.free(a, 64);
  EXPECT_EQ(must(d.alloc(96)).offset, 128u);  // the 64-byte hole is too small
  EXPECT_EQ(d.chunk_size(0), 224u);
}

TEST(DynAllocator, FreeingTheLastBlockRestoresTheTail) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(64)), b = must(d.alloc(64));
  d.free(b, 64);
  d.free(a, 64);
  EXPECT_EQ(d.bytes_in_use(), 0u);
  // everything merged back into the tail: a large request starts at 0, growing the high-water mark
  EXPECT_EQ(must(d.alloc(1024)).offset, 0u);
  EXPECT_EQ(d.chunk_size(0), 1024u);
}

TEST(DynAllocator, ChunksAtTheMaxSizeAndLeastGrowthTail) {
  DynamicAllocator d(32, 512);
  BlockAddress a = must(d.alloc(320));
  BlockAddress b = must(d.alloc(320));  // does not fit chunk 0's tail (320 + 320 > 512)
  EXPECT_EQ(a.chunk, 0);
  EXPECT_EQ(b.chunk, 1);
  BlockAddress c = must(d.alloc(160));  // both tails fit 160: equal growth, first chunk wins
  EXPECT_EQ(c.chunk, 0);
  EXPECT_EQ(c.offset, 320u);
  d.free(c, 160);
  d.free(a, 320);  // chunk 0 is empty again; its high-water mark stays 480
  BlockAddress e = must(d.alloc(480));
  EXPECT_EQ(e.chunk, 0);  // fits chunk 0 without growth; chunk 1's tail would grow
  EXPECT_EQ(d.n_chunks(), 2);
  EXPECT_LE(d.chunk_size(0), 512u);
  EXPECT_LE(d.chunk_size(1), 512u);
}

TEST(DynAllocator, ExactlyFullChunkThenFree) {
  DynamicAllocator d(32, 256);
  BlockAddress a = must(d.alloc(256));  // uses the whole chunk: no tail left
  BlockAddress b = must(d.alloc(32));   // must go to a new chunk
  EXPECT_EQ(b.chunk, 1);
  d.free(a, 256);
  BlockAddress c = must(d.alloc(200));
  EXPECT_EQ(c.chunk, 0);
  EXPECT_EQ(c.offset, 0u);
}

TEST(DynAllocator, AboveTheMaxSizeIsAnError) {
  DynamicAllocator d(32, 256);
  auto r = d.alloc(257);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("maximum buffer size"), std::string::npos);
}

TEST(DynAllocator, TotalSizeIsTheSumOfTheChunksHighWaterMarks) {
  DynamicAllocator d(32, 256);
  EXPECT_EQ(d.total_size(), 0u);
  BlockAddress a = must(d.alloc(200));  // chunk 0: 224
  BlockAddress b = must(d.alloc(100));  // does not fit beside a: chunk 1, 128
  EXPECT_EQ(b.chunk, 1);
  EXPECT_EQ(d.total_size(), 224u + 128u);
  d.free(a, 200);
  d.free(b, 100);
  EXPECT_EQ(d.total_size(), 352u);  // high-water marks stay after frees
  d.reset();
  EXPECT_EQ(d.total_size(), 0u);
  EXPECT_EQ(d.n_chunks(), 1);
}

TEST(DynAllocator, AnEmptyBlockTakesNoBytesAndFreeingItChangesNothing) {
  DynamicAllocator d(32, SIZE_MAX);
  BlockAddress a = must(d.alloc(64));
  BlockAddress z = must(d.alloc(0));
  EXPECT_EQ(z.offset, 64u);
  EXPECT_EQ(d.bytes_in_use(), 64u);
  BlockAddress b = must(d.alloc(64));
  EXPECT_EQ(b.offset, 64u);  // the empty block did not take the tail's bytes
  d.free(z, 0);
  EXPECT_EQ(d.bytes_in_use(), 128u);
  d.free(a, 64);
  // the hole [0, 64) is the only inner block: 32 bytes go there, then 32 more fill it, then the tail
  EXPECT_EQ(must(d.alloc(32)).offset, 0u);
  EXPECT_EQ(must(d.alloc(32)).offset, 32u);
  EXPECT_EQ(must(d.alloc(32)).offset, 128u);
  EXPECT_EQ(d.chunk_size(0), 160u);
  EXPECT_EQ(d.bytes_in_use(), 160u);
}
