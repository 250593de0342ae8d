// Writes seed inputs of the fuzz targets that are produced by the code rather than by hand:
//   corpus/graph_parser/llama-*.json  small llama graphs (models/) written by graph_to_json
//   corpus/graph_parser/gen-*.json    graphs of graph_gen descriptions written by graph_to_json
//   corpus/planner/*.bin, corpus/end_to_end/*.bin  byte seeds (deterministic, from the seed argument)
//   corpus/gguf_reader/*.gguf         GGUF files, valid and malformed (gguf_seeds.h)
// Usage: tessera_fuzz_make_seeds FUZZ_DIR [SEED]. Not run by the tests; rerun it when the graph format changes.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "tessera/models/llama.h"
#include "tessera/cpu.h"
#include "tessera/harness/graph/graph_io.h"
#include "gguf_seeds.h"

namespace {

using namespace tessera;

bool write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) std::fprintf(stderr, "cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

bool write(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out << bytes;
  if (!out) std::fprintf(stderr, "cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s FUZZ_DIR [SEED]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1];
  const uint32_t seed = argc > 2 ? static_cast<uint32_t>(std::strtoul(argv[2], nullptr, 10)) : 1;
  std::printf("make_seeds: seed %u\n", seed);
  bool ok = true;

  struct Variant {
    const char* name;
    int n_tokens, n_outputs, n_expert;
    bool flash_attn;
  };
  const Variant variants[] = {
      {"llama-1tok-fa", 1, 0, 0, true}, {"llama-4tok-noflash", 4, 1, 0, false}, {"llama-moe-2tok", 2, 0, 4, true}};
  for (const Variant& v : variants) {
    models::LlamaConfig c;
    c.n_layer = 1;
    c.n_embd = 64;
    c.n_ff = 64;
    c.n_head = 2;
    c.n_head_kv = 1;
    c.n_ctx = 16;
    c.n_vocab = 32;
    c.n_tokens = v.n_tokens;
    c.n_outputs = v.n_outputs;
    c.flash_attn = v.flash_attn;
    c.n_expert = v.n_expert;
    c.n_expert_used = v.n_expert > 0 ? 2 : 0;
    auto model = models::build_llama(c);
    if (!model.ok()) {
      std::fprintf(stderr, "%s: %s\n", v.name, model.status().to_string().c_str());
      ok = false;
      continue;
    }
    ok = write(dir + "/corpus/graph_parser/" + v.name + ".json", harness::graph_to_json(*model->graph)) && ok;
  }

  // Byte seeds: a mode/setup prefix, then a graph description (graph_gen desc_from_bytes: tokens, width, 4 seed
  // bytes, 7 bytes per step).
  std::mt19937 rng(seed);
  for (int i = 0; i < 6; ++i) {
    std::string bytes;
    const int setup_bytes = 40;
    const int steps = 3 + i * 3;
    for (int k = 0; k < setup_bytes + 6 + steps * 7; ++k) bytes.push_back(static_cast<char>(rng() & 0xff));
    ok = write(dir + "/corpus/end_to_end/random-" + std::to_string(i) + ".bin", bytes) && ok;
    ok = write(dir + "/corpus/planner/random-" + std::to_string(i) + ".bin", bytes.substr(setup_bytes - 1)) && ok;
  }

  // GGUF files (no randomness: the same files every time).
  for (const auto& [name, bytes] : fuzz::gguf_seeds()) ok = write(dir + "/corpus/gguf_reader/" + name, bytes) && ok;
  return ok ? 0 : 1;
}
