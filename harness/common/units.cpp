// The unit parsers and formatters of topology and scenario files (see tessera/harness/common/units.h): "8 GiB", "900
// GB/s", "5 us", "50 TFLOP/s", and back to the largest unit that reads back exactly.
#include "tessera/harness/common/units.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <initializer_list>

#include "json_read.h"

namespace tessera::harness {

using namespace json_read;

namespace {

struct Unit {
  const char* name;
  double scale;         // base units per unit
  bool divide = false;  // below the base unit: value = number / scale (exact for "200 ns" = 0.2 us)
};

// Byte units; sizes use them alone, rates with "/s".
const Unit kByteUnits[] = {
    {"B", 1},
    {"KB", 1e3},
    {"kB", 1e3},
    {"MB", 1e6},
    {"GB", 1e9},
    {"TB", 1e12},
    {"PB", 1e15},
    {"KiB", 1024.0},
    {"MiB", 1048576.0},
    {"GiB", 1073741824.0},
    {"TiB", 1099511627776.0},
    {"PiB", 1125899906842624.0},
};
constexpr const char* kByteUnitList = "B, KB, MB, GB, TB, PB, KiB, MiB, GiB, TiB, PiB";

const Unit kRateUnits[] = {
    {"B/s", 1},
    {"KB/s", 1e3},
    {"kB/s", 1e3},
    {"MB/s", 1e6},
    {"GB/s", 1e9},
    {"TB/s", 1e12},
    {"PB/s", 1e15},
    {"KiB/s", 1024.0},
    {"MiB/s", 1048576.0},
    {"GiB/s", 1073741824.0},
    {"TiB/s", 1099511627776.0},
    {"PiB/s", 1125899906842624.0},
};

const Unit kDurationUnits[] = {
    {"ns", 1000, true}, {"us", 1}, {"\xC2\xB5s", 1}, {"\xCE\xBCs", 1}, {"ms", 1e3}, {"s", 1e6},
};

const Unit kFlopUnits[] = {
    {"FLOP/s", 1}, {"KFLOP/s", 1e3}, {"MFLOP/s", 1e6}, {"GFLOP/s", 1e9}, {"TFLOP/s", 1e12}, {"PFLOP/s", 1e15},
    {"FLOPS", 1},  {"KFLOPS", 1e3},  {"MFLOPS", 1e6},  {"GFLOPS", 1e9},  {"TFLOPS", 1e12},  {"PFLOPS", 1e15},
};

template <size_t N>
const Unit* find_unit(const Unit (&units)[N], std::string_view name) {
  for (const Unit& u : units) {
    if (name == u.name) return &u;
  }
  return nullptr;
}

Status unit_error(std::string_view expected, std::string_view text, std::string_view why = {}) {
  std::string msg = "expected " + std::string(expected) + ", got " + quote(text);
  if (!why.empty()) msg += " (" + std::string(why) + ")";
  return Status(StatusCode::kInvalidArgument, std::move(msg));
}

// A non-negative finite decimal followed by a unit from `units` (a bare number is in the base unit).
template <size_t N>
Result<double> parse_quantity(std::string_view text, const Unit (&units)[N], std::string_view expected,
                              std::string_view unit_list) {
  const std::string_view t = trim(text);
  if (t.empty()) return unit_error(expected, text);
  double v = 0;
  const auto r = std::from_chars(t.data(), t.data() + t.size(), v);
  if (r.ec == std::errc::result_out_of_range) return unit_error(expected, text, "the number is out of range");
  if (r.ec != std::errc() || r.ptr == t.data()) return unit_error(expected, text);
  if (std::isnan(v) || std::isinf(v)) return unit_error(expected, text, "not a finite number");
  if (v < 0) return unit_error(expected, text, "it cannot be negative");
  const std::string_view unit_text = trim(std::string_view(r.ptr, static_cast<size_t>(t.data() + t.size() - r.ptr)));
  double out = v;
  if (!unit_text.empty()) {
    const Unit* u = find_unit(units, unit_text);
    if (u == nullptr) {
      return unit_error(
          expected, text,
          "unknown unit " + quote(unit_text) + "; units: " + std::string(unit_list) + ", case as written");
    }
    out = u->divide ? v / u->scale : v * u->scale;
  }
  if (!std::isfinite(out)) return unit_error(expected, text, "the value is out of range");
  return out == 0 ? 0.0 : out;  // no -0
}

// "<value> <unit>" with the largest unit in `units` (largest first) whose text reads back to exactly v via parse;
// 15 significant digits first (so 3.35e12 is "3.35 TB/s", not "3.3500000000000001 TB/s"), then the shortest exact form.
template <typename Parse>
std::string format_quantity(double v, std::initializer_list<Unit> units, const char* base_unit, Parse parse) {
  if (std::isfinite(v) && v > 0) {
    for (const Unit& u : units) {
      const double q = u.divide ? v * u.scale : v / u.scale;
      if (q < 1) continue;
      char rounded[64];
      std::snprintf(rounded, sizeof rounded, "%.15g", q);
      for (const std::string& number : {std::string(rounded), number_text(q)}) {
        std::string text = number + " " + u.name;
        Result<double> back = parse(text);
        if (back.ok() && back.value() == v) return text;
      }
    }
  }
  return number_text(v) + " " + base_unit;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Units (public)

Result<size_t> parse_size(std::string_view text) {
  const std::string_view t = trim(text);
  if (t.empty()) return unit_error(kSizeExpected, text);
  if (t.front() == '-') return unit_error(kSizeExpected, text, "it cannot be negative");
  // Exact decimal arithmetic: whole digits, then up to 18 decimals, in 128 bits.
  using u128 = unsigned __int128;
  constexpr u128 kLimit = u128{1} << 72;  // above any size once scaled; growing stops here
  u128 whole = 0, frac = 0, frac_scale = 1;
  size_t i = 0, digits = 0;
  while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
    whole = std::min<u128>(whole * 10 + static_cast<u128>(t[i] - '0'), kLimit);
    ++i, ++digits;
  }
  if (i < t.size() && t[i] == '.') {
    ++i;
    size_t n = 0;
    while (i < t.size() && t[i] >= '0' && t[i] <= '9') {
      if (n == 18) return unit_error(kSizeExpected, text, "too many decimals");
      frac = frac * 10 + static_cast<u128>(t[i] - '0');
      frac_scale *= 10;
      ++i, ++n, ++digits;
    }
  }
  if (digits == 0) return unit_error(kSizeExpected, text);
  const std::string_view unit_text = trim(t.substr(i));
  uint64_t scale = 1;
  if (!unit_text.empty()) {
    const Unit* u = find_unit(kByteUnits, unit_text);
    if (u == nullptr) {
      return unit_error(kSizeExpected, text,
                        "unknown unit " + quote(unit_text) + "; units: " + kByteUnitList + ", case as written");
    }
    scale = static_cast<uint64_t>(u->scale);
  }
  const u128 frac_bytes = frac * scale;
  if (frac_bytes % frac_scale != 0) return unit_error(kSizeExpected, text, "not a whole number of bytes");
  const u128 total = whole * scale + frac_bytes / frac_scale;
  if (total > std::numeric_limits<size_t>::max()) return unit_error(kSizeExpected, text, "too large for 64 bits");
  return static_cast<size_t>(total);
}

Result<double> parse_rate(std::string_view text) {
  return parse_quantity(text, kRateUnits, kRateExpected,
                        "B/s, KB/s, MB/s, GB/s, TB/s, PB/s, KiB/s, MiB/s, GiB/s, TiB/s, PiB/s");
}

Result<double> parse_duration_us(std::string_view text) {
  return parse_quantity(text, kDurationUnits, kDurationExpected, "ns, us, ms, s");
}

Result<double> parse_flops(std::string_view text) {
  return parse_quantity(text, kFlopUnits, kFlopsExpected, "FLOP/s, KFLOP/s, MFLOP/s, GFLOP/s, TFLOP/s, PFLOP/s");
}

std::string format_size(size_t bytes) {
  if (bytes == 0) return "0 B";
  const std::pair<const char*, uint64_t> units[] = {
      {"TiB", uint64_t{1} << 40}, {"GiB", uint64_t{1} << 30}, {"MiB", uint64_t{1} << 20}, {"KiB", uint64_t{1} << 10},
      {"TB", 1000000000000ull},   {"GB", 1000000000ull},      {"MB", 1000000ull},         {"KB", 1000ull}};
  for (const auto& [name, scale] : units) {
    if (bytes % scale == 0) return std::to_string(bytes / scale) + " " + name;
  }
  return std::to_string(bytes) + " B";
}

std::string format_rate(double bytes_per_s) {
  // A whole number of a binary unit reads better as that ("25 GiB/s"); anything else in decimal units.
  for (const auto& [name, scale] :
       {std::pair<const char*, double>{"TiB/s", 1099511627776.0}, {"GiB/s", 1073741824.0}, {"MiB/s", 1048576.0}}) {
    const double q = bytes_per_s / scale;
    if (std::isfinite(q) && q >= 1 && q < 1e15 && std::floor(q) == q && std::fmod(bytes_per_s, 1e9) != 0) {
      return number_text(q) + " " + name;
    }
  }
  return format_quantity(bytes_per_s, {{"TB/s", 1e12}, {"GB/s", 1e9}, {"MB/s", 1e6}, {"KB/s", 1e3}}, "B/s", parse_rate);
}

std::string format_duration_us(double us) {
  return format_quantity(us, {{"s", 1e6}, {"ms", 1e3}, {"us", 1}, {"ns", 1000, true}}, "us", parse_duration_us);
}

std::string format_flops(double flops_per_s) {
  return format_quantity(flops_per_s, {{"PFLOP/s", 1e15}, {"TFLOP/s", 1e12}, {"GFLOP/s", 1e9}, {"MFLOP/s", 1e6}},
                         "FLOP/s", parse_flops);
}

}  // namespace tessera::harness
