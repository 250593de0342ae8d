// Lifecycle properties of the scheduler that the scenario files cannot express (they never call
// Scheduler::reserve, and never change a placement while an evaluation is in flight): the tiny llama model split
// between an asynchronous simulated GPU (with events) and the wrapped CPU, a random simulator seed, adversarial or
// not, random pins. They kill mutants of tests/mutation (docs/testing.md, "Mutation testing"):
//
//   ReserveKeepsThePinsAndPlansOnce       reserve wiping the user's pins; a re-reserve every evaluation
//   ReplanWhileWorkIsInFlightIsRaceFree   re-reserving (alloc_graph or reserve) without synchronizing first: the old
//                                         compute buffers are freed while the GPU still uses them
#include <gtest/gtest.h>
#include <rapidcheck.h>
#include <rapidcheck/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "tessera/scenario/scenario.h"
#include "tessera/harness/session/session.h"
#include "tessera/builtin.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using namespace tessera::scenario;

namespace {

// A 2-layer model on a GPU and the CPU; make_session sets n_gpu_layers (llama.cpp's meaning: 1 offloads the output
// layer alone, 2 also layer 1).
constexpr const char* kScenario = R"({
  "version": 2,
  "name": "lifecycle",
  "topology": {"name": "gpu-async-cpu", "devices": [
    {"name": "gpu0", "type": "gpu", "memory": "1 GiB", "caps": {"async": true, "events": true}},
    {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true, "memory": "8 GiB",
     "caps": {"async": false, "events": false}}]},
  "model": {"preset": "tiny", "n_layer": 2, "n_tokens": 8},
  "policy": {"n_gpu_layers": 1},
  "expect": "nothing"
})";

// Layer-0 nodes (on the CPU unless pinned) and layer-1 nodes (on the GPU unless pinned).
const std::vector<std::string> kCpuNodes = {"attn_norm-0", "ffn_up-0", "ffn_gate-0", "ffn_out-0", "ffn_inp-0"};
const std::vector<std::string> kGpuNodes = {"attn_norm-1", "ffn_up-1", "ffn_gate-1", "ffn_out-1", "ffn_inp-1"};

std::unique_ptr<Session> make_session(uint64_t seed, bool adversarial, bool parallel, int n_gpu_layers = 1) {
  Result<Scenario> sc = parse_scenario(kScenario, "lifecycle (test)");
  RC_ASSERT(sc.ok());
  SessionConfig config = sc->config;
  config.sim.seed = seed;
  config.sim.adversarial = adversarial;
  config.policy.parallel = parallel;
  config.policy.n_gpu_layers = n_gpu_layers;
  Result<std::unique_ptr<Session>> s = Session::create(config, &builtin_registry());
  if (!s.ok()) RC_FAIL("session: " + s.status().message());
  return std::move(s).value();
}

Backend* backend_named(Scheduler& sched, const std::string& name) {
  for (int i = 0; i < sched.n_backends(); ++i) {
    if (name == sched.backend(i)->name()) return sched.backend(i);
  }
  RC_FAIL("no backend " + name);
}

void pin(Session& s, const std::string& node, const std::string& device) {
  Tensor* t = const_cast<Tensor*>(s.find_tensor(node));
  if (t == nullptr) RC_FAIL("no tensor " + node);
  RC_ASSERT(s.sched().set_tensor_backend(t, backend_named(s.sched(), device)).ok());
}

// The outputs equal the CPU reference (the same bound as the scenarios' default max_nmse).
void expect_reference_outputs(Session& s) {
  Result<std::vector<float>> want = s.reference_outputs();
  Result<std::vector<float>> got = s.read_outputs();
  RC_ASSERT(want.ok());
  RC_ASSERT(got.ok());
  RC_ASSERT(want->size() == got->size());
  double err = 0, norm = 0;
  for (size_t i = 0; i < want->size(); ++i) {
    const double w = (*want)[i], g = (*got)[i];
    RC_ASSERT(std::isfinite(g));
    err += (w - g) * (w - g);
    norm += w * w;
  }
  const double nmse = norm > 0 ? err / norm : err;
  if (!(nmse <= 1e-4)) RC_FAIL("outputs differ from the CPU reference: NMSE " + std::to_string(nmse));
}

void expect_no_race(Session& s) {
  s.sim().finish();
  if (!s.sim().races().empty()) {
    RC_FAIL(std::to_string(s.sim().races().size()) + " races; first:\n" + s.sim().races_report(1));
  }
  if (!s.sim().errors().empty()) RC_FAIL("simulator error: " + s.sim().errors().front());
}

}  // namespace

// reserve(measure graph) keeps the user's manual assignments (docs/scheduler.md), and evaluating the graph it was
// reserved for (any number of times) needs no further re-plan: the anchor wiped the pins at reserve, which forced a
// re-reserve at every evaluation.
RC_GTEST_PROP(SchedLifecycleProperties, ReserveKeepsThePinsAndPlansOnce, ()) {
  const auto seed = *rc::gen::inRange<uint64_t>(1, 1000000);
  const bool adversarial = *rc::gen::arbitrary<bool>();
  const bool parallel = *rc::gen::arbitrary<bool>();
  const int evaluations = *rc::gen::inRange(1, 4);
  const std::string to_gpu = *rc::gen::elementOf(kCpuNodes);
  const std::string to_cpu = *rc::gen::elementOf(kGpuNodes);
  std::unique_ptr<Session> s = make_session(seed, adversarial, parallel);
  pin(*s, to_gpu, "gpu0");
  pin(*s, to_cpu, "cpu");

  Status reserved = s->sched().reserve(s->graph());
  if (!reserved.ok()) RC_FAIL("reserve: " + reserved.message());
  RC_ASSERT(s->sched().reserve_count() == 1);
  Result<RunStats> r = s->run(evaluations, false);
  if (!r.ok()) RC_FAIL("run: " + r.status().message());

  for (const auto& [node, device] : {std::pair{to_gpu, std::string("gpu0")}, std::pair{to_cpu, std::string("cpu")}}) {
    const TensorExplain e = s->sched().explain(s->find_tensor(node));
    if (e.backend_name != device || e.cause != Cause::kPinned) {
      RC_FAIL(node + " is on " + e.backend_name + " (" + cause_name(e.cause) + "), pinned to " + device);
    }
  }
  if (s->sched().reserve_count() != 1) {
    RC_FAIL(std::to_string(s->sched().reserve_count()) + " compute-buffer plans for " + std::to_string(evaluations) +
            " evaluation(s) of the reserved graph, expected the reserve alone");
  }
  expect_no_race(*s);
  expect_reference_outputs(*s);
}

// A placement change while an evaluation is still in flight on the asynchronous GPU: the token embedding pinned to the
// GPU (which then needs a copy of the embedding table) grows the GPU's compute plan, so the next alloc_graph (or an
// explicit reserve) re-plans and replaces the GPU's compute buffers. Every backend must be synchronized first
// (docs/scheduler.md): the hazard detector sees the old buffer freed (a host write of all of it) while the GPU's queued
// work still reads and writes it, otherwise.
RC_GTEST_PROP(SchedLifecycleProperties, ReplanWhileWorkIsInFlightIsRaceFree, ()) {
  const auto seed = *rc::gen::inRange<uint64_t>(1, 1000000);
  const bool adversarial = *rc::gen::arbitrary<bool>();
  const bool explicit_reserve = *rc::gen::arbitrary<bool>();
  // Everything on the GPU but the token embedding (its weight is on the CPU): the evaluation ends on the GPU.
  std::unique_ptr<Session> s = make_session(seed, adversarial, false, -1);
  Scheduler& sched = s->sched();
  const size_t gpu_compute_before = [&] {
    RC_ASSERT(s->plan().ok());
    return sched.buffer_size(0);
  }();

  RC_ASSERT(s->set_inputs().ok());
  RC_ASSERT(sched.graph_compute_async(s->graph()) == ComputeStatus::kSuccess);  // in flight
  const int reserves_before = sched.reserve_count();
  pin(*s, "inp_embd", "gpu0");  // the GPU now needs a copy of the whole embedding table
  if (explicit_reserve) {
    Status reserved = sched.reserve(s->graph());
    if (!reserved.ok()) RC_FAIL("reserve: " + reserved.message());
  }
  Status planned = s->plan();  // alloc_graph: re-reserves when the pin moved a node to another buffer type
  if (!planned.ok()) RC_FAIL("alloc_graph: " + planned.message());
  RC_ASSERT(sched.reserve_count() > reserves_before);    // the case re-planned, as intended,
  RC_ASSERT(sched.buffer_size(0) > gpu_compute_before);  // and replaced the GPU's compute buffer
  RC_ASSERT(s->set_inputs().ok());
  RC_ASSERT(sched.graph_compute_async(s->graph()) == ComputeStatus::kSuccess);
  Status synced = sched.synchronize();
  if (!synced.ok()) RC_FAIL("synchronize: " + synced.message());
  expect_no_race(*s);
  expect_reference_outputs(*s);
}

// With parallel, the copy slot rotates at each allocation (0, 1, 2, 3, 0, ...), and a synchronize with nothing
// allocated (after reset) starts the rotation again at slot 0 (docs/scheduler.md). Every evaluation is still correct.
RC_GTEST_PROP(SchedLifecycleProperties, SlotsRotatePerAllocationAndRestartWhenIdle, ()) {
  const auto seed = *rc::gen::inRange<uint64_t>(1, 1000000);
  const int first = *rc::gen::inRange(1, 7);
  std::unique_ptr<Session> s = make_session(seed, true, true);
  Scheduler& sched = s->sched();
  RC_ASSERT(sched.n_copies() == 4);
  for (int i = 0; i < first; ++i) {
    Status planned = s->plan();
    if (!planned.ok()) RC_FAIL("alloc_graph: " + planned.message());
    if (sched.current_slot() != i % 4) {
      RC_FAIL("allocation " + std::to_string(i) + " uses slot " + std::to_string(sched.current_slot()));
    }
    RC_ASSERT(s->set_inputs().ok());
    RC_ASSERT(sched.graph_compute_async(s->graph()) == ComputeStatus::kSuccess);
  }
  RC_ASSERT(sched.synchronize().ok());
  expect_reference_outputs(*s);
  sched.reset();
  RC_ASSERT(sched.synchronize().ok());
  RC_ASSERT(s->plan().ok());
  if (sched.current_slot() != 0) {
    RC_FAIL("after reset and synchronize, the next allocation uses slot " + std::to_string(sched.current_slot()));
  }
  RC_ASSERT(s->set_inputs().ok());
  RC_ASSERT(sched.graph_compute(s->graph()) == ComputeStatus::kSuccess);
  expect_no_race(*s);
  expect_reference_outputs(*s);
}
