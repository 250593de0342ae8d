// A model from a llama.cpp log's printed metadata (llama_log_model.h).
#include "llama_log_model.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>

#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"

namespace tessera::llama {

namespace {

const std::string* find(const std::vector<std::pair<std::string, std::string>>& kv, const std::string& key) {
  for (const auto& [k, v] : kv) {
    if (k == key) return &v;
  }
  return nullptr;
}

bool whole(const std::string& s, int64_t* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

bool real(const std::string& s, double* out) {
  if (s.empty()) return false;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end == s.c_str() || *end != '\0') return false;
  *out = v;
  return true;
}

// A printed value as a GGUF value: a whole number (u32 when it fits, else i64), a real number (f32), true / false,
// else a string. Arrays ("[1, 2, ...", printed cut short) are not read: nullopt.
std::optional<gguf::Value> value_of(const std::string& text) {
  if (text.empty() || text[0] == '[') return std::nullopt;
  int64_t i = 0;
  double d = 0;
  if (whole(text, &i)) {
    if (i >= 0 && i <= UINT32_MAX) return gguf::Value::u32(static_cast<uint32_t>(i));
    return gguf::Value::i64(i);
  }
  if (real(text, &d)) return gguf::Value::f32(static_cast<float>(d));
  if (text == "true" || text == "false") return gguf::Value::boolean(text == "true");
  return gguf::Value::string(text);
}

// print_info's (llm_load_print_meta's) names of the keys a model needs, as GGUF key suffixes.
constexpr std::pair<const char*, const char*> kInfoKeys[] = {
    {"n_layer", "block_count"},
    {"n_embd", "embedding_length"},
    {"n_ff", "feed_forward_length"},
    {"n_head", "attention.head_count"},
    {"n_head_kv", "attention.head_count_kv"},
    {"n_expert", "expert_count"},
    {"n_expert_used", "expert_used_count"},
    {"n_ff_exp", "expert_feed_forward_length"},
    {"n_swa", "attention.sliding_window"},
    {"n_embd_head_k", "attention.key_length"},
    {"n_embd_head_v", "attention.value_length"},
    {"n_rot", "rope.dimension_count"},
    {"freq_base_train", "rope.freq_base"},
    {"f_norm_rms_eps", "attention.layer_norm_rms_epsilon"},
    {"n_ctx_train", "context_length"},
};

bool stays_f32(const Tensor& t);
std::string lower(std::string s);

// Source tensors for llama-quantize's rules: the graph's weights in the file's order, f32 where they stay f32.
std::vector<models::fixtures::SourceTensor> sources(const std::vector<const Tensor*>& weights) {
  std::vector<models::fixtures::SourceTensor> src;
  for (const Tensor* t : weights) {
    std::vector<int64_t> ne(t->ne, t->ne + 4);
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    src.push_back({t->name, ne, stays_f32(*t) ? gguf::TensorType::kF32 : gguf::TensorType::kF16});
  }
  return src;
}

// The counts per type name ("q4_k" -> 193) of llama-quantize's types for `kind`.
std::map<std::string, int64_t> derived_counts(const models::fixtures::QuantModel& qm, models::fixtures::FileType kind,
                                              const std::vector<models::fixtures::SourceTensor>& src) {
  std::map<std::string, int64_t> out;
  auto types = models::fixtures::quantized_types(qm, kind, src);
  if (!types.ok()) return out;
  for (gguf::TensorType t : types.value()) {
    Type tt;
    if (type_from_gguf_id(static_cast<int>(t), &tt)) out[lower(type_name(tt))] += 1;
  }
  return out;
}

// A log without a file type line: the one file type (of those whose rules are implemented, with or without an
// importance matrix) whose derived counts equal the printed ones; false when none or several do.
bool file_type_from_counts(const std::string& arch, const models::LlamaConfig& c,
                           const std::vector<const Tensor*>& weights, const std::map<std::string, int64_t>& printed,
                           models::fixtures::FileType* out) {
  const std::vector<models::fixtures::SourceTensor> src = sources(weights);
  int found = 0;
  for (models::fixtures::FileType f : models::fixtures::file_types_with_rules()) {
    for (bool imatrix : {false, true}) {
      if (derived_counts({arch, c.n_layer, c.n_head, c.n_head_kv, c.n_expert, imatrix}, f, src) == printed) {
        if (found == 0 || *out != f) ++found;
        *out = f;
        break;
      }
    }
  }
  return found == 1;
}

// Whether a weight stays f32 in a quantized file: 1-D tensors, norms, the MoE router, biases (convert_hf_to_gguf.py
// writes them f32 and llama-quantize leaves them so; fixtures.cpp, Draft::weight).
bool stays_f32(const Tensor& t) {
  const std::string name = t.name;
  const bool one_d = t.ne[1] == 1 && t.ne[2] == 1 && t.ne[3] == 1;
  return one_d || name.find("_norm") != std::string::npos || name.find("ffn_gate_inp") != std::string::npos ||
         name.size() < 7 || name.compare(name.size() - 7, 7, ".weight") != 0;
}

std::string counts_text(const std::map<std::string, int64_t>& counts) {
  std::string s;
  for (const auto& [t, n] : counts) s += (s.empty() ? "" : ", ") + t + " " + std::to_string(n);
  return s;
}

// The lower-case GGUF type name ("q6_K" -> "q6_k").
std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

}  // namespace

Result<models::LlamaConfig> model_from_log_metadata(const LlamaLog& log, const models::GgufRunShape& run,
                                                    std::vector<std::string>* notes) {
  const LlamaLogModel& m = log.model;
  auto missing = [](const std::string& what) { return Status(StatusCode::kNotFound, what); };
  if (m.arch.empty()) return missing("the log lacks the model metadata (no 'print_info: arch = ...' line)");
  const std::string p = m.arch + ".";
  gguf::File file;
  file.source = log.source + " (the printed metadata)";
  file.set("general.architecture", gguf::Value::string(m.arch));
  for (const auto& [k, v] : m.kv) {
    if (k == "general.architecture" || k.rfind("tokenizer.", 0) == 0) continue;
    if (auto value = value_of(v)) file.set(k, *value);
  }
  for (const auto& [info, suffix] : kInfoKeys) {
    const std::string* v = find(m.info, info);
    if (v == nullptr || file.find_value(p + suffix) != nullptr) continue;
    if (auto value = value_of(*v)) file.set(p + suffix, *value);
  }
  // The norm epsilon changes no size: when neither its key nor print_info's f_norm_rms_eps was printed, 1e-6.
  if (file.find_value(p + "attention.layer_norm_rms_epsilon") == nullptr &&
      file.find_value(p + "attention.layer_norm_epsilon") == nullptr) {
    file.set(p + "attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f));
    notes->push_back("no norm epsilon printed: 1e-6 assumed (it changes no size)");
  }
  // What every architecture needs: say each line the log lacks.
  std::vector<std::string> lacks;
  auto need = [&](const char* info, const char* suffix) {
    if (file.find_value(p + suffix) == nullptr) {
      lacks.push_back(std::string("'print_info: ") + info + " = N' (or the kv line " + p + suffix + ")");
    }
  };
  need("n_layer", "block_count");
  need("n_embd", "embedding_length");
  need("n_head", "attention.head_count");
  need("n_head_kv", "attention.head_count_kv");
  const bool moe = m.n_expert.value_or(0) > 0 || m.arch == "qwen3moe" || m.arch == "gpt-oss";
  if (moe) {
    need("n_expert", "expert_count");
    need("n_expert_used", "expert_used_count");
    if (file.find_value(p + "expert_feed_forward_length") == nullptr && m.arch != "llama") {
      need("n_ff_exp", "expert_feed_forward_length");
    }
  }
  if (!moe || m.arch == "llama") need("n_ff", "feed_forward_length");
  if (!m.n_vocab) lacks.push_back("'print_info: n_vocab = N' (or the kv line tokenizer.ggml.tokens arr[str,N])");
  if (m.tensor_types.empty()) lacks.push_back("the 'llama_model_loader: - type T: N tensors' lines (weight types)");
  if (!lacks.empty()) {
    std::string s = "the log lacks ";
    for (size_t i = 0; i < lacks.size(); ++i) s += (i ? ", " : "") + lacks[i];
    return missing(s);
  }

  // A first config from the keys (token_embd gives the vocabulary), then the graph's weights.
  file.add_tensor("token_embd.weight", gguf::TensorType::kF16, {*m.n_embd, *m.n_vocab});
  if (Status st = file.layout(); !st.ok()) return missing("the printed metadata: " + st.message());
  auto first = models::llama_config_from_gguf(gguf::Model::of_file(file), run);
  if (!first.ok()) return missing("the printed metadata gives no model: " + first.status().message());
  models::LlamaConfig c = first.value();
  c.weights_file.reset();
  c.weight_types.clear();
  c.name = m.arch + " (printed metadata)";

  // The printed counts per type; the total tells tied embeddings from an output.weight of its own.
  std::map<std::string, int64_t> printed;
  int64_t total = 0;
  for (const auto& [t, n] : m.tensor_types) {
    printed[lower(t)] += n;
    total += n;
  }
  std::optional<models::LlamaGraph> graph;
  for (bool tied : {false, true}) {
    c.tied_output = tied;
    auto g = models::build_llama(c);
    if (!g.ok()) return missing("the printed metadata gives no graph: " + g.status().message());
    if (static_cast<int64_t>(g.value().weights.size()) == total) {
      graph = std::move(g).value();
      break;
    }
  }
  if (!graph) {
    return missing(format_message("the printed type counts (%s: %lld tensors) match no %s graph of this metadata",
                                  counts_text(printed).c_str(), static_cast<long long>(total), m.arch.c_str()));
  }

  // The types.
  std::vector<const Tensor*> weights(graph->weights.begin(), graph->weights.end());
  std::stable_sort(weights.begin(), weights.end(), [](const Tensor* a, const Tensor* b) {
    return models::fixtures::weight_name_less(a->name, b->name);
  });
  std::map<std::string, int64_t> quantized = printed;
  quantized.erase("f32");
  std::map<std::string, int64_t> derived;
  models::fixtures::FileType kind;
  if (quantized.size() == 1) {
    Type q;
    if (!type_from_name(quantized.begin()->first.c_str(), &q)) {
      return missing("the printed type " + quantized.begin()->first + " is not a Tessera type");
    }
    for (const Tensor* t : weights) c.weight_types[t->name] = stays_f32(*t) ? Type::kF32 : q;
    notes->push_back("weights: " + quantized.begin()->first +
                     " for every matrix, f32 for norms, routers and biases "
                     "(one quantized type printed)");
  } else if (models::fixtures::file_type_from_name(m.file_type, &kind) ||
             (m.file_type.empty() && file_type_from_counts(m.arch, c, weights, printed, &kind))) {
    if (m.file_type.empty()) notes->push_back("no file type printed: the mix whose type counts equal the printed ones");
    const std::vector<models::fixtures::SourceTensor> src = sources(weights);
    // Without an importance matrix, or with one when only that gives the printed counts (the log does not say; it
    // changes ffn_down of Q4_0, Q5_0, IQ4_NL and IQ4_XS files). When neither does, the rules without one (the note
    // below says the counts differ).
    models::fixtures::QuantModel qm{m.arch, c.n_layer, c.n_head, c.n_head_kv, c.n_expert, false};
    if (derived_counts(qm, kind, src) != printed) {
      models::fixtures::QuantModel with = qm;
      with.has_imatrix = true;
      if (derived_counts(with, kind, src) == printed) {
        qm = with;
        notes->push_back("weights: the printed counts need an importance matrix's rule for ffn_down");
      }
    }
    auto types = models::fixtures::quantized_types(qm, kind, src);
    if (!types.ok()) return missing("llama-quantize's types for this metadata: " + types.status().message());
    for (size_t i = 0; i < weights.size(); ++i) {
      Type t;
      if (!type_from_gguf_id(static_cast<int>(types.value()[i]), &t)) return missing("a type Tessera does not know");
      c.weight_types[weights[i]->name] = t;
    }
    notes->push_back("weights: llama-quantize's " + (m.file_type.empty() ? "" : m.file_type + " ") + "rules");
  } else {
    return missing(
        format_message("per-tensor weight types: the log prints %s and file type '%s'; Tessera derives "
                       "them for one quantized type or a file type whose rules it implements (the legacy and K-quant "
                       "mixes, IQ4_NL, IQ4_XS, MXFP4 MoE; pass -m FILE.gguf)",
                       counts_text(printed).c_str(), m.file_type.c_str()));
  }
  derived.clear();
  for (const auto& [name, t] : c.weight_types) derived[lower(type_name(t))] += 1;
  // gpt-oss is published with MXFP4 experts, and some quantizers keep them (Unsloth's gpt-oss-20b Q4_K_M:
  // tests/fidelity/53 prints mxfp4 72 = 24 layers x 3 expert tensors beside the Q4_K_M mix of the others), where
  // llama-quantize's rules requantize them: when the printed mxfp4 count is the expert tensors' and that alone makes
  // the counts equal, the experts stay MXFP4.
  if (derived != printed && derived.count("mxfp4") == 0 && printed.count("mxfp4") != 0) {
    std::map<std::string, Type> kept = c.weight_types;
    int64_t experts = 0;
    for (auto& [name, t] : kept) {
      if (name.find("_exps.weight") == std::string::npos) continue;
      t = Type::kMXFP4;
      ++experts;
    }
    std::map<std::string, int64_t> with;
    for (const auto& [name, t] : kept) with[lower(type_name(t))] += 1;
    if (experts == printed.at("mxfp4") && with == printed) {
      c.weight_types = std::move(kept);
      derived = std::move(with);
      notes->push_back(
          "weights: the MoE experts kept in MXFP4 (the printed mxfp4 count is theirs), the others by the "
          "file type's rules");
    }
  }
  if (derived != printed) {
    notes->push_back("the derived weight types (" + counts_text(derived) + ") differ from the printed ones (" +
                     counts_text(printed) + ")");
  }
  const char* q_name = c.fused_qkv ? "blk.0.attn_qkv.weight" : "blk.0.attn_q.weight";
  if (c.weight_types.count(q_name) != 0) c.weight_type = c.weight_types[q_name];
  return c;
}

}  // namespace tessera::llama
