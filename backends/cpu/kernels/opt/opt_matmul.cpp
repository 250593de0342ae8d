// Optimised MUL_MAT and MUL_MAT_ID.
//
// MUL_MAT r[m, n] = a[:, m] . b[:, n] has two paths, chosen by the shape alone (never by the thread count):
// - N >= kGemmMinN: a blocked GEMM. Panels of a (any weight type, converted to f32 while packing) and of b are packed
//   for the table's mr x nr micro-kernel; every result element is one fused multiply-add chain over k in order, so
//   neither the blocking nor the thread split changes a bit of it.
// - N < kGemmMinN (matrix x vector): dot products straight from the weight rows. Quantized weights meet activations
//   quantized to q8_0 once per node (phase 1, then a sync), and the block dot products run on 8-bit integers.
#include <algorithm>
#include <cstring>

#include "../ref/ref_ops.h"
#include "opt_kernels.h"

namespace tessera::cpu::opt {

namespace {

constexpr int64_t kKc = 256;    // K block (a multiple of 32: quantized panels start at block boundaries)
constexpr int64_t kMc = 256;    // rows of a per packed panel
constexpr int64_t kNc = 1536;   // columns of b per packed panel (a multiple of every table's nr)
constexpr int64_t kMaxNr = 16;  // the widest micro-tile of any table (pack_b_slivers keeps one pointer per column)
constexpr int64_t kMaxMr = 32;  // the tallest (gemm_rows keeps one pointer per row)
constexpr int64_t kGemmMinN = 8;
constexpr int64_t kMvChunk = 16;    // weight rows per matrix x vector work unit
constexpr int64_t kMvMinClaim = 4;  // units: the smallest chunk a thread takes at once (64 rows)
constexpr int64_t kMvShareDiv = 2;  // a chunk is 1 / (2 * threads) of what is left (Units)
// The shared-b schedule's claims of rows of a: a 1 / (kGemmShareDiv * threads) share of what is left, at least
// kGemmMinClaimRows (opt::Units). With 2 threads a panel's rows go as 1/2, 1/4, 1/8, ... down to 64 rows: long runs
// first, a short tail. Measured against 256-row chunks (share 1/16): 1.01-1.05 at 1024^3, 1.05 at 3072^3; finer chunks
// of 64 rows throughout: 0.94 (bench/RESULTS.md, CPU kernels, session 14). The macros let bench/tools/gemm_ab.sh build
// a variant; nothing else sets them.
#ifndef TESSERA_GEMM_MIN_CLAIM_ROWS
#define TESSERA_GEMM_MIN_CLAIM_ROWS 64
#endif
#ifndef TESSERA_GEMM_SHARE_DIV
#define TESSERA_GEMM_SHARE_DIV 1
#endif
constexpr int64_t kGemmMinClaimRows = TESSERA_GEMM_MIN_CLAIM_ROWS;
constexpr int64_t kGemmShareDiv = TESSERA_GEMM_SHARE_DIV;
constexpr int64_t kPackMinClaim = 4;  // slivers of b: the smallest chunk of its packing

bool is_quant(Type t) { return t == Type::kQ8_0 || t == Type::kQ4_0; }
int64_t cdiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// Strides and base address allow direct typed access (f32 at 4-byte, f16/bf16/blocks at 2-byte alignment).
bool aligned_for(const Tensor& t, size_t align) {
  if (reinterpret_cast<uintptr_t>(t.data) % align != 0 && t.data != nullptr) return false;
  for (int i = 0; i < kMaxDims; ++i) {
    if (t.nb[i] % align != 0) return false;
  }
  return true;
}
size_t type_align(Type t) { return t == Type::kF32 ? 4 : 2; }

bool weight_ok(const Tensor& a) { return a.nb[0] == unit_bytes(a.type) && aligned_for(a, type_align(a.type)); }
bool result_ok(const Tensor& node) { return node.type == Type::kF32 && node.nb[0] == 4 && aligned_for(node, 4); }

// Bytes of one activation row in the form the matrix x vector path reads: q8_0 blocks for quantized weights, f32
// otherwise.
size_t act_row_bytes(Type wtype, int64_t K) {
  return is_quant(wtype) ? static_cast<size_t>(K / kQK) * sizeof(BlockQ8_0) : static_cast<size_t>(K) * 4;
}

// Activations of the matrix x vector path. Quantized weights: every row of b quantized to q8_0. Float weights: rows
// copied only when b's elements are not contiguous.
bool need_act_buffer(const Tensor& a, const Tensor& b) { return is_quant(a.type) || b.nb[0] != 4; }

size_t act_buffer_bytes(const Tensor& a, const Tensor& b, int64_t rows, int nth) {
  if (!need_act_buffer(a, b)) return 0;
  // shared rows + one f32 gather row per thread
  return align64(static_cast<size_t>(rows) * act_row_bytes(a.type, a.ne[0])) +
         static_cast<size_t>(nth) * align64(static_cast<size_t>(a.ne[0]) * 4);
}

// Phase 1 of the matrix x vector paths: rows [0, rows) of b, row r at b_row(r), into the activation buffer.
template <typename RowFn>
void prepare_activations(const KernelTable& t, const Tensor& a, const Tensor& b, int64_t rows, RowFn b_row,
                         const Params& p) {
  if (!need_act_buffer(a, b)) return;
  const int64_t K = a.ne[0];
  char* act = static_cast<char*>(p.work);
  float* gather = reinterpret_cast<float*>(act + align64(static_cast<size_t>(rows) * act_row_bytes(a.type, K)) +
                                           static_cast<size_t>(p.ith) * align64(static_cast<size_t>(K) * 4));
  ref::ComputeParams cp{p.ith, p.nth};
  int64_t r0, r1;
  ref::partition(rows, cp, &r0, &r1);
  for (int64_t r = r0; r < r1; ++r) {
    const char* src = b_row(r);
    const float* x = reinterpret_cast<const float*>(src);
    if (b.nb[0] != 4) {
      for (int64_t k = 0; k < K; ++k) std::memcpy(&gather[k], src + static_cast<size_t>(k) * b.nb[0], 4);
      x = gather;
    }
    char* dst = act + static_cast<size_t>(r) * act_row_bytes(a.type, K);
    if (is_quant(a.type)) {
      quantize_row_q8_0(x, reinterpret_cast<BlockQ8_0*>(dst), K);
    } else {
      std::memcpy(dst, x, static_cast<size_t>(K) * 4);
    }
  }
  (void)t;
}

// One dot product of weight row w (type of a) with activation row x (as prepared above).
inline float dot_row(const KernelTable& t, Type wtype, const char* w, const char* x, int64_t K) {
  switch (wtype) {
    case Type::kF32: return t.dot_f32(reinterpret_cast<const float*>(w), reinterpret_cast<const float*>(x), K);
    case Type::kF16: return t.dot_f16_f32(reinterpret_cast<const uint16_t*>(w), reinterpret_cast<const float*>(x), K);
    case Type::kBF16: return t.dot_bf16_f32(reinterpret_cast<const uint16_t*>(w), reinterpret_cast<const float*>(x), K);
    case Type::kQ8_0:
      return t.dot_q8_0_q8_0(reinterpret_cast<const BlockQ8_0*>(w), reinterpret_cast<const BlockQ8_0*>(x), K / kQK);
    case Type::kQ4_0:
      return t.dot_q4_0_q8_0(reinterpret_cast<const BlockQ4_0*>(w), reinterpret_cast<const BlockQ8_0*>(x), K / kQK);
    default: return 0.0f;
  }
}

// nrows quantized weight rows (row r at w + r * stride) against activation row x: out[r], the same values as dot_row.
inline void dot_rows(const KernelTable& t, Type wtype, const char* w, size_t stride, int64_t nrows, const char* x,
                     int64_t K, float* out) {
  const BlockQ8_0* y = reinterpret_cast<const BlockQ8_0*>(x);
  if (wtype == Type::kQ8_0) {
    t.dot_rows_q8_0_q8_0(reinterpret_cast<const BlockQ8_0*>(w), stride, nrows, y, K / kQK, out);
  } else {
    t.dot_rows_q4_0_q8_0(reinterpret_cast<const BlockQ4_0*>(w), stride, nrows, y, K / kQK, out);
  }
}

// ---- GEMM ----
//
// Two schedules, chosen by the shape and the thread count (never changing a result: each element is one FMA chain
// over k in order):
// - shared b (large matrices, several threads): per panel of b (kc x nc), the threads pack its slivers together into
//   one of two shared buffers, meet at a barrier, then each multiplies its own rows of a by the whole panel. b is
//   packed once, a once per column panel. The two buffers alternate, so one barrier per panel suffices: a thread
//   packing panel s+1 knows every thread has finished packing panel s, hence finished computing panel s-1.
// - work units (small or many matrices): (batch, column chunk, row chunk) units, row chunks consecutive, so that a
//   thread's consecutive units of one matrix and column chunk become one block that packs b once.

// Per batch, multiply-adds from which the shared-b schedule pays for its barriers.
constexpr int64_t kSharedBMinMacs = int64_t{1} << 21;

bool use_shared_b(const Tensor& node, const Tensor& a, int nth) {
  return nth > 1 && node.ne[0] * node.ne[1] * a.ne[0] >= kSharedBMinMacs;
}

struct GemmSplit {
  int64_t m_chunk, n_chunk, m_units, n_units, batches;
  int64_t units() const { return batches * m_units * n_units; }
};

// Work units of the GEMM: (batch, column chunk, row chunk). Chunks shrink when there are fewer units than threads;
// that only moves work between threads (results do not depend on the split).
GemmSplit gemm_split(const Tensor& node, const KernelTable& t, int nth) {
  const int64_t M = node.ne[0], N = node.ne[1];
  GemmSplit s{};
  s.batches = node.ne[2] * node.ne[3];
  s.m_chunk = kMc;
  s.n_chunk = kNc;
  if (s.batches * cdiv(M, s.m_chunk) < nth) {
    s.m_chunk = std::max<int64_t>(t.mr, cdiv(cdiv(M, nth), t.mr) * t.mr);
    if (s.batches * cdiv(M, s.m_chunk) < nth) s.n_chunk = std::max<int64_t>(t.nr, cdiv(cdiv(N, nth), t.nr) * t.nr);
  }
  s.m_units = cdiv(M, s.m_chunk);
  s.n_units = cdiv(N, s.n_chunk);
  return s;
}

struct GemmWork {
  float *pack_a, *pack_b, *tile, *conv;
  float* shared_b[2];  // the shared-b schedule's panels (pack_b unused then)
};
int64_t gemm_n_cap(const Tensor& node, const KernelTable& t) {
  return std::min<int64_t>(kNc, cdiv(node.ne[1], t.nr) * t.nr);
}
size_t panel_b_bytes(int64_t n_cap) { return align64(static_cast<size_t>(kKc * n_cap) * 4); }
// Per thread: a panel of a, a panel of b (work units only), an edge tile, a sliver's rows of a converted to f32.
size_t gemm_thread_bytes(const KernelTable& t, int64_t n_cap, bool shared_b) {
  return align64(kMc * kKc * 4) + (shared_b ? 0 : panel_b_bytes(n_cap)) + align64(t.mr * t.nr * 4) +
         align64(t.mr * kKc * 4);
}
size_t gemm_work_bytes(const Tensor& node, const KernelTable& t, int nth) {
  const bool shared = use_shared_b(node, *node.src[0], nth);
  const int64_t n_cap = gemm_n_cap(node, t);
  return (shared ? 2 * panel_b_bytes(n_cap) : 0) + static_cast<size_t>(nth) * gemm_thread_bytes(t, n_cap, shared);
}
GemmWork gemm_work(const KernelTable& t, int64_t n_cap, bool shared, void* base, int ith) {
  char* w = static_cast<char*>(base);
  GemmWork g{};
  if (shared) {
    g.shared_b[0] = reinterpret_cast<float*>(w);
    g.shared_b[1] = reinterpret_cast<float*>(w + panel_b_bytes(n_cap));
    w += 2 * panel_b_bytes(n_cap);
  }
  w += static_cast<size_t>(ith) * gemm_thread_bytes(t, n_cap, shared);
  g.pack_a = reinterpret_cast<float*>(w);
  w += align64(kMc * kKc * 4);
  if (!shared) {
    g.pack_b = reinterpret_cast<float*>(w);
    w += panel_b_bytes(n_cap);
  }
  g.tile = reinterpret_cast<float*>(w);
  w += align64(t.mr * t.nr * 4);
  g.conv = reinterpret_cast<float*>(w);
  return g;
}

// One GEMM's operands for batch (i2, i3).
struct GemmOperands {
  const KernelTable& t;
  const Tensor& a;
  const Tensor& b;
  int64_t i2, i3, ia2, ia3;
  float* C;
  int64_t ldc;
  GemmOperands(const KernelTable& table, const Tensor& n, int64_t batch_i2, int64_t batch_i3)
      : t(table),
        a(*n.src[0]),
        b(*n.src[1]),
        i2(batch_i2),
        i3(batch_i3),
        ia2(batch_i2 / (n.src[1]->ne[2] / n.src[0]->ne[2])),
        ia3(batch_i3 / (n.src[1]->ne[3] / n.src[0]->ne[3])),
        C(reinterpret_cast<float*>(row_ptr_mut(n, 0, batch_i2, batch_i3))),
        ldc(static_cast<int64_t>(n.nb[1] / 4)) {}
};

// Slivers [s0, s1) of the panel of b at columns [jc, jc + nc), K rows [pc, pc + kc): sliver js holds kc rows of NR
// columns (zeros past the last column).
void pack_b_slivers(const GemmOperands& o, int64_t jc, int64_t nc, int64_t pc, int64_t kc, int64_t s0, int64_t s1,
                    float* panel) {
  const int64_t NR = o.t.nr;
  for (int64_t js = s0; js < s1; ++js) {
    float* dst = panel + js * kc * NR;
    const int64_t cols = std::min(NR, nc - js * NR);  // columns of b in this sliver (the rest: zeros)
    if (o.b.nb[0] == 4 && NR <= kMaxNr) {             // contiguous columns of b: the table's transposing copy
      const float* src[kMaxNr];
      for (int64_t j = 0; j < NR; ++j) {
        src[j] = j < cols ? reinterpret_cast<const float*>(row_ptr(o.b, jc + js * NR + j, o.i2, o.i3)) + pc : nullptr;
      }
      o.t.pack_b(src, kc, dst);
      continue;
    }
    for (int64_t j = 0; j < NR; ++j) {
      const int64_t n = jc + js * NR + j;
      if (j < cols) {
        const char* src = row_ptr(o.b, n, o.i2, o.i3) + static_cast<size_t>(pc) * o.b.nb[0];
        for (int64_t k = 0; k < kc; ++k) std::memcpy(&dst[k * NR + j], src + static_cast<size_t>(k) * o.b.nb[0], 4);
      } else {
        for (int64_t k = 0; k < kc; ++k) dst[k * NR + j] = 0.0f;
      }
    }
  }
}

// Rows [m0, m1) of a times the packed panel of b (columns [jc, jc + nc), K rows [pc, pc + kc)), into C.
void gemm_rows(const GemmOperands& o, int64_t m0, int64_t m1, int64_t jc, int64_t nc, int64_t pc, int64_t kc,
               const float* panel_b, const GemmWork& w) {
  const KernelTable& t = o.t;
  const int64_t MR = t.mr, NR = t.nr;
  const int64_t bs = is_quant(o.a.type) ? kQK : 1;
  const bool acc = pc > 0;
  const int64_t n_sl = cdiv(nc, NR);
  for (int64_t ic = m0; ic < m1; ic += kMc) {
    const int64_t mc = std::min(kMc, m1 - ic);
    const int64_t m_sl = cdiv(mc, MR);
    for (int64_t is = 0; is < m_sl; ++is) {  // pack a (converted to f32): sliver is holds kc rows of MR values
      const float* rows[kMaxMr];
      for (int64_t r = 0; r < MR; ++r) {
        const int64_t m = ic + is * MR + r;
        rows[r] = nullptr;
        if (m >= ic + mc) continue;
        const char* src = row_ptr(o.a, m, o.ia2, o.ia3) + static_cast<size_t>(pc / bs) * o.a.nb[0];
        if (o.a.type == Type::kF32) {
          rows[r] = reinterpret_cast<const float*>(src);
        } else {
          float* conv = w.conv + r * kKc;
          row_to_f32(t, o.a.type, src, conv, kc);
          rows[r] = conv;
        }
      }
      t.pack_a(rows, kc, w.pack_a + is * kc * MR);
    }
    for (int64_t js = 0; js < n_sl; ++js) {
      const int64_t ncols = std::min(NR, nc - js * NR);
      for (int64_t is = 0; is < m_sl; ++is) {
        const int64_t mrows = std::min(MR, mc - is * MR);
        float* c = o.C + (jc + js * NR) * o.ldc + (ic + is * MR);
        const float* ap = w.pack_a + is * kc * MR;
        const float* bp = panel_b + js * kc * NR;
        if (mrows == MR && ncols == NR) {
          t.gemm_ukernel(kc, ap, bp, c, o.ldc, acc);
          continue;
        }
        // Edge tile: through a full-size temporary, so the element sequence is the same as in a full tile.
        if (acc) {
          for (int64_t j = 0; j < ncols; ++j) std::memcpy(w.tile + j * MR, c + j * o.ldc, mrows * 4);
        }
        t.gemm_ukernel(kc, ap, bp, w.tile, MR, acc);
        for (int64_t j = 0; j < ncols; ++j) std::memcpy(c + j * o.ldc, w.tile + j * MR, mrows * 4);
      }
    }
  }
}

// Rows [m0, m1) x columns [n0, n1) of one batch, by one thread alone.
void gemm_block(const GemmOperands& o, int64_t m0, int64_t m1, int64_t n0, int64_t n1, const GemmWork& w) {
  const int64_t K = o.a.ne[0];
  for (int64_t jc = n0; jc < n1; jc += kNc) {
    const int64_t nc = std::min(kNc, n1 - jc);
    for (int64_t pc = 0; pc < K; pc += kKc) {
      const int64_t kc = std::min(kKc, K - pc);
      pack_b_slivers(o, jc, nc, pc, kc, 0, cdiv(nc, o.t.nr), w.pack_b);
      gemm_rows(o, m0, m1, jc, nc, pc, kc, w.pack_b, w);
    }
  }
}

Status gemm_units(const Tensor& node, const Params& p, const GemmWork& w) {
  const KernelTable& t = *p.table;
  const GemmSplit s = gemm_split(node, t, p.nth);
  Units units(p, 0, s.units(), 1);
  for (int64_t u0, u1; units.next(&u0, &u1);) {
    for (int64_t u = u0; u < u1;) {
      const int64_t mu = u % s.m_units;
      const int64_t nu = (u / s.m_units) % s.n_units;
      const int64_t batch = u / (s.m_units * s.n_units);
      // this thread's run of row chunks of the same (batch, column chunk): one block
      const int64_t run = std::min(u1 - u, s.m_units - mu);
      const int64_t i2 = batch % node.ne[2], i3 = batch / node.ne[2];
      const int64_t m0 = mu * s.m_chunk, m1 = std::min(node.ne[0], (mu + run) * s.m_chunk);
      const int64_t n0 = nu * s.n_chunk, n1 = std::min(node.ne[1], n0 + s.n_chunk);
      gemm_block(GemmOperands(t, node, i2, i3), m0, m1, n0, n1, w);
      u += run;
    }
  }
  return Status::Ok();
}

Status gemm_shared_b(const Tensor& node, const Params& p, const GemmWork& w) {
  const KernelTable& t = *p.table;
  const int64_t M = node.ne[0], N = node.ne[1], K = node.src[0]->ne[0];
  const int64_t row_tiles = cdiv(M, t.mr);  // work units of a panel: rows of a in whole micro-tiles
  const int64_t min_tiles = cdiv(kGemmMinClaimRows, t.mr);
  // Counters (opt::Units): panel s packs from counter 2 + s % 2 and multiplies from counter s % 2. Thread 0 resets
  // both while packing panel s (before its barrier): the multiply counter was last used by panel s - 2 and the
  // packing one by panel s - 1, which every thread finished before the barrier of panel s - 1; nobody takes from
  // either for panel s or s + 1 before the barrier of panel s.
  int panel = 0;
  for (int64_t i3 = 0; i3 < node.ne[3]; ++i3) {
    for (int64_t i2 = 0; i2 < node.ne[2]; ++i2) {
      const GemmOperands o(t, node, i2, i3);
      for (int64_t jc = 0; jc < N; jc += kNc) {
        const int64_t nc = std::min(kNc, N - jc);
        for (int64_t pc = 0; pc < K; pc += kKc) {
          const int64_t kc = std::min(kKc, K - pc);
          float* buf = w.shared_b[panel];
          Units slivers(p, 2 + panel, cdiv(nc, t.nr), kPackMinClaim);
          for (int64_t s0, s1; slivers.next(&s0, &s1);) pack_b_slivers(o, jc, nc, pc, kc, s0, s1, buf);
          reset_claims(p, panel);
          reset_claims(p, 2 + (panel ^ 1));
          p.sync();
          Units rows(p, panel, row_tiles, min_tiles, kGemmShareDiv);
          for (int64_t r0, r1; rows.next(&r0, &r1);) {
            gemm_rows(o, r0 * t.mr, std::min(M, r1 * t.mr), jc, nc, pc, kc, buf, w);
          }
          panel ^= 1;
        }
      }
    }
  }
  return Status::Ok();
}

Status gemm(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const bool shared = use_shared_b(node, *node.src[0], p.nth);
  if (t.mr > kMaxMr) {
    return TS_ERROR(StatusCode::kFailed, "%s: table %s has %d-row tiles, at most %d", describe(node).c_str(), t.name,
                    t.mr, static_cast<int>(kMaxMr));
  }
  if (shared && p.barrier == nullptr) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: %d threads without a barrier", describe(node).c_str(), p.nth);
  }
  const GemmWork w = gemm_work(t, gemm_n_cap(node, t), shared, p.work, p.ith);
  return shared ? gemm_shared_b(node, p, w) : gemm_units(node, p, w);
}

// ---- matrix x vector ----

Status matvec(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  const int64_t K = a.ne[0], M = a.ne[1], N = b.ne[1];
  const int64_t B2 = b.ne[2], B3 = b.ne[3];
  const int64_t r2 = B2 / a.ne[2], r3 = B3 / a.ne[3];
  const int64_t rows = N * B2 * B3;
  auto b_row = [&](int64_t r) { return row_ptr(b, r % N, (r / N) % B2, r / (N * B2)); };
  prepare_activations(t, a, b, rows, b_row, p);
  p.sync();
  const bool buffered = need_act_buffer(a, b);
  const size_t act_bytes = act_row_bytes(a.type, K);
  auto act = [&](int64_t r) {
    return buffered ? static_cast<const char*>(p.work) + static_cast<size_t>(r) * act_bytes : b_row(r);
  };

  const int64_t m_units = cdiv(M, kMvChunk);
  Units units(p, 0, B2 * B3 * m_units, kMvMinClaim, kMvShareDiv);
  for (int64_t u0, u1; units.next(&u0, &u1);) {
    for (int64_t u = u0; u < u1;) {
      const int64_t batch = u / m_units;
      const int64_t i2 = batch % B2, i3 = batch / B2;
      const int64_t m0 = (u % m_units) * kMvChunk;
      if (is_quant(a.type)) {
        // The unit's rows against each activation row at once (they share its loads). With one activation row, the
        // whole run of this claim's units in one batch goes in one call: the kernel prepares the activation side once
        // per call, not once per 16 rows. With several, unit by unit, so the rows stay in cache across them.
        const int64_t run = N == 1 ? std::min(u1 - u, m_units - u % m_units) : 1;
        const int64_t m1 = std::min(M, m0 + run * kMvChunk);
        const char* w = row_ptr(a, m0, i2 / r2, i3 / r3);
        for (int64_t n = 0; n < N; ++n) {
          float* out = reinterpret_cast<float*>(row_ptr_mut(node, n, i2, i3)) + m0;
          dot_rows(t, a.type, w, a.nb[1], m1 - m0, act(batch * N + n), K, out);
        }
        u += run;
        continue;
      }
      const int64_t m1 = std::min(M, m0 + kMvChunk);
      ++u;
      for (int64_t m = m0; m < m1; ++m) {
        const char* w = row_ptr(a, m, i2 / r2, i3 / r3);
        for (int64_t n = 0; n < N; ++n) {
          float* out = reinterpret_cast<float*>(row_ptr_mut(node, n, i2, i3)) + m;
          *out = dot_row(t, a.type, w, act(batch * N + n), K);
        }
      }
    }
  }
  return Status::Ok();
}

bool use_gemm(const Tensor& node) { return node.ne[1] >= kGemmMinN; }

}  // namespace

bool supports_mul_mat(const Tensor& node) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  return weight_ok(a) && aligned_for(b, 4) && result_ok(node);
}

size_t work_size_mul_mat(const Tensor& node, const KernelTable& t, int nth) {
  const Tensor& a = *node.src[0];
  const Tensor& b = *node.src[1];
  if (use_gemm(node)) return gemm_work_bytes(node, t, nth);
  return act_buffer_bytes(a, b, b.ne[1] * b.ne[2] * b.ne[3], nth);
}

Status run_mul_mat(const Tensor& node, const Params& p) { return use_gemm(node) ? gemm(node, p) : matvec(node, p); }

// ---- MUL_MAT_ID: as [K, M, n_expert], b f32 [K, B1, n_tokens], ids i32 [n_used, n_tokens] ----

bool supports_mul_mat_id(const Tensor& node) {
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  return weight_ok(as) && aligned_for(b, 4) && aligned_for(ids, 4) && result_ok(node);
}

size_t work_size_mul_mat_id(const Tensor& node, const KernelTable&, int nth) {
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  return act_buffer_bytes(as, b, b.ne[1] * b.ne[2], nth);
}

Status run_mul_mat_id(const Tensor& node, const Params& p) {
  const KernelTable& t = *p.table;
  const Tensor& as = *node.src[0];
  const Tensor& b = *node.src[1];
  const Tensor& ids = *node.src[2];
  // Every thread checks every id before anything is written or any thread waits: the same status on all threads.
  TS_RETURN_IF_ERROR(ref::validate_ids(node, ids, as.ne[2]));
  const int64_t K = as.ne[0], M = as.ne[1], B1 = b.ne[1];
  const int64_t n_used = ids.ne[0], n_tokens = ids.ne[1];
  auto b_row = [&](int64_t r) { return row_ptr(b, r % B1, r / B1, 0); };
  prepare_activations(t, as, b, B1 * n_tokens, b_row, p);
  p.sync();
  const bool buffered = need_act_buffer(as, b);
  const size_t act_bytes = act_row_bytes(as.type, K);

  const int64_t m_units = cdiv(M, kMvChunk);
  Units units(p, 0, n_used * n_tokens * m_units, kMvMinClaim, kMvShareDiv);
  for (int64_t u0, u1; units.next(&u0, &u1);) {
    for (int64_t u = u0; u < u1;) {
      const int64_t r = u / m_units;
      const int64_t e = r % n_used, tok = r / n_used;
      int32_t expert;
      std::memcpy(&expert, row_ptr(ids, tok, 0, 0) + static_cast<size_t>(e) * ids.nb[0], 4);
      const int64_t br = tok * B1 + e % B1;
      const char* x = buffered ? static_cast<const char*>(p.work) + static_cast<size_t>(br) * act_bytes : b_row(br);
      float* out = reinterpret_cast<float*>(row_ptr_mut(node, e, tok, 0));
      const int64_t m0 = (u % m_units) * kMvChunk;
      // quantized: the claim's run of units of this (expert, token) in one call, as in matvec
      const int64_t run = is_quant(as.type) ? std::min(u1 - u, m_units - u % m_units) : 1;
      const int64_t m1 = std::min(M, m0 + run * kMvChunk);
      u += run;
      if (is_quant(as.type)) {
        dot_rows(t, as.type, row_ptr(as, m0, expert, 0), as.nb[1], m1 - m0, x, K, out + m0);
        continue;
      }
      for (int64_t m = m0; m < m1; ++m) out[m] = dot_row(t, as.type, row_ptr(as, m, expert, 0), x, K);
    }
  }
  return Status::Ok();
}

}  // namespace tessera::cpu::opt
