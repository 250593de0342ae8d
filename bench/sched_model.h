// The scheduler benchmarks' model (bench/sched_bench.cpp, bench/sched_reuse_bench.cpp): llama-style graphs of the
// "tiny" preset shapes with more layers, the second half of the layers on "GPU0" (a RestrictedDevice refusing ROPE
// and SOFT_MAX), metadata-only weights and cache (placeholder buffers of the devices' buffer types).
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include "support/sched_doubles.h"
#include "tessera/cpu.h"
#include "tessera/models/llama.h"
#include "tessera/sched.h"

namespace tessera::bench {

using namespace tessera::models;

constexpr int64_t kTokens = 32;
constexpr int64_t kCtx = 256;

// A buffer without memory, of a given (real) buffer type: a tensor pointing at one is "allocated elsewhere".
class PlaceholderBuffer final : public Buffer {
 public:
  PlaceholderBuffer(BufferType* type, BufferUsage usage) : Buffer(type, 0) { set_usage(usage); }
  void* base() override { return nullptr; }
  void memset_tensor(Tensor&, uint8_t, size_t, size_t) override {}
  void set_tensor(Tensor&, const void*, size_t, size_t) override {}
  void get_tensor(const Tensor&, void*, size_t, size_t) override {}
  void clear(uint8_t) override {}
};

// The two backends (process-wide: the restricted buffer type lives in its device).
struct Backends {
  doubles::RestrictedDevice gpu_dev{"GPU0"};
  std::unique_ptr<Backend> gpu, cpu;
  Backends() {
    gpu_dev.refused = {Op::kRope, Op::kSoftMax};
    gpu = std::move(gpu_dev.init_backend()).value();
    cpu = cpu::make_backend({.n_threads = 1});
  }
  std::vector<Backend*> list() const { return {gpu.get(), cpu.get()}; }
};
inline Backends& backends() {
  static Backends b;
  return b;
}

// One llama graph with partial offload, metadata-only weights and cache.
struct Model {
  LlamaGraph m;
  PlaceholderBuffer cpu_weights{cpu::buffer_type(), BufferUsage::kWeights};
  PlaceholderBuffer gpu_weights{&backends().gpu_dev.buft(), BufferUsage::kWeights};
  PlaceholderBuffer cpu_cache{cpu::buffer_type(), BufferUsage::kAny};
  PlaceholderBuffer gpu_cache{&backends().gpu_dev.buft(), BufferUsage::kAny};

  explicit Model(int n_layer, int64_t n_tokens = kTokens) {
    Result<LlamaConfig> p = preset("tiny");
    LlamaConfig cfg = *p;
    cfg.n_layer = n_layer;
    cfg.n_ctx = kCtx;
    cfg.n_kv = kCtx;
    cfg.n_tokens = n_tokens;
    cfg.flash_attn = false;
    Result<LlamaGraph> r = build_llama(cfg);
    if (!r.ok()) {
      std::fprintf(stderr, "build_llama: %s\n", r.status().to_string().c_str());
      std::exit(2);
    }
    m = std::move(r).value();
    // Everything on the CPU first (token_embd, output_norm, output: llama.cpp keeps the output layer on the CPU unless
    // every layer is offloaded), then the second half of the layers on GPU0 (layer_of is linear: walk the layers).
    for (Tensor* t : m.weights) t->buffer = &cpu_weights;
    for (Tensor* t : m.kv_cache) t->buffer = &cpu_cache;
    for (size_t il = static_cast<size_t>(n_layer / 2); il < m.layers.size(); ++il) {
      const LlamaLayer& l = m.layers[il];
      for (Tensor* w : {l.attn_norm, l.wq, l.wk, l.wv, l.wo, l.ffn_norm, l.ffn_gate, l.ffn_up, l.ffn_down,
                        l.ffn_gate_inp, l.ffn_gate_exps, l.ffn_up_exps, l.ffn_down_exps}) {
        if (w != nullptr) w->buffer = &gpu_weights;
      }
      for (Tensor* c : {l.k_cache, l.v_cache}) {
        if (c != nullptr) c->buffer = &gpu_cache;
      }
    }
  }
  Graph& graph() { return *m.graph; }
};

// Graphs are big (100k nodes); keep only the one of the size being measured.
inline Model& model(int n_layer) {
  static std::unique_ptr<Model> cached;
  static int cached_layers = -1;
  if (cached_layers != n_layer) {
    cached.reset();
    cached = std::make_unique<Model>(n_layer);
    cached_layers = n_layer;
  }
  return *cached;
}

}  // namespace tessera::bench
