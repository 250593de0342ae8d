// One simulated placement experiment: a topology, a model (a llama-style builder, or any serialized graph), a
// placement policy and simulator options, assembled into a simulator, backends, placed weights and a scheduler. The
// `tessera` tool and the scenario runner both drive it: plan (split + allocate), run (compute, check against the CPU
// reference), and report.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/sched.h"
#include "tessera/harness/graph/graph_data.h"
#include "tessera/harness/graph/graph_io.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/sim/simulator.h"

namespace tessera::harness {

// A serialized graph (docs/graph-format.md) to run instead of the model builder. Its leafs that are not flagged input
// are weights: the policy places them (overrides by name, then the layer in a "blk.N." name, else the CPU); a weight
// written by SET_ROWS is placed as a cache. Inputs and weights get deterministic data (graph_data.h); the outputs are
// the tensors flagged output (the last node when none is) and are compared with the same graph on the CPU backend.
struct GraphSource {
  std::string text;    // the JSON
  std::string source;  // names it in error messages (a file path, "scenario.json (graph)")
};

struct SessionConfig {
  sim::TopologyConfig topology;
  models::LlamaConfig model;         // used when `graph` is empty
  std::optional<GraphSource> graph;  // set: run this graph instead of the model
  // Graph mode only: a second graph over the same weights (its weight leafs are matched by name to the first graph's
  // and replaced by them), for lifecycles where the application evaluates another graph after the first one (run
  // steps "reserve-next", "alloc-next", "compute-next").
  std::optional<GraphSource> next_graph;
  PlacementPolicy policy;
  // llama.cpp's -fa auto: Session::create plans the model with flash attention first (metadata-only) and keeps it only
  // when every FLASH_ATTN_EXT runs on its layer's device (src/llama-context.cpp); model.flash_attn is then the result.
  bool flash_attn_auto = false;
  // The tokens of that plan's graph (its outputs too); 0: the model's n_tokens. llama.cpp from build 6334 decides on
  // one token per sequence, so no op is offloaded by batch size (use_llama_cpp_rules sets it).
  int64_t flash_attn_probe_tokens = 0;
  sim::SimOptions sim;
  uint64_t model_seed = 1;  // weights, cache and inputs
  // Inputs that differ per evaluation (scenario "run.inputs": "per_evaluation"): evaluation e of the session (0, 1,
  // ... over every compute) gets inputs seeded from evaluation_input_seed(model_seed, e), and the CPU reference
  // computes the same inputs, so an evaluation that reads a stale copy of an earlier evaluation's inputs gets outputs
  // that differ from the reference. False: every evaluation gets the inputs of model_seed.
  bool per_evaluation_inputs = false;
  // Decides pipeline parallelism from the placement, as an application does once its weights are placed (llama.cpp's
  // rule: tessera/llama/llama_memory.h, use_llama_cpp_rules): the in-flight copy slots to plan with (above 1:
  // Session::create turns policy.parallel on with them), or 0 to keep the policy as given. Not called when
  // policy.parallel is already on. May be empty.
  std::function<int(const SessionConfig& config, const Placement& placement)> parallel_rule;
  // Pins an application sets while it builds its graph (llama.cpp's graph callback: use_llama_cpp_rules): for each
  // node of the graph, the device (an index into the topology's devices) whose backend must run it, or -1 for none.
  // Applied after policy.pins, before planning. May be empty.
  std::function<int(const SessionConfig& config, const Placement& placement, const Tensor& node)> pin_rule;
  // Called at the start of each step of create, plan and run that may take long ("building the graph", "filling the
  // weights", "planning", ...) with the step's name, for a progress display; may be empty.
  std::function<void(const char* step)> progress;
};

// The seed of evaluation e's inputs with per-evaluation inputs: model_seed for evaluation 0, then a different one
// for each e (model_seed + e * 0x9E3779B97F4A7C15, wrapping).
uint64_t evaluation_input_seed(uint64_t model_seed, size_t evaluation);

struct DeviceMemory {
  std::string device;
  size_t weights = 0, cache = 0, compute = 0;  // bytes
  size_t used = 0, peak = 0, capacity = 0;     // the simulated device's accounting
  int layers = 0;
};

struct RunStats {
  // The simulated time of the evaluation(s): from the start of the first command of the first evaluation (the
  // scheduler's graph compute) to the end of the last command before the outputs are read; the weight upload and the
  // writes of the inputs come before it. The same definition in both memory modes (docs/simulator.md "Makespan").
  double makespan_us = 0;
  // The time to write the weights and the KV cache from the host once (Simulator::set_time_us of each), in both
  // modes; a memory-backed session spends exactly this filling them, before the evaluations.
  double weight_upload_us = 0;
  size_t trace_first = 0, trace_last = 0;  // the evaluations' events in the simulator's trace: [first, last)
  size_t races = 0;
  std::vector<std::string> errors;
  bool checked = false;  // numerics compared (memory-backed mode only)
  double nmse = 0;       // outputs (the logits of a model) vs the CPU reference
  bool nan_mismatch = false;
  size_t non_finite = 0;  // output positions where the run or the reference has NaN/Inf (nmse skips them)
  // The numerics agree with the CPU reference: compared, no NaN/Inf mismatch, NMSE within max_nmse, and no NaN/Inf at
  // all unless allowed (NMSE skips those positions, so NaN on both sides is not agreement). Also true when not
  // compared (metadata-only mode); callers that require a comparison check `checked`.
  bool matches_reference(double max_nmse, bool allow_non_finite = false) const {
    return !checked || (!nan_mismatch && nmse <= max_nmse && (allow_non_finite || non_finite == 0));
  }
};

// The inside of a Graphviz double-quoted string that shows as `s` (quotes, backslashes, newlines and control
// characters escaped, bytes that are not UTF-8 replaced): what Session::dot writes for every name.
std::string dot_escape(const std::string& s);

// One split as the reports show it (Session::split_records): the text split table and the JSON split_list are both
// made from these.
struct SplitRecord {
  struct Input {
    std::string name;
    size_t bytes = 0;
    std::string from;  // the backend the input is copied from
  };
  int index = 0;
  std::string backend;
  size_t first_node = 0, end_node = 0;  // the nodes [first_node, end_node) of the graph
  std::vector<Input> inputs;
  std::string first_tensor, last_tensor;  // the names of its first and last node ("" for a split without nodes)
  // Why it starts (split_causes.h): the cause's name and description, and the scheduler's cut (split_reason_name).
  std::string reason, reason_text, cut;
};

// The weights of one tensor type: how many tensors, how many bytes (Session::weight_types).
struct WeightTypeTotal {
  Type type = Type::kF32;
  size_t tensors = 0;
  size_t bytes = 0;
};
// The weights of `weights` by type, the most bytes first (Session::weight_types' order).
std::vector<WeightTypeTotal> weight_type_totals(const std::vector<Tensor*>& weights);

class Session {
 public:
  // `real_devices`: the registry the topology's wrapped devices see through (Simulator::create); the harness links
  // none of its own, so the program passes the one it links (e.g. builtin_registry()). Errors: an invalid topology
  // or model, a policy that does not apply, weights that do not fit (naming the device), a scheduler that cannot be
  // created.
  static Result<std::unique_ptr<Session>> create(const SessionConfig& config, const Registry* real_devices);
  ~Session();

  // Splits and allocates the graph (the scheduler's alloc_graph): a scheduling error or an allocation failure.
  Status plan();
  // Sets the inputs, computes `evaluations` times (asynchronously, then synchronizes) and, in memory-backed mode,
  // compares the logits with the same model computed on the plain CPU backend.
  Result<RunStats> run(int evaluations = 1, bool check_numerics = true);
  // A lifecycle the caller spells out (scenario files' "run.steps"): kReserve = the scheduler's reserve of the graph;
  // kAlloc = alloc_graph, then the inputs; kCompute = graph_compute_async, preceded by kAlloc unless an allocation
  // not yet computed is there (as an application allocates and sets the inputs before each evaluation);
  // kSynchronize = the scheduler's synchronize, then (check_numerics, memory-backed) the outputs compared with the
  // reference of the evaluations so far; kReset = the scheduler's reset (it drops the plan and the user's pins; the
  // pins are set again, as an application does). Then synchronizes and compares the outputs like run(). An empty
  // list is an error. The *Next steps do the same with the next graph (SessionConfig::next_graph; an error without
  // one); the outputs compared are those of the graph computed last. RunStats holds the worst comparison.
  // kComputeAgain (kComputeNextAgain) = graph_compute_async of the graph computed last once more, without
  // alloc_graph and without writing its inputs (an application evaluating the same batch again: the scheduler
  // allocates it itself, and the inputs are those the last evaluation read); an error unless a compute (or
  // compute-again) of the same graph came before it with no reserve, alloc, reset or step of the other graph between
  // (a synchronize may), or when graph inputs are freed after their last use (policy free_inputs: their bytes are
  // gone).
  enum class Step {
    kReserve,
    kAlloc,
    kCompute,
    kReserveNext,
    kAllocNext,
    kComputeNext,
    kSynchronize,
    kReset,
    kComputeAgain,
    kComputeNextAgain
  };
  // "reserve", ..., "compute-next", "synchronize", "reset", "compute-again", "compute-next-again"
  static const char* step_name(Step step);
  // A step and whether it must fail: a step expected to fail (with an error containing error_contains, when not
  // empty) lets the lifecycle go on after its failure, so the next steps retry on the state it left; that it
  // succeeds, or fails otherwise, is the run's error.
  struct StepSpec {
    Step step = Step::kCompute;
    bool must_fail = false;
    std::string error_contains;
  };
  Result<RunStats> run_steps(const std::vector<StepSpec>& steps, bool check_numerics = true);
  Result<RunStats> run_steps(const std::vector<Step>& steps, bool check_numerics = true);
  // Whether step number `index` (from 0) of a lifecycle ended as `spec` expects: Ok when it succeeded, or when it
  // must fail and failed with its error_contains; otherwise the run's error, "step N (NAME): ...". (run_steps' rule,
  // for other drivers of the steps: the meta device's run, llama::run_tensor_parallel.)
  static Status step_outcome(const StepSpec& spec, size_t index, const Status& status);
  // One evaluation of a run, as the CPU reference replays it: of the next graph or the first; whether the inputs
  // were written before it (not for a compute-again); the seed of the inputs it read.
  struct Evaluation {
    bool next = false;
    bool inputs_written = true;
    uint64_t seed = 0;
  };

  // The pieces of run(), for callers that drive the scheduler themselves (e.g. a stateful test): writes the seeded
  // inputs (after the graph is allocated), reads the outputs in order as one vector, and computes the same outputs on
  // the plain CPU backend (memory-backed mode only).
  Status set_inputs();
  Result<std::vector<float>> read_outputs() const;
  Result<std::vector<float>> reference_outputs() const;

  const SessionConfig& config() const { return config_; }
  sim::Simulator& sim() { return *sim_; }
  Scheduler& sched() { return *sched_; }
  Graph& graph() { return *graph_; }
  // The tensors compared with the CPU reference: the logits of a model, the outputs of a serialized graph.
  // (Those of the next graph once it was computed.)
  const std::vector<Tensor*>& outputs() const { return last_was_next() ? next_outputs_ : outputs_; }
  // A short description of what runs: "model tiny (2 layers, 8 tokens, flash attention; context 64, weights
  // q4_0/f32, KV cache f16)" or "graph FILE (N nodes, M leafs; weights f32)" (session_reports.cpp).
  std::string describe_workload() const;
  // The weights by tensor type, the most bytes first (then by type name): a model file mixes several.
  std::vector<WeightTypeTotal> weight_types() const;
  const Placement& placement() const { return placement_; }
  // The model's graph and weights (model mode; empty for a serialized graph).
  const models::LlamaGraph& model() const { return model_; }
  std::vector<DeviceMemory> memory() const;
  // A node or leaf by name (the last node of that name), nullptr when none. This and the reports below look at the
  // graph the scheduler saw last: the first graph, or the next graph after a "-next" step.
  const Tensor* find_tensor(const std::string& name) const;

  // Readable reports with a stable ordering.
  // Devices: layers, weights, cache, compute, peak / capacity; within 80 columns, or `wide`: the fixed columns of
  // --wide (tessera/harness/common/text_table.h).
  std::string summary_table(bool wide = false) const;
  std::string splits_table() const;                // split, backend, nodes, inputs (with their source backend and size)
  std::vector<SplitRecord> split_records() const;  // what splits_table shows, as data
  // Backend, cause, split, copy; every node of that name when several share it (each with its graph position).
  std::string explain(const std::string& tensor_name) const;
  std::string explain_tensor(const Tensor& t) const;  // one tensor of the graph
  // Graphviz (harness/session/dot.cpp), coloured by backend: kNode every node in a cluster per split, the copies
  // into a split as dashed edges; kSplit one node per split (backend, node count, first and last node, inputs), the
  // copies between splits as edges with their bytes; kLayer one node per layer and backend, the data between them
  // as edges (dashed with their bytes where they are copied).
  enum class DotView { kNode, kSplit, kLayer };
  std::string dot(DotView view = DotView::kNode) const;
  // RunStats::weight_upload_us: the time to write the weights and the cache from the host once.
  double weight_upload_us() const;

 private:
  Session() = default;
  SessionConfig config_;
  std::unique_ptr<sim::Simulator> sim_;
  std::vector<std::unique_ptr<Backend>> backends_;
  Status apply_pins();
  std::string split_rows_text(const Tensor& t) const;  // explain's rows of a split weight
  static Result<bool> resolve_flash_attn_auto(const SessionConfig& config, const Registry* real_devices);
  void step(const char* name) const {
    if (config_.progress) config_.progress(name);
  }
  Result<RunStats> finish_run(bool check_numerics, RunStats r = {});  // synchronize, timeline and race counts, numerics
  Status compare_outputs(RunStats* r) const;  // the outputs now against the reference of the evaluations so far
  Status run_one_step(const StepSpec& spec, int* fresh);
  uint64_t next_input_seed() const;            // the seed of the next evaluation's inputs
  int backend_of_device(size_t device) const;  // the scheduler's backend index of a device, -1 if left out

  models::LlamaGraph model_;  // model mode
  LoadedGraph loaded_;        // graph mode
  Graph* graph_ = nullptr;
  Graph* current_ = nullptr;  // the graph of the last step (the first graph or the next one): what the reports show
  std::vector<Tensor*> outputs_;
  // Graph mode: the inputs' fill rules and keys, decided at creation (planning rewires the graph's sources).
  std::vector<std::pair<LeafData, uint64_t>> input_fill_;
  // The next graph (SessionConfig::next_graph): its weights are the first graph's; its own inputs and outputs.
  LoadedGraph next_;
  std::vector<Tensor*> next_outputs_;
  std::vector<std::pair<LeafData, uint64_t>> next_input_fill_;
  size_t eval_first_event_ = SIZE_MAX;  // the trace's first event of the first evaluation of this run
  uint64_t inputs_seed_ = 0;            // the seed of the inputs written last
  // Every evaluation so far, in order (the reference replays them, so it sees the caches the run's graphs wrote).
  std::vector<Evaluation> computes_;
  // The graph (0: first, 1: next) whose compute was the last step that touched the scheduler, -1 when none: the
  // only graph a compute-again step may evaluate.
  int computed_last_ = -1;
  // Whether the last evaluation was of the next graph: its outputs are the ones compared.
  bool last_was_next() const { return !computes_.empty() && computes_.back().next; }
  Status compute_again(int which);
  Status evaluate(int which, bool inputs_written);  // graph_compute_async of current_, recorded for the reference
  Status load_next_graph();
  Status set_next_inputs();
  Placement placement_;
  std::unique_ptr<Scheduler> sched_;
};

}  // namespace tessera::harness
