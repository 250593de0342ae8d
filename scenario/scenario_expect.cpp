// Scenario expectations on metrics and A/B comparisons (scenario_expect.h, docs/scenarios.md "Time and traffic").
#include "scenario_expect.h"

#include <cmath>
#include <memory>
#include <optional>
#include <utility>

#include "placement/policy_json.h"
#include "tessera/tensor.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::llama;

using namespace json_read;

namespace {

enum class Unit { kTime, kBytes, kCount };
enum Keys : unsigned { kNone = 0, kDevice = 1, kFromTo = 2, kSplit = 4 };

struct MetricInfo {
  const char* name;
  Unit unit;
  unsigned keys;  // which of device (required), from/to, split it takes
  const char* what;
};

// The metrics, in the order docs/scenarios.md lists them.
constexpr MetricInfo kMetrics[] = {
    {"makespan", Unit::kTime, kNone, "simulated makespan"},
    {"host_blocked", Unit::kTime, kNone, "time the host blocked"},
    {"copy_bytes", Unit::kBytes, kFromTo, "bytes copied"},
    {"copies", Unit::kCount, kFromTo, "copies"},
    {"copy_time", Unit::kTime, kFromTo, "time copying"},
    {"split_copy_bytes", Unit::kBytes, kSplit, "bytes copied into a split"},
    {"compute_bytes", Unit::kBytes, kDevice, "compute buffer bytes"},
    {"peak_memory", Unit::kBytes, kDevice, "peak memory"},
    {"splits", Unit::kCount, kNone, "splits"},
    {"synchronizations", Unit::kCount, kNone, "backend synchronizations"},
    {"event_waits", Unit::kCount, kNone, "event waits"},
    {"event_synchronizations", Unit::kCount, kNone, "event synchronizations"},
    {"reserves", Unit::kCount, kNone, "compute-buffer plans"},
    {"replans", Unit::kCount, kNone, "re-plans by alloc_graph"},
    {"replan_synchronizations", Unit::kCount, kNone, "synchronizations forced by re-plans"},
};

const MetricInfo* find_metric(const std::string& name) {
  for (const MetricInfo& m : kMetrics) {
    if (name == m.name) return &m;
  }
  return nullptr;
}

std::string metric_names() {
  std::string s;
  for (const MetricInfo& m : kMetrics) s += (s.empty() ? "" : ", ") + std::string(m.name);
  return s;
}

double read_value(const json& v, const std::string& path, Unit unit) {
  switch (unit) {
    case Unit::kTime: return get_duration(v, path);
    case Unit::kBytes: return static_cast<double>(get_size(v, path));
    case Unit::kCount: return static_cast<double>(get_count(v, path));
  }
  return 0;
}

MetricExpect read_one(const json& v, const std::string& path, bool comparison) {
  expect_object(
      v, path,
      {"metric", "device", "from", "to", "split", "at_most", "at_least", "equals", "at_most_ratio", "at_least_ratio"},
      "a metric expectation {\"metric\": name, \"at_most\" / \"at_least\" / \"equals\": value}");
  MetricExpect m;
  m.path = path;
  const std::string mp = child(path, "metric");
  m.metric = get_string(required(v, path, "metric", "a metric's name: " + metric_names()), mp);
  const MetricInfo* info = find_metric(m.metric);
  if (info == nullptr) fail(mp, "unknown metric " + quote(m.metric) + "; the metrics are " + metric_names());
  auto takes = [&](const char* key, bool ok) {
    if (member(v, key) != nullptr && !ok) {
      fail(child(path, key), std::string("the metric \"") + info->name + "\" takes no \"" + key + "\"");
    }
  };
  takes("device", (info->keys & kDevice) != 0);
  takes("from", (info->keys & kFromTo) != 0);
  takes("to", (info->keys & kFromTo) != 0);
  takes("split", (info->keys & kSplit) != 0);
  if ((info->keys & kDevice) != 0) {
    m.device = get_string(required(v, path, "device", "the device's name"), child(path, "device"));
  }
  if (const json* x = member(v, "from")) m.from = get_string(*x, child(path, "from"), "a device's name or \"host\"");
  if (const json* x = member(v, "to")) m.to = get_string(*x, child(path, "to"), "a device's name or \"host\"");
  if (const json* x = member(v, "split")) {
    m.split = static_cast<int>(get_count(*x, child(path, "split"), "a split's index from 0 to 2^30", int64_t{1} << 30));
  }
  const std::pair<const char*, MetricBound::Op> plain[] = {{"at_most", MetricBound::Op::kAtMost},
                                                           {"at_least", MetricBound::Op::kAtLeast},
                                                           {"equals", MetricBound::Op::kEquals}};
  for (const auto& [key, op] : plain) {
    const json* x = member(v, key);
    if (x == nullptr) continue;
    MetricBound b;
    b.op = op;
    if (x->is_string() && x->get<std::string>() == "base") {
      if (!comparison) fail(child(path, key), "\"base\" compares with the base run: only in \"compare\".\"expect\"");
      b.base = true;
    } else {
      b.value = read_value(*x, child(path, key), info->unit);
    }
    m.bounds.push_back(b);
  }
  for (const auto& [key, op] :
       {std::pair{"at_most_ratio", MetricBound::Op::kAtMost}, {"at_least_ratio", MetricBound::Op::kAtLeast}}) {
    const json* x = member(v, key);
    if (x == nullptr) continue;
    if (!comparison)
      fail(child(path, key), std::string("\"") + key + "\" compares with the base run: only in \"compare\".\"expect\"");
    MetricBound b;
    b.op = op;
    b.ratio = get_number(*x, child(path, key));
    if (!(b.ratio >= 0)) fail(child(path, key), "expected a number >= 0, got " + describe(*x));
    m.bounds.push_back(b);
  }
  if (m.bounds.empty()) {
    fail(path, comparison ? "expected a bound: \"at_most\", \"at_least\" or \"equals\" (a value or \"base\"), "
                            "\"at_most_ratio\" or \"at_least_ratio\""
                          : "expected a bound: \"at_most\", \"at_least\" or \"equals\"");
  }
  return m;
}

std::string format_value(double v, Unit unit) {
  switch (unit) {
    case Unit::kTime: return v >= 1000 ? format_message("%.3f ms", v / 1000) : format_message("%.3f us", v);
    case Unit::kBytes: {
      const size_t n = static_cast<size_t>(v);
      return n >= 1024 ? format_message("%s (%zu B)", sim::format_bytes(n).c_str(), n) : format_message("%zu B", n);
    }
    case Unit::kCount: return format_message("%.0f", v);
  }
  return {};
}

// The device named `name` in the trace (index into Trace::devices), -2 for "host", -3 when unknown.
int trace_device(const sim::Trace& trace, const std::string& name) {
  if (name == "host") return -1;
  for (size_t i = 0; i < trace.devices.size(); ++i) {
    if (trace.devices[i] == name) return static_cast<int>(i);
  }
  return -3;
}

// The metrics a simulator answers by itself (its trace and counters), whatever ran on it; std::nullopt for the others.
std::optional<Result<double>> measure_sim(const sim::Simulator& simulator, const MetricExpect& m) {
  const std::string& k = m.metric;
  if (k == "makespan") return Result<double>(sim::summarize(simulator.trace()).makespan_us);
  if (k == "host_blocked") return Result<double>(simulator.now_us());  // the host's clock advances only while it blocks
  if (k == "copy_bytes" || k == "copies" || k == "copy_time") {
    const sim::Trace& trace = simulator.trace();
    const int from = m.from.empty() ? -2 : trace_device(trace, m.from);
    const int to = m.to.empty() ? -2 : trace_device(trace, m.to);
    for (const auto& [name, d] : {std::pair{&m.from, from}, {&m.to, to}}) {
      if (d == -3) return Result<double>(Status(StatusCode::kInvalidArgument, "no device " + quote(*name)));
    }
    double bytes = 0, count = 0, time = 0;
    for (const sim::TraceEvent& e : trace.events) {
      // A host-driven command names its device itself (its track is the host's).
      const int dev = e.device >= 0 ? e.device : trace.tracks[static_cast<size_t>(e.track)].device;
      int src = -1, dst = -1;  // -1: the host
      if (e.kind == sim::TraceKind::kCopy) {
        src = e.peer;
        dst = dev;
      } else if (e.kind == sim::TraceKind::kSet) {
        dst = dev;
      } else if (e.kind == sim::TraceKind::kGet) {
        src = dev;
      } else {
        continue;
      }
      if ((from != -2 && src != from) || (to != -2 && dst != to)) continue;
      bytes += static_cast<double>(e.bytes);
      count += 1;
      time += e.end_us - e.start_us;
    }
    return Result<double>(k == "copies" ? count : k == "copy_time" ? time : bytes);
  }
  const sim::SimCounters& c = simulator.counters();
  if (k == "synchronizations") return Result<double>(static_cast<double>(c.synchronizes));
  if (k == "event_waits") return Result<double>(static_cast<double>(c.event_waits));
  if (k == "event_synchronizations") return Result<double>(static_cast<double>(c.event_synchronizes));
  return std::nullopt;
}

// The metric's value for a session after its run; an error names an unknown device or split.
Result<double> measure(Session& s, const MetricExpect& m) {
  const std::string& k = m.metric;
  if (std::optional<Result<double>> r = measure_sim(s.sim(), m)) return *r;
  if (k == "split_copy_bytes") {
    const std::vector<Scheduler::SplitView> views = s.sched().splits();
    if (m.split >= 0 && static_cast<size_t>(m.split) >= views.size()) {
      return Status(StatusCode::kInvalidArgument, format_message("no split %d (there are %zu)", m.split, views.size()));
    }
    double most = 0;
    for (size_t i = 0; i < views.size(); ++i) {
      if (m.split >= 0 && i != static_cast<size_t>(m.split)) continue;
      double sum = 0;
      for (const Tensor* t : views[i].inputs) sum += static_cast<double>(nbytes(*t));
      most = std::max(most, sum);
    }
    return most;
  }
  if (k == "compute_bytes" || k == "peak_memory") {
    for (const DeviceMemory& d : s.memory()) {
      if (d.device == m.device) return static_cast<double>(k == "compute_bytes" ? d.compute : d.peak);
    }
    return Status(StatusCode::kInvalidArgument, "no device " + quote(m.device));
  }
  if (k == "splits") return static_cast<double>(s.sched().n_splits());
  if (k == "reserves") return static_cast<double>(s.sched().reserve_count());
  if (k == "replans") return static_cast<double>(s.sched().replan_count());
  if (k == "replan_synchronizations") return static_cast<double>(s.sched().replan_synchronizations());
  return Status(StatusCode::kInvalidArgument, "unknown metric " + quote(k));
}

// "copy_bytes from cpu to gpu0", "compute_bytes of gpu0", "split_copy_bytes of split 3"
std::string describe_metric(const MetricExpect& m) {
  std::string s = m.metric;
  if (!m.device.empty()) s += " of " + m.device;
  if (!m.from.empty()) s += " from " + m.from;
  if (!m.to.empty()) s += " to " + m.to;
  if (m.metric == "split_copy_bytes") s += m.split >= 0 ? format_message(" of split %d", m.split) : " (largest split)";
  return s;
}

const char* op_text(MetricBound::Op op) {
  return op == MetricBound::Op::kAtMost ? "<=" : op == MetricBound::Op::kAtLeast ? ">=" : "==";
}

bool holds(double got, MetricBound::Op op, double bound) {
  switch (op) {
    case MetricBound::Op::kAtMost: return got <= bound;
    case MetricBound::Op::kAtLeast: return got >= bound;
    case MetricBound::Op::kEquals: return got == bound;
  }
  return false;
}

}  // namespace

std::vector<MetricExpect> read_metric_expects(const json& v, const std::string& path, bool comparison) {
  if (!v.is_array() || v.empty()) type_fail(path, "a non-empty list of metric expectations", v);
  std::vector<MetricExpect> out;
  for (size_t i = 0; i < v.size(); ++i) out.push_back(read_one(v[i], element(path, i), comparison));
  return out;
}

Comparison read_comparison(const json& v, const std::string& path, const PlacementPolicy& policy) {
  expect_object(v, path, {"with", "expect"}, "a comparison {\"with\": {policy keys}, \"expect\": [...]}");
  Comparison c;
  c.policy = policy;
  const json& with = required(v, path, "with", "the variant's policy keys, e.g. {\"parallel\": true}");
  if (!with.is_object() || with.empty()) type_fail(child(path, "with"), "a non-empty object of policy keys", with);
  read_policy_json(with, child(path, "with"), &c.policy);
  c.with = with.dump();
  c.expect =
      read_metric_expects(required(v, path, "expect", "a list of metric expectations"), child(path, "expect"), true);
  return c;
}

// Each expectation's bounds against the metric as `measure` gives it; one result per bound.
template <typename Measure>
void check_each(const std::vector<MetricExpect>& expects, const Measure& measure, std::vector<ExpectationResult>* out) {
  for (const MetricExpect& m : expects) {
    const Unit unit = find_metric(m.metric)->unit;
    Result<double> got = measure(m);
    for (const MetricBound& b : m.bounds) {
      const std::string what = format_message("%s: %s %s %s", m.path.c_str(), describe_metric(m).c_str(), op_text(b.op),
                                              format_value(b.value, unit).c_str());
      if (!got.ok()) {
        out->push_back({what, false, got.status().message()});
      } else {
        out->push_back({what, holds(got.value(), b.op, b.value), "measured " + format_value(got.value(), unit)});
      }
    }
  }
}

void check_metrics(Session& session, const std::vector<MetricExpect>& expects, std::vector<ExpectationResult>* out) {
  check_each(
      expects, [&session](const MetricExpect& m) { return measure(session, m); }, out);
}

Result<double> measure_tensor(const TensorParallelRun& run, const MetricExpect& m) {
  const std::string& k = m.metric;
  if (std::optional<Result<double>> r = measure_sim(*run.sim, m)) return *r;
  if (k == "splits") return static_cast<double>(run.splits);
  if (k == "compute_bytes" || k == "peak_memory") {
    for (size_t i = 0; i < run.sim->device_count(); ++i) {
      if (run.sim->device_config(i).name != m.device) continue;
      const size_t placed = run.weights[i] + run.cache[i];
      return static_cast<double>(k == "peak_memory" ? run.peak[i] : run.peak[i] > placed ? run.peak[i] - placed : 0);
    }
    return Status(StatusCode::kInvalidArgument, "no device " + quote(m.device));
  }
  // split_copy_bytes, reserves, replans, replan_synchronizations: the scheduler's record of a session
  return Status(StatusCode::kInvalidArgument, "metric " + quote(k) + " is not measured with split_mode tensor yet");
}

void check_metrics(const TensorParallelRun& run, const std::vector<MetricExpect>& expects,
                   std::vector<ExpectationResult>* out) {
  check_each(
      expects, [&run](const MetricExpect& m) { return measure_tensor(run, m); }, out);
}

void check_comparison(const Scenario& sc, Session* base, const Registry* real_devices,
                      std::vector<ExpectationResult>* out) {
  const Comparison& c = *sc.compare;
  const std::string variant = "with " + c.with;
  std::unique_ptr<Session> session;
  std::string error;
  SessionConfig config = sc.config;
  config.policy = c.policy;
  config.progress = nullptr;
  if (base == nullptr) {
    error = "the base run failed";
  } else if (auto s = Session::create(config, real_devices); !s.ok()) {
    error = s.status().to_string();
  } else {
    session = std::move(s).value();
    auto r = sc.steps.empty() ? session->run(sc.evaluations, false) : session->run_steps(sc.steps, false);
    if (!r.ok()) error = r.status().to_string();
  }
  if (!error.empty()) {
    out->push_back({"compare: the variant (" + variant + ") runs", false, error});
    return;
  }
  for (const MetricExpect& m : c.expect) {
    const Unit unit = find_metric(m.metric)->unit;
    Result<double> got = measure(*session, m);
    Result<double> was = measure(*base, m);
    for (const MetricBound& b : m.bounds) {
      std::string bound = b.base         ? "base"
                          : b.ratio >= 0 ? format_message("%g x base", b.ratio)
                                         : format_value(b.value, unit);
      const std::string what = format_message("%s: %s %s %s %s", m.path.c_str(), describe_metric(m).c_str(),
                                              variant.c_str(), op_text(b.op), bound.c_str());
      if (!got.ok() || !was.ok()) {
        out->push_back({what, false, (got.ok() ? was : got).status().message()});
        continue;
      }
      const double limit = b.base ? was.value() : b.ratio >= 0 ? b.ratio * was.value() : b.value;
      std::string detail = format_message("variant %s, base %s", format_value(got.value(), unit).c_str(),
                                          format_value(was.value(), unit).c_str());
      if (was.value() != 0) detail += format_message(" (ratio %.3g)", got.value() / was.value());
      out->push_back({what, holds(got.value(), b.op, limit), detail});
    }
  }
}

}  // namespace tessera::scenario
