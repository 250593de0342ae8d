// Property of the graph memory planner with a padding buffer type (docs/planner.md, "Sizes"): a buffer type whose
// alloc_size(t) > nbytes(t), by an amount that depends on the tensor's op (as a simulated device's padding rules may,
// docs/topology.md). Over random valid graphs (tests/support/graph_gen.h): no two simultaneously live tensors share a
// byte of their padded extents, and every tensor's padded extent lies inside its buffer.
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <array>
#include <string>

#include "support/graph_gen.h"
#include "support/host_buffer_type.h"
#include "support/planner_check.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"

using namespace tessera;
using graphgen::BuiltGraph;
using graphgen::GraphDesc;

namespace {

// Host memory that pads each tensor by pad[op] bytes (weights and other leafs have op NONE).
struct PaddedHostType final : support::TestBufferType {
  PaddedHostType() : TestBufferType("PaddedHost") {}
  std::array<size_t, kOpCount> pad{};
  size_t alloc_size(const Tensor& t) const override { return nbytes(t) + pad[static_cast<size_t>(t.op)]; }
};

}  // namespace

RC_GTEST_PROP(PlannerPaddingProperties, PaddedTensorsNeverOverlapAndFitTheirBuffers, (const GraphDesc& desc)) {
  BuiltGraph g = graphgen::build(desc, {.weight_buft = cpu::buffer_type()});
  if (!g.ok()) RC_FAIL("the generator built an invalid graph (generator bug): " + g.status.to_string());
  PaddedHostType padded;
  // Per op: no padding, a few bytes (below the alignment) or more than one alignment unit.
  for (size_t op = 0; op < padded.pad.size(); ++op) {
    padded.pad[op] = *rc::gen::element<size_t>(0, 0, 4, 31, 96, 1000);
  }
  using P = GraphPlanner::Packing;
  for (P p : {P::kOnline, P::kOffline, P::kBest}) {
    GraphPlanner ga(&padded);
    ga.set_packing(p);
    Status s = ga.alloc_graph(*g.graph);
    if (!s.ok()) fail(g, "alloc_graph failed: " + s.to_string());
    const char* which = p == P::kOnline ? "online" : p == P::kOffline ? "offline" : "best";
    auto planned = [&](const Tensor* t) { return ga.owns(tensor_buffer(*t)); };
    auto padded_size = [&](const Tensor& t) { return padded.alloc_size(t); };
    if (std::string why = check::find_overlap(*g.graph, planned, padded_size); !why.empty()) {
      fail(g, std::string(which) + " packing: " + why);
    }
    for (const Graph* gr : {g.graph.get()}) {
      for (size_t i = 0; i < gr->n_nodes() + gr->n_leafs(); ++i) {
        const Tensor* t = i < gr->n_nodes() ? gr->node(i) : gr->leaf(i - gr->n_nodes());
        if (t->view_src != nullptr || !planned(t) || t->data == nullptr) continue;
        Buffer* b = tensor_buffer(*t);
        const size_t off = static_cast<size_t>(static_cast<char*>(t->data) - static_cast<char*>(b->base()));
        if (off + padded.alloc_size(*t) > b->size()) {
          fail(g, std::string(which) + " packing: '" + t->name + "' at offset " + std::to_string(off) + " needs " +
                      std::to_string(padded.alloc_size(*t)) + " bytes, its buffer has " + std::to_string(b->size()));
        }
      }
    }
  }
}
