// Fuzz target: the serialized-graph parser (docs/graph-format.md). Any text: graph_from_json returns a graph
// or an error naming the source; it never crashes, throws, leaks or hangs. An accepted graph is well formed (every
// node's sources are in the graph or are leafs, the lists by role agree with the flags) and round-trips:
// graph_to_json of it parses back to a graph that writes the same text.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_set>

#include "fuzz_input.h"
#include "tessera/harness/graph/graph_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string source = "fuzz-graph.json";
  auto parsed = harness::graph_from_json(fuzz::as_text(data, size), source);
  if (!parsed.ok()) {
    const std::string message = parsed.status().to_string();
    FUZZ_CHECK(message.find(source) != std::string::npos, "the error does not name the source: " + message);
    return 0;
  }
  const harness::LoadedGraph& loaded = *parsed;
  FUZZ_CHECK(loaded.graph != nullptr && loaded.ctx != nullptr, "an accepted graph without graph or context");
  for (const Tensor* t : loaded.inputs) FUZZ_CHECK((t->flags & kFlagInput) != 0, "inputs lists a tensor not INPUT");
  for (const Tensor* t : loaded.outputs) FUZZ_CHECK((t->flags & kFlagOutput) != 0, "outputs lists a tensor not OUTPUT");
  // Sources come before their users: a source of node i that is a node of the graph is one of nodes 0..i-1.
  const std::unordered_set<const Tensor*> nodes(loaded.graph->nodes().begin(), loaded.graph->nodes().end());
  std::unordered_set<const Tensor*> done;
  for (const Tensor* n : loaded.graph->nodes()) {
    for (const Tensor* s : n->src) {
      FUZZ_CHECK(s == nullptr || nodes.count(s) == 0 || done.count(s) != 0,
                 std::string("node '") + n->name + "' uses a later node");
    }
    done.insert(n);
  }
  const std::string written = harness::graph_to_json(*loaded.graph);
  auto reparsed = harness::graph_from_json(written, "written.json");
  FUZZ_CHECK(reparsed.ok(), "the written graph does not parse: " + reparsed.status().to_string());
  const std::string rewritten = harness::graph_to_json(*reparsed->graph);
  FUZZ_CHECK(rewritten == written, "the graph does not round-trip");
  return 0;
}
