// Buffer type rules of simulated devices: padding and the op rules of extra buffer types (buffer_rules.h).
#include "tessera/sim/buffer_rules.h"

#include <algorithm>

namespace tessera::sim {

namespace {

size_t pad128(size_t n) { return (n + 127) / 128 * 128; }

// f16_kv_copies: the bytes after a FLASH_ATTN_EXT's output that ggml-cuda's alloc size adds.
size_t fa_f16_copy_bytes(const Tensor& t) {
  const Tensor* q = t.src[0];
  const Tensor* k = t.src[1];
  const Tensor* v = t.src[2];
  if (q == nullptr || k == nullptr || v == nullptr) return 0;
  const bool batch_kernel = q->ne[1] > 2;
  const bool need_k = k->type != Type::kF16 && (batch_kernel || k->type == Type::kF32);
  const bool need_v = v->type != Type::kF16 && (batch_kernel || v->type == Type::kF32);
  const bool v_views_k =
      v->view_src != nullptr && (v->view_src == k || (v->view_src == k->view_src && v->view_offs == k->view_offs));
  const size_t out = nbytes(t);
  size_t end = out;
  if (need_k) end = pad128(end) + static_cast<size_t>(nelements(*k)) * 2;
  if (need_v && !v_views_k) end = pad128(end) + static_cast<size_t>(nelements(*v)) * 2;
  return end - out;
}

// metal_extras: what ggml-metal's alloc size adds to a node's own bytes (buffer_rules.h). Negative for TOP_K, whose
// size is replaced: returned as the difference, clamped at zero.
size_t metal_extra_bytes(const Tensor& t) {
  auto u = [](int64_t v) { return static_cast<size_t>(std::max<int64_t>(v, 0)); };
  switch (t.op) {
    case Op::kMulMatId: {
      if (t.src[0] == nullptr || t.src[2] == nullptr) return 0;
      const size_t n_expert = u(t.src[0]->ne[2]), n_tokens = u(t.src[2]->ne[1]);
      return 4 * n_expert + 4 * n_expert * n_tokens;
    }
    case Op::kFlashAttnExt: {
      const Tensor* q = t.src[0];
      const Tensor* k = t.src[1];
      const Tensor* v = t.src[2];
      const Tensor* mask = t.src[3];
      if (q == nullptr || k == nullptr || v == nullptr) return 0;
      size_t pad = k->nb[1] * u(k->ne[2]) * u(k->ne[3]) + v->nb[1] * u(v->ne[2]) * u(v->ne[3]);
      if (mask != nullptr) pad += 2 * u(mask->ne[1]) * u(mask->ne[2]) * u(mask->ne[3]);
      size_t extra = 64 * pad;
      if (mask != nullptr) {
        const bool vec = q->ne[1] < 20 && q->ne[0] % 32 == 0;
        const int64_t nq = vec ? 1 : 8, nc = vec ? 32 : 64;
        const size_t blk =
            u((q->ne[1] + nq - 1) / nq) * u((mask->ne[0] + nc - 1) / nc) * u(mask->ne[2]) * u(mask->ne[3]);
        extra += (blk + 31) / 32 * 32;
      }
      extra += 4 * u(std::min<int64_t>(q->ne[1], 32)) * u(q->ne[2]) * u(q->ne[3]) * 32 * (u(v->ne[0]) + 2);
      return extra;
    }
    case Op::kArgsort: return nbytes(t);  // (and CUMSUM, an op Tessera does not have)
    case Op::kTopK: {
      if (t.src[0] == nullptr) return 0;
      const size_t want = 8 * static_cast<size_t>(nelements(*t.src[0]));
      return want > nbytes(t) ? want - nbytes(t) : 0;
    }
    default: return 0;
  }
}

}  // namespace

bool padding_rule_matches(const PaddingRule& rule, const Tensor& t) {
  return listed_or_unset(rule.ops, t.op) && listed_or_unset(rule.types, t.type);
}

size_t padding_bytes(const std::vector<PaddingRule>& rules, const Tensor& t) {
  for (const PaddingRule& r : rules) {
    if (!padding_rule_matches(r, t)) continue;
    size_t pad = r.extra;
    if (r.f16_kv_copies && t.op == Op::kFlashAttnExt) pad += fa_f16_copy_bytes(t);
    if (r.metal_extras) pad += metal_extra_bytes(t);
    if (r.row_multiple > 0 && type_is_valid(t.type) && t.ne[0] % r.row_multiple != 0) {
      const TypeTraits& tt = type_traits(t.type);
      const auto missing = static_cast<size_t>(r.row_multiple - t.ne[0] % r.row_multiple);
      const auto block = static_cast<size_t>(tt.block_size);
      pad += (missing + block - 1) / block * tt.type_size;  // whole blocks; at most 2^20 values (kMaxRowMultiple)
    }
    return pad;
  }
  return 0;
}

bool buffer_type_allows(const BufferTypeConfig& buft, const Tensor& node, int* rule) {
  for (size_t i = 0; i < buft.op_rules.size(); ++i) {
    if (!rule_matches(buft.op_rules[i], node)) continue;
    if (rule != nullptr) *rule = static_cast<int>(i);
    return buft.op_rules[i].allow;
  }
  if (rule != nullptr) *rule = -1;
  return buft.default_allow;
}

}  // namespace tessera::sim
