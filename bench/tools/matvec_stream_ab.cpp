// In-process A/B of two builds of the AVX-512 VNNI block dots, streamed from DRAM by 2 threads.
//
// Across processes, a matrix x vector measured on this shared VM moves by +-10 % from one run to the next, more than
// most kernel changes. Here both variants run in one process, alternately, each pass paired with a read-only
// ceiling pass over as many bytes, so they meet the same machine. Variant A is the library's AVX-512 table; variant B
// is backends/cpu/kernels/opt/table_avx512.cpp (or a modified copy) compiled again with other flags and its entry
// point renamed (see matvec_stream_ab.sh, which builds and runs this). No graph, no thread pool: the threads take
// chunks of 16-row units through the CPU backend's own opt::Units (max(min, left / (div x threads))),
// either over all matrices at once or per matrix with a barrier after each (as a graph of one node per matrix does).
//
// Usage: matvec_stream_ab [iterations=20] [q4_0|q8_0] [per_matrix=1] [divA=2] [divB=2] [minA=4] [minB=4]
// Prints the median GB/s of A, B and the ceiling, and the median per-iteration ratios A/ceiling, B/ceiling, B/A.
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "../read_sum.h"
#include "ab_common.h"
#include "kernels/opt/opt_kernels.h"

namespace tessera::cpu::opt {
const KernelTable* table_avx512_b();  // variant B (table_avx512 renamed)
}

namespace {

using tessera::BlockQ4_0;
using tessera::BlockQ8_0;
using tessera::fp16_t;
using tessera::cpu::opt::KernelTable;

constexpr int64_t kK = 4096, kM = 11008, kBlocks = kK / 32, kUnitRows = 16, kUnits = kM / kUnitRows;
constexpr int kThreads = 2;
constexpr int kMatrices = 16;

template <class F>
double on_threads(F f) {
  const auto t0 = std::chrono::steady_clock::now();
  std::thread th[kThreads];
  for (int i = 0; i < kThreads; ++i) th[i] = std::thread(f, i);
  for (auto& t : th) t.join();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int iters = std::max(1, ab::arg(argc, argv, 1, 20));
  const std::string type = argc > 2 ? argv[2] : "q4_0";
  if (type != "q4_0" && type != "q8_0") {
    std::fprintf(stderr, "matvec_stream_ab: weight type '%s': expected q4_0 or q8_0\n", type.c_str());
    return 2;
  }
  const bool q4 = type == "q4_0";
  const bool per_matrix = ab::arg(argc, argv, 3, 1) != 0;
  const int div[2] = {ab::arg(argc, argv, 4, 2), ab::arg(argc, argv, 5, 2)};
  const int min_claim[2] = {ab::arg(argc, argv, 6, 4), ab::arg(argc, argv, 7, 4)};
  if (div[0] < 1 || div[1] < 1 || min_claim[0] < 1 || min_claim[1] < 1) {
    std::fprintf(stderr, "matvec_stream_ab: div and min must be >= 1\n");
    return 2;
  }
  const KernelTable* table[2] = {tessera::cpu::opt::table_avx512(), tessera::cpu::opt::table_avx512_b()};
  if (table[0] == nullptr || table[1] == nullptr) {
    std::fprintf(stderr, "matvec_stream_ab: this CPU or build has no AVX-512 VNNI table\n");
    return 2;
  }
  const size_t row = static_cast<size_t>(kBlocks) * (q4 ? sizeof(BlockQ4_0) : sizeof(BlockQ8_0));
  const size_t mat = row * kM;
  std::mt19937 rng(1);
  std::vector<uint8_t*> w(kMatrices);
  for (auto& p : w) {  // random quants, scales 1/16: the values do not matter for the timing
    p = static_cast<uint8_t*>(std::aligned_alloc(64, mat));
    for (size_t i = 0; i + 4 <= mat; i += 4) {
      const uint32_t r = rng();
      std::memcpy(p + i, &r, 4);
    }
    for (int64_t b = 0; b < kBlocks * kM; ++b) {
      const fp16_t d{0x2c00};
      std::memcpy(p + static_cast<size_t>(b) * (row / kBlocks), &d, sizeof d);
    }
  }
  std::vector<BlockQ8_0> y(kBlocks);
  for (auto& b : y) {
    b.d = fp16_t{0x2c00};
    for (auto& q : b.qs) q = static_cast<int8_t>(rng());
  }
  const size_t floats = mat * kMatrices / 4;
  float* ceil_data = static_cast<float*>(std::aligned_alloc(64, floats * 4));
  std::fill(ceil_data, ceil_data + floats, 1.0f);
  std::vector<float> out(kM);

  std::atomic<int> arrived{0}, generation{0};
  auto barrier = [&] {
    const int g = generation.load();
    if (arrived.fetch_add(1) == kThreads - 1) {
      arrived = 0;
      generation.fetch_add(1);
    } else {
      while (generation.load() == g) _mm_pause();
    }
  };
  auto dots = [&](const KernelTable* t, int m, int64_t u0, int64_t u1) {
    const uint8_t* x = w[static_cast<size_t>(m)] + static_cast<size_t>(u0 * kUnitRows) * row;
    const int64_t n = (u1 - u0) * kUnitRows;
    if (q4) {
      t->dot_rows_q4_0_q8_0(reinterpret_cast<const BlockQ4_0*>(x), row, n, y.data(), kBlocks,
                            out.data() + u0 * kUnitRows);
    } else {
      t->dot_rows_q8_0_q8_0(reinterpret_cast<const BlockQ8_0*>(x), row, n, y.data(), kBlocks,
                            out.data() + u0 * kUnitRows);
    }
  };
  // One pass of variant v over all matrices; seconds. The threads claim units with the backend's own opt::Units
  // (one claim counter per matrix, or one for all).
  tessera::cpu::opt::ClaimCounter claims[kMatrices];
  auto pass = [&](int v) {
    for (auto& c : claims) c.next = 0;
    const KernelTable* t = table[v];
    return on_threads([&](int ith) {
      const int64_t total = per_matrix ? kUnits : kUnits * kMatrices;
      for (int m = 0; m < (per_matrix ? kMatrices : 1); ++m) {
        tessera::cpu::opt::Params p;
        p.ith = ith;
        p.nth = kThreads;
        p.claims = &claims[m];
        tessera::cpu::opt::Units units(p, 0, total, min_claim[v], div[v]);
        for (int64_t u0, u1; units.next(&u0, &u1);) {
          for (int64_t u = u0; u < u1;) {  // runs within one matrix
            const int mi = per_matrix ? m : static_cast<int>(u / kUnits);
            const int64_t run = std::min(u1 - u, kUnits - u % kUnits);
            dots(t, mi, u % kUnits, u % kUnits + run);
            u += run;
          }
        }
        if (per_matrix) barrier();
      }
    });
  };
  std::atomic<float> sink{0};
  std::atomic<int64_t> next_chunk{0};
  auto ceiling = [&] {
    next_chunk = 0;
    constexpr size_t kChunk = size_t{1} << 18;
    const int64_t chunks = static_cast<int64_t>((floats + kChunk - 1) / kChunk);
    return on_threads([&](int) {
      for (int64_t c; (c = next_chunk.fetch_add(1)) < chunks;) {
        const size_t lo = static_cast<size_t>(c) * kChunk;
        sink.store(read_sum(ceil_data + lo, std::min(kChunk, floats - lo)));
      }
    });
  };
  pass(0);
  pass(1);
  ceiling();
  const double bytes = static_cast<double>(mat) * kMatrices;
  const ab::Medians m = ab::run(iters, bytes, bytes, pass, ceiling);
  std::printf(
      "%s x%d, %s, %d iterations: GB/s median A %.1f  B %.1f  ceiling %.1f | ratio median A %.3f  B %.3f  "
      "B/A %.3f\n",
      q4 ? "q4_0" : "q8_0", kMatrices, per_matrix ? "per matrix" : "all matrices at once", iters, m.rate[0] * 1e-9,
      m.rate[1] * 1e-9, m.rate[2] * 1e-9, m.ratio[0], m.ratio[1], m.ratio[2]);
  return 0;
}
