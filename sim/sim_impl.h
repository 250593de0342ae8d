// Internals of the simulator: the simulated device, buffer types, buffers, backends (streams) and events, and the
// simulator's shared state (clock, pending commands, hazard tracker, trace). See tessera/sim/simulator.h for the
// model of time and data.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <queue>
#include <random>
#include <string>
#include <strings.h>
#include <unordered_map>
#include <vector>

#include "tessera/backend.h"
#include "tessera/sim/simulator.h"

namespace tessera::sim {

class SimDevice;
class SimBackend;
class SimBuffer;
class SimBufferType;

// Cost model (cost_model.cpp) and op rules (op_rules.cpp).
double op_time_us(const DeviceConfig& cfg, const Tensor& node);
double op_flops(const Tensor& node);
bool op_allowed_by_rules(const DeviceConfig& cfg, const Tensor& node);
bool offload_wanted(const DeviceConfig& cfg, const Tensor& node);

struct Simulator::Impl {
  TopologyConfig topo;
  SimOptions opt;
  std::mt19937_64 rng;
  HazardTracker hz;
  std::vector<std::unique_ptr<SimDevice>> devices;
  std::unique_ptr<BackendReg> reg;

  // Virtual time (microseconds).
  double now = 0;
  // Commands whose effect on memory is still to be applied, by end time then submission order.
  struct Pending {
    double end;
    uint64_t seq;
    std::function<void()> apply;
    uint64_t command;  // the hazard tracker's id of the command (names it when an invariant check fails)
  };
  struct Later {
    bool operator()(const Pending& a, const Pending& b) const { return a.end != b.end ? a.end > b.end : a.seq > b.seq; }
  };
  std::priority_queue<Pending, std::vector<Pending>, Later> pending;
  uint64_t seq = 0;
  uint64_t n_commands = 0;
  // The end of the last command run_until applied. Builds with TESSERA_CHECK_INVARIANTS check that those ends never
  // go down (the queue is applied in end-time order) and that the host's time never goes back before it.
  double applied_until = 0;

  std::vector<std::unique_ptr<SimBufferType>> split_types;  // row split's buffer types, made on demand
  std::vector<SimBackend*> streams;                         // live backends
  std::map<uintptr_t, size_t> reserved;                     // address ranges without bytes (metadata-only buffers)
  bool is_reserved(const void* p) const;
  // Live buffers the host addresses directly (host-visible memory, a wrapped CPU's), by base address: a host pointer
  // handed to a set or get (tensor_copy from a host buffer memcpys from the source's own bytes) is an access to them.
  std::map<uintptr_t, SimBuffer*> host_buffers;
  // Records the current command's access to [p, p + n) where it lies in such a buffer (nothing otherwise).
  void access_host_pointer(const void* p, size_t n, bool write);
  std::vector<std::string> errors;
  int64_t n_allocs = 0;       // allocation attempts (for the fault plan)
  uint64_t n_buffers = 0;     // buffers made (for their names)
  int64_t n_event_waits = 0;  // event waits (for the fault plan)
  SimCounters counters;       // synchronizations and event waits (Simulator::counters)
  // The host pool shared by unified devices and the CPU device (sim_pool.cpp): pool.members empty when no device is
  // unified (each device then counts only its own memory).
  PoolStats pool;
  bool in_pool(int device) const;
  Trace trace;
  // The copy event (index into trace.events) that last wrote the bytes at a destination's data pointer, for the
  // flows from a copy to the nodes that read it; a node writing there ends it.
  std::unordered_map<const void*, int> copied_to;

  // Applies pending commands that end at or before t.
  void run_until(double t);
  // The host blocks until t (then everything that ended by t is applied).
  void advance_host(double t);
  // Applies every pending command (before memory goes away).
  void flush();
  double jitter();
  void push(double end, std::function<void()> apply);
  int add_track(const std::string& name, int device);
  // A copy event (just added) that wrote `dst`: remembered for the flows to its consumers.
  void note_copy(const Tensor& dst);
  // A device's memory in use changed (a counter sample at the host's time).
  void note_memory(int device, size_t bytes);
  void add_event(TraceKind kind, int track, std::string name, double start, double end, size_t bytes, int peer = -1);
  // Time of moving bytes between two devices (-1 = host memory; sim_network.cpp).
  double copy_time_us(int from, int to, size_t bytes) const;

  // Hosts (sim_network.cpp): the host of each device (-1: the local host, else an index into topo.hosts) and, per
  // remote host, the network links from the local host to it (one per host on the way).
  struct Hop {
    double bandwidth;
    double latency_us;
  };
  std::vector<int> device_host;
  std::vector<std::vector<Hop>> host_path;
  // The time of a copy between two endpoints on one host (no network), and of one endpoint's link to its host.
  double same_host_copy_us(int from, int to, double bytes) const;
  double host_leg_us(int device, double bytes) const;
};

// The topology's hosts and the rules of remote devices (sim_network.cpp); an error names the rule.
Status check_hosts(const TopologyConfig& t);
// Fills Impl::device_host and Impl::host_path once check_hosts has passed.
void init_network(Simulator::Impl* s);

// Fills Impl::pool from the topology once the devices exist (sim_pool.cpp).
void init_pool(Simulator::Impl* s);

// The rows of a split buffer type (row split, sim_split.cpp): the simulator's GPUs in order, the cumulative share at
// which each one's rows begin (ggml-cuda's tensor_split array) and the rounding of each cut.
struct SplitLayout {
  std::vector<int> gpus;
  std::vector<float> from;
  int64_t rounding = 1;
  // The index into gpus of a simulator device, or -1.
  int position(int device) const;
  // Rows [*low, *high) of t on gpus[k] (ggml-cuda's get_row_split).
  void rows(const Tensor& t, size_t k, int64_t* low, int64_t* high) const;
  // The bytes of those rows, each GPU's slice padded to whole 512-value rows (0 without rows).
  size_t bytes(const Tensor& t, size_t k) const;
};

// A kind of memory of a simulated device: its main memory, its pinned host memory, host memory it wraps, one of
// its extra buffer types for weights (DeviceConfig::buffer_types[extra]), or a split buffer type whose main device it
// is (row split: the rows of each tensor on every GPU, sim_split.cpp).
class SimBufferType final : public BufferType {
 public:
  enum class Kind { kMain, kHost, kMapped, kExtra, kSplit };
  SimBufferType(SimDevice* dev, Kind kind, std::string name, int extra = -1);
  SimBufferType(SimDevice* dev, SplitLayout split);
  const char* name() const override { return name_.c_str(); }
  size_t alignment() const override;
  size_t max_size() const override;
  bool is_host() const override;
  // nbytes plus the padding rules' bytes (main and extra buffer types; buffer_rules.h).
  size_t alloc_size(const Tensor& t) const override;
  Device* device() const override;
  Kind kind() const { return kind_; }
  // Main and extra buffer types take the device's memory (counted, faults apply); host and mapped ones do not, and a
  // split one takes each tensor's slices on their GPUs when the tensor is placed (SimBuffer::init_tensor).
  bool in_device_memory() const { return kind_ == Kind::kMain || kind_ == Kind::kExtra; }
  const SplitLayout* split() const { return kind_ == Kind::kSplit ? &split_ : nullptr; }
  // The configuration of an extra buffer type (null for the other kinds).
  const BufferTypeConfig* extra_config() const;
  SimDevice* sim_device() const { return dev_; }

 protected:
  Result<std::unique_ptr<Buffer>> do_alloc_buffer(size_t size) override;

 private:
  SimDevice* dev_;
  Kind kind_;
  std::string name_;
  int extra_;
  SplitLayout split_;
};

// The split buffer type holding t (row split), or nullptr.
const SimBufferType* split_type_of(const Tensor* t);
// The time of a node on a device: the cost model's, or for a MUL_MAT whose weight is split by rows the slowest GPU's
// share of it, with its copy of the activations and the copy of its rows of the result back (sim_split.cpp).
double node_time_us(const SimDevice& dev, const Tensor& node);
// The registration's extension functions of row split (kSplitBufferTypeProc, kSplitBytesProc), else nullptr.
void* split_proc_address(const char* name);
// The split buffer type of a main device and shares (SplitBufferTypeFn), made once per arguments.
BufferType* split_buffer_type(SimDevice* main, const float* tensor_split, size_t n);

class SimBuffer final : public Buffer {
 public:
  enum class Memory { kOwned, kReserved, kExternal, kInner };
  SimBuffer(SimBufferType* type, size_t size, Memory memory, void* mem, std::unique_ptr<Buffer> inner);
  ~SimBuffer() override;

  void* base() override { return inner_ ? inner_->base() : mem_; }
  // A split buffer's tensors take their slices of the GPUs' memory here (refusing views, as ggml-cuda does).
  Status init_tensor(Tensor& t) override;
  void memset_tensor(Tensor& t, uint8_t value, size_t offset, size_t size) override;
  void set_tensor(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor(const Tensor& t, void* data, size_t offset, size_t size) override;
  bool cpy_tensor(const Tensor& src, Tensor& dst) override;
  void clear(uint8_t value) override;

  SimDevice* sim_device() const { return type_->sim_device(); }
  uint64_t hazard_id() const { return hz_id_; }
  bool has_bytes() const { return memory_ != Memory::kReserved; }
  // Offset of t's first byte in this buffer.
  size_t offset_of(const Tensor& t) const;
  // Raw byte access for commands (no hazard tracking, no time). No-ops without bytes (reads give zeros).
  void write_bytes(const Tensor& t, size_t offset, const void* data, size_t size);
  void read_bytes(const Tensor& t, size_t offset, void* data, size_t size);
  void fill_bytes(const Tensor& t, size_t offset, uint8_t value, size_t size);

 private:
  // A synchronous host operation on this buffer: records the host's access and the event on the host track; returns
  // its duration.
  double host_op(TraceKind kind, const Tensor* t, size_t offset, size_t size, bool write, const char* what);

  SimBufferType* type_;
  Memory memory_;
  char* mem_;
  std::unique_ptr<Buffer> inner_;
  uint64_t hz_id_;
  std::vector<std::pair<SimDevice*, size_t>> split_taken_;  // a split buffer's slices, released with it
};

// The buffer of this simulator holding t, or nullptr.
SimBuffer* sim_buffer_of(const Simulator::Impl* sim, const Tensor& t);

// Device names (topologies, fault plans, links) match without regard to case.
inline bool same_name(const std::string& a, const std::string& b) { return strcasecmp(a.c_str(), b.c_str()) == 0; }

class SimDevice final : public Device {
 public:
  SimDevice(Simulator::Impl* sim, int index, DeviceConfig cfg, Device* real);

  const char* name() const override { return cfg_.name.c_str(); }
  const char* description() const override { return description_.c_str(); }
  void memory(size_t* free, size_t* total) const override;
  DeviceType type() const override { return cfg_.type; }
  DeviceCaps caps() const override { return cfg_.caps; }
  BackendReg* reg() const override;
  Result<std::unique_ptr<Backend>> init_backend(const std::string& params) override;
  BufferType* buffer_type() override { return &main_; }
  BufferType* host_buffer_type() override { return host_ ? host_.get() : nullptr; }
  std::vector<BufferType*> extra_buffer_types() override;
  Result<std::unique_ptr<Buffer>> buffer_from_host_ptr(void* ptr, size_t size, size_t max_tensor_size) override;
  bool supports_op(const Tensor& op) const override;
  bool supports_buft(const BufferType& buft) const override;
  bool offload_op(const Tensor& op) const override { return offload_wanted(cfg_, op); }
  std::unique_ptr<Event> event_new() override;

  Simulator::Impl* sim() const { return sim_; }
  int index() const { return index_; }
  const DeviceConfig& config() const { return cfg_; }
  Device* real() const { return real_; }  // wrapped real device (memory-backed mode only), else null

  // Memory accounting (main memory only; sim_pool.cpp): the device's own limit (memory - reserved - unallocatable)
  // and, for a member of the host pool, the pool's.
  Status reserve_memory(size_t size);
  size_t taken_before_use() const;  // the driver's reservation, and the fit margin when SimOptions::fit_margins
  void release_memory(size_t size);
  DeviceStats stats;

 private:
  Simulator::Impl* sim_;
  int index_;
  DeviceConfig cfg_;
  std::string description_;
  Device* real_;
  SimBufferType main_;
  std::unique_ptr<SimBufferType> host_;
  SimBufferType mapped_;
  std::vector<std::unique_ptr<SimBufferType>> extras_;
};

class SimBackend final : public Backend {
 public:
  SimBackend(SimDevice* dev, std::unique_ptr<Backend> inner, int serial);
  ~SimBackend() override;

  const char* name() const override { return name_.c_str(); }
  Guid guid() const override;
  Device* device() const override { return dev_; }

  void set_tensor_async(Tensor& t, const void* data, size_t offset, size_t size) override;
  void get_tensor_async(const Tensor& t, void* data, size_t offset, size_t size) override;
  bool cpy_tensor_async(Backend* src_backend, const Tensor& src, Tensor& dst) override;
  Status synchronize() override;
  // synchronize without taking a failure of the queued work (it stays for the next synchronize or compute)
  void wait_idle();
  ComputeStatus graph_compute_async(Graph& graph) override;

  int agent() const { return agent_; }
  int track() const { return track_; }
  double ready() const { return ready_; }
  void wait_until(double t) {
    if (t > ready_) ready_ = t;
  }
  SimDevice* sim_device() const { return dev_; }

 private:
  // Starts a command on this stream: submission ordering, a start time, a hazard command. Returns the start time.
  double begin(const CommandDesc& description);
  // Ends it: the stream is busy until start + duration; synchronous devices make the host wait.
  double end(double start, double duration_us);
  // Records the nodes of the compute event just added, and the flows from copies to them.
  void trace_ops(const Graph& graph, double start);

  SimDevice* dev_;
  std::unique_ptr<Backend> inner_;  // the real backend of a wrapped device (memory-backed mode)
  std::string name_;
  int agent_;
  int track_;
  double ready_ = 0;
  // Errors of lazily applied commands, reported (once) by the next synchronize or compute.
  std::shared_ptr<std::string> deferred_error_;
};

class SimEvent final : public Event {
 public:
  explicit SimEvent(SimDevice* dev) : Event(dev), dev_(dev) {}
  void record(Backend& backend) override;
  void synchronize() override;
  void wait(Backend& backend) override;

 private:
  SimBackend* as_sim(Backend& backend, const char* what);
  void add_flow(int to_track, double to_us);  // a flow from the record to a wait or synchronize
  SimDevice* dev_;
  bool recorded_ = false;
  double time_ = 0;
  int track_ = 0;  // the recording stream's track
  VectorClock clock_;
};

}  // namespace tessera::sim
