// The GGUF tensor type table (docs/gguf.md, "Tensor types").
//
// Source of the numbers: the block structs of ggml's src/ggml-common.h (the same file as ggml/src/ggml-common.h in
// ggml-org/llama.cpp, which vendors ggml; read at llama.cpp commit 01243c587feceaa5d6a6c2305535ef2f549c48b8), where
// each struct has a static_assert on its size, and the ids of enum ggml_type in ggml/include/ggml.h (ids 40-42,
// nvfp4, q1_0 and q2_0, from the same header on llama.cpp's master). The block size is the struct's QK constant (QK_K
// = 256 for the k-quants, the iq types but iq4_nl, and the ternary types); the bytes per block are the sum of the
// struct's fields (ggml_half = 2 bytes). tests/unit/core/test_gguf.cpp checks every row against that sum written out
// field by field. The removed ids keep their names for error messages.
#include <cstring>
#include <limits>

#include "tessera/gguf.h"

namespace tessera::gguf {

namespace {

//  id  name        values/block  bytes/block  removed
constexpr TypeInfo kTypes[kMaxTypeId + 1] = {
    {0, "f32", 1, 4, false},         {1, "f16", 1, 2, false},
    {2, "q4_0", 32, 18, false},  // d, qs[16]
    {3, "q4_1", 32, 20, false},  // d, m, qs[16]
    {4, "q4_2", 0, 0, true},         {5, "q4_3", 0, 0, true},
    {6, "q5_0", 32, 22, false},       // d, qh[4], qs[16]
    {7, "q5_1", 32, 24, false},       // d, m, qh[4], qs[16]
    {8, "q8_0", 32, 34, false},       // d, qs[32]
    {9, "q8_1", 32, 36, false},       // d, s, qs[32]
    {10, "q2_k", 256, 84, false},     // scales[16], qs[64], d, dmin
    {11, "q3_k", 256, 110, false},    // hmask[32], qs[64], scales[12], d
    {12, "q4_k", 256, 144, false},    // d, dmin, scales[12], qs[128]
    {13, "q5_k", 256, 176, false},    // d, dmin, scales[12], qh[32], qs[128]
    {14, "q6_k", 256, 210, false},    // ql[128], qh[64], scales[16], d
    {15, "q8_k", 256, 292, false},    // float d, qs[256], int16 bsums[16]
    {16, "iq2_xxs", 256, 66, false},  // d, uint16 qs[32]
    {17, "iq2_xs", 256, 74, false},   // d, uint16 qs[32], scales[8]
    {18, "iq3_xxs", 256, 98, false},  // d, qs[96]
    {19, "iq1_s", 256, 50, false},    // d, qs[32], uint16 qh[8]
    {20, "iq4_nl", 32, 18, false},    // d, qs[16]
    {21, "iq3_s", 256, 110, false},   // d, qs[64], qh[8], signs[32], scales[4]
    {22, "iq2_s", 256, 82, false},    // d, qs[64], qh[8], scales[8]
    {23, "iq4_xs", 256, 136, false},  // d, uint16 scales_h, scales_l[4], qs[128]
    {24, "i8", 1, 1, false},         {25, "i16", 1, 2, false},
    {26, "i32", 1, 4, false},        {27, "i64", 1, 8, false},
    {28, "f64", 1, 8, false},        {29, "iq1_m", 256, 56, false},  // qs[32], qh[16], scales[8]
    {30, "bf16", 1, 2, false},       {31, "q4_0_4_4", 0, 0, true},
    {32, "q4_0_4_8", 0, 0, true},    {33, "q4_0_8_8", 0, 0, true},
    {34, "tq1_0", 256, 54, false},  // qs[48], qh[4], d
    {35, "tq2_0", 256, 66, false},  // qs[64], d
    {36, "iq4_nl_4_4", 0, 0, true},  {37, "iq4_nl_4_8", 0, 0, true},
    {38, "iq4_nl_8_8", 0, 0, true},  {39, "mxfp4", 32, 17, false},  // e (E8M0), qs[16]
    {40, "nvfp4", 64, 36, false},                                   // d[4] (UE4M3), qs[32]
    {41, "q1_0", 128, 18, false},                                   // d, qs[16]
    {42, "q2_0", 64, 18, false},                                    // d, qs[16]
};

constexpr bool table_is_in_id_order() {
  for (uint32_t i = 0; i <= kMaxTypeId; ++i) {
    if (kTypes[i].id != i) return false;
    if (kTypes[i].removed != (kTypes[i].block_size == 0)) return false;
  }
  return true;
}
static_assert(table_is_in_id_order(), "kTypes must list ids 0..kMaxTypeId in order");

}  // namespace

std::span<const TypeInfo> type_table() { return kTypes; }

const TypeInfo* type_info(uint32_t id) { return id <= kMaxTypeId ? &kTypes[id] : nullptr; }

const char* type_name(uint32_t id) { return id <= kMaxTypeId ? kTypes[id].name : "unknown"; }

std::optional<TensorType> type_from_name(std::string_view name) {
  for (const TypeInfo& t : kTypes) {
    if (!t.removed && name == t.name) return static_cast<TensorType>(t.id);
  }
  return std::nullopt;
}

bool type_is_valid(uint32_t id) { return id <= kMaxTypeId && !kTypes[id].removed; }

double bits_per_weight(uint32_t id) {
  if (!type_is_valid(id)) return 0.0;
  return kTypes[id].type_size * 8.0 / kTypes[id].block_size;
}

Result<uint64_t> tensor_nbytes(uint32_t type, std::span<const int64_t> ne) {
  if (type <= kMaxTypeId && kTypes[type].removed) {
    return TS_ERROR(StatusCode::kUnsupported, "type %u (%s) was removed from GGUF; re-convert the model", type,
                    type_name(type));
  }
  if (!type_is_valid(type)) return TS_ERROR(StatusCode::kInvalidArgument, "unknown tensor type %u", type);
  if (ne.empty() || ne.size() > kMaxDims) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%zu dimensions (1 to %u allowed)", ne.size(), kMaxDims);
  }
  const TypeInfo& t = kTypes[type];
  int64_t elements = 1;
  for (size_t d = 0; d < ne.size(); ++d) {
    if (ne[d] <= 0) return TS_ERROR(StatusCode::kInvalidArgument, "ne[%zu] is %lld (must be > 0)", d, (long long)ne[d]);
    if (__builtin_mul_overflow(elements, ne[d], &elements)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "the element count overflows int64 at ne[%zu] = %lld", d,
                      (long long)ne[d]);
    }
  }
  if (ne[0] % t.block_size != 0) {
    return TS_ERROR(StatusCode::kInvalidArgument, "ne[0] = %lld is not a whole number of %s blocks (%u values)",
                    (long long)ne[0], t.name, t.block_size);
  }
  uint64_t bytes = static_cast<uint64_t>(ne[0]) / t.block_size;
  for (size_t d = 0; d < ne.size(); ++d) {
    const uint64_t factor = d == 0 ? t.type_size : static_cast<uint64_t>(ne[d]);
    if (__builtin_mul_overflow(bytes, factor, &bytes)) {
      return TS_ERROR(StatusCode::kInvalidArgument, "the byte size overflows uint64 at ne[%zu] = %lld", d,
                      (long long)ne[d]);
    }
  }
  return bytes;
}

}  // namespace tessera::gguf
