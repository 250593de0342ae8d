// Buffer type rules of simulated devices (docs/topology.md, "Buffer types and padding"): per-tensor padding (a buffer
// type's alloc_size > nbytes, as ggml's get_alloc_size pads quantized rows on CUDA) and extra buffer types for weights
// with op rules of their own (ggml's extra buffer types, e.g. CPU_REPACK). Plain data plus the matching functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "tessera/ops.h"
#include "tessera/sim/op_rules.h"
#include "tessera/tensor.h"
#include "tessera/types.h"

namespace tessera::sim {

// Bytes a buffer type adds to a tensor. A rule matches a tensor when every field that is set matches (empty lists are
// unset); the first rule that matches decides, and a tensor no rule matches gets no padding.
struct PaddingRule {
  std::vector<Op> ops;      // the tensor's own op (NONE for weights, caches and other leafs)
  std::vector<Type> types;  // the tensor's type
  // Pad the last row: when ne[0] % row_multiple != 0, add the bytes of (row_multiple - ne[0] % row_multiple) values
  // (whole blocks of a quantized type), like CUDA's MATRIX_ROW_PADDING. 0: unset.
  int64_t row_multiple = 0;
  size_t extra = 0;  // a fixed number of bytes added after the tensor
  // A FLASH_ATTN_EXT node: room after its output (padded to 128 bytes) for f16 copies of K and V when they are not f16
  // (each padded to 128 bytes; none for a V that views K), as ggml-cuda's buffer type reserves it for its batch
  // kernels from build 9489 (ggml_cuda_flash_attn_ext_get_alloc_size, PR #23907): above 2 query rows the tile and
  // tensor-core kernels read f16 K and V; with 1 or 2 rows the vector kernel reads quantized ones and copies only f32.
  bool f16_kv_copies = false;
  // ggml-metal's buffer types (ggml_backend_metal_buffer_type_get_alloc_size, ggml-metal.cpp and ggml-metal-ops.cpp
  // at llama.cpp build 8198): room for the kernels' fleeting data after some nodes. MUL_MAT_ID: 4 B per expert and
  // 4 B per expert and token (n_expert = src0->ne[2], tokens = src2->ne[1]). FLASH_ATTN_EXT, always the non-vector
  // kernel's: padding 64 x (K's nb[1] x ne[2] x ne[3] + V's likewise + 2 x the mask's ne[1] x ne[2] x ne[3]), a block
  // map of ceil(Q's ne[1] / q) x ceil(the mask's ne[0] / c) x the mask's ne[2] x ne[3] bytes padded to 32 (q, c = 1,
  // 32 for the vector kernel: Q's ne[1] < 20 and a head size that 32 divides; else 8, 64), and a temp buffer of
  // 4 x min(Q's ne[1], 32) x Q's ne[2] x ne[3] x 32 x (V's ne[0] + 2) B. CUMSUM and ARGSORT: twice their size. TOP_K:
  // 8 B per element of its source (instead of its own size).
  bool metal_extras = false;
  std::string note;  // why the rule exists
};

// The largest padding values a topology may give (bounded so nbytes + padding stays far below 2^64).
constexpr int64_t kMaxRowMultiple = int64_t{1} << 20;
constexpr size_t kMaxPaddingExtra = size_t{1} << 30;

bool padding_rule_matches(const PaddingRule& rule, const Tensor& t);
// The bytes the first matching rule adds to t (0 when none matches).
size_t padding_bytes(const std::vector<PaddingRule>& rules, const Tensor& t);

// A second buffer type on a device, for weights the policy puts there (`-ot PATTERN=NAME`). Its memory counts against
// the device's; it is never host memory (its layout is the device kernels' own, like a repacked CPU weight), so no
// other device reads it directly and op offload never takes an op whose weight sits there. An op with a source in it
// runs on its device only when `op_rules` allow it (first match, else `default_allow`), besides the device's own rules.
struct BufferTypeConfig {
  std::string name;  // unique among the topology's devices and buffer types (case-insensitive), e.g. "CPU_REPACK"
  std::string description;
  std::vector<PaddingRule> padding;
  bool default_allow = true;
  std::vector<OpRule> op_rules;
};

// Whether the buffer type's op rules allow a node with a source in it (first matching rule, else the default); when
// `rule` is not null it receives the index of the deciding rule, or -1 for the default.
bool buffer_type_allows(const BufferTypeConfig& buft, const Tensor& node, int* rule = nullptr);

}  // namespace tessera::sim
