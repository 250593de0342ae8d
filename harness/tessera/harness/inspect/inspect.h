// `tessera inspect FILE.gguf` (docs/gguf.md, 'Inspecting a file'): a GGUF model's metadata, its tensors grouped by
// layer with type, shape and size, and totals per type, as text or JSON. Only the header is read: a 40 GB file is
// inspected without its weights.
#pragma once

#include <string>
#include <vector>

#include "tessera/gguf.h"
#include "tessera/status.h"

namespace tessera::harness {

struct InspectOptions {
  bool json = false;
  // Arrays to print in full (any length); others longer than 8 elements are shortened, and those longer than the
  // reader's limit are not read at all.
  std::vector<std::string> arrays;
  // The text's tables with fixed columns (--wide) instead of columns as wide as their cells within 80 columns.
  bool wide = false;
};

// The report of a model already read (every shard's tensors).
std::string inspect_report(const gguf::Model& model, const InspectOptions& options);

// Reads the model at `path` (its header, and every shard's of a split model) and returns the report. Errors: the
// reader's (file, offset, field), and an --array key the file does not have or that is no array.
Result<std::string> inspect_file(const std::string& path, const InspectOptions& options);

}  // namespace tessera::harness
