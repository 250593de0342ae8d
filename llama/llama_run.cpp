// llama.cpp's run options in Tessera's terms (see tessera/llama/llama_run.h).
#include "tessera/llama/llama_run.h"

#include <algorithm>
#include <utility>

namespace tessera::llama {

namespace {

Status refuse(const std::string& what) { return Status(StatusCode::kInvalidArgument, "not supported yet: " + what); }

// The cache types llama.cpp's -ctk and -ctv take (common/arg.cpp, kv_cache_types).
std::optional<Type> cache_type(const std::string& name) {
  for (const char* n : {"f32", "f16", "bf16", "q8_0", "q4_0", "q4_1", "iq4_nl", "q5_0", "q5_1"}) {
    Type t = Type::kF32;
    if (name == n && type_from_name(n, &t)) return t;
  }
  return std::nullopt;
}

}  // namespace

Result<LlamaRunShape> resolve_llama_run(const LlamaRunArgs& a) {
  LlamaRunShape r;
  // src/llama-context.cpp (llama_context's constructor): n_ctx = GGML_PAD(n_ctx, 256); n_batch = min(n_ctx,
  // n_batch) for a causal model; n_ubatch = min(n_batch, n_ubatch). The graph is built for one micro-batch.
  if (a.ctx_size) {
    // -c 0: the model's training context (llama.cpp's default in its newest builds); ctx stays 0, "the model's"
    if (*a.ctx_size < 0 || *a.ctx_size > (1 << 24)) {
      return Status(StatusCode::kInvalidArgument,
                    "-c " + std::to_string(*a.ctx_size) + ": expected 0 (the model's) to 16777216");
    }
    r.ctx = (*a.ctx_size + 255) / 256 * 256;
  }
  for (const auto& [flag, v] : {std::pair{"-b", a.batch}, std::pair{"-ub", a.ubatch}}) {
    if (v && (*v < 1 || *v > (1 << 20))) {
      return Status(StatusCode::kInvalidArgument,
                    std::string(flag) + " " + std::to_string(*v) + ": expected 1 to 1048576");
    }
  }
  r.batch = a.batch;
  r.ubatch = a.ubatch;
  r.swa_full = a.swa_full;
  if (a.batch || a.ubatch) {
    int64_t n_batch = a.batch.value_or(2048);
    if (r.ctx > 0) n_batch = std::min(n_batch, r.ctx);
    r.tokens = std::min(n_batch, a.ubatch.value_or(512));
  }
  std::optional<Type> k, v;
  if (a.cache_k && !(k = cache_type(*a.cache_k))) {
    return Status(StatusCode::kInvalidArgument,
                  "-ctk " + *a.cache_k + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1");
  }
  if (a.cache_v && !(v = cache_type(*a.cache_v))) {
    return Status(StatusCode::kInvalidArgument,
                  "-ctv " + *a.cache_v + ": expected f32, f16, bf16, q8_0, q4_0, q4_1, iq4_nl, q5_0 or q5_1");
  }
  // each defaults to f16 (common/common.h: cache_type_k, cache_type_v)
  if (k || v) {
    r.kv_type = k.value_or(Type::kF16);
    r.v_type = v.value_or(Type::kF16);
  }
  if (a.flash_attn) {
    // common/arg.cpp: is_truthy, is_falsey, is_autoy.
    const std::string& f = *a.flash_attn;
    if (f == "on" || f == "enabled" || f == "true" || f == "1") {
      r.flash_attn = true;
    } else if (f == "off" || f == "disabled" || f == "false" || f == "0") {
      r.flash_attn = false;
    } else if (f == "auto" || f == "-1") {
      r.flash_attn_auto = true;
    } else {
      return Status(StatusCode::kInvalidArgument, "-fa " + f + ": expected on, off or auto");
    }
  }
  if (a.n_parallel) {
    if (*a.n_parallel < 1 || *a.n_parallel > 256) {
      return Status(StatusCode::kInvalidArgument, "-np " + std::to_string(*a.n_parallel) + ": expected 1 to 256");
    }
    // src/llama-context.cpp: without --kv-unified each sequence has a KV stream of its own (n_ctx / n_seq cells,
    // padded to 256), and the graphs are built over the streams; with it, one cache for all, the graphs of one
    // sequence, and only the output buffer (a row of logits per sequence) and the sliding-window caches grow.
    if (*a.n_parallel > 1 && !a.kv_unified) {
      return refuse("-np " + std::to_string(*a.n_parallel) +
                    " without --kv-unified (-kvu): a KV stream per sequence (llama-server gives -kvu itself when -np "
                    "is not given)");
    }
    r.n_seq = *a.n_parallel;
  }
  r.kv_unified = a.kv_unified;
  r.use_mmap = !a.no_mmap;
  r.embeddings = a.embeddings;
  if (a.n_outputs_max) {
    if (*a.n_outputs_max < 1 || *a.n_outputs_max > (int64_t{1} << 30)) {
      return Status(StatusCode::kInvalidArgument,
                    "--n-outputs-max " + std::to_string(*a.n_outputs_max) + ": expected 1 to 2^30");
    }
    r.n_outputs_max = *a.n_outputs_max;
  }
  // --swa-full: full-size caches for the sliding-window layers (llama_kv_cache_iswa's size_swa = size_base). The
  // memory breakdown sizes them (llama_kv_cells, tessera/llama/llama_memory.h); the simulated graph builds them full
  // size either way.
  return r;
}

}  // namespace tessera::llama
