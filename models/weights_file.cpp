// The weights of a complete GGUF model file (from_gguf.h): read into an allocated graph, and written from one (the
// tiny complete fixtures and the tests).
#include <cstring>
#include <utility>

#include "tessera/backend.h"
#include "tessera/gguf.h"
#include "tessera/models/from_gguf.h"

namespace tessera::models {

Status read_file_weights(LlamaGraph& graph) {
  const gguf::Model* model = graph.config.weights_file.get();
  if (model == nullptr) {
    return Status(StatusCode::kInvalidArgument, "read_file_weights: the model has no complete file to read from");
  }
  const std::string& source = model->metadata().source;
  for (Tensor* w : graph.weights) {
    gguf::Model::TensorRef where;
    const gguf::TensorInfo* t = model->find_tensor(w->name, &where);
    if (t == nullptr) return TS_ERROR(StatusCode::kNotFound, "%s: tensor %s is missing", source.c_str(), w->name);
    if (t->size != nbytes(*w)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "%s: tensor %s: %llu bytes in the file, %zu in the graph",
                      source.c_str(), w->name, static_cast<unsigned long long>(t->size), nbytes(*w));
    }
    if (w->buffer == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "read_file_weights: weight %s is not allocated", w->name);
    }
    const gguf::File& shard = model->shards[where.shard];
    auto bytes = gguf::read_tensor_data(shard.source, shard, *t);
    if (!bytes.ok()) return bytes.status();
    TS_RETURN_IF_ERROR(tensor_set(*w, bytes.value().data(), 0, bytes.value().size()));
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> complete_gguf(const LlamaGraph& graph) {
  const LlamaConfig& c = graph.config;
  gguf::File f;
  using gguf::Value;
  const std::string p = c.arch + ".";
  auto u32 = [&](const char* key, int64_t v) { f.set(p + key, Value::u32(static_cast<uint32_t>(v))); };
  f.set("general.architecture", Value::string(c.arch));
  f.set("general.name", Value::string(c.name));
  u32("block_count", c.n_layer);
  u32("context_length", c.n_ctx);
  u32("embedding_length", c.n_embd);
  u32("feed_forward_length", c.n_ff);
  u32("attention.head_count", c.n_head);
  u32("attention.head_count_kv", c.n_head_kv);
  u32("attention.key_length", c.head_dim());
  u32("attention.value_length", c.head_dim());
  u32("rope.dimension_count", c.head_dim());
  f.set(p + "rope.freq_base", Value::f32(c.rope_base));
  f.set(p + "attention.layer_norm_rms_epsilon", Value::f32(c.norm_eps));
  if (c.has_swa()) u32("attention.sliding_window", c.n_swa);
  if (c.arch == "gpt-oss") {  // its loader's optional keys, where they differ from their defaults
    if (c.swa_pattern != 2) u32("attention.sliding_window_pattern", c.swa_pattern);
    if (c.rope_base_swa != c.rope_base) f.set(p + "rope.freq_base_swa", Value::f32(c.rope_base_swa));
  }
  // phi3's LongRoPE attention factor (ROPE's attn_factor with ext_factor 0): rope.scaling.attn_factor alone (phi3_keys)
  const bool longrope_factor = c.arch == "phi3";
  if (longrope_factor && c.rope_yarn.attn_factor != 1.0f) {
    f.set(p + "rope.scaling.attn_factor", Value::f32(c.rope_yarn.attn_factor));
  }
  if (!c.rope_yarn.is_default() && !longrope_factor) {  // YaRN: the keys from_gguf reads back (yarn_rope_scaling)
    f.set(p + "rope.scaling.type", Value::string("yarn"));
    f.set(p + "rope.scaling.factor", Value::f32(1.0f / c.rope_scale));
    u32("rope.scaling.original_context_length", c.rope_yarn.n_ctx_orig);
    if (c.rope_yarn.ext_factor != 1.0f) f.set(p + "rope.scaling.yarn_ext_factor", Value::f32(c.rope_yarn.ext_factor));
    if (c.rope_yarn.attn_factor != 1.0f) f.set(p + "rope.scaling.attn_factor", Value::f32(c.rope_yarn.attn_factor));
    if (c.rope_yarn.beta_fast != 32.0f) f.set(p + "rope.scaling.yarn_beta_fast", Value::f32(c.rope_yarn.beta_fast));
    if (c.rope_yarn.beta_slow != 1.0f) f.set(p + "rope.scaling.yarn_beta_slow", Value::f32(c.rope_yarn.beta_slow));
  } else if (c.rope_scale != 1.0f) {
    f.set(p + "rope.scaling.type", Value::string("linear"));
    f.set(p + "rope.scaling.factor", Value::f32(1.0f / c.rope_scale));
  }
  if (c.n_ctx_orig > 0) u32("rope.scaling.original_context_length", c.n_ctx_orig);  // phi3 (LongRoPE)
  if (c.is_moe()) {
    u32("expert_count", c.n_expert);
    u32("expert_used_count", c.n_expert_used);
    u32("expert_feed_forward_length", c.n_ff);
  }
  std::vector<const Tensor*> written;  // the weights, without the copies of shared ones (the file holds each name once)
  for (const Tensor* w : graph.weights) {
    if (graph.copy_of(w) == nullptr) written.push_back(w);
  }
  for (const Tensor* w : written) {
    if (w->buffer == nullptr) {
      return TS_ERROR(StatusCode::kInvalidArgument, "complete_gguf: weight %s is not allocated", w->name);
    }
    std::vector<int64_t> ne(w->ne, w->ne + 4);
    while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
    f.add_tensor(w->name, static_cast<gguf::TensorType>(type_traits(w->type).gguf_id), ne);
  }
  TS_RETURN_IF_ERROR(f.layout());
  std::vector<uint8_t> data(f.data_bytes, 0);
  for (size_t i = 0; i < written.size(); ++i) {
    const Tensor& w = *written[i];
    const gguf::TensorInfo& t = f.tensors[i];
    TS_RETURN_IF_ERROR(tensor_get(w, data.data() + t.offset, 0, t.size));
  }
  return gguf::serialize(f, data);
}

}  // namespace tessera::models
