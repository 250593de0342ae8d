// The random graph generator's CLAMP step: a fixed description that asks for each of its six bound pairs builds a
// valid graph that holds them (on the input and on computed values) and computes on the CPU within the bounds, so the
// properties that draw the step test the op rather than a generator failure.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "support/graph_gen.h"
#include "tessera/cpu.h"

namespace tessera {
namespace {

using graphgen::GraphDesc;
using graphgen::Step;
using graphgen::StepKind;

TEST(GraphGenClamp, StepsBuildTheOpAndCompute) {
  GraphDesc d;
  d.tokens = 3;
  d.width = 32;
  d.seed = 13;
  for (uint8_t p = 0; p < 6; ++p) {
    d.steps.push_back(Step{StepKind::kScale, 0, 0, p, 0, 0, 0});
    d.steps.push_back(Step{StepKind::kClamp, 0, 0, p, 0, 0, 5});  // bounds p of the step's table, OUTPUT
  }
  graphgen::BuiltGraph g = graphgen::build(d, {.weight_buft = cpu::buffer_type()});
  ASSERT_TRUE(g.ok()) << g.status.to_string() << "\n" << d;
  std::vector<Tensor*> clamps;
  for (size_t i = 0; i < g.graph->n_nodes(); ++i) {
    Tensor* n = g.graph->node(i);
    if (n->op == Op::kClamp) clamps.push_back(n);
  }
  ASSERT_EQ(clamps.size(), 6u);
  auto buf = alloc_ctx_tensors(*g.ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  ASSERT_TRUE(g.fill_data().ok());
  auto be = cpu::make_backend({.n_threads = 2});
  ASSERT_EQ(be->graph_compute(*g.graph), ComputeStatus::kSuccess) << be->last_error();
  for (const Tensor* n : clamps) {
    const float lo = get_op_param<float>(*n, 0), hi = get_op_param<float>(*n, 1);
    EXPECT_LE(lo, hi) << n->name;
    EXPECT_NE(lo, 0.0f) << n->name;  // no bound zero: no zero reaches a DIV the generator makes later
    EXPECT_NE(hi, 0.0f) << n->name;
    std::vector<float> v(static_cast<size_t>(nelements(*n)));
    ASSERT_TRUE(tensor_get(*n, v.data(), 0, v.size() * 4).ok());
    for (float x : v) {
      EXPECT_TRUE(x >= lo && x <= hi) << n->name << ": " << x << " outside [" << lo << ", " << hi << "]";
    }
  }
}

}  // namespace
}  // namespace tessera
