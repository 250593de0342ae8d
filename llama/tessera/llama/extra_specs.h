// What the extra models of a session are (docs/extra-models.md): a draft model and a multimodal projector, as the
// command line (--draft, -ngld, -devd, -cd, -ctkd, --mmproj, --no-mmproj-offload) and scenario files ("draft",
// "mmproj") give them. SessionConfig carries them; Session::create ignores them: place_extra_models
// (tessera/llama/extra_models.h) places them next to the planned main model.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "tessera/sim/device_config.h"
#include "tessera/status.h"
#include "tessera/types.h"

namespace tessera::llama {

// llama.cpp's draft options (common/arg.cpp): -md / --model-draft (Tessera also takes --draft FILE.gguf),
// -ngld / --gpu-layers-draft, -devd / --device-draft, -cd / --ctx-size-draft, -ctkd / --cache-type-k-draft.
struct DraftSpec {
  std::string path;       // the draft model's GGUF file (any shard)
  int n_gpu_layers = -1;  // -ngld: as -ngl (-1: all)
  // -devd: the GPUs that take the draft's offloaded layers, by topology name ("gpu1") or llama.cpp's ("CUDA1");
  // "none" offloads nothing. Empty: the main model's split (-ts, or each GPU's free memory after the main model).
  std::vector<std::string> devices;
  int64_t n_ctx = 0;            // -cd; 0: the main model's context (llama_n_ctx_seq of the main context)
  std::optional<Type> kv_type;  // -ctkd; unset: f16, llama.cpp's default
};

// --mmproj FILE.gguf (a clip GGUF: general.architecture "clip") and --no-mmproj-offload.
struct MmprojSpec {
  std::string path;
  bool offload = true;
};

struct ExtraModels {
  std::optional<DraftSpec> draft;
  std::optional<MmprojSpec> mmproj;
  bool empty() const { return !draft && !mmproj; }
};

// The options as given on the command line (unset: not given).
struct ExtraModelArgs {
  std::optional<std::string> draft;             // --draft, -md / --model-draft
  std::optional<std::string> ngld;              // -ngld: N, "all" or "auto"
  std::optional<std::string> devd;              // -devd: comma-separated GPU names, or "none"
  std::optional<int64_t> ctx_size;              // -cd
  std::optional<std::string> cache_k, cache_v;  // -ctkd, -ctvd
  std::optional<std::string> mmproj;            // --mmproj, -mm
  bool no_mmproj_offload = false;               // --no-mmproj-offload
};
// The extra models the options give, their files checked (check_extra_models). Errors (kInvalidArgument) name the
// flag and the value: a draft option without --draft, --no-mmproj-offload without --mmproj, a bad -ngld, -cd or
// cache type, K and V draft caches of different types. -cd is rounded up to a multiple of 256 as llama.cpp rounds
// every context (src/llama-context.cpp).
// With `topology`, each -devd name must be one of its GPUs (by name or as CUDA<n>).
Result<ExtraModels> resolve_extra_models(const ExtraModelArgs& a, const sim::TopologyConfig* topology = nullptr);
// Reads the files' headers: the draft must be a language model Tessera can build (models/from_gguf.h), the projector
// a clip GGUF (read_mmproj). Errors name the option (--draft, --mmproj) and the file.
Status check_extra_models(const ExtraModels& e);

}  // namespace tessera::llama
