// `tessera` subcommands kept outside main.cpp: `compare-log` (compare_log.cpp, docs/compare-log.md). Each returns the
// tool's exit code: 0 ok, 1 an expectation failed, 2 usage or input error.
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <string>

#include "tessera/harness/llama_log.h"
#include "tessera/harness/llama_log_predict.h"

namespace tessera::tool {

struct CompareLogArgs {
  std::string path;
  std::string model;  // -m FILE.gguf
  bool json = false;
  harness::LogTolerance tolerance;
};
// Adds `compare-log LOG [--json]` to the app; the returned subcommand is parsed into `args`.
CLI::App* add_compare_log(CLI::App& app, CompareLogArgs& args);
int cmd_compare_log(const CompareLogArgs& args, const Registry* real_devices);

// The record and the comparison as text and as the `tessera-compare-log` JSON object (docs/json.md,
// docs/json/compare-log.schema.json).
std::string compare_log_text(const harness::LlamaLog& log, const harness::LogPrediction& p,
                             const harness::LogTolerance& t);
nlohmann::ordered_json compare_log_json(const harness::LlamaLog& log, const harness::LogPrediction& p,
                                        const harness::LogTolerance& t);

}  // namespace tessera::tool
