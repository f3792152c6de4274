// Snapshot and backup endpoints: the seed's snapshot/snapshots/restore-snapshot/backup/restore,
// plus snapshot and backup deletion, backup listing, download and upload.
#include <filesystem>

#include "service/api/handlers.h"
#include "service/base/api_error.h"
#include "service/domain/validation.h"
#include "service/ops/backups/backup_ops.h"
#include "service/ops/images/snapshot_ops.h"

namespace gpulab::service {

namespace {

using Req = const ApiRequest&;
using Who = const Principal&;

ApiReply snapshot(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, snapshot_schema());
  auto r =
      take_snapshot(s, who, j["name"].get<std::string>(), j["snapshot_name"].get<std::string>());
  return ApiReply::ok("Snapshot created successfully", snapshot_json(r));
}

ApiReply snapshots(Service& s, Who who) {
  Json a = Json::array();
  for (const auto& r : s.store->snapshots(who.admin ? std::nullopt : std::optional(who.user)))
    a.push_back(snapshot_json(r));
  return ApiReply::ok("Snapshots retrieved successfully", {{"snapshots", a}, {"total", a.size()}});
}

ApiReply restore_snap(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, restore_snapshot_schema());
  auto out = restore_snapshot(s, who, j);
  return ApiReply::ok("Container restored from snapshot successfully", created_json(out, s));
}

ApiReply delete_snap(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, delete_snapshot_schema());
  delete_snapshot(s, who, j["snapshot_name"].get<std::string>());
  return ApiReply::ok("Snapshot deleted successfully", {{"snapshot_name", j["snapshot_name"]}});
}

Json backup_summary(const BackupRecord& b) {
  Json j = {{"backup_name", b.name},
            {"backup_path", b.file},
            {"file", std::filesystem::path(b.file).filename().string()},
            {"sha256", b.sha256},
            {"size_bytes", b.bytes_total},
            {"source_container", b.source},
            {"owner", b.owner}};
  if (!b.image_sha256.empty()) j["image_sha256"] = b.image_sha256;
  return j;
}

ApiReply backup(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, backup_schema());
  auto b = make_backup(s, who, j["name"].get<std::string>(), j["backup_name"].get<std::string>());
  return ApiReply::ok("Backup created successfully", backup_summary(b));
}

ApiReply restore(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, restore_schema());
  auto out = restore_backup(s, who, j);
  return ApiReply::ok("Container restored from backup successfully", created_json(out, s));
}

ApiReply backups(Service& s, Who who) {
  Json a = backups_json(s, who);
  return ApiReply::ok("Backups retrieved successfully", {{"backups", a}, {"total", a.size()}});
}

ApiReply delete_bk(Service& s, Req req, Who who) {
  Json j = parse_request(req.body, delete_backup_schema());
  delete_backup(s, who, j["backup_name"].get<std::string>());
  return ApiReply::ok("Backup deleted successfully", {{"backup_name", j["backup_name"]}});
}

ApiReply download(Service& s, Req req, Who who) {
  std::string name = query_param(req, "backup_name");
  ApiReply r;
  r.file = backup_for_download(s, who, name);
  r.content_type = "application/x-tar";
  r.headers.push_back({"Content-Disposition", "attachment; filename=\"backup_" + name + ".tar\""});
  return r;
}

ApiReply upload(Service& s, Req req, Who who) {
  std::string name = query_param(req, "backup_name");
  if (req.upload_file.empty()) throw ApiError(ApiCode::kInvalidRequest, "No upload body");
  auto b = accept_upload(s, who, req.upload_file, name);
  return ApiReply::ok("Backup uploaded successfully", backup_summary(b));
}

}  // namespace

void add_image_routes(Router& r, Service& s) {
  const std::string b = kApiBase;
  Service* sp = &s;
  r.add({.method = "POST",
         .path = b + "/snapshot",
         .handler = [sp](Req q, Who w) { return snapshot(*sp, q, w); },
         .summary = "Commit a container to a snapshot image",
         .tag = "snapshots",
         .schema = &snapshot_schema()});
  r.add({.method = "GET",
         .path = b + "/snapshots",
         .handler = [sp](Req, Who w) { return snapshots(*sp, w); },
         .summary = "List snapshots",
         .tag = "snapshots"});
  r.add({.method = "POST",
         .path = b + "/restore-snapshot",
         .handler = [sp](Req q, Who w) { return restore_snap(*sp, q, w); },
         .summary = "Create a container from a snapshot",
         .tag = "snapshots",
         .schema = &restore_snapshot_schema()});
  r.add({.method = "POST",
         .path = b + "/delete-snapshot",
         .handler = [sp](Req q, Who w) { return delete_snap(*sp, q, w); },
         .summary = "Delete a snapshot image",
         .tag = "snapshots",
         .schema = &delete_snapshot_schema()});
  r.add(
      {.method = "POST",
       .path = b + "/backup",
       .handler = [sp](Req q, Who w) { return backup(*sp, q, w); },
       .summary =
           "Write backup_<backup_name>.tar (image archive + manifest + SHA-256) to the backup dir",
       .tag = "backups",
       .schema = &backup_schema()});
  r.add({.method = "POST",
         .path = b + "/restore",
         .handler = [sp](Req q, Who w) { return restore(*sp, q, w); },
         .summary = "Verify a backup file and create a container from it",
         .tag = "backups",
         .schema = &restore_schema()});
  r.add({.method = "GET",
         .path = b + "/backups",
         .handler = [sp](Req, Who w) { return backups(*sp, w); },
         .summary = "List backups with state and progress",
         .tag = "backups"});
  r.add({.method = "POST",
         .path = b + "/backups/delete",
         .handler = [sp](Req q, Who w) { return delete_bk(*sp, q, w); },
         .summary = "Delete a backup file",
         .tag = "backups",
         .schema = &delete_backup_schema()});
  r.add({.method = "GET",
         .path = b + "/backups/download",
         .handler = [sp](Req q, Who w) { return download(*sp, q, w); },
         .summary = "Stream a backup file (to move a container to another machine)",
         .tag = "backups",
         .query_params = {"backup_name"},
         .binary_response = true});
  r.add({.method = "PUT",
         .path = b + "/backups/upload",
         .handler = [sp](Req q, Who w) { return upload(*sp, q, w); },
         .summary = "Upload a backup file (streamed to disk, verified, then registered)",
         .tag = "backups",
         .query_params = {"backup_name"},
         .streamed_upload = true});
  r.add({.method = "POST",
         .path = b + "/backups/upload",
         .handler = [sp](Req q, Who w) { return upload(*sp, q, w); },
         .summary = "Upload a backup file (same as PUT)",
         .tag = "backups",
         .query_params = {"backup_name"},
         .streamed_upload = true});
}

}  // namespace gpulab::service
