// Container lifecycle as transactions over the book and the engine: allocate (GPUs, SSH and user
// ports) -> record intent -> create -> start, releasing everything on any failure; and start,
// stop, restart, delete, resource updates and the GPU-count change (commit -> recreate).
#pragma once

#include <map>
#include <string>

#include "service/auth.h"
#include "service/service.h"

namespace gpulab::service {

struct CreateOptions {
  std::string name;
  std::string owner;
  ContainerSpec spec;
  bool internal_image = false;  // a snapshot or backup image of ours: skip the allowlist
};

struct CreateOutcome {
  ContainerRecord record;
  std::string ssh_password;  // returned once; empty when a public key was given
};

CreateOutcome create_container(Service& s, const CreateOptions& opts);

// What a restore (restore_request in validation.cpp: from a snapshot or a backup) creates: the
// recorded spec with the request's changes, never its host ports (the source may still hold
// them), on our own `image`.
CreateOptions restore_options(const Principal& who, const Json& req, ContainerSpec recorded,
                              const std::string& image);

// What allocate() took: the row's id, its GPUs and its SSH port (0 without one).
struct Allocation {
  std::int64_t id = 0;
  std::vector<GpuSlot> gpus;
  int ssh_port = 0;
};
// Chooses GPUs and ports (the SSH port unless !with_ssh, and the spec's user ports) and records
// them with a row in `state`, in one transaction under the allocation lock (the bind probes and
// the inserts must not interleave with another request). GPU_ALLOCATION_FAILED, PORT_CONFLICT,
// PORT_EXHAUSTED, NAME_CONFLICT.
Allocation allocate(Service& s, const CreateOptions& opts, const std::string& state,
                    bool with_ssh = true);

// The caller's container by name: CONTAINER_NOT_FOUND, or FORBIDDEN for another user's.
ContainerRecord require_container(Service& s, const Principal& who, const std::string& name);

void start_container(Service& s, const ContainerRecord& c);
void stop_container(Service& s, const ContainerRecord& c);
void restart_container(Service& s, const ContainerRecord& c);
void delete_container(Service& s, const ContainerRecord& c);
// cpus / memory / pids_limit through the engine; gpu_count through commit -> recreate.
ContainerRecord update_resources(Service& s, const ContainerRecord& c, const Json& req);

// Creates and starts the engine container for a row as booked (its GPUs and ports); used when a
// restart finds a recreate that was cut off. No new password is set.
std::string create_engine_container(Service& s, const ContainerRecord& c);

// The engine's view of managed containers, by name.
std::map<std::string, docker::ContainerSummary> engine_containers(Service& s);
// One container as the API shows it (list, create answers).
Json container_json(const ContainerRecord& c, const docker::ContainerSummary* engine);

}  // namespace gpulab::service
