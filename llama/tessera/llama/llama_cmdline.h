// A llama.cpp command line pasted whole: `tessera plan -t rtx3060 -- llama-server -m X.gguf -ngl 99 -t 8 -c 32768`
// or `tessera plan --llama-args "llama-server -m X.gguf ..."` (docs/scenarios.md, "A pasted llama.cpp command line").
// The words are read with llama.cpp's own rules -- common/arg.cpp for llama-server, llama-cli and the other tools,
// tools/llama-bench/llama-bench.cpp for llama-bench -- so `-t 8` is the thread count there, `--parallel 4` the number
// of sequences and `-fa` a switch in old builds. Each option that changes placement, memory or speed becomes tessera's
// option of the same meaning; the others (threads, sampling, the server's network, the chat template, ...) are
// accepted and listed as ignored; an option llama.cpp does not have is an error with a did-you-mean, as in llama.cpp.
#pragma once

#include <string>
#include <vector>

#include "tessera/status.h"

namespace tessera::llama {

struct LlamaCommand {
  // The program ("llama-server", "llama-cli", "llama-bench", ...; its base name) or "" when the words start with an
  // option (read with llama-server's and llama-cli's common rules).
  std::string program;
  std::vector<std::string> args;     // tessera's arguments: "--n-gpu-layers", "99", "-m", "X.gguf", ...
  std::vector<std::string> used;     // the options taken, as given ("-ngl 99")
  std::vector<std::string> ignored;  // the options with no effect on placement or memory, as given ("-t 8")
  std::vector<std::string> notes;    // the program's own defaults that were applied, and why an option is ignored
};

// Which tessera subcommand reads the command: `fit` takes llama.cpp's --fit-target and --fit-ctx; plan, run and the
// others set them aside (they answer what the options give, as llama.cpp with --fit off).
struct LlamaCommandTarget {
  bool fit = false;
};

// Reads words[0..] (the program first, or the first option). Errors (kInvalidArgument): an option llama.cpp does not
// have (with the closest name), an option without its value, a word that is no option, a model to download (-hf, -mu:
// give the file with -m), what Tessera cannot honour (LoRA adapters, control vectors), and a llama-bench option given
// several values (llama-bench runs one test per combination; Tessera plans one).
Result<LlamaCommand> read_llama_command(const std::vector<std::string>& words, const LlamaCommandTarget& target);

// A command line split into words as a POSIX shell splits it: blanks separate words, '...' keeps everything, "..."
// keeps everything but \" \\ \$ \`, a backslash outside quotes escapes the next character and a backslash-newline
// joins lines (a command pasted over several lines). Error: an unterminated quote. `as_printed`: a command line read
// from a log (typed in any shell, PowerShell's C:\models\x.gguf too, and perhaps cut mid-line): quotes only, a
// backslash is itself, and an unterminated quote runs to the end.
Result<std::vector<std::string>> split_command_words(const std::string& text, bool as_printed = false);

}  // namespace tessera::llama
