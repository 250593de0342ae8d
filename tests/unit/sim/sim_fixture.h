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

}  // namespace tessera::sim::testing
