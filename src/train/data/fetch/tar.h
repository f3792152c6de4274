// Unpacks a .tar.gz (ustar, GNU long names, pax path records) with zlib, refusing paths that
// would land outside the target folder. Entries are unpacked into a staging folder first and
// moved into place only when the whole archive read cleanly, so a bad archive changes nothing.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "core/result.h"

namespace gpulab::train {

bool tar_gz_supported();  // false when built without zlib

// Returns the top-level names it placed in `dest` (e.g. "cifar-10-batches-py").
Result<std::vector<std::string>> extract_tar_gz(const std::filesystem::path& archive,
                                                const std::filesystem::path& dest);

}  // namespace gpulab::train
