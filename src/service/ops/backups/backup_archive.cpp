// The two-member backup file (image archive, manifest) on core's tar codec (core/tar.h); sizes
// beyond 8 GiB use the base-256 size field, since lab backups run to tens of GB.
#include "service/ops/backups/backup_archive.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "core/disk_space.h"
#include "core/tar.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/base/crypto.h"

namespace gpulab::service {

namespace {

constexpr size_t kBlock = 512;

// The codec's header block for one plain member; backups hold two, both under 100-byte names.
std::array<char, kBlock> header(const std::string& name, std::uint64_t size) {
  TarEntry e;
  e.name = name;
  e.size = static_cast<std::int64_t>(size);
  e.mtime = unix_now();
  return tar_header_block(e);
}

// A member's name and size; both members of a backup are plain files (a link, a device or a
// directory named like one is refused: nothing of the archive is ever extracted by name).
Result<std::pair<std::string, std::uint64_t>> parse_header(const char* h) {
  auto e = parse_tar_header_block(h);
  if (!e) return e.error();
  if (e->type != TarType::kFile)
    return Error{Code::kDataError, "member '" + e->name + "' is not a plain file"};
  return std::make_pair(e->name, static_cast<std::uint64_t>(e->size));
}

std::uint64_t padded(std::uint64_t n) {
  return (n + kBlock - 1) / kBlock * kBlock;
}

bool read_exact(int fd, char* buf, size_t n, off_t off) {
  while (n > 0) {
    ssize_t r = ::pread(fd, buf, n, off);
    if (r <= 0) {
      if (r < 0 && errno == EINTR) continue;
      return false;
    }
    buf += r;
    n -= static_cast<size_t>(r);
    off += r;
  }
  return true;
}

bool write_exact(int fd, const char* buf, size_t n) {
  while (n > 0) {
    ssize_t w = ::write(fd, buf, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    buf += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

Error corrupt(const std::string& path, const std::string& why) {
  return Error{Code::kDataError,
               "Backup " + std::filesystem::path(path).filename().string() + " is corrupt: " + why,
               "make the backup again or copy the file again"};
}

}  // namespace

Json BackupManifest::to_json() const {
  return {{"format", format},
          {"name", name},
          {"source", source},
          {"owner", owner},
          {"image", image},
          {"created_at", created_at},
          {"image_sha256", image_sha256},
          {"image_bytes", image_bytes},
          {"spec", spec.to_json()}};
}

Result<BackupManifest> BackupManifest::from_json(const Json& j) {
  try {
    BackupManifest m;
    m.format = j.at("format").get<int>();
    m.name = j.at("name").get<std::string>();
    m.source = j.value("source", std::string());
    m.owner = j.value("owner", std::string());
    m.image = j.at("image").get<std::string>();
    m.created_at = j.value("created_at", std::string());
    m.image_sha256 = j.at("image_sha256").get<std::string>();
    m.image_bytes = j.at("image_bytes").get<std::int64_t>();
    m.spec = ContainerSpec::from_json(j.at("spec"));
    if (m.format != 1)
      return Error{Code::kDataError, "unknown backup format " + std::to_string(m.format)};
    return m;
  } catch (const Json::exception& e) {
    return Error{Code::kDataError, std::string("bad manifest: ") + e.what()};
  } catch (const ApiError& e) {  // a limit in the spec that a request could not have set
    return Error{Code::kDataError, std::string("bad manifest: ") + e.what()};
  }
}

struct BackupWriter::Impl {
  int fd = -1;
  Sha256 sha;
};

Result<std::unique_ptr<BackupWriter>> BackupWriter::create(const std::string& final_path) {
  std::unique_ptr<BackupWriter> w(new BackupWriter);
  w->impl_ = std::make_unique<Impl>();
  w->final_path_ = final_path;
  w->partial_path_ = final_path + ".partial";
  w->impl_->fd = ::open(w->partial_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0640);
  if (w->impl_->fd < 0)
    return Error{Code::kUnavailable,
                 "cannot create " + w->partial_path_ + ": " + std::strerror(errno)};
  // Placeholder header; rewritten with the real size once the archive is complete.
  auto h = header(kImageMember, 0);
  if (!write_exact(w->impl_->fd, h.data(), h.size()))
    return Error{Code::kUnavailable, "write " + w->partial_path_ + ": " + std::strerror(errno)};
  return w;
}

BackupWriter::~BackupWriter() {
  if (impl_ && impl_->fd >= 0) abandon();
}

Status BackupWriter::write(const char* data, size_t n) {
  impl_->sha.update(data, n);
  if (!write_exact(impl_->fd, data, n)) {
    const int err = errno;
    // A full disk says what the backup needed: the engine's estimate, or at least this much.
    if (is_no_space(err))
      return no_space_error(final_path_,
                            std::max<uint64_t>(expected_bytes_, static_cast<uint64_t>(bytes_) + n));
    return Error{Code::kUnavailable, "write " + partial_path_ + ": " + std::strerror(err)};
  }
  bytes_ += static_cast<std::int64_t>(n);
  return ok_status();
}

Status BackupWriter::finish(BackupManifest& m) {
  m.image_sha256 = impl_->sha.hex();
  m.image_bytes = bytes_;
  std::string pad(padded(static_cast<std::uint64_t>(bytes_)) - static_cast<std::uint64_t>(bytes_),
                  '\0');
  std::string manifest = m.to_json().dump(2);
  auto mh = header(kManifestMember, manifest.size());
  std::string tail = pad + std::string(mh.data(), mh.size()) + manifest +
                     std::string(padded(manifest.size()) - manifest.size(), '\0') +
                     std::string(2 * kBlock, '\0');
  auto ih = header(kImageMember, static_cast<std::uint64_t>(bytes_));
  bool ok = write_exact(impl_->fd, tail.data(), tail.size()) &&
            ::pwrite(impl_->fd, ih.data(), ih.size(), 0) == static_cast<ssize_t>(ih.size()) &&
            ::fsync(impl_->fd) == 0;
  ::close(impl_->fd);
  impl_->fd = -1;
  if (!ok) {
    const int err = errno;
    ::unlink(partial_path_.c_str());
    if (is_no_space(err))
      return no_space_error(final_path_, static_cast<uint64_t>(bytes_) + tail.size());
    return Error{Code::kUnavailable,
                 "cannot complete " + partial_path_ + ": " + std::strerror(err)};
  }
  if (::rename(partial_path_.c_str(), final_path_.c_str()) != 0) {
    ::unlink(partial_path_.c_str());
    return Error{Code::kUnavailable, "rename to " + final_path_ + ": " + std::strerror(errno)};
  }
  return ok_status();
}

void BackupWriter::abandon() {
  if (impl_->fd >= 0) ::close(impl_->fd);
  impl_->fd = -1;
  ::unlink(partial_path_.c_str());
}

Result<BackupManifest> read_backup(const std::string& file, bool verify,
                                   const std::string& shown_as) {
  // Errors name the backup the user knows, not a temporary upload file.
  const std::string path = file;
  auto corrupt = [&](const std::string&, const std::string& why) {
    return service::corrupt(shown_as.empty() ? file : shown_as, why);
  };
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return Error{Code::kNotFound, "cannot open backup " + path + ": " + std::strerror(errno)};
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  off_t file_size = ::lseek(fd, 0, SEEK_END);
  char h[kBlock];
  if (!read_exact(fd, h, kBlock, 0)) return corrupt(path, "too short for a tar header");
  auto first = parse_header(h);
  if (!first) return corrupt(path, first.error().message);
  if (first->first != kImageMember)
    return corrupt(path, "first member is not " + std::string(kImageMember));
  std::uint64_t image_bytes = first->second;
  off_t mpos = static_cast<off_t>(kBlock + padded(image_bytes));
  if (mpos + static_cast<off_t>(kBlock) > file_size)
    return corrupt(path, "truncated (no manifest)");
  if (!read_exact(fd, h, kBlock, mpos)) return corrupt(path, "truncated manifest header");
  auto second = parse_header(h);
  if (!second) return corrupt(path, second.error().message);
  if (second->first != kManifestMember || second->second > (1u << 20))
    return corrupt(path, "second member is not the manifest");
  std::string text(second->second, '\0');
  if (!read_exact(fd, text.data(), text.size(), mpos + static_cast<off_t>(kBlock)))
    return corrupt(path, "truncated manifest");
  Json j;
  try {
    j = Json::parse(text);
  } catch (const Json::exception& e) {
    return corrupt(path, "manifest is not JSON");
  }
  auto m = BackupManifest::from_json(j);
  if (!m) return corrupt(path, m.error().message);
  if (static_cast<std::uint64_t>(m->image_bytes) != image_bytes)
    return corrupt(path, "image size does not match the manifest");
  if (verify) {
    Sha256 sha;
    std::vector<char> buf(1 << 20);
    std::uint64_t left = image_bytes;
    off_t off = kBlock;
    while (left > 0) {
      size_t n = static_cast<size_t>(std::min<std::uint64_t>(left, buf.size()));
      if (!read_exact(fd, buf.data(), n, off)) return corrupt(path, "truncated image archive");
      sha.update(buf.data(), n);
      left -= n;
      off += static_cast<off_t>(n);
    }
    if (sha.hex() != m->image_sha256)
      return corrupt(path, "SHA-256 of the image archive does not match");
  }
  return m;
}

Status read_image_member(const std::string& path, const BackupManifest& manifest,
                         const std::function<Status(const char*, size_t)>& sink) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return Error{Code::kNotFound, "cannot open backup " + path};
  std::vector<char> buf(1 << 20);
  std::uint64_t left = static_cast<std::uint64_t>(manifest.image_bytes);
  off_t off = kImageOffset;
  Status st = ok_status();
  while (left > 0 && st.ok()) {
    size_t n = static_cast<size_t>(std::min<std::uint64_t>(left, buf.size()));
    if (!read_exact(fd, buf.data(), n, off)) {
      st = corrupt(path, "truncated image archive");
      break;
    }
    st = sink(buf.data(), n);
    left -= n;
    off += static_cast<off_t>(n);
  }
  ::close(fd);
  return st;
}

}  // namespace gpulab::service
