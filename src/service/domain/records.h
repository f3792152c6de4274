// The rows the store keeps: containers (with the ContainerSpec they were asked to be), users,
// snapshots and backups.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "service/domain/container_spec.h"

namespace gpulab::service {

struct GpuAssignment {
  std::string uuid;
  int index = 0;
};

// Container states in the book. "creating" and "deleting" are intents: a restart finds them
// and completes or rolls them back against what the engine has.
namespace state {
inline constexpr const char* kCreating = "creating";
inline constexpr const char* kRunning = "running";
inline constexpr const char* kExited = "exited";
inline constexpr const char* kCreated = "created";
inline constexpr const char* kDeleting = "deleting";
inline constexpr const char* kRecreating = "recreating";
inline constexpr const char* kLost = "lost";
// Being moved to another host (move_ops.h): its journal row is in `moves`.
inline constexpr const char* kMoving = "moving";  // gone from the engine outside the service
// GPUs and an SSH port reserved for a container made outside the service (gpulab ddp, which
// needs host mounts the API never allows); see lease_ops.h.
inline constexpr const char* kLeased = "leased";
}  // namespace state

struct ContainerRecord {
  std::int64_t id = 0;
  std::string name;
  std::string owner;
  std::string state;
  std::string docker_id;
  std::string host;  // the lab host (HostConfig::name) it lives on
  ContainerSpec spec;
  int ssh_port = 0;
  std::vector<GpuAssignment> gpus;  // sorted by index
  std::string created_at, updated_at;
  std::vector<int> gpu_indices() const;
  std::vector<std::string> gpu_uuids() const;
  // What its engine knows it by: its id once made, else its name (a create cut off before the
  // id was booked).
  const std::string& engine_ref() const { return docker_id.empty() ? name : docker_id; }
};

struct UserRecord {
  std::int64_t id = 0;
  std::string name;
  bool admin = false;
};

// One move of a stopped container between hosts, as journaled in the book (move_ops.h). The
// target's GPUs and ports are booked as pending rows of the same container until it commits.
struct MoveRecord {
  std::string tag;  // the move's image is gpulab-move:<tag>; the target container's label too
  std::int64_t container_id = 0;
  std::string name, source_host, target_host;
  std::string source_id;   // the source container's engine id (removed by id once committed)
  std::string prev_state;  // the row's state before the move (restored on a rollback)
  std::string old_image;   // the image the source ran (released once the move is committed)
  // "copying": not committed, rolled back after a failure or crash; "rollback": rolled back in
  // the book, its target host still to be cleaned; "finish": committed, the source host still
  // to be cleaned.
  std::string state;
  std::string started_at;
};

struct SnapshotRecord {
  std::string name, owner, source, image, created_at;
  ContainerSpec spec;
};

struct BackupRecord {
  // sha256: of the backup file as downloaded (`sha256sum backup_x.tar` matches).
  std::string name, owner, source, file, state, sha256, message, created_at;
  std::string image_sha256;  // not stored: the inner image.tar's, when at hand (from the manifest)
  std::int64_t bytes_total = 0, bytes_done = 0;
};

}  // namespace gpulab::service
