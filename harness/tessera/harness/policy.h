// Placement policies, in the terms users of local-inference runtimes know: how many layers go to the GPUs (the last
// ones, like -ngl), how they are split across GPUs (proportions, like --tensor-split, or explicit counts),
// tensor-override patterns (regular expression on tensor names -> device or buffer type, like -ot), op_offload,
// parallel and max_split_inputs. A policy places onto any devices (the Device interface: their type, memory and
// buffer types), simulated or real; the command line and scenario files read its options from one table
// (tessera/harness/policy_options.h).
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
  std::string target;   // a device name ("cpu", "gpu1": its main memory) or a buffer type name ("gpu0_Host")
};

// A user pin (Scheduler::set_tensor_backend): the tensor of that name runs on (or stays on) that device's backend.
struct TensorPin {
  std::string tensor;
  std::string device;
};

struct PlacementPolicy {
  // Layers offloaded to the GPUs (non-CPU devices): the last n_gpu_layers layers; -1 = every layer and the output
  // head. With n_gpu_layers > n_layer the output head (output, output_norm) goes to the last GPU too.
  int n_gpu_layers = -1;
  // Proportions of the offloaded layers per GPU (in device order). Empty: proportional to each GPU's memory.
  std::vector<double> tensor_split;
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
  int max_split_inputs = 30;

  SchedulerParams scheduler_params() const;
};

// The layer a tensor belongs to from its name ("blk.12.ffn_up.weight", "cache_k_l12"); -1 for none.
int layer_of_name(const char* name);

// The devices a policy places onto, in the scheduler's priority order: every non-CPU device is a "GPU" that can take
// offloaded layers, and the last device is the CPU, which takes the rest. Indices below are into this list.
// Which device each layer goes to; layers not offloaded go to the last device (the CPU). Errors: a negative or too
// long layer count, a split with negative or no positive proportion, more counts than GPUs.
Result<std::vector<int>> layer_devices(const std::vector<Device*>& devices, int n_layer, const PlacementPolicy& policy);

struct Placement {
  std::vector<std::unique_ptr<Buffer>> buffers;
  std::vector<std::pair<Tensor*, BufferType*>> where;  // every placed tensor and its buffer type
  std::vector<int> layer_device;                       // per layer
  // Bytes of weights and of caches per device (index as in the device list).
  std::vector<size_t> weight_bytes, cache_bytes;
};

// Places weights (usage WEIGHTS) and caches by the policy onto `devices` (ordered as for layer_devices): layer tensors
// on their layer's device, the output head as described above, other weights (token embedding) on the CPU; overrides
// first. n_layer: the model's layer count. Errors: an override whose pattern is not a valid regular expression or
// whose target is unknown, a placement that does not fit (the allocation error, naming the device).
Result<Placement> place_model(const std::vector<Device*>& devices, const std::vector<Tensor*>& weights,
                              const std::vector<Tensor*>& caches, int n_layer, const PlacementPolicy& policy);

// The devices of a simulator in its topology order (the scheduler's priority order).
std::vector<Device*> devices_of(const sim::Simulator& simulator);

}  // namespace tessera::harness
