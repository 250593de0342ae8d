// The random graph generator's gpt-oss steps (GLU SWIGLU_OAI, SOFT_MAX with sinks, ADD_ID): a fixed description
// that asks for each builds a valid graph that holds them and computes on the CPU, so the properties that draw such
// steps test those ops rather than a generator failure.
#include <gtest/gtest.h>

#include "support/graph_gen.h"
#include "tessera/cpu.h"

namespace tessera {
namespace {

using graphgen::GraphDesc;
using graphgen::Step;
using graphgen::StepKind;

TEST(GraphGenGptOss, StepsBuildTheOpsAndCompute) {
  GraphDesc d;
  d.tokens = 3;
  d.width = 32;
  d.seed = 11;
  d.steps = {
      Step{StepKind::kGlu, 0, 0, 0, 2 | (5 << 2), 0, 5},  // single-input SWIGLU_OAI, limit 3
      Step{StepKind::kGlu, 0, 0, 2, 2, 0, 5},             // two-input SWIGLU_OAI, limit 0.5
      Step{StepKind::kSoftMax, 0, 0, 1, 16, 0, 5},        // fresh mask and sinks
      Step{StepKind::kAddId, 0, 0, 3, 0, 0, 5},           // 5 experts
  };
  graphgen::BuiltGraph g = graphgen::build(d, {.weight_buft = cpu::buffer_type()});
  ASSERT_TRUE(g.ok()) << g.status.to_string() << "\n" << d;
  int oai = 0, sinks = 0, add_ids = 0;
  for (size_t i = 0; i < g.graph->n_nodes(); ++i) {
    const Tensor& n = *g.graph->node(i);
    if (n.op == Op::kGlu && n.op_params[0] == static_cast<int32_t>(GluOp::kSwigluOai)) ++oai;
    if (n.op == Op::kSoftMax && n.src[2] != nullptr) ++sinks;
    if (n.op == Op::kAddId) ++add_ids;
  }
  EXPECT_EQ(oai, 2);
  EXPECT_EQ(sinks, 1);
  EXPECT_EQ(add_ids, 1);
  auto buf = alloc_ctx_tensors(*g.ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  ASSERT_TRUE(g.fill_data().ok());
  auto be = cpu::make_backend({.n_threads = 2});
  ASSERT_EQ(be->graph_compute(*g.graph), ComputeStatus::kSuccess) << be->last_error();
}

}  // namespace
}  // namespace tessera
