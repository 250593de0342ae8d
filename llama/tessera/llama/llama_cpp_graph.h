// llama.cpp's graph as its builds made it: the switches of models::LlamaCppGraph (the variants the decoder builds,
// tessera/models/llama_cpp_graph.h) that llama.cpp build N had. A llama.cpp log names its build ("build: 5605
// (5787b5da)", "main: build = 2459 (d199ca79)"), and `tessera compare-log` builds that build's graph.
//
// Each switch is set from the llama.cpp change (pull request) that made it and the first build with it, counted as
// llama.cpp counts its builds (the commits of master: `git rev-list --count`). They were read in llama.cpp's source
// at those builds and checked against the node counts users' logs print (docs/compare-log.md, "llama.cpp's graph by
// build", lists the sources and the logs).
#pragma once

#include "tessera/models/llama_cpp_graph.h"

namespace tessera::llama {

// The builds a log without a build line is given: one in llama.cpp's older log format (llm_load_print_meta:, before
// build 4463; every build from 2572 to 4918 makes the same graph) and one in today's (the newest build checked).
constexpr int kLlamaCppOldFormatBuild = 4400;
constexpr int kLlamaCppNewestBuild = 10470;
// From this build llama.cpp's reserve keeps the pins its graph callback sets (PR #17232): use_llama_cpp_rules pins.
constexpr int kLlamaCppReservePins = 7050;
// From this build llama.cpp reserves its prompt graph for min(n_ubatch, n_outputs_max) outputs, not n_ubatch
// (PR #23861, de6f727a, "limit max outputs of llama_context"): LlamaContextParams::n_outputs_max.
constexpr int kLlamaCppOutputsMax = 9460;
// From this build llama.cpp reserves its graphs for n_seq_max sequences with a unified cache too (PR #17276,
// e072b205, "llama : update worst-case graph for unified cache"; before, for one): graph_reserve rounds the prompt
// graph's tokens up to a multiple of them (-np 3 -kvu -ub 512: 513 tokens, the outputs staying 512).
constexpr int kLlamaCppReserveSeqs = 7190;
// From this build -fa auto is decided on a graph of one token per sequence (PR #15696, 9777032d, "separate compute
// buffer reserve from fattn check"; #15699 gave it the sequences; #24646's resolve_fused_ops keeps it), where nothing
// is offloaded by batch size; before (from #15434, build 6325) on the prompt graph.
constexpr int kLlamaCppFaProbeOneToken = 6334;

// The graph of llama.cpp build `build` (>= 1). Builds before 2459 are given 2459's graph (the oldest checked): earlier
// ones also shifted K inside the reserved graph (before PR #5691), which is not modelled.
models::LlamaCppGraph llama_cpp_graph(int build);

}  // namespace tessera::llama
