// Values for a llama model with real memory (see llama.h): seeded random weights and cache, and the inputs of one
// decoder step.
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/backend.h"
#include "tessera/graph_copy.h"
#include "tessera/models/from_gguf.h"
#include "tessera/models/llama.h"

namespace tessera::models {

namespace {

uint64_t mix(uint64_t seed, uint64_t salt) {
  uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (salt + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

Status fill_random(LlamaGraph& model, uint64_t seed) {
  auto fill = [&](Tensor* t, uint64_t salt, float mean, float stddev) -> Status {
    std::mt19937_64 rng(mix(seed, salt));
    std::normal_distribution<float> dist(mean, stddev);
    std::vector<float> v(static_cast<size_t>(nelements(*t)));
    for (float& f : v) f = dist(rng);
    Status s = tensor_from_f32(*t, v);
    if (!s.ok()) return Status(s.code(), std::string("fill_random: ") + t->name + ": " + s.message());
    return s;
  };
  // Salts: weight i draws with salt i, the cache after them (the same cache whether the weights are drawn or read).
  uint64_t salt = 0;
  if (model.config.weights_file != nullptr) {
    TS_RETURN_IF_ERROR(read_file_weights(model));
    salt = model.weights.size();
  } else {
    for (Tensor* w : model.weights) {
      // Biases (qwen2's Q/K/V) around 0, of the size of a projection's values; other f32 vectors are norms, around 1.
      const std::string_view name(w->name);
      const bool is_bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
      const bool is_norm = !is_bias && w->ne[1] == 1 && w->ne[2] == 1 && w->type == Type::kF32;
      const bool is_embd = w == model.tok_embd;
      const float stddev = is_bias   ? 0.5f
                           : is_norm ? 0.1f
                           : is_embd ? 1.0f
                                     : 1.0f / std::sqrt(static_cast<float>(w->ne[0]));
      TS_RETURN_IF_ERROR(fill(w, salt++, is_norm ? 1.0f : 0.0f, stddev));
    }
  }
  for (Tensor* kv : model.kv_cache) TS_RETURN_IF_ERROR(fill(kv, salt++, 0.0f, 1.0f));
  return Status::Ok();
}

LlamaInputs default_inputs(const LlamaConfig& c, uint64_t seed) {
  LlamaInputs in;
  const int64_t T = c.n_tokens, n_kv = c.kv_len(), first = n_kv - T;
  std::mt19937_64 rng(mix(seed, 0x70c));
  std::uniform_int_distribution<int32_t> tok(0, static_cast<int32_t>(c.n_vocab - 1));
  for (int64_t i = 0; i < T; ++i) {
    in.tokens.push_back(tok(rng));
    in.pos.push_back(static_cast<int32_t>(first + i));
    in.kv_idxs.push_back(static_cast<int32_t>(first + i));
  }
  for (int64_t i = c.n_tokens - c.outputs(); i < T; ++i) in.out_ids.push_back(static_cast<int32_t>(i));
  in.mask.assign(static_cast<size_t>(n_kv * T), 0.0f);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = first + i + 1; j < n_kv; ++j) {
      in.mask[static_cast<size_t>(i * n_kv + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  return in;
}

Status set_inputs(LlamaGraph& m, const LlamaInputs& in) {
  auto set_i32 = [](Tensor* t, const std::vector<int32_t>& v) -> Status {
    if (t == nullptr) return Status::Ok();
    if (static_cast<int64_t>(v.size()) != nelements(*t)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: %s needs %lld values, got %zu", t->name,
                      static_cast<long long>(nelements(*t)), v.size());
    }
    return tensor_set(*t, v.data(), 0, v.size() * sizeof(int32_t));
  };
  TS_RETURN_IF_ERROR(set_i32(m.tokens, in.tokens));
  TS_RETURN_IF_ERROR(set_i32(m.pos, in.pos));
  TS_RETURN_IF_ERROR(set_i32(m.kv_idxs, in.kv_idxs));
  TS_RETURN_IF_ERROR(set_i32(m.out_ids, in.out_ids));
  if (static_cast<int64_t>(in.mask.size()) != nelements(*m.mask)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: the mask needs %lld values, got %zu",
                    static_cast<long long>(nelements(*m.mask)), in.mask.size());
  }
  return tensor_from_f32(*m.mask, in.mask);
}

}  // namespace tessera::models
