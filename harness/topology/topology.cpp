// Topology files: JSON -> TopologyConfig (with errors that name the source, the location and what
// was expected), validation, TopologyConfig -> JSON, and the embedded presets. Format: docs/topology.md.
//
// Inside the parser a problem is thrown as a ParseProblem {JSON path, message} and caught once in parse_topology,
// together with anything nlohmann-json throws; nothing escapes the public functions.
#include "tessera/harness/topology/topology.h"

#include <strings.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <unordered_set>

#include <nlohmann/json.hpp>

#include "common/json_read.h"
#include "topology_hosts.h"
#include "topology_memory.h"
#include "topology_detail.h"
#include "tessera/sched.h"

namespace tessera::harness {

using namespace tessera::sim;

namespace detail {
// Generated from harness/topology/presets/*.json (harness/topology/topology_presets.cpp.in); nullptr-terminated.
extern const char* const kTopologyPresetNames[];
extern const char* const kTopologyPresetTexts[];
extern const size_t kTopologyPresetCount;
// Generated from harness/topology/devices/*.json: one device each.
extern const char* const kDevicePresetNames[];
extern const char* const kDevicePresetTexts[];
extern const size_t kDevicePresetCount;
// Generated from harness/topology/kernels/*.json: llama.cpp's kernels per backend, fitted.
extern const char* const kKernelProfileNames[];
extern const char* const kKernelProfileTexts[];
extern const size_t kKernelProfileCount;
}  // namespace detail

using namespace json_read;

namespace topology_detail {

ojson op_list(const std::vector<Op>& ops) {
  ojson out = ojson::array();
  for (Op op : ops) out.push_back(op_name(op));
  return out;
}

ojson type_list(const std::vector<Type>& types) {
  ojson out = ojson::array();
  for (Type t : types) out.push_back(type_name(t));
  return out;
}

OpRule parse_rule(const json& v, const std::string& path) {
  expect_object(
      v, path,
      {"allow", "deny", "src0_types", "src1_types", "dst_types", "min_batch", "max_batch", "ne0_multiple", "note"},
      "an op rule object such as {\"deny\": [\"FLASH_ATTN_EXT\"]}");
  const json* allow = member(v, "allow");
  const json* deny = member(v, "deny");
  if ((allow == nullptr) == (deny == nullptr)) {
    fail(path, "a rule needs exactly one of \"allow\" or \"deny\" (a list of op names; [] for any op)");
  }
  OpRule rule;
  rule.allow = allow != nullptr;
  const std::string op_path = child(path, rule.allow ? "allow" : "deny");
  rule.ops = get_list<Op>(rule.allow ? *allow : *deny, op_path, "op names such as [\"MUL_MAT\"]", get_op);
  auto types = [&](const char* key, std::vector<Type>* out) {
    if (const json* x = member(v, key))
      *out = get_list<Type>(*x, child(path, key), "type names such as [\"q4_0\"]", get_type);
  };
  types("src0_types", &rule.src0_types);
  types("src1_types", &rule.src1_types);
  types("dst_types", &rule.dst_types);
  if (const json* x = member(v, "min_batch")) rule.min_batch = get_count(*x, child(path, "min_batch"));
  if (const json* x = member(v, "max_batch")) rule.max_batch = get_count(*x, child(path, "max_batch"));
  if (const json* x = member(v, "ne0_multiple")) rule.ne0_multiple = get_count(*x, child(path, "ne0_multiple"));
  if (const json* x = member(v, "note")) rule.note = get_string(*x, child(path, "note"));
  return rule;
}

void parse_ops(const json& v, const std::string& path, bool* default_allow, std::vector<OpRule>* rules) {
  expect_object(v, path, {"default", "rules"}, "an object {\"default\": \"allow\", \"rules\": [...]}");
  if (const json* x = member(v, "default")) {
    const std::string p = child(path, "default");
    if (x->is_string() && x->get_ref<const std::string&>() == "allow") {
      *default_allow = true;
    } else if (x->is_string() && x->get_ref<const std::string&>() == "deny") {
      *default_allow = false;
    } else {
      type_fail(p, "\"allow\" or \"deny\"", *x);
    }
  }
  if (const json* x = member(v, "rules")) {
    *rules = get_list<OpRule>(*x, child(path, "rules"), "op rule objects", parse_rule);
  }
}

Status validate_rules(const std::vector<OpRule>& rules, const std::string& path) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const OpRule& r = rules[i];
    const std::string p = element(path, i);
    if (r.min_batch < 0 || r.max_batch < 0 || r.ne0_multiple < 0) {
      return invalid(p + ": expected min_batch, max_batch and ne0_multiple >= 0");
    }
    if (r.max_batch > 0 && r.min_batch > r.max_batch) {
      return invalid(p + ": min_batch " + std::to_string(r.min_batch) + " is above max_batch " +
                     std::to_string(r.max_batch));
    }
    for (Op op : r.ops) {
      if (static_cast<int>(op) <= 0 || static_cast<int>(op) >= kOpCount) return invalid(p + ": expected op names");
    }
  }
  return Status::Ok();
}

ojson ops_json(bool default_allow, const std::vector<OpRule>& op_rules) {
  ojson rules = ojson::array();
  for (const OpRule& r : op_rules) {
    ojson rule;
    rule[r.allow ? "allow" : "deny"] = op_list(r.ops);
    if (!r.src0_types.empty()) rule["src0_types"] = type_list(r.src0_types);
    if (!r.src1_types.empty()) rule["src1_types"] = type_list(r.src1_types);
    if (!r.dst_types.empty()) rule["dst_types"] = type_list(r.dst_types);
    if (r.min_batch != 0) rule["min_batch"] = r.min_batch;
    if (r.max_batch != 0) rule["max_batch"] = r.max_batch;
    if (r.ne0_multiple != 0) rule["ne0_multiple"] = r.ne0_multiple;
    if (!r.note.empty()) rule["note"] = r.note;
    rules.push_back(std::move(rule));
  }
  return ojson{{"default", default_allow ? "allow" : "deny"}, {"rules", std::move(rules)}};
}

}  // namespace topology_detail

namespace {

using namespace topology_detail;

// ---------------------------------------------------------------------------------------------------------------
// The parser proper

DeviceType get_device_type(const json& v, const std::string& path) {
  constexpr std::string_view kWhat = "a device type (\"cpu\", \"gpu\", \"igpu\" or \"accel\")";
  if (!v.is_string()) type_fail(path, kWhat, v);
  const std::string& s = v.get_ref<const std::string&>();
  if (iequal(s, "cpu")) return DeviceType::kCpu;
  if (iequal(s, "gpu")) return DeviceType::kGpu;
  if (iequal(s, "igpu")) return DeviceType::kIgpu;
  if (iequal(s, "accel")) return DeviceType::kAccel;
  fail(path, "expected " + std::string(kWhat) + ", got " + quote(s));
}

const char* device_type_key(DeviceType t) {
  switch (t) {
    case DeviceType::kCpu: return "cpu";
    case DeviceType::kGpu: return "gpu";
    case DeviceType::kIgpu: return "igpu";
    case DeviceType::kAccel: return "accel";
  }
  return "?";
}

void parse_caps(const json& v, const std::string& path, DeviceCaps* caps, bool* cpy_tensor_async) {
  expect_object(v, path, {"async", "events", "host_buffer", "from_host_ptr", "cpy_tensor_async"},
                "an object of capabilities");
  if (const json* x = member(v, "cpy_tensor_async")) *cpy_tensor_async = get_bool(*x, child(path, "cpy_tensor_async"));
  if (const json* x = member(v, "async")) caps->async = get_bool(*x, child(path, "async"));
  if (const json* x = member(v, "events")) caps->events = get_bool(*x, child(path, "events"));
  if (const json* x = member(v, "host_buffer")) caps->host_buffer = get_bool(*x, child(path, "host_buffer"));
  if (const json* x = member(v, "from_host_ptr"))
    caps->buffer_from_host_ptr = get_bool(*x, child(path, "from_host_ptr"));
}

void parse_offload(const json& v, const std::string& path, OffloadRule* o) {
  expect_object(v, path, {"enabled", "min_batch", "ops", "batch"}, "an object {\"min_batch\": 32, \"ops\": [...]}");
  o->enabled = true;  // present: on unless it says otherwise
  if (const json* x = member(v, "enabled")) o->enabled = get_bool(*x, child(path, "enabled"));
  if (const json* x = member(v, "min_batch")) o->min_batch = get_count(*x, child(path, "min_batch"));
  if (const json* x = member(v, "ops"))
    o->ops = get_list<Op>(*x, child(path, "ops"), "op names such as [\"MUL_MAT\"]", get_op);
  if (const json* x = member(v, "batch")) {
    const std::string what = "\"tokens\" or \"ggml-cuda\"";
    const std::string b = get_string(*x, child(path, "batch"), what);
    if (b != "tokens" && b != "ggml-cuda") type_fail(child(path, "batch"), what, *x);
    o->ggml_cuda_batch = b == "ggml-cuda";
  }
}

CostModel::Override parse_override(const json& v, const std::string& path) {
  expect_object(v, path, {"op", "overhead", "flops", "fixed"},
                "an override object such as {\"op\": \"SOFT_MAX\", \"fixed\": \"3 us\"}");
  CostModel::Override o;
  o.op = get_op(required(v, path, "op", "the op name this override prices"), child(path, "op"));
  if (const json* x = member(v, "overhead")) o.overhead_us = get_duration(*x, child(path, "overhead"));
  if (const json* x = member(v, "flops")) o.flops = get_flops(*x, child(path, "flops"));
  if (const json* x = member(v, "fixed")) o.fixed_us = get_duration(*x, child(path, "fixed"));
  return o;
}

// "efficiency": {"mat_vec": {"memory": 0.8}, "mat_mat_quant": {"compute": 0.3, "memory": 1}, ...}: each kernel class's
// share of the peaks (docs/simulator.md, "Kernel classes"); a class or a key left out is 1.
void parse_efficiency(const json& v, const std::string& path, CostModel* c) {
  std::vector<const char*> names;
  for (size_t k = 0; k < kKernelClassCount; ++k) names.push_back(kernel_class_name(static_cast<KernelClass>(k)));
  expect_object(v, path, names, "an object of kernel classes");
  for (size_t k = 0; k < kKernelClassCount; ++k) {
    const json* x = member(v, names[k]);
    if (x == nullptr) continue;
    const std::string p = child(path, names[k]);
    expect_object(*x, p, {"compute", "memory"}, "an efficiency object {\"compute\": share, \"memory\": share}");
    if (const json* y = member(*x, "compute")) c->efficiency[k].compute = get_number(*y, child(p, "compute"));
    if (const json* y = member(*x, "memory")) c->efficiency[k].memory = get_number(*y, child(p, "memory"));
  }
}

void parse_cost(const json& v, const std::string& path, CostModel* c) {
  expect_object(v, path,
                {"launch_overhead", "flops_f32", "flops_f16", "flops_quant", "bandwidth", "efficiency", "overrides"},
                "a cost model object");
  if (const json* x = member(v, "efficiency")) parse_efficiency(*x, child(path, "efficiency"), c);
  if (const json* x = member(v, "launch_overhead"))
    c->launch_overhead_us = get_duration(*x, child(path, "launch_overhead"));
  if (const json* x = member(v, "flops_f32")) c->flops_f32 = get_flops(*x, child(path, "flops_f32"));
  if (const json* x = member(v, "flops_f16")) c->flops_f16 = get_flops(*x, child(path, "flops_f16"));
  if (const json* x = member(v, "flops_quant")) c->flops_quant = get_flops(*x, child(path, "flops_quant"));
  if (const json* x = member(v, "bandwidth")) c->mem_bandwidth = get_rate(*x, child(path, "bandwidth"));
  if (const json* x = member(v, "overrides")) {
    c->overrides = get_list<CostModel::Override>(*x, child(path, "overrides"), "override objects", parse_override);
  }
}

DeviceConfig parse_device(const json& v, const std::string& path) {
  expect_object(v, path, {"name",      "description",  "type",        "wraps",    "memory",        "alignment",
                          "max_alloc", "host_visible", "unified",     "reserved", "unallocatable", "fit_margin",
                          "host",      "caps",         "ops",         "offload",  "cost",          "host_link",
                          "padding",   "buffer_types", "row_rounding"},
                "a device object such as {\"name\": \"gpu0\", \"type\": \"gpu\", \"memory\": \"24 GiB\"}");
  DeviceConfig d;
  d.name = get_string(required(v, path, "name", "the device's name, e.g. \"gpu0\""), child(path, "name"));
  if (const json* x = member(v, "description")) d.description = get_string(*x, child(path, "description"));
  if (const json* x = member(v, "type")) d.type = get_device_type(*x, child(path, "type"));
  if (const json* x = member(v, "wraps")) d.wraps = get_string(*x, child(path, "wraps"));
  if (const json* x = member(v, "memory")) d.memory = get_size(*x, child(path, "memory"));
  if (const json* x = member(v, "alignment")) d.alignment = get_size(*x, child(path, "alignment"));
  if (const json* x = member(v, "max_alloc")) d.max_alloc = get_size(*x, child(path, "max_alloc"));
  if (const json* x = member(v, "host_visible")) d.host_visible = get_bool(*x, child(path, "host_visible"));
  topology_memory::parse(v, path, &d);
  topology_hosts::parse_device_host(v, path, &d);
  if (const json* x = member(v, "caps")) parse_caps(*x, child(path, "caps"), &d.caps, &d.cpy_tensor_async);
  if (const json* x = member(v, "ops")) parse_ops(*x, child(path, "ops"), &d.default_allow, &d.op_rules);
  parse_buffer_keys(v, path, &d);
  if (const json* x = member(v, "offload")) parse_offload(*x, child(path, "offload"), &d.offload);
  if (const json* x = member(v, "cost")) parse_cost(*x, child(path, "cost"), &d.cost);
  if (const json* x = member(v, "row_rounding")) d.row_rounding = get_int(*x, child(path, "row_rounding"));
  if (const json* x = member(v, "host_link")) {
    const std::string p = child(path, "host_link");
    expect_object(*x, p, {"bandwidth", "latency"}, "an object {\"bandwidth\": \"25 GB/s\", \"latency\": \"10 us\"}");
    if (const json* y = member(*x, "bandwidth")) d.host_bandwidth = get_rate(*y, child(p, "bandwidth"));
    if (const json* y = member(*x, "latency")) d.host_latency_us = get_duration(*y, child(p, "latency"));
  }
  return d;
}

LinkConfig parse_link(const json& v, const std::string& path) {
  expect_object(v, path, {"a", "b", "bandwidth", "latency"},
                "a link object such as {\"a\": \"gpu0\", \"b\": \"gpu1\", \"bandwidth\": \"50 GB/s\"}");
  LinkConfig l;
  l.a = get_string(required(v, path, "a", "a device name or \"host\""), child(path, "a"));
  l.b = get_string(required(v, path, "b", "a device name or \"host\""), child(path, "b"));
  if (const json* x = member(v, "bandwidth")) l.bandwidth = get_rate(*x, child(path, "bandwidth"));
  if (const json* x = member(v, "latency")) l.latency_us = get_duration(*x, child(path, "latency"));
  return l;
}

TopologyConfig parse_root(const json& root) {
  // The version first: a newer file may have keys this build does not know. Version 1 is the only one so far, and a
  // file without the key is read as version 1 (docs/topology.md, "Versions").
  (void)get_version(root, "topology files", kTopologyVersion);
  expect_object(root, "", {"version", "name", "description", "hosts", "devices", "links", "sources"},
                "a JSON object {\"name\": ..., \"devices\": [...], \"links\": [...]} at the top level");
  TopologyConfig t;
  t.name = get_string(required(root, "", "name", "the topology's name"), "name");
  if (const json* x = member(root, "description")) t.description = get_string(*x, "description");
  if (const json* x = member(root, "devices"))
    t.devices = get_list<DeviceConfig>(*x, "devices", "device objects", parse_device);
  // Checked here, at load (bad input), not when the scheduler is made from the devices (a failed run).
  if (t.devices.size() > static_cast<size_t>(kMaxBackends)) {
    fail("devices", format_message("expected at most %d devices (the scheduler takes at most %d backends), got %zu",
                                   kMaxBackends, kMaxBackends, t.devices.size()));
  }
  if (const json* x = member(root, "links")) t.links = get_list<LinkConfig>(*x, "links", "link objects", parse_link);
  topology_hosts::parse_hosts(root, &t);
  if (const json* x = member(root, "sources")) {
    t.sources = get_list<std::string>(*x, "sources", "strings (where the figures come from)",
                                      [](const json& e, const std::string& p) { return get_string(e, p); });
  }
  topology_memory::resolve(&t);
  return t;
}

// nlohmann keeps the last of duplicate keys silently; this callback finds the first duplicate and its JSON path.
bool is_power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

bool positive_finite(double v) { return v > 0 && std::isfinite(v); }
bool non_negative_finite(double v) { return v >= 0 && std::isfinite(v); }

Status validate_cost(const CostModel& c, const std::string& path) {
  if (!non_negative_finite(c.launch_overhead_us)) {
    return invalid(child(path, "launch_overhead") + ": expected a duration >= 0, got " +
                   number_text(c.launch_overhead_us) + " us");
  }
  const std::pair<const char*, double> flops[] = {
      {"flops_f32", c.flops_f32}, {"flops_f16", c.flops_f16}, {"flops_quant", c.flops_quant}};
  for (const auto& [key, v] : flops) {
    if (!positive_finite(v))
      return invalid(child(path, key) + ": expected a compute rate > 0, got " + number_text(v) + " FLOP/s");
  }
  if (!positive_finite(c.mem_bandwidth)) {
    return invalid(child(path, "bandwidth") + ": expected a bandwidth > 0, got " + number_text(c.mem_bandwidth) +
                   " B/s");
  }
  for (size_t k = 0; k < kKernelClassCount; ++k) {
    const std::string p = child(child(path, "efficiency"), kernel_class_name(static_cast<KernelClass>(k)));
    const Efficiency& e = c.efficiency[k];
    // a share of the peak: above 0, and at most 4 (a cache can beat the memory's peak, not by more)
    for (const auto& [key, v] : {std::pair<const char*, double>{"compute", e.compute}, {"memory", e.memory}}) {
      if (!(v > 0 && v <= 4)) {
        return invalid(child(p, key) + ": expected a share of the peak above 0 and at most 4, got " + number_text(v));
      }
    }
  }
  for (size_t i = 0; i < c.overrides.size(); ++i) {
    const CostModel::Override& o = c.overrides[i];
    const std::string p = element(child(path, "overrides"), i);
    const int op = static_cast<int>(o.op);
    if (op <= 0 || op >= kOpCount) return invalid(child(p, "op") + ": expected an op");
    if (std::isnan(o.overhead_us) || std::isinf(o.overhead_us))
      return invalid(child(p, "overhead") + ": expected a finite duration");
    if (std::isnan(o.fixed_us) || std::isinf(o.fixed_us))
      return invalid(child(p, "fixed") + ": expected a finite duration");
    if (std::isnan(o.flops) || std::isinf(o.flops) || o.flops == 0) {
      return invalid(child(p, "flops") + ": expected a compute rate > 0, got " + number_text(o.flops) + " FLOP/s");
    }
  }
  return Status::Ok();
}

Status validate_device(const DeviceConfig& d, const std::string& path) {
  if (d.name.empty()) return invalid(child(path, "name") + ": expected a non-empty device name");
  if (iequal(d.name, "host"))
    return invalid(child(path, "name") + ": \"host\" is reserved for link endpoints (host memory)");
  if (d.memory == 0) return invalid(child(path, "memory") + ": expected a memory size > 0");
  if (!is_power_of_two(d.alignment) || d.alignment > kMaxAlignment) {
    return invalid(child(path, "alignment") + ": expected a power of two up to 1 GiB (1073741824), got " +
                   std::to_string(d.alignment));
  }
  if (d.max_alloc == 0) return invalid(child(path, "max_alloc") + ": expected a size > 0");
  const int type = static_cast<int>(d.type);
  if (type < 0 || type > static_cast<int>(DeviceType::kAccel))
    return invalid(child(path, "type") + ": expected a device type");
  TS_RETURN_IF_ERROR(validate_rules(d.op_rules, child(child(path, "ops"), "rules")));
  TS_RETURN_IF_ERROR(validate_buffer_keys(d, path));
  if (d.offload.min_batch < 0)
    return invalid(child(child(path, "offload"), "min_batch") + ": expected a whole number >= 0");
  TS_RETURN_IF_ERROR(validate_cost(d.cost, child(path, "cost")));
  if (!positive_finite(d.host_bandwidth)) {
    return invalid(child(child(path, "host_link"), "bandwidth") + ": expected a bandwidth > 0, got " +
                   number_text(d.host_bandwidth) + " B/s");
  }
  if (!non_negative_finite(d.host_latency_us)) {
    return invalid(child(child(path, "host_link"), "latency") + ": expected a duration >= 0");
  }
  if (d.row_rounding < 1 || d.row_rounding > (1 << 20)) {
    return invalid(child(path, "row_rounding") + ": expected a whole number of rows from 1 to 1048576, got " +
                   std::to_string(d.row_rounding));
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------------------------
// To JSON

ojson device_json(const DeviceConfig& d) {
  ojson o;
  o["name"] = d.name;
  if (!d.description.empty()) o["description"] = d.description;
  o["type"] = device_type_key(d.type);
  if (!d.wraps.empty()) o["wraps"] = d.wraps;
  o["memory"] = format_size(d.memory);
  o["alignment"] = d.alignment;
  if (d.max_alloc != std::numeric_limits<size_t>::max()) o["max_alloc"] = format_size(d.max_alloc);
  o["host_visible"] = d.host_visible;
  topology_memory::write(d, &o);
  topology_hosts::write_device_host(d, &o);
  o["caps"] = ojson{{"async", d.caps.async},
                    {"events", d.caps.events},
                    {"host_buffer", d.caps.host_buffer},
                    {"from_host_ptr", d.caps.buffer_from_host_ptr}};
  if (!d.cpy_tensor_async) o["caps"]["cpy_tensor_async"] = false;
  o["ops"] = ops_json(d.default_allow, d.op_rules);
  buffer_keys_json(d, &o);
  o["offload"] = ojson{{"enabled", d.offload.enabled},
                       {"min_batch", d.offload.min_batch},
                       {"ops", op_list(d.offload.ops)},
                       {"batch", d.offload.ggml_cuda_batch ? "ggml-cuda" : "tokens"}};
  ojson cost;
  cost["launch_overhead"] = format_duration_us(d.cost.launch_overhead_us);
  cost["flops_f32"] = format_flops(d.cost.flops_f32);
  cost["flops_f16"] = format_flops(d.cost.flops_f16);
  cost["flops_quant"] = format_flops(d.cost.flops_quant);
  cost["bandwidth"] = format_rate(d.cost.mem_bandwidth);
  ojson efficiency = ojson::object();  // only the classes that are not the peaks (a file without the key reads back)
  for (size_t k = 0; k < kKernelClassCount; ++k) {
    const Efficiency& e = d.cost.efficiency[k];
    if (e.compute == 1.0 && e.memory == 1.0) continue;
    efficiency[kernel_class_name(static_cast<KernelClass>(k))] = ojson{{"compute", e.compute}, {"memory", e.memory}};
  }
  if (!efficiency.empty()) cost["efficiency"] = std::move(efficiency);
  ojson overrides = ojson::array();
  for (const CostModel::Override& ov : d.cost.overrides) {
    ojson x;
    x["op"] = op_name(ov.op);
    if (ov.overhead_us >= 0) x["overhead"] = format_duration_us(ov.overhead_us);
    if (ov.flops >= 0) x["flops"] = format_flops(ov.flops);
    if (ov.fixed_us >= 0) x["fixed"] = format_duration_us(ov.fixed_us);
    overrides.push_back(std::move(x));
  }
  cost["overrides"] = std::move(overrides);
  o["cost"] = std::move(cost);
  o["host_link"] =
      ojson{{"bandwidth", format_rate(d.host_bandwidth)}, {"latency", format_duration_us(d.host_latency_us)}};
  if (d.row_rounding != DeviceConfig{}.row_rounding) o["row_rounding"] = d.row_rounding;
  return o;
}

}  // namespace

// ---------------------------------------------------------------------------------------------------------------
// Parsing, validation, presets

Result<TopologyConfig> parse_topology(std::string_view json_text, const std::string& source) {
  try {
    json root;
    TS_RETURN_IF_ERROR(parse_json(json_text, source, &root, "topology"));
    TopologyConfig topology = parse_root(root);
    Status valid = validate_topology(topology);
    if (!valid.ok()) return invalid(source + ": " + valid.message());
    return topology;
  } catch (const ParseProblem& p) {
    return invalid(error_prefix(source, p.path) + p.message);
  } catch (const std::exception& e) {
    return invalid(source + ": cannot read the topology: " + e.what());
  } catch (...) {
    return invalid(source + ": cannot read the topology (unknown error)");
  }
}

Status validate_topology(const TopologyConfig& t) {
  if (t.name.empty()) return invalid("name: expected a non-empty topology name");
  if (t.devices.empty()) {
    return invalid("devices: expected at least one device (and the last one of type \"cpu\")");
  }
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const std::string path = element("devices", i);
    TS_RETURN_IF_ERROR(validate_device(t.devices[i], path));
    for (size_t j = 0; j < i; ++j) {
      if (iequal(t.devices[j].name, t.devices[i].name)) {
        return invalid(child(path, "name") + ": duplicate device name " + quote(t.devices[i].name) + " (devices[" +
                       std::to_string(j) + "] is " + quote(t.devices[j].name) + "; names are case-insensitive)");
      }
    }
    const bool last = i + 1 == t.devices.size();
    if (!last && t.devices[i].type == DeviceType::kCpu) {
      return invalid(child(path, "type") +
                     ": only the last device may be of type \"cpu\" (the scheduler's last "
                     "backend is the CPU); move " +
                     quote(t.devices[i].name) + " to the end");
    }
    if (last && t.devices[i].type != DeviceType::kCpu) {
      return invalid(child(path, "type") +
                     ": expected \"cpu\": the last device must be the CPU (the scheduler's last "
                     "backend), got \"" +
                     device_type_key(t.devices[i].type) + "\"");
    }
  }
  TS_RETURN_IF_ERROR(topology_memory::validate(t));
  auto known = [&](const std::string& name) {
    if (iequal(name, "host")) return true;
    for (const DeviceConfig& d : t.devices) {
      if (iequal(d.name, name)) return true;
    }
    return false;
  };
  TS_RETURN_IF_ERROR(validate_buffer_type_names(t));
  for (size_t i = 0; i < t.links.size(); ++i) {
    const LinkConfig& l = t.links[i];
    const std::string path = element("links", i);
    for (const auto& [key, name] : {std::pair<const char*, const std::string*>{"a", &l.a}, {"b", &l.b}}) {
      if (!known(*name)) {
        std::string names;
        for (const DeviceConfig& d : t.devices) names += d.name + ", ";
        return invalid(child(path, key) + ": unknown device " + quote(*name) + " (expected one of: " + names + "host)");
      }
    }
    if (iequal(l.a, l.b)) return invalid(path + ": a link needs two different endpoints, got " + quote(l.a) + " twice");
    if (!positive_finite(l.bandwidth)) {
      return invalid(child(path, "bandwidth") + ": expected a bandwidth > 0, got " + number_text(l.bandwidth) + " B/s");
    }
    if (!non_negative_finite(l.latency_us)) return invalid(child(path, "latency") + ": expected a duration >= 0");
    for (size_t j = 0; j < i; ++j) {
      const LinkConfig& o = t.links[j];
      if ((iequal(o.a, l.a) && iequal(o.b, l.b)) || (iequal(o.a, l.b) && iequal(o.b, l.a))) {
        return invalid(path + ": a second link between " + quote(l.a) + " and " + quote(l.b) + " (links[" +
                       std::to_string(j) + "]; links are symmetric)");
      }
    }
  }
  return topology_hosts::validate(t);
}

std::string topology_to_json(const TopologyConfig& t) {
  try {
    ojson root;
    root["version"] = kTopologyVersion;
    root["name"] = t.name;
    if (!t.description.empty()) root["description"] = t.description;
    ojson devices = ojson::array();
    for (const DeviceConfig& d : t.devices) devices.push_back(device_json(d));
    root["devices"] = std::move(devices);
    ojson links = ojson::array();
    for (const LinkConfig& l : t.links) {
      links.push_back(ojson{{"a", l.a},
                            {"b", l.b},
                            {"bandwidth", format_rate(l.bandwidth)},
                            {"latency", format_duration_us(l.latency_us)}});
    }
    root["links"] = std::move(links);
    topology_hosts::write_hosts(t, &root);
    if (!t.sources.empty()) root["sources"] = t.sources;
    // Names that are not UTF-8 (impossible from a parsed file) are written with replacement characters.
    return root.dump(2, ' ', false, ojson::error_handler_t::replace) + "\n";
  } catch (const std::exception& e) {
    return std::string("{\"error\": \"cannot write the topology\"}\n");
  }
}

std::vector<std::string> topology_preset_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kTopologyPresetCount; ++i) names.emplace_back(detail::kTopologyPresetNames[i]);
  return names;
}

const char* topology_preset_text(const std::string& name) {
  for (size_t i = 0; i < detail::kTopologyPresetCount; ++i) {
    if (iequal(name, detail::kTopologyPresetNames[i])) return detail::kTopologyPresetTexts[i];
  }
  return nullptr;
}

Result<TopologyConfig> topology_preset(const std::string& name) {
  for (size_t i = 0; i < detail::kTopologyPresetCount; ++i) {
    if (iequal(name, detail::kTopologyPresetNames[i])) {
      return parse_topology(detail::kTopologyPresetTexts[i],
                            std::string("<preset ") + detail::kTopologyPresetNames[i] + ">");
    }
  }
  std::string names;
  for (const std::string& n : topology_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return Status(StatusCode::kNotFound, "no topology preset named " + quote(name) + " (presets: " + names + ")");
}

std::vector<std::string> device_preset_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kDevicePresetCount; ++i) names.emplace_back(detail::kDevicePresetNames[i]);
  return names;
}

// A device file is a topology file's device entry with its "sources": read as a topology of that device (and, for a
// GPU, the 1gpu preset's CPU beside it), so every key means what it means in a topology file.
Result<DevicePreset> device_preset(const std::string& name) {
  for (size_t i = 0; i < detail::kDevicePresetCount; ++i) {
    if (!iequal(name, detail::kDevicePresetNames[i])) continue;
    const std::string source = std::string("<device preset ") + detail::kDevicePresetNames[i] + ">";
    try {
      json dev = json::parse(detail::kDevicePresetTexts[i]);
      json root = json::object();
      root["version"] = kTopologyVersion;
      root["name"] = source;
      if (dev.contains("sources")) {
        root["sources"] = dev["sources"];
        dev.erase("sources");
      }
      root["devices"] = json::array({dev});
      if (dev.value("type", "") != "cpu") {
        const json one = json::parse(topology_preset_text("1gpu"));
        root["devices"].push_back(one["devices"].back());
      }
      auto t = parse_topology(root.dump(), source);
      if (!t.ok()) return t.status();
      DevicePreset out;
      out.device = t.value().devices.front();
      out.sources = t.value().sources;
      return out;
    } catch (const std::exception& e) {
      return Status(StatusCode::kInvalidArgument, source + ": " + e.what());
    }
  }
  std::string names;
  for (const std::string& n : device_preset_names()) names += (names.empty() ? "" : ", ") + n;
  return Status(StatusCode::kNotFound, "no device preset named " + quote(name) + " (devices: " + names + ")");
}

namespace {

// One side of a kernel profile: {"launch_overhead": "2 us", "efficiency": {...}}.
KernelProfile::Side parse_profile_side(const json& v, const std::string& path) {
  expect_object(v, path, {"launch_overhead", "efficiency"}, "{\"launch_overhead\": duration, \"efficiency\": {...}}");
  KernelProfile::Side side;
  if (const json* x = member(v, "launch_overhead")) {
    side.launch_overhead_us = get_duration(*x, child(path, "launch_overhead"));
  }
  CostModel c;
  if (const json* x = member(v, "efficiency")) {
    parse_efficiency(*x, child(path, "efficiency"), &c);
    side.efficiency = c.efficiency;
  }
  return side;
}

}  // namespace

Result<KernelProfile> parse_kernel_profile(std::string_view text, const std::string& source) {
  try {
    json root;
    TS_RETURN_IF_ERROR(parse_json(text, source, &root, "kernel profile"));
    expect_object(root, "", {"version", "name", "description", "gpu", "cpu", "sources", "fit"},
                  "a kernel profile object");
    KernelProfile p;
    if (const json* x = member(root, "name")) p.name = get_string(*x, "name");
    if (const json* x = member(root, "description")) p.description = get_string(*x, "description");
    if (const json* x = member(root, "gpu")) p.gpu = parse_profile_side(*x, "gpu");
    if (const json* x = member(root, "cpu")) p.cpu = parse_profile_side(*x, "cpu");
    if (const json* x = member(root, "sources")) {
      p.sources = get_list<std::string>(*x, "sources", "strings (where the figures come from)",
                                        [](const json& e, const std::string& ep) { return get_string(e, ep); });
    }
    // the profile applied to a device must be a valid cost model: check each side on the default one
    for (const auto& [key, side] :
         {std::pair<const char*, const std::optional<KernelProfile::Side>&>{"gpu", p.gpu}, {"cpu", p.cpu}}) {
      if (!side) continue;
      CostModel c;
      if (side->launch_overhead_us) c.launch_overhead_us = *side->launch_overhead_us;
      if (side->efficiency) c.efficiency = *side->efficiency;
      const Status v = validate_cost(c, key);
      if (!v.ok()) return invalid(source + ": " + v.message());
    }
    return p;
  } catch (const ParseProblem& pr) {
    return invalid(error_prefix(source, pr.path) + pr.message);
  } catch (const std::exception& e) {
    return invalid(source + ": cannot read the kernel profile: " + e.what());
  }
}

std::vector<std::string> kernel_profile_names() {
  std::vector<std::string> names;
  for (size_t i = 0; i < detail::kKernelProfileCount; ++i) names.emplace_back(detail::kKernelProfileNames[i]);
  return names;
}

Result<KernelProfile> load_kernel_profile(const std::string& name_or_path) {
  for (size_t i = 0; i < detail::kKernelProfileCount; ++i) {
    if (iequal(name_or_path, detail::kKernelProfileNames[i])) {
      return parse_kernel_profile(detail::kKernelProfileTexts[i],
                                  std::string("<kernel profile ") + detail::kKernelProfileNames[i] + ">");
    }
  }
  std::error_code ec;
  if (!std::filesystem::exists(name_or_path, ec)) {
    std::string names;
    for (const std::string& n : kernel_profile_names()) names += (names.empty() ? "" : ", ") + n;
    return Status(StatusCode::kNotFound,
                  "no kernel profile or file named " + quote(name_or_path) + " (profiles: " + names + ")");
  }
  Result<std::string> text = read_text_file(name_or_path, "kernel profile");
  if (!text.ok()) return text.status();
  return parse_kernel_profile(text.value(), name_or_path);
}

void apply_kernel_profile(const KernelProfile& p, TopologyConfig* t) {
  for (DeviceConfig& d : t->devices) {
    const std::optional<KernelProfile::Side>& side = d.type == DeviceType::kCpu ? p.cpu : p.gpu;
    if (!side) continue;
    if (side->launch_overhead_us) d.cost.launch_overhead_us = *side->launch_overhead_us;
    if (side->efficiency) d.cost.efficiency = *side->efficiency;
  }
  for (const std::string& src : p.sources) {
    if (std::find(t->sources.begin(), t->sources.end(), src) == t->sources.end()) t->sources.push_back(src);
  }
  t->name += " --kernels " + p.name;
}

Result<TopologyConfig> load_topology_file(const std::string& path) {
  Result<std::string> text = read_text_file(path, "topology file");
  if (!text.ok()) return text.status();
  return parse_topology(text.value(), path);
}

Result<TopologyConfig> load_topology(const std::string& name_or_path) {
  if (topology_preset_text(name_or_path) != nullptr) return topology_preset(name_or_path);
  std::error_code ec;
  const bool looks_like_path =
      name_or_path.find('/') != std::string::npos || (name_or_path.size() > 5 && name_or_path.ends_with(".json"));
  if (!looks_like_path && !std::filesystem::exists(name_or_path, ec)) {
    std::string names;
    for (const std::string& n : topology_preset_names()) names += (names.empty() ? "" : ", ") + n;
    return Status(StatusCode::kNotFound,
                  "no topology preset or file named " + quote(name_or_path) + " (presets: " + names + ")");
  }
  return load_topology_file(name_or_path);
}

}  // namespace tessera::harness
