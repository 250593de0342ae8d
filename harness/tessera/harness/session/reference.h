// The oracle of simulated runs: the same model computed on the plain CPU backend with the reference kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/status.h"

namespace tessera::harness {

// The model built, filled (models::fill_random and models::default_inputs with `seed`) and computed on the plain CPU
// backend; returns the logits. The copies of shared weights a placement makes (LlamaConfig::output_copy,
// rope_factor_copy) are left out: every layer reads the original. Errors: an invalid config, an allocation or compute
// failure.
Result<std::vector<float>> cpu_reference_logits(const models::LlamaConfig& config, uint64_t seed);
// The same with the inputs (models::default_inputs) from `input_seed` and the weights and cache from `seed` (a run
// whose inputs differ per evaluation, SessionConfig::per_evaluation_inputs).
Result<std::vector<float>> cpu_reference_logits(const models::LlamaConfig& config, uint64_t seed, uint64_t input_seed);

}  // namespace tessera::harness
