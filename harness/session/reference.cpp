// The CPU oracle of simulated runs (see tessera/harness/session/reference.h).
#include "tessera/harness/session/reference.h"

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/planner.h"
#include "tessera/graph_copy.h"

namespace tessera::harness {

Result<std::vector<float>> cpu_reference_logits(const models::LlamaConfig& config, uint64_t seed) {
  return cpu_reference_logits(config, seed, seed);
}

Result<std::vector<float>> cpu_reference_logits(const models::LlamaConfig& config, uint64_t seed, uint64_t input_seed) {
  // One tensor per weight: the layers and the output head read the originals, not the copies a placement makes
  // (LlamaConfig::output_copy, rope_factor_copy), so a copy that does not hold its original's values shows.
  models::LlamaConfig plain = config;
  plain.output_copy = false;
  plain.rope_factor_copy.clear();
  auto built = models::build_llama(plain);
  if (!built.ok()) return built.status();
  models::LlamaGraph m = std::move(built).value();
  auto wb = alloc_ctx_tensors(*m.weights_ctx, *cpu::buffer_type());
  if (!wb.ok()) return wb.status();
  auto cb = alloc_ctx_tensors(*m.cache_ctx, *cpu::buffer_type());
  if (!cb.ok()) return cb.status();
  GraphPlanner planner(cpu::buffer_type());
  TS_RETURN_IF_ERROR(models::fill_random(m, seed));
  TS_RETURN_IF_ERROR(planner.alloc_graph(*m.graph));
  TS_RETURN_IF_ERROR(models::set_inputs(m, models::default_inputs(plain, input_seed)));
  auto backend = cpu::make_backend();
  if (backend->graph_compute(*m.graph) != ComputeStatus::kSuccess) {
    return Status(StatusCode::kFailed, "CPU reference: " + backend->last_error());
  }
  return tensor_to_f32(*m.logits);
}

}  // namespace tessera::harness
