// The `tessera` tool's reports shared by the subcommands: the headline and the --json objects (docs/json.md).
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "tessera/llama/llama_memory.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/scenario/scenario.h"
#include "tessera/harness/session/session.h"
#include "tessera/harness/session/split_causes.h"
#include "tessera/sim/trace.h"

namespace tessera::tool {

using ojson = nlohmann::ordered_json;

// Writes the Chrome trace (Perfetto) of a simulation to `path` (run and trace, both split modes); false, saying so on
// stderr, when the file cannot be written. quiet_note: "trace written to PATH" on stderr (the caller prints its own
// note otherwise).
bool write_chrome_trace(const std::string& path, const sim::Trace& trace, bool quiet_note);

// The first line of the text reports: the workload, the topology and the memory mode.
std::string headline(const harness::Session& s);
// What the JSON reports call the workload: the model preset's name, or the graph file.
std::string workload_name(const harness::SessionConfig& c);

// llama.cpp's buffers (tessera/llama/llama_memory.h): the table (`wide`: its --wide layout), or with llama_log
// llama.cpp's log lines, and a blank line; "" for a serialized graph.
std::string memory_breakdown_text(harness::Session& s, const llama::LlamaContextParams& params, bool llama_log,
                                  bool wide = false);
// The same as the --json key "llama_memory" (null for a serialized graph).
ojson llama_memory_json(harness::Session& s, const llama::LlamaContextParams& params);
// The --explain tensors as records: name, op, backend, cause, split, whether it is a scheduler copy, and the
// backends it is copied to as a split input.
ojson explained_json(harness::Session& s, const std::vector<std::string>& names);
// Plan reuse over the run's allocations (docs/scheduler.md 'Reuse'): full plans, reuses, whether the last allocation
// kept the plan and why not (node and field). The text is one line ("plans: ..."); the JSON is the key "plan_reuse".
std::string plan_reuse_text(const Scheduler& s);
ojson plan_reuse_json(const Scheduler& s);
ojson plan_reuse_json(const PlanReuse& r);
// --explain after a run: the placement (Session::explain) and whether the last allocation reused the plan.
std::string explain_run_text(harness::Session& s, const std::string& name);
// False (after saying which on standard error) when an --explain name is no tensor of the graph.
bool explained_exist(harness::Session& s, const std::vector<std::string>& names);
ojson memory_json(harness::Session& s);  // per device: layers, weights, KV cache, compute, peak, capacity
ojson splits_json(harness::Session& s);  // per split: what the text split table shows (Session::split_records)

// The --json objects of the subcommands (docs/json.md): each starts with "format" ("tessera-plan", ...) and "version"
// (kJsonFormatVersion; raised when a key changes meaning or goes away, not when one is added).
constexpr int kJsonFormatVersion = 1;
ojson plan_json(harness::Session& s, const std::vector<std::string>& explain, const harness::SplitCauseSummary& causes,
                const llama::LlamaContextParams& params);
// The plan's split causes (key "split_causes"): the split count and, per cause, its name, description, split count,
// top layers and ops, and the option with the split count of the plan made again with it.
ojson split_causes_json(const harness::SplitCauseSummary& summary);
ojson run_json(harness::Session& s, const harness::RunStats& st, const sim::TraceSummary& sum, bool numerics_ok,
               const llama::LlamaContextParams& params, const std::vector<std::string>& explain);
// `run -sm tensor --json` (and trace): the same "tessera-run" object from the meta device's run
// (llama::TensorParallelRun), with "tensor_parallel" (the GPUs of the split, subgraphs, AllReduces and their bytes);
// "explained" is empty and "llama_memory" and "extra_models" are null (not modelled under -sm tensor).
// The workload keys of the -sm tensor reports (format, version, topology, model, n_layer, context, tokens, flash_attn,
// kv_type) for the model as the meta device runs it.
ojson tensor_workload_json(const char* format, const harness::SessionConfig& config, const models::LlamaConfig& m);
ojson run_tensor_json(const harness::SessionConfig& config, const llama::TensorParallelRun& run,
                      const sim::TraceSummary& sum, bool numerics_ok);
ojson fit_json(harness::Session& s, const std::vector<int>& layers_per_device, int cpu_layers);
ojson repro_scenario_json(const std::string& name, const std::string& file, const scenario::ScenarioOutcome& out);
// The scenarios' objects (repro_scenario_json) and the counts of the "N passed, M failed" line.
ojson repro_json(const ojson& scenarios, int passed, int failed, int not_run);
ojson topologies_json();

}  // namespace tessera::tool
