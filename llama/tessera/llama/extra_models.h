// Extra models placed alongside the main one, as llama-server places them (docs/extra-models.md): a draft model for
// speculative decoding (--draft / -md FILE.gguf with its own -ngld, -devd, -cd, -ctkd: tools/server/server.cpp,
// load_model, makes a second llama_model and llama_context with their own weights, KV cache and compute buffers) and a
// multimodal projector (--mmproj FILE.gguf: tools/mtmd/clip.cpp puts the clip model's weights and its compute buffer
// on the first GPU, or on the CPU with --no-mmproj-offload). Both come after the main model and its context, so they
// get the memory the main model leaves; a device that overflows because of them is reported as such. `tessera fit`
// counts them with extra_models_alone and reserve_extra_models.
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessera/llama/extra_specs.h"
#include "tessera/llama/llama_memory.h"
#include "tessera/harness/session/session.h"

namespace tessera::llama {

// A projector read from its GGUF header: its tensors' bytes and the vision hyperparameters of its compute estimate.
struct MmprojModel {
  std::string path;
  size_t n_tensors = 0;
  int64_t image_size = 0, patch_size = 0, n_embd = 0, n_ff = 0, n_head = 0;  // clip.vision.*
  int64_t n_patches() const { return (image_size / patch_size) * (image_size / patch_size); }
};
// Errors name the file and the key: not a GGUF file, general.architecture other than "clip", no vision encoder
// (clip.has_vision_encoder false: audio only), a missing or non-positive clip.vision.* key.
Result<MmprojModel> read_mmproj(const std::string& path);
// The weights' bytes in one buffer of a buffer type of that alignment (ggml_backend_alloc_ctx_tensors_from_buft):
// each tensor's bytes (on a GPU, a quantized tensor whose rows are not a multiple of 512 values gets one row's missing
// values more, as CUDA's get_alloc_size) padded to the alignment.
Result<size_t> mmproj_weight_bytes(const std::string& path, size_t alignment, bool gpu);
// The compute buffer of clip's warm-up (clip.cpp, alloc_compute_meta: the graph of an image_size x image_size image
// reserved on the scheduler) estimated from the vision encoder's largest live tensors at n = n_patches positions, in
// f32: the FFN's hidden [n_ff, n], three [n_embd, n] (the residual, the normed input and the attention output), and
// without flash attention the attention scores [n, n, n_head]: 4 * n * (n_ff + 3 * n_embd) (+ 4 * n * n * n_head).
size_t mmproj_compute_estimate(const MmprojModel& m, bool flash_attn);

// One device's memory with the extra models: what the main model's session uses (the simulator's accounting), the
// draft's weights, KV cache and compute buffers (its own session's), and the projector's weights and compute buffer.
struct ExtraDeviceMemory {
  std::string device;
  size_t main = 0;
  size_t draft_weights = 0, draft_kv = 0, draft_compute = 0;
  size_t mmproj_weights = 0, mmproj_compute = 0;
  size_t allocatable = 0;  // memory - reserved - unallocatable (- the fit margin when the session counts margins)
  bool overflow = false;   // an extra model does not fit on this device (ExtraModelsPlacement::overflows says which)
  size_t draft() const { return draft_weights + draft_kv + draft_compute; }
  size_t mmproj() const { return mmproj_weights + mmproj_compute; }
  size_t extra() const { return draft() + mmproj(); }
  size_t total() const { return main + extra(); }
};

struct ExtraModelsPlacement {
  std::unique_ptr<harness::Session> draft;       // the draft's planned session (metadata-only), or null
  std::optional<MemoryBreakdown> draft_buffers;  // llama.cpp's buffers of the draft
  std::string draft_path;
  struct Mmproj {
    MmprojModel model;
    std::string device;       // the topology device holding it
    std::string buffer_name;  // llama.cpp's name: "CUDA0", or "CPU"
    size_t weights = 0, compute = 0;
    bool flash_attn = true;
  };
  std::optional<Mmproj> mmproj;
  std::vector<ExtraDeviceMemory> devices;  // every topology device, in topology order
  // One line per overflow, naming the device and the model that makes it overflow ("gpu0 overflows because of the
  // draft model: ..."); empty when everything fits.
  std::vector<std::string> overflows;
  bool fits() const { return overflows.empty(); }
};

// Places the extra models next to the planned main session `main` (a model, not a serialized graph): the draft as a
// second session on the same topology whose devices start with the main session's memory taken (added to each
// device's reservation: a unified pool counts it once), then the projector on its device. An extra model that does
// not fit is an overflow of the result, not an error. Errors (kInvalidArgument, naming the file, flag or key): an
// unreadable or unsupported file, an unknown -devd device, a draft that does not fit even on an empty machine.
Result<ExtraModelsPlacement> place_extra_models(harness::Session& main, const ExtraModels& extra,
                                                const LlamaContextParams& params, const Registry* real_devices);

// For `tessera fit`: the extra models' memory per device (ExtraDeviceMemory::main is 0), each placed on the empty
// topology of `main_config` (a -devd split by free memory is then by each GPU's whole memory). Fit subtracts it by
// planning the main model on a topology passed through reserve_extra_models. Errors: as place_extra_models.
Result<std::vector<ExtraDeviceMemory>> extra_models_alone(const harness::SessionConfig& main_config,
                                                          const ExtraModels& extra, const Registry* real_devices);
// Adds each device's extra() bytes to its `reserved` memory in `topology` (matched by name).
void reserve_extra_models(const std::vector<ExtraDeviceMemory>& extra, sim::TopologyConfig* topology);

// The report `tessera plan` and `run` print after the main model's breakdown: the draft's buffers (llama.cpp's table,
// or with llama_log its log lines as llama-server prints them for the draft), the projector's, then main, draft,
// projector and total per device against what each can allocate, and the overflows. The tables keep within 80
// columns; `wide`: the fixed columns of --wide.
std::string format_extra_models(const ExtraModelsPlacement& p, bool llama_log, bool wide = false);

}  // namespace tessera::llama
