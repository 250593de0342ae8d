// llama.cpp's tensor parallelism (-sm tensor; docs/tensor-parallel.md): how its model splits each weight and cache over
// the devices of its meta device (src/llama-model.cpp, llama_meta_device_get_split_state), and what that comes to for
// a model: every tensor's split state (tessera/meta.h), the bytes each device holds, and the reductions an evaluation
// makes.
#pragma once

#include <string>
#include <vector>

#include "tessera/harness/session/session.h"
#include "tessera/graph_copy.h"
#include "tessera/meta.h"
#include "tessera/meta_backend.h"
#include "tessera/models/llama.h"
#include "tessera/sim/simulator.h"
#include "tessera/status.h"

namespace tessera::llama {

// The split state llama.cpp gives a weight or cache of `model` over n_devices, by its name: attention Q, K, V (and
// their biases, the fused QKV, the K/V caches, the sinks) by heads, the attention output by its input rows, FFN up and
// gate by their output rows and down by its input rows (experts alike), the output head by vocabulary rows, the rest
// mirrored. Each cut is rounded down to llama.cpp's granularity (whole heads; 128 values, or the type's block, for the
// FFN), at the -ts shares (`tensor_split`, one per device; empty or all zero: even), the first device of the rotation
// moving on by one every layer. std::nullopt for a tensor that is neither a weight nor a cache of the model.
// kv_offload false (-nkvo): the caches are in host memory, outside the meta device, so they have no state of the
// model's (std::nullopt): the scheduler copies them in as mirrored inputs.
StaticSplitFn llama_tensor_split(const models::LlamaGraph& model, const models::LlamaConfig& config, size_t n_devices,
                                 const std::vector<double>& tensor_split, bool kv_offload = true);

// The bytes a tensor of state `s` takes on device j: its slice along the split axis, or all of it (mirrored, partial).
size_t split_bytes(const Tensor& t, const SplitState& s, size_t j, size_t n_devices);

// A model planned with -sm tensor: per device, its weights' and caches' bytes; the graph's reductions. The token
// embedding (the input layer) stays in host memory, as llama.cpp keeps it on the CPU in every split mode (a tied output
// head's copy of it is on the devices, mirrored).
struct TensorParallelMemory {
  std::vector<size_t> weights, cache;  // per device
  size_t host_weights = 0;             // the token embedding
  size_t n_reductions = 0;             // AllReduces per evaluation
  size_t reduced_bytes = 0;            // their partial results' bytes (each device sends and receives about as much)
  TensorParallelPlan plan;
};
Result<TensorParallelMemory> llama_tensor_parallel(const models::LlamaGraph& model, const models::LlamaConfig& config,
                                                   size_t n_devices, const std::vector<double>& tensor_split,
                                                   bool kv_offload = true);

// The time of one evaluation so split, estimated on a simulator's devices (`gpus`: their indices, one per device of the
// split, in order) with its cost model and links: each subgraph (up to a reduction) takes its slowest GPU's time for
// its nodes on that GPU's slices (mirrored nodes in full on every GPU, a slice of no elements costing nothing), then a
// ring AllReduce of the partial result (2 (n - 1) steps, each moving 1/n of its bytes between neighbours, at the pace
// of the slowest neighbour link). No overlap of compute and communication is assumed.
struct TensorParallelTime {
  double compute_us = 0;
  double reduce_us = 0;
  double total_us() const { return compute_us + reduce_us; }
};
Result<TensorParallelTime> tensor_parallel_time(const models::LlamaGraph& model, const TensorParallelPlan& plan,
                                                const sim::Simulator& sim, const std::vector<size_t>& gpus);

// -sm tensor for a session's configuration, as `plan -sm tensor` and `bench -sm tensor` report it: the model with
// llama.cpp's graph (its newest checked build unless the configuration has one) and flash attention, split over the
// topology's GPUs, with its memory and the estimated time of one evaluation.
struct TensorParallelEstimate {
  models::LlamaConfig model;
  models::LlamaGraph graph;
  std::vector<size_t> gpus;  // the topology's GPUs (indices), one per device of the split
  TensorParallelMemory memory;
  TensorParallelTime time;
};
// What -sm tensor does not model yet or llama.cpp refuses (kInvalidArgument): a serialized graph, flash attention off
// (llama.cpp: "SPLIT_MODE_TENSOR requires flash_attn to be enabled"), no GPU, more than 16, more -ts shares than GPUs;
// and an override to anything but the CPU. -ngl below all and overrides to the CPU are for the meta device's run
// (run_tensor_parallel; `plan -sm tensor` runs it metadata-only for them): estimate_tensor_parallel refuses them
// (`run` false).
Status check_tensor_parallel(const harness::SessionConfig& config, bool run = false);
// check_tensor_parallel's errors, then llama_tensor_parallel's (the planner's: "tensor parallelism: ..."), then the
// simulator's.
Result<TensorParallelEstimate> estimate_tensor_parallel(const harness::SessionConfig& config, const Registry* real);

// -sm tensor run on the meta device (tessera/meta_backend.h, docs/tensor-parallel.md "The meta backend"): the
// topology's GPUs wrapped into one meta device with llama.cpp's split states, the token embedding in the CPU's memory
// (its GET_ROWS on the CPU, as llama.cpp keeps the input layer), and so the weights an override sends to the CPU
// (-ot ...=CPU, -cmoe, -ncmoe) and the layers -ngl leaves there (their weights and KV cache: llama.cpp's dev_layer is
// the CPU; the output layer's too with -ngl 0); every other weight and the KV cache packed per GPU,
// the scheduler over the meta backend and the CPU, `evaluations` evaluations of one ubatch; memory-backed runs are
// compared with the CPU reference. The simulator stays with the result (its trace, races, memory).
struct TensorParallelRun {
  models::LlamaConfig model;
  std::vector<size_t> gpus;                  // the topology's GPUs, one per device of the split
  std::vector<size_t> weights, cache, peak;  // per topology device: bytes after placing the weights, the cache; peak
  int splits = 0;
  size_t graph_nodes = 0;  // the model graph's nodes (llama.cpp's "graph nodes = N")
  // the compute buffers the scheduler reserved: the meta device's (ggml-alloc sizes the whole graph, and the meta
  // buffer type allocates that size on every GPU, as ggml's ggml_backend_meta_buffer_type_alloc_buffer) and the CPU's
  size_t meta_compute = 0, cpu_compute = 0;
  // llama.cpp's "Meta()" model and KV buffer sizes: the largest GPU's share of the weights and of the cache
  size_t meta_weights = 0, meta_cache = 0;
  PlanReuse plan_reuse;   // the scheduler's plans over the evaluations
  MetaComputeStats meta;  // the last evaluation's subgraphs, AllReduces and their bytes
  // the simulated time to write each GPU's weights and cache from the host, one transfer per GPU, in sequence (as
  // Session::weight_upload_us, before the evaluations; not in their makespan)
  double weight_upload_us = 0;
  // the model's weights without the copies the placement makes: bytes, parameters, the types by bytes (largest first)
  size_t model_bytes = 0;
  uint64_t model_params = 0;
  std::vector<harness::WeightTypeTotal> weight_types;
  // what stays in the CPU's memory: the names of the weights and caches placed there (the token embedding, the
  // overrides' weights, the CPU layers'), and per layer whether -ngl leaves it on the CPU (the output layer too)
  std::vector<std::string> host_tensors;
  // the tensors `explain` named (run_tensor_parallel's argument: nodes or leafs of the graph), in its order: where the
  // scheduler placed each in the last evaluation (the meta backend, "Meta(gpu0,gpu1)", or the CPU's), why, its split,
  // and the splits it is copied into (index, backend); found false for a name that is no tensor of the graph
  struct NodeOn {
    std::string name;
    bool found = false;
    Op op = Op::kNone;
    TensorExplain where;
    std::vector<std::pair<int, std::string>> copied_to;
  };
  std::vector<NodeOn> explained;
  std::vector<bool> cpu_layers;
  bool output_on_cpu = false;
  size_t trace_first = 0, trace_last = 0;  // the evaluations' events in the simulator's trace
  bool checked = false;                    // compared with the CPU reference (memory-backed)
  NmseResult nmse;
  std::unique_ptr<sim::Simulator> sim;
};
// check_tensor_parallel's errors; -nkvo (kInvalidArgument: llama.cpp's meta backend fails there, see `plan -sm
// tensor -nkvo`); the simulator's, the scheduler's and the meta backend's errors.
// `steps` (a scenario's run.steps), when not empty, replace the evaluations: reserve, alloc (the graph allocated and
// its inputs written), compute (allocating first unless an alloc just did), synchronize, reset and compute-again (the
// graph computed last once more, no alloc or inputs), each as Session::run_steps takes it, a step that must fail
// letting the next ones go on; the next graph's steps are refused (kInvalidArgument). A failing step is the run's
// error, "step N (NAME): ...".
Result<TensorParallelRun> run_tensor_parallel(const harness::SessionConfig& config, const Registry* real,
                                              int evaluations = 1, const std::vector<std::string>& explain = {},
                                              const std::vector<harness::Session::StepSpec>& steps = {});

}  // namespace tessera::llama
