// Topology files: the unit parsers, every preset, the JSON round trip, and malformed input of every kind
// rejected with a message that names the file, the location and what was expected (docs/topology.md).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::AllOf;
using ::testing::HasSubstr;

namespace {

// ---------------------------------------------------------------------------------------------------------------
// Field-by-field equality (config.h declares no operator==).

void expect_same_rule(const OpRule& a, const OpRule& b, const std::string& where) {
  SCOPED_TRACE(where);
  EXPECT_EQ(a.allow, b.allow);
  EXPECT_EQ(a.ops, b.ops);
  EXPECT_EQ(a.src0_types, b.src0_types);
  EXPECT_EQ(a.src1_types, b.src1_types);
  EXPECT_EQ(a.dst_types, b.dst_types);
  EXPECT_EQ(a.min_batch, b.min_batch);
  EXPECT_EQ(a.max_batch, b.max_batch);
  EXPECT_EQ(a.ne0_multiple, b.ne0_multiple);
  EXPECT_EQ(a.note, b.note);
}

void expect_same_device(const DeviceConfig& a, const DeviceConfig& b) {
  SCOPED_TRACE("device " + a.name);
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.type, b.type);
  EXPECT_EQ(a.wraps, b.wraps);
  EXPECT_EQ(a.memory, b.memory);
  EXPECT_EQ(a.alignment, b.alignment);
  EXPECT_EQ(a.max_alloc, b.max_alloc);
  EXPECT_EQ(a.host_visible, b.host_visible);
  EXPECT_EQ(a.unified, b.unified);
  EXPECT_EQ(a.reserved, b.reserved);
  EXPECT_EQ(a.unallocatable, b.unallocatable);
  EXPECT_EQ(a.fit_margin, b.fit_margin);
  EXPECT_EQ(a.host, b.host);
  EXPECT_EQ(a.caps.async, b.caps.async);
  EXPECT_EQ(a.caps.events, b.caps.events);
  EXPECT_EQ(a.caps.host_buffer, b.caps.host_buffer);
  EXPECT_EQ(a.caps.buffer_from_host_ptr, b.caps.buffer_from_host_ptr);
  EXPECT_EQ(a.cpy_tensor_async, b.cpy_tensor_async);
  EXPECT_EQ(a.default_allow, b.default_allow);
  ASSERT_EQ(a.op_rules.size(), b.op_rules.size());
  for (size_t i = 0; i < a.op_rules.size(); ++i)
    expect_same_rule(a.op_rules[i], b.op_rules[i], "rule " + std::to_string(i));
  EXPECT_EQ(a.offload.enabled, b.offload.enabled);
  EXPECT_EQ(a.offload.min_batch, b.offload.min_batch);
  EXPECT_EQ(a.offload.ops, b.offload.ops);
  EXPECT_EQ(a.cost.launch_overhead_us, b.cost.launch_overhead_us);
  EXPECT_EQ(a.cost.flops_f32, b.cost.flops_f32);
  EXPECT_EQ(a.cost.flops_f16, b.cost.flops_f16);
  EXPECT_EQ(a.cost.flops_quant, b.cost.flops_quant);
  EXPECT_EQ(a.cost.mem_bandwidth, b.cost.mem_bandwidth);
  for (size_t k = 0; k < a.cost.efficiency.size(); ++k) {
    EXPECT_EQ(a.cost.efficiency[k].compute, b.cost.efficiency[k].compute) << k;
    EXPECT_EQ(a.cost.efficiency[k].memory, b.cost.efficiency[k].memory) << k;
  }
  ASSERT_EQ(a.cost.overrides.size(), b.cost.overrides.size());
  for (size_t i = 0; i < a.cost.overrides.size(); ++i) {
    EXPECT_EQ(a.cost.overrides[i].op, b.cost.overrides[i].op);
    EXPECT_EQ(a.cost.overrides[i].overhead_us, b.cost.overrides[i].overhead_us);
    EXPECT_EQ(a.cost.overrides[i].flops, b.cost.overrides[i].flops);
    EXPECT_EQ(a.cost.overrides[i].fixed_us, b.cost.overrides[i].fixed_us);
  }
  EXPECT_EQ(a.host_bandwidth, b.host_bandwidth);
  EXPECT_EQ(a.host_latency_us, b.host_latency_us);
}

void expect_same_topology(const TopologyConfig& a, const TopologyConfig& b) {
  EXPECT_EQ(a.name, b.name);
  EXPECT_EQ(a.description, b.description);
  EXPECT_EQ(a.sources, b.sources);
  ASSERT_EQ(a.devices.size(), b.devices.size());
  for (size_t i = 0; i < a.devices.size(); ++i) expect_same_device(a.devices[i], b.devices[i]);
  ASSERT_EQ(a.links.size(), b.links.size());
  for (size_t i = 0; i < a.links.size(); ++i) {
    EXPECT_EQ(a.links[i].a, b.links[i].a);
    EXPECT_EQ(a.links[i].b, b.links[i].b);
    EXPECT_EQ(a.links[i].bandwidth, b.links[i].bandwidth);
    EXPECT_EQ(a.links[i].latency_us, b.links[i].latency_us);
  }
  ASSERT_EQ(a.hosts.size(), b.hosts.size());
  for (size_t i = 0; i < a.hosts.size(); ++i) {
    EXPECT_EQ(a.hosts[i].name, b.hosts[i].name);
    EXPECT_EQ(a.hosts[i].description, b.hosts[i].description);
    EXPECT_EQ(a.hosts[i].via, b.hosts[i].via);
    EXPECT_EQ(a.hosts[i].bandwidth, b.hosts[i].bandwidth);
    EXPECT_EQ(a.hosts[i].latency_us, b.hosts[i].latency_us);
  }
}

// The error message of text that must not parse.
std::string error_of(const std::string& text, const std::string& source = "topo.json") {
  Result<TopologyConfig> r = parse_topology(text, source);
  EXPECT_FALSE(r.ok()) << "parsed although malformed:\n" << text;
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr(source));
  return r.status().message();
}

// A valid one-device topology with `device_fields` spliced into the first (non-CPU) device.
std::string with_gpu(const std::string& device_fields, const std::string& extra_top = "") {
  return R"({"name": "t", "devices": [{"name": "gpu0", "type": "gpu")" +
         (device_fields.empty() ? "" : ", " + device_fields) + R"(}, {"name": "cpu", "type": "cpu"}])" + extra_top +
         "}";
}

const char* const kRequiredPresets[] = {"1gpu",
                                        "2gpu-unequal",
                                        "gpu-no-fa",
                                        "accel-no-events",
                                        "8x80gb",
                                        "2x-rtx4090-pcie4",
                                        "rtx3090-rtx3060",
                                        "laptop-64gb-unified",
                                        "apu-128gb-96gb-gpu",
                                        "8x-h100-80gb-nvlink",
                                        "2-hosts-2x-rtx3090-10gbe-rpc"};

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Unit parsers

TEST(SimTopologyUnits, SizesInDecimalAndBinaryUnits) {
  const std::pair<const char*, size_t> cases[] = {{"8 GiB", 8 * GiB},
                                                  {"512 MiB", 512 * MiB},
                                                  {"1.5 GB", 1500000000},
                                                  {"4096", 4096},
                                                  {"1.5 GiB", 3 * GiB / 2},
                                                  {"  2KB ", 2000},
                                                  {"2kB", 2000},
                                                  {"0", 0},
                                                  {"64 B", 64},
                                                  {"1 TiB", size_t{1} << 40},
                                                  {"3 TB", 3000000000000ull},
                                                  {"0.5 KiB", 512},
                                                  {"16383 PiB", 16383ull << 50},
                                                  {"18446744073709551615", 18446744073709551615ull}};
  for (const auto& [text, bytes] : cases) {
    Result<size_t> r = parse_size(text);
    ASSERT_TRUE(r.ok()) << text << ": " << r.status().message();
    EXPECT_EQ(r.value(), bytes) << text;
  }
}

TEST(SimTopologyUnits, BadSizesSayWhatWasExpected) {
  const std::pair<const char*, const char*> cases[] = {{"eight", "expected a size such as"},
                                                       {"-5 GiB", "cannot be negative"},
                                                       {"8 gib", "unknown unit \"gib\""},
                                                       {"8 GiBs", "unknown unit"},
                                                       {"1.3 B", "not a whole number of bytes"},
                                                       {"18446744073709551616", "too large"},
                                                       {"16384 PiB", "too large"},
                                                       {"99999999999999999999999999 GiB", "too large"},
                                                       {"", "expected a size"},
                                                       {"1.2.3 GB", "unknown unit"},
                                                       {"nan GB", "expected a size"},
                                                       {"GiB", "expected a size"},
                                                       {"1e9", "unknown unit"}};
  for (const auto& [text, want] : cases) {
    Result<size_t> r = parse_size(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_THAT(r.status().message(), HasSubstr(want)) << text;
    EXPECT_THAT(r.status().message(), HasSubstr("expected")) << text;
  }
  // The unit list is in the message of an unknown unit.
  EXPECT_THAT(parse_size("8 gib").status().message(), HasSubstr("GiB"));
}

TEST(SimTopologyUnits, RatesDurationsAndFlops) {
  EXPECT_EQ(parse_rate("900 GB/s").value(), 900e9);
  EXPECT_EQ(parse_rate("25 GiB/s").value(), 25.0 * GiB);
  EXPECT_EQ(parse_rate("1000").value(), 1000.0);
  EXPECT_EQ(parse_rate("1e3 B/s").value(), 1000.0);
  EXPECT_DOUBLE_EQ(parse_rate("3.35 TB/s").value(), 3.35e12);
  EXPECT_EQ(parse_duration_us("5 us").value(), 5.0);
  EXPECT_EQ(parse_duration_us("1.5 ms").value(), 1500.0);
  EXPECT_DOUBLE_EQ(parse_duration_us("200 ns").value(), 0.2);
  EXPECT_EQ(parse_duration_us("1 s").value(), 1e6);
  EXPECT_EQ(parse_duration_us("3 \xC2\xB5s").value(), 3.0);
  EXPECT_EQ(parse_duration_us("0").value(), 0.0);
  EXPECT_EQ(parse_flops("50 TFLOP/s").value(), 50e12);
  EXPECT_EQ(parse_flops("800 GFLOP/s").value(), 800e9);
  EXPECT_EQ(parse_flops("2 TFLOPS").value(), 2e12);
}

TEST(SimTopologyUnits, BadRatesDurationsAndFlops) {
  struct Case {
    Result<double> r;
    const char* want;
  };
  const Case cases[] = {
      {parse_rate("900 GB"), "expected a rate such as \"900 GB/s\""},
      {parse_rate("fast"), "expected a rate"},
      {parse_rate("-1 GB/s"), "cannot be negative"},
      {parse_rate("1e400 GB/s"), "out of range"},
      {parse_rate("1e300 PB/s"), "out of range"},
      {parse_rate("inf GB/s"), "not a finite number"},
      {parse_rate("nan"), "not a finite number"},
      {parse_rate("900 gb/s"), "unknown unit"},
      {parse_duration_us("5 minutes"), "expected a duration such as \"5 us\""},
      {parse_duration_us("-1 us"), "cannot be negative"},
      {parse_duration_us(""), "expected a duration"},
      {parse_flops("50 TB/s"), "expected a compute rate such as \"50 TFLOP/s\""},
      {parse_flops("lots"), "expected a compute rate"},
  };
  for (const Case& c : cases) {
    ASSERT_FALSE(c.r.ok()) << c.want;
    EXPECT_THAT(c.r.status().message(), HasSubstr(c.want));
  }
}

TEST(SimTopologyUnits, FormattingUsesTheLargestExactUnitAndReadsBack) {
  EXPECT_EQ(format_size(24 * GiB), "24 GiB");
  EXPECT_EQ(format_size(1536 * MiB), "1536 MiB");
  EXPECT_EQ(format_size(1500000000), "1500 MB");
  EXPECT_EQ(format_size(4097), "4097 B");
  EXPECT_EQ(format_size(0), "0 B");
  EXPECT_EQ(format_rate(900e9), "900 GB/s");
  EXPECT_EQ(format_rate(3e12), "3 TB/s");
  EXPECT_EQ(format_rate(25.0 * GiB), "25 GiB/s");
  EXPECT_EQ(format_rate(1.5 * GiB), "1536 MiB/s");
  EXPECT_EQ(format_duration_us(5), "5 us");
  EXPECT_EQ(format_duration_us(1500), "1.5 ms");
  EXPECT_EQ(format_duration_us(0.2), "200 ns");
  EXPECT_EQ(format_flops(50e12), "50 TFLOP/s");
  // Any value reads back exactly.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> exp10(-4, 16);
  for (int i = 0; i < 2000; ++i) {
    const double v = std::pow(10.0, exp10(rng));
    EXPECT_EQ(parse_rate(format_rate(v)).value(), v) << format_rate(v);
    EXPECT_EQ(parse_duration_us(format_duration_us(v)).value(), v) << format_duration_us(v);
    EXPECT_EQ(parse_flops(format_flops(v)).value(), v) << format_flops(v);
    const size_t bytes = rng();
    EXPECT_EQ(parse_size(format_size(bytes)).value(), bytes) << format_size(bytes);
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Presets

TEST(SimTopologyPresets, EveryPresetLoadsAndValidates) {
  const std::vector<std::string> names = topology_preset_names();
  for (const char* required : kRequiredPresets) {
    EXPECT_NE(std::find(names.begin(), names.end(), required), names.end()) << required;
  }
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    Result<TopologyConfig> t = topology_preset(name);
    ASSERT_TRUE(t.ok()) << t.status().message();
    EXPECT_TRUE(validate_topology(t.value()).ok());
    EXPECT_EQ(t->name, name);  // the file's "name" is its preset name
    EXPECT_FALSE(t->description.empty());
    const DeviceConfig& cpu = t->devices.back();
    EXPECT_EQ(cpu.name, "cpu");
    EXPECT_EQ(cpu.type, DeviceType::kCpu);
    EXPECT_EQ(cpu.wraps, "CPU");
    EXPECT_TRUE(cpu.host_visible);
    EXPECT_GE(cpu.memory, 64 * GiB);  // 64 GiB, or the machine's host memory (the pool of a unified one)
    EXPECT_EQ(cpu.alignment, 64u);
    ASSERT_NE(topology_preset_text(name), nullptr);
  }
}

TEST(SimTopologyPresets, PresetsHoldWhatTheirNamesSay) {
  const TopologyConfig one = topology_preset("1gpu").value();
  ASSERT_EQ(one.devices.size(), 2u);
  EXPECT_EQ(one.devices[0].memory, 24 * GiB);
  EXPECT_EQ(one.devices[0].type, DeviceType::kGpu);

  const TopologyConfig two = topology_preset("2gpu-unequal").value();
  ASSERT_EQ(two.devices.size(), 3u);
  EXPECT_EQ(two.devices[0].memory, 24 * GiB);
  EXPECT_EQ(two.devices[1].memory, 8 * GiB);
  ASSERT_EQ(two.links.size(), 1u);
  EXPECT_EQ(two.links[0].a, "gpu0");
  EXPECT_EQ(two.links[0].b, "gpu1");

  const TopologyConfig nofa = topology_preset("gpu-no-fa").value();
  ASSERT_FALSE(nofa.devices[0].op_rules.empty());
  EXPECT_FALSE(nofa.devices[0].op_rules[0].allow);
  EXPECT_EQ(nofa.devices[0].op_rules[0].ops, std::vector<Op>{Op::kFlashAttnExt});

  const TopologyConfig accel = topology_preset("accel-no-events").value();
  EXPECT_EQ(accel.devices[0].type, DeviceType::kAccel);
  EXPECT_FALSE(accel.devices[0].caps.async);
  EXPECT_FALSE(accel.devices[0].caps.events);

  const TopologyConfig big = topology_preset("8x80gb").value();
  ASSERT_EQ(big.devices.size(), 9u);
  for (int i = 0; i < 8; ++i) EXPECT_EQ(big.devices[i].memory, 80 * GiB);
  EXPECT_EQ(big.links.size(), 28u);  // every pair
  for (const LinkConfig& l : big.links) EXPECT_GE(l.bandwidth, 100e9);
}

TEST(SimTopologyPresets, LoadByNameFromAnyDirectoryAndUnknownNames) {
  const std::filesystem::path here = std::filesystem::current_path();
  std::filesystem::current_path(std::filesystem::temp_directory_path());
  Result<TopologyConfig> t = load_topology("2gpu-unequal");
  Result<TopologyConfig> upper = topology_preset("1GPU");  // names are case-insensitive
  std::filesystem::current_path(here);
  ASSERT_TRUE(t.ok()) << t.status().message();
  EXPECT_EQ(t->devices.size(), 3u);
  EXPECT_TRUE(upper.ok());

  Result<TopologyConfig> missing = topology_preset("3gpu");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("\"3gpu\""));
  EXPECT_THAT(missing.status().message(), HasSubstr("1gpu, "));  // lists the presets

  Result<TopologyConfig> neither = load_topology("no-such-preset");
  ASSERT_FALSE(neither.ok());
  EXPECT_EQ(neither.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(neither.status().message(), HasSubstr("no topology preset or file named \"no-such-preset\""));
  EXPECT_THAT(neither.status().message(), HasSubstr("8x80gb"));
}

// The scheduler takes at most kMaxBackends (16) backends: a topology with more devices is bad input at load (exit 2),
// not a failed run. 16 load.
TEST(SimTopologyParse, AtMostSixteenDevices) {
  auto devices = [](int n) {
    std::string text = R"({"name": "many", "devices": [)";
    for (int i = 0; i + 1 < n; ++i) text += R"({"name": "gpu)" + std::to_string(i) + R"(", "type": "gpu"}, )";
    return text + R"({"name": "cpu", "type": "cpu"}]})";
  };
  EXPECT_TRUE(parse_topology(devices(16), "topo.json").ok());
  EXPECT_THAT(error_of(devices(17)), AllOf(HasSubstr("devices"), HasSubstr("at most 16 devices"), HasSubstr("got 17")));
}

TEST(SimTopologyPresets, PresetErrorsNameThePreset) {
  // A preset is parsed like a file; its source in messages is "<preset NAME>".
  EXPECT_THAT(error_of(R"({"name": "x"})", "<preset x>"),
              HasSubstr("<preset x>: devices: expected at least one device"));
}

// ---------------------------------------------------------------------------------------------------------------
// Round trip

TEST(SimTopologyRoundTrip, EveryPresetReadsBackEqual) {
  for (const std::string& name : topology_preset_names()) {
    SCOPED_TRACE(name);
    const TopologyConfig t = topology_preset(name).value();
    const std::string text = topology_to_json(t);
    Result<TopologyConfig> back = parse_topology(text, "roundtrip.json");
    ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
    expect_same_topology(t, back.value());
    EXPECT_EQ(topology_to_json(back.value()), text);
  }
}

TEST(SimTopologyRoundTrip, EveryFieldSurvives) {
  TopologyConfig t;
  t.name = "every-field";
  t.description = "all fields \"set\" \\ with odd values\n";
  DeviceConfig a;
  a.name = "acc0";
  a.description = "an accelerator";
  a.type = DeviceType::kAccel;
  a.memory = 3 * GiB / 2 + 1;  // no unit divides it
  a.alignment = 4096;
  a.max_alloc = 768 * MiB;
  a.host_visible = true;
  a.caps = DeviceCaps{false, true, true, false};
  a.default_allow = false;
  OpRule r1;
  r1.allow = true;
  r1.ops = {Op::kMulMat, Op::kMulMatId};
  r1.src0_types = {Type::kQ4_0, Type::kQ8_0};
  r1.src1_types = {Type::kF32};
  r1.dst_types = {Type::kF32, Type::kF16};
  r1.min_batch = 32;
  r1.max_batch = 4096;
  r1.ne0_multiple = 32;
  r1.note = "matrix engine";
  OpRule r2;
  r2.allow = false;  // deny anything (no ops listed) for bf16 outputs
  r2.dst_types = {Type::kBF16};
  a.op_rules = {r1, r2};
  a.offload = OffloadRule{true, 17, {Op::kMulMat}};
  a.cost.launch_overhead_us = 0.3;
  a.cost.flops_f32 = 1.234567e13;
  a.cost.flops_f16 = 3e14;
  a.cost.flops_quant = 123456789.125;
  a.cost.mem_bandwidth = 3.35e12;
  a.cost.efficiency[static_cast<size_t>(KernelClass::kMatVec)].memory = 0.8125;
  a.cost.efficiency[static_cast<size_t>(KernelClass::kAttnPrefill)] = {0.3, 1.5};
  a.cost.overrides = {CostModel::Override{Op::kSoftMax, -1, -1, 3.0}, CostModel::Override{Op::kMulMat, 7.5, 2e14, -1}};
  a.host_bandwidth = 25 * 1073741824.0 + 0.5;
  a.host_latency_us = 12.25;
  a.cpy_tensor_async = false;
  DeviceConfig gpu;
  gpu.name = "gpu0";
  gpu.type = DeviceType::kIgpu;
  DeviceConfig cpu;
  cpu.name = "cpu";
  cpu.type = DeviceType::kCpu;
  cpu.wraps = "CPU";
  t.devices = {a, gpu, cpu};
  t.links = {LinkConfig{"acc0", "gpu0", 64e9, 1.5}, LinkConfig{"gpu0", "host", 1e9 / 3, 0},
             LinkConfig{"host", "acc0", 25.0 * GiB, 0.25}};
  ASSERT_TRUE(validate_topology(t).ok()) << validate_topology(t).message();

  const std::string text = topology_to_json(t);
  Result<TopologyConfig> back = parse_topology(text, "every.json");
  ASSERT_TRUE(back.ok()) << back.status().message() << "\n" << text;
  expect_same_topology(t, back.value());
  EXPECT_THAT(text, HasSubstr("\"memory\": \"1610612737 B\""));
  EXPECT_THAT(text, HasSubstr("\"max_alloc\": \"768 MiB\""));
  EXPECT_THAT(text, HasSubstr("\"bandwidth\": \"3.35 TB/s\""));
  EXPECT_THAT(text, HasSubstr("\"cpy_tensor_async\": false"));
  EXPECT_TRUE(back->devices[1].cpy_tensor_async) << "the default is written by omission";
}

TEST(SimTopologyFormat, OmittedFieldsTakeTheDefaultsOfConfigH) {
  Result<TopologyConfig> r =
      parse_topology(R"({"name": "t", "devices": [{"name": "d"}, {"name": "c", "type": "cpu"}]})", "t.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  DeviceConfig want;
  want.name = "d";
  expect_same_device(r->devices[0], want);
  EXPECT_TRUE(r->links.empty());
  EXPECT_TRUE(r->description.empty());
}

TEST(SimTopologyFormat, TheDocumentedExampleParses) {
  const char* text = R"({
    "name": "example", "description": "one GPU and the CPU",
    "devices": [
      {"name": "gpu0", "type": "gpu", "memory": "24 GiB", "alignment": 256, "max_alloc": "4 GiB",
       "host_visible": false,
       "caps": {"async": true, "events": true, "host_buffer": false, "from_host_ptr": false},
       "ops": {"default": "allow", "rules": [
         {"deny": ["FLASH_ATTN_EXT"], "note": "no kernel"},
         {"allow": ["MUL_MAT"], "src0_types": ["q4_0"], "min_batch": 32, "ne0_multiple": 32}]},
       "offload": {"min_batch": 32, "ops": ["MUL_MAT"]},
       "cost": {"launch_overhead": "5 us", "flops_f32": "20 TFLOP/s", "flops_f16": "200 TFLOP/s",
                "flops_quant": "150 TFLOP/s", "bandwidth": "900 GB/s",
                "overrides": [{"op": "SOFT_MAX", "fixed": "3 us"}]},
       "host_link": {"bandwidth": "25 GB/s", "latency": "10 us"}},
      {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true, "memory": "64 GiB", "alignment": 64}
    ],
    "links": [{"a": "gpu0", "b": "host", "bandwidth": "24 GB/s", "latency": "8 us"}]
  })";
  Result<TopologyConfig> r = parse_topology(text, "example.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  const DeviceConfig& g = r->devices[0];
  EXPECT_EQ(g.memory, 24 * GiB);
  EXPECT_EQ(g.max_alloc, 4 * GiB);
  ASSERT_EQ(g.op_rules.size(), 2u);
  EXPECT_FALSE(g.op_rules[0].allow);
  EXPECT_EQ(g.op_rules[0].note, "no kernel");
  EXPECT_TRUE(g.op_rules[1].allow);
  EXPECT_EQ(g.op_rules[1].src0_types, std::vector<Type>{Type::kQ4_0});
  EXPECT_EQ(g.op_rules[1].min_batch, 32);
  EXPECT_EQ(g.op_rules[1].ne0_multiple, 32);
  EXPECT_TRUE(g.offload.enabled);  // an "offload" object turns it on
  EXPECT_EQ(g.offload.ops, std::vector<Op>{Op::kMulMat});
  EXPECT_EQ(g.cost.flops_f16, 200e12);
  EXPECT_EQ(g.cost.mem_bandwidth, 900e9);
  ASSERT_EQ(g.cost.overrides.size(), 1u);
  EXPECT_EQ(g.cost.overrides[0].op, Op::kSoftMax);
  EXPECT_EQ(g.cost.overrides[0].fixed_us, 3.0);
  EXPECT_LT(g.cost.overrides[0].overhead_us, 0);
  EXPECT_EQ(g.host_bandwidth, 25e9);
  EXPECT_EQ(r->links[0].b, "host");
  EXPECT_EQ(r->links[0].latency_us, 8.0);
}

// ---------------------------------------------------------------------------------------------------------------
// Malformed input: the file, the location, what was expected

TEST(SimTopologyErrors, SyntaxErrorsGiveLineAndColumn) {
  const std::string text = "{\n  \"name\": \"t\",\n  \"devices\": [\n    {\"name\": \"gpu0\",, }\n  ]\n}\n";
  const std::string msg = error_of(text);
  EXPECT_THAT(msg, HasSubstr("topo.json:4:21: JSON syntax error"));
  EXPECT_THAT(msg, HasSubstr("expected string literal"));

  EXPECT_THAT(error_of("{\"name\": \"t\""), HasSubstr("topo.json:1:13: JSON syntax error"));
  EXPECT_THAT(error_of("{\"name\": \"t\""), HasSubstr("end of input"));
  EXPECT_THAT(error_of(""), HasSubstr("topo.json:1:1: JSON syntax error"));
  EXPECT_THAT(error_of("{\"name\": tru}"), HasSubstr("topo.json:1:13:"));  // where the literal proved invalid
  EXPECT_THAT(error_of("{\"name\": \"t\"} trailing"), HasSubstr("topo.json:1:17:"));
  EXPECT_THAT(error_of("{\"name\": \"\xff\"}"), HasSubstr("topo.json:1:"));
}

TEST(SimTopologyErrors, WrongJsonTypes) {
  EXPECT_THAT(error_of("[1, 2]"), HasSubstr("topo.json: expected a JSON object"));
  EXPECT_THAT(error_of("[1, 2]"), HasSubstr("got an array"));
  EXPECT_THAT(error_of(R"({"name": 5, "devices": []})"),
              HasSubstr("topo.json: name: expected a string, got a number (5)"));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": {}})"),
              HasSubstr("topo.json: devices: expected a list of device objects, got an object"));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": ["gpu0"]})"),
              HasSubstr("topo.json: devices[0]: expected a device object"));
  EXPECT_THAT(error_of(with_gpu(R"("host_visible": "yes")")),
              HasSubstr("topo.json: devices[0].host_visible: expected true or false, got a string (\"yes\")"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": true)")), HasSubstr("topo.json: devices[0].memory: expected a size"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": true)")), HasSubstr("got true"));
  EXPECT_THAT(error_of(with_gpu(R"("caps": {"events": 1})")),
              HasSubstr("devices[0].caps.events: expected true or false, got a number (1)"));
  EXPECT_THAT(error_of(with_gpu(R"("caps": {"cpy_tensor_async": "no"})")),
              HasSubstr("devices[0].caps.cpy_tensor_async: expected true or false, got a string (\"no\")"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"deny": "MUL_MAT"}]})")),
              HasSubstr("devices[0].ops.rules[0].deny: expected a list of op names"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": [], "min_batch": -1}]})")),
              HasSubstr("devices[0].ops.rules[0].min_batch: expected a whole number >= 0, got a number (-1)"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": [], "min_batch": 1.5}]})")),
              HasSubstr("devices[0].ops.rules[0].min_batch: expected a whole number >= 0"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"default": "maybe"})")),
              HasSubstr("devices[0].ops.default: expected \"allow\" or \"deny\", got a string (\"maybe\")"));
  EXPECT_THAT(
      error_of(R"({"name": "t", "devices": [{"name": "x", "type": "tpu"}]})"),
      HasSubstr("devices[0].type: expected a device type (\"cpu\", \"gpu\", \"igpu\" or \"accel\"), got \"tpu\""));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": null}])")),
              HasSubstr("links[0].b: expected a string, got null"));
}

TEST(SimTopologyErrors, UnknownKeysAreRejectedWithTheKnownOnes) {
  const std::string msg = error_of(with_gpu(R"("memroy": "8 GiB")"));
  EXPECT_THAT(msg,
              HasSubstr("topo.json: devices[0]: unknown key \"memroy\" (expected one of: name, description, type"));
  EXPECT_THAT(msg, HasSubstr("did you mean \"memory\"?"));
  EXPECT_THAT(error_of(R"({"name": "t", "device": []})"), HasSubstr("topo.json: unknown key \"device\""));
  EXPECT_THAT(error_of(R"({"name": "t", "device": []})"), HasSubstr("did you mean \"devices\"?"));
  EXPECT_THAT(error_of(with_gpu(R"("caps": {"asynch": true})")),
              HasSubstr("devices[0].caps: unknown key \"asynch\" (expected one of: async, events, host_buffer, "
                        "from_host_ptr, cpy_tensor_async)"));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"overrides": [{"op": "ADD", "fixd": "1 us"}]})")),
              HasSubstr("devices[0].cost.overrides[0]: unknown key \"fixd\""));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "host", "latncy": "1 us"}])")),
              HasSubstr("links[0]: unknown key \"latncy\""));
  // A far-off key gets no suggestion.
  EXPECT_THAT(error_of(with_gpu(R"("zzzzzzzz": 1)")), ::testing::Not(HasSubstr("did you mean")));
}

TEST(SimTopologyErrors, DuplicateKeysAreRejected) {
  EXPECT_THAT(error_of(with_gpu(R"("memory": "1 GiB", "memory": "2 GiB")")),
              HasSubstr("topo.json: devices[0]: duplicate key \"memory\""));
  EXPECT_THAT(error_of(R"({"name": "a", "name": "b", "devices": []})"),
              HasSubstr("topo.json: top level: duplicate key \"name\""));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": []}, {"deny": [], "note": "x", "note": "y"}]})")),
              HasSubstr("topo.json: devices[0].ops.rules[1]: duplicate key \"note\""));
}

TEST(SimTopologyErrors, BadUnitsNameThePathAndTheExpectation) {
  const std::string eight = R"({"name": "t", "devices": [{"name": "gpu0", "memory": "8 GiB"},
      {"name": "gpu1", "memory": "eight"}, {"name": "cpu", "type": "cpu"}]})";
  EXPECT_THAT(error_of(eight), HasSubstr("topo.json: devices[1].memory: expected a size such as \"8 GiB\""));
  EXPECT_THAT(error_of(eight), HasSubstr("got \"eight\""));
  EXPECT_THAT(error_of(with_gpu(R"("memory": "8 gigs")")), HasSubstr("devices[0].memory: expected a size"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": "8 gigs")")), HasSubstr("unknown unit \"gigs\""));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"bandwidth": "900 GB"})")),
              HasSubstr("devices[0].cost.bandwidth: expected a rate such as \"900 GB/s\""));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"launch_overhead": "5 parsecs"})")),
              HasSubstr("devices[0].cost.launch_overhead: expected a duration such as \"5 us\""));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"efficiency": {"mat_vector": {"memory": 0.5}}})")),
              HasSubstr("devices[0].cost.efficiency: unknown key \"mat_vector\""));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"efficiency": {"mat_vec": {"memory": 0}}})")),
              HasSubstr("devices[0].cost.efficiency.mat_vec.memory: expected a share of the peak above 0 and at "
                        "most 4, got 0"));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"efficiency": {"other": {"compute": 5}}})")),
              HasSubstr("devices[0].cost.efficiency.other.compute: expected a share of the peak"));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"efficiency": {"other": {"speed": 1}}})")),
              HasSubstr("devices[0].cost.efficiency.other: unknown key \"speed\""));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"flops_f16": "200 TB/s"})")),
              HasSubstr("devices[0].cost.flops_f16: expected a compute rate such as \"50 TFLOP/s\""));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "host", "bandwidth": "fast"}])")),
              HasSubstr("links[0].bandwidth: expected a rate"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"deny": ["FLASH_ATTN"]}]})")),
              HasSubstr("devices[0].ops.rules[0].deny[0]: expected an op name (one of: VIEW, "));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": ["ADD"], "src0_types": ["q4_k_m"]}]})")),
              HasSubstr("devices[0].ops.rules[0].src0_types[0]: expected a type name (one of: f32, "));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": ["NONE"]}]})")),
              HasSubstr("devices[0].ops.rules[0].allow[0]: expected an op name"));
}

TEST(SimTopologyErrors, NegativeAndOverflowingSizes) {
  EXPECT_THAT(error_of(with_gpu(R"("memory": "-8 GiB")")), HasSubstr("devices[0].memory: expected a size"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": "-8 GiB")")), HasSubstr("cannot be negative"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": -5)")), HasSubstr("devices[0].memory: expected a size"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": -5)")), HasSubstr("cannot be negative"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": "20000000 TiB")")), HasSubstr("too large for 64 bits"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": 1e30)")), HasSubstr("devices[0].memory"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": 1e30)")), HasSubstr("too large"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": 1.5)")), HasSubstr("not whole bytes"));
  EXPECT_THAT(error_of(with_gpu(R"("host_link": {"latency": -1})")),
              HasSubstr("devices[0].host_link.latency: expected a duration"));
  // Valid numbers of bytes.
  EXPECT_EQ(parse_topology(with_gpu(R"("memory": 4096, "max_alloc": 1e3)"), "t.json")->devices[0].memory, 4096u);
}

TEST(SimTopologyErrors, SemanticRules) {
  EXPECT_THAT(error_of(R"({"devices": []})"), HasSubstr("topo.json: missing required key \"name\""));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": [{"type": "cpu"}]})"),
              HasSubstr("topo.json: devices[0]: missing required key \"name\""));
  EXPECT_THAT(error_of(R"({"name": "t"})"), HasSubstr("topo.json: devices: expected at least one device"));
  EXPECT_THAT(
      error_of(R"({"name": "t", "devices": [{"name": "gpu0"}, {"name": "GPU0"}, {"name": "c", "type": "cpu"}]})"),
      HasSubstr("topo.json: devices[1].name: duplicate device name \"GPU0\" (devices[0] is \"gpu0\""));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": [{"name": "c", "type": "cpu"}, {"name": "gpu0"}]})"),
              HasSubstr("topo.json: devices[0].type: only the last device may be of type \"cpu\""));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": [{"name": "gpu0"}]})"),
              HasSubstr("topo.json: devices[0].type: expected \"cpu\": the last device must be the CPU"));
  EXPECT_THAT(error_of(with_gpu(R"("alignment": 100)")),
              HasSubstr("topo.json: devices[0].alignment: expected a power of two up to 1 GiB (1073741824), got 100"));
  EXPECT_THAT(error_of(with_gpu(R"("alignment": 0)")), HasSubstr("devices[0].alignment: expected a power of two"));
  EXPECT_THAT(error_of(with_gpu(R"("memory": "0 GiB")")), HasSubstr("devices[0].memory: expected a memory size > 0"));
  EXPECT_THAT(error_of(with_gpu(R"("max_alloc": 0)")), HasSubstr("devices[0].max_alloc: expected a size > 0"));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"bandwidth": 0})")),
              HasSubstr("devices[0].cost.bandwidth: expected a bandwidth > 0"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": [], "deny": []}]})")),
              HasSubstr("devices[0].ops.rules[0]: a rule needs exactly one of \"allow\" or \"deny\""));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"note": "x"}]})")), HasSubstr("exactly one of"));
  EXPECT_THAT(error_of(with_gpu(R"("ops": {"rules": [{"allow": [], "min_batch": 64, "max_batch": 8}]})")),
              HasSubstr("devices[0].ops.rules[0]: min_batch 64 is above max_batch 8"));
  EXPECT_THAT(error_of(with_gpu(R"("cost": {"overrides": [{"fixed": "1 us"}]})")),
              HasSubstr("devices[0].cost.overrides[0]: missing required key \"op\""));
  EXPECT_THAT(error_of(R"({"name": "t", "devices": [{"name": "host"}, {"name": "c", "type": "cpu"}]})"),
              HasSubstr("devices[0].name: \"host\" is reserved"));
  EXPECT_THAT(error_of(R"({"name": "", "devices": [{"name": "c", "type": "cpu"}]})"),
              HasSubstr("topo.json: name: expected a non-empty"));
}

TEST(SimTopologyErrors, BadLinks) {
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "gpu7"}])")),
              HasSubstr("topo.json: links[0].b: unknown device \"gpu7\" (expected one of: gpu0, cpu, host)"));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "GPU0"}])")),
              HasSubstr("topo.json: links[0]: a link needs two different endpoints"));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "cpu"}, {"a": "cpu", "b": "gpu0"}])")),
              HasSubstr("topo.json: links[1]: a second link between \"cpu\" and \"gpu0\" (links[0]"));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"a": "gpu0", "b": "host", "bandwidth": "0 GB/s"}])")),
              HasSubstr("topo.json: links[0].bandwidth: expected a bandwidth > 0"));
  EXPECT_THAT(error_of(with_gpu("", R"(, "links": [{"b": "host"}])")),
              HasSubstr("links[0]: missing required key \"a\""));
}

TEST(SimTopologyErrors, FilesNameThePathAndTheReason) {
  Result<TopologyConfig> missing = load_topology_file("/nonexistent-dir/topo.json");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("/nonexistent-dir/topo.json: cannot open the topology file: No such file"));
  Result<TopologyConfig> via_load = load_topology("/nonexistent-dir/topo.json");
  ASSERT_FALSE(via_load.ok());
  EXPECT_THAT(via_load.status().message(), HasSubstr("/nonexistent-dir/topo.json: cannot open"));

  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessera_topo_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Result<TopologyConfig> directory = load_topology_file(dir.string());
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(directory.status().message(),
              HasSubstr(dir.string() + ": cannot read the topology file: it is a directory"));

  const std::string good = (dir / "good.json").string(), bad = (dir / "bad.json").string();
  std::ofstream(good) << topology_preset_text("1gpu");
  std::ofstream(bad) << "{\n  \"name\": \"bad\",\n  \"devices\": [{\"name\": \"gpu0\", \"memory\": \"eight\"}]\n}\n";
  Result<TopologyConfig> g = load_topology(good);
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_EQ(g->name, "1gpu");
  Result<TopologyConfig> b = load_topology_file(bad);
  ASSERT_FALSE(b.ok());
  EXPECT_THAT(b.status().message(), HasSubstr(bad + ": devices[0].memory: expected a size"));
  std::filesystem::remove_all(dir);
}

TEST(SimTopologyErrors, DirectValidation) {
  TopologyConfig t = topology_preset("2gpu-unequal").value();
  ASSERT_TRUE(validate_topology(t).ok());
  t.links[0].bandwidth = 0;
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("links[0].bandwidth: expected a bandwidth > 0"));
  t = topology_preset("2gpu-unequal").value();
  t.devices[1].max_alloc = 0;
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("devices[1].max_alloc"));
  t = topology_preset("2gpu-unequal").value();
  t.devices[0].alignment = 48;
  EXPECT_THAT(validate_topology(t).message(),
              HasSubstr("devices[0].alignment: expected a power of two up to 1 GiB (1073741824), got 48"));
  t = topology_preset("2gpu-unequal").value();
  t.devices[0].cost.flops_f32 = std::nan("");
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("devices[0].cost.flops_f32: expected a compute rate > 0"));
  t = TopologyConfig{};
  EXPECT_FALSE(validate_topology(t).ok());
}

// Mangled versions of every preset (truncated, bytes flipped) always end in a value or an error naming the source.
TEST(SimTopologyErrors, MangledInputNeverCrashes) {
  std::mt19937 rng(12345);
  for (const std::string& name : topology_preset_names()) {
    const std::string text = topology_preset_text(name);
    for (size_t cut = 0; cut < text.size(); cut += 7) {
      Result<TopologyConfig> r = parse_topology(std::string_view(text).substr(0, cut), "cut.json");
      if (cut <= text.rfind('}')) {
        ASSERT_FALSE(r.ok()) << cut;
        EXPECT_THAT(r.status().message(), HasSubstr("cut.json"));
      }
    }
    const char kBytes[] = "{}[],:\"0123456789-.e \n\\xGiBus/TFLOP\xff";
    for (int i = 0; i < 300; ++i) {
      std::string m = text;
      const int edits = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < edits; ++k) m[rng() % m.size()] = kBytes[rng() % (sizeof kBytes - 1)];
      Result<TopologyConfig> r = parse_topology(m, "mangled.json");
      if (!r.ok()) {
        EXPECT_THAT(r.status().message(), HasSubstr("mangled.json"));
      }
    }
  }
  // Deep nesting.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_THAT(error_of(deep), HasSubstr("expected a JSON object"));
}
