// A validator for the subset of JSON Schema (draft 2020-12) that docs/json/*.schema.json use: type (a name or a
// list), properties, required, additionalProperties (true or false), items, enum and minimum, plus the annotations
// $schema, $id, title, description and $comment. A schema that uses any other keyword is refused (so a schema file
// cannot lean on a rule this validator would silently skip). Header-only: the unit tests and tests/cli/json_check
// use it.
#pragma once

#include <nlohmann/json.hpp>

#include <set>
#include <string>
#include <vector>

namespace tessera::testing {

class JsonSchemaValidator {
 public:
  // Every violation of `schema` by `value`, each as "PATH: what" (PATH a JSON pointer, "" for the whole document);
  // empty when the value is valid. Keywords this validator does not check come first, as "schema PATH: ...".
  static std::vector<std::string> validate(const nlohmann::json& schema, const nlohmann::json& value) {
    std::vector<std::string> errors = schema_errors(schema);
    check(schema, value, "", &errors);
    return errors;
  }

  // The keywords of `schema` and of every schema inside it (properties, items, additionalProperties) that this
  // validator does not check, each as "schema PATH: ..."; empty when it checks all of them.
  static std::vector<std::string> schema_errors(const nlohmann::json& schema, const std::string& path = "") {
    std::vector<std::string> errors;
    if (schema.is_boolean()) return errors;
    if (!schema.is_object()) {
      errors.push_back("schema " + path + ": a schema must be an object or a boolean");
      return errors;
    }
    static const std::set<std::string> known = {"$schema", "$id",        "title",    "description",          "$comment",
                                                "type",    "properties", "required", "additionalProperties", "items",
                                                "enum",    "minimum"};
    for (const auto& [key, unused] : schema.items()) {
      if (known.count(key) == 0) errors.push_back("schema " + path + ": unsupported keyword \"" + key + "\"");
    }
    auto add = [&errors](const std::vector<std::string>& more) {
      errors.insert(errors.end(), more.begin(), more.end());
    };
    if (schema.contains("properties") && schema["properties"].is_object()) {
      for (const auto& [key, sub] : schema["properties"].items()) {
        add(schema_errors(sub, path + "/properties/" + pointer_escape(key)));
      }
    }
    if (schema.contains("items")) add(schema_errors(schema["items"], path + "/items"));
    if (schema.contains("additionalProperties")) {
      add(schema_errors(schema["additionalProperties"], path + "/additionalProperties"));
    }
    return errors;
  }

 private:
  static bool has_type(const nlohmann::json& v, const std::string& t) {
    if (t == "null") return v.is_null();
    if (t == "boolean") return v.is_boolean();
    if (t == "integer") {
      if (v.is_number_integer()) return true;
      if (!v.is_number_float()) return false;
      const double d = v.get<double>();
      return d == static_cast<double>(static_cast<long long>(d));  // a number with no fraction (JSON Schema)
    }
    if (t == "number") return v.is_number();
    if (t == "string") return v.is_string();
    if (t == "array") return v.is_array();
    if (t == "object") return v.is_object();
    return false;
  }

  static std::string pointer_escape(const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '~') {
        out += "~0";
      } else if (c == '/') {
        out += "~1";
      } else {
        out += c;
      }
    }
    return out;
  }

  static void check(const nlohmann::json& schema, const nlohmann::json& v, const std::string& path,
                    std::vector<std::string>* errors) {
    if (schema.is_boolean()) {
      if (!schema.get<bool>()) errors->push_back(path + ": not allowed here (schema false)");
      return;
    }
    if (!schema.is_object()) return;  // reported by schema_errors
    if (schema.contains("type")) {
      const nlohmann::json& t = schema["type"];
      std::vector<std::string> names;
      if (t.is_string()) names.push_back(t.get<std::string>());
      if (t.is_array()) {
        for (const auto& n : t) {
          if (n.is_string()) names.push_back(n.get<std::string>());
        }
      }
      bool any = false;
      for (const std::string& n : names) any = any || has_type(v, n);
      if (!any) {
        errors->push_back(path + ": " + v.type_name() + " " + v.dump() + " is not of type " + t.dump());
        return;  // the other keywords would only repeat it
      }
    }
    if (schema.contains("enum")) {
      bool found = false;
      for (const auto& e : schema["enum"]) found = found || e == v;
      if (!found) errors->push_back(path + ": " + v.dump() + " is not one of " + schema["enum"].dump());
    }
    if (schema.contains("minimum") && v.is_number() && v.get<double>() < schema["minimum"].get<double>()) {
      errors->push_back(path + ": " + v.dump() + " is below the minimum " + schema["minimum"].dump());
    }
    if (v.is_object()) {
      if (schema.contains("required")) {
        for (const auto& r : schema["required"]) {
          if (!v.contains(r.get<std::string>())) {
            errors->push_back(path + ": the required key \"" + r.get<std::string>() + "\" is missing");
          }
        }
      }
      const bool closed = schema.contains("additionalProperties") && schema["additionalProperties"] == false;
      for (const auto& [key, value] : v.items()) {
        const std::string at = path + "/" + pointer_escape(key);
        if (schema.contains("properties") && schema["properties"].contains(key)) {
          check(schema["properties"][key], value, at, errors);
        } else if (closed) {
          errors->push_back(at + ": the key \"" + key + "\" is not in the schema");
        } else if (schema.contains("additionalProperties")) {
          check(schema["additionalProperties"], value, at, errors);
        }
      }
    }
    if (v.is_array() && schema.contains("items")) {
      for (size_t i = 0; i < v.size(); ++i) check(schema["items"], v[i], path + "/" + std::to_string(i), errors);
    }
  }
};

}  // namespace tessera::testing
