// Random VALID graphs for property tests and fuzzers (header-only).
//
// Two layers, so that a counterexample is a small readable value and shrinking works on it:
//   1. GraphDesc: a plain description (token count, row width, data seed, and a list of Steps; each step is an op
//      kind plus a few small integers that pick operands and parameters). Any GraphDesc is valid: build() never
//      fails on it (a failure is a bug of this generator). A RapidCheck generator (gen_graph_desc, also the
//      rc::Arbitrary of GraphDesc) makes them; shrinking removes steps, lowers the token count and the step fields.
//      desc_from_bytes() makes one from raw bytes (for libFuzzer targets).
//   2. build(desc): builds the graph in fresh no_alloc contexts with the builders of build.h. Operands are picked
//      from the values built so far (operand field modulo the number of values that fit, most recent first); when
//      none fits, a fresh leaf of a fitting shape is made. Shapes are tracked symbolically (each dim is a constant or
//      a multiple of the token count T), and every structural decision uses only the symbolic shapes, so the same
//      description built with fewer tokens (with_tokens) gives a graph with the same nodes, leafs and wiring whose
//      every tensor is no larger: the "worst case / smaller batch" pair of reserve + alloc_graph.
//
// Ops used: unary, scale, clamp, add/mul/div with broadcasting, rms_norm, norm, sum_rows, glu (one- and two-input
// forms; swiglu, geglu, swiglu_oai), soft_max with and without mask and sinks, add_id (per-expert bias rows), rope
// (normal/neox, optional freq factors), mul_mat with weights of every Weight type (or an activation as the weight),
// mul_mat_id (ids from a leaf or from top_k of a router), get_rows, set_rows into a cache (a fresh leaf or an earlier
// value), a write into a leaf an earlier step read (set_rows or cpy: a state read, then stored over), argsort, top_k,
// cpy (to another type, flat, or into a view of a cache), cont, dup, views
// (view/reshape/permute/transpose, views of views), flash_attn_ext (mask, sinks, GQA). Leafs are planned (no memory),
// INPUT-flagged, or "external" (pre-allocated in BuildOptions::weight_buft, like weights). Step results are flagged
// OUTPUT (and non-view nodes INPUT) now and then; the last graph sink is always an OUTPUT. Every tensor in the graph is
// named "v<k>.<role>" after its position k in the value pool.
//
// Data: BuiltGraph::fill_data() writes deterministic data (from the description's seed) into every leaf that has
// memory: non-zero floats, ids within their table, distinct ids for set_rows, positions for rope.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <memory>
#include <ostream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "support/splitmix64.h"
#include "tessera/alloc.h"
#include "tessera/backend.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/graph_copy.h"

#if !defined(TESSERA_GRAPH_GEN_NO_RAPIDCHECK) && __has_include(<rapidcheck.h>)
#include <rapidcheck.h>
#define TESSERA_GRAPH_GEN_HAS_RAPIDCHECK 1
#endif

namespace tessera::graphgen {

constexpr int kMaxTokens = 16;  // the token count of a description is clamped to [1, kMaxTokens]

enum class StepKind : uint8_t {
  kUnary = 0,
  kScale,
  kBinary,
  kNorm,
  kSumRows,
  kGlu,
  kSoftMax,
  kRope,
  kMulMat,
  kMulMatId,
  kGetRows,
  kSetRows,
  kSort,
  kCopy,
  kView,
  kAttention,
  kAddId,      // appended: the kinds of older descriptions keep their numbers
  kClamp,      // appended
  kWriteBack,  // appended; desc_from_bytes does not draw it (kByteStepKinds)
  kCount
};

inline const char* step_kind_name(StepKind k) {
  static const char* const names[] = {"Unary", "Scale",     "Binary",   "Norm",    "SumRows",  "Glu",  "SoftMax",
                                      "Rope",  "MulMat",    "MulMatId", "GetRows", "SetRows",  "Sort", "Copy",
                                      "View",  "Attention", "AddId",    "Clamp",   "WriteBack"};
  const auto i = static_cast<size_t>(k);
  return i < static_cast<size_t>(StepKind::kCount) ? names[i] : "?";
}

// One step. a/b pick operands (modulo the number of fitting values, 0 = the most recent), p/q are op parameters
// (their bits are documented at each step in Builder::step). leaf: how fresh leafs of this step are made (0, 1:
// planned; 2: external, pre-allocated; 3: planned and INPUT). mark: 5 flags the step's result OUTPUT, 4 flags it
// INPUT (non-view nodes only; a CPY into a fresh destination flags that destination instead).
struct Step {
  StepKind kind = StepKind::kUnary;
  uint8_t a = 0;
  uint8_t b = 0;
  uint8_t p = 0;
  uint8_t q = 0;
  uint8_t leaf = 0;
  uint8_t mark = 0;
};

struct GraphDesc {
  int tokens = 1;     // T, the token / batch dimension
  int width = 32;     // E, the row width of the first input [E, T] and of fresh inputs
  uint32_t seed = 0;  // data
  std::vector<Step> steps;
};

// The same description with another token count (every token-dependent dim changes, nothing else).
inline GraphDesc with_tokens(GraphDesc d, int tokens) {
  d.tokens = tokens;
  return d;
}

// ---- printing (what RapidCheck shows for a counterexample) ----
inline std::ostream& operator<<(std::ostream& os, const Step& s) {
  os << "{StepKind::k" << step_kind_name(s.kind) << ", " << int(s.a) << ", " << int(s.b) << ", " << int(s.p) << ", "
     << int(s.q) << ", " << int(s.leaf) << ", " << int(s.mark) << "}";
  return os;
}
inline std::ostream& operator<<(std::ostream& os, const GraphDesc& d) {
  os << "GraphDesc{.tokens = " << d.tokens << ", .width = " << d.width << ", .seed = " << d.seed << ", .steps = {";
  for (size_t i = 0; i < d.steps.size(); ++i) os << (i ? ",\n    " : "\n    ") << d.steps[i];
  os << "}}  // " << d.steps.size() << " steps";
  return os;
}
inline void showValue(const GraphDesc& d, std::ostream& os) { os << d; }
inline void showValue(const Step& s, std::ostream& os) { os << s; }

// ---- bytes -> description (fuzzers) ----
// Layout: tokens, width, 4 seed bytes, then 7 bytes per step. Missing bytes read as 0. A kind byte is taken modulo
// kByteStepKinds, the kinds there were when the fuzzers' corpora were made: a kind appended later would give every
// stored input another graph (the inputs named in tests/mutation/MUTANTS.md would no longer kill their mutants), so
// later kinds are drawn by the RapidCheck generator only.
constexpr uint8_t kByteStepKinds = static_cast<uint8_t>(StepKind::kWriteBack);  // 18: kUnary .. kClamp
inline GraphDesc desc_from_bytes(const uint8_t* data, size_t size) {
  size_t at = 0;
  auto next = [&]() -> uint8_t { return at < size ? data[at++] : uint8_t{0}; };
  GraphDesc d;
  d.tokens = 1 + next() % kMaxTokens;
  static const int widths[] = {32, 8, 16, 64};
  d.width = widths[next() % 4];
  for (int i = 0; i < 4; ++i) d.seed = (d.seed << 8) | next();
  while (at < size && d.steps.size() < 64) {
    Step s;
    s.kind = static_cast<StepKind>(next() % kByteStepKinds);
    s.a = next();
    s.b = next();
    s.p = next();
    s.q = next();
    s.leaf = next() % 4;
    s.mark = next() % 6;
    d.steps.push_back(s);
  }
  return d;
}

// ---- the built graph ----
enum class FillKind : uint8_t {
  kFloat,        // non-zero values in +-[0.25, 1)
  kPositive,     // [0.5, 2) (rope frequency factors)
  kIds,          // integers in [0, bound)
  kDistinctIds,  // integers in [0, bound), distinct within each row of ne0 ids (set_rows)
  kPositions,    // small increasing positions (rope)
};

struct Fill {
  Tensor* t = nullptr;
  FillKind kind = FillKind::kFloat;
  int64_t bound = 0;  // for ids
  uint32_t id = 0;    // data stream of this leaf (its position in the value pool)
};

struct BuildOptions {
  // Where external leafs are pre-allocated (alloc_ctx_tensors). nullptr: they are created like planned leafs.
  BufferType* weight_buft = nullptr;
  // Whether views (including CPY / SET_ROWS results) may be flagged OUTPUT. When false, the OUTPUT flag a step or
  // the last sink would give a view goes to the view's source instead.
  bool output_views = true;
  // Whether every planned leaf (not external) is flagged INPUT, as llama.cpp flags every tensor it writes before an
  // evaluation: a lifecycle of several evaluations writes them again each time, which the scheduler orders after
  // the evaluation before only for inputs.
  bool planned_leafs_are_inputs = false;
};

// A small, fast generator for the leaf data (std::mt19937 spent most of a small graph's fill initialising and
// regenerating its 2.5 KiB state; the fuzzers build thousands of graphs a second): support/splitmix64.h.
using SplitMix64 = tessera::test::SplitMix64;

struct BuiltGraph {
  std::unique_ptr<Context> ctx;     // nodes and planned leafs (no_alloc)
  std::unique_ptr<Context> wctx;    // external leafs (no_alloc, allocated in `weights`)
  std::unique_ptr<Buffer> weights;  // buffer of the external leafs (null when none)
  std::unique_ptr<Graph> graph;
  std::vector<Fill> fills;         // every leaf the builder made, with the data it gets
  std::vector<Tensor*> outputs;    // tensors of the graph flagged OUTPUT, in pool order (views included)
  std::vector<Tensor*> externals;  // leafs pre-allocated in `weights`
  uint32_t seed = 0;
  int tokens = 0;
  Status status;

  bool ok() const { return status.ok(); }

  // Writes the deterministic data into every leaf that has memory (call after allocation, before computing), but
  // those in `skip` (the weights, for the evaluations after the first).
  Status fill_data(const std::unordered_set<const Tensor*>* skip = nullptr) const {
    for (const Fill& f : fills) {
      if (tensor_buffer(*f.t) == nullptr) continue;  // not in the graph (or not allocated)
      if (skip != nullptr && skip->count(f.t) != 0) continue;
      SplitMix64 rng(seed * 2654435761u ^ (f.id * 40503u + 12345u));
      const auto n = static_cast<size_t>(nelements(*f.t));
      std::vector<float> v(n);
      switch (f.kind) {
        case FillKind::kFloat: {
          for (float& x : v) x = (rng() & 1) ? rng.uniform(0.25f, 1.0f) : -rng.uniform(0.25f, 1.0f);
          break;
        }
        case FillKind::kPositive: {
          for (float& x : v) x = rng.uniform(0.5f, 2.0f);
          break;
        }
        case FillKind::kIds: {
          const auto bound = static_cast<uint32_t>(std::max<int64_t>(f.bound, 1));
          for (float& x : v) x = static_cast<float>(rng() % bound);
          break;
        }
        case FillKind::kDistinctIds: {
          const int64_t ne0 = f.t->ne[0];
          std::vector<int> perm(static_cast<size_t>(std::max<int64_t>(f.bound, ne0)));
          for (size_t row = 0; row * static_cast<size_t>(ne0) < n; ++row) {
            for (size_t i = 0; i < perm.size(); ++i) perm[i] = static_cast<int>(i);
            std::shuffle(perm.begin(), perm.end(), rng);
            float* out = v.data() + row * static_cast<size_t>(ne0);
            for (int64_t i = 0; i < ne0; ++i) out[i] = static_cast<float>(perm[static_cast<size_t>(i)]);
          }
          break;
        }
        case FillKind::kPositions: {
          const float start = static_cast<float>(rng() % 8);
          for (size_t i = 0; i < n; ++i) v[i] = start + static_cast<float>(i);
          break;
        }
      }
      TS_RETURN_IF_ERROR(tensor_from_f32(*f.t, v));
    }
    return Status::Ok();
  }

  // One line per leaf and node: position, name, op, type and shape, sources, flags, where it lives.
  std::string dump() const {
    std::ostringstream os;
    if (!graph) return "(no graph)\n";
    std::unordered_map<const Tensor*, std::string> ref;
    for (size_t i = 0; i < graph->n_leafs(); ++i) ref[graph->leaf(i)] = "leaf " + std::to_string(i);
    for (size_t i = 0; i < graph->n_nodes(); ++i) ref[graph->node(i)] = "node " + std::to_string(i);
    auto line = [&](const Tensor* t) {
      os << ref[t] << ": " << t->name << " = " << op_name(t->op) << " " << type_name(t->type) << "[" << t->ne[0] << ","
         << t->ne[1] << "," << t->ne[2] << "," << t->ne[3] << "] nb[" << t->nb[0] << "," << t->nb[1] << "," << t->nb[2]
         << "," << t->nb[3] << "]";
      bool first = true;
      for (const Tensor* s : t->src) {
        if (s == nullptr) continue;
        os << (first ? " (" : ", ") << (ref.count(s) ? ref[s] : std::string("?"));
        first = false;
      }
      if (!first) os << ")";
      if (t->view_src) os << " view of " << (ref.count(t->view_src) ? ref[t->view_src] : "?") << " +" << t->view_offs;
      if (t->flags & kFlagInput) os << " INPUT";
      if (t->flags & kFlagOutput) os << " OUTPUT";
      if (Buffer* b = tensor_buffer(*t); b != nullptr && b->base() != nullptr && t->data != nullptr) {
        os << " @" << b->type()->name() << "+"
           << (static_cast<const char*>(t->data) - static_cast<const char*>(b->base()));
      }
      os << "\n";
    };
    for (const Tensor* t : graph->leafs()) line(t);
    for (const Tensor* t : graph->nodes()) line(t);
    return os.str();
  }
};

namespace detail {

// A dim that is either a constant c or c times the token count.
struct SDim {
  int64_t c = 1;
  bool t = false;
};
inline bool operator==(SDim x, SDim y) { return x.c == y.c && x.t == y.t; }
inline bool one(SDim d) { return d.c == 1 && !d.t; }
// x <= y for every token count >= 1
inline bool le(SDim x, SDim y) { return (!x.t || y.t) && x.c <= y.c; }
inline constexpr SDim C(int64_t c) { return SDim{c, false}; }

inline bool is_float_type(Type t) { return t == Type::kF32 || t == Type::kF16 || t == Type::kBF16; }
inline bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
inline bool is_weight_type(Type t) { return is_float_type(t) || is_quant(t); }

class Builder {
 public:
  Builder(const GraphDesc& d, const BuildOptions& o, BuiltGraph& out)
      : desc_(d), opts_(o), out_(out), T_(std::clamp(d.tokens, 1, kMaxTokens)) {
    E_ = d.width >= 1 && d.width <= 64 ? d.width : 32;
  }

  void run() {
    out_.ctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
    out_.wctx = std::make_unique<Context>(ContextParams{.no_alloc = true});
    out_.graph = std::make_unique<Graph>();
    out_.seed = desc_.seed;
    out_.tokens = T_;
    ctx_ = out_.ctx.get();
    // The first input: x [E, T].
    fresh_leaf(Type::kF32, {C(E_), SDim{1, true}, C(1), C(1)}, FillKind::kFloat, {}, 3, "x");
    for (const Step& s : desc_.steps) {
      if (!ctx_->ok() || !out_.status.ok()) break;
      if (ctx_->tensor_count() + out_.wctx->tensor_count() > kMaxTensors) break;
      step(s);
    }
    if (!ctx_->ok()) {
      out_.status = Status(ctx_->status().code(), "graph generator built an invalid op: " + ctx_->status().message());
    }
    if (!out_.wctx->ok()) out_.status = out_.wctx->status();
    if (!out_.status.ok()) return;

    // The graph: every value nobody consumed (in pool order); the last one is always an OUTPUT.
    std::vector<int> sinks;
    for (size_t i = 0; i < vals_.size(); ++i) {
      if (!vals_[i].leaf && !vals_[i].used) sinks.push_back(static_cast<int>(i));
    }
    if (sinks.empty()) sinks.push_back(0);
    flag_output(vals_[static_cast<size_t>(sinks.back())].t);
    for (int i : sinks) {
      Status s = out_.graph->build_forward(vals_[static_cast<size_t>(i)].t);
      if (!s.ok()) {
        out_.status = s;
        return;
      }
    }
    for (const Val& v : vals_) {
      if (out_.graph->visited(v.t) && (v.t->flags & kFlagOutput)) out_.outputs.push_back(v.t);
    }
    if (opts_.weight_buft != nullptr && out_.wctx->tensor_count() > 0) {
      auto buf = alloc_ctx_tensors(*out_.wctx, *opts_.weight_buft);
      if (!buf.ok()) {
        out_.status = buf.status();
        return;
      }
      out_.weights = std::move(buf).value();
      if (out_.weights) out_.weights->set_usage(BufferUsage::kWeights);
    }
  }

 private:
  static constexpr size_t kMaxTensors = 200;

  struct Val {
    Tensor* t = nullptr;
    std::array<SDim, 4> d;
    bool contig = true;  // contiguous for every token count
    bool leaf = false;
    SDim bound{0, false};  // i32 values: all < bound (c == 0: unknown)
    bool used = false;
  };
  using Dims = std::array<SDim, 4>;

  static const Tensor* root(const Tensor* x) { return x->view_src != nullptr ? x->view_src : x; }
  int64_t ev(SDim d) const { return d.c * (d.t ? T_ : 1); }
  Tensor* t(int i) { return vals_[static_cast<size_t>(i)].t; }
  Val& v(int i) { return vals_[static_cast<size_t>(i)]; }
  void use(int i) { v(i).used = true; }

  void fail(const std::string& why) {
    if (out_.status.ok()) out_.status = Status(StatusCode::kFailed, "graph generator: " + why);
  }

  // Records a new value; checks the symbolic shape against the real one.
  int add(Tensor* tensor, const Dims& d, bool contig, const char* role, SDim bound = {0, false}, bool leaf = false) {
    if (tensor == nullptr) {
      fail(std::string("building ") + role + " failed: " + ctx_->status().message());
      return -1;
    }
    for (int i = 0; i < 4; ++i) {
      if (tensor->ne[i] != ev(d[static_cast<size_t>(i)])) {
        fail(std::string("shape tracking of ") + role + " is off: " + describe(*tensor));
        return -1;
      }
    }
    if (contig && !is_contiguous(*tensor)) {
      fail(std::string("contiguity tracking of ") + role + " is off: " + describe(*tensor));
      return -1;
    }
    Val val;
    val.t = tensor;
    val.d = d;
    val.contig = contig;
    val.leaf = leaf;
    val.bound = bound;
    vals_.push_back(val);
    const int idx = static_cast<int>(vals_.size()) - 1;
    format_name(*tensor, "v%d.%s", idx, role);
    return idx;
  }

  // A fresh leaf. mode: 2 external, 3 INPUT, else planned.
  int fresh_leaf(Type type, const Dims& d, FillKind kind, SDim bound, uint8_t mode, const char* role) {
    const bool external = mode == 2 && opts_.weight_buft != nullptr;
    Context& c = external ? *out_.wctx : *ctx_;
    Tensor* tensor = c.new_tensor_4d(type, ev(d[0]), ev(d[1]), ev(d[2]), ev(d[3]));
    const bool ids = kind == FillKind::kIds || kind == FillKind::kDistinctIds;
    const int i = add(tensor, d, true, role, ids ? bound : SDim{0, false}, true);
    if (i < 0) return -1;
    if (mode == 3 || (!external && opts_.planned_leafs_are_inputs)) set_input(*tensor);
    if (external) out_.externals.push_back(tensor);
    out_.fills.push_back(Fill{tensor, kind, ev(bound), static_cast<uint32_t>(i)});
    return i;
  }
  int fresh_input() {
    return fresh_leaf(Type::kF32, {C(E_), SDim{1, true}, C(1), C(1)}, FillKind::kFloat, {}, 3, "input");
  }

  // The value chosen by `choice` among those accepted by pred, most recent first; -1 when none fits.
  template <typename Pred>
  int pick(uint8_t choice, Pred pred) {
    std::vector<int> cand;
    for (int i = static_cast<int>(vals_.size()) - 1; i >= 0; --i) {
      if (pred(vals_[static_cast<size_t>(i)])) cand.push_back(i);
    }
    if (cand.empty()) return -1;
    return cand[choice % cand.size()];
  }

  static Type float_type(unsigned sel) {
    static const Type ts[] = {Type::kF32, Type::kF16, Type::kBF16};
    return ts[sel % 3];
  }
  // A Weight type; quantized only when ne0 is a constant multiple of 32 (else f16).
  static Type weight_type(unsigned sel, SDim ne0) {
    static const Type ts[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0};
    const Type ty = ts[sel % 5];
    if (is_quant(ty) && (ne0.t || ne0.c % 32 != 0)) return Type::kF16;
    return ty;
  }
  static bool fits_bcast(const Val& b, const Val& a) {
    for (size_t i = 0; i < 4; ++i) {
      if (!one(b.d[i]) && !(b.d[i] == a.d[i])) return false;
    }
    return true;
  }
  // The element count as one dim, when it is representable (at most one token dim).
  static bool flat(const Dims& d, SDim* out) {
    SDim r = C(1);
    for (const SDim& x : d) {
      if (x.t && r.t) return false;
      r.c *= x.c;
      r.t = r.t || x.t;
    }
    *out = r;
    return true;
  }
  bool is_float(const Val& x) const { return is_float_type(x.t->type); }
  int any_float(uint8_t choice) {
    int a = pick(choice, [&](const Val& x) { return is_float(x); });
    return a >= 0 ? a : fresh_input();
  }

  void flag_output(Tensor* x) {
    if (!opts_.output_views && x->view_src != nullptr) x = x->view_src;
    set_output(*x);
  }

  void mark(int i, const Step& s) {
    if (i < 0) return;
    Tensor* r = t(i);
    if (s.mark == 5) flag_output(r);
    if (s.mark == 4 && r->view_src == nullptr && r->op != Op::kNone) set_input(*r);
  }

  void step(const Step& s) {
    int r = -1;
    switch (s.kind) {
      case StepKind::kUnary: {  // p % 4: silu, gelu, relu, neg
        const int a = any_float(s.a);
        if (a < 0) return;
        use(a);
        r = add(unary(*ctx_, t(a), static_cast<UnaryOp>(s.p % 4)), v(a).d, true, "unary");
        break;
      }
      case StepKind::kScale: {  // p: scale, q: bias
        const int a = any_float(s.a);
        if (a < 0) return;
        use(a);
        r = add(scale(*ctx_, t(a), 0.5f + 0.25f * static_cast<float>(s.p % 4),
                      0.125f * static_cast<float>(static_cast<int>(s.q % 3) - 1)),
                v(a).d, true, "scale");
        break;
      }
      case StepKind::kBinary: {  // p % 3: add, mul, div; q & 1: fresh b (dims i set to 1 by bit 2+i of p)
        const int a = any_float(s.a);
        if (a < 0) return;
        int b = -1;
        if (s.q & 1) {
          Dims d = v(a).d;
          for (size_t i = 0; i < 4; ++i) {
            if ((s.p >> (2 + i)) & 1) d[i] = C(1);
          }
          b = fresh_leaf(float_type(s.q >> 1), d, FillKind::kFloat, {}, s.leaf, "bcast");
        } else {
          b = pick(s.b, [&](const Val& x) { return is_float(x) && fits_bcast(x, v(a)); });
        }
        if (b < 0) return;
        use(a);
        use(b);
        static Tensor* (*const fns[])(Context&, Tensor*, Tensor*) = {tessera::add, tessera::mul, tessera::div};
        static const char* const names[] = {"add", "mul", "div"};
        r = add(fns[s.p % 3](*ctx_, t(a), t(b)), v(a).d, true, names[s.p % 3]);
        break;
      }
      case StepKind::kNorm: {  // p & 1: norm (else rms_norm); q & 1: eps
        const int a = any_float(s.a);
        if (a < 0) return;
        use(a);
        const float eps = (s.q & 1) ? 1e-5f : 1e-6f;
        r = add((s.p & 1) ? norm(*ctx_, t(a), eps) : rms_norm(*ctx_, t(a), eps), v(a).d, true,
                (s.p & 1) ? "norm" : "rms_norm");
        break;
      }
      case StepKind::kSumRows: {
        const int a = any_float(s.a);
        if (a < 0) return;
        use(a);
        Dims d = v(a).d;
        d[0] = C(1);
        r = add(sum_rows(*ctx_, t(a)), d, true, "sum_rows");
        break;
      }
      case StepKind::kGlu: {  // p % 3: single, single swapped, two-input; q & 1: geglu; q & 2: swiglu_oai
        const int a = any_float(s.a);
        if (a < 0) return;
        const auto op = (s.q & 2) ? GluOp::kSwigluOai : static_cast<GluOp>(s.q & 1);
        // SWIGLU_OAI with alpha 1.702 and a limit of 0.5 to 4 (q >> 2): the generated values reach past it.
        auto make_glu = [&](Tensor* x, Tensor* y, bool swapped) {
          return op == GluOp::kSwigluOai
                     ? swiglu_oai(*ctx_, x, y, 1.702f, 0.5f * static_cast<float>(1 + (s.q >> 2) % 8), swapped)
                     : glu(*ctx_, x, y, op, swapped);
        };
        const SDim d0 = v(a).d[0];
        if (s.p % 3 < 2 && !d0.t && d0.c % 2 == 0) {
          use(a);
          Dims d = v(a).d;
          d[0] = C(d0.c / 2);
          r = add(make_glu(t(a), nullptr, s.p % 3 == 1), d, true, "glu");
        } else {
          const int b = pick(s.b, [&](const Val& x) { return is_float(x) && x.d == v(a).d; });
          if (b < 0) return;
          use(a);
          use(b);
          r = add(make_glu(t(a), t(b), false), v(a).d, true, "glu2");
        }
        break;
      }
      case StepKind::kSoftMax: {  // p % 3: no mask, fresh mask, mask from the pool; q & 1: f16 mask; q >> 1: scale;
                                  // q & 16: sinks (a fresh f32 leaf, one per row of dim 2)
        const int a = any_float(s.a);
        if (a < 0) return;
        const Dims ad = v(a).d;
        int m = -1;
        if (s.p % 3 == 2) {
          m = pick(s.b, [&](const Val& x) {
            return (x.t->type == Type::kF32 || x.t->type == Type::kF16) && x.d[0] == ad[0] && x.d[1] == ad[1] &&
                   (one(x.d[2]) || x.d[2] == ad[2]) && (one(x.d[3]) || x.d[3] == ad[3]);
          });
        }
        if (s.p % 3 == 1 || (s.p % 3 == 2 && m < 0)) {
          m = fresh_leaf((s.q & 1) ? Type::kF16 : Type::kF32, {ad[0], ad[1], C(1), C(1)}, FillKind::kFloat, {}, s.leaf,
                         "mask");
          if (m < 0) return;
        }
        int sk = -1;
        if (s.q & 16) {
          sk = fresh_leaf(Type::kF32, {ad[2], C(1), C(1), C(1)}, FillKind::kFloat, {}, s.leaf, "sinks");
          if (sk < 0) return;
          use(sk);
        }
        use(a);
        if (m >= 0) use(m);
        r = add(soft_max(*ctx_, t(a), m >= 0 ? t(m) : nullptr, 0.125f * static_cast<float>(1 + (s.q >> 1) % 8),
                         sk >= 0 ? t(sk) : nullptr),
                ad, true, "soft_max");
        break;
      }
      case StepKind::kRope: {  // p & 1: neox; p >> 1: n_dims; q & 1: fresh positions; q & 2: freq factors
        int a = pick(s.a, [&](const Val& x) { return is_float(x) && !x.d[0].t && x.d[0].c % 2 == 0; });
        if (a < 0) a = fresh_leaf(Type::kF32, {C(8), C(2), SDim{1, true}, C(1)}, FillKind::kFloat, {}, 3, "heads");
        if (a < 0) return;
        const Dims ad = v(a).d;
        int pos = -1;
        if (!(s.q & 1)) {
          pos = pick(s.b, [&](const Val& x) {
            return x.t->type == Type::kI32 && x.d[0] == ad[2] && one(x.d[1]) && one(x.d[2]) && one(x.d[3]);
          });
        }
        if (pos < 0) pos = fresh_leaf(Type::kI32, {ad[2], C(1), C(1), C(1)}, FillKind::kPositions, {}, s.leaf, "pos");
        if (pos < 0) return;
        const int n_dims = static_cast<int>(2 * (1 + (s.p >> 1) % (ad[0].c / 2)));
        int ff = -1;
        if (s.q & 2) {
          ff = fresh_leaf(Type::kF32, {C(n_dims / 2), C(1), C(1), C(1)}, FillKind::kPositive, {}, s.leaf, "freq");
          if (ff < 0) return;
          use(ff);
        }
        use(a);
        use(pos);
        r = add(rope(*ctx_, t(a), t(pos), n_dims, (s.p & 1) ? RopeMode::kNeox : RopeMode::kNormal, 10000.0f, 1.0f,
                     ff >= 0 ? t(ff) : nullptr),
                ad, true, "rope");
        break;
      }
      case StepKind::kMulMat: {
        // a: the f32 activation; q & 1: weight from the pool (b); else a fresh weight: type p % 5, M by p / 5,
        // broadcast over dim 2 / 3 of the activation when q & 2 / q & 4.
        int x = pick(s.a, [&](const Val& y) { return y.t->type == Type::kF32; });
        if (x < 0) x = fresh_input();
        if (x < 0) return;
        const Dims xd = v(x).d;
        int w = -1;
        if (s.q & 1) {
          w = pick(s.b, [&](const Val& y) {
            return is_weight_type(y.t->type) && y.d[0] == xd[0] && (one(y.d[2]) || y.d[2] == xd[2]) &&
                   (one(y.d[3]) || y.d[3] == xd[3]);
          });
        }
        if (w < 0) {
          static const int64_t ms[] = {4, 8, 16, 32, 64, 1};
          w = fresh_leaf(weight_type(s.p % 5, xd[0]),
                         {xd[0], C(ms[(s.p / 5) % 6]), (s.q & 2) ? xd[2] : C(1), (s.q & 4) ? xd[3] : C(1)},
                         FillKind::kFloat, {}, s.leaf, "weight");
          if (w < 0) return;
        }
        use(x);
        use(w);
        const Dims wd = v(w).d;
        r = add(mul_mat(*ctx_, t(w), t(x)), {wd[1], xd[1], xd[2], xd[3]}, true, "mul_mat");
        break;
      }
      case StepKind::kMulMatId: {
        // a: the activation ([K, N] reshaped to [K, 1, N], or [K, U, N] with U <= 4 experts used per token);
        // p % 4: experts - 2; p >> 2: expert weight type; q: experts used, ids from a router (q & 16), rows M (q >> 5)
        int x = pick(s.a, [&](const Val& y) {
          return y.t->type == Type::kF32 && !y.d[0].t && one(y.d[3]) && (one(y.d[2]) || (!y.d[1].t && y.d[1].c <= 4));
        });
        if (x < 0) x = fresh_input();
        if (x < 0) return;
        const Dims xd = v(x).d;
        const SDim K = xd[0];
        int64_t n_expert = 2 + s.p % 4;
        int64_t n_used = 1 + s.q % n_expert;
        int b = -1;
        SDim N;
        bool two_d = one(xd[2]);
        if (two_d) {
          N = xd[1];
          int src = x;
          if (!v(x).contig) {
            use(x);
            src = add(cont(*ctx_, t(x)), xd, true, "cont");
            if (src < 0) return;
          }
          use(src);
          b = add(reshape_3d(*ctx_, t(src), ev(K), 1, ev(N)), {K, C(1), N, C(1)}, true, "tokens3d");
        } else {
          N = xd[2];
          if (!one(xd[1])) {
            n_used = xd[1].c;
            n_expert = std::max(n_expert, n_used);
          }
          b = x;
        }
        if (b < 0) return;
        int ids = -1;
        if ((s.q & 16) && two_d) {
          const int rw = fresh_leaf(Type::kF32, {K, C(n_expert), C(1), C(1)}, FillKind::kFloat, {}, s.leaf, "router");
          if (rw < 0) return;
          use(rw);
          use(x);
          const int logits = add(mul_mat(*ctx_, t(rw), t(x)), {C(n_expert), N, C(1), C(1)}, true, "logits");
          if (logits < 0) return;
          use(logits);
          ids = add(top_k(*ctx_, t(logits), static_cast<int>(n_used)), {C(n_used), N, C(1), C(1)}, true, "top_k",
                    C(n_expert));
        } else {
          ids = fresh_leaf(Type::kI32, {C(n_used), N, C(1), C(1)}, FillKind::kIds, C(n_expert), s.leaf, "ids");
        }
        if (ids < 0) return;
        static const int64_t ms[] = {8, 16, 32};
        const SDim M = C(ms[(s.q >> 5) % 3]);
        const int as =
            fresh_leaf(weight_type(s.p >> 2, K), {K, M, C(n_expert), C(1)}, FillKind::kFloat, {}, s.leaf, "experts");
        if (as < 0) return;
        use(as);
        use(b);
        use(ids);
        r = add(mul_mat_id(*ctx_, t(as), t(b), t(ids)), {M, C(n_used), N, C(1)}, true, "mul_mat_id");
        break;
      }
      case StepKind::kGetRows: {
        // p & 1: a fresh table (type p >> 1, rows 4 + q % 29), else a value of the pool (a);
        // q & 32: fresh ids (else ids of the pool when one fits, b); q & 64: T ids (else 1 + q % 8).
        int a = -1;
        if (!(s.p & 1)) {
          a = pick(s.a, [&](const Val& y) { return y.t->type != Type::kI32 || y.bound.c > 0; });
        }
        if (a < 0) {
          a = fresh_leaf(weight_type(s.p >> 1, C(E_)), {C(E_), C(4 + s.q % 29), C(1), C(1)}, FillKind::kFloat, {},
                         s.leaf, "table");
        }
        if (a < 0) return;
        const Dims ad = v(a).d;
        int ids = -1;
        if (!(s.q & 32)) {
          ids = pick(s.b, [&](const Val& y) {
            return y.t->type == Type::kI32 && y.bound.c > 0 && le(y.bound, ad[1]) && y.d[1] == ad[2] &&
                   y.d[2] == ad[3] && one(y.d[3]);
          });
        }
        if (ids < 0) {
          const SDim n = (s.q & 64) ? SDim{1, true} : C(1 + s.q % 8);
          ids = fresh_leaf(Type::kI32, {n, ad[2], ad[3], C(1)}, FillKind::kIds, ad[1], s.leaf, "rows");
        }
        if (ids < 0) return;
        use(a);
        use(ids);
        const bool i32 = t(a)->type == Type::kI32;
        r = add(get_rows(*ctx_, t(a), t(ids)), {ad[0], v(ids).d[0], ad[2], ad[3]}, true, "get_rows",
                i32 ? v(a).bound : SDim{0, false});
        break;
      }
      case StepKind::kSetRows: {
        // a: rows (f32); p & 1: destination from the pool (b), else a fresh cache (type p >> 1, q % 8 spare rows)
        const int rows = pick(s.a, [&](const Val& y) { return y.t->type == Type::kF32; });
        if (rows < 0) return;
        const Dims rd = v(rows).d;
        int dst = -1;
        if (s.p & 1) {
          dst = pick(s.b, [&](const Val& y) {
            // never a destination sharing memory with the rows (threads would read what others write)
            return is_weight_type(y.t->type) && y.d[0] == rd[0] && y.d[2] == rd[2] && y.d[3] == rd[3] &&
                   le(rd[1], y.d[1]) && root(y.t) != root(t(rows));
          });
        }
        if (dst < 0) {
          const SDim R = rd[1].t ? C(rd[1].c * kMaxTokens + s.q % 4) : C(rd[1].c + s.q % 8);
          dst =
              fresh_leaf(weight_type(s.p >> 1, rd[0]), {rd[0], R, rd[2], rd[3]}, FillKind::kFloat, {}, s.leaf, "cache");
        }
        if (dst < 0) return;
        const int ids =
            fresh_leaf(Type::kI32, {rd[1], rd[2], rd[3], C(1)}, FillKind::kDistinctIds, v(dst).d[1], s.leaf, "slots");
        if (ids < 0) return;
        use(rows);
        use(dst);
        use(ids);
        r = add(set_rows(*ctx_, t(dst), t(rows), t(ids)), v(dst).d, v(dst).contig, "set_rows");
        break;
      }
      case StepKind::kSort: {  // p & 1: argsort (q & 1: descending), else top_k with k = 1 + q % ne0
        const int a = any_float(s.a);
        if (a < 0) return;
        use(a);
        Dims d = v(a).d;
        if (s.p & 1) {
          r = add(argsort(*ctx_, t(a), (s.q & 1) ? SortOrder::kDesc : SortOrder::kAsc), d, true, "argsort", d[0]);
        } else {
          const int64_t k = d[0].t ? 1 : 1 + s.q % d[0].c;
          const SDim bound = d[0];
          d[0] = C(k);
          r = add(top_k(*ctx_, t(a), static_cast<int>(k)), d, true, "top_k", bound);
        }
        break;
      }
      case StepKind::kCopy: {
        // p % 4: cont, dup, cpy into a fresh tensor (type by q % 4, flat when q & 16), cpy into a view of a cache.
        // The fresh destination is planned, external (leaf 2), or an INPUT when the step is marked INPUT (mark 4,
        // leaf not 2): a graph that writes into a tensor the application writes too, as the scheduler must order
        // (docs/scheduler.md, execution step 3).
        const uint8_t dst_mode = s.mark == 4 && s.leaf != 2 ? 3 : s.leaf == 3 ? 0 : s.leaf;
        const int a = pick(s.a, [](const Val&) { return true; });
        if (a < 0) return;
        const Dims ad = v(a).d;
        const bool i32 = t(a)->type == Type::kI32;
        int mode = s.p % 4;
        SDim n;
        if (mode == 3 && !flat(ad, &n)) mode = 2;
        if (mode < 2) {
          use(a);
          r = add(mode == 0 ? cont(*ctx_, t(a)) : dup(*ctx_, t(a)), ad, true, mode == 0 ? "cont" : "dup", v(a).bound);
        } else if (mode == 2) {
          Dims bd = ad;
          Type ty = i32 ? Type::kI32 : (s.q % 4 < 3 ? float_type(s.q % 4) : weight_type(3 + ((s.q >> 2) & 1), ad[0]));
          if ((s.q & 16) && flat(ad, &n)) {
            bd = {n, C(1), C(1), C(1)};
            if (is_quant(ty)) ty = weight_type(3 + ((s.q >> 2) & 1), n);
          }
          const int b = fresh_leaf(ty, bd, FillKind::kFloat, {}, dst_mode, "copy_dst");
          if (b < 0) return;
          use(a);
          use(b);
          r = add(cpy(*ctx_, t(a), t(b)), bd, true, "cpy", v(a).bound);
        } else {
          const int64_t extra = s.q % 8;
          const SDim len = n.t ? C(n.c * kMaxTokens + extra) : C(n.c + extra);
          const Type ty = i32 ? Type::kI32 : float_type(s.q >> 3);
          const int cache = fresh_leaf(ty, {len, C(1), C(1), C(1)}, FillKind::kFloat, {}, dst_mode, "flat_cache");
          if (cache < 0) return;
          const int64_t off = (s.q >> 4) % (extra + 1);
          use(cache);
          const int view = add(view_1d(*ctx_, t(cache), ev(n), static_cast<size_t>(off) * type_traits(ty).type_size),
                               {n, C(1), C(1), C(1)}, true, "cache_view");
          if (view < 0) return;
          use(a);
          use(view);
          r = add(cpy(*ctx_, t(a), t(view)), {n, C(1), C(1), C(1)}, true, "cpy_to_cache", v(a).bound);
        }
        break;
      }
      case StepKind::kView: r = view_step(s); break;
      case StepKind::kAttention: r = attention_step(s); break;
      case StepKind::kAddId: {  // a: an f32 value [E, U, N, 1]; 2 + p % 7 experts: fresh biases and ids
        const int a = pick(s.a, [&](const Val& x) { return x.t->type == Type::kF32 && one(x.d[3]); });
        if (a < 0) return;
        const Dims ad = v(a).d;
        const SDim n_expert = C(2 + s.p % 7);
        const int bias = fresh_leaf(Type::kF32, {ad[0], n_expert, C(1), C(1)}, FillKind::kFloat, {}, s.leaf, "biases");
        if (bias < 0) return;
        const int ids = fresh_leaf(Type::kI32, {ad[1], ad[2], C(1), C(1)}, FillKind::kIds, n_expert, s.leaf, "ids");
        if (ids < 0) return;
        use(a);
        use(bias);
        use(ids);
        r = add(add_id(*ctx_, t(a), t(bias), t(ids)), ad, true, "add_id");
        break;
      }
      case StepKind::kClamp: {  // a: an f32 value; p % 6: the bounds (none zero, so no zero reaches a DIV)
        int a = pick(s.a, [&](const Val& x) { return x.t->type == Type::kF32; });
        if (a < 0) a = fresh_input();
        if (a < 0) return;
        static const float bounds[][2] = {{-INFINITY, INFINITY}, {-0.5f, 0.5f},   {0.5f, INFINITY},
                                          {-INFINITY, -0.5f},    {-0.75f, 0.25f}, {6.103515625e-5f, INFINITY}};
        use(a);
        r = add(clamp(*ctx_, t(a), bounds[s.p % 6][0], bounds[s.p % 6][1]), v(a).d, true, "clamp");
        break;
      }
      case StepKind::kWriteBack: r = write_back_step(s); break;
      case StepKind::kCount: return;
    }
    mark(r, s);
  }

  // A write into a leaf that an earlier step read: the graph reads a state, then stores the next one over it (a
  // SET_ROWS or CPY after the read, in graph order). In one evaluation the read comes first; across evaluations the
  // write must come before the next evaluation's read, which the scheduler orders (docs/scheduler.md, "Who must be done
  // before a write"). The general SetRows / Copy steps write into an earlier leaf only when one happens to fit.
  // a: the leaf, among the float leafs read so far (none: no step). p & 1: SET_ROWS of 1 + q % ne1 rows (p & 2: the
  // rows are an earlier value that fits, else fresh), else a CPY of a fresh value of the leaf's shape into it.
  int write_back_step(const Step& s) {
    const int dst = pick(s.a, [](const Val& y) { return y.leaf && y.used && is_weight_type(y.t->type); });
    if (dst < 0) return -1;
    const Dims dd = v(dst).d;
    if (s.p & 1) {
      int rows = -1;
      if (s.p & 2) {
        rows = pick(s.b, [&](const Val& y) {
          return y.t->type == Type::kF32 && y.d[0] == dd[0] && y.d[2] == dd[2] && y.d[3] == dd[3] &&
                 le(y.d[1], dd[1]) && root(y.t) != root(t(dst));
        });
      }
      if (rows < 0) {
        rows = fresh_leaf(Type::kF32, {dd[0], C(1 + s.q % dd[1].c), dd[2], dd[3]}, FillKind::kFloat, {}, s.leaf,
                          "next_rows");
      }
      if (rows < 0) return -1;
      const int ids = fresh_leaf(Type::kI32, {v(rows).d[1], dd[2], dd[3], C(1)}, FillKind::kDistinctIds, dd[1], s.leaf,
                                 "next_slots");
      if (ids < 0) return -1;
      use(rows);
      use(dst);
      use(ids);
      return add(set_rows(*ctx_, t(dst), t(rows), t(ids)), dd, true, "write_back");
    }
    const int src = fresh_leaf(Type::kF32, dd, FillKind::kFloat, {}, s.leaf, "next_state");
    if (src < 0) return -1;
    use(src);
    use(dst);
    return add(cpy(*ctx_, t(src), t(dst)), dd, true, "write_back");
  }

  // p % 5: reshape (q % 4: merge dims 0-1, split dim 0, flatten, insert a unit dim 1), permute (axes by q),
  // transpose, slice of one constant dim (by q), one row as a 1-d view (row q % ne1).
  int view_step(const Step& s) {
    const int a = pick(s.a, [](const Val&) { return true; });
    if (a < 0) return -1;
    const Val va = v(a);  // a copy: adding values may move the pool
    const Dims ad = va.d;
    const bool quant = is_quant(va.t->type);
    const SDim bound = va.bound;
    int mode = s.p % 5;
    if (mode == 0 && !va.contig) mode = 1;
    if (mode == 4 && ad[1].t) mode = 3;
    if (mode == 2 && quant) mode = 1;
    if (mode == 0) {
      for (int attempt = 0; attempt < 4; ++attempt) {
        Dims nd;
        bool ok = false;
        switch ((s.q + attempt) % 4) {
          case 0:  // merge dims 0 and 1
            if (!(ad[0].t && ad[1].t)) {
              nd = {SDim{ad[0].c * ad[1].c, ad[0].t || ad[1].t}, ad[2], ad[3], C(1)};
              ok = true;
            }
            break;
          case 1: {  // split dim 0 into f x (c / f)
            if (ad[0].t || !one(ad[3])) break;
            std::vector<int64_t> fs;
            for (int64_t f = 2; f < ad[0].c; ++f) {
              if (ad[0].c % f == 0 && (!quant || f % 32 == 0)) fs.push_back(f);
            }
            if (fs.empty()) break;
            const int64_t f = fs[(s.q >> 2) % fs.size()];
            nd = {C(f), C(ad[0].c / f), ad[1], ad[2]};
            ok = true;
            break;
          }
          case 2: {  // flatten
            SDim n;
            if (flat(ad, &n)) {
              nd = {n, C(1), C(1), C(1)};
              ok = true;
            }
            break;
          }
          case 3:  // insert a unit dim at 1
            if (one(ad[3])) {
              nd = {ad[0], C(1), ad[1], ad[2]};
              ok = true;
            }
            break;
        }
        if (ok) {
          use(a);
          return add(reshape_4d(*ctx_, t(a), ev(nd[0]), ev(nd[1]), ev(nd[2]), ev(nd[3])), nd, true, "reshape", bound);
        }
      }
      mode = 1;
    }
    if (mode == 1) {
      std::array<int, 4> axes = {0, 1, 2, 3};
      std::vector<std::array<int, 4>> perms;
      do {
        if (!quant || axes[0] == 0) perms.push_back(axes);
      } while (std::next_permutation(axes.begin(), axes.end()));
      axes = perms[s.q % perms.size()];
      Dims nd;
      for (size_t i = 0; i < 4; ++i) nd[static_cast<size_t>(axes[i])] = ad[i];
      const bool identity = axes == std::array<int, 4>{0, 1, 2, 3};
      use(a);
      return add(permute(*ctx_, t(a), axes[0], axes[1], axes[2], axes[3]), nd, identity && va.contig, "permute", bound);
    }
    if (mode == 2) {
      use(a);
      return add(transpose(*ctx_, t(a)), {ad[1], ad[0], ad[2], ad[3]}, false, "transpose", bound);
    }
    if (mode == 3) {
      std::vector<int> dims;
      for (int i = quant ? 1 : 0; i < 4; ++i) {
        if (!ad[static_cast<size_t>(i)].t && ad[static_cast<size_t>(i)].c >= 2) dims.push_back(i);
      }
      if (dims.empty()) return -1;
      const int i = dims[s.q % dims.size()];
      const int64_t c = ad[static_cast<size_t>(i)].c;
      const int64_t n = 1 + (s.q >> 2) % c;
      const int64_t o = (s.q >> 5) % (c - n + 1);
      Tensor* at = t(a);
      int64_t ne[4] = {at->ne[0], at->ne[1], at->ne[2], at->ne[3]};
      ne[i] = n;
      Dims nd = ad;
      nd[static_cast<size_t>(i)] = C(n);
      use(a);
      return add(view_4d(*ctx_, at, ne[0], ne[1], ne[2], ne[3], at->nb[1], at->nb[2], at->nb[3],
                         static_cast<size_t>(o) * at->nb[i]),
                 nd, false, "slice", bound);
    }
    // mode 4: one row
    const int64_t row = s.q % ad[1].c;
    use(a);
    Tensor* at = t(a);
    return add(view_1d(*ctx_, at, at->ne[0], static_cast<size_t>(row) * at->nb[1]), {ad[0], C(1), C(1), C(1)},
               va.contig, "row", bound);
  }

  // q: f32 [D, n_q, H, B] of the pool (a). p % (divisors of H): kv heads; p & 16: k and v from the pool (b), else
  // fresh (type p >> 5, n_kv = T when q & 1 else 1 + (q >> 1) % 16, Dv by q >> 1); q & 8: mask (q & 16: f16);
  // q & 32: sinks.
  int attention_step(const Step& s) {
    int qi = pick(s.a, [](const Val& y) { return y.t->type == Type::kF32 && !y.d[0].t && !y.d[2].t && !y.d[3].t; });
    if (qi < 0) qi = fresh_leaf(Type::kF32, {C(16), SDim{1, true}, C(2), C(1)}, FillKind::kFloat, {}, 3, "q");
    if (qi < 0) return -1;
    const Dims qd = v(qi).d;
    const int64_t H = qd[2].c;
    std::vector<int64_t> divs;
    for (int64_t d = 1; d <= H; ++d) {
      if (H % d == 0) divs.push_back(d);
    }
    const int64_t H_kv = divs[s.p % divs.size()];
    int k = -1, vv = -1;
    if (s.p & 16) {
      k = pick(s.b, [&](const Val& y) {
        return is_weight_type(y.t->type) && y.d[0] == qd[0] && !y.d[2].t && H % y.d[2].c == 0 && y.d[3] == qd[3];
      });
      if (k >= 0) {
        const Dims kd = v(k).d;
        vv = pick(static_cast<uint8_t>(s.b + 1), [&](const Val& y) {
          return is_weight_type(y.t->type) && y.d[1] == kd[1] && y.d[2] == kd[2] && y.d[3] == kd[3];
        });
      }
    }
    if (k < 0 || vv < 0) {
      const SDim n_kv = (s.q & 1) ? SDim{1, true} : C(1 + (s.q >> 1) % 16);
      static const int64_t dvs[] = {0, 8, 32};
      const int64_t dv = dvs[(s.q >> 1) % 3] == 0 ? qd[0].c : dvs[(s.q >> 1) % 3];
      k = fresh_leaf(weight_type(s.p >> 5, qd[0]), {qd[0], n_kv, C(H_kv), qd[3]}, FillKind::kFloat, {}, s.leaf, "k");
      if (k < 0) return -1;
      vv = fresh_leaf(weight_type(s.p >> 5, C(dv)), {C(dv), n_kv, C(H_kv), qd[3]}, FillKind::kFloat, {}, s.leaf, "v");
      if (vv < 0) return -1;
    }
    const SDim n_kv = v(k).d[1];
    int mask = -1, sinks = -1;
    if (s.q & 8) {
      mask = fresh_leaf((s.q & 16) ? Type::kF16 : Type::kF32, {n_kv, qd[1], C(1), C(1)}, FillKind::kFloat, {}, s.leaf,
                        "kq_mask");
      if (mask < 0) return -1;
      use(mask);
    }
    if (s.q & 32) {
      sinks = fresh_leaf(Type::kF32, {C(H), C(1), C(1), C(1)}, FillKind::kFloat, {}, s.leaf, "sinks");
      if (sinks < 0) return -1;
      use(sinks);
    }
    use(qi);
    use(k);
    use(vv);
    return add(flash_attn_ext(*ctx_, t(qi), t(k), t(vv), mask >= 0 ? t(mask) : nullptr,
                              1.0f / std::sqrt(static_cast<float>(qd[0].c)), sinks >= 0 ? t(sinks) : nullptr),
               {v(vv).d[0], qd[2], qd[1], qd[3]}, true, "attn");
  }

  const GraphDesc& desc_;
  const BuildOptions& opts_;
  BuiltGraph& out_;
  Context* ctx_ = nullptr;
  int T_;
  int64_t E_;
  std::vector<Val> vals_;
};

}  // namespace detail

// Builds the graph of a description (see the top of this file). Check ok() / status: a failure is a bug of the
// generator, never of the description.
inline BuiltGraph build(const GraphDesc& desc, const BuildOptions& opts = {}) {
  BuiltGraph out;
  detail::Builder(desc, opts, out).run();
  return out;
}

#ifdef TESSERA_GRAPH_GEN_HAS_RAPIDCHECK
// ---- RapidCheck generators ----
inline rc::Gen<StepKind> gen_step_kind() {
  // Simple element-wise steps are frequent; the big composite ones rarer. Shrinks towards kUnary.
  return rc::gen::shrink(
      rc::gen::weightedElement<StepKind>({{6, StepKind::kUnary},
                                          {5, StepKind::kScale},
                                          {8, StepKind::kBinary},
                                          {4, StepKind::kNorm},
                                          {2, StepKind::kSumRows},
                                          {3, StepKind::kGlu},
                                          {3, StepKind::kSoftMax},
                                          {3, StepKind::kRope},
                                          {8, StepKind::kMulMat},
                                          {2, StepKind::kMulMatId},
                                          {2, StepKind::kGetRows},
                                          {2, StepKind::kSetRows},
                                          {2, StepKind::kSort},
                                          {4, StepKind::kCopy},
                                          {7, StepKind::kView},
                                          {2, StepKind::kAttention},
                                          {1, StepKind::kAddId},
                                          {1, StepKind::kClamp},
                                          {2, StepKind::kWriteBack}}),
      [](StepKind k) { return k == StepKind::kUnary ? rc::Seq<StepKind>() : rc::seq::just(StepKind::kUnary); });
}

inline rc::Gen<Step> gen_step() {
  auto byte = [] { return rc::gen::cast<uint8_t>(rc::gen::inRange<int>(0, 256)); };
  return rc::gen::build<Step>(rc::gen::set(&Step::kind, gen_step_kind()), rc::gen::set(&Step::a, byte()),
                              rc::gen::set(&Step::b, byte()), rc::gen::set(&Step::p, byte()),
                              rc::gen::set(&Step::q, byte()),
                              rc::gen::set(&Step::leaf, rc::gen::cast<uint8_t>(rc::gen::inRange<int>(0, 4))),
                              // mark: 3/16 OUTPUT, 1/16 INPUT; shrinks towards no mark
                              rc::gen::set(&Step::mark, rc::gen::map(rc::gen::inRange<int>(0, 16), [](int x) {
                                return static_cast<uint8_t>(x < 12 ? 0 : x == 12 ? 4 : 5);
                              })));
}

// Descriptions of up to max_steps steps (at RapidCheck's full size; fewer for small sizes). With the default, graphs
// have up to about 40 nodes (10 on average over a run of 100 cases).
inline rc::Gen<GraphDesc> gen_graph_desc(int max_steps = 40) {
  const double steps_scale = max_steps / 100.0;
  return rc::gen::build<GraphDesc>(
      rc::gen::set(&GraphDesc::tokens, rc::gen::inRange<int>(1, kMaxTokens + 1)),
      rc::gen::set(&GraphDesc::width, rc::gen::map(rc::gen::inRange<int>(0, 4),
                                                   [](int i) {
                                                     return std::array<int, 4>{32, 16, 64, 8}[i];
                                                   })),
      rc::gen::set(&GraphDesc::seed, rc::gen::arbitrary<uint32_t>()),
      rc::gen::set(&GraphDesc::steps, rc::gen::scale(steps_scale, rc::gen::container<std::vector<Step>>(
                                                                      rc::gen::scale(1.0 / steps_scale, gen_step())))));
}

// Fails the property with the graph printed after the message.
[[noreturn]] inline void fail(const BuiltGraph& g, const std::string& what) {
  RC_FAIL(what + "\n--- graph ---\n" + g.dump());
}
#endif

}  // namespace tessera::graphgen

#ifdef TESSERA_GRAPH_GEN_HAS_RAPIDCHECK
namespace rc {
template <>
struct Arbitrary<tessera::graphgen::GraphDesc> {
  static Gen<tessera::graphgen::GraphDesc> arbitrary() { return tessera::graphgen::gen_graph_desc(); }
};
}  // namespace rc
#endif
