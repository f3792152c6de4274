// Unpacks a .tar.gz: core's tar reader on zlib's gz stream, into a staging folder (see tar.h).
#include "train/data/fetch/tar.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>

#include "core/strings.h"
#include "core/tar.h"

#if GPULAB_HAVE_ZLIB
#include <zlib.h>
#endif

namespace gpulab::train {

namespace fs = std::filesystem;

#if !GPULAB_HAVE_ZLIB

bool tar_gz_supported() {
  return false;
}
Result<std::vector<std::string>> extract_tar_gz(const fs::path&, const fs::path&) {
  return Result<std::vector<std::string>>(Code::kUnsupported,
                                          "gpulab was built without zlib; unpack with tar -xzf");
}

#else

namespace {

using Strings = std::vector<std::string>;

Result<Strings> bad_archive(const std::string& msg) {
  return Result<Strings>(Code::kDataError, "bad archive: " + msg);
}

// The member's path under the unpack folder, when it stays inside it (core's one check).
bool safe_path(const std::string& name, fs::path& out) {
  auto parts = tar_member_parts(name);
  if (!parts) return false;
  out.clear();
  for (const auto& part : *parts) out /= part;
  return true;
}

class GzReader {
 public:
  explicit GzReader(const fs::path& p) : gz_(gzopen(p.c_str(), "rb")) {}
  ~GzReader() {
    if (gz_) gzclose(gz_);
  }
  GzReader(const GzReader&) = delete;
  GzReader& operator=(const GzReader&) = delete;
  bool ok() const { return gz_ != nullptr; }
  // Reads exactly n bytes; false at a clean or unclean end.
  bool read(void* buf, size_t n) {
    auto* p = static_cast<char*>(buf);
    while (n > 0) {
      const int got = gzread(gz_, p, static_cast<unsigned>(std::min<size_t>(n, 1 << 20)));
      if (got <= 0) return false;
      p += got;
      n -= static_cast<size_t>(got);
    }
    return true;
  }
  std::string error() {
    int err = 0;
    const char* msg = gzerror(gz_, &err);
    return err == Z_OK ? "the archive ends early (truncated download?)" : msg;
  }

 private:
  gzFile gz_;
};

// Writes one regular file of the archive under `stage`.
Status unpack_file(const TarReader::EntryData& data, const fs::path& path) {
  std::error_code ec;
  fs::create_directories(path.parent_path(), ec);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) return Error(Code::kInternal, "cannot write " + path.string());
  auto st = data.copy([&](const char* p, size_t n) -> Status {
    out.write(p, static_cast<std::streamsize>(n));
    if (!out) return Error(Code::kInternal, "cannot write " + path.string());
    return ok_status();
  });
  if (!st.ok()) return st;
  out.close();
  if (!out) return Error(Code::kInternal, "cannot write " + path.string());
  return ok_status();
}

}  // namespace

bool tar_gz_supported() {
  return true;
}

Result<Strings> extract_tar_gz(const fs::path& archive, const fs::path& dest) {
  GzReader gz(archive);
  if (!gz.ok()) return Result<Strings>(Code::kNotFound, "cannot open " + archive.string());
  std::error_code ec;
  fs::create_directories(dest, ec);
  const fs::path stage = dest / fmt::format(".gpulab-unpack-{}", ::getpid());
  fs::remove_all(stage, ec);
  fs::create_directories(stage, ec);
  if (ec) return Result<Strings>(Code::kInternal, "cannot create " + stage.string());
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code e;
      fs::remove_all(p, e);
    }
  } cleanup{stage};

  std::set<std::string> tops;
  int entries = 0;
  std::optional<Error> failed;
  TarInput in;
  in.what = archive.string();
  in.read = [&](char* buf, size_t n) { return gz.read(buf, n); };
  auto st = TarReader::for_each(in, [&](const TarEntry& e, const TarReader::EntryData& data) {
    ++entries;
    const bool is_file = e.type == TarType::kFile;
    const bool is_dir = e.type == TarType::kDirectory;
    if (!is_file && !is_dir) return true;  // links and special files: data sets need none
    fs::path rel;
    if (!safe_path(e.name, rel)) {
      failed = Error(Code::kDataError,
                     "bad archive: unsafe path '" + printable(e.name) + "' (absolute or with ..)");
      return false;
    }
    tops.insert(rel.begin()->string());
    if (is_dir) {
      fs::create_directories(stage / rel, ec);
      return true;
    }
    auto written = unpack_file(data, stage / rel);
    if (!written.ok()) failed = written.error();
    return written.ok();
  });
  if (failed) return *failed;
  if (!st.ok())
    return bad_archive(st.error().message.find("ends without") != std::string::npos
                           ? gz.error()
                           : st.error().message);
  if (entries == 0) return bad_archive("no entries");
  // Everything read cleanly: move the top-level entries into place.
  Strings placed;
  for (const auto& t : tops) {
    fs::remove_all(dest / t, ec);
    fs::rename(stage / t, dest / t, ec);
    if (ec) return Result<Strings>(Code::kInternal, "cannot move " + t + " into " + dest.string());
    placed.push_back(t);
  }
  return placed;
}

#endif

}  // namespace gpulab::train
