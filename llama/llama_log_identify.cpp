// Which published model a pasted log was made with, when it prints no metadata and no -m was given (see
// model_candidates in tessera/llama/llama_log_predict.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "tessera/llama/llama_cmdline.h"
#include "tessera/llama/llama_log_predict.h"
#include "tessera/models/fixtures.h"

namespace tessera::llama {

namespace {

namespace fx = models::fixtures;

// The words of a name split at '-', '_' and '.', lower case: "Meta-Llama-3.1-8B-Instruct-Q4_K_M" -> meta, llama, 3, 1,
// 8b, instruct, q4, k, m.
std::vector<std::string> name_words(const std::string& name) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : name) {
    if (ch == '-' || ch == '_' || ch == '.' || ch == ' ') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
    } else {
      cur += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    }
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// The model file's base name without ".gguf" and a shard's "-00001-of-00003".
std::string file_stem(std::string path) {
  const size_t slash = path.find_last_of("/\\");
  if (slash != std::string::npos) path = path.substr(slash + 1);
  std::string lower = path;
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (lower.size() > 5 && lower.compare(lower.size() - 5, 5, ".gguf") == 0) path.resize(path.size() - 5);
  const size_t of = path.rfind("-of-");
  if (of != std::string::npos && of >= 6 && path[of - 6] == '-') path.resize(of - 6);
  return path;
}

// The model file the log names: -m / --model on the printed command line, else the loader's "from PATH".
std::string log_model_file(const LlamaLog& log) {
  if (log.command) {
    auto words = split_command_words(log.command->text, /*as_printed=*/true);
    if (words.ok()) {
      const std::vector<std::string>& w = words.value();
      for (size_t i = 0; i < w.size(); ++i) {
        if ((w[i] == "-m" || w[i] == "--model") && i + 1 < w.size()) return w[i + 1];
        if (w[i].rfind("--model=", 0) == 0) return w[i].substr(8);
      }
    }
  }
  return log.model.path;
}

// The file type names of the catalogue's suffixes, longest first (so "q4_k_m" is tried before "q4_k").
const std::vector<std::string>& ftype_suffixes() {
  static const std::vector<std::string> s = {"q3_k_s", "q3_k_m", "q3_k_l", "q4_k_s", "q4_k_m", "q5_k_s",
                                             "q5_k_m", "q2_k_s", "iq4_nl", "iq4_xs", "mxfp4",  "q2_k",
                                             "q6_k",   "q4_0",   "q4_1",   "q5_0",   "q5_1",   "q8_0"};
  return s;
}

// The llama_ftype of a catalogue name's file type suffix (fixtures::FileType), -1 for none.
int64_t suffix_file_type(const std::string& suffix) {
  static const std::pair<const char*, fx::FileType> kTypes[] = {
      {"q4_0", fx::FileType::kQ4_0},     {"q4_1", fx::FileType::kQ4_1},     {"q8_0", fx::FileType::kQ8_0},
      {"q5_0", fx::FileType::kQ5_0},     {"q5_1", fx::FileType::kQ5_1},     {"q2_k", fx::FileType::kQ2_K},
      {"q3_k_s", fx::FileType::kQ3_K_S}, {"q3_k_m", fx::FileType::kQ3_K_M}, {"q3_k_l", fx::FileType::kQ3_K_L},
      {"q4_k_s", fx::FileType::kQ4_K_S}, {"q4_k_m", fx::FileType::kQ4_K_M}, {"q5_k_s", fx::FileType::kQ5_K_S},
      {"q5_k_m", fx::FileType::kQ5_K_M}, {"q6_k", fx::FileType::kQ6_K},     {"q2_k_s", fx::FileType::kQ2_K_S},
      {"iq4_nl", fx::FileType::kIQ4_NL}, {"iq4_xs", fx::FileType::kIQ4_XS}, {"mxfp4", fx::FileType::kMXFP4_MOE},
  };
  for (const auto& [name, type] : kTypes) {
    if (suffix == name) return static_cast<int64_t>(type);
  }
  return -1;
}

// A catalogue name split into its base ("qwen3-30b-a3b") and file type ("q4_k_m").
void split_name(const std::string& name, std::string* base, std::string* ftype) {
  for (const std::string& f : ftype_suffixes()) {
    if (name.size() > f.size() + 1 && name.compare(name.size() - f.size(), f.size(), f) == 0 &&
        name[name.size() - f.size() - 1] == '-') {
      *base = name.substr(0, name.size() - f.size() - 1);
      *ftype = f;
      return;
    }
  }
  *base = name;
  ftype->clear();
}

struct Facts {
  std::optional<int64_t> n_layer;
  std::optional<uint32_t> file_type;  // llama_ftype, from the printed "file type"
  std::string file;                   // the model file's stem, "" when not printed
  std::vector<std::string> file_words;
  double model_mib = 0;  // the printed model buffers, summed
};

Facts log_facts(const LlamaLog& log) {
  Facts f;
  if (log.model.n_layer) {
    f.n_layer = *log.model.n_layer;
  } else if (log.context.offload_total && *log.context.offload_total > 1) {
    f.n_layer = *log.context.offload_total - 1;  // "offloaded N/M layers": the M - 1 blocks and the output layer
  }
  fx::FileType t{};
  if (!log.model.file_type.empty() && fx::file_type_from_name(log.model.file_type, &t)) {
    f.file_type = static_cast<uint32_t>(t);
  }
  const std::string file = log_model_file(log);
  if (!file.empty()) {
    f.file = file_stem(file);
    f.file_words = name_words(f.file);
  }
  for (const LlamaLogBuffer& b : log.figures.buffers) {
    if (b.kind == "model") f.model_mib += b.mib;
  }
  return f;
}

// What a catalogue file holds that the facts are compared with, built once per process without its vocabulary
// arrays (make_fixture_without_vocab: ~2 ms where the whole fixture takes ~20 ms, and far more under the sanitizers).
struct FileFacts {
  bool ok = false;
  int64_t n_layer = -1;
  double mib = 0;  // the tensors' bytes
};
const FileFacts& file_facts(const std::string& name) {
  static std::map<std::string, FileFacts> cache;
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(name);
  if (it != cache.end()) return it->second;
  FileFacts f;
  auto file = fx::make_fixture_without_vocab(name);
  if (file.ok()) {
    auto arch = file.value().get_string("general.architecture");
    auto blocks = arch.ok() ? file.value().get_int(arch.value() + ".block_count") : Result<int64_t>(arch.status());
    uint64_t bytes = 0;
    for (const gguf::TensorInfo& t : file.value().tensors) bytes += t.size;
    f.ok = blocks.ok();
    f.n_layer = blocks.ok() ? blocks.value() : -1;
    f.mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
  }
  return cache.emplace(name, f).first->second;
}

}  // namespace

std::vector<ModelCandidate> model_candidates(const LlamaLog& log, size_t max) {
  const Facts facts = log_facts(log);
  struct Scored {
    ModelCandidate c;
    int name_words = -1;       // the base name's words found in the file name (-1: not all of them)
    bool ftype_named = false;  // the file name or the printed file type names this file type
    double size_off = 1e300;   // |printed model buffers - tensor bytes| / tensor bytes
  };
  std::vector<Scored> scored;
  const std::set<std::string> file_words(facts.file_words.begin(), facts.file_words.end());
  auto all_in_file = [&](const std::string& name) {
    const std::vector<std::string> w = name_words(name);
    return !w.empty() && std::all_of(w.begin(), w.end(), [&](const std::string& x) { return file_words.count(x) > 0; });
  };
  // The bases first (one file each: its layer count), then the file types of the bases that remain.
  // base -> (name, file type), the base's published default first
  std::map<std::string, std::vector<std::pair<std::string, std::string>>> bases;
  for (const std::string& name : fx::fixture_names()) {
    std::string base, ftype;
    split_name(name, &base, &ftype);
    bases[base].emplace_back(name, ftype);
  }
  for (const std::string& name : fx::catalogue_names()) {
    std::string base, ftype;
    split_name(name, &base, &ftype);
    auto& names = bases[base];
    if (names.empty() || names.front().first != name) names.emplace_back(name, ftype);
  }
  for (const auto& [base, names] : bases) {
    const bool base_named = !facts.file_words.empty() && all_in_file(base);
    if (facts.n_layer) {
      const FileFacts& first = file_facts(names.front().first);
      if (!first.ok || first.n_layer != *facts.n_layer) continue;  // a printed layer count rules out the others
    }
    if (!facts.file_words.empty() && !base_named && facts.model_mib <= 0) continue;
    // Printed buffers far from every file type of the base rule it out before its file types are built: the catalogue's
    // types span about 0.4x (q2_k) to 1.9x (q8_0) of the published default (mostly q4_k_m), and builds of early 2024
    // printed the whole mapped file as the CPU buffer beside the GPUs' copies (up to twice the file)
    if (facts.model_mib > 0 && !base_named) {
      const FileFacts& first = file_facts(names.front().first);
      if (first.ok && (facts.model_mib < 0.35 * first.mib || facts.model_mib > 4.0 * first.mib)) continue;
    }
    for (const auto& [name, ftype] : names) {
      Scored s;
      s.c.name = name;
      if (base_named) {
        s.name_words = static_cast<int>(name_words(base).size());
        s.c.evidence.push_back("the file name " + facts.file);
      }
      s.ftype_named = !facts.file_words.empty() && all_in_file(ftype);
      if (facts.n_layer) s.c.evidence.push_back(std::to_string(*facts.n_layer) + " layers");
      // without anything that tells the file types apart (a file type printed or named, buffers to weigh), the
      // published default of each base only
      if (!facts.file_type && !s.ftype_named && facts.model_mib <= 0 && name != names.front().first) continue;
      // (the file type from the name: a header is built only for the names still in the running, ~20 ms each and
      // far more under the sanitizers)
      if (facts.file_type && suffix_file_type(ftype) != static_cast<int64_t>(*facts.file_type)) continue;
      const FileFacts* ff = facts.model_mib > 0 ? &file_facts(name) : nullptr;
      if (facts.file_type) {
        s.ftype_named = true;
        s.c.evidence.push_back("the printed file type " + log.model.file_type);
      }
      if (facts.model_mib > 0 && ff != nullptr && ff->ok && ff->mib > 0) {
        s.size_off = std::abs(facts.model_mib - ff->mib) / ff->mib;
        if (s.size_off < 0.02) {
          char buf[160];
          std::snprintf(buf, sizeof buf, "model buffers of %.2f MiB against the file's %.2f MiB of tensors",
                        facts.model_mib, ff->mib);
          s.c.evidence.push_back(buf);
        }
      }
      // nothing points here: no name, no layer count, no file type, buffers not near
      if (s.name_words < 0 && !facts.n_layer && !facts.file_type && s.size_off >= 0.02) continue;
      if (!facts.file_words.empty() && s.name_words < 0 && s.size_off >= 0.02) continue;
      scored.push_back(std::move(s));
    }
  }
  std::stable_sort(scored.begin(), scored.end(), [](const Scored& a, const Scored& b) {
    if (a.name_words != b.name_words) return a.name_words > b.name_words;
    if (a.ftype_named != b.ftype_named) return a.ftype_named;
    return a.size_off < b.size_off;
  });
  std::vector<ModelCandidate> out;
  for (Scored& s : scored) {
    if (out.size() == max) break;
    out.push_back(std::move(s.c));
  }
  return out;
}

}  // namespace tessera::llama
