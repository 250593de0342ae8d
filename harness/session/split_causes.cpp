// Why a plan has N splits: each split's cause, grouped, with the split count of the plan made again with the option
// that changes it (tessera/harness/session/split_causes.h, docs/scenarios.md).
#include "tessera/harness/session/split_causes.h"

#include <strings.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>

#include "tessera/harness/common/text_table.h"
#include "tessera/harness/common/units.h"
#include "tessera/sim/op_rules.h"

namespace tessera::harness {

const char* split_cause_name(SplitCause cause) {
  switch (cause) {
    case SplitCause::kStart: return "start";
    case SplitCause::kPin: return "pin";
    case SplitCause::kUnsupported: return "unsupported-op";
    case SplitCause::kOpOffload: return "op-offload";
    case SplitCause::kInput: return "graph-input";
    case SplitCause::kWeights: return "weights";
    case SplitCause::kWeightCopy: return "weight-copy";
    case SplitCause::kInputLimit: return "input-limit";
    case SplitCause::kNeighbours: return "neighbours";
    case SplitCause::kCount: break;
  }
  return "?";
}

const char* split_cause_description(SplitCause cause) {
  switch (cause) {
    case SplitCause::kStart: return "the graph's first split";
    case SplitCause::kPin:
      return "a pin puts a node on another backend (--pin, or llama.cpp's graph callback: a layer's norm on its "
             "layer's device, -nkvo's merged heads on the CPU)";
    case SplitCause::kUnsupported: return "the backend before cannot run the op, or the new one the op before";
    case SplitCause::kOpOffload:
      return "op offload (1.off): a faster backend takes an op whose weight is in host memory";
    case SplitCause::kInput: return "a graph input (1.inp), written from the host on the CPU";
    case SplitCause::kWeights:
      return "weights or caches on another backend (1.wgt, 1.dst): the layer placement (-ngl, -ts, -ot, ...)";
    case SplitCause::kWeightCopy: return "a weight in memory the split's backend cannot use is copied in";
    case SplitCause::kInputLimit: return "the split would pass max_split_inputs inputs";
    case SplitCause::kNeighbours: return "placements grown from neighbouring nodes (2.exp, 3.best, 4.*)";
    case SplitCause::kCount: break;
  }
  return "?";
}

namespace {

// Causes that decide a backend on their own (a pin, pass 1, the fallback): the others follow a neighbour.
bool is_primary(Cause c) {
  switch (c) {
    case Cause::kPinned:
    case Cause::kHasBuffer:
    case Cause::kViewSourceHasBuffer:
    case Cause::kInput:
    case Cause::kWeight:
    case Cause::kOpOffload:
    case Cause::kFallback: return true;
    default: return false;
  }
}

bool is_weight_cause(Cause c) {
  return c == Cause::kWeight || c == Cause::kHasBuffer || c == Cause::kViewSourceHasBuffer;
}

// Each computing node's backend and placement cause, and the cause that placed it in the end: its own when it is
// primary; a view or writer's (4.vsrc) its view source's when that is primary; else that of the nearest node before
// it on the same backend with a primary cause, else the nearest after it (pass 2 grows runs from such nodes).
struct Origins {
  std::vector<int> backend;  // -1 for view ops
  std::vector<Cause> cause, origin;
};

Origins origins(const Scheduler& sc, const Graph& g) {
  const size_t n = g.n_nodes();
  Origins o;
  o.backend.assign(n, -1);
  o.cause.assign(n, Cause::kUnassigned);
  o.origin.assign(n, Cause::kUnassigned);
  std::vector<bool> resolved(n, false);
  for (size_t i = 0; i < n; ++i) {
    const Tensor* t = g.node(i);
    if (op_is_view(t->op)) continue;
    const TensorExplain e = sc.explain(t);
    o.backend[i] = e.backend;
    o.cause[i] = o.origin[i] = e.cause;
    if (is_primary(e.cause)) {
      resolved[i] = true;
    } else if (e.cause == Cause::kViewOfSource && t->view_src != nullptr) {
      const Cause vc = sc.explain(t->view_src).cause;
      if (is_primary(vc)) o.origin[i] = vc, resolved[i] = true;
    }
  }
  const auto nb = static_cast<size_t>(sc.n_backends());
  std::vector<Cause> last(nb, Cause::kUnassigned);
  std::vector<bool> seen(nb, false), from_before(n, false);
  for (size_t i = 0; i < n; ++i) {  // nearest before, on the same backend
    if (o.backend[i] < 0) continue;
    const auto b = static_cast<size_t>(o.backend[i]);
    if (is_primary(o.cause[i])) {
      last[b] = o.cause[i], seen[b] = true;
    } else if (!resolved[i] && seen[b]) {
      o.origin[i] = last[b], from_before[i] = true;
    }
  }
  std::fill(seen.begin(), seen.end(), false);
  for (size_t i = n; i-- > 0;) {  // else nearest after
    if (o.backend[i] < 0) continue;
    const auto b = static_cast<size_t>(o.backend[i]);
    if (is_primary(o.cause[i])) {
      last[b] = o.cause[i], seen[b] = true;
    } else if (!resolved[i] && !from_before[i] && seen[b]) {
      o.origin[i] = last[b];
    }
  }
  return o;
}

SplitCause classify_boundary(const Scheduler& sc, const Graph& g, const Origins& o, size_t p, size_t i) {
  const Cause cp = o.origin[p], cn = o.origin[i];
  auto either = [&](auto pred) { return pred(cp) || pred(cn); };
  if (either([](Cause c) { return c == Cause::kPinned; })) return SplitCause::kPin;
  const Backend* bp = sc.backend(o.backend[p]);
  const Backend* bn = sc.backend(o.backend[i]);
  if (!bp->supports_op(*g.node(i)) || !bn->supports_op(*g.node(p))) return SplitCause::kUnsupported;
  if (either([](Cause c) { return c == Cause::kOpOffload; })) return SplitCause::kOpOffload;
  if (either([](Cause c) { return c == Cause::kInput; })) return SplitCause::kInput;
  if (either(is_weight_cause)) return SplitCause::kWeights;
  return SplitCause::kNeighbours;
}

std::vector<std::pair<std::string, int>> top(const std::map<std::string, int>& counts, size_t k) {
  std::vector<std::pair<std::string, int>> v(counts.begin(), counts.end());
  std::stable_sort(v.begin(), v.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  if (v.size() > k) v.resize(k);
  return v;
}

// The option that changes `cause` for this configuration: sets it in *c and returns its spelling, or returns "" and
// sets *why_not.
std::string option_for(SplitCause cause, const Session& s, SessionConfig* c, std::string* why_not) {
  PlacementPolicy& p = c->policy;
  switch (cause) {
    case SplitCause::kOpOffload: p.op_offload = false; return "--no-op-offload";
    case SplitCause::kInputLimit: p.max_split_inputs = 1000000; return "--max-split-inputs 1000000";
    case SplitCause::kPin:
      if (p.pins.empty()) break;
      p.pins.clear();
      return "no --pin";
    case SplitCause::kWeights: {
      if (c->graph) {
        *why_not = "the graph file's weights are placed by name (overrides, then the blk.N layer)";
        return "";
      }
      std::string o;
      if (p.n_gpu_layers != -1 || !p.layers_per_device.empty()) o = "-ngl all";
      if (!p.layers_per_device.empty()) o += " (no --layers-per-device)";
      if (!p.overrides.empty()) o += std::string(o.empty() ? "" : ", ") + "no -ot/--override";
      if (!p.kv_offload) o += std::string(o.empty() ? "" : ", ") + "no -nkvo";
      if (!o.empty()) {
        p.n_gpu_layers = -1;
        p.layers_per_device.clear();
        p.overrides.clear();
        p.kv_offload = true;
        return o;
      }
      if (s.config().topology.devices.size() > 2 && p.split_mode == SplitMode::kLayer) {
        p.split_mode = SplitMode::kNone;
        return "-sm none";
      }
      *why_not = "every layer that can be is on the GPU already (the input layer, token_embd, stays on the CPU)";
      return "";
    }
    case SplitCause::kUnsupported:
      // A device without a flash-attention kernel: attention as MUL_MAT -> SOFT_MAX -> MUL_MAT may run there.
      if (c->graph || !c->model.flash_attn) break;
      c->model.flash_attn = false;
      c->flash_attn_auto = false;
      return "-fa off";
    default: break;
  }
  switch (cause) {
    case SplitCause::kStart: *why_not = "every plan has one"; break;
    case SplitCause::kUnsupported:
      *why_not = "a device's kernels or topology op rules (see --explain on the node)";
      break;
    case SplitCause::kInput: *why_not = "graph inputs are written from the host"; break;
    case SplitCause::kWeightCopy: *why_not = "the node's backend cannot use the weight's memory"; break;
    default: *why_not = "follows from the placements around it"; break;
  }
  return "";
}

std::string short_error(std::string m) {
  const size_t nl = m.find('\n');
  if (nl != std::string::npos) m.resize(nl);
  return m.size() > 160 ? m.substr(0, 157) + "..." : m;
}

}  // namespace

int node_layer(const char* name) {
  const int l = layer_of_name(name);
  if (l >= 0) return l;
  const char* end = std::strchr(name, ' ');
  if (end == nullptr) end = name + std::strlen(name);
  const char* p = end;
  while (p > name && p[-1] >= '0' && p[-1] <= '9') --p;
  if (p == end || p == name || p[-1] != '-' || end - p > 6) return -1;
  return std::atoi(p);
}

std::vector<SplitCause> split_causes(const Scheduler& sc, const Graph& g) {
  const auto splits = sc.splits();
  std::vector<SplitCause> out;
  if (splits.empty()) return out;
  const Origins o = origins(sc, g);
  for (size_t k = 0; k < splits.size(); ++k) {
    const auto& sp = splits[k];
    SplitCause c = SplitCause::kStart;
    if (k > 0 && sp.i_start < g.n_nodes()) {
      const size_t i = sp.i_start;
      switch (sp.reason) {
        case SplitReason::kFirst: break;
        case SplitReason::kInputLimit: c = SplitCause::kInputLimit; break;
        case SplitReason::kWeightCopy:
          c = o.origin[i] == Cause::kOpOffload ? SplitCause::kOpOffload
              : o.origin[i] == Cause::kPinned  ? SplitCause::kPin
                                               : SplitCause::kWeightCopy;
          break;
        case SplitReason::kBackend: {
          size_t p = i;  // the last computing node of the split before
          while (p > splits[k - 1].i_start && o.backend[p - 1] < 0) --p;
          c = p > splits[k - 1].i_start ? classify_boundary(sc, g, o, p - 1, i) : SplitCause::kNeighbours;
          break;
        }
      }
    }
    out.push_back(c);
  }
  return out;
}

SplitCauseSummary summarize_split_causes(Session& s, const Registry* real_devices, bool replan) {
  SplitCauseSummary sum;
  sum.per_split = split_causes(s.sched(), s.graph());
  sum.splits = static_cast<int>(sum.per_split.size());
  const Graph& g = s.graph();
  const auto splits = s.sched().splits();
  for (int c = 0; c < static_cast<int>(SplitCause::kCount); ++c) {
    SplitCauseGroup grp;
    grp.cause = static_cast<SplitCause>(c);
    std::map<int, int> layers;  // by layer, -1 for none (sorted: ties keep layer order)
    std::map<std::string, int> ops;
    for (size_t k = 0; k < sum.per_split.size(); ++k) {
      if (sum.per_split[k] != grp.cause) continue;
      ++grp.splits;
      const Tensor* first = g.node(std::min(splits[k].i_start, g.n_nodes() - 1));
      const int l = node_layer(first->name);
      ++layers[l];
      ++ops[op_name(first->op)];
    }
    if (grp.splits == 0) continue;
    std::map<std::string, int> named;
    std::vector<std::pair<std::string, int>> by_layer;
    for (const auto& [l, n] : layers) by_layer.emplace_back(l >= 0 ? std::to_string(l) : "none", n);
    std::stable_sort(by_layer.begin(), by_layer.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    grp.n_layers = static_cast<int>(layers.size());
    if (by_layer.size() > 3) by_layer.resize(3);
    grp.top_layers = std::move(by_layer);
    grp.top_ops = top(ops, 3);
    SessionConfig cfg = s.config();
    cfg.sim.mode = sim::MemoryMode::kMetadata;
    grp.option = option_for(grp.cause, s, &cfg, &grp.no_option);
    if (!grp.option.empty() && replan) {
      auto again = Session::create(cfg, real_devices);
      Status st = again.ok() ? again.value()->plan() : again.status();
      if (st.ok()) {
        grp.splits_with_option = again.value()->sched().n_splits();
      } else {
        grp.option_error = short_error(st.message());
      }
    }
    sum.groups.push_back(std::move(grp));
  }
  std::stable_sort(sum.groups.begin(), sum.groups.end(),
                   [](const SplitCauseGroup& a, const SplitCauseGroup& b) { return a.splits > b.splits; });
  return sum;
}

std::string format_split_causes(const SplitCauseSummary& sum, bool wide) {
  std::string s = format_message("why %d split%s (what starts each split):\n", sum.splits, sum.splits == 1 ? "" : "s");
  // A line of the block: as it is with --wide, else wrapped to 80 columns (each continuation indented past `first`).
  auto put = [&s, wide](const std::string& first, const std::string& text, size_t indent) {
    s += wide ? first + text + "\n" : wrap_lines(first, text, std::string(indent, ' '));
  };
  for (const SplitCauseGroup& grp : sum.groups) {
    put(format_message("%6d  %-15s ", grp.splits, split_cause_name(grp.cause)), split_cause_description(grp.cause), 24);
    if (grp.cause == SplitCause::kStart) continue;
    auto list = [](const std::vector<std::pair<std::string, int>>& v) {
      std::string r;
      for (const auto& [name, n] : v) r += format_message("%s%s (%d)", r.empty() ? "" : ", ", name.c_str(), n);
      return r;
    };
    const std::string pad(9, ' ');
    put(pad,
        format_message("top layers %s (%d layer%s); top ops %s", list(grp.top_layers).c_str(), grp.n_layers,
                       grp.n_layers == 1 ? "" : "s", list(grp.top_ops).c_str()),
        11);
    if (!grp.option.empty() && grp.splits_with_option >= 0) {
      put(pad,
          format_message("with %s: %d split%s (planned again)", grp.option.c_str(), grp.splits_with_option,
                         grp.splits_with_option == 1 ? "" : "s"),
          11);
    } else if (!grp.option.empty() && !grp.option_error.empty()) {
      put(pad, format_message("with %s: does not plan: %s", grp.option.c_str(), grp.option_error.c_str()), 11);
    } else if (grp.option.empty()) {
      put(pad, format_message("no option changes it: %s", grp.no_option.c_str()), 11);
    }
  }
  return s;
}

std::vector<OpRuleVerdict> op_rule_verdicts(const sim::TopologyConfig& topology, const Tensor& node) {
  std::vector<OpRuleVerdict> out;
  if (node.op == Op::kNone || op_is_view(node.op)) return out;
  for (const sim::DeviceConfig& d : topology.devices) {
    for (size_t r = 0; r < d.op_rules.size(); ++r) {
      if (!sim::rule_matches(d.op_rules[r], node)) continue;
      out.push_back({d.name, r, d.op_rules[r].allow, d.op_rules[r].note});
      break;
    }
  }
  return out;
}

}  // namespace tessera::harness

namespace tessera::harness {

std::string op_rule_lines(const sim::TopologyConfig& topology, const Tensor& node, const std::string& backend) {
  std::string s;
  for (const OpRuleVerdict& v : op_rule_verdicts(topology, node)) {
    if (v.allow && v.device != backend) continue;  // allowed elsewhere: it decided nothing about this node
    s += format_message("  %s by %s's op rule %zu: %s\n", v.allow ? "allowed" : "refused", v.device.c_str(), v.rule,
                        v.note.empty() ? "(the rule has no note)" : v.note.c_str());
  }
  return s;
}

std::vector<BufferTypeVerdict> buffer_type_verdicts(const sim::TopologyConfig& topology, const Tensor& node,
                                                    const SourceResolver& original) {
  std::vector<BufferTypeVerdict> out;
  if (node.op == Op::kNone || op_is_view(node.op)) return out;
  for (const Tensor* s : node.src) {
    if (s == nullptr) continue;
    const Tensor* src = original ? original(s) : s;
    const Buffer* b = src != nullptr ? tensor_buffer(*src) : nullptr;
    if (b == nullptr) continue;
    for (const sim::DeviceConfig& d : topology.devices) {
      for (const sim::BufferTypeConfig& bt : d.buffer_types) {
        if (strcasecmp(bt.name.c_str(), b->type()->name()) != 0) continue;
        BufferTypeVerdict v;
        v.device = d.name, v.buffer_type = bt.name, v.source = src->name;
        v.allow = sim::buffer_type_allows(bt, node, &v.rule);
        if (v.rule >= 0) v.note = bt.op_rules[static_cast<size_t>(v.rule)].note;
        out.push_back(std::move(v));
      }
    }
  }
  return out;
}

std::string buffer_type_rule_lines(const sim::TopologyConfig& topology, const Tensor& node, const std::string& backend,
                                   const SourceResolver& original) {
  std::string s;
  for (const BufferTypeVerdict& v : buffer_type_verdicts(topology, node, original)) {
    if (v.allow && v.device != backend) continue;
    const std::string rule =
        v.rule >= 0
            ? format_message("rule %d: %s", v.rule, v.note.empty() ? "(the rule has no note)" : v.note.c_str())
            : std::string(v.allow ? "its default (allow): no rule matches" : "its default (deny): no rule matches");
    s += format_message("  %s by %s's buffer type %s (source %s), %s\n", v.allow ? "allowed" : "refused",
                        v.device.c_str(), v.buffer_type.c_str(), v.source.c_str(), rule.c_str());
  }
  return s;
}

}  // namespace tessera::harness
