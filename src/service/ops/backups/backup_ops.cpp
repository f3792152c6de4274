// Backup, restore, upload, download and delete, with the archive format in backup_archive.
#include "service/ops/backups/backup_ops.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "core/disk_space.h"
#include "core/log.h"
#include "core/strings.h"
#include "service/base/api_error.h"
#include "service/base/clock.h"
#include "service/base/crypto.h"
#include "service/domain/validation.h"
#include "service/ops/backups/backup_archive.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/images/internal_images.h"

namespace gpulab::service {

namespace fs = std::filesystem;

namespace {

constexpr std::int64_t kProgressStep = 16 << 20;  // book progress every 16 MiB

// A full backup disk is the service's own storage (507), not a GPU or engine error.
[[noreturn]] void throw_backup_error(const Error& e) {
  if (e.code == Code::kResourceExhausted)
    throw ApiError(ApiCode::kInsufficientStorage, e.message, e.hint);
  throw Exception(e);
}

// Refuses before writing when the backup folder cannot hold the image's estimated size.
void check_backup_space(const std::string& path, std::int64_t estimate) {
  if (estimate <= 0) return;
  const auto free = free_bytes(fs::path(path).parent_path());
  if (free && *free < static_cast<uint64_t>(estimate))
    throw_backup_error(no_space_error(path, static_cast<uint64_t>(estimate)));
}

bool ends_with_tar(const std::string& s) {
  return s.size() > 4 && s.compare(s.size() - 4, 4, ".tar") == 0;
}

// Resolves the seed's backup_path ("my-backup-v1.tar") inside the backup dir, never outside it.
std::string resolve_backup(const ServiceConfig& c, const std::string& given) {
  if (given.empty() || given.find('/') != std::string::npos || given == "." || given == ".." ||
      given.find('\0') != std::string::npos)
    throw ApiError(ApiCode::kInvalidRequest, "Invalid backup_path '" + given + "'",
                   "give the file name in the backup dir, e.g. \"my-backup-v1.tar\"");
  std::string base = given;
  if (!ends_with_tar(base)) base += ".tar";
  for (const auto& cand :
       {fs::path(c.backup_dir) / ("backup_" + base), fs::path(c.backup_dir) / base}) {
    std::error_code ec;
    if (fs::is_regular_file(cand, ec)) return cand.string();
  }
  throw ApiError(ApiCode::kBackupNotFound, "Backup '" + given + "' not found in " + c.backup_dir);
}

}  // namespace

std::string backup_file_path(const ServiceConfig& config, const std::string& backup_name) {
  return (fs::path(config.backup_dir) / ("backup_" + backup_name + ".tar")).string();
}

namespace {

// The engine's commit of the container into the backup's image, under the container's lock
// (only the commit needs the container still; the long save runs without it). `c` is re-read
// under the lock: a recreate may have replaced it.
void commit_backup_image(Service& s, const Principal& who, const std::string& container,
                         const std::string& backup_name, ContainerRecord& c) {
  auto lock = s.lock_container(c.name);
  c = require_container(s, who, container);
  ImageCommit cs;
  cs.repo = "gpulab-backup";
  cs.tag = backup_name;
  cs.comment = "gpulab backup of " + c.name;
  cs.labels = {{"gpulab.backup", backup_name}, {"gpulab.backup.source", c.name}};
  auto img = require_archives(s.engine_of(c), "backups").commit(c.engine_ref(), cs);
  if (!img) throw_engine_error(img.error());
}

// The engine's save of `image` streamed into the backup file at `path` (its progress into the
// book as it goes), then the manifest written; returns the manifest. Throws on any failure.
BackupManifest write_backup_file(Service& s, const ContainerRecord& c, const std::string& image,
                                 const BackupRecord& rec, const std::string& path) {
  check_backup_space(path, rec.bytes_total);
  auto writer = BackupWriter::create(path);
  if (!writer) throw_backup_error(writer.error());
  (*writer)->expect_bytes(static_cast<uint64_t>(std::max<std::int64_t>(rec.bytes_total, 0)));
  Status write_status = ok_status();
  std::int64_t next_mark = kProgressStep;
  auto saved =
      require_archives(s.engine_of(c), "backups").save_image(image, [&](std::string_view chunk) {
        write_status = (*writer)->write(chunk.data(), chunk.size());
        if (!write_status) return false;
        if ((*writer)->bytes() >= next_mark) {
          s.store->set_backup_progress(rec.name, (*writer)->bytes());
          next_mark += kProgressStep;
        }
        return true;
      });
  if (!write_status) throw_backup_error(write_status.error());  // why the save stopped
  if (!saved) throw_engine_error(saved.error());
  BackupManifest m;
  m.name = rec.name;
  m.source = c.name;
  m.owner = c.owner;
  m.image = image;
  m.created_at = rec.created_at;
  m.spec = c.spec;
  auto fin = (*writer)->finish(m);
  if (!fin) throw_backup_error(fin.error());
  return m;
}

}  // namespace

BackupRecord make_backup(Service& s, const Principal& who, const std::string& container,
                         const std::string& backup_name) {
  check_name(backup_name, "backup_name");
  ContainerRecord c = require_container(s, who, container);
  // Refused before a backup row exists where the engine keeps no image archives.
  (void)require_archives(s.engine_of(c), "backups");
  std::string path = backup_file_path(s.config, backup_name);
  std::error_code ec;
  fs::create_directories(s.config.backup_dir, ec);
  auto existing = s.store->find_backup(backup_name);
  if (fs::exists(path, ec) || (existing && existing->state != "failed"))
    throw ApiError(ApiCode::kNameConflict, "Backup '" + backup_name + "' already exists");
  BackupRecord rec;
  rec.name = backup_name;
  rec.owner = c.owner;
  rec.source = c.name;
  rec.file = path;
  rec.state = "running";
  rec.created_at = iso_now();
  s.store->upsert_backup(rec);
  std::string image = kBackupRepo + backup_name;
  auto fail = [&](const std::string& why) {
    rec.state = "failed";
    rec.message = why;
    s.store->upsert_backup(rec);
    (void)s.engine_of(c).remove_image(image);
  };
  try {
    commit_backup_image(s, who, container, backup_name, c);
    if (auto info = s.engine_of(c).inspect_image(image)) {
      rec.bytes_total = info->size_bytes;  // an estimate: the archive is about this size
      s.store->upsert_backup(rec);
    }
    const BackupManifest m = write_backup_file(s, c, image, rec, path);
    rec.state = "complete";
    auto file_sha = sha256_file(path);
    if (!file_sha) throw Exception(file_sha.error());
    rec.sha256 = *file_sha;
    rec.image_sha256 = m.image_sha256;
    rec.bytes_total = rec.bytes_done = static_cast<std::int64_t>(fs::file_size(path, ec));
    s.store->upsert_backup(rec);
    (void)s.engine_of(c).remove_image(image);  // the file is the backup; keep the engine clean
  } catch (const Exception& e) {
    fail(e.error().message);
    s.store->audit(who.user, "backup", backup_name, "failed", e.error().message);
    throw;
  }
  s.store->audit(who.user, "backup", backup_name, "ok", "source=" + c.name);
  return rec;
}

CreateOutcome restore_backup(Service& s, const Principal& who, const Json& req) {
  std::string path = resolve_backup(s.config, req["backup_path"].get<std::string>());
  // Registered backups belong to their owner; a file put in the dir by hand needs an admin.
  std::optional<BackupRecord> rec;
  for (const auto& b : s.store->backups())
    if (fs::path(b.file).filename() == fs::path(path).filename()) rec = b;
  if (rec) {
    require_owner(who, rec->owner, "Backup '" + rec->name + "'");
  } else if (!who.admin) {
    throw ApiError(
        ApiCode::kForbidden,
        "Backup file " + fs::path(path).filename().string() + " is not registered to you",
        "upload it through /api/v1/gpu-docker/backups/upload or ask an admin");
  }
  auto m = read_backup(path, true);
  if (!m) {
    if (m.error().code == Code::kDataError)
      throw ApiError(ApiCode::kBackupCorrupt, m.error().message, m.error().hint);
    throw Exception(m.error());
  }
  // The host first (placement as a create, or the one asked for): the image is loaded there
  // only, and a restore no host has room for loads nothing.
  CreateOptions o = restore_options(who, req, m->spec, m->image);
  o.host = choose_host(s, o);  // restore_options read the asked "host", if any
  const Engine& engine = s.engine_on(o.host);
  // Load the image archive member straight from the file (no temporary copy).
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw ApiError(ApiCode::kBackupNotFound, "cannot open " + path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  std::int64_t left = m->image_bytes;
  off_t off = kImageOffset;
  // Until the container's row owns the image: a reconcile pass between the load and the booking
  // would take it for an orphan (it carries this book's label from the backed-up container).
  std::optional<ImageClaims::Claim> claim;
  claim.emplace(s.image_claims, m->image);
  auto loaded = require_archives(engine, "backup restores")
                    .load_images(m->image_bytes, [&](char* buf, size_t cap) -> Result<size_t> {
                      if (left <= 0) return size_t{0};
                      size_t n = static_cast<size_t>(
                          std::min<std::int64_t>(left, static_cast<std::int64_t>(cap)));
                      ssize_t r = ::pread(fd, buf, n, off);
                      if (r <= 0) return Error{Code::kInternal, "read " + path};
                      left -= r;
                      off += r;
                      return static_cast<size_t>(r);
                    });
  if (!loaded && loaded.error().code == Code::kDataError)
    throw ApiError(ApiCode::kBackupCorrupt,
                   "The engine refused the image archive: " + loaded.error().message);
  if (!loaded) throw_engine_error(loaded.error());
  if (!engine.image_exists(m->image))
    throw ApiError(ApiCode::kBackupCorrupt, "Image " + m->image + " missing after load");
  CreateOutcome out;
  try {
    out = create_container(s, o);
  } catch (...) {
    claim.reset();
    release_internal_image(s, m->image);  // loaded for a container that was refused
    throw;
  }
  s.store->audit(who.user, "restore", o.name, "ok", "backup=" + fs::path(path).filename().string());
  return out;
}

BackupRecord accept_upload(Service& s, const Principal& who, const std::string& uploaded,
                           const std::string& backup_name) {
  check_name(backup_name, "backup_name");
  std::string path = backup_file_path(s.config, backup_name);
  auto m = read_backup(uploaded, true, fs::path(path).filename().string() + " (upload)");
  if (!m) throw ApiError(ApiCode::kBackupCorrupt, m.error().message, m.error().hint);
  std::error_code ec;
  if (fs::exists(path, ec) || s.store->find_backup(backup_name))
    throw ApiError(ApiCode::kNameConflict, "Backup '" + backup_name + "' already exists");
  fs::rename(uploaded, path, ec);  // same folder: atomic
  if (ec) throw ApiError(ApiCode::kInternalError, "cannot store the upload: " + ec.message());
  BackupRecord rec;
  rec.name = backup_name;
  rec.owner = who.user;
  rec.source = m->source;
  rec.file = path;
  rec.state = "complete";
  auto file_sha = sha256_file(path);
  if (!file_sha) throw Exception(file_sha.error());
  rec.sha256 = *file_sha;
  rec.image_sha256 = m->image_sha256;
  rec.bytes_total = rec.bytes_done = static_cast<std::int64_t>(fs::file_size(path, ec));
  s.store->upsert_backup(rec);
  s.store->audit(who.user, "upload-backup", backup_name, "ok");
  return rec;
}

std::string backup_for_download(Service& s, const Principal& who, const std::string& name) {
  check_name(name, "backup_name");
  auto rec = s.store->find_backup(name);
  std::string path = backup_file_path(s.config, name);
  if (rec) {
    require_owner(who, rec->owner, "Backup '" + name + "'");
    if (rec->state != "complete")
      throw ApiError(ApiCode::kStateConflict, "Backup '" + name + "' is " + rec->state);
  } else if (!who.admin) {
    throw ApiError(ApiCode::kBackupNotFound, "Backup '" + name + "' not found");
  }
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw ApiError(ApiCode::kBackupNotFound, "Backup '" + name + "' not found");
  return path;
}

void delete_backup(Service& s, const Principal& who, const std::string& name) {
  check_name(name, "backup_name");
  auto rec = s.store->find_backup(name);
  if (!rec) throw ApiError(ApiCode::kBackupNotFound, "Backup '" + name + "' not found");
  require_owner(who, rec->owner, "Backup '" + name + "'");
  if (rec->state == "running")
    throw ApiError(ApiCode::kStateConflict, "Backup '" + name + "' is still running");
  std::error_code ec;
  fs::remove(rec->file, ec);
  s.store->remove_backup(name);
  s.store->audit(who.user, "delete-backup", name, "ok");
}

Json backups_json(Service& s, const Principal& who) {
  Json a = Json::array();
  auto rows = who.admin ? s.store->backups() : s.store->backups(who.user);
  for (const auto& b : rows) {
    a.push_back({{"backup_name", b.name},
                 {"file", fs::path(b.file).filename().string()},
                 {"source_container", b.source},
                 {"owner", b.owner},
                 {"state", b.state},
                 {"sha256", b.sha256},
                 {"bytes_total", b.bytes_total},
                 {"bytes_done", b.bytes_done},
                 {"message", b.message},
                 {"created_at", b.created_at}});
  }
  return a;
}

}  // namespace gpulab::service
