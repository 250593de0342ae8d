// llama.cpp's fit of the model and context parameters to free device memory (common/fit.cpp, common_fit_params; the
// `--fit` of llama-server and llama-cli, `llama-fit-params`), as an algorithm over a measuring function: docs/fit.md.
//
//   1. Measure every GPU's use (model + KV + compute buffers) with the user's own options; if each leaves at least
//      its margin free, nothing changes.
//   2. If the total is short and the user left the context unset (llama.cpp's n_ctx 0: the training context),
//      measure again at the minimum context (--fit-ctx, 4096) and interpolate linearly between the two, rounded down
//      to a multiple of 256. With one GPU that is the answer.
//   3. Refuse (llama.cpp aborts the fit) when the user set -ngl, -ts (several GPUs) or -ot / -cmoe / -ncmoe. Else fill
//      the GPUs back to front with whole layers (the last GPU takes the output layer), by false position on the
//      measured use; for a mixture-of-experts model with every layer's experts in system memory.
//   4. A MoE model whose dense weights all fit: convert the expert-less layers back to whole layers front to back,
//      then try one more partial layer on each GPU, overflowing (as -ot) to the next GPU or to the CPU: attention +
//      up first, then attention + up + gate, else attention alone.
// The result is the flags llama-fit-params prints: -c, -ngl, -ts (layers per GPU) and -ot.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "tessera/llama/llama_memory.h"
#include "tessera/harness/session/session.h"
#include "tessera/status.h"

namespace tessera {
class Registry;
}  // namespace tessera

namespace tessera::llama {

// What stays on the GPU of a device's first partial layer (llama.cpp's common_layer_fraction_t); the rest of the
// layer's FFN overflows.
enum class LayerFraction { kAttn = 1, kUp = 2, kGate = 3, kMoe = 4 };

// One GPU's layers in a trial (llama.cpp's ngl_t): n_layer layers of which the last n_part are partial (the first
// of those keeps `overflow`'s part, the others everything but their experts).
struct FitLayers {
  int n_layer = 0;
  int n_part = 0;
  LayerFraction overflow = LayerFraction::kMoe;
  int n_full() const { return n_layer - n_part; }
};

// The parameters fit sets, as llama.cpp's flags. `placed` false: the user's own -ngl/-ts/-ot (only n_ctx is fit's).
struct FitSetting {
  int64_t n_ctx = 0;  // 0: unset (the model's training context)
  bool placed = false;
  int n_gpu_layers = -1;                                       // -1: all
  std::vector<int> tensor_split;                               // per GPU; empty or all 0: by free memory
  std::vector<std::pair<std::string, std::string>> overrides;  // (pattern, llama.cpp buffer type), first match wins
};

// The flags of a setting in llama.cpp's syntax, as llama-fit-params prints them: "-c N -ngl N[ -ts a,b][ -ot
// \"p=B,...\"]" (-ts only with more than one GPU left after dropping trailing zeros). n_ctx_resolved: what -c prints
// when the setting leaves the context unset.
std::string fit_flags(const FitSetting& s, int64_t n_ctx_resolved, int n_gpu_layers_resolved);
struct FitProblem;
// The same for a setting of problem p: a setting the fit did not place keeps what the user gave (-ngl, -ts, -ot as
// written; llama-fit-params prints the model parameters, which the fit then left as the command line set them), and
// an unset -ngl prints every layer (n_layer + 1), an unset -c the training context.
std::string fit_flags(const FitSetting& s, const FitProblem& p);

// One GPU's measured use.
struct FitUse {
  int64_t model = 0;  // model buffers
  int64_t total = 0;  // model + KV + compute
};
// Measures each GPU's use (in GPU order) under a setting; an error ends the fit.
using FitMeasure = std::function<Result<std::vector<FitUse>>(const FitSetting&)>;

struct FitProblem {
  int n_layer = 0;           // repeating layers (llama.cpp's hp_ngl); the output layer is one more
  int64_t n_ctx_train = 0;   // the model's training context
  int n_expert = 0;          // 0: dense
  int64_t n_ctx = 0;         // -c as given; 0: unset
  int64_t n_ctx_min = 4096;  // --fit-ctx
  // Per GPU, in order: llama.cpp's buffer type name ("CUDA0", ...), free memory and the margin to leave free.
  std::vector<std::string> gpus;
  std::vector<int64_t> free, margins;
  // What the user set that the fit may not change, as given ("" unset): -ngl and -ts as written; user_ot the
  // overrides as flags (`-ot "exps=CPU"`, `-cmoe`, `-ncmoe 4`, each once as given).
  std::string user_ngl, user_ts, user_ot;
  // -sm row: the fit may reduce the context, but not move weights over several GPUs (common/fit.cpp: "changing weight
  // allocation for LLAMA_SPLIT_MODE_ROW not implemented, abort").
  bool row_split = false;
};

struct FitResult {
  enum class Outcome { kUnchanged, kFitted, kFailed };
  Outcome outcome = Outcome::kUnchanged;
  FitSetting setting;             // the parameters to use (kFailed: the user's, with the context fit chose)
  std::vector<FitLayers> layers;  // per GPU (empty when the layers were not fit)
  std::string failure;            // kFailed: llama.cpp's reason
  std::vector<std::string> log;   // the steps, as llama.cpp's trace lines tell them
  int measurements = 0;
};

// The patterns llama.cpp's fit writes for layer il (get_overflow_pattern): the tensors that overflow.
std::string fit_overflow_pattern(int il, LayerFraction f);
// Every layer's experts (the pattern of the MoE step).
extern const char* const kFitMoePatternAll;

// Runs the fit. Errors: the measuring function's.
Result<FitResult> llama_fit(const FitProblem& p, const FitMeasure& measure);

// ---- The fit on a simulated topology (llama/llama_fit_session.cpp) ----

// What the fit of a session config needs beyond the config: the run's context parameters, the model's training
// context, the margins and what the user set.
struct SessionFitInputs {
  LlamaContextParams params;  // -b, -ub, --swa-full
  bool tokens_given = false;  // --tokens / -b / -ub given: the graph's batch stays; else llama.cpp's n_ubatch
  int64_t n_ctx_train = 0;    // the model's training context (a preset's n_ctx)
  int64_t n_ctx = 0;          // -c / --ctx as given; 0: unset
  int64_t n_ctx_min = 4096;   // --fit-ctx
  // --fit-target per GPU in bytes (one value: every GPU); empty: each GPU's topology fit_margin where set, else
  // 1024 MiB.
  std::vector<int64_t> fit_target;
  std::string user_ngl, user_ts, user_ot;  // as FitProblem's
};

// The problem of a session config (model without a serialized graph): the GPUs (every device but the CPU), their
// free memory as the simulator reports it before anything is placed, their margins. Errors: a serialized graph, a
// --fit-target list whose length is neither 1 nor the number of GPUs, an invalid topology.
Result<FitProblem> session_fit_problem(const harness::SessionConfig& base, const SessionFitInputs& in,
                                       const Registry* real);

// A placed setting's -ngl, -ts and -ot as the policy's (the user's own placement replaced).
void apply_fit_placement(const FitSetting& setting, harness::PlacementPolicy* policy);

// The session config of a fit setting: the context (and llama.cpp's n_ubatch for it), -ngl, -ts and -ot as fit sets
// them (the user's own placement when setting.placed is false). With `unbounded`, every device's memory is raised by
// 1 PiB, so that a placement larger than the device plans and is measured (llama.cpp measures with no_alloc), the
// default -ts split kept at the real free memory.
Result<harness::SessionConfig> fit_session_config(const harness::SessionConfig& base, const SessionFitInputs& in,
                                                  const FitProblem& problem, const FitSetting& setting, bool unbounded);

// Per GPU (FitProblem::gpus order): model, and model + KV + compute bytes of llama.cpp's buffers (llama_memory.h).
std::vector<FitUse> fit_use_of(harness::Session& s, const FitProblem& problem, const LlamaContextParams& params);

// The measuring function of a session config: each setting is planned (metadata-only) on the unbounded topology.
FitMeasure session_fit_measure(const harness::SessionConfig& base, const SessionFitInputs& in,
                               const FitProblem& problem, const Registry* real);

}  // namespace tessera::llama
