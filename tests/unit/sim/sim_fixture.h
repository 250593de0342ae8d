// Small helpers for the simulator's tests: topologies built in code and one-op graphs on simulated devices.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/context.h"
#include "tessera/sim/simulator.h"
#include "tessera/builtin.h"

namespace tessera::sim::testing {

inline DeviceConfig gpu(const std::string& name, size_t memory = 1 * GiB) {
  DeviceConfig d;
  d.name = name;
  d.type = DeviceType::kGpu;
  d.memory = memory;
  d.alignment = 256;
  d.caps = {/*async=*/true, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/true};
  return d;
}

inline DeviceConfig wrapped_cpu(size_t memory = 8 * GiB) {
  DeviceConfig d;
  d.name = "cpu";
  d.type = DeviceType::kCpu;
  d.wraps = "CPU";
  d.memory = memory;
  d.alignment = 64;
  d.host_visible = true;
  d.caps = {/*async=*/false, /*host_buffer=*/false, /*buffer_from_host_ptr=*/false, /*events=*/false};
  return d;
}

// A GPU with round cost figures (5 us launch, 10 / 50 / 40 TFLOP/s for f32 / f16 / quantized, 500 GB/s), so expected
// op times can be worked out by hand.
inline DeviceConfig cost_device() {
  DeviceConfig d = gpu("gpu0");
  d.cost.launch_overhead_us = 5.0;
  d.cost.flops_f32 = 10e12;
  d.cost.flops_f16 = 50e12;
  d.cost.flops_quant = 40e12;
  d.cost.mem_bandwidth = 500e9;
  return d;
}

inline TopologyConfig topology(std::vector<DeviceConfig> devices, const std::string& name = "test") {
  TopologyConfig t;
  t.name = name;
  t.devices = std::move(devices);
  return t;
}

inline std::unique_ptr<Simulator> make_sim(const TopologyConfig& t, SimOptions o = {}) {
  auto s = Simulator::create(t, o, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().to_string();
  return s.ok() ? std::move(s).value() : nullptr;
}

// f32 vectors of n values in a buffer of the given type, one buffer per call.
struct Vectors {
  Context ctx{{.no_alloc = true}};
  std::unique_ptr<Buffer> buffer;
  std::vector<Tensor*> t;

  Vectors(BufferType& buft, const std::vector<std::string>& names, int64_t n = 64) {
    for (const auto& name : names) {
      Tensor* x = ctx.new_tensor_1d(Type::kF32, n);
      set_name(*x, name);
      t.push_back(x);
    }
    auto b = alloc_ctx_tensors(ctx, buft);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (b.ok()) buffer = std::move(b).value();
  }
  Tensor* operator[](size_t i) const { return t[i]; }
};

inline std::vector<float> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(0.5f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

inline std::vector<float> get_f32(const Tensor& t) {
  std::vector<float> v(static_cast<size_t>(nelements(t)));
  EXPECT_TRUE(tensor_get(t, v.data(), 0, v.size() * sizeof(float)).ok());
  return v;
}

inline void set_f32(Tensor& t, const std::vector<float>& v) {
  ASSERT_TRUE(tensor_set(t, v.data(), 0, v.size() * sizeof(float)).ok());
}

// A one-op graph built by `make` in its own context; tensors it creates are placed in `buft` (views, such as CPY's
// result, alias their source instead).
struct OneOp {
  Context ctx{{.no_alloc = true}};
  std::unique_ptr<Buffer> buffer;
  Graph graph;
  Tensor* out = nullptr;
  template <typename Make>
  OneOp(BufferType& buft, Make make) {
    out = make(ctx);
    EXPECT_NE(out, nullptr) << ctx.status().to_string();
    if (out == nullptr) return;
    EXPECT_TRUE(graph.build_forward(out).ok());
    auto b = alloc_ctx_tensors(ctx, buft);
    EXPECT_TRUE(b.ok()) << b.status().to_string();
    if (b.ok()) buffer = std::move(b).value();
  }
};

// Metadata-only nodes with known shapes and types, for op-rule and cost tests.
struct Nodes {
  Context ctx{{.no_alloc = true}};

  // MUL_MAT of a weight [k, m] of type wt by an f32 [k, n]: src0 type wt, src1 f32, result f32 [m, n].
  Tensor* mul_mat_node(Type wt, int64_t k, int64_t m, int64_t n) {
    Tensor* a = ctx.new_tensor_2d(wt, k, m);
    Tensor* b = ctx.new_tensor_2d(Type::kF32, k, n);
    Tensor* r = mul_mat(ctx, a, b);
    EXPECT_NE(r, nullptr) << ctx.status().to_string();
    return r;
  }
  // MUL_MAT_ID of experts [k, m, n_expert] by b [k, n_used, tokens] with ids [n_used, tokens]: result
  // [m, n_used, tokens].
  Tensor* mul_mat_id_node(int64_t k, int64_t m, int64_t n_expert, int64_t n_used, int64_t tokens) {
    Tensor* as = ctx.new_tensor_3d(Type::kF32, k, m, n_expert);
    Tensor* b = ctx.new_tensor_3d(Type::kF32, k, n_used, tokens);
    Tensor* ids = ctx.new_tensor_2d(Type::kI32, n_used, tokens);
    Tensor* r = mul_mat_id(ctx, as, b, ids);
    EXPECT_NE(r, nullptr) << ctx.status().to_string();
    return r;
  }
  // ADD of two f32 [ne0, ne1]: result f32 [ne0, ne1].
  Tensor* add_node(int64_t ne0, int64_t ne1) {
    Tensor* a = ctx.new_tensor_2d(Type::kF32, ne0, ne1);
    Tensor* b = ctx.new_tensor_2d(Type::kF32, ne0, ne1);
    Tensor* r = add(ctx, a, b);
    EXPECT_NE(r, nullptr) << ctx.status().to_string();
    return r;
  }
  // SCALE of an f32 [ne0]: one source (src[1] is null), result f32 [ne0].
  Tensor* scale_node(int64_t ne0) {
    Tensor* a = ctx.new_tensor_1d(Type::kF32, ne0);
    Tensor* r = scale(ctx, a, 2.0f);
    EXPECT_NE(r, nullptr) << ctx.status().to_string();
    return r;
  }
  // GET_ROWS of a q8_0 table [ne0, 16] by i32 ids [n]: src0 q8_0, src1 i32, result f32 [ne0, n].
  Tensor* get_rows_node(int64_t ne0, int64_t n) {
    Tensor* a = ctx.new_tensor_2d(Type::kQ8_0, ne0, 16);
    Tensor* ids = ctx.new_tensor_1d(Type::kI32, n);
    Tensor* r = get_rows(ctx, a, ids);
    EXPECT_NE(r, nullptr) << ctx.status().to_string();
    return r;
  }
  // A leaf (op NONE, no sources) of the given type and shape.
  Tensor* leaf(Type t, int64_t ne0, int64_t ne1) { return ctx.new_tensor_2d(t, ne0, ne1); }
};

// An op rule on ops (allow or deny).
inline OpRule rule(bool allow, std::vector<Op> ops) {
  OpRule r;
  r.allow = allow;
  r.ops = std::move(ops);
  return r;
}

// GPU "gpu0" with these op rules and default.
inline DeviceConfig with_rules(std::vector<OpRule> rules, bool default_allow) {
  DeviceConfig d = gpu("gpu0");
  d.op_rules = std::move(rules);
  d.default_allow = default_allow;
  return d;
}

// A simulator of that GPU alone.
inline std::unique_ptr<Simulator> sim_with_rules(std::vector<OpRule> rules, bool default_allow) {
  return make_sim(topology({with_rules(std::move(rules), default_allow)}));
}

}  // namespace tessera::sim::testing
