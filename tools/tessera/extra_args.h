// The extra models on tessera's command line (docs/extra-models.md): --draft / -md FILE.gguf with -ngld, -devd, -cd,
// -ctkd, -ctvd, and --mmproj / -mm FILE.gguf with --no-mmproj-offload (llama.cpp's names, common/arg.cpp), and their
// report after `plan` and `run`.
#pragma once

#include <nlohmann/json.hpp>

#include <CLI/CLI.hpp>

#include "tessera/llama/extra_models.h"

namespace tessera::tool {

using ojson = nlohmann::ordered_json;

void add_extra_model_options(CLI::App* app, llama::ExtraModelArgs* a);

// Places the extra models `extra` (nothing when there are none) next to the session and reports them:
// the text on standard output, or with `json` its key "extra_models" (docs/json.md). Returns 0, 1 when an extra model
// overflows a device (the report says which and why), or 2 after printing an input error. `wide`: the tables' --wide
// layout.
int report_extra_models(harness::Session& s, const llama::ExtraModels& extra, const llama::LlamaContextParams& params,
                        bool llama_log, ojson* json, bool wide = false);
// `tessera fit` with extra models `extra`: their memory per device placed alone (extra_models_alone) is added to each
// device's reservation in config->topology, so the main model is fitted in what they leave; says so on standard
// error. Returns 0, or 2 after printing an input error.
int reserve_extra_models_for_fit(harness::SessionConfig* config, const llama::ExtraModels& extra);
// The --json object of a placement (key "extra_models").
ojson extra_models_json(const llama::ExtraModelsPlacement& p, const llama::LlamaContextParams& params);

}  // namespace tessera::tool
