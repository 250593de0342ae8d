// Topology files: a device's buffer type keys, "padding" (its main buffer type's alloc_size) and "buffer_types"
// (extra buffer types for weights with padding and op rules of their own): parsing with located errors, validation
// and JSON output (docs/topology.md, "Buffer types and padding").
#include <strings.h>

#include "common/json_read.h"
#include "topology_detail.h"

namespace tessera::harness::topology_detail {

using namespace json_read;
using namespace tessera::sim;

namespace {

PaddingRule parse_padding_rule(const json& v, const std::string& path) {
  expect_object(v, path, {"ops", "types", "row_multiple", "extra", "f16_kv_copies", "metal_extras", "note"},
                "a padding rule such as {\"types\": [\"q4_0\"], \"row_multiple\": 512}");
  PaddingRule r;
  if (const json* x = member(v, "ops"))
    r.ops = get_list<Op>(*x, child(path, "ops"), "op names such as [\"MUL_MAT\"]", get_op);
  if (const json* x = member(v, "types"))
    r.types = get_list<Type>(*x, child(path, "types"), "type names such as [\"q4_0\"]", get_type);
  if (const json* x = member(v, "row_multiple")) {
    r.row_multiple =
        get_count(*x, child(path, "row_multiple"), "a whole number of values from 0 to 1048576", kMaxRowMultiple);
  }
  if (const json* x = member(v, "extra")) r.extra = get_size(*x, child(path, "extra"));
  if (const json* x = member(v, "f16_kv_copies")) r.f16_kv_copies = get_bool(*x, child(path, "f16_kv_copies"));
  if (const json* x = member(v, "metal_extras")) r.metal_extras = get_bool(*x, child(path, "metal_extras"));
  if (const json* x = member(v, "note")) r.note = get_string(*x, child(path, "note"));
  if (r.row_multiple == 0 && r.extra == 0 && !r.f16_kv_copies && !r.metal_extras)
    fail(path,
         "a padding rule needs \"row_multiple\" > 0, \"extra\" > 0, \"f16_kv_copies\" or \"metal_extras\": true (else "
         "it "
         "pads nothing)");
  return r;
}

std::vector<PaddingRule> parse_padding(const json& v, const std::string& path) {
  return get_list<PaddingRule>(v, path, "padding rule objects", parse_padding_rule);
}

BufferTypeConfig parse_buffer_type(const json& v, const std::string& path) {
  expect_object(v, path, {"name", "description", "padding", "ops"},
                "a buffer type object such as {\"name\": \"CPU_REPACK\", \"ops\": {...}}");
  BufferTypeConfig b;
  b.name = get_string(required(v, path, "name", "the buffer type's name, e.g. \"CPU_REPACK\""), child(path, "name"));
  if (const json* x = member(v, "description")) b.description = get_string(*x, child(path, "description"));
  if (const json* x = member(v, "padding")) b.padding = parse_padding(*x, child(path, "padding"));
  if (const json* x = member(v, "ops")) parse_ops(*x, child(path, "ops"), &b.default_allow, &b.op_rules);
  return b;
}

Status validate_padding(const std::vector<PaddingRule>& rules, const std::string& path) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const PaddingRule& r = rules[i];
    const std::string p = element(path, i);
    if (r.row_multiple < 0 || r.row_multiple > kMaxRowMultiple)
      return invalid(child(p, "row_multiple") + ": expected a whole number from 0 to 1048576");
    if (r.extra > kMaxPaddingExtra) return invalid(child(p, "extra") + ": expected a size up to 1 GiB");
    if (r.row_multiple == 0 && r.extra == 0 && !r.f16_kv_copies && !r.metal_extras)
      return invalid(p + ": a padding rule needs row_multiple > 0, extra > 0 or f16_kv_copies (else it pads nothing)");
    for (Op op : r.ops) {
      if (static_cast<int>(op) <= 0 || static_cast<int>(op) >= kOpCount)
        return invalid(child(p, "ops") + ": expected op names");
    }
    for (Type t : r.types) {
      if (!type_is_valid(t)) return invalid(child(p, "types") + ": expected type names");
    }
  }
  return Status::Ok();
}

ojson padding_json(const std::vector<PaddingRule>& rules) {
  ojson out = ojson::array();
  for (const PaddingRule& r : rules) {
    ojson o;
    if (!r.ops.empty()) o["ops"] = op_list(r.ops);
    if (!r.types.empty()) o["types"] = type_list(r.types);
    if (r.row_multiple != 0) o["row_multiple"] = r.row_multiple;
    if (r.extra != 0) o["extra"] = r.extra;
    if (r.f16_kv_copies) o["f16_kv_copies"] = true;
    if (r.metal_extras) o["metal_extras"] = true;
    if (!r.note.empty()) o["note"] = r.note;
    out.push_back(std::move(o));
  }
  return out;
}

}  // namespace

void parse_buffer_keys(const json& device, const std::string& path, DeviceConfig* d) {
  if (const json* x = member(device, "padding")) d->padding = parse_padding(*x, child(path, "padding"));
  if (const json* x = member(device, "buffer_types")) {
    d->buffer_types =
        get_list<BufferTypeConfig>(*x, child(path, "buffer_types"), "buffer type objects", parse_buffer_type);
  }
}

Status validate_buffer_keys(const DeviceConfig& d, const std::string& path) {
  TS_RETURN_IF_ERROR(validate_padding(d.padding, child(path, "padding")));
  for (size_t i = 0; i < d.buffer_types.size(); ++i) {
    const BufferTypeConfig& b = d.buffer_types[i];
    const std::string p = element(child(path, "buffer_types"), i);
    if (b.name.empty()) return invalid(child(p, "name") + ": expected a non-empty buffer type name");
    TS_RETURN_IF_ERROR(validate_padding(b.padding, child(p, "padding")));
    TS_RETURN_IF_ERROR(validate_rules(b.op_rules, child(child(p, "ops"), "rules")));
  }
  return Status::Ok();
}

Status validate_buffer_type_names(const TopologyConfig& t) {
  // Every name a buffer type of the topology goes by: devices (their main buffer type), "<device>_Host",
  // "<device>_Mapped" and the extra buffer types, with the path that gives it.
  struct Name {
    std::string name, path;
  };
  std::vector<Name> taken;
  for (size_t i = 0; i < t.devices.size(); ++i) {
    const DeviceConfig& d = t.devices[i];
    const std::string p = child(element("devices", i), "name");
    taken.push_back({d.name, p});
    taken.push_back({d.name + "_Host", p + " (its host buffer type)"});
    taken.push_back({d.name + "_Mapped", p + " (its mapped buffer type)"});
  }
  for (size_t i = 0; i < t.devices.size(); ++i) {
    for (size_t k = 0; k < t.devices[i].buffer_types.size(); ++k) {
      const std::string& name = t.devices[i].buffer_types[k].name;
      const std::string p = child(element(child(element("devices", i), "buffer_types"), k), "name");
      if (iequal(name, "host")) return invalid(p + ": \"host\" is reserved for link endpoints (host memory)");
      for (const Name& n : taken) {
        if (iequal(n.name, name)) {
          return invalid(p + ": buffer type name " + quote(name) + " is taken by " + n.path +
                         " (buffer type names are case-insensitive)");
        }
      }
      taken.push_back({name, p});
    }
  }
  return Status::Ok();
}

void buffer_keys_json(const DeviceConfig& d, ojson* device) {
  if (!d.padding.empty()) (*device)["padding"] = padding_json(d.padding);
  if (d.buffer_types.empty()) return;
  ojson list = ojson::array();
  for (const BufferTypeConfig& b : d.buffer_types) {
    ojson o;
    o["name"] = b.name;
    if (!b.description.empty()) o["description"] = b.description;
    if (!b.padding.empty()) o["padding"] = padding_json(b.padding);
    o["ops"] = ops_json(b.default_allow, b.op_rules);
    list.push_back(std::move(o));
  }
  (*device)["buffer_types"] = std::move(list);
}

}  // namespace tessera::harness::topology_detail
