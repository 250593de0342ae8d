// The random graph generator's WriteBack step: a write (SET_ROWS or CPY) into a leaf that an earlier step read, the
// pattern a state read and then stored over makes. Fixed descriptions that ask for each of its three forms build a
// graph where the write comes after the read and computes on the CPU as written: the earlier reader sees the leaf's
// old values (checked against a product worked out here), and the leaf ends up holding what was written into it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "support/graph_gen.h"
#include "tessera/cpu.h"

namespace tessera {
namespace {

using graphgen::GraphDesc;
using graphgen::Step;
using graphgen::StepKind;

std::vector<float> floats(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(nelements(t)));
  EXPECT_TRUE(tensor_get(t, v.data(), 0, v.size() * sizeof(float)).ok());
  return v;
}

struct Built {
  graphgen::BuiltGraph g;
  std::unique_ptr<Buffer> buf;
  Tensor* find(const char* name) const { return g.ctx->find(name); }  // (no external leafs here: all in ctx)
  int position(const Tensor* node) const {
    for (size_t i = 0; i < g.graph->n_nodes(); ++i) {
      if (g.graph->node(i) == node) return static_cast<int>(i);
    }
    return -1;
  }
};

// Builds d (weights in CPU memory), allocates and fills it.
void build_and_fill(const GraphDesc& d, Built* b) {
  b->g = graphgen::build(d, {.weight_buft = cpu::buffer_type()});
  ASSERT_TRUE(b->g.ok()) << b->g.status.to_string() << "\n" << d;
  auto buf = alloc_ctx_tensors(*b->g.ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  b->buf = std::move(buf).value();
  ASSERT_TRUE(b->g.fill_data().ok());
}

void compute(const Built& b) {
  auto be = cpu::make_backend({.n_threads = 2});
  ASSERT_EQ(be->graph_compute(*b.g.graph), ComputeStatus::kSuccess) << be->last_error();
}

// y[m, t] = sum_k w[k, m] * x[k, t] (ggml's mul_mat: rows of w against columns of x)
std::vector<float> product(const std::vector<float>& w, const std::vector<float>& x, int K, int M, int T) {
  std::vector<float> y(static_cast<size_t>(M) * T, 0.0f);
  for (int t = 0; t < T; ++t) {
    for (int m = 0; m < M; ++m) {
      double s = 0;
      for (int k = 0; k < K; ++k) s += double(w[size_t(m) * K + k]) * x[size_t(t) * K + k];
      y[size_t(t) * M + m] = static_cast<float>(s);
    }
  }
  return y;
}

void expect_near_all(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::abs(want[i]))) << what << i;
}

constexpr int kT = 3, kE = 32, kM = 8;
// v0.x [32, T] (the first input) and v1.weight [32, 8] f32 (MulMat p = 5: type 0, M = 8), v2.mul_mat [8, T]
const Step kProduct{StepKind::kMulMat, 0, 0, 5, 0, 0, 5};

GraphDesc desc(uint32_t seed, std::vector<Step> steps) {
  GraphDesc d;
  d.tokens = kT;
  d.width = kE;
  d.seed = seed;
  d.steps = std::move(steps);
  return d;
}

TEST(GraphGenWriteBack, SetRowsOfFreshRowsIntoAWeightAfterItsProduct) {
  // a = 0: the most recent leaf read so far (v1.weight); p = 1: SET_ROWS of fresh rows; q = 2: 1 + 2 % 8 = 3 rows
  const GraphDesc d = desc(7, {kProduct, Step{StepKind::kWriteBack, 0, 0, 1, 2, 0, 5}});
  Built b;
  build_and_fill(d, &b);
  const Tensor* w = b.find("v1.weight");
  const Tensor* x = b.find("v0.x");
  const Tensor* y = b.find("v2.mul_mat");
  const Tensor* wb = b.find("v5.write_back");
  const Tensor* rows = b.find("v3.next_rows");
  const Tensor* slots = b.find("v4.next_slots");
  ASSERT_TRUE(w && x && y && wb && rows && slots) << b.g.dump();
  EXPECT_EQ(wb->op, Op::kSetRows);
  EXPECT_EQ(wb->view_src, w);
  EXPECT_EQ(rows->ne[1], 3);
  EXPECT_LT(b.position(y), b.position(wb)) << "the write comes after the read";
  const std::vector<float> w0 = floats(*w), x0 = floats(*x), r = floats(*rows);
  std::vector<int32_t> ids(3);
  ASSERT_TRUE(tensor_get(*slots, ids.data(), 0, ids.size() * 4).ok());
  compute(b);
  expect_near_all(floats(*y), product(w0, x0, kE, kM, kT), "the product of the weight before the write, at ");
  std::vector<float> want = w0;
  for (size_t k = 0; k < ids.size(); ++k) {
    ASSERT_TRUE(ids[k] >= 0 && ids[k] < kM) << ids[k];
    for (int e = 0; e < kE; ++e) want[size_t(ids[k]) * kE + e] = r[k * kE + e];
  }
  EXPECT_EQ(floats(*w), want) << "the weight holds the rows at their slots, and its other rows as they were";
}

TEST(GraphGenWriteBack, CpyOfAFreshStateIntoAWeightAfterItsProduct) {
  const GraphDesc d = desc(8, {kProduct, Step{StepKind::kWriteBack, 0, 0, 0, 0, 0, 0}});  // p = 0: CPY of a fresh value
  Built b;
  build_and_fill(d, &b);
  const Tensor* w = b.find("v1.weight");
  const Tensor* y = b.find("v2.mul_mat");
  const Tensor* wb = b.find("v4.write_back");
  const Tensor* src = b.find("v3.next_state");
  ASSERT_TRUE(w && y && wb && src) << b.g.dump();
  EXPECT_EQ(wb->op, Op::kCpy);
  EXPECT_EQ(wb->view_src, w);
  EXPECT_LT(b.position(y), b.position(wb));
  const std::vector<float> w0 = floats(*w), x0 = floats(*b.find("v0.x")), s = floats(*src);
  ASSERT_NE(w0, s);
  compute(b);
  expect_near_all(floats(*y), product(w0, x0, kE, kM, kT), "the product of the weight before the write, at ");
  EXPECT_EQ(floats(*w), s);
}

TEST(GraphGenWriteBack, SetRowsOfAnEarlierValueIntoTheInputItWasComputedFrom) {
  // v3 = silu(v0.x) (Unary a = 2: the third most recent float value); WriteBack a = 1: the first input (leafs read so
  // far, most recent first: v1.weight, v0.x); p = 3: rows from the pool (b = 0: v3, the only one that fits)
  const GraphDesc d =
      desc(9, {kProduct, Step{StepKind::kUnary, 2, 0, 0, 0, 0, 0}, Step{StepKind::kWriteBack, 1, 0, 3, 0, 0, 5}});
  Built b;
  build_and_fill(d, &b);
  const Tensor* x = b.find("v0.x");
  const Tensor* act = b.find("v3.unary");
  const Tensor* wb = b.find("v5.write_back");
  const Tensor* slots = b.find("v4.next_slots");
  ASSERT_TRUE(x && act && wb && slots) << b.g.dump();
  EXPECT_EQ(wb->op, Op::kSetRows);
  EXPECT_EQ(wb->view_src, x);
  EXPECT_EQ(wb->src[1], act);
  const std::vector<float> x0 = floats(*x);
  std::vector<int32_t> ids(kT);
  ASSERT_TRUE(tensor_get(*slots, ids.data(), 0, ids.size() * 4).ok());
  compute(b);
  std::vector<float> want(x0.size());
  for (int t = 0; t < kT; ++t) {
    ASSERT_TRUE(ids[t] >= 0 && ids[t] < kT) << ids[t];
    for (int e = 0; e < kE; ++e) {
      const float v = x0[size_t(t) * kE + e];
      want[size_t(ids[t]) * kE + e] = v / (1.0f + std::exp(-v));  // silu of the row before the write
    }
  }
  expect_near_all(floats(*x), want, "the input holds silu of its rows, permuted by the slots, at ");
}

TEST(GraphGenWriteBack, NoLeafReadYetMeansNoStep) {
  GraphDesc d;
  d.tokens = 2;
  d.width = 16;
  d.steps = {Step{StepKind::kWriteBack, 0, 0, 1, 0, 0, 5}, Step{StepKind::kUnary, 0, 0, 0, 0, 0, 5}};
  graphgen::BuiltGraph g = graphgen::build(d, {.weight_buft = cpu::buffer_type()});
  ASSERT_TRUE(g.ok()) << g.status.to_string();
  for (size_t i = 0; i < g.graph->n_nodes(); ++i) {
    EXPECT_NE(g.graph->node(i)->op, Op::kSetRows);
    EXPECT_NE(g.graph->node(i)->op, Op::kCpy);
  }
}

}  // namespace
}  // namespace tessera
