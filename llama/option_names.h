// Internal to tessera::llama: a table entry's spellings of an option, comma-separated ("-ngl,--n-gpu-layers"), as the
// pasted command line's reader (llama_cmdline.cpp) and the printed command line's (llama_log_predict.cpp) hold them.
#pragma once

#include <string_view>

namespace tessera::llama {

// Whether `word` is one of the comma-separated `names`.
inline bool has_option_name(std::string_view names, std::string_view word) {
  while (!names.empty()) {
    const size_t comma = names.find(',');
    if (names.substr(0, comma) == word) return true;
    if (comma == std::string_view::npos) break;
    names.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace tessera::llama
