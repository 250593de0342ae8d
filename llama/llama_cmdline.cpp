// A llama.cpp command line pasted whole (see tessera/llama/llama_cmdline.h).
#include "tessera/llama/llama_cmdline.h"

#include <algorithm>
#include <string_view>

#include "option_names.h"
#include "tessera/harness/common/edit_distance.h"

namespace tessera::llama {

namespace {

// What an option of llama.cpp comes to.
enum class Kind {
  kOption,     // tessera's option `tessera` (with the value when the option takes one)
  kSame,       // llama.cpp's default restated (--mmap, -kvo): taken, nothing to pass on
  kBenchTest,  // llama-bench's test sizes (-p, -n, -d): the context of the test planned (read_llama_command)
  kIgnored,    // no effect on placement, memory or speed that Tessera models: listed as ignored
  kFitOnly,    // fit's options (-fitt, -fitc): tessera's under `fit`, ignored elsewhere
  kDownload,   // a model fetched over the network: an error (give the file with -m)
  kRefused,    // changes memory in a way Tessera does not model yet: an error
};

struct Entry {
  const char* names;  // llama.cpp's spellings, comma-separated
  int arity;          // 0: a switch, 1: takes a value
  Kind kind;
  const char* tessera = "";  // tessera's option (kOption, kFitOnly); kBenchTest: "p", "n" or "d"
  const char* why = "";      // kIgnored: what it is about; kRefused: what is not modelled
};

// llama-server's, llama-cli's and the other tools' options (common/arg.cpp), those that change placement or memory
// first. Ignored options are grouped by what they are about.
constexpr Entry kCommon[] = {
    {"-m,--model", 1, Kind::kOption, "--model"},
    {"-c,--ctx-size", 1, Kind::kOption, "--ctx-size"},
    {"-b,--batch-size", 1, Kind::kOption, "--batch-size"},
    {"-ub,--ubatch-size", 1, Kind::kOption, "--ubatch-size"},
    {"-ngl,--gpu-layers,--n-gpu-layers", 1, Kind::kOption, "--n-gpu-layers"},
    {"-ts,--tensor-split", 1, Kind::kOption, "--tensor-split"},
    {"-sm,--split-mode", 1, Kind::kOption, "--split-mode"},
    {"-mg,--main-gpu", 1, Kind::kOption, "--main-gpu"},
    {"-ot,--override-tensor", 1, Kind::kOption, "--override-tensor"},
    {"-cmoe,--cpu-moe", 0, Kind::kOption, "--cpu-moe"},
    {"-ncmoe,--n-cpu-moe", 1, Kind::kOption, "--n-cpu-moe"},
    {"-nkvo,--no-kv-offload", 0, Kind::kOption, "--no-kv-offload"},
    {"-kvo,--kv-offload", 0, Kind::kSame},
    {"--no-op-offload", 0, Kind::kOption, "--no-op-offload"},
    {"-ctk,--cache-type-k", 1, Kind::kOption, "--cache-type-k"},
    {"-ctv,--cache-type-v", 1, Kind::kOption, "--cache-type-v"},
    {"-fa,--flash-attn", 1, Kind::kOption, "--flash-attn"},  // a switch before 2025 (read_llama_command)
    {"-np,--parallel", 1, Kind::kOption, "--n-parallel"},
    {"-kvu,--kv-unified", 0, Kind::kOption, "--kv-unified"},
    {"-no-kvu,--no-kv-unified", 0, Kind::kOption, "--no-kv-unified"},
    {"--swa-full", 0, Kind::kOption, "--swa-full"},
    {"-dev,--device", 1, Kind::kOption, "--device"},
    {"--no-mmap", 0, Kind::kOption, "--no-mmap"},
    {"--mmap", 0, Kind::kSame},
    {"--embedding,--embeddings", 0, Kind::kOption, "--embeddings"},
    {"-md,--model-draft", 1, Kind::kOption, "--model-draft"},
    {"-ngld,--gpu-layers-draft,--n-gpu-layers-draft", 1, Kind::kOption, "--gpu-layers-draft"},
    {"-devd,--device-draft", 1, Kind::kOption, "--device-draft"},
    {"-cd,--ctx-size-draft", 1, Kind::kOption, "--ctx-size-draft"},
    {"-ctkd,--cache-type-k-draft", 1, Kind::kOption, "--cache-type-k-draft"},
    {"-ctvd,--cache-type-v-draft", 1, Kind::kOption, "--cache-type-v-draft"},
    {"-mm,--mmproj", 1, Kind::kOption, "--mmproj"},
    {"--no-mmproj-offload", 0, Kind::kOption, "--no-mmproj-offload"},
    {"--mmproj-offload", 0, Kind::kSame},
    {"-fitt,--fit-target", 1, Kind::kFitOnly, "--fit-target"},
    {"-fitc,--fit-ctx", 1, Kind::kFitOnly, "--fit-ctx"},
    {"-fit,--fit", 1, Kind::kIgnored, "", "fit"},
    {"-hf,-hfr,--hf-repo,-hff,--hf-file,-hfd,-hfrd,--hf-repo-draft,-hfv,-hfrv,--hf-repo-v,-hffv,--hf-file-v,-mu,"
     "--model-url,-dr,--docker-repo",
     1, Kind::kDownload},
    {"-hft,--hf-token", 1, Kind::kIgnored, "", "downloads"},
    {"--lora,--lora-scaled,--control-vector,--control-vector-scaled,--control-vector-layer-range,--lora-init-without-"
     "apply",
     1, Kind::kRefused, "", "LoRA adapters and control vectors (their weights add memory)"},
    // threads and CPU scheduling
    {"-t,--threads,-tb,--threads-batch,-C,--cpu-mask,-Cr,--cpu-range,-Cb,--cpu-mask-batch,-Crb,--cpu-range-batch,"
     "--prio,--prio-batch,--poll,--poll-batch,--cpu-strict,--cpu-strict-batch,--numa,-td,--threads-draft,-tbd,"
     "--threads-batch-draft,--threads-http",
     1, Kind::kIgnored, "", "threads"},
    // the prompt, generation and sampling
    {"-p,--prompt,-f,--file,-bf,--binary-file,-sys,--system-prompt,-sysf,--system-prompt-file,-r,--reverse-prompt,"
     "-n,--predict,--n-predict,--keep,-s,--seed,--temp,--top-k,--top-p,--min-p,--top-nsigma,--xtc-probability,"
     "--xtc-threshold,--typical,--repeat-last-n,--repeat-penalty,--presence-penalty,--frequency-penalty,"
     "--dry-multiplier,--dry-base,--dry-allowed-length,--dry-penalty-last-n,--dry-sequence-breaker,--dynatemp-range,"
     "--dynatemp-exp,--mirostat,--mirostat-lr,--mirostat-ent,--samplers,--sampling-seq,-l,--logit-bias,--grammar,"
     "--grammar-file,-j,--json-schema,-jf,--json-schema-file,--in-prefix,--in-suffix,--n-probs,--image,--audio,"
     "--chat-template,--chat-template-file,--chat-template-kwargs,--reasoning-format,--reasoning-budget,"
     "--draft-min,--draft-n-min,--draft-p-min,--spec-replace,--override-kv,"
     "--rope-scaling,--rope-scale,--rope-freq-base,--rope-freq-scale,--yarn-orig-ctx,--yarn-ext-factor,"
     "--yarn-attn-factor,--yarn-beta-slow,--yarn-beta-fast,-gan,--grp-attn-n,-gaw,--grp-attn-w,--pooling,"
     "--attention,-dt,--defrag-thold,--media-path,--image-min-tokens,--image-max-tokens",
     1, Kind::kIgnored, "", "generation and sampling"},
    // the server's network, slots and cache of prompts, logging
    {"--host,--port,--path,--api-prefix,--api-key,--api-key-file,--ssl-key-file,--ssl-cert-file,-a,--alias,-to,"
     "--timeout,--slot-save-path,-sps,--slot-prompt-similarity,--cache-reuse,-ctxcp,--ctx-checkpoints,"
     "--swa-checkpoints,-cram,--cache-ram,--models-dir,--models-max,-lv,--verbosity,--log-verbosity,--log-file,"
     "--lookup-cache-static,-lcs,--lookup-cache-dynamic,-lcd,--tags,--webui-config,--webui-config-file",
     1, Kind::kIgnored, "", "the server and logging"},
    {"-v,--verbose,--log-verbose,--log-disable,--log-prefix,--log-timestamps,-cnv,--conversation,-no-cnv,"
     "--no-conversation,-st,--single-turn,-i,--interactive,-if,--interactive-first,-mli,--multiline-input,"
     "--in-prefix-bos,-e,--escape,--no-escape,--jinja,--no-jinja,--metrics,--slots,--no-slots,--props,--no-webui,"
     "--webui,-cb,--cont-batching,-nocb,--no-cont-batching,--mlock,--no-warmup,--warmup,--check-tensors,--no-perf,"
     "--perf,--ignore-eos,-sp,--special,--verbose-prompt,--display-prompt,--no-display-prompt,--context-shift,"
     "--no-context-shift,--no-prefill-assistant,--offline,--simple-io,--cache-prompt,--no-cache-prompt,-dkvc,"
     "--dump-kv-cache,--reranking,--rerank,--no-models-autoload,--models-autoload,-dio,--direct-io,-ndio,"
     "--no-direct-io,--no-host,-nr,--no-repack,--repack",
     0, Kind::kIgnored, "", "the server, the chat and logging"},
    {"--color,--log-colors", 0, Kind::kIgnored, "", "logging"},  // an optional on|off|auto (read_llama_command)
    // speculative decoding: llama-server reserves its outputs by them (read_llama_command, ServerOutputs)
    {"--spec-type,--draft-max,--draft,--draft-n,--spec-draft-n-max,--spec-ngram-mod-n-max,--spec-ngram-simple-size-m,"
     "--spec-ngram-map-k-size-m,--spec-ngram-map-k4v-size-m",
     1, Kind::kIgnored, "", "speculative decoding"},
    {"--spec-default", 0, Kind::kIgnored, "", "speculative decoding"},
};

// llama-bench's options (tools/llama-bench/llama-bench.cpp): values are lists ("-ngl 10,20"; "-ts 3/1") that give one
// test per combination; Tessera plans one, so each takes one value here.
constexpr Entry kBench[] = {
    {"-m,--model", 1, Kind::kOption, "--model"},
    {"-b,--batch-size", 1, Kind::kOption, "--batch-size"},
    {"-ub,--ubatch-size", 1, Kind::kOption, "--ubatch-size"},
    {"-ngl,--n-gpu-layers", 1, Kind::kOption, "--n-gpu-layers"},
    {"-ncmoe,--n-cpu-moe", 1, Kind::kOption, "--n-cpu-moe"},
    {"-ts,--tensor-split", 1, Kind::kOption, "--tensor-split"},  // '/' between the parts
    {"-sm,--split-mode", 1, Kind::kOption, "--split-mode"},
    {"-mg,--main-gpu", 1, Kind::kOption, "--main-gpu"},
    {"-ot,--override-tensor", 1, Kind::kOption, "--override-tensor"},
    {"-ctk,--cache-type-k", 1, Kind::kOption, "--cache-type-k"},
    {"-ctv,--cache-type-v", 1, Kind::kOption, "--cache-type-v"},
    {"-dev,--device", 1, Kind::kOption, "--device"},  // '/' between the devices
    // 0|1 values (read_llama_command)
    {"-fa,--flash-attn", 1, Kind::kOption, "--flash-attn"},
    {"-nkvo,--no-kv-offload", 1, Kind::kOption, "--no-kv-offload"},
    {"-mmp,--mmap", 1, Kind::kOption, "--no-mmap"},
    {"-embd,--embeddings", 1, Kind::kOption, "--embeddings"},
    {"-nopo,--no-op-offload", 1, Kind::kOption, "--no-op-offload"},
    // the tests: the context is their tokens (read_llama_command)
    {"-p,--n-prompt", 1, Kind::kBenchTest, "p"},
    {"-n,--n-gen", 1, Kind::kBenchTest, "n"},
    {"-d,--n-depth", 1, Kind::kBenchTest, "d"},
    {"-pg", 1, Kind::kIgnored, "", "the tests (timings: not simulated here)"},
    {"-r,--repetitions,-o,--output,-oe,--output-err,--delay", 1, Kind::kIgnored, "", "the report"},
    {"-t,--threads,-C,--cpu-mask,--cpu-strict,--poll,--prio,--numa", 1, Kind::kIgnored, "", "threads"},
    {"-dio,--direct-io,-nr,--no-repack", 1, Kind::kIgnored, "", "loading"},
    {"-rpc,--rpc", 1, Kind::kRefused, "", "RPC servers (give their devices in a topology file: docs/topology.md)"},
    {"-v,--verbose,--progress,--list-devices", 0, Kind::kIgnored, "", "the report"},
};

std::vector<std::string> all_names(const Entry* table, size_t n) {
  std::vector<std::string> out;
  for (size_t i = 0; i < n; ++i) {
    std::string_view all(table[i].names);
    while (!all.empty()) {
      const size_t comma = all.find(',');
      out.emplace_back(all.substr(0, comma));
      if (comma == std::string_view::npos) break;
      all.remove_prefix(comma + 1);
    }
  }
  return out;
}

Status bad(const std::string& program, const std::string& what) {
  return Status(StatusCode::kInvalidArgument, (program.empty() ? std::string("llama.cpp") : program) + ": " + what);
}

// The program's base name: "./build/bin/llama-server" and "llama-server.exe" are "llama-server".
std::string base_name(std::string w) {
  const size_t slash = w.find_last_of("/\\");
  if (slash != std::string::npos) w = w.substr(slash + 1);
  if (w.size() > 4 && w.compare(w.size() - 4, 4, ".exe") == 0) w.resize(w.size() - 4);
  return w;
}

bool is_program(const std::string& name) {
  return name.rfind("llama-", 0) == 0 || name == "main" || name == "server" || name == "llama";
}

bool is_one_of(const std::string& v, std::initializer_list<const char*> values) {
  return std::any_of(values.begin(), values.end(), [&](const char* x) { return v == x; });
}

// What llama-server's output rows depend on (tools/server/server-context.cpp, server_n_outputs_max, from build 9460,
// PR #23861): n_parallel x the outputs per sequence, 1 + the most tokens a speculative type proposes (its options'
// defaults in common/common.h: a draft's n_max 3, ngram-mod's n_max 64, the ngram maps' size_m 48, ngram-cache 8),
// at most n_batch; n_batch with embeddings or a pooling other than none.
struct ServerOutputs {
  std::vector<std::string> spec_types;
  int64_t draft_n_max = 3, ngram_mod_n_max = 64, simple_m = 48, map_k_m = 48, map_k4v_m = 48;
  std::string pooling;

  // An ignored option's value; an error for a bad value of one read here.
  Status read(const std::string& program, const std::string& name, const std::string& value) {
    int64_t* count = has_option_name("--draft-max,--draft,--draft-n,--spec-draft-n-max", name) ? &draft_n_max
                     : name == "--spec-ngram-mod-n-max"                                        ? &ngram_mod_n_max
                     : name == "--spec-ngram-simple-size-m"                                    ? &simple_m
                     : name == "--spec-ngram-map-k-size-m"                                     ? &map_k_m
                     : name == "--spec-ngram-map-k4v-size-m"                                   ? &map_k4v_m
                                                                                               : nullptr;
    if (count != nullptr) {
      char* end = nullptr;
      const long long v = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || v < 0 || v > 65535) {
        return bad(program, name + " " + value + ": expected a number of tokens from 0 to 65535");
      }
      *count = v;
    } else if (name == "--spec-type") {
      std::string_view all(value);
      while (true) {
        const size_t comma = all.find(',');
        const std::string type(all.substr(0, comma));
        if (!is_one_of(type, {"none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
                              "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache"})) {
          return bad(program, "--spec-type " + value + ": unknown type '" + type +
                                  "' (none, draft-simple, draft-eagle3, draft-mtp, draft-dflash, draft-dspark, "
                                  "ngram-simple, ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache)");
        }
        spec_types.push_back(type);
        if (comma == std::string_view::npos) break;
        all.remove_prefix(comma + 1);
      }
    } else if (name == "--spec-default") {
      spec_types.push_back("ngram-mod");  // with n_max 64
      ngram_mod_n_max = 64;
    } else if (name == "--pooling") {
      pooling = value;
    }
    return Status::Ok();
  }

  // 1 + the most tokens the speculative types propose.
  int64_t per_sequence() const {
    int64_t n = 0;
    for (const std::string& t : spec_types) {
      if (t.rfind("draft-", 0) == 0) n = std::max(n, draft_n_max);
      if (t == "ngram-simple") n = std::max(n, simple_m);
      if (t == "ngram-map-k") n = std::max(n, map_k_m);
      if (t == "ngram-map-k4v") n = std::max(n, map_k4v_m);
      if (t == "ngram-mod") n = std::max(n, ngram_mod_n_max);
      if (t == "ngram-cache") n = std::max<int64_t>(n, 8);
    }
    return 1 + n;
  }
};

// The value of tessera option `t` in args (the last one given), or "".
std::string arg_value(const std::vector<std::string>& args, const std::string& t) {
  std::string v;
  for (size_t k = 0; k + 1 < args.size(); ++k) {
    if (args[k] == t) v = args[k + 1];
  }
  return v;
}

}  // namespace

Result<std::vector<std::string>> split_command_words(const std::string& text, bool as_printed) {
  std::vector<std::string> out;
  std::string cur;
  bool in_word = false;
  char quote = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (quote == '\'') {
      if (ch == '\'') {
        quote = 0;
      } else {
        cur += ch;
      }
    } else if (quote == '"') {
      if (ch == '"') {
        quote = 0;
      } else if (as_printed) {
        cur += ch;
      } else if (ch == '\\' && i + 1 < text.size() &&
                 std::string_view("\"\\$`").find(text[i + 1]) != std::string::npos) {
        cur += text[++i];
      } else if (ch == '\\' && i + 1 < text.size() && text[i + 1] == '\n') {
        ++i;
      } else {
        cur += ch;
      }
    } else if (ch == '\\' && !as_printed) {
      if (i + 1 >= text.size()) continue;  // a trailing backslash: nothing follows
      if (text[i + 1] == '\n') {
        ++i;  // a line continued
        continue;
      }
      if (text[i + 1] == '\r' && i + 2 < text.size() && text[i + 2] == '\n') {
        i += 2;
        continue;
      }
      cur += text[++i];
      in_word = true;
    } else if (ch == '\'' || ch == '"') {
      quote = ch;
      in_word = true;
    } else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') {
      if (in_word) out.push_back(cur);
      cur.clear();
      in_word = false;
    } else {
      cur += ch;
      in_word = true;
    }
  }
  if (quote != 0 && as_printed) {
    out.push_back(cur);
    return out;
  }
  if (quote != 0) {
    return Status(StatusCode::kInvalidArgument,
                  std::string("the command line has an unterminated ") + (quote == '\'' ? "'" : "\"") + " quote");
  }
  if (in_word) out.push_back(cur);
  return out;
}

Result<LlamaCommand> read_llama_command(const std::vector<std::string>& words, const LlamaCommandTarget& target) {
  LlamaCommand cmd;
  size_t i = 0;
  // Environment assignments before the program ("CUDA_VISIBLE_DEVICES=0 ./llama-server ...").
  while (i < words.size() && words[i].find('=') != std::string::npos && words[i][0] != '-') {
    cmd.ignored.push_back(words[i]);
    cmd.notes.push_back(words[i] +
                        ": an environment variable, ignored (the machine is tessera's -t/--topology or --gpu; "
                        "give it the GPUs the program sees)");
    ++i;
  }
  if (i < words.size() && !words[i].empty() && words[i][0] != '-') {
    cmd.program = base_name(words[i]);
    if (!is_program(cmd.program)) {
      return bad("", "'" + words[i] +
                         "' is not a llama.cpp program: expected llama-server, llama-cli, llama-bench, ... or its "
                         "first option");
    }
    ++i;
  }
  const std::string& program = cmd.program;
  const bool bench = program == "llama-bench";
  const Entry* table = bench ? kBench : kCommon;
  const size_t n_table = bench ? std::size(kBench) : std::size(kCommon);
  bool np_given = false, kvu_given = false;
  ServerOutputs server_outputs;
  int64_t bench_prompt = 512, bench_gen = 128, bench_depth = 0;  // llama-bench's defaults: -p 512 -n 128 -d 0
  bool bench_tests = false;

  for (; i < words.size(); ++i) {
    const size_t first = i;
    std::string name = words[i], value;
    bool has_value = false;
    if (name.size() < 2 || name[0] != '-') {
      return bad(program, "'" + name + "' is no option (every word after the program is an option or its value)");
    }
    if (name.rfind("--", 0) == 0) {
      const size_t eq = name.find('=');
      if (eq != std::string::npos) {
        value = name.substr(eq + 1);
        name.resize(eq);
        has_value = true;
      }
      // common_params_parse_ex reads '_' in a long name as '-': --n_gpu_layers is --n-gpu-layers
      std::replace(name.begin(), name.end(), '_', '-');
    }
    const Entry* e = nullptr;
    for (size_t k = 0; k < n_table && e == nullptr; ++k) {
      if (has_option_name(table[k].names, name)) e = &table[k];
    }
    if (e == nullptr) {
      // (a name of more than 64 characters is no misspelling: not compared with each name)
      const std::string best = name.size() <= 64 ? harness::closest_option(name, all_names(table, n_table)) : "";
      std::string msg = "unknown option '" + name + "'";
      if (!best.empty()) msg += "; did you mean '" + best + "'?";
      msg +=
          " (llama.cpp rejects it too; an option of a newer build that changes no placement or memory can be left "
          "out)";
      return bad(program, msg);
    }
    // The value: the next word, or after '='. Optional values: -fa was a switch before it took on|off|auto (2025),
    // --color and --log-colors take on|off|auto in newer builds.
    const bool fa = std::string_view(e->tessera) == "--flash-attn";
    if (!bench && (fa || has_option_name("--color,--log-colors", name))) {
      if (!has_value && i + 1 < words.size() &&
          is_one_of(words[i + 1], {"on", "off", "auto", "enabled", "disabled", "1", "0", "-1", "true", "false"})) {
        value = words[++i];
        has_value = true;
      }
      if (!has_value && fa) {
        value = "on";  // the old switch
        has_value = true;
      }
    } else if (e->arity == 1 && !has_value) {
      if (i + 1 >= words.size()) return bad(program, name + " needs a value");
      value = words[++i];
      has_value = true;
    } else if (e->arity == 0 && has_value) {
      return bad(program, name + " takes no value (given '" + value + "')");
    }
    // the option as given (its words), for the lists of what was used and ignored
    std::string given = words[first];
    for (size_t k = first + 1; k <= i; ++k) given += " " + words[k];
    if (bench && e->arity == 1 && e->kind != Kind::kIgnored &&
        (value.find(',') != std::string::npos && name != "-ot" && name != "--override-tensor")) {
      return bad(program, name + " " + value +
                              ": one value per option (llama-bench runs a test per combination; Tessera plans one)");
    }
    switch (e->kind) {
      case Kind::kDownload:
        return bad(program, name + " " + value +
                                ": a model to download; Tessera reads no network: give the downloaded file with -m "
                                "(llama.cpp keeps it in its cache directory, ~/.cache/llama.cpp)");
      case Kind::kRefused: return bad(program, name + ": not supported yet: " + e->why);
      case Kind::kIgnored:
        TS_RETURN_IF_ERROR(server_outputs.read(program, name, value));
        cmd.ignored.push_back(given);
        if (std::string_view(e->why) == "fit") {
          cmd.notes.push_back(given + ": llama.cpp's fit at load; `tessera fit` runs it, " +
                              std::string(target.fit ? "as asked" : "this command checks the options as given"));
        }
        continue;
      case Kind::kFitOnly:
        if (!target.fit) {
          cmd.ignored.push_back(given);
          cmd.notes.push_back(given + ": an option of llama.cpp's fit (`tessera fit` takes it)");
          continue;
        }
        break;
      case Kind::kSame: cmd.used.push_back(given); continue;
      case Kind::kBenchTest: {
        char* end = nullptr;
        const long long v = std::strtoll(value.c_str(), &end, 10);
        if (value.empty() || *end != '\0' || v < 0 || v > (1 << 24)) {
          return bad(program, given + ": expected a number of tokens (one value)");
        }
        const char which = e->tessera[0];  // "p", "n" or "d"
        (which == 'p' ? bench_prompt : which == 'n' ? bench_gen : bench_depth) = v;
        bench_tests = true;
        cmd.used.push_back(given);
        continue;
      }
      case Kind::kOption: break;
    }
    cmd.used.push_back(given);
    std::string t = e->tessera;
    if (bench) {
      // llama-bench's 0|1 values
      if (t == "--flash-attn" || t == "--no-kv-offload" || t == "--no-mmap" || t == "--embeddings" ||
          t == "--no-op-offload") {
        if (!is_one_of(value, {"0", "1"}) && !(t == "--flash-attn" && value == "-1")) {
          return bad(program, given + ": expected 0 or 1");
        }
        if (t == "--flash-attn") {
          cmd.args.insert(cmd.args.end(), {t, value == "1" ? "on" : value == "0" ? "off" : "auto"});
        } else if ((t == "--no-mmap") == (value == "0")) {
          cmd.args.push_back(t);
        }
        continue;
      }
      if (t == "--tensor-split" || t == "--device") std::replace(value.begin(), value.end(), '/', ',');
    }
    if (t == "--n-parallel") np_given = true;
    if (t == "--kv-unified" || t == "--no-kv-unified") kvu_given = true;
    if (t == "--no-kv-unified") continue;  // llama.cpp's default; it only stops llama-server's automatic -kvu
    cmd.args.push_back(t);
    if (e->arity == 1 || fa) cmd.args.push_back(value);
  }

  // The programs' own defaults.
  if (program == "llama-server" || program == "server") {
    // tools/server/server.cpp: "n_parallel is set to auto, using n_parallel = 4 and kv_unified = true"
    if (!np_given) {
      cmd.args.insert(cmd.args.end(), {"--n-parallel", "4"});
      if (!kvu_given) cmd.args.push_back("--kv-unified");
      cmd.notes.push_back(program + ": -np not given: llama-server's automatic 4 sequences" +
                          std::string(kvu_given ? "" : " with a unified KV cache (-kvu)"));
    }
    // The outputs llama-server reserves its prompt graph for (build 9460, PR #23861): -np x (1 + draft tokens), at
    // most -b; every token of the batch with --embeddings or a pooling.
    const bool embd = std::find(cmd.args.begin(), cmd.args.end(), "--embeddings") != cmd.args.end();
    const bool pooled = !server_outputs.pooling.empty() && server_outputs.pooling != "none";
    if (!embd && !pooled) {
      const std::string np = arg_value(cmd.args, "--n-parallel"), b = arg_value(cmd.args, "--batch-size");
      const int64_t n_parallel = std::max<int64_t>(1, std::strtoll(np.c_str(), nullptr, 10));
      const int64_t n_batch = b.empty() ? 2048 : std::max<int64_t>(1, std::strtoll(b.c_str(), nullptr, 10));
      const int64_t per_seq = server_outputs.per_sequence();
      const int64_t n = std::max<int64_t>(1, std::min(n_batch, n_parallel * per_seq));
      cmd.args.insert(cmd.args.end(), {"--n-outputs-max", std::to_string(n)});
      cmd.notes.push_back(
          program + ": n_outputs_max " + std::to_string(n) + " (-np " + std::to_string(n_parallel) + " x " +
          std::to_string(per_seq) + (per_seq > 1 ? " outputs per sequence with speculation" : " output per sequence") +
          (n == n_batch && n_parallel * per_seq > n_batch ? ", at most -b" : "") + "): the prompt graph keeps " +
          std::to_string(n) + (n == 1 ? " output row" : " output rows") + " (llama-server from build 9460, PR #23861)");
    }
  }
  if (bench) {
    // llama-bench: every layer offloaded by default (-ngl 99), and each test's context is its tokens
    // (cmd_params_instance::to_llama_cparams: n_ctx = n_prompt + n_gen + n_depth); the prompt test is planned, the
    // largest graph (n_ubatch tokens), as llama-bench's pp test (or the generation test with -p 0).
    if (std::find(cmd.args.begin(), cmd.args.end(), "--n-gpu-layers") == cmd.args.end()) {
      cmd.args.insert(cmd.args.end(), {"--n-gpu-layers", "99"});
      cmd.notes.push_back("llama-bench: -ngl not given: llama-bench's default, 99");
    }
    if (std::find(cmd.args.begin(), cmd.args.end(), "--flash-attn") == cmd.args.end()) {
      cmd.args.insert(cmd.args.end(), {"--flash-attn", "auto"});
      cmd.notes.push_back("llama-bench: -fa not given: the newest llama-bench's default, auto (older builds: 0)");
    }
    const bool pp = bench_prompt > 0;
    const int64_t ctx = (pp ? bench_prompt : bench_gen) + bench_depth;
    if (ctx == 0) return bad(program, "-p 0 -n 0: no test to plan");
    cmd.args.insert(cmd.args.end(), {"--ctx-size", std::to_string(ctx)});
    if (!pp) cmd.args.insert(cmd.args.end(), {"--tokens", "1"});
    cmd.notes.push_back(
        "llama-bench: the " +
        (pp ? "prompt test pp" + std::to_string(bench_prompt) : "generation test tg" + std::to_string(bench_gen)) +
        (bench_depth > 0 ? " @ d" + std::to_string(bench_depth) : "") + " planned, context " + std::to_string(ctx) +
        (bench_tests ? "" : " (llama-bench's default -p 512)") + "; its timings are not simulated here");
  }
  return cmd;
}

}  // namespace tessera::llama
