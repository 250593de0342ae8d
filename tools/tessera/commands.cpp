// Subcommands and report pieces of the `tessera` tool outside main.cpp (commands.h).
#include "commands.h"

#include <cstdio>
#include <iostream>

#include "tessera/harness/topology.h"

namespace tessera::tool {

using ojson = nlohmann::ordered_json;

int cmd_topologies(const std::string& show, bool json) {
  if (!show.empty()) {
    auto t = harness::load_topology(show);
    if (!t.ok()) {
      std::fprintf(stderr, "tessera: %s\n", t.status().message().c_str());
      return 2;
    }
    std::cout << harness::topology_to_json(t.value()) << "\n";
    return 0;
  }
  ojson j = ojson::array();
  for (const std::string& name : harness::topology_preset_names()) {
    auto t = harness::topology_preset(name);
    if (!t.ok()) continue;
    if (json) {
      ojson devs = ojson::array();
      for (const auto& d : t.value().devices) devs.push_back({{"name", d.name}, {"memory", d.memory}});
      j.push_back({{"name", name}, {"description", t.value().description}, {"devices", devs}});
    } else {
      std::printf("%-16s %s\n", name.c_str(), t.value().description.c_str());
    }
  }
  if (json) std::cout << j.dump(2) << "\n";
  return 0;
}

ojson split_causes_json(const harness::SplitCauseSummary& summary) {
  auto counts = [](const std::vector<std::pair<std::string, int>>& v) {
    ojson a = ojson::array();
    for (const auto& [name, n] : v) a.push_back({{"name", name}, {"splits", n}});
    return a;
  };
  ojson causes = ojson::array();
  for (const harness::SplitCauseGroup& g : summary.groups) {
    ojson c = {{"cause", harness::split_cause_name(g.cause)},
               {"description", harness::split_cause_description(g.cause)},
               {"splits", g.splits},
               {"top_layers", counts(g.top_layers)},
               {"layers", g.n_layers},
               {"top_ops", counts(g.top_ops)}};
    if (g.option.empty()) {
      c["option"] = nullptr;
      c["no_option"] = g.no_option;
    } else {
      c["option"] = g.option;
      c["splits_with_option"] = g.splits_with_option >= 0 ? ojson(g.splits_with_option) : ojson(nullptr);
      if (!g.option_error.empty()) c["option_error"] = g.option_error;
    }
    causes.push_back(std::move(c));
  }
  return {{"splits", summary.splits}, {"causes", causes}};
}

}  // namespace tessera::tool
