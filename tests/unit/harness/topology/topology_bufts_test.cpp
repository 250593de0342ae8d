// Topology files: a device's "padding" and "buffer_types" keys (docs/topology.md, "Buffer types and padding"): what
// they parse to, the JSON round trip, and malformed input rejected with the file, the JSON path and what was expected.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

// A GPU and the CPU; `gpu_keys` and `cpu_keys` are spliced into the two device objects.
std::string topo(const std::string& gpu_keys, const std::string& cpu_keys = "") {
  return R"({"name": "t", "devices": [{"name": "gpu0")" + (gpu_keys.empty() ? "" : ", " + gpu_keys) +
         R"(}, {"name": "cpu", "type": "cpu", "wraps": "CPU", "host_visible": true)" +
         (cpu_keys.empty() ? "" : ", " + cpu_keys) + "}]}";
}

std::string bufts_error_of(const std::string& text) {
  auto r = parse_topology(text, "t.json");
  return r.ok() ? "(parsed)" : r.status().message();
}

constexpr const char* kRepack =
    R"("buffer_types": [{"name": "CPU_REPACK", "description": "repacked weights",
        "padding": [{"extra": 64}],
        "ops": {"default": "deny", "rules": [{"allow": ["MUL_MAT"], "src0_types": ["q4_0"], "note": "GEMM"}]}}])";

}  // namespace

TEST(TopologyBufferTypes, PaddingAndBufferTypesParse) {
  auto r =
      parse_topology(topo(R"("padding": [{"types": ["q4_0", "q6_k"], "row_multiple": 512, "note": "MATRIX_ROW_PADDING"},
                          {"ops": ["MUL_MAT"], "extra": "1 KiB"}])",
                          kRepack),
                     "t.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const DeviceConfig& g = r->devices[0];
  ASSERT_EQ(g.padding.size(), 2u);
  EXPECT_EQ(g.padding[0].types, (std::vector<Type>{Type::kQ4_0, Type::kQ6_K}));
  EXPECT_EQ(g.padding[0].row_multiple, 512);
  EXPECT_EQ(g.padding[0].extra, 0u);
  EXPECT_EQ(g.padding[0].note, "MATRIX_ROW_PADDING");
  EXPECT_EQ(g.padding[1].ops, (std::vector<Op>{Op::kMulMat}));
  EXPECT_EQ(g.padding[1].extra, 1024u);
  const DeviceConfig& c = r->devices[1];
  ASSERT_EQ(c.buffer_types.size(), 1u);
  const BufferTypeConfig& b = c.buffer_types[0];
  EXPECT_EQ(b.name, "CPU_REPACK");
  EXPECT_EQ(b.description, "repacked weights");
  ASSERT_EQ(b.padding.size(), 1u);
  EXPECT_EQ(b.padding[0].extra, 64u);
  EXPECT_FALSE(b.default_allow);
  ASSERT_EQ(b.op_rules.size(), 1u);
  EXPECT_TRUE(b.op_rules[0].allow);
  EXPECT_EQ(b.op_rules[0].ops, (std::vector<Op>{Op::kMulMat}));
  EXPECT_EQ(b.op_rules[0].src0_types, (std::vector<Type>{Type::kQ4_0}));
  EXPECT_EQ(b.op_rules[0].note, "GEMM");
}

TEST(TopologyBufferTypes, RoundTripKeepsEveryField) {
  auto r = parse_topology(
      topo(R"("padding": [{"types": ["q4_0"], "row_multiple": 512, "note": "rows"}, {"ops": ["ADD"], "extra": 32},
                           {"ops": ["FLASH_ATTN_EXT"], "f16_kv_copies": true}, {"metal_extras": true}])",
           kRepack),
      "t.json");
  ASSERT_TRUE(r.ok()) << r.status().to_string();
  const std::string json = topology_to_json(r.value());
  auto back = parse_topology(json, "round trip");
  ASSERT_TRUE(back.ok()) << back.status().to_string() << "\n" << json;
  EXPECT_EQ(topology_to_json(back.value()), json);
  ASSERT_EQ(back->devices[0].padding.size(), 4u);
  EXPECT_TRUE(back->devices[0].padding[2].f16_kv_copies);
  EXPECT_TRUE(back->devices[0].padding[3].metal_extras);
  EXPECT_FALSE(back->devices[0].padding[2].metal_extras);
  EXPECT_FALSE(back->devices[0].padding[1].f16_kv_copies);
  EXPECT_EQ(back->devices[0].padding[0].row_multiple, 512);
  EXPECT_EQ(back->devices[0].padding[1].ops, (std::vector<Op>{Op::kAdd}));
  EXPECT_EQ(back->devices[0].padding[1].extra, 32u);
  ASSERT_EQ(back->devices[1].buffer_types.size(), 1u);
  EXPECT_EQ(back->devices[1].buffer_types[0].name, "CPU_REPACK");
  EXPECT_FALSE(back->devices[1].buffer_types[0].default_allow);
  EXPECT_EQ(back->devices[1].buffer_types[0].op_rules.size(), 1u);
  EXPECT_EQ(back->devices[1].buffer_types[0].padding[0].extra, 64u);
  // A topology without the keys writes none of them.
  auto plain = parse_topology(topo(""), "t.json");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(topology_to_json(plain.value()).find("padding"), std::string::npos);
  EXPECT_EQ(topology_to_json(plain.value()).find("buffer_types"), std::string::npos);
}

TEST(TopologyBufferTypes, BadInputIsRefusedWithItsLocation) {
  // Not a list; a rule that pads nothing; an unknown key; an unknown type and op; limits.
  EXPECT_THAT(bufts_error_of(topo(R"("padding": {"extra": 4})")), HasSubstr("t.json: devices[0].padding: expected"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"types": ["q4_0"]}])")),
              HasSubstr("devices[0].padding[0]: a padding rule needs \"row_multiple\" > 0, \"extra\" > 0, "
                        "\"f16_kv_copies\" or \"metal_extras\": true"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"f16_kv_copies": false}])")), HasSubstr("a padding rule needs"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"f16_kv_copies": "yes"}])")),
              HasSubstr("devices[0].padding[0].f16_kv_copies"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"extra": 4, "row": 3}])")),
              HasSubstr("devices[0].padding[0]: unknown key \"row\""));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"types": ["q5"], "extra": 4}])")),
              HasSubstr("devices[0].padding[0].types[0]"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"ops": ["MATMUL"], "extra": 4}])")),
              HasSubstr("devices[0].padding[0].ops[0]"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"row_multiple": 1048577}])")),
              HasSubstr("devices[0].padding[0].row_multiple: expected a whole number of values from 0 to 1048576"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"row_multiple": -1}])")),
              HasSubstr("devices[0].padding[0].row_multiple"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"row_multiple": 2.5}])")),
              HasSubstr("devices[0].padding[0].row_multiple"));
  EXPECT_THAT(bufts_error_of(topo(R"("padding": [{"extra": "2 GiB"}])")),
              HasSubstr("devices[0].padding[0].extra: expected a size up to 1 GiB"));
  // Buffer types: a name is required, unique among devices and buffer types, not "host"; rules are checked.
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"ops": {}}])")),
              HasSubstr("devices[1].buffer_types[0]: missing required key \"name\""));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": ""}])")),
              HasSubstr("devices[1].buffer_types[0].name: expected a non-empty buffer type name"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "GPU0"}])")),
              HasSubstr("devices[1].buffer_types[0].name: buffer type name \"GPU0\" is taken by devices[0].name"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "gpu0_host"}])")),
              HasSubstr("is taken by devices[0].name (its host buffer type)"));
  EXPECT_THAT(bufts_error_of(topo(R"("buffer_types": [{"name": "R"}])", R"("buffer_types": [{"name": "r"}])")),
              HasSubstr("devices[1].buffer_types[0].name: buffer type name \"r\" is taken by "
                        "devices[0].buffer_types[0].name"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "Host"}])")), HasSubstr("\"host\" is reserved"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "R", "ops": {"rules": [{"allow": ["MUL_MAT"],
                                  "min_batch": 8, "max_batch": 4}]}}])")),
              HasSubstr("devices[1].buffer_types[0].ops.rules[0]: min_batch 8 is above max_batch 4"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "R", "padding": [{"extra": 0}]}])")),
              HasSubstr("devices[1].buffer_types[0].padding[0]: a padding rule needs"));
  EXPECT_THAT(bufts_error_of(topo("", R"("buffer_types": [{"name": "R", "layout": "x"}])")),
              HasSubstr("devices[1].buffer_types[0]: unknown key \"layout\""));
}

TEST(TopologyBufferTypes, ValidateTopologyChecksConfigsBuiltInCode) {
  auto r = parse_topology(topo("", kRepack), "t.json");
  ASSERT_TRUE(r.ok());
  TopologyConfig t = r.value();
  t.devices[0].padding.push_back(PaddingRule{});
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("devices[0].padding[0]: a padding rule needs"));
  t.devices[0].padding[0].row_multiple = kMaxRowMultiple + 1;
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("devices[0].padding[0].row_multiple"));
  t.devices[0].padding.clear();
  t.devices[1].buffer_types[0].name = "cpu";
  EXPECT_THAT(validate_topology(t).message(), HasSubstr("is taken by devices[1].name"));
}
