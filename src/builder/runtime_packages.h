// Finds what a binary needs at run time: the Debian packages of its NEEDED libraries (mapped with
// dpkg, so the cpu-lab recipe installs exactly those in the image), and the libraries no package
// owns (the PyTorch wheel's libtorch and the CUDA libraries it loads), which the image carries.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::builder {

struct BundledLibrary {
  std::string soname;          // the name the loader looks for (libtorch_cpu.so, libcudart.so.13)
  std::filesystem::path path;  // where this host has it
};

struct RuntimeFiles {
  std::vector<std::string> packages;      // Debian packages of the binary's NEEDED libraries
  std::vector<BundledLibrary> libraries;  // every library it loads that no package owns
};

// Reads each binary's NEEDED entries (readelf -d) and everything it loads (ldd), the union of
// them all. Fails when the host has no readelf, ldd cannot resolve a library, or dpkg is missing.
Result<RuntimeFiles> runtime_files(const std::vector<std::filesystem::path>& binaries);

}  // namespace gpulab::builder
