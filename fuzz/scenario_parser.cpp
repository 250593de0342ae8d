// Fuzz target: the scenario parser (docs/scenarios.md). Any text: parse_scenario returns a scenario or an
// error naming the source, and so does `tessera upgrade`'s upgrade_text (a converted text is current when upgraded
// again); they never crash, throw, leak or hang. An accepted scenario carries a valid topology
// (inline or a preset) whose writer round-trips. Scenarios are not run here (a model may be large); end_to_end runs
// the scheduler.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "fuzz_input.h"
#include "tessera/scenario/scenario.h"
#include "tessera/scenario/scenario_upgrade.h"
#include "tessera/harness/topology/topology.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  // "graph": "PATH" and "model": {"gguf": "PATH"} make the parser read a file: "/dev/stdin" would block, and
  // "/dev/zero" costs 256 MiB before read_text_file refuses it (it read forever before: a finding of this target).
  // Inputs that mention "graph" or "gguf" together with a path separator or an escape are skipped; inline graphs,
  // fixtures and plain names still run.
  const std::string_view text = fuzz::as_text(data, size);
  if ((text.find("graph") != std::string_view::npos || text.find("gguf") != std::string_view::npos) &&
      (text.find('/') != std::string_view::npos || text.find('\\') != std::string_view::npos)) {
    return 0;
  }
  const std::string source = "fuzz-scenario.json";
  // `tessera upgrade` on the same text (docs/scenarios.md "Versions"): an error naming the source, or a converted text
  // that its kind's reader reads back, whose own upgrade changes nothing.
  auto upgraded = scenario::upgrade_text(text, source);
  if (!upgraded.ok()) {
    const std::string message = upgraded.status().to_string();
    FUZZ_CHECK(message.find(source) != std::string::npos, "the upgrade's error does not name the source: " + message);
  } else if (upgraded->changed) {
    auto again = scenario::upgrade_text(upgraded->text, source);
    FUZZ_CHECK(again.ok(), "the upgraded text does not upgrade: " + again.status().to_string());
    FUZZ_CHECK(!again->changed, "the upgraded text is not current:\n" + upgraded->text);
  }
  auto parsed = scenario::parse_scenario(text, source);
  if (!parsed.ok()) {
    const std::string message = parsed.status().to_string();
    FUZZ_CHECK(message.find(source) != std::string::npos, "the error does not name the source: " + message);
    return 0;
  }
  const scenario::Scenario& scenario = *parsed;
  FUZZ_CHECK(scenario.evaluations >= 1, "accepted evaluations < 1");
  // Metric expectations: each has a bound; "base" and ratios only in a comparison, ratios >= 0.
  for (const scenario::MetricExpect& m : scenario.expect.metrics) {
    FUZZ_CHECK(!m.bounds.empty(), "accepted a metric expectation without a bound: " + m.path);
    for (const scenario::MetricBound& b : m.bounds) {
      FUZZ_CHECK(!b.base && b.ratio < 0, "accepted \"base\" or a ratio outside \"compare\": " + m.path);
    }
  }
  if (scenario.compare) {
    for (const scenario::MetricExpect& m : scenario.compare->expect) {
      FUZZ_CHECK(!m.bounds.empty(), "accepted a comparison without a bound: " + m.path);
    }
  }
  const Status valid = harness::validate_topology(scenario.config.topology);
  FUZZ_CHECK(valid.ok(), "parse_scenario accepted an invalid topology: " + valid.to_string());
  const std::string written = harness::topology_to_json(scenario.config.topology);
  auto reparsed = harness::parse_topology(written, "written.json");
  FUZZ_CHECK(reparsed.ok(), "the scenario's topology does not round-trip: " + reparsed.status().to_string());
  FUZZ_CHECK(harness::topology_to_json(*reparsed) == written,
             "the scenario's topology writes differently when re-read");
  return 0;
}
