// The oracle of simulated runs: the same model computed on the plain CPU backend with the reference kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/status.h"

namespace tessera::harness {

// The model built, filled (models::fill_random and models::default_inputs with `seed`) and computed on the plain CPU
// backend; returns the logits. Errors: an invalid config, an allocation or compute failure.
Result<std::vector<float>> cpu_reference_logits(const models::LlamaConfig& config, uint64_t seed);

}  // namespace tessera::harness
