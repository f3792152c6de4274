// Paths of the captured GPU host trees under tests/fixtures/ shared by the gpu tests.
#pragma once

#include <filesystem>
#include <string>

namespace gpulab::gpu::testing {

inline std::filesystem::path fixture(const std::string& name) {
  return std::filesystem::path(GPULAB_SOURCE_DIR) / "tests" / "fixtures" / name;
}

}  // namespace gpulab::gpu::testing
