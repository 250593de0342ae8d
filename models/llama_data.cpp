// Values for a llama model with real memory (see llama.h): seeded random weights and cache, filled in parallel, and
// the inputs of one decoder step.
#include <algorithm>
#include <cmath>
#include <limits>
#include <new>
#include <random>
#include <string>
#include <string_view>
#include <system_error>
#include <thread>
#include <unordered_map>
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

// The normalised Walsh-Hadamard matrix of order n (a power of two), row-major: Sylvester's H_1 = [1], H_2s = [[H_s,
// H_s], [H_s, -H_s]], scaled by 1 / sqrt(n) (llama.cpp's ggml_gen_hadamard in src/llama-kv-cache.cpp): symmetric,
// orthogonal, its own inverse. Built block by block as the recursion reads.
std::vector<float> walsh_hadamard(int64_t n) {
  std::vector<float> h(static_cast<size_t>(n * n));
  if (n < 1) return h;
  h[0] = 1.0f / std::sqrt(static_cast<float>(n));
  for (int64_t s = 1; s < n; s *= 2) {  // the top-left s x s block holds H_s / sqrt(n): make the other three
    for (int64_t i = 0; i < s; ++i) {
      for (int64_t j = 0; j < s; ++j) {
        const float x = h[static_cast<size_t>(i * n + j)];
        h[static_cast<size_t>(i * n + j + s)] = x;
        h[static_cast<size_t>((i + s) * n + j)] = x;
        h[static_cast<size_t>((i + s) * n + j + s)] = -x;
      }
    }
  }
  return h;
}

// An approximately standard normal value for element `index` of a stream: the sum of four 16-bit uniforms taken from
// one hash of (stream, index), centred and scaled to variance 1 (Irwin-Hall; the values lie within +-3.47). A value
// depends on its index alone, so the work may be split in any way and the result is the same.
float normal_at(uint64_t stream, uint64_t index) {
  const uint64_t h = mix(stream, index);
  const float sum = static_cast<float>(h & 0xffff) + static_cast<float>((h >> 16) & 0xffff) +
                    static_cast<float>((h >> 32) & 0xffff) + static_cast<float>(h >> 48);
  return (sum * (1.0f / 65536.0f) - 2.0f) * 1.7320508f;  // sqrt(3): four uniforms have variance 1/3
}

// Threads for a fill of `rows` rows of `row_len` values: one per 2^18 values, at most `limit` (0: one per hardware
// thread).
int64_t fill_threads(int64_t rows, int64_t row_len, int limit) {
  constexpr int64_t kValuesPerThread = int64_t{1} << 18;
  const int64_t most = limit > 0 ? limit : std::max<int64_t>(1, std::thread::hardware_concurrency());
  return std::clamp<int64_t>(rows * row_len / kValuesPerThread, 1, std::min(most, rows));
}

// Runs work(k, first_row, end_row) for k = 0 .. n - 1 over equal ranges of `rows` rows, each on a thread of its own
// (the last on this one; where a thread cannot be started, this one does the remaining rows).
template <typename Work>
void for_row_ranges(int64_t rows, int64_t n, const Work& work) {
  std::vector<std::thread> threads;
  int64_t handed = 0;  // rows given to threads
  for (int64_t k = 0; k + 1 < n; ++k) {
    const int64_t r0 = rows * k / n, r1 = rows * (k + 1) / n;
    try {
      threads.emplace_back([&work, k, r0, r1] { work(k, r0, r1); });
    } catch (const std::system_error&) {
      break;
    }
    handed = r1;
  }
  work(static_cast<int64_t>(threads.size()), handed, rows);
  for (std::thread& t : threads) t.join();
}

// Fills a contiguous tensor with mean + stddev * normal_at(stream, i) for its element i (in memory order), converted
// to its type row by row in parallel, then written in one piece.
Status fill_tensor(Tensor& t, uint64_t stream, float mean, float stddev, int threads) {
  const TypeTraits& tt = type_traits(t.type);
  if (tt.from_float == nullptr || t.type == Type::kI32 || !is_contiguous(t) || t.ne[0] < 1) {
    return TS_ERROR(StatusCode::kUnsupported, "fill_random: %s: cannot fill %s with random values", t.name,
                    describe(t).c_str());
  }
  const int64_t row_len = t.ne[0], rows = nelements(t) / row_len, n = fill_threads(rows, row_len, threads);
  const size_t rs = row_size(t.type, row_len), size = static_cast<size_t>(rows) * rs;
  std::vector<uint8_t> bytes;
  std::vector<float> scratch;  // a row of floats per thread
  try {
    bytes.resize(size);
    scratch.resize(static_cast<size_t>(n * row_len));
  } catch (const std::bad_alloc&) {
    return TS_ERROR(StatusCode::kAllocFailed, "fill_random: %s: out of host memory for %zu bytes", t.name, size);
  }
  for_row_ranges(rows, n, [&](int64_t k, int64_t r0, int64_t r1) {
    float* row = scratch.data() + k * row_len;
    for (int64_t r = r0; r < r1; ++r) {
      const uint64_t first = static_cast<uint64_t>(r * row_len);
      for (int64_t i = 0; i < row_len; ++i)
        row[i] = mean + stddev * normal_at(stream, first + static_cast<uint64_t>(i));
      tt.from_float(row, bytes.data() + static_cast<size_t>(r) * rs, row_len);
    }
  });
  Status s = tensor_set(t, bytes.data(), 0, size);
  if (!s.ok()) return Status(s.code(), std::string("fill_random: ") + t.name + ": " + s.message());
  return s;
}

}  // namespace

Status fill_random(LlamaGraph& model, uint64_t seed, int threads) {
  if (model.config.has_swa() && model.config.ctx_swa() < model.config.n_ctx) {
    return Status(StatusCode::kUnsupported,
                  "memory-backed run: sliding-window caches smaller than the context (n_ctx_swa " +
                      std::to_string(model.config.n_ctx_swa) +
                      ") are modelled for placement and memory only; use full-size ones (--swa-full)");
  }
  if (!model.config.compute_refusal.empty()) {
    return Status(StatusCode::kUnsupported, "memory-backed run: " + model.config.compute_refusal +
                                                "; plan, fit and time it in metadata mode (--metadata)");
  }
  // Each tensor's stream: its position among the weights, then the cache (the same cache whether the weights are
  // drawn or read from the model's file).
  uint64_t salt = 0;
  if (model.config.weights_file != nullptr) {
    TS_RETURN_IF_ERROR(read_file_weights(model));
    salt = model.weights.size() - model.copies.size();  // (the cache's streams do not depend on the copies)
  } else {
    struct Fill {
      uint64_t stream;
      float mean, stddev;
    };
    std::unordered_map<const Tensor*, Fill> fills;  // each original's, for its copies
    for (Tensor* w : model.weights) {
      if (const LlamaGraph::WeightCopy* c = model.copy_of(w)) {  // a copy holds its original's values
        const auto it = fills.find(c->of);
        if (it == fills.end()) {
          return TS_ERROR(StatusCode::kInvalidArgument, "fill_random: the copy %s precedes its original", w->name);
        }
        TS_RETURN_IF_ERROR(fill_tensor(*w, it->second.stream, it->second.mean, it->second.stddev, threads));
        continue;
      }
      // Biases (qwen2's Q/K/V) around 0, of the size of a projection's values; other f32 vectors are norms, around 1.
      const std::string_view name(w->name);
      const bool is_bias = name.size() > 5 && name.substr(name.size() - 5) == ".bias";
      const bool is_norm = !is_bias && w->ne[1] == 1 && w->ne[2] == 1 && w->type == Type::kF32;
      const bool is_embd = w == model.tok_embd;
      const float stddev = is_bias   ? 0.5f
                           : is_norm ? 0.1f
                           : is_embd ? 1.0f
                                     : 1.0f / std::sqrt(static_cast<float>(w->ne[0]));
      const Fill f{mix(seed, salt++), is_norm ? 1.0f : 0.0f, stddev};
      fills[w] = f;
      TS_RETURN_IF_ERROR(fill_tensor(*w, f.stream, f.mean, f.stddev, threads));
    }
  }
  for (Tensor* kv : model.kv_cache) TS_RETURN_IF_ERROR(fill_tensor(*kv, mix(seed, salt++), 0.0f, 1.0f, threads));
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
  // A llama.cpp graph writing with SET_ROWS (llama_cpp_graph.h) has V's indices apart, per cache: with flash
  // attention the slots again; a transposed V's dim d of the token in slot s is element d * n_ctx + s of the cache,
  // listed token by token as the token's values are. The sliding-window cache has its own size and slots.
  if (c.llama_cpp && !c.llama_cpp->kv_cpy) {
    const int64_t nk = c.n_embd_kv();
    auto v_of = [&](int64_t cells, int64_t first_slot, std::vector<int32_t>* out) {
      for (int64_t i = 0; i < T; ++i) {
        if (c.flash_attn) {
          out->push_back(static_cast<int32_t>(first_slot + i));
          continue;
        }
        for (int64_t d = 0; d < nk; ++d) out->push_back(static_cast<int32_t>(d * cells + first_slot + i));
      }
    };
    v_of(c.n_ctx, first, &in.v_idxs);
    if (c.has_swa()) {
      const int64_t first_swa = c.kv_len_swa() - T;
      for (int64_t i = 0; i < T; ++i) in.kv_idxs_swa.push_back(static_cast<int32_t>(first_swa + i));
      v_of(c.ctx_swa(), first_swa, &in.v_idxs_swa);
    }
  }
  in.mask.assign(static_cast<size_t>(n_kv * T), 0.0f);
  for (int64_t i = 0; i < T; ++i) {
    for (int64_t j = first + i + 1; j < n_kv; ++j) {
      in.mask[static_cast<size_t>(i * n_kv + j)] = -std::numeric_limits<float>::infinity();
    }
  }
  if (c.k_rot_dim() > 0) in.k_rot = walsh_hadamard(c.k_rot_dim());
  if (c.v_rot_dim() > 0) in.v_rot = walsh_hadamard(c.v_rot_dim());
  if (c.has_swa()) {
    // llama.cpp's LLAMA_SWA_TYPE_STANDARD: a token at position p sees the positions in (p - n_swa, p]. The
    // sliding-window layers attend to kv_len_swa() cells, the last positions up to the new tokens' (all of them
    // unless their cache is smaller: n_ctx_swa, placement and memory only).
    const int64_t n_kv_swa = c.kv_len_swa(), base = n_kv - n_kv_swa;
    in.mask_swa.assign(static_cast<size_t>(n_kv_swa * T), 0.0f);
    for (int64_t i = 0; i < T; ++i) {
      for (int64_t j = 0; j < n_kv_swa; ++j) {
        const int64_t p = base + j;
        if (p > first + i || p <= first + i - c.n_swa) {
          in.mask_swa[static_cast<size_t>(i * n_kv_swa + j)] = -std::numeric_limits<float>::infinity();
        }
      }
    }
  }
  return in;
}

Status set_inputs(LlamaGraph& m, const LlamaInputs& in) {
  auto set_ints = [](Tensor* t, const std::vector<int32_t>& v) -> Status {
    if (t == nullptr) return Status::Ok();
    if (static_cast<int64_t>(v.size()) != nelements(*t)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: %s needs %lld values, got %zu", t->name,
                      static_cast<long long>(nelements(*t)), v.size());
    }
    if (t->type == Type::kI64) {  // (llama.cpp's cache indices)
      const std::vector<int64_t> wide(v.begin(), v.end());
      return tensor_set(*t, wide.data(), 0, wide.size() * sizeof(int64_t));
    }
    return tensor_set(*t, v.data(), 0, v.size() * sizeof(int32_t));
  };
  TS_RETURN_IF_ERROR(set_ints(m.tokens, in.tokens));
  TS_RETURN_IF_ERROR(set_ints(m.pos, in.pos));
  TS_RETURN_IF_ERROR(set_ints(m.kv_idxs, in.kv_idxs));
  TS_RETURN_IF_ERROR(set_ints(m.v_idxs, in.v_idxs));
  TS_RETURN_IF_ERROR(set_ints(m.kv_idxs_swa, in.kv_idxs_swa));
  TS_RETURN_IF_ERROR(set_ints(m.v_idxs_swa, in.v_idxs_swa));
  TS_RETURN_IF_ERROR(set_ints(m.out_ids, in.out_ids));
  if (m.mask != nullptr) {  // (none when every layer is a sliding-window one)
    if (static_cast<int64_t>(in.mask.size()) != nelements(*m.mask)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: the mask needs %lld values, got %zu",
                      static_cast<long long>(nelements(*m.mask)), in.mask.size());
    }
    TS_RETURN_IF_ERROR(tensor_from_f32(*m.mask, in.mask));
  }
  if (m.mask_swa != nullptr) {
    if (static_cast<int64_t>(in.mask_swa.size()) != nelements(*m.mask_swa)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: the sliding-window mask needs %lld values, got %zu",
                      static_cast<long long>(nelements(*m.mask_swa)), in.mask_swa.size());
    }
    TS_RETURN_IF_ERROR(tensor_from_f32(*m.mask_swa, in.mask_swa));
  }
  // the rotation matrices (llama.cpp from 8619 with a quantized cache): one matrix for each cache's input
  for (auto [t, v] :
       {std::pair{m.k_rot, &in.k_rot}, {m.k_rot_swa, &in.k_rot}, {m.v_rot, &in.v_rot}, {m.v_rot_swa, &in.v_rot}}) {
    if (t == nullptr) continue;
    if (static_cast<int64_t>(v->size()) != nelements(*t)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "set_inputs: %s needs %lld values, got %zu", t->name,
                      static_cast<long long>(nelements(*t)), v->size());
    }
    TS_RETURN_IF_ERROR(tensor_from_f32(*t, *v));
  }
  return Status::Ok();
}

}  // namespace tessera::models
