// The main job until the `tessera` tool exists: build a small llama-style block (RMS norm, attention-free MLP with
// SwiGLU, residual) as a graph, compute it on the CPU backend, and check it against a plain loop.
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/builtin.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"

using namespace tessera;

static int fail(const char* what, const std::string& msg) {
  std::fprintf(stderr, "error: %s: %s\n", what, msg.c_str());
  return 1;
}

int main() {
  constexpr int64_t kEmbd = 64, kFfn = 128, kTokens = 4;
  const unsigned seed = 42;

  Registry& registry = builtin_registry();
  std::printf("registry: %zu registration(s), %zu device(s)\n", registry.reg_count(), registry.device_count());
  for (Device* d : registry.devices()) {
    size_t free = 0, total = 0;
    d->memory(&free, &total);
    std::printf("  device %s (%s): %s, %.1f of %.1f GiB free\n", d->name(), device_type_name(d->type()),
                d->description(), free / 1073741824.0, total / 1073741824.0);
  }
  Result<std::unique_ptr<Backend>> backend = registry.init_best();
  if (!backend.ok()) return fail("init_best", backend.status().message());
  std::printf("backend: %s (%d threads)\n", (*backend)->name(), cpu::n_threads(**backend));

  // Weights and input in one metadata-only context, placed in a CPU buffer afterwards.
  Context ctx({.no_alloc = true});
  Tensor* x = ctx.new_tensor_2d(Type::kF32, kEmbd, kTokens);
  Tensor* norm_w = ctx.new_tensor_1d(Type::kF32, kEmbd);
  Tensor* w_gate = ctx.new_tensor_2d(Type::kQ8_0, kEmbd, kFfn);
  Tensor* w_up = ctx.new_tensor_2d(Type::kF16, kEmbd, kFfn);
  Tensor* w_down = ctx.new_tensor_2d(Type::kF32, kFfn, kEmbd);
  set_name(*x, "x");
  set_name(*norm_w, "norm.weight");
  set_name(*w_gate, "ffn_gate.weight");
  set_name(*w_up, "ffn_up.weight");
  set_name(*w_down, "ffn_down.weight");
  set_input(*x);

  Tensor* h = mul(ctx, rms_norm(ctx, x, 1e-5f), norm_w);
  Tensor* ffn = mul_mat(ctx, w_down, swiglu(ctx, mul_mat(ctx, w_gate, h), mul_mat(ctx, w_up, h)));
  Tensor* out = add(ctx, x, ffn);
  if (!ctx.ok()) return fail("building the graph", ctx.status().message());
  set_name(*out, "out");
  set_output(*out);

  Graph graph;
  if (Status s = graph.build_forward(out); !s.ok()) return fail("build_forward", s.message());
  Result<std::unique_ptr<Buffer>> buffer = alloc_ctx_tensors(ctx, **backend);
  if (!buffer.ok()) return fail("alloc_ctx_tensors", buffer.status().message());
  std::printf("graph: %zu nodes, %zu leafs; one %s buffer of %zu bytes\n", graph.n_nodes(), graph.n_leafs(),
              (*buffer)->type()->name(), (*buffer)->size());

  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  auto random_values = [&](const Tensor* t, float scale) {
    std::vector<float> v(static_cast<size_t>(nelements(*t)));
    for (float& f : v) f = dist(rng) * scale;
    return v;
  };
  std::vector<float> vx = random_values(x, 1.0f), vn = random_values(norm_w, 1.0f);
  std::vector<float> vg = random_values(w_gate, 0.1f), vu = random_values(w_up, 0.1f), vd = random_values(w_down, 0.1f);
  for (auto [t, v] : {std::pair{x, &vx}, {norm_w, &vn}, {w_gate, &vg}, {w_up, &vu}, {w_down, &vd}}) {
    if (Status s = tensor_from_f32(*t, *v); !s.ok()) return fail("setting inputs", s.message());
  }

  for (size_t i = 0; i < graph.n_nodes(); ++i) {
    const Tensor* n = graph.node(i);
    std::printf("  node %2zu %-10s %-24s [%lld x %lld] %s\n", i, op_name(n->op), n->name, (long long)n->ne[0],
                (long long)n->ne[1], type_name(n->type));
  }
  if (ComputeStatus cs = (*backend)->graph_compute(graph); cs != ComputeStatus::kSuccess) {
    return fail("graph_compute", (*backend)->last_error());
  }
  Result<std::vector<float>> result = tensor_to_f32(*out);
  if (!result.ok()) return fail("reading the output", result.status().message());

  // Plain-loop check, using the weights as stored (read back, so the quantization of w_gate is included).
  auto gate = tensor_to_f32(*w_gate), up = tensor_to_f32(*w_up);
  std::vector<float> expect(vx.size());
  for (int64_t t = 0; t < kTokens; ++t) {
    const float* xr = &vx[static_cast<size_t>(t * kEmbd)];
    double ss = 0;
    for (int64_t i = 0; i < kEmbd; ++i) ss += double(xr[i]) * xr[i];
    const double inv = 1.0 / std::sqrt(ss / kEmbd + 1e-5);
    std::vector<double> hn(kEmbd), act(kFfn);
    for (int64_t i = 0; i < kEmbd; ++i) hn[i] = xr[i] * inv * vn[i];
    for (int64_t j = 0; j < kFfn; ++j) {
      double g = 0, u = 0;
      for (int64_t i = 0; i < kEmbd; ++i) {
        g += double((*gate)[j * kEmbd + i]) * hn[i];
        u += double((*up)[j * kEmbd + i]) * hn[i];
      }
      act[j] = g / (1.0 + std::exp(-g)) * u;
    }
    for (int64_t i = 0; i < kEmbd; ++i) {
      double d = 0;
      for (int64_t j = 0; j < kFfn; ++j) d += double(vd[i * kFfn + j]) * act[j];
      expect[t * kEmbd + i] = static_cast<float>(xr[i] + d);
    }
  }
  // The CPU reference kernels compute in f32 from the stored weights. Optimised kernels (TESSERA_CPU_ISA=portable,
  // avx2 or avx512; a GPU when init_best finds one) also quantise the activations of the q8_0 product to q8_0, as the
  // conformance suite allows (NMSE 1e-4 for a quantised matrix x vector, 1e-3 downstream of it).
  const bool reference = cpu::is_cpu(**backend) && cpu::kernels(**backend) == cpu::CpuKernels::kReference;
  const double tolerance = reference ? 1e-6 : 1e-3;
  NmseResult err = nmse(expect.data(), result->data(), expect.size());
  const bool ok = err.nmse <= tolerance && !err.nan_mismatch;
  std::printf("out[0..3] = %.5f %.5f %.5f %.5f\n", (*result)[0], (*result)[1], (*result)[2], (*result)[3]);
  std::printf("NMSE vs plain loop: %.3g, tolerance %.0e (%s kernels) (seed %u) -> %s\n", err.nmse, tolerance,
              reference ? "reference" : "optimised", seed, ok ? "ok" : "MISMATCH");
  return ok ? 0 : 1;
}
