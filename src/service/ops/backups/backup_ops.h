// Backups: container -> commit -> image archive streamed into backup_<name>.tar with a manifest
// and checksum, made on a worker thread with progress in the book; restore after verifying the
// checksum; download and upload (streamed) for moving a container to another machine.
#pragma once

#include <string>

#include "service/domain/principal.h"
#include "service/ops/containers/container_ops.h"

namespace gpulab::service {

// backup_dir/backup_<name>.tar (the seed's naming).
std::string backup_file_path(const ServiceConfig& config, const std::string& backup_name);

BackupRecord make_backup(Service& s, const Principal& who, const std::string& container,
                         const std::string& backup_name);
CreateOutcome restore_backup(Service& s, const Principal& who, const Json& req);
// Verifies an uploaded file and moves it into the backup dir under its name.
BackupRecord accept_upload(Service& s, const Principal& who, const std::string& uploaded_file,
                           const std::string& backup_name);
// The file to stream for a download (after the ownership check).
std::string backup_for_download(Service& s, const Principal& who, const std::string& backup_name);
void delete_backup(Service& s, const Principal& who, const std::string& backup_name);
Json backups_json(Service& s, const Principal& who);

}  // namespace gpulab::service
