// Deterministic data for the leafs of an arbitrary graph (a serialized graph run by a scenario, a property test's
// random graph): what a leaf feeds decides what values it gets, so every graph computes something meaningful.
//   - ids of GET_ROWS (src1): integers in [0, rows of the table);
//   - ids of SET_ROWS (src2): integers in [0, rows of the destination), distinct within each row of ids;
//   - ids of MUL_MAT_ID (src2): expert indices in [0, experts), distinct within each row (a token's experts);
//   - ids of ADD_ID (src2): integers in [0, rows of the biases);
//   - positions of ROPE (src1): small increasing integers; its frequency factors (src2): floats in [0.5, 2);
//   - everything else: floats of magnitude [0.25, 1] with random signs (never zeros).
// A leaf used in several ways takes the first rule above that applies; a leaf reached through views counts as used
// by the view's consumers. The values depend only on (seed, key), so two copies of a graph (the simulated run and the
// CPU reference) filled with the same seed and keys hold the same data.
#pragma once

#include <cstdint>
#include <vector>

#include "tessera/graph.h"
#include "tessera/status.h"

namespace tessera::harness {

enum class LeafFill { kFloat, kPositive, kIds, kDistinctIds, kPositions };

struct LeafData {
  Tensor* tensor = nullptr;
  LeafFill kind = LeafFill::kFloat;
  int64_t bound = 1;  // ids: values in [0, bound)
};

// The fill rule of each leaf in `leafs` (same order), from its consumers in `graph`.
std::vector<LeafData> infer_leaf_data(const Graph& graph, const std::vector<Tensor*>& leafs);

// Writes the values of one leaf (its buffer must be allocated). key: a stable identity of the leaf (e.g. its id in
// the serialized graph). Errors: the tensor's write error.
Status fill_leaf(const LeafData& leaf, uint64_t seed, uint64_t key);

}  // namespace tessera::harness
