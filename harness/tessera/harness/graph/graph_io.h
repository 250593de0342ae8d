// Serialized graphs (docs/graph-format.md): any Graph written as JSON and read back without trusting the file. Used by
// scenario files, `tessera repro`, the property tests and the fuzzers to write out a graph (a counterexample) and
// replay it. The format and its validation rules: docs/graph-format.md.
//
// Writing records every tensor reachable from the graph (leafs, nodes, their sources and view sources) with its id,
// name, type, ne, nb, op, op_params, sources, view source and offset, flags and a role hint; no tensor data.
//
// Reading rebuilds every computed tensor with the op's building function (build.h) from the loaded sources and the
// decoded op_params, and then requires the file's type, ne, nb, op_params, view_src and view_offs to equal what the
// builder produced, so a loaded graph is exactly a graph the builders could have made. Every error names the source,
// the location (line:column for JSON syntax, a JSON path such as tensors[12].src[1] otherwise) and what was
// expected; no input crashes, throws or leaks.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/status.h"

namespace tessera::harness {

constexpr int kGraphFormatVersion = 1;
inline constexpr const char* kGraphFormatName = "tessera-graph";  // the "format" key

// The graph as JSON (format "tessera-graph", version 1). Deterministic: the same graph structure gives the same text,
// so graph_to_json(graph_from_json(graph_to_json(g)).graph) == graph_to_json(g).
std::string graph_to_json(const Graph& graph);

struct LoadedGraph {
  std::unique_ptr<Context> ctx;  // no_alloc context holding every tensor
  std::unique_ptr<Graph> graph;  // leafs and nodes in the written order
  std::vector<Tensor*> tensors;  // by id
  std::vector<Tensor*> weights;  // tensors with op NONE that are not flagged input, in id order
  std::vector<Tensor*> inputs;   // flagged input, in id order
  std::vector<Tensor*> outputs;  // flagged output, in id order
  // The first tensor (in id order) with that name, or nullptr.
  Tensor* by_name(const std::string& name) const;
};

// Parses and validates a serialized graph. `source` names the text in every error message.
Result<LoadedGraph> graph_from_json(std::string_view text, const std::string& source);
// Reads a graph file's text (not parsed); errors name the path and the OS reason.
Result<std::string> read_graph_text(const std::string& path);
// Reads and parses a file; errors name the path (and the OS reason when it cannot be read).
Result<LoadedGraph> load_graph_file(const std::string& path);
// Writes graph_to_json(graph) to a file.
Status save_graph_file(const Graph& graph, const std::string& path);

}  // namespace tessera::harness
