// Fuzz target: the graph memory planner alone (docs/planner.md, src/tessera/planner.h). Bytes -> a random valid graph
// (tests/support/graph_gen.h, desc_from_bytes) -> GraphPlanner on the CPU buffer type, then the independent
// checker of tests/support/planner_check.h: no two live tensors share bytes, every tensor of the graph has memory,
// tensors with memory of their own (external leafs) are not moved. The first byte picks the sequence:
//   bit 0: alloc_graph directly, or reserve with the graph first and then alloc_graph of the same description with
//          fewer tokens (which must need no re-plan);
//   bit 1: a buffer type with a small maximum allocation size (the planner then splits its memory into chunks).
// Nothing is computed (end_to_end does that).
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "support/graph_gen.h"
#include "support/host_buffer_type.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "support/planner_check.h"

namespace {

using namespace tessera;

struct SmallHostType final : support::TestBufferType {
  SmallHostType() : TestBufferType("SmallHost", 4096) {}
};

template <typename Detail>
void check_placed(const graphgen::BuiltGraph& g, const GraphPlanner& ga, const std::vector<void*>& external_data,
                  Detail detail) {
  for (const Tensor* t : g.graph->leafs()) {
    FUZZ_CHECK(t->view_src != nullptr || t->data != nullptr,
               std::string("leaf '") + t->name + "' has no memory\n" + detail(g));
  }
  for (const Tensor* t : g.graph->nodes()) {
    FUZZ_CHECK(t->data != nullptr, std::string("node '") + t->name + "' has no memory\n" + detail(g));
  }
  for (size_t i = 0; i < g.externals.size(); ++i) {
    FUZZ_CHECK(g.externals[i]->data == external_data[i], "the planner moved an external tensor\n" + detail(g));
    FUZZ_CHECK(!ga.owns(g.externals[i]->buffer), "an external tensor was placed in a planner buffer\n" + detail(g));
  }
  const std::string why = check::find_overlap(*g.graph, [&](const Tensor* t) { return ga.owns(tensor_buffer(*t)); });
  FUZZ_CHECK(why.empty(), why + "\n" + detail(g));
}

std::vector<void*> external_data(const graphgen::BuiltGraph& g) {
  std::vector<void*> out;
  for (const Tensor* t : g.externals) out.push_back(t->data);
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ByteReader in(data, size);
  const uint8_t mode = in.byte();
  const graphgen::GraphDesc desc = graphgen::desc_from_bytes(in.rest_data(), in.rest_size());
  static SmallHostType small_type;
  BufferType* buft = (mode & 2) ? static_cast<BufferType*>(&small_type) : cpu::buffer_type();
  const graphgen::BuildOptions opts{.weight_buft = cpu::buffer_type()};

  graphgen::BuiltGraph big = graphgen::build(desc, opts);
  // Printed with every failure (built only then): the description can be pasted into a regression test.
  auto detail = [&](const graphgen::BuiltGraph& g) {
    std::ostringstream os;
    os << "mode " << int(mode) << ", " << desc << "\n" << g.dump();
    return os.str();
  };
  FUZZ_CHECK(big.ok(), "graph_gen built an invalid graph (generator bug): " + big.status.to_string());
  GraphPlanner ga(buft);
  if ((mode & 1) == 0) {
    const auto before = external_data(big);
    const Status s = ga.alloc_graph(*big.graph);
    if (!s.ok()) {
      // Only a tensor larger than the small type's maximum may be refused.
      FUZZ_CHECK((mode & 2) != 0, "alloc_graph failed: " + s.to_string() + "\n" + detail(big));
      return 0;
    }
    check_placed(big, ga, before, detail);
    return 0;
  }
  const Status reserved = ga.reserve(*big.graph);
  if (!reserved.ok()) {
    FUZZ_CHECK((mode & 2) != 0, "reserve failed: " + reserved.to_string() + "\n" + detail(big));
    return 0;
  }
  const int fewer = 1 + static_cast<int>(mode >> 2) % std::max(1, desc.tokens);
  graphgen::BuiltGraph small = graphgen::build(graphgen::with_tokens(desc, fewer), opts);
  FUZZ_CHECK(small.ok(), "graph_gen built an invalid graph (generator bug): " + small.status.to_string());
  const std::string replan = ga.needs_replan(*small.graph);
  FUZZ_CHECK(replan.empty(), "a smaller batch needs a re-plan: " + replan + "\n" + detail(small));
  const auto before = external_data(small);
  const Status s = ga.alloc_graph(*small.graph);
  FUZZ_CHECK(s.ok(), "alloc_graph of the smaller batch failed: " + s.to_string() + "\n" + detail(small));
  FUZZ_CHECK(ga.replan_count() == 0, "alloc_graph re-planned for a smaller batch\n" + detail(small));
  check_placed(small, ga, before, detail);
  return 0;
}
