// llama.cpp's placement options as Tessera places a model (docs/scenarios.md, "Placement options"): -ot's buffer type
// names and first-match rule, weights only; -cmoe and -ncmoe's patterns; -nkvo; the output layer under -ngl. Each
// expectation is worked out by hand from llama.cpp's rules (src/llama-model.cpp load_tensors, common/arg.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <string>

#include "tessera/llama/llama_run.h"
#include "tessera/harness/placement/policy.h"
#include "tessera/harness/placement/policy_options.h"
#include "tessera/scenario/scenario.h"
#include "tessera/models/llama.h"
#include "unit/sim/sim_fixture.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using namespace tessera::scenario;
using namespace tessera::llama;
using ::testing::HasSubstr;

namespace {

// Places a 3-layer tiny-moe model on gpu0, gpu1 and the CPU with the command-line options given (key, text) and
// returns each tensor's buffer type name.
Result<std::map<std::string, std::string>> place(Simulator& sim,
                                                 const std::vector<std::pair<std::string, std::string>>& options) {
  PlacementPolicy p;
  for (const auto& [key, text] : options) TS_RETURN_IF_ERROR(apply_policy_option(key, text, &p));
  models::LlamaConfig c = models::preset("tiny-moe").value();
  c.n_layer = 3;
  static std::vector<models::LlamaGraph> keep;  // the tensors outlive the call
  keep.push_back(models::build_llama(c).value());
  const models::LlamaGraph& m = keep.back();
  auto placed = place_model(devices_of(sim), m.weights, m.kv_cache, c.n_layer, p);
  if (!placed.ok()) return placed.status();
  std::map<std::string, std::string> where;
  for (const auto& [t, b] : placed.value().where) where[t->name] = b->name();
  return where;
}

// gpu0 has a pinned host buffer type ("gpu0_Host"), for CUDA_Host.
std::unique_ptr<Simulator> two_gpus() {
  DeviceConfig gpu0 = gpu("gpu0");
  gpu0.caps.host_buffer = true;
  return make_sim(topology({gpu0, gpu("gpu1"), wrapped_cpu()}));
}

// -ot: searched anywhere in the name, the first match wins, llama.cpp's names: CUDA1 is the second GPU, CPU the CPU,
// CUDA_Host the first GPU's host buffer type. -ngl 0 keeps everything else on the CPU.
TEST(LlamaOptions, OverrideTensorFirstMatchWinsWithLlamaBufferTypeNames) {
  auto sim = two_gpus();
  auto w = place(*sim, {{"n_gpu_layers", "0"},
                        {"override_tensor", "attn_q=CUDA1,attn_.*=CUDA0"},
                        {"override_tensor", "ffn_gate_inp=CUDA_Host"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("blk.1.attn_q.weight"), "gpu1");  // both match; the first wins
  EXPECT_EQ(w.value().at("blk.1.attn_k.weight"), "gpu0");
  EXPECT_EQ(w.value().at("blk.2.ffn_gate_inp.weight"), "gpu0_Host");
  EXPECT_EQ(w.value().at("blk.1.ffn_up_exps.weight"), "cpu");
  // Weights only, as llama.cpp's tensor_buft_overrides: a pattern matching the caches leaves them with their layer
  // (all layers on gpu0 with -ts 1,0).
  w = place(*sim, {{"tensor_split", "1,0"}, {"override_tensor", "cache_k=CPU"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("cache_k_l0"), "gpu0");
  // Tessera's --override moves caches too.
  w = place(*sim, {{"tensor_split", "1,0"}, {"overrides", "cache_k=cpu"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("cache_k_l0"), "cpu");
}

TEST(LlamaOptions, UnknownBufferTypesAreErrors) {
  auto sim = two_gpus();
  for (const char* target : {"CUDA2", "cuda0", "CUDA", "CUDA0x"}) {
    auto w = place(*sim, {{"override_tensor", std::string("attn_q=") + target}});
    ASSERT_FALSE(w.ok()) << target;
    EXPECT_THAT(w.status().message(), HasSubstr("unknown device or buffer type"));
  }
}

// -cmoe: every layer's ffn_{up,down,gate}_exps on the CPU; -ncmoe 2: layers 0 and 1 only; the router (ffn_gate_inp)
// and the rest of the layer stay with the layer (all on gpu0 with -ts 1,0).
TEST(LlamaOptions, CpuMoeKeepsTheExpertsOfTheFirstLayersOnTheCpu) {
  auto sim = two_gpus();
  auto w = place(*sim, {{"tensor_split", "1,0"}, {"n_cpu_moe", "2"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  for (const char* e : {"up", "down", "gate"}) {
    EXPECT_EQ(w.value().at(std::string("blk.0.ffn_") + e + "_exps.weight"), "cpu") << e;
    EXPECT_EQ(w.value().at(std::string("blk.1.ffn_") + e + "_exps.weight"), "cpu") << e;
    EXPECT_EQ(w.value().at(std::string("blk.2.ffn_") + e + "_exps.weight"), "gpu0") << e;
  }
  EXPECT_EQ(w.value().at("blk.0.ffn_gate_inp.weight"), "gpu0");
  w = place(*sim, {{"tensor_split", "1,0"}, {"cpu_moe", ""}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("blk.2.ffn_down_exps.weight"), "cpu");
  EXPECT_EQ(w.value().at("blk.2.attn_q.weight"), "gpu0");
  // "blk\.1\.ffn_..." is not found in layer 11's names: the dot after the number is part of the pattern.
  PlacementPolicy p;
  ASSERT_TRUE(apply_policy_option("n_cpu_moe", "2", &p).ok());
  ASSERT_EQ(p.overrides.size(), 2u);
  EXPECT_EQ(p.overrides[1].pattern, R"(blk\.1\.ffn_(up|down|gate|gate_up)_(ch|)exps)");
  EXPECT_TRUE(std::regex_search("blk.1.ffn_up_exps.weight", std::regex(p.overrides[1].pattern)));
  EXPECT_FALSE(std::regex_search("blk.11.ffn_up_exps.weight", std::regex(p.overrides[1].pattern)));
}

// -nkvo: the caches stay on the CPU while their layers' weights are offloaded.
TEST(LlamaOptions, NoKvOffloadKeepsTheCacheOnTheCpu) {
  auto sim = two_gpus();
  auto w = place(*sim, {{"tensor_split", "1,0"}, {"kv_offload", ""}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("cache_k_l1"), "cpu");
  EXPECT_EQ(w.value().at("cache_v_l2"), "cpu");
  EXPECT_EQ(w.value().at("blk.1.attn_q.weight"), "gpu0");
  w = place(*sim, {{"tensor_split", "1,0"}});
  ASSERT_TRUE(w.ok());
  EXPECT_EQ(w.value().at("cache_k_l1"), "gpu0");
}

// -ngl 1: the output layer alone (output and output_norm) goes to the GPU; the blocks and the input layer stay on
// the CPU. -ngl 3 of 3 layers: i_gpu_start = 4 - 3 = 1, layer 0 on the CPU. Split 1,1 (0.5, 1) over act = 3: k = 0,
// 1, 2 -> 0, 0.33, 0.67: layers 1 and 2 on gpu0, the output on gpu1.
TEST(LlamaOptions, TheOutputLayerCountsInsideNgl) {
  auto sim = two_gpus();
  auto w = place(*sim, {{"n_gpu_layers", "1"}, {"tensor_split", "1,1"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("output.weight"), "gpu0");
  EXPECT_EQ(w.value().at("output_norm.weight"), "gpu0");
  EXPECT_EQ(w.value().at("blk.2.attn_q.weight"), "cpu");
  EXPECT_EQ(w.value().at("token_embd.weight"), "cpu");
  w = place(*sim, {{"n_gpu_layers", "3"}, {"tensor_split", "1,1"}});
  ASSERT_TRUE(w.ok()) << w.status().to_string();
  EXPECT_EQ(w.value().at("blk.0.attn_q.weight"), "cpu");
  EXPECT_EQ(w.value().at("blk.1.attn_q.weight"), "gpu0");
  EXPECT_EQ(w.value().at("blk.2.attn_q.weight"), "gpu0");
  EXPECT_EQ(w.value().at("output.weight"), "gpu1");
  EXPECT_EQ(w.value().at("token_embd.weight"), "cpu");
  for (const char* all : {"all", "auto", "-1"}) {
    w = place(*sim, {{"n_gpu_layers", all}, {"tensor_split", "1,1"}});
    ASSERT_TRUE(w.ok());
    EXPECT_EQ(w.value().at("blk.0.attn_q.weight"), "gpu0") << all;
  }
}

// -c, -b, -ub by src/llama-context.cpp: n_ctx padded to 256; n_batch = min(n_ctx, b); the graph's tokens (one
// micro-batch) = min(n_batch, ub), with llama.cpp's defaults b = 2048, ub = 512.
TEST(LlamaOptions, ContextAndBatchesAreRoundedAsLlamaCpp) {
  auto shape = [](std::optional<int64_t> c, std::optional<int64_t> b, std::optional<int64_t> ub) {
    LlamaRunArgs a;
    a.ctx_size = c;
    a.batch = b;
    a.ubatch = ub;
    const LlamaRunShape r = resolve_llama_run(a).value();
    return std::pair{r.ctx, r.tokens};
  };
  EXPECT_EQ(shape(256, {}, {}), (std::pair<int64_t, int64_t>{256, 0}));
  EXPECT_EQ(shape(257, {}, {}), (std::pair<int64_t, int64_t>{512, 0}));
  EXPECT_EQ(shape(1000, {}, {}), (std::pair<int64_t, int64_t>{1024, 0}));
  EXPECT_EQ(shape({}, 4096, {}), (std::pair<int64_t, int64_t>{0, 512}));       // ub's default
  EXPECT_EQ(shape({}, {}, 1024), (std::pair<int64_t, int64_t>{0, 1024}));      // b's default 2048 is above it
  EXPECT_EQ(shape(300, 4096, 4096), (std::pair<int64_t, int64_t>{512, 512}));  // n_batch = min(512, 4096)
  EXPECT_EQ(shape({}, 2, 4), (std::pair<int64_t, int64_t>{0, 2}));
}

// The same keys in a scenario's model mean the same; what Tessera cannot honour is refused, naming the flag.
TEST(LlamaOptions, ScenarioModelKeysAndRefusals) {
  auto model = [](const std::string& keys) {
    return parse_scenario(
        R"({"name": "x", "topology": "1gpu", "expect": "nothing", "model": {"preset": "tiny", )" + keys + "}}",
        "case.json");
  };
  auto sc = model(R"("ctx_size": 1000, "batch_size": 2, "ubatch_size": 4, "flash_attn": "off")");
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  EXPECT_EQ(sc.value().config.model.n_ctx, 1024);
  EXPECT_EQ(sc.value().config.model.n_tokens, 2);
  EXPECT_FALSE(sc.value().config.model.flash_attn);
  sc = model(R"("cache_type_k": "f32", "cache_type_v": "f32", "n_parallel": 1, "kv_unified": true)");
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  EXPECT_EQ(sc.value().config.model.kv_type, Type::kF32);
  // -ctk alone: K q8_0, V f16 (each defaults to f16, as in llama.cpp); a model whose heads hold whole q8_0 blocks
  sc = model(R"("cache_type_k": "q8_0", "n_embd": 128)");
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  EXPECT_EQ(sc.value().config.model.kv_type, Type::kQ8_0);
  EXPECT_EQ(sc.value().config.model.v_type(), Type::kF16);
  sc = model(R"("n_parallel": 4, "kv_unified": true)");  // four sequences in one cache
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  sc = model(R"("swa_full": true)");  // full-size sliding-window caches: what Tessera builds
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  sc = model(R"("flash_attn": "auto")");
  ASSERT_TRUE(sc.ok()) << sc.status().to_string();
  EXPECT_TRUE(sc.value().config.flash_attn_auto);
  for (const auto& [keys, message] : std::vector<std::pair<std::string, std::string>>{
           {R"("flash_attn": "maybe")", "-fa maybe: expected on, off or auto"},
           {R"("n_parallel": 4)", "not supported yet: -np 4 without --kv-unified"},
           {R"("cache_type_v": "q3_k")", "-ctv q3_k: expected f32, f16"},
           {R"("ctx_size": 20000000)", "-c 20000000: expected 0 (the model's) to 16777216"},
       }) {
    sc = model(keys);
    ASSERT_FALSE(sc.ok()) << keys;
    EXPECT_THAT(sc.status().message(), HasSubstr(message)) << keys;
  }
}

}  // namespace
