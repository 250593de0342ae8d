// Fuzz target: the whole pipeline on simulated devices (docs/fuzzing.md). Bytes -> a small topology (0 to 3 simulated
// accelerators with op-support gaps, capacities, host-visible or not, events or not, then the wrapped CPU), a policy
// (parallel, op_offload, max_split_inputs), a random valid graph (graph_gen) whose external leafs (weights) live in
// one chosen buffer type -> Scheduler over the simulator's backends -> alloc_graph -> compute in memory-backed mode
// -> invariants:
//   - the scheduler either succeeds or refuses with an error status: an allocation failure (a device too small) or a
//     tensor pre-allocated where no backend can run the op that writes it;
//   - every node runs on a backend that supports it; the splits cover the graph in order (leading views aside); no
//     split has more inputs than max_split_inputs;
//   - the simulator's hazard detector reports no race (the scheduler's own event flow is race free) and no error;
//   - every OUTPUT equals the same graph computed on the plain CPU backend (normalised squared error <= 1e-3;
//     elements where the reference is NaN or infinite are skipped). Graphs with ARGSORT or TOP_K are compared only
//     when no output depends on them (an order flipped by rounding is no bug).
// Layout of the input (fuzz_input.h ByteReader): topology and policy bytes first (see decode_setup), then the graph
// description (graph_gen desc_from_bytes, at most kMaxSteps steps). The simulator's seed comes from the input too.
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <sstream>
#include <string>
#include <unordered_set>
#include <vector>

#include "fuzz_input.h"
#include "support/graph_gen.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"
#include "tessera/sim/simulator.h"
#include "tessera/builtin.h"

namespace {

using namespace tessera;

constexpr size_t kMaxSteps = 24;  // small graphs: the fuzzer's speed matters more than their size
constexpr double kMaxNmse = 1e-3;

struct Setup {
  sim::TopologyConfig topology;
  sim::SimOptions options;
  bool parallel = false;
  bool op_offload = true;
  int max_split_inputs = 30;
  int weight_device = 0;     // device whose buffer type holds the external leafs
  bool weight_host = false;  // its host buffer type (pinned host memory) when it has one
};

sim::DeviceConfig decode_accelerator(fuzz::ByteReader& in, int index) {
  static const Op kDeniable[] = {
      Op::kMulMat,  Op::kMulMatId, Op::kFlashAttnExt, Op::kSoftMax, Op::kRope,    Op::kGetRows, Op::kSetRows,
      Op::kArgsort, Op::kTopK,     Op::kGlu,          Op::kRmsNorm, Op::kNorm,    Op::kAdd,     Op::kMul,
      Op::kCpy,     Op::kCont,     Op::kUnary,        Op::kScale,   Op::kSumRows, Op::kDiv,     Op::kAddId};
  static const size_t kMemory[] = {1 * sim::GiB, 64 * sim::MiB, 1 * sim::MiB, 64 * sim::KiB};
  static const size_t kAlignment[] = {256, 64, 32, 128};
  static const int64_t kBatch[] = {1, 2, 4, 32};
  sim::DeviceConfig d;
  d.name = "acc" + std::to_string(index);
  d.type = in.flag() ? DeviceType::kGpu : DeviceType::kAccel;
  d.memory = in.pick(kMemory);
  d.alignment = in.pick(kAlignment);
  d.host_visible = in.flag();
  d.caps = {/*async=*/!in.flag(), /*host_buffer=*/in.flag(), /*buffer_from_host_ptr=*/false, /*events=*/!in.flag()};
  // Op support: up to three rules, each denying (or allowing) a few ops, maybe only for some batch sizes.
  const int n_rules = static_cast<int>(in.in_range(0, 3));
  for (int r = 0; r < n_rules; ++r) {
    sim::OpRule rule;
    rule.allow = (in.byte() % 4) == 0;
    const int n_ops = static_cast<int>(in.in_range(1, 3));
    for (int k = 0; k < n_ops; ++k) rule.ops.push_back(in.pick(kDeniable));
    if (in.flag()) rule.min_batch = in.pick(kBatch);
    if (in.flag()) rule.ne0_multiple = in.pick(kBatch) * 8;
    rule.note = "fuzz";
    d.op_rules.push_back(rule);
  }
  d.default_allow = (in.byte() % 8) != 0;
  d.offload.enabled = in.flag();
  d.offload.min_batch = in.pick(kBatch);
  return d;
}

Setup decode_setup(fuzz::ByteReader& in) {
  Setup s;
  s.topology.name = "fuzz";
  const int n_acc = static_cast<int>(in.in_range(0, 3));
  for (int i = 0; i < n_acc; ++i) s.topology.devices.push_back(decode_accelerator(in, i));
  sim::DeviceConfig cpu;
  cpu.name = "cpu";
  cpu.type = DeviceType::kCpu;
  cpu.wraps = "CPU";
  cpu.memory = 1 * sim::GiB;
  cpu.alignment = 64;
  cpu.host_visible = true;
  cpu.caps = {/*async=*/false, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/false};
  s.topology.devices.push_back(cpu);
  s.parallel = in.flag();
  s.op_offload = in.flag();
  s.max_split_inputs = static_cast<int>(in.in_range(10, 30));
  s.weight_device = static_cast<int>(in.in_range(0, n_acc));
  s.weight_host = in.flag();
  s.options.seed = 1 + in.byte();
  s.options.adversarial = in.flag();
  s.options.record_trace = false;
  return s;
}

std::string describe(const Setup& s, const graphgen::GraphDesc& desc, const graphgen::BuiltGraph& g) {
  std::ostringstream os;
  os << "devices:";
  for (const auto& d : s.topology.devices) {
    os << " " << d.name << "(mem " << d.memory << ", align " << d.alignment << ", host_visible " << d.host_visible
       << ", events " << d.caps.events << ", async " << d.caps.async << ", rules " << d.op_rules.size()
       << ", default_allow " << d.default_allow << ", offload " << d.offload.enabled << ")";
  }
  os << "\npolicy: parallel " << s.parallel << ", op_offload " << s.op_offload << ", max_split_inputs "
     << s.max_split_inputs << ", weights on device " << s.weight_device << (s.weight_host ? " (host type)" : "")
     << ", sim seed " << s.options.seed << (s.options.adversarial ? " adversarial" : "") << "\n"
     << desc << "\n--- graph ---\n"
     << g.dump();
  return os.str();
}

// Outputs that depend on an ARGSORT or TOP_K node (through any path).
std::unordered_set<const Tensor*> order_dependent(const Graph& g) {
  std::unordered_set<const Tensor*> dep;
  auto root = [](const Tensor* t) { return t->view_src != nullptr ? t->view_src : t; };
  for (const Tensor* n : g.nodes()) {
    bool d = n->op == Op::kArgsort || n->op == Op::kTopK;
    for (const Tensor* s : n->src) d = d || (s != nullptr && (dep.count(s) != 0 || dep.count(root(s)) != 0));
    if (n->view_src != nullptr && dep.count(n->view_src) != 0) d = true;
    if (d) {
      dep.insert(n);
      if (n->view_src != nullptr) dep.insert(n->view_src);  // written through a view (CPY / SET_ROWS into a cache)
    }
  }
  return dep;
}

Backend& reference_backend() {
  static std::unique_ptr<Backend> backend = cpu::make_backend({.n_threads = 1});
  return *backend;
}

// The same graph on the plain CPU backend, every tensor in its own memory.
std::vector<std::vector<float>> reference_outputs(const graphgen::GraphDesc& desc) {
  graphgen::BuiltGraph ref = graphgen::build(desc, {.weight_buft = cpu::buffer_type()});
  FUZZ_CHECK(ref.ok(), "graph_gen built an invalid graph (generator bug): " + ref.status.to_string());
  auto own = alloc_ctx_tensors(*ref.ctx, *cpu::buffer_type());
  FUZZ_CHECK(own.ok(), "allocating the reference graph failed: " + own.status().to_string());
  const Status filled = ref.fill_data();
  FUZZ_CHECK(filled.ok(), "filling the reference graph failed: " + filled.to_string());
  Backend& be = reference_backend();
  const ComputeStatus cs = be.graph_compute(*ref.graph);
  FUZZ_CHECK(cs == ComputeStatus::kSuccess, "the reference computation failed: " + be.last_error());
  std::vector<std::vector<float>> out;
  for (const Tensor* t : ref.outputs) {
    auto v = tensor_to_f32(*t);
    FUZZ_CHECK(v.ok(), "reading a reference output failed: " + v.status().to_string());
    out.push_back(std::move(v).value());
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  fuzz::ByteReader in(data, size);
  const Setup setup = decode_setup(in);
  graphgen::GraphDesc desc = graphgen::desc_from_bytes(in.rest_data(), in.rest_size());
  if (desc.steps.size() > kMaxSteps) desc.steps.resize(kMaxSteps);

  auto created = sim::Simulator::create(setup.topology, setup.options, &builtin_registry());
  FUZZ_CHECK(created.ok(), "the fuzzer's topology was refused: " + created.status().to_string());
  std::unique_ptr<sim::Simulator> simulator = std::move(created).value();
  // What Simulator::make_backends() does (one backend per device, in order), except that the wrapped CPU runs on one
  // thread: a thread pool started and stopped for every input would cost more than the rest of the run.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  for (size_t i = 0; i < simulator->device_count(); ++i) {
    const bool wrapped = !simulator->device_config(i).wraps.empty();
    auto made = simulator->device(i)->init_backend(wrapped ? "n_threads=1" : "");
    FUZZ_CHECK(made.ok(), "init_backend failed: " + made.status().to_string());
    backends.push_back(std::move(made).value());
    raw.push_back(backends.back().get());
  }

  Device* weight_dev = simulator->device(static_cast<size_t>(setup.weight_device));
  BufferType* weight_buft = weight_dev->buffer_type();
  if (setup.weight_host && weight_dev->host_buffer_type() != nullptr) weight_buft = weight_dev->host_buffer_type();

  {
    graphgen::BuiltGraph g = graphgen::build(desc, {.weight_buft = weight_buft});
    if (!g.ok()) {
      // Only the weights' allocation may fail (a small device); the description itself is always valid.
      FUZZ_CHECK(g.status.code() == StatusCode::kAllocFailed,
                 "graph_gen failed: " + g.status.to_string() + "\n" + describe(setup, desc, g));
      return 0;
    }
    auto context = [&] { return describe(setup, desc, g); };  // only built for a failure message
    SchedulerParams params;
    params.parallel = setup.parallel;
    params.op_offload = setup.op_offload;
    params.max_split_inputs = setup.max_split_inputs;
    auto sched_or = Scheduler::create(raw, params);
    FUZZ_CHECK(sched_or.ok(), "Scheduler::create failed: " + sched_or.status().to_string() + "\n" + context());
    std::unique_ptr<Scheduler> sched = std::move(sched_or).value();

    const Status allocated = sched->alloc_graph(*g.graph);
    if (!allocated.ok()) {
      // Legitimate refusals: a device too small, or a tensor pre-allocated where no backend can run the op that
      // writes it (a device that supports nothing, say).
      const bool refused = allocated.code() == StatusCode::kAllocFailed ||
                           (allocated.code() == StatusCode::kUnsupported &&
                            allocated.message().find("pre-allocated") != std::string::npos);
      FUZZ_CHECK(refused,
                 "alloc_graph failed other than by running out of memory: " + allocated.to_string() + "\n" + context());
      return 0;
    }

    // Assignment and splits.
    const Graph& graph = *g.graph;
    for (const Tensor* n : graph.nodes()) {
      const TensorExplain e = sched->explain(n);
      FUZZ_CHECK(e.backend >= 0 && e.backend < sched->n_backends(),
                 std::string("node '") + n->name + "' has no backend\n" + context());
      if (op_is_view(n->op)) continue;
      FUZZ_CHECK(sched->backend(e.backend)->supports_op(*n),
                 std::string("node '") + n->name + "' (" + op_name(n->op) + ") is on " + e.backend_name +
                     ", which does not support it\n" + sched->report() + context());
    }
    // Splits are contiguous and end at the last node; the nodes before the first split are views (they compute
    // nothing and belong to it).
    const auto splits = sched->splits();
    size_t next = splits.empty() ? graph.n_nodes() : splits.front().i_start;
    for (size_t i = 0; i < next; ++i) {
      FUZZ_CHECK(op_is_view(graph.node(i)->op),
                 "a computing node before the first split\n" + sched->report() + context());
    }
    for (const auto& split : splits) {
      FUZZ_CHECK(split.i_start == next && split.i_end > split.i_start,
                 "the splits do not cover the graph in order\n" + sched->report() + context());
      FUZZ_CHECK(static_cast<int>(split.inputs.size()) <= setup.max_split_inputs,
                 "a split has more inputs than max_split_inputs\n" + sched->report() + context());
      next = split.i_end;
    }
    FUZZ_CHECK(next == graph.n_nodes(), "the splits do not cover the graph\n" + sched->report() + context());

    // Compute and compare.
    const Status filled = g.fill_data();
    FUZZ_CHECK(filled.ok(), "filling the leafs failed: " + filled.to_string() + "\n" + context());
    const ComputeStatus cs = sched->graph_compute(*g.graph);
    FUZZ_CHECK(cs == ComputeStatus::kSuccess, std::string("compute failed: ") + compute_status_name(cs) + ": " +
                                                  sched->last_error() + "\n" + sched->report() + context());
    simulator->finish();
    FUZZ_CHECK(simulator->races().empty(), "races:\n" + simulator->races_report() + "\n" + sched->report() + context());
    FUZZ_CHECK(simulator->errors().empty(), "simulator error: " + simulator->errors().front() + "\n" + context());

    const std::vector<std::vector<float>> want = reference_outputs(desc);
    FUZZ_CHECK(want.size() == g.outputs.size(), "the reference has other outputs (generator bug)");
    const std::unordered_set<const Tensor*> skip = order_dependent(graph);
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      const Tensor* out = g.outputs[i];
      if (skip.count(out) != 0 || (out->view_src != nullptr && skip.count(out->view_src) != 0)) continue;
      auto got = tensor_to_f32(*out);
      FUZZ_CHECK(got.ok(),
                 "reading an output failed: " + got.status().to_string() + "\n" + sched->report() + context());
      FUZZ_CHECK(got->size() == want[i].size(), "an output has another size than the reference");
      double err = 0, norm = 0;
      for (size_t k = 0; k < got->size(); ++k) {
        const double w = want[i][k];
        const double v = (*got)[k];
        if (!std::isfinite(w)) continue;
        FUZZ_CHECK(std::isfinite(v), std::string("output '") + out->name + "' element " + std::to_string(k) + " is " +
                                         std::to_string(v) + ", the reference " + std::to_string(w) + "\n" +
                                         sched->report() + context());
        err += (v - w) * (v - w);
        norm += w * w;
      }
      const double nmse = err / std::max(norm, 1e-12);
      FUZZ_CHECK(nmse <= kMaxNmse, std::string("output '") + out->name + "' differs from the CPU reference: nmse " +
                                       std::to_string(nmse) + "\n" + sched->report() + context());
    }
  }  // the graph's buffers go before the scheduler's backends and the simulator
  return 0;
}
