// The topology format's offload "batch" key (docs/topology.md): "ggml-cuda" counts an op's batch as llama.cpp's CUDA
// backend does (ggml_offload_batch_size), "tokens" (the default) as before; anything else is refused with its path;
// the written topology keeps it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/harness/topology/topology.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::harness;
using ::testing::HasSubstr;

namespace {

std::string with_offload(const std::string& offload) {
  return R"({"name": "t", "devices": [{"name": "gpu0", "type": "gpu", "memory": "1 GiB", "offload": )" + offload +
         R"(}, {"name": "cpu", "type": "cpu", "memory": "1 GiB"}]})";
}

TEST(SimTopologyOffload, BatchGgmlCudaIsReadAndWritten) {
  auto r = parse_topology(with_offload(R"({"min_batch": 32, "batch": "ggml-cuda"})"), "t.json");
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_TRUE(r->devices[0].offload.enabled);
  EXPECT_TRUE(r->devices[0].offload.ggml_cuda_batch);
  auto again = parse_topology(topology_to_json(r.value()), "again.json");
  ASSERT_TRUE(again.ok()) << again.status().message();
  EXPECT_TRUE(again->devices[0].offload.ggml_cuda_batch);
  auto tokens = parse_topology(with_offload(R"({"min_batch": 32, "batch": "tokens"})"), "t.json");
  ASSERT_TRUE(tokens.ok()) << tokens.status().message();
  EXPECT_FALSE(tokens->devices[0].offload.ggml_cuda_batch);
  auto none = parse_topology(with_offload(R"({"min_batch": 32})"), "t.json");
  ASSERT_TRUE(none.ok()) << none.status().message();
  EXPECT_FALSE(none->devices[0].offload.ggml_cuda_batch);
}

TEST(SimTopologyOffload, AnotherBatchIsRefusedWithItsPath) {
  for (const char* bad : {R"("rows")", "32", "true"}) {
    auto r = parse_topology(with_offload(std::string(R"({"batch": )") + bad + "}"), "t.json");
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("devices[0].offload.batch")) << bad;
    EXPECT_THAT(r.status().message(), HasSubstr("ggml-cuda")) << bad;
  }
}

}  // namespace
