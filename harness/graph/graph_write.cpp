// Serialized graphs, writing: Graph -> JSON (format: docs/graph-format.md; reading is graph_read.cpp). Tensors get ids
// in an order where every source and view source comes first, so a reader can build each tensor from loaded ones.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include <nlohmann/json.hpp>

#include "tessera/harness/graph/graph_io.h"

namespace tessera::harness {

namespace {

using ordered_json = nlohmann::ordered_json;

// ---------------------------------------------------------------------------------------------------------------
// Writing

// Ids: a depth-first post-order walk from the graph's leafs, then its nodes, visiting src[0..9] and then view_src
// before a tensor, so every tensor's sources and view source have smaller ids.
std::vector<const Tensor*> tensor_order(const Graph& graph, std::unordered_map<const Tensor*, int64_t>& ids) {
  std::vector<const Tensor*> order;
  std::unordered_set<const Tensor*> visiting;
  std::vector<std::pair<const Tensor*, int>> stack;
  auto visit = [&](const Tensor* root) {
    if (root == nullptr || ids.count(root) != 0 || visiting.count(root) != 0) return;
    visiting.insert(root);
    stack.emplace_back(root, 0);
    while (!stack.empty()) {
      const Tensor* t = stack.back().first;
      int& next = stack.back().second;
      const Tensor* child = nullptr;
      while (next <= kMaxSrc && child == nullptr) {
        const Tensor* c = next < kMaxSrc ? t->src[next] : t->view_src;
        ++next;
        if (c != nullptr && ids.count(c) == 0 && visiting.count(c) == 0) child = c;
      }
      if (child != nullptr) {
        visiting.insert(child);
        stack.emplace_back(child, 0);
        continue;
      }
      ids[t] = static_cast<int64_t>(order.size());
      order.push_back(t);
      visiting.erase(t);
      stack.pop_back();
    }
  };
  for (const Tensor* t : graph.leafs()) visit(t);
  for (const Tensor* t : graph.nodes()) visit(t);
  return order;
}

ordered_json tensor_json(const Tensor& t, const std::unordered_map<const Tensor*, int64_t>& ids) {
  auto id_of = [&](const Tensor* p) -> ordered_json {
    const auto it = ids.find(p);
    return it == ids.end() ? ordered_json() : ordered_json(it->second);
  };
  ordered_json j;
  j["id"] = id_of(&t);
  j["name"] = std::string(t.name, strnlen(t.name, kMaxName));
  j["type"] = type_is_valid(t.type) ? type_name(t.type) : "invalid";
  ordered_json ne = ordered_json::array(), nb = ordered_json::array();
  for (int i = 0; i < kMaxDims; ++i) {
    ne.push_back(t.ne[i]);
    nb.push_back(static_cast<uint64_t>(t.nb[i]));
  }
  j["ne"] = std::move(ne);
  j["nb"] = std::move(nb);
  j["op"] = op_name(t.op);
  int n_params = 0;
  for (int i = 0; i < kMaxOpParams; ++i) {
    if (t.op_params[i] != 0) n_params = i + 1;
  }
  if (n_params > 0) {
    ordered_json p = ordered_json::array();
    for (int i = 0; i < n_params; ++i) p.push_back(t.op_params[i]);
    j["op_params"] = std::move(p);
  }
  int n_src = 0;
  for (int i = 0; i < kMaxSrc; ++i) {
    if (t.src[i] != nullptr) n_src = i + 1;
  }
  if (n_src > 0) {
    ordered_json s = ordered_json::array();
    for (int i = 0; i < n_src; ++i) s.push_back(t.src[i] != nullptr ? id_of(t.src[i]) : ordered_json());
    j["src"] = std::move(s);
  }
  if (t.view_src != nullptr) {
    j["view_src"] = id_of(t.view_src);
    j["view_offs"] = static_cast<uint64_t>(t.view_offs);
  }
  if ((t.flags & (kFlagInput | kFlagOutput | kFlagParam)) != 0) {
    ordered_json f = ordered_json::array();
    if (t.flags & kFlagInput) f.push_back("input");
    if (t.flags & kFlagOutput) f.push_back("output");
    if (t.flags & kFlagParam) f.push_back("param");
    j["flags"] = std::move(f);
  }
  if (t.op == Op::kNone) j["role"] = (t.flags & kFlagInput) != 0 ? "input" : "weight";
  return j;
}

std::string id_list(const std::vector<Tensor*>& tensors, const std::unordered_map<const Tensor*, int64_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (i > 0) out += ", ";
    const auto it = ids.find(tensors[i]);
    out += it == ids.end() ? "null" : std::to_string(it->second);
  }
  return out + "]";
}

}  // namespace

std::string graph_to_json(const Graph& graph) {
  std::unordered_map<const Tensor*, int64_t> ids;
  const std::vector<const Tensor*> order = tensor_order(graph, ids);
  std::string out = "{\n  \"format\": \"";
  out += kGraphFormatName;
  out += "\",\n  \"version\": " + std::to_string(kGraphFormatVersion) + ",\n  \"tensors\": [";
  for (size_t i = 0; i < order.size(); ++i) {
    out += i == 0 ? "\n    " : ",\n    ";
    out += tensor_json(*order[i], ids).dump(-1, ' ', false, ordered_json::error_handler_t::replace);
  }
  out += order.empty() ? "],\n" : "\n  ],\n";
  out += "  \"leafs\": " + id_list(graph.leafs(), ids) + ",\n";
  out += "  \"nodes\": " + id_list(graph.nodes(), ids) + "\n}\n";
  return out;
}

Status save_graph_file(const Graph& graph, const std::string& path) {
  const std::string text = graph_to_json(graph);
  errno = 0;
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr)
    return Status(StatusCode::kInvalidArgument, path + ": cannot create the graph file: " + std::strerror(errno));
  const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size();
  const int err = errno;
  if (std::fclose(f) != 0 || !ok)
    return Status(StatusCode::kInvalidArgument, path + ": cannot write the graph file: " + std::strerror(err));
  return Status::Ok();
}

}  // namespace tessera::harness
