// The optimised CPU kernels (backends/cpu/kernels/opt) against the reference kernels, their oracle: random shapes
// (odd sizes, K blocking, edge tiles), non-contiguous inputs, every SIMD level this CPU has (portable, avx2,
// avx512), and thread counts 1..4, which must give bit-identical results. A failure prints the seed
// (rerun with TESSERA_OP_SEED=<seed>, the convention of op_oracle.h).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "backends/cpu/kernels/opt/opt_kernels.h"
#include "tessera/graph_copy.h"
#include "unit/cpu/op_oracle.h"

namespace tessera {
namespace {

using optest::HT;
using optest::Shape;

std::vector<cpu::CpuKernels> levels() {
  std::vector<cpu::CpuKernels> out;
  for (cpu::CpuKernels k : {cpu::CpuKernels::kPortable, cpu::CpuKernels::kAvx2, cpu::CpuKernels::kAvx512}) {
    if (static_cast<int>(k) <= static_cast<int>(cpu::best_kernels())) out.push_back(k);
  }
  return out;
}

// One case: a context with allocated inputs, a graph with one result, computed by the reference kernels and by every
// optimised level at 1..4 threads.
class Case {
 public:
  explicit Case(uint32_t seed) : rng(seed), ctx(ContextParams{.no_alloc = true}) {}

  std::mt19937 rng;
  Context ctx;

  int rand_int(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
  float uniform(float lo, float hi) { return std::uniform_real_distribution<float>(lo, hi)(rng); }
  std::vector<float> rand_floats(int64_t n, float lo = -1.0f, float hi = 1.0f) {
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = uniform(lo, hi);
    return v;
  }

  Tensor* input(Type type, Shape ne, std::vector<float> vals) {
    Tensor* t = ctx.new_tensor(type, 4, ne.data());
    if (t != nullptr) uploads_.push_back({t, optest::encode(type, vals)});
    return t;
  }
  Tensor* rand_input(Type type, Shape ne, float lo = -1.0f, float hi = 1.0f) {
    return input(type, ne, rand_floats(optest::numel(ne), lo, hi));
  }
  Tensor* ids(Shape ne, int32_t limit) {
    std::vector<float> v(static_cast<size_t>(optest::numel(ne)));
    for (float& x : v) x = static_cast<float>(rand_int(0, limit - 1));
    return input(Type::kI32, ne, v);
  }

  // Runs the comparison. expect_opt: the node must take the optimised path (opt::supports).
  void check(Tensor* out, double tol, bool expect_opt = true) {
    ASSERT_TRUE(ctx.ok()) << ctx.status().to_string();
    ASSERT_NE(out, nullptr);
    set_output(*out);
    Graph graph;
    ASSERT_TRUE(graph.build_forward(out).ok());
    if (expect_opt) {
      EXPECT_TRUE(cpu::opt::supports(*out)) << describe(*out) << " should have an optimised kernel";
    }
    // A guard after the result (the last tensor of the context, so placed after it): no kernel may write past the
    // result's end, into the alignment padding or the guard (a row too many, say).
    Tensor* guard = out->view_src == nullptr ? rand_input(Type::kF32, {64, 1, 1, 1}) : nullptr;
    auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
    ASSERT_TRUE(buf.ok()) << buf.status().to_string();
    buffer_ = std::move(buf.value());
    for (auto& u : uploads_) ASSERT_TRUE(tensor_set(*u.t, u.bytes.data(), 0, u.bytes.size()).ok());
    const uint8_t* tail_begin = static_cast<const uint8_t*>(out->data) + nbytes(*out);
    std::vector<uint8_t> tail;
    if (guard != nullptr) {
      ASSERT_EQ(guard->buffer, out->buffer);
      ASSERT_GE(static_cast<const uint8_t*>(guard->data), tail_begin) << "the guard is not placed after the result";
      tail.assign(tail_begin, static_cast<const uint8_t*>(guard->data) + nbytes(*guard));
    }
    auto tail_intact = [&] { return std::equal(tail.begin(), tail.end(), tail_begin); };

    auto run = [&](cpu::CpuKernels k, int nth) -> std::vector<uint8_t> {
      auto be = cpu::make_backend({.n_threads = nth, .kernels = k});
      EXPECT_EQ(be->graph_compute(graph), ComputeStatus::kSuccess) << be->last_error();
      EXPECT_TRUE(tail_intact()) << describe(*out) << ": " << cpu::kernels_name(k) << " at " << nth
                                 << " threads wrote past the end of the result";
      std::vector<uint8_t> bytes(nbytes(*out));
      EXPECT_TRUE(tensor_get(*out, bytes.data(), 0, bytes.size()).ok());
      return bytes;
    };
    const Shape ne = optest::shape_of(out);
    auto as_ht = [&](const std::vector<uint8_t>& b) {
      HT h(ne);
      h.v = optest::decode(out->type, b.data(), optest::numel(ne));
      return h;
    };
    const HT ref = as_ht(run(cpu::CpuKernels::kReference, 1));
    double ref2 = 0;
    for (double x : ref.v) ref2 += x * x;
    ASSERT_GT(ref2, 0.0) << "the reference result is all zeros: the comparison would prove nothing";

    for (cpu::CpuKernels k : levels()) {
      SCOPED_TRACE(std::string("kernels ") + cpu::kernels_name(k));
      const std::vector<uint8_t> one = run(k, 1);
      const HT got = as_ht(one);
      EXPECT_EQ(optest::count_nonfinite(got), 0u) << optest::first_diffs(ref, got);
      const double e = optest::nmse(ref, got);
      EXPECT_LE(e, tol) << describe(*out) << ": NMSE " << e << "\n" << optest::first_diffs(ref, got);
      for (int nth = 2; nth <= 4; ++nth) {
        EXPECT_TRUE(run(k, nth) == one) << describe(*out) << ": " << nth << " threads differ from 1 thread";
      }
    }
  }

 private:
  struct Upload {
    Tensor* t;
    std::vector<uint8_t> bytes;
  };
  std::vector<Upload> uploads_;
  std::unique_ptr<Buffer> buffer_;
};

class OptKernels : public ::testing::Test {
 protected:
  uint32_t seed = optest::fresh_seed();
  testing::ScopedTrace trace{__FILE__, __LINE__, "random seed: rerun with TESSERA_OP_SEED=" + std::to_string(seed)};
};

bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
// MUL_MAT tolerance: f32-level for float weights and for the GEMM path (weights converted exactly); with quantized
// weights the matrix x vector path also quantizes the activations to q8_0 (relative error up to 1/254 per value,
// NMSE ~1e-5 for uniform inputs), so 1e-4 there.
double mm_tol(Type w, int64_t n) { return is_quant(w) && n < 8 ? 1e-4 : 1e-6; }

// ---- MUL_MAT ----

TEST_F(OptKernels, MulMatAllTypesAndPaths) {
  for (Type w : optest::kWeightTypes) {
    for (int64_t N : {1, 2, 7, 8, 13, 40}) {
      SCOPED_TRACE(std::string(optest::tname(w)) + " N=" + std::to_string(N));
      Case c(seed + static_cast<uint32_t>(N) * 31 + static_cast<uint32_t>(w));
      const int64_t K = is_quant(w) ? 32 * c.rand_int(1, 12) : c.rand_int(1, 300);
      // Quantised activations (quantised weights, N < 8) are checked with an NMSE over at least 16 outputs: over one
      // or a few outputs, one result near zero can make the quantisation error's NMSE exceed any fixed tolerance.
      const int64_t M = c.rand_int(is_quant(w) && N < 8 ? 16 : 1, 90);
      const int64_t A2 = c.rand_int(1, 2), B2 = A2 * c.rand_int(1, 2), B3 = c.rand_int(1, 2);
      Tensor* a = c.rand_input(w, {K, M, A2, 1});
      Tensor* b = c.rand_input(Type::kF32, {K, N, B2, B3});
      c.check(mul_mat(c.ctx, a, b), mm_tol(w, N));
    }
  }
}

TEST_F(OptKernels, MulMatLargeBlocksAndEdges) {
  // K beyond one K block (256), M beyond one row panel (256), N beyond a few column slivers.
  for (Type w : {Type::kF32, Type::kF16, Type::kQ4_0}) {
    Case c(seed + static_cast<uint32_t>(w));
    const int64_t K = is_quant(w) ? 32 * c.rand_int(9, 20) : c.rand_int(257, 700);
    const int64_t M = c.rand_int(257, 400), N = c.rand_int(8, 60);
    SCOPED_TRACE(std::string(optest::tname(w)) + " K=" + std::to_string(K) + " M=" + std::to_string(M) +
                 " N=" + std::to_string(N));
    Tensor* a = c.rand_input(w, {K, M, 1, 1});
    Tensor* b = c.rand_input(Type::kF32, {K, N, 1, 1});
    c.check(mul_mat(c.ctx, a, b), mm_tol(w, N));
  }
}

// Products large enough for the shared-b schedule (at 2 or more threads the threads pack each panel of b together,
// then split the rows): several K panels, several column panels (N beyond 1536), fewer row tiles than threads (some
// threads only pack), rows enough for several chunks per panel (the threads take them from counters reused from
// panel to panel), batches with broadcast weights, quantized weights. Each also runs at 1 thread (work units), and
// every thread count must give the same bits.
TEST_F(OptKernels, MulMatSharedPanelsOfB) {
  struct Dims {
    Type w;
    int64_t K, M, N, A2, B2;
  };
  for (const Dims& d :
       {Dims{Type::kF32, 600, 70, 60, 1, 1}, Dims{Type::kF32, 40, 40, 1600, 1, 1}, Dims{Type::kF32, 700, 600, 40, 1, 1},
        Dims{Type::kF16, 300, 100, 80, 2, 4}, Dims{Type::kQ4_0, 640, 70, 50, 1, 1}}) {
    SCOPED_TRACE(std::string(optest::tname(d.w)) + " K=" + std::to_string(d.K) + " M=" + std::to_string(d.M) +
                 " N=" + std::to_string(d.N) + " batches=" + std::to_string(d.B2));
    ASSERT_GE(d.K * d.M * d.N, int64_t{1} << 21) << "below the shared-b schedule's threshold";
    Case c(seed + static_cast<uint32_t>(d.N * 7 + d.K));
    Tensor* a = c.rand_input(d.w, {d.K, d.M, d.A2, 1});
    Tensor* b = c.rand_input(Type::kF32, {d.K, d.N, d.B2, 1});
    c.check(mul_mat(c.ctx, a, b), mm_tol(d.w, d.N));
  }
}

TEST_F(OptKernels, MulMatNonContiguous) {
  for (Type w : {Type::kF32, Type::kF16, Type::kQ8_0}) {
    for (int64_t N : {3, 21}) {
      SCOPED_TRACE(std::string(optest::tname(w)) + " N=" + std::to_string(N));
      Case c(seed + static_cast<uint32_t>(N) + 7 * static_cast<uint32_t>(w));
      const int64_t K = is_quant(w) ? 64 : c.rand_int(5, 80);
      const int64_t M = c.rand_int(is_quant(w) ? 16 : 3, 40);  // quantised activations: >= 16 outputs (above)
      // a: every other row of a bigger weight (strided rows); b: a transposed view (elements not contiguous).
      Tensor* big = c.rand_input(w, {K, 2 * M, 1, 1});
      Tensor* a = view_2d(c.ctx, big, K, M, 2 * big->nb[1], 0);
      Tensor* bt = c.rand_input(Type::kF32, {N, K, 1, 1});
      Tensor* b = transpose(c.ctx, bt);
      c.check(mul_mat(c.ctx, a, b), mm_tol(w, N));
      // b with padded rows (strided, element-contiguous)
      Case d(seed + 99 + static_cast<uint32_t>(N));
      Tensor* a2 = d.rand_input(w, {K, M, 1, 1});
      Tensor* bb = d.rand_input(Type::kF32, {K + 3, N, 1, 1});
      d.check(mul_mat(d.ctx, a2, view_2d(d.ctx, bb, K, N, bb->nb[1], 4)), mm_tol(w, N));
    }
  }
}

// Matrix x vector with one activation row per batch: a thread's claim of 16-row units goes to the block dots as one
// call per batch (the activation side prepared once per call). Many units, batches with broadcast weights, so claims
// start and end mid-batch and runs are cut at batch boundaries; every thread count must give the same bits.
TEST_F(OptKernels, MulMatQuantMatVecClaimsAcrossBatches) {
  for (Type w : {Type::kQ4_0, Type::kQ8_0}) {
    for (int64_t nb : {8, 20, 264}) {  // whole groups; groups + single blocks; K beyond one activation segment
      SCOPED_TRACE(std::string(optest::tname(w)) + " blocks=" + std::to_string(nb));
      Case c(seed + static_cast<uint32_t>(nb) * 5 + static_cast<uint32_t>(w));
      const int64_t M = c.rand_int(250, 420);
      Tensor* a = c.rand_input(w, {32 * nb, M, 1, 1});
      Tensor* b = c.rand_input(Type::kF32, {32 * nb, 1, 3, 2});
      c.check(mul_mat(c.ctx, a, b), mm_tol(w, 1));
    }
  }
}

// Matrix x vector with quantized weights at block counts that exercise every path of the block dots (the AVX-512
// table: groups of 8 q4_0 / 4 q8_0 blocks, then single blocks; activations prepared in K segments of 32 groups),
// with plain and strided weight rows.
TEST_F(OptKernels, MulMatQuantMatVecBlockCounts) {
  for (Type w : {Type::kQ4_0, Type::kQ8_0}) {
    for (int64_t nb : {1, 3, 4, 5, 7, 8, 9, 12, 16, 17, 31, 33, 136, 264}) {
      SCOPED_TRACE(std::string(optest::tname(w)) + " blocks=" + std::to_string(nb));
      Case c(seed + static_cast<uint32_t>(nb) * 13 + static_cast<uint32_t>(w));
      const int64_t K = 32 * nb, M = c.rand_int(16, 70), N = c.rand_int(1, 3);  // enough outputs for a stable NMSE
      if (nb % 2 == 0) {
        Tensor* a = c.rand_input(w, {K, M, 1, 1});
        Tensor* b = c.rand_input(Type::kF32, {K, N, 1, 1});
        c.check(mul_mat(c.ctx, a, b), mm_tol(w, N));
      } else {  // every third row of a bigger weight
        Tensor* big = c.rand_input(w, {K, 3 * M, 1, 1});
        Tensor* a = view_2d(c.ctx, big, K, M, 3 * big->nb[1], big->nb[1]);
        Tensor* b = c.rand_input(Type::kF32, {K, N, 1, 1});
        c.check(mul_mat(c.ctx, a, b), mm_tol(w, N));
      }
    }
  }
}

// The quantized block dots of every table against exact integer sums (to f32 roundings): random blocks (q8_0 weights
// including -128, activations in [-127, 127] as quantize_row_q8_0 makes them), odd block counts, several K segments,
// more rows than one batch of 16, rows at a stride larger than a row; the many-rows entry point must give exactly the
// single-row results.
TEST_F(OptKernels, QuantBlockDotsExact) {
  std::mt19937 rng(seed);
  auto rnd = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  auto f16 = [&]() { return fp32_to_fp16(std::uniform_real_distribution<float>(0.001f, 0.05f)(rng)); };
  for (cpu::opt::Isa isa : {cpu::opt::Isa::kPortable, cpu::opt::Isa::kAvx2, cpu::opt::Isa::kAvx512}) {
    const cpu::opt::KernelTable* t = cpu::opt::table_for(isa);
    if (t == nullptr) continue;
    SCOPED_TRACE(t->name);
    for (int64_t nb : {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 24, 127, 128, 129, 257, 300, 513}) {
      SCOPED_TRACE("blocks " + std::to_string(nb));
      // more than one batch of 16 rows whenever there are several K segments; row stride: nb + pad blocks
      const int64_t rows = nb > 128 ? rnd(17, 40) : rnd(1, 40), pad = rnd(0, 3);
      std::vector<BlockQ8_0> y(static_cast<size_t>(nb));
      for (BlockQ8_0& blk : y) {
        blk.d = f16();
        for (int8_t& q : blk.qs) q = static_cast<int8_t>(rnd(-127, 127));
      }
      std::vector<BlockQ8_0> x8(static_cast<size_t>(rows * (nb + pad)));
      std::vector<BlockQ4_0> x4(x8.size());
      for (size_t i = 0; i < x8.size(); ++i) {
        x8[i].d = f16();
        x4[i].d = f16();
        for (int8_t& q : x8[i].qs) q = static_cast<int8_t>(rnd(-128, 127));
        for (uint8_t& q : x4[i].qs) q = static_cast<uint8_t>(rnd(0, 255));
      }
      std::vector<float> out8(static_cast<size_t>(rows)), out4(out8.size());
      t->dot_rows_q8_0_q8_0(x8.data(), static_cast<size_t>(nb + pad) * sizeof(BlockQ8_0), rows, y.data(), nb,
                            out8.data());
      t->dot_rows_q4_0_q8_0(x4.data(), static_cast<size_t>(nb + pad) * sizeof(BlockQ4_0), rows, y.data(), nb,
                            out4.data());
      double e8 = 0, e4 = 0, r8 = 0, r4 = 0;
      for (int64_t r = 0; r < rows; ++r) {
        const BlockQ8_0* xr8 = x8.data() + r * (nb + pad);
        const BlockQ4_0* xr4 = x4.data() + r * (nb + pad);
        double ref8 = 0, ref4 = 0, abs8 = 0, abs4 = 0;
        for (int64_t b = 0; b < nb; ++b) {
          int64_t s8 = 0, s4 = 0, m8 = 0, m4 = 0;  // the block's exact sums, and of the products' magnitudes
          for (int j = 0; j < 32; ++j) {
            s8 += int64_t{xr8[b].qs[j]} * y[b].qs[j];
            m8 += std::abs(int64_t{xr8[b].qs[j]} * y[b].qs[j]);
            const int nib = j < 16 ? (xr4[b].qs[j] & 0x0f) : (xr4[b].qs[j - 16] >> 4);
            s4 += int64_t{nib - 8} * y[b].qs[j];
            m4 += std::abs(int64_t{nib - 8} * y[b].qs[j]);
          }
          const double dy = fp16_to_fp32(y[b].d);
          const double d8 = fp16_to_fp32(xr8[b].d) * dy, d4 = fp16_to_fp32(xr4[b].d) * dy;
          ref8 += static_cast<double>(s8) * d8;
          ref4 += static_cast<double>(s4) * d4;
          // the scale of the rounding: a kernel may scale partial sums of a block (SIMD lanes of a few products, as
          // ggml's AVX2 dots do) before adding them, so a block whose products cancel (a sum of -1 from terms of
          // hundreds; seed 2145799909) is exact only to f32 roundings of its products' magnitudes
          abs8 += static_cast<double>(m8) * d8;
          abs4 += static_cast<double>(m4) * d4;
        }
        e8 += (out8[r] - ref8) * (out8[r] - ref8);
        e4 += (out4[r] - ref4) * (out4[r] - ref4);
        r8 += abs8 * abs8;  // f32 rounding is relative to the terms, which may cancel
        r4 += abs4 * abs4;
        // one row alone: the same bits as in the group
        EXPECT_EQ(t->dot_q8_0_q8_0(xr8, y.data(), nb), out8[r]) << "q8_0 row " << r << " of " << rows;
        EXPECT_EQ(t->dot_q4_0_q8_0(xr4, y.data(), nb), out4[r]) << "q4_0 row " << r << " of " << rows;
      }
      // f32 accumulation of exact partial sums: errors of a few f32 roundings of the products' magnitude
      EXPECT_LE(e8 / r8, 1e-11) << "q8_0";
      EXPECT_LE(e4 / r4, 1e-11) << "q4_0";
    }
  }
}

// ---- MUL_MAT_ID ----

TEST_F(OptKernels, MulMatId) {
  for (Type w : optest::kWeightTypes) {
    for (bool shared_b : {false, true}) {
      SCOPED_TRACE(std::string(optest::tname(w)) + (shared_b ? " b shared by experts" : " b per expert"));
      Case c(seed + static_cast<uint32_t>(w) * 5 + shared_b);
      const int64_t K = is_quant(w) ? 32 * c.rand_int(1, 20) : c.rand_int(1, 100);
      // Quantized weights: the activations are quantized to q8_0 too, and the NMSE of a handful of outputs can be
      // dominated by one sum that cancels (seed 2522441193 drew M = 1: NMSE 0.0125 on 2 outputs). At least 16 rows
      // per expert make the NMSE an average, as in the MUL_MAT cases (mm_tol).
      const int64_t M = is_quant(w) ? c.rand_int(16, 40) : c.rand_int(1, 40), n_expert = 4, n_used = 2,
                    T = c.rand_int(1, 5);
      Tensor* as = c.rand_input(w, {K, M, n_expert, 1});
      Tensor* b = c.rand_input(Type::kF32, {K, shared_b ? 1 : n_used, T, 1});
      Tensor* ids = c.ids({n_used, T, 1, 1}, static_cast<int32_t>(n_expert));
      c.check(mul_mat_id(c.ctx, as, b, ids), is_quant(w) ? 1e-4 : 1e-6);
    }
  }
}

// ---- element-wise ----

TEST_F(OptKernels, BinaryWithBroadcast) {
  for (Op op : {Op::kAdd, Op::kMul, Op::kDiv}) {
    for (int bcast = 0; bcast < 3; ++bcast) {
      SCOPED_TRACE(std::string(op_name(op)) + " broadcast " + std::to_string(bcast));
      Case c(seed + static_cast<uint32_t>(op) * 3 + bcast);
      const int64_t n0 = 6 * c.rand_int(1, 40) + (bcast == 0 ? c.rand_int(0, 5) : 0);
      const Shape ane{n0, c.rand_int(1, 7), 2, c.rand_int(1, 2)};
      Shape bne = ane;
      if (bcast == 1) bne = {1, ane[1], 1, ane[3]};
      if (bcast == 2) bne = {n0 / 3, 1, 2, 1};
      Tensor* a = c.rand_input(Type::kF32, ane);
      Tensor* b = op == Op::kDiv ? c.input(Type::kF32, bne,
                                           [&] {
                                             std::vector<float> v = c.rand_floats(optest::numel(bne), 0.5f, 2.0f);
                                             for (float& x : v) x = c.rand_int(0, 1) ? x : -x;
                                             return v;
                                           }())
                                 : c.rand_input(Type::kF32, bne);
      Tensor* r = op == Op::kAdd ? add(c.ctx, a, b) : op == Op::kMul ? mul(c.ctx, a, b) : div(c.ctx, a, b);
      c.check(r, 1e-6);
    }
  }
}

TEST_F(OptKernels, ScaleUnaryGlu) {
  for (int which = 0; which < 9; ++which) {
    SCOPED_TRACE("case " + std::to_string(which));
    Case c(seed + which);
    const Shape ne{c.rand_int(1, 200), c.rand_int(1, 9), c.rand_int(1, 3), 1};
    Tensor* a = c.rand_input(Type::kF32, ne, -6.0f, 6.0f);
    Tensor* r = nullptr;
    switch (which) {
      case 0: r = scale(c.ctx, a, c.uniform(-2, 2), c.uniform(-1, 1)); break;
      case 1: r = unary(c.ctx, a, UnaryOp::kSilu); break;
      case 2: r = unary(c.ctx, a, UnaryOp::kGelu); break;
      case 3: r = unary(c.ctx, a, UnaryOp::kRelu); break;
      case 4: r = unary(c.ctx, a, UnaryOp::kNeg); break;
      case 5: r = glu(c.ctx, a, c.rand_input(Type::kF32, ne), GluOp::kSwiglu); break;
      case 6: r = glu(c.ctx, a, c.rand_input(Type::kF32, ne), GluOp::kGeglu); break;
      default: {
        Tensor* h = c.rand_input(Type::kF32, {2 * ne[0], ne[1], ne[2], 1}, -6.0f, 6.0f);
        r = glu(c.ctx, h, nullptr, which == 7 ? GluOp::kSwiglu : GluOp::kGeglu, /*swapped=*/which == 8);
      }
    }
    c.check(r, 1e-6);
  }
}

TEST_F(OptKernels, ElementwiseOnStridedRows) {
  Case c(seed);
  const int64_t n0 = c.rand_int(1, 70), n1 = c.rand_int(2, 9);
  Tensor* big = c.rand_input(Type::kF32, {n0 + 5, n1, 2, 1});
  Tensor* a = view_3d(c.ctx, big, n0, n1, 2, big->nb[1], big->nb[2], 8);
  Tensor* b = c.rand_input(Type::kF32, {n0, n1, 2, 1});
  c.check(add(c.ctx, silu(c.ctx, a), b), 1e-6);
}

// ---- norms, soft_max, rope ----

TEST_F(OptKernels, Norms) {
  for (Op op : {Op::kRmsNorm, Op::kNorm}) {
    Case c(seed + static_cast<uint32_t>(op));
    // NORM subtracts each row's mean: a row of one value normalises to 0 everywhere, a result that proves nothing
    // (the check refuses it; seed 746128667 drew one), so NORM's rows have 2 values or more.
    const Shape ne{c.rand_int(op == Op::kNorm ? 2 : 1, 300), c.rand_int(1, 6), c.rand_int(1, 3), 1};
    Tensor* a = c.rand_input(Type::kF32, ne, -3.0f, 5.0f);
    c.check(op == Op::kRmsNorm ? rms_norm(c.ctx, a, 1e-5f) : norm(c.ctx, a, 1e-5f), 1e-6);
  }
}

TEST_F(OptKernels, SoftMax) {
  for (int mask_kind = 0; mask_kind < 3; ++mask_kind) {  // none, f32, f16
    SCOPED_TRACE("mask kind " + std::to_string(mask_kind));
    Case c(seed + mask_kind);
    const int64_t n = c.rand_int(1, 150), rows = c.rand_int(2, 8), heads = c.rand_int(1, 3);
    Tensor* a = c.rand_input(Type::kF32, {n, rows, heads, 1}, -4.0f, 4.0f);
    Tensor* m = nullptr;
    if (mask_kind > 0) {
      std::vector<float> mv = c.rand_floats(n * rows, -2.0f, 2.0f);
      for (int64_t r = 0; r < rows; ++r) {  // causal-like -inf tail, and one fully masked row
        for (int64_t i = 0; i < n; ++i) {
          if (i > r + n / 2 || r == 1) mv[static_cast<size_t>(r * n + i)] = -INFINITY;
        }
      }
      m = c.input(mask_kind == 1 ? Type::kF32 : Type::kF16, {n, rows, 1, 1}, mv);
    }
    c.check(soft_max(c.ctx, a, m, c.uniform(0.1f, 2.0f)), 1e-6);
  }
}

TEST_F(OptKernels, SoftMaxLongStridedRows) {
  // Rows longer than a few vectors with a tail, read through a view with padded rows (the fused scale + mask + max
  // pass, exp + sum, normalise); with and without an f32 mask.
  for (bool with_mask : {false, true}) {
    Case c(seed + 17 + with_mask);
    const int64_t n = c.rand_int(200, 1100), rows = c.rand_int(2, 9);
    Tensor* big = c.rand_input(Type::kF32, {n + 7, rows, 1, 1}, -6.0f, 6.0f);
    Tensor* a = view_2d(c.ctx, big, n, rows, big->nb[1], 4 * 3);
    Tensor* m = with_mask ? c.rand_input(Type::kF32, {n, rows, 1, 1}, -3.0f, 0.0f) : nullptr;
    c.check(soft_max(c.ctx, a, m, c.uniform(0.2f, 1.5f)), 1e-6);
  }
}

TEST_F(OptKernels, Rope) {
  for (RopeMode mode : {RopeMode::kNormal, RopeMode::kNeox}) {
    for (bool ff : {false, true}) {
      Case c(seed + static_cast<uint32_t>(mode) + ff);
      const int64_t n_dims = 2 * c.rand_int(1, 32);
      const int64_t ne0 = n_dims + 2 * c.rand_int(0, 4), heads = c.rand_int(1, 5), tokens = c.rand_int(1, 6);
      Tensor* a = c.rand_input(Type::kF32, {ne0, heads, tokens, 1});
      std::vector<float> p(static_cast<size_t>(tokens));
      for (float& x : p) x = static_cast<float>(c.rand_int(0, 500));
      Tensor* pos = c.input(Type::kI32, {tokens, 1, 1, 1}, p);
      Tensor* f = ff ? c.rand_input(Type::kF32, {n_dims / 2, 1, 1, 1}, 0.5f, 4.0f) : nullptr;
      c.check(rope(c.ctx, a, pos, static_cast<int>(n_dims), mode, 10000.0f, c.uniform(0.25f, 1.0f), f), 1e-6);
    }
  }
}

// ---- GET_ROWS, FLASH_ATTN_EXT ----

TEST_F(OptKernels, GetRows) {
  for (Type w : optest::kWeightTypes) {
    Case c(seed + static_cast<uint32_t>(w));
    const int64_t n0 = is_quant(w) ? 32 * c.rand_int(1, 5) : c.rand_int(1, 100), n_rows = c.rand_int(1, 20);
    Tensor* a = c.rand_input(w, {n0, n_rows, 2, 1});
    Tensor* ids = c.ids({c.rand_int(1, 9), 2, 1, 1}, static_cast<int32_t>(n_rows));
    c.check(get_rows(c.ctx, a, ids), 0.0);  // conversions are exact
  }
}

TEST_F(OptKernels, FlashAttn) {
  for (Type kv : {Type::kF16, Type::kF32, Type::kBF16}) {
    for (bool extras : {false, true}) {  // mask and sinks
      SCOPED_TRACE(std::string(optest::tname(kv)) + (extras ? " with mask and sinks" : ""));
      Case c(seed + static_cast<uint32_t>(kv) * 2 + extras);
      const int64_t D = c.rand_int(1, 80), Dv = c.rand_int(1, 70), n_kv = c.rand_int(1, 60), n_q = c.rand_int(1, 5);
      const int64_t H_kv = c.rand_int(1, 2), H = H_kv * c.rand_int(1, 3);
      Tensor* q = c.rand_input(Type::kF32, {D, n_q, H, 1});
      Tensor* k = c.rand_input(kv, {D, n_kv, H_kv, 1});
      Tensor* v = c.rand_input(kv, {Dv, n_kv, H_kv, 1});
      Tensor* mask = nullptr;
      Tensor* sinks = nullptr;
      if (extras) {
        std::vector<float> mv = c.rand_floats(n_kv * n_q, -1.0f, 1.0f);
        for (int64_t i = 0; i < n_q; ++i) {
          for (int64_t j = 0; j < n_kv; ++j) {
            if (j > i + n_kv / 2) mv[static_cast<size_t>(i * n_kv + j)] = -INFINITY;
          }
        }
        mask = c.input(Type::kF16, {n_kv, n_q, 1, 1}, mv);
        sinks = c.rand_input(Type::kF32, {H, 1, 1, 1});
      }
      c.check(flash_attn_ext(c.ctx, q, k, v, mask, 1.0f / std::sqrt(static_cast<float>(D)), sinks), 1e-6);
    }
  }
}

// ---- errors and dispatch ----

TEST_F(OptKernels, IdsOutOfRangeFailWithEveryThreadCount) {
  for (int nth = 1; nth <= 4; ++nth) {
    Case c(seed);
    Tensor* as = c.rand_input(Type::kQ8_0, {64, 8, 3, 1});
    Tensor* b = c.rand_input(Type::kF32, {64, 2, 4, 1});
    Tensor* ids = c.input(Type::kI32, {2, 4, 1, 1}, {0, 1, 2, 3, 0, 1, 2, 0});  // 3 >= n_expert
    Tensor* r = mul_mat_id(c.ctx, as, b, ids);
    Graph g;
    ASSERT_TRUE(g.build_forward(r).ok());
    auto buf = alloc_ctx_tensors(c.ctx, *cpu::buffer_type());
    ASSERT_TRUE(buf.ok());
    std::vector<float> bv(64 * 2 * 4, 0.5f);
    ASSERT_TRUE(tensor_from_f32(*b, bv).ok());
    const int32_t idv[8] = {0, 1, 2, 3, 0, 1, 2, 0};
    ASSERT_TRUE(tensor_set(*ids, idv, 0, sizeof idv).ok());
    auto be = cpu::make_backend({.n_threads = nth, .kernels = cpu::best_kernels()});
    EXPECT_EQ(be->graph_compute(g), ComputeStatus::kFailed);
    EXPECT_NE(be->last_error().find("out of range"), std::string::npos) << be->last_error();
  }
}

TEST(OptKernelsDispatch, LevelsAndEnvironment) {
  auto be = cpu::make_backend({.n_threads = 1, .kernels = cpu::CpuKernels::kReference});
  EXPECT_EQ(cpu::kernels(*be), cpu::CpuKernels::kReference);
  cpu::set_kernels(*be, cpu::CpuKernels::kAvx512);  // lowered to what the CPU has
  EXPECT_LE(static_cast<int>(cpu::kernels(*be)), static_cast<int>(cpu::best_kernels()));
  cpu::set_kernels(*be, cpu::CpuKernels::kPortable);
  EXPECT_EQ(cpu::kernels(*be), cpu::CpuKernels::kPortable);

  const char* old = std::getenv("TESSERA_CPU_ISA");
  const std::string saved = old != nullptr ? old : "";
  unsetenv("TESSERA_CPU_ISA");
  EXPECT_EQ(cpu::kernels(*cpu::make_backend({.n_threads = 1})), cpu::CpuKernels::kReference);
  setenv("TESSERA_CPU_ISA", "portable", 1);
  EXPECT_EQ(cpu::kernels(*cpu::make_backend({.n_threads = 1})), cpu::CpuKernels::kPortable);
  setenv("TESSERA_CPU_ISA", "ref", 1);
  EXPECT_EQ(cpu::kernels(*cpu::make_backend({.n_threads = 1})), cpu::CpuKernels::kReference);
  if (old != nullptr) {
    setenv("TESSERA_CPU_ISA", saved.c_str(), 1);
  } else {
    unsetenv("TESSERA_CPU_ISA");
  }
}

TEST(OptKernelsDispatch, PlanReusesItsWorkBuffer) {
  Context ctx(ContextParams{.no_alloc = true});
  Tensor* a = ctx.new_tensor_2d(Type::kQ4_0, 64, 16);
  Tensor* b = ctx.new_tensor_2d(Type::kF32, 64, 1);
  Tensor* r = mul_mat(ctx, a, b);
  Graph g;
  ASSERT_TRUE(g.build_forward(r).ok());
  auto buf = alloc_ctx_tensors(ctx, *cpu::buffer_type());
  ASSERT_TRUE(buf.ok());
  std::vector<float> av(64 * 16), bv(64);
  for (size_t i = 0; i < av.size(); ++i) av[i] = static_cast<float>(i % 7) - 3.0f;
  for (size_t i = 0; i < bv.size(); ++i) bv[i] = static_cast<float>(i % 5) * 0.25f;
  ASSERT_TRUE(tensor_from_f32(*a, av).ok());
  ASSERT_TRUE(tensor_from_f32(*b, bv).ok());
  auto be = cpu::make_backend({.n_threads = 3, .kernels = cpu::best_kernels()});
  auto plan = be->plan_create(g);
  ASSERT_TRUE(plan.ok());
  ASSERT_EQ(be->plan_compute(**plan), ComputeStatus::kSuccess) << be->last_error();
  const std::vector<float> first = *tensor_to_f32(*r);
  ASSERT_EQ(be->plan_compute(**plan), ComputeStatus::kSuccess);
  EXPECT_EQ(*tensor_to_f32(*r), first);
  ASSERT_EQ(be->graph_compute(g), ComputeStatus::kSuccess);
  EXPECT_EQ(*tensor_to_f32(*r), first);
}

// Units with claim counters: the threads' chunks cover [0, n) once, in order of the counter; each chunk is
// max(min_chunk, left / (share_div * threads)) of what was left when it was taken (the last one cut at n).
TEST(OptKernelsUnits, ChunksAreSharesOfWhatIsLeftAndCoverEveryUnitOnce) {
  for (int64_t div : {1, 2, 8}) {  // the GEMM rows, the matrix x vector, the default
    for (int nth : {2, 3}) {
      SCOPED_TRACE("share_div " + std::to_string(div) + ", threads " + std::to_string(nth));
      cpu::opt::ClaimCounter counters[cpu::opt::kClaimCounters];
      std::vector<cpu::opt::Units> units;
      for (int i = 0; i < nth; ++i) {
        cpu::opt::Params p;
        p.ith = i;
        p.nth = nth;
        p.claims = counters;
        units.emplace_back(p, 1, 1000, 4, div);
      }
      std::vector<int> seen(1000, 0);
      int64_t expect_u0 = 0;
      int chunks = 0;
      {  // by hand: the first chunk of 1000 units is 1000 / (div * nth), floored
        cpu::opt::ClaimCounter fresh[cpu::opt::kClaimCounters];
        cpu::opt::Params p;
        p.nth = nth;
        p.claims = fresh;
        cpu::opt::Units first(p, 0, 1000, 4, div);
        int64_t u0 = -1, u1 = -1;
        ASSERT_TRUE(first.next(&u0, &u1));
        const int64_t hand = div == 1   ? (nth == 2 ? 500 : 333)
                             : div == 2 ? (nth == 2 ? 250 : 166)
                                        : (nth == 2 ? 62 : 41);
        EXPECT_EQ(u0, 0);
        EXPECT_EQ(u1, hand);
      }
      for (bool any = true; any;) {  // the threads take turns
        any = false;
        for (cpu::opt::Units& u : units) {
          int64_t u0, u1;
          if (!u.next(&u0, &u1)) continue;
          any = true;
          ++chunks;
          EXPECT_EQ(u0, expect_u0);
          EXPECT_EQ(u1, std::min<int64_t>(1000, u0 + std::max<int64_t>(4, (1000 - u0) / (div * nth))));
          for (int64_t k = u0; k < u1; ++k) ++seen[static_cast<size_t>(k)];
          expect_u0 = u1;
        }
      }
      EXPECT_EQ(expect_u0, 1000);
      EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int c) { return c == 1; }));
      if (div < 8) {
        EXPECT_LT(chunks, 40) << "longer chunks than with the default share";
      }
    }
  }
}

}  // namespace
}  // namespace tessera
