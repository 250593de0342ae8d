// Serialized graphs, reading: JSON -> a validated LoadedGraph (format and rules: docs/graph-format.md; writing is
// graph_write.cpp).
//
// Reading never trusts the file: every computed tensor is made by its op's building function (build.h) from the
// already loaded sources and the decoded op_params, and the file's type, ne, nb, op_params, view_src and view_offs
// must equal what the builder produced. Inside the parser a problem is thrown as a json_read::ParseProblem {JSON path,
// message} and caught once in graph_from_json, together with anything nlohmann-json throws; nothing escapes the
// public functions. The JSON reading helpers are json_read.h's, shared with the topology and scenario loaders.
#include "tessera/harness/graph/graph_io.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "common/json_read.h"

#include "tessera/build.h"
#include "tessera/rope.h"

namespace tessera::harness {

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;
using json_read::child;
using json_read::element;
using json_read::expect_object;
using json_read::fail;
using json_read::get_count;
using json_read::get_version;
using json_read::invalid;
using json_read::member;
using json_read::quote;
using json_read::required;
using json_read::type_fail;

constexpr int64_t kMaxExtent = int64_t{1} << 62;  // bound on ne, element counts and view spans

// ---------------------------------------------------------------------------------------------------------------
// Parsing helpers (the shared ones are json_read.h's)

// A string without NUL characters: names and the other strings become C strings.
std::string get_string(const json& v, const std::string& path, std::string_view what) {
  std::string s = json_read::get_string(v, path, what);
  if (s.find('\0') != std::string::npos) fail(path, "expected " + std::string(what) + " without NUL characters");
  return s;
}

uint64_t get_u64(const json& v, const std::string& path, std::string_view what) {
  if (v.is_number_unsigned()) return v.get<uint64_t>();
  if (v.is_number_integer() && v.get<int64_t>() >= 0) return static_cast<uint64_t>(v.get<int64_t>());
  type_fail(path, what, v);
}

int32_t get_int32(const json& v, const std::string& path) {
  constexpr std::string_view kWhat = "a whole number in [-2147483648, 2147483647] (one int32 op_params slot)";
  if (v.is_number_unsigned()) {
    if (v.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) type_fail(path, kWhat, v);
    return static_cast<int32_t>(v.get<uint64_t>());
  }
  if (v.is_number_integer()) {
    const int64_t i = v.get<int64_t>();
    if (i < std::numeric_limits<int32_t>::min() || i > std::numeric_limits<int32_t>::max()) type_fail(path, kWhat, v);
    return static_cast<int32_t>(i);
  }
  type_fail(path, kWhat, v);
}

// ---------------------------------------------------------------------------------------------------------------
// Reading tensors

template <typename T, size_t N>
std::string array_text(const T (&v)[N]) {
  std::string out = "[";
  for (size_t i = 0; i < N; ++i) out += (i ? ", " : "") + std::to_string(v[i]);
  return out + "]";
}
std::string params_text(const int32_t* p) {
  int n = 0;
  for (int i = 0; i < kMaxOpParams; ++i) {
    if (p[i] != 0) n = i + 1;
  }
  std::string out = "[";
  for (int i = 0; i < n; ++i) out += (i ? ", " : "") + std::to_string(p[i]);
  return out + "]";
}

float param_f32(const int32_t* p, int i) {
  float f;
  std::memcpy(&f, &p[i], sizeof f);
  return f;
}

// What the file says about one tensor, before it is built.
struct TensorSpec {
  std::string name;
  Type type = Type::kF32;
  int64_t ne[kMaxDims] = {1, 1, 1, 1};
  bool has_nb = false;
  size_t nb[kMaxDims] = {0, 0, 0, 0};
  Op op = Op::kNone;
  int32_t params[kMaxOpParams] = {};
  Tensor* src[kMaxSrc] = {};
  int n_src = 0;  // entries in the file's src array (nulls included)
  Tensor* view_src = nullptr;
  bool has_view_offs = false;
  size_t view_offs = 0;
  int32_t flags = 0;
  std::string role;  // empty when absent
};

class GraphReader {
 public:
  GraphReader(LoadedGraph& out, size_t n_tensors) : out_(out), n_tensors_(n_tensors) {}

  // A reference to tensor `v` from tensor `self` (sources and view_src must come earlier: no cycle, no forward use).
  Tensor* ref(const json& v, const std::string& path, size_t self) {
    if (!v.is_number_integer() && !v.is_number_unsigned()) type_fail(path, "a tensor id (a whole number)", v);
    if (v.is_number_integer() && v.get<int64_t>() < 0) type_fail(path, "a tensor id >= 0", v);
    const uint64_t id = v.get<uint64_t>();
    if (id >= n_tensors_) {
      fail(path, "expected the id of a tensor of this file (0.." + std::to_string(n_tensors_ - 1) + "), got " +
                     std::to_string(id) + " (no such tensor)");
    }
    if (id == self)
      fail(path, "expected the id of an earlier tensor, got " + std::to_string(id) + " (the tensor itself: a cycle)");
    if (id > self) {
      fail(path, "expected the id of an earlier tensor (< " + std::to_string(self) +
                     "; sources come before their users), got " + std::to_string(id) + " (a forward reference)");
    }
    return out_.tensors[id];
  }

  TensorSpec parse(const json& v, const std::string& path, size_t index) {
    expect_object(
        v, path, {"id", "name", "type", "ne", "nb", "op", "op_params", "src", "view_src", "view_offs", "flags", "role"},
        "a tensor object {\"id\": ..., \"type\": ..., \"ne\": [...], \"op\": ...}");
    TensorSpec s;
    const int64_t id =
        get_count(required(v, path, "id", "the tensor's id, its index in \"tensors\""), child(path, "id"),
                  "a tensor id (a whole number >= 0)", std::numeric_limits<int64_t>::max());
    if (static_cast<uint64_t>(id) != index) {
      fail(child(path, "id"), "expected " + std::to_string(index) + " (tensors are listed in id order, from 0), got " +
                                  std::to_string(id));
    }
    if (const json* x = member(v, "name")) {
      s.name = get_string(*x, child(path, "name"), "a tensor name (a string)");
      if (s.name.size() >= static_cast<size_t>(kMaxName)) {
        fail(child(path, "name"), "expected a name of at most " + std::to_string(kMaxName - 1) + " bytes, got " +
                                      std::to_string(s.name.size()) + " bytes");
      }
    }
    {
      const std::string p = child(path, "type");
      const std::string t = get_string(required(v, path, "type", "the element type"), p, "a type name");
      if (!type_from_name(t.c_str(), &s.type)) {
        fail(p, "unknown type " + quote(t) + " (expected one of: " + json_read::type_names() + ")");
      }
    }
    {
      const std::string p = child(path, "ne");
      const json& ne = required(v, path, "ne", "the shape, 1 to 4 element counts");
      if (!ne.is_array() || ne.empty() || ne.size() > static_cast<size_t>(kMaxDims)) {
        type_fail(p, "an array of 1 to 4 element counts", ne);
      }
      int64_t total = 1;
      for (size_t i = 0; i < ne.size(); ++i) {
        s.ne[i] = get_count(ne[i], element(p, i), "an element count (a whole number in [0, 2^62])", kMaxExtent);
      }
      for (int i = 0; i < kMaxDims; ++i) {
        // Zeros count as ones: an empty tensor's row count (what kernels loop over) is bounded too.
        if (__builtin_mul_overflow(total, s.ne[i] == 0 ? 1 : s.ne[i], &total) || total > kMaxExtent) {
          fail(p, "expected at most 2^62 elements in all, got " + array_text(s.ne) + " (the product overflows)");
        }
      }
    }
    if (const json* x = member(v, "nb")) {
      const std::string p = child(path, "nb");
      if (!x->is_array() || x->size() != static_cast<size_t>(kMaxDims)) type_fail(p, "an array of 4 byte strides", *x);
      for (size_t i = 0; i < x->size(); ++i)
        s.nb[i] = get_u64((*x)[i], element(p, i), "a byte stride (a whole number >= 0)");
      s.has_nb = true;
    }
    {
      const std::string p = child(path, "op");
      const std::string o = get_string(required(v, path, "op", "the op, \"NONE\" for a leaf"), p, "an op name");
      if (!op_from_name(o.c_str(), &s.op)) {
        fail(p, "unknown op " + quote(o) + " (expected one of: " + json_read::op_names(true) + ")");
      }
    }
    if (const json* x = member(v, "op_params")) {
      const std::string p = child(path, "op_params");
      if (!x->is_array() || x->size() > static_cast<size_t>(kMaxOpParams)) {
        type_fail(p, "an array of at most 16 int32 values", *x);
      }
      for (size_t i = 0; i < x->size(); ++i) s.params[i] = get_int32((*x)[i], element(p, i));
    }
    const OpTraits& traits = op_traits(s.op);
    if (const json* x = member(v, "src")) {
      const std::string p = child(path, "src");
      if (!x->is_array()) type_fail(p, "an array of tensor ids (null for an absent optional source)", *x);
      if (x->size() > static_cast<size_t>(traits.max_src)) {
        fail(p, "expected at most " + std::to_string(traits.max_src) + " sources for " + traits.name + ", got " +
                    std::to_string(x->size()));
      }
      s.n_src = static_cast<int>(x->size());
      for (size_t i = 0; i < x->size(); ++i) {
        if ((*x)[i].is_null()) continue;
        s.src[i] = ref((*x)[i], element(p, i), index);
      }
    }
    for (int i = 0; i < traits.min_src; ++i) {
      if (s.src[i] == nullptr) {
        fail(child(path, "src"), std::string("expected ") + std::to_string(traits.min_src) + " required source" +
                                     (traits.min_src == 1 ? "" : "s") + " for " + traits.name + ", src[" +
                                     std::to_string(i) + "] is " + (i < s.n_src ? "null" : "missing"));
      }
    }
    if (const json* x = member(v, "view_src")) s.view_src = ref(*x, child(path, "view_src"), index);
    if (const json* x = member(v, "view_offs")) {
      if (s.view_src == nullptr) fail(child(path, "view_offs"), "expected no view_offs without a view_src");
      s.view_offs = get_u64(*x, child(path, "view_offs"), "a byte offset (a whole number >= 0)");
      s.has_view_offs = true;
    }
    if (const json* x = member(v, "flags")) {
      const std::string p = child(path, "flags");
      if (!x->is_array()) type_fail(p, "an array of flag names (\"input\", \"output\", \"param\")", *x);
      for (size_t i = 0; i < x->size(); ++i) {
        const std::string f = get_string((*x)[i], element(p, i), "a flag name (\"input\", \"output\" or \"param\")");
        if (f == "input")
          s.flags |= kFlagInput;
        else if (f == "output")
          s.flags |= kFlagOutput;
        else if (f == "param")
          s.flags |= kFlagParam;
        else
          fail(element(p, i), "unknown flag " + quote(f) + " (expected one of: input, output, param)");
      }
    }
    if (const json* x = member(v, "role")) {
      s.role = get_string(*x, child(path, "role"), "a role (\"input\" or \"weight\")");
    }
    return s;
  }

  Tensor* build_leaf(const TensorSpec& s, const std::string& path) {
    Context& ctx = *out_.ctx;
    if (s.n_src > 0) fail(child(path, "src"), "expected no sources for a leaf (op NONE)");
    if (s.view_src != nullptr) {
      fail(child(path, "view_src"),
           "expected no view_src for a leaf (op NONE; views are made by VIEW, RESHAPE, PERMUTE, "
           "TRANSPOSE, CPY and SET_ROWS)");
    }
    for (int i = 0; i < kMaxOpParams; ++i) {
      if (s.params[i] != 0)
        fail(element(child(path, "op_params"), i), "expected 0 for a leaf (op NONE has no parameters)");
    }
    Tensor* t = ctx.new_tensor(s.type, kMaxDims, s.ne);
    if (t == nullptr) fail(path, "not a valid leaf: " + ctx.status().message());
    if (s.has_nb) {
      for (int i = 0; i < kMaxDims; ++i) {
        if (s.nb[i] != t->nb[i]) {
          fail(child(path, "nb"), "expected " + array_text(t->nb) + " (the contiguous strides of a " +
                                      type_name(s.type) + " " + array_text(s.ne) +
                                      " leaf; non-contiguous leafs are not supported), got " + array_text(s.nb));
        }
      }
    }
    const std::string role = (s.flags & kFlagInput) != 0 ? "input" : "weight";
    if (!s.role.empty() && s.role != role) {
      fail(child(path, "role"), "expected \"" + role + "\" (" +
                                    (role == "input" ? "the leaf is flagged input" : "the leaf is not flagged input") +
                                    "), got " + quote(s.role));
    }
    return t;
  }

  // The byte span of a VIEW with these ne and strides, checked for overflow before the builder computes it.
  static void check_view_span(const TensorSpec& s, size_t nb0, const std::string& path) {
    const TypeTraits& tt = type_traits(s.type);
    if (s.ne[0] % tt.block_size != 0) {
      fail(child(path, "ne"), "expected ne0 to be a multiple of the " + std::string(tt.name) + " block size " +
                                  std::to_string(tt.block_size) + ", got " + std::to_string(s.ne[0]));
    }
    Tensor probe;
    probe.type = s.type;
    for (int i = 0; i < kMaxDims; ++i) {
      probe.ne[i] = s.ne[i];
      probe.nb[i] = i == 0 ? nb0 : s.nb[i];
    }
    size_t bytes = 0;
    if (!checked_nbytes(probe, &bytes) || bytes > static_cast<size_t>(kMaxExtent)) {
      fail(child(path, "nb"), "expected strides whose span fits the source, got ne " + array_text(s.ne) + ", nb " +
                                  array_text(s.nb) + " (the span overflows)");
    }
  }

  Tensor* call_builder(const TensorSpec& s, const std::string& path) {
    Context& ctx = *out_.ctx;
    Tensor* const* src = s.src;
    const int32_t* p = s.params;
    switch (s.op) {
      case Op::kNone: return nullptr;  // not reached
      case Op::kView: {
        if (!s.has_nb) fail(path, "missing required key \"nb\" (a VIEW's strides nb1..nb3 define it)");
        check_view_span(s, src[0]->nb[0], path);
        const uint64_t offset = static_cast<uint64_t>(static_cast<uint32_t>(p[0])) |
                                (static_cast<uint64_t>(static_cast<uint32_t>(p[1])) << 32);
        return view_4d(ctx, src[0], s.ne[0], s.ne[1], s.ne[2], s.ne[3], s.nb[1], s.nb[2], s.nb[3],
                       static_cast<size_t>(offset));
      }
      case Op::kReshape: return reshape_4d(ctx, src[0], s.ne[0], s.ne[1], s.ne[2], s.ne[3]);
      case Op::kPermute: return permute(ctx, src[0], p[0], p[1], p[2], p[3]);
      case Op::kTranspose: return transpose(ctx, src[0]);
      case Op::kCpy: return src[1] != nullptr ? cpy(ctx, src[0], src[1]) : cast(ctx, src[0], s.type);
      case Op::kCont: return cont_4d(ctx, src[0], s.ne[0], s.ne[1], s.ne[2], s.ne[3]);
      case Op::kDup: return dup(ctx, src[0]);
      case Op::kAdd: return tessera::add(ctx, src[0], src[1]);
      case Op::kMul: return mul(ctx, src[0], src[1]);
      case Op::kDiv: return div(ctx, src[0], src[1]);
      case Op::kScale: return scale(ctx, src[0], param_f32(p, 0), param_f32(p, 1));
      case Op::kUnary: return unary(ctx, src[0], static_cast<UnaryOp>(p[0]));
      case Op::kGlu:
        if (p[0] == static_cast<int32_t>(GluOp::kSwigluOai)) {
          return swiglu_oai(ctx, src[0], src[1], param_f32(p, 2), param_f32(p, 3), p[1] != 0);
        }
        return glu(ctx, src[0], src[1], static_cast<GluOp>(p[0]), p[1] != 0);
      case Op::kRmsNorm: return rms_norm(ctx, src[0], param_f32(p, 0));
      case Op::kNorm: return norm(ctx, src[0], param_f32(p, 0));
      case Op::kSumRows: return sum_rows(ctx, src[0]);
      case Op::kSoftMax:
        if (src[1] != nullptr && (src[1]->ne[2] == 0 || src[1]->ne[3] == 0)) {
          fail(element(child(path, "src"), 1), "expected a mask with ne2, ne3 >= 1 (they broadcast over the scores)");
        }
        return soft_max(ctx, src[0], src[1], param_f32(p, 0), src[2]);
      case Op::kRope:
        return rope_ext(ctx, src[0], src[1], p[0], static_cast<RopeMode>(p[1]), param_f32(p, 2), param_f32(p, 3),
                        rope_yarn_from_slots(p), src[2]);
      case Op::kMulMat: return mul_mat(ctx, src[0], src[1]);
      case Op::kMulMatId: return mul_mat_id(ctx, src[0], src[1], src[2]);
      case Op::kGetRows: return get_rows(ctx, src[0], src[1]);
      case Op::kSetRows: return set_rows(ctx, src[0], src[1], src[2]);
      case Op::kArgsort: return argsort(ctx, src[0], static_cast<SortOrder>(p[0]));
      case Op::kTopK: return top_k(ctx, src[0], p[0]);
      case Op::kFlashAttnExt: return flash_attn_ext(ctx, src[0], src[1], src[2], src[3], param_f32(p, 0), src[4]);
      case Op::kAddId: return add_id(ctx, src[0], src[1], src[2]);
      case Op::kClamp: return clamp(ctx, src[0], param_f32(p, 0), param_f32(p, 1));
      case Op::kCount: break;
    }
    fail(child(path, "op"), "expected a known op");
  }

  std::string id_text(const Tensor* t) const {
    if (t == nullptr) return "none";
    const auto it = ids_.find(t);
    return it == ids_.end() ? "a tensor outside the file" : std::to_string(it->second);
  }

  Tensor* build_node(const TensorSpec& s, const std::string& path) {
    Context& ctx = *out_.ctx;
    const std::string op = op_name(s.op);
    Tensor* t = call_builder(s, path);
    if (t == nullptr) {
      fail(path, "expected sources and op_params that " + op +
                     " accepts: " + (ctx.ok() ? std::string("the builder failed") : ctx.status().message()));
    }
    const std::string because = " (what " + op + " gives for these sources and op_params)";
    if (t->type != s.type) {
      fail(child(path, "type"), std::string("expected ") + type_name(t->type) + because + ", got " + type_name(s.type));
    }
    for (int i = 0; i < kMaxDims; ++i) {
      if (t->ne[i] != s.ne[i])
        fail(child(path, "ne"), "expected " + array_text(t->ne) + because + ", got " + array_text(s.ne));
    }
    if (s.has_nb) {
      for (int i = 0; i < kMaxDims; ++i) {
        if (t->nb[i] != s.nb[i])
          fail(child(path, "nb"), "expected " + array_text(t->nb) + because + ", got " + array_text(s.nb));
      }
    }
    for (int i = 0; i < kMaxOpParams; ++i) {
      if (t->op_params[i] != s.params[i]) {
        fail(child(path, "op_params"), "expected " + params_text(t->op_params) + " (" + op +
                                           "'s parameters in canonical form), got " + params_text(s.params));
      }
    }
    for (int i = 0; i < kMaxSrc; ++i) {
      if (t->src[i] != s.src[i]) {
        fail(element(child(path, "src"), i), "expected " + id_text(t->src[i]) + because + ", got " + id_text(s.src[i]));
      }
    }
    if (t->view_src != s.view_src) {
      fail(child(path, "view_src"), (t->view_src == nullptr ? "expected no view_src (" + op + " results are not views)"
                                                            : "expected " + id_text(t->view_src) + because) +
                                        ", got " + id_text(s.view_src));
    }
    if (t->view_src != nullptr && s.has_view_offs && t->view_offs != s.view_offs) {
      fail(child(path, "view_offs"),
           "expected " + std::to_string(t->view_offs) + because + ", got " + std::to_string(s.view_offs));
    }
    if (!s.role.empty())
      fail(child(path, "role"),
           "expected no role for a computed tensor (roles \"input\" and \"weight\" are for leafs)");
    return t;
  }

  void add_tensor(const json& v, const std::string& path, size_t index) {
    TensorSpec s = parse(v, path, index);
    Tensor* t = s.op == Op::kNone ? build_leaf(s, path) : build_node(s, path);
    set_name(*t, s.name);
    t->flags = s.flags;
    out_.tensors.push_back(t);
    ids_[t] = static_cast<int64_t>(index);
  }

 private:
  LoadedGraph& out_;
  size_t n_tensors_;
  std::unordered_map<const Tensor*, int64_t> ids_;
};

// The "leafs" or "nodes" list: ids of distinct tensors; position of each in `pos` (-1 = not listed).
std::vector<Tensor*> parse_list(const json& v, const std::string& path, const LoadedGraph& g, bool leafs,
                                std::vector<int64_t>& leaf_pos, std::vector<int64_t>& node_pos) {
  if (!v.is_array()) type_fail(path, "an array of tensor ids", v);
  std::vector<Tensor*> out;
  const size_t n = g.tensors.size();
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string p = element(path, i);
    const json& x = v[i];
    if (!x.is_number_unsigned() && !(x.is_number_integer() && x.get<int64_t>() >= 0)) type_fail(p, "a tensor id", x);
    const uint64_t id = x.get<uint64_t>();
    if (id >= n) {
      fail(p, "expected the id of a tensor of this file (0.." + std::to_string(n == 0 ? 0 : n - 1) + "), got " +
                  std::to_string(id) + " (no such tensor)");
    }
    if (leaf_pos[id] >= 0 || node_pos[id] >= 0) {
      fail(p, "expected each tensor once in \"leafs\" and \"nodes\", tensor " + std::to_string(id) + " is already " +
                  (leaf_pos[id] >= 0 ? "leafs[" + std::to_string(leaf_pos[id]) + "]"
                                     : "nodes[" + std::to_string(node_pos[id]) + "]"));
    }
    Tensor* t = g.tensors[id];
    const bool is_leaf = t->op == Op::kNone && (t->flags & kFlagParam) == 0;
    if (leafs && !is_leaf) {
      fail(p, "expected a leaf (op NONE, not flagged param), tensor " + std::to_string(id) + " is " +
                  (t->op == Op::kNone ? "a param (a node)" : std::string("computed by ") + op_name(t->op)));
    }
    if (!leafs && is_leaf)
      fail(p, "expected a node (a computed tensor or a param), tensor " + std::to_string(id) + " is a leaf");
    (leafs ? leaf_pos : node_pos)[id] = static_cast<int64_t>(i);
    out.push_back(t);
  }
  return out;
}

LoadedGraph parse_graph(const json& root) {
  // A newer version first (it may have keys this build does not know), naming the newest this build reads; anything
  // else but 1 is refused below.
  if (const json* v = member(root, "version");
      v != nullptr && v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(kGraphFormatVersion)) {
    (void)get_version(root, "serialized graphs", kGraphFormatVersion);
  }
  expect_object(root, "", {"format", "version", "description", "tensors", "leafs", "nodes"},
                "a JSON object {\"format\": \"tessera-graph\", \"version\": 1, \"tensors\": [...], \"leafs\": [...], "
                "\"nodes\": [...]} at the top level");
  const std::string format = get_string(required(root, "", "format", "\"tessera-graph\""), "format", "a string");
  if (format != kGraphFormatName)
    fail("format", std::string("expected \"") + kGraphFormatName + "\", got " + quote(format));
  const json& version = required(root, "", "version", "the format version, 1");
  if (!version.is_number_integer() || version.get<int64_t>() != kGraphFormatVersion) {
    type_fail("version", "1 (the only version of the format)", version);
  }
  if (const json* x = member(root, "description")) (void)get_string(*x, "description", "a string");
  const json& tensors = required(root, "", "tensors", "the tensors, in id order");
  if (!tensors.is_array()) type_fail("tensors", "an array of tensor objects", tensors);

  LoadedGraph g;
  g.ctx = std::make_unique<Context>(ContextParams{.no_alloc = true, .mem_size = 0});
  g.tensors.reserve(tensors.size());
  GraphReader reader(g, tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) reader.add_tensor(tensors[i], element("tensors", i), i);

  const json* leafs = member(root, "leafs");
  const json* nodes = member(root, "nodes");
  if ((leafs == nullptr) != (nodes == nullptr)) {
    fail(leafs == nullptr ? "leafs" : "nodes",
         "expected both \"leafs\" and \"nodes\", or neither (then the graph holds "
         "every tensor in id order)");
  }
  const size_t n = g.tensors.size();
  if (leafs == nullptr) {
    g.graph = std::make_unique<Graph>(std::max(Graph::kDefaultCapacity, n));
    for (Tensor* t : g.tensors) {
      Status s = g.graph->build_forward(t);
      if (!s.ok()) fail("tensors", s.message());
    }
  } else {
    std::vector<int64_t> leaf_pos(n, -1), node_pos(n, -1);
    std::vector<Tensor*> leaf_list = parse_list(*leafs, "leafs", g, true, leaf_pos, node_pos);
    std::vector<Tensor*> node_list = parse_list(*nodes, "nodes", g, false, leaf_pos, node_pos);
    std::unordered_map<const Tensor*, int64_t> id_of;
    for (size_t i = 0; i < n; ++i) id_of[g.tensors[i]] = static_cast<int64_t>(i);
    // Topological order of the nodes: a node's sources (and view source) that are nodes come before it.
    for (size_t i = 0; i < node_list.size(); ++i) {
      const Tensor* t = node_list[i];
      for (int k = 0; k <= kMaxSrc; ++k) {
        const Tensor* s = k < kMaxSrc ? t->src[k] : t->view_src;
        if (s == nullptr) continue;
        const int64_t q = node_pos[static_cast<size_t>(id_of[s])];
        if (q >= static_cast<int64_t>(i)) {
          fail(element("nodes", i), "expected nodes in topological order: tensor " + std::to_string(id_of[t]) +
                                        " uses tensor " + std::to_string(id_of[s]) + " (" +
                                        (k < kMaxSrc ? "src[" + std::to_string(k) + "]" : std::string("view_src")) +
                                        "), a later node (nodes[" + std::to_string(q) + "])");
        }
      }
    }
    g.graph = std::make_unique<Graph>(std::max({Graph::kDefaultCapacity, leaf_list.size(), node_list.size()}));
    for (Tensor* t : leaf_list) {
      Status s = g.graph->add_leaf(t);
      if (!s.ok()) fail("leafs", s.message());
    }
    for (Tensor* t : node_list) {
      Status s = g.graph->add_node(t);
      if (!s.ok()) fail("nodes", s.message());
    }
  }
  for (Tensor* t : g.tensors) {
    if (t->op == Op::kNone && (t->flags & kFlagInput) == 0) g.weights.push_back(t);
    if (t->flags & kFlagInput) g.inputs.push_back(t);
    if (t->flags & kFlagOutput) g.outputs.push_back(t);
  }
  return g;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Public functions

Tensor* LoadedGraph::by_name(const std::string& name) const {
  for (Tensor* t : tensors) {
    if (name == t->name) return t;
  }
  return nullptr;
}

Result<LoadedGraph> graph_from_json(std::string_view text, const std::string& source) {
  try {
    json root;
    TS_RETURN_IF_ERROR(json_read::parse_json(text, source, &root, "graph"));
    return parse_graph(root);
  } catch (const json_read::ParseProblem& p) {
    return invalid(json_read::error_prefix(source, p.path) + p.message);
  } catch (const std::exception& e) {
    return invalid(source + ": cannot read the graph: " + e.what());
  } catch (...) {
    return invalid(source + ": cannot read the graph (unknown error)");
  }
}

Result<std::string> read_graph_text(const std::string& path) { return json_read::read_text_file(path, "graph file"); }

Result<LoadedGraph> load_graph_file(const std::string& path) {
  Result<std::string> text = read_graph_text(path);
  if (!text.ok()) return text.status();
  return graph_from_json(text.value(), path);
}

}  // namespace tessera::harness
