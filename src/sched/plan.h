// The scheduler's explicit plan and the five passes over it (docs/scheduler.md, 'Pass 1' to 'Pass 5'). Each pass is a
// function in its own file, taking the plan, the graph and the backends' capability queries, so each can be tested
// alone.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "../alloc/prefetch.h"
#include "../alloc/tensor_id_map.h"
#include "tessera/backend.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/sched.h"

namespace tessera::sched {

namespace testing {
struct PlanCorrupter;  // tests/unit/sched/test_plan_verifier.cpp: breaks the plan's own bookkeeping on purpose
}  // namespace testing

// What the passes may ask about the backends (index 0 = highest priority; the last is the CPU fallback).
class BackendSet {
 public:
  virtual ~BackendSet() = default;
  virtual int size() const = 0;
  int last() const { return size() - 1; }
  virtual const char* name(int b) const = 0;
  virtual bool supports_op(int b, const Tensor& t) const = 0;
  virtual bool supports_buft(int b, const BufferType& buft) const = 0;
  virtual bool offload_op(int b, const Tensor& t) const = 0;
  // The buffer type of b's compute memory.
  virtual BufferType* compute_buft(int b) const = 0;
  // True for the scheduler's own compute buffers: a tensor placed there by an earlier allocation counts as not
  // allocated (its backend is the scheduler's decision, not a constraint).
  virtual bool is_compute_buffer(const Buffer* /*b*/) const { return false; }
  // The buffer that constrains t: its own or its view source's, unless it is a compute buffer.
  const Buffer* fixed_buffer(const Tensor& t) const {
    const Buffer* b = tensor_buffer(t);
    return b != nullptr && !is_compute_buffer(b) ? b : nullptr;
  }
};

// The BackendSet of real backends. It memoises nothing: the plan asks supports_op and offload_op once per tensor and
// backend (SchedPlan::supports, offloads) and supports_buft once per buffer type (SchedPlan::buft_users), per split.
class BackendList final : public BackendSet {
 public:
  BackendList(std::vector<Backend*> backends, std::vector<BufferType*> bufts,
              std::function<bool(const Buffer*)> is_compute = {})
      : backends_(std::move(backends)), bufts_(std::move(bufts)), is_compute_(std::move(is_compute)) {}
  int size() const override { return static_cast<int>(backends_.size()); }
  const char* name(int b) const override { return backends_[static_cast<size_t>(b)]->name(); }
  bool supports_op(int b, const Tensor& t) const override { return backends_[static_cast<size_t>(b)]->supports_op(t); }
  bool supports_buft(int b, const BufferType& buft) const override {
    return backends_[static_cast<size_t>(b)]->supports_buft(buft);
  }
  bool offload_op(int b, const Tensor& t) const override { return backends_[static_cast<size_t>(b)]->offload_op(t); }
  BufferType* compute_buft(int b) const override { return bufts_[static_cast<size_t>(b)]; }
  bool is_compute_buffer(const Buffer* b) const override { return is_compute_ && is_compute_(b); }
  Backend* backend(int b) const { return backends_[static_cast<size_t>(b)]; }

 private:
  std::vector<Backend*> backends_;
  std::vector<BufferType*> bufts_;
  std::function<bool(const Buffer*)> is_compute_;
};

struct Assignment {
  int backend = -1;
  Cause cause = Cause::kUnassigned;
};

struct Split {
  int backend = -1;
  size_t i_start = 0, i_end = 0;   // node range of the user's graph
  std::vector<Tensor*> inputs;     // tensors (as the user's graph has them) copied into this split's backend
  std::vector<int32_t> input_ids;  // their ids in the plan
  // The per-slot copies of each input (same order). Usually plan.copy(input, backend, slot), shared with earlier
  // splits on this backend; a fresh set when the input was written in place since those copies were made.
  std::vector<std::array<Tensor*, kParallelCopies>> input_copies;
  std::vector<int32_t> input_sets;           // the plan's copy set of each input (same order)
  SplitReason reason = SplitReason::kFirst;  // why pass 5 started it
};

struct PassOptions {
  bool op_offload = true;
  bool fa_sinks_decide = false;  // SchedulerParams::fa_sinks_decide
  int max_split_inputs = 30;
  int n_copies = 1;  // in-flight slots
  int slot = 0;      // the slot sources are rewritten to
};

// The plan keeps every per-tensor fact in flat arrays indexed by a dense tensor id. index(g) (called by every pass)
// numbers the graph's nodes 0..n-1, then its leafs, then sources and view sources outside the graph, and reads once,
// from the 300-byte Tensors, what the passes ask again and again (source ids, view source, fixed buffer type, weight,
// INPUT and view-op flags) into compact arrays. Tensors met later (copies, the scheduler's dependency nodes, pins of
// other graphs) get the next ids. Assignments made before index(g) (pins, tests) are kept.
class SchedPlan {
 public:
  // ---- assignments (any tensor) ----
  int backend_of(const Tensor* t) const {
    const int32_t id = find(t);
    return id < 0 ? -1 : backend_[static_cast<size_t>(id)];
  }
  Cause cause_of(const Tensor* t) const {
    const int32_t id = find(t);
    return id < 0 ? Cause::kUnassigned : cause_[static_cast<size_t>(id)];
  }
  void set(const Tensor* t, int b, Cause c) { set_id(intern(t), b, c); }
  size_t n_assigned() const;
  template <typename Fn>
  void for_each_assignment(Fn fn) const {
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (backend_[i] >= 0 || cause_[i] != Cause::kUnassigned) fn(tensors_[i], Assignment{backend_[i], cause_[i]});
    }
  }
  // Forgets every tensor (keeps the arrays' capacity for the next split).
  void clear();

  // ---- dense ids (valid after index(g)) ----
  void index(const Graph& g, const BackendSet& bs);
  int32_t intern(const Tensor* t);  // the id of t, a new one when t has none
  // The id of a tensor that is not one of the indexed graph's nodes or leafs (a copy, a dependency node, a pin of
  // another graph): the pointer map need not hold the graph's tensors first.
  int32_t add_fresh(const Tensor* t);
  // The id of a tensor the scheduler has just created (a copy, a dependency node), which no id can name yet: it
  // enters the pointer map only when a lookup by pointer needs it.
  int32_t add_new(const Tensor* t);
  int32_t id_of(const Tensor* t) const { return find(t); }
  const Tensor* tensor(int32_t id) const { return tensors_[static_cast<size_t>(id)]; }
  // The same pointer as the user's graph (or pass 5) holds it: the plan never writes through it.
  Tensor* user_tensor(int32_t id) const { return const_cast<Tensor*>(tensors_[static_cast<size_t>(id)]); }
  int backend(int32_t id) const { return backend_[static_cast<size_t>(id)]; }
  Cause cause(int32_t id) const { return cause_[static_cast<size_t>(id)]; }
  void set_id(int32_t id, int b, Cause c) {
    backend_[static_cast<size_t>(id)] = static_cast<int8_t>(b);
    cause_[static_cast<size_t>(id)] = c;
  }
  // Source j of node i (the node's id is i), -1 when none.
  int32_t src(size_t node, int j) const { return src_[node * kMaxSrc + static_cast<size_t>(j)]; }
  // One past the node's last source slot in use (src(node, j) is -1 from there on): the passes' source loops stop
  // there instead of visiting all kMaxSrc slots.
  int n_src(size_t node) const { return n_src_[node]; }
  int32_t view_src(int32_t id) const { return vsrc_[static_cast<size_t>(id)]; }
  // The tensor whose memory id aliases: the end of the view_src chain (a view_src is normally that root already).
  int32_t root(int32_t id) const {
    while (vsrc_[static_cast<size_t>(id)] >= 0) id = vsrc_[static_cast<size_t>(id)];
    return id;
  }
  // The type of the buffer that constrains the tensor (BackendSet::fixed_buffer), or null.
  const BufferType* fixed_buft(int32_t id) const { return fixed_buft_[static_cast<size_t>(id)]; }
  // The backends below 16 (bit b) whose supports_buft accepts buft, asked once per buffer type until clear() or the
  // next graph: the passes ask about a handful of types again and again.
  uint32_t buft_users(const BackendSet& bs, const BufferType* buft) const {
    if (buft == last_users_buft_) return last_users_;
    return find_buft_users(bs, buft);
  }
  // supports_buft(b, *buft) through that memo (buft not null).
  bool can_use(const BackendSet& bs, const BufferType* buft, int b) const {
    return b < 16 ? (buft_users(bs, buft) >> b & 1u) != 0 : bs.supports_buft(b, *buft);
  }
  enum Fact : uint8_t {
    kIsWeight = 1,    // in a buffer whose usage is WEIGHTS
    kHostBuffer = 2,  // its buffer (or its view source's) is host memory
    kInputFlag = 4,   // flagged INPUT
    kViewOp = 8,      // a view op (never computed)
    kNoneOp = 16,     // op NONE
  };
  bool has(int32_t id, Fact f) const { return (facts_[static_cast<size_t>(id)] & f) != 0; }
  // The tensor's op, as read by index (the passes need it without touching the Tensor again).
  Op op(int32_t id) const { return op_[static_cast<size_t>(id)]; }
  // The source that decides a node's backend in pass 1 (docs/scheduler.md, 'Pass 1', rule 5): its first WEIGHTS source
  // that is not an auxiliary one (ROPE frequency factors, FA sinks); -1 when none.
  int32_t deciding_weight(int32_t id) const;
  // FA sinks decide placement (PassOptions::fa_sinks_decide; pass 1 sets it)
  bool fa_sinks_decide = false;
  // Non-view nodes, in order.
  const std::vector<int32_t>& compute_nodes() const { return compute_nodes_; }
  size_t n_nodes() const { return n_nodes_; }
  size_t n_leafs() const { return n_leafs_; }

  // supports_op and offload_op, each asked once per tensor and backend. On a large graph index() asks most of them up
  // front, while it holds the Tensor (see there); a question it did not ask is asked here.
  bool supports(const BackendSet& bs, int32_t id, int b) {
    return memo(op_memo_, id, b, [&] { return bs.supports_op(b, *tensors_[static_cast<size_t>(id)]); });
  }
  bool offloads(const BackendSet& bs, int32_t id, int b) {
    return memo(offload_memo_, id, b, [&] { return bs.offload_op(b, *tensors_[static_cast<size_t>(id)]); });
  }
  // What supports(bs, id, b) answered so far, without asking: 1 yes, 0 no, -1 not asked (backends from 16 on are
  // never memoised). The plan verifier reads it, so that checking a plan asks no backend a new question.
  int supports_answer(int32_t id, int b) const {
    if (b < 0 || b >= 16) return -1;
    const uint32_t bits = op_memo_[static_cast<size_t>(id)];
    return (bits >> b & 1u) == 0 ? -1 : static_cast<int>(bits >> (b + 16) & 1u);
  }

  // ---- pass 5 ----
  std::vector<Split> splits;
  // Empties `splits`, keeping each split's lists (their capacity) for new_split.
  void recycle_splits() {
    while (!splits.empty()) {
      spare_splits_.push_back(std::move(splits.back()));
      splits.pop_back();
    }
  }
  // A per-id byte array that pass 5 reuses from split to split (its contents are the caller's to set).
  std::vector<uint8_t>& scratch_flags() { return scratch_flags_; }
  // Appends a split with empty lists (reusing a recycled one's memory) and returns it.
  Split& new_split(int backend, size_t i_start, size_t i_end) {
    Split& sp = splits.emplace_back();
    if (!spare_splits_.empty()) {
      sp = std::move(spare_splits_.back());
      spare_splits_.pop_back();
      sp.inputs.clear();
      sp.input_ids.clear();
      sp.input_copies.clear();
      sp.input_sets.clear();
    }
    sp.backend = backend;
    sp.i_start = i_start;
    sp.i_end = i_end;
    sp.reason = SplitReason::kFirst;
    return sp;
  }
  std::vector<int> node_split;           // split of each node of the user's graph (-1 for views before the first split)
  std::vector<Tensor*> graph_inputs;     // user INPUT tensors with per-slot copies on their own backend (parallel)
  std::vector<int32_t> graph_input_ids;  // their ids
  struct Rewrite {
    Tensor* node;
    int src;
    Tensor* original;
    size_t node_index;    // the node's index in the graph (= its id)
    int32_t replacement;  // id of the copy now read
  };
  std::vector<Rewrite> rewrites;  // restored on reset
  std::unique_ptr<Context> copy_ctx;

  // The copy of t in backend b for a slot, or null.
  Tensor* copy(const Tensor* t, int backend, int slot) const {
    const int32_t set = copy_set(id_of(t), backend);
    return set < 0 ? nullptr : copy_sets_[static_cast<size_t>(set)][static_cast<size_t>(slot)];
  }
  int32_t copy_set(int32_t id, int backend) const {
    if (id < 0 || static_cast<size_t>(id) >= copy_of_.size() / copy_stride_) return -1;
    return copy_of_[static_cast<size_t>(id) * copy_stride_ + static_cast<size_t>(backend)];
  }
  Tensor* copy_in_set(int32_t set, int slot) const {
    return copy_sets_[static_cast<size_t>(set)][static_cast<size_t>(slot)];
  }
  int32_t copy_id_in_set(int32_t set, int slot) const {
    return copy_set_ids_[static_cast<size_t>(set)][static_cast<size_t>(slot)];
  }
  size_t n_ids() const { return tensors_.size(); }
  // Registers a new set of n_copies per-slot copies of tensor `id` in backend b and returns it; graph_input: a graph
  // input's own per-slot copies (pipelined), whose slot 0 is the input itself (id; is_copy_id is false for it), as
  // llama.cpp keeps n_copies tensors per graph input, the original one of them. The copies get their ids now and their
  // Tensors with set_copy: pass 5 makes the Tensors of all its sets at the end, in one run (see there). Until then the
  // set's copies are null.
  int32_t add_copy_set(int32_t id, int backend, int n_copies, bool graph_input = false);
  void set_copy(int32_t set, int slot, Tensor* t);
  const std::array<Tensor*, kParallelCopies>& copy_set_copies(int32_t set) const {
    return copy_sets_[static_cast<size_t>(set)];
  }
  // The sets made so far, and forgetting one (copy() then answers null for its tensor and backend: a later reader
  // gets a fresh set; the old copies stay valid for the splits that use them).
  struct CopySetKey {
    int32_t id;
    int backend;
    bool graph_input;
  };
  size_t n_copy_sets() const { return copy_sets_.size(); }
  const CopySetKey& copy_set_key(int32_t set) const { return copy_set_keys_[static_cast<size_t>(set)]; }
  bool copy_set_live(int32_t set) const {
    const CopySetKey& k = copy_set_key(set);
    return copy_set(k.id, k.backend) == set;
  }
  void drop_copy_set(int32_t set) {
    const CopySetKey& k = copy_set_key(set);
    if (copy_set(k.id, k.backend) == set) {
      copy_of_[static_cast<size_t>(k.id) * copy_stride_ + static_cast<size_t>(k.backend)] = -1;
    }
  }
  bool is_copy(const Tensor* t) const { return is_copy_id(id_of(t)); }
  bool is_copy_id(int32_t id) const { return id >= 0 && copy_origin_[static_cast<size_t>(id)] >= 0; }
  // The id of the tensor copy `id` copies, -1 when it is not a copy.
  int32_t copy_origin(int32_t id) const { return copy_origin_[static_cast<size_t>(id)]; }
  static constexpr size_t kMaxBackendsPerCopy = kMaxBackends;

 private:
  // The plan verifier's tests corrupt what no public member can (facts, copy sets, memoised answers).
  friend struct testing::PlanCorrupter;
  // Pointer -> id. The graph's own nodes and leafs (ids below n_graph_) and the tensors of add_new enter it only when
  // a lookup needs them (map_pending_): the passes reach them by position (Graph::src_positions) or id, so a split
  // that nobody queries by pointer never hashes them.
  mutable detail::TensorIdMap ids_;
  mutable bool map_pending_ = false;
  int32_t find(const Tensor* t) const {
    const int32_t id = ids_.find(t);
    if (id >= 0 || !map_pending_) return id;
    complete_map();
    return ids_.find(t);
  }
  void complete_map() const;
  int32_t append(const Tensor* t);  // a new id for t (the pointer map is the caller's business)
  // The id of t, which the graph recorded at position pos; checked against the pointer (the graph may have been
  // changed since), looked up when it does not match.
  int32_t resolve(const Tensor* t, int32_t pos) {
    const int64_t id = Graph::position_to_id(pos, n_nodes_, n_leafs_);
    // (a graph's nodes and leafs are never null, so a null t never matches)
    if (id >= 0 && tensors_[static_cast<size_t>(id)] == t) [[likely]]
      return static_cast<int32_t>(id);
    return resolve_slow(t);
  }
  [[gnu::noinline]] int32_t resolve_slow(const Tensor* t);  // null (-1), or not at its position: by pointer
  std::vector<const Tensor*> tensors_;
  std::vector<int8_t> backend_;
  std::vector<Cause> cause_;
  std::vector<uint32_t> op_memo_;
  std::vector<int32_t> vsrc_;
  std::vector<const BufferType*> fixed_buft_;
  std::vector<uint8_t> facts_;
  std::vector<int32_t> copy_origin_;  // id of the tensor a copy copies, -1 for others
  std::vector<int32_t> src_;          // kMaxSrc per node and leaf (its size only grows: see index)
  std::vector<uint8_t> n_src_;        // per node and leaf (n_src; likewise)
  std::vector<int32_t> compute_nodes_;
  const Graph* indexed_ = nullptr;
  size_t n_nodes_ = 0, n_leafs_ = 0;
  size_t n_facts_ = 0;  // ids whose facts were read
  size_t n_graph_ = 0;  // n_nodes_ + n_leafs_ once indexed
  // copies: per (id, backend) the index of its copy set, -1 when none; copy_stride_ entries per id (the number of
  // backends, set by index())
  std::vector<int32_t> copy_of_;
  size_t copy_stride_ = kMaxBackendsPerCopy;
  std::vector<std::array<Tensor*, kParallelCopies>> copy_sets_;
  std::vector<std::array<int32_t, kParallelCopies>> copy_set_ids_;  // the copies' ids (-1: no copy)
  std::vector<CopySetKey> copy_set_keys_;
  std::vector<Split> spare_splits_;  // recycled splits: their lists keep their capacity
  std::vector<uint8_t> scratch_flags_;
  // read_fact's memo of the last buffer met: its fixed buffer type and its facts (kIsWeight, kHostBuffer)
  const Buffer* last_buf_ = nullptr;
  const BufferType* last_fixed_buft_ = nullptr;
  uint8_t last_buf_facts_ = 0;
  void forget_buffer_memo() {
    last_buf_ = nullptr;
    last_fixed_buft_ = nullptr;
    last_buf_facts_ = 0;
  }
  uint32_t find_buft_users(const BackendSet& bs, const BufferType* buft) const;
  mutable std::vector<std::pair<const BufferType*, uint32_t>> users_;
  mutable const BufferType* last_users_buft_ = nullptr;
  mutable uint32_t last_users_ = 0;
  void forget_buft_users() const {
    users_.clear();
    last_users_buft_ = nullptr;
    last_users_ = 0;
  }
  void read_facts(const BackendSet& bs, size_t from);
  void read_fact(const BackendSet& bs, size_t i, const Tensor& t);
  void ask_up_front(const BackendSet& bs, int n_backends, int32_t id, const Tensor& t, int* likely);
  std::vector<Op> op_;
  std::vector<uint32_t> offload_memo_;
  // One answer per (id, backend) in a 32-bit word: low 16 bits known, high 16 the answer. Backends from 16 on are
  // asked every time (none while a scheduler takes at most kMaxBackends).
  static_assert(kMaxBackends <= 16, "the supports/offload memos hold 16 backends per 32-bit word");
  template <typename Ask>
  static bool memo(std::vector<uint32_t>& words, int32_t id, int b, Ask ask) {
    if (b >= 16) return ask();
    uint32_t& bits = words[static_cast<size_t>(id)];
    const uint32_t known = 1u << b, yes = 1u << (b + 16);
    if ((bits & known) == 0) bits |= known | (ask() ? yes : 0u);
    return (bits & yes) != 0;
  }
};

// True when backend b can use t's memory: t's buffer type (or its view source's), or when t has no memory yet, the
// compute buffer type of the backend it is assigned to.
bool buffer_supported(const SchedPlan& plan, const BackendSet& bs, int32_t t, int b);
// Highest-priority backend that supports the buffer type `buft` and the op of tensor `op`; -1 if none or no buft.
int backend_from_buffer(SchedPlan& plan, const BackendSet& bs, const BufferType* buft, int32_t op);
// Weight-like sources that are auxiliary and tiny: they never decide placement (ROPE frequency factors; FA sinks
// unless `fa_sinks_decide`, as ggml before llama.cpp build 10150). ggml skips ROPE and FLASH_ATTN_EXT by op, Tessera
// by source (their other sources are never weights); a SOFT_MAX's sinks decide, as in ggml.
inline bool is_auxiliary_source(Op op, int src_index, bool fa_sinks_decide = false) {
  return (op == Op::kRope && src_index == 2) || (op == Op::kFlashAttnExt && src_index == 4 && !fa_sinks_decide);
}
bool is_weight(const Tensor& t);  // in a buffer whose usage is WEIGHTS

inline int32_t SchedPlan::deciding_weight(int32_t id) const {
  const Op node_op = op(id);
  for (int j = 0, n = n_src(static_cast<size_t>(id)); j < n; ++j) {
    const int32_t s = src(static_cast<size_t>(id), j);
    if (s >= 0 && has(s, kIsWeight) && !is_auxiliary_source(node_op, j, fa_sinks_decide)) return s;
  }
  return -1;
}

Status pass1_preassign(SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt);
void pass2_expand(SchedPlan& plan, const Graph& g, const BackendSet& bs);
void pass3_upgrade(SchedPlan& plan, const Graph& g, const BackendSet& bs);
Status pass4_sources(SchedPlan& plan, const Graph& g, const BackendSet& bs);
// Cuts splits, creates copies (in plan.copy_ctx) and rewrites node sources to the copies of opt.slot.
Status pass5_splits(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt);
// Passes 1-5; in builds with TESSERA_CHECK_INVARIANTS each pass is followed by the PlanVerifier.
Status split_graph(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt);
// Undoes pass 5's source rewrites.
void restore_sources(SchedPlan& plan);

// What each pass guarantees (docs/scheduler.md, "Invariants checked in debug builds"), checked on the plan it left
// (verify.cpp). check(p, ...) returns the first broken invariant after pass p, naming it and the tensor (or split,
// copy set, rewrite) that breaks it, or "" when all hold. Call it after every pass of one split, in order: from pass
// 2 on it also compares every assignment with the previous call's (a pass may only make the changes it is for: pins
// never move, pass 2 only assigns unassigned nodes, ...). Linear in the plan; it never asks supports_op (it reads the
// answers the passes memoised).
class PlanVerifier {
 public:
  std::string check(int pass, const SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt);
  // check(), aborting on a violation (TS_ASSERT); nothing in builds without TESSERA_CHECK_INVARIANTS.
  void assert_after(int pass, const SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt) {
    if constexpr (kCheckInvariants) {
      const std::string broken = check(pass, plan, g, bs, opt);
      TS_ASSERT(broken.empty(), "scheduler plan verifier: %s", broken.c_str());
    }
  }

 private:
  // The assignments after the previous pass (by id).
  std::vector<int8_t> backend_;
  std::vector<Cause> cause_;
  int last_pass_ = 0;
};

}  // namespace tessera::sched
