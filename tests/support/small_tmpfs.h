// A small tmpfs mounted for one test (root only), to fill a disk for real: writers must fail with
// a clear error and leave nothing half written. Unmounted when the test leaves its scope.
#pragma once

#include <stdlib.h>
#include <sys/mount.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "core/disk_space.h"

namespace gpulab::testing {

struct SmallTmpfs {
  std::filesystem::path path;
  std::string why_not;  // empty when mounted; else the reason to skip

  explicit SmallTmpfs(uint64_t bytes) {
    std::string name = std::filesystem::temp_directory_path() / "gpulab-tmpfs-XXXXXX";
    if (::mkdtemp(name.data()) == nullptr) {
      why_not = "mkdtemp failed";
      return;
    }
    path = name;
    const std::string opts = "size=" + std::to_string(bytes) + ",mode=0755";
    if (::mount("tmpfs", name.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      why_not = std::string("cannot mount a tmpfs (needs root): ") + std::strerror(errno);
      ::rmdir(name.c_str());
      path.clear();
    }
  }
  ~SmallTmpfs() {
    if (path.empty()) return;
    ::umount2(path.c_str(), MNT_DETACH);
    ::rmdir(path.c_str());
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  // Writes a filler file until at most `leave` bytes stay free (a page or so of slack).
  void fill(uint64_t leave) const {
    const auto free = free_bytes(path).value_or(0);
    if (free <= leave) return;
    std::FILE* f = std::fopen((path / "filler").c_str(), "ab");
    if (!f) return;
    std::vector<char> block(4096, 'f');
    for (uint64_t left = free - leave; left >= block.size(); left -= block.size())
      if (std::fwrite(block.data(), 1, block.size(), f) != block.size()) break;
    std::fclose(f);
  }
  // The names in the folder (not recursive), for "nothing half written" checks.
  std::vector<std::string> names(const std::filesystem::path& dir) const {
    std::vector<std::string> out;
    std::error_code ec;
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      out.push_back(e.path().filename().string());
    return out;
  }
};

}  // namespace gpulab::testing
