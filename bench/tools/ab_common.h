// What the in-process A/B tools (matvec_stream_ab.cpp, gemm_ab.cpp) share: arguments, medians, and the measuring
// loop that alternates the two variants and pairs every iteration with a ceiling pass.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace ab {

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

inline int arg(int argc, char** argv, int i, int def) { return argc > i ? std::atoi(argv[i]) : def; }

// Medians over the iterations: rate[0..2] of A, B and the ceiling (work per second), ratio[0..1] of A and B to the
// ceiling of the same iteration, ratio[2] B/A.
struct Medians {
  double rate[3];
  double ratio[3];
};

// iters iterations of: a ceiling pass, then A and B in alternating order. pass(v) and ceiling() return seconds;
// work is what one pass of a variant does, ceiling_work what one ceiling pass does (same unit).
template <class Pass, class Ceiling>
Medians run(int iters, double work, double ceiling_work, Pass pass, Ceiling ceiling) {
  std::vector<double> rate[3], ratio[3];
  for (int i = 0; i < iters; ++i) {
    const double tc = ceiling();
    double t[2];
    const int first = i % 2;  // alternate the order
    t[first] = pass(first);
    t[1 - first] = pass(1 - first);
    const double ceiling_rate = ceiling_work / tc;
    for (int v = 0; v < 2; ++v) {
      rate[v].push_back(work / t[v]);
      ratio[v].push_back(work / t[v] / ceiling_rate);
    }
    rate[2].push_back(ceiling_rate);
    ratio[2].push_back(t[0] / t[1]);
  }
  Medians m{};
  for (int k = 0; k < 3; ++k) {
    m.rate[k] = median(rate[k]);
    m.ratio[k] = median(ratio[k]);
  }
  return m;
}

}  // namespace ab
