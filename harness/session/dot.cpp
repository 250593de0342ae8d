// Session::dot (tessera/harness/session/session.h): the planned graph as Graphviz, one cluster per split, the edges
// between splits labelled with the tensor copied and its size, every name escaped (docs/scenarios.md "dot").
#include <string>
#include <unordered_map>
#include <utility>

#include "tessera/harness/session/session.h"

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

std::string Session::dot() const {
  static const char* kColors[] = {"#8dd3c7", "#fdb462", "#bebada", "#fb8072", "#80b1d3",
                                  "#b3de69", "#fccde5", "#d9d9d9", "#bc80bd", "#ccebc5"};
  const Graph& g = *current_;
  std::unordered_map<const Tensor*, size_t> id;
  for (size_t i = 0; i < g.n_nodes(); ++i) id[g.node(i)] = i;
  std::string s =
      "digraph tessera {\n  rankdir=TB;\n  compound=true;\n  node [shape=box, style=filled, fontsize=10];\n";
  s += "  edge [fontsize=9];\n";
  const auto splits = sched_->splits();
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    const char* color = kColors[static_cast<size_t>(sp.backend) % (sizeof kColors / sizeof kColors[0])];
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
  // from the leaf, drawn outside the splits) to the split's first node that reads it, once per split and tensor.
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
      s += format_message("  %s -> n%zu [lhead=cluster_%d, style=dashed, label=\"%s\\n%s\"];\n", tail.c_str(), i,
                          split_of[i], dot_escape(from->name).c_str(), sim::format_bytes(nbytes(*from)).c_str());
    }
  }
  return s + "}\n";
}

}  // namespace tessera::harness
