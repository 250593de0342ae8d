// `tessera compare-log LOG` (docs/compare-log.md): reads a pasted llama.cpp / ollama log, prints the record the
// reader built (llama/llama_log.cpp) with every line it could not use, and compares each printed figure with
// Tessera's prediction (llama/llama_log_predict.cpp), text or --json (docs/json.md,
// docs/json/compare-log.schema.json). Exit 1 when a predicted figure is off by more than its tolerance.
#include <cstdio>
#include <iostream>
#include <sstream>

#include <CLI/CLI.hpp>

#include "tessera/models/fixtures.h"
#include "tessera/harness/common/text_table.h"
#include "json_out.h"
#include "subcommands.h"

namespace tessera::tool {

using namespace tessera::harness;
using namespace tessera::llama;

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

// The comparison: one row per printed figure (printed, predicted, difference in MiB or count and in %), or why it
// was not predicted. --wide: one line per figure, the reason on it; else a table within 80 columns, the reason on
// the lines after the row.
std::string comparison_text(const LogPrediction& p, const LogTolerance& t, bool wide) {
  std::ostringstream out;
  char buf[512];
  out << "\nprediction: " << (p.model.empty() ? "no model" : "the model from " + p.model) << "\n";
  if (!p.unavailable.empty()) out << "  not predicted: " << p.unavailable << "\n";
  for (const std::string& n : p.notes) out << "  note: " << n << "\n";
  std::snprintf(buf, sizeof buf,
                "printed vs predicted (tolerance: model/KV/output %g %%, compute %g %%, nodes %g %%, splits %g %%)",
                t.memory_pct, t.compute_pct, t.nodes_pct, t.splits_pct);
  out << "\n" << (wide ? std::string(buf) + "\n" : wrap_lines("", buf, "  "));
  using Align = TextTable::Align;
  TextTable table({{"figure", Align::kLeft, 0, true},
                   {"printed", Align::kRight, 0},
                   {"predicted", Align::kRight, 0},
                   {"diff", Align::kRight, 0},
                   {"%", Align::kRight, 0},
                   {"", Align::kLeft, 0},
                   {"line", Align::kRight, 0}});
  table.indent("  ");
  int predicted = 0, off = 0;
  const std::string* above = nullptr;  // the reason printed last: a run of figures missing the same says it once
  for (const LogFigure& f : p.figures) {
    const char* unit = f.is_count() ? "" : " MiB";
    const std::string label = f.device.empty() ? f.kind : f.kind + " " + f.device;
    if (!f.predicted) {
      const std::string why = above != nullptr && *above == f.missing ? "as above" : f.missing;
      above = &f.missing;
      if (wide) {
        std::snprintf(buf, sizeof buf, "  %-14s %-10s %12.2f%-4s not predicted (line %d): ", f.kind.c_str(),
                      f.device.c_str(), f.printed, unit, f.line);
        out << buf << why << "\n";
        continue;
      }
      table.add(
          {label, format_message("%.2f%s", f.printed, unit), "not predicted", "", "", "", std::to_string(f.line)});
      std::string lines = wrap_lines("      ", why, "      ");
      lines.pop_back();
      table.add_line(lines);
      continue;
    }
    above = nullptr;
    ++predicted;
    const bool ok = within_tolerance(f, t);
    off += ok ? 0 : 1;
    if (wide) {
      std::snprintf(buf, sizeof buf,
                    "  %-14s %-10s %12.2f%-4s predicted %12.2f%-4s diff %+10.2f %+8.2f %%  %s (line %d)\n",
                    f.kind.c_str(), f.device.c_str(), f.printed, unit, *f.predicted, unit, f.diff(), f.percent(),
                    ok ? "ok" : "OFF", f.line);
      out << buf;
      continue;
    }
    table.add({label, format_message("%.2f%s", f.printed, unit), format_message("%.2f%s", *f.predicted, unit),
               format_message("%+.2f", f.diff()), format_message("%+.2f %%", f.percent()), ok ? "ok" : "OFF",
               std::to_string(f.line)});
  }
  if (!wide && !p.figures.empty()) out << table.render(false);
  out << "  " << p.figures.size() << " figures printed, " << predicted << " predicted, " << off
      << " off by more than the tolerance\n";
  return out.str();
}

ojson comparison_json(const LogPrediction& p, const LogTolerance& t) {
  ojson figures = ojson::array();
  int off = 0, predicted = 0;
  for (const LogFigure& f : p.figures) {
    const bool ok = within_tolerance(f, t);
    predicted += f.predicted ? 1 : 0;
    off += ok ? 0 : 1;
    figures.push_back({{"kind", f.kind},
                       {"device", f.device},
                       {"printed", f.printed},
                       {"line", f.line},
                       {"predicted", opt(f.predicted)},
                       {"diff", f.predicted ? ojson(f.diff()) : ojson(nullptr)},
                       {"percent", f.predicted ? ojson(f.percent()) : ojson(nullptr)},
                       {"tolerance_pct", tolerance_of(f, t)},
                       {"within", f.predicted ? ojson(ok) : ojson(nullptr)},
                       {"missing", f.missing}});
  }
  ojson notes = ojson::array();
  for (const std::string& n : p.notes) notes.push_back(n);
  return {{"available", predicted > 0},
          {"reason", p.unavailable},
          {"model", p.model},
          {"notes", notes},
          {"tolerance",
           {{"memory_pct", t.memory_pct},
            {"compute_pct", t.compute_pct},
            {"nodes_pct", t.nodes_pct},
            {"splits_pct", t.splits_pct}}},
          {"figures", figures},
          {"predicted", predicted},
          {"off", off}};
}

}  // namespace

CLI::App* add_compare_log(CLI::App& app, CompareLogArgs& args) {
  CLI::App* c = app.add_subcommand("compare-log",
                                   "read a pasted llama.cpp / ollama log: metadata, parameters, devices, buffer sizes, "
                                   "graph, failed allocations, and every line not used");
  c->add_option("log", args.path, "the log file")->required();
  c->add_option("-m,--model", args.model,
                "the model: its GGUF file, or a published model by name (else the printed metadata)");
  c->add_option("--parallel,--n-parallel", args.n_seq_max,
                "the sequences llama.cpp ran with (-np; ollama's OLLAMA_NUM_PARALLEL), when the log prints neither "
                "n_seq_max nor n_ctx_per_seq (default 1)")
      ->check(CLI::Range(1, 4096));
  c->add_option("--llama-build", args.llama_build,
                "the llama.cpp build the log was made with, when it prints no build line (its graph: "
                "docs/compare-log.md); a printed build wins")
      ->check(CLI::Range(1000, 1000000));
  c->add_option("--command", args.command,
                "the run's llama.cpp command line, when the log does not print one (read as a printed one: its -ngl, "
                "-ts, -sm, -ot, -c, ...)");
  c->add_option("--tolerance", args.tolerance.memory_pct,
                "how far (in %) a model, KV, output buffer or failed model allocation may be off (default 0.5)")
      ->check(CLI::Range(0.0, 1000.0));
  c->add_option("--compute-tolerance", args.tolerance.compute_pct,
                "how far (in %) a compute buffer or failed compute allocation may be off (default 10)")
      ->check(CLI::Range(0.0, 1000.0));
  c->add_option("--nodes-tolerance", args.tolerance.nodes_pct, "how far (in %) graph nodes may be off (default 2)")
      ->check(CLI::Range(0.0, 1000.0));
  c->add_option("--splits-tolerance", args.tolerance.splits_pct,
                "how far (in %) graph splits may be off (default 0: equal)")
      ->check(CLI::Range(0.0, 1000.0));
  c->add_flag("--json", args.json, "machine-readable output");
  c->add_flag("--wide", args.wide, "the comparison one line per figure (wider than 80 columns), as before the table");
  return c;
}

std::string compare_log_text(const LlamaLog& log, const LogPrediction& p, const LogTolerance& t, bool wide) {
  std::ostringstream out;
  char buf[512];
  out << "log " << log.source << ": " << log.lines << " lines, " << log.lines_used << " used, " << log.lines_skipped
      << " skipped (blank, header, cut markers), " << log.unused.size() << " not used\n";
  if (log.build) out << "build " << log.build->text << " (line " << log.build->line << ")\n";
  if (log.command) {
    out << "command " << log.command->text
        << (log.command->line > 0 ? " (line " + std::to_string(log.command->line) + ")" : std::string(" (--command)"))
        << "\n";
  }

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
             format_opt("n_seq_max", c.n_seq_max), format_opt("kv_size", c.kv_size), format_opt("n_slots", c.n_slots),
             format_opt("n_ctx_slot", c.n_ctx_slot), c.flash_attn.empty() ? "" : "flash_attn " + c.flash_attn,
             c.type_k.empty() ? "" : "type_k " + c.type_k, c.type_v.empty() ? "" : "type_v " + c.type_v,
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

  out << comparison_text(p, t, wide);

  out << "\nlines not used (" << log.unused.size() << ")\n";
  if (log.draft_line != 0) out << "  (from line " << log.draft_line << " on: the draft model's, not read)\n";
  for (const LlamaLogLine& u : log.unused) out << "  " << u.line << ": " << u.text << "\n";
  return out.str();
}

ojson compare_log_json(const LlamaLog& log, const LogPrediction& p, const LogTolerance& t) {
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
                  {"n_slots", opt(c.n_slots)},
                  {"n_ctx_slot", opt(c.n_ctx_slot)},
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
  ojson rows = ojson::array();
  for (const LlamaLogBreakdownRow& r : log.figures.breakdown) {
    rows.push_back({{"device", r.device},
                    {"description", r.description},
                    {"total_mib", opt(r.total)},
                    {"free_mib", opt(r.free)},
                    {"self_mib", r.self},
                    {"model_mib", r.model},
                    {"context_mib", r.context},
                    {"compute_mib", r.compute},
                    {"fit", r.fit},
                    {"line", r.line}});
  }
  j["memory_breakdown"] = rows;
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
  j["prediction"] = comparison_json(p, t);
  ojson unused = ojson::array();
  for (const LlamaLogLine& u : log.unused) unused.push_back({{"line", u.line}, {"text", u.text}});
  j["unused"] = unused;
  return j;
}

int cmd_compare_log(const CompareLogArgs& args, const Registry* real_devices) {
  auto log = read_llama_log_file(args.path);
  if (!log.ok()) {
    std::fprintf(stderr, "tessera: %s\n", log.status().message().c_str());
    return 2;
  }
  if (!args.command.empty()) {
    if (log.value().command) {
      std::fprintf(stderr,
                   "tessera: compare-log: --command: %s prints its command line (line %d): give one or the other\n",
                   args.path.c_str(), log.value().command->line);
      return 2;
    }
    log.value().command = llama::LogText{args.command, 0};
  }
  LogPredictOptions options;
  options.model_file = args.model;
  options.real_devices = real_devices;
  options.n_seq_max = args.n_seq_max;
  options.llama_build = args.llama_build;
  auto p = predict_log(log.value(), options);
  if (!p.ok()) {
    std::fprintf(stderr, "tessera: %s\n", p.status().message().c_str());
    return 2;
  }
  if (args.json) {
    // A pasted log may hold bytes that are not UTF-8 (a terminal's code page): replaced, not an exception.
    std::cout
        << compare_log_json(log.value(), p.value(), args.tolerance).dump(2, ' ', false, ojson::error_handler_t::replace)
        << "\n";
  } else {
    std::fputs(compare_log_text(log.value(), p.value(), args.tolerance, args.wide).c_str(), stdout);
  }
  int predicted = 0;
  for (const LogFigure& f : p.value().figures) {
    if (!within_tolerance(f, args.tolerance)) return 1;
    predicted += f.predicted ? 1 : 0;
  }
  if (p.value().figures.empty()) {
    // A log of a 2026 build run as users run it: from build 9151 (PR #23021, "logs : reduce") llama.cpp's library
    // logs its buffers, devices and graph at verbosity 4 (trace), above the default 3, so nothing is printed to
    // compare.
    std::fprintf(stderr,
                 "tessera: compare-log: the log prints no buffer size, graph or memory breakdown to compare; llama.cpp "
                 "from build 9151 prints them only at verbosity 4: run it again with -lv 4 (or -v)\n");
    return 1;
  }
  if (predicted == 0) {
    // Nothing compared is no agreement: exit 1, saying what would let the figures be predicted (the excerpts users
    // paste seldom hold the model's metadata).
    const std::string names = models::fixtures::catalogue_help();
    std::fprintf(stderr,
                 "tessera: compare-log: no figure predicted%s%s; give the model with -m FILE.gguf or a published "
                 "model's name (%s)\n",
                 p.value().unavailable.empty() ? "" : ": ", p.value().unavailable.c_str(), names.c_str());
    return 1;
  }
  return 0;
}

}  // namespace tessera::tool
