// Dispatch of the optimised kernels: ISA detection, per-op support, work sizes.
#include "opt_kernels.h"

#include <cstring>

#include "../ref/ref_kernels.h"

namespace tessera::cpu::opt {

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return "portable";
    case Isa::kAvx2: return "avx2";
    case Isa::kAvx512: return "avx512";
  }
  return "?";
}

bool parse_isa(const char* name, Isa* out) {
  if (name == nullptr) return false;
  for (Isa i : {Isa::kPortable, Isa::kAvx2, Isa::kAvx512}) {
    if (std::strcmp(name, isa_name(i)) == 0) {
      *out = i;
      return true;
    }
  }
  return false;
}

namespace {

bool cpu_has(Isa isa) {
#if defined(__x86_64__) || defined(__i386__)
  switch (isa) {
    case Isa::kPortable: return true;
    case Isa::kAvx2:
#if defined(__clang__) && __clang_major__ < 16
      // Clang before 16 has no "f16c" feature string (the fuzz preset builds with Clang 14); every x86 CPU with AVX2
      // and FMA has F16C.
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#else
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c");
#endif
    case Isa::kAvx512:
      return cpu_has(Isa::kAvx2) && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");  // the q8_0 / q4_0 dots use vpdpbusd
  }
  return false;
#else
  return isa == Isa::kPortable;
#endif
}

const KernelTable* compiled_table(Isa isa) {
  switch (isa) {
    case Isa::kPortable: return table_portable();
    case Isa::kAvx2: return table_avx2();
    case Isa::kAvx512: return table_avx512();
  }
  return nullptr;
}

}  // namespace

const KernelTable* table_for(Isa isa) { return cpu_has(isa) ? compiled_table(isa) : nullptr; }

Isa detected_isa() {
  static const Isa best = [] {
    for (Isa i : {Isa::kAvx512, Isa::kAvx2}) {
      if (table_for(i) != nullptr) return i;
    }
    return Isa::kPortable;
  }();
  return best;
}

size_t unit_bytes(Type type) {
  switch (type) {
    case Type::kF32: return 4;
    case Type::kF16:
    case Type::kBF16: return 2;
    case Type::kQ8_0: return sizeof(BlockQ8_0);
    case Type::kQ4_0: return sizeof(BlockQ4_0);
    default: return 0;
  }
}

void row_to_f32(const KernelTable& t, Type type, const void* src, float* dst, int64_t n) {
  switch (type) {
    case Type::kF32: std::memcpy(dst, src, static_cast<size_t>(n) * 4); return;
    case Type::kF16: t.f16_to_f32(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::kBF16: t.bf16_to_f32(static_cast<const uint16_t*>(src), dst, n); return;
    case Type::kQ8_0: t.q8_0_to_f32(static_cast<const BlockQ8_0*>(src), dst, n); return;
    case Type::kQ4_0: t.q4_0_to_f32(static_cast<const BlockQ4_0*>(src), dst, n); return;
    default: return;
  }
}

bool supports(const Tensor& node) {
  if (!ref::supports(node)) return false;
  switch (node.op) {
    case Op::kMulMat: return supports_mul_mat(node);
    case Op::kMulMatId: return supports_mul_mat_id(node);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kScale:
    case Op::kUnary:
    case Op::kGlu:
    case Op::kClamp: return supports_elementwise(node);
    case Op::kRmsNorm:
    case Op::kNorm: return supports_norm(node);
    case Op::kSoftMax: return supports_soft_max(node);
    case Op::kRope: return supports_rope(node);
    case Op::kGetRows: return supports_get_rows(node);
    case Op::kFlashAttnExt: return supports_flash_attn(node);
    default: return false;
  }
}

size_t work_size(const Tensor& node, const KernelTable& table, int nth) {
  switch (node.op) {
    case Op::kMulMat: return work_size_mul_mat(node, table, nth);
    case Op::kMulMatId: return work_size_mul_mat_id(node, table, nth);
    case Op::kFlashAttnExt: return work_size_flash_attn(node, nth);
    default: return work_size_row_ops(node, nth);
  }
}

Status compute(const Tensor& node, const Params& p) {
  if (p.table == nullptr || p.nth < 1 || p.ith < 0 || p.ith >= p.nth) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: invalid optimised-kernel parameters (thread %d of %d)",
                    describe(node).c_str(), p.ith, p.nth);
  }
  const size_t need = work_size(node, *p.table, p.nth);
  if (need > 0 && (p.work == nullptr || p.work_bytes < need)) {
    return TS_ERROR(StatusCode::kInvalidArgument, "%s: work buffer of %zu bytes, %zu needed", describe(node).c_str(),
                    p.work_bytes, need);
  }
  switch (node.op) {
    case Op::kMulMat: return run_mul_mat(node, p);
    case Op::kMulMatId: return run_mul_mat_id(node, p);
    case Op::kAdd:
    case Op::kMul:
    case Op::kDiv:
    case Op::kScale:
    case Op::kUnary:
    case Op::kGlu:
    case Op::kClamp: return run_elementwise(node, p);
    case Op::kRmsNorm:
    case Op::kNorm: return run_norm(node, p);
    case Op::kSoftMax: return run_soft_max(node, p);
    case Op::kRope: return run_rope(node, p);
    case Op::kGetRows: return run_get_rows(node, p);
    case Op::kFlashAttnExt: return run_flash_attn(node, p);
    default: break;
  }
  return TS_ERROR(StatusCode::kUnsupported, "%s: no optimised kernel", describe(node).c_str());
}

}  // namespace tessera::cpu::opt
