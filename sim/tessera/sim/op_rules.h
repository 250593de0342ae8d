// Op rules of simulated devices: which ops a device supports (OpRule lists, first match decides) and which ops it
// asks for when their weights sit in host memory (OffloadRule, the scheduler's op offload). Plain data plus the
// matching functions; the topology loader fills them from files (docs/topology.md, "Op rules").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ops.h"
#include "tessera/tensor.h"
#include "tessera/types.h"

namespace tessera::sim {

// One op-support rule. A rule matches a node when every field that is set matches (empty lists and zero limits are
// unset). Rules are tried in order; the first that matches decides (allow or deny); when none matches, the device's
// `default_allow` decides. Whatever the rules say, a simulated device never claims an op its kernels cannot compute.
struct OpRule {
  bool allow = true;
  std::vector<Op> ops;           // the node's op
  std::vector<Type> src0_types;  // the type of src[0]
  std::vector<Type> src1_types;  // the type of src[1]
  std::vector<Type> dst_types;   // the node's own type
  int64_t min_batch = 0;         // batch_size(node) >= min_batch
  int64_t max_batch = 0;         // batch_size(node) <= max_batch
  int64_t ne0_multiple = 0;      // node->src[0]->ne[0] (the node's own ne[0] when it has no source) % ne0_multiple == 0
  std::string note;              // why the rule exists (shown by explain tools)
};

// The type a metadata-only simulated device judges a storage-only type by (types.h, docs/simulator.md): block-quantized
// types -> q4_0, f64 -> f32, integer types -> i32. A type with kernels (or an invalid one) is returned as it is.
Type stand_in_type(Type type);

// The batch size an op works on (as used by offload rules): ne[2] for MUL_MAT_ID, else ne[1].
int64_t batch_size(const Tensor& op);
// A rule's list field: unset (empty), or v is one of its entries.
template <typename T>
bool listed_or_unset(const std::vector<T>& list, T v) {
  for (const T& x : list)
    if (x == v) return true;
  return list.empty();
}
// Whether rule matches op (all set fields hold).
bool rule_matches(const OpRule& rule, const Tensor& op);

// When the device asks for an op whose weights sit in host memory (the scheduler's op offload, docs/scheduler.md).
struct OffloadRule {
  bool enabled = false;
  int64_t min_batch = 32;  // batch_size(op) >= min_batch
  std::vector<Op> ops;     // empty: any op
  // The batch size as ggml-cuda's op offload takes it (ggml_offload_batch_size, tessera/backend.h) rather than
  // batch_size: what llama.cpp's CUDA backend asks for, ADD_ID and the norms' MUL by a host weight included.
  bool ggml_cuda_batch = false;
};

}  // namespace tessera::sim
