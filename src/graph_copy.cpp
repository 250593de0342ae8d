// Graph copy, backend comparison and the NMSE helper (docs/interfaces.md, 'Graph copy and backend comparison').
#include "tessera/graph_copy.h"

#include <cmath>
#include <cstring>

#include "tessera/alloc.h"

namespace tessera {

Tensor* GraphCopy::copy_of(const Tensor* original) const {
  auto it = map.find(original);
  return it == map.end() ? nullptr : it->second;
}

namespace {

// Creates the copy of t (and first of its view source and sources) in ctx; same type, shape and strides.
Tensor* copy_tensor(Context& ctx, std::unordered_map<const Tensor*, Tensor*>& map, Tensor* t) {
  auto it = map.find(t);
  if (it != map.end()) return it->second;
  Tensor* c;
  if (t->view_src != nullptr) {
    Tensor* root = copy_tensor(ctx, map, t->view_src);
    if (root == nullptr) return nullptr;
    c = ctx.new_view(root, t->type, t->ne, t->nb, t->view_offs);
  } else {
    c = ctx.new_tensor(t->type, kMaxDims, t->ne);
    if (c != nullptr) std::memcpy(c->nb, t->nb, sizeof c->nb);  // keep the layout, so data copies byte for byte
  }
  if (c == nullptr) return nullptr;
  c->op = t->op;
  std::memcpy(c->op_params, t->op_params, sizeof c->op_params);
  c->flags = t->flags;
  std::memcpy(c->name, t->name, sizeof c->name);
  map[t] = c;
  for (int i = 0; i < kMaxSrc; ++i) {
    if (t->src[i] == nullptr) continue;
    c->src[i] = copy_tensor(ctx, map, t->src[i]);
    if (c->src[i] == nullptr) return nullptr;
  }
  return c;
}

}  // namespace

Result<GraphCopy> graph_copy(Backend& backend, const Graph& graph) {
  GraphCopy out;
  out.ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
  out.graph = std::make_unique<Graph>(graph.capacity());
  for (const auto* list : {&graph.leafs(), &graph.nodes()}) {
    for (Tensor* t : *list) {
      if (copy_tensor(*out.ctx, out.map, t) == nullptr) {
        return Status(out.ctx->status().code(), "graph_copy: " + out.ctx->status().message());
      }
    }
  }
  Result<std::unique_ptr<Buffer>> buf = alloc_ctx_tensors(*out.ctx, backend);
  if (!buf.ok()) return Status(buf.status().code(), "graph_copy: " + buf.status().message());
  out.buffer = std::move(buf).value();
  // Copy the data of every allocated non-view tensor (views share their source's copy).
  for (const auto& [orig, copy] : out.map) {
    if (orig->view_src != nullptr || tensor_buffer(*orig) == nullptr || orig->data == nullptr) continue;
    TS_RETURN_IF_ERROR(tensor_copy(*orig, *copy));
  }
  for (Tensor* t : graph.leafs()) TS_RETURN_IF_ERROR(out.graph->add_leaf(out.copy_of(t)));
  for (Tensor* t : graph.nodes()) TS_RETURN_IF_ERROR(out.graph->add_node(out.copy_of(t)));
  return out;
}

Status compare_graph_backend(Backend& b1, Backend& b2, const Graph& graph, const CompareCallback& callback) {
  Result<GraphCopy> copy = graph_copy(b2, graph);
  if (!copy.ok()) return copy.status();
  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    Tensor* t1 = graph.node(i);
    if (op_is_view(t1->op) || t1->op == Op::kNone) continue;
    Graph g1 = graph.view(i, i + 1);
    Graph g2 = copy->graph->view(i, i + 1);
    if (b1.graph_compute(g1) != ComputeStatus::kSuccess) {
      return TS_ERROR(StatusCode::kFailed, "compare_graph_backend: node %zu %s failed on %s: %s", i,
                      describe(*t1).c_str(), b1.name(), b1.last_error().c_str());
    }
    if (b2.graph_compute(g2) != ComputeStatus::kSuccess) {
      return TS_ERROR(StatusCode::kFailed, "compare_graph_backend: node %zu %s failed on %s: %s", i,
                      describe(*t1).c_str(), b2.name(), b2.last_error().c_str());
    }
    if (!callback(i, *t1, *copy->graph->node(i))) break;
  }
  return Status::Ok();
}

NmseResult nmse(const float* a, const float* b, size_t n) {
  NmseResult r;
  r.n = n;
  double err = 0.0, ref = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const bool fa = std::isfinite(a[i]), fb = std::isfinite(b[i]);
    if (!fa || !fb) {
      ++r.non_finite;
      const bool same = (std::isnan(a[i]) && std::isnan(b[i])) || (!fa && !fb && a[i] == b[i]);
      if (!same) r.nan_mismatch = true;
      continue;
    }
    const double d = static_cast<double>(a[i]) - static_cast<double>(b[i]);
    err += d * d;
    ref += static_cast<double>(a[i]) * static_cast<double>(a[i]);
  }
  r.nmse = ref > 0.0 ? err / ref : (err > 0.0 ? INFINITY : 0.0);
  return r;
}

namespace {

// Reads t's whole byte span (through its buffer, or directly for host-context tensors).
Status read_span(const Tensor& t, std::vector<uint8_t>& bytes) {
  bytes.resize(nbytes(t));
  if (tensor_buffer(t) == nullptr && t.data != nullptr) {
    std::memcpy(bytes.data(), t.data, bytes.size());
    return Status::Ok();
  }
  return tensor_get(t, bytes.data(), 0, bytes.size());
}

Status write_span(Tensor& t, const std::vector<uint8_t>& bytes) {
  if (tensor_buffer(t) == nullptr && t.data != nullptr) {
    std::memcpy(t.data, bytes.data(), bytes.size());
    return Status::Ok();
  }
  return tensor_set(t, bytes.data(), 0, bytes.size());
}

template <typename Fn>
void for_each_row(const Tensor& t, Fn fn) {
  for (int64_t i3 = 0; i3 < t.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < t.ne[2]; ++i2) {
      for (int64_t i1 = 0; i1 < t.ne[1]; ++i1) {
        fn(static_cast<size_t>(i1) * t.nb[1] + static_cast<size_t>(i2) * t.nb[2] + static_cast<size_t>(i3) * t.nb[3]);
      }
    }
  }
}

// Storage-only types (types.h) have no conversions: an error naming the tensor and its type, never a null call.
Status check_convertible(const Tensor& t, const char* what) {
  if (!type_is_valid(t.type)) return TS_ERROR(StatusCode::kInvalidArgument, "%s: invalid type", what);
  if (!type_has_kernels(t.type)) {
    return TS_ERROR(StatusCode::kUnsupported,
                    "%s: %s is %s, a storage-only type (Tessera stores it but has no conversion to or from f32)", what,
                    describe(t).c_str(), type_name(t.type));
  }
  return Status::Ok();
}

}  // namespace

Result<std::vector<float>> tensor_to_f32(const Tensor& t) {
  TS_RETURN_IF_ERROR(check_convertible(t, "tensor_to_f32"));
  std::vector<uint8_t> bytes;
  TS_RETURN_IF_ERROR(read_span(t, bytes));
  const TypeTraits& tt = type_traits(t.type);
  std::vector<float> out(static_cast<size_t>(nelements(t)));
  if (out.empty()) return out;
  const int64_t ne0 = t.ne[0];
  float* dst = out.data();
  for_each_row(t, [&](size_t off) {
    const uint8_t* row = bytes.data() + off;
    if (t.type == Type::kI32) {
      for (int64_t i = 0; i < ne0; ++i) {
        int32_t v;
        std::memcpy(&v, row + static_cast<size_t>(i) * t.nb[0], 4);
        dst[i] = static_cast<float>(v);
      }
    } else if (tt.is_quantized || t.nb[0] == tt.type_size) {
      tt.to_float(row, dst, ne0);  // blocks of a row are always contiguous
    } else {
      for (int64_t i = 0; i < ne0; ++i) tt.to_float(row + static_cast<size_t>(i) * t.nb[0], dst + i, 1);
    }
    dst += ne0;
  });
  return out;
}

Status tensor_from_f32(Tensor& t, const std::vector<float>& values) {
  TS_RETURN_IF_ERROR(check_convertible(t, "tensor_from_f32"));
  if (values.size() != static_cast<size_t>(nelements(t))) {
    return TS_ERROR(StatusCode::kInvalidArgument, "tensor_from_f32: %zu values for %s (%lld elements)", values.size(),
                    describe(t).c_str(), static_cast<long long>(nelements(t)));
  }
  if (values.empty()) return Status::Ok();
  std::vector<uint8_t> bytes;
  TS_RETURN_IF_ERROR(read_span(t, bytes));  // keeps the gaps of non-contiguous tensors
  const TypeTraits& tt = type_traits(t.type);
  const int64_t ne0 = t.ne[0];
  const float* src = values.data();
  for_each_row(t, [&](size_t off) {
    uint8_t* row = bytes.data() + off;
    if (t.type == Type::kI32) {
      for (int64_t i = 0; i < ne0; ++i) {
        const auto v = static_cast<int32_t>(std::lrint(src[i]));
        std::memcpy(row + static_cast<size_t>(i) * t.nb[0], &v, 4);
      }
    } else if (tt.is_quantized || t.nb[0] == tt.type_size) {
      tt.from_float(src, row, ne0);
    } else {
      for (int64_t i = 0; i < ne0; ++i) tt.from_float(src + i, row + static_cast<size_t>(i) * t.nb[0], 1);
    }
    src += ne0;
  });
  return write_span(t, bytes);
}

Result<NmseResult> nmse(const Tensor& a, const Tensor& b) {
  if (nelements(a) != nelements(b)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "nmse: element counts differ: %s vs %s", describe(a).c_str(),
                    describe(b).c_str());
  }
  Result<std::vector<float>> va = tensor_to_f32(a);
  if (!va.ok()) return va.status();
  Result<std::vector<float>> vb = tensor_to_f32(b);
  if (!vb.ok()) return vb.status();
  return nmse(va->data(), vb->data(), va->size());
}

}  // namespace tessera
