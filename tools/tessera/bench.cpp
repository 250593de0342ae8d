// `tessera bench` (docs/bench.md): llama-bench's options and table, each row's time simulated on a topology
// (tessera/llama/llama_bench.h).
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <regex>
#include <sstream>

#include <CLI/CLI.hpp>

#include "tessera/llama/llama_bench.h"
#include "tessera/llama/llama_cpp_graph.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::llama;
using ojson = nlohmann::ordered_json;

namespace {

std::vector<std::string> split(const std::string& s, char delim) {
  std::vector<std::string> out;
  size_t at = 0;
  for (;;) {
    const size_t d = s.find(delim, at);
    out.push_back(s.substr(at, d == std::string::npos ? std::string::npos : d - at));
    if (d == std::string::npos) break;
    at = d + 1;
  }
  return out;
}

// llama-bench's integer lists: comma-separated items, each first[-last[(+|*)step]] ("128,256", "512-2048*2",
// "0-32768+8192").
Result<std::vector<int64_t>> parse_int_list(const std::string& option, const std::string& text) {
  static const std::regex item(R"(^(\d{1,9})(?:-(\d{1,9})(?:([+*])(\d{1,9}))?)?$)");
  std::vector<int64_t> out;
  for (const std::string& s : split(text, ',')) {
    std::smatch m;
    if (!std::regex_match(s, m, item)) {
      return Status(StatusCode::kInvalidArgument,
                    option + " " + text + ": '" + s + "' is not a count nor a range first-last[+step|*step]");
    }
    const int64_t first = std::stoll(m[1]);
    const int64_t last = m[2].matched ? std::stoll(m[2]) : first;
    const char op = m[3].matched ? m[3].str()[0] : '+';
    const int64_t step = m[4].matched ? std::stoll(m[4]) : 1;
    if (last < first || (op == '+' && step < 1) || (op == '*' && (step < 2 || first < 1))) {
      return Status(StatusCode::kInvalidArgument, option + " " + text + ": '" + s +
                                                      "' is an empty or endless range (last >= first; +step >= 1; "
                                                      "*step >= 2 from a first value >= 1)");
    }
    for (int64_t v = first; v <= last; v = op == '+' ? v + step : v * step) {
      out.push_back(v);
      if (out.size() > 10000) return Status(StatusCode::kInvalidArgument, option + " " + text + ": over 10000 values");
    }
  }
  return out;
}

// Every occurrence of a list option, its comma-separated items in order (the default when none is given).
std::vector<std::string> items(const std::vector<std::string>& given, const std::vector<std::string>& fallback,
                               char delim = ',') {
  if (given.empty()) return fallback;
  std::vector<std::string> out;
  for (const std::string& g : given) {
    for (std::string& s : split(g, delim)) out.push_back(std::move(s));
  }
  return out;
}

Result<std::vector<int64_t>> int_items(const std::string& option, const std::vector<std::string>& given,
                                       const std::vector<int64_t>& fallback) {
  if (given.empty()) return fallback;
  std::vector<int64_t> out;
  for (const std::string& g : given) {
    auto v = parse_int_list(option, g);
    if (!v.ok()) return v.status();
    out.insert(out.end(), v.value().begin(), v.value().end());
  }
  return out;
}

Result<bool> bool_item(const std::string& option, const std::string& v) {
  if (v == "0" || v == "off" || v == "false") return false;
  if (v == "1" || v == "on" || v == "true") return true;
  return Status(StatusCode::kInvalidArgument, option + " " + v + ": expected 0 or 1");
}

// The model column: llama.cpp's "arch size type" (llama_model_desc), the size from the parameter count as
// llama-bench's readers know it ("7B" for 6.74 B, "500M"), the type the weights with the most bytes have.
std::string model_desc(const harness::SessionConfig& c, const BenchResult& r) {
  std::string size;
  const double p = static_cast<double>(r.model_params);
  char buf[64];
  if (p < 1e9) {
    std::snprintf(buf, sizeof buf, "%.0fM", p / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0fB", std::round(p / 1e9));
  }
  size = buf;
  std::string type = type_name(r.main_type);
  for (char& ch : type) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return c.model.arch + " " + size + " " + type;
}

std::string size_text(uint64_t bytes) {
  char buf[64];
  const double b = static_cast<double>(bytes);
  if (bytes < (uint64_t{1} << 30)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", b / 1024.0 / 1024.0);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f GiB", b / 1024.0 / 1024.0 / 1024.0);
  }
  return buf;
}

std::string params_text(uint64_t n) {
  char buf[64];
  const double p = static_cast<double>(n);
  if (p < 1e9) {
    std::snprintf(buf, sizeof buf, "%.2f M", p / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.2f B", p / 1e9);
  }
  return buf;
}

struct Row {
  BenchInstance inst;
  BenchTest test;
  std::string model, backend, machine;
  BenchResult result;
};

// llama-bench's markdown columns (markdown_printer): width (negative: left-aligned) and the header.
struct Column {
  std::string field, header;
  int width;
};

std::string fmt_ts(double ts) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f ± %.2f", ts, 0.0);
  return buf;
}

std::string ts_text(const std::string& ts) {
  std::string out = ts;
  for (char& ch : out) {
    if (ch == ',' || ch == ';') ch = '/';
  }
  return out;
}

}  // namespace

void add_bench_options(CLI::App* bench, BenchArgs* a) {
  bench->add_option("-m,--model", a->models,
                    "model preset, GGUF file or published model by name (repeatable; comma-separated)");
  bench->add_option("-t,--topology", a->topology,
                    "topology preset name or JSON file (default 1gpu); a number is llama-bench's thread count "
                    "(not modelled yet: noted and ignored)");
  bench->add_option("--gpu", a->gpus,
                    "instead of -t: a GPU with this much memory (\"24GiB\") or a device preset (rtx4090, ...), once "
                    "per GPU");
  bench->add_option("--cpu", a->cpu, "the machine's CPU as a device preset (ryzen9-7950x, ...)");
  bench->add_option("--kernels", a->kernels,
                    "a kernel profile (embedded name or JSON file): what llama.cpp's kernels reach of the peaks");
  bench->add_option("--dev,--device", a->devices,
                    "llama.cpp's -dev: the GPUs the model uses (none: the CPU only, llama-bench's CPU backend)");
  bench->add_option("-p,--n-prompt", a->n_prompt, "prompt tokens: a list, llama-bench's first-last+step (default 512)");
  bench->add_option("-n,--n-gen", a->n_gen, "generated tokens (default 128)");
  bench->add_option("--pg", a->n_pg, "a prompt and generated tokens in one test: PP,TG (repeatable)");
  bench->add_option("-d,--n-depth", a->n_depth, "tokens already in the cache before each test (default 0)");
  bench->add_option("-b,--batch-size", a->n_batch, "logical batch (default 2048)");
  bench->add_option("--ub,--ubatch-size", a->n_ubatch, "physical batch (default 512)");
  bench->add_option("--ctk,--cache-type-k", a->type_k, "K cache type (default f16)");
  bench->add_option("--ctv,--cache-type-v", a->type_v, "V cache type (default f16)");
  bench->add_option("--fa,--flash-attn", a->flash_attn, "0, 1 or auto (default auto)");
  bench->add_option("--ngl,--n-gpu-layers", a->n_gpu_layers, "layers on the GPUs (default -1: all)");
  bench->add_option("--ncmoe,--n-cpu-moe", a->n_cpu_moe, "the expert weights of the first N layers on the CPU");
  bench->add_option("--sm,--split-mode", a->split_mode, "none, layer or row (default layer)");
  bench->add_option("--mg,--main-gpu", a->main_gpu, "the GPU of split mode none (default 0)");
  bench->add_option("--nkvo,--no-kv-offload", a->no_kv_offload, "0 or 1: the KV cache in host memory");
  bench->add_option("--ts,--tensor-split", a->tensor_split, "shares of the layers per GPU, e.g. 3/1");
  bench->add_option("--ot,--override-tensor", a->override_tensor,
                    "REGEX=BUFT[;REGEX=BUFT...]: weights whose name matches go to that buffer type");
  bench
      ->add_option("-r,--repetitions", a->repetitions,
                   "repetitions (default 5; a simulation is deterministic, so its deviation is 0)")
      ->check(CLI::Range(1, 1000));
  bench->add_option("-o,--output", a->output, "md, csv, json or jsonl (default md)")
      ->check(CLI::IsMember({"md", "csv", "json", "jsonl"}));
  bench
      ->add_option("--llama-build", a->llama_build,
                   "a GGUF model's graph as this llama.cpp build made it (default: the newest checked, " +
                       std::to_string(kLlamaCppNewestBuild) + ")")
      ->check(CLI::Range(1, 1000000));
  bench->add_flag("--progress", a->progress, "a line on standard error per test");
}

int cmd_bench(const BenchArgs& a, const BenchConfigFn& make_config, const Registry* real_devices) {
  auto fail = [](const Status& s) {
    std::fprintf(stderr, "tessera: bench: %s\n", s.message().c_str());
    return kInputError;
  };
  BenchArgs args = a;
  if (!args.topology.empty() && args.topology.find_first_not_of("0123456789") == std::string::npos &&
      args.topology.find_first_of("0123456789") == 0) {
    std::fprintf(stderr,
                 "tessera: bench: -t %s: llama-bench's thread count, not modelled yet (the CPU's cost model has no "
                 "thread count): ignored; -t/--topology PRESET|FILE or --gpu SIZE name the machine\n",
                 args.topology.c_str());
    args.topology.clear();
  }
  // The tests.
  auto n_prompt = int_items("-p", args.n_prompt, {512});
  auto n_gen = int_items("-n", args.n_gen, {128});
  auto n_depth = int_items("-d", args.n_depth, {0});
  auto n_batch = int_items("-b", args.n_batch, {2048});
  auto n_ubatch = int_items("-ub", args.n_ubatch, {512});
  for (const auto* r : {&n_prompt, &n_gen, &n_depth, &n_batch, &n_ubatch}) {
    if (!r->ok()) return fail(r->status());
  }
  for (int64_t v : n_batch.value()) {
    if (v < 1) return fail(Status(StatusCode::kInvalidArgument, "-b 0: a batch needs a token"));
  }
  for (int64_t v : n_ubatch.value()) {
    if (v < 1) return fail(Status(StatusCode::kInvalidArgument, "-ub 0: a ubatch needs a token"));
  }
  std::vector<std::pair<int64_t, int64_t>> pg;
  for (const std::string& g : args.n_pg) {
    const std::vector<std::string> pair = split(g, ',');
    auto p = pair.size() == 2 ? parse_int_list("-pg", pair[0]) : Result<std::vector<int64_t>>(Status());
    auto n = pair.size() == 2 ? parse_int_list("-pg", pair[1]) : Result<std::vector<int64_t>>(Status());
    if (pair.size() != 2 || !p.ok() || !n.ok() || p.value().size() != 1 || n.value().size() != 1) {
      return fail(Status(StatusCode::kInvalidArgument, "-pg " + g + ": expected PP,TG (two counts, e.g. 512,128)"));
    }
    pg.emplace_back(p.value()[0], n.value()[0]);
  }
  std::vector<bool> no_kv;
  for (const std::string& kv : items(args.no_kv_offload, {"0"})) {
    auto b = bool_item("-nkvo", kv);
    if (!b.ok()) return fail(b.status());
    no_kv.push_back(b.value());
  }
  // One instance per combination, in llama-bench's order: each option's values nested inside the previous option's.
  BenchInstance machine;
  machine.topology = args.topology;
  machine.gpus = args.gpus;
  machine.cpu = args.cpu;
  machine.kernels = args.kernels;
  machine.devices = args.devices;
  machine.llama_build = args.llama_build;
  std::vector<BenchInstance> instances = {machine};
  auto expand = [&instances](const auto& values, auto set) {
    std::vector<BenchInstance> next;
    for (const BenchInstance& in : instances) {
      for (const auto& v : values) {
        next.push_back(in);
        set(next.back(), v);
      }
    }
    instances = std::move(next);
  };
  using S = const std::string&;
  expand(items(args.models, {"7b"}), [](BenchInstance& in, S v) { in.model = v; });
  expand(items(args.n_gpu_layers, {"-1"}), [](BenchInstance& in, S v) { in.n_gpu_layers = v; });
  expand(items(args.n_cpu_moe, {"0"}), [](BenchInstance& in, S v) { in.n_cpu_moe = v; });
  expand(items(args.split_mode, {"layer"}), [](BenchInstance& in, S v) { in.split_mode = v; });
  expand(items(args.main_gpu, {"0"}), [](BenchInstance& in, S v) { in.main_gpu = v; });
  expand(items(args.tensor_split, {""}), [](BenchInstance& in, S v) { in.tensor_split = v; });
  expand(items(args.override_tensor, {""}), [](BenchInstance& in, S v) { in.override_tensor = v; });
  expand(no_kv, [](BenchInstance& in, bool v) { in.no_kv_offload = v; });
  expand(items(args.flash_attn, {"auto"}), [](BenchInstance& in, S v) { in.flash_attn = v; });
  expand(n_batch.value(), [](BenchInstance& in, int64_t v) { in.n_batch = v; });
  expand(n_ubatch.value(), [](BenchInstance& in, int64_t v) { in.n_ubatch = v; });
  expand(items(args.type_k, {"f16"}), [](BenchInstance& in, S v) { in.type_k = v; });
  expand(items(args.type_v, {"f16"}), [](BenchInstance& in, S v) { in.type_v = v; });
  // Columns as llama-bench prints them: a column for every option given other than its default.
  std::vector<Column> cols = {
      {"model", "model", -30}, {"size", "size", 10}, {"params", "params", 10}, {"backend", "backend", -10}};
  auto given = [](const std::vector<std::string>& v, const std::string& def) {
    return !v.empty() && !(v.size() == 1 && v.front() == def);
  };
  if (given(args.n_cpu_moe, "0")) cols.push_back({"n_cpu_moe", "n_cpu_moe", 9});
  if (n_batch.value() != std::vector<int64_t>{2048}) cols.push_back({"n_batch", "n_batch", 7});
  if (n_ubatch.value() != std::vector<int64_t>{512}) cols.push_back({"n_ubatch", "n_ubatch", 8});
  if (given(args.type_k, "f16")) cols.push_back({"type_k", "type_k", 6});
  if (given(args.type_v, "f16")) cols.push_back({"type_v", "type_v", 6});
  if (given(args.main_gpu, "0")) cols.push_back({"main_gpu", "main_gpu", 8});
  if (given(args.split_mode, "layer")) cols.push_back({"split_mode", "sm", 6});
  if (given(args.no_kv_offload, "0")) cols.push_back({"no_kv_offload", "nkvo", 4});
  if (given(args.flash_attn, "auto")) cols.push_back({"flash_attn", "fa", 3});
  if (!args.tensor_split.empty()) cols.push_back({"tensor_split", "ts", -12});
  if (!args.override_tensor.empty()) cols.push_back({"tensor_buft_overrides", "ot", -21});
  cols.push_back({"test", "test", 15});
  cols.push_back({"t/s", "t/s", 20});

  // The rows.
  std::vector<Row> rows;
  const auto positive = [](const std::vector<int64_t>& v) {
    return static_cast<size_t>(std::count_if(v.begin(), v.end(), [](int64_t x) { return x > 0; }));
  };
  const size_t n_tests =
      instances.size() * n_depth.value().size() * (positive(n_prompt.value()) + positive(n_gen.value()) + pg.size());
  int rc = kOk;
  size_t done = 0;
  std::vector<std::string> notes;
  auto note = [&notes](const std::string& n) {
    if (std::find(notes.begin(), notes.end(), n) == notes.end()) notes.push_back(n);
  };
  for (const BenchInstance& inst : instances) {
    for (int64_t d : n_depth.value()) {
      std::vector<BenchTest> these;
      for (int64_t p : n_prompt.value()) {
        if (p > 0) these.push_back({p, 0, d});
      }
      for (int64_t n : n_gen.value()) {
        if (n > 0) these.push_back({0, n, d});
      }
      for (const auto& [p, n] : pg) these.push_back({p, n, d});
      for (const BenchTest& t : these) {
        ++done;
        if (args.progress) {
          std::fprintf(stderr, "tessera bench: %zu/%zu: %s %s\n", done, n_tests, inst.model.c_str(),
                       bench_test_name(t).c_str());
        }
        auto config = make_config(inst, bench_ctx(t));
        if (!config.ok()) return fail(config.status());
        auto r = simulate_bench(config.value(), t, inst.n_batch, inst.n_ubatch, real_devices);
        if (!r.ok()) {
          // a row that cannot run (a model that does not fit, ...): said, and the others still run
          std::fprintf(stderr, "tessera: bench: %s -ngl %s: %s\n", inst.model.c_str(), inst.n_gpu_layers.c_str(),
                       r.status().message().c_str());
          rc = r.status().code() == StatusCode::kInvalidArgument ? kInputError : kExpectationFailed;
          continue;
        }
        for (const std::string& n : r.value().notes) note(n);
        Row row;
        row.inst = inst;
        row.test = t;
        row.model = model_desc(config.value(), r.value());
        bool has_gpu = false;
        for (const auto& dev : config.value().topology.devices) has_gpu = has_gpu || dev.type != DeviceType::kCpu;
        row.backend = has_gpu ? "CUDA" : "CPU";
        row.machine = config.value().topology.name;
        row.result = std::move(r).value();
        rows.push_back(std::move(row));
      }
    }
  }

  // ngl after the backend, unless every row ran on the CPU alone (llama-bench leaves it out for a CPU backend)
  if (std::any_of(rows.begin(), rows.end(), [](const Row& r) { return r.backend != "CPU"; })) {
    cols.insert(cols.begin() + 4, Column{"n_gpu_layers", "ngl", 3});
  }
  auto value = [](const Row& r, const std::string& field) -> std::string {
    if (field == "model") return r.model;
    if (field == "size") return size_text(r.result.model_bytes);
    if (field == "params") return params_text(r.result.model_params);
    if (field == "backend") return r.backend;
    if (field == "n_gpu_layers") return r.inst.n_gpu_layers;
    if (field == "n_cpu_moe") return r.inst.n_cpu_moe;
    if (field == "n_batch") return std::to_string(r.inst.n_batch);
    if (field == "n_ubatch") return std::to_string(r.inst.n_ubatch);
    if (field == "type_k") return r.inst.type_k;
    if (field == "type_v") return r.inst.type_v;
    if (field == "main_gpu") return r.inst.main_gpu;
    if (field == "split_mode") return r.inst.split_mode;
    if (field == "no_kv_offload") return r.inst.no_kv_offload ? "1" : "0";
    if (field == "flash_attn") return r.inst.flash_attn;
    if (field == "tensor_split") return ts_text(r.inst.tensor_split);
    if (field == "tensor_buft_overrides") return r.inst.override_tensor.empty() ? "none" : r.inst.override_tensor;
    if (field == "test") return bench_test_name(r.test);
    if (field == "t/s") return fmt_ts(r.result.tokens_per_second);
    return "";
  };
  const int reps = args.repetitions;
  // llama-bench's JSON has numbers where its fields are numbers
  auto number_or_text = [](const std::string& v) -> ojson {
    const bool digits = !v.empty() && v.size() < 10 &&
                        v.find_first_not_of("0123456789", v[0] == '-' ? 1 : 0) == std::string::npos && v != "-";
    return digits ? ojson(std::stoll(v)) : ojson(v);
  };
  auto json_row = [&](const Row& r) {
    ojson j;
    j["model_filename"] = r.inst.model;
    j["model_type"] = r.model;
    j["model_size"] = r.result.model_bytes;
    j["model_n_params"] = r.result.model_params;
    j["backends"] = r.backend;
    j["n_batch"] = r.inst.n_batch;
    j["n_ubatch"] = r.inst.n_ubatch;
    j["type_k"] = r.inst.type_k;
    j["type_v"] = r.inst.type_v;
    j["n_gpu_layers"] = number_or_text(r.inst.n_gpu_layers);
    j["n_cpu_moe"] = number_or_text(r.inst.n_cpu_moe);
    j["split_mode"] = r.inst.split_mode;
    j["main_gpu"] = number_or_text(r.inst.main_gpu);
    j["no_kv_offload"] = r.inst.no_kv_offload;
    j["flash_attn"] = r.inst.flash_attn;
    j["tensor_split"] = ts_text(r.inst.tensor_split);
    j["tensor_buft_overrides"] = r.inst.override_tensor.empty() ? "none" : r.inst.override_tensor;
    j["n_prompt"] = r.test.n_prompt;
    j["n_gen"] = r.test.n_gen;
    j["n_depth"] = r.test.n_depth;
    const double ns = r.result.time_us() * 1e3;
    j["avg_ns"] = static_cast<uint64_t>(std::llround(ns));
    j["stddev_ns"] = 0;
    j["avg_ts"] = r.result.tokens_per_second;
    j["stddev_ts"] = 0.0;
    j["samples_ns"] = std::vector<uint64_t>(static_cast<size_t>(reps), static_cast<uint64_t>(std::llround(ns)));
    j["samples_ts"] = std::vector<double>(static_cast<size_t>(reps), r.result.tokens_per_second);
    // Tessera's own
    j["simulated"] = true;
    j["topology"] = r.machine;
    j["prompt_us"] = r.result.prompt_us;
    j["gen_us"] = r.result.gen_us;
    j["pipeline_parallel"] = r.result.pipelined;
    return j;
  };
  if (args.output == "json") {
    ojson all = ojson::array();
    for (const Row& r : rows) all.push_back(json_row(r));
    std::printf("%s\n", all.dump(2).c_str());
  } else if (args.output == "jsonl") {
    for (const Row& r : rows) std::printf("%s\n", json_row(r).dump().c_str());
  } else if (args.output == "csv") {
    const std::vector<std::string> fields = {"model_filename",
                                             "model_type",
                                             "model_size",
                                             "model_n_params",
                                             "backends",
                                             "n_batch",
                                             "n_ubatch",
                                             "type_k",
                                             "type_v",
                                             "n_gpu_layers",
                                             "n_cpu_moe",
                                             "split_mode",
                                             "main_gpu",
                                             "no_kv_offload",
                                             "flash_attn",
                                             "tensor_split",
                                             "tensor_buft_overrides",
                                             "n_prompt",
                                             "n_gen",
                                             "n_depth",
                                             "avg_ns",
                                             "stddev_ns",
                                             "avg_ts",
                                             "stddev_ts"};
    std::string line;
    for (const std::string& f : fields) line += (line.empty() ? "" : ",") + f;
    std::printf("%s\n", line.c_str());
    for (const Row& r : rows) {
      const ojson j = json_row(r);
      line.clear();
      for (const std::string& f : fields) {
        const ojson& v = j.at(f);
        std::string s = v.is_string() ? v.get<std::string>() : v.dump();
        line += (line.empty() ? "" : ",") + std::string("\"") + s + "\"";
      }
      std::printf("%s\n", line.c_str());
    }
  } else if (!rows.empty()) {
    std::string line = "|";
    for (const Column& c : cols) {
      char buf[256];
      std::snprintf(buf, sizeof buf, " %*s |", c.width, c.header.c_str());
      line += buf;
    }
    std::printf("%s\n", line.c_str());
    line = "|";
    for (const Column& c : cols) {
      line += " " + std::string(static_cast<size_t>(std::abs(c.width) - 1), '-') + (c.width > 0 ? ":" : "-") + " |";
    }
    std::printf("%s\n", line.c_str());
    for (const Row& r : rows) {
      line = "|";
      for (const Column& c : cols) {
        char buf[512];
        // the width counts bytes, and "±" is two (as llama-bench's markdown_printer counts it)
        std::snprintf(buf, sizeof buf, " %*s |", c.field == "t/s" ? c.width + 1 : c.width, value(r, c.field).c_str());
        line += buf;
      }
      std::printf("%s\n", line.c_str());
    }
    std::vector<std::string> machines;
    for (const Row& r : rows) {
      if (std::find(machines.begin(), machines.end(), r.machine) == machines.end()) machines.push_back(r.machine);
    }
    std::string on;
    for (const std::string& m : machines) on += (on.empty() ? "" : "; ") + m;
    std::printf("\nsimulated on %s; the cost model is not fitted to measurements yet (docs/bench.md)\n", on.c_str());
    for (const std::string& n : notes) std::printf("note: %s\n", n.c_str());
  }
  return rc;
}

}  // namespace tessera::tool
