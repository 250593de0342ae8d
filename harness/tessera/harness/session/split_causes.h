// Why a plan has N splits (docs/scenarios.md, "Why N splits"): each split's cause — the reason its boundary exists,
// from the scheduler's per-split reason (Scheduler::SplitView::reason) and the placement causes of the nodes on both
// sides of the boundary — grouped with their top layers and ops, and for each cause that an option changes, the split
// count of the same plan made again with that option (computed, never estimated). Also the topology op rules that
// decide a node on each device, with their notes (explain).
#pragma once

#include <functional>

#include <string>
#include <vector>

#include "tessera/harness/session/session.h"
#include "tessera/sim/device_config.h"

namespace tessera::harness {

enum class SplitCause {
  kStart,        // "start": the graph's first split
  kPin,          // "pin": a pin (--pin, or llama.cpp's graph callback pins) on one side
  kUnsupported,  // "unsupported-op": a backend on one side cannot run the other side's op (fallback, op rules)
  kOpOffload,    // "op-offload": op offload moved an op (or the run around it) to another backend
  kInput,        // "graph-input": a graph input, written from the host on the CPU
  kWeights,      // "weights": weights or caches on another backend (layer placement: -ngl, -ts, -ot, ...)
  kWeightCopy,   // "weight-copy": a weight in memory the split's backend cannot use is copied in
  kInputLimit,   // "input-limit": the split would pass max_split_inputs
  kNeighbours,   // "neighbours": placements grown from neighbouring nodes, none of the above
  kCount
};
const char* split_cause_name(SplitCause cause);
const char* split_cause_description(SplitCause cause);

struct SplitCauseGroup {
  SplitCause cause = SplitCause::kStart;
  int splits = 0;
  std::vector<std::pair<std::string, int>> top_layers;  // "12", or "none" (no layer), most splits first (<= 3)
  int n_layers = 0;                                     // layers with splits of this cause ("none" counts as one)
  std::vector<std::pair<std::string, int>> top_ops;     // op of the node that starts the split (<= 3)
  // The option that changes this cause, as the command line spells it ("--no-op-offload"); empty when none does
  // (no_option says why).
  std::string option, no_option;
  int splits_with_option = -1;  // the plan again with the option: its split count; -1 when it did not plan
  std::string option_error;     // why it did not plan (out of memory, ...)
};

struct SplitCauseSummary {
  int splits = 0;
  std::vector<SplitCause> per_split;    // each split's cause, in split order
  std::vector<SplitCauseGroup> groups;  // causes with splits, most splits first (ties: enum order)
};

// The layer of a node from its name: a weight or cache name ("blk.12.", "cache_k_l12") or llama.cpp's "name-12"
// (an optional " (view)" suffix after it); -1 for none.
int node_layer(const char* name);

// The cause of each split of the scheduler's plan of `graph` (Session::plan must have succeeded).
std::vector<SplitCause> split_causes(const Scheduler& sched, const Graph& graph);
// The summary; with `replan`, plans the session's configuration again once per cause with an option
// (metadata-only mode, `real_devices` as for Session::create).
SplitCauseSummary summarize_split_causes(Session& s, const Registry* real_devices, bool replan = true);
// The text `tessera plan` prints, wrapped to 80 columns; `wide`: one line per cause and per option (--wide).
std::string format_split_causes(const SplitCauseSummary& summary, bool wide = false);

// The op rules of each topology device that decide `node` (the first rule that matches; none when the device's
// default decides), with the device's name.
struct OpRuleVerdict {
  std::string device;
  size_t rule = 0;  // index in the device's rules
  bool allow = true;
  std::string note;
};
std::vector<OpRuleVerdict> op_rule_verdicts(const sim::TopologyConfig& topology, const Tensor& node);
// The lines explain prints for them: a rule that refused the node on a device, and the rule that allowed it on
// `backend`, the device it runs on; each with its note.
std::string op_rule_lines(const sim::TopologyConfig& topology, const Tensor& node, const std::string& backend);

// For each source of `node` in one of the topology's extra buffer types (DeviceConfig::buffer_types), what that
// buffer type's op rules say about the node on its device: the first matching rule, or the default (rule -1).
// `original` maps a source to the tensor it stands for (a scheduler copy to the tensor it copies); none: as it is.
struct BufferTypeVerdict {
  std::string device, buffer_type, source;
  int rule = -1;  // index in the buffer type's rules; -1: its default decided
  bool allow = true;
  std::string note;
};
using SourceResolver = std::function<const Tensor*(const Tensor*)>;
std::vector<BufferTypeVerdict> buffer_type_verdicts(const sim::TopologyConfig& topology, const Tensor& node,
                                                    const SourceResolver& original = {});
// The lines explain prints for them: a refusal on any device, an allowance on `backend` (as op_rule_lines).
std::string buffer_type_rule_lines(const sim::TopologyConfig& topology, const Tensor& node, const std::string& backend,
                                   const SourceResolver& original = {});

}  // namespace tessera::harness
