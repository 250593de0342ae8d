// Placement policies with llama.cpp's meaning (src/llama-model.cpp, load_tensors): how many layers go to the GPUs
// (-ngl, the output layer first), how they are split across GPUs (-ts shares rounded as llama.cpp rounds them, -sm,
// -mg, or Tessera's explicit counts), tensor-override patterns (regular expression on weight names -> buffer type,
// -ot, -cmoe, -ncmoe), -nkvo, op_offload, parallel and max_split_inputs. A policy places onto any devices (the Device
// interface: their type, memory and buffer types), simulated or real; the command line and scenario files read its
// options from one table (tessera/harness/placement/policy_options.h).
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tessera/backend.h"
#include "tessera/sched.h"
#include "tessera/status.h"

namespace tessera::sim {
class Simulator;
}  // namespace tessera::sim

namespace tessera::harness {

struct TensorOverride {
  std::string pattern;  // ECMAScript regular expression, searched in the tensor's name
  // A device name ("cpu", "gpu1": its main memory), a buffer type name ("gpu0_Host", an extra buffer type such as
  // "CPU_REPACK") or one of llama.cpp's buffer type names: "CPU", "CUDA<n>" (the n-th GPU), "CUDA_Host" (the first
  // GPU's host buffer type); see find_override_target.
  std::string target;
  // From llama.cpp's -ot, -cmoe or -ncmoe: like llama.cpp's tensor_buft_overrides (src/llama-model.cpp,
  // load_tensors), it applies to weights only, never to the KV cache. Tessera's --override applies to both.
  bool weights_only = false;
};

// llama.cpp's --split-mode (common/arg.cpp "-sm"; src/llama.cpp llama_model_load: with "none" the model's device list
// is main_gpu alone). kRow: layers as kLayer, and each GPU layer's matrices in that GPU's split buffer type, their rows
// cut over all GPUs by the -ts shares (place_model; docs/interfaces.md "Split buffer types"). kTensor: llama.cpp's
// tensor parallelism over a meta device (docs/tensor-parallel.md): `tessera plan` reports it; placing a model with it
// is refused so far.
enum class SplitMode { kLayer, kNone, kRow, kTensor };

// A user pin (Scheduler::set_tensor_backend): the tensor of that name runs on (or stays on) that device's backend.
struct TensorPin {
  std::string tensor;
  std::string device;
};

struct PlacementPolicy {
  // llama.cpp's -ngl (src/llama-model.cpp, load_tensors): the output layer (output, output_norm) is "layer n_layer"
  // and counts inside N, so layers from i_gpu_start = max(n_layer + 1 - N, 0) up to and including the output layer
  // are offloaded: N = 1 offloads the output layer alone, N = n_layer + 1 everything. -1 = all ("all", "auto").
  // The input layer (token_embd) always stays on the CPU.
  int n_gpu_layers = -1;
  // Shares of the offloaded layers per GPU (in device order; missing entries are 0). Empty or all zero: each GPU's
  // free memory, as llama.cpp does. Rounded as llama.cpp rounds them: cumulative float fractions, and layer il goes
  // to the first GPU whose fraction is above (il - i_gpu_start) / n_offloaded (std::upper_bound).
  std::vector<double> tensor_split;
  SplitMode split_mode = SplitMode::kLayer;
  int main_gpu = 0;  // the GPU of split_mode none (an index into the GPUs)
  // llama.cpp's -nkvo clears it: the KV cache stays in host memory (src/llama-kv-cache.cpp: offload false -> CPU).
  bool kv_offload = true;
  // Explicit layer counts per GPU (overrides n_gpu_layers and tensor_split when non-empty). The first GPU takes the
  // first offloaded layers.
  std::vector<int> layers_per_device;
  std::vector<TensorOverride> overrides;  // first match wins
  std::vector<TensorPin> pins;            // applied to the scheduler before planning
  // The devices whose backends the scheduler gets, by name (topology order is kept; the CPU must be among them, as
  // the scheduler's last backend). Empty: every device. Weights placed on a device left out are a scheduling error.
  std::vector<std::string> scheduler_devices;
  bool op_offload = true;
  bool parallel = false;
  int n_copies = kParallelCopies;  // with parallel: in-flight copy slots (SchedulerParams::n_copies)
  int max_split_inputs = 30;
  bool reuse = true;  // SchedulerParams::reuse: keep the plan of a graph allocated again with the same structure
  bool online_packing = false;   // SchedulerParams::online_packing: pack compute buffers as ggml-alloc does
  bool free_inputs = false;      // SchedulerParams::free_inputs: free graph inputs after their last use, as ggml-alloc
  bool ggml_inplace = false;     // SchedulerParams::ggml_inplace: ggml-alloc's in-place rule (first source, no view)
  bool fa_sinks_decide = false;  // SchedulerParams::fa_sinks_decide: FA sinks place the op, as ggml before b10150
  // llama.cpp's CPU buffer type list on a machine whose GPU has no host buffer type (Apple Metal: make_cpu_buft_list
  // gives [CPU_REPACK, CPU]): a matrix weight bound for the CPU's own buffer type -- a layer left on the CPU, or an
  // override to "CPU" (-ot, -ncmoe) -- goes to the CPU's extra buffer type named CPU_REPACK when the CPU repacks it
  // (cpu_repacks), as select_weight_buft picks the first buffer type that supports the weight. A buffer type that is
  // not host memory: op offload never takes its ops. Without such a buffer type on the CPU it changes nothing.
  bool cpu_repack = false;

  SchedulerParams scheduler_params() const;
};

// Whether ggml's CPU backend on an AArch64 CPU with NEON and the dot-product extensions (Apple silicon) repacks a
// matrix weight of this type and shape (ggml/src/ggml-cpu/repack.cpp, ggml_repack_get_optimal_repack_type, and the
// buffer type's supports_op: a 2-D MUL_MAT or 3-D MUL_MAT_ID weight): q4_0, iq4_nl, mxfp4 and q8_0 with a row count
// (ne[1]) that 4 divides; q4_K, q5_K and q6_K with one that 8 divides. The token embedding (read by GET_ROWS) is not.
bool cpu_repacks(const Tensor& weight);

// The layer a tensor belongs to from its name ("blk.12.ffn_up.weight", "cache_k_l12"); -1 for none.
int layer_of_name(const char* name);

// The devices a policy places onto, in the scheduler's priority order: every non-CPU device is a "GPU" that can take
// offloaded layers, and the last device is the CPU, which takes the rest. Indices below are into this list.
// Which device each layer goes to, n_layer + 1 entries: the last is the output layer's. Layers not offloaded go to
// the last device (the CPU). Split mode row places layers as split mode layer (llama.cpp's PR #10026: "KV and other
// non-matrix weights are split among the available GPUs in the same way as split by layer mode"). Errors: a negative
// or too long layer count, a negative share, more shares or counts than GPUs, a main GPU out of range.
Result<std::vector<int>> layer_devices(const std::vector<Device*>& devices, int n_layer, const PlacementPolicy& policy);

// The same map by Tessera's rules before commit 9a5a0e0 (scenario files of version 1, docs/scenarios.md "Versions";
// policy_v1.cpp): n_gpu_layers N offloaded the last N layers and kept the output layer on the CPU unless N was -1
// or above n_layer (then it went with the last layer); layer i of the n offloaded ones went to the GPU whose
// cumulative tensor_split share covers (i + 0.5) / n (default shares: each GPU's total memory; all zero: an error);
// layers_per_device as today. The keys that came with 9a5a0e0 (split_mode, main_gpu, kv_offload) are not read.
Result<std::vector<int>> layer_devices_v1(const std::vector<Device*>& devices, int n_layer,
                                          const PlacementPolicy& policy);

// The buffer type an override's target names (see TensorOverride::target); nullptr when none.
BufferType* find_override_target(const std::vector<Device*>& devices, const std::string& target);

struct Placement {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::pair<Tensor*, BufferType*>> where;  // every placed tensor and its buffer type
  std::vector<int> layer_device;                       // per layer
  int output_device = 0;                               // the output layer's
  // Bytes of weights and of caches per device (index as in the device list); a split tensor's (-sm row) on each GPU
  // holding some of its rows.
  std::vector<size_t> weight_bytes, cache_bytes;
};

// The copies llama.cpp's loader makes of weights several layers share, for a placement (create_tensor with
// TENSOR_DUPLICATED, src/llama-model-loader.cpp: a tensor of the same name in each buffer type that needs one, none
// where the original's buffer type already holds it; the override of the first matching pattern applies to the name).
// `output`: a tied model's output head is token_embd.weight created again with the output layer's buffer type, so
// it is a copy when that differs from token_embd's (the CPU's, or an override's). `rope_of_layer` (with
// rope_factors: the model has rope factors every layer reads, "rope_freqs.weight" or phi3's LongRoPE pair): each
// layer's copy, 0 for the original in layer 0's buffer type, k for the k-th other buffer type in layer order; empty
// when one buffer type holds them all (the names match an override, or the layers share a device). The fields of
// models::LlamaConfig of the same meaning (output_copy, rope_factor_copy). Errors: those of layer_devices, an
// override whose pattern or target is invalid.
struct WeightCopies {
  bool output = false;
  std::vector<int> rope_of_layer;
};
Result<WeightCopies> weight_copies(const std::vector<Device*>& devices, int n_layer, const PlacementPolicy& policy,
                                   bool tied_output, const std::vector<std::string>& rope_factor_names);

// Places weights (usage WEIGHTS) and caches by the policy onto `devices` (ordered as for layer_devices): layer tensors
// on their layer's device, the output head (a name starting "output") on the output layer's, other weights (token
// embedding) on the CPU, and with -sm row each GPU layer's matrices in its GPU's split buffer type; overrides first;
// the caches on the CPU without kv_offload. n_layer: the model's layer count. `layer_of`: the layer whose device holds
// each listed weight (n_layer: the output layer's) where its name does not say it (the copies of weight_copies).
// Errors: an override whose pattern is not a valid regular expression or whose target is unknown, a placement that does
// not fit (the allocation error, naming the device), -sm row on a GPU whose registration has no split buffer type
// ("device gpu0 does not support split buffers", as llama.cpp says it).
Result<Placement> place_model(const std::vector<Device*>& devices, const std::vector<Tensor*>& weights,
                              const std::vector<Tensor*>& caches, int n_layer, const PlacementPolicy& policy,
                              const std::vector<std::pair<const Tensor*, int>>& layer_of = {});

// Whether a buffer type is a split buffer type (-sm row): one its device's registration made by row split's extension
// function, not the device's own, host or extra buffer type.
bool is_split_buffer_type(const BufferType& b);

// The devices of a simulator in its topology order (the scheduler's priority order).
std::vector<Device*> devices_of(const sim::Simulator& simulator);

}  // namespace tessera::harness
