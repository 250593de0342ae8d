// The multi-backend scheduler (docs/scheduler.md): assigns every node of a graph to one of several backends (five
// passes), cuts the graph into splits, copies tensors between backends (optionally through several in-flight slots
// guarded by events), plans compute memory with the graph allocator, and runs the splits.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessera/backend.h"
#include "tessera/graph.h"

namespace tessera {

// Which rule assigned a tensor to its backend (always recorded; see explain()); cause_name() prints the short code
// shown in reports and scenarios.
enum class Cause : uint8_t {
  kUnassigned = 0,       // "unassigned"
  kPinned,               // "user": pinned with set_tensor_backend
  kHasBuffer,            // "1.dst": pass 1, the tensor has a buffer
  kViewSourceHasBuffer,  // "1.vsrc": pass 1, its view source has a buffer
  kInput,                // "1.inp": pass 1, flagged INPUT -> the last backend
  kWeight,               // "1.wgt": pass 1, the backend of its first weight
  kOpOffload,            // "1.off": pass 1, a higher-priority backend takes an op whose weight is in host memory
  kExpanded,             // "2.exp": pass 2, grown from a neighbouring node's backend
  kMostSources,          // "3.best": pass 3, the backend where most sources already are
  kUpgraded,             // "3.upg": pass 3, moved to a higher-priority backend sharing the compute buffer type
  kViewOfSource,         // "4.vsrc": pass 4, a view takes its source's backend
  kConsumer,             // "4.cur": pass 4, a source takes the backend of the node that uses it
  kFallback,             // "4.fallback": pass 4, the first backend that supports the op
  kCopy,                 // "copy": a copy made by the scheduler
  kCount
};
const char* cause_name(Cause cause);
// What a cause means, in words (for reports and tools): "op offload: a faster backend takes an op whose weight is in
// host memory" for kOpOffload.
const char* cause_description(Cause cause);

// Why pass 5 started a split (docs/scheduler.md, pass 5); split_reason_name() prints the short code.
enum class SplitReason : uint8_t {
  kFirst = 0,   // "first": the graph's first split
  kBackend,     // "backend": the node runs on another backend than the split before
  kWeightCopy,  // "weight": same backend, but a weight the node reads must be copied (and the split had inputs)
  kInputLimit,  // "inputs": same backend, but the node's new inputs would take the split past max_split_inputs
};
const char* split_reason_name(SplitReason reason);
const char* split_reason_description(SplitReason reason);

// The most in-flight copy slots of pipeline parallelism (llama.cpp's GGML_SCHED_MAX_COPIES, also 4 by default).
constexpr int kParallelCopies = 4;

struct SchedulerParams {
  // Buffer type for each backend's compute memory (empty: each backend's default). Each backend must support it.
  std::vector<BufferType*> bufts;
  bool parallel = false;  // pipeline parallelism: n_copies in-flight copies of every cross-backend input
  // With parallel: the in-flight slots, 1 to kParallelCopies (llama.cpp builds set it with GGML_SCHED_MAX_COPIES;
  // 2 is a common choice). 1 is no pipelining. Out of range: Scheduler::create refuses it.
  int n_copies = kParallelCopies;
  bool op_offload = true;  // a higher-priority backend may take an op whose weight is in the last backend's host memory
  // A FLASH_ATTN_EXT's sinks weight decides where it runs, as ggml's scheduler did before llama.cpp build 10150
  // (PR #25832, "adjust logic for offloading ops to weight's backend"); off: the sinks are too small to decide, as a
  // ROPE's frequency factors are (docs/scheduler.md, pass 1).
  bool fa_sinks_decide = false;
  int max_split_inputs = 30;   // inputs per split (>= 10, the most one node can bring)
  bool debug_reserve = false;  // report every re-reserve and its reason on stderr (and why a plan was not reused)
  // Plan reuse (docs/scheduler.md, 'Reuse'): an allocation of the graph planned last, with the same structure, keeps
  // the assignment, splits, copies and compute plan and only takes its slot's copies. Off: every allocation splits
  // and places the graph again.
  bool reuse = true;
  // With reuse: the plans kept, one per graph, the current one included (docs/scheduler.md, 'Plan cache'), 1 to
  // kMaxCachedPlans; least recently used out first. 1: only the last graph's plan (allocating another graph forgets
  // it). Out of range: Scheduler::create refuses it.
  int plan_cache = 4;
  // How the compute plan packs each buffer (GraphPlanner::Packing): the default keeps the smaller of the online and
  // offline packings; online alone is what ggml-alloc does (llama.cpp's figures are predicted so).
  bool online_packing = false;
  // Graph inputs freed after their last reader (GraphPlanner::set_free_inputs), as ggml-alloc frees them; plan reuse
  // is then off (a kept plan's input lifetimes are not checked). For predicting llama.cpp's buffers.
  bool free_inputs = false;
  // ggml-alloc's in-place rule (GraphPlanner::set_ggml_inplace): a node computed in place takes its first qualifying
  // source's block, never a view's. For predicting llama.cpp's buffers; off, the planner's own rule.
  bool ggml_inplace = false;
};

// The most plans SchedulerParams::plan_cache may keep.
constexpr int kMaxCachedPlans = 16;

// The most backends one scheduler takes (a copy of a tensor is indexed per backend); Scheduler::create refuses more,
// and topology files may list at most this many devices.
constexpr int kMaxBackends = 16;

struct TensorExplain {
  int backend = -1;  // index in the scheduler's backend list, -1 when unassigned
  std::string backend_name;
  Cause cause = Cause::kUnassigned;
  int split = -1;                   // split of a node (-1 for leafs and tensors outside the graph)
  bool is_copy = false;             // a copy made by the scheduler
  const Tensor* copy_of = nullptr;  // is_copy: the tensor it copies (a split's input)
  bool plan_reused = false;         // the last allocation kept the previous plan (Scheduler::plan_reuse)
};

// What the last allocation did with the previous plan (docs/scheduler.md, 'Reuse').
struct PlanReuse {
  bool reused = false;  // kept it: no split, no placement
  // Why not, when not: "node 'ffn_out-3' (node 41): op_params", "a pin changed (set_tensor_backend)", ...
  std::string why_not;
  int reuses = 0;      // allocations that kept the plan, since creation
  int full_plans = 0;  // allocations that split and placed the graph
  int cached = 0;      // plans held now (the current one included; SchedulerParams::plan_cache at most)
};

// Called for each node with ask = true ("do you want to observe it?"); after computing up to an observed node the
// backend is synchronized and it is called again with ask = false; returning false then stops the evaluation.
using EvalCallback = std::function<bool(Tensor* t, bool ask)>;

// Lifetime contract: the graph given to reserve / alloc_graph / graph_compute is used by the scheduler until the next
// allocation of another graph, reset(), or the scheduler's destruction. At each of those the scheduler restores the
// graph's sources and releases its placements (tensors it put in its compute buffers get a null buffer and data), so
// keep the graph's context alive until then. Read outputs before that point. A plan kept in the plan cache never
// touches its graph until that graph is allocated again, so a graph may be freed at any time after that point.
class Scheduler {
 public:
  // Errors: no backends, a null backend, the last backend not a CPU device, a compute buffer type the backend does
  // not support, max_split_inputs < 10.
  static Result<std::unique_ptr<Scheduler>> create(std::vector<Backend*> backends, SchedulerParams params = {});
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  // Splits a measure graph (usually the worst case), plans and allocates compute buffers, keeps user pins, resets.
  Status reserve(Graph& measure_graph);
  // Dry run: compute bytes per backend (index as in the backend list), nothing allocated; resets.
  Result<std::vector<size_t>> reserve_size(Graph& graph);
  // Splits and places the graph (re-reserving when an assignment or a size changed). The in-flight slot for this
  // evaluation is chosen here. Error status (never a crash): a scheduling error naming tensor, buffer and op, or an
  // allocation failure (kAllocFailed).
  Status alloc_graph(Graph& graph);
  // Computes the graph (allocating it first when it is not the allocated graph, or was already computed once).
  ComputeStatus graph_compute_async(Graph& graph);
  ComputeStatus graph_compute(Graph& graph);
  const std::string& last_error() const;
  // Waits for every backend. An error when queued work failed after graph_compute_async returned (reported once;
  // graph_compute reports it as its own failure).
  Status synchronize();
  // Restores the user's graph, clears assignments and user pins.
  void reset();

  // User pins (cleared by reset, kept by reserve).
  Status set_tensor_backend(Tensor* t, Backend* backend);
  Backend* get_tensor_backend(const Tensor* t) const;

  int n_backends() const;
  Backend* backend(int i) const;
  int backend_index(const Backend* b) const;
  int n_splits() const;
  int n_copies() const;  // in-flight slots (1, or SchedulerParams::n_copies with parallel)
  int current_slot() const;
  // Bytes of compute buffers allocated for a backend.
  size_t buffer_size(int backend) const;
  // Times compute buffers were (re)planned by reserve or alloc_graph.
  int reserve_count() const;
  // Of those, the plans alloc_graph made itself (a re-plan: the first allocation without a reserve, a moved
  // assignment, a graph that no longer fits), and the backend synchronizations those re-plans made first (one per
  // backend each: nothing may still use the buffers a re-plan replaces).
  int replan_count() const;
  int replan_synchronizations() const;
  // Pointer lookups the graph planner needed to number the tensors of the scheduler's graph, the last time it did
  // (reserve, or alloc_graph's check). 0 when the positions the scheduler hands it were all right (a diagnostic of
  // the fast path: a lookup is slower, never wrong).
  size_t planner_index_lookups() const;
  void set_eval_callback(EvalCallback callback);
  // Whether the last allocation reused the plan, and why not (docs/scheduler.md, 'Reuse').
  PlanReuse plan_reuse() const;

  TensorExplain explain(const Tensor* t) const;
  struct SplitView {
    int backend;
    size_t i_start, i_end;  // node range of the user's graph
    std::vector<const Tensor*> inputs;
    SplitReason reason = SplitReason::kFirst;  // why node i_start starts it (the first split: kFirst)
  };
  std::vector<SplitView> splits() const;
  // Splits with backend, inputs (name, size) and nodes (name, op, size, backend, cause).
  std::string report() const;

  struct Impl;

 private:
  explicit Scheduler(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tessera
