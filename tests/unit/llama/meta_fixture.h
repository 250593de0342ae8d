// Shared by the meta backend's unit tests and properties: a llama model computed whole on one CPU backend (the oracle,
// reference kernels, never split) and the same model on a meta device (tessera/meta_backend.h) over given devices,
// split by llama.cpp's states; simulated GPUs to put under it.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/builtin.h"
#include "tessera/cpu.h"
#include "tessera/graph_copy.h"
#include "tessera/harness/session/reference.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/meta_backend.h"
#include "tessera/models/llama.h"
#include "tessera/planner.h"
#include "tessera/sim/simulator.h"

namespace tessera::meta_testing {

using namespace tessera::llama;

struct Logits {
  std::vector<float> v;
  MetaComputeStats stats;
  std::vector<size_t> used;  // per device, after placing the weights and the cache (before the compute buffer)
};

// The model computed whole on one CPU backend (the harness's oracle of simulated runs).
inline std::vector<float> reference_logits(const models::LlamaConfig& c, uint64_t seed) {
  auto r = harness::cpu_reference_logits(c, seed);
  EXPECT_TRUE(r.ok()) << r.status().to_string();
  return r.ok() ? std::move(r).value() : std::vector<float>{};
}

// The model on a meta device over `devices`, split by llama.cpp's states at `shares`.
inline Result<Logits> meta_logits(const models::LlamaConfig& c, uint64_t seed, std::vector<Device*> devices,
                                  const std::vector<double>& shares) {
  auto m = models::build_llama(c);
  if (!m.ok()) return m.status();
  const size_t n = devices.size();
  auto meta = make_meta_device({.devices = std::move(devices), .statics = llama_tensor_split(*m, c, n, shares)});
  if (!meta.ok()) return meta.status();
  BufferType* buft = (*meta)->buffer_type();
  auto wbuf = meta_alloc_ctx_tensors(*m->weights_ctx, **meta);
  if (!wbuf.ok()) return wbuf.status();
  auto cbuf = meta_alloc_ctx_tensors(*m->cache_ctx, **meta);
  if (!cbuf.ok()) return cbuf.status();
  std::vector<size_t> used;  // each device's memory in use: its slices of the weights and the cache
  for (size_t j = 0; j < n; ++j) {
    size_t free = 0, total = 0;
    (*meta)->device(j)->memory(&free, &total);
    used.push_back(total - free);
  }
  TS_RETURN_IF_ERROR(models::fill_random(m.value(), seed));
  GraphPlanner planner(buft);
  TS_RETURN_IF_ERROR(planner.alloc_graph(*m->graph));
  TS_RETURN_IF_ERROR(models::set_inputs(m.value(), models::default_inputs(c, seed)));
  auto b = (*meta)->init_backend();
  if (!b.ok()) return b.status();
  if ((*b)->graph_compute(*m->graph) != ComputeStatus::kSuccess) {
    return Status(StatusCode::kFailed, (*b)->last_error());
  }
  auto v = tensor_to_f32(*m->logits);
  if (!v.ok()) return v.status();
  return Logits{std::move(v).value(), *meta_compute_stats(**b), std::move(used)};
}

inline double nmse(const std::vector<float>& got, const std::vector<float>& want) {
  if (got.size() != want.size() || want.empty()) return INFINITY;
  double err = 0, ref = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double d = static_cast<double>(got[i]) - want[i];
    err += d * d;
    ref += static_cast<double>(want[i]) * want[i];
  }
  return err / ref;
}

// n simulated GPUs of 1 GiB (their kernels are the reference kernels on host memory).
struct Gpus {
  std::unique_ptr<sim::Simulator> sim;
  std::vector<Device*> devices;
  // async: asynchronous compute and copies; events: the devices have events (the scheduler's and the copies'
  // ordering then go through them; without, through synchronizations)
  explicit Gpus(size_t n, bool async = true, bool events = true) {
    sim::TopologyConfig t;
    t.name = "meta-test";
    for (size_t i = 0; i < n; ++i) {
      sim::DeviceConfig d;
      d.name = "gpu" + std::to_string(i);
      d.type = DeviceType::kGpu;
      d.memory = size_t{1} << 30;
      d.alignment = 256;
      d.caps = {async, false, false, async && events};
      t.devices.push_back(d);
    }
    auto s = sim::Simulator::create(t, {}, &builtin_registry());
    EXPECT_TRUE(s.ok()) << s.status().to_string();
    sim = std::move(s).value();
    for (size_t i = 0; i < n; ++i) devices.push_back(sim->device(i));
  }
};

}  // namespace tessera::meta_testing
