// tessera inspect (inspect.h).
#include "tessera/harness/inspect/inspect.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "tessera/harness/common/text_table.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/sim/simulator.h"

namespace tessera::harness {

namespace {

using ojson = nlohmann::ordered_json;

// The layer of a tensor as placement counts it (layer_of_name: "blk.12.attn_q.weight" -> 12, -1 outside the layers),
// and sizes as the tool prints them (format_bytes).
int layer_of(const std::string& name) { return layer_of_name(name.c_str()); }
std::string human(uint64_t bytes) { return sim::format_bytes(static_cast<size_t>(bytes)); }

std::string shape(const gguf::TensorInfo& t) {
  std::string s = "[";
  for (uint32_t d = 0; d < t.n_dims; ++d) s += format_message(d == 0 ? "%" PRId64 : ", %" PRId64, t.ne[d]);
  return s + "]";
}

struct TypeTotal {
  uint64_t tensors = 0, elements = 0, bytes = 0;
};

struct Summary {
  std::map<int, std::vector<const gguf::TensorInfo*>> by_layer;  // -1 first: the tensors outside the layers
  std::map<std::string, TypeTotal> by_type;
  TypeTotal all;
};

Summary summarize(const gguf::Model& model) {
  Summary s;
  for (const gguf::Model::TensorRef& ref : model.tensors) {
    const gguf::TensorInfo& t = model.tensor(ref);
    s.by_layer[layer_of(t.name)].push_back(&t);
    for (TypeTotal* tot : {&s.by_type[gguf::type_name(t.type)], &s.all}) {
      tot->tensors += 1;
      tot->elements += static_cast<uint64_t>(t.n_elements());
      tot->bytes += t.size;
    }
  }
  return s;
}

double bits_per_weight(const TypeTotal& t) {
  return t.elements == 0 ? 0.0 : static_cast<double>(t.bytes) * 8.0 / static_cast<double>(t.elements);
}

ojson value_json(const gguf::Value& v, bool full) {
  if (auto x = v.as_unsigned()) return *x;
  if (auto x = v.as_signed()) return *x;
  if (auto x = v.as_f32()) return *x;
  if (auto x = v.as_f64()) return *x;
  if (auto x = v.as_bool()) return *x;
  if (const std::string* x = v.as_string()) return *x;
  const gguf::Array* a = v.as_array();
  if (a == nullptr) return nullptr;
  ojson j = {{"array", gguf::value_type_name(a->type)}, {"length", a->size}};
  if (a->skipped) {
    j["skipped"] = true;
    return j;
  }
  ojson values = ojson::array();
  const size_t n = full ? a->values.size() : std::min<size_t>(a->values.size(), 8);
  for (size_t i = 0; i < n; ++i) values.push_back(value_json(a->values[i], full));
  j["values"] = values;
  if (n < a->values.size()) j["shortened"] = true;
  return j;
}

bool wanted(const InspectOptions& o, const std::string& key) {
  for (const std::string& k : o.arrays) {
    if (k == key) return true;
  }
  return false;
}

std::string text_report(const gguf::Model& model, const InspectOptions& o) {
  const gguf::File& f = model.metadata();
  const Summary s = summarize(model);
  std::string out;
  out += format_message("%s: GGUF v%u, %s, %zu shard%s, %zu tensors, %s of tensor data, %zu metadata keys\n",
                        f.source.c_str(), f.version, gguf::data_state_name(f.data_state()), model.shards.size(),
                        model.shards.size() == 1 ? "" : "s", model.tensors.size(), human(s.all.bytes).c_str(),
                        f.metadata.size());
  out += "\nmetadata:\n";
  // Key, type, value. --wide: the fixed columns, each value on its line; else the columns as wide as their cells
  // (a key longer than 44 characters cut with "..."), and a value that does not fit in 80 columns wrapped under its
  // column.
  size_t key_width = 0, type_width = 0;
  for (const gguf::KeyValue& kv : f.metadata) {
    key_width = std::max(key_width, std::min<size_t>(text_width(kv.key), 44));
    type_width = std::max(type_width, text_width(gguf::value_type_name(kv.value.type())));
  }
  for (const gguf::KeyValue& kv : f.metadata) {
    const bool full = wanted(o, kv.key);
    const std::string value = kv.value.to_string(full ? SIZE_MAX : 8);
    if (o.wide) {
      out += format_message("  %-44s %-8s %s\n", kv.key.c_str(), gguf::value_type_name(kv.value.type()), value.c_str());
      continue;
    }
    const std::string key = ellipsize(kv.key, key_width);
    const std::string type = gguf::value_type_name(kv.value.type());
    const std::string first = "  " + key + std::string(key_width - text_width(key) + 2, ' ') + type +
                              std::string(type_width - text_width(type) + 2, ' ');
    // (a value that fits is printed as it is: wrapping would fold the spaces inside a string)
    out += text_width(first) + text_width(value) <= kTableWidth
               ? first + value + "\n"
               : wrap_lines(first, value, std::string(text_width(first), ' '));
  }
  out += "\ntensors by layer:\n";
  using Align = TextTable::Align;
  TextTable tensors({{"name", Align::kLeft, 36, true},
                     {"type", Align::kLeft, 7},
                     {"shape", Align::kLeft, 24},
                     {"size", Align::kRight, 0}});
  tensors.header(false).indent("    ");
  for (const auto& [layer, list] : s.by_layer) {
    uint64_t bytes = 0;
    for (const gguf::TensorInfo* t : list) bytes += t->size;
    if (layer < 0) {
      tensors.add_line(format_message("  (outside the layers): %zu tensors, %s", list.size(), human(bytes).c_str()));
    } else {
      tensors.add_line(format_message("  layer %d: %zu tensors, %s", layer, list.size(), human(bytes).c_str()));
    }
    for (const gguf::TensorInfo* t : list) {
      tensors.add({t->name, gguf::type_name(t->type), shape(*t), human(t->size)});
    }
  }
  out += tensors.render(o.wide);
  out += "\ntotals by type:\n";
  TextTable totals({{"type", Align::kLeft, 8},
                    {"tensors", Align::kRight, 8},
                    {"elements", Align::kRight, 16},
                    {"bytes", Align::kRight, 16},
                    {"bits/weight", Align::kRight, 12}});
  totals.indent("  ");
  for (const auto& [type, t] : s.by_type) {
    totals.add({type, std::to_string(t.tensors), std::to_string(t.elements), std::to_string(t.bytes),
                format_message("%.4f", bits_per_weight(t))});
  }
  totals.add({"all", std::to_string(s.all.tensors), std::to_string(s.all.elements), std::to_string(s.all.bytes),
              format_message("%.4f", bits_per_weight(s.all))},
             "  (" + human(s.all.bytes) + ")");
  out += totals.render(o.wide);
  return out;
}

std::string json_report(const gguf::Model& model, const InspectOptions& o) {
  const gguf::File& f = model.metadata();
  const Summary s = summarize(model);
  ojson j;
  j["format"] = "tessera-inspect";
  j["version"] = 1;
  j["file"] = f.source;
  j["gguf_version"] = f.version;
  j["data"] = gguf::data_state_name(f.data_state());
  j["shards"] = model.shards.size();
  j["alignment"] = f.alignment;
  ojson meta = ojson::array();
  for (const gguf::KeyValue& kv : f.metadata) {
    meta.push_back({{"key", kv.key},
                    {"type", gguf::value_type_name(kv.value.type())},
                    {"value", value_json(kv.value, wanted(o, kv.key))}});
  }
  j["metadata"] = meta;
  ojson tensors = ojson::array();
  for (const gguf::Model::TensorRef& ref : model.tensors) {
    const gguf::TensorInfo& t = model.tensor(ref);
    ojson dims = ojson::array();
    for (uint32_t d = 0; d < t.n_dims; ++d) dims.push_back(t.ne[d]);
    tensors.push_back({{"name", t.name},
                       {"layer", layer_of(t.name)},
                       {"type", gguf::type_name(t.type)},
                       {"shape", dims},
                       {"bytes", t.size},
                       {"shard", ref.shard},
                       {"offset", t.offset}});
  }
  j["tensors"] = tensors;
  ojson totals = ojson::array();
  for (const auto& [type, t] : s.by_type) {
    totals.push_back({{"type", type},
                      {"tensors", t.tensors},
                      {"elements", t.elements},
                      {"bytes", t.bytes},
                      {"bits_per_weight", bits_per_weight(t)}});
  }
  j["totals"] = totals;
  j["total"] = {{"tensors", s.all.tensors},
                {"elements", s.all.elements},
                {"bytes", s.all.bytes},
                {"bits_per_weight", bits_per_weight(s.all)}};
  return j.dump(2) + "\n";
}

}  // namespace

std::string inspect_report(const gguf::Model& model, const InspectOptions& options) {
  return options.json ? json_report(model, options) : text_report(model, options);
}

Result<std::string> inspect_file(const std::string& path, const InspectOptions& options) {
  gguf::ReadOptions read;
  read.keep_keys = options.arrays;
  auto model = gguf::read_model(path, read);
  if (!model.ok()) return model.status();
  for (const std::string& key : options.arrays) {
    const gguf::Value* v = model.value().metadata().find_value(key);
    if (v == nullptr) return Status(StatusCode::kNotFound, path + ": --array " + key + ": no such key");
    if (v->as_array() == nullptr) {
      return Status(StatusCode::kInvalidArgument,
                    path + ": --array " + key + ": a " + gguf::value_type_name(v->type()) + ", not an array");
    }
  }
  return inspect_report(model.value(), options);
}

}  // namespace tessera::harness
