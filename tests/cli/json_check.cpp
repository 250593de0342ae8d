// tessera_json_check SCHEMA [FILE]: validates a JSON document (FILE, or standard input) against a schema file with the
// subset of JSON Schema that tests/support/json_schema.h checks. Exit 0 valid; 1 invalid (each violation printed);
// 2 a file that cannot be read or is not JSON.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "support/json_schema.h"

namespace {

bool read_json(const char* path, std::istream& in, nlohmann::json* out) {
  try {
    *out = nlohmann::json::parse(in);
    return true;
  } catch (const nlohmann::json::exception& e) {
    std::fprintf(stderr, "json_check: %s: not JSON: %s\n", path, e.what());
    return false;
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: tessera_json_check SCHEMA [FILE]\n");
    return 2;
  }
  std::ifstream schema_in(argv[1]);
  if (!schema_in) {
    std::fprintf(stderr, "json_check: cannot open %s\n", argv[1]);
    return 2;
  }
  nlohmann::json schema, doc;
  if (!read_json(argv[1], schema_in, &schema)) return 2;
  if (argc == 3) {
    std::ifstream in(argv[2]);
    if (!in) {
      std::fprintf(stderr, "json_check: cannot open %s\n", argv[2]);
      return 2;
    }
    if (!read_json(argv[2], in, &doc)) return 2;
  } else if (!read_json("(standard input)", std::cin, &doc)) {
    return 2;
  }
  const auto errors = tessera::testing::JsonSchemaValidator::validate(schema, doc);
  for (const std::string& e : errors)
    std::fprintf(stderr, "json_check: %s: %s\n", argc == 3 ? argv[2] : "-", e.c_str());
  return errors.empty() ? 0 : 1;
}
