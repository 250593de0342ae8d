// The plan's dense tensor index and the helpers shared by the passes.
#include <algorithm>
#include <cstddef>

#include "plan.h"

namespace tessera::sched {

bool is_weight(const Tensor& t) {
  const Buffer* b = tensor_buffer(t);
  return b != nullptr && b->usage() == BufferUsage::kWeights;
}

// ---------------------------------------------------------------------------------------------------------------
// SchedPlan

void SchedPlan::clear() {
  ids_.clear();
  tensors_.clear();
  backend_.clear();
  cause_.clear();
  op_memo_.clear();
  offload_memo_.clear();
  op_.clear();
  vsrc_.clear();
  fixed_buft_.clear();
  facts_.clear();
  copy_origin_.clear();
  // src_ and n_src_ keep their size: index() writes every entry it uses (and only its own ids are read)
  compute_nodes_.clear();
  indexed_ = nullptr;
  map_pending_ = false;
  n_nodes_ = n_leafs_ = n_facts_ = n_graph_ = 0;
  copy_of_.clear();
  copy_sets_.clear();
  copy_set_ids_.clear();
  copy_set_keys_.clear();
  recycle_splits();
  node_split.clear();
  graph_inputs.clear();
  graph_input_ids.clear();
  forget_buft_users();
}

uint32_t SchedPlan::find_buft_users(const BackendSet& bs, const BufferType* buft) const {
  if (buft == nullptr) return 0;
  uint32_t users = 0;
  bool known = false;
  for (const auto& [type, mask] : users_) {
    if (type == buft) {
      users = mask;
      known = true;
      break;
    }
  }
  if (!known) {
    for (int b = 0, n = std::min(bs.size(), 16); b < n; ++b) users |= bs.supports_buft(b, *buft) ? 1u << b : 0u;
    users_.emplace_back(buft, users);
  }
  last_users_buft_ = buft;
  last_users_ = users;
  return users;
}

size_t SchedPlan::n_assigned() const {
  size_t n = 0;
  for (int8_t b : backend_) n += b >= 0 ? 1 : 0;
  return n;
}

int32_t SchedPlan::intern(const Tensor* t) {
  if (map_pending_) complete_map();  // t may be one of the graph's tensors
  return add_fresh(t);
}

int32_t SchedPlan::add_fresh(const Tensor* t) {
  bool inserted = false;
  const int32_t id = ids_.insert(t, static_cast<int32_t>(tensors_.size()), &inserted);
  if (!inserted) return id;  // known after all: keep its id
  return append(t);
}

int32_t SchedPlan::add_new(const Tensor* t) {
  map_pending_ = true;
  return append(t);
}

int32_t SchedPlan::append(const Tensor* t) {
  const auto id = static_cast<int32_t>(tensors_.size());
  tensors_.push_back(t);
  backend_.push_back(-1);
  cause_.push_back(Cause::kUnassigned);
  op_memo_.push_back(0);
  offload_memo_.push_back(0);
  op_.push_back(Op::kNone);
  vsrc_.push_back(-1);
  fixed_buft_.push_back(nullptr);
  facts_.push_back(0);
  copy_origin_.push_back(-1);
  return id;
}

void SchedPlan::complete_map() const {
  map_pending_ = false;
  bool inserted = false;  // (ids interned before are in the map already: inserting them again changes nothing)
  for (size_t i = 0; i < tensors_.size(); ++i) {
    if (tensors_[i] != nullptr) ids_.insert(tensors_[i], static_cast<int32_t>(i), &inserted);  // (null: a copy to come)
  }
}

int32_t SchedPlan::resolve_slow(const Tensor* t) { return t == nullptr ? -1 : intern(t); }

// The facts of id i (tensor t): view source, fixed buffer type, flags. The graph's nodes and leafs find their view
// source by position; other tensors intern it (appending it, so read_facts reaches it too).
inline void SchedPlan::read_fact(const BackendSet& bs, size_t i, const Tensor& t) {
  if (t.view_src != nullptr) {
    if (i < n_nodes_) {
      vsrc_[i] = resolve(t.view_src, indexed_->node_view_src_position(i));
    } else if (i < n_graph_) {
      vsrc_[i] = resolve(t.view_src, indexed_->leaf_view_src_position(i - n_nodes_));
    } else {
      vsrc_[i] = intern(t.view_src);
    }
  }
  // The buffer's facts (several virtual calls) depend on the buffer alone; consecutive tensors usually share it (the
  // weights of one model), so the last buffer's answers are kept for the rest of this index() call.
  const Buffer* b = tensor_buffer(t);
  if (b != last_buf_) {
    last_buf_ = b;
    const Buffer* fixed = bs.fixed_buffer(t);
    last_fixed_buft_ = fixed != nullptr ? fixed->type() : nullptr;
    last_buf_facts_ = 0;
    if (b != nullptr && b->usage() == BufferUsage::kWeights) last_buf_facts_ |= kIsWeight;
    if (b != nullptr && b->is_host()) last_buf_facts_ |= kHostBuffer;
  }
  fixed_buft_[i] = last_fixed_buft_;
  uint8_t f = last_buf_facts_;
  if ((t.flags & kFlagInput) != 0) f |= kInputFlag;
  if (op_is_view(t.op)) f |= kViewOp;
  if (t.op == Op::kNone) f |= kNoneOp;
  facts_[i] = f;
  op_[i] = t.op;
}

// The questions the passes will most likely ask about graph tensor i, asked while index holds its Tensor (on a large
// graph every later first read of a Tensor is a cache miss). Answers are memoised exactly as if a pass had asked; a
// question not asked here is asked when a pass needs it. Only on graphs whose Tensors outgrow the caches (the
// prefetch threshold): below it a pass reads a Tensor from the cache, and guessing here costs more than it saves
// (bench/RESULTS.md, session 19: without it the split is about 6 ns/node faster at 1k nodes, about the same at 10k,
// far slower from 30k). `likely` carries, from node to node, the backend that the last node with a deciding weight will
// probably run on (computed nodes between weights mostly stay there: pass 2).
// - a tensor in a buffer (a weight, a cache) or a view of one: supports_op of the backends that can use the buffer
//   type, in priority order up to the first yes (pass 1's question);
// - a computed node: supports_op of the likely backend, and of every backend when that one says no (passes 2-4);
//   with a deciding weight in host memory also offload_op of every backend but the last (pass 1; the weight's facts
//   are known: index reads the leafs before the nodes).
inline void SchedPlan::ask_up_front(const BackendSet& bs, int n_backends, int32_t id, const Tensor& t, int* likely) {
  // supports(bs, id, b) with the Tensor at hand; the memo skips what is known
  auto ask = [&](int b) { return memo(op_memo_, id, b, [&] { return bs.supports_op(b, t); }); };
  const int32_t v = view_src(id);
  const BufferType* buft = fixed_buft(v >= 0 ? v : id);
  for (int b = 0; buft != nullptr && b < n_backends; ++b) {
    if (can_use(bs, buft, b) && ask(b)) break;
  }
  if (static_cast<size_t>(id) >= n_nodes_ || has(id, kViewOp) || has(id, kNoneOp)) return;
  const int32_t w = deciding_weight(id);
  if (w >= 0) {
    const uint32_t users = buft_users(bs, fixed_buft(w));
    if (users != 0) *likely = __builtin_ctz(users);
    if (has(w, kHostBuffer)) {
      for (int b = 0; b < n_backends - 1; ++b) memo(offload_memo_, id, b, [&] { return bs.offload_op(b, t); });
    }
  }
  if (ask(std::min(*likely, n_backends - 1))) return;
  for (int b = 0; b < n_backends; ++b) ask(b);
}

void SchedPlan::read_facts(const BackendSet& bs, size_t from) {
  forget_buffer_memo();  // a buffer freed since may have been replaced by another at the same address
  for (size_t i = from; i < tensors_.size(); ++i) read_fact(bs, i, *tensors_[i]);
  n_facts_ = tensors_.size();
}

void SchedPlan::index(const Graph& g, const BackendSet& bs) {
  if (indexed_ == &g && n_nodes_ == g.n_nodes() && n_leafs_ == g.n_leafs()) {
    if (n_facts_ < tensors_.size()) read_facts(bs, n_facts_);  // tensors assigned since (pins)
    return;
  }
  // Assignments made before indexing (pins, tests) survive the renumbering.
  std::vector<std::pair<const Tensor*, Assignment>> kept;
  for_each_assignment([&](const Tensor* t, const Assignment& a) { kept.emplace_back(t, a); });
  clear();
  indexed_ = &g;
  n_nodes_ = g.n_nodes();
  n_leafs_ = g.n_leafs();
  n_graph_ = n_nodes_ + n_leafs_;
  copy_stride_ = static_cast<size_t>(std::clamp(bs.size(), 1, static_cast<int>(kMaxBackendsPerCopy)));
  const size_t expect = n_graph_ + n_nodes_ / 8 + 16;
  ids_.reserve(expect);
  tensors_.reserve(expect);
  backend_.reserve(expect);
  cause_.reserve(expect);
  op_memo_.reserve(expect);
  offload_memo_.reserve(expect);
  op_.reserve(expect);
  vsrc_.reserve(expect);
  fixed_buft_.reserve(expect);
  facts_.reserve(expect);
  copy_origin_.reserve(expect);
  forget_buffer_memo();
  // Node i has id i, leaf i id n_nodes + i. They enter the pointer map only if a lookup needs them.
  tensors_.insert(tensors_.end(), g.nodes().begin(), g.nodes().end());
  tensors_.insert(tensors_.end(), g.leafs().begin(), g.leafs().end());
  backend_.resize(n_graph_, -1);
  cause_.resize(n_graph_, Cause::kUnassigned);
  op_memo_.resize(n_graph_, 0);
  offload_memo_.resize(n_graph_, 0);
  op_.resize(n_graph_, Op::kNone);
  vsrc_.resize(n_graph_, -1);
  fixed_buft_.resize(n_graph_, nullptr);
  facts_.resize(n_graph_, 0);
  copy_origin_.resize(n_graph_, -1);
  map_pending_ = true;
  // (grown, never zeroed: the loop below writes every graph tensor's slots; on a large graph zeroing them first
  // costs a few per cent of the split)
  if (src_.size() < n_graph_ * kMaxSrc) src_.resize(n_graph_ * kMaxSrc);
  if (n_src_.size() < n_graph_) n_src_.resize(n_graph_);
  // One pass over the tensors (sources, facts and the backends' answers together), leafs first (pass 1's questions
  // about a node depend on its weights' facts), prefetching a few tensors ahead: on a large graph the Tensors (over
  // 300 bytes each) are far beyond the caches, and reading each once is most of the cost.
  auto id_at = [&](size_t k) { return k < n_leafs_ ? n_nodes_ + k : k - n_leafs_; };
  // Two distances: the tensor itself kAhead ahead; kNear ahead (its lines have arrived by then) the first line
  // (type, shape) of its sources and view source, which the backends' supports_op reads.
  constexpr size_t kAhead = 16, kNear = 10;
  auto prefetch = [&](size_t i) {  // from the type to the buffer pointer (read here and by supports_op)
    detail::prefetch_bytes(tensors_[i], 0, offsetof(Tensor, buffer) + sizeof(Buffer*));
  };
  auto prefetch_sources = [&](size_t i) {
    const Tensor& t = *tensors_[i];
    for (const Tensor* s : t.src) {  // type and shape
      if (s != nullptr) detail::prefetch_bytes(s, 0, offsetof(Tensor, nb));
    }
    if (t.view_src != nullptr) {
      detail::prefetch_line(reinterpret_cast<const char*>(t.view_src) + offsetof(Tensor, buffer));
    }
  };
  const bool far = detail::tensors_far(n_graph_);  // (only where the Tensors outgrow the caches)
  for (size_t k = 0; far && k < std::min(kAhead, n_graph_); ++k) prefetch(id_at(k));
  for (size_t k = 0; far && k < std::min(kNear, n_graph_); ++k) prefetch_sources(id_at(k));
  int likely = bs.last();
  const int n_asked = far ? std::min(bs.size(), 16) : 0;  // (0: the passes ask, as they need)
  for (size_t k = 0; k < n_graph_; ++k) {
    if (far && k + kAhead < n_graph_) prefetch(id_at(k + kAhead));
    if (far && k + kNear < n_graph_) prefetch_sources(id_at(k + kNear));
    const size_t i = id_at(k);
    const Tensor& t = *tensors_[i];
    int32_t* out = &src_[i * kMaxSrc];
    // Nodes find their sources by recorded position; leafs (which rarely have sources) by the pointer map.
    const int32_t* pos = i < n_nodes_ ? g.src_positions(i) : nullptr;
    int used = 0;
    for (int j = 0; j < kMaxSrc; ++j) {
      out[j] = -1;
      if (t.src[j] == nullptr) continue;
      out[j] = pos != nullptr ? resolve(t.src[j], pos[j]) : intern(t.src[j]);
      used = j + 1;
    }
    n_src_[i] = static_cast<uint8_t>(used);
    read_fact(bs, i, t);
    if (n_asked > 0) ask_up_front(bs, n_asked, static_cast<int32_t>(i), t, &likely);  // (no backends: caller's error)
  }
  if (n_graph_ < tensors_.size()) read_facts(bs, n_graph_);  // sources outside the graph, interned above
  n_facts_ = tensors_.size();
  compute_nodes_.reserve(n_nodes_);
  for (size_t i = 0; i < n_nodes_; ++i) {
    if ((facts_[i] & kViewOp) == 0) compute_nodes_.push_back(static_cast<int32_t>(i));
  }
  for (const auto& [t, a] : kept) {  // a graph tensor by its position, another one as a new id: no map completion
    const int32_t pos = g.position(t);
    set_id(pos == Graph::kPosUnknown ? add_fresh(t) : resolve(t, pos), a.backend, a.cause);
  }
  if (n_facts_ < tensors_.size()) read_facts(bs, n_facts_);
}

int32_t SchedPlan::add_copy_set(int32_t id, int backend, int n_copies, bool graph_input) {
  if (static_cast<size_t>(backend) >= copy_stride_) {  // a backend set larger than the one indexed with: widen
    std::vector<int32_t> wide(copy_of_.size() / copy_stride_ * kMaxBackendsPerCopy, -1);
    for (size_t i = 0; i < copy_of_.size(); ++i) {
      wide[i / copy_stride_ * kMaxBackendsPerCopy + i % copy_stride_] = copy_of_[i];
    }
    copy_of_.swap(wide);
    copy_stride_ = kMaxBackendsPerCopy;
  }
  const size_t need = (static_cast<size_t>(id) + 1) * copy_stride_;
  if (copy_of_.size() < need) copy_of_.resize(std::max(need, tensors_.size() * copy_stride_), -1);
  const auto set = static_cast<int32_t>(copy_sets_.size());
  copy_sets_.emplace_back().fill(nullptr);
  copy_set_keys_.push_back({id, backend, graph_input});
  copy_of_[static_cast<size_t>(id) * copy_stride_ + static_cast<size_t>(backend)] = set;
  std::array<int32_t, kParallelCopies>& cids = copy_set_ids_.emplace_back();
  cids.fill(-1);
  for (int k = 0; k < std::min(n_copies, static_cast<int>(kParallelCopies)); ++k) {
    if (graph_input && k == 0) {  // slot 0 reads the input itself (llama.cpp's n_copies, the original among them)
      cids[0] = id;
      continue;
    }
    const int32_t cid = add_new(nullptr);  // its Tensor comes with set_copy
    set_id(cid, backend, Cause::kCopy);
    copy_origin_[static_cast<size_t>(cid)] = id;
    cids[static_cast<size_t>(k)] = cid;
  }
  return set;
}

void SchedPlan::set_copy(int32_t set, int slot, Tensor* t) {
  copy_sets_[static_cast<size_t>(set)][static_cast<size_t>(slot)] = t;
  tensors_[static_cast<size_t>(copy_set_ids_[static_cast<size_t>(set)][static_cast<size_t>(slot)])] = t;
  map_pending_ = true;  // (a lookup since add_copy_set may have completed the map without it)
}

// ---------------------------------------------------------------------------------------------------------------

bool buffer_supported(const SchedPlan& plan, const BackendSet& bs, int32_t t, int b) {
  const BufferType* buft = plan.fixed_buft(t);
  if (buft == nullptr) {
    int owner = plan.backend(t);
    if (owner < 0 && plan.view_src(t) >= 0) owner = plan.backend(plan.view_src(t));
    if (owner >= 0) buft = bs.compute_buft(owner);
  }
  return buft != nullptr && plan.can_use(bs, buft, b);
}

int backend_from_buffer(SchedPlan& plan, const BackendSet& bs, const BufferType* buft, int32_t op) {
  if (buft == nullptr) return -1;
  for (int b = 0, n = bs.size(); b < n; ++b) {
    if (plan.can_use(bs, buft, b) && plan.supports(bs, op, b)) return b;
  }
  return -1;
}

Status split_graph(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt) {
  PlanVerifier verify;  // (its checks compile to nothing without TESSERA_CHECK_INVARIANTS)
  TS_RETURN_IF_ERROR(pass1_preassign(plan, g, bs, opt));
  verify.assert_after(1, plan, g, bs, opt);
  pass2_expand(plan, g, bs);
  verify.assert_after(2, plan, g, bs, opt);
  pass3_upgrade(plan, g, bs);
  verify.assert_after(3, plan, g, bs, opt);
  TS_RETURN_IF_ERROR(pass4_sources(plan, g, bs));
  verify.assert_after(4, plan, g, bs, opt);
  // (without the checks, the code is exactly the one without the verifier: the status is returned in place)
  if constexpr (!kCheckInvariants) return pass5_splits(plan, g, bs, opt);
  Status s = pass5_splits(plan, g, bs, opt);
  if (s.ok()) verify.assert_after(5, plan, g, bs, opt);
  return s;
}

void restore_sources(SchedPlan& plan) {
  // in reverse, so a source rewritten twice ends as the user's original
  for (auto it = plan.rewrites.rbegin(); it != plan.rewrites.rend(); ++it) it->node->src[it->src] = it->original;
  plan.rewrites.clear();
}

}  // namespace tessera::sched
