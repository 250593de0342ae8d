// The memory llama.cpp allocates for a planned session (see tessera/llama/llama_memory.h; docs/scenarios.md,
// "Memory breakdown", cites each rule).
#include "tessera/llama/llama_memory.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <map>
#include <string>
#include <regex>
#include <string_view>
#include <cstring>
#include <unordered_map>

#include "tessera/harness/common/text_table.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/models/fixtures.h"

namespace tessera::llama {

using namespace tessera::harness;

using sim::DeviceConfig;
using sim::format_bytes;

namespace {

size_t pad(size_t n, size_t a) { return a == 0 ? n : (n + a - 1) / a * a; }

bool is_cache(const Tensor* t) { return std::strncmp(t->name, "cache_", 6) == 0; }

// GGML_SCHED_MAX_COPIES (ggml/src/ggml-backend.cpp), the copies a pipeline-parallel scheduler keeps.
constexpr int kLlamaMaxCopies = 4;

// llama.cpp's name of a topology device: GPU number n (any device that is not the CPU; sim::gpu_number) is "CUDA<n>",
// the CPU "CPU".
class Names {
 public:
  // `metal`: the GPUs are Apple Metal's (LlamaContextParams::metal), which have no host buffer type.
  Names(const sim::TopologyConfig& topo, bool metal) : topo_(topo), host_buffer_(metal ? "CPU" : "CUDA_Host") {
    for (size_t i = 0; i < topo.devices.size(); ++i) {
      gpu_index_.push_back(sim::gpu_number(topo, i));
      n_gpus_ += gpu_index_.back() >= 0 ? 1 : 0;
    }
  }
  int n_gpus() const { return n_gpus_; }
  int index_of(const std::string& device) const {
    for (size_t i = 0; i < topo_.devices.size(); ++i) {
      if (topo_.devices[i].name == device) return static_cast<int>(i);
    }
    return -1;
  }
  bool is_gpu(int i) const { return i >= 0 && gpu_index_[static_cast<size_t>(i)] >= 0; }
  std::string device_buffer(int i) const {
    return is_gpu(i) ? "CUDA" + std::to_string(gpu_index_[static_cast<size_t>(i)]) : "CPU";
  }
  // The buffer type llama.cpp gives what a GPU keeps in host memory (the output buffer, the CPU backend's compute
  // buffer, --no-mmap weights, a -nkvo cache): the first GPU's pinned "CUDA_Host", or with Metal the CPU's "CPU".
  const std::string& host_buffer() const { return host_buffer_; }
  // The CPU device's name (host memory), or "" without one.
  std::string host() const {
    for (const DeviceConfig& d : topo_.devices) {
      if (d.type == DeviceType::kCpu) return d.name;
    }
    return "";
  }

 private:
  const sim::TopologyConfig& topo_;
  std::string host_buffer_;
  std::vector<int> gpu_index_;
  int n_gpus_ = 0;
};

// What llama.cpp's CUDA buffer type allocates for a weight (ggml-cuda.cu, get_alloc_size): a quantized tensor whose
// rows are not a multiple of MATRIX_ROW_PADDING (512) values gets the bytes of the missing values of one row more, so
// that kernels may read whole 512-value blocks past its last row.
size_t cuda_alloc_size(const Tensor& t) {
  size_t size = nbytes(t);
  const int64_t rem = t.ne[0] % 512;
  if (type_traits(t.type).is_quantized && rem != 0) size += row_size(t.type, 512 - rem);
  return size;
}

// Adds `bytes` to the buffer (kind, name) of `out`, creating it in order of first appearance.
LlamaBuffer& buffer(std::vector<LlamaBuffer>* out, LlamaBuffer::Kind kind, const std::string& name,
                    const std::string& device, const std::string& cache = "") {
  for (LlamaBuffer& b : *out) {
    if (b.kind == kind && b.name == name && b.cache == cache) return b;
  }
  LlamaBuffer b;
  b.kind = kind;
  b.name = name;
  b.device = device;
  b.cache = cache;
  out->push_back(b);
  return out->back();
}

// The model buffers (src/llama-model.cpp, load_tensors). Weights in a device's memory: one buffer per buffer type,
// each tensor's allocation size (a GPU's: cuda_alloc_size) padded to the type's alignment, the topology device's
// (ggml_backend_alloc_ctx_tensors_from_buft). Weights
// in the CPU's memory are the model file mapped (mmap, llama.cpp's default): "CPU_Mapped", the span of the file from
// the first to the end of the last such tensor (llama_model_loader::get_mapping_range), the file laid out as
// llama-quantize writes it (weight_name_less order, each tensor at a multiple of 32 bytes). Tied embeddings: llama.cpp
// creates the output head as a copy of token_embd on the output layer's device (TENSOR_DUPLICATED), so a GPU that
// holds the output layer also holds token_embd's bytes (and a GPU with layers other than layer 0's a copy of the rope
// factors): those copies are weights of the model (models::LlamaGraph::copies), placed as llama.cpp places them.
// The overrides' patterns, compiled once, with whether each sends a weight to the CPU's own buffer type.
std::vector<std::pair<std::regex, bool>> cpu_overrides(const Session& s) {
  std::vector<std::pair<std::regex, bool>> out;
  for (const TensorOverride& o : s.config().policy.overrides) {
    out.emplace_back(std::regex(o.pattern), o.target == "CPU" || o.target == "cpu");
  }
  return out;
}

// Whether the first override matching the weight's name sends it to the CPU's own buffer type ("CPU" / "cpu").
bool overridden_to_cpu(const std::vector<std::pair<std::regex, bool>>& overrides, const Tensor& t) {
  for (const auto& [pattern, cpu] : overrides) {
    if (std::regex_search(t.name, pattern)) return cpu;
  }
  return false;
}

// *mapped_sum: MemoryBreakdown::mapped_weights_sum.
void model_buffers(Session& s, const Names& names, const LlamaContextParams& params, std::vector<LlamaBuffer>* out,
                   size_t* mapped_sum) {
  const Placement& p = s.placement();
  std::vector<std::pair<const Tensor*, BufferType*>> weights;
  for (const auto& [t, bt] : p.where) {
    if (!is_cache(t)) weights.emplace_back(t, bt);
  }
  const models::LlamaGraph& model = s.model();
  // The file's layout.
  // (weight_name_less's order, with each name's length and block number taken once: a comparator that measured them
  // again was a tenth of `plan`'s time at 100,000 layers)
  struct FileKey {
    int block;
    std::string_view name;
    const Tensor* t;
  };
  std::vector<FileKey> order;
  order.reserve(weights.size());
  for (const auto& w : weights) {
    if (model.copy_of(w.first) != nullptr) continue;  // (not in the file: a copy the loader makes)
    order.push_back({models::fixtures::weight_block(w.first->name), w.first->name, w.first});
  }
  std::stable_sort(order.begin(), order.end(), [](const FileKey& a, const FileKey& b) {
    return a.block != b.block ? a.block < b.block : a.name < b.name;
  });
  std::unordered_map<const Tensor*, size_t> offset;
  offset.reserve(order.size());
  size_t at = 0;
  for (const FileKey& k : order) {
    offset[k.t] = at;
    at = pad(at + nbytes(*k.t), 32);
  }
  size_t first = SIZE_MAX, last = 0;
  *mapped_sum = 0;
  // Metal with mmap: per GPU, the span of the file its weights lie in (MTL0_Mapped)
  std::map<int, std::pair<size_t, size_t>> gpu_span;
  const std::string host = names.host();
  const std::string& host_buffer = names.host_buffer();
  const auto overrides = params.use_mmap ? std::vector<std::pair<std::regex, bool>>{} : cpu_overrides(s);
  for (const auto& [t, bt] : weights) {
    const int dev = names.index_of(bt->device()->name());
    if (!names.is_gpu(dev) && bt != bt->device()->buffer_type() && !bt->is_host()) {
      // an extra buffer type of the CPU (CPU_REPACK: PlacementPolicy::cpu_repack): a buffer of its own, never mapped
      buffer(out, LlamaBuffer::Kind::kModel, bt->name(), host).bytes += pad(bt->alloc_size(*t), bt->alignment());
      continue;
    }
    if (!names.is_gpu(dev)) {
      if (!params.use_mmap) {  // read into a buffer: pinned host memory, or the CPU's when an override says so
        const bool cpu = names.n_gpus() == 0 || overridden_to_cpu(overrides, *t);
        buffer(out, LlamaBuffer::Kind::kModel, cpu ? "CPU" : host_buffer, host).bytes += pad(nbytes(*t), 32);
        continue;
      }
      const models::LlamaGraph::WeightCopy* copy = model.copy_of(t);
      const size_t at_file = offset[copy != nullptr ? copy->of : t];  // (a copy in mapped memory maps the original)
      first = std::min(first, at_file);
      last = std::max(last, at_file + nbytes(*t));
      *mapped_sum += pad(nbytes(*t), 32);
      continue;
    }
    // A GPU's own memory, pinned host memory of a GPU ("CUDA_Host", -ot ...=CUDA_Host), or a GPU's split buffer type
    // (-sm row: "CUDA0_Split", its tensors' rows on every GPU; the split buffer type's own alloc_size).
    const bool split = is_split_buffer_type(*bt);
    if (params.metal && params.use_mmap && !split && !bt->is_host()) {
      // Metal takes buffer_from_host_ptr: the GPU's weights stay in the mapped file (src/llama-model.cpp wraps the
      // context's range of the file, llama_model_loader::get_mapping_range)
      const models::LlamaGraph::WeightCopy* copy = model.copy_of(t);
      const size_t at_file = offset[copy != nullptr ? copy->of : t];
      auto [it, fresh] = gpu_span.try_emplace(dev, at_file, at_file + nbytes(*t));
      if (!fresh) {
        it->second.first = std::min(it->second.first, at_file);
        it->second.second = std::max(it->second.second, at_file + nbytes(*t));
      }
      continue;
    }
    const std::string name = split            ? names.device_buffer(dev) + "_Split"
                             : !bt->is_host() ? names.device_buffer(dev)
                                              : host_buffer;
    const std::string device = !bt->is_host() ? bt->device()->name() : host;
    // (ggml-metal's alloc size of a weight is its size: no CUDA row padding)
    const size_t size =
        bt->is_host() || split || params.metal ? bt->alloc_size(*t) : std::max(bt->alloc_size(*t), cuda_alloc_size(*t));
    buffer(out, LlamaBuffer::Kind::kModel, name, device).bytes += pad(size, bt->alignment());
  }
  if (first != SIZE_MAX) buffer(out, LlamaBuffer::Kind::kModel, "CPU_Mapped", host).bytes = last - first;
  for (const auto& [dev, span] : gpu_span) {
    buffer(out, LlamaBuffer::Kind::kModel, names.device_buffer(dev) + "_Mapped",
           s.config().topology.devices[static_cast<size_t>(dev)].name)
        .bytes = span.second - span.first;
  }
  // In llama.cpp's order: the host's buffers (CPU_Mapped, CUDA_Host), then the GPUs' in device order, their split
  // buffers first (build 5261's log in tests/fidelity/02-4gpu-rowsplit.log prints CUDA0_Split .. CUDA3_Split, then
  // CUDA0 ..). (--no-mmap: the CPU's own buffer comes last.)
  // (Metal, log tests/fidelity/52: CPU, CPU_REPACK, then MTL0.)
  auto rank = [&](const LlamaBuffer& b) {
    const bool split = b.name.ends_with("_Split");
    const bool gpu = b.name.size() > 4 && b.name.compare(0, 4, "CUDA") == 0 && std::isdigit(b.name[4]) != 0;
    return b.name == "CPU_Mapped"  ? -3
           : b.name == "CUDA_Host" ? -2
           : b.name == "CPU"       ? (params.metal ? -2 : 1 << 20)
           : !gpu                  ? -1
                                   : std::stoi(b.name.substr(4)) + (split ? 0 : 1 << 10);
  };
  std::stable_sort(out->begin(), out->end(),
                   [&](const LlamaBuffer& a, const LlamaBuffer& b) { return rank(a) < rank(b); });
}

// The KV buffers (src/llama-kv-cache.cpp): per cache (one, or llama_kv_cache_iswa's non-SWA and SWA caches) one buffer
// per buffer type holding its layers, each layer's K and V [n_embd_kv, cells] of the cache type; the cells of
// llama_kv_cells. A cache in the CPU's memory (-nkvo) is a "CPU" buffer.
void kv_buffers(Session& s, const Names& names, const LlamaContextParams& params, std::vector<LlamaBuffer>* out) {
  const models::LlamaConfig& m = s.config().model;
  for (const auto& [t, bt] : s.placement().where) {
    if (!is_cache(t)) continue;
    const int il = layer_of_name(t->name);
    const int dev = names.index_of(bt->device()->name());
    const std::string cache = !m.has_swa() ? "" : m.is_swa(il) ? "SWA" : "non-SWA";
    const bool gpu = names.is_gpu(dev) && !bt->is_host();
    const std::string name = gpu ? names.device_buffer(dev) : names.is_gpu(dev) ? names.host_buffer() : "CPU";
    const std::string device = gpu ? bt->device()->name() : names.host();
    LlamaBuffer& b = buffer(out, LlamaBuffer::Kind::kKv, name, device, cache);
    b.cells = llama_kv_cells(m, il, params);
    b.bytes += pad(row_size(t->type, t->ne[0]) * static_cast<size_t>(b.cells), bt->alignment());
    if (t->name[6] == 'k') b.layers += 1;
  }
  // llama_kv_cache_iswa creates the non-SWA cache first (the model buffers, before them, keep their place).
  auto rank = [](const LlamaBuffer& b) { return b.kind != LlamaBuffer::Kind::kKv ? 0 : b.cache == "SWA" ? 2 : 1; };
  std::stable_sort(out->begin(), out->end(),
                   [&](const LlamaBuffer& a, const LlamaBuffer& b) { return rank(a) < rank(b); });
}

}  // namespace

LlamaContextParams llama_context_params(const LlamaRunShape& shape) {
  LlamaContextParams p;
  if (shape.batch) p.n_batch = *shape.batch;
  if (shape.ubatch) p.n_ubatch = *shape.ubatch;
  p.swa_full = shape.swa_full;
  p.n_seq_max = shape.n_seq;
  p.kv_unified = shape.kv_unified;
  p.use_mmap = shape.use_mmap;
  p.embeddings = shape.embeddings;
  p.n_outputs_max = shape.n_outputs_max;
  return p;
}

int64_t llama_ubatch(int64_t n_ctx, const LlamaContextParams& p) {
  return std::min(std::min(n_ctx, p.n_batch), p.n_ubatch);
}

int64_t llama_kv_cells(const models::LlamaConfig& m, int il, const LlamaContextParams& p) {
  if (!m.is_swa(il) || p.swa_full) return m.n_ctx;
  // src/llama-kv-cache-iswa.cpp: a unified cache keeps every sequence's window
  const int64_t window = m.n_swa * (p.kv_unified ? p.n_seq_max : 1);
  return static_cast<int64_t>(pad(static_cast<size_t>(std::min(m.n_ctx, window + llama_ubatch(m.n_ctx, p))), 256));
}

void use_llama_cpp_rules(SessionConfig& c, int build, const LlamaContextParams& p) {
  c.model.llama_cpp = llama_cpp_graph(build);
  if (c.model.llama_cpp->cuda_fa_f16_copies) {
    for (sim::DeviceConfig& d : c.topology.devices) {
      if (d.type == DeviceType::kCpu) continue;
      const bool has = std::any_of(d.padding.begin(), d.padding.end(), [](const auto& r) { return r.f16_kv_copies; });
      if (has) continue;
      sim::PaddingRule r;
      r.ops = {Op::kFlashAttnExt};
      r.f16_kv_copies = true;
      r.note = "ggml-cuda: f16 copies of a non-f16 K and V with each FLASH_ATTN_EXT (llama.cpp build 9489, PR #23907)";
      d.padding.insert(d.padding.begin(), r);
    }
  }
  c.policy.online_packing = true;
  c.policy.free_inputs = true;
  c.policy.ggml_inplace = true;
  c.policy.fa_sinks_decide = c.model.llama_cpp->fa_sinks_decide;
  // The prompt graph reserved for min(n_tokens, n_outputs_max) outputs (src/llama-context.cpp, sched_reserve's
  // n_outputs_pp, from build 9460): the last layer's GET_ROWS of inp_out_ids keeps only those rows.
  if (build >= kLlamaCppOutputsMax && p.n_outputs_max > 0 && p.n_outputs_max < c.model.n_tokens) {
    c.model.n_outputs = p.n_outputs_max;
  }
  // ...for the sequences it is reserved for: graph_reserve rounds the tokens up to a multiple of them ("round to next
  // multiple of n_seqs"), the outputs staying as they were; n_seq_max sequences, with a unified cache (-kvu, llama-
  // server's default) only from build 7190 (kLlamaCppReserveSeqs; before, one). (-np above 1 without -kvu is refused.)
  const int64_t seqs = p.kv_unified && build < kLlamaCppReserveSeqs ? 1 : std::max<int64_t>(p.n_seq_max, 1);
  if (c.model.n_tokens % seqs != 0) {
    c.model.n_outputs = c.model.outputs();
    c.model.n_tokens = (c.model.n_tokens + seqs - 1) / seqs * seqs;
  }
  // -fa auto's plan: one token per sequence (kLlamaCppFaProbeOneToken), else the prompt graph.
  c.flash_attn_probe_tokens = build >= kLlamaCppFaProbeOneToken ? std::min(seqs, c.model.n_tokens) : 0;
  // llama_context's constructor decides pipeline parallelism once the model is placed (and its fit's dry runs size
  // the compute buffers so: common/fit.cpp builds a real context on a no_alloc model)
  // The pins llama.cpp's graph callback sets (src/llama-context.cpp, graph_get_cb), which its reserve keeps from build
  // 7050 (PR #17232; before, ggml_backend_sched_reserve reset them, so the printed splits and buffers had none): with
  // -nkvo and no flash attention the merged heads on the CPU; with full offload (or under 32 tokens) each layer's
  // "norm" nodes on its layer's device.
  if (build >= kLlamaCppReservePins) {
    c.pin_rule = [](const SessionConfig& config, const Placement& placement, const Tensor& node) {
      const std::string_view name(node.name);
      const size_t dash = name.rfind('-');
      if (dash == std::string_view::npos) return -1;
      const std::string_view what = name.substr(0, dash);
      if (what == "kqv_merged_cont" && !config.policy.kv_offload && !config.model.flash_attn) {
        return static_cast<int>(config.topology.devices.size()) - 1;  // the CPU
      }
      if (what != "norm") return -1;
      const int n_layer = config.model.n_layer;
      const int ngl = config.policy.n_gpu_layers < 0 ? n_layer + 1 : config.policy.n_gpu_layers;
      if (!(ngl > n_layer || config.model.n_tokens < 32)) return -1;
      const int il = std::atoi(std::string(name.substr(dash + 1)).c_str());
      if (il < 0 || static_cast<size_t>(il) >= placement.layer_device.size()) return -1;
      return placement.layer_device[static_cast<size_t>(il)];
    };
  }
  c.parallel_rule = [](const SessionConfig& config, const Placement& placement) {
    const PipelineDecision d = llama_pipeline_parallel(config, placement);
    return d.on ? d.n_copies : 0;
  };
  c.model.n_ctx_swa = 0;
  for (int il = 0; c.model.has_swa() && il < c.model.n_layer; ++il) {
    if (!c.model.is_swa(il)) continue;
    const int64_t cells = llama_kv_cells(c.model, il, p);
    if (cells < c.model.n_ctx) c.model.n_ctx_swa = cells;
    break;
  }
}

PipelineDecision llama_pipeline_parallel(Session& s) { return llama_pipeline_parallel(s.config(), s.placement()); }

PipelineDecision llama_pipeline_parallel(const SessionConfig& c, const Placement& p) {
  const Names names(c.topology, /*metal=*/false);  // (which GPUs: no buffer names here)
  PipelineDecision d;
  auto off = [&](const char* why) {
    d.reason = why;
    return d;
  };
  if (c.graph) return off("a serialized graph, not a llama.cpp model");
  if (names.n_gpus() < 2) return off("fewer than two GPUs");
  if (c.policy.split_mode != SplitMode::kLayer) return off("split mode is not layer");
  for (int ld : p.layer_device) {
    if (!names.is_gpu(ld)) return off("not every layer is offloaded");
  }
  if (!names.is_gpu(p.output_device)) return off("the output layer is not offloaded");
  if (!c.policy.kv_offload) return off("the KV cache is not offloaded (-nkvo)");
  if (!c.policy.overrides.empty()) return off("tensor overrides are given (-ot, -cmoe, -ncmoe)");
  for (const DeviceConfig& dc : c.topology.devices) {
    if (dc.type != DeviceType::kCpu && (!dc.caps.async || !dc.caps.events)) {
      return off("a GPU without async compute or events");
    }
  }
  d.on = true;
  d.n_copies = kLlamaMaxCopies;
  return d;
}

size_t llama_output_bytes(const models::LlamaConfig& m, const LlamaContextParams& params) {
  const int64_t row = m.n_vocab + (params.embeddings ? m.n_embd : 0);
  const int64_t rows = params.output_per_batch_token ? std::min(m.n_ctx, params.n_batch) : params.n_seq_max;
  return static_cast<size_t>(std::max<int64_t>(rows, 1) * row) * sizeof(float);
}

Result<MemoryBreakdown> llama_memory_breakdown(Session& s, const LlamaContextParams& params) {
  const SessionConfig& c = s.config();
  if (c.graph) {
    return Status(StatusCode::kInvalidArgument, "the memory breakdown is of a model, not of a serialized graph");
  }
  const Names names(c.topology, params.metal);
  const models::LlamaConfig& m = c.model;
  MemoryBreakdown b;
  b.n_ctx = m.n_ctx;
  b.n_ubatch = llama_ubatch(m.n_ctx, params);
  b.kv_type = m.kv_type_text();
  b.k_type = m.kv_type;
  b.v_type = m.v_type();
  b.n_seq_max = params.n_seq_max;
  model_buffers(s, names, params, &b.buffers, &b.mapped_weights_sum);
  kv_buffers(s, names, params, &b.buffers);
  // The output buffer (src/llama-context.cpp, output_reserve(n_seq_max) in llama_context's constructor): for each of
  // n_seq_max outputs, n_vocab floats of logits and, when the context returns embeddings, n_embd more; in the host
  // buffer type of the output layer's device (CUDA_Host for a GPU), else the CPU's.
  const bool out_gpu = names.is_gpu(s.placement().output_device);
  buffer(&b.buffers, LlamaBuffer::Kind::kOutput, out_gpu ? names.host_buffer() : "CPU", names.host()).bytes =
      llama_output_bytes(m, params);
  // The compute buffers (src/llama-context.cpp, sched_reserve): per backend, printed when above 1 byte; the CPU
  // backend's is in the first GPU's host buffer type (CUDA_Host) when there is a GPU.
  Scheduler& sched = s.sched();
  for (int i = 0; i < sched.n_backends(); ++i) {
    const size_t bytes = sched.buffer_size(i);
    if (bytes <= 1) continue;
    const int dev = names.index_of(sched.backend(i)->name());
    const bool gpu = names.is_gpu(dev);
    const std::string name = gpu ? names.device_buffer(dev) : names.n_gpus() > 0 ? names.host_buffer() : "CPU";
    buffer(&b.buffers, LlamaBuffer::Kind::kCompute, name, gpu ? sched.backend(i)->name() : names.host()).bytes += bytes;
  }
  b.graph_nodes = s.graph().n_nodes();
  b.graph_splits = sched.n_splits();
  b.pipeline = llama_pipeline_parallel(s);
  b.planned_parallel = sched.n_copies() > 1;
  return b;
}

std::vector<MemoryBreakdown::Row> MemoryBreakdown::rows() const {
  std::vector<Row> out;
  for (const LlamaBuffer& lb : buffers) {
    Row* r = nullptr;
    for (Row& x : out) {
      if (x.name == lb.name) r = &x;
    }
    if (r == nullptr) {
      out.push_back(Row{lb.name, lb.device});
      r = &out.back();
    }
    switch (lb.kind) {
      case LlamaBuffer::Kind::kModel: r->model += lb.bytes; break;
      case LlamaBuffer::Kind::kKv: r->kv += lb.bytes; break;
      case LlamaBuffer::Kind::kCompute: r->compute += lb.bytes; break;
      case LlamaBuffer::Kind::kOutput: r->output += lb.bytes; break;
    }
  }
  return out;
}

namespace {

double mib(size_t bytes) { return static_cast<double>(bytes) / 1024.0 / 1024.0; }

std::string pipeline_line(const MemoryBreakdown& b) {
  if (b.pipeline.on) {
    return format_message(
        "pipeline parallelism: llama.cpp enables it (n_copies=%d)%s", b.pipeline.n_copies,
        b.planned_parallel ? "" : "; this plan has it off (--parallel, or llama.cpp's rules, plan with it)");
  }
  return format_message("pipeline parallelism: off in llama.cpp (%s)%s", b.pipeline.reason.c_str(),
                        b.planned_parallel ? "; this plan has it on (--parallel)" : "");
}

}  // namespace

std::string format_memory_breakdown(const MemoryBreakdown& b, bool wide) {
  std::string s =
      format_message("llama.cpp's buffers (n_ctx %lld, n_ubatch %lld, KV cache %s):\n", static_cast<long long>(b.n_ctx),
                     static_cast<long long>(b.n_ubatch), b.kv_type.c_str());
  using Align = harness::TextTable::Align;
  harness::TextTable table({{"buffer", Align::kLeft, 12},
                            {"memory", Align::kLeft, 10, true},
                            {"model", Align::kRight, 12},
                            {"KV", Align::kRight, 12},
                            {"compute", Align::kRight, 12},
                            {"output", Align::kRight, 12},
                            {"total", Align::kRight, 12}});
  auto row = [&table](const MemoryBreakdown::Row& r) {
    table.add({r.name, r.device, format_bytes(r.model), format_bytes(r.kv), format_bytes(r.compute),
               format_bytes(r.output), format_bytes(r.total())});
  };
  MemoryBreakdown::Row sum{"total", ""};
  for (const MemoryBreakdown::Row& r : b.rows()) {
    row(r);
    sum.model += r.model;
    sum.kv += r.kv;
    sum.compute += r.compute;
    sum.output += r.output;
  }
  row(sum);
  s += table.render(wide);
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == LlamaBuffer::Kind::kKv && !lb.cache.empty()) {
      s += format_message("KV %s cache in %s: %lld cells, %d layers\n", lb.cache.c_str(), lb.name.c_str(),
                          static_cast<long long>(lb.cells), lb.layers);
    }
  }
  std::string split_names;
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == LlamaBuffer::Kind::kModel && lb.name.ends_with("_Split")) {
      split_names += (split_names.empty() ? "" : ", ") + lb.name;
    }
  }
  if (!split_names.empty()) {
    s += split_names +
         ": -sm row's split buffers, shown on their main GPU; their matrices' rows are on every GPU (the device table "
         "has each GPU's bytes)\n";
  }
  s += format_message("graph nodes = %zu, graph splits = %d\n", b.graph_nodes, b.graph_splits);
  return s + pipeline_line(b) + "\n";
}

std::string format_llama_log(const MemoryBreakdown& b) {
  std::string s;
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == LlamaBuffer::Kind::kModel) {
      s += format_message("load_tensors: %12s model buffer size = %8.2f MiB\n", lb.name.c_str(), mib(lb.bytes));
    }
  }
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == LlamaBuffer::Kind::kOutput) {
      s += format_message("llama_context: %10s  output buffer size = %8.2f MiB\n", lb.name.c_str(), mib(lb.bytes));
    }
  }
  // Per cache: its cells, its buffers, then its size line (llama_kv_cache's constructor); K and V are halves.
  for (const char* cache : {"", "non-SWA", "SWA"}) {
    size_t total = 0;
    int layers = 0;
    int64_t cells = 0;
    for (const LlamaBuffer& lb : b.buffers) {
      if (lb.kind != LlamaBuffer::Kind::kKv || lb.cache != cache) continue;
      if (total == 0 && *cache != '\0') {
        s += format_message("llama_kv_cache_iswa: creating %7s KV cache, size = %lld cells\n", cache,
                            static_cast<long long>(lb.cells));
      }
      s += format_message("llama_kv_cache: %10s KV buffer size = %8.2f MiB\n", lb.name.c_str(), mib(lb.bytes));
      total += lb.bytes;
      layers += lb.layers;
      cells = lb.cells;
    }
    if (total > 0) {
      // K's share of the bytes: every layer's K and V rows hold n_embd_kv values, each cache of its own type
      const TypeTraits& kt = type_traits(b.k_type);
      const TypeTraits& vt = type_traits(b.v_type);
      const size_t k_part = kt.type_size * vt.block_size, v_part = vt.type_size * kt.block_size;
      const size_t k_bytes = total * k_part / (k_part + v_part);
      s += format_message(
          "llama_kv_cache: size = %7.2f MiB (%6lld cells, %3d layers, %2lld/1 seqs), K (%s): %7.2f MiB, V (%s): "
          "%7.2f MiB\n",
          mib(total), static_cast<long long>(cells), layers, static_cast<long long>(b.n_seq_max), type_name(b.k_type),
          mib(k_bytes), type_name(b.v_type), mib(total - k_bytes));
    }
  }
  if (b.pipeline.on) s += "llama_context: pipeline parallelism enabled\n";
  for (const LlamaBuffer& lb : b.buffers) {
    if (lb.kind == LlamaBuffer::Kind::kCompute) {
      s += format_message("sched_reserve: %10s compute buffer size = %8.2f MiB\n", lb.name.c_str(), mib(lb.bytes));
    }
  }
  s += format_message("sched_reserve: graph nodes  = %zu\n", b.graph_nodes);
  s += format_message("sched_reserve: graph splits = %d\n", b.graph_splits);
  return s;
}

}  // namespace tessera::llama
