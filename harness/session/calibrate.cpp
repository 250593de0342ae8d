// `tessera calibrate` (see tessera/harness/session/calibrate.h, docs/calibrate.md).
#include "tessera/harness/session/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <memory>

#include <unistd.h>

#include "tessera/alloc.h"
#include "tessera/build.h"
#include "tessera/cpu.h"
#include "tessera/harness/session/session.h"
#include "tessera/models/llama.h"
#include "tessera/planner.h"

namespace tessera::harness {

namespace {

using Clock = std::chrono::steady_clock;

// A graph built on its own contexts, its leafs in one CPU buffer, its nodes placed by a planner.
struct Bench {
  Context leafs{ContextParams{.no_alloc = true}};
  Context nodes{ContextParams{.no_alloc = true}};
  Graph graph;
  std::unique_ptr<Buffer> buffer;
  GraphPlanner planner{cpu::buffer_type()};
};

// Leaf values that compute like real data: small f32 values, and a byte pattern for f16 and the block types (an f16
// of 0x1111, about 6.6e-5: a normal number, so no denormal slows a kernel; q4_0 / q8_0 scales of the same).
void fill(Tensor& t) {
  if (t.data == nullptr) return;
  const size_t n = nbytes(t);
  if (t.type == Type::kF32) {
    auto* f = static_cast<float*>(t.data);
    for (size_t i = 0; i < n / sizeof(float); ++i) f[i] = 0.01f * static_cast<float>(i % 97) - 0.48f;
  } else {
    std::memset(t.data, 0x11, n);
  }
}

struct Timed {
  double median_us = 0, spread = 0;
};

// Something to time: one run of it, returning its wall time.
struct Job {
  std::string what;
  std::function<Result<double>()> run;
};

// A graph computed on the backend, timed.
std::function<Result<double>()> timed_compute(Backend& backend, Graph& graph, const std::string& what) {
  return [&backend, &graph, what]() -> Result<double> {
    const Clock::time_point t0 = Clock::now();
    if (backend.graph_compute(graph) != ComputeStatus::kSuccess) {
      return Status(StatusCode::kFailed, "calibrate: " + what + ": " + backend.last_error());
    }
    return std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  };
}

// One warm-up round, then `repeats` rounds, each running every job once, in turn: a slow moment of a shared machine
// (another process, a lower clock) falls on every job alike, not on one. Per job, the median of its rounds and their
// spread ((max - min) / median).
Result<std::vector<Timed>> run_rounds(const std::vector<Job>& jobs, int repeats,
                                      const std::function<void(const std::string&)>& progress) {
  std::vector<std::vector<double>> us(jobs.size());
  for (int r = -1; r < std::max(1, repeats); ++r) {
    if (progress) {
      progress(r < 0 ? "warm-up round (" + std::to_string(jobs.size()) + " measurements)"
                     : "round " + std::to_string(r + 1) + " of " + std::to_string(std::max(1, repeats)));
    }
    for (size_t i = 0; i < jobs.size(); ++i) {
      auto t = jobs[i].run();
      if (!t.ok()) return t.status();
      if (r >= 0) us[i].push_back(t.value());
    }
  }
  std::vector<Timed> out;
  for (std::vector<double>& v : us) {
    std::sort(v.begin(), v.end());
    Timed t;
    t.median_us = v[v.size() / 2];
    t.spread = t.median_us > 0 ? (v.back() - v.front()) / t.median_us : 0;
    out.push_back(t);
  }
  return out;
}

// Builds the graph of `make` (which creates leafs in b.leafs and nodes in b.nodes and returns the result), allocates
// and fills it.
template <typename Make>
Result<std::unique_ptr<Bench>> build_bench(const std::string& what, Make make) {
  auto b = std::make_unique<Bench>();
  Tensor* out = make(b->leafs, b->nodes);
  if (out == nullptr || !b->leafs.ok() || !b->nodes.ok()) {
    return Status(StatusCode::kFailed, "calibrate: " + what + ": the graph could not be built");
  }
  set_output(*out);
  TS_RETURN_IF_ERROR(b->graph.build_forward(out));
  auto buf = alloc_ctx_tensors(b->leafs, *cpu::buffer_type());
  if (!buf.ok()) return buf.status();
  b->buffer = std::move(buf).value();
  for (size_t i = 0; i < b->graph.n_leafs(); ++i) fill(*b->graph.leaf(i));
  TS_RETURN_IF_ERROR(b->planner.alloc_graph(b->graph));
  return b;
}

// The check graphs (calibrate.h): a llama-style model allocated on the CPU with random weights and inputs.
struct CheckGraph {
  models::LlamaConfig config;
  models::LlamaGraph graph;
  std::unique_ptr<Buffer> weights, cache;
  std::unique_ptr<GraphPlanner> planner;
  std::string label;
};

// `to` given `from`'s values, tensor by tensor, where the two contexts hold the same tensors (names and sizes).
Status copy_values(Context& from, Context& to) {
  if (from.tensor_count() != to.tensor_count()) {
    return Status(StatusCode::kFailed, "calibrate: the check graphs' weights differ in number");
  }
  for (size_t i = 0; i < from.tensor_count(); ++i) {
    Tensor& a = *from.tensor(i);
    Tensor& b = *to.tensor(i);
    if (std::strcmp(a.name, b.name) != 0 || nbytes(a) != nbytes(b)) {
      return TS_ERROR(StatusCode::kFailed, "calibrate: the check graphs' weight %s is not %s", a.name, b.name);
    }
    if (a.data != nullptr && a.view_src == nullptr) TS_RETURN_IF_ERROR(tensor_copy(a, b));
  }
  return Status::Ok();
}

// Their weights and caches are filled on `threads` threads (0: one per hardware thread), the backend's.
Result<std::vector<std::unique_ptr<CheckGraph>>> build_checks(int threads) {
  std::vector<std::unique_ptr<CheckGraph>> out;
  for (const Type wt : {Type::kQ4_0, Type::kF16}) {
    CheckGraph* first = nullptr;  // the graph of one token, whose values the other takes
    for (const int64_t tokens : {int64_t{1}, int64_t{512}}) {
      auto c = std::make_unique<CheckGraph>();
      models::LlamaConfig& m = c->config;
      m.name = std::string("check-") + type_name(wt);
      m.n_layer = 1;
      m.n_embd = 2048;
      m.n_ff = 5632;
      m.n_head = 16;
      m.n_head_kv = 4;
      m.n_vocab = 32000;
      m.n_ctx = 1024;
      m.n_tokens = tokens;
      m.n_outputs = 1;
      m.weight_type = wt;
      m.flash_attn = true;
      c->label = std::string("layer 2048/5632, ") + type_name(wt);
      auto built = models::build_llama(m);
      if (!built.ok()) return built.status();
      c->graph = std::move(built).value();
      auto wb = alloc_ctx_tensors(*c->graph.weights_ctx, *cpu::buffer_type());
      if (!wb.ok()) return wb.status();
      c->weights = std::move(wb).value();
      auto cb = alloc_ctx_tensors(*c->graph.cache_ctx, *cpu::buffer_type());
      if (!cb.ok()) return cb.status();
      c->cache = std::move(cb).value();
      // The graphs of one weight type differ in their tokens alone, so fill_random (seed 1) would give both the same
      // weights and cache: the second copies the first's, which is most of its set-up time saved (far more under
      // the sanitizers).
      if (first == nullptr) {
        TS_RETURN_IF_ERROR(models::fill_random(c->graph, 1, threads));
        first = c.get();
      } else {
        TS_RETURN_IF_ERROR(copy_values(*first->graph.weights_ctx, *c->graph.weights_ctx));
        TS_RETURN_IF_ERROR(copy_values(*first->graph.cache_ctx, *c->graph.cache_ctx));
      }
      c->planner = std::make_unique<GraphPlanner>(cpu::buffer_type());
      TS_RETURN_IF_ERROR(c->planner->alloc_graph(*c->graph.graph));
      TS_RETURN_IF_ERROR(models::set_inputs(c->graph, models::default_inputs(m, 1)));
      out.push_back(std::move(c));
    }
  }
  return out;
}

// The check graphs simulated on a topology of `device` alone, metadata-only.
Result<double> simulate(const sim::DeviceConfig& device, const models::LlamaConfig& m, const Registry* real) {
  SessionConfig sc;
  sc.topology.name = "calibrated";
  sc.topology.devices = {device};
  sc.model = m;
  sc.policy.n_gpu_layers = 0;
  sc.sim.mode = sim::MemoryMode::kMetadata;
  auto s = Session::create(sc, real);
  if (!s.ok()) return s.status();
  auto r = s.value()->run(1, false);
  if (!r.ok()) return r.status();
  return r.value().makespan_us;
}

// The backend measured: the optimised kernels at the best level this CPU has, on the threads asked for.
std::unique_ptr<Backend> measured_backend(const CalibrateOptions& o) {
  cpu::CpuBackendParams params;
  params.n_threads = o.threads;
  params.kernels = cpu::best_kernels();
  return cpu::make_backend(params);
}

// The check's rows: each graph's times (timed[first + k] for checks[k]) and its simulation with `device`.
Result<std::vector<CheckRow>> check_rows(const std::vector<std::unique_ptr<CheckGraph>>& checks,
                                         const std::vector<Timed>& timed, size_t first, const sim::DeviceConfig& device,
                                         const Registry* real) {
  std::vector<CheckRow> rows;
  for (size_t k = 0; k < checks.size(); ++k) {
    CheckRow row;
    row.graph = checks[k]->label;
    row.tokens = checks[k]->config.n_tokens;
    row.measured_us = timed[first + k].median_us;
    row.spread = timed[first + k].spread;
    auto sim_us = simulate(device, checks[k]->config, real);
    if (!sim_us.ok()) return sim_us.status();
    row.simulated_us = sim_us.value();
    rows.push_back(row);
  }
  return rows;
}

}  // namespace

Result<CalibrationRun> calibrate(const CalibrateOptions& o, bool check, const Registry* real_devices) {
  std::unique_ptr<Backend> backend = measured_backend(o);
  CalibrationRun run;
  Calibration& c = run.calibration;
  c.kernels = cpu::kernels_name(cpu::best_kernels());
  c.threads = cpu::n_threads(*backend);

  // The suite (each graph built once, then timed in rounds with the others):
  // 1. the overhead of a node: 256 ADDs of 16 values in a chain;
  // 2. memory bandwidth: an ADD of two 64 MiB arrays (192 MiB read and written);
  // 3. matrix products of 1024 x 1024 weights by 512 columns: f32, f16, q4_0 (2.147 GFLOP each);
  // 4. matrix x vector: q4_0 4096 x 32768 (72 MiB) and f16 4096 x 16384 (128 MiB) by one column;
  // 5. flash attention: prefill (512 queries, 512 keys, 8 heads of 128: 1.074 GFLOP) and decode (1 query, 4096
  //    keys, 32 query heads over 8 KV heads: 16 MiB of f16 K and V read).
  constexpr int kChain = 256;
  constexpr int64_t kBig = int64_t{16} << 20;
  constexpr int64_t kK = 1024, kM = 1024, kN = 512;
  std::vector<std::unique_ptr<Bench>> benches;
  std::vector<Job> jobs;
  auto add_bench = [&](const std::string& what, auto make) -> Status {
    auto b = build_bench(what, make);
    if (!b.ok()) return b.status();
    benches.push_back(std::move(b).value());
    jobs.push_back({what, timed_compute(*backend, benches.back()->graph, what)});
    return Status::Ok();
  };
  TS_RETURN_IF_ERROR(add_bench("launch overhead", [](Context& l, Context& n) {
    Tensor* x = l.new_tensor_1d(Type::kF32, 16);
    Tensor* y = l.new_tensor_1d(Type::kF32, 16);
    for (int i = 0; i < kChain; ++i) x = add(n, x, y);
    return x;
  }));
  TS_RETURN_IF_ERROR(add_bench("bandwidth", [](Context& l, Context& n) {
    return add(n, l.new_tensor_1d(Type::kF32, kBig), l.new_tensor_1d(Type::kF32, kBig));
  }));
  const Type mm_types[3] = {Type::kF32, Type::kF16, Type::kQ4_0};
  for (const Type t : mm_types) {
    TS_RETURN_IF_ERROR(add_bench(std::string("matrix x matrix ") + type_name(t), [t](Context& l, Context& n) {
      return mul_mat(n, l.new_tensor_2d(t, kK, kM), l.new_tensor_2d(Type::kF32, kK, kN));
    }));
  }
  TS_RETURN_IF_ERROR(add_bench("matrix x vector", [](Context& l, Context& n) {
    return mul_mat(n, l.new_tensor_2d(Type::kQ4_0, 4096, 32768), l.new_tensor_2d(Type::kF32, 4096, 1));
  }));
  TS_RETURN_IF_ERROR(add_bench("matrix x vector f16", [](Context& l, Context& n) {
    return mul_mat(n, l.new_tensor_2d(Type::kF16, 4096, 16384), l.new_tensor_2d(Type::kF32, 4096, 1));
  }));
  TS_RETURN_IF_ERROR(add_bench("flash attention prefill", [](Context& l, Context& n) {
    return flash_attn_ext(n, l.new_tensor_3d(Type::kF32, 128, 512, 8), l.new_tensor_3d(Type::kF16, 128, 512, 8),
                          l.new_tensor_3d(Type::kF16, 128, 512, 8), nullptr, 0.0884f);
  }));
  TS_RETURN_IF_ERROR(add_bench("flash attention decode", [](Context& l, Context& n) {
    return flash_attn_ext(n, l.new_tensor_3d(Type::kF32, 128, 1, 32), l.new_tensor_3d(Type::kF16, 128, 4096, 8),
                          l.new_tensor_3d(Type::kF16, 128, 4096, 8), nullptr, 0.0884f);
  }));
  const size_t n_suite = jobs.size();
  // --check: the check graphs in the same rounds, so the device and the graphs it is checked on are measured in the
  // same moments of a shared machine
  std::vector<std::unique_ptr<CheckGraph>> checks;
  if (check) {
    auto built = build_checks(o.threads);
    if (!built.ok()) return built.status();
    checks = std::move(built).value();
    for (const auto& g : checks) {
      jobs.push_back({g->label, timed_compute(*backend, *g->graph.graph, g->label)});
    }
  }
  auto timed = run_rounds(jobs, o.repeats, o.progress);
  if (!timed.ok()) return timed.status();
  const std::vector<Timed>& t = timed.value();
  auto record = [&](size_t i, const std::string& name, double value, const std::string& unit, const std::string& what) {
    c.measurements.push_back({name, unit, what, value, t[i].spread});
    c.noise = std::max(c.noise, t[i].spread);
  };
  auto per_s = [&](size_t i) { return 1e6 / t[i].median_us; };
  const double launch_us = t[0].median_us / kChain;
  record(0, "launch_overhead", launch_us, "us", "per node, 256 ADDs of 16 values");
  const double bandwidth = 3.0 * kBig * 4 * per_s(1);
  record(1, "bandwidth", bandwidth / 1e9, "GB/s", "ADD of 2 x 64 MiB f32, 3 x 64 MiB moved");
  const char* mm_names[3] = {"flops_f32", "flops_f16", "flops_quant"};
  double flops[3];
  for (size_t i = 0; i < 3; ++i) {
    flops[i] = 2.0 * kK * kM * kN * per_s(2 + i);
    record(2 + i, mm_names[i], flops[i] / 1e9, "GFLOP/s",
           std::string("MUL_MAT of ") + type_name(mm_types[i]) + " 1024 x 1024 by f32 1024 x 512");
  }
  // Matrix x vector: the f16 one is memory-bound (its bytes over its time: the class's memory share); the q4_0 one
  // reads 3.6 times fewer bytes for the same products and may be bound by its dequantizing instead (its products
  // over its time: the class's compute share, against flops_quant). The cost model then gives each its own time.
  const double mv_q_flops = 2.0 * 4096 * 32768 * per_s(5);
  record(5, "mat_vec_q4_0_flops", mv_q_flops / 1e9, "GFLOP/s", "MUL_MAT of q4_0 4096 x 32768 by 1 column");
  const double mv_bw = (4096.0 * 16384 * 2 + 4096 * 4 + 16384 * 4) * per_s(6);
  record(6, "mat_vec_f16_bandwidth", mv_bw / 1e9, "GB/s", "MUL_MAT of f16 4096 x 16384 by 1 column");
  const double fa_flops = 4.0 * 128 * 512 * 512 * 8 * per_s(7);
  record(7, "attn_prefill_flops", fa_flops / 1e9, "GFLOP/s", "FLASH_ATTN_EXT 512 x 512, 8 x 128");
  const double dec_bw = (2.0 * 128 * 4096 * 8 * 2 + 2.0 * 128 * 32 * 4) * per_s(8);
  record(8, "attn_decode_bandwidth", dec_bw / 1e9, "GB/s", "FLASH_ATTN_EXT 1 x 4096, 32 / 8 heads");

  // The device: the measured peaks, and the shares of the classes whose kernels reach less (or more) of them. The
  // cost model times an op by its weight's type (src[0]): FLASH_ATTN_EXT's is q, f32.
  sim::DeviceConfig& d = c.device;
  d.name = "cpu";
  d.type = DeviceType::kCpu;
  d.wraps = "CPU";
  d.host_visible = true;
  d.alignment = 64;
  d.caps.async = false;
  d.caps.events = false;
  d.caps.host_buffer = false;
  d.caps.buffer_from_host_ptr = true;
  d.description = "this machine's CPU backend as `tessera calibrate` measured it (" + c.kernels + " kernels, " +
                  std::to_string(c.threads) + " threads)";
  d.cost.launch_overhead_us = launch_us;
  d.cost.mem_bandwidth = bandwidth;
  d.cost.flops_f32 = flops[0];
  d.cost.flops_f16 = flops[1];
  d.cost.flops_quant = flops[2];
  d.host_bandwidth = bandwidth;
  d.host_latency_us = 1.0;
  // its memory: this machine's (the pages the OS has), else what a device gets by default
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page > 0) d.memory = static_cast<uint64_t>(pages) * static_cast<uint64_t>(page);
  auto share = [](double v) { return std::clamp(v, 0.01, 4.0); };
  d.cost.efficiency[static_cast<size_t>(sim::KernelClass::kMatVec)].memory = share(mv_bw / bandwidth);
  d.cost.efficiency[static_cast<size_t>(sim::KernelClass::kMatVec)].compute = share(mv_q_flops / flops[2]);
  d.cost.efficiency[static_cast<size_t>(sim::KernelClass::kAttnPrefill)].compute = share(fa_flops / flops[0]);
  d.cost.efficiency[static_cast<size_t>(sim::KernelClass::kAttnDecode)].memory = share(dec_bw / bandwidth);

  auto rows = check_rows(checks, t, n_suite, d, real_devices);
  if (!rows.ok()) return rows.status();
  run.check = std::move(rows).value();
  return run;
}

Result<std::vector<CheckRow>> check_calibration(const sim::DeviceConfig& device, const CalibrateOptions& o,
                                                const Registry* real_devices) {
  std::unique_ptr<Backend> backend = measured_backend(o);
  auto built = build_checks(o.threads);
  if (!built.ok()) return built.status();
  std::vector<Job> jobs;
  for (const auto& g : built.value()) jobs.push_back({g->label, timed_compute(*backend, *g->graph.graph, g->label)});
  auto timed = run_rounds(jobs, o.repeats, o.progress);
  if (!timed.ok()) return timed.status();
  return check_rows(built.value(), timed.value(), 0, device, real_devices);
}

}  // namespace tessera::harness
