// llama.cpp's graph by build (see tessera/llama/llama_cpp_graph.h; the sources are listed in docs/compare-log.md).
#include "tessera/llama/llama_cpp_graph.h"

#include <algorithm>

namespace tessera::llama {

namespace {

// The first build with each change (llama.cpp's master, `git rev-list --count` of the merge commit).
constexpr int kOutIds = 2540;           // PR #6122
constexpr int kNoStoreReshape = 2572;   // PR #6369 (057400a3)
constexpr int kQkvShapes = 4919;        // PR #12449 (75422e8b)
constexpr int kKvPermutes = 5429;       // PR #13194
constexpr int kGlu = 5776;              // PR #14158 (a0535ffa)
constexpr int kKWriteReshape = 5817;    // PR #14285
constexpr int kNoQkvCont = 5837;        // PR #14568 (12f55c30)
constexpr int kStreams = 5913;          // PR #14363 (225e7a14)
constexpr int kMergedConts = 6195;      // PR #15380 (baa9255a)
constexpr int kNoFusedVCont = 6410;     // PR #15662 (cf0e3ba1)
constexpr int kSetRows = 6071;          // PR #14959 (a4569c41)
constexpr int kMoeWeightsEarly = 6583;  // PR #16130 (077c94d0)
constexpr int kMoeClamp = 6844;         // PR #16655 (f696428c)
constexpr int kVBeforeK = 7044;         // PR #16884 (a90eb94c)
constexpr int kInpEmbd = 7819;          // PR #18898 (557515be)
constexpr int kKvRotation = 8619;       // PR #21038 (744c0c73)
constexpr int kRotationSwa = 8699;      // PR #21513 (4eb19514)
constexpr int kRotationCont = 9027;     // PR #22630 (fa595462)
constexpr int kMaskF16 = 9410;          // PR #23764 (031ddb2e)
constexpr int kCudaFaF16 = 9489;        // PR #23907 (f8f0a47a)
constexpr int kFaSinksSkipped = 10150;  // PR #25832
constexpr int kOutIdsAfter = 10158;     // PR #25794 (f8706784)
constexpr int kOldest = 2459;           // the oldest build whose graph was checked against a log

}  // namespace

models::LlamaCppGraph llama_cpp_graph(int build) {
  const int b = std::max(build, kOldest);
  models::LlamaCppGraph g;
  g.build = build;
  g.out_ids_always = b >= kOutIds;
  g.kv_cpy = b < kSetRows;
  g.k_write_reshape = g.kv_cpy && b >= kKWriteReshape;
  g.v_store_reshape = g.kv_cpy && (b < kNoStoreReshape || b >= kQkvShapes);
  g.v_reshape_3d = b >= kQkvShapes;
  g.kv_permutes = b >= kKvPermutes;
  g.q_stream_view = b >= kStreams;
  g.split_glu = b < kGlu;
  g.qkv_cont = b < kNoQkvCont;
  g.fused_v_cont = !g.qkv_cont && b < kNoFusedVCont;
  g.fused_v_cont_3d = g.fused_v_cont && b >= kMergedConts;
  g.moe_weights_clamp = b >= kMoeClamp;
  g.moe_weights_early = b >= kMoeWeightsEarly;
  g.v_before_k = b >= kVBeforeK;
  g.inp_embd_input = b >= kInpEmbd;
  g.kv_rotation = b >= kKvRotation;
  g.kv_rotation_swa_inputs = b >= kRotationSwa;
  g.rotation_cont = b >= kRotationCont;
  g.mask_f16 = b >= kMaskF16;
  g.cuda_fa_f16_copies = b >= kCudaFaF16;
  g.fa_sinks_decide = b < kFaSinksSkipped;
  g.out_ids_after_layers = b >= kOutIdsAfter;
  return g;
}

}  // namespace tessera::llama
