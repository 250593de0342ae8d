// The backend conformance suite: helpers, the op catalogue and the TEST_P bodies. Instantiations live in one file
// per backend (cpu_conformance.cpp, ...) and link into the same executable.
#include "conformance/backend_conformance.h"

#include <gmock/gmock.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <iterator>
#include <limits>
#include <map>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "tessera/cpu.h"

namespace tessera::conformance {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformance);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendOpConformance);

namespace {

constexpr Type kFloatTypes[] = {Type::kF32, Type::kF16, Type::kBF16};
constexpr Type kWeightTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kQ8_0, Type::kQ4_0};
constexpr Type kAllTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kI32, Type::kQ8_0, Type::kQ4_0};
constexpr Type kNonQuantTypes[] = {Type::kF32, Type::kF16, Type::kBF16, Type::kI32};

std::string tn(Type t) { return type_name(t); }

// Test names allow only letters, digits and '_'.
std::string sanitize(const std::string& s) {
  std::string out = s;
  for (char& c : out) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return out;
}

ContextParams no_alloc() {
  ContextParams p;
  p.no_alloc = true;
  return p;
}

::testing::AssertionResult BytesEqual(const std::vector<uint8_t>& expected, const std::vector<uint8_t>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << "size " << actual.size() << ", expected " << expected.size();
  }
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] != actual[i]) {
      size_t bad = 0;
      for (size_t j = i; j < expected.size(); ++j) bad += expected[j] != actual[j];
      return ::testing::AssertionFailure() << bad << " of " << expected.size() << " bytes differ; first at byte " << i
                                           << ": expected " << int(expected[i]) << ", got " << int(actual[i]);
    }
  }
  return ::testing::AssertionSuccess();
}

::testing::AssertionResult FloatsEqual(const std::vector<float>& expected, const std::vector<float>& actual) {
  if (expected.size() != actual.size()) {
    return ::testing::AssertionFailure() << actual.size() << " values, expected " << expected.size();
  }
  size_t bad = 0, first = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (!(expected[i] == actual[i]) && bad++ == 0) first = i;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << bad << " of " << expected.size() << " values differ; first at " << first
                                       << ": expected " << expected[first] << ", got " << actual[first];
}

// Host-side encoding of values (flat, contiguous rows) with the type's reference conversion.
std::vector<uint8_t> encode(Type type, const std::vector<float>& values) {
  if (type == Type::kI32) {
    std::vector<uint8_t> out(values.size() * 4);
    for (size_t i = 0; i < values.size(); ++i) {
      const int32_t v = static_cast<int32_t>(values[i]);
      std::memcpy(out.data() + 4 * i, &v, 4);
    }
    return out;
  }
  std::vector<uint8_t> out(row_size(type, static_cast<int64_t>(values.size())));
  type_traits(type).from_float(values.data(), out.data(), static_cast<int64_t>(values.size()));
  return out;
}

std::vector<float> decode(Type type, const std::vector<uint8_t>& bytes, size_t n) {
  std::vector<float> out(n);
  if (type == Type::kI32) {
    for (size_t i = 0; i < n; ++i) {
      int32_t v;
      std::memcpy(&v, bytes.data() + 4 * i, 4);
      out[i] = static_cast<float>(v);
    }
    return out;
  }
  type_traits(type).to_float(bytes.data(), out.data(), static_cast<int64_t>(n));
  return out;
}

Result<std::unique_ptr<Buffer>> alloc_on(Context& ctx, BufferType& buft) {
  auto r = alloc_ctx_tensors(ctx, buft);
  if (r.ok() && !r.value()) return Status(StatusCode::kFailed, "alloc_ctx_tensors allocated nothing");
  return r;
}

#define CONF_ASSIGN_BUFFER(var, expr)                                              \
  std::unique_ptr<Buffer> var;                                                     \
  {                                                                                \
    auto conf_r_ = (expr);                                                         \
    ASSERT_TRUE(conf_r_.ok()) << #expr << ": " << conf_r_.status().to_string();    \
    var = std::move(conf_r_.value());                                              \
    ASSERT_NE(var, nullptr);                                                       \
  }

}  // namespace

// An impossible allocation must come back as null (then an error status), as it does without the sanitizer,
// instead of AddressSanitizer aborting the process.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }

// ---------------------------------------------------------------------------------------------------------------
// Printing, tolerances.

void PrintTo(const BackendFactory& f, std::ostream* os) { *os << "BackendFactory{" << f.name << "}"; }
void PrintTo(const OpCase& c, std::ostream* os) { *os << "OpCase{" << c.name << "}"; }

double nmse_tolerance(const BackendFactory& f, const Tensor& node) {
  if (f.nmse_override) {
    if (auto o = f.nmse_override(node)) return *o;
  }
  switch (node.type) {
    case Type::kF32: return f.f32_nmse;
    case Type::kF16:
    case Type::kBF16: return f.half_nmse;
    case Type::kQ8_0:
    case Type::kQ4_0: return f.quant_nmse;
    default: return 0.0;  // i32: compared exactly
  }
}

namespace {

bool quantizes_activations(const Tensor& t) {
  if (t.op != Op::kMulMat && t.op != Op::kMulMatId) return false;
  const Tensor* w = t.src[0];
  if (w == nullptr || (w->type != Type::kQ8_0 && w->type != Type::kQ4_0)) return false;
  return t.op == Op::kMulMatId || t.ne[1] < 8;
}

}  // namespace

std::optional<double> quantized_activation_nmse(const Tensor& node) {
  if (quantizes_activations(node)) return 1e-4;
  std::unordered_set<const Tensor*> seen;  // everything node reads, through views
  std::vector<const Tensor*> todo{&node};
  while (!todo.empty()) {
    const Tensor* x = todo.back();
    todo.pop_back();
    if (x == nullptr || !seen.insert(x).second) continue;
    if (quantizes_activations(*x)) return 1e-3;
    for (const Tensor* s : x->src) todo.push_back(s);
    todo.push_back(x->view_src);
  }
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------------------------
// Random values.

ValueGen signed_values(float amp) {
  return [amp](const Tensor& t, std::mt19937& rng) {
    std::uniform_real_distribution<float> mag(amp / 8.0f, amp);
    std::bernoulli_distribution neg(0.5);
    std::vector<float> v(static_cast<size_t>(nelements(t)));
    for (float& x : v) x = neg(rng) ? -mag(rng) : mag(rng);
    return v;
  };
}

ValueGen uniform_values(float lo, float hi) {
  return [lo, hi](const Tensor& t, std::mt19937& rng) {
    std::uniform_real_distribution<float> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(nelements(t)));
    for (float& x : v) x = d(rng);
    return v;
  };
}

ValueGen int_values(int32_t lo, int32_t hi) {
  return [lo, hi](const Tensor& t, std::mt19937& rng) {
    std::uniform_int_distribution<int32_t> d(lo, hi);
    std::vector<float> v(static_cast<size_t>(nelements(t)));
    for (float& x : v) x = static_cast<float>(d(rng));
    return v;
  };
}

ValueGen distinct_indices(int32_t range) {
  return [range](const Tensor& t, std::mt19937& rng) {
    const int64_t group = t.ne[0];
    std::vector<float> v;
    std::vector<int32_t> pool(static_cast<size_t>(range));
    for (int64_t g = 0; g < nelements(t) / group; ++g) {
      std::iota(pool.begin(), pool.end(), 0);
      std::shuffle(pool.begin(), pool.end(), rng);
      for (int64_t i = 0; i < group; ++i) v.push_back(static_cast<float>(pool[static_cast<size_t>(i)]));
    }
    return v;
  };
}

ValueGen causal_mask(int64_t diag, int64_t fully_masked_row) {
  return [diag, fully_masked_row](const Tensor& t, std::mt19937& rng) {
    std::uniform_real_distribution<float> d(-1.0f, 0.0f);
    const float ninf = -std::numeric_limits<float>::infinity();
    std::vector<float> v(static_cast<size_t>(nelements(t)));
    for (size_t idx = 0; idx < v.size(); ++idx) {
      const int64_t j = static_cast<int64_t>(idx) % t.ne[0];
      const int64_t i = (static_cast<int64_t>(idx) / t.ne[0]) % t.ne[1];
      v[idx] = (j > i + diag || i == fully_masked_row) ? ninf : d(rng);
    }
    return v;
  };
}

std::vector<float> random_values(const Tensor& t, std::mt19937& rng) {
  if (t.type == Type::kI32) {
    std::vector<float> v = int_values(1, 1000)(t, rng);
    std::bernoulli_distribution neg(0.5);
    for (float& x : v) x = neg(rng) ? -x : x;
    return v;
  }
  return signed_values(1.0f)(t, rng);
}

Status fill_random(Tensor& t, std::mt19937& rng) { return tensor_from_f32(t, random_values(t, rng)); }

std::vector<uint8_t> random_bytes(size_t size, std::mt19937& rng) {
  std::uniform_int_distribution<int> d(1, 255);
  std::vector<uint8_t> v(size);
  for (uint8_t& b : v) b = static_cast<uint8_t>(d(rng));
  return v;
}

std::vector<uint8_t> read_bytes(const Tensor& t) {
  std::vector<uint8_t> v(nbytes(t));
  Status s = tensor_get(t, v.data(), 0, v.size());
  if (!s.ok()) {
    ADD_FAILURE() << "tensor_get(" << describe(t) << ") failed: " << s.to_string();
    return {};
  }
  return v;
}

::testing::AssertionResult IsOk(const Status& s) {
  if (s.ok()) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "status " << s.to_string();
}

::testing::AssertionResult outputs_match(const Tensor& expected, const Tensor& actual, double tol) {
  if (expected.type != actual.type || !same_shape(expected, actual)) {
    return ::testing::AssertionFailure() << "shape/type differ: " << describe(expected) << " vs " << describe(actual);
  }
  auto e = tensor_to_f32(expected);
  if (!e.ok()) return ::testing::AssertionFailure() << "reading " << describe(expected) << ": " << e.status().to_string();
  auto a = tensor_to_f32(actual);
  if (!a.ok()) return ::testing::AssertionFailure() << "reading " << describe(actual) << ": " << a.status().to_string();
  const std::vector<float>& ev = e.value();
  const std::vector<float>& av = a.value();
  if (ev.size() != av.size() || ev.size() != static_cast<size_t>(nelements(expected))) {
    return ::testing::AssertionFailure() << "tensor_to_f32 returned " << ev.size() << " / " << av.size()
                                         << " values for " << nelements(expected) << " elements";
  }
  if (expected.type == Type::kI32) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ev.size(); ++i) {
      if (ev[i] != av[i] && bad++ == 0) first = i;
    }
    if (bad == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << describe(actual) << ": " << bad << " of " << ev.size()
                                         << " i32 values differ; first at flat index " << first << ": expected "
                                         << ev[first] << ", got " << av[first];
  }
  for (size_t i = 0; i < ev.size(); ++i) {
    if (!std::isfinite(ev[i])) {
      return ::testing::AssertionFailure() << "reference " << describe(expected) << " has " << ev[i]
                                           << " at flat index " << i << " (output not written?)";
    }
  }
  const NmseResult r = nmse(ev.data(), av.data(), ev.size());
  if (r.nan_mismatch || !(r.nmse <= tol)) {
    size_t worst = 0;
    double wd = -1.0;
    for (size_t i = 0; i < ev.size(); ++i) {
      const double d = std::isfinite(av[i]) ? std::fabs(double(ev[i]) - double(av[i]))
                                            : std::numeric_limits<double>::infinity();
      if (d > wd) wd = d, worst = i;
    }
    return ::testing::AssertionFailure() << describe(actual) << ": NMSE " << r.nmse << " > tolerance " << tol
                                         << (r.nan_mismatch ? " (NaN/Inf mismatch)" : "") << "; worst at flat index "
                                         << worst << ": expected " << ev[worst] << ", got " << av[worst];
  }
  return ::testing::AssertionSuccess() << "NMSE " << r.nmse;
}

// ---------------------------------------------------------------------------------------------------------------
// Case building.

Tensor* CaseBuilder::add_leaf(Type type, std::initializer_list<int64_t> ne, ValueGen gen) {
  int64_t dims[4] = {1, 1, 1, 1};
  int n = 0;
  for (int64_t x : ne) dims[n++] = x;
  Tensor* t = ctx_.new_tensor(type, n, dims);
  if (!t) return nullptr;
  format_name(*t, "leaf%zu", leafs_.size());
  leafs_.push_back({t, std::move(gen)});
  return t;
}

Tensor* CaseBuilder::input(Type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3, float amp) {
  ValueGen gen = type == Type::kI32 ? ValueGen([](const Tensor& t, std::mt19937& rng) { return random_values(t, rng); })
                                    : signed_values(amp);
  return add_leaf(type, {ne0, ne1, ne2, ne3}, std::move(gen));
}

Tensor* CaseBuilder::indices(int32_t range, int64_t ne0, int64_t ne1, int64_t ne2) {
  return add_leaf(Type::kI32, {ne0, ne1, ne2}, int_values(0, range - 1));
}

Tensor* CaseBuilder::custom(Type type, std::initializer_list<int64_t> ne, ValueGen gen) {
  return add_leaf(type, ne, std::move(gen));
}

Result<CaseInstance> instantiate_case(const CaseBuildFn& build, BufferType& buft) {
  CaseInstance inst;
  inst.ctx = std::make_unique<Context>(no_alloc());
  CaseBuilder b(*inst.ctx);
  inst.out = build(b);
  if (!inst.ctx->ok()) return inst.ctx->status();
  if (!inst.out) return Status(StatusCode::kInvalidArgument, "the case builder returned no output");
  inst.leafs = b.leafs();
  inst.graph = std::make_unique<Graph>();
  TS_RETURN_IF_ERROR(inst.graph->build_forward(inst.out));
  auto buf = alloc_on(*inst.ctx, buft);
  if (!buf.ok()) return buf.status();
  inst.buffer = std::move(buf.value());
  inst.buffer->clear(0xFF);  // poison: NaN in every float type, -1 in i32
  return Result<CaseInstance>(std::move(inst));
}

Status fill_leafs_identically(CaseInstance& reference, CaseInstance& other, std::mt19937& rng) {
  if (reference.leafs.size() != other.leafs.size()) {
    return Status(StatusCode::kInvalidArgument, "instances of different builders");
  }
  for (size_t i = 0; i < reference.leafs.size(); ++i) {
    Tensor& a = *reference.leafs[i].tensor;
    Tensor& b = *other.leafs[i].tensor;
    if (!same_layout(a, b)) return Status(StatusCode::kInvalidArgument, "leaf layouts differ: " + describe(a));
    TS_RETURN_IF_ERROR(tensor_from_f32(a, reference.leafs[i].gen(a, rng)));
    std::vector<uint8_t> bytes(nbytes(a));
    TS_RETURN_IF_ERROR(tensor_get(a, bytes.data(), 0, bytes.size()));
    TS_RETURN_IF_ERROR(tensor_set(b, bytes.data(), 0, bytes.size()));
  }
  return Status::Ok();
}

Tensor* build_llama_block(CaseBuilder& b) {
  Context& ctx = b.ctx();
  const int64_t d = 64, ff = 128, n_tok = 8, n_vocab = 32;
  // Weights scaled by 1/sqrt(fan-in) so activations stay O(1) and the softmaxes do not saturate.
  auto weight = [&](int64_t k, int64_t m) { return b.input(Type::kF32, k, m, 1, 1, 1.0f / std::sqrt(float(k))); };
  Tensor* x = b.input(Type::kF32, d, n_tok);
  Tensor* attn_norm = b.input(Type::kF32, d);
  Tensor* wq = weight(d, d);
  Tensor* wk = weight(d, d);
  Tensor* wv = weight(d, d);
  Tensor* wo = weight(d, d);
  Tensor* ffn_norm = b.input(Type::kF32, d);
  Tensor* w_gate = weight(d, ff);
  Tensor* w_up = weight(d, ff);
  Tensor* w_down = weight(ff, d);
  Tensor* w_out = weight(d, n_vocab);
  Tensor* mask = b.custom(Type::kF32, {n_tok, n_tok}, causal_mask(0));

  Tensor* h = mul(ctx, rms_norm(ctx, x, 1e-5f), attn_norm);
  Tensor* q = mul_mat(ctx, wq, h);                                    // [d, n_tok]
  Tensor* k = mul_mat(ctx, wk, h);                                    // [d, n_tok]
  Tensor* v = mul_mat(ctx, wv, h);                                    // [d, n_tok]
  Tensor* kq = mul_mat(ctx, k, q);                                    // [n_kv, n_q]
  kq = soft_max(ctx, kq, mask, 1.0f / std::sqrt(float(d)));
  Tensor* vt = cont(ctx, transpose(ctx, v));                          // [n_tok, d]
  Tensor* attn = mul_mat(ctx, vt, kq);                                // [d, n_q]
  Tensor* x2 = add(ctx, x, mul_mat(ctx, wo, attn));
  Tensor* h2 = mul(ctx, rms_norm(ctx, x2, 1e-5f), ffn_norm);
  Tensor* g = silu(ctx, mul_mat(ctx, w_gate, h2));                    // [ff, n_tok]
  Tensor* u = mul_mat(ctx, w_up, h2);
  Tensor* x3 = add(ctx, x2, mul_mat(ctx, w_down, mul(ctx, g, u)));
  Tensor* logits = mul_mat(ctx, w_out, x3);                           // [n_vocab, n_tok]
  Tensor* probs = soft_max(ctx, logits);
  if (probs) set_name(*probs, "probs");
  return probs;
}

// ---------------------------------------------------------------------------------------------------------------
// The op catalogue.

namespace {

std::vector<OpCase> make_catalogue() {
  std::vector<OpCase> cases;
  auto add_case = [&](Op op, const std::string& name, CaseBuildFn fn) {
    cases.push_back({sanitize(name), op, std::move(fn)});
  };

  // ---- views: the output is the view itself (read through view_src on each backend) ----
  for (Type t : kAllTypes) {
    const std::string s = tn(t);
    add_case(Op::kView, "view_1d_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4);
      return a ? view_1d(b.ctx(), a, 64, a->nb[1]) : nullptr;
    });
    // Second half of each of three rows: non-contiguous.
    add_case(Op::kView, "view_2d_strided_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4);
      return a ? view_2d(b.ctx(), a, 32, 3, a->nb[1], row_size(t, 32)) : nullptr;
    });
    add_case(Op::kView, "view_4d_" + s, [t](CaseBuilder& b) -> Tensor* {
      Tensor* a = b.input(t, 64, 4, 3, 2);
      return a ? view_4d(b.ctx(), a, 32, 2, 3, 1, a->nb[1], a->nb[2], a->nb[3], a->nb[3] + a->nb[1] + row_size(t, 32))
               : nullptr;
    });
    add_case(Op::kReshape, "reshape_2d_" + s,
             [t](CaseBuilder& b) { return reshape_2d(b.ctx(), b.input(t, 64, 6), 128, 3); });
    add_case(Op::kReshape, "reshape_4d_" + s,
             [t](CaseBuilder& b) { return reshape_4d(b.ctx(), b.input(t, 64, 6), 32, 2, 3, 2); });
    add_case(Op::kPermute, "permute_0213_" + s,
             [t](CaseBuilder& b) { return permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3); });
  }
  for (Type t : kNonQuantTypes) {
    const std::string s = tn(t);
    add_case(Op::kPermute, "permute_1203_" + s,
             [t](CaseBuilder& b) { return permute(b.ctx(), b.input(t, 6, 3, 4, 2), 1, 2, 0, 3); });
    add_case(Op::kTranspose, "transpose_" + s, [t](CaseBuilder& b) { return transpose(b.ctx(), b.input(t, 16, 5)); });
  }

  // ---- copies ----
  for (Type ta : kWeightTypes) {
    for (Type tb : kWeightTypes) {
      add_case(Op::kCpy, "cpy_" + tn(ta) + "_" + tn(tb), [ta, tb](CaseBuilder& b) {
        return cpy(b.ctx(), b.input(ta, 64, 4), b.input(tb, 128, 2));  // same count, different shape: flat order
      });
    }
  }
  add_case(Op::kCpy, "cpy_i32_i32",
           [](CaseBuilder& b) { return cpy(b.ctx(), b.input(Type::kI32, 64, 4), b.input(Type::kI32, 128, 2)); });
  for (Type ta : kFloatTypes) {
    for (Type tb : kWeightTypes) {
      add_case(Op::kCpy, "cpy_transposed_" + tn(ta) + "_" + tn(tb), [ta, tb](CaseBuilder& b) {
        return cpy(b.ctx(), transpose(b.ctx(), b.input(ta, 8, 64)), b.input(tb, 64, 8));
      });
    }
  }
  add_case(Op::kCpy, "cpy_transposed_i32_i32", [](CaseBuilder& b) {
    return cpy(b.ctx(), transpose(b.ctx(), b.input(Type::kI32, 8, 64)), b.input(Type::kI32, 64, 8));
  });
  for (Type t : kAllTypes) {
    const std::string s = tn(t);
    add_case(Op::kCont, "cont_" + s, [t](CaseBuilder& b) { return cont(b.ctx(), b.input(t, 64, 4, 3)); });
    add_case(Op::kCont, "cont_permuted_" + s,
             [t](CaseBuilder& b) { return cont(b.ctx(), permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3)); });
    add_case(Op::kDup, "dup_permuted_" + s,
             [t](CaseBuilder& b) { return dup(b.ctx(), permute(b.ctx(), b.input(t, 64, 3, 4, 2), 0, 2, 1, 3)); });
  }
  for (Type t : kNonQuantTypes) {
    add_case(Op::kCont, "cont_transposed_" + tn(t),
             [t](CaseBuilder& b) { return cont(b.ctx(), transpose(b.ctx(), b.input(t, 16, 5))); });
  }

  // ---- element-wise ----
  using BinaryFn = Tensor* (*)(Context&, Tensor*, Tensor*);
  const std::pair<const char*, std::pair<Op, BinaryFn>> binaries[] = {
      {"add", {Op::kAdd, &tessera::add}}, {"mul", {Op::kMul, &tessera::mul}}, {"div", {Op::kDiv, &tessera::div}}};
  for (const auto& [name, opfn] : binaries) {
    const Op op = opfn.first;
    const BinaryFn fn = opfn.second;
    for (Type ta : kFloatTypes) {
      for (Type tb : kFloatTypes) {
        add_case(op, std::string(name) + "_bcast_" + tn(ta) + "_" + tn(tb), [ta, tb, fn](CaseBuilder& b) {
          return fn(b.ctx(), b.input(ta, 64, 4, 3, 2), b.input(tb, 64, 1, 3, 1));
        });
      }
    }
    add_case(op, std::string(name) + "_same_f32_f32", [fn](CaseBuilder& b) {
      return fn(b.ctx(), b.input(Type::kF32, 64, 4, 3, 2), b.input(Type::kF32, 64, 4, 3, 2));
    });
    add_case(op, std::string(name) + "_bcast_dim0_f32_f32", [fn](CaseBuilder& b) {
      return fn(b.ctx(), b.input(Type::kF32, 64, 4, 3, 2), b.input(Type::kF32, 1, 4, 1, 2));
    });
  }
  const std::pair<const char*, UnaryOp> unaries[] = {
      {"silu", UnaryOp::kSilu}, {"gelu", UnaryOp::kGelu}, {"relu", UnaryOp::kRelu}, {"neg", UnaryOp::kNeg}};
  const std::pair<const char*, GluOp> glus[] = {{"swiglu", GluOp::kSwiglu}, {"geglu", GluOp::kGeglu}};
  for (Type t : kFloatTypes) {
    const std::string s = tn(t);
    add_case(Op::kScale, "scale_" + s, [t](CaseBuilder& b) { return scale(b.ctx(), b.input(t, 64, 4, 3), 0.75f, 0.25f); });
    for (const auto& [name, u] : unaries) {
      add_case(Op::kUnary, std::string("unary_") + name + "_" + s,
               [t, u = u](CaseBuilder& b) { return unary(b.ctx(), b.input(t, 64, 4, 3), u); });
    }
    for (const auto& [name, g] : glus) {
      const std::string base = std::string("glu_") + name;
      add_case(Op::kGlu, base + "_split_" + s,
               [t, g = g](CaseBuilder& b) { return glu(b.ctx(), b.input(t, 128, 4, 3), nullptr, g, false); });
      add_case(Op::kGlu, base + "_split_swapped_" + s,
               [t, g = g](CaseBuilder& b) { return glu(b.ctx(), b.input(t, 128, 4, 3), nullptr, g, true); });
      add_case(Op::kGlu, base + "_two_inputs_" + s, [t, g = g](CaseBuilder& b) {
        return glu(b.ctx(), b.input(t, 64, 4, 3), b.input(t, 64, 4, 3), g, false);
      });
    }

    // ---- reductions / norms ----
    add_case(Op::kRmsNorm, "rms_norm_" + s, [t](CaseBuilder& b) { return rms_norm(b.ctx(), b.input(t, 64, 4, 3), 1e-5f); });
    add_case(Op::kNorm, "norm_" + s, [t](CaseBuilder& b) { return norm(b.ctx(), b.input(t, 64, 4, 3), 1e-5f); });
    add_case(Op::kSumRows, "sum_rows_" + s, [t](CaseBuilder& b) { return sum_rows(b.ctx(), b.input(t, 64, 4, 3)); });
    add_case(Op::kSoftMax, "soft_max_" + s,
             [t](CaseBuilder& b) { return soft_max(b.ctx(), b.input(t, 32, 4, 3, 2), nullptr, 1.0f); });
    for (Type tm : {Type::kF32, Type::kF16}) {
      // Mask with more rows than a and broadcast over dim 3.
      add_case(Op::kSoftMax, "soft_max_mask_" + s + "_" + tn(tm), [t, tm](CaseBuilder& b) {
        return soft_max(b.ctx(), b.input(t, 32, 4, 3, 2), b.input(tm, 32, 6, 3, 1), 0.5f);
      });
      // Causal mask with -inf and one row entirely -inf (must give zeros, not NaN).
      add_case(Op::kSoftMax, "soft_max_causal_" + s + "_" + tn(tm), [t, tm](CaseBuilder& b) {
        return soft_max(b.ctx(), b.input(t, 8, 6, 2, 1), b.custom(tm, {8, 6}, causal_mask(2, 5)), 0.125f);
      });
    }

    // ---- positional ----
    for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
      const std::string m = mode == RopeMode::kNormal ? "normal" : "neox";
      add_case(Op::kRope, "rope_" + m + "_" + s, [t, mode](CaseBuilder& b) {
        return rope(b.ctx(), b.input(t, 64, 4, 5), b.indices(100, 5), 64, mode);
      });
      // Partial rotation (dims >= n_dims copied), other base/scale, frequency factors.
      add_case(Op::kRope, "rope_" + m + "_partial_ff_" + s, [t, mode](CaseBuilder& b) {
        return rope(b.ctx(), b.input(t, 64, 4, 5), b.indices(100, 5), 32, mode, 500000.0f, 0.5f,
                    b.custom(Type::kF32, {16}, uniform_values(1.0f, 3.0f)));
      });
    }

    // ---- indexing on Float ----
    for (SortOrder order : {SortOrder::kAsc, SortOrder::kDesc}) {
      // bf16/f16 inputs produce ties: the stable order (lower index first) must agree exactly.
      add_case(Op::kArgsort, std::string("argsort_") + (order == SortOrder::kAsc ? "asc_" : "desc_") + s,
               [t, order](CaseBuilder& b) { return argsort(b.ctx(), b.input(t, 33, 4, 2), order); });
    }
    add_case(Op::kTopK, "top_k_" + s, [t](CaseBuilder& b) { return top_k(b.ctx(), b.input(t, 40, 4, 2), 5); });
  }

  // ---- matmul ----
  for (Type ta : kWeightTypes) {
    const std::string s = tn(ta);
    add_case(Op::kMulMat, "mul_mat_bcast_" + s + "_f32", [ta](CaseBuilder& b) {
      return mul_mat(b.ctx(), b.input(ta, 64, 16, 2, 1), b.input(Type::kF32, 64, 5, 4, 2));
    });
    add_case(Op::kMulMat, "mul_mat_vec_" + s + "_f32", [ta](CaseBuilder& b) {
      return mul_mat(b.ctx(), b.input(ta, 128, 16), b.input(Type::kF32, 128, 1));
    });
    // K of 9 blocks of 32: long enough for the grouped block dots of SIMD kernels (8 q4_0 / 4 q8_0 blocks per step),
    // with a remainder
    add_case(Op::kMulMat, "mul_mat_vec_k288_" + s + "_f32", [ta](CaseBuilder& b) {
      return mul_mat(b.ctx(), b.input(ta, 288, 16), b.input(Type::kF32, 288, 2));
    });
    for (int64_t b1 : {int64_t{1}, int64_t{2}}) {
      add_case(Op::kMulMatId, "mul_mat_id_b" + std::to_string(b1) + "_" + s + "_f32", [ta, b1](CaseBuilder& b) {
        return mul_mat_id(b.ctx(), b.input(ta, 64, 16, 4), b.input(Type::kF32, 64, b1, 5), b.indices(4, 2, 5));
      });
    }
  }

  // ---- indexing ----
  for (Type t : kAllTypes) {
    add_case(Op::kGetRows, "get_rows_" + tn(t),
             [t](CaseBuilder& b) { return get_rows(b.ctx(), b.input(t, 64, 10, 2, 1), b.indices(10, 6, 2, 1)); });
  }
  for (Type t : kWeightTypes) {
    add_case(Op::kSetRows, "set_rows_" + tn(t), [t](CaseBuilder& b) {
      return set_rows(b.ctx(), b.input(t, 64, 10, 2, 1), b.input(Type::kF32, 64, 4, 2, 1),
                      b.custom(Type::kI32, {4, 2, 1}, distinct_indices(10)));
    });
  }

  // ---- attention ----
  const float kq_scale = 0.125f;
  for (Type tk : kWeightTypes) {
    for (Type tv : kWeightTypes) {
      add_case(Op::kFlashAttnExt, "flash_attn_ext_" + tn(tk) + "_" + tn(tv), [tk, tv, kq_scale](CaseBuilder& b) {
        // GQA: 4 query heads over 2 kv heads; mask rows >= n_q.
        return flash_attn_ext(b.ctx(), b.input(Type::kF32, 64, 7, 4, 1), b.input(tk, 64, 12, 2, 1),
                              b.input(tv, 64, 12, 2, 1), b.custom(Type::kF16, {12, 8}, causal_mask(5)), kq_scale);
      });
    }
  }
  auto fa_variant = [&](const std::string& name, int64_t dv, int64_t batch, int mask_kind, bool sinks) {
    add_case(Op::kFlashAttnExt, "flash_attn_ext_f16_f16_" + name, [=](CaseBuilder& b) {
      Tensor* q = b.input(Type::kF32, 64, 7, 4, batch);
      Tensor* k = b.input(Type::kF16, 64, 12, 2, batch);
      Tensor* v = b.input(Type::kF16, dv, 12, 2, batch);
      Tensor* mask = nullptr;
      if (mask_kind == 1) mask = b.custom(Type::kF32, {12, 7}, causal_mask(5));
      if (mask_kind == 2) mask = b.custom(Type::kF16, {12, 8}, causal_mask(5, 3));  // query row 3 fully masked
      Tensor* s = sinks ? b.input(Type::kF32, 4) : nullptr;
      return flash_attn_ext(b.ctx(), q, k, v, mask, kq_scale, s);
    });
  };
  fa_variant("nomask", 64, 1, 0, false);
  fa_variant("mask_f32", 64, 1, 1, false);
  fa_variant("masked_row", 64, 1, 2, false);
  fa_variant("sinks", 64, 1, 1, true);
  fa_variant("sinks_masked_row", 64, 1, 2, true);
  fa_variant("sinks_nomask", 64, 1, 0, true);
  fa_variant("dv32_batch2", 32, 2, 1, false);
  return cases;
}

}  // namespace

const std::vector<OpCase>& op_catalogue() {
  static const std::vector<OpCase> catalogue = make_catalogue();
  return catalogue;
}

// ---------------------------------------------------------------------------------------------------------------
// Fixtures.

bool ConformanceBase::init(const BackendFactory& factory, std::string* skip_reason) {
  factory_ = &factory;
  if (const char* env = std::getenv("TESSERA_CONFORMANCE_SEED"); env && *env) {
    seed_ = static_cast<uint32_t>(std::strtoul(env, nullptr, 10));
  } else {
    seed_ = std::random_device{}();
  }
  rng_.seed(seed_);
  ::testing::Test::RecordProperty("seed", std::to_string(seed_));
  if (!factory.make) {
    *skip_reason = "factory " + factory.name + " has no make function";
    return false;
  }
  backend_ = factory.make(skip_reason);
  if (!backend_) {
    if (skip_reason->empty()) *skip_reason = "backend " + factory.name + " is unavailable";
    return false;
  }
  // The reference side is the reference kernels whatever TESSERA_CPU_ISA says: the oracle must not change with it.
  cpu_ = cpu::make_backend({.n_threads = 0, .kernels = cpu::CpuKernels::kReference});
  return cpu_ != nullptr;
}

std::string ConformanceBase::trace() const {
  std::ostringstream os;
  os << "backend " << (factory_ ? factory_->name : "?") << ", seed " << seed_ << " (replay: TESSERA_CONFORMANCE_SEED="
     << seed_ << ")";
  return os.str();
}

void BackendConformance::SetUp() {
  std::string reason;
  if (!init(GetParam(), &reason)) GTEST_SKIP() << reason;
  ASSERT_NE(cpu_, nullptr) << "cpu::make_backend() returned null";
  ASSERT_NE(backend_->device(), nullptr);
  ASSERT_NE(backend_->default_buffer_type(), nullptr);
}

void BackendOpConformance::SetUp() {
  std::string reason;
  if (!init(std::get<0>(GetParam()), &reason)) GTEST_SKIP() << reason;
  ASSERT_NE(cpu_, nullptr) << "cpu::make_backend() returned null";
}

// ---------------------------------------------------------------------------------------------------------------
// 1. Buffers.

TEST_P(BackendConformance, BufferLifecycle) {
  SCOPED_TRACE(trace());
  BufferType& bt = buft();
  const size_t align = bt.alignment();
  ASSERT_GT(align, 0u);
  EXPECT_EQ(align & (align - 1), 0u) << "alignment " << align << " is not a power of two";
  EXPECT_EQ(bt.device(), backend_->device());
  EXPECT_NE(std::string(bt.name()), "");
  for (int64_t n : {1, 7, 64, 1000, 4099, 65541}) {
    SCOPED_TRACE(::testing::Message() << "probe tensor f32 x " << n);
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, n);
    ASSERT_NE(t, nullptr);
    set_name(*t, "clear_probe");
    const size_t size = bt.alloc_size(*t);
    EXPECT_GE(size, nbytes(*t));
    if (size > bt.max_size()) continue;
    CONF_ASSIGN_BUFFER(buf, bt.alloc_buffer(size));
    EXPECT_EQ(buf->type(), &bt);
    EXPECT_GE(buf->size(), size);
    EXPECT_EQ(buf->is_host(), bt.is_host());
    EXPECT_FALSE(buf->is_multi());
    ASSERT_NE(buf->base(), nullptr) << "a non-empty buffer must have a base";
    EXPECT_EQ(reinterpret_cast<uintptr_t>(buf->base()) % align, 0u) << "base not aligned to " << align;

    EXPECT_EQ(buf->usage(), BufferUsage::kAny);
    buf->set_usage(BufferUsage::kWeights);
    EXPECT_EQ(buf->usage(), BufferUsage::kWeights);
    buf->set_usage(BufferUsage::kCompute);
    EXPECT_EQ(buf->usage(), BufferUsage::kCompute);

    TensorAllocator talloc(*buf);
    CONF_ASSERT_OK(talloc.alloc(*t));
    EXPECT_EQ(t->data, buf->base()) << "the first tensor of a linear allocator is placed at offset 0";
    EXPECT_EQ(t->buffer, buf.get());
    EXPECT_EQ(tensor_buffer(*t), buf.get());
    for (int round = 0; round < 2; ++round) {
      const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
      buf->clear(value);
      std::vector<uint8_t> got = read_bytes(*t);
      EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(nbytes(*t), value), got)) << "after clear(" << int(value) << ")";
      if (bt.is_host()) {
        const uint8_t* p = static_cast<const uint8_t*>(buf->base());
        EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(buf->size(), value), std::vector<uint8_t>(p, p + buf->size())))
            << "host buffer memory after clear(" << int(value) << ")";
      }
    }
    buf->reset();
  }
}

TEST_P(BackendConformance, ZeroSizeBuffer) {
  SCOPED_TRACE(trace());
  CONF_ASSIGN_BUFFER(buf, buft().alloc_buffer(0));
  EXPECT_EQ(buf->size(), 0u);
  EXPECT_EQ(buf->base(), nullptr);
  EXPECT_EQ(buf->type(), &buft());
  buf->clear(0xAB);  // no-op, must not crash
  buf->set_usage(BufferUsage::kWeights);
  EXPECT_EQ(buf->usage(), BufferUsage::kWeights);
  buf->reset();
}

TEST_P(BackendConformance, AllocBeyondLimitsFails) {
  SCOPED_TRACE(trace());
  const size_t max = buft().max_size();
  if (max != SIZE_MAX) {
    auto r = buft().alloc_buffer(max + 1);
    EXPECT_FALSE(r.ok()) << "alloc_buffer(max_size() + 1 = " << max + 1 << ") succeeded";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
  // Under AddressSanitizer this relies on allocator_may_return_null=1 (set by __asan_default_options below).
  // Sizes no machine can provide; rounding them up to the alignment must not wrap around to a small allocation.
  for (size_t size : {size_t{1} << 62, SIZE_MAX - 8, SIZE_MAX}) {
    auto r = buft().alloc_buffer(size);
    EXPECT_FALSE(r.ok()) << "alloc_buffer(" << size << ") succeeded";
    if (!r.ok()) {
      EXPECT_FALSE(r.status().message().empty());
    }
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 2. Tensor I/O.

TEST_P(BackendConformance, TensorSetGetRoundTrip) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 3);
    ASSERT_NE(t, nullptr);
    set_name(*t, "io_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    std::vector<uint8_t> expected = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, expected.data(), 0, n));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "full round trip";

    std::vector<std::pair<size_t, size_t>> ranges = {{0, 1}, {n - 1, 1}, {0, n / 2}, {n / 2, n - n / 2}};
    std::uniform_int_distribution<size_t> off_d(0, n - 1);
    for (int i = 0; i < 8; ++i) {
      const size_t off = off_d(rng_);
      ranges.push_back({off, std::uniform_int_distribution<size_t>(1, n - off)(rng_)});
    }
    for (auto [off, size] : ranges) {
      SCOPED_TRACE(::testing::Message() << "range [" << off << ", " << off + size << ") of " << n);
      std::vector<uint8_t> part = random_bytes(size, rng_);
      CONF_ASSERT_OK(tensor_set(*t, part.data(), off, size));
      std::copy(part.begin(), part.end(), expected.begin() + static_cast<std::ptrdiff_t>(off));
      std::vector<uint8_t> got(size);
      CONF_ASSERT_OK(tensor_get(*t, got.data(), off, size));
      EXPECT_TRUE(BytesEqual(part, got)) << "partial get";
      EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "bytes outside the range must be untouched";
    }
  }
}

TEST_P(BackendConformance, TensorValuesRoundTrip) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 96, 5);
    ASSERT_NE(t, nullptr);
    set_name(*t, "values_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const std::vector<float> values = random_values(*t, rng_);
    CONF_ASSERT_OK(tensor_from_f32(*t, values));
    // The stored bytes are exactly the type's reference encoding, and decoding gives the reference values. What is
    // under test here is the backend's storage; the reference conversions themselves are checked against independent
    // computations in tests/unit/test_types.cpp.
    const std::vector<uint8_t> encoded = encode(type, values);
    EXPECT_TRUE(BytesEqual(encoded, read_bytes(*t)));
    auto got = tensor_to_f32(*t);
    ASSERT_TRUE(got.ok()) << got.status().to_string();
    const std::vector<float> expected = decode(type, encoded, values.size());
    ASSERT_EQ(got.value().size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i) {
      ASSERT_EQ(got.value()[i], expected[i]) << "flat index " << i;
    }
  }
}

TEST_P(BackendConformance, TensorMemset) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 4);
    ASSERT_NE(t, nullptr);
    set_name(*t, "memset_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    std::vector<uint8_t> expected = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, expected.data(), 0, n));
    const size_t off = std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
    const size_t size = std::uniform_int_distribution<size_t>(1, n - off)(rng_);
    const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*t, value, off, size));
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(off), size, value);
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "memset [" << off << ", " << off + size << ")";
    const uint8_t value2 = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*t, value2, 0, n));
    EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(n, value2), read_bytes(*t))) << "full memset";
  }
}

TEST_P(BackendConformance, ViewsReadWriteThroughSource) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* a = ctx.new_tensor_2d(type, 64, 6);
    ASSERT_NE(a, nullptr);
    set_name(*a, "view_source");
    Tensor* rows = view_2d(ctx, a, 64, 2, a->nb[1], 3 * a->nb[1]);            // rows 3..4, contiguous
    Tensor* halves = view_2d(ctx, a, 32, 6, a->nb[1], row_size(type, 32));    // second half of every row
    Tensor* vv = view_1d(ctx, rows, 64, rows->nb[1]);                         // a view of a view: row 4
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    set_name(*rows, "view_rows");
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    for (Tensor* v : {rows, halves, vv}) {
      EXPECT_TRUE(is_view(*v));
      EXPECT_EQ(v->view_src, a) << "view_src is the root tensor";
      EXPECT_EQ(tensor_buffer(*v), tensor_buffer(*a));
    }
    const size_t r0 = 3 * a->nb[1];
    EXPECT_EQ(rows->view_offs, r0);
    EXPECT_EQ(vv->view_offs, 4 * a->nb[1]);

    std::vector<uint8_t> expected = random_bytes(nbytes(*a), rng_);
    CONF_ASSERT_OK(tensor_set(*a, expected.data(), 0, expected.size()));
    auto slice = [&](size_t off, size_t n) {
      return std::vector<uint8_t>(expected.begin() + static_cast<std::ptrdiff_t>(off),
                                  expected.begin() + static_cast<std::ptrdiff_t>(off + n));
    };
    EXPECT_TRUE(BytesEqual(slice(r0, nbytes(*rows)), read_bytes(*rows)));
    EXPECT_TRUE(BytesEqual(slice(row_size(type, 32), nbytes(*halves)), read_bytes(*halves)));
    EXPECT_TRUE(BytesEqual(slice(4 * a->nb[1], nbytes(*vv)), read_bytes(*vv)));

    // Writes through a view land in the source.
    std::vector<uint8_t> w = random_bytes(nbytes(*rows), rng_);
    CONF_ASSERT_OK(tensor_set(*rows, w.data(), 0, w.size()));
    std::copy(w.begin(), w.end(), expected.begin() + static_cast<std::ptrdiff_t>(r0));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "set through a view";
    // Partial write at an offset inside the view.
    const size_t off = nbytes(*rows) / 3, len = nbytes(*rows) / 4;
    std::vector<uint8_t> w2 = random_bytes(len, rng_);
    CONF_ASSERT_OK(tensor_set(*rows, w2.data(), off, len));
    std::copy(w2.begin(), w2.end(), expected.begin() + static_cast<std::ptrdiff_t>(r0 + off));
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "partial set through a view";
    const uint8_t value = static_cast<uint8_t>(1 + rng_() % 255);
    CONF_ASSERT_OK(tensor_memset(*vv, value, 0, nbytes(*vv)));
    std::fill_n(expected.begin() + static_cast<std::ptrdiff_t>(4 * a->nb[1]), nbytes(*vv), value);
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*a))) << "memset through a view of a view";
  }
}

TEST_P(BackendConformance, TensorIoBoundsErrors) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Tensor* t = ctx.new_tensor_2d(Type::kF32, 64, 3);
  ASSERT_NE(t, nullptr);
  set_name(*t, "bounds_probe");
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  const size_t n = nbytes(*t);
  const std::vector<uint8_t> before = random_bytes(n, rng_);
  CONF_ASSERT_OK(tensor_set(*t, before.data(), 0, n));
  std::vector<uint8_t> scratch(n + 64, 0x5A);
  const std::pair<size_t, size_t> bad_ranges[] = {
      {0, n + 1}, {n - 4, 8}, {n, 1}, {n + 100, 4}, {SIZE_MAX - 1, 4}, {4, SIZE_MAX}, {SIZE_MAX, SIZE_MAX}};
  for (auto [off, size] : bad_ranges) {
    SCOPED_TRACE(::testing::Message() << "offset " << off << ", size " << size << ", nbytes " << n);
    const Status results[] = {
        tensor_set(*t, scratch.data(), off, size),
        tensor_get(*t, scratch.data(), off, size),
        tensor_memset(*t, 0x11, off, size),
        tensor_set_async(*backend_, *t, scratch.data(), off, size),
        tensor_get_async(*backend_, *t, scratch.data(), off, size),
    };
    const char* names[] = {"tensor_set", "tensor_get", "tensor_memset", "tensor_set_async", "tensor_get_async"};
    for (size_t i = 0; i < std::size(results); ++i) {
      EXPECT_FALSE(results[i].ok()) << names[i] << " accepted an out-of-range byte range";
      EXPECT_THAT(results[i].message(), ::testing::HasSubstr("bounds_probe")) << names[i] << " must name the tensor";
    }
    EXPECT_TRUE(backend_->synchronize().ok());
  }
  EXPECT_TRUE(BytesEqual(before, read_bytes(*t))) << "a rejected write must not touch the tensor";
}

TEST_P(BackendConformance, TensorIoUnallocatedErrors) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Tensor* unplaced = ctx.new_tensor_1d(Type::kF32, 64);
  Tensor* no_buffer = ctx.new_tensor_1d(Type::kF32, 64);
  Tensor* src = ctx.new_tensor_1d(Type::kF32, 128);
  Tensor* view = view_1d(ctx, src, 64, 64);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  set_name(*unplaced, "never_placed");
  set_name(*no_buffer, "data_without_buffer");
  set_name(*src, "unplaced_source");
  set_name(*view, "view_of_unplaced");
  // A data pointer but no buffer: still not allocated.
  std::vector<float> host(64, 1.5f);
  no_buffer->data = host.data();
  std::vector<uint8_t> scratch(256 * 4, 0x5A);
  for (Tensor* t : {unplaced, no_buffer, view}) {
    SCOPED_TRACE(::testing::Message() << "tensor " << t->name);
    const Status results[] = {
        tensor_set(*t, scratch.data(), 0, 16),
        tensor_get(*t, scratch.data(), 0, 16),
        tensor_memset(*t, 0x11, 0, 16),
        tensor_set_async(*backend_, *t, scratch.data(), 0, 16),
        tensor_get_async(*backend_, *t, scratch.data(), 0, 16),
    };
    const char* names[] = {"tensor_set", "tensor_get", "tensor_memset", "tensor_set_async", "tensor_get_async"};
    for (size_t i = 0; i < std::size(results); ++i) {
      EXPECT_FALSE(results[i].ok()) << names[i] << " accepted an unallocated tensor";
      EXPECT_THAT(results[i].message(), ::testing::HasSubstr(t->name)) << names[i] << " must name the tensor";
    }
    EXPECT_TRUE(backend_->synchronize().ok());
  }
  EXPECT_EQ(host, std::vector<float>(64, 1.5f)) << "nothing may be written through a buffer-less data pointer";
  EXPECT_EQ(tensor_buffer(*unplaced), nullptr);
  EXPECT_EQ(tensor_buffer(*view), nullptr);
}

// ---------------------------------------------------------------------------------------------------------------
// 3. Async I/O.

TEST_P(BackendConformance, AsyncTensorIo) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_2d(type, 64, 5);
    ASSERT_NE(t, nullptr);
    set_name(*t, "async_" + tn(type));
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const size_t n = nbytes(*t);
    // Two queued writes, the second overlapping the first: stream order decides.
    const std::vector<uint8_t> first = random_bytes(n, rng_);
    const size_t off = std::uniform_int_distribution<size_t>(0, n - 1)(rng_);
    const size_t len = std::uniform_int_distribution<size_t>(1, n - off)(rng_);
    const std::vector<uint8_t> second = random_bytes(len, rng_);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *t, first.data(), 0, n));
    CONF_ASSERT_OK(tensor_set_async(*backend_, *t, second.data(), off, len));
    EXPECT_TRUE(backend_->synchronize().ok());
    std::vector<uint8_t> expected = first;
    std::copy(second.begin(), second.end(), expected.begin() + static_cast<std::ptrdiff_t>(off));

    std::vector<uint8_t> got(n, 0);
    std::vector<uint8_t> got_part(len, 0);
    CONF_ASSERT_OK(tensor_get_async(*backend_, *t, got.data(), 0, n));
    CONF_ASSERT_OK(tensor_get_async(*backend_, *t, got_part.data(), off, len));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(expected, got)) << "async get after async sets";
    EXPECT_TRUE(BytesEqual(second, got_part)) << "partial async get";
    EXPECT_TRUE(BytesEqual(expected, read_bytes(*t))) << "blocking get after async sets";
  }

  // Set, compute and get queued on the stream without a synchronize in between.
  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 4096);
  Tensor* y = scale(ctx, x, 2.0f, 0.0f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  Graph graph;
  CONF_ASSERT_OK(graph.build_forward(y));
  if (!backend_->supports_op(*y)) GTEST_SKIP() << "backend does not claim SCALE f32";
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  std::vector<float> xs = signed_values()(*x, rng_);
  std::vector<float> ys(xs.size(), 0.0f);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, xs.data(), 0, nbytes(*x)));
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  CONF_ASSERT_OK(tensor_get_async(*backend_, *y, ys.data(), 0, nbytes(*y)));
  EXPECT_TRUE(backend_->synchronize().ok());
  for (size_t i = 0; i < xs.size(); ++i) ASSERT_EQ(ys[i], 2.0f * xs[i]) << "element " << i;
}

// ---------------------------------------------------------------------------------------------------------------
// 4. Events.

TEST_P(BackendConformance, Events) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  std::unique_ptr<Event> ev = dev->event_new();
  if (!dev->caps().events) {
    EXPECT_EQ(ev, nullptr) << "caps().events is false, so event_new must return nullptr";
    return;
  }
  ASSERT_NE(ev, nullptr) << "caps().events is true but event_new returned nullptr";
  EXPECT_EQ(ev->device(), dev);

  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_1d(Type::kF32, 1 << 16);
  Tensor* y = scale(ctx, x, 2.0f, 0.0f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  set_name(*x, "event_x");
  set_name(*y, "event_y");
  Graph graph;
  CONF_ASSERT_OK(graph.build_forward(y));
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  auto doubled = [](std::vector<float> v) {
    for (float& f : v) f *= 2.0f;
    return v;
  };
  auto read_f32 = [](const Tensor& t) {
    auto r = tensor_to_f32(t);
    EXPECT_TRUE(r.ok()) << r.status().to_string();
    return r.ok() ? r.value() : std::vector<float>{};
  };

  // (a) async set -> record -> host synchronize: the data is there.
  std::vector<float> v1 = signed_values()(*x, rng_);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v1.data(), 0, nbytes(*x)));
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(v1, read_f32(*x))) << "async set not visible after event synchronize";

  // (b) async compute -> record -> host synchronize: the result is there.
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(doubled(v1), read_f32(*y))) << "compute result not visible after event synchronize";

  // (c) a second stream on the same device waits for the first without blocking the host.
  auto second = dev->init_backend();
  ASSERT_TRUE(second.ok()) << second.status().to_string();
  Backend& b2 = *second.value();
  for (int round = 0; round < 2; ++round) {
    SCOPED_TRACE(::testing::Message() << (round == 0 ? "Event::record/wait" : "Backend::event_record/event_wait"));
    std::vector<float> v2 = signed_values()(*x, rng_);
    std::vector<float> out(v2.size(), 0.0f);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v2.data(), 0, nbytes(*x)));
    ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
    if (round == 0) {
      ev->record(*backend_);
      ev->wait(b2);
    } else {
      backend_->event_record(*ev);
      b2.event_wait(*ev);
    }
    CONF_ASSERT_OK(tensor_get_async(b2, *y, out.data(), 0, nbytes(*y)));
    EXPECT_TRUE(b2.synchronize().ok());
    EXPECT_TRUE(FloatsEqual(doubled(v2), out)) << "the waiting stream read before the recorded work finished";
    EXPECT_TRUE(backend_->synchronize().ok());
  }

  // (d) re-recording moves the event to the new end of the queue.
  std::vector<float> v3 = signed_values()(*x, rng_);
  ev->record(*backend_);
  CONF_ASSERT_OK(tensor_set_async(*backend_, *x, v3.data(), 0, nbytes(*x)));
  ASSERT_EQ(backend_->graph_compute_async(graph), ComputeStatus::kSuccess) << backend_->last_error();
  ev->record(*backend_);
  ev->synchronize();
  EXPECT_TRUE(FloatsEqual(doubled(v3), read_f32(*y))) << "event synchronize returned before the latest recorded point";
  EXPECT_TRUE(backend_->synchronize().ok());
}

// ---------------------------------------------------------------------------------------------------------------
// 5. Copies.

TEST_P(BackendConformance, CopyWithinBackend) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context ctx(no_alloc());
    Tensor* a = ctx.new_tensor_2d(type, 64, 7);
    Tensor* b = ctx.new_tensor_2d(type, 64, 7);
    ASSERT_TRUE(ctx.ok());
    set_name(*a, "copy_src");
    set_name(*b, "copy_dst");
    CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
    const std::vector<uint8_t> data = random_bytes(nbytes(*a), rng_);
    CONF_ASSERT_OK(tensor_set(*a, data.data(), 0, data.size()));
    CONF_ASSERT_OK(tensor_memset(*b, 0x3C, 0, nbytes(*b)));
    CONF_ASSERT_OK(tensor_copy(*a, *b));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*b)));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*a))) << "the source must be untouched";
  }
}

TEST_P(BackendConformance, CopyBetweenBackendAndHost) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context dctx(no_alloc());
    Context hctx(no_alloc());
    Tensor* d = dctx.new_tensor_3d(type, 64, 5, 2);
    Tensor* h = hctx.new_tensor_3d(type, 64, 5, 2);
    ASSERT_TRUE(dctx.ok() && hctx.ok());
    set_name(*d, "device_tensor");
    set_name(*h, "host_tensor");
    CONF_ASSIGN_BUFFER(dbuf, alloc_on(dctx, buft()));
    CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu::buffer_type()));
    EXPECT_TRUE(hbuf->is_host());

    const std::vector<uint8_t> to_host = random_bytes(nbytes(*d), rng_);
    CONF_ASSERT_OK(tensor_set(*d, to_host.data(), 0, to_host.size()));
    CONF_ASSERT_OK(tensor_copy(*d, *h));
    EXPECT_TRUE(BytesEqual(to_host, read_bytes(*h))) << "backend -> host";

    const std::vector<uint8_t> to_dev = random_bytes(nbytes(*h), rng_);
    CONF_ASSERT_OK(tensor_set(*h, to_dev.data(), 0, to_dev.size()));
    CONF_ASSERT_OK(tensor_copy(*h, *d));
    EXPECT_TRUE(BytesEqual(to_dev, read_bytes(*d))) << "host -> backend";
  }
}

TEST_P(BackendConformance, CopyAsyncWithCpuBackend) {
  SCOPED_TRACE(trace());
  for (Type type : kAllTypes) {
    SCOPED_TRACE(::testing::Message() << "type " << type_name(type));
    Context dctx(no_alloc());
    Context hctx(no_alloc());
    Tensor* d = dctx.new_tensor_2d(type, 64, 9);
    Tensor* h = hctx.new_tensor_2d(type, 64, 9);
    ASSERT_TRUE(dctx.ok() && hctx.ok());
    set_name(*d, "async_device_tensor");
    set_name(*h, "async_host_tensor");
    CONF_ASSIGN_BUFFER(dbuf, alloc_on(dctx, buft()));
    CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu_->default_buffer_type()));

    const std::vector<uint8_t> v1 = random_bytes(nbytes(*d), rng_);
    CONF_ASSERT_OK(tensor_set_async(*backend_, *d, v1.data(), 0, v1.size()));  // queued before the copy
    CONF_ASSERT_OK(tensor_copy_async(*backend_, *cpu_, *d, *h));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(v1, read_bytes(*h))) << "backend -> CPU backend";

    const std::vector<uint8_t> v2 = random_bytes(nbytes(*h), rng_);
    CONF_ASSERT_OK(tensor_set(*h, v2.data(), 0, v2.size()));
    CONF_ASSERT_OK(tensor_copy_async(*cpu_, *backend_, *h, *d));
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(v2, read_bytes(*d))) << "CPU backend -> backend";
  }
}

TEST_P(BackendConformance, CopyMismatchedLayoutFails) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  Context hctx(no_alloc());
  Tensor* a = ctx.new_tensor_2d(Type::kF32, 32, 32);
  Tensor* other_type = ctx.new_tensor_2d(Type::kF16, 32, 32);
  Tensor* other_shape = ctx.new_tensor_2d(Type::kF32, 64, 16);  // same element count
  Tensor* bigger = ctx.new_tensor_2d(Type::kF32, 32, 33);
  Tensor* square = ctx.new_tensor_2d(Type::kF32, 32, 32);
  Tensor* transposed = transpose(ctx, square);                  // same type and ne as a, other strides
  Tensor* host_other = hctx.new_tensor_2d(Type::kF32, 64, 16);
  ASSERT_TRUE(ctx.ok() && hctx.ok());
  set_name(*a, "layout_src");
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  CONF_ASSIGN_BUFFER(hbuf, alloc_on(hctx, *cpu::buffer_type()));
  CONF_ASSERT_OK(fill_random(*a, rng_));
  for (Tensor* dst : {other_type, other_shape, bigger, transposed, host_other}) {
    SCOPED_TRACE(::testing::Message() << "dst " << describe(*dst));
    const std::vector<uint8_t> before = read_bytes(*dst);
    EXPECT_FALSE(tensor_copy(*a, *dst).ok());
    const std::vector<uint8_t> a_before = read_bytes(*a);
    EXPECT_FALSE(tensor_copy(*dst, *a).ok());
    EXPECT_TRUE(BytesEqual(a_before, read_bytes(*a))) << "a rejected copy must not write";
    Backend& dst_backend = dst == host_other ? *cpu_ : *backend_;
    EXPECT_FALSE(tensor_copy_async(*backend_, dst_backend, *a, *dst).ok());
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_TRUE(cpu_->synchronize().ok());
    EXPECT_TRUE(BytesEqual(before, read_bytes(*dst))) << "a rejected copy must not write";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 6. Graph compute.

namespace {

// Names of the nodes of g the backend does not claim (views included: a backend must accept them).
std::vector<std::string> unclaimed_nodes(const Backend& backend, const Graph& g) {
  std::vector<std::string> out;
  for (Tensor* n : g.nodes()) {
    if (!backend.supports_op(*n)) out.push_back(std::string(op_name(n->op)) + " " + describe(*n));
  }
  return out;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : "; ") + x;
  return s;
}

}  // namespace

TEST_P(BackendConformance, LlamaBlockMatchesCpu) {
  SCOPED_TRACE(trace());
  auto be = instantiate_case(build_llama_block, buft());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  auto ref = instantiate_case(build_llama_block, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *be->graph);
  if (!unclaimed.empty()) {
    ASSERT_FALSE(factory().expect_full_op_support) << "unclaimed nodes: " << join(unclaimed);
    GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  }
  CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  ASSERT_EQ(backend_->graph_compute(*be->graph), ComputeStatus::kSuccess) << backend_->last_error();
  ASSERT_EQ(be->graph->n_nodes(), ref->graph->n_nodes());
  for (size_t i = 0; i < be->graph->n_nodes(); ++i) {
    const Tensor& node = *be->graph->node(i);
    EXPECT_TRUE(outputs_match(*ref->graph->node(i), node, nmse_tolerance(factory(), node)))
        << "node " << i << " (" << op_name(node.op) << ")";
  }
}

TEST_P(BackendConformance, EmptyGraphComputes) {
  SCOPED_TRACE(trace());
  Graph empty;
  EXPECT_EQ(backend_->graph_compute(empty), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_EQ(backend_->graph_compute_async(empty), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_TRUE(backend_->synchronize().ok());
}

TEST_P(BackendConformance, GraphPlanMatchesCompute) {
  SCOPED_TRACE(trace());
  auto be = instantiate_case(build_llama_block, buft());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  auto ref = instantiate_case(build_llama_block, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  if (!unclaimed_nodes(*backend_, *be->graph).empty()) GTEST_SKIP() << "backend does not claim every node";
  auto plan = backend_->plan_create(*be->graph);
  if (!plan.ok()) GTEST_SKIP() << "no graph plans: " << plan.status().to_string();
  ASSERT_NE(plan.value(), nullptr);
  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  for (int round = 0; round < 2; ++round) {  // a plan is reusable; new inputs each round
    SCOPED_TRACE(::testing::Message() << "plan_compute round " << round);
    CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
    ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << cpu_->last_error();
    ASSERT_EQ(backend_->plan_compute(*plan.value()), ComputeStatus::kSuccess) << backend_->last_error();
    EXPECT_TRUE(outputs_match(*ref->out, *be->out, nmse_tolerance(factory(), *be->out)));
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 7. supports_op honesty.

TEST_P(BackendConformance, SupportsOpClaims) {
  SCOPED_TRACE(trace());
  const auto& catalogue = op_catalogue();
  size_t claimed = 0;
  std::map<std::string, std::pair<size_t, size_t>> per_op;  // op -> (claimed, total)
  std::vector<std::string> unclaimed;
  for (const OpCase& c : catalogue) {
    auto inst = instantiate_case(c.build, buft());
    ASSERT_TRUE(inst.ok()) << "catalogue case " << c.name << " does not build: " << inst.status().to_string();
    EXPECT_EQ(inst->out->op, c.op) << c.name;
    const bool ok = unclaimed_nodes(*backend_, *inst->graph).empty();
    claimed += ok;
    auto& po = per_op[op_name(c.op)];
    po.first += ok;
    po.second += 1;
    if (!ok) unclaimed.push_back(c.name);
  }
  std::cout << "[ conformance ] " << factory().name << " claims " << claimed << " of " << catalogue.size()
            << " catalogue cases\n";
  for (const auto& [op, counts] : per_op) {
    std::cout << "[ conformance ]   " << op << ": " << counts.first << "/" << counts.second << "\n";
  }
  RecordProperty("catalogue_size", static_cast<int>(catalogue.size()));
  RecordProperty("claimed_cases", static_cast<int>(claimed));
  if (factory().expect_full_op_support) {
    EXPECT_EQ(claimed, catalogue.size()) << "unclaimed: " << join(unclaimed);
  }
}

TEST_P(BackendConformance, SupportsOpRejectsInvalidNodes) {
  SCOPED_TRACE(trace());
  Context ctx(no_alloc());
  auto leaf = [&](Type type, std::initializer_list<int64_t> ne) {
    int64_t d[4] = {1, 1, 1, 1};
    int n = 0;
    for (int64_t x : ne) d[n++] = x;
    return ctx.new_tensor(type, n, d);
  };
  auto node = [&](Op op, Type type, std::initializer_list<int64_t> ne, std::initializer_list<Tensor*> srcs) {
    Tensor* t = leaf(type, ne);
    if (!t) return t;
    t->op = op;
    int i = 0;
    for (Tensor* s : srcs) t->src[i++] = s;
    return t;
  };
  Tensor* w = leaf(Type::kF32, {64, 16});
  Tensor* x = leaf(Type::kF32, {64, 4});
  Tensor* x32 = leaf(Type::kF32, {32, 4});
  Tensor* x48 = leaf(Type::kF32, {48, 4});
  Tensor* ix = leaf(Type::kI32, {64, 4});
  Tensor* q4 = leaf(Type::kQ4_0, {64, 4});
  Tensor* fids = leaf(Type::kF32, {4});
  Tensor* a3 = leaf(Type::kF32, {64, 4, 5});
  Tensor* fpos = leaf(Type::kF32, {5});
  Tensor* experts = leaf(Type::kF32, {64, 16, 4});
  Tensor* tokens = leaf(Type::kF32, {64, 2, 5});
  Tensor* fids2 = leaf(Type::kF32, {2, 5});

  std::vector<std::pair<std::string, Tensor*>> invalid = {
      {"MUL_MAT with an i32 src1", node(Op::kMulMat, Type::kF32, {16, 4}, {w, ix})},
      {"MUL_MAT with a missing src0", node(Op::kMulMat, Type::kF32, {16, 4}, {nullptr, x})},
      {"MUL_MAT with a missing src1", node(Op::kMulMat, Type::kF32, {16, 4}, {w, nullptr})},
      {"MUL_MAT with K 64 vs 32", node(Op::kMulMat, Type::kF32, {16, 4}, {w, x32})},
      {"ADD with a q4_0 src0", node(Op::kAdd, Type::kQ4_0, {64, 4}, {q4, x})},
      {"ADD with a src1 that does not broadcast", node(Op::kAdd, Type::kF32, {64, 4}, {x, x48})},
      {"ADD whose result type is not src0's", node(Op::kAdd, Type::kF16, {64, 4}, {x, x})},
      {"MUL with a missing src1", node(Op::kMul, Type::kF32, {64, 4}, {x, nullptr})},
      {"GET_ROWS with f32 ids", node(Op::kGetRows, Type::kF32, {16, 4}, {w, fids})},
      {"GET_ROWS with a missing ids source", node(Op::kGetRows, Type::kF32, {16, 4}, {w, nullptr})},
      {"ROPE with f32 positions", node(Op::kRope, Type::kF32, {64, 4, 5}, {a3, fpos})},
      {"MUL_MAT_ID with f32 ids", node(Op::kMulMatId, Type::kF32, {16, 2, 5}, {experts, tokens, fids2})},
      {"UNARY with an unknown UnaryOp", node(Op::kUnary, Type::kF32, {64, 4}, {x})},
  };
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  for (auto& [why, t] : invalid) {
    if (t->op == Op::kRope) {
      set_op_param<int32_t>(*t, 0, 64);
      set_op_param<int32_t>(*t, 1, static_cast<int32_t>(RopeMode::kNormal));
      set_op_param<float>(*t, 2, 10000.0f);
      set_op_param<float>(*t, 3, 1.0f);
    }
    if (t->op == Op::kUnary) set_op_param<int32_t>(*t, 0, 1000);
    set_name(*t, "invalid_node");
  }
  // Placed in the backend's memory, so that the only reason to refuse is the node itself.
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  for (auto& [why, t] : invalid) {
    EXPECT_FALSE(backend_->supports_op(*t)) << "claims an invalid node: " << why << " (" << describe(*t) << ")";
  }
}

TEST_P(BackendOpConformance, MatchesCpuReference) {
  SCOPED_TRACE(trace());
  const OpCase& c = op_case();
  SCOPED_TRACE("case " + c.name);
  auto be = instantiate_case(c.build, *backend_->default_buffer_type());
  ASSERT_TRUE(be.ok()) << be.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *be->graph);
  if (!unclaimed.empty()) {
    ASSERT_FALSE(factory().expect_full_op_support) << "unclaimed nodes: " << join(unclaimed);
    GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  }
  auto ref = instantiate_case(c.build, *cpu::buffer_type());
  ASSERT_TRUE(ref.ok()) << ref.status().to_string();
  CONF_ASSERT_OK(fill_leafs_identically(*ref, *be, rng_));
  // Inputs as written, to check afterwards that compute left them alone.
  std::vector<std::vector<uint8_t>> inputs;
  for (const auto& l : be->leafs) inputs.push_back(read_bytes(*l.tensor));

  ASSERT_EQ(cpu_->graph_compute(*ref->graph), ComputeStatus::kSuccess) << "reference: " << cpu_->last_error();
  ASSERT_EQ(backend_->graph_compute(*be->graph), ComputeStatus::kSuccess) << backend_->last_error();
  EXPECT_TRUE(outputs_match(*ref->out, *be->out, nmse_tolerance(factory(), *be->out)));
  for (size_t i = 0; i < be->leafs.size(); ++i) {
    const Tensor* leaf = be->leafs[i].tensor;
    if (be->out->view_src == leaf) continue;  // CPY / SET_ROWS write into their destination leaf
    EXPECT_TRUE(BytesEqual(inputs[i], read_bytes(*leaf))) << "input " << describe(*leaf) << " modified by compute";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 8. Graph copy and backend comparison.

namespace {

// Views of leafs and of nodes, a quantized weight, and computed nodes around them.
Tensor* build_copy_graph(CaseBuilder& b) {
  Context& ctx = b.ctx();
  Tensor* x = b.input(Type::kF32, 64, 8);
  Tensor* w = b.input(Type::kQ8_0, 64, 16);
  Tensor* bias = b.input(Type::kF32, 16);
  if (!x) return nullptr;
  Tensor* x_rows = view_2d(ctx, x, 64, 4, x->nb[1], 2 * x->nb[1]);  // view of a leaf
  Tensor* y = mul_mat(ctx, w, x_rows);                                 // [16, 4]
  Tensor* z = silu(ctx, add(ctx, y, bias));
  Tensor* zt = transpose(ctx, z);                                      // view of a node
  Tensor* c = cont(ctx, zt);                                           // [4, 16]
  Tensor* r = reshape_2d(ctx, c, 16, 4);                               // view of a node
  Tensor* out = mul(ctx, r, y);
  if (out) set_name(*out, "copy_graph_out");
  return out;
}

}  // namespace

TEST_P(BackendConformance, GraphCopyCopiesDataAndViews) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const Graph& g = *src->graph;
  // Every tensor that owns memory gets data (nodes too: graph_copy copies all data, computed or not).
  std::vector<Tensor*> all(g.leafs());
  all.insert(all.end(), g.nodes().begin(), g.nodes().end());
  for (Tensor* t : all) {
    if (!is_view(*t)) {
      CONF_ASSERT_OK(fill_random(*t, rng_));
    }
  }
  auto copy = graph_copy(*backend_, g);
  ASSERT_TRUE(copy.ok()) << copy.status().to_string();
  const GraphCopy& gc = copy.value();
  ASSERT_NE(gc.graph, nullptr);
  ASSERT_EQ(gc.graph->n_nodes(), g.n_nodes());
  for (size_t i = 0; i < g.n_nodes(); ++i) EXPECT_EQ(gc.graph->node(i), gc.copy_of(g.node(i))) << "node " << i;
  for (Tensor* t : all) {
    SCOPED_TRACE(::testing::Message() << "tensor " << describe(*t) << " op " << op_name(t->op));
    Tensor* c = gc.copy_of(t);
    ASSERT_NE(c, nullptr);
    ASSERT_NE(c, t);
    EXPECT_TRUE(same_layout(*t, *c));
    EXPECT_EQ(c->op, t->op);
    EXPECT_STREQ(c->name, t->name);
    for (int s = 0; s < kMaxSrc; ++s) {
      if (t->src[s]) {
        EXPECT_EQ(c->src[s], gc.copy_of(t->src[s])) << "src " << s;
      }
    }
    EXPECT_EQ(is_view(*c), is_view(*t));
    if (is_view(*t)) {
      EXPECT_EQ(c->view_src, gc.copy_of(t->view_src)) << "a view must stay a view of the copied source";
      EXPECT_EQ(c->view_offs, t->view_offs);
    }
    Buffer* cb = tensor_buffer(*c);
    ASSERT_NE(cb, nullptr) << "copy not allocated";
    EXPECT_EQ(cb->type(), backend_->default_buffer_type()) << "copy not in the backend's memory";
    EXPECT_TRUE(BytesEqual(read_bytes(*t), read_bytes(*c))) << "data not copied";
  }
  // The copy computes on the backend like the original on the CPU.
  const auto unclaimed = unclaimed_nodes(*backend_, *gc.graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  ASSERT_EQ(backend_->graph_compute(*gc.graph), ComputeStatus::kSuccess) << backend_->last_error();
  ASSERT_EQ(cpu_->graph_compute(*src->graph), ComputeStatus::kSuccess) << cpu_->last_error();
  EXPECT_TRUE(outputs_match(*src->out, *gc.copy_of(src->out), nmse_tolerance(factory(), *src->out)));
}

TEST_P(BackendConformance, CompareGraphBackendVisitsEveryNode) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *src->graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  for (auto& l : src->leafs) CONF_ASSERT_OK(fill_random(*l.tensor, rng_));
  const Graph& g = *src->graph;
  std::vector<size_t> expected;
  for (size_t i = 0; i < g.n_nodes(); ++i) {
    if (!op_is_view(g.node(i)->op)) expected.push_back(i);
  }
  ASSERT_GE(expected.size(), 4u);
  ASSERT_LT(expected.size(), g.n_nodes()) << "the graph must contain view nodes";
  std::vector<size_t> seen;
  Status s = compare_graph_backend(*cpu_, *backend_, g, [&](size_t i, Tensor& t1, Tensor& t2) {
    seen.push_back(i);
    EXPECT_LT(i, g.n_nodes());
    if (i < g.n_nodes()) {
      EXPECT_EQ(&t1, g.node(i)) << "t1 is the graph's own node";
    }
    EXPECT_NE(&t1, &t2);
    EXPECT_EQ(t1.op, t2.op);
    EXPECT_TRUE(same_layout(t1, t2));
    EXPECT_TRUE(outputs_match(t1, t2, nmse_tolerance(factory(), t2))) << "node " << i;
    return true;
  });
  CONF_EXPECT_OK(s);
  EXPECT_EQ(seen, expected) << "the callback must run once per non-view node, in graph order";
}

TEST_P(BackendConformance, CompareGraphBackendStopsEarly) {
  SCOPED_TRACE(trace());
  auto src = instantiate_case(build_copy_graph, *cpu::buffer_type());
  ASSERT_TRUE(src.ok()) << src.status().to_string();
  const auto unclaimed = unclaimed_nodes(*backend_, *src->graph);
  if (!unclaimed.empty()) GTEST_SKIP() << "backend does not claim: " << join(unclaimed);
  for (auto& l : src->leafs) CONF_ASSERT_OK(fill_random(*l.tensor, rng_));
  for (size_t stop_after : {size_t{1}, size_t{2}}) {
    size_t calls = 0;
    Status s = compare_graph_backend(*cpu_, *backend_, *src->graph, [&](size_t, Tensor&, Tensor&) {
      ++calls;
      return calls < stop_after;
    });
    CONF_EXPECT_OK(s) << "stopping is not an error";
    EXPECT_EQ(calls, stop_after) << "the walk must stop when the callback returns false";
  }
}

// ---------------------------------------------------------------------------------------------------------------
// 9. Device properties.

TEST_P(BackendConformance, DeviceProperties) {
  SCOPED_TRACE(trace());
  EXPECT_NE(std::string(backend_->name()), "");
  Device* dev = backend_->device();
  EXPECT_NE(std::string(dev->name()), "");
  EXPECT_NE(std::string(dev->description()), "");
  size_t free = 0, total = 0;
  dev->memory(&free, &total);
  EXPECT_GT(total, 0u);
  EXPECT_LE(free, total);
  const DeviceType type = dev->type();
  EXPECT_TRUE(type == DeviceType::kCpu || type == DeviceType::kGpu || type == DeviceType::kIgpu ||
              type == DeviceType::kAccel)
      << static_cast<int>(type);
  const DeviceProps props = dev->props();
  EXPECT_EQ(props.name, dev->name());
  EXPECT_EQ(props.description, dev->description());
  EXPECT_EQ(props.type, type);
  EXPECT_LE(props.memory_free, props.memory_total);
  const DeviceCaps caps = dev->caps();
  EXPECT_EQ(props.caps.async, caps.async);
  EXPECT_EQ(props.caps.events, caps.events);
  EXPECT_EQ(props.caps.host_buffer, caps.host_buffer);
  EXPECT_EQ(props.caps.buffer_from_host_ptr, caps.buffer_from_host_ptr);

  EXPECT_EQ(dev->buffer_type(), backend_->default_buffer_type());
  EXPECT_EQ(dev->buffer_type()->device(), dev);
  EXPECT_TRUE(dev->supports_buft(*dev->buffer_type()));
  EXPECT_TRUE(backend_->supports_buft(*backend_->default_buffer_type()));

  BackendReg* reg = dev->reg();
  ASSERT_NE(reg, nullptr);
  EXPECT_NE(std::string(reg->name()), "");
  bool listed = false;
  for (size_t i = 0; i < reg->device_count(); ++i) listed |= reg->device(i) == dev;
  EXPECT_TRUE(listed) << "the device's registration must list it";
}

TEST_P(BackendConformance, DeviceHostBufferCaps) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  const DeviceCaps caps = dev->caps();

  BufferType* host = dev->host_buffer_type();
  if (!caps.host_buffer) {
    EXPECT_EQ(host, nullptr) << "caps().host_buffer is false but host_buffer_type() is set";
  } else {
    ASSERT_NE(host, nullptr) << "caps().host_buffer is true but host_buffer_type() is null";
    EXPECT_TRUE(host->is_host());
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, 1000);
    ASSERT_NE(t, nullptr);
    CONF_ASSIGN_BUFFER(hb, alloc_on(ctx, *host));
    const std::vector<uint8_t> data = random_bytes(nbytes(*t), rng_);
    CONF_ASSERT_OK(tensor_set(*t, data.data(), 0, data.size()));
    EXPECT_TRUE(BytesEqual(data, read_bytes(*t)));
    EXPECT_EQ(std::memcmp(t->data, data.data(), data.size()), 0) << "host buffer memory is directly addressable";
  }

  // buffer_from_host_ptr: memory the device does not own.
  constexpr size_t kSize = 1 << 16;
  constexpr size_t kHostAlign = 4096;
  std::unique_ptr<uint8_t, decltype(&std::free)> mem(static_cast<uint8_t*>(std::aligned_alloc(kHostAlign, kSize)),
                                                     &std::free);
  ASSERT_NE(mem, nullptr);
  const std::vector<uint8_t> initial = random_bytes(kSize, rng_);
  std::memcpy(mem.get(), initial.data(), kSize);
  auto r = dev->buffer_from_host_ptr(mem.get(), kSize, kSize);
  if (!caps.buffer_from_host_ptr) {
    EXPECT_FALSE(r.ok()) << "caps().buffer_from_host_ptr is false but buffer_from_host_ptr succeeded";
    return;
  }
  ASSERT_TRUE(r.ok()) << "caps().buffer_from_host_ptr is true: " << r.status().to_string();
  {
    std::unique_ptr<Buffer> buf = std::move(r.value());
    ASSERT_NE(buf, nullptr);
    EXPECT_GE(buf->size(), kSize);
    Context ctx(no_alloc());
    Tensor* t = ctx.new_tensor_1d(Type::kF32, kSize / 8);
    ASSERT_NE(t, nullptr);
    set_name(*t, "host_ptr_tensor");
    TensorAllocator talloc(*buf);
    CONF_ASSERT_OK(talloc.alloc(*t));
    const size_t n = nbytes(*t);
    EXPECT_TRUE(BytesEqual(std::vector<uint8_t>(initial.begin(), initial.begin() + n), read_bytes(*t)))
        << "the buffer reads the host memory it wraps";
    const std::vector<uint8_t> data = random_bytes(n, rng_);
    CONF_ASSERT_OK(tensor_set(*t, data.data(), 0, n));
    EXPECT_TRUE(backend_->synchronize().ok());
    EXPECT_EQ(std::memcmp(mem.get(), data.data(), n), 0) << "writes must land in the host memory";
    EXPECT_EQ(std::memcmp(mem.get() + n, initial.data() + n, kSize - n), 0) << "bytes past the tensor untouched";
  }
  // The buffer is gone; the memory is still ours (freed by `mem`, not by the buffer).
  mem.get()[0] ^= 0xFF;
}

TEST_P(BackendConformance, InitBackendFromDevice) {
  SCOPED_TRACE(trace());
  Device* dev = backend_->device();
  auto r = dev->init_backend();
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  Backend& b2 = *r.value();
  EXPECT_EQ(b2.device(), dev);
  EXPECT_NE(std::string(b2.name()), "");
  EXPECT_EQ(b2.guid(), backend_->guid()) << "backends of one implementation share a guid";
  EXPECT_EQ(b2.default_buffer_type(), backend_->default_buffer_type());
  // The new stream computes on memory of the device's buffer type.
  Context ctx(no_alloc());
  Tensor* x = ctx.new_tensor_2d(Type::kF32, 64, 3);
  Tensor* y = rms_norm(ctx, x, 1e-5f);
  ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
  Graph g;
  CONF_ASSERT_OK(g.build_forward(y));
  if (!b2.supports_op(*y)) GTEST_SKIP() << "backend does not claim RMS_NORM f32";
  CONF_ASSIGN_BUFFER(buf, alloc_on(ctx, buft()));
  CONF_ASSERT_OK(fill_random(*x, rng_));
  ASSERT_EQ(b2.graph_compute(g), ComputeStatus::kSuccess) << b2.last_error();
  auto ys = tensor_to_f32(*y);
  ASSERT_TRUE(ys.ok());
  for (float v : ys.value()) ASSERT_TRUE(std::isfinite(v));
}

}  // namespace tessera::conformance
