// CLAMP in the graph file format (docs/graph-format.md): min and max in op_params 0 and 1, read back into the same
// node (text and computed values, infinite bounds included), and bounds the builder refuses (a NaN, min > max)
// rejected with the file, the tensor's path and what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/harness/graph/graph_io.h"
#include "unit/harness/graph/graph_io_support.h"

using namespace tessera;
using namespace tessera::harness;
using ::testing::HasSubstr;
using ojson = nlohmann::ordered_json;
using tessera::test::f32_bits;
using tessera::test::index_of;

namespace {

struct ClampGraph {
  std::unique_ptr<Context> ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  std::unique_ptr<Graph> graph = std::make_unique<Graph>();
};

// x [3, 2]: llama.cpp's MoE clamp [2^-14, +inf] of the row sums, and a two-sided clamp [0, 1] of x.
ClampGraph clamp_graph() {
  ClampGraph g;
  Context& c = *g.ctx;
  Tensor* x = c.new_tensor_2d(Type::kF32, 3, 2);
  set_name(*x, "x");
  set_input(*x);
  Tensor* sum = sum_rows(c, x);
  Tensor* moe = clamp(c, sum, 6.103515625e-5f, INFINITY);
  Tensor* unit = clamp(c, x, 0.0f, 1.0f);
  EXPECT_TRUE(c.ok()) << c.status().to_string();
  set_name(*moe, "sum_clamped");
  set_name(*unit, "x_clamped");
  for (Tensor* t : {moe, unit}) {
    set_output(*t);
    EXPECT_TRUE(g.graph->build_forward(t).ok());
  }
  return g;
}

std::vector<float> values_of(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(nelements(t)));
  EXPECT_TRUE(tensor_get(t, v.data(), 0, v.size() * 4).ok());
  return v;
}

TEST(GraphIoClamp, BoundsRoundTripAndCompute) {
  ClampGraph g = clamp_graph();
  const std::string text = graph_to_json(*g.graph);
  const ojson j = ojson::parse(text);
  const ojson& moe = j["tensors"][index_of(j, "sum_clamped")];
  EXPECT_EQ(moe["op"], "CLAMP");
  ASSERT_GE(moe["op_params"].size(), 2u);
  EXPECT_EQ(moe["op_params"][0], f32_bits(6.103515625e-5f));
  EXPECT_EQ(moe["op_params"][1], f32_bits(INFINITY));
  Result<LoadedGraph> l = graph_from_json(text, "clamp.json");
  ASSERT_TRUE(l.ok()) << l.status().to_string();
  EXPECT_EQ(graph_to_json(*l->graph), text);
  const Tensor* back = l->by_name("sum_clamped");
  ASSERT_NE(back, nullptr);
  EXPECT_EQ(back->op, Op::kClamp);
  EXPECT_EQ(get_op_param<float>(*back, 0), 6.103515625e-5f);
  EXPECT_EQ(get_op_param<float>(*back, 1), INFINITY);

  // The loaded graph computes: row 0 sums to 0 (clamped up to 2^-14), row 1 to 3.5 (kept); x to [0, 1].
  auto buf = alloc_ctx_tensors(*l->ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok()) << buf.status().to_string();
  const std::vector<float> x = {-2.0f, 0.5f, 1.5f, 3.0f, 0.25f, 0.25f};
  ASSERT_TRUE(tensor_set(*l->by_name("x"), x.data(), 0, x.size() * 4).ok());
  std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 1});
  ASSERT_EQ(backend->graph_compute(*l->graph), ComputeStatus::kSuccess) << backend->last_error();
  EXPECT_EQ(values_of(*l->by_name("sum_clamped")), (std::vector<float>{6.103515625e-5f, 3.5f}));
  EXPECT_EQ(values_of(*l->by_name("x_clamped")), (std::vector<float>{0.0f, 0.5f, 1.0f, 1.0f, 0.25f, 0.25f}));
}

TEST(GraphIoClamp, BadBoundsAreNamed) {
  ClampGraph g = clamp_graph();
  const ojson base = ojson::parse(graph_to_json(*g.graph));
  const size_t u = index_of(base, "x_clamped");
  const std::string at = "tensors[" + std::to_string(u) + "]";
  struct Edit {
    int slot;
    float value;
    const char* says;
  };
  const Edit edits[] = {
      {0, 2.0f, "min 2 is above max 1"},
      {1, -1.0f, "min 0 is above max -1"},
      {0, NAN, "must not be NaN"},
      {1, NAN, "must not be NaN"},
  };
  for (const Edit& e : edits) {
    SCOPED_TRACE("slot " + std::to_string(e.slot) + " = " + std::to_string(e.value));
    ojson j = base;
    j["tensors"][u]["op_params"][static_cast<size_t>(e.slot)] = f32_bits(e.value);
    Result<LoadedGraph> l = graph_from_json(j.dump(1), "bad_clamp.json");
    ASSERT_FALSE(l.ok()) << "accepted";
    EXPECT_EQ(l.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(l.status().message(), HasSubstr("bad_clamp.json"));
    EXPECT_THAT(l.status().message(), HasSubstr(at));
    EXPECT_THAT(l.status().message(), HasSubstr("CLAMP"));
    EXPECT_THAT(l.status().message(), HasSubstr(e.says));
  }
}

}  // namespace
