// What session.cpp and session_run.cpp share (not part of the harness's interface).
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/harness/session/session.h"

namespace tessera::harness {

// The layer count of a serialized graph's placement: one more than the highest layer its weights name ("blk.N.",
// "cache_k_lN"; layer_of_name), 0 for none.
int layer_count(const std::vector<Tensor*>& weights);

// Out of host memory in memory-backed mode: the error says the way out, metadata-only mode.
Status with_metadata_hint(Status s, const SessionConfig& config);

// The outputs the run's evaluations should have left, computed on the plain CPU backend: `computes` says for each
// evaluation whether it was the next graph, whether its inputs were written (with the seed it says) or left as the
// evaluation before left them (a compute-again); none: one evaluation with model_seed's inputs.
Result<std::vector<float>> cpu_reference(const SessionConfig& config, const std::vector<Session::Evaluation>& computes);

}  // namespace tessera::harness
