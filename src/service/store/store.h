// The service's book (SQLite, WAL): users and hashed tokens, containers with their GPU and port
// allocations, resting ports, snapshots, backups and an audit log, behind schema migrations.
// Unique keys on GPU uuid and host port make a double allocation impossible, even across processes.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "service/domain/records.h"
#include "service/store/db.h"

namespace gpulab::service {

class Store {
 public:
  static Result<std::unique_ptr<Store>> open(const std::string& path);
  Db& db() { return *db_; }
  int schema_version();
  // Rows from before hosts existed (host '') belong to `host`, the first configured one.
  void adopt_default_host(const std::string& host);

  // Runs fn in one transaction (BEGIN IMMEDIATE): allocation decisions and their rows commit
  // together.
  template <typename Fn>
  auto transaction(Fn&& fn) {
    return db_->transaction(std::forward<Fn>(fn));
  }

  // ---- users and tokens ----
  std::int64_t add_user(const std::string& name, bool admin);
  std::optional<UserRecord> find_user(const std::string& name);
  std::vector<UserRecord> users();
  void add_token(std::int64_t user_id, const std::string& token_sha256);
  std::optional<UserRecord> user_for_token(const std::string& token_sha256);
  // Deletes one token (by hash) or all of a user's; returns how many went.
  int revoke_token(const std::string& token_sha256);
  int revoke_user_tokens(std::int64_t user_id);

  // ---- containers ----
  // Inserts the row (an intent when state is "creating"); returns its id. Name taken ->
  // kAlreadyExists.
  std::int64_t insert_container(const ContainerRecord& rec);
  std::optional<ContainerRecord> find_container(const std::string& name);
  std::optional<ContainerRecord> find_container(std::int64_t id);
  // All containers, or only `owner`'s.
  std::vector<ContainerRecord> containers(const std::optional<std::string>& owner = std::nullopt);
  void set_state(std::int64_t id, const std::string& state);
  void set_docker_id(std::int64_t id, const std::string& docker_id);
  void set_spec(std::int64_t id, const ContainerSpec& spec);
  // Books `port` as the container's SSH port (0: none) in one transaction; the one it had rests.
  void set_ssh_port(std::int64_t id, int port);
  // Deletes the row and its GPU allocations; its ports go to rest (unless rest is false).
  void remove_container(std::int64_t id, bool rest_ports = true);

  // ---- allocations ----
  void add_gpu(std::int64_t container_id, const GpuAssignment& gpu);
  void clear_gpus(std::int64_t container_id);
  std::map<std::string, std::string> gpu_holders();  // uuid -> container name
  void add_port(std::int64_t container_id, int port, const std::string& kind, int container_port);
  // Host ports are per host; `host` nullopt: every host's together.
  // Ports held by a container, or resting (released less than rest_seconds ago).
  std::set<int> unavailable_ports(int rest_seconds,
                                  const std::optional<std::string>& host = std::nullopt);
  // port -> container name
  std::map<int, std::string> port_holders(const std::optional<std::string>& host = std::nullopt);
  // Ports still resting after a release -> seconds of rest left.
  std::map<int, double> resting_ports(int rest_seconds,
                                      const std::optional<std::string>& host = std::nullopt);
  // A container's GPU rows: its own (pending false) or those booked for its move's target.
  std::vector<GpuAssignment> container_gpus(std::int64_t container_id, bool pending);
  // Releases every port of a container except its SSH port (when keep_ssh).
  void release_ports(std::int64_t container_id, bool keep_ssh);

  // ---- moves between hosts (store_moves.cpp; move_ops.h says how they run) ----
  void insert_move(const MoveRecord& m);
  std::vector<MoveRecord> moves();
  void set_move_state(const std::string& tag, const std::string& state);
  void remove_move(const std::string& tag);
  // The target's booking, pending (not the container's yet: listings, quotas and metering leave
  // it out; the allocator counts it as taken) until commit_move.
  void add_pending_gpu(std::int64_t container_id, const GpuAssignment& gpu);
  void add_pending_port(std::int64_t container_id, const std::string& host, int port,
                        const std::string& kind, int container_port);
  // A rollback: the pending rows go without resting (they were never given out).
  void drop_pending(std::int64_t container_id);
  // The commit, in one transaction: the source's GPUs and ports go (the ports rest on the
  // source), the pending ones become the container's, the row names its new host, engine id,
  // spec (image), SSH port and state, and the journal row turns "finish".
  void commit_move(const MoveRecord& m, const std::string& docker_id, const ContainerSpec& spec,
                   int ssh_port, const std::string& state);

  // ---- hosts (store_hosts.cpp) ----
  // Every host the book has a container row (or a lease) on, or a move journal row naming it.
  std::set<std::string> hosts_in_book();
  // The GPU rows of `host`'s containers, pending or not.
  std::vector<GpuAssignment> host_gpu_rows(const std::string& host);
  // (host, port) of the port rows on `host` or of its containers, pending or not.
  std::vector<std::pair<std::string, int>> host_port_rows(const std::string& host);
  // Deletes the rows of `host` (its containers and leases, their GPU and port allocations, pending
  // or not, and its resting ports) in the caller's transaction; nothing rests: the host is gone.
  // The move journal is the caller's (forget_host.h settles it first).
  void forget_host_rows(const std::string& host);

  // ---- snapshots and backups ----
  void add_snapshot(const SnapshotRecord& s);
  std::optional<SnapshotRecord> find_snapshot(const std::string& name);
  std::vector<SnapshotRecord> snapshots(const std::optional<std::string>& owner = std::nullopt);
  void remove_snapshot(const std::string& name);
  void upsert_backup(const BackupRecord& b);
  std::optional<BackupRecord> find_backup(const std::string& name);
  std::vector<BackupRecord> backups(const std::optional<std::string>& owner = std::nullopt);
  void set_backup_progress(const std::string& name, std::int64_t done);
  void remove_backup(const std::string& name);

  // ---- audit ----
  void audit(const std::string& user, const std::string& action, const std::string& target,
             const std::string& outcome, const std::string& detail = {});
  Json audit_tail(int n);

 private:
  explicit Store(std::unique_ptr<Db> db) : db_(std::move(db)) {}
  void migrate();
  ContainerRecord container_from_row(const DbRow& r);
  std::unique_ptr<Db> db_;
};

}  // namespace gpulab::service
