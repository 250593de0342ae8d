// `tessera upgrade FILE [-o OUT]` (docs/scenarios.md, "Versions"): a scenario, topology or serialized graph file of an
// older version rewritten as the current version means it (scenario/scenario_upgrade.cpp). In place, the original
// kept as FILE.bak (never overwritten: an existing FILE.bak is an error); -o OUT writes OUT instead ("-": standard
// output). Prints what changed. Exit 0 when the file is converted or already current, 2 for bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "subcommands.h"
#include "tessera/scenario/scenario_upgrade.h"

namespace tessera::tool {

namespace {

bool write_file(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.close();
  return static_cast<bool>(out);
}

std::string folder_of(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return p.parent_path().string();
}

}  // namespace

CLI::App* add_upgrade(CLI::App& app, UpgradeArgs& args) {
  CLI::App* upgrade = app.add_subcommand(
      "upgrade", "rewrite a scenario, topology or graph file of an older version as the current version means it");
  upgrade->add_option("file", args.path, "the file (converted in place; the original is kept as FILE.bak)")->required();
  upgrade->add_option("-o,--output", args.output, "write the converted file here instead (\"-\": standard output)");
  return upgrade;
}

int cmd_upgrade(const UpgradeArgs& args) {
  auto r = scenario::upgrade_file(args.path);
  if (!r.ok()) {
    std::fprintf(stderr, "tessera: %s\n", r.status().message().c_str());
    return kInputError;
  }
  const scenario::Upgrade& u = r.value();
  const bool to_stdout = args.output == "-";
  FILE* say = to_stdout ? stderr : stdout;
  const std::string from = u.from_version == 0 ? "no version" : "version " + std::to_string(u.from_version);
  if (u.changed) {
    std::fprintf(say, "%s: %s, %s -> version %d\n", args.path.c_str(), scenario::file_kind_name(u.kind), from.c_str(),
                 u.to_version);
  } else {
    std::fprintf(say, "%s: %s, %s\n", args.path.c_str(), scenario::file_kind_name(u.kind), from.c_str());
  }
  for (const std::string& c : u.changes) std::fprintf(say, "  %s\n", c.c_str());
  if (to_stdout) {
    std::cout << u.text;
    std::cout.flush();
    return kOk;
  }
  if (!args.output.empty()) {
    if (!write_file(args.output, u.text)) {
      std::fprintf(stderr, "tessera: %s: cannot write the file\n", args.output.c_str());
      return kInputError;
    }
    std::fprintf(say, "wrote %s%s\n", args.output.c_str(), u.changed ? "" : " (unchanged)");
    if (u.kind == scenario::FileKind::kScenario && folder_of(args.output) != folder_of(args.path)) {
      std::fprintf(say,
                   "note: %s is in another folder than %s: the file names it holds (a graph, a topology, a GGUF "
                   "file) are relative to its own folder\n",
                   args.output.c_str(), args.path.c_str());
    }
    return kOk;
  }
  if (!u.changed) {
    std::fprintf(say, "nothing written\n");
    return kOk;
  }
  const std::string backup = args.path + ".bak";
  std::error_code ec;
  if (std::filesystem::exists(backup, ec)) {
    std::fprintf(stderr, "tessera: %s exists: move it away or give -o OUT (upgrade never overwrites a backup)\n",
                 backup.c_str());
    return kInputError;
  }
  if (!write_file(backup, u.original)) {
    std::fprintf(stderr, "tessera: %s: cannot write the backup; nothing changed\n", backup.c_str());
    return kInputError;
  }
  if (!write_file(args.path, u.text)) {
    std::fprintf(stderr, "tessera: %s: cannot write the file (the original is in %s)\n", args.path.c_str(),
                 backup.c_str());
    return kInputError;
  }
  std::fprintf(say, "wrote %s (the original is kept as %s)\n", args.path.c_str(), backup.c_str());
  return kOk;
}

}  // namespace tessera::tool
