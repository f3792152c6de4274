// File helpers: whole-file read, atomic write (temp + fsync + rename), and path lookups.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/result.h"

namespace gpulab {

namespace fs = std::filesystem;

Result<std::string> read_file(const fs::path& path);
// Reads a small text file (sysfs, procfs) and trims trailing whitespace; nullopt if unreadable.
std::optional<std::string> read_text(const fs::path& path);

// Writes data so a reader sees either the old file or the complete new one, never a part:
// write to a temporary in the same folder, fsync it, rename over the target, fsync the folder.
Status write_file_atomic(const fs::path& path, std::string_view data);

// The first path in `candidates` that exists and is executable, if any.
std::optional<fs::path> find_executable(const std::vector<fs::path>& candidates);
// Looks a program up on $PATH.
std::optional<fs::path> which(std::string_view program);

// Joins a root (for captured trees; empty or "/" means the live system) with an absolute path.
fs::path under_root(const fs::path& root, const fs::path& absolute);

}  // namespace gpulab
