// Quantities with units, as topology and scenario files write them (docs/topology.md, "Units").
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "tessera/status.h"

namespace tessera::harness {

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

}  // namespace tessera::harness
