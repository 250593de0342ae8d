// Fuzz target: tensor parallelism on simulated GPUs (issue 47; docs/tensor-parallel.md, docs/fuzzing.md). Bytes -> a
// llama model (one of the architecture presets, with drawn layer count, KV heads, GQA group, head size, width, FFN
// width, weight type and token count), 1 to 8 simulated GPUs (asynchronous or not, with events or without, plus the
// wrapped CPU), -ts shares (zeros included), -ngl and -ncmoe, and a lifecycle of steps -> `tessera run -sm tensor`'s
// path (llama::run_tensor_parallel: the meta device under the scheduler, the token embedding on the CPU, the ring
// AllReduce), memory-backed -> invariants:
//   - the run succeeds, or refuses with kInvalidArgument (a split ggml's rules cannot make: e.g. a single KV head);
//   - the logits equal the model computed whole on one CPU backend (NMSE <= 1e-6, issue 47's target), with no
//     NaN/Inf mismatch;
//   - the simulator's hazard detector reports no race and no error.
// Layout of the input: one field after another (fuzz_input.h ByteReader; missing bytes read as zero).
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tessera/builtin.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/models/llama.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  fuzz::ByteReader in(data, size);
  static const char* const kArchs[] = {"tiny",          "tiny-moe",    "tiny-qwen2", "tiny-qwen3",
                                       "tiny-qwen3moe", "tiny-gemma3", "tiny-phi3",  "tiny-gpt-oss"};
  static const Type kTypes[] = {Type::kF32, Type::kF16, Type::kQ8_0, Type::kQ4_0};
  const std::string arch = in.pick(kArchs);
  harness::SessionConfig c;
  c.model = models::preset(arch).value();
  c.model.llama_cpp = llama::llama_cpp_graph(llama::kLlamaCppNewestBuild);
  c.model.flash_attn = true;
  if (arch != "tiny-gemma3" && arch != "tiny-gpt-oss") c.model.n_layer = static_cast<int>(in.in_range(1, 2));
  c.model.n_head_kv = in.in_range(2, 4);
  c.model.n_head = c.model.n_head_kv * in.in_range(1, 2);
  c.model.n_embd_head = in.flag() ? 64 : 32;
  c.model.n_embd = 32 * in.in_range(2, 8);
  c.model.n_ff = 128 * in.in_range(1, 4);
  c.model.n_tokens = in.in_range(1, 8);
  c.model.weight_type = in.pick(kTypes);
  c.model_seed = static_cast<uint64_t>(in.in_range(1, 1 << 20));
  if (!models::validate(c.model).ok() || !models::build_llama(c.model).ok()) return 0;
  // the GPUs: 1gpu's GPU n times, then its CPU
  const sim::TopologyConfig one = harness::topology_preset("1gpu").value();
  const size_t n = static_cast<size_t>(in.in_range(1, 8));
  const bool async = in.flag();
  const bool events = in.flag();
  c.topology.name = "fuzz-tensor-parallel";
  for (size_t j = 0; j < n; ++j) {
    sim::DeviceConfig d = one.devices[0];
    d.name = "gpu" + std::to_string(j);
    d.caps.async = async;
    d.caps.events = async && events;
    c.topology.devices.push_back(d);
  }
  c.topology.devices.push_back(one.devices[1]);
  if (in.flag()) {
    for (size_t j = 0; j < n; ++j) c.policy.tensor_split.push_back(static_cast<double>(in.in_range(0, 3)));
  }
  // -ngl (layers left on the CPU, their KV cache too) and -ncmoe (experts kept on the CPU), drawn after the rest
  if (in.flag()) c.policy.n_gpu_layers = static_cast<int>(in.in_range(0, c.model.n_layer + 1));
  if (c.model.n_expert > 0 && in.flag()) {
    (void)harness::apply_policy_option("n_cpu_moe", std::to_string(in.in_range(1, c.model.n_layer)), &c.policy);
  }
  c.policy.split_mode = harness::SplitMode::kTensor;
  // a lifecycle of steps (a scenario's run.steps), drawn last: 1 to 6 of reserve, alloc, compute, synchronize, reset
  // and compute-again (only after a compute with nothing but synchronizes since), then a compute and a synchronize
  using Step = harness::Session::Step;
  std::vector<harness::Session::StepSpec> steps;
  if (in.flag()) {
    static const Step kSteps[] = {Step::kReserve,     Step::kAlloc, Step::kCompute,
                                  Step::kSynchronize, Step::kReset, Step::kComputeAgain};
    bool computed = false;
    for (int64_t i = 0, k = in.in_range(1, 6); i < k; ++i) {
      Step st = in.pick(kSteps);
      if (st == Step::kComputeAgain && !computed) st = Step::kCompute;
      computed = st == Step::kCompute || st == Step::kComputeAgain || (st == Step::kSynchronize && computed);
      steps.push_back({st, false, {}});
    }
    steps.push_back({Step::kCompute, false, {}});
    steps.push_back({Step::kSynchronize, false, {}});
  }
  auto r = llama::run_tensor_parallel(c, &builtin_registry(), 1, {}, steps);
  if (!r.ok()) {
    FUZZ_CHECK(r.status().code() == StatusCode::kInvalidArgument,
               arch + " over " + std::to_string(n) + " GPUs: " + r.status().to_string());
    return 0;
  }
  FUZZ_CHECK(r->checked && r->nmse.nmse <= 1e-6 && !r->nmse.nan_mismatch,
             arch + " over " + std::to_string(n) + " GPUs: logits NMSE " + std::to_string(r->nmse.nmse));
  FUZZ_CHECK(r->sim->races().empty(), arch + ": " + r->sim->races_report(3));
  FUZZ_CHECK(r->sim->errors().empty(), arch + ": " + r->sim->errors().front());
  return 0;
}
