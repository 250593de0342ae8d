// A scratch directory of this test process: TempDir()/tessera-<pid>/, made on first use and removed at exit.
//
// ctest runs every test case as its own process (gtest_discover_tests) and `ctest -j` runs several at once, so two
// cases of one file that write the same fixed name under ::testing::TempDir() race: one truncates the file while the
// other reads it (CI stop 42: ExtraModels.MmprojOverflowIsReportedAsTheProjectors read a half-written GGUF and
// crashed). Files written for a test go here instead.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace tessera::test {

// The directory, ending in '/'.
inline const std::string& temp_dir() {
  struct Dir {
    std::string path;
    Dir() {
      path = ::testing::TempDir() + "tessera-" + std::to_string(::getpid()) + "/";
      std::error_code ec;
      std::filesystem::create_directories(path, ec);
      EXPECT_FALSE(ec) << path << ": " << ec.message();
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);  // best effort: a leftover directory harms nothing
    }
  };
  static const Dir dir;
  return dir.path;
}

// TempDir()/tessera-<pid>/NAME.
inline std::string temp_path(const std::string& name) { return temp_dir() + name; }

}  // namespace tessera::test
