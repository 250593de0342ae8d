// The scheduler's explicit plan and the five passes over it (SPEC 9.1-9.5). Each pass is a function in its own file,
// taking the plan, the graph and the backends' capability queries, so each can be tested alone.
#pragma once

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "../ptr_map.h"
#include "tessera/backend.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/sched.h"

namespace tessera::sched {

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

// The BackendSet of real backends.
class BackendList final : public BackendSet {
 public:
  BackendList(std::vector<Backend*> backends, std::vector<BufferType*> bufts,
              std::function<bool(const Buffer*)> is_compute = {})
      : backends_(std::move(backends)), bufts_(std::move(bufts)), is_compute_(std::move(is_compute)) {}
  int size() const override { return static_cast<int>(backends_.size()); }
  const char* name(int b) const override { return backends_[static_cast<size_t>(b)]->name(); }
  // The passes ask the same questions several times per node; answers are memoised until clear_cache() (called at
  // the start of every split, since tensors may change between splits).
  bool supports_op(int b, const Tensor& t) const override {
    if (b >= 16) return backends_[static_cast<size_t>(b)]->supports_op(t);
    uint32_t& bits = op_cache_[&t];  // low 16 bits: known; high 16: answer
    const uint32_t known = 1u << b, yes = 1u << (b + 16);
    if ((bits & known) == 0) {
      bits |= known | (backends_[static_cast<size_t>(b)]->supports_op(t) ? yes : 0u);
    }
    return (bits & yes) != 0;
  }
  bool supports_buft(int b, const BufferType& buft) const override {
    if (b >= 16) return backends_[static_cast<size_t>(b)]->supports_buft(buft);
    uint32_t& bits = buft_cache_[&buft];
    const uint32_t known = 1u << b, yes = 1u << (b + 16);
    if ((bits & known) == 0) {
      bits |= known | (backends_[static_cast<size_t>(b)]->supports_buft(buft) ? yes : 0u);
    }
    return (bits & yes) != 0;
  }
  void clear_cache() {
    op_cache_.clear();
    buft_cache_.clear();
  }
  bool offload_op(int b, const Tensor& t) const override { return backends_[static_cast<size_t>(b)]->offload_op(t); }
  BufferType* compute_buft(int b) const override { return bufts_[static_cast<size_t>(b)]; }
  bool is_compute_buffer(const Buffer* b) const override { return is_compute_ && is_compute_(b); }
  Backend* backend(int b) const { return backends_[static_cast<size_t>(b)]; }

 private:
  std::vector<Backend*> backends_;
  std::vector<BufferType*> bufts_;
  std::function<bool(const Buffer*)> is_compute_;
  mutable detail::PtrMap<uint32_t> op_cache_;
  mutable detail::PtrMap<uint32_t> buft_cache_;
};

struct Assignment {
  int backend = -1;
  Cause cause = Cause::kUnassigned;
};

struct Split {
  int backend = -1;
  size_t i_start = 0, i_end = 0;  // node range of the user's graph
  std::vector<Tensor*> inputs;    // tensors (as the user's graph has them) copied into this split's backend
  // The per-slot copies of each input (same order). Usually plan.copy(input, backend, slot), shared with earlier
  // splits on this backend; a fresh set when the input was written in place since those copies were made.
  std::vector<std::array<Tensor*, kParallelCopies>> input_copies;
};

struct PassOptions {
  bool op_offload = true;
  int max_split_inputs = 30;
  int n_copies = 1;  // in-flight slots
  int slot = 0;      // the slot sources are rewritten to
};

struct SchedPlan {
  detail::PtrMap<Assignment> assign;

  int backend_of(const Tensor* t) const {
    const Assignment* a = assign.find(t);
    return a == nullptr ? -1 : a->backend;
  }
  Cause cause_of(const Tensor* t) const {
    const Assignment* a = assign.find(t);
    return a == nullptr ? Cause::kUnassigned : a->cause;
  }
  void set(const Tensor* t, int b, Cause c) { assign[t] = {b, c}; }

  // ---- pass 5 ----
  std::vector<Split> splits;
  std::vector<int> node_split;  // split of each node of the user's graph (-1 for views before the first split)
  // Per-slot copies of a tensor in a backend: copies[{tensor, backend}][slot].
  struct CopyKey {
    const Tensor* t;
    int backend;
    bool operator==(const CopyKey& o) const { return t == o.t && backend == o.backend; }
  };
  struct CopyKeyHash {
    size_t operator()(const CopyKey& k) const {
      return std::hash<const void*>()(k.t) ^ (static_cast<size_t>(k.backend) * 0x9e3779b97f4a7c15ull);
    }
  };
  std::unordered_map<CopyKey, std::array<Tensor*, kParallelCopies>, CopyKeyHash> copies;
  std::unordered_map<const Tensor*, const Tensor*> copy_origin;  // copy -> the tensor it copies
  std::vector<Tensor*> graph_inputs;  // user INPUT tensors with per-slot copies on their own backend (parallel)
  struct Rewrite {
    Tensor* node;
    int src;
    Tensor* original;
  };
  std::vector<Rewrite> rewrites;  // restored on reset
  std::unique_ptr<Context> copy_ctx;

  Tensor* copy(const Tensor* t, int backend, int slot) const {
    auto it = copies.find({t, backend});
    return it == copies.end() ? nullptr : it->second[static_cast<size_t>(slot)];
  }
};

// True when backend b can use t's memory: t's buffer type (or its view source's), or when t has no memory yet, the
// compute buffer type of the backend it is assigned to.
bool buffer_supported(const SchedPlan& plan, const BackendSet& bs, const Tensor& t, int b);
// Highest-priority backend that supports the buffer type of `buffer_of`'s memory and the op `op`; -1 if none.
int backend_from_buffer(const BackendSet& bs, const Tensor& buffer_of, const Tensor& op);
// Weight-like sources that are auxiliary and tiny: they never decide placement (ROPE frequency factors, FA sinks).
bool is_auxiliary_source(const Tensor& node, int src_index);
bool is_weight(const Tensor& t);  // in a buffer whose usage is WEIGHTS

Status pass1_preassign(SchedPlan& plan, const Graph& g, const BackendSet& bs, const PassOptions& opt);
void pass2_expand(SchedPlan& plan, const Graph& g, const BackendSet& bs);
void pass3_upgrade(SchedPlan& plan, const Graph& g, const BackendSet& bs);
Status pass4_sources(SchedPlan& plan, const Graph& g, const BackendSet& bs);
// Cuts splits, creates copies (in plan.copy_ctx) and rewrites node sources to the copies of opt.slot.
Status pass5_splits(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt);
// Passes 1-5.
Status split_graph(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt);
// Undoes pass 5's source rewrites.
void restore_sources(SchedPlan& plan);

}  // namespace tessera::sched
