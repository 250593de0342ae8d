// The multimodal projector of --mmproj: its GGUF header, its weights' bytes and its compute buffer estimate (see
// tessera/llama/extra_models.h; docs/extra-models.md cites each rule).
#include <algorithm>

#include "tessera/gguf.h"
#include "tessera/llama/extra_models.h"

namespace tessera::llama {

using namespace tessera::harness;

namespace {

size_t pad(size_t n, size_t a) { return a == 0 ? n : (n + a - 1) / a * a; }

Status invalid_mmproj(const std::string& message) { return Status(StatusCode::kInvalidArgument, message); }

}  // namespace

Result<MmprojModel> read_mmproj(const std::string& path) {
  auto model = gguf::read_model(path);
  if (!model.ok()) return invalid_mmproj("--mmproj: " + model.status().message());
  const gguf::File& f = model.value().metadata();
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return invalid_mmproj("--mmproj: " + arch.status().message());
  if (arch.value() != "clip") {
    return invalid_mmproj("--mmproj: " + path + ": general.architecture is \"" + arch.value() +
                          "\", not \"clip\" (a multimodal projector file; a language model goes to -m or --draft)");
  }
  if (const gguf::Value* v = f.find_value("clip.has_vision_encoder")) {
    if (v->as_bool() && !*v->as_bool()) {
      return invalid_mmproj("--mmproj: " + path +
                            ": clip.has_vision_encoder is false (an audio-only projector: not supported yet)");
    }
  }
  MmprojModel m;
  m.path = path;
  m.n_tensors = model.value().tensors.size();
  const std::pair<const char*, int64_t*> keys[] = {
      {"clip.vision.image_size", &m.image_size},       {"clip.vision.patch_size", &m.patch_size},
      {"clip.vision.embedding_length", &m.n_embd},     {"clip.vision.feed_forward_length", &m.n_ff},
      {"clip.vision.attention.head_count", &m.n_head},
  };
  for (const auto& [key, field] : keys) {
    auto v = f.get_int(key);
    if (!v.ok()) return invalid_mmproj("--mmproj: " + v.status().message());
    if (v.value() <= 0 || v.value() > (int64_t{1} << 20)) {
      return invalid_mmproj("--mmproj: " + path + ": " + key + " is " + std::to_string(v.value()) +
                            " (expected 1 to 2^20)");
    }
    *field = v.value();
  }
  if (m.patch_size > m.image_size) {
    return invalid_mmproj("--mmproj: " + path + ": clip.vision.patch_size " + std::to_string(m.patch_size) +
                          " is larger than clip.vision.image_size " + std::to_string(m.image_size));
  }
  return m;
}

Result<size_t> mmproj_weight_bytes(const std::string& path, size_t alignment, bool gpu) {
  auto model = gguf::read_model(path);
  if (!model.ok()) return invalid_mmproj("--mmproj: " + model.status().message());
  size_t total = 0;
  for (const gguf::Model::TensorRef& ref : model.value().tensors) {
    const gguf::TensorInfo& t = model.value().tensor(ref);
    size_t size = t.size;
    const gguf::TypeInfo* info = gguf::type_info(t.type);
    // CUDA's get_alloc_size (ggml-cuda.cu): a quantized row padded to MATRIX_ROW_PADDING (512) values.
    const bool quantized = info != nullptr && info->block_size > 1;
    if (gpu && quantized && t.ne[0] % 512 != 0) {
      size += static_cast<size_t>((512 - t.ne[0] % 512) / info->block_size) * info->type_size;
    }
    total += pad(size, alignment);
  }
  return total;
}

size_t mmproj_compute_estimate(const MmprojModel& m, bool flash_attn) {
  const size_t n = static_cast<size_t>(m.n_patches());
  size_t bytes = 4 * n * static_cast<size_t>(m.n_ff + 3 * m.n_embd);
  if (!flash_attn) bytes += 4 * n * n * static_cast<size_t>(m.n_head);
  return bytes;
}

}  // namespace tessera::llama
