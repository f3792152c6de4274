// Client::put_file: one small file into a container through the archive endpoint, by way of a
// tar in an anonymous memory file (memfd): nothing on disk, so nothing is left behind even when
// the process is killed mid-way, and the contents (a password) never touch a folder.
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/strings.h"
#include "core/tar.h"
#include "docker/client.h"

namespace gpulab::docker {

namespace fs = std::filesystem;

Status Client::put_file(const std::string& id, const std::string& path, std::string_view contents,
                        std::uint32_t mode) const {
  fs::path p(path);
  if (!p.is_absolute() || !p.has_filename() || p.parent_path() == p.root_path())
    return Error(Code::kInvalidArgument, "put_file needs an absolute path in a folder: " + path);
  int fd = ::memfd_create("gpulab-put", MFD_CLOEXEC);
  if (fd < 0)
    return Error(Code::kInternal,
                 std::string("cannot make a memory file: ") + std::strerror(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  // The tar writer and the upload open it by path, as any file.
  fs::path tar = "/proc/self/fd/" + std::to_string(fd);
  Status st = ok_status();
  {
    auto w = TarWriter::create(tar);
    if (!w) {
      st = w.error();
    } else {
      std::string folder = p.parent_path().relative_path().string();
      st = w->add_directory(folder, 0700);
      if (st) st = w->add_file(p.relative_path().string(), contents, mode);
      if (st) st = w->finish();
    }
  }
  if (st) st = copy_to_container(id, "/", tar);
  return st;
}

}  // namespace gpulab::docker
