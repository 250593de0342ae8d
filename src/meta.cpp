// Tensor parallelism's split states (tessera/meta.h; docs/tensor-parallel.md). The rules are ggml's meta backend's
// (ggml/src/ggml-backend-meta.cpp, ggml_backend_meta_get_split_state), written again over Tessera's ops: where ggml
// aborts, these return an error naming the node.
#include "tessera/meta.h"

#include <algorithm>
#include <unordered_set>

#include "tessera/ops.h"
#include "tessera/types.h"

namespace tessera {

namespace {

constexpr size_t kMaxDevices = 16;  // GGML_BACKEND_META_MAX_DEVICES

SplitState mirrored() { return SplitState{SplitAxis::kMirrored, {}, {}}; }
SplitState partial() { return SplitState{SplitAxis::kPartial, {}, {}}; }
// A split along `axis` whose slices are filled in later (take_over_ratio), nr repetitions of one segment. A rule that
// keeps a source's split returns that source's state (as ggml does): take_over_ratio takes its slices over again.
SplitState split_along(int axis, uint32_t nr = 1) { return SplitState{static_cast<SplitAxis>(axis), {}, {nr}}; }

class Planner {
 public:
  Planner(size_t n, const StaticSplitFn& statics) : n_(n), statics_(statics) {}

  // The state of t as its consumers see it: a partial MUL_MAT result has been reduced by then (assume_sync).
  Result<SplitState> synced(const Tensor* t) {
    auto r = own(t);
    if (!r.ok()) return r.status();
    if (reduced(t)) return mirrored();
    return r;
  }

  // The state of t itself (a MUL_MAT of two axis-0 splits is partial).
  Result<SplitState> own(const Tensor* t) {
    if (const auto it = plan_.state.find(t); it != plan_.state.end()) return it->second;
    auto r = compute(*t);
    if (!r.ok()) return r.status();
    plan_.state.emplace(t, r.value());
    return r;
  }

  TensorParallelPlan& plan() { return plan_; }
  // A node whose partial result the devices reduce (a MUL_MAT of two axis-0 splits).
  bool reduced(const Tensor* t) const { return reduced_.count(t) != 0; }

 private:
  bool equal(const SplitState& a, const SplitState& b) const {
    if (a.axis != b.axis) return false;
    if (!a.is_split()) return true;
    for (size_t j = 0; j < n_; ++j) {
      if (a.on_device(j, n_) != b.on_device(j, n_)) return false;
    }
    return true;
  }

  Status fail(const Tensor& t, const std::string& why, const std::vector<std::optional<SplitState>>& src) {
    std::string s;
    for (int i = 0; i < kMaxSrc; ++i) {
      if (t.src[i] == nullptr || !src[static_cast<size_t>(i)]) continue;
      s += format_message("%s%s (%s)", s.empty() ? "" : ", ", t.src[i]->name,
                          src[static_cast<size_t>(i)]->describe(n_).c_str());
    }
    return Status(StatusCode::kInvalidArgument,
                  format_message("tensor parallelism: %s '%s': %s; sources %s", op_name(t.op), t.name, why.c_str(),
                                 s.empty() ? "none" : s.c_str()));
  }

  Status check_static(const Tensor& t, const SplitState& s) {
    if (!s.is_split()) return Status::Ok();
    if (s.nr.empty() || s.ne.size() != s.nr.size() * n_) {
      return Status(StatusCode::kInvalidArgument,
                    format_message("tensor parallelism: the split of '%s' has %zu slices for %zu segments and %zu "
                                   "devices",
                                   t.name, s.ne.size(), s.nr.size(), n_));
    }
    const int axis = static_cast<int>(s.axis);
    const int64_t block = axis == 0 ? type_traits(t.type).block_size : 1;
    int64_t sum = 0;
    for (size_t k = 0; k < s.ne.size(); ++k) {
      if (s.ne[k] < 0 || s.ne[k] % block != 0) {
        return Status(
            StatusCode::kInvalidArgument,
            format_message("tensor parallelism: '%s': a slice of %lld along axis 0 is not whole blocks of "
                           "%lld (%s)",
                           t.name, static_cast<long long>(s.ne[k]), static_cast<long long>(block), type_name(t.type)));
      }
      sum += s.ne[k] * s.nr[k / n_];
    }
    if (sum != t.ne[axis]) {
      return Status(StatusCode::kInvalidArgument,
                    format_message("tensor parallelism: '%s': its slices add up to %lld along axis %d, not %lld",
                                   t.name, static_cast<long long>(sum), axis, static_cast<long long>(t.ne[axis])));
    }
    return Status::Ok();
  }

  Result<SplitState> compute(const Tensor& t) {
    if (nelements(t) == 0) return mirrored();
    // a weight or a cache as the application splits it, or a node the application runs outside the meta device;
    // else a leaf is an input (mirrored)
    if (std::optional<SplitState> s = statics_ ? statics_(t) : std::nullopt) {
      TS_RETURN_IF_ERROR(check_static(t, *s));
      return *s;
    }
    if (t.op == Op::kNone) return mirrored();
    std::vector<std::optional<SplitState>> src(kMaxSrc);
    for (int i = 0; i < kMaxSrc; ++i) {
      if (t.src[i] == nullptr || t.src[i] == &t) continue;
      auto s = synced(t.src[i]);
      if (!s.ok()) return s.status();
      src[static_cast<size_t>(i)] = s.value();
    }
    auto r = by_op(t, src);
    if (!r.ok()) return r.status();
    SplitState out = r.value();
    if (out.is_split()) TS_RETURN_IF_ERROR(take_over_ratio(t, src, &out));
    return out;
  }

  // Every source alike (ggml's handle_generic); scalar_only: a split result is refused.
  Result<SplitState> generic(const Tensor& t, const std::vector<std::optional<SplitState>>& src, bool scalar_only) {
    std::optional<SplitState> ret;
    for (int i = 0; i < kMaxSrc; ++i) {
      const auto& s = src[static_cast<size_t>(i)];
      if (!s) continue;
      if (!ret) {
        ret = *s;
      } else if (!equal(*s, *ret)) {
        return fail(t, "its sources are split differently", src);
      }
    }
    if (!ret) return fail(t, "no source", src);
    if (scalar_only && ret->is_split()) return fail(t, "the op does not take split sources", src);
    return *ret;
  }

  Result<SplitState> per_row(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    if (!src[0]) return fail(t, "no source", src);
    if (src[0]->axis == SplitAxis::k0) return fail(t, "a row-wise op over rows split along axis 0", src);
    return *src[0];
  }

  Result<SplitState> bin_bcast(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    const auto& a = src[0];
    const auto& b = src[1];
    const auto& c = src[2];
    if (a && b && a->is_split() && t.src[1]->ne[static_cast<int>(a->axis)] == 1 && b->axis == SplitAxis::kMirrored) {
      return *a;
    }
    if (a && b && c && c->axis == SplitAxis::kMirrored &&
        (a->axis == b->axis || (a->axis == SplitAxis::kMirrored && b->axis == SplitAxis::kPartial))) {
      return *a;  // ADD_ID
    }
    if (c && c->axis != SplitAxis::kMirrored) return fail(t, "its ids are not mirrored", src);
    return generic(t, src, false);
  }

  Result<SplitState> reshape(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    if (!src[0]) return fail(t, "no source", src);
    const SplitState& s = *src[0];
    if (!s.is_split()) return s;
    if (s.n_segments() != 1) return fail(t, "a reshape of a tensor of several segments", src);
    const Tensor& in = *t.src[0];
    const int axis = static_cast<int>(s.axis);
    if (axis == n_dims(in) - 1 && s.nr[0] == 1) return split_along(n_dims(t) - 1);
    int64_t base_in = in.ne[0];
    for (int d = 1; d <= axis; ++d) base_in *= in.ne[d];
    base_in /= s.nr[0];
    int64_t base_out = 1;
    for (int d = 0; d < kMaxDims; ++d) {
      base_out *= t.ne[d];
      if (base_out % base_in == 0) return split_along(d, static_cast<uint32_t>(base_out / base_in));
      if (base_out > base_in) {
        if (s.nr[0] != 1) return fail(t, "a reshape that cuts a repeated segment", src);
        return split_along(d);
      }
    }
    return fail(t, "a reshape whose shapes do not match", src);
  }

  Result<SplitState> view(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    if (!src[0]) return fail(t, "no source", src);
    const Tensor& in = *t.src[0];
    if (is_contiguous(t) && is_contiguous(in)) return reshape(t, src);
    const SplitState& s = *src[0];
    bool same_strides = true;
    for (int d = 0; d < kMaxDims; ++d) {
      if (t.ne[d] == 1 && in.ne[d] == 1) continue;
      if (t.nb[d] != in.nb[d]) {
        same_strides = false;
        break;
      }
    }
    if (same_strides) return s;
    const int axis = static_cast<int>(s.axis);
    if (!is_permuted(t) && !is_permuted(in) && s.is_split() && axis < kMaxDims - 1) {
      for (int d = 0; d < kMaxDims - 1; ++d) {
        if (t.nb[d + 1] == in.nb[axis + 1]) return split_along(d);
      }
      return fail(t, "a view whose strides match no axis of its source's split", src);
    }
    if (!s.is_split()) return s;
    return fail(t, "a view of a permuted split tensor", src);
  }

  Result<SplitState> mul_mat(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    if (!src[0] || !src[1]) return fail(t, "no source", src);
    const SplitState& a = *src[0];
    const SplitState& b = *src[1];
    if (a.axis == SplitAxis::kMirrored && b.axis == SplitAxis::kMirrored) return mirrored();
    if (a.axis == SplitAxis::k1 && b.axis == SplitAxis::kMirrored) return split_along(0);
    if (b.axis == SplitAxis::k1 && a.axis == SplitAxis::kMirrored) return b;
    if (a.axis == SplitAxis::k0 && b.axis == SplitAxis::k0) {
      if (!equal(a, b)) return fail(t, "its sources' axis-0 slices differ", src);
      reduced_.insert(&t);
      return partial();
    }
    return fail(t, "a MUL_MAT of these splits is not defined", src);
  }

  Result<SplitState> by_op(const Tensor& t, const std::vector<std::optional<SplitState>>& src) {
    switch (t.op) {
      case Op::kNone: return mirrored();
      case Op::kDup: return generic(t, src, true);
      case Op::kAdd:
      case Op::kAddId:
      case Op::kMul:
      case Op::kDiv: return bin_bcast(t, src);
      case Op::kScale:
      case Op::kUnary:
      case Op::kGlu:
      case Op::kClamp:
      case Op::kSoftMax: return generic(t, src, false);
      case Op::kRmsNorm:
      case Op::kNorm:
      case Op::kSumRows:
      case Op::kArgsort:
      case Op::kTopK: return per_row(t, src);
      case Op::kMulMat:
      case Op::kMulMatId: return mul_mat(t, src);
      case Op::kCpy:
        if (src[0] && src[0]->is_split()) return reshape(t, src);
        return generic(t, src, false);
      case Op::kCont:
      case Op::kReshape: return reshape(t, src);
      case Op::kView: return view(t, src);
      case Op::kPermute: {
        if (!src[0]) return fail(t, "no source", src);
        const SplitState& s = *src[0];
        if (!s.is_split()) return s;
        if (s.n_segments() != 1 && s.nr[0] != 1) return fail(t, "a permute of a repeated segment", src);
        return split_along(t.op_params[static_cast<int>(s.axis)], s.nr[0]);
      }
      case Op::kTranspose: {
        if (!src[0]) return fail(t, "no source", src);
        const SplitState& s = *src[0];
        if (s.axis == SplitAxis::k0 || s.axis == SplitAxis::k1) {
          if (s.n_segments() != 1 && s.nr[0] != 1) return fail(t, "a transpose of a repeated segment", src);
          return split_along(static_cast<int>(s.axis) ^ 1, s.nr[0]);
        }
        return s;
      }
      case Op::kGetRows:
        if (src[0] && src[1] && src[0]->axis == SplitAxis::k0 && src[1]->axis == SplitAxis::kMirrored) return *src[0];
        return generic(t, src, true);
      case Op::kSetRows: {
        // Tessera's sources: the destination, the rows, the ids (ggml's: the rows, the ids, the destination)
        if (!src[0] || !src[1] || !src[2]) return fail(t, "no source", src);
        if (src[1]->axis == SplitAxis::k1) return fail(t, "rows split along axis 1", src);
        if (src[2]->axis != SplitAxis::kMirrored) return fail(t, "its ids are not mirrored", src);
        if (!equal(*src[1], *src[0])) return fail(t, "its rows and its destination are split differently", src);
        return *src[1];
      }
      case Op::kRope:
        if (!src[0] || !src[1] || src[1]->axis != SplitAxis::kMirrored) {
          return fail(t, "its positions are not mirrored", src);
        }
        return *src[0];
      case Op::kFlashAttnExt:
        for (int i = 0; i < 3; ++i) {
          if (!src[static_cast<size_t>(i)] || src[static_cast<size_t>(i)]->axis != SplitAxis::k2) {
            return fail(t, "Q, K and V are not split by heads (axis 2)", src);
          }
        }
        if (src[3] && src[3]->axis != SplitAxis::kMirrored) return fail(t, "its mask is not mirrored", src);
        if (src[4] && src[4]->axis != SplitAxis::k0) return fail(t, "its sinks are not split by heads", src);
        return split_along(1);
      case Op::kCount: break;
    }
    return fail(t, "the op has no tensor-parallel rule", src);
  }

  // A split result takes its slices from its first split source, scaled by the extents (ggml: "take over ratio from
  // src"); the other split sources must agree.
  Status take_over_ratio(const Tensor& t, const std::vector<std::optional<SplitState>>& src, SplitState* out) {
    const int axis = static_cast<int>(out->axis);
    const uint32_t nr = out->nr.empty() ? 1 : out->nr[0];
    out->nr = {nr};
    bool first = true;
    for (int i = 0; i < kMaxSrc; ++i) {
      const auto& s = src[static_cast<size_t>(i)];
      if (!s || !s->is_split()) continue;
      const int64_t src_extent = t.src[i]->ne[static_cast<int>(s->axis)];
      if (first) {
        out->ne.assign(n_, 0);
        for (size_t j = 0; j < n_; ++j) {
          int64_t v = s->on_device(j, n_) * t.ne[axis];
          if (v != 0 || src_extent != 0) {
            const int64_t div = src_extent * nr;
            if (div == 0 || v % div != 0) {
              return fail(t, format_message("its slice on device %zu is not a whole number of elements", j), src);
            }
            v /= div;
          }
          out->ne[j] = v;
        }
        first = false;
      } else {
        for (size_t j = 0; j < n_; ++j) {
          if (out->ne[j] * nr * src_extent != s->on_device(j, n_) * t.ne[axis]) {
            return fail(t, "its split sources' slices disagree", src);
          }
        }
      }
    }
    if (first) return fail(t, "a split result without a split source", src);
    return Status::Ok();
  }

  size_t n_;
  const StaticSplitFn& statics_;
  TensorParallelPlan plan_;
  std::unordered_set<const Tensor*> reduced_;
};

bool mirrored_state(const TensorParallelPlan& plan, const Tensor* t) {
  const SplitState* s = plan.of(t);
  return s == nullptr || s->axis == SplitAxis::kMirrored;
}

// The last node the AllReduce of node i's partial result can wait for (ggml's get_i_delayed, written again): past an
// ADD_ID of a partial bias (gpt-oss's down-projection bias, which llama.cpp splits as partial sums), past MULs by a
// mirrored tensor (the experts' weights), and past the sum of the experts' results (a VIEW per expert used, each read
// once, added up by ADDs). Mirrored nodes that read none of it may sit in between. Returns i when nothing follows.
size_t delayed(const Graph& graph, const TensorParallelPlan& plan, const std::vector<int32_t>& uses, size_t i) {
  const size_t n = graph.n_nodes();
  size_t id = i;
  size_t last = i;
  const Tensor* node = graph.node(id);
  int32_t n_used = uses[id];
  auto skip_unrelated = [&]() {
    while (id + 1 < n) {
      const Tensor* next = graph.node(id + 1);
      if (!mirrored_state(plan, next)) break;
      bool safe = true;
      for (const Tensor* src : next->src) {
        if (src == nullptr) continue;
        if (src == node || !mirrored_state(plan, src)) {
          safe = false;
          break;
        }
      }
      if (!safe) break;
      ++id;
    }
  };
  auto state_of = [&](const Tensor* t) { return t == nullptr ? SplitAxis::kMirrored : plan.of(t)->axis; };
  skip_unrelated();
  if (id + 1 >= n) return last;
  if (const Tensor* next = graph.node(id + 1); next->op == Op::kAddId && next->src[0] == node &&
                                               state_of(next->src[1]) == SplitAxis::kPartial &&
                                               state_of(next->src[2]) == SplitAxis::kMirrored) {
    node = next;
    last = ++id;
    n_used = uses[id];
  }
  for (;;) {
    skip_unrelated();
    if (id + 1 >= n) return last;
    const Tensor* next = graph.node(id + 1);
    if (next->op != Op::kMul || next->src[0] != node || state_of(next->src[1]) != SplitAxis::kMirrored) break;
    node = next;
    last = ++id;
    n_used = uses[id];
  }
  // the sum of the experts' results: a VIEW of each, then ADDs
  if (n_used < 2 || n_used != node->ne[1] || id + 2 * static_cast<size_t>(n_used) - 1 >= n) return last;
  for (int32_t k = 0; k < n_used; ++k) {
    const Tensor* next = graph.node(id + 1);
    if (next->op != Op::kView || next->view_src != node || next->view_offs != static_cast<size_t>(k) * node->nb[1] ||
        next->ne[0] != node->ne[0] || next->ne[1] != node->ne[2] || next->nb[1] != node->nb[2] || uses[id + 1] != 1) {
      return last;
    }
    ++id;
  }
  const size_t first_view = id + 1 - static_cast<size_t>(n_used);
  {
    const Tensor* next = graph.node(id + 1);
    if (next->op != Op::kAdd || next->src[0] != graph.node(first_view) || next->src[1] != graph.node(first_view + 1) ||
        uses[id + 1] != 1) {
      return last;
    }
    ++id;
  }
  for (int32_t k = 0; k < n_used - 2; ++k) {
    const Tensor* next = graph.node(id + 1);
    if (next->op != Op::kAdd || next->src[0] != graph.node(id) ||
        next->src[1] != graph.node(first_view + 2 + static_cast<size_t>(k)) || uses[id + 1] != 1) {
      return last;
    }
    ++id;
  }
  return id;
}

// Whether node k, between a reduction's node r and its delayed end d, reads the partial result (directly or through
// the chain): the unrelated mirrored nodes in between do not.
bool chain_member(const Graph& graph, size_t r, size_t d, size_t k) {
  if (k == d) return true;
  const Tensor* t = graph.node(k);
  for (const Tensor* src : t->src) {
    if (src == nullptr || src == t) continue;
    const int32_t pos = graph.position(src);
    if (pos >= static_cast<int32_t>(r) && static_cast<size_t>(pos) < k &&
        (static_cast<size_t>(pos) == r || chain_member(graph, r, d, static_cast<size_t>(pos)))) {
      return true;
    }
  }
  return false;
}

}  // namespace

const char* split_axis_name(SplitAxis axis) {
  switch (axis) {
    case SplitAxis::k0: return "axis 0";
    case SplitAxis::k1: return "axis 1";
    case SplitAxis::k2: return "axis 2";
    case SplitAxis::k3: return "axis 3";
    case SplitAxis::kMirrored: return "mirrored";
    case SplitAxis::kPartial: return "partial";
  }
  return "?";
}

int64_t SplitState::on_device(size_t j, size_t n_devices) const {
  if (!is_split()) return 0;
  int64_t sum = 0;
  for (size_t s = 0; s < nr.size(); ++s) {
    const size_t k = s * n_devices + j;
    if (k < ne.size()) sum += ne[k] * nr[s];
  }
  return sum;
}

std::string SplitState::describe(size_t n_devices) const {
  std::string s = split_axis_name(axis);
  if (!is_split()) return s;
  s += " {";
  for (size_t j = 0; j < n_devices; ++j) s += (j == 0 ? "" : ", ") + std::to_string(on_device(j, n_devices));
  return s + "}";
}

size_t TensorParallelPlan::n_subgraphs() const { return reductions.size() + 1; }

const SplitState* TensorParallelPlan::of(const Tensor* t) const {
  const auto it = state.find(t);
  return it == state.end() ? nullptr : &it->second;
}

Result<TensorParallelPlan> plan_tensor_parallel(const Graph& graph, size_t n_devices, const StaticSplitFn& statics) {
  if (n_devices < 1 || n_devices > kMaxDevices) {
    return Status(StatusCode::kInvalidArgument,
                  format_message("tensor parallelism: %zu devices (1 to %zu)", n_devices, kMaxDevices));
  }
  Planner p(n_devices, statics);
  p.plan().n_devices = n_devices;
  for (Tensor* leaf : graph.leafs()) {
    auto s = p.own(leaf);
    if (!s.ok()) return s.status();
  }
  std::vector<size_t> reductions;
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    auto s = p.own(graph.node(i));
    if (!s.ok()) return s.status();
    if (p.reduced(graph.node(i))) reductions.push_back(i);
  }
  // Delay each AllReduce past what is linear in the partial result (ggml's get_i_delayed): the nodes in between are
  // partial sums too.
  TensorParallelPlan& plan = p.plan();
  std::vector<int32_t> uses(graph.n_nodes(), 0);
  for (const Tensor* node : graph.nodes()) {
    for (const Tensor* src : node->src) {
      if (src == nullptr || src == node) continue;
      if (const int32_t pos = graph.position(src); pos >= 0) ++uses[static_cast<size_t>(pos)];
    }
  }
  for (size_t& r : reductions) {
    const size_t d = delayed(graph, plan, uses, r);
    for (size_t i = r + 1; i <= d; ++i) {
      if (chain_member(graph, r, d, i)) plan.state[graph.node(i)] = SplitState{SplitAxis::kPartial, {}, {}};
    }
    r = d;
  }
  plan.reductions = std::move(reductions);
  return std::move(plan);
}

}  // namespace tessera
