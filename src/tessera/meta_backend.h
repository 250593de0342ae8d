// The meta device (llama.cpp's -sm tensor; ggml's meta backend, ggml-backend-meta.cpp; docs/tensor-parallel.md): N
// devices wrapped into one device, one buffer type and one backend. A tensor placed in the meta buffer type has a
// "simple" tensor on each device, its slice by the tensor's split state (tessera/meta.h): the split axis's extent is
// the device's slice, the strides above it scale with it, and a view's offset scales where it lies beyond the split.
// Computing a graph on the meta backend plans the states of its tensors (plan_tensor_parallel), has every device
// compute its slices of each subgraph, and adds up the partial results at the end of each subgraph (an AllReduce)
// before the next one starts.
//
// Ownership: the caller owns the meta device (and, as for any device, the backends and buffers it makes); the meta
// device must outlive them, and its devices must outlive it.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/context.h"
#include "tessera/meta.h"

namespace tessera {

class MetaDevice;

struct MetaDeviceParams {
  // The devices, in order (1 to 16); each gets its buffer type's simple buffers and a backend.
  std::vector<Device*> devices;
  // The states of the tensors the application allocates statically (weights, caches); every other tensor in a meta
  // buffer is an input (mirrored) or a node (its state by the rules).
  StaticSplitFn statics;
};

// Errors: no devices, more than 16, a null device. A device may be listed twice (two backends on one CPU).
Result<std::unique_ptr<MetaDevice>> make_meta_device(MetaDeviceParams params);

class MetaDevice final : public Device {
 public:
  ~MetaDevice() override;

  const char* name() const override { return name_.c_str(); }  // "Meta(gpu0,gpu1)"
  const char* description() const override { return description_.c_str(); }
  // Free and total: the sums over the devices.
  void memory(size_t* free, size_t* total) const override;
  DeviceType type() const override;  // the first device's
  DeviceCaps caps() const override;  // synchronous; no events, no host buffer
  BackendReg* reg() const override;

  // A backend per device (each given params), as one.
  Result<std::unique_ptr<Backend>> init_backend(const std::string& params = {}) override;
  BufferType* buffer_type() override;
  // An op every device supports (asked of the full tensor: a device that takes it whole takes its slices).
  bool supports_op(const Tensor& op) const override;
  bool supports_buft(const BufferType& buft) const override;

  size_t n_devices() const { return devices_.size(); }
  Device* device(size_t j) const { return devices_[j]; }
  const StaticSplitFn& statics() const { return statics_; }

  // The split state a tensor in a meta buffer is read and written with: its static state, else the state the last
  // graph computed on a backend of this device gave it (a reduced node: mirrored), else mirrored (an input).
  SplitState io_state(const Tensor& t) const;

  // The simple tensor's shape and strides on device j for a tensor of state `s` (ggml's meta_buffer_init_tensor):
  // the split axis's extent is the device's slice, every stride larger than the split axis's scales with it.
  static void slice_layout(const Tensor& t, const SplitState& s, size_t j, size_t n, int64_t ne[4], size_t nb[4]);

 private:
  friend Result<std::unique_ptr<MetaDevice>> make_meta_device(MetaDeviceParams params);
  friend class MetaBackend;
  MetaDevice() = default;

  std::vector<Device*> devices_;
  StaticSplitFn statics_;
  std::string name_;
  std::string description_;
  std::unique_ptr<BufferType> buft_;
  std::unique_ptr<BackendReg> reg_;
  // The states of the last computed graph's nodes (for reading them back).
  std::unordered_map<const Tensor*, SplitState> last_states_;
};

// Places every unallocated tensor of ctx (weights, caches: tensors of a fixed state) in a new meta buffer whose
// simple buffers hold exactly their slices: on each device, the tensors' slices packed one after another (ggml's
// ggml_backend_meta_alloc_ctx_tensors_from_buft), so that each device's memory is its share of the model. A tensor's
// state is meta.io_state (the application's static state, else mirrored). Views of them in ctx get their data too.
// Returns nullptr (ok) when there is nothing to place. Errors: an allocation failure on a device (naming it).
Result<std::unique_ptr<Buffer>> meta_alloc_ctx_tensors(Context& ctx, MetaDevice& meta);

// What the last graph_compute of a meta backend did (for tests and reports).
struct MetaComputeStats {
  size_t subgraphs = 0;
  size_t reductions = 0;      // AllReduces
  size_t reduced_bytes = 0;   // the bytes of each reduced tensor, summed
  size_t skipped_slices = 0;  // (node, device) pairs not computed: a source's slice on that device is empty
};
// nullptr when backend is not a meta backend.
const MetaComputeStats* meta_compute_stats(const Backend& backend);

}  // namespace tessera
