// llama.cpp's fit (tessera/llama/llama_fit.h; docs/fit.md). The steps follow common/fit.cpp's common_params_fit_impl
// (ggml-org/llama.cpp), step by step, including its integer arithmetic; each is cited where it is taken.
#include "tessera/llama/llama_fit.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>

// Assigns a Result's value to `lhs` (a declaration or a variable), or returns its error.
#define FIT_CAT2(a, b) a##b
#define FIT_CAT(a, b) FIT_CAT2(a, b)
#define FIT_ASSIGN(lhs, expr)                                                     \
  auto FIT_CAT(fit_r_, __LINE__) = (expr);                                        \
  if (!FIT_CAT(fit_r_, __LINE__).ok()) return FIT_CAT(fit_r_, __LINE__).status(); \
  lhs = std::move(FIT_CAT(fit_r_, __LINE__)).value()

namespace tessera::llama {

using namespace tessera::harness;

namespace {

// The user's -ngl as a layer count: a whole number >= 0 as written, else -1 (unset, "all", "auto", -1: every layer).
long user_ngl_count(const std::string& text) {
  if (text.empty()) return -1;
  char* end = nullptr;
  const long n = std::strtol(text.c_str(), &end, 10);
  return end != nullptr && *end == '\0' && n >= 0 ? n : -1;
}

constexpr int64_t kMiB = int64_t{1} << 20;

std::string str(const char* fmt, long long a = 0, long long b = 0, long long c = 0, long long d = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, fmt, a, b, c, d);
  return buf;
}

// llama.cpp computes a step as uint32_t step = int64_t(delta) * (target - mem) / (mem_high - mem): a negative
// quotient wraps (and is then clamped to delta - 1). Kept as it is.
int step_size(int delta, int64_t target, int64_t mem, int64_t mem_high) {
  const int64_t q = mem_high == mem ? int64_t{delta} : int64_t{delta} * (target - mem) / (mem_high - mem);
  uint32_t step = static_cast<uint32_t>(q);
  step = std::max(step, uint32_t{1});
  step = std::min(step, static_cast<uint32_t>(delta - 1));
  return static_cast<int>(step);
}

class Fit {
 public:
  Fit(const FitProblem& p, const FitMeasure& m) : p_(p), measure_(m), nd_(p.gpus.size()) {}

  Result<FitResult> run();

 private:
  // llama.cpp's set_ngl_tensor_split_tbo: -ngl the sum, -ts the layers per GPU, -ot the partial layers' patterns.
  FitSetting setting_of(const std::vector<FitLayers>& layers, const std::vector<std::string>& overflow) const {
    FitSetting s;
    s.n_ctx = n_ctx_;
    s.placed = true;
    s.n_gpu_layers = 0;
    for (size_t id = 0; id < nd_; ++id) {
      s.n_gpu_layers += layers[id].n_layer;
      if (nd_ > 1) s.tensor_split.push_back(layers[id].n_layer);
    }
    int il0 = p_.n_layer + 1 - s.n_gpu_layers;
    for (size_t id = 0; id < nd_; ++id) {
      il0 += layers[id].n_full();
      for (int il = il0; il < il0 + layers[id].n_part; ++il) {
        const bool first = il == il0;
        s.overrides.emplace_back(fit_overflow_pattern(il, first ? layers[id].overflow : LayerFraction::kMoe),
                                 first ? overflow[id] : "CPU");
      }
      il0 += layers[id].n_part;
    }
    return s;
  }

  Result<std::vector<int64_t>> used(const FitSetting& s) {
    ++result_.measurements;
    auto r = measure_(s);
    if (!r.ok()) return r.status();
    if (r.value().size() != nd_) {
      return Status(StatusCode::kFailed, "fit: the measurement gave the use of " + std::to_string(r.value().size()) +
                                             " GPUs, not " + std::to_string(nd_));
    }
    std::vector<int64_t> out;
    for (const FitUse& u : r.value()) out.push_back(u.total);
    last_ = std::move(r).value();
    return out;
  }
  Result<std::vector<int64_t>> used(const std::vector<FitLayers>& layers, const std::vector<std::string>& overflow) {
    return used(setting_of(layers, overflow));
  }

  void log(const std::string& line) { result_.log.push_back(line); }
  std::string gpu_line(size_t id, const FitLayers& l, int64_t mem, bool moe) const {
    std::string s = "  - " + p_.gpus[id] + str(": %2lld layers", l.n_layer);
    if (moe) s += str(" (%2lld overflowing)", l.n_part);
    return s + str(", %6lld MiB used, %6lld MiB free", mem / kMiB, (p_.free[id] - mem) / kMiB);
  }

  Status step2_context(int64_t sum_free, int64_t sum_used, int64_t sum_model, int64_t sum_projected_free, bool* done);
  Status step3_dense(std::vector<FitLayers>* layers, std::vector<int64_t>* mem, const std::vector<int64_t>& targets,
                     const std::vector<std::string>& overflow);
  Status step4_moe(std::vector<FitLayers>* layers, std::vector<int64_t>* mem, const std::vector<int64_t>& targets,
                   std::vector<std::string>* overflow);

  const FitProblem& p_;
  const FitMeasure& measure_;
  const size_t nd_;
  int64_t n_ctx_ = 0;  // cparams->n_ctx as fit changes it
  std::vector<FitUse> last_;
  FitResult result_;
};

// Step 2: a context the user left unset shrinks by linear interpolation between the training context and n_ctx_min.
Status Fit::step2_context(int64_t sum_free, int64_t sum_used, int64_t sum_model, int64_t sum_projected_free,
                          bool* done) {
  int64_t sum_margins = 0;
  for (int64_t m : p_.margins) sum_margins += m;
  const int64_t global_surplus = sum_projected_free - sum_margins;
  if (global_surplus >= 0) return Status::Ok();
  log(str("need to use %lld MiB less in total", -global_surplus / kMiB));
  if (n_ctx_ != 0) {
    log(str("context size set by user to %lld -> no change", n_ctx_));
    return Status::Ok();
  }
  if (p_.n_ctx_train <= p_.n_ctx_min) {
    log(str("default model context size is %lld which is <= the min. context size of %lld -> no change", p_.n_ctx_train,
            p_.n_ctx_min));
    return Status::Ok();
  }
  int64_t target = sum_free - sum_margins;
  if (nd_ > 1) {
    // Whole layers (dense) or whole tensors (MoE, about a third of a layer) per device: half a layer or tensor of
    // waste per device expected, (nd + 1) of them allowed for.
    // min(uint32_t(n_gpu_layers), n_layer): unset, -1 and "all" (negative in llama.cpp) count as every layer.
    const long given = user_ngl_count(p_.user_ngl);
    const int ngl = given >= 0 ? static_cast<int>(std::min<long>(given, p_.n_layer)) : p_.n_layer;
    const int64_t per_layer = sum_model / std::max(ngl, 1);
    target -= static_cast<int64_t>(nd_ + 1) * per_layer / (p_.n_expert == 0 ? 2 : 6);
  }
  n_ctx_ = p_.n_ctx_min;
  FitSetting s;
  s.n_ctx = n_ctx_;
  FIT_ASSIGN(auto at_min, used(s));
  int64_t sum_min = 0;
  for (int64_t u : at_min) sum_min += u;
  if (target > sum_min) {
    n_ctx_ += (p_.n_ctx_train - p_.n_ctx_min) * (target - sum_min) / (sum_used - sum_min);
    n_ctx_ = std::max(n_ctx_ - n_ctx_ % 256, p_.n_ctx_min);  // rounded down for the CUDA backend
    const int64_t per_ctx = (sum_used - sum_min) / (p_.n_ctx_train - p_.n_ctx_min);
    log(str("context size reduced from %lld to %lld -> need %lld MiB less memory in total", p_.n_ctx_train, n_ctx_,
            (p_.n_ctx_train - n_ctx_) * per_ctx / kMiB));
    if (nd_ <= 1) {
      log("entire model can be fit by reducing context");
      *done = true;
    } else {
      log("entire model should be fit across devices by reducing context");
    }
  } else {
    log(str("context size reduced from %lld to %lld -> need %lld MiB less memory in total", p_.n_ctx_train, n_ctx_,
            (sum_used - sum_min) / kMiB));
  }
  return Status::Ok();
}

// Step 3: the GPUs back to front, each by false position between what it holds and every unassigned layer.
Status Fit::step3_dense(std::vector<FitLayers>* layers_io, std::vector<int64_t>* mem_io,
                        const std::vector<int64_t>& targets, const std::vector<std::string>& overflow) {
  std::vector<FitLayers>& layers = *layers_io;
  std::vector<int64_t>& mem = *mem_io;
  const bool moe = p_.n_expert > 0;
  log(moe ? "filling dense-only layers back-to-front:" : "filling dense layers back-to-front:");
  for (int id = static_cast<int>(nd_) - 1; id >= 0; --id) {
    const size_t i = static_cast<size_t>(id);
    int n_unassigned = p_.n_layer + 1;
    for (size_t jd = i + 1; jd < nd_; ++jd) n_unassigned -= layers[jd].n_layer;
    std::vector<FitLayers> high = layers;
    high[i].n_layer = n_unassigned;
    if (moe) high[i].n_part = i < nd_ - 1 ? high[i].n_layer : high[i].n_layer - 1;
    if (high[i].n_layer > 0) {
      FIT_ASSIGN(std::vector<int64_t> mem_high, used(high, overflow));
      if (mem_high[i] > targets[i]) {
        int delta = high[i].n_layer - layers[i].n_layer;
        while (delta > 1) {
          const int step = step_size(delta, targets[i], mem[i], mem_high[i]);
          std::vector<FitLayers> test = layers;
          test[i].n_layer += step;
          if (moe) test[i].n_part += i == nd_ - 1 && test[i].n_part == 0 ? step - 1 : step;  // output layer: whole
          FIT_ASSIGN(std::vector<int64_t> mem_test, used(test, overflow));
          if (mem_test[i] <= targets[i]) {
            layers = test;
            mem = mem_test;
          } else {
            high = test;
            mem_high = mem_test;
          }
          delta = high[i].n_layer - layers[i].n_layer;
        }
      } else {
        layers = high;
        mem = mem_high;
      }
    }
    log(gpu_line(i, layers[i], mem[i], false));
  }
  return Status::Ok();
}

// Step 4 (MoE, the dense weights fit): the expert-less layers become whole layers front to back, then one more
// partial layer per GPU where it fits (attention + up, then + gate; else attention alone).
Status Fit::step4_moe(std::vector<FitLayers>* layers_io, std::vector<int64_t>* mem_io,
                      const std::vector<int64_t>& targets, std::vector<std::string>* overflow_io) {
  std::vector<FitLayers>& layers = *layers_io;
  std::vector<int64_t>& mem = *mem_io;
  std::vector<std::string>& overflow = *overflow_io;
  size_t dense_start = nd_;
  for (int id = static_cast<int>(nd_) - 1; id >= 0; --id) {
    if (layers[static_cast<size_t>(id)].n_layer == 0) break;
    dense_start = static_cast<size_t>(id);
  }
  if (dense_start >= nd_) return Status::Ok();
  log("converting dense-only layers to full layers and filling them front-to-back with overflow to next "
      "device/system memory:");
  for (size_t id = 0; id <= dense_start && dense_start < nd_; ++id) {
    std::vector<FitLayers> high = layers;
    for (size_t jd = dense_start; jd < nd_; ++jd) {
      const int move = jd < nd_ - 1 ? high[jd].n_layer : high[jd].n_layer - 1;
      high[id].n_layer += move;
      high[jd].n_layer -= move;
      high[jd].n_part = 0;
    }
    size_t dense_start_high = nd_ - 1;
    FIT_ASSIGN(std::vector<int64_t> mem_high, used(high, overflow));
    if (mem_high[id] > targets[id]) {
      int delta = high[id].n_full() - layers[id].n_full();
      while (delta > 1) {
        const int step = step_size(delta, targets[id], mem[id], mem_high[id]);
        std::vector<FitLayers> test = layers;
        size_t ds_test = dense_start;
        int converted = 0;
        for (; ds_test < nd_; ++ds_test) {
          const int n = std::min(step - converted, test[ds_test].n_part);
          test[ds_test].n_layer -= n;
          test[ds_test].n_part -= n;
          test[id].n_layer += n;
          converted += n;
          if (test[ds_test].n_part > 0) break;
        }
        FIT_ASSIGN(std::vector<int64_t> mem_test, used(test, overflow));
        if (mem_test[id] <= targets[id]) {
          layers = test;
          mem = mem_test;
          dense_start = ds_test;
        } else {
          high = test;
          mem_high = mem_test;
          dense_start_high = ds_test;
        }
        delta = high[id].n_full() - layers[id].n_full();
      }
    } else {
      layers = high;
      mem = mem_high;
      dense_start = dense_start_high;
    }
    // One more partial layer.
    if (dense_start < nd_ && layers[dense_start].n_layer > (id < nd_ - 1 ? 0 : 1)) {
      std::vector<FitLayers> test = layers;
      size_t ds_test = dense_start;
      test[ds_test].n_layer--;
      test[ds_test].n_part--;
      test[id].n_layer++;
      test[id].n_part++;
      if (test[ds_test].n_part == 0) ds_test++;
      std::vector<std::string> overflow_test = overflow;
      if (id < nd_ - 1) overflow_test[id] = p_.gpus[id + 1];
      auto fits = [&](const std::vector<int64_t>& m) {
        return m[id] < targets[id] && (id + 1 == nd_ || m[id + 1] < targets[id + 1]);
      };
      auto accept = [&](const std::vector<int64_t>& m) {
        layers = test;
        overflow = overflow_test;
        mem = m;
        dense_start = ds_test;
      };
      test[id].overflow = LayerFraction::kUp;
      FIT_ASSIGN(std::vector<int64_t> mem_test, used(test, overflow_test));
      if (fits(mem_test)) {
        accept(mem_test);
        test[id].overflow = LayerFraction::kGate;
        FIT_ASSIGN(mem_test, used(test, overflow_test));
        if (fits(mem_test)) accept(mem_test);
      } else {
        test[id].overflow = LayerFraction::kAttn;
        FIT_ASSIGN(mem_test, used(test, overflow_test));
        if (fits(mem_test)) accept(mem_test);
      }
    }
    log(gpu_line(id, layers[id], mem[id], true));
  }
  for (size_t id = dense_start + 1; id < nd_; ++id) log(gpu_line(id, layers[id], mem[id], true));
  return Status::Ok();
}

Result<FitResult> Fit::run() {
  if (p_.free.size() != nd_ || p_.margins.size() != nd_) {
    return Status(StatusCode::kInvalidArgument, "fit: free memory and margins are needed for every GPU");
  }
  n_ctx_ = p_.n_ctx;
  result_.setting.n_ctx = n_ctx_;
  if (nd_ == 0) {
    log("no GPU: nothing to fit (llama.cpp's fit assumes system memory is unlimited)");
    return result_;
  }
  // Step 1: the user's own options.
  FIT_ASSIGN(const std::vector<int64_t> full, used(result_.setting));
  const std::vector<FitUse> full_use = last_;
  int64_t sum_free = 0, sum_used = 0, sum_projected_free = 0, sum_model = 0;
  bool changes_needed = false;
  for (size_t id = 0; id < nd_; ++id) {
    sum_free += p_.free[id];
    sum_used += full[id];
    sum_projected_free += p_.free[id] - full[id];
    sum_model += full_use[id].model;
    changes_needed = changes_needed || p_.free[id] - full[id] < p_.margins[id];
    log("  - " + p_.gpus[id] +
        str(": %6lld used, %6lld free vs. target of %6lld MiB", full[id] / kMiB, (p_.free[id] - full[id]) / kMiB,
            p_.margins[id] / kMiB));
  }
  log(str("projected to use %lld MiB of device memory vs. %lld MiB of free device memory", sum_used / kMiB,
          sum_free / kMiB));
  if (!changes_needed) {
    log("targets for free memory can be met on all devices, no changes needed");
    return result_;
  }
  bool done = false;
  TS_RETURN_IF_ERROR(step2_context(sum_free, sum_used, sum_model, sum_projected_free, &done));
  result_.setting.n_ctx = n_ctx_;
  if (done) {
    result_.outcome = FitResult::Outcome::kFitted;
    return result_;
  }
  auto fail = [&](const std::string& why) {
    result_.outcome = FitResult::Outcome::kFailed;
    result_.failure = why;
    return result_;
  };
  if (!p_.user_ngl.empty()) return fail("n_gpu_layers already set by user to " + p_.user_ngl + ", abort");
  if (nd_ > 1 && !p_.user_ts.empty()) return fail("model_params::tensor_split already set by user, abort");
  if (nd_ > 1 && p_.row_split)
    return fail("changing weight allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort");
  if (!p_.user_ot.empty()) return fail("model_params::tensor_buft_overrides already set by user, abort");

  int64_t surplus_cpu_moe = 0;
  if (p_.n_expert > 0) {
    FitSetting s;
    s.n_ctx = n_ctx_;
    s.placed = true;
    s.overrides.emplace_back(kFitMoePatternAll, "CPU");
    FIT_ASSIGN(const std::vector<int64_t> cpu_moe, used(s));
    for (size_t id = 0; id < nd_; ++id) surplus_cpu_moe += p_.free[id] - cpu_moe[id] - p_.margins[id];
    log(surplus_cpu_moe > 0 ? str("with only dense weights in device memory there is a total surplus of %lld MiB",
                                  surplus_cpu_moe / kMiB)
                            : str("with only dense weights in device memory there is still a total deficit of %lld MiB",
                                  -surplus_cpu_moe / kMiB));
  }
  std::vector<int64_t> targets;
  for (size_t id = 0; id < nd_; ++id) targets.push_back(p_.free[id] - p_.margins[id]);
  std::vector<std::string> overflow(nd_, "CPU");
  std::vector<FitLayers> layers(nd_);
  FIT_ASSIGN(std::vector<int64_t> mem, used(layers, overflow));
  TS_RETURN_IF_ERROR(step3_dense(&layers, &mem, targets, overflow));
  if (p_.n_expert > 0 && surplus_cpu_moe > 0) TS_RETURN_IF_ERROR(step4_moe(&layers, &mem, targets, &overflow));
  result_.layers = layers;
  // The layers placed, a GPU may still be over its target (with no layer on it: what the context alone needs, its
  // compute buffer). llama.cpp's newer fit then gives up rather than hand out a placement it measured to overflow
  // (common/fit.cpp: "the fitted placement does not fit within the margins at a context size of N, abort"); the
  // user's options stay, as with every failure.
  for (size_t id = 0; id < nd_; ++id) {
    if (mem[id] > targets[id]) {
      return fail(str("the fitted placement does not fit within the margins at a context size of %lld, abort",
                      static_cast<long long>(n_ctx_ > 0 ? n_ctx_ : p_.n_ctx_train)));
    }
  }
  result_.outcome = FitResult::Outcome::kFitted;
  result_.setting = setting_of(layers, overflow);
  return result_;
}

}  // namespace

const char* const kFitMoePatternAll = "blk\\.\\d+\\.ffn_(up|down|gate_up|gate)_(ch|)exps";

std::string fit_overflow_pattern(int il, LayerFraction f) {
  const std::string blk = "blk\\." + std::to_string(il) + "\\.";
  switch (f) {
    case LayerFraction::kAttn: return blk + "ffn_(gate|up|gate_up|down).*";
    case LayerFraction::kUp: return blk + "ffn_(gate|gate_up|down).*";
    case LayerFraction::kGate: return blk + "ffn_down.*";
    case LayerFraction::kMoe: break;
  }
  return blk + "ffn_(up|down|gate_up|gate)_(ch|)exps";
}

std::string fit_flags(const FitSetting& s, int64_t n_ctx_resolved, int n_gpu_layers_resolved) {
  std::string f = "-c " + std::to_string(s.n_ctx > 0 ? s.n_ctx : n_ctx_resolved);
  f += " -ngl " + std::to_string(s.placed && s.n_gpu_layers >= 0 ? s.n_gpu_layers : n_gpu_layers_resolved);
  if (!s.placed) return f;
  size_t n = s.tensor_split.size();
  while (n > 1 && s.tensor_split[n - 1] == 0) --n;
  if (n > 1) {
    f += " -ts ";
    for (size_t i = 0; i < n; ++i) f += (i ? "," : "") + std::to_string(s.tensor_split[i]);
  }
  if (!s.overrides.empty()) {
    f += " -ot \"";
    for (size_t i = 0; i < s.overrides.size(); ++i) {
      f += (i ? "," : "") + s.overrides[i].first + "=" + s.overrides[i].second;
    }
    f += "\"";
  }
  return f;
}

std::string fit_flags(const FitSetting& s, const FitProblem& p) {
  if (s.placed) return fit_flags(s, p.n_ctx_train, p.n_layer + 1);
  std::string f = "-c " + std::to_string(s.n_ctx > 0 ? s.n_ctx : p.n_ctx_train);
  f += " -ngl " + (user_ngl_count(p.user_ngl) >= 0 ? p.user_ngl : std::to_string(p.n_layer + 1));
  if (!p.user_ts.empty() && p.gpus.size() > 1) f += " -ts " + p.user_ts;
  if (p.row_split) f += " -sm row";
  if (!p.user_ot.empty()) f += " " + p.user_ot;
  return f;
}

Result<FitResult> llama_fit(const FitProblem& p, const FitMeasure& measure) {
  Fit fit(p, measure);
  return fit.run();
}

}  // namespace tessera::llama
