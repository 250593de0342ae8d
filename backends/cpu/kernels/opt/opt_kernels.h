// Optimised CPU kernels (docs/architecture.md, 'CPU kernel dispatch'): SIMD inner loops chosen at run time among
// AVX-512, AVX2 and a portable path (kernel_table.h), behind the same per-node interface as the reference kernels. The
// backend runs a node here when supports() accepts it and falls back to the reference kernels otherwise.
//
// Threads: every one of the nth threads calls compute() for the node; a kernel with phases (e.g. quantise the
// activations, then multiply) makes them meet at Params::sync(). Work is split in fixed units, which the threads take
// in chunks as they go (Units), and every output element is computed by one deterministic sequence of operations, so
// results depend neither on the thread count nor on which thread computed what.
// Errors (ids out of range) are found by every thread before the first sync, so all threads return the same status.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>

#include "../ref/access.h"
#include "kernel_table.h"
#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera::cpu::opt {

const char* isa_name(Isa isa);
// Parses "portable", "avx2", "avx512"; false when unknown.
bool parse_isa(const char* name, Isa* out);
// The widest ISA both this build and this CPU support (checked once, with __builtin_cpu_supports on x86).
Isa detected_isa();
// The table of an ISA, or null when this build or this CPU lacks it.
const KernelTable* table_for(Isa isa);

// A counter from which the threads of a node take work units (Units), on a cache line of its own.
struct alignas(64) ClaimCounter {
  std::atomic<int64_t> next{0};
};
constexpr int kClaimCounters = 4;

struct Params {
  int ith = 0;
  int nth = 1;
  const KernelTable* table = nullptr;
  void* work = nullptr;  // work_size(node, *table, nth) bytes, 64-byte aligned, shared by the threads of the node
  size_t work_bytes = 0;
  void (*barrier)(void* ctx) = nullptr;  // all nth threads of the node meet here
  void* barrier_ctx = nullptr;
  // kClaimCounters counters, all zero when the node starts (the caller resets them before every node); null: every
  // thread takes its static share of the work.
  ClaimCounter* claims = nullptr;
  void sync() const {
    if (nth > 1 && barrier != nullptr) barrier(barrier_ctx);
  }
};

// Work units [0, n) shared among the threads of a node.
// - With counters (Params::claims, several threads): each thread takes chunks from counter `slot` until none is left,
//   so a thread that runs ahead (because another program took the other core for a while) does more of the work.
//   A chunk is a share of what is left (at least min_chunk units), so chunks shrink towards the end and the threads
//   finish close together; early chunks are long runs of consecutive units (one memory stream each).
//   The share is 1 / (share_div * threads) of what is left: 8 by default; the matrix x vector paths take 2 (fewer,
//   longer chunks: measured faster when the weights stream from DRAM: bench/RESULTS.md, CPU kernels, session 13),
//   the shared-b GEMM's rows of a panel 1 (halving claims, session 14).
// - Without: each thread takes its static share (ref::partition) in one chunk.
// Which thread computes a unit never changes a result: every unit is computed by the same sequence of operations.
class Units {
 public:
  Units(const Params& p, int slot, int64_t n, int64_t min_chunk, int64_t share_div = 8)
      : counter_(p.claims != nullptr && p.nth > 1 ? &p.claims[slot].next : nullptr),
        n_(n),
        min_chunk_(std::max<int64_t>(1, min_chunk)),
        div_(std::max<int64_t>(1, share_div) * p.nth),
        ith_(p.ith),
        nth_(p.nth) {}
  // The next chunk [*u0, *u1) of this thread; false when there is none.
  bool next(int64_t* u0, int64_t* u1) {
    if (counter_ == nullptr) {
      if (taken_) return false;
      taken_ = true;
      ref::partition(n_, ref::ComputeParams{ith_, nth_}, u0, u1);
      return *u0 < *u1;
    }
    int64_t v = counter_->load(std::memory_order_relaxed);
    for (;;) {
      if (v >= n_) return false;
      const int64_t c = std::max(min_chunk_, (n_ - v) / div_);
      if (counter_->compare_exchange_weak(v, v + c, std::memory_order_relaxed)) {
        *u0 = v;
        *u1 = std::min(n_, v + c);
        return true;
      }
    }
  }

 private:
  std::atomic<int64_t>* counter_;
  int64_t n_, min_chunk_, div_;
  int ith_, nth_;
  bool taken_ = false;
};
// For kernels that reuse a counter within one node (one per phase, alternating): thread 0 sets it back to zero at a
// point where no thread can still be taking from it and none can start before the next sync.
inline void reset_claims(const Params& p, int slot) {
  if (p.claims != nullptr && p.ith == 0) p.claims[slot].next.store(0, std::memory_order_relaxed);
}

// True when an optimised kernel handles this node (op, types and layouts); it then also passes ref::supports.
bool supports(const Tensor& node);
// Bytes of work memory compute() needs for this node with nth threads.
size_t work_size(const Tensor& node, const KernelTable& table, int nth);
// Computes the share ith of nth of a node that supports() accepted, with non-null data everywhere.
Status compute(const Tensor& node, const Params& p);

// ---- internal: per-op-group entry points (opt_matmul.cpp, opt_ops.cpp) ----
bool supports_mul_mat(const Tensor& node);
bool supports_mul_mat_id(const Tensor& node);
size_t work_size_mul_mat(const Tensor& node, const KernelTable& t, int nth);
size_t work_size_mul_mat_id(const Tensor& node, const KernelTable& t, int nth);
Status run_mul_mat(const Tensor& node, const Params& p);
Status run_mul_mat_id(const Tensor& node, const Params& p);

bool supports_elementwise(const Tensor& node);  // ADD/MUL/DIV, SCALE, UNARY, GLU
bool supports_norm(const Tensor& node);         // RMS_NORM, NORM
bool supports_soft_max(const Tensor& node);
bool supports_rope(const Tensor& node);
bool supports_get_rows(const Tensor& node);
bool supports_flash_attn(const Tensor& node);
size_t work_size_row_ops(const Tensor& node, int nth);  // per-thread scratch rows of the ops above
size_t work_size_flash_attn(const Tensor& node, int nth);
Status run_elementwise(const Tensor& node, const Params& p);
Status run_norm(const Tensor& node, const Params& p);
Status run_soft_max(const Tensor& node, const Params& p);
Status run_rope(const Tensor& node, const Params& p);
Status run_get_rows(const Tensor& node, const Params& p);
Status run_flash_attn(const Tensor& node, const Params& p);

// Helpers shared by the drivers.
inline size_t align64(size_t n) { return (n + 63) / 64 * 64; }
inline const char* row_ptr(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return static_cast<const char*>(t.data) + static_cast<size_t>(i1) * t.nb[1] + static_cast<size_t>(i2) * t.nb[2] +
         static_cast<size_t>(i3) * t.nb[3];
}
inline char* row_ptr_mut(const Tensor& t, int64_t i1, int64_t i2, int64_t i3) {
  return const_cast<char*>(row_ptr(t, i1, i2, i3));
}
// Converts n values of row data of a weight type (element-contiguous) to f32.
void row_to_f32(const KernelTable& t, Type type, const void* src, float* dst, int64_t n);
// Element size (float types) or block size in bytes (quantized): the nb0 of an element-contiguous row.
size_t unit_bytes(Type type);

}  // namespace tessera::cpu::opt
