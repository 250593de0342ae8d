// The backend conformance suite's shared part: printing, tolerances, random values, assertions, case building and
// the fixtures. The tests are in suite_<area>.cpp, the op catalogue in suite_op_catalogue.cpp; each backend's
// instantiation is its own file (cpu_conformance.cpp, sim_conformance.cpp, tests/gpu/cuda_conformance.cpp).
#include "conformance/backend_conformance.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>
#include <sstream>
#include <unordered_set>

#include "conformance/suite_util.h"
#include "tessera/cpu.h"

namespace tessera::conformance {

GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendConformance);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(BackendOpConformance);

// ---------------------------------------------------------------------------------------------------------------
// Shared by the areas (suite_util.h).

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

Result<std::unique_ptr<Buffer>> alloc_on(Context& ctx, BufferType& buft) {
  auto r = alloc_ctx_tensors(ctx, buft);
  if (r.ok() && !r.value()) return Status(StatusCode::kFailed, "alloc_ctx_tensors allocated nothing");
  return r;
}

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

bool must_claim(const BackendFactory& f, Op op) {
  return f.expect_full_op_support &&
         std::find(f.ops_without_kernels.begin(), f.ops_without_kernels.end(), op) == f.ops_without_kernels.end();
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
  if (!e.ok())
    return ::testing::AssertionFailure() << "reading " << describe(expected) << ": " << e.status().to_string();
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
      const double d =
          std::isfinite(av[i]) ? std::fabs(double(ev[i]) - double(av[i])) : std::numeric_limits<double>::infinity();
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
  Tensor* q = mul_mat(ctx, wq, h);  // [d, n_tok]
  Tensor* k = mul_mat(ctx, wk, h);  // [d, n_tok]
  Tensor* v = mul_mat(ctx, wv, h);  // [d, n_tok]
  Tensor* kq = mul_mat(ctx, k, q);  // [n_kv, n_q]
  kq = soft_max(ctx, kq, mask, 1.0f / std::sqrt(float(d)));
  Tensor* vt = cont(ctx, transpose(ctx, v));  // [n_tok, d]
  Tensor* attn = mul_mat(ctx, vt, kq);        // [d, n_q]
  Tensor* x2 = add(ctx, x, mul_mat(ctx, wo, attn));
  Tensor* h2 = mul(ctx, rms_norm(ctx, x2, 1e-5f), ffn_norm);
  Tensor* g = silu(ctx, mul_mat(ctx, w_gate, h2));  // [ff, n_tok]
  Tensor* u = mul_mat(ctx, w_up, h2);
  Tensor* x3 = add(ctx, x2, mul_mat(ctx, w_down, mul(ctx, g, u)));
  Tensor* logits = mul_mat(ctx, w_out, x3);  // [n_vocab, n_tok]
  Tensor* probs = soft_max(ctx, logits);
  if (probs) set_name(*probs, "probs");
  return probs;
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
  os << "backend " << (factory_ ? factory_->name : "?") << ", seed " << seed_
     << " (replay: TESSERA_CONFORMANCE_SEED=" << seed_ << ")";
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

}  // namespace tessera::conformance
