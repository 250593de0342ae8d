// The backend conformance suite (docs/interfaces.md: one interface, one shared test suite instantiated for every
// backend, after IREE's HAL CTS). Every backend -- CPU, simulated, wrapped, CUDA -- instantiates it with a
// BackendFactory:
//
//   #include "conformance/backend_conformance.h"
//   TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(Cuda, my_cuda_factory());
//
// (at global scope; the macro opens the namespace itself). Two suites are instantiated:
//   BackendConformance      one test per rule of docs/interfaces.md (buffers, tensor I/O, async I/O, events,
//                           copies, graph compute, supports_op honesty, graph copy/compare, device properties);
//   BackendOpConformance    one test per entry of the op catalogue (every op of docs/ops.md x every type combination
//                           of its table), each computed on the backend and on a fresh CPU backend and compared.
//
// The tests are in one file per interface area (suite_buffers.cpp, suite_tensor_io.cpp, suite_events.cpp,
// suite_compute.cpp, suite_supports_op.cpp, suite_device.cpp); the op catalogue in suite_op_catalogue.cpp; the shared
// helpers and fixtures in backend_conformance.cpp (docs/testing.md).
//
// Every test draws fresh random inputs from a seeded std::mt19937; the seed is printed with every failure (and
// recorded as the test property "seed"). Set TESSERA_CONFORMANCE_SEED=<n> to replay a failing run.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/backend.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/graph.h"
#include "tessera/graph_copy.h"
#include "tessera/tensor.h"
#include "tessera/types.h"

namespace tessera::conformance {

// ---------------------------------------------------------------------------------------------------------------
// What a backend hands the suite.
struct BackendFactory {
  // Used in test names: ASCII letters, digits and '_' only.
  std::string name;
  // Returns a fresh backend, or nullptr with *skip_reason set when the backend cannot run here (no GPU, ...): every
  // test of the instantiation is then skipped with that reason.
  std::function<std::unique_ptr<Backend>(std::string* skip_reason)> make;

  // NMSE tolerances against the CPU reference backend, by the type of the compared output.
  // f32 outputs: the kernels compute in f32 (f64 sums in the reference), so only accumulation order differs.
  double f32_nmse = 1e-6;
  // f16 / bf16 outputs: the final rounding alone may differ by one ulp when the f32 value before rounding differs
  // in its last bits. One ulp is a relative error of 2^-11 (f16) or 2^-8 (bf16); an ulp on *every* element gives an
  // NMSE of at most (2^-8)^2 ~ 1.5e-5, so 1e-4 admits rounding differences but not a wrong value on even ~1% of the
  // elements of a unit-variance output.
  double half_nmse = 1e-4;
  // q8_0 / q4_0 outputs (CPY, SET_ROWS into a quantized tensor): a value that lands near a rounding boundary may
  // take the neighbouring quantum. For q4_0 a quantum is amax/8, so one flipped value among the 256 values of a
  // catalogue output costs (1/8)^2 / (256 * E[x^2] ~ 0.39) ~ 1.6e-4; 2e-3 admits about ten such flips while a wrong
  // scale, nibble order or block layout gives an NMSE of order 1.
  double quant_nmse = 2e-3;
  // Optional per-node override of the tolerance (e.g. a GPU matmul that rounds src1 to f16); nullopt = defaults.
  std::function<std::optional<double>(const Tensor& node)> nmse_override;

  // The backend claims every entry of the op catalogue (true for the CPU backend, which has a reference kernel for
  // every op and type).
  bool expect_full_op_support = false;
  // Ops the backend has no kernel for yet: with expect_full_op_support, their catalogue cases must be unclaimed (so
  // that the entry goes when the kernel comes) and every other case claimed.
  std::vector<Op> ops_without_kernels;
};

// gtest printing / naming of parameters.
void PrintTo(const BackendFactory& f, std::ostream* os);
struct FactoryName {
  std::string operator()(const ::testing::TestParamInfo<BackendFactory>& info) const { return info.param.name; }
};

// Tolerance for comparing node against the reference (factory override first, then by the node's type).
double nmse_tolerance(const BackendFactory& f, const Tensor& node);
// Whether the backend must claim the catalogue cases of op: expect_full_op_support and op not in ops_without_kernels.
bool must_claim(const BackendFactory& f, Op op);
// The tolerance of a backend running the optimised CPU kernels (a BackendFactory::nmse_override): their matrix x
// vector with quantized weights (MUL_MAT with fewer than 8 columns, every MUL_MAT_ID) quantizes the activations to
// q8_0, a relative error of up to 2^-8 per value (NMSE about 1e-5 on the product, as in cpu_opt_kernels_test.cpp).
// 1e-4 for such a product, 1e-3 for anything computed from one (a value near zero times a large factor amplifies the
// product's error); nullopt (the defaults) otherwise. A wrong block layout, scale or nibble order gives an NMSE of
// order 1.
std::optional<double> quantized_activation_nmse(const Tensor& node);

// ---------------------------------------------------------------------------------------------------------------
// Random values. Floats are drawn with magnitude in [amp/8, amp] and a random sign: never zero (so an unwritten
// output, a zero-filled buffer or a dropped operand shows), never near zero (so DIV stays bounded).
using ValueGen = std::function<std::vector<float>(const Tensor& t, std::mt19937& rng)>;

ValueGen signed_values(float amp = 1.0f);
ValueGen uniform_values(float lo, float hi);
// Integers uniform in [lo, hi] (for i32 tensors).
ValueGen int_values(int32_t lo, int32_t hi);
// i32 indices: each group of ne0 consecutive values is distinct, drawn from [0, range) (scatter targets).
ValueGen distinct_indices(int32_t range);
// An attention/softmax mask over [ne0 = n_kv, ne1 = rows]: element (j, i) is -inf when j > i + diag, else a random
// value in [-1, 0]; row fully_masked_row (when >= 0) is entirely -inf. Higher dims repeat the pattern.
ValueGen causal_mask(int64_t diag, int64_t fully_masked_row = -1);

// Random values for any tensor: signed_values for float and quantized types, non-zero integers in [-1000, 1000]
// for i32.
std::vector<float> random_values(const Tensor& t, std::mt19937& rng);
// Fills a tensor (any type, any buffer) with random_values through tensor_from_f32.
Status fill_random(Tensor& t, std::mt19937& rng);
// size random bytes, none of them zero.
std::vector<uint8_t> random_bytes(size_t size, std::mt19937& rng);
// All nbytes(t) bytes of t (any buffer). Empty vector and a gtest failure when the read fails.
std::vector<uint8_t> read_bytes(const Tensor& t);

// ---------------------------------------------------------------------------------------------------------------
// Assertion helpers.
::testing::AssertionResult IsOk(const Status& s);
#define CONF_ASSERT_OK(expr) ASSERT_TRUE(::tessera::conformance::IsOk(expr)) << #expr
#define CONF_EXPECT_OK(expr) EXPECT_TRUE(::tessera::conformance::IsOk(expr)) << #expr

// Compares actual (computed on the backend under test) with expected (computed on the CPU reference): i32 exactly,
// other types as decoded f32 values with NMSE <= tol and no NaN/Inf mismatch. expected must be entirely finite
// (outputs are poisoned with NaN before compute, so an unwritten reference output fails here).
::testing::AssertionResult outputs_match(const Tensor& expected, const Tensor& actual, double tol);

// ---------------------------------------------------------------------------------------------------------------
// The op catalogue: single-op graphs built with the functions of build.h. A case's build function creates its
// leafs through the CaseBuilder (which records how to fill each one) and returns the output tensor.
class CaseBuilder {
 public:
  struct Leaf {
    Tensor* tensor;
    ValueGen gen;
  };

  explicit CaseBuilder(Context& ctx) : ctx_(ctx) {}
  Context& ctx() { return ctx_; }

  // A leaf of random values (signed_values(amp); integers for i32).
  Tensor* input(Type type, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1, int64_t ne3 = 1, float amp = 1.0f);
  // i32 indices uniform in [0, range).
  Tensor* indices(int32_t range, int64_t ne0, int64_t ne1 = 1, int64_t ne2 = 1);
  // A leaf filled by gen.
  Tensor* custom(Type type, std::initializer_list<int64_t> ne, ValueGen gen);

  const std::vector<Leaf>& leafs() const { return leafs_; }

 private:
  Tensor* add_leaf(Type type, std::initializer_list<int64_t> ne, ValueGen gen);

  Context& ctx_;
  std::vector<Leaf> leafs_;
};

using CaseBuildFn = std::function<Tensor*(CaseBuilder&)>;

struct OpCase {
  std::string name;  // unique; ASCII letters, digits and '_' (used in test names)
  Op op;             // the op under test (the output's op)
  CaseBuildFn build;
};
void PrintTo(const OpCase& c, std::ostream* os);

// Every op of docs/ops.md x every type combination of its table, plus layout variants (broadcast, non-contiguous
// sources, masks, sinks, partial rope, ...). Built once; stable order.
const std::vector<OpCase>& op_catalogue();

// A case (or any graph builder) built in its own no_alloc context and allocated in one buffer of buft, every byte
// poisoned with 0xFF (NaN for f32/f16/bf16, -1 for i32) so outputs a backend does not write show up.
struct CaseInstance {
  std::unique_ptr<Context> ctx;
  std::unique_ptr<Buffer> buffer;
  std::unique_ptr<Graph> graph;
  Tensor* out = nullptr;
  std::vector<CaseBuilder::Leaf> leafs;
};
Result<CaseInstance> instantiate_case(const CaseBuildFn& build, BufferType& buft);
// Fills the leafs of two instances of the same builder with the same random values: drawn by each leaf's
// generator, written into `reference` with tensor_from_f32, then copied byte for byte into `other`.
Status fill_leafs_identically(CaseInstance& reference, CaseInstance& other, std::mt19937& rng);

// A small llama-style decoder block: rms_norm, mul, mul_mat (f32), soft_max with a causal mask, silu, add.
Tensor* build_llama_block(CaseBuilder& b);

// ---------------------------------------------------------------------------------------------------------------
// Fixtures.
class ConformanceBase {
 protected:
  // Makes the backend under test (or returns false with the factory's skip reason), a fresh CPU reference backend,
  // and the random generator.
  bool init(const BackendFactory& factory, std::string* skip_reason);
  std::string trace() const;  // "backend <name>, seed <n> (replay: TESSERA_CONFORMANCE_SEED=<n>)"

  const BackendFactory* factory_ = nullptr;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Backend> cpu_;  // the reference
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

class BackendConformance : public ::testing::TestWithParam<BackendFactory>, protected ConformanceBase {
 protected:
  void SetUp() override;
  const BackendFactory& factory() const { return GetParam(); }
  BufferType& buft() { return *backend_->default_buffer_type(); }
};

using OpParam = std::tuple<BackendFactory, OpCase>;
class BackendOpConformance : public ::testing::TestWithParam<OpParam>, protected ConformanceBase {
 protected:
  void SetUp() override;
  const BackendFactory& factory() const { return std::get<0>(GetParam()); }
  const OpCase& op_case() const { return std::get<1>(GetParam()); }
};
struct OpParamName {
  std::string operator()(const ::testing::TestParamInfo<OpParam>& info) const {
    return std::get<0>(info.param).name + "_" + std::get<1>(info.param).name;
  }
};

// Instantiates both suites for one or more BackendFactory values. Use at global scope.
#define TESSERA_INSTANTIATE_BACKEND_CONFORMANCE(prefix, ...)                                                        \
  namespace tessera::conformance {                                                                                  \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendConformance, ::testing::Values(__VA_ARGS__), FactoryName());              \
  INSTANTIATE_TEST_SUITE_P(prefix, BackendOpConformance,                                                            \
                           ::testing::Combine(::testing::Values(__VA_ARGS__), ::testing::ValuesIn(op_catalogue())), \
                           OpParamName());                                                                          \
  }                                                                                                                 \
  static_assert(true, "")

}  // namespace tessera::conformance
