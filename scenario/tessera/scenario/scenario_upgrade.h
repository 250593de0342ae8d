// `tessera upgrade FILE`: a scenario, topology or serialized graph file of an older version rewritten as the current
// version means it (docs/scenarios.md, "Versions"; docs/topology.md, "Versions"). The file is read by its own reader
// (parse_scenario, parse_topology, graph_from_json): every error is theirs, naming the file and the place.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "tessera/status.h"

namespace tessera::scenario {

enum class FileKind { kScenario, kTopology, kGraph };
const char* file_kind_name(FileKind kind);  // "scenario", "topology", "serialized graph"

struct Upgrade {
  FileKind kind = FileKind::kScenario;
  int from_version = 0;  // the file's "version"; 0 when it has none
  int to_version = 0;    // the current version of its kind
  bool changed = false;  // `text` differs from the file's
  // The file as the current version: the file's own text with only the converted keys and the "version" key
  // rewritten (everything else byte for byte); the file's text when nothing changes.
  std::string text;
  std::string original;              // the file's text as read
  std::vector<std::string> changes;  // what changed and why, one line each ("already current" when nothing did)
};

// The kind is told by the top-level keys: "format" (a serialized graph), "topology" (a scenario), "devices", "links"
// or "hosts" (a topology). A scenario without "version" is read as version 1 (written before commit 9a5a0e0): its
// placement keys are converted to version 2's where version 1 placed the layers otherwise. A topology without
// "version" gets "version": 1 (nothing has changed meaning). Errors (bad input, a newer version, a version 1 file that
// no version 2 file can mean) name the file and the key.
Result<Upgrade> upgrade_text(std::string_view text, const std::string& source);
// The same for a file (at most 256 MiB); errors name the path.
Result<Upgrade> upgrade_file(const std::string& path);

}  // namespace tessera::scenario
