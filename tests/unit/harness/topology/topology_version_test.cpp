// Topology file versions (docs/topology.md, "Versions"): version 1 is the only one; a file without "version" is read
// as version 1, a newer one is refused naming the newest this build reads, and the writer and the presets say
// version 1.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::HasSubstr;
using ::testing::StartsWith;

namespace {

constexpr const char* kDevices = R"("name": "t", "devices": [{"name": "gpu0", "memory": "1 GiB"},
                                    {"name": "cpu", "type": "cpu", "memory": "8 GiB"}]})";

// A topology file: `head` (the keys before the name), then kDevices. (Built with +=: GCC 12 warns falsely,
// -Warray-bounds, on std::string(literal) + literal.)
std::string file(const char* head) {
  std::string text = head;
  text += kDevices;
  return text;
}

std::string version_error_of(const std::string& text) {
  auto t = parse_topology(text, "t.json");
  EXPECT_FALSE(t.ok()) << "accepted: " << text;
  return t.ok() ? std::string() : t.status().message();
}

TEST(TopologyVersion, Version1AndNoVersionAreRead) {
  auto none = parse_topology(file("{"), "t.json");
  ASSERT_TRUE(none.ok()) << none.status().to_string();
  auto one = parse_topology(file(R"({"version": 1, )"), "t.json");
  ASSERT_TRUE(one.ok()) << one.status().to_string();
  EXPECT_EQ(topology_to_json(none.value()), topology_to_json(one.value()));
}

TEST(TopologyVersion, ANewerOrBadVersionIsRefused) {
  // (before the keys: a newer file may have keys this build does not know)
  EXPECT_EQ(version_error_of(R"({"version": 2, "name": "t", "a_key_of_version_2": []})"),
            "t.json: version: version 2 is newer than this build of Tessera reads (topology files up to version 1): "
            "use a newer Tessera");
  EXPECT_EQ(version_error_of(file(R"({"version": 0, )")),
            "t.json: version: expected a version number from 1 to 1, got a number (0)");
  EXPECT_EQ(version_error_of(file(R"({"version": "1", )")),
            "t.json: version: expected a version number from 1 to 1, got a string (\"1\")");
}

TEST(TopologyVersion, TheWriterAndThePresetsSayVersion1) {
  auto t = parse_topology(file("{"), "t.json");
  ASSERT_TRUE(t.ok()) << t.status().to_string();
  EXPECT_THAT(topology_to_json(t.value()), StartsWith("{\n  \"version\": 1,\n  \"name\": \"t\",\n"));
  for (const std::string& name : topology_preset_names()) {
    SCOPED_TRACE(name);
    EXPECT_THAT(topology_preset_text(name), StartsWith("{\n  \"version\": 1,\n"));
  }
}

}  // namespace
