// Finds the Debian packages a binary needs at run time (its NEEDED libraries, mapped to their
// packages with dpkg), so the cpu-lab recipe installs exactly those in the image.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::builder {

// Packages owning the libraries `binary` links directly (readelf -d NEEDED; ldd for their paths).
// Fails when the host has no dpkg or a library belongs to no package (a locally built one).
Result<std::vector<std::string>> runtime_packages(const std::filesystem::path& binary);

}  // namespace gpulab::builder
