// Fuzz target: the GGUF reader (docs/gguf.md). Any bytes: read_memory returns a File or an error
// "SOURCE: offset N: FIELD: what"; it never crashes, throws, leaks or hangs. An accepted file holds the invariants of
// tests/support/gguf_check.h (tensor ranges inside the data section and disjoint, the data flags agreeing with the
// sizes: a complete file has data_offset + data_bytes <= size). The file reader (over a memfd, through a 7-byte
// buffer) gives the same File or the same error; a read that skips arrays differs only in the skipped arrays; the
// writer turns the File back into the input's header byte for byte, which reads back to the same structure; a
// complete file, written again with its data section, reads back complete with the same tensor bytes.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>

#include "fuzz_input.h"
#include "support/gguf_check.h"
#include "tessera/gguf.h"

namespace {

using namespace tessera;

void check_same_except_skipped(const gguf::File& skipping, const gguf::File& whole) {
  FUZZ_CHECK(skipping.metadata.size() == whole.metadata.size(), "skipping arrays changed the metadata count");
  for (size_t i = 0; i < whole.metadata.size(); ++i) {
    const gguf::Value& s = skipping.metadata[i].value;
    const gguf::Value& w = whole.metadata[i].value;
    FUZZ_CHECK(skipping.metadata[i].key == whole.metadata[i].key, "skipping arrays changed a key");
    const gguf::Array* sa = s.as_array();
    if (sa != nullptr && sa->skipped) {
      const gguf::Array* wa = w.as_array();
      FUZZ_CHECK(wa != nullptr && wa->type == sa->type && wa->size == sa->size,
                 "a skipped array's type or length differs from the array read in full");
    } else {
      FUZZ_CHECK(s == w, "a value not skipped differs: " + s.to_string() + " vs " + w.to_string());
    }
  }
  gguf::File tensors_only_a = skipping, tensors_only_b = whole;
  tensors_only_a.metadata.clear();
  tensors_only_b.metadata.clear();
  const std::string diff = test::gguf_structure_difference(tensors_only_a, tensors_only_b);
  FUZZ_CHECK(diff.empty(), "skipping arrays changed " + diff);
}

// The same input through read_file: a memfd named by /proc/self/fd, read through a tiny buffer so that fields cross
// buffer edges.
void check_file_reader(const uint8_t* data, size_t size, const Result<gguf::File>& from_memory,
                       const std::string& source) {
  const int fd = memfd_create("gguf-fuzz", MFD_CLOEXEC);
  if (fd < 0) return;  // no memfd here: nothing to compare
  size_t written = 0;
  while (written < size) {
    const ssize_t n = write(fd, data + written, size - written);
    if (n <= 0) break;
    written += static_cast<size_t>(n);
  }
  if (written == size) {
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    gguf::ReadOptions o;
    o.max_array_elements = std::numeric_limits<uint64_t>::max();  // as the memory read it is compared with
    o.io_buffer_bytes = 7;
    auto from_file = gguf::read_file(path, o);
    FUZZ_CHECK(from_file.ok() == from_memory.ok(), "the file and memory readers disagree on whether it parses");
    if (from_file.ok()) {
      const std::string diff = test::gguf_structure_difference(*from_file, from_memory.value());
      FUZZ_CHECK(diff.empty(), "the file reader reads a different " + diff);
      for (size_t i = 0; i < from_file->metadata.size(); ++i) {
        FUZZ_CHECK(from_file->metadata[i].value == from_memory.value().metadata[i].value,
                   "the file reader reads a value differently");
      }
    } else {
      // The same message, with the path in place of the memory's name.
      std::string expect = from_memory.status().message();
      expect.replace(0, source.size(), path);
      FUZZ_CHECK(from_file.status().message() == expect,
                 "the file reader's error differs: " + from_file.status().message() + " vs " + expect);
    }
  }
  close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string source = "fuzz.gguf";
  const std::span<const uint8_t> bytes(data, size);
  gguf::ReadOptions all;
  all.max_array_elements = std::numeric_limits<uint64_t>::max();
  auto whole = gguf::read_memory(bytes, source, all);
  check_file_reader(data, size, whole, source);
  if (!whole.ok()) {
    const std::string message = whole.status().message();
    FUZZ_CHECK(message.rfind(source + ": offset ", 0) == 0,
               "the error does not start with the source and an offset: " + message);
    // Skipping arrays never turns a bad file into a good one (every skipped element is still checked).
    gguf::ReadOptions skip;
    skip.max_array_elements = 2;
    auto skipped = gguf::read_memory(bytes, source, skip);
    FUZZ_CHECK(
        !skipped.ok() && skipped.status().message() == message,
        "skipping arrays changes the error: " + (skipped.ok() ? std::string("none") : skipped.status().message()));
    return 0;
  }
  const gguf::File& f = *whole;
  const std::string violation = test::gguf_file_violation(f, bytes);
  FUZZ_CHECK(violation.empty(), "an accepted file breaks an invariant: " + violation);
  FUZZ_CHECK(!f.complete || f.data_bytes == 0 || f.data_offset + f.data_bytes <= size,
             "a complete file whose data section ends past the input");
  for (const gguf::TensorInfo& t : f.tensors) {
    FUZZ_CHECK(t.offset + t.size <= f.data_bytes, "tensor '" + t.name + "' lies outside the data section");
    auto d = gguf::tensor_data(bytes, f, t);
    FUZZ_CHECK(d.ok() == (f.data_offset + t.offset + t.size <= size), "tensor_data disagrees with the sizes");
    if (f.complete) FUZZ_CHECK(d.ok(), "a tensor of a complete file has no data");
  }

  // Reading with a small array budget: the same file but for the arrays it skips.
  gguf::ReadOptions skip;
  skip.max_array_elements = 2;
  auto skipping = gguf::read_memory(bytes, source, skip);
  FUZZ_CHECK(skipping.ok(), "skipping arrays makes a good file fail: " + skipping.status().to_string());
  check_same_except_skipped(*skipping, f);

  // The writer gives back the header byte for byte.
  auto written = gguf::serialize(f);
  FUZZ_CHECK(written.ok(), "the writer refuses what the reader accepted: " + written.status().to_string());
  FUZZ_CHECK(written->size() == f.header_size && std::equal(written->begin(), written->end(), data),
             "the written header differs from the input's");
  auto reread = gguf::read_memory(*written, "written.gguf", all);
  FUZZ_CHECK(reread.ok(), "the written file does not read: " + reread.status().to_string());
  const std::string diff = test::gguf_structure_difference(*reread, f);
  FUZZ_CHECK(diff.empty(), "the written file reads back with a different " + diff);
  FUZZ_CHECK(reread->data_state() == (f.data_bytes == 0 ? gguf::DataState::kComplete : gguf::DataState::kHeaderOnly),
             "a written header-only file is not header-only");

  // A complete file written again with its data section (when small: the padding follows the alignment).
  const uint64_t padded = (f.data_bytes + f.alignment - 1) / f.alignment * f.alignment;
  if (f.complete && f.data_offset + padded <= (uint64_t{1} << 20)) {
    const std::span<const uint8_t> section = bytes.subspan(f.data_offset, f.data_bytes);
    auto full = gguf::serialize(f, section);
    FUZZ_CHECK(full.ok(), "the writer refuses a complete file's data: " + full.status().to_string());
    gguf::ReadOptions with_data = all;
    with_data.require_data = true;
    auto back = gguf::read_memory(*full, "written.gguf", with_data);
    FUZZ_CHECK(back.ok(), "the written complete file does not read: " + back.status().to_string());
    FUZZ_CHECK(test::gguf_structure_difference(*back, f).empty(), "the written complete file differs");
    for (const gguf::TensorInfo& t : back->tensors) {
      auto got = gguf::tensor_data(*full, *back, t);
      auto want = gguf::tensor_data(bytes, f, t);
      FUZZ_CHECK(got.ok() && want.ok() && std::equal(got->begin(), got->end(), want->begin(), want->end()),
                 "tensor '" + t.name + "' has other bytes after writing");
    }
  }
  return 0;
}
