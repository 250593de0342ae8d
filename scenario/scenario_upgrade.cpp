// `tessera upgrade` (see tessera/scenario/scenario_upgrade.h, docs/scenarios.md "Versions"): each file is read by its
// own reader first, so the text edited here is JSON those readers accepted; the edits keep the rest of the file byte
// for byte, and the written text is read back (and its layer maps compared) before it is returned.
#include "tessera/scenario/scenario_upgrade.h"

#include <algorithm>
#include <utility>

#include "common/json_read.h"
#include "scenario_version.h"
#include "tessera/harness/graph/graph_io.h"
#include "tessera/harness/session/layer_map.h"
#include "tessera/harness/topology/topology.h"

namespace tessera::scenario {

using namespace tessera::harness;
using namespace tessera::harness::json_read;
using ojson = nlohmann::ordered_json;

namespace {

constexpr size_t kWidth = 120;  // the line length of the files written here

// ---- locating members in JSON text that a reader accepted ----

class Text {
 public:
  explicit Text(std::string_view t) : t_(t) {}

  struct Member {
    std::string key;
    size_t key_begin = 0, value_begin = 0, value_end = 0;
  };

  // The top-level object's '{' (after a byte order mark and white space), or npos.
  size_t root() const {
    size_t i = t_.substr(0, 3) == "\xEF\xBB\xBF" ? 3 : 0;
    i = ws(i);
    return i < t_.size() && t_[i] == '{' ? i : std::string_view::npos;
  }

  // The members of the object whose '{' is at `at`; false when the text is not what a JSON reader accepts.
  bool members(size_t at, std::vector<Member>* out) const {
    if (at >= t_.size() || t_[at] != '{') return false;
    size_t i = ws(at + 1);
    if (i < t_.size() && t_[i] == '}') return true;
    for (;;) {
      if (i >= t_.size() || t_[i] != '"') return false;
      const size_t key_end = string_end(i);
      if (key_end == std::string_view::npos) return false;
      std::string key;
      try {
        key = json::parse(t_.substr(i, key_end - i)).get<std::string>();
      } catch (const std::exception&) {
        return false;
      }
      const size_t colon = ws(key_end);
      if (colon >= t_.size() || t_[colon] != ':') return false;
      const size_t vb = ws(colon + 1);
      const size_t ve = value_end(vb);
      if (ve == std::string_view::npos) return false;
      out->push_back({std::move(key), i, vb, ve});
      const size_t next = ws(ve);
      if (next >= t_.size()) return false;
      if (t_[next] == '}') return true;
      if (t_[next] != ',') return false;
      i = ws(next + 1);
    }
  }

  // The white space before the member at `key_begin` that starts its line ("" when the member shares a line).
  std::string indent_of(size_t key_begin) const {
    size_t s = key_begin;
    while (s > 0 && (t_[s - 1] == ' ' || t_[s - 1] == '\t')) --s;
    if (s > 0 && t_[s - 1] != '\n' && t_[s - 1] != '\r') return "";
    return std::string(t_.substr(s, key_begin - s));
  }

  std::string_view slice(size_t begin, size_t end) const { return t_.substr(begin, end - begin); }

 private:
  size_t ws(size_t i) const {
    while (i < t_.size() && (t_[i] == ' ' || t_[i] == '\t' || t_[i] == '\n' || t_[i] == '\r')) ++i;
    return i;
  }
  size_t string_end(size_t i) const {  // t_[i] == '"'
    for (++i; i < t_.size(); ++i) {
      if (t_[i] == '\\') {
        ++i;
      } else if (t_[i] == '"') {
        return i + 1;
      }
    }
    return std::string_view::npos;
  }
  size_t value_end(size_t i) const {
    if (i >= t_.size()) return std::string_view::npos;
    if (t_[i] == '"') return string_end(i);
    if (t_[i] == '{' || t_[i] == '[') {
      size_t depth = 0;
      while (i < t_.size()) {
        const char c = t_[i];
        if (c == '"') {
          i = string_end(i);
          if (i == std::string_view::npos) return i;
          continue;
        }
        if (c == '{' || c == '[') ++depth;
        if ((c == '}' || c == ']') && --depth == 0) return i + 1;
        ++i;
      }
      return std::string_view::npos;
    }
    while (i < t_.size() && std::string_view(",]} \t\n\r").find(t_[i]) == std::string_view::npos) ++i;
    return i;
  }

  std::string_view t_;
};

struct Edit {
  size_t at = 0, erase = 0;
  std::string insert;
};

std::string apply(std::string text, std::vector<Edit> edits) {
  std::sort(edits.begin(), edits.end(), [](const Edit& a, const Edit& b) { return a.at > b.at; });
  for (const Edit& e : edits) text.replace(e.at, e.erase, e.insert);
  return text;
}

// A value laid out as the project's files are: on one line when it fits in kWidth from `column`, else one member or
// element per line, indented by two more than `indent`.
std::string layout(const ojson& v, size_t column, size_t indent) {
  const std::string line = one_line(v);
  if (column + line.size() <= kWidth || !(v.is_object() || v.is_array()) || v.empty()) return line;
  const std::string pad(indent + 2, ' ');
  std::string out = v.is_object() ? "{" : "[";
  bool first = true;
  for (auto it = v.begin(); it != v.end(); ++it) {
    out += (first ? "\n" : ",\n") + pad;
    first = false;
    if (v.is_object()) {
      const std::string key = one_line(ojson(it.key())) + ": ";
      out += key + layout(it.value(), pad.size() + key.size(), indent + 2);
    } else {
      out += layout(*it, pad.size(), indent + 2);
    }
  }
  return out + "\n" + std::string(indent, ' ') + (v.is_object() ? "}" : "]");
}

Status internal(const std::string& source, const std::string& what) {
  return invalid(source + ": cannot write the upgraded file: " + what + " (please report)");
}

// The line break of a file laid out one member per line ("\r\n" or "\n"; "" when the first member shares the line of
// the top-level '{').
std::string line_break(const Text& t, size_t root, const std::vector<Text::Member>& members) {
  if (members.empty()) return "";
  const std::string_view before = t.slice(root + 1, members.front().key_begin);
  if (before.find('\n') == std::string_view::npos) return "";
  return before.find("\r\n") != std::string_view::npos ? "\r\n" : "\n";
}

// The edit that sets the top-level "version" to `version`: the value replaced, or the key added first.
Edit version_edit(const Text& t, size_t root, const std::vector<Text::Member>& members, int version) {
  const std::string value = std::to_string(version);
  for (const Text::Member& m : members) {
    if (m.key == "version") return {m.value_begin, m.value_end - m.value_begin, value};
  }
  if (members.empty()) return {root + 1, 0, "\"version\": " + value};
  const std::string br = line_break(t, root, members);
  if (br.empty()) return {members.front().key_begin, 0, "\"version\": " + value + ", "};
  return {root + 1, 0, br + t.indent_of(members.front().key_begin) + "\"version\": " + value + ","};
}

// The converted policy object: the file's keys in their order with n_gpu_layers, tensor_split and layers_per_device
// rewritten as `c` says.
ojson converted_policy(const ojson& policy, const PolicyConversion& c) {
  const bool by_counts = !c.layers_per_device.empty();
  const bool had_split = policy.contains("tensor_split");
  ojson out = ojson::object();
  bool placed = false;
  auto put = [&] {
    if (by_counts) {
      out["layers_per_device"] = c.layers_per_device;
    } else {
      out["tensor_split"] = c.tensor_split;
    }
    placed = true;
  };
  for (auto it = policy.begin(); it != policy.end(); ++it) {
    const std::string& key = it.key();
    const bool placement = key == "n_gpu_layers" || key == "tensor_split" || key == "layers_per_device";
    if (placement && (by_counts || key == "tensor_split")) {
      if (!placed) put();
      continue;
    }
    out[key] = it.value();
    if (key == "n_gpu_layers" && !had_split && !placed) put();
  }
  if (!placed) put();
  return out;
}

// Every policy of the scenario (the base, then the variant of "compare") placed by the current rules.
Result<std::vector<std::vector<int>>> current_maps(const Scenario& s) {
  auto m = LayerMaps::create(s.config);
  if (!m.ok()) return m.status();
  std::vector<std::vector<int>> out;
  std::vector<const PlacementPolicy*> policies = {&s.config.policy};
  if (s.compare) policies.push_back(&s.compare->policy);
  for (const PlacementPolicy* p : policies) {
    auto map = m.value()->current(*p);
    out.push_back(map.ok() ? map.value() : std::vector<int>{});
  }
  return out;
}

Result<Upgrade> upgrade_scenario(std::string_view text, const std::string& source) {
  Upgrade u;
  u.kind = FileKind::kScenario;
  u.to_version = kScenarioVersion;
  std::vector<PolicyConversion> conversions;
  // A file without "version" was written before versions, for version 1's rules (a file written for version 2's
  // says so: docs/scenarios.md).
  Result<Scenario> read = parse_scenario_as(text, source, 1, &conversions);
  if (!read.ok()) return read.status();
  const Scenario& s = read.value();
  u.from_version = s.version;
  u.text = std::string(text);
  if (s.version == kScenarioVersion) {
    u.changes.push_back("already version " + std::to_string(kScenarioVersion) + ", the current one: nothing to change");
    return u;
  }
  const Text t(text);
  const size_t root = t.root();
  std::vector<Text::Member> members;
  if (root == std::string_view::npos || !t.members(root, &members)) return internal(source, "the top level not found");
  std::vector<Edit> edits = {version_edit(t, root, members, kScenarioVersion)};
  for (const PolicyConversion& c : conversions) {
    if (!c.changed) continue;
    const auto at =
        std::find_if(members.begin(), members.end(), [&](const Text::Member& m) { return m.key == c.path; });
    if (at != members.end()) {
      ojson policy;
      try {
        policy = ojson::parse(t.slice(at->value_begin, at->value_end));
      } catch (const std::exception& e) {
        return internal(source, c.path + " not read: " + e.what());
      }
      const std::string indent = t.indent_of(at->key_begin);
      const size_t column = indent.size() + one_line(ojson(c.path)).size() + 2;
      edits.push_back({at->value_begin, at->value_end - at->value_begin,
                       layout(converted_policy(policy, c), column, indent.size())});
    } else {
      // No policy in the file: one after the last of the keys that come before it in the project's files.
      const Text::Member* after = &members.back();
      for (const char* key : {"name", "description", "topology", "model", "graph", "next_graph"}) {
        for (const Text::Member& m : members) {
          if (m.key == key) after = &m;
        }
      }
      const std::string br = line_break(t, root, members);
      std::string indent = t.indent_of(after->key_begin);
      if (indent.empty() && !br.empty()) indent = t.indent_of(members.front().key_begin);
      const std::string lead = br.empty() ? ", " : "," + br + indent;
      const std::string key = one_line(ojson(c.path)) + ": ";
      edits.push_back(
          {after->value_end, 0,
           lead + key + layout(converted_policy(ojson::object(), c), indent.size() + key.size(), indent.size())});
    }
  }
  u.text = apply(u.text, edits);
  u.changed = true;
  if (s.version != 0) {
    u.changes.push_back("version 1 -> " + std::to_string(kScenarioVersion));
  } else if (conversions.empty()) {
    // (read as version 2: it uses keys that came with 9a5a0e0)
    u.changes.push_back(
        "no \"version\": the file uses keys that only version 2 has (split_mode, main_gpu, "
        "override_tensor, cpu_moe, n_cpu_moe, kv_offload), so it was written for version 2: "
        "\"version\": 2 added");
  } else {
    u.changes.push_back(
        "no \"version\": read as version 1 (a file written before commit 9a5a0e0), written as "
        "version " +
        std::to_string(kScenarioVersion));
  }
  for (const std::string& note : s.conversions) u.changes.push_back(note);
  // Read back: the written file must be a version 2 scenario placing every policy as the conversion does.
  Result<Scenario> back = parse_scenario(u.text, source);
  if (!back.ok()) return internal(source, "it does not read back: " + back.status().message());
  auto want = current_maps(s), got = current_maps(back.value());
  if (want.ok() != got.ok() || (want.ok() && want.value() != got.value())) {
    return internal(source, "it reads back with another placement");
  }
  return u;
}

Result<Upgrade> upgrade_topology(std::string_view text, const std::string& source, const json& root_json) {
  Upgrade u;
  u.kind = FileKind::kTopology;
  u.to_version = kTopologyVersion;
  auto read = parse_topology(text, source);
  if (!read.ok()) return read.status();
  u.text = std::string(text);
  const json* v = member(root_json, "version");
  u.from_version = v != nullptr ? v->get<int>() : 0;
  if (v != nullptr) {
    u.changes.push_back("already version " + std::to_string(kTopologyVersion) + ", the current one: nothing to change");
    return u;
  }
  const Text t(text);
  const size_t root = t.root();
  std::vector<Text::Member> members;
  if (root == std::string_view::npos || !t.members(root, &members)) return internal(source, "the top level not found");
  u.text = apply(u.text, {version_edit(t, root, members, kTopologyVersion)});
  u.changed = true;
  u.changes.push_back("no \"version\": \"version\": " + std::to_string(kTopologyVersion) +
                      " added (no key of a topology file has changed meaning; the key tells this file from those of a "
                      "later version)");
  auto back = parse_topology(u.text, source);
  if (!back.ok()) return internal(source, "it does not read back: " + back.status().message());
  if (topology_to_json(back.value()) != topology_to_json(read.value())) {
    return internal(source, "it reads back as another topology");
  }
  return u;
}

}  // namespace

const char* file_kind_name(FileKind kind) {
  switch (kind) {
    case FileKind::kScenario: return "scenario";
    case FileKind::kTopology: return "topology";
    case FileKind::kGraph: return "serialized graph";
  }
  return "file";
}

namespace {

Result<Upgrade> upgrade_any(std::string_view text, const std::string& source) {
  try {
    json root;
    TS_RETURN_IF_ERROR(parse_json(text, source, &root));
    if (!root.is_object()) {
      return invalid(source +
                     ": expected a JSON object at the top level (a scenario, a topology or a serialized "
                     "graph), got " +
                     describe(root));
    }
    if (root.contains("format")) {
      Upgrade u;
      u.kind = FileKind::kGraph;
      u.to_version = kGraphFormatVersion;
      auto g = graph_from_json(text, source);
      if (!g.ok()) return g.status();
      u.from_version = kGraphFormatVersion;
      u.text = std::string(text);
      u.changes.push_back("already version " + std::to_string(kGraphFormatVersion) +
                          ", the current one: nothing to change");
      return u;
    }
    if (root.contains("topology")) return upgrade_scenario(text, source);
    if (root.contains("devices") || root.contains("links") || root.contains("hosts")) {
      return upgrade_topology(text, source, root);
    }
    return invalid(source +
                   ": cannot tell what kind of file this is: expected a scenario (with \"topology\"), a "
                   "topology (with \"devices\") or a serialized graph (with \"format\": \"tessera-graph\")");
  } catch (const std::exception& e) {
    return invalid(source + ": cannot upgrade the file: " + e.what());
  }
}

}  // namespace

Result<Upgrade> upgrade_text(std::string_view text, const std::string& source) {
  Result<Upgrade> r = upgrade_any(text, source);
  if (!r.ok()) return r.status();
  Upgrade u = std::move(r).value();
  u.original = std::string(text);
  return u;
}

Result<Upgrade> upgrade_file(const std::string& path) {
  Result<std::string> text = read_text_file(path, "file");
  if (!text.ok()) return text.status();
  return upgrade_text(text.value(), path);
}

}  // namespace tessera::scenario
