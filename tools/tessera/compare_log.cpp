// `tessera compare-log LOG` (docs/compare-log.md): reads a pasted llama.cpp / ollama log and prints the record the
// reader built (harness/llama_log.cpp), text or --json (docs/json.md, docs/json/compare-log.schema.json), with every
// line it could not use. The comparison with Tessera's predictions comes through harness::predict_log_figures, which
// is not connected yet: the report says so.
#include <cstdio>
#include <iostream>
#include <sstream>

#include "json_out.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::harness;

namespace {

template <typename T>
ojson opt(const std::optional<T>& v) {
  return v ? ojson(*v) : ojson(nullptr);
}
ojson line_int(const std::optional<LogInt>& v) {
  return v ? ojson{{"value", v->value}, {"line", v->line}} : ojson(nullptr);
}
ojson line_text(const std::optional<LogText>& v) {
  return v ? ojson{{"text", v->text}, {"line", v->line}} : ojson(nullptr);
}
ojson pairs(const std::vector<std::pair<std::string, std::string>>& kv) {
  ojson a = ojson::array();
  for (const auto& [k, v] : kv) a.push_back({{"key", k}, {"value", v}});
  return a;
}

std::string format_opt(const char* name, const std::optional<int64_t>& v) {
  return v ? std::string(name) + " " + std::to_string(*v) : "";
}

void join(std::ostringstream& out, const std::vector<std::string>& parts) {
  bool first = true;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    out << (first ? "  " : ", ") << p;
    first = false;
  }
  if (!first) out << "\n";
}

}  // namespace

CLI::App* add_compare_log(CLI::App& app, CompareLogArgs& args) {
  CLI::App* c = app.add_subcommand("compare-log",
                                   "read a pasted llama.cpp / ollama log: metadata, parameters, devices, buffer sizes, "
                                   "graph, failed allocations, and every line not used");
  c->add_option("log", args.path, "the log file")->required();
  c->add_flag("--json", args.json, "machine-readable output");
  return c;
}

std::string compare_log_text(const LlamaLog& log) {
  std::ostringstream out;
  char buf[512];
  out << "log " << log.source << ": " << log.lines << " lines, " << log.lines_used << " used, " << log.lines_skipped
      << " skipped (blank, header, cut markers), " << log.unused.size() << " not used\n";
  if (log.build) out << "build " << log.build->text << " (line " << log.build->line << ")\n";
  if (log.command) out << "command " << log.command->text << " (line " << log.command->line << ")\n";

  const LlamaLogModel& m = log.model;
  out << "\nmodel\n";
  join(out, {m.arch.empty() ? "" : "arch " + m.arch, format_opt("n_layer", m.n_layer), format_opt("n_embd", m.n_embd),
             format_opt("n_head", m.n_head), format_opt("n_head_kv", m.n_head_kv), format_opt("n_swa", m.n_swa),
             format_opt("n_ctx_train", m.n_ctx_train), format_opt("n_expert", m.n_expert),
             format_opt("n_expert_used", m.n_expert_used)});
  join(out,
       {m.model_type.empty() ? "" : "type " + m.model_type, m.model_params.empty() ? "" : "params " + m.model_params,
        m.file_type.empty() ? "" : "file type " + m.file_type, m.file_size.empty() ? "" : "size " + m.file_size});
  if (!m.path.empty()) out << "  path " << m.path << "\n";
  if (!m.tensor_types.empty()) {
    out << "  tensor types: ";
    for (size_t i = 0; i < m.tensor_types.size(); ++i) {
      out << (i ? ", " : "") << m.tensor_types[i].first << " " << m.tensor_types[i].second;
    }
    out << "\n";
  }
  out << "  " << m.kv.size() << " metadata keys, " << m.info.size() << " model print lines\n";

  const LlamaLogContext& c = log.context;
  out << "\ncontext\n";
  join(out, {format_opt("n_ctx", c.n_ctx), format_opt("n_batch", c.n_batch), format_opt("n_ubatch", c.n_ubatch),
             format_opt("n_seq_max", c.n_seq_max), format_opt("kv_size", c.kv_size),
             c.flash_attn.empty() ? "" : "flash_attn " + c.flash_attn, c.type_k.empty() ? "" : "type_k " + c.type_k,
             c.type_v.empty() ? "" : "type_v " + c.type_v,
             c.n_copies ? "n_copies " + std::to_string(c.n_copies->value) : ""});
  if (c.offloaded_layers) {
    out << "  offloaded " << c.offloaded_layers->value << "/" << c.offload_total.value_or(0) << " layers";
    if (c.repeating_offloaded) out << " (" << *c.repeating_offloaded << " repeating)";
    out << ", output layer " << (c.output_offloaded ? "offloaded" : "not offloaded") << "\n";
  }
  for (const LlamaLogKvCache& kv : c.kv_caches) {
    std::snprintf(buf, sizeof buf, "  KV cache %.2f MiB: K (%s) %.2f MiB, V (%s) %.2f MiB", kv.mib, kv.type_k.c_str(),
                  kv.k_mib, kv.type_v.c_str(), kv.v_mib);
    out << buf;
    if (kv.cells) out << ", " << *kv.cells << " cells";
    if (kv.layers) out << ", " << *kv.layers << " layers";
    out << " (line " << kv.line << ")\n";
  }
  join(out, {format_opt("non-SWA KV cells", c.kv_cells_non_swa), format_opt("SWA KV cells", c.kv_cells_swa)});
  out << "  " << c.params.size() << " parameters printed\n";

  if (!log.devices.empty()) out << "\ndevices\n";
  for (const LlamaLogDevice& d : log.devices) {
    out << "  " << (d.name.empty() ? "Device " + std::to_string(d.index) : d.name) << ": " << d.description;
    if (!d.bus_id.empty()) out << " (" << d.bus_id << ")";
    if (d.free_mib) out << ", " << *d.free_mib << " MiB free";
    out << " (line " << d.line << ")\n";
  }

  if (!log.figures.buffers.empty()) out << "\nbuffers\n";
  for (const LlamaLogBuffer& b : log.figures.buffers) {
    std::snprintf(buf, sizeof buf, "  %-12s %-8s %12.2f MiB  (line %d)\n", b.device.c_str(), b.kind.c_str(), b.mib,
                  b.line);
    out << buf;
  }
  if (log.figures.graph_nodes || log.figures.graph_splits) {
    out << "\ngraph\n";
    if (log.figures.graph_nodes) {
      out << "  nodes " << log.figures.graph_nodes->value << " (line " << log.figures.graph_nodes->line << ")\n";
    }
    if (log.figures.graph_splits) {
      out << "  splits " << log.figures.graph_splits->value << " (line " << log.figures.graph_splits->line << ")\n";
    }
  }
  if (!log.failed_allocs.empty()) out << "\nfailed allocations\n";
  for (const LlamaLogFailedAlloc& a : log.failed_allocs) {
    out << "  " << (a.device.empty() ? "device " + std::to_string(a.device_index) : a.device);
    if (a.mib) {
      std::snprintf(buf, sizeof buf, " %.2f MiB", *a.mib);
      out << buf;
    }
    if (a.bytes) out << " " << *a.bytes << " B";
    out << " " << (a.stage.empty() ? "(stage unknown)" : a.stage) << " (line " << a.line << ")\n";
  }
  if (!log.errors.empty()) out << "\nerrors\n";
  for (const LogText& e : log.errors) out << "  " << e.line << ": " << e.text << "\n";

  auto predicted = predict_log_figures(log);
  out << "\npredictions: " << (predicted.ok() ? "available" : "not available: " + predicted.status().message()) << "\n";

  out << "\nlines not used (" << log.unused.size() << ")\n";
  for (const LlamaLogLine& u : log.unused) out << "  " << u.line << ": " << u.text << "\n";
  return out.str();
}

ojson compare_log_json(const LlamaLog& log) {
  const LlamaLogModel& m = log.model;
  const LlamaLogContext& c = log.context;
  ojson j;
  j["format"] = "tessera-compare-log";
  j["version"] = kJsonFormatVersion;
  j["source"] = log.source;
  j["lines"] = log.lines;
  j["lines_used"] = log.lines_used;
  j["lines_skipped"] = log.lines_skipped;
  j["build"] = line_text(log.build);
  j["command"] = line_text(log.command);
  ojson types = ojson::array();
  for (const auto& [type, count] : m.tensor_types) types.push_back({{"type", type}, {"count", count}});
  j["model"] = {{"path", m.path},
                {"arch", m.arch},
                {"n_layer", opt(m.n_layer)},
                {"n_embd", opt(m.n_embd)},
                {"n_head", opt(m.n_head)},
                {"n_head_kv", opt(m.n_head_kv)},
                {"n_swa", opt(m.n_swa)},
                {"n_ctx_train", opt(m.n_ctx_train)},
                {"n_expert", opt(m.n_expert)},
                {"n_expert_used", opt(m.n_expert_used)},
                {"model_type", m.model_type},
                {"model_params", m.model_params},
                {"file_type", m.file_type},
                {"file_size", m.file_size},
                {"tensor_types", types},
                {"kv", pairs(m.kv)},
                {"info", pairs(m.info)}};
  ojson caches = ojson::array();
  for (const LlamaLogKvCache& kv : c.kv_caches) {
    caches.push_back({{"mib", kv.mib},
                      {"cells", opt(kv.cells)},
                      {"layers", opt(kv.layers)},
                      {"type_k", kv.type_k},
                      {"type_v", kv.type_v},
                      {"k_mib", kv.k_mib},
                      {"v_mib", kv.v_mib},
                      {"line", kv.line}});
  }
  j["context"] = {{"n_ctx", opt(c.n_ctx)},
                  {"n_batch", opt(c.n_batch)},
                  {"n_ubatch", opt(c.n_ubatch)},
                  {"n_seq_max", opt(c.n_seq_max)},
                  {"kv_size", opt(c.kv_size)},
                  {"flash_attn", c.flash_attn},
                  {"type_k", c.type_k},
                  {"type_v", c.type_v},
                  {"n_copies", line_int(c.n_copies)},
                  {"offloaded_layers", line_int(c.offloaded_layers)},
                  {"offload_total", opt(c.offload_total)},
                  {"repeating_offloaded", opt(c.repeating_offloaded)},
                  {"output_offloaded", c.output_offloaded},
                  {"kv_cells_non_swa", opt(c.kv_cells_non_swa)},
                  {"kv_cells_swa", opt(c.kv_cells_swa)},
                  {"kv_caches", caches},
                  {"params", pairs(c.params)}};
  ojson devices = ojson::array();
  for (const LlamaLogDevice& d : log.devices) {
    devices.push_back({{"name", d.name},
                       {"index", d.index >= 0 ? ojson(d.index) : ojson(nullptr)},
                       {"description", d.description},
                       {"free_mib", opt(d.free_mib)},
                       {"bus_id", d.bus_id},
                       {"line", d.line}});
  }
  j["devices"] = devices;
  ojson buffers = ojson::array();
  for (const LlamaLogBuffer& b : log.figures.buffers) {
    buffers.push_back({{"device", b.device}, {"kind", b.kind}, {"mib", b.mib}, {"line", b.line}});
  }
  j["buffers"] = buffers;
  j["graph_nodes"] = line_int(log.figures.graph_nodes);
  j["graph_splits"] = line_int(log.figures.graph_splits);
  ojson fails = ojson::array();
  for (const LlamaLogFailedAlloc& a : log.failed_allocs) {
    fails.push_back({{"device", a.device},
                     {"device_index", a.device_index >= 0 ? ojson(a.device_index) : ojson(nullptr)},
                     {"mib", opt(a.mib)},
                     {"bytes", opt(a.bytes)},
                     {"stage", a.stage},
                     {"line", a.line}});
  }
  j["failed_allocs"] = fails;
  ojson errors = ojson::array();
  for (const LogText& e : log.errors) errors.push_back({{"text", e.text}, {"line", e.line}});
  j["errors"] = errors;
  auto predicted = predict_log_figures(log);
  j["prediction"] = {{"available", predicted.ok()},
                     {"reason", predicted.ok() ? std::string() : predicted.status().message()}};
  ojson unused = ojson::array();
  for (const LlamaLogLine& u : log.unused) unused.push_back({{"line", u.line}, {"text", u.text}});
  j["unused"] = unused;
  return j;
}

int cmd_compare_log(const CompareLogArgs& args) {
  auto log = read_llama_log_file(args.path);
  if (!log.ok()) {
    std::fprintf(stderr, "tessera: %s\n", log.status().message().c_str());
    return 2;
  }
  if (args.json) {
    // A pasted log may hold bytes that are not UTF-8 (a terminal's code page): replaced, not an exception.
    std::cout << compare_log_json(log.value()).dump(2, ' ', false, ojson::error_handler_t::replace) << "\n";
  } else {
    std::fputs(compare_log_text(log.value()).c_str(), stdout);
  }
  return 0;
}

}  // namespace tessera::tool
