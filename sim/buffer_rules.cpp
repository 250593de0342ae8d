// Buffer type rules of simulated devices: padding and the op rules of extra buffer types (buffer_rules.h).
#include "tessera/sim/buffer_rules.h"

#include <algorithm>

namespace tessera::sim {

namespace {

template <typename T>
bool in(const std::vector<T>& list, T v) {
  return list.empty() || std::find(list.begin(), list.end(), v) != list.end();
}

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

}  // namespace

bool padding_rule_matches(const PaddingRule& rule, const Tensor& t) {
  return in(rule.ops, t.op) && in(rule.types, t.type);
}

size_t padding_bytes(const std::vector<PaddingRule>& rules, const Tensor& t) {
  for (const PaddingRule& r : rules) {
    if (!padding_rule_matches(r, t)) continue;
    size_t pad = r.extra;
    if (r.f16_kv_copies && t.op == Op::kFlashAttnExt) pad += fa_f16_copy_bytes(t);
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
