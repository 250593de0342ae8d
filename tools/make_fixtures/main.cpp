// tessera_make_fixtures DIR [NAME...] (docs/gguf.md, "Fixtures"): writes DIR/NAME.gguf, the header-only GGUF fixture
// of each named real model (any catalogue name, BASE-TYPE) and the complete file of each named tiny model (without
// names: each base in its published type, and the tiny models), reads every
// file back and prints what it holds. Exit codes:
// 0 all written and read back, 1 a file could not be written or did not read back the same, 2 usage (an unknown name,
// no directory).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "tessera/alloc.h"
#include "tessera/cpu.h"
#include "tessera/gguf.h"
#include "tessera/models/fixtures.h"
#include "tessera/models/from_gguf.h"

namespace {

namespace fx = tessera::models::fixtures;
namespace gguf = tessera::gguf;

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera_make_fixtures DIR [NAME...]\n"
               "       tessera_make_fixtures --list\n"
               "Writes DIR/NAME.gguf for each named fixture (without names: each base model in its published type,\n"
               "and the tiny models): the metadata and tensor table of a published GGUF file, without the weights\n"
               "(header-only). A fixture's name is BASE-TYPE (llama-3.1-8b-q4_k_m); --list lists the bases and the\n"
               "types. The published defaults:\n");
  for (const std::string& n : fx::fixture_names()) std::fprintf(out, "  %s\n", n.c_str());
  std::fprintf(out, "Tiny models written with their weights (complete files):\n");
  for (const std::string& n : fx::complete_fixture_names()) std::fprintf(out, "  %s\n", n.c_str());
}

// "f32 66, q4_k 193, q6_k 33": tensors per type, by type id.
std::string type_counts(const gguf::File& f) {
  std::map<uint32_t, int> counts;
  for (const gguf::TensorInfo& t : f.tensors) ++counts[static_cast<uint32_t>(t.type)];
  std::string s;
  for (const auto& [type, n] : counts) {
    s += (s.empty() ? "" : ", ") + std::string(gguf::type_name(type)) + " " + std::to_string(n);
  }
  return s;
}

uint64_t tensor_bytes(const gguf::File& f) {
  uint64_t n = 0;
  for (const gguf::TensorInfo& t : f.tensors) n += t.size;
  return n;
}

bool is_complete_fixture(const std::string& name) {
  for (const std::string& n : fx::complete_fixture_names()) {
    if (n == name) return true;
  }
  return false;
}

// The bytes of a tiny complete fixture: its model built, its weights allocated on the CPU and filled with seed 1.
tessera::Result<std::vector<uint8_t>> complete_fixture_bytes(const std::string& name) {
  auto config = fx::complete_fixture_config(name);
  if (!config.ok()) return config.status();
  auto model = tessera::models::build_llama(config.value());
  if (!model.ok()) return model.status();
  auto weights = tessera::alloc_ctx_tensors(*model->weights_ctx, *tessera::cpu::buffer_type());
  if (!weights.ok()) return weights.status();
  auto cache = tessera::alloc_ctx_tensors(*model->cache_ctx, *tessera::cpu::buffer_type());
  if (!cache.ok()) return cache.status();
  TS_RETURN_IF_ERROR(tessera::models::fill_random(model.value(), 1));
  return tessera::models::complete_gguf(model.value());
}

// Writes a tiny complete fixture and reads it back (complete, with the same tensors); prints one line.
bool make_complete(const std::filesystem::path& dir, const std::string& name) {
  auto bytes = complete_fixture_bytes(name);
  if (!bytes.ok()) {
    std::fprintf(stderr, "tessera_make_fixtures: %s: %s\n", name.c_str(), bytes.status().message().c_str());
    return false;
  }
  const std::string path = (dir / (name + ".gguf")).string();
  std::FILE* f = std::fopen(path.c_str(), "wb");
  const bool written =
      f != nullptr && std::fwrite(bytes.value().data(), 1, bytes.value().size(), f) == bytes.value().size();
  if (f == nullptr || std::fclose(f) != 0 || !written) {
    std::fprintf(stderr, "tessera_make_fixtures: %s: cannot write the file\n", path.c_str());
    return false;
  }
  tessera::Result<gguf::File> back = gguf::read_file(path);
  if (!back.ok() || back->data_state() != gguf::DataState::kComplete) {
    std::fprintf(stderr, "tessera_make_fixtures: %s did not read back as a complete file%s%s\n", path.c_str(),
                 back.ok() ? "" : ": ", back.ok() ? "" : back.status().message().c_str());
    return false;
  }
  std::printf("%s: %zu tensors (%s), %llu bytes of tensors, %zu keys, %s\n", path.c_str(), back->tensors.size(),
              type_counts(back.value()).c_str(), static_cast<unsigned long long>(tensor_bytes(back.value())),
              back->metadata.size(), gguf::data_state_name(back->data_state()));
  return true;
}

// Writes one fixture and reads it back; prints one line. False (with a message on stderr) on any failure.
bool make_one(const std::filesystem::path& dir, const std::string& name) {
  if (is_complete_fixture(name)) return make_complete(dir, name);
  tessera::Result<gguf::File> file = fx::make_fixture(name);
  if (!file.ok()) {
    std::fprintf(stderr, "tessera_make_fixtures: %s\n", file.status().message().c_str());
    return false;
  }
  const std::string path = (dir / (name + ".gguf")).string();
  tessera::Status written = gguf::write_file(path, file.value());
  if (!written.ok()) {
    std::fprintf(stderr, "tessera_make_fixtures: %s: %s\n", path.c_str(), written.message().c_str());
    return false;
  }
  tessera::Result<gguf::File> back = gguf::read_file(path);
  if (!back.ok()) {
    std::fprintf(stderr, "tessera_make_fixtures: reading back: %s\n", back.status().message().c_str());
    return false;
  }
  const gguf::File& b = back.value();
  if (b.tensors.size() != file.value().tensors.size() || b.metadata.size() != file.value().metadata.size() ||
      b.data_state() != gguf::DataState::kHeaderOnly || tensor_bytes(b) != tensor_bytes(file.value())) {
    std::fprintf(stderr, "tessera_make_fixtures: %s did not read back as written\n", path.c_str());
    return false;
  }
  const uint64_t bytes = tensor_bytes(b);
  std::printf("%s: %zu tensors (%s), %llu bytes of tensors (%.2f GiB), %zu keys, header %llu bytes, %s\n", path.c_str(),
              b.tensors.size(), type_counts(b).c_str(), static_cast<unsigned long long>(bytes),
              static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0), b.metadata.size(),
              static_cast<unsigned long long>(b.file_size), gguf::data_state_name(b.data_state()));
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.size() == 1 && (args[0] == "-h" || args[0] == "--help")) {
    usage(stdout);
    return 0;
  }
  std::vector<std::string> known = fx::fixture_names();
  for (const std::string& n : fx::complete_fixture_names()) known.push_back(n);
  if (args.size() == 1 && args[0] == "--list") {
    // The bases (each with its published default), the file types, the tiny complete models: not every name.
    std::printf("bases (BASE-TYPE; the published default):\n");
    const std::vector<std::string> bases = fx::base_names(), defaults = fx::fixture_names();
    for (size_t i = 0; i < bases.size(); ++i) std::printf("  %-20s %s\n", bases[i].c_str(), defaults[i].c_str());
    std::printf("types:");
    for (const std::string& t : fx::catalogue_file_types()) std::printf(" %s", t.c_str());
    std::printf(" (gpt-oss: mxfp4 only)\ntiny models (complete files):");
    for (const std::string& n : fx::complete_fixture_names()) std::printf(" %s", n.c_str());
    std::printf("\n");
    return 0;
  }
  if (args.empty() || args[0].empty() || args[0][0] == '-') {
    usage(stderr);
    return 2;
  }
  const std::filesystem::path dir = args[0];
  std::vector<std::string> names(args.begin() + 1, args.end());
  if (names.empty()) names = known;
  for (const std::string& n : names) {
    bool found = fx::is_fixture_name(n);
    for (const std::string& k : known) found = found || k == n;
    if (!found) {
      std::fprintf(stderr, "tessera_make_fixtures: unknown fixture '%s' (%s; --list lists them)\n", n.c_str(),
                   fx::catalogue_help().c_str());
      return 2;
    }
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) {
    std::fprintf(stderr, "tessera_make_fixtures: cannot create %s: %s\n", dir.string().c_str(), ec.message().c_str());
    return 1;
  }
  bool ok = true;
  for (const std::string& n : names) ok = make_one(dir, n) && ok;
  return ok ? 0 : 1;
}
