// llama.cpp's run options (-c, -b, -ub, -ctk, -ctv, -fa, -np, --kv-unified, --swa-full) with llama.cpp's meaning
// (common/arg.cpp for the values; src/llama-context.cpp for how the context and the batches are rounded), in
// Tessera's terms: the command line (tools/tessera/cli_options.cpp) and scenario files' "model" keys ("ctx_size",
// "batch_size", ...) read them into LlamaRunArgs and resolve them here, so both mean the same (docs/scenarios.md).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "tessera/status.h"
#include "tessera/types.h"

namespace tessera::llama {

struct LlamaRunArgs {
  std::optional<int64_t> ctx_size, batch, ubatch;  // -c, -b, -ub
  std::optional<std::string> cache_k, cache_v, flash_attn;
  std::optional<int64_t> n_parallel;  // -np
  bool kv_unified = false, swa_full = false;
  bool no_mmap = false;     // --no-mmap
  bool embeddings = false;  // --embeddings
  // llama.cpp's context parameter n_outputs_max (no option of its own: llama-server sets it, see llama_cmdline.h)
  std::optional<int64_t> n_outputs_max;  // --n-outputs-max
};

// What the run options come to: the model's n_ctx (the cache slots) and n_tokens (the graph's batch: one micro-batch),
// flash attention and the cache type; unset where the options do not say.
struct LlamaRunShape {
  int64_t ctx = 0;     // 0: unset
  int64_t tokens = 0;  // 0: unset
  std::optional<bool> flash_attn;
  bool flash_attn_auto = false;  // -fa auto: SessionConfig::flash_attn_auto decides when the model is placed
  std::optional<Type> kv_type;   // -ctk (the K cache's type); set together with v_type
  std::optional<Type> v_type;    // -ctv
  // -b and -ub as given (unset: llama.cpp's 2048 and 512), and --swa-full: the memory breakdown's LlamaContextParams
  // (tessera/llama/llama_memory.h).
  std::optional<int64_t> batch, ubatch;
  bool swa_full = false;
  // -np and -kvu (sequences, one KV stream for them all), --no-mmap, --embeddings: the memory breakdown's too.
  int64_t n_seq = 1;
  bool kv_unified = false;
  bool use_mmap = true;
  bool embeddings = false;
  int64_t n_outputs_max = 0;  // the outputs llama.cpp reserves its graphs for (0: n_batch; LlamaContextParams)
};

// Errors (kInvalidArgument) name the llama.cpp flag: a bad value, or "not supported yet: ..." for what Tessera cannot
// honour (-np above 1 without --kv-unified: a KV stream per sequence). --swa-full sizes llama.cpp's sliding-window
// caches in the memory breakdown (tessera/llama/llama_memory.h); the simulated graph's sliding-window caches are full
// size.
Result<LlamaRunShape> resolve_llama_run(const LlamaRunArgs& a);

}  // namespace tessera::llama
