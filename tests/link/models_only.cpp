// Links only tessera::models and the core: building a model's graph needs no backend, simulator or harness.
#include <cstdio>

#include "tessera/models/llama.h"

int main() {
  auto config = tessera::models::preset("tiny");
  if (!config.ok()) return 1;
  auto model = tessera::models::build_llama(config.value());
  if (!model.ok()) {
    std::fprintf(stderr, "models_only: %s\n", model.status().to_string().c_str());
    return 1;
  }
  // tiny: 2 layers of 9 weights each, plus token_embd, output_norm and output (models/llama.h).
  const size_t n_weights = model.value().weights.size();
  if (n_weights != 2 * 9 + 3) {
    std::fprintf(stderr, "models_only: %zu weights, expected 21\n", n_weights);
    return 1;
  }
  std::printf("models_only: ok (tiny: %zu nodes)\n", model.value().graph->n_nodes());
  return 0;
}
