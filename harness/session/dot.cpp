// Session::dot (tessera/harness/session/session.h): the planned graph as Graphviz, every name escaped
// (docs/scenarios.md "dot"): every node in one cluster per split, the edges between splits labelled with the tensor
// copied and its size; or one node per split, or per layer and backend, with the copies between them.
#include <algorithm>
#include <map>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>

#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"

namespace tessera::harness {

namespace {

// Length of the valid UTF-8 sequence at s[i], 0 when there is none (overlong forms, surrogates, above U+10FFFF).
size_t utf8_length(const std::string& s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const size_t left = s.size() - i;
  const auto cont = [&](size_t n) {
    for (size_t k = 1; k < n; ++k) {
      if ((b(k) & 0xC0) != 0x80) return false;
    }
    return true;
  };
  const unsigned char c = b(0);
  if (c >= 0xC2 && c <= 0xDF) return left >= 2 && cont(2) ? 2 : 0;
  if (c >= 0xE0 && c <= 0xEF) {
    if (left < 3 || !cont(3) || (c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) >= 0xA0)) return 0;
    return 3;
  }
  if (c >= 0xF0 && c <= 0xF4) {
    if (left < 4 || !cont(4) || (c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90)) return 0;
    return 4;
  }
  return 0;
}

}  // namespace

// The inside of a DOT double-quoted string that Graphviz shows as `s`: a quote and a backslash escaped (a backslash
// starts Graphviz's own escapes: \n, \l, \N, ...), a newline as Graphviz's \n, other control characters written out
// as \xHH, bytes that are not UTF-8 (Graphviz reads UTF-8) as U+FFFD.
std::string dot_escape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x80) {
      const size_t n = utf8_length(s, i);
      out += n == 0 ? std::string("\xEF\xBF\xBD") : s.substr(i, n);
      i += n == 0 ? 1 : n;
      continue;
    }
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7F) {
      out += format_message("\\\\x%02x", c);
    } else {
      out += static_cast<char>(c);
    }
    ++i;
  }
  return out;
}

namespace {

const char* const kColors[] = {"#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3",
                               "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5"};
const char* backend_color(int backend) {
  return kColors[static_cast<size_t>(backend) % (sizeof kColors / sizeof kColors[0])];
}

// The data into the groups of a coarse view (splits, or layers on a backend), with group indices: per pair (source
// group, group) an edge, with the tensors and bytes copied, each tensor counted once per group; the weights and
// inputs (leafs) copied into a group are counted per group and source backend, for its label (an edge from one node
// for them all would give Graphviz a hub of hundreds of labelled edges: minutes of layout for 70B's 159 splits).
struct Flows {
  struct Edge {
    size_t tensors = 0, bytes = 0;
    bool copied = false;  // a scheduler copy (else data on the same backend)
  };
  struct Leafs {
    size_t tensors = 0, bytes = 0;
  };
  std::map<std::pair<size_t, size_t>, Edge> edges;                 // (from, to)
  std::vector<std::pair<size_t, size_t>> order;                    // the pairs in the order they were first seen
  std::vector<std::map<std::string, Leafs>> leafs;                 // per group: source backend -> copied leafs
  std::unordered_map<const Tensor*, std::vector<size_t>> counted;  // tensor -> the groups it entered

  explicit Flows(size_t groups) : leafs(groups) {}

  // False when `t` was already counted into group `to`.
  bool enter(const Tensor* t, size_t to) {
    auto& entered = counted[t];
    for (size_t g : entered) {
      if (g == to) return false;
    }
    entered.push_back(to);
    return true;
  }
  void add(size_t from, size_t to, const Tensor* t, bool copied) {
    auto [it, fresh] = edges.try_emplace({from, to});
    if (fresh) order.emplace_back(from, to);
    it->second.copied = it->second.copied || copied;
    if (copied && enter(t, to)) {
      it->second.tensors += 1;
      it->second.bytes += nbytes(*t);
    }
  }
  void add_leaf(const std::string& backend, size_t to, const Tensor* t) {
    if (!enter(t, to)) return;
    Leafs& l = leafs[to][backend];
    l.tensors += 1;
    l.bytes += nbytes(*t);
  }
  // The label lines of group `g`'s copied weights and inputs: "2 weights and inputs from cpu, 36.00 MiB".
  std::string leaf_label(size_t g) const {
    std::string s;
    for (const auto& [backend, l] : leafs[g]) {
      s += format_message("\\n%zu from %s's weights and inputs, %s", l.tensors, dot_escape(backend).c_str(),
                          sim::format_bytes(l.bytes).c_str());
    }
    return s;
  }
  // The edges, `prefix` + index naming the nodes.
  std::string text(const char* prefix) const {
    std::string s;
    for (const auto& pair : order) {
      const Edge& e = edges.at(pair);
      if (!e.copied) {
        s += format_message("  %s%zu -> %s%zu;\n", prefix, pair.first, prefix, pair.second);
      } else {
        s += format_message("  %s%zu -> %s%zu [style=dashed, label=\"%zu tensor%s\\n%s\"];\n", prefix, pair.first,
                            prefix, pair.second, e.tensors, e.tensors == 1 ? "" : "s",
                            sim::format_bytes(e.bytes).c_str());
      }
    }
    return s;
  }
};

const char* kDotHeader =
    "digraph tessera {\n  rankdir=TB;\n  node [shape=box, style=filled, fontsize=10];\n  edge [fontsize=9];\n";

// One node per split: its backend, nodes, first and last node, inputs (those copied from weights and inputs, by
// backend); the copies into it from the split that computed each input as dashed edges with their bytes; a dotted edge
// from each split to the next where no copy joins them (the order they run in).
std::string dot_by_split(const Graph& g, Scheduler& sched) {
  const auto splits = sched.splits();
  std::unordered_map<const Tensor*, size_t> id;
  for (size_t i = 0; i < g.n_nodes(); ++i) id[g.node(i)] = i;
  std::vector<int> split_of(g.n_nodes(), -1);
  for (size_t k = 0; k < splits.size(); ++k) {
    for (size_t i = splits[k].i_start; i < splits[k].i_end && i < g.n_nodes(); ++i) split_of[i] = static_cast<int>(k);
  }
  Flows flows(splits.size());
  for (size_t k = 0; k < splits.size(); ++k) {
    for (const Tensor* in : splits[k].inputs) {
      auto it = id.find(in);
      const int from = it != id.end() ? split_of[it->second] : -1;
      if (from >= 0) {
        flows.add(static_cast<size_t>(from), k, in, true);
      } else {
        flows.add_leaf(sched.explain(in).backend_name, k, in);
      }
    }
  }
  std::string s = kDotHeader;
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    size_t in_bytes = 0;
    for (const Tensor* in : sp.inputs) in_bytes += nbytes(*in);
    const size_t n = sp.i_end - sp.i_start;
    std::string label = format_message("split %zu: %s\\n%zu node%s (%zu..%zu)", k,
                                       dot_escape(sched.backend(sp.backend)->name()).c_str(), n, n == 1 ? "" : "s",
                                       sp.i_start, sp.i_end);
    if (sp.i_end > sp.i_start && sp.i_end <= g.n_nodes()) {
      label += format_message("\\nfirst %s\\nlast %s", dot_escape(g.node(sp.i_start)->name).c_str(),
                              dot_escape(g.node(sp.i_end - 1)->name).c_str());
    }
    label += format_message("\\n%zu input%s, %s", sp.inputs.size(), sp.inputs.size() == 1 ? "" : "s",
                            sim::format_bytes(in_bytes).c_str()) +
             flows.leaf_label(k);
    s += format_message("  s%zu [label=\"%s\", fillcolor=\"%s\"];\n", k, label.c_str(), backend_color(sp.backend));
  }
  for (size_t k = 0; k + 1 < splits.size(); ++k) {
    if (flows.edges.count({k, k + 1}) == 0) s += format_message("  s%zu -> s%zu [style=dotted];\n", k, k + 1);
  }
  return s + flows.text("s") + "}\n";
}

// One node per layer and backend (the nodes before the first layer are the input, those after the last the output):
// its node count, splits and the weights and inputs copied into it; the data between them as edges, dashed with the
// tensors and bytes where copied (a copy counts once, into the first group of its split that reads it).
std::string dot_by_layer(const Graph& g, Scheduler& sched) {
  const auto splits = sched.splits();
  std::vector<int> backend_of(g.n_nodes(), -1), split_of(g.n_nodes(), -1);
  for (size_t k = 0; k < splits.size(); ++k) {
    for (size_t i = splits[k].i_start; i < splits[k].i_end && i < g.n_nodes(); ++i) {
      backend_of[i] = splits[k].backend;
      split_of[i] = static_cast<int>(k);
    }
  }
  size_t first_layered = g.n_nodes();
  for (size_t i = 0; i < g.n_nodes() && first_layered == g.n_nodes(); ++i) {
    if (node_layer(g.node(i)->name) >= 0) first_layered = i;
  }
  struct Group {
    std::string what;  // "layer 3", "input", "output"
    int backend = 0;
    size_t nodes = 0;
    std::map<int, bool> splits;
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, int>, size_t> group_id;
  std::unordered_map<const Tensor*, size_t> group_of;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    if (backend_of[i] < 0) continue;
    const int layer = node_layer(g.node(i)->name);
    const std::string what = layer >= 0 ? format_message("layer %d", layer) : i < first_layered ? "input" : "output";
    auto [it, fresh] = group_id.try_emplace({what, backend_of[i]}, groups.size());
    if (fresh) groups.push_back({what, backend_of[i], 0, {}});
    Group& grp = groups[it->second];
    grp.nodes += 1;
    grp.splits[split_of[i]] = true;
    group_of[g.node(i)] = it->second;
  }
  Flows flows(groups.size());
  std::unordered_set<const Tensor*> copies_seen;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    auto to = group_of.find(g.node(i));
    if (to == group_of.end()) continue;
    for (const Tensor* src : g.node(i)->src) {
      if (src == nullptr) continue;
      const TensorExplain e = sched.explain(src);
      const bool copied = e.is_copy && e.copy_of != nullptr;
      // A copy is made once per split: it goes to the first group of the split that reads it.
      if (copied && !copies_seen.insert(src).second) continue;
      const Tensor* from = copied ? e.copy_of : src;
      auto f = group_of.find(from);
      if (f != group_of.end()) {
        if (f->second != to->second) flows.add(f->second, to->second, from, copied);
      } else if (copied) {  // a weight or an input copied in
        flows.add_leaf(sched.explain(from).backend_name, to->second, from);
      }
    }
  }
  std::string s = kDotHeader;
  for (size_t k = 0; k < groups.size(); ++k) {
    const Group& grp = groups[k];
    s += format_message("  g%zu [label=\"%s on %s\\n%zu node%s, %zu split%s%s\", fillcolor=\"%s\"];\n", k,
                        grp.what.c_str(), dot_escape(sched.backend(grp.backend)->name()).c_str(), grp.nodes,
                        grp.nodes == 1 ? "" : "s", grp.splits.size(), grp.splits.size() == 1 ? "" : "s",
                        flows.leaf_label(k).c_str(), backend_color(grp.backend));
  }
  return s + flows.text("g") + "}\n";
}

}  // namespace

std::string Session::dot(DotView view) const {
  if (view == DotView::kSplit) return dot_by_split(*current_, *sched_);
  if (view == DotView::kLayer) return dot_by_layer(*current_, *sched_);
  const Graph& g = *current_;
  std::unordered_map<const Tensor*, size_t> id;
  for (size_t i = 0; i < g.n_nodes(); ++i) id[g.node(i)] = i;
  std::string s =
      "digraph tessera {\n  rankdir=TB;\n  compound=true;\n  node [shape=box, style=filled, fontsize=10];\n";
  s += "  edge [fontsize=9];\n";
  const auto splits = sched_->splits();
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    const char* color = backend_color(sp.backend);
    s += format_message("  subgraph cluster_%zu {\n    label=\"split %zu: %s (%zu inputs)\";\n", k, k,
                        dot_escape(sched_->backend(sp.backend)->name()).c_str(), sp.inputs.size());
    for (size_t i = sp.i_start; i < sp.i_end; ++i) {
      const Tensor* n = g.node(i);
      s += format_message("    n%zu [label=\"%s\\n%s\", fillcolor=\"%s\"];\n", i, dot_escape(n->name).c_str(),
                          op_name(n->op), color);
    }
    s += "  }\n";
  }
  // Edges inside the graph; a source that is a scheduler copy is an edge between splits: from the node it copies (or
  // from the leaf, drawn outside the splits) to the split's first node that reads it, once per split and tensor. Dashed
  // when the copy is made for that split (one of its inputs), dotted when the split reuses a copy an earlier split on
  // its backend made (ggml copies a tensor to a backend once per graph; a later split there reads that copy).
  std::unordered_map<const Tensor*, size_t> leaf_id;
  std::unordered_map<const Tensor*, std::vector<size_t>> into;  // copied tensor -> splits it already enters
  std::vector<int> split_of(g.n_nodes(), -1);
  for (size_t k = 0; k < splits.size(); ++k) {
    for (size_t i = splits[k].i_start; i < splits[k].i_end && i < g.n_nodes(); ++i) split_of[i] = static_cast<int>(k);
  }
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    for (const Tensor* src : g.node(i)->src) {
      if (src == nullptr) continue;
      auto it = id.find(src);
      if (it != id.end()) {
        s += format_message("  n%zu -> n%zu;\n", it->second, i);
        continue;
      }
      if (split_of[i] < 0) continue;
      const TensorExplain e = sched_->explain(src);
      if (!e.is_copy || e.copy_of == nullptr) continue;
      const Tensor* from = e.copy_of;
      auto& entered = into[from];
      const size_t split = static_cast<size_t>(split_of[i]);
      bool seen = false;
      for (size_t k : entered) seen = seen || k == split;
      if (seen) continue;
      entered.push_back(split);
      std::string tail;
      if (auto f = id.find(from); f != id.end()) {
        tail = format_message("n%zu", f->second);
      } else {
        auto [l, fresh] = leaf_id.emplace(from, leaf_id.size());
        tail = format_message("l%zu", l->second);
        if (fresh) {
          s += format_message("  %s [label=\"%s\\n%s\", shape=ellipse, style=solid];\n", tail.c_str(),
                              dot_escape(from->name).c_str(), from->op == Op::kNone ? "leaf" : op_name(from->op));
        }
      }
      const auto& inputs = splits[split].inputs;
      const bool input = std::find(inputs.begin(), inputs.end(), from) != inputs.end();
      s += format_message("  %s -> n%zu [lhead=cluster_%d, style=%s, label=\"%s\\n%s%s\"];\n", tail.c_str(), i,
                          split_of[i], input ? "dashed" : "dotted", dot_escape(from->name).c_str(),
                          sim::format_bytes(nbytes(*from)).c_str(), input ? "" : "\\n(an earlier split's copy)");
    }
  }
  return s + "}\n";
}

}  // namespace tessera::harness
