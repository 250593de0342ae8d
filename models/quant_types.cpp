// llama-quantize's choices, for the fixtures (fixtures.h, docs/gguf.md "Fixtures"): the order of the tensors in the
// file (weight_name_less) and the type each tensor gets for a file type (quantized_types). Kept apart from the
// fixtures themselves (fixtures.cpp) so that each file holds one concern.
//
// llama.cpp sources read (ggml-org/llama.cpp): src/llama-quant.cpp at commit 007dbbf3 (llama_tensor_get_type_impl,
// tensor_allows_quantization, tensor_type_fallback, init_quantize_state_counters, llama_quant_model_from_metadata)
// and src/llama-model-loader.h at 01b75d6a (weight_name_comparer).
#include <algorithm>
#include <string_view>

#include "tessera/models/fixtures.h"

namespace tessera::models::fixtures {

using gguf::TensorType;

// ---- tensor order ----

namespace {

// The N of "blk.N." (what sscanf(name, "blk.%d.", &n) reads), or -1 for a tensor outside the blocks.
int block_of(std::string_view name) {
  constexpr std::string_view kPrefix = "blk.";
  if (name.substr(0, kPrefix.size()) != kPrefix) return -1;
  size_t i = kPrefix.size();
  int n = 0;
  bool digits = false;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && n < 100000000) {
    n = n * 10 + (name[i] - '0');
    digits = true;
    ++i;
  }
  // sscanf's "%d." also needs the dot after the number; without it the assignment still happened (n is set), which
  // is what llama.cpp's comparer then uses. Names here always have the dot.
  return digits ? n : -1;
}

}  // namespace

int weight_block(std::string_view name) { return block_of(name); }

bool weight_name_less(std::string_view a, std::string_view b) {
  const int la = block_of(a);
  const int lb = block_of(b);
  if (la != lb) return la < lb;
  return a < b;
}

// ---- llama-quantize's type choice ----
//
// Written from llama.cpp src/llama-quant.cpp (commit 007dbbf3), restricted to the file types of FileType (the legacy
// quants, the K-quant mixes, IQ4_NL / IQ4_XS and MXFP4_MOE; not the IQ1 / IQ2 / IQ3 mixes), no --pure, no per-tensor
// overrides, no output/token-embedding type options, and no Falcon-specific branches (no Falcon model). One rule
// differs from that commit on purpose: attn_qkv (phi3's fused projection). At 007dbbf3 tensor_get_category's
// ATTENTION_QKV counts as "attn_v-like" (category_is_attn_v), so attn_qkv takes attn_v's branch (q6_K on the "more
// bits" layers, q4_K elsewhere) and the later `category == ATTENTION_QKV` branch (Q4_K_M -> q5_K) is unreachable.
// Before that refactor the rules matched names, `name.find("attn_v.weight")` did not match attn_qkv, and attn_qkv got
// the q5_K branch. A published Phi-3-mini Q4_K_M file has 32 q5_K tensors (its attn_qkv; llama.cpp PR #11003's log: f32
// 65, q4_K 81, q5_K 32, q6_K 17), so the fixture keeps the q5_K rule: it reproduces the file users have, not what
// today's llama-quantize would write.

namespace {

enum class Category {
  kTokenEmbd,
  kOutput,
  kAttnQ,
  kAttnK,
  kAttnV,
  kAttnQkv,
  kAttnKvB,
  kAttnOut,
  kFfnUp,
  kFfnGate,
  kFfnDown,
  kOther
};

bool contains(std::string_view s, std::string_view part) { return s.find(part) != std::string_view::npos; }
bool ends_with(std::string_view s, std::string_view end) {
  return s.size() >= end.size() && s.substr(s.size() - end.size()) == end;
}

// tensor_get_category: whole names for the output and the token embeddings, substrings for the rest, in this order.
Category category(std::string_view name) {
  if (name == "output.weight") return Category::kOutput;
  if (name == "token_embd.weight" || name == "per_layer_token_embd.weight") return Category::kTokenEmbd;
  if (contains(name, "attn_qkv.weight")) return Category::kAttnQkv;
  if (contains(name, "attn_kv_b.weight")) return Category::kAttnKvB;
  if (contains(name, "attn_v.weight")) return Category::kAttnV;
  if (contains(name, "attn_k.weight")) return Category::kAttnK;
  if (contains(name, "attn_q.weight")) return Category::kAttnQ;
  if (contains(name, "attn_output.weight")) return Category::kAttnOut;
  if (contains(name, "ffn_up")) return Category::kFfnUp;
  if (contains(name, "ffn_gate")) return Category::kFfnGate;
  if (contains(name, "ffn_down")) return Category::kFfnDown;
  return Category::kOther;
}

// ggml_n_dims: the dimensions up to the last one that is not 1 (at least 1).
int n_dims(const std::vector<int64_t>& ne) {
  int n = static_cast<int>(ne.size());
  while (n > 1 && ne[static_cast<size_t>(n) - 1] == 1) --n;
  return n;
}

// tensor_allows_quantization, the checks that can apply to these architectures: only 2-D and 3-D (expert) tensors
// whose name ends in "weight", not norms, not the MoE router (ffn_gate_inp), not positional or token-type embeddings.
// The output tensor is quantized (quantize_output_tensor is true by default).
bool allows_quantization(const SourceTensor& t) {
  if (n_dims(t.ne) < 2) return false;
  const std::string_view name = t.name;
  if (!ends_with(name, "weight")) return false;
  if (contains(name, "_norm.weight")) return false;
  if (contains(name, "ffn_gate_inp.weight")) return false;
  if (name == "position_embd.weight" || name == "token_types.weight") return false;
  return true;
}

// use_more_bits: the first and last eighth of the layers and every third layer in between.
bool use_more_bits(int64_t i_layer, int64_t n_layers) {
  return i_layer < n_layers / 8 || i_layer >= 7 * n_layers / 8 || (i_layer - n_layers / 8) % 3 == 2;
}

int64_t block_size(TensorType type) { return gguf::type_info(type)->block_size; }

// tensor_type_fallback: a row length that is not a whole number of the chosen type's blocks takes a type with
// 32-value blocks, or f16 when even that does not fit.
Result<TensorType> fallback(const SourceTensor& t, TensorType type) {
  const int64_t ncols = t.ne[0];
  if (ncols % block_size(type) == 0) return type;
  TensorType to;
  switch (type) {
    case TensorType::kIQ4_XS: to = TensorType::kIQ4_NL; break;
    case TensorType::kQ2_K:
    case TensorType::kQ3_K: to = TensorType::kQ4_0; break;
    case TensorType::kQ4_K: to = TensorType::kQ5_0; break;
    case TensorType::kQ5_K: to = TensorType::kQ5_1; break;
    case TensorType::kQ6_K: to = TensorType::kQ8_0; break;
    default:
      // llama-quantize throws "no tensor type fallback is defined for type q8_0" (and q4_0, iq4_nl, mxfp4, ...).
      return TS_ERROR(StatusCode::kInvalidArgument, "tensor '%s': row length %lld is not a whole number of %s blocks",
                      t.name.c_str(), static_cast<long long>(ncols), gguf::type_name(type));
  }
  if (ncols % block_size(to) != 0) to = TensorType::kF16;
  return to;
}

struct QuantState {
  int64_t n_attention_wv = 0;
  int64_t i_attention_wv = 0;
  int64_t i_ffn_down = 0;
  bool tied_embeddings = true;  // no output.weight: token_embd doubles as the output
};

// llama_tensor_get_type_impl for the file types of FileType.
TensorType choose(const QuantModel& m, FileType ftype, QuantState& qs, const SourceTensor& t, TensorType new_type) {
  using F = FileType;
  const Category cat = category(t.name);
  // LLM_TYPE_70B: llama with 80 layers and grouped-query attention (llama_quant_model_from_metadata; llama-model.cpp
  // load_hparams gives the same type).
  const bool is_70b = m.arch == "llama" && m.n_layer == 80 && m.n_head != m.n_head_kv;
  const int64_t n_gqa = m.n_head_kv > 0 ? m.n_head / m.n_head_kv : 1;
  if (cat == Category::kOutput || (qs.tied_embeddings && cat == Category::kTokenEmbd)) {
    if (ftype == F::kMXFP4_MOE) return TensorType::kQ8_0;
    if (t.ne[0] % block_size(new_type) != 0) return TensorType::kQ8_0;
    return new_type == TensorType::kQ8_0 ? new_type : TensorType::kQ6_K;
  }
  if (ftype == F::kMXFP4_MOE) {
    // MoE tensors (3-D) -> MXFP4, the other quantized tensors -> Q8_0.
    return t.ne.size() > 2 && t.ne[2] > 1 ? TensorType::kMXFP4 : TensorType::kQ8_0;
  }
  switch (cat) {
    case Category::kTokenEmbd:  // untied: the default type (the IQ1/IQ2/IQ3 and TQ rules are not implemented)
      return new_type;
    case Category::kAttnV:
    case Category::kAttnKvB: {
      if (ftype == F::kQ2_K) {
        new_type = n_gqa >= 4 ? TensorType::kQ4_K : TensorType::kQ3_K;
      } else if (ftype == F::kQ2_K_S && n_gqa >= 4) {
        new_type = TensorType::kQ4_K;
      } else if ((ftype == F::kIQ4_NL || ftype == F::kIQ4_XS) && n_gqa >= 4) {
        new_type = TensorType::kQ5_K;
      } else if (ftype == F::kQ3_K_M) {
        new_type = qs.i_attention_wv < 2 ? TensorType::kQ5_K : TensorType::kQ4_K;
      } else if (ftype == F::kQ3_K_L) {
        new_type = TensorType::kQ5_K;
      } else if ((ftype == F::kQ4_K_M || ftype == F::kQ5_K_M) && use_more_bits(qs.i_attention_wv, qs.n_attention_wv)) {
        new_type = TensorType::kQ6_K;
      } else if (ftype == F::kQ4_K_S && qs.i_attention_wv < 4) {
        new_type = TensorType::kQ5_K;
      }
      // 70B: 8 heads share each attn_v, which is 8x smaller than attn_q: a few more bits cost little.
      if (is_70b && (new_type == TensorType::kQ3_K || new_type == TensorType::kQ4_K)) new_type = TensorType::kQ5_K;
      if (m.n_expert == 8) new_type = TensorType::kQ8_0;  // the 8-expert model (Mixtral)
      ++qs.i_attention_wv;
      return new_type;
    }
    case Category::kAttnK: return m.n_expert == 8 ? TensorType::kQ8_0 : new_type;
    case Category::kFfnDown: {
      // The layer: from the name when there are experts (split experts are not in layer order), else the count.
      const int64_t i_layer = m.n_expert > 1 ? block_of(t.name) : qs.i_ffn_down;
      const int64_t n = m.n_layer;
      ++qs.i_ffn_down;
      switch (ftype) {
        case F::kQ2_K: return TensorType::kQ3_K;
        case F::kQ2_K_S: return i_layer < n / 8 ? TensorType::kQ4_K : new_type;
        case F::kQ3_K_M: return i_layer < n / 16 ? TensorType::kQ5_K : TensorType::kQ4_K;  // not Falcon: q4_K
        case F::kQ3_K_L: return TensorType::kQ5_K;
        case F::kQ4_K_M:
        case F::kQ5_K_M: return use_more_bits(i_layer, n) ? TensorType::kQ6_K : new_type;
        case F::kIQ4_NL:
        case F::kIQ4_XS: return i_layer < n / 8 && !m.has_imatrix ? TensorType::kQ5_K : new_type;
        case F::kQ4_K_S: return i_layer < n / 8 ? TensorType::kQ5_K : new_type;
        case F::kQ4_0: return m.has_imatrix && i_layer < n / 8 ? TensorType::kQ4_1 : new_type;
        case F::kQ5_0: return m.has_imatrix && i_layer < n / 8 ? TensorType::kQ5_1 : new_type;
        default: return new_type;
      }
    }
    case Category::kAttnOut:
      if (m.n_expert == 8) {
        switch (ftype) {
          case F::kQ2_K:
          case F::kQ3_K_S:
          case F::kQ3_K_M:
          case F::kIQ4_NL:
          case F::kQ4_K_S:
          case F::kQ4_K_M:
          case F::kIQ4_XS: return TensorType::kQ5_K;
          default: return new_type;
        }
      }
      if (ftype == F::kQ2_K) return TensorType::kQ3_K;
      if (ftype == F::kQ3_K_M) return TensorType::kQ4_K;
      if (ftype == F::kQ3_K_L) return TensorType::kQ5_K;
      return new_type;
    case Category::kAttnQkv:  // the pre-refactor rule (see above)
      if (ftype == F::kQ3_K_M || ftype == F::kQ3_K_L) return TensorType::kQ4_K;
      if (ftype == F::kQ4_K_M) return TensorType::kQ5_K;
      if (ftype == F::kQ5_K_M) return TensorType::kQ6_K;
      return new_type;
    default: return new_type;
  }
}

// llama_ftype_get_default_type.
TensorType default_type(FileType ftype) {
  switch (ftype) {
    case FileType::kQ4_0: return TensorType::kQ4_0;
    case FileType::kQ4_1: return TensorType::kQ4_1;
    case FileType::kQ8_0: return TensorType::kQ8_0;
    case FileType::kQ5_0: return TensorType::kQ5_0;
    case FileType::kQ5_1: return TensorType::kQ5_1;
    case FileType::kQ2_K:
    case FileType::kQ2_K_S: return TensorType::kQ2_K;
    case FileType::kQ3_K_S:
    case FileType::kQ3_K_M:
    case FileType::kQ3_K_L: return TensorType::kQ3_K;
    case FileType::kQ4_K_S:
    case FileType::kQ4_K_M: return TensorType::kQ4_K;
    case FileType::kQ5_K_S:
    case FileType::kQ5_K_M: return TensorType::kQ5_K;
    case FileType::kQ6_K: return TensorType::kQ6_K;
    case FileType::kIQ4_NL: return TensorType::kIQ4_NL;
    case FileType::kIQ4_XS: return TensorType::kIQ4_XS;
    case FileType::kMXFP4_MOE: return TensorType::kMXFP4;
  }
  return TensorType::kQ4_K;
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

}  // namespace

Result<std::vector<TensorType>> quantized_types(const QuantModel& model, FileType ftype,
                                                const std::vector<SourceTensor>& tensors) {
  QuantState qs;
  // init_quantize_state_counters: attn_v-like tensors are counted (attn_qkv too), and one output.weight unties the
  // embeddings. The ffn_down count is the layer count.
  for (const SourceTensor& t : tensors) {
    const Category cat = category(t.name);
    if (cat == Category::kAttnV || cat == Category::kAttnQkv || cat == Category::kAttnKvB) ++qs.n_attention_wv;
    if (cat == Category::kOutput) qs.tied_embeddings = false;
  }
  std::vector<TensorType> types;
  types.reserve(tensors.size());
  for (const SourceTensor& t : tensors) {
    if (t.ne.empty() || t.ne.size() > gguf::kMaxDims ||
        std::any_of(t.ne.begin(), t.ne.end(), [](int64_t d) { return d <= 0; })) {
      return TS_ERROR(StatusCode::kInvalidArgument, "tensor '%s': a shape needs 1 to 4 positive dimensions",
                      t.name.c_str());
    }
    if (!allows_quantization(t)) {
      types.push_back(t.type);
      continue;
    }
    Result<TensorType> type = fallback(t, choose(model, ftype, qs, t, default_type(ftype)));
    if (!type.ok()) return type.status();
    types.push_back(type.value());
  }
  return types;
}

namespace {

// llama_model_ftype_name's names (llama.cpp src/llama-model-loader.cpp), lower-cased.
constexpr std::pair<const char*, FileType> kLlamaFtypeNames[] = {
    {"q4_0", FileType::kQ4_0},
    {"q4_1", FileType::kQ4_1},
    {"q8_0", FileType::kQ8_0},
    {"q5_0", FileType::kQ5_0},
    {"q5_1", FileType::kQ5_1},
    {"q2_k - medium", FileType::kQ2_K},
    {"q2_k - small", FileType::kQ2_K_S},
    {"q3_k - small", FileType::kQ3_K_S},
    {"q3_k - medium", FileType::kQ3_K_M},
    {"q3_k - large", FileType::kQ3_K_L},
    {"q4_k - small", FileType::kQ4_K_S},
    {"q4_k - medium", FileType::kQ4_K_M},
    {"q5_k - small", FileType::kQ5_K_S},
    {"q5_k - medium", FileType::kQ5_K_M},
    {"q6_k", FileType::kQ6_K},
    {"iq4_nl - 4.5 bpw", FileType::kIQ4_NL},
    {"iq4_xs - 4.25 bpw", FileType::kIQ4_XS},
    {"mxfp4 moe", FileType::kMXFP4_MOE},
};

}  // namespace

std::vector<FileType> file_types_with_rules() {
  std::vector<FileType> out;
  for (const auto& [name, f] : kLlamaFtypeNames) out.push_back(f);
  return out;
}

bool file_type_from_name(const std::string& printed, FileType* out) {
  std::string name = lower(printed);
  const std::string guessed = " (guessed)";
  if (name.size() > guessed.size() && name.compare(name.size() - guessed.size(), guessed.size(), guessed) == 0) {
    name.resize(name.size() - guessed.size());
  }
  while (!name.empty() && (name.back() == ' ' || name.back() == '\r')) name.pop_back();
  for (const auto& [n, f] : kLlamaFtypeNames) {
    if (name == n) {
      *out = f;
      return true;
    }
  }
  return false;
}

}  // namespace tessera::models::fixtures
