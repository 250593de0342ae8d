// Fuzz target: the topology parser (docs/topology.md). Any text: parse_topology returns a config or an
// error naming the source; it never crashes, throws, leaks or hangs. A config it accepts is valid, and its writer
// round-trips: topology_to_json(config) parses back to a config that writes the same text. The same text also goes to
// the kernel profile parser (docs/bench.md, "Kernel profiles"), whose keys are a cost model's: a profile or an error
// naming the source; a profile it accepts applies to a preset as a valid topology.
#include <cstddef>
#include <cstdint>
#include <string>

#include "fuzz_input.h"
#include "tessera/harness/topology/topology.h"
#include "tessera/scenario/scenario_upgrade.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string source = "fuzz.json";
  auto profile = harness::parse_kernel_profile(fuzz::as_text(data, size), source);
  if (profile.ok()) {
    auto machine = harness::topology_preset("2x-rtx4090-pcie4");
    FUZZ_CHECK(machine.ok(), "the preset does not load");
    harness::apply_kernel_profile(*profile, &*machine);
    const Status v = harness::validate_topology(*machine);
    FUZZ_CHECK(v.ok(), "a profile the parser accepted makes an invalid topology: " + v.to_string());
  } else {
    FUZZ_CHECK(profile.status().to_string().find(source) != std::string::npos,
               "the profile error does not name the source: " + profile.status().to_string());
  }
  auto parsed = harness::parse_topology(fuzz::as_text(data, size), source);
  // `tessera upgrade` on a topology (docs/topology.md "Versions"): what parse_topology reads, upgrade_text converts to
  // a text that reads back as the same topology (it refuses only what parse_topology refuses, or another kind).
  if (parsed.ok()) {
    auto upgraded = scenario::upgrade_text(fuzz::as_text(data, size), source);
    if (upgraded.ok() && upgraded->kind == scenario::FileKind::kTopology) {
      auto back = harness::parse_topology(upgraded->text, source);
      FUZZ_CHECK(back.ok(), "the upgraded topology does not parse: " + back.status().to_string());
      FUZZ_CHECK(harness::topology_to_json(*back) == harness::topology_to_json(*parsed),
                 "the upgraded topology reads as another one:\n" + upgraded->text);
    }
  }
  if (!parsed.ok()) {
    const std::string message = parsed.status().to_string();
    FUZZ_CHECK(message.find(source) != std::string::npos, "the error does not name the source: " + message);
    return 0;
  }
  const Status valid = harness::validate_topology(*parsed);
  FUZZ_CHECK(valid.ok(), "parse_topology accepted an invalid topology: " + valid.to_string());
  const std::string written = harness::topology_to_json(*parsed);
  auto reparsed = harness::parse_topology(written, "written.json");
  FUZZ_CHECK(reparsed.ok(), "the written topology does not parse: " + reparsed.status().to_string() + "\n" + written);
  const std::string rewritten = harness::topology_to_json(*reparsed);
  FUZZ_CHECK(rewritten == written, "the topology does not round-trip:\n" + written + "\n---\n" + rewritten);
  return 0;
}
