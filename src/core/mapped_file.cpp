// Copy-on-write file mappings (see mapped_file.h).
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpulab {

Result<std::shared_ptr<MappedFile>> MappedFile::open(const std::filesystem::path& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error{Code::kNotFound, "cannot open " + path.string() + ": " + std::strerror(errno)};
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return Error{Code::kNotFound, path.string() + " is not a regular file"};
  }
  const auto size = static_cast<size_t>(st.st_size);
  void* p = nullptr;
  if (size > 0) {
    // Private and writable, so the bytes can back tensors a caller may change in place; no swap
    // is reserved for the copies (a mapping larger than RAM is then still allowed).
    p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_NORESERVE, fd, 0);
    if (p == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return Error{Code::kUnavailable, "cannot map " + path.string() + ": " + std::strerror(err)};
    }
  }
  ::close(fd);  // the mapping keeps the file open
  return std::shared_ptr<MappedFile>(new MappedFile(p, size));
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
}

}  // namespace gpulab
