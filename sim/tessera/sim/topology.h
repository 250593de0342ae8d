// Topology files: JSON <-> TopologyConfig, the presets shipped with the project, and the unit parsers
// ("8 GiB", "900 GB/s", "5 us", "50 TFLOP/s") the scenario loader and the CLI share. The format is documented in
// docs/topology.md. Every error names the source (file name or "<preset NAME>"), the location (line:column for
// syntax errors, the JSON path such as devices[1].memory otherwise) and what was expected; no input crashes.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/sim/config.h"
#include "tessera/status.h"

namespace tessera::sim {

// Parses and validates a topology. `source` names the text in every error message.
Result<TopologyConfig> parse_topology(std::string_view json_text, const std::string& source);
// Reads and parses a file; errors name the path (and the OS reason when it cannot be read).
Result<TopologyConfig> load_topology_file(const std::string& path);
// A preset compiled into the library (sim/topologies/NAME.json); kNotFound lists the names.
Result<TopologyConfig> topology_preset(const std::string& name);
std::vector<std::string> topology_preset_names();
// The embedded JSON text of a preset (nullptr when there is none of that name).
const char* topology_preset_text(const std::string& name);
// A preset name, else a file path.
Result<TopologyConfig> load_topology(const std::string& name_or_path);

// Pretty JSON in the file format; parse_topology reads it back to an equal config.
std::string topology_to_json(const TopologyConfig& topology);

// The rules every topology obeys (docs/topology.md, "Validation"); messages name the field (devices[1].alignment).
Status validate_topology(const TopologyConfig& topology);

// Unit parsers. A number without a unit is in the base unit (bytes, bytes/s, microseconds, FLOP/s). Units are
// case-sensitive as written below; errors say what was expected.
//   sizes:     B, KB MB GB TB (powers of 1000; kB too), KiB MiB GiB TiB (powers of 1024); must be whole bytes
//   rates:     a size unit followed by "/s" ("900 GB/s", "25 GiB/s")
//   durations: ns, us (or µs), ms, s -> microseconds
//   flops:     FLOP/s, KFLOP/s, MFLOP/s, GFLOP/s, TFLOP/s, PFLOP/s (FLOPS spellings too: "50 TFLOPS")
Result<size_t> parse_size(std::string_view text);
Result<double> parse_rate(std::string_view text);
Result<double> parse_duration_us(std::string_view text);
Result<double> parse_flops(std::string_view text);

// The inverse, in the largest unit that reads back exactly ("24 GiB", "900 GB/s", "5 us", "50 TFLOP/s").
std::string format_size(size_t bytes);
std::string format_rate(double bytes_per_s);
std::string format_duration_us(double us);
std::string format_flops(double flops_per_s);

}  // namespace tessera::sim
