// The JSON Schema subset validator the --json tests use (tests/support/json_schema.h): each rule it checks, with
// hand-written schemas and documents, and the schema files of docs/json/ use no keyword it would skip.
#include "support/json_schema.h"

#include <gtest/gtest.h>

#include <fstream>
#include <string>

namespace {

using nlohmann::json;
using tessera::testing::JsonSchemaValidator;

const json kSchema = json::parse(R"({
  "type": "object",
  "properties": {
    "format": {"type": "string", "enum": ["tessera-plan"]},
    "n": {"type": "integer", "minimum": 0},
    "ratio": {"type": ["number", "null"]},
    "list": {"type": "array", "items": {"type": "object", "properties": {"name": {"type": "string"}},
                                         "required": ["name"], "additionalProperties": false}}
  },
  "required": ["format", "n"],
  "additionalProperties": false
})");

std::string joined(const std::vector<std::string>& errors) {
  std::string s;
  for (const std::string& e : errors) s += e + "\n";
  return s;
}

TEST(JsonSchema, AcceptsADocumentThatFollowsIt) {
  const json doc = json::parse(R"({"format": "tessera-plan", "n": 3, "ratio": null, "list": [{"name": "a"}]})");
  EXPECT_EQ(joined(JsonSchemaValidator::validate(kSchema, doc)), "");
}

TEST(JsonSchema, AnUndocumentedKeyFails) {
  const json doc = json::parse(R"({"format": "tessera-plan", "n": 3, "extra": 1})");
  EXPECT_EQ(joined(JsonSchemaValidator::validate(kSchema, doc)), "/extra: the key \"extra\" is not in the schema\n");
}

TEST(JsonSchema, AMissingRequiredKeyFails) {
  const json doc = json::parse(R"({"format": "tessera-plan"})");
  EXPECT_EQ(joined(JsonSchemaValidator::validate(kSchema, doc)), ": the required key \"n\" is missing\n");
}

TEST(JsonSchema, TypeEnumMinimumAndItemsAreChecked) {
  const json doc =
      json::parse(R"({"format": "tessera-run", "n": -1, "ratio": "x", "list": [{"name": "a"}, {"name": 2, "b": 0}]})");
  EXPECT_EQ(joined(JsonSchemaValidator::validate(kSchema, doc)),
            "/format: \"tessera-run\" is not one of [\"tessera-plan\"]\n"  // (keys in nlohmann::json's order)
            "/list/1/b: the key \"b\" is not in the schema\n"
            "/list/1/name: number 2 is not of type \"string\"\n"
            "/n: -1 is below the minimum 0\n"
            "/ratio: string \"x\" is not of type [\"number\",\"null\"]\n");
}

TEST(JsonSchema, IntegerIsNotAnyNumber) {
  const json schema = json::parse(R"({"type": "integer"})");
  EXPECT_TRUE(JsonSchemaValidator::validate(schema, json::parse("7")).empty());
  EXPECT_TRUE(JsonSchemaValidator::validate(schema, json::parse("7.0")).empty());  // a number with no fraction
  EXPECT_FALSE(JsonSchemaValidator::validate(schema, json::parse("7.5")).empty());
}

TEST(JsonSchema, AKeywordItDoesNotCheckIsRefused) {
  const json schema = json::parse(R"({"type": "string", "pattern": "^a"})");
  EXPECT_EQ(joined(JsonSchemaValidator::validate(schema, json("abc"))), "schema : unsupported keyword \"pattern\"\n");
}

TEST(JsonSchema, NestedUnsupportedKeywordsAreFound) {
  const json schema =
      json::parse(R"({"type": "object", "properties": {"a": {"type": "array", "items": {"const": 1}}}})");
  EXPECT_EQ(joined(JsonSchemaValidator::schema_errors(schema)),
            "schema /properties/a/items: unsupported keyword \"const\"\n");
}

// The schema files of docs/json/ use only the keywords above, and each names its format and version 1.
TEST(JsonSchema, TheDocumentedSchemasUseOnlyTheSubset) {
  for (const char* name : {"plan", "run", "fit", "repro", "topologies", "inspect"}) {
    const std::string path = std::string(TESSERA_SOURCE_DIR) + "/docs/json/" + name + ".schema.json";
    std::ifstream in(path);
    ASSERT_TRUE(in) << path;
    const json schema = json::parse(in);
    EXPECT_EQ(schema["properties"]["format"]["enum"], json::array({std::string("tessera-") + name})) << path;
    EXPECT_EQ(schema["properties"]["version"]["enum"], json::array({1})) << path;
    EXPECT_EQ(joined(JsonSchemaValidator::schema_errors(schema)), "") << path;
  }
}

}  // namespace
