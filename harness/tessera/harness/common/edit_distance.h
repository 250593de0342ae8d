// The edit distance behind the "did you mean" of unknown keys (json_read.h) and of unknown command-line options.
#pragma once

#include <algorithm>
#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace tessera::harness {

// Levenshtein distance: the fewest insertions, deletions and substitutions that turn a into b.
inline size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diag = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diag + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diag = up;
    }
  }
  return row[b.size()];
}

// The "did you mean" of an unknown command-line option: the candidate closest to `word`, when it is at most 2 edits
// away and the edits are under a third of the word (so a short word is not matched to anything); "" otherwise.
inline std::string closest_option(std::string_view word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_d = SIZE_MAX;
  for (const std::string& k : candidates) {
    const size_t d = edit_distance(word, k);
    if (d < best_d) {
      best_d = d;
      best = k;
    }
  }
  return !best.empty() && best_d <= 2 && best_d * 3 < word.size() ? best : std::string();
}

}  // namespace tessera::harness
