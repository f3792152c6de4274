// Snapshot and backup endpoints: the seed's snapshot/snapshots/restore-snapshot/backup/restore,
// plus snapshot and backup deletion, backup listing, download and upload.
#include <filesystem>

#include "service/api_error.h"
#include "service/backup_ops.h"
#include "service/handlers.h"
#include "service/snapshot_ops.h"
#include "service/validation.h"

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
  return ApiReply::ok("Container restored from snapshot successfully", created_json(out, s.config));
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
  return ApiReply::ok("Container restored from backup successfully", created_json(out, s.config));
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
  auto add = [&](const char* method, const std::string& path, Handler h, const std::string& summary,
                 const RequestSchema* schema, std::vector<std::string> query = {}) {
    r.add(Route{
        method, b + path, std::move(h), summary,
        path.find("backup") != std::string::npos || path == "/restore" ? "backups" : "snapshots",
        schema, std::move(query)});
  };
  add(
      "POST", "/snapshot", [sp](Req q, Who w) { return snapshot(*sp, q, w); },
      "Commit a container to a snapshot image", &snapshot_schema());
  add(
      "GET", "/snapshots", [sp](Req, Who w) { return snapshots(*sp, w); }, "List snapshots",
      nullptr);
  add(
      "POST", "/restore-snapshot", [sp](Req q, Who w) { return restore_snap(*sp, q, w); },
      "Create a container from a snapshot", &restore_snapshot_schema());
  add(
      "POST", "/delete-snapshot", [sp](Req q, Who w) { return delete_snap(*sp, q, w); },
      "Delete a snapshot image", &delete_snapshot_schema());
  add(
      "POST", "/backup", [sp](Req q, Who w) { return backup(*sp, q, w); },
      "Write backup_<backup_name>.tar (image archive + manifest + SHA-256) to the backup dir",
      &backup_schema());
  add(
      "POST", "/restore", [sp](Req q, Who w) { return restore(*sp, q, w); },
      "Verify a backup file and create a container from it", &restore_schema());
  add(
      "GET", "/backups", [sp](Req, Who w) { return backups(*sp, w); },
      "List backups with state and progress", nullptr);
  add(
      "POST", "/backups/delete", [sp](Req q, Who w) { return delete_bk(*sp, q, w); },
      "Delete a backup file", &delete_backup_schema());
  r.add(Route{"GET",
              b + "/backups/download",
              [sp](Req q, Who w) { return download(*sp, q, w); },
              "Stream a backup file (to move a container to another machine)",
              "backups",
              nullptr,
              {"backup_name"},
              true,
              false,
              true});
  r.add(Route{"PUT",
              b + "/backups/upload",
              [sp](Req q, Who w) { return upload(*sp, q, w); },
              "Upload a backup file (streamed to disk, verified, then registered)",
              "backups",
              nullptr,
              {"backup_name"},
              true,
              true,
              false});
  r.add(Route{"POST",
              b + "/backups/upload",
              [sp](Req q, Who w) { return upload(*sp, q, w); },
              "Upload a backup file (same as PUT)",
              "backups",
              nullptr,
              {"backup_name"},
              true,
              true,
              false});
}

}  // namespace gpulab::service
