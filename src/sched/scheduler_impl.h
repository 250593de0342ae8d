// The scheduler's state (shared by scheduler.cpp, executor.cpp and report.cpp).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "plan.h"
#include "reuse.h"
#include "tessera/planner.h"
#include "tessera/sched.h"

namespace tessera {

namespace sched {

// What a split and allocation leave behind for one graph: the plan, the planner's view of it and the reuse record. The
// scheduler's current plan is the PlanState its Impl derives from; the plan cache holds the others (parked: their
// graph has its sources and placements back, recorded in `parked`).
struct PlanState {
  SchedPlan plan;
  Graph* graph = nullptr;  // the user graph of this plan (sources rewritten while current)
  // What the planner sees (docs/scheduler.md, 'Compute memory'): node and leaf lists, no Graph (its duplicate check is
  // not needed: the lists are built from an already deduplicated graph). Reused across splits.
  std::vector<Tensor*> sched_nodes, sched_leafs;
  // Where each node's sources and each tensor's view source are in those lists (GraphNodes::Positions), so the
  // planner numbers them without pointer lookups.
  std::vector<int32_t> sched_src_pos, sched_node_vsrc_pos, sched_leaf_vsrc_pos;
  std::vector<int32_t> sched_node_pid, sched_leaf_pid;  // plan id of each node / leaf of the lists
  std::vector<int32_t> sched_dep_input;                 // per node: the input's plan id for a dependency node, else -1
  std::vector<int> node_ids, leaf_ids;                  // buffer type id per node/leaf of sched_graph
  std::vector<int> node_backends, leaf_backends;        // backend per node/leaf of sched_graph
  bool split_done = false;
  ReuseRecord reuse;
  // Parked: the placements the scheduler released in the graph (position in reuse.tensors, buffer, address)
  struct Placement {
    size_t index;
    Buffer* buffer;
    void* data;
  };
  std::vector<Placement> parked;
};

}  // namespace sched

struct Scheduler::Impl : sched::PlanState {
  std::vector<Backend*> backends;
  std::vector<BufferType*> bufts;         // per backend
  std::vector<int> buft_id;               // per backend: index into unique_bufts
  std::vector<BufferType*> unique_bufts;  // the planner's buffer type ids: compute memory, then (parallel) copy regions
  size_t n_unique = 0;                    // compute-memory ids: [0, n_unique)
  // With parallel: the planner id of the in-flight copy region of compute id u is n_unique + u, replicated once per
  // slot (GraphPlanner::set_replicas), so every slot has its own disjoint copy memory under one plan.
  int region_id(int u) const { return n_copies > 1 ? static_cast<int>(n_unique) + u : u; }
  std::unique_ptr<sched::BackendList> set;
  SchedulerParams params;
  int n_copies = 1;

  std::unordered_map<const Tensor*, int> pins;  // user assignments
  std::vector<int32_t> sched_pos;               // the position of each plan id in the planner's lists (scratch)
  GraphNodes sched_graph() const {
    // exact: record_sched_positions derived them from the plan of this split (see there)
    return {sched_nodes, sched_leafs, {sched_src_pos, sched_node_vsrc_pos, sched_leaf_vsrc_pos, true}};
  }
  void record_sched_positions(const Graph& g);
  void add_sched_node(Tensor* t, int32_t pid, int32_t dep_input, int buft, int backend) {
    sched_nodes.push_back(t);
    sched_node_pid.push_back(pid);
    sched_dep_input.push_back(dep_input);
    node_ids.push_back(buft);
    node_backends.push_back(backend);
  }
  void add_sched_leaf(Tensor* t, int32_t pid, int buft, int backend) {
    sched_leafs.push_back(t);
    sched_leaf_pid.push_back(pid);
    leaf_ids.push_back(buft);
    leaf_backends.push_back(backend);
  }
  std::vector<int> prev_node_backends, prev_leaf_backends;  // for the re-reserve rule
  std::unique_ptr<GraphPlanner> planner;

  bool allocated = false;
  bool placed = false;    // the planner may have placed tensors of `graph` (an allocation ran, even a failed one)
  bool computed = false;  // the allocation was used by a compute already
  int slot = 0;           // slot of the current allocation
  int next_slot = 0;
  // per backend: it read a user input where it lives in an evaluation since the last alloc_graph
  // (note_inplace_input_readers); alloc_graph waits for these and clears them
  std::vector<char> pending_input_readers;
  int reserves = 0;
  int explicit_reserves = 0;  // of `reserves`, those of Scheduler::reserve (the rest are alloc_graph's re-plans)
  int replan_syncs = 0;       // backend synchronizations those re-plans made first
  std::string last_error;
  // A failure of queued work found by a synchronize the user did not call (reserve, reset, a re-reserve): the
  // user's next synchronize (or graph_compute) reports it.
  std::string pending_error;
  EvalCallback callback;
  // events[backend][slot]; null when the device has none
  std::vector<std::vector<std::unique_ptr<Event>>> events;

  // Plan reuse (reuse.cpp, docs/scheduler.md 'Reuse') and the plan cache (plan_cache.cpp, 'Plan cache')
  std::vector<std::unique_ptr<sched::PlanState>> cache;         // the parked plans, most recently used first
  std::vector<std::pair<const Graph*, std::string>> forgotten;  // graphs whose plan left the cache, and why (bounded)
  uint64_t pins_version = 0;                                    // bumped when a pin changes
  int reuses = 0;                                               // allocations that kept the plan
  int full_plans = 0;                                           // allocations that split and placed the graph
  bool last_reused = false;                                     // the last allocation kept the plan
  std::string reuse_why;                                        // why the last allocation did not ("" when it did)
  bool switched = false;  // the last allocation came after another graph's plan (a switch of graphs)
  bool try_reuse(Graph& g);
  void record_reuse(const Graph& g);
  // The plan cache: park() puts the current plan in the cache (its graph restored: sources and placements) or, when
  // it cannot be kept, resets it; switch_plan(g) parks the current plan and makes g's cached plan the current one
  // (false: none). drop_cache forgets every parked plan (`why` is kept for the graphs' next why_not).
  void park();
  bool switch_plan(const Graph& g);
  void drop_cache(const std::string& why);
  void forget(const Graph* g, std::string why);
  std::string why_not_cached(const Graph& g) const;
  size_t compute_bytes() const;     // the planner's buffers, all ids and replicas (a growth replaces buffers)
  Status place_parked();            // puts the current plan's parked placements back (try_reuse)
  Status place_slot_copies(int s);  // gives the copies of slot s their planned addresses

  Status split(Graph& g, int slot_for_sources);
  void build_sched_graph(const Graph& g, int s_slot);
  void reset_plan();  // restores the user's graph, keeps pins
  Status do_alloc(Graph& g);
  void record_backends();
  ComputeStatus execute();
  // execute's steps (executor.cpp)
  ComputeStatus copy_graph_inputs(int cur);
  // The backends of the nodes that write into a leaf (a CPY or SET_ROWS into it or a view of it: a cache, a user
  // INPUT), per leaf id of the plan; only leafs the graph writes have an entry. Rebuilt by execute().
  std::unordered_map<int32_t, std::vector<int>> leaf_writers;
  void note_leaf_writers();
  // Before the host copies leaf `id`, or a view of it, into a split: the backends that write into it are done, so
  // that the copy holds what an earlier evaluation, still in flight, wrote there (found by the scheduler properties
  // once the hazard detector saw host copies out of host memory: a SET_ROWS of an asynchronous CPU into a user input,
  // then a computation again whose first split copied the input at once; a CPY of gpu1 into a weight in gpu0's host
  // buffer, which the next evaluation's first split copied through the host).
  Status wait_for_leaf_writers(int32_t id, std::vector<char>* waited);
  // Before `sb` copies leaf `id`, or a view of it, on its own stream from the leaf's backend `src` (cpy_tensor_async):
  // sb's stream waits for every other backend that writes into the leaf (its events of every slot; without events the
  // host synchronizes it). The copy's contract orders it after the work of `src` and of sb only, and an earlier
  // evaluation's write by a third backend may still be in flight (found by the race-finder once graphs wrote into
  // leafs they read: gpu1's SET_ROWS into a table in its memory, whose backend was gpu0, copied out by gpu2's first
  // split of the next evaluation).
  Status wait_for_leaf_writers_on_stream(int32_t id, int src, int sb);
  // Before the host writes `cpy` (a copy of a user input in slot cur on backend `owner`): every other backend that may
  // still read those bytes from an earlier evaluation is done with them (docs/scheduler.md, "Who must be done before
  // a write"). `waited` marks the backends already waited for in this evaluation step.
  Status wait_for_other_readers(const Tensor& cpy, int owner, int cur, std::vector<char>* waited);
  // Before the user writes the next evaluation's inputs (alloc_graph): every backend that read a user INPUT where it
  // lives, without a copy, in an evaluation since the last alloc_graph (the current one, and those noted by
  // note_inplace_input_readers) is done with it.
  Status wait_for_inplace_input_readers();
  // Adds the backends that read a user input of the current, computed evaluation where it lives to
  // pending_input_readers (wait_for_inplace_input_readers waits for them).
  void note_inplace_input_readers();
  // The host waits until backend r is done with what its events recorded: the event of slot `only`, or of every slot
  // (-1); a backend without events is synchronized.
  Status host_wait(int r, int only = -1);
  // sb's stream waits for backend r's events of every slot; a backend without events is synchronized by the host.
  Status stream_wait(int r, Backend& sb);
  // The backends writing into leaf `id` (or the leaf it is a view of) in the current plan; nullptr when none.
  const std::vector<int>* leaf_writers_of(int32_t id) const;
  // Per backend w, the backends w's first split of an evaluation waits for (execute's step 0): every backend whose
  // splits read a tensor of another device in place (no copy: they take its buffer type); every backend whose
  // compute reads a buffer of another device that w writes into; every backend that copies out of a buffer w writes
  // when the copy's source backend is not w. Computed by execute() for the plan it runs.
  std::vector<std::vector<int>> first_split_waits_of(const sched::SchedPlan& p) const;
  Status copy_split_input(const sched::Split& sp, size_t k, int cur, Backend& sb, Event* prev_event, Event* slot_event);
  ComputeStatus compute_split(size_t si, const sched::Split& sp, Backend& sb);
  // Waits for every backend; failures are kept in pending_error. `count`, when given, is incremented per backend.
  void sync_all(int* count = nullptr);
  // sync_all, and with nothing allocated the slot rotation starts again at slot 0 (nothing is in flight, so every
  // slot is free: the next evaluation takes the slot a fresh scheduler would)
  void sync_idle();
  ComputeStatus fail(ComputeStatus s, std::string msg) {
    last_error = std::move(msg);
    return s;
  }
  Event* event(int backend, int s) const { return events[static_cast<size_t>(backend)][static_cast<size_t>(s)].get(); }
};

}  // namespace tessera
