// Client::put_file: one small file into a container through the archive endpoint, by way of a
// tar in a private temporary folder that is removed right after the upload.
#include <stdlib.h>

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
  std::string tmpl = (fs::temp_directory_path() / "gpulab-put-XXXXXX").string();
  if (!::mkdtemp(tmpl.data()))  // mode 0700: the contents may be a secret
    return Error(Code::kInternal,
                 std::string("cannot make a temporary folder: ") + std::strerror(errno));
  fs::path dir(tmpl), tar = dir / "file.tar";
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
  std::error_code ec;
  fs::remove_all(dir, ec);
  return st;
}

}  // namespace gpulab::docker
