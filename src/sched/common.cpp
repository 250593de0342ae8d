// The plan's dense tensor index and the helpers shared by the passes.
#include "plan.h"

namespace tessera::sched {

bool is_weight(const Tensor& t) {
  const Buffer* b = tensor_buffer(t);
  return b != nullptr && b->usage() == BufferUsage::kWeights;
}

bool is_auxiliary_source(const Tensor& node, int src_index) {
  return (node.op == Op::kRope && src_index == 2) || (node.op == Op::kFlashAttnExt && src_index == 4);
}

// ---------------------------------------------------------------------------------------------------------------
// SchedPlan

void SchedPlan::clear() {
  ids_.clear();
  tensors_.clear();
  backend_.clear();
  cause_.clear();
  op_memo_.clear();
  vsrc_.clear();
  fixed_buft_.clear();
  facts_.clear();
  copy_origin_.clear();
  src_.clear();
  compute_nodes_.clear();
  indexed_ = nullptr;
  n_nodes_ = n_leafs_ = n_facts_ = 0;
  copy_of_.clear();
  copy_sets_.clear();
  copy_set_keys_.clear();
  splits.clear();
  node_split.clear();
  graph_inputs.clear();
}

size_t SchedPlan::n_assigned() const {
  size_t n = 0;
  for (int8_t b : backend_) n += b >= 0 ? 1 : 0;
  return n;
}

int32_t SchedPlan::intern(const Tensor* t) {
  bool inserted = false;
  const int32_t id = ids_.insert(t, static_cast<int32_t>(tensors_.size()), &inserted);
  if (!inserted) return id;
  tensors_.push_back(t);
  backend_.push_back(-1);
  cause_.push_back(Cause::kUnassigned);
  op_memo_.push_back(0);
  vsrc_.push_back(-1);
  fixed_buft_.push_back(nullptr);
  facts_.push_back(0);
  copy_origin_.push_back(-1);
  return id;
}

// The facts of ids [from, end): view source, fixed buffer type, flags. Interning a view source appends it, so the
// loop reaches it too.
void SchedPlan::read_facts(const BackendSet& bs, size_t from) {
  for (size_t i = from; i < tensors_.size(); ++i) {
    const Tensor& t = *tensors_[i];
    if (t.view_src != nullptr) vsrc_[i] = intern(t.view_src);
    const Buffer* fixed = bs.fixed_buffer(t);
    fixed_buft_[i] = fixed != nullptr ? fixed->type() : nullptr;
    const Buffer* b = tensor_buffer(t);
    uint8_t f = 0;
    if (b != nullptr && b->usage() == BufferUsage::kWeights) f |= kIsWeight;
    if (b != nullptr && b->is_host()) f |= kHostBuffer;
    if ((t.flags & kFlagInput) != 0) f |= kInputFlag;
    if (op_is_view(t.op)) f |= kViewOp;
    if (t.op == Op::kNone) f |= kNoneOp;
    facts_[i] = f;
  }
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
  const size_t expect = n_nodes_ + n_leafs_ + n_nodes_ / 8 + 16;
  ids_.reserve(expect);
  tensors_.reserve(expect);
  backend_.reserve(expect);
  cause_.reserve(expect);
  op_memo_.reserve(expect);
  vsrc_.reserve(expect);
  fixed_buft_.reserve(expect);
  facts_.reserve(expect);
  copy_origin_.reserve(expect);
  for (const Tensor* t : g.nodes()) intern(t);  // node i has id i
  for (const Tensor* t : g.leafs()) intern(t);  // leaf i has id n_nodes + i
  src_.resize((n_nodes_ + n_leafs_) * kMaxSrc);
  for (size_t i = 0; i < n_nodes_ + n_leafs_; ++i) {
    const Tensor* t = tensors_[i];
    int32_t* out = &src_[i * kMaxSrc];
    for (int j = 0; j < kMaxSrc; ++j) out[j] = t->src[j] != nullptr ? intern(t->src[j]) : -1;
  }
  read_facts(bs, 0);
  compute_nodes_.reserve(n_nodes_);
  for (size_t i = 0; i < n_nodes_; ++i) {
    if ((facts_[i] & kViewOp) == 0) compute_nodes_.push_back(static_cast<int32_t>(i));
  }
  for (const auto& [t, a] : kept) set(t, a.backend, a.cause);
  if (n_facts_ < tensors_.size()) read_facts(bs, n_facts_);
}

int32_t SchedPlan::add_copy_set(int32_t id, int backend, const std::array<Tensor*, kParallelCopies>& copies,
                                bool graph_input) {
  const size_t need = (static_cast<size_t>(id) + 1) * kMaxBackendsPerCopy;
  if (copy_of_.size() < need) copy_of_.resize(std::max(need, tensors_.size() * kMaxBackendsPerCopy), -1);
  const auto set = static_cast<int32_t>(copy_sets_.size());
  copy_sets_.push_back(copies);
  copy_set_keys_.push_back({id, backend, graph_input});
  copy_of_[static_cast<size_t>(id) * kMaxBackendsPerCopy + static_cast<size_t>(backend)] = set;
  for (Tensor* c : copies) {
    if (c == nullptr) continue;
    const int32_t cid = intern(c);
    set_id(cid, backend, Cause::kCopy);
    copy_origin_[static_cast<size_t>(cid)] = id;
  }
  return set;
}

// ---------------------------------------------------------------------------------------------------------------

bool buffer_supported(const SchedPlan& plan, const BackendSet& bs, int32_t t, int b) {
  const BufferType* buft = plan.fixed_buft(t);
  if (buft == nullptr) {
    int owner = plan.backend(t);
    if (owner < 0 && plan.view_src(t) >= 0) owner = plan.backend(plan.view_src(t));
    if (owner >= 0) buft = bs.compute_buft(owner);
  }
  return buft != nullptr && bs.supports_buft(b, *buft);
}

int backend_from_buffer(SchedPlan& plan, const BackendSet& bs, const BufferType* buft, int32_t op) {
  if (buft == nullptr) return -1;
  for (int b = 0; b < bs.size(); ++b) {
    if (bs.supports_buft(b, *buft) && plan.supports(bs, op, b)) return b;
  }
  return -1;
}

Status split_graph(SchedPlan& plan, Graph& g, const BackendSet& bs, const PassOptions& opt) {
  TS_RETURN_IF_ERROR(pass1_preassign(plan, g, bs, opt));
  pass2_expand(plan, g, bs);
  pass3_upgrade(plan, g, bs);
  TS_RETURN_IF_ERROR(pass4_sources(plan, g, bs));
  return pass5_splits(plan, g, bs, opt);
}

void restore_sources(SchedPlan& plan) {
  // in reverse, so a source rewritten twice ends as the user's original
  for (auto it = plan.rewrites.rbegin(); it != plan.rewrites.rend(); ++it) it->node->src[it->src] = it->original;
  plan.rewrites.clear();
}

}  // namespace tessera::sched
