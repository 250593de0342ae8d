// tessera_make_fixtures DIR [NAME...] (docs/gguf.md, "Fixtures"): writes DIR/NAME.gguf, the header-only GGUF fixture
// of each named real model (all of them without names), reads every file back and prints what it holds. Exit codes:
// 0 all written and read back, 1 a file could not be written or did not read back the same, 2 usage (an unknown name,
// no directory).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <map>
#include <string>
#include <system_error>
#include <vector>

#include "tessera/models/fixtures.h"
#include "tessera/gguf.h"

namespace {

namespace fx = tessera::models::fixtures;
namespace gguf = tessera::gguf;

void usage(std::FILE* out) {
  std::fprintf(out,
               "usage: tessera_make_fixtures DIR [NAME...]\n"
               "       tessera_make_fixtures --list\n"
               "Writes DIR/NAME.gguf for each named fixture (every fixture without names): the metadata and tensor\n"
               "table of a published GGUF file, without the weights (header-only). Fixtures:\n");
  for (const std::string& n : fx::fixture_names()) std::fprintf(out, "  %s\n", n.c_str());
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

// Writes one fixture and reads it back; prints one line. False (with a message on stderr) on any failure.
bool make_one(const std::filesystem::path& dir, const std::string& name) {
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
  if (args.size() == 1 && args[0] == "--list") {
    for (const std::string& n : fx::fixture_names()) std::printf("%s\n", n.c_str());
    return 0;
  }
  if (args.empty() || args[0].empty() || args[0][0] == '-') {
    usage(stderr);
    return 2;
  }
  const std::filesystem::path dir = args[0];
  std::vector<std::string> names(args.begin() + 1, args.end());
  const std::vector<std::string> known = fx::fixture_names();
  if (names.empty()) names = known;
  for (const std::string& n : names) {
    bool found = false;
    for (const std::string& k : known) found = found || k == n;
    if (!found) {
      std::fprintf(stderr, "tessera_make_fixtures: unknown fixture '%s' (--list lists them)\n", n.c_str());
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
