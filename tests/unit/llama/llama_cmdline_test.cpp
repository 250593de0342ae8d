// A pasted llama.cpp command line (tessera/llama/llama_cmdline.h): the shell's word splitting, llama.cpp's option
// rules (common/arg.cpp; llama-bench's own), the programs' defaults, and the errors. The expected words and options
// are written out by hand from the rules cited in the header.
#include "tessera/llama/llama_cmdline.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::llama {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> split(const std::string& text) {
  auto w = split_command_words(text);
  EXPECT_TRUE(w.ok()) << w.status().message();
  return w.ok() ? w.value() : std::vector<std::string>{};
}

LlamaCommand read(const std::string& text, bool fit = false) {
  LlamaCommandTarget t;
  t.fit = fit;
  auto c = read_llama_command(split(text), t);
  EXPECT_TRUE(c.ok()) << text << ": " << c.status().message();
  return c.ok() ? c.value() : LlamaCommand{};
}

std::string error(const std::string& text) {
  auto c = read_llama_command(split(text), LlamaCommandTarget{});
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : c.status().message();
}

TEST(LlamaCmdline, WordsAreSplitAsAShellSplitsThem) {
  EXPECT_THAT(split("  a  b\tc "), ElementsAre("a", "b", "c"));
  EXPECT_THAT(split("-ot 'blk\\.[0-9]+\\.ffn_.*_exps=CPU' x"),
              ElementsAre("-ot", "blk\\.[0-9]+\\.ffn_.*_exps=CPU", "x"));
  EXPECT_THAT(split("-p \"say \\\"hi\\\" \\\\ \\n\""), ElementsAre("-p", "say \"hi\" \\ \\n"));
  EXPECT_THAT(split("a\\ b c"), ElementsAre("a b", "c"));
  EXPECT_THAT(split("llama-server \\\n  -m x.gguf \\\r\n  -ngl 99"),
              ElementsAre("llama-server", "-m", "x.gguf", "-ngl", "99"));
  EXPECT_THAT(split("-p ''"), ElementsAre("-p", ""));
  EXPECT_THAT(split("a\"b c\"d"), ElementsAre("ab cd"));
  EXPECT_TRUE(split("").empty());
  auto bad = split_command_words("-p 'open");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("unterminated ' quote"));
  EXPECT_FALSE(split_command_words("-p \"open").ok());
  // as printed in a log: quotes only (a Windows path keeps its backslashes), an unterminated quote runs to the end
  auto printed = split_command_words("-m C:\\models\\x.gguf -ot \"blk\\.1\\.=CPU\" -p 'cut", true);
  ASSERT_TRUE(printed.ok());
  EXPECT_THAT(printed.value(), ElementsAre("-m", "C:\\models\\x.gguf", "-ot", "blk\\.1\\.=CPU", "-p", "cut"));
}

TEST(LlamaCmdline, AServerCommandLine) {
  const LlamaCommand c = read(
      "CUDA_VISIBLE_DEVICES=0,1 ./build/bin/llama-server -m /m/x.gguf -ngl 99 -t 8 -c 32768 --port 8080 "
      "-fa on -ctk q8_0 --jinja -ot exps=CPU --no-mmap");
  EXPECT_EQ(c.program, "llama-server");
  EXPECT_THAT(c.used,
              ElementsAre("-m /m/x.gguf", "-ngl 99", "-c 32768", "-fa on", "-ctk q8_0", "-ot exps=CPU", "--no-mmap"));
  EXPECT_THAT(c.ignored, ElementsAre("CUDA_VISIBLE_DEVICES=0,1", "-t 8", "--port 8080", "--jinja"));
  // llama-server's own default: 4 sequences in one cache when -np is not given (tools/server/server.cpp)
  EXPECT_THAT(c.args, ElementsAre("--model", "/m/x.gguf", "--n-gpu-layers", "99", "--ctx-size", "32768", "--flash-attn",
                                  "on", "--cache-type-k", "q8_0", "--override-tensor", "exps=CPU", "--no-mmap",
                                  "--n-parallel", "4", "--kv-unified", "--n-outputs-max", "4"));
}

TEST(LlamaCmdline, TheServerKeepsTheSequencesGiven) {
  EXPECT_THAT(read("llama-server -m x -np 2 -kvu").args,
              ElementsAre("--model", "x", "--n-parallel", "2", "--kv-unified", "--n-outputs-max", "2"));
  // --parallel is -np; --no-kv-unified is llama.cpp's default, passed on as nothing
  EXPECT_THAT(read("llama-server -m x --parallel 1 --no-kv-unified").args,
              ElementsAre("--model", "x", "--n-parallel", "1", "--n-outputs-max", "1"));
  // -kvu given without -np: the automatic 4 sequences, -kvu as given
  EXPECT_THAT(read("llama-server -m x -kvu").args,
              ElementsAre("--model", "x", "--kv-unified", "--n-parallel", "4", "--n-outputs-max", "4"));
  // no program, or llama-cli: no such default
  EXPECT_THAT(read("-m x -c 0").args, ElementsAre("--model", "x", "--ctx-size", "0"));
  EXPECT_EQ(read("llama-cli -m x").program, "llama-cli");
  EXPECT_THAT(read("llama-cli -m x").args, ElementsAre("--model", "x"));
}

// llama-server's n_outputs_max (tools/server/server-context.cpp, server_n_outputs_max, build 9460, PR #23861):
// n_parallel x (1 + the most tokens a speculative type proposes), at most n_batch, at least 1; n_batch (nothing
// passed on) with --embeddings or a pooling. The defaults are common/common.h's: a draft's n_max 3, ngram-mod 64,
// the ngram maps' size_m 48, ngram-cache 8.
TEST(LlamaCmdline, TheServerReservesOutputsPerSequence) {
  auto outputs = [](const std::string& text) {
    const std::vector<std::string> a = read(text).args;
    for (size_t k = 0; k + 1 < a.size(); ++k) {
      if (a[k] == "--n-outputs-max") return a[k + 1];
    }
    return std::string("none");
  };
  EXPECT_EQ(outputs("llama-server -m x"), "4");
  EXPECT_EQ(outputs("llama-server -m x -np 3 -kvu --spec-type draft-simple"), "12");  // 3 x (1 + 3)
  EXPECT_EQ(outputs("llama-server -m x -np 2 -kvu --spec-type draft-simple --draft-max 8"), "18");
  EXPECT_EQ(outputs("llama-server -m x -np 1 --spec-type ngram-cache,draft-mtp --spec-draft-n-max 2"), "9");
  EXPECT_EQ(outputs("llama-server -m x -np 1 --spec-default"), "65");  // ngram-mod, n_max 64
  EXPECT_EQ(outputs("llama-server -m x -np 2 -kvu --spec-type ngram-map-k4v --spec-ngram-map-k4v-size-m 24"), "50");
  EXPECT_EQ(outputs("llama-server -m x -np 1 --spec-type none"), "1");
  EXPECT_EQ(outputs("llama-server -m x -np 64 -kvu -b 32"), "32");  // at most -b
  EXPECT_EQ(outputs("llama-server -m x --embeddings"), "none");
  EXPECT_EQ(outputs("llama-server -m x --pooling mean"), "none");
  EXPECT_EQ(outputs("llama-server -m x --pooling none"), "4");
  EXPECT_EQ(outputs("llama-cli -m x --spec-type draft-simple"), "none");  // llama-server's rule only
  const LlamaCommand c = read("llama-server -m x -np 2 -kvu");
  EXPECT_THAT(c.notes, ::testing::Contains(HasSubstr("n_outputs_max 2")));
  EXPECT_THAT(error("llama-server -m x --spec-type draft-smple"), HasSubstr("unknown type 'draft-smple'"));
  EXPECT_THAT(error("llama-server -m x --draft-max many"), HasSubstr("--draft-max many: expected a number"));
}

TEST(LlamaCmdline, LongNamesWithEqualsAndUnderscores) {
  // common_params_parse_ex reads '_' as '-' in a long name
  const LlamaCommand c = read("--n_gpu_layers=20 --ctx_size 4096 --tensor-split=3,1 --override-tensor=a=CPU");
  EXPECT_THAT(c.args, ElementsAre("--n-gpu-layers", "20", "--ctx-size", "4096", "--tensor-split", "3,1",
                                  "--override-tensor", "a=CPU"));
  EXPECT_THAT(error("--metrics=1"), HasSubstr("--metrics takes no value"));
}

TEST(LlamaCmdline, FlashAttentionWasASwitch) {
  // -fa without on|off|auto (builds before 2025) is on; with a value, the value
  EXPECT_THAT(read("-fa -ngl 9").args, ElementsAre("--flash-attn", "on", "--n-gpu-layers", "9"));
  EXPECT_THAT(read("-fa off").args, ElementsAre("--flash-attn", "off"));
  EXPECT_THAT(read("-fa").args, ElementsAre("--flash-attn", "on"));
  EXPECT_THAT(read("--flash-attn=auto").args, ElementsAre("--flash-attn", "auto"));
  // --color's optional value is not taken for an option
  EXPECT_THAT(read("--color -ngl 1").args, ElementsAre("--n-gpu-layers", "1"));
  EXPECT_THAT(read("--color on -ngl 1").ignored, ElementsAre("--color on"));
}

TEST(LlamaCmdline, FitOptionsGoToFitOnly) {
  const LlamaCommand plan = read("-m x -fitt 512 -fitc 8192 -fit on");
  EXPECT_THAT(plan.args, ElementsAre("--model", "x"));
  EXPECT_THAT(plan.ignored, ElementsAre("-fitt 512", "-fitc 8192", "-fit on"));
  const LlamaCommand fit = read("-m x -fitt 512 -fitc 8192 -fit on", true);
  EXPECT_THAT(fit.args, ElementsAre("--model", "x", "--fit-target", "512", "--fit-ctx", "8192"));
  EXPECT_THAT(fit.ignored, ElementsAre("-fit on"));
}

TEST(LlamaCmdline, TheDraftAndTheProjector) {
  EXPECT_THAT(read("-m x -md d.gguf -ngld 99 -devd CUDA1 -cd 4096 -ctkd q8_0 -mm p.gguf --no-mmproj-offload").args,
              ElementsAre("--model", "x", "--model-draft", "d.gguf", "--gpu-layers-draft", "99", "--device-draft",
                          "CUDA1", "--ctx-size-draft", "4096", "--cache-type-k-draft", "q8_0", "--mmproj", "p.gguf",
                          "--no-mmproj-offload"));
}

TEST(LlamaCmdline, LlamaBenchHasItsOwnRules) {
  // 0|1 values, '/' between -ts parts and -dev devices; -ngl 99 and the newest -fa auto by default; the prompt
  // test's context is its tokens (n_prompt + n_depth)
  const LlamaCommand c = read("llama-bench -m x -p 1024 -n 64 -d 4096 -nkvo 1 -mmp 0 -ts 3/1 -dev CUDA0/CUDA1 -t 16");
  EXPECT_THAT(c.args, ElementsAre("--model", "x", "--no-kv-offload", "--no-mmap", "--tensor-split", "3,1", "--device",
                                  "CUDA0,CUDA1", "--n-gpu-layers", "99", "--flash-attn", "auto", "--ctx-size", "5120"));
  EXPECT_THAT(c.ignored, ElementsAre("-t 16"));
  EXPECT_THAT(read("llama-bench -m x -fa 0 -nkvo 0 -ngl 10").args,
              ElementsAre("--model", "x", "--flash-attn", "off", "--n-gpu-layers", "10", "--ctx-size", "512"));
  // -p 0: the generation test, one token at a time
  EXPECT_THAT(
      read("llama-bench -m x -p 0 -n 128 -fa 1").args,
      ElementsAre("--model", "x", "--flash-attn", "on", "--n-gpu-layers", "99", "--ctx-size", "128", "--tokens", "1"));
  EXPECT_THAT(error("llama-bench -m x -ngl 10,20"), HasSubstr("-ngl 10,20: one value per option"));
  EXPECT_THAT(error("llama-bench -m x -fa on"), HasSubstr("-fa on: expected 0 or 1"));
  EXPECT_THAT(error("llama-bench -m x -p 0 -n 0"), HasSubstr("no test to plan"));
  // a server option is no llama-bench option
  EXPECT_THAT(error("llama-bench -m x -c 4096"), HasSubstr("unknown option '-c'"));
}

TEST(LlamaCmdline, Errors) {
  EXPECT_THAT(error("llama-server -m x --ctx-szie 4096"),
              HasSubstr("llama-server: unknown option '--ctx-szie'; did you mean '--ctx-size'?"));
  EXPECT_THAT(error("-m x --frobnicate"), HasSubstr("llama.cpp: unknown option '--frobnicate'"));
  EXPECT_THAT(error("llama-server -m"), HasSubstr("-m needs a value"));
  EXPECT_THAT(error("llama-server -hf org/repo:Q4_K_M"), HasSubstr("a model to download"));
  EXPECT_THAT(error("llama-cli -m x --lora a.gguf"), HasSubstr("not supported yet: LoRA adapters"));
  EXPECT_THAT(error("python3 -m x"), HasSubstr("'python3' is not a llama.cpp program"));
  EXPECT_THAT(error("llama-server -m x stray"), HasSubstr("'stray' is no option"));
}

}  // namespace
}  // namespace tessera::llama
