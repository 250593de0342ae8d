// Fuzz target: a pasted llama.cpp command line (tessera/llama/llama_cmdline.h; `tessera plan -- ...` and
// --llama-args). Any text: split_command_words returns words or an error about an unterminated quote; the words,
// quoted again, split back to the same words; read_llama_command (for plan and for fit) returns a command or an error
// that names the program ("llama.cpp" without one); never a crash, throw, leak or hang. In an accepted command every
// tessera argument is an option ("--name") or the value after one, every option taken or ignored is listed with the
// words it was given as (none empty), and no word is listed twice.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "fuzz_input.h"
#include "tessera/llama/llama_cmdline.h"

namespace {

// A word quoted for a POSIX shell: '...' with each ' written as '\''.
std::string quoted(const std::string& w) {
  std::string q = "'";
  for (char c : w) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace tessera;
  const std::string text(fuzz::as_text(data, size));
  auto words = llama::split_command_words(text);
  if (!words.ok()) {
    FUZZ_CHECK(words.status().message().find("unterminated") != std::string::npos,
               "a split error that is not an unterminated quote: " + words.status().message());
    return 0;
  }
  std::string again;
  for (const std::string& w : words.value()) again += (again.empty() ? "" : " ") + quoted(w);
  auto words2 = llama::split_command_words(again);
  FUZZ_CHECK(words2.ok() && words2.value() == words.value(), "the words quoted again split differently: " + again);

  for (const bool fit : {false, true}) {
    llama::LlamaCommandTarget target;
    target.fit = fit;
    auto cmd = llama::read_llama_command(words.value(), target);
    if (!cmd.ok()) {
      const std::string& m = cmd.status().message();
      FUZZ_CHECK(m.rfind("llama", 0) == 0 || m.rfind("main: ", 0) == 0 || m.rfind("server: ", 0) == 0,
                 "the error does not name the program: " + m);
      continue;
    }
    const llama::LlamaCommand& c = cmd.value();
    bool value_next = false;
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (value_next) {
        value_next = false;
        continue;
      }
      const std::string& a = c.args[i];
      FUZZ_CHECK(a.rfind("--", 0) == 0, "a tessera argument that is no option: " + a);
      // the options that take a value (every tessera option read_llama_command writes but the switches)
      static const char* const kSwitches[] = {"--cpu-moe",    "--no-kv-offload",    "--no-op-offload",
                                              "--kv-unified", "--swa-full",         "--no-mmap",
                                              "--embeddings", "--no-mmproj-offload"};
      bool is_switch = false;
      for (const char* s : kSwitches) is_switch = is_switch || a == s;
      if (!is_switch) {
        FUZZ_CHECK(i + 1 < c.args.size(), "an option without its value at the end: " + a);
        value_next = true;
      }
    }
    for (const std::vector<std::string>* list : {&c.used, &c.ignored}) {
      for (const std::string& u : *list) FUZZ_CHECK(!u.empty(), "an empty entry among the options taken or ignored");
    }
    FUZZ_CHECK(c.used.size() + c.ignored.size() <= words.value().size(), "more options listed than words given");
  }
  return 0;
}
