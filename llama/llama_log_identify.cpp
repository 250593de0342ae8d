// Which published model a pasted log was made with, when it prints no metadata and no -m was given (see
// model_candidates in tessera/llama/llama_log_predict.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
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
    auto words = split_command_words(log.command->text);
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
  for (const std::string& name : fx::fixture_names()) {
    std::string base, ftype;
    split_name(name, &base, &ftype);
    Scored s;
    s.c.name = name;
    // the file name: every word of the base's name among the file name's words, the file type's words too
    if (!facts.file_words.empty()) {
      const std::vector<std::string> bw = name_words(base);
      if (std::all_of(bw.begin(), bw.end(), [&](const std::string& w) { return file_words.count(w) > 0; })) {
        s.name_words = static_cast<int>(bw.size());
        s.c.evidence.push_back("the file name " + facts.file);
      }
      const std::vector<std::string> fw = name_words(ftype);
      if (!fw.empty() &&
          std::all_of(fw.begin(), fw.end(), [&](const std::string& w) { return file_words.count(w) > 0; })) {
        s.ftype_named = true;
      }
    }
    auto file = fx::make_fixture(name);
    if (!file.ok()) continue;
    const gguf::File& f = file.value();
    auto arch = f.get_string("general.architecture");
    if (!arch.ok()) continue;
    auto blocks = f.get_int(arch.value() + ".block_count");
    auto ft = f.get_int("general.file_type");
    if (facts.n_layer) {
      if (!blocks.ok() || blocks.value() != *facts.n_layer) continue;  // a printed layer count rules out the others
      s.c.evidence.push_back(std::to_string(*facts.n_layer) + " layers");
    }
    if (facts.file_type) {
      if (!ft.ok() || ft.value() != static_cast<int64_t>(*facts.file_type)) continue;
      s.ftype_named = true;
      s.c.evidence.push_back("the printed file type " + log.model.file_type);
    }
    if (facts.model_mib > 0) {
      uint64_t bytes = 0;
      for (const gguf::TensorInfo& t : f.tensors) bytes += t.size;
      const double mib = static_cast<double>(bytes) / (1024.0 * 1024.0);
      s.size_off = std::abs(facts.model_mib - mib) / mib;
      if (s.size_off < 0.02) {
        char buf[160];
        std::snprintf(buf, sizeof buf, "model buffers of %.2f MiB against the file's %.2f MiB of tensors",
                      facts.model_mib, mib);
        s.c.evidence.push_back(buf);
      }
    }
    // without a file name, a layer count, a file type or buffers that come near, nothing points here
    if (s.name_words < 0 && !facts.n_layer && !facts.file_type && s.size_off >= 0.02) continue;
    if (!facts.file_words.empty() && s.name_words < 0 && s.size_off >= 0.02) continue;
    scored.push_back(std::move(s));
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
