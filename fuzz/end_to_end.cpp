// Fuzz target: the whole pipeline on simulated devices (docs/fuzzing.md). Bytes -> a topology and a lifecycle from
// the configuration space the property tests draw from too (tests/support/config_space.h: 0 to 15 simulated devices
// -- GPUs, host-memory accelerators, unified memory, a remote host -- with op-support gaps, capacities, copies and
// events on or off, links, a padded buffer type, then the wrapped CPU; reserve or not, serial or parallel with 1 to 4
// copy slots, 1 to 8 evaluations, plan reuse on or off, a reserve in flight, an allocation failing part-way, the
// graph computed again without alloc_graph nor inputs), a policy (op_offload, max_split_inputs), a random valid graph
// (graph_gen) whose external leafs (weights) live in one chosen buffer type -> Scheduler over the simulator's
// backends -> the lifecycle (alloc_graph, inputs, compute per evaluation, the computes again after the one in the
// middle, without a synchronize between them) in memory-backed mode -> invariants:
//   - the scheduler either succeeds or refuses with an error status: an allocation failure (a device too small, or
//     the injected one) or a tensor pre-allocated where no backend can run the op that writes it;
//   - every node runs on a backend that supports it; the splits cover the graph in order (leading views aside); no
//     split has more inputs than max_split_inputs;
//   - the simulator's hazard detector reports no race (the scheduler's own event flow is race free) and no error;
//   - every OUTPUT equals the same graph computed on the plain CPU backend (normalised squared error <= 1e-3;
//     elements where the reference is NaN or infinite are skipped). Graphs with ARGSORT or TOP_K are compared only
//     when no output depends on them (an order flipped by rounding is no bug); with several evaluations, only when
//     the graph writes into no weight, and after a compute-again into no leaf (the reference computes once).
// Not drawn here (the property tests reach them): the second graph (alternating, or reserved in flight).
// Layout of the input: the configuration's choices first (config_space.h ByteChoices, then the policy, the weights'
// buffer type and the simulator's seed), then the graph description (graph_gen desc_from_bytes, at most kMaxSteps
// steps).
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
#include "support/config_space.h"
#include "support/graph_gen.h"
#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/sched.h"
#include "tessera/sim/simulator.h"
#include "tessera/builtin.h"
#include "tessera/harness/placement/policy.h"

namespace {

using namespace tessera;

constexpr size_t kMaxSteps = 24;  // small graphs: the fuzzer's speed matters more than their size
constexpr double kMaxNmse = 1e-3;

namespace space = tessera::test::space;

struct Setup {
  space::TopologySpec spec;
  space::LifecycleSpec lifecycle;
  sim::TopologyConfig topology;
  sim::SimOptions options;
  bool op_offload = true;
  int max_split_inputs = 30;
  int weight_target = 0;  // index into space::placement_targets: the buffer type holding the external leafs
};

Setup decode_setup(space::ByteChoices& in) {
  Setup s;
  s.spec = space::draw_topology(in);
  s.lifecycle = space::draw_lifecycle(in);
  s.lifecycle.alternate = false;  // (no second graph here)
  s.lifecycle.next_in_flight = false;
  s.lifecycle.per_evaluation_inputs = false;  // (every evaluation writes the same inputs)
  s.topology = space::make_topology(s.spec, "fuzz/end_to_end.cpp");
  s.op_offload = in.flag();
  s.max_split_inputs = static_cast<int>(in.in_range(10, 30));
  s.weight_target = static_cast<int>(in.in_range(0, 255));
  s.options.seed = 1 + static_cast<uint64_t>(in.in_range(0, 255));
  s.options.adversarial = in.flag();
  s.options.record_trace = false;
  s.options.faults.fail_alloc_nth = s.lifecycle.fail_alloc_nth;
  return s;
}

std::string describe(const Setup& s, const graphgen::GraphDesc& desc, const graphgen::BuiltGraph& g) {
  std::ostringstream os;
  os << "devices:";
  for (const auto& d : s.topology.devices) {
    os << " " << d.name << "(" << device_type_name(d.type) << ", mem " << d.memory << ", align " << d.alignment
       << ", host_visible " << d.host_visible << (d.unified ? ", unified" : "") << (d.host.empty() ? "" : ", remote")
       << ", events " << d.caps.events << ", async " << d.caps.async << ", cpy_tensor_async " << d.cpy_tensor_async
       << ", rules " << d.op_rules.size() << ", buffer types " << d.buffer_types.size() << ", offload "
       << d.offload.enabled << ")";
  }
  const space::LifecycleSpec& l = s.lifecycle;
  os << (s.spec.links ? " (linked)" : "") << "\npolicy: op_offload " << s.op_offload << ", max_split_inputs "
     << s.max_split_inputs << ", weights in target " << s.weight_target << ", sim seed " << s.options.seed
     << (s.options.adversarial ? " adversarial" : "") << "\nlifecycle: reserve " << l.reserve << ", parallel "
     << l.parallel << " (" << l.n_copies << " copies), evaluations " << l.evaluations << ", reuse " << l.reuse
     << ", reserve in flight " << l.reserve_in_flight << ", fail_alloc_nth " << l.fail_alloc_nth << ", computes again "
     << l.again << " (after evaluation " << (std::max(l.evaluations, 1) - 1) / 2 << ")\n"
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
  space::ByteChoices in(data, size);
  const Setup setup = decode_setup(in);
  graphgen::GraphDesc desc = graphgen::desc_from_bytes(data + in.consumed(), size - in.consumed());
  if (desc.steps.size() > kMaxSteps) desc.steps.resize(kMaxSteps);
  space::record_buckets("fuzz:end_to_end", space::buckets_of(setup.spec, setup.lifecycle));

  auto created = sim::Simulator::create(setup.topology, setup.options, &builtin_registry());
  FUZZ_CHECK(created.ok(), "the fuzzer's topology was refused: " + created.status().to_string());
  std::unique_ptr<sim::Simulator> simulator = std::move(created).value();
  // What Simulator::make_backends() does (one backend per device, in order), except that the wrapped CPU runs on one
  // thread: a thread pool started and stopped for every input would cost more than the rest of the run.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<Backend*> raw;
  std::vector<Device*> devices;
  for (size_t i = 0; i < simulator->device_count(); ++i) {
    const bool wrapped = !simulator->device_config(i).wraps.empty();
    auto made = simulator->device(i)->init_backend(wrapped ? "n_threads=1" : "");
    if (!made.ok() && made.status().code() == StatusCode::kAllocFailed) return 0;  // the injected allocation failure
    FUZZ_CHECK(made.ok(), "init_backend failed: " + made.status().to_string());
    backends.push_back(std::move(made).value());
    raw.push_back(backends.back().get());
    devices.push_back(simulator->device(i));
  }

  const std::vector<std::string> targets = space::placement_targets(setup.spec);
  const std::string& target = targets[static_cast<size_t>(setup.weight_target) % targets.size()];
  BufferType* weight_buft = harness::find_override_target(devices, target);
  FUZZ_CHECK(weight_buft != nullptr, "no buffer type " + target + " (generator bug)");

  {
    graphgen::BuiltGraph g = graphgen::build(
        desc, {.weight_buft = weight_buft,
               .planned_leafs_are_inputs = setup.lifecycle.evaluations > 1 || setup.lifecycle.again > 0});
    if (!g.ok()) {
      // Only the weights' allocation may fail (a small device, the injected failure); the description itself is
      // always valid.
      FUZZ_CHECK(g.status.code() == StatusCode::kAllocFailed,
                 "graph_gen failed: " + g.status.to_string() + "\n" + describe(setup, desc, g));
      return 0;
    }
    auto context = [&] { return describe(setup, desc, g); };  // only built for a failure message
    SchedulerParams params;
    params.parallel = setup.lifecycle.parallel;
    params.n_copies = setup.lifecycle.n_copies;
    params.reuse = setup.lifecycle.reuse;
    params.op_offload = setup.op_offload;
    params.max_split_inputs = setup.max_split_inputs;
    auto sched_or = Scheduler::create(raw, params);
    if (!sched_or.ok() && sched_or.status().code() == StatusCode::kAllocFailed) return 0;
    FUZZ_CHECK(sched_or.ok(), "Scheduler::create failed: " + sched_or.status().to_string() + "\n" + context());
    std::unique_ptr<Scheduler> sched = std::move(sched_or).value();

    // Legitimate refusals: a device too small (or the injected failure), or a tensor pre-allocated where no backend
    // can run the op that writes it (a device that supports nothing, say).
    auto refused = [](const Status& st) {
      return st.code() == StatusCode::kAllocFailed ||
             (st.code() == StatusCode::kUnsupported && st.message().find("pre-allocated") != std::string::npos);
    };
    // The leafs the application writes before each evaluation: every one but the weights (their memory is the
    // scheduler's, so their bytes may have been reused since).
    std::unordered_set<const Tensor*> weights(g.externals.begin(), g.externals.end());
    bool writes_weights = false, writes_leafs = false;
    for (const Tensor* n : g.graph->nodes()) {
      const Tensor* r = n;
      while (r->view_src != nullptr) r = r->view_src;
      const bool writes = r != n && !op_is_view(n->op);
      writes_weights = writes_weights || (writes && weights.count(r) != 0);
      writes_leafs = writes_leafs || (writes && r->op == Op::kNone);
    }
    if (setup.lifecycle.reserve) {
      const Status reserved = sched->reserve(*g.graph);
      if (!reserved.ok()) {
        FUZZ_CHECK(refused(reserved), "reserve failed: " + reserved.to_string() + "\n" + context());
        return 0;
      }
    }
    const int evaluations = std::max(setup.lifecycle.evaluations, 1);
    for (int e = 0; e < evaluations; ++e) {
      const Status allocated = sched->alloc_graph(*g.graph);
      if (!allocated.ok()) {
        FUZZ_CHECK(refused(allocated), "alloc_graph failed other than by running out of memory: " +
                                           allocated.to_string() + "\n" + context());
        (void)sched->synchronize();
        return 0;
      }
      const Status filled = e == 0 ? g.fill_data() : g.fill_data(&weights);
      FUZZ_CHECK(filled.ok(), "filling the leafs failed: " + filled.to_string() + "\n" + context());
      const ComputeStatus cs = sched->graph_compute_async(*g.graph);
      FUZZ_CHECK(cs == ComputeStatus::kSuccess, std::string("compute failed: ") + compute_status_name(cs) + ": " +
                                                    sched->last_error() + "\n" + sched->report() + context());
      // the same graph again, without alloc_graph and without writing the inputs (config_space.h lifecycle_steps)
      for (int k = 0; e == (evaluations - 1) / 2 && k < setup.lifecycle.again; ++k) {
        const ComputeStatus again = sched->graph_compute_async(*g.graph);
        if (again == ComputeStatus::kAllocFailed) {  // (it allocates the graph itself: the injected failure may hit)
          FUZZ_CHECK(setup.lifecycle.fail_alloc_nth > 0, "compute again ran out of memory where alloc_graph did not: " +
                                                             sched->last_error() + "\n" + context());
          (void)sched->synchronize();
          return 0;
        }
        FUZZ_CHECK(again == ComputeStatus::kSuccess, std::string("compute again failed: ") +
                                                         compute_status_name(again) + ": " + sched->last_error() +
                                                         "\n" + sched->report() + context());
      }
      if (setup.lifecycle.reserve_in_flight && e == (evaluations - 2) / 2 && e + 1 < evaluations) {
        const Status reserved = sched->reserve(*g.graph);
        if (!reserved.ok()) {
          FUZZ_CHECK(refused(reserved), "reserve in flight failed: " + reserved.to_string() + "\n" + context());
          (void)sched->synchronize();
          return 0;
        }
      }
    }
    const Status synced = sched->synchronize();
    FUZZ_CHECK(synced.ok(), "synchronize failed: " + synced.to_string() + "\n" + context());

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

    // Races, errors, outputs.
    simulator->finish();
    FUZZ_CHECK(simulator->races().empty(), "races:\n" + simulator->races_report() + "\n" + sched->report() + context());
    FUZZ_CHECK(simulator->errors().empty(), "simulator error: " + simulator->errors().front() + "\n" + context());

    // the reference computes once: a weight written by an evaluation is not what it started from, nor, after a
    // compute-again, an input written by the evaluation before (the inputs are written again before each evaluation)
    if ((evaluations > 1 && writes_weights) || (setup.lifecycle.again > 0 && writes_leafs)) return 0;
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
