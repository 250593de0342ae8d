// `tessera fit --rank` (docs/fit.md "Ranking placements by speed"): the placements a user weighs on a machine
// (llama.cpp's fit, whole layers only, every expert on the CPU, the fewest experts on the CPU, each GPU alone), each
// measured as fit measures it and, when it fits, timed as llama-bench would time it (speed.cpp), ranked, with what
// makes the winner faster.
#include <algorithm>
#include <cstdio>

#include "tessera/builtin.h"
#include "tessera/harness/common/text_table.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::llama;

namespace {

constexpr int64_t kMiB = int64_t{1} << 20;

// Does every GPU keep its margin free under `setting`? *why says which GPU does not, and by how much.
Result<bool> fits(const FitProblem& p, const FitMeasure& measure, const FitSetting& setting, std::string* why) {
  auto use = measure(setting);
  if (!use.ok()) return use.status();
  for (size_t g = 0; g < use.value().size() && g < p.free.size(); ++g) {
    const int64_t left = p.free[g] - use.value()[g].total;
    if (left < p.margins[g]) {
      if (why != nullptr) {
        *why = format_message("%s over by %lld MiB", p.gpus[g].c_str(),
                              static_cast<long long>((p.margins[g] - left + kMiB - 1) / kMiB));
      }
      return false;
    }
  }
  return true;
}

struct Candidate {
  std::string label;
  SessionConfig base;
  SessionFitInputs in;
  FitProblem problem;
  FitSetting setting;
  std::string prefix;  // "-dev CUDA1 "
  std::string suffix;  // " -cmoe", " -ncmoe 12": the overrides as llama.cpp's shorthand (then not printed as -ot)
};

// llama.cpp's -ncmoe N (-cmoe: every layer) as fit's overrides: each of the first N layers' experts to the CPU, with
// llama.cpp's pattern for a layer (common/arg.cpp, --n-cpu-moe: blk\.N\.ffn_(up|down|gate|gate_up)_(ch|)exps)
std::vector<std::pair<std::string, std::string>> cpu_moe_overrides(int n_layers) {
  std::vector<std::pair<std::string, std::string>> out;
  for (int i = 0; i < n_layers; ++i)
    out.emplace_back("blk\\." + std::to_string(i) + R"(\.ffn_(up|down|gate|gate_up)_(ch|)exps)", "CPU");
  return out;
}

}  // namespace

std::vector<RankedPlacement> rank_placements(const SessionConfig& base, const SessionFitInputs& in, const FitProblem& p,
                                             const FitSetting& first, const std::string& first_label,
                                             const std::string& first_flags, const std::string& first_why_not,
                                             bool llama_rules, bool by_prompt) {
  std::vector<RankedPlacement> out;
  if (!first_why_not.empty()) {
    RankedPlacement r;
    r.label = first_label;
    r.flags = first_flags;
    r.why_not = first_why_not;
    out.push_back(r);
  }
  const int64_t n_ctx = first.n_ctx > 0 ? first.n_ctx : (p.n_ctx > 0 ? p.n_ctx : p.n_ctx_train);
  // The alternatives place the model themselves: what the user set of the placement is theirs to change here.
  SessionFitInputs free_in = in;
  free_in.user_ngl.clear();
  free_in.user_ts.clear();
  free_in.user_ot.clear();
  FitProblem free_p = p;
  free_p.user_ngl.clear();
  free_p.user_ts.clear();
  free_p.user_ot.clear();
  const FitMeasure measure = session_fit_measure(base, free_in, free_p, &builtin_registry());

  std::vector<Candidate> candidates;
  if (first_why_not.empty()) candidates.push_back({first_label, base, in, p, first, "", ""});
  // Whole layers only: the largest -ngl that leaves every GPU its margin (-ts by free memory, as llama.cpp splits).
  {
    auto with = [&](int ngl) {
      FitSetting s;
      s.n_ctx = n_ctx;
      s.placed = true;
      s.n_gpu_layers = ngl;
      return s;
    };
    int lo = -1, hi = p.n_layer + 1;  // lo fits (-1: none found yet), hi+1 does not
    std::string why;
    for (int a = 0, b = hi; a <= b;) {
      const int mid = a + (b - a) / 2;
      auto f = fits(free_p, measure, with(mid), &why);
      if (f.ok() && f.value()) {
        lo = mid;
        a = mid + 1;
      } else {
        b = mid - 1;
      }
    }
    RankedPlacement r;
    r.label = "whole layers only (-ngl)";
    if (lo < 0) {
      r.why_not = "not even -ngl 0 fits (" + why + ")";
      out.push_back(r);
    } else {
      candidates.push_back({r.label, base, free_in, free_p, with(lo), "", ""});
    }
  }
  // Every layer on the GPUs with the experts of its first N layers on the CPU: every expert (-cmoe; -ot exps=CPU),
  // and the smallest N that fits (-ncmoe N, what users tune by hand)
  if (p.n_expert > 0) {
    auto with = [&](int n) {
      FitSetting s;
      s.n_ctx = n_ctx;
      s.placed = true;
      s.n_gpu_layers = -1;
      s.overrides = cpu_moe_overrides(n);
      return s;
    };
    std::string why;
    auto all = fits(free_p, measure, with(p.n_layer), &why);
    if (all.ok() && all.value()) {
      candidates.push_back({"every expert on the CPU (-cmoe)", base, free_in, free_p, with(p.n_layer), "", " -cmoe"});
      // the smallest N: N = n_layer fits; find the first that does
      int lo = 0, hi = p.n_layer;  // hi fits
      while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        auto f = fits(free_p, measure, with(mid), nullptr);
        if (f.ok() && f.value()) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      if (hi < p.n_layer) {
        candidates.push_back({format_message("the fewest experts on the CPU (-ncmoe %d)", hi), base, free_in, free_p,
                              with(hi), "", format_message(" -ncmoe %d", hi)});
      }
    } else {
      RankedPlacement r;
      r.label = "every expert on the CPU (-cmoe)";
      r.why_not = all.ok() ? why : all.status().message();
      out.push_back(r);
    }
  }
  // Each GPU alone, fit by llama.cpp's fit at the same context
  if (p.gpus.size() > 1) {
    for (size_t g = 0; g < p.gpus.size(); ++g) {
      Candidate c;
      c.label = p.gpus[g] + " alone (-dev " + p.gpus[g] + ")";
      c.prefix = "-dev " + p.gpus[g] + " ";
      c.base = base;
      RankedPlacement r;
      r.label = c.label;
      if (Status st = keep_devices(p.gpus[g], &c.base.topology); !st.ok()) {
        r.why_not = st.message();
        out.push_back(r);
        continue;
      }
      c.in = free_in;
      c.in.n_ctx = n_ctx;
      if (c.in.fit_target.size() > 1) c.in.fit_target = {in.fit_target[g]};
      auto gp = session_fit_problem(c.base, c.in, &builtin_registry());
      if (!gp.ok()) {
        r.why_not = gp.status().message();
        out.push_back(r);
        continue;
      }
      c.problem = gp.value();
      auto fitted = llama_fit(c.problem, session_fit_measure(c.base, c.in, c.problem, &builtin_registry()));
      if (!fitted.ok() || fitted.value().outcome == FitResult::Outcome::kFailed) {
        r.why_not = fitted.ok() ? fitted.value().failure : fitted.status().message();
        out.push_back(r);
        continue;
      }
      c.setting = fitted.value().setting;
      candidates.push_back(std::move(c));
    }
  }

  // Time each candidate; the same flags twice are one candidate (the first label kept).
  std::vector<RankedPlacement> ranked;
  for (size_t i = 0; i < candidates.size(); ++i) {
    const Candidate& c = candidates[i];
    RankedPlacement r;
    r.label = c.label;
    if (i == 0 && first_why_not.empty()) {
      r.flags = first_flags;
    } else if (!c.suffix.empty()) {
      FitSetting shown = c.setting;
      shown.overrides.clear();
      r.flags = c.prefix + fit_flags(shown, c.problem) + c.suffix;
    } else {
      r.flags = c.prefix + fit_flags(c.setting, c.problem);
    }
    if (std::any_of(ranked.begin(), ranked.end(), [&r](const RankedPlacement& x) { return x.flags == r.flags; })) {
      continue;
    }
    auto cfg = fit_session_config(c.base, c.in, c.problem, c.setting, false);
    if (!cfg.ok()) {
      r.why_not = cfg.status().message();
      out.push_back(r);
      continue;
    }
    cfg.value().pin_rule = c.base.pin_rule;  // (the fit's measurements leave llama.cpp's graph-callback pins out)
    auto speed = placement_speed(cfg.value(), llama_rules, c.in.params, &builtin_registry());
    if (!speed.ok()) {
      r.why_not = "not simulated: " + speed.status().message();
      out.push_back(r);
      continue;
    }
    r.fits = true;
    r.speed = std::move(speed).value();
    // Other flags for the same placement (llama.cpp's fit of a dense model is whole layers with the -ts the default
    // split gives): the same simulated times to the last bit
    auto same = std::find_if(ranked.begin(), ranked.end(), [&r](const RankedPlacement& x) {
      return x.speed.pp.time_us() == r.speed.pp.time_us() && x.speed.tg.time_us() == r.speed.tg.time_us();
    });
    if (same != ranked.end()) {
      r.fits = false;
      r.why_not = r.flags + " places the model as " + same->label + " does (the same simulated times)";
      out.push_back(std::move(r));
      continue;
    }
    ranked.push_back(std::move(r));
  }
  auto rate = [by_prompt](const RankedPlacement& r) {
    return by_prompt ? r.speed.pp.tokens_per_second : r.speed.tg.tokens_per_second;
  };
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&rate](const RankedPlacement& a, const RankedPlacement& b) { return rate(a) > rate(b); });
  ranked.insert(ranked.end(), out.begin(), out.end());
  return ranked;
}

std::string rank_why(const RankedPlacement& a, const RankedPlacement& b, bool by_prompt) {
  const sim::TraceSummary& sa = by_prompt ? a.speed.pp.prompt_summary : a.speed.tg.gen_summary;
  const sim::TraceSummary& sb = by_prompt ? b.speed.pp.prompt_summary : b.speed.tg.gen_summary;
  const double ta = by_prompt ? a.speed.pp.time_us() : sa.makespan_us;
  const double tb = by_prompt ? b.speed.pp.time_us() : sb.makespan_us;
  std::string out = format_message("%s is %.2fx as fast as %s at %s (%s in %.2f ms against %.2f ms)", a.label.c_str(),
                                   ta > 0 ? tb / ta : 0.0, b.label.c_str(), by_prompt ? "pp512" : "tg128",
                                   by_prompt ? "the prompt" : "a token", ta / 1000.0, tb / 1000.0);
  // The device whose busy time differs most between the two: where the difference goes
  auto busy = [](const sim::TraceSummary& s, const std::string& name) {
    for (const sim::DeviceSummary& d : s.devices) {
      if (d.name == name) return d.busy_us;
    }
    return 0.0;
  };
  std::string dev;
  double most = 0;
  for (const sim::TraceSummary* s : {&sa, &sb}) {
    for (const sim::DeviceSummary& d : s->devices) {
      const double diff = std::abs(busy(sb, d.name) - busy(sa, d.name));
      if (diff > most) {
        most = diff;
        dev = d.name;
      }
    }
  }
  if (!dev.empty()) {
    out += format_message(": the largest difference is %s's busy time, %.2f ms against %.2f ms", dev.c_str(),
                          busy(sa, dev) / 1000.0, busy(sb, dev) / 1000.0);
  }
  if (sa.copy_bytes != sb.copy_bytes) {
    out += "; " + sim::format_bytes(sa.copy_bytes) + " copied against " + sim::format_bytes(sb.copy_bytes);
  }
  return out;
}

std::string ranking_text(const std::vector<RankedPlacement>& ranked, bool by_prompt, bool wide) {
  using Align = TextTable::Align;
  TextTable table({{"#", Align::kRight, 2},
                   {"placement", Align::kLeft, 34, true},
                   {"tg128 t/s", Align::kRight, 10},
                   {"pp512 t/s", Align::kRight, 10},
                   {"busiest", Align::kLeft, 8}});
  std::string flags, not_ranked;
  int n = 0;
  for (const RankedPlacement& r : ranked) {
    if (!r.fits) {
      not_ranked += "  " + r.label + ": " + r.why_not + "\n";
      continue;
    }
    ++n;
    const sim::TraceSummary& s = by_prompt ? r.speed.pp.prompt_summary : r.speed.tg.gen_summary;
    table.add({std::to_string(n), r.label, format_message("%.2f", r.speed.tg.tokens_per_second),
               format_message("%.2f", r.speed.pp.tokens_per_second), bottleneck(s)});
    flags += format_message("  %d: %s\n", n, r.flags.c_str());
  }
  std::string out = format_message(
      "placements that fit, the fastest %s first (simulated as llama-bench measures\nthem: depth 0, -b %lld -ub %lld; "
      "busiest: the device busy longest %s):\n",
      by_prompt ? "pp512" : "tg128", static_cast<long long>(ranked.empty() ? 2048 : ranked.front().speed.n_batch),
      static_cast<long long>(ranked.empty() ? 512 : ranked.front().speed.n_ubatch),
      by_prompt ? "over the prompt" : "a token");
  if (n == 0) {
    out += "  none fits\n";
  } else {
    out += table.render(wide) + flags;
  }
  if (n >= 2) {
    const RankedPlacement* second = nullptr;
    for (size_t i = 1; i < ranked.size(); ++i) {
      if (ranked[i].fits) {
        second = &ranked[i];
        break;
      }
    }
    out += "why: " + rank_why(ranked.front(), *second, by_prompt) + "\n";
  }
  if (!not_ranked.empty()) out += "not ranked:\n" + not_ranked;
  const bool profile = !ranked.empty() && ranked.front().fits && !ranked.front().speed.kernels.empty();
  out += profile ? "(kernel profile " + ranked.front().speed.kernels + "; docs/bench.md says how far to trust it)\n"
                 : "(the devices' peaks, no kernel profile; `--kernels first-fit`: the profile fitted to\n"
                   "published llama-bench rows. docs/bench.md: how far to trust them)\n";
  return out;
}

nlohmann::ordered_json ranking_json(const std::vector<RankedPlacement>& ranked, bool by_prompt) {
  using ojson = nlohmann::ordered_json;
  ojson list = ojson::array();
  int n = 0;
  for (const RankedPlacement& r : ranked) {
    ojson j;
    j["rank"] = r.fits ? ojson(++n) : ojson(nullptr);
    j["placement"] = r.label;
    j["flags"] = r.flags.empty() ? ojson(nullptr) : ojson(r.flags);
    j["fits"] = r.fits;
    j["why_not"] = r.why_not.empty() ? ojson(nullptr) : ojson(r.why_not);
    j["speed"] = r.fits ? speed_json(r.speed) : ojson(nullptr);
    list.push_back(j);
  }
  ojson out;
  out["by"] = by_prompt ? "pp512" : "tg128";
  out["placements"] = list;
  const RankedPlacement* second = nullptr;
  for (size_t i = 1; i < ranked.size(); ++i) {
    if (ranked[i].fits) {
      second = &ranked[i];
      break;
    }
  }
  out["why"] = !ranked.empty() && ranked.front().fits && second != nullptr
                   ? ojson(rank_why(ranked.front(), *second, by_prompt))
                   : ojson(nullptr);
  return out;
}

}  // namespace tessera::tool
