// Reference CPU kernels: one plain, obviously correct implementation of every op x type of docs/ops.md. They are the
// oracle the optimised kernels, simulated devices and CUDA are compared against, so clarity beats speed here.
#pragma once

#include "tessera/status.h"
#include "tessera/tensor.h"

namespace tessera::cpu::ref {

// Work partition: thread ith of nth computes its share of the output rows. The result never depends on nth.
struct ComputeParams {
  int ith = 0;
  int nth = 1;
};

// True when compute() can run this node (op known, source/result types and shapes within the table of
// docs/ops.md). View ops and leafs are "supported" (nothing to compute).
bool supports(const Tensor& node);

// Computes one node whose sources and result all have host-addressable data. Returns an error (never aborts) for
// run-time failures such as an index out of range; the message names the node.
Status compute(const Tensor& node, const ComputeParams& params);

}  // namespace tessera::cpu::ref
