// Disk space for writers of large files (checkpoints, weights, token data): a reservation made
// before the first byte is written, and the one error a full disk gives, naming the path, the
// space it needed and the space there was.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>

#include "core/result.h"

namespace gpulab {

// Bytes an unprivileged writer may still use on the filesystem holding `path` (or its nearest
// existing parent); nullopt when it cannot be asked.
std::optional<uint64_t> free_bytes(const std::filesystem::path& path);

// True for the errno values of a full disk or an exhausted quota.
bool is_no_space(int err);

// kResourceExhausted: "not enough disk space for <path>: it needs N bytes (h), the filesystem
// has F free", with a hint to free space or write elsewhere.
Error no_space_error(const std::filesystem::path& path, uint64_t needed_bytes);

// Reserves `bytes` for the open file `fd` (posix_fallocate) so that writing them cannot fail for
// space half way; a full disk is no_space_error(shown, bytes). Filesystems that cannot
// preallocate are let through (their writes still report a full disk).
Status reserve_space(int fd, const std::filesystem::path& shown, uint64_t bytes);

}  // namespace gpulab
