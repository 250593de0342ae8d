// Scenario files and the scenario runner (see tessera/scenario/scenario.h, docs/scenarios.md).
#include "tessera/scenario/scenario.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <limits>
#include <tuple>
#include <utility>

#include "common/json_read.h"
#include "placement/policy_json.h"
#include "scenario_steps.h"
#include "scenario_expect.h"
#include "scenario_extra.h"
#include "scenario_version.h"
#include "tessera/harness/graph/graph_io.h"
#include "tessera/llama/llama_run.h"
#include "tessera/llama/llama_tensor_split.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::llama;

using namespace tessera::sim;

namespace {

using namespace json_read;

// llama.cpp's run options as "model" keys, named as llama.cpp's long options (tessera/llama/llama_run.h), resolved
// as the command line resolves them. "flash_attn" takes true/false or llama.cpp's on/off/auto.
LlamaRunShape read_llama_run(const json& v, const std::string& path) {
  LlamaRunArgs a;
  auto count = [&](const char* k, std::optional<int64_t>* field) {
    if (const json* x = member(v, k)) *field = get_count(*x, child(path, k), "a whole number from 0 to 2^30", 1 << 30);
  };
  count("ctx_size", &a.ctx_size);
  count("batch_size", &a.batch);
  count("ubatch_size", &a.ubatch);
  count("n_parallel", &a.n_parallel);
  if (const json* x = member(v, "cache_type_k")) a.cache_k = get_string(*x, child(path, "cache_type_k"));
  if (const json* x = member(v, "cache_type_v")) a.cache_v = get_string(*x, child(path, "cache_type_v"));
  if (const json* x = member(v, "flash_attn")) {
    a.flash_attn = x->is_string() ? x->get<std::string>() : get_bool(*x, child(path, "flash_attn")) ? "on" : "off";
  }
  if (const json* x = member(v, "kv_unified")) a.kv_unified = get_bool(*x, child(path, "kv_unified"));
  if (const json* x = member(v, "swa_full")) a.swa_full = get_bool(*x, child(path, "swa_full"));
  Result<LlamaRunShape> r = resolve_llama_run(a);
  if (!r.ok()) fail(path, r.status().message());
  return r.value();
}

// "model": {"gguf": FILE} (relative to the scenario file's directory) or {"fixture": NAME} (a real model's header-only
// fixture, models/tessera/models/fixtures.h): the model's keys and tensor table; the run's shape from n_ctx, n_kv,
// n_tokens, n_outputs, kv_type and flash_attn. The graph is built once here and checked against the file, so a file the
// architecture cannot use is an error of the scenario file.
void parse_file_model(const json& v, const std::string& path, const std::string& source, models::LlamaConfig* c,
                      bool* fa_auto) {
  for (const char* key : {"preset", "n_layer", "n_embd", "n_ff", "n_head", "n_head_kv", "n_vocab", "weight_type",
                          "n_expert", "n_expert_used"}) {
    if (member(v, key) != nullptr) fail(child(path, key), "a model file has its own; only the run's shape can be set");
  }
  if (member(v, "gguf") != nullptr && member(v, "fixture") != nullptr) {
    fail(child(path, "fixture"), "expected either \"gguf\" or \"fixture\", not both");
  }
  Result<gguf::Model> model = Status(StatusCode::kNotFound, "");
  std::string key;
  if (const json* x = member(v, "gguf")) {
    key = child(path, "gguf");
    std::string file = get_string(*x, key);
    const size_t slash = source.rfind('/');
    if (!file.empty() && file[0] != '/' && slash != std::string::npos) file = source.substr(0, slash + 1) + file;
    model = gguf::read_model(file);
  } else {
    key = child(path, "fixture");
    auto f = models::fixtures::make_fixture(get_string(*member(v, "fixture"), key));
    if (f.ok()) {
      model = gguf::Model::of_file(std::move(f).value());
    } else {
      model = f.status();
    }
  }
  if (!model.ok()) fail(key, model.status().message());
  models::GgufRunShape run;
  auto count = [&](const char* k, int64_t* field) {
    if (const json* x = member(v, k))
      *field = get_count(*x, child(path, k), "a whole number from 0 to 2^30", int64_t{1} << 30);
  };
  count("n_ctx", &run.n_ctx);
  count("n_kv", &run.n_kv);
  count("n_tokens", &run.n_tokens);
  count("n_outputs", &run.n_outputs);
  if (const json* x = member(v, "kv_type")) run.kv_type = get_type(*x, child(path, "kv_type"));
  const LlamaRunShape llama = read_llama_run(v, path);
  if (llama.ctx > 0) run.n_ctx = llama.ctx;
  if (llama.tokens > 0) run.n_tokens = llama.tokens;
  if (llama.flash_attn) run.flash_attn = *llama.flash_attn;
  *fa_auto = llama.flash_attn_auto;
  if (llama.kv_type) run.kv_type = *llama.kv_type;
  run.v_type = llama.v_type;
  auto built = models::build_from_gguf(model.value(), run);
  if (!built.ok()) fail(key, built.status().message());
  *c = built.value().config;
}

void parse_model(const json& v, const std::string& path, const std::string& source, models::LlamaConfig* c,
                 bool* fa_auto) {
  expect_object(
      v, path, {"preset",       "gguf",         "fixture",    "n_layer",       "n_embd",    "n_ff",       "n_head",
                "n_head_kv",    "n_ctx",        "n_kv",       "n_tokens",      "n_outputs", "n_vocab",    "weight_type",
                "kv_type",      "flash_attn",   "n_expert",   "n_expert_used", "ctx_size",  "batch_size", "ubatch_size",
                "cache_type_k", "cache_type_v", "n_parallel", "kv_unified",    "swa_full"},
      "a model object");
  if (member(v, "gguf") != nullptr || member(v, "fixture") != nullptr)
    return parse_file_model(v, path, source, c, fa_auto);
  const std::string preset = member(v, "preset") ? get_string(v["preset"], child(path, "preset")) : "tiny";
  auto p = models::preset(preset);
  if (!p.ok()) {
    std::string names;
    for (const auto& n : models::preset_names()) names += (names.empty() ? "" : ", ") + n;
    fail(child(path, "preset"), "expected a model preset (one of: " + names + "), got " + quote(preset));
  }
  *c = p.value();
  // Each count is checked against the range of its field before it is narrowed: "n_layer": 4294967298 must be an
  // error, not a 2-layer model.
  auto count = [&](const char* key, auto* field) {
    using Field = std::remove_pointer_t<decltype(field)>;
    if (const json* x = member(v, key)) {
      constexpr int64_t kMax = std::numeric_limits<Field>::max();
      const std::string what = "a whole number from 0 to " + std::to_string(kMax);
      *field = static_cast<Field>(get_count(*x, child(path, key), what, kMax));
    }
  };
  count("n_layer", &c->n_layer);
  count("n_embd", &c->n_embd);
  count("n_ff", &c->n_ff);
  count("n_head", &c->n_head);
  count("n_head_kv", &c->n_head_kv);
  count("n_ctx", &c->n_ctx);
  count("n_kv", &c->n_kv);
  count("n_tokens", &c->n_tokens);
  count("n_outputs", &c->n_outputs);
  count("n_vocab", &c->n_vocab);
  count("n_expert", &c->n_expert);
  count("n_expert_used", &c->n_expert_used);
  if (const json* x = member(v, "weight_type")) c->weight_type = get_type(*x, child(path, "weight_type"));
  if (const json* x = member(v, "kv_type")) c->kv_type = get_type(*x, child(path, "kv_type"));
  const LlamaRunShape llama = read_llama_run(v, path);
  if (llama.ctx > 0) c->n_ctx = llama.ctx;
  if (llama.tokens > 0) c->n_tokens = llama.tokens;
  if (llama.flash_attn) c->flash_attn = *llama.flash_attn;
  *fa_auto = llama.flash_attn_auto;
  if (llama.kv_type) c->kv_type = *llama.kv_type;
  if (llama.v_type) c->v_cache_type = llama.v_type;
  if (c->n_layer > 100000) fail(child(path, "n_layer"), "expected at most 100000 layers");
  Status s = models::validate(*c);
  if (!s.ok()) fail(path, "the model is invalid: " + s.message());
}

void parse_run(const json& v, const std::string& path, Scenario* s) {
  expect_object(
      v, path,
      {"seed", "seeds", "mode", "adversarial", "max_jitter", "evaluations", "steps", "inputs", "model_seed", "faults"},
      "a run object");
  SimOptions& o = s->config.sim;
  if (const json* x = member(v, "seed")) o.seed = static_cast<uint64_t>(get_count(*x, child(path, "seed")));
  if (const json* x = member(v, "mode")) {
    const std::string m = get_string(*x, child(path, "mode"));
    if (m == "memory-backed") {
      o.mode = MemoryMode::kBacked;
    } else if (m == "metadata-only") {
      o.mode = MemoryMode::kMetadata;
    } else {
      fail(child(path, "mode"), "expected \"memory-backed\" or \"metadata-only\", got " + quote(m));
    }
  }
  if (const json* x = member(v, "adversarial")) o.adversarial = get_bool(*x, child(path, "adversarial"));
  if (const json* x = member(v, "max_jitter")) o.max_jitter_us = get_duration(*x, child(path, "max_jitter"));
  if (const json* x = member(v, "evaluations")) {
    const int64_t e = get_count(*x, child(path, "evaluations"));
    if (e < 1 || e > 1000) fail(child(path, "evaluations"), "expected 1 to 1000 evaluations");
    s->evaluations = static_cast<int>(e);
  }
  if (const json* x = member(v, "steps")) {
    const std::string sp = child(path, "steps");
    if (member(v, "evaluations") != nullptr) fail(sp, "expected either \"steps\" or \"evaluations\", not both");
    s->steps = read_steps(*x, sp);
  }
  if (const json* x = member(v, "inputs"))
    s->config.per_evaluation_inputs = read_inputs_kind(*x, child(path, "inputs"));
  if (const json* x = member(v, "seeds")) {
    const int64_t n = get_count(*x, child(path, "seeds"));
    if (n < 1 || n > 1000) fail(child(path, "seeds"), "expected 1 to 1000 seeds");
    s->seeds = static_cast<int>(n);
  }
  if (const json* x = member(v, "model_seed")) {
    s->config.model_seed = static_cast<uint64_t>(get_count(*x, child(path, "model_seed")));
  }
  if (const json* x = member(v, "faults")) {
    const std::string fp = child(path, "faults");
    expect_object(*x, fp,
                  {"fail_alloc_nth", "fail_alloc_device", "fail_alloc_above", "fail_compute_ops", "fail_compute_device",
                   "slow_copy_factor", "slow_event", "hide_free", "drop_event_wait_nth"},
                  "a faults object");
    FaultPlan& f = o.faults;
    if (const json* y = member(*x, "fail_alloc_nth")) f.fail_alloc_nth = get_count(*y, child(fp, "fail_alloc_nth"));
    if (const json* y = member(*x, "fail_alloc_device")) {
      f.fail_alloc_device = get_string(*y, child(fp, "fail_alloc_device"));
    }
    if (const json* y = member(*x, "fail_alloc_above"))
      f.fail_alloc_above = get_size(*y, child(fp, "fail_alloc_above"));
    if (const json* y = member(*x, "fail_compute_ops")) {
      f.fail_compute_ops = get_list<Op>(*y, child(fp, "fail_compute_ops"), "op names", get_op);
    }
    if (const json* y = member(*x, "fail_compute_device")) {
      f.fail_compute_device = get_string(*y, child(fp, "fail_compute_device"));
    }
    if (const json* y = member(*x, "slow_copy_factor")) {
      f.slow_copy_factor = get_number(*y, child(fp, "slow_copy_factor"));
      if (!(f.slow_copy_factor > 0)) fail(child(fp, "slow_copy_factor"), "expected a factor > 0");
    }
    if (const json* y = member(*x, "slow_event")) f.slow_event_us = get_duration(*y, child(fp, "slow_event"));
    if (const json* y = member(*x, "hide_free")) f.hide_free_bytes = get_size(*y, child(fp, "hide_free"));
    if (const json* y = member(*x, "drop_event_wait_nth")) {
      f.drop_event_wait_nth = get_count(*y, child(fp, "drop_event_wait_nth"));
    }
  }
}

// A count an expectation compares with (splits, inputs, reserves): range-checked, not clamped, so that the report
// never states a number the file does not.
int get_int_count(const json& v, const std::string& path) {
  return static_cast<int>(get_count(v, path, "a whole number from 0 to 1073741824", int64_t{1} << 30));
}

void parse_expect(const json& v, const std::string& path, Expectations* e) {
  expect_object(v, path,
                {"scheduling", "error_contains", "max_splits", "min_splits", "max_split_inputs", "nodes", "peak_memory",
                 "weights", "kv_cache", "no_race", "outputs_match_reference", "max_nmse", "allow_non_finite",
                 "max_reserves", "metrics", "extra_models_fit", "extra_overflow_contains"},
                "an expectations object");
  if (const json* x = member(v, "scheduling")) {
    const std::string s = get_string(*x, child(path, "scheduling"));
    if (s != "ok" && s != "error") fail(child(path, "scheduling"), "expected \"ok\" or \"error\", got " + quote(s));
    e->scheduling_ok = s == "ok";
  }
  if (const json* x = member(v, "error_contains")) e->error_contains = get_string(*x, child(path, "error_contains"));
  if (const json* x = member(v, "max_splits")) e->max_splits = get_int_count(*x, child(path, "max_splits"));
  if (const json* x = member(v, "max_split_inputs")) {
    e->max_split_inputs = get_int_count(*x, child(path, "max_split_inputs"));
  }
  if (const json* x = member(v, "min_splits")) e->min_splits = get_int_count(*x, child(path, "min_splits"));
  if (const json* x = member(v, "max_reserves")) e->max_reserves = get_int_count(*x, child(path, "max_reserves"));
  if (const json* x = member(v, "metrics")) e->metrics = read_metric_expects(*x, child(path, "metrics"), false);
  parse_extra_expect(v, path, e);
  if (const json* x = member(v, "nodes")) {
    e->nodes = get_list<Expectations::NodeOn>(
        *x, child(path, "nodes"), "{\"node\": name, \"device\": name} objects",
        [](const json& n, const std::string& np) {
          expect_object(n, np, {"node", "device"}, "a node expectation");
          Expectations::NodeOn o;
          o.node = get_string(required(n, np, "node", "a tensor name"), child(np, "node"));
          o.device = get_string(required(n, np, "device", "a device name"), child(np, "device"));
          return o;
        });
  }
  if (const json* x = member(v, "peak_memory")) {
    const std::string pp = child(path, "peak_memory");
    if (!x->is_object()) type_fail(pp, "an object {\"device\": size}", *x);
    for (const auto& item : x->items()) {
      e->peak_memory.push_back({item.key(), get_size(item.value(), child(pp, item.key()))});
    }
  }
  for (auto [key, list] : {std::pair{"weights", &e->weights}, {"kv_cache", &e->kv_cache}}) {
    const json* x = member(v, key);
    if (x == nullptr) continue;
    const std::string wp = child(path, key);
    if (!x->is_object()) type_fail(wp, "an object {\"device\": size}", *x);
    for (const auto& item : x->items()) list->push_back({item.key(), get_size(item.value(), child(wp, item.key()))});
  }
  if (const json* x = member(v, "no_race")) e->no_race = get_bool(*x, child(path, "no_race"));
  if (const json* x = member(v, "outputs_match_reference")) {
    e->outputs_match_reference = get_bool(*x, child(path, "outputs_match_reference"));
  }
  if (const json* x = member(v, "max_nmse")) {
    e->max_nmse = get_number(*x, child(path, "max_nmse"));
    if (!(e->max_nmse >= 0)) fail(child(path, "max_nmse"), "expected a number >= 0");
  }
  if (const json* x = member(v, "allow_non_finite")) {
    e->allow_non_finite = get_bool(*x, child(path, "allow_non_finite"));
  }
}

// "graph": a file name (relative to the scenario file's directory) or the serialized graph itself. The graph is read
// and validated here, so a bad graph is an error of the scenario file.
GraphSource parse_graph_source(const json& v, const std::string& source, const std::string& key) {
  GraphSource g;
  if (v.is_string()) {
    std::string path = v.get<std::string>();
    const size_t slash = source.rfind('/');
    if (!path.empty() && path[0] != '/' && slash != std::string::npos) path = source.substr(0, slash + 1) + path;
    Result<std::string> text = read_graph_text(path);
    if (!text.ok()) fail(key, text.status().message());
    g = {std::move(text).value(), path};
  } else if (v.is_object()) {
    g = {v.dump(), source + " (" + key + ")"};
  } else {
    type_fail(key, "a serialized graph's file name or the graph object", v);
  }
  Result<LoadedGraph> lg = graph_from_json(g.text, g.source);
  if (!lg.ok()) fail(key, lg.status().message());
  return g;
}

// "topology": a preset's name, else a topology file (a relative path is relative to the scenario file's directory).
Result<TopologyConfig> load_topology_near(const std::string& name, const std::string& source) {
  if (topology_preset_text(name) != nullptr) return topology_preset(name);
  const size_t slash = source.rfind('/');
  if (name.empty() || name[0] == '/' || slash == std::string::npos) return load_topology(name);
  const std::string path = source.substr(0, slash + 1) + name;
  std::error_code ec;
  // (a name that is no path and no file there keeps load_topology's message, which lists the presets)
  const bool is_path = name.find('/') != std::string::npos || name.ends_with(".json");
  return load_topology(is_path || std::filesystem::exists(path, ec) ? path : name);
}

Scenario parse_root(const json& root, const std::string& source, int version_if_absent,
                    std::vector<PolicyConversion>* conversions) {
  // The version first: a newer file may have keys this build does not know.
  const int declared = read_version(root);
  expect_object(root, "",
                {"version", "name", "description", "topology", "model", "graph", "next_graph", "policy", "run",
                 "expect", "compare", "draft", "mmproj"},
                "a scenario object");
  // Without a version: version_if_absent, unless the file uses keys only version 2 has (then it was written for it).
  const int version = declared != 0 ? declared : uses_version2_keys(root) ? kScenarioVersion : version_if_absent;
  Scenario s;
  s.source = source;
  s.version = declared;
  s.name = get_string(required(root, "", "name", "the scenario's name"), "name");
  if (const json* x = member(root, "description")) s.description = get_string(*x, "description");
  const json& topo =
      required(root, "", "topology", "a preset name such as \"1gpu\", a topology file's name or a topology object");
  if (topo.is_string()) {
    auto t = load_topology_near(topo.get<std::string>(), source);
    if (!t.ok()) fail("topology", t.status().message());
    s.config.topology = std::move(t).value();
  } else if (topo.is_object()) {
    auto t = parse_topology(topo.dump(), source + " (topology)");
    if (!t.ok()) fail("topology", t.status().message());
    s.config.topology = std::move(t).value();
  } else {
    type_fail("topology", "a preset name, a topology file's name or a topology object", topo);
  }
  if (const json* x = member(root, "model")) {
    parse_model(*x, "model", source, &s.config.model, &s.config.flash_attn_auto);
  } else {
    s.config.model = models::preset("tiny").value();
  }
  if (const json* x = member(root, "graph")) {
    if (member(root, "model") != nullptr) fail("graph", "expected either \"model\" or \"graph\", not both");
    s.config.graph = parse_graph_source(*x, source, "graph");
  }
  if (const json* x = member(root, "next_graph")) {
    if (member(root, "graph") == nullptr) fail("next_graph", "a next graph needs a first one in \"graph\"");
    s.config.next_graph = parse_graph_source(*x, source, "next_graph");
  }
  parse_extra_models(root, source, &s);
  const json* policy = member(root, "policy");
  if (policy != nullptr) {
    if (version == 1) refuse_version2_keys(*policy, "policy");
    read_policy_json(*policy, "policy", &s.config.policy);
  }
  if (const json* x = member(root, "run")) parse_run(*x, "run", &s);
  for (const Session::StepSpec& st : s.steps) {
    const bool next = (st.step >= Session::Step::kReserveNext && st.step <= Session::Step::kComputeNext) ||
                      st.step == Session::Step::kComputeNextAgain;
    if (next && !s.config.next_graph) {
      fail("run.steps", "a \"-next\" step needs a \"next_graph\"");
    }
  }
  // A file without a version, or of version 1 (docs/scenarios.md, "Versions"): its layers must be placed as they were
  // meant (the devices and the layer count are known now).
  const PlacementPolicy written = s.config.policy;
  std::optional<VersionRules> rules;
  if (version != kScenarioVersion) {
    rules.emplace(s.config, source);
    if (version == 0) {
      rules->require_same(written, policy, policy != nullptr ? "policy" : "");
    } else {
      PolicyConversion c = rules->convert(written, policy, "policy");
      s.config.policy = c.apply(written);
      if (!c.note.empty()) s.conversions.push_back(c.note);
      if (conversions != nullptr) conversions->push_back(std::move(c));
    }
  }
  if (const json* x = member(root, "compare")) {
    const json* with = member(*x, "with");
    if (version == 1 && with != nullptr && with->is_object()) refuse_version2_keys(*with, "compare.with");
    s.compare = read_comparison(*x, "compare", s.config.policy);
    if (rules) {
      rules->require_variant(read_comparison(*x, "compare", written).policy, s.compare->policy, "compare.with",
                             version);
    }
  }
  // A scenario checks something, or says that it only runs ("expect": "nothing"; a failure to run still fails it).
  const json* expect = member(root, "expect");
  if (expect != nullptr && expect->is_string() && expect->get<std::string>() == "nothing") return s;
  if (expect != nullptr) parse_expect(*expect, "expect", &s.expect);
  if (!s.expect.checks_something() && !s.compare) {
    fail("expect",
         "the scenario checks nothing: give expectations (docs/scenarios.md) or \"expect\": \"nothing\" to only "
         "run it");
  }
  return s;
}

}  // namespace

Result<Scenario> parse_scenario_as(std::string_view text, const std::string& source, int version_if_absent,
                                   std::vector<PolicyConversion>* conversions) {
  try {
    json root;
    TS_RETURN_IF_ERROR(parse_json(text, source, &root));
    return parse_root(root, source, version_if_absent, conversions);
  } catch (const ParseProblem& p) {
    return invalid(error_prefix(source, p.path) + p.message);
  } catch (const std::exception& e) {
    return invalid(source + ": cannot read the scenario: " + e.what());
  }
}

Result<Scenario> parse_scenario(std::string_view text, const std::string& source) {
  return parse_scenario_as(text, source, 0, nullptr);
}

Result<Scenario> load_scenario_file(const std::string& path) {
  Result<std::string> text = read_text_file(path, "scenario file");
  if (!text.ok()) return text.status();
  return parse_scenario(text.value(), path);
}

namespace {

// split_mode tensor (llama.cpp's -sm tensor; docs/tensor-parallel.md): the model on the meta device of the topology's
// GPUs, as `tessera run -sm tensor` runs it (llama::run_tensor_parallel). The expectations it can answer: scheduling
// and its error, splits, where nodes run (the meta device, "meta", or the CPU), each device's peak memory, weights and
// KV cache, races, the outputs against the CPU, and the metrics of its simulator (check_metrics), after the evaluations
// or the run's steps (of the one graph); any other is a failed expectation that says so.
ScenarioOutcome run_once_tensor(const Scenario& sc, const Registry* real_devices) {
  ScenarioOutcome out;
  const Expectations& e = sc.expect;
  auto check = [&](std::string what, bool ok, std::string detail) {
    out.results.push_back({std::move(what), ok, std::move(detail)});
  };
  std::vector<std::string> unsupported;
  if (sc.compare) unsupported.push_back("compare");
  if (e.max_split_inputs) unsupported.push_back("max_split_inputs");
  if (e.max_reserves) unsupported.push_back("max_reserves");
  if (e.extra_models_fit || !e.extra_overflow_contains.empty()) unsupported.push_back("the extra models");
  if (!unsupported.empty()) {
    std::string list;
    for (const std::string& u : unsupported) list += (list.empty() ? "" : ", ") + u;
    check("expectations split_mode tensor can answer", false, "not with split_mode tensor yet: " + list);
    return out;
  }
  std::vector<std::string> node_names;
  for (const auto& n : e.nodes) node_names.push_back(n.node);
  auto r = llama::run_tensor_parallel(sc.config, real_devices, sc.evaluations, node_names, sc.steps);
  const std::string error = r.ok() ? std::string() : r.status().to_string();
  out.error = error;
  if (e.scheduling_ok.has_value()) {
    check(*e.scheduling_ok ? "scheduling succeeds" : "scheduling fails", r.ok() == *e.scheduling_ok,
          r.ok() ? "it succeeded" : "it failed: " + error);
  } else if (!r.ok()) {
    check("the scenario runs", false, error);
  }
  if (!e.error_contains.empty()) {
    check("the error contains \"" + e.error_contains + "\"", error.find(e.error_contains) != std::string::npos,
          error.empty() ? "no error" : error);
  }
  if (r.ok()) {
    const llama::TensorParallelRun& run = r.value();
    const sim::Simulator& simulator = *run.sim;
    out.report =
        format_message("-sm tensor over %zu GPUs: %d splits, %zu AllReduces of %s an evaluation\n", run.gpus.size(),
                       run.splits, run.meta.reductions, format_bytes(run.meta.reduced_bytes).c_str());
    for (size_t i = 0; i < simulator.device_count(); ++i) {
      out.report += format_message("%-8s weights %s, kv cache %s, peak %s\n", simulator.device_config(i).name.c_str(),
                                   format_bytes(run.weights[i]).c_str(), format_bytes(run.cache[i]).c_str(),
                                   format_bytes(run.peak[i]).c_str());
    }
    out.report_wide = out.report;
    if (e.max_splits)
      check(format_message("at most %d splits", *e.max_splits), run.splits <= *e.max_splits,
            format_message("%d splits", run.splits));
    if (e.min_splits)
      check(format_message("at least %d splits", *e.min_splits), run.splits >= *e.min_splits,
            format_message("%d splits", run.splits));
    auto device = [&](const std::string& name) -> std::optional<size_t> {
      for (size_t i = 0; i < simulator.device_count(); ++i) {
        if (simulator.device_config(i).name == name) return i;
      }
      return std::nullopt;
    };
    for (const auto& pm : e.peak_memory) {
      const auto d = device(pm.device);
      const std::string what = "peak memory of " + pm.device + " <= " + format_bytes(pm.max_bytes);
      check(what, d && run.peak[*d] <= pm.max_bytes, d ? format_bytes(run.peak[*d]) : "no such device");
    }
    // a node on the meta device matches its backend's name ("Meta(gpu0,gpu1)") or "meta"; on the CPU, the CPU's name
    for (size_t k = 0; k < e.nodes.size() && k < run.explained.size(); ++k) {
      const auto& want = e.nodes[k];
      const auto& on = run.explained[k];
      const std::string& got = on.where.backend_name;
      const bool meta = got.rfind("Meta(", 0) == 0;
      const bool ok = on.found && (got == want.device || (meta && want.device == "meta"));
      check(want.node + " on " + want.device, ok,
            !on.found ? "no node of that name"
                      : format_message("on %s, cause %s, split %d", got.empty() ? "no backend" : got.c_str(),
                                       cause_name(on.where.cause), on.where.split));
    }
    check_metrics(run, e.metrics, &out.results);
    for (auto [what_of, list, field] :
         {std::tuple{"weights", &e.weights, &run.weights}, {"kv cache", &e.kv_cache, &run.cache}}) {
      for (const auto& w : *list) {
        const auto d = device(w.device);
        check(format_message("%s on %s: %zu bytes", what_of, w.device.c_str(), w.bytes), d && (*field)[*d] == w.bytes,
              d ? format_message("%zu bytes", (*field)[*d]) : "no such device");
      }
    }
  }
  if (e.no_race.value_or(false)) {
    const size_t races = r.ok() ? r.value().sim->races().size() : 0;
    check("no race", r.ok() && races == 0,
          races == 0 ? "none" : format_message("%zu races; first:\n", races) + r.value().sim->races_report(1));
  }
  if (e.outputs_match_reference.value_or(false)) {
    std::string found = "not computed";
    bool good = false;
    if (r.ok() && !r.value().checked) {
      found = sc.config.sim.mode == sim::MemoryMode::kBacked ? "not checked (no step computed the graph)"
                                                             : "not checked (metadata-only mode has no values)";
    }
    if (r.ok() && r.value().checked) {
      const NmseResult& n = r.value().nmse;
      good = n.nmse <= e.max_nmse && !n.nan_mismatch && (n.non_finite == 0 || e.allow_non_finite);
      found = format_message("NMSE %.3g%s", n.nmse, n.nan_mismatch ? ", NaN/Inf mismatch" : "");
    }
    check(format_message("outputs match the CPU reference (NMSE <= %g)", e.max_nmse), good, found);
  }
  out.passed = true;
  for (const auto& res : out.results) out.passed = out.passed && res.ok;
  return out;
}

ScenarioOutcome run_once(const Scenario& sc, const Registry* real_devices) {
  ScenarioOutcome out;
  if (sc.config.policy.split_mode == harness::SplitMode::kTensor) return run_once_tensor(sc, real_devices);
  const Expectations& e = sc.expect;
  auto check = [&](std::string what, bool ok, std::string detail) {
    out.results.push_back({std::move(what), ok, std::move(detail)});
  };
  std::string error;
  std::unique_ptr<Session> session;
  std::optional<RunStats> stats;
  {
    auto s = Session::create(sc.config, real_devices);
    if (!s.ok()) {
      error = s.status().to_string();
    } else {
      session = std::move(s).value();
      const bool numerics = e.outputs_match_reference.value_or(false);
      auto r = sc.steps.empty() ? session->run(sc.evaluations, numerics) : session->run_steps(sc.steps, numerics);
      if (!r.ok()) {
        error = r.status().to_string();
      } else {
        stats = r.value();
      }
    }
  }
  out.error = error;
  const bool ok = error.empty();
  if (e.scheduling_ok.has_value()) {
    check(*e.scheduling_ok ? "scheduling succeeds" : "scheduling fails", ok == *e.scheduling_ok,
          ok ? "it succeeded" : "it failed: " + error);
  } else if (!ok) {
    check("the scenario runs", false, error);
  }
  if (!e.error_contains.empty()) {
    check("the error contains \"" + e.error_contains + "\"", error.find(e.error_contains) != std::string::npos,
          error.empty() ? "no error" : error);
  }
  if (session) {
    const std::string splits_text = session->splits_table();
    out.report = session->summary_table() + splits_text;
    out.report_wide = session->summary_table(true) + splits_text;
    const int splits = session->sched().n_splits();
    if (e.max_splits)
      check(format_message("at most %d splits", *e.max_splits), splits <= *e.max_splits,
            format_message("%d splits", splits));
    if (e.min_splits)
      check(format_message("at least %d splits", *e.min_splits), splits >= *e.min_splits,
            format_message("%d splits", splits));
    if (e.max_split_inputs) {
      size_t most = 0, where = 0;
      const std::vector<Scheduler::SplitView> views = session->sched().splits();
      for (size_t k = 0; k < views.size(); ++k) {
        if (views[k].inputs.size() > most) {
          most = views[k].inputs.size();
          where = k;
        }
      }
      check(format_message("at most %d inputs per split", *e.max_split_inputs),
            most <= static_cast<size_t>(*e.max_split_inputs), format_message("at most %zu (split %zu)", most, where));
    }
    if (e.max_reserves) {
      const int rc = session->sched().reserve_count();
      check(format_message("at most %d compute-buffer plans", *e.max_reserves), rc <= *e.max_reserves,
            format_message("%d plans", rc));
    }
    for (const auto& n : e.nodes) {
      const Tensor* t = session->find_tensor(n.node);
      std::string got = session->explain(n.node);
      if (!got.empty() && got.back() == '\n') got.pop_back();
      const bool on = t != nullptr && session->sched().explain(t).backend_name == n.device;
      check(n.node + " on " + n.device, on, got);
    }
    const std::vector<DeviceMemory> mem = session->memory();
    for (const auto& pm : e.peak_memory) {
      const DeviceMemory* m = nullptr;
      for (const auto& d : mem) {
        if (d.device == pm.device) m = &d;
      }
      if (m == nullptr) {
        check("peak memory of " + pm.device, false, "no such device");
      } else {
        check("peak memory of " + pm.device + " <= " + format_bytes(pm.max_bytes), m->peak <= pm.max_bytes,
              format_bytes(m->peak));
      }
    }
    for (auto [what_of, list, field] :
         {std::tuple{"weights", &e.weights, &DeviceMemory::weights}, {"kv cache", &e.kv_cache, &DeviceMemory::cache}}) {
      for (const auto& w : *list) {
        const DeviceMemory* m = nullptr;
        for (const auto& d : mem) {
          if (d.device == w.device) m = &d;
        }
        const std::string what = format_message("%s on %s: %zu bytes", what_of, w.device.c_str(), w.bytes);
        if (m == nullptr) {
          check(what, false, "no such device");
        } else {
          check(what, m->*field == w.bytes, format_message("%zu bytes", m->*field));
        }
      }
    }
    check_extra_expect(*session, sc.extra, e, real_devices, check);
  }
  if (session && ok) check_metrics(*session, e.metrics, &out.results);
  if (sc.compare) check_comparison(sc, ok ? session.get() : nullptr, real_devices, &out.results);
  if (e.no_race.value_or(false)) {
    const size_t races = session ? session->sim().races().size() : 0;
    check("no race", session && races == 0,
          races == 0 ? "none" : format_message("%zu races; first:\n", races) + session->sim().races_report(1));
  }
  if (e.outputs_match_reference.value_or(false)) {
    // NaN or Inf in an output fails unless the scenario says it expects them: NaN on both sides is not agreement.
    const bool good = stats && stats->checked && stats->matches_reference(e.max_nmse, e.allow_non_finite);
    std::string found = "not computed";
    if (stats && !stats->checked) found = "not checked (metadata-only mode has no values)";
    if (stats && stats->checked) {
      found = format_message("NMSE %.3g", stats->nmse);
      if (stats->nan_mismatch) found += ", NaN/Inf mismatch";
      if (stats->non_finite > 0) {
        found += format_message(", %zu NaN/Inf values%s", stats->non_finite,
                                e.allow_non_finite ? " (allowed)" : " (\"allow_non_finite\": true accepts them)");
      }
    }
    check(format_message("outputs match the CPU reference (NMSE <= %g)", e.max_nmse), good, found);
  }
  out.passed = true;
  for (const auto& r : out.results) out.passed = out.passed && r.ok;
  return out;
}

}  // namespace

ScenarioOutcome run_scenario(const Scenario& sc, const Registry* real_devices) {
  if (sc.seeds <= 1) return run_once(sc, real_devices);
  ScenarioOutcome out;
  for (int k = 0; k < sc.seeds; ++k) {
    Scenario one = sc;
    one.config.sim.seed = sc.config.sim.seed + static_cast<uint64_t>(k);
    out = run_once(one, real_devices);
    if (!out.passed) {
      for (auto& r : out.results)
        r.detail += format_message(" (seed %llu)", static_cast<unsigned long long>(one.config.sim.seed));
      out.results.push_back({format_message("every one of %d seeds passes", sc.seeds), false,
                             format_message("seed %llu fails (%d passed before it)",
                                            static_cast<unsigned long long>(one.config.sim.seed), k)});
      return out;
    }
  }
  out.results.push_back({format_message("every one of %d seeds passes", sc.seeds), true,
                         format_message("seeds %llu..%llu", static_cast<unsigned long long>(sc.config.sim.seed),
                                        static_cast<unsigned long long>(sc.config.sim.seed + sc.seeds - 1))});
  return out;
}

}  // namespace tessera::scenario
