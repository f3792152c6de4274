// A scratch folder for one test: unique (mkdtemp), removed with everything in it when the test
// leaves its scope, whatever happened.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace gpulab::testing {

struct TempDir {
  std::filesystem::path path;
  // The folder is /tmp/gpulab-<tag>-XXXXXX.
  explicit TempDir(const std::string& tag = "test") {
    std::string name = (std::filesystem::temp_directory_path() / ("gpulab-" + tag + "-XXXXXX"));
    if (::mkdtemp(name.data()) == nullptr)
      throw std::filesystem::filesystem_error("mkdtemp", name,
                                              std::error_code(errno, std::generic_category()));
    path = name;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

}  // namespace gpulab::testing
