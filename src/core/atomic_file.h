// AtomicFile: a file written in pieces that readers see either complete or not at all (the
// temporary + fsync + rename of write_file_atomic), for outputs too large to hold in memory
// whole, such as a model's weights.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

#include "core/result.h"

namespace gpulab {

class AtomicFile {
 public:
  // Creates a temporary beside `path` (its folder is created if missing). With `reserve_bytes`
  // (the size about to be written) the space is reserved first: a full disk fails here, with
  // the sizes, before anything is written (core/disk_space.h).
  static Result<AtomicFile> create(const std::filesystem::path& path, uint64_t reserve_bytes = 0);
  AtomicFile(AtomicFile&& other) noexcept;
  AtomicFile& operator=(AtomicFile&&) = delete;
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();  // not committed: the temporary goes, the target is untouched

  Status write(std::string_view data);
  // fsync, rename over the target, fsync of the folder.
  Status commit();

 private:
  AtomicFile(std::filesystem::path path, std::filesystem::path tmp, int fd)
      : path_(std::move(path)), tmp_(std::move(tmp)), fd_(fd) {}
  std::filesystem::path path_;
  std::filesystem::path tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

}  // namespace gpulab
