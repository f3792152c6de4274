// Helpers shared by the train/data tests: temporary folders, the Python reference interpreter
// (Debian's, with numpy and torchvision) and the fixture scripts in tests/fixtures/data.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/subprocess.h"
#include "support/temp_dir.h"
#include "train/torchvision_python.h"

namespace gpulab::train::testing {

namespace fs = std::filesystem;

using gpulab::testing::TempDir;

inline fs::path fixture(const std::string& name) {
  return fs::path(GPULAB_SOURCE_DIR) / "tests" / "fixtures" / "data" / name;
}

// The pinned environment's interpreter (numpy, torch, torchvision, PIL: the fixture scripts and
// the references they compare with); empty when it cannot import them.
inline std::string reference_python() {
  static const std::string py = [] {
    const std::string found = python_with("numpy, torch, torchvision, PIL");
    return found;
  }();
  return py;
}

#define GPULAB_REQUIRE_PYTHON()                                    \
  do {                                                             \
    if (::gpulab::train::testing::reference_python().empty())      \
      GTEST_FAIL() << ::gpulab::train::testing::reference_missing( \
          "numpy, torch, torchvision, PIL");                       \
  } while (0)

// Runs a Python fixture script; fails the test on error.
inline void run_python(const std::vector<std::string>& args, std::string* out = nullptr,
                       std::string stdin_data = {}) {
  std::vector<std::string> argv = {reference_python()};
  argv.insert(argv.end(), args.begin(), args.end());
  RunOptions o;
  o.timeout = std::chrono::seconds(120);
  o.stdin_data = std::move(stdin_data);
  auto r = run_process(argv, o);
  ASSERT_TRUE(r.ok()) << r.error().message;
  ASSERT_TRUE(r->success()) << r->err;
  if (out) *out = r->out;
}

// make_cifar.py: small CIFAR folders in the distributed formats.
inline void make_cifar(const fs::path& out, const std::string& set, const std::string& format,
                       int n, const std::string& archive = {}) {
  std::vector<std::string> args = {fixture("make_cifar.py").string(),
                                   "--out",
                                   out.string(),
                                   "--set",
                                   set,
                                   "--format",
                                   format,
                                   "--n",
                                   std::to_string(n)};
  if (!archive.empty()) args.insert(args.end(), {"--archive", archive});
  run_python(args);
}

// The pixel and label formulas of make_cifar.py.
inline uint8_t cifar_pixel(int64_t f, int64_t i, int64_t k) {
  return static_cast<uint8_t>((f * 131 + i * 31 + k * 7 + (k * k) % 97) % 256);
}
inline int64_t cifar_label(int64_t f, int64_t i, int64_t classes) {
  return (f * 3 + i * 7) % classes;
}

inline void write_bytes(const fs::path& p, const std::string& data) {
  std::ofstream(p, std::ios::binary) << data;
}
inline std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace gpulab::train::testing
