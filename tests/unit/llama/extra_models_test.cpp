// Extra models beside the main one (tessera/llama/extra_models.h; docs/extra-models.md): a draft model and a
// multimodal projector. Every expected figure is worked out by hand from the files' shapes (written here with the
// GGUF writer) and the rules cited in the docs.
//
// The draft: a Qwen2.5-0.5B-shaped header, all matrices f16 (as Qwen's own qwen2.5-0.5b-instruct-fp16.gguf), from the
// published config (https://huggingface.co/Qwen/Qwen2.5-0.5B-Instruct/blob/main/config.json): 24 layers, hidden 896,
// intermediate 4864, 14 heads, 2 KV heads (head size 64), vocabulary 151936, tied embeddings, rope theta 1e6, RMS
// epsilon 1e-6. Per layer: attn_norm and ffn_norm 896 f32 (3,584 B each), attn_q and attn_output 896 x 896 f16
// (1,605,632 B each), attn_k and attn_v 896 x 128 f16 (229,376 B each), their biases 896 / 128 / 128 f32 (3,584 + 512
// + 512 B), ffn_gate, ffn_up and ffn_down 896 x 4864 f16 (8,716,288 B each): 29,830,656 B, every size a multiple of
// 256 (no padding). 24 layers and output_norm (3,584 B) on the GPU: 715,939,328 B; token_embd 896 x 151936 f16
// (272,269,312 B) on the CPU. KV at -cd 4096, f16: 24 layers x (K + V) x 128 x 4096 x 2 B = 48 MiB.
//
// The projector: a clip header with image_size 224, patch_size 14 (16 x 16 = 256 patches), embedding 768, FFN 3072, 12
// heads, and two f16 tensors: v.patch_embd.weight [14, 14, 3, 768] (903,168 B) and mm.0.weight [768, 896]
// (1,376,256 B), both multiples of 256: 2,279,424 B of weights. Compute estimate with flash attention: 4 x 256 x (3072
// + 3 x 768) = 5,505,024 B; without: + 4 x 256 x 256 x 12 = 3,145,728 B, 8,650,752 B.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "tessera/builtin.h"
#include "tessera/gguf.h"
#include "tessera/llama/extra_models.h"
#include "tessera/scenario/scenario.h"
#include "tessera/models/from_gguf.h"
#include "unit/sim/sim_fixture.h"
#include "support/temp_dir.h"
#include "support/tensor_names.h"
#include "support/units.h"

using namespace tessera;
using namespace tessera::sim;
using namespace tessera::sim::testing;
using namespace tessera::harness;
using namespace tessera::scenario;
using namespace tessera::llama;
using ::testing::HasSubstr;

using tessera::test::blk;

using tessera::test::kMiB;

namespace {

// The Qwen2.5 0.5B draft: its layers and output_norm (715,939,328 B), token_embd (272,269,312 B), which the tied output
// head reads as a copy on the output layer's GPU (llama.cpp's TENSOR_DUPLICATED token_embd in the GPU's model buffer).
constexpr size_t kDraftLayerWeights = 715939328, kDraftCpuWeights = 272269312, kDraftKv4096 = 48 * kMiB;
constexpr size_t kDraftGpuWeights = kDraftLayerWeights + kDraftCpuWeights;
constexpr size_t kMmprojWeights = 2279424, kMmprojComputeFa = 5505024, kMmprojComputeNoFa = 8650752;

// Writes the Qwen2.5-0.5B-shaped f16 header (above) to TempDir()/NAME and returns the path.
std::string write_qwen05(const std::string& name) {
  gguf::File f;
  f.set("general.architecture", gguf::Value::string("qwen2"));
  f.set("general.name", gguf::Value::string("Qwen2.5 0.5B Instruct"));
  const auto u32 = [&](const char* k, uint32_t v) { f.set(std::string("qwen2.") + k, gguf::Value::u32(v)); };
  u32("block_count", 24);
  u32("context_length", 32768);
  u32("embedding_length", 896);
  u32("feed_forward_length", 4864);
  u32("attention.head_count", 14);
  u32("attention.head_count_kv", 2);
  f.set("qwen2.rope.freq_base", gguf::Value::f32(1000000.0f));
  f.set("qwen2.attention.layer_norm_rms_epsilon", gguf::Value::f32(1e-6f));
  using T = gguf::TensorType;
  f.add_tensor("token_embd.weight", T::kF16, {896, 151936});
  f.add_tensor("output_norm.weight", T::kF32, {896});
  for (int il = 0; il < 24; ++il) {
    f.add_tensor(blk(il, "attn_norm.weight"), T::kF32, {896});
    f.add_tensor(blk(il, "attn_q.weight"), T::kF16, {896, 896});
    f.add_tensor(blk(il, "attn_k.weight"), T::kF16, {896, 128});
    f.add_tensor(blk(il, "attn_v.weight"), T::kF16, {896, 128});
    f.add_tensor(blk(il, "attn_output.weight"), T::kF16, {896, 896});
    f.add_tensor(blk(il, "attn_q.bias"), T::kF32, {896});
    f.add_tensor(blk(il, "attn_k.bias"), T::kF32, {128});
    f.add_tensor(blk(il, "attn_v.bias"), T::kF32, {128});
    f.add_tensor(blk(il, "ffn_norm.weight"), T::kF32, {896});
    f.add_tensor(blk(il, "ffn_gate.weight"), T::kF16, {896, 4864});
    f.add_tensor(blk(il, "ffn_up.weight"), T::kF16, {896, 4864});
    f.add_tensor(blk(il, "ffn_down.weight"), T::kF16, {4864, 896});
  }
  EXPECT_TRUE(f.layout().ok());
  const std::string path = tessera::test::temp_dir() + name;
  const Status st = gguf::write_file(path, f);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// The clip header (above); `skip` leaves out that key.
std::string write_mmproj(const std::string& name, const std::string& arch = "clip", const std::string& skip = "") {
  gguf::File f;
  f.set("general.architecture", gguf::Value::string(arch));
  f.set("clip.has_vision_encoder", gguf::Value::boolean(true));
  const std::pair<const char*, uint32_t> keys[] = {{"clip.vision.image_size", 224},
                                                   {"clip.vision.patch_size", 14},
                                                   {"clip.vision.embedding_length", 768},
                                                   {"clip.vision.feed_forward_length", 3072},
                                                   {"clip.vision.attention.head_count", 12}};
  for (const auto& [k, v] : keys) {
    if (k != skip) f.set(k, gguf::Value::u32(v));
  }
  f.add_tensor("v.patch_embd.weight", gguf::TensorType::kF16, {14, 14, 3, 768});
  f.add_tensor("mm.0.weight", gguf::TensorType::kF16, {768, 896});
  EXPECT_TRUE(f.layout().ok());
  const std::string path = tessera::test::temp_dir() + name;
  const Status st = gguf::write_file(path, f);
  EXPECT_TRUE(st.ok()) << st.message();
  return path;
}

// The main model: the same 0.5B file at -c 4096, planned metadata-only on `devices`.
std::unique_ptr<Session> main_session(std::vector<DeviceConfig> devices, bool flash_attn = true) {
  auto file = gguf::read_model(write_qwen05("tessera-extra-main.gguf"));
  EXPECT_TRUE(file.ok()) << file.status().message();
  if (!file.ok()) return nullptr;
  models::GgufRunShape run;
  run.n_ctx = 4096;
  run.flash_attn = flash_attn;
  auto built = models::build_from_gguf(file.value(), run);
  EXPECT_TRUE(built.ok()) << built.status().message();
  if (!built.ok()) return nullptr;
  SessionConfig c;
  c.topology = topology(std::move(devices));
  c.model = built.value().config;
  c.sim.mode = MemoryMode::kMetadata;
  auto s = Session::create(c, &builtin_registry());
  EXPECT_TRUE(s.ok()) << s.status().message();
  if (!s.ok()) return nullptr;
  const Status p = s.value()->plan();
  EXPECT_TRUE(p.ok()) << p.message();
  return std::move(s).value();
}

ExtraModels draft(const ExtraModelArgs& a) {
  auto r = resolve_extra_models(a);
  EXPECT_TRUE(r.ok()) << r.status().message();
  return r.ok() ? r.value() : ExtraModels{};
}

ExtraModelArgs draft_args(const std::string& file) {
  ExtraModelArgs a;
  a.draft = write_qwen05(file);
  a.ctx_size = 4096;
  return a;
}

}  // namespace

// -ngld all (the default), -cd 4096: the draft's layers, output_norm and the output head's copy of token_embd on the
// GPU, token_embd on the CPU, its KV cache on the GPU; and the llama.cpp buffers of the draft report the same KV (48
// MiB).
TEST(ExtraModels, DraftWeightsAndKvByHand) {
  auto s = main_session({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  auto p = place_extra_models(*s, draft(draft_args("tessera-extra-draft.gguf")), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p.value().devices.size(), 2u);
  EXPECT_EQ(p.value().devices[0].draft_weights, kDraftGpuWeights);
  EXPECT_EQ(p.value().devices[0].draft_kv, kDraftKv4096);
  EXPECT_GT(p.value().devices[0].draft_compute, 0u);
  EXPECT_EQ(p.value().devices[1].draft_weights, kDraftCpuWeights);
  EXPECT_EQ(p.value().devices[1].draft_kv, 0u);
  EXPECT_TRUE(p.value().fits());
  ASSERT_TRUE(p.value().draft_buffers.has_value());
  const std::string log = format_llama_log(*p.value().draft_buffers);
  EXPECT_THAT(log, HasSubstr("llama_kv_cache:      CUDA0 KV buffer size =    48.00 MiB\n"));
  const std::string report = format_extra_models(p.value(), true);
  EXPECT_THAT(report, HasSubstr("srv    load_model: loading draft model '"));
  EXPECT_THAT(format_extra_models(p.value(), false), HasSubstr("the extra models fit next to the main model"));
}

// -ngld 0: nothing of the draft offloaded; its weights (all 988,208,640 B) and its KV cache on the CPU.
TEST(ExtraModels, NgldZeroKeepsTheDraftOnTheCpu) {
  auto s = main_session({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  ExtraModelArgs a = draft_args("tessera-extra-draft-ngld0.gguf");
  a.ngld = "0";
  auto p = place_extra_models(*s, draft(a), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p.value().devices[0].draft_weights, 0u);
  EXPECT_EQ(p.value().devices[0].draft_kv, 0u);
  EXPECT_EQ(p.value().devices[1].draft_weights, kDraftLayerWeights + kDraftCpuWeights);  // (no copy: one buffer type)
  EXPECT_EQ(p.value().devices[1].draft_kv, kDraftKv4096);
}

// -devd gpu1 (also spelled CUDA1): the draft's offloaded layers all on the second GPU, whatever the main model's split.
TEST(ExtraModels, DeviceDraftPutsTheDraftOnThatGpu) {
  for (const char* name : {"gpu1", "CUDA1"}) {
    auto s = main_session({gpu("gpu0", 4 * GiB), gpu("gpu1", 4 * GiB), wrapped_cpu(16 * GiB)});
    ASSERT_NE(s, nullptr);
    ExtraModelArgs a = draft_args("tessera-extra-draft-devd.gguf");
    a.devd = name;
    auto p = place_extra_models(*s, draft(a), {}, &builtin_registry());
    ASSERT_TRUE(p.ok()) << p.status().message();
    EXPECT_EQ(p.value().devices[0].draft_weights, 0u) << name;
    EXPECT_EQ(p.value().devices[1].draft_weights, kDraftGpuWeights) << name;
    EXPECT_EQ(p.value().devices[1].draft_kv, kDraftKv4096) << name;
  }
}

// A 1.5 GiB GPU holds the main model (988,208,640 B of weights, 48 MiB of KV and its compute buffer) but not a second
// copy as the draft: the overflow names the GPU and the draft, and the main model alone fits.
TEST(ExtraModels, DraftOverflowIsReportedAsTheDrafts) {
  auto s = main_session({gpu("gpu0", 3 * GiB / 2), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  auto p = place_extra_models(*s, draft(draft_args("tessera-extra-draft-over.gguf")), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_FALSE(p.value().fits());
  ASSERT_EQ(p.value().overflows.size(), 1u);
  EXPECT_THAT(p.value().overflows[0], HasSubstr("gpu0 overflows because of the draft model"));
  const ExtraDeviceMemory& g = p.value().devices[0];
  EXPECT_LE(g.main, g.allocatable);
  EXPECT_GT(g.total(), g.allocatable);
  EXPECT_EQ(g.draft_weights, kDraftGpuWeights);  // the figures of the draft placed alone
  EXPECT_THAT(format_extra_models(p.value(), false), HasSubstr("OVERFLOW"));
}

// The projector on the first GPU (weights and compute by hand), on the CPU with --no-mmproj-offload, and the attention
// scores counted without flash attention.
TEST(ExtraModels, MmprojWeightsAndComputeByHand) {
  ExtraModelArgs a;
  a.mmproj = write_mmproj("tessera-extra-mmproj.gguf");
  auto s = main_session({gpu("gpu0", 4 * GiB), gpu("gpu1", 4 * GiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  auto p = place_extra_models(*s, draft(a), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p.value().devices[0].mmproj_weights, kMmprojWeights);
  EXPECT_EQ(p.value().devices[0].mmproj_compute, kMmprojComputeFa);
  EXPECT_EQ(p.value().devices[1].mmproj(), 0u);
  EXPECT_THAT(format_extra_models(p.value(), true),
              HasSubstr("alloc_compute_meta:      CUDA0 compute buffer size =     5.25 MiB\n"));

  a.no_mmproj_offload = true;
  auto cpu = place_extra_models(*s, draft(a), {}, &builtin_registry());
  ASSERT_TRUE(cpu.ok()) << cpu.status().message();
  EXPECT_EQ(cpu.value().devices[0].mmproj(), 0u);
  EXPECT_EQ(cpu.value().devices[2].mmproj_weights, kMmprojWeights);
  EXPECT_EQ(cpu.value().mmproj->buffer_name, "CPU");

  auto no_fa = main_session({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)}, false);
  ASSERT_NE(no_fa, nullptr);
  a.no_mmproj_offload = false;
  auto q = place_extra_models(*no_fa, draft(a), {}, &builtin_registry());
  ASSERT_TRUE(q.ok()) << q.status().message();
  EXPECT_EQ(q.value().devices[0].mmproj_compute, kMmprojComputeNoFa);
}

// The projector needs 7,784,448 B on gpu0; a GPU whose memory the main model leaves less of overflows because of it.
// The GPU: the main model's peak plus 4 MiB (found by planning the main model alone on a large GPU first).
TEST(ExtraModels, MmprojOverflowIsReportedAsTheProjectors) {
  auto big = main_session({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(big, nullptr);
  const size_t peak = big->memory()[0].peak;
  auto s = main_session({gpu("gpu0", peak + 4 * kMiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  ExtraModelArgs a;
  a.mmproj = write_mmproj("tessera-extra-mmproj-over.gguf");
  auto p = place_extra_models(*s, draft(a), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_EQ(p.value().overflows.size(), 1u);
  EXPECT_THAT(p.value().overflows[0], HasSubstr("gpu0 overflows because of the projector (--mmproj)"));
}

// For fit: the extra models placed alone, added to each device's reservation (the projector: 7,784,448 B on gpu0).
TEST(ExtraModels, FitReservesTheExtraModelsMemory) {
  ExtraModelArgs a;
  a.mmproj = write_mmproj("tessera-extra-mmproj-fit.gguf");
  SessionConfig c;
  c.topology = topology({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)});
  c.model = models::preset("tiny").value();
  auto e = extra_models_alone(c, draft(a), &builtin_registry());
  ASSERT_TRUE(e.ok()) << e.status().message();
  reserve_extra_models(e.value(), &c.topology);
  EXPECT_EQ(c.topology.devices[0].reserved, kMmprojWeights + kMmprojComputeFa);
  EXPECT_EQ(c.topology.devices[1].reserved, 0u);
}

// Bad input names the flag and the file or value.
TEST(ExtraModels, BadOptionsAndFilesAreNamed) {
  auto error_of = [](const ExtraModelArgs& a) {
    auto r = resolve_extra_models(a);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  ExtraModelArgs a;
  a.ngld = "4";
  EXPECT_THAT(error_of(a), HasSubstr("-ngld: a draft option without a draft model"));
  a = draft_args("tessera-extra-draft-bad.gguf");
  a.ngld = "many";
  EXPECT_THAT(error_of(a), HasSubstr("-ngld many: expected a layer count"));
  a = ExtraModelArgs{};
  a.draft = tessera::test::temp_dir() + "no-such-draft.gguf";
  EXPECT_THAT(error_of(a), HasSubstr("no-such-draft.gguf"));
  a = ExtraModelArgs{};
  a.mmproj = write_qwen05("tessera-extra-not-clip.gguf");
  EXPECT_THAT(error_of(a), HasSubstr("general.architecture is \"qwen2\", not \"clip\""));
  a.mmproj = write_mmproj("tessera-extra-mmproj-nokey.gguf", "clip", "clip.vision.patch_size");
  EXPECT_THAT(error_of(a), HasSubstr("clip.vision.patch_size"));
  a = ExtraModelArgs{};
  a.no_mmproj_offload = true;
  EXPECT_THAT(error_of(a), HasSubstr("--no-mmproj-offload: without a projector"));

  auto s = main_session({gpu("gpu0", 4 * GiB), wrapped_cpu(16 * GiB)});
  ASSERT_NE(s, nullptr);
  a = draft_args("tessera-extra-draft-devd-bad.gguf");
  a.devd = "gpu7";
  auto p = place_extra_models(*s, draft(a), {}, &builtin_registry());
  ASSERT_FALSE(p.ok());
  EXPECT_THAT(p.status().message(), HasSubstr("--device-draft gpu7: no GPU of that name"));
}

// Scenario files: "draft" and "mmproj" with their expectations; errors name the key.
TEST(ExtraModels, ScenarioKeysAndExpectations) {
  const std::string main = write_qwen05("tessera-extra-scn-main.gguf");
  const std::string d = write_qwen05("tessera-extra-scn-draft.gguf");
  const std::string topo =
      R"({"name": "draft-test", "devices": [{"name": "gpu0", "type": "gpu", "memory": "1 GiB"},
                      {"name": "cpu", "type": "cpu", "wraps": "CPU", "memory": "16 GiB"}]})";
  auto text = [&](const std::string& draft, const std::string& expect) {
    return R"({"name": "draft-overflow", "topology": )" + topo + R"(, "model": {"gguf": ")" + main +
           R"(", "ctx_size": 4096}, "draft": )" + draft + R"(, "run": {"mode": "metadata-only"}, "expect": )" + expect +
           "}";
  };
  // The 1 GiB GPU of DraftOverflowIsReportedAsTheDrafts: the draft overflows it.
  auto sc = parse_scenario(text(R"({"gguf": ")" + d + R"(", "n_gpu_layers": "all", "ctx_size": 4096})",
                                R"({"extra_models_fit": false,
                                    "extra_overflow_contains": "gpu0 overflows because of the draft model"})"),
                           "case.json");
  ASSERT_TRUE(sc.ok()) << sc.status().message();
  const ScenarioOutcome out = run_scenario(sc.value(), &builtin_registry());
  EXPECT_TRUE(out.passed) << out.error << (out.results.empty() ? "" : out.results.back().detail);
  // Expecting a fit fails it.
  auto fits = parse_scenario(text(R"({"gguf": ")" + d + R"("})", R"({"extra_models_fit": true})"), "case.json");
  ASSERT_TRUE(fits.ok()) << fits.status().message();
  EXPECT_FALSE(run_scenario(fits.value(), &builtin_registry()).passed);

  auto error_of = [&](const std::string& draft) {
    auto s = parse_scenario(text(draft, R"({"extra_models_fit": true})"), "case.json");
    EXPECT_FALSE(s.ok());
    return s.ok() ? std::string() : s.status().message();
  };
  EXPECT_THAT(error_of(R"({"gguf": ")" + d + R"(", "devices": ["gpu9"]})"),
              HasSubstr("case.json: draft.devices[0]: no GPU named \"gpu9\""));
  EXPECT_THAT(error_of(R"({"gguf": "no-such-draft.gguf"})"), HasSubstr("case.json: draft.gguf: --draft: "));
  EXPECT_THAT(error_of(R"({"gguf": ")" + d + R"(", "n_gpu_layer": 3})"), HasSubstr("draft: unknown key"));
  EXPECT_THAT(error_of(R"({"gguf": ")" + d + R"(", "n_gpu_layers": "some"})"), HasSubstr("draft.n_gpu_layers"));
}

// A unified-memory GPU (docs/topology.md) whose share and the host pool are both 2,281,701,376 B (17/8 GiB): the main
// model takes 988,208,640 + 48 MiB = 1,038,540,288 B on the GPU and 272,269,312 B on the CPU (1,310,809,600 B of the
// pool, plus small compute buffers); the draft needs 1,038,540,288 B more on the GPU, 2,349,349,888 B in all. The GPU's
// own share alone would leave 2,281,701,376 - 2 x 1,038,540,288 = 204,620,800 B, enough: only the pool, counted once
// for both models, makes it overflow.
TEST(ExtraModels, UnifiedPoolCountsBothModelsOnce) {
  DeviceConfig g = gpu("gpu0", 17 * GiB / 8);
  g.unified = true;
  auto s = main_session({g, wrapped_cpu(17 * GiB / 8)});
  ASSERT_NE(s, nullptr);
  auto p = place_extra_models(*s, draft(draft_args("tessera-extra-draft-unified.gguf")), {}, &builtin_registry());
  ASSERT_TRUE(p.ok()) << p.status().message();
  ASSERT_FALSE(p.value().fits());
  EXPECT_THAT(p.value().overflows[0], HasSubstr("gpu0 overflows because of the draft model"));
  EXPECT_EQ(p.value().devices[0].draft_weights + p.value().devices[0].draft_kv, kDraftGpuWeights + kDraftKv4096);
  EXPECT_LE(p.value().devices[0].main + p.value().devices[0].draft(), p.value().devices[0].allocatable);
}
