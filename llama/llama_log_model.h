// Internal to the harness: a model built from a llama.cpp log's printed metadata (docs/compare-log.md, "The model
// from the printed metadata"), for tessera/llama/llama_log_predict.h.
#pragma once

#include <string>
#include <vector>

#include "tessera/llama/llama_log.h"
#include "tessera/models/from_gguf.h"
#include "tessera/models/llama.h"

namespace tessera::llama {

// The model of the log's metadata: the hyperparameters from the `llama_model_loader: - kv` lines (or print_info's
// n_layer, n_embd, ...) read as a GGUF file's keys by models::llama_config_from_gguf, the tensors of the
// architecture's graph, and each weight's type from the printed type counts: exact when one quantized type is
// printed; llama-quantize's rules (models::fixtures::quantized_types) for the printed file type (the legacy and K-quant
// mixes, IQ4_NL, IQ4_XS, MXFP4 MoE; with or without an importance matrix, whichever matches), checked
// against the printed counts. Tied embeddings: whichever of the two graphs has the printed tensor count. Errors
// (kNotFound): the lines the log lacks, or why the printed metadata gives no model; `notes` gets what was assumed.
Result<models::LlamaConfig> model_from_log_metadata(const LlamaLog& log, const models::GgufRunShape& run,
                                                    std::vector<std::string>* notes);

}  // namespace tessera::llama
