// The placement options: one table that the command line and scenario files both read, so an option has the same
// name and the same meaning in both (docs/scenarios.md, "Placement options"). The scenario key is the name; the
// command line spells it with dashes ("n_gpu_layers" -> "--n-gpu-layers") and may add short or familiar aliases
// ("--ngl"). A boolean whose default is true is turned off on the command line by its negation ("--no-op-offload").
#pragma once

#include <string>
#include <vector>

#include "tessera/harness/placement/policy.h"
#include "tessera/status.h"

namespace tessera::harness {

struct PolicyOption {
  std::string key;    // the scenario key in "policy" ("n_gpu_layers")
  std::string flags;  // the command-line names, comma-separated ("--ngl,--n-gpu-layers")
  std::string value;  // how a command-line value is written ("N", "A,B,...", "REGEX=TARGET"); empty for a switch
  std::string help;
  // In a file: a list. On the command line: the option may be given again, and each occurrence adds to the list.
  bool repeatable = false;
};

// Every placement option, in the order the help lists them.
const std::vector<PolicyOption>& policy_options();

// Applies one command-line occurrence of the option `key` to `policy`: `text` is its value ("" for a switch).
// Errors (kInvalidArgument) name the option's first flag, the text and what was expected; an unknown key is an
// error too.
Status apply_policy_option(const std::string& key, const std::string& text, PlacementPolicy* policy);

}  // namespace tessera::harness
