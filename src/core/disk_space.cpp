// Free space, preallocation and the disk-full error (see disk_space.h).
#include "core/disk_space.h"

#include <fcntl.h>
#include <sys/statvfs.h>

#include <cerrno>
#include <cstring>

#include "core/strings.h"

namespace gpulab {

namespace fs = std::filesystem;

std::optional<uint64_t> free_bytes(const fs::path& path) {
  fs::path p = path;
  std::error_code ec;
  while (!p.empty() && !fs::exists(p, ec)) p = p.parent_path();
  struct statvfs st {};
  if (::statvfs(p.empty() ? "." : p.c_str(), &st) != 0) return std::nullopt;
  return static_cast<uint64_t>(st.f_bavail) * static_cast<uint64_t>(st.f_frsize);
}

bool is_no_space(int err) {
  return err == ENOSPC || err == EDQUOT;
}

Error no_space_error(const fs::path& path, uint64_t needed_bytes) {
  std::string msg = "not enough disk space for " + path.string() + ": it needs " +
                    std::to_string(needed_bytes) + " bytes (" +
                    human_bytes(static_cast<double>(needed_bytes)) + ")";
  if (auto free = free_bytes(path))
    msg += ", the filesystem has " + std::to_string(*free) + " (" +
           human_bytes(static_cast<double>(*free)) + ") free";
  return Error(Code::kResourceExhausted, msg,
               "free space there, or write to another folder; nothing was left half written");
}

Status reserve_space(int fd, const fs::path& shown, uint64_t bytes) {
  if (bytes == 0) return ok_status();
  const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
  if (rc == 0 || rc == EOPNOTSUPP || rc == EINVAL) return ok_status();
  if (is_no_space(rc)) return no_space_error(shown, bytes);
  return Error(Code::kUnavailable, "cannot reserve " + std::to_string(bytes) + " bytes for " +
                                       shown.string() + ": " + std::strerror(rc));
}

}  // namespace gpulab
