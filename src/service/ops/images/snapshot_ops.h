// Snapshots: commit a container to a labeled image (owner, source, time), list them, start a new
// container from one, delete one.
#pragma once

#include "service/domain/principal.h"
#include "service/ops/containers/container_ops.h"

namespace gpulab::service {

SnapshotRecord take_snapshot(Service& s, const Principal& who, const std::string& container,
                             const std::string& snapshot_name);
CreateOutcome restore_snapshot(Service& s, const Principal& who, const Json& req);
void delete_snapshot(Service& s, const Principal& who, const std::string& snapshot_name);
Json snapshot_json(const SnapshotRecord& r);

}  // namespace gpulab::service
