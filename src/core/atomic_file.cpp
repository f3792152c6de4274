// AtomicFile: temporary in the target's folder, piecewise writes, fsync, rename, folder fsync.
#include "core/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>

#include "core/disk_space.h"

namespace gpulab {

namespace fs = std::filesystem;

Result<AtomicFile> AtomicFile::create(const fs::path& path, uint64_t reserve_bytes) {
  const fs::path dir = path.has_parent_path() ? path.parent_path() : fs::path(".");
  std::error_code ec;
  fs::create_directories(dir, ec);
  std::random_device rd;
  std::string name = ".";
  name += path.filename().string();
  name += ".tmp";
  name += std::to_string(rd());
  fs::path tmp = dir / name;
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    if (is_no_space(errno) && reserve_bytes > 0) return no_space_error(path, reserve_bytes);
    return Error{Code::kUnavailable, "cannot create " + tmp.string() + ": " + std::strerror(errno)};
  }
  AtomicFile file(path, std::move(tmp), fd);  // from here its destructor removes the temporary
  if (auto st = reserve_space(fd, path, reserve_bytes); !st) return st.error();
  return Result<AtomicFile>(std::move(file));
}

AtomicFile::AtomicFile(AtomicFile&& other) noexcept
    : path_(std::move(other.path_)),
      tmp_(std::move(other.tmp_)),
      fd_(other.fd_),
      written_(other.written_) {
  other.fd_ = -1;
  other.tmp_.clear();
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  std::error_code ec;
  if (!tmp_.empty()) fs::remove(tmp_, ec);
}

Status AtomicFile::write(std::string_view data) {
  const char* p = data.data();
  size_t left = data.size();
  while (left > 0) {
    const ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (is_no_space(errno)) return no_space_error(path_, written_ + left);
      return Error{Code::kUnavailable, "write " + tmp_.string() + ": " + std::strerror(errno)};
    }
    p += n;
    left -= static_cast<size_t>(n);
    written_ += static_cast<uint64_t>(n);
  }
  return ok_status();
}

Status AtomicFile::commit() {
  if (::fsync(fd_) != 0) {
    if (is_no_space(errno)) return no_space_error(path_, written_);  // NFS reports it here
    return Error{Code::kUnavailable, "fsync " + tmp_.string() + ": " + std::strerror(errno)};
  }
  ::close(fd_);
  fd_ = -1;
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    return Error{Code::kUnavailable, "rename to " + path_.string() + ": " + std::strerror(errno)};
  tmp_.clear();
  // The rename is durable only once the folder entry is on disk.
  const fs::path dir = path_.has_parent_path() ? path_.parent_path() : fs::path(".");
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return ok_status();
}

}  // namespace gpulab
