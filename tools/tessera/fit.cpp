// `tessera fit` (docs/fit.md): llama.cpp's fit of -c, -ngl, -ts and -ot to the simulated devices' free memory
// (tessera/llama/llama_fit.h), --strict (does the user's own placement leave each GPU its margin?) and
// --fill-in-order (the largest layer offload per GPU, GPUs filled in order).
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include <CLI/CLI.hpp>

#include "tessera/models/fixtures.h"
#include "tessera/builtin.h"
#include "tessera/gguf.h"
#include "tessera/llama/llama_fit.h"
#include "tessera/harness/common/text_table.h"
#include "tessera/harness/topology/topology.h"
#include "extra_args.h"
#include "json_out.h"
#include "progress.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::llama;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

int input_error(const std::string& message) {
  std::fprintf(stderr, "tessera: %s\n", message.c_str());
  return kInputError;
}

// A trial that cannot be measured: bad input (an override's pattern, a shape) exits 2, a placement that cannot be
// planned 1.
int measure_error(const Status& st) {
  std::fprintf(stderr, "tessera: %s\n", st.message().c_str());
  const bool input = st.code() == StatusCode::kInvalidArgument || st.code() == StatusCode::kNotFound;
  return input ? kInputError : kExpectationFailed;
}

// --fit-target: MiB per GPU, comma-separated (llama.cpp's -fitt).
Result<std::vector<int64_t>> parse_fit_target(const std::string& text) {
  std::vector<int64_t> out;
  if (text.empty()) return out;
  size_t at = 0;
  while (at <= text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const bool digits = !item.empty() && item.size() <= 9 && item.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) {
      return Status(StatusCode::kInvalidArgument,
                    "--fit-target " + text + ": '" + item +
                        "' is not a whole number of MiB up to 999999999 (MiB per GPU, comma-separated: 1024 or "
                        "2048,512)");
    }
    out.push_back(std::stoll(item) * kMiB);
    at = comma + 1;
  }
  return out;
}

// The model's training context: a GGUF file's <arch>.context_length, a preset's n_ctx.
Result<int64_t> training_context(const std::string& model_path, const SessionConfig& base) {
  if (model_path.empty()) return base.model.n_ctx;
  auto file = models::fixtures::read_model_or_fixture(model_path);
  if (!file.ok()) return file.status();
  const gguf::File& f = file.value().metadata();
  auto arch = f.get_string("general.architecture");
  if (!arch.ok()) return arch.status();
  auto n = f.get_int(arch.value() + ".context_length");
  if (!n.ok() || n.value() <= 0) return base.model.n_ctx;  // no key: the model as built
  return n.value();
}

std::string mib(int64_t bytes) { return format_message("%lld MiB", static_cast<long long>(bytes / kMiB)); }

// The per-GPU table: llama.cpp's buffer name, free memory, margin, model / KV + compute / total, what is left, and
// how far a GPU is short of its margin: --wide after the row, else (`say_short`) on a line after the table.
std::string gpu_table(const SessionConfig& cfg, const FitProblem& p, const std::vector<FitUse>& use, bool wide,
                      bool say_short) {
  using Align = TextTable::Align;
  TextTable table({{"device", Align::kLeft, 10, true},
                   {"buffer", Align::kLeft, 6},
                   {"free", Align::kRight, 10},
                   {"margin", Align::kRight, 10},
                   {"model", Align::kRight, 10},
                   {"other", Align::kRight, 10},
                   {"used", Align::kRight, 10},
                   {"left", Align::kRight, 10}});
  std::string shorts;
  size_t g = 0;
  for (const sim::DeviceConfig& d : cfg.topology.devices) {
    if (d.type == DeviceType::kCpu || g >= use.size()) continue;
    const int64_t left = p.free[g] - use[g].total;
    const std::string shortfall = left < p.margins[g] ? mib(p.margins[g] - left + kMiB - 1) : "";
    table.add({d.name, p.gpus[g], mib(p.free[g]), mib(p.margins[g]), mib(use[g].model),
               mib(use[g].total - use[g].model), mib(use[g].total), mib(left)},
              wide && !shortfall.empty() ? "  (" + shortfall + " short of the margin)" : "");
    if (!shortfall.empty()) shorts += (shorts.empty() ? "" : ", ") + d.name + " " + shortfall;
    ++g;
  }
  return table.render(wide) + (!wide && say_short && !shorts.empty() ? "short of the margin: " + shorts + "\n" : "");
}

ojson gpus_json(const SessionConfig& cfg, const FitProblem& p, const std::vector<FitUse>& use) {
  ojson a = ojson::array();
  size_t g = 0;
  for (const sim::DeviceConfig& d : cfg.topology.devices) {
    if (d.type == DeviceType::kCpu || g >= use.size()) continue;
    const int64_t left = p.free[g] - use[g].total;
    a.push_back({{"device", d.name},
                 {"buffer", p.gpus[g]},
                 {"free", p.free[g]},
                 {"margin", p.margins[g]},
                 {"model", use[g].model},
                 {"used", use[g].total},
                 {"left", left},
                 {"over", std::max<int64_t>(0, p.margins[g] - left)}});
    ++g;
  }
  return a;
}

// Layers per GPU and on the CPU in a planned session (repeating layers; the output layer apart).
std::pair<std::vector<int>, int> layer_counts(Session& s) {
  const auto& devs = s.config().topology.devices;
  std::vector<int> per(devs.size(), 0);
  const auto& ld = s.placement().layer_device;
  for (size_t il = 0; il < ld.size() && il < static_cast<size_t>(s.config().model.n_layer); ++il) {
    if (ld[il] >= 0 && static_cast<size_t>(ld[il]) < per.size()) per[static_cast<size_t>(ld[il])] += 1;
  }
  std::vector<int> gpus;
  int cpu = 0;
  for (size_t i = 0; i < devs.size(); ++i) (devs[i].type == DeviceType::kCpu ? cpu : gpus.emplace_back()) += per[i];
  return {gpus, cpu};
}

const char* outcome_name(FitResult::Outcome o) {
  switch (o) {
    case FitResult::Outcome::kUnchanged: return "unchanged";
    case FitResult::Outcome::kFitted: return "fitted";
    case FitResult::Outcome::kFailed: return "failed";
  }
  return "";
}

// The session of the final setting: on the real topology when it plans there, else on the unbounded one (whose
// capacities are then reported as the real ones); *note says which.
std::unique_ptr<Session> final_session(const SessionConfig& base, const SessionFitInputs& in, const FitProblem& p,
                                       const FitSetting& setting, std::string* note, Status* error) {
  auto bounded = fit_session_config(base, in, p, setting, false);
  if (!bounded.ok()) {
    *error = bounded.status();
    return nullptr;
  }
  auto s = Session::create(bounded.value(), &builtin_registry());
  Status st = s.ok() ? s.value()->plan() : s.status();
  if (st.ok()) return std::move(s).value();
  *note = "the simulator cannot allocate this placement: " + st.message();
  auto unbounded = fit_session_config(base, in, p, setting, true);
  if (!unbounded.ok()) {
    *error = unbounded.status();
    return nullptr;
  }
  auto u = Session::create(unbounded.value(), &builtin_registry());
  st = u.ok() ? u.value()->plan() : u.status();
  if (!st.ok()) {
    *error = st;
    return nullptr;
  }
  return std::move(u).value();
}

ojson devices_json(Session& s, bool unbounded) {
  ojson d = memory_json(s);
  if (unbounded) {
    for (ojson& x : d) x["capacity"] = x["capacity"].get<uint64_t>() - (uint64_t{1} << 50);
  }
  return d;
}

}  // namespace

void add_fit_options(CLI::App* fit, FitArgs* a) {
  auto* strict = fit->add_flag("--strict", a->strict,
                               "check the placement of the given options (-ngl, -ts, -ot, ...) on every GPU: exit 1 "
                               "naming each GPU that keeps less than its margin free, and by how much");
  auto* order = fit->add_flag("--fill-in-order", a->fill_in_order,
                              "Tessera's search instead of llama.cpp's: the largest layer offload per GPU, GPUs "
                              "filled in order, each leaving its margin (topology fit_margin or --fit-target) free");
  strict->excludes(order);
  fit->add_flag("--wide", a->wide, kWideHelp);
  auto* rank = fit->add_flag("--rank", a->rank,
                             "also rank the placements that fit (llama.cpp's fit or the given options, whole layers "
                             "only, every expert on the CPU, each GPU alone) by their simulated llama-bench speed");
  rank->excludes(order);
  fit->add_option("--rank-by", a->rank_by, "with --rank: tg128 (default) or pp512")
      ->check(CLI::IsMember({"tg128", "pp512"}));
  fit->add_option("--fit-target", a->fit_target,
                  "llama.cpp's -fitt: MiB to leave free per GPU, one value for all or one per GPU (default: each "
                  "GPU's topology fit_margin, else 1024)")
      ->type_name("MIB[,MIB...]");
  fit->add_option("--fit-ctx", a->fit_ctx, "llama.cpp's -fitc: the smallest context the fit shrinks to (default 4096)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 24));
}

int cmd_fit(const FitArgs& a, const Result<SessionConfig>& base_r, const ExtraModels& extra, SessionFitInputs in,
            const std::string& model_path, bool json) {
  if (!base_r.ok()) return input_error(base_r.status().message());
  if (base_r.value().graph) {
    return input_error("fit works on a model's layers (-m), not on a serialized graph (--graph)");
  }
  auto target = parse_fit_target(a.fit_target);
  if (!target.ok()) return input_error(target.status().message());
  // --draft, --mmproj: their memory is reserved on each device first, so the model is fitted in the rest, as llama.cpp
  // adds it to the fit target (docs/extra-models.md).
  SessionConfig base = base_r.value();
  if (const int code = reserve_extra_models_for_fit(&base, extra); code != kOk) return code;
  if (a.fill_in_order) return cmd_fit_fill_in_order(base, target.value(), json, a.wide);
  Progress progress(!json);
  // Each trial's long steps (building the graph, planning) on a terminal, as plan shows them.
  base.progress = [&progress](const char* step) { progress.step(step); };
  if (base.policy.split_mode == SplitMode::kTensor) {
    // (common/fit.cpp refuses it; llama.cpp then runs with the given options)
    std::fprintf(stderr,
                 "failed to fit params to free device memory: llama_params_fit is not implemented for "
                 "SPLIT_MODE_TENSOR, abort\n");
    return kExpectationFailed;
  }
  if (base.policy.split_mode == SplitMode::kNone) {
    return input_error("fit: -sm none is not modeled by the fit (docs/fit.md)");
  }
  auto n_ctx_train = training_context(model_path, base);
  if (!n_ctx_train.ok()) return input_error(n_ctx_train.status().message());
  in.n_ctx_train = n_ctx_train.value();
  in.n_ctx_min = a.fit_ctx;
  in.fit_target = target.value();
  auto problem = session_fit_problem(base, in, &builtin_registry());
  if (!problem.ok()) return input_error(problem.status().message());
  const FitProblem& p = problem.value();
  const FitMeasure measure = session_fit_measure(base, in, p, &builtin_registry());
  FitResult result;
  std::vector<FitUse> use;
  if (a.strict) {
    FitSetting given;
    given.n_ctx = in.n_ctx;
    result.setting = given;
    auto u = measure(given);
    if (!u.ok()) return measure_error(u.status());
    use = u.value();
  } else {
    auto r = llama_fit(p, measure);
    if (!r.ok()) {
      progress.done();
      return measure_error(r.status());
    }
    result = std::move(r).value();
    auto u = measure(result.setting);
    if (!u.ok()) return measure_error(u.status());
    use = u.value();
  }
  std::string note;
  Status error;
  auto s = final_session(base, in, p, result.setting, &note, &error);
  progress.done();
  if (s == nullptr) {
    std::fprintf(stderr, "tessera: the placement cannot be planned: %s\n", error.message().c_str());
    return kExpectationFailed;
  }
  std::vector<std::string> over;
  for (size_t g = 0; g < use.size(); ++g) {
    const int64_t left = p.free[g] - use[g].total;
    if (left >= p.margins[g]) continue;
    std::string dev;
    size_t k = 0;
    for (const sim::DeviceConfig& d : base.topology.devices) {
      if (d.type != DeviceType::kCpu && k++ == g) dev = d.name;
    }
    over.push_back(format_message(
        "%s (%s): over by %lld MiB (uses %lld MiB of %lld MiB free, margin %lld MiB)", dev.c_str(), p.gpus[g].c_str(),
        static_cast<long long>((p.margins[g] - left + kMiB - 1) / kMiB), static_cast<long long>(use[g].total / kMiB),
        static_cast<long long>(p.free[g] / kMiB), static_cast<long long>(p.margins[g] / kMiB)));
  }
  const std::string flags = (a.devices.empty() ? "" : "-dev " + a.devices + " ") + fit_flags(result.setting, p);
  // llama.cpp's fit numbers the output layer n_layer and, when the last GPU's partial layers reach it, writes a rule
  // for "blk.<n_layer>." (common/fit.cpp, set_ngl_tensor_split_tbo): it matches no tensor and changes nothing, but a
  // user reading the flags sees a block the model does not have
  std::string phantom;
  for (const auto& ov : result.setting.overrides) {
    const std::string& pat = ov.first;
    if (pat.rfind("blk\\.", 0) != 0) continue;
    const int il = std::atoi(pat.c_str() + 5);
    if (il >= p.n_layer) {
      phantom = format_message(
          "the rule for blk.%d names no block of this model (blocks 0-%d): llama.cpp's fit counts the output layer "
          "as block %d and writes a partial-layer rule for it, which matches no tensor; the flags are llama.cpp's",
          il, p.n_layer - 1, p.n_layer);
    }
  }
  const int code = a.strict ? (over.empty() ? kOk : kExpectationFailed)
                            : (result.outcome == FitResult::Outcome::kFailed ? kExpectationFailed : kOk);
  // --rank: the alternatives, each measured and timed
  std::vector<RankedPlacement> ranked;
  if (a.rank) {
    std::string first_why_not;
    if (a.strict && !over.empty()) first_why_not = "over the margin: " + over.front();
    if (!a.strict && result.outcome == FitResult::Outcome::kFailed) first_why_not = result.failure;
    ranked = rank_placements(base, in, p, result.setting, a.strict ? "the given options" : "llama.cpp's fit", flags,
                             first_why_not, model_path.empty(), a.rank_by == "pp512");
  }
  if (json) {
    const auto [gpu_layers, cpu_layers] = layer_counts(*s);
    ojson j = fit_json(*s, gpu_layers, cpu_layers);
    j["devices"] = devices_json(*s, !note.empty());
    j["method"] = a.strict ? "strict" : "llama";
    j["outcome"] = a.strict ? (over.empty() ? "fits" : "overflows") : outcome_name(result.outcome);
    j["failure"] = result.failure.empty() ? ojson(nullptr) : ojson(result.failure);
    j["flags"] = flags;
    j["n_ctx"] = result.setting.n_ctx > 0 ? result.setting.n_ctx : in.n_ctx_train;
    ojson ovr = ojson::array();
    if (result.setting.placed) {
      for (const auto& [pattern, buft] : result.setting.overrides)
        ovr.push_back({{"pattern", pattern}, {"buffer_type", buft}});
    } else {  // the user's, which a fit that placed nothing keeps
      for (const auto& o : base.policy.overrides) ovr.push_back({{"pattern", o.pattern}, {"buffer_type", o.target}});
    }
    j["overrides"] = ovr;
    j["gpus"] = gpus_json(base, p, use);
    j["over"] = over;
    j["log"] = result.log;
    j["measurements"] = result.measurements;
    j["simulator_note"] = note.empty() ? ojson(nullptr) : ojson(note);
    j["flags_note"] = phantom.empty() ? ojson(nullptr) : ojson(phantom);
    j["ranking"] = a.rank ? ranking_json(ranked, a.rank_by == "pp512") : ojson(nullptr);
    std::cout << j.dump(2) << "\n";
    return code;
  }
  std::printf("%s\n\n", headline(*s).c_str());
  if (a.strict) {
    std::printf(
        "the given options on every GPU (margins: --fit-target, else the topology's fit_margin, else "
        "1024 MiB):\n%s\n",
        gpu_table(base, p, use, a.wide, false).c_str());  // (the overflows below say by how much)
    if (over.empty()) {
      std::printf("every GPU keeps its margin free\n");
    } else {
      for (const std::string& o : over) std::printf("overflows: %s\n", o.c_str());
    }
  } else {
    std::printf("llama.cpp's fit (common/fit.cpp), %d measurements:\n", result.measurements);
    for (const std::string& line : result.log) std::printf("  %s\n", line.c_str());
    if (result.outcome == FitResult::Outcome::kFailed) {
      std::printf(
          "\nfailed to fit params to free device memory: %s\n(llama.cpp then runs with the given options; "
          "`tessera fit --strict` checks them)\n",
          result.failure.c_str());
    }
    std::printf("\n%s", gpu_table(base, p, use, a.wide, true).c_str());
    if (result.outcome != FitResult::Outcome::kFailed) std::printf("\nuse: %s\n", flags.c_str());
  }
  if (!phantom.empty() && result.outcome != FitResult::Outcome::kFailed) std::printf("\nnote: %s\n", phantom.c_str());
  if (!note.empty()) std::printf("\nnote: %s\n", note.c_str());
  if (a.rank) std::printf("\n%s", ranking_text(ranked, a.rank_by == "pp512", a.wide).c_str());
  return code;
}

}  // namespace tessera::tool
