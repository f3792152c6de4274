// Container lifecycle as transactions over the book and the engine: allocate (GPUs, SSH and user
// ports) -> record intent -> create -> start, releasing everything on any failure; and start,
// stop, restart, delete, resource updates and the GPU-count change (commit -> recreate.h).
#pragma once

#include <map>
#include <set>
#include <string>

#include "service/domain/principal.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/service.h"

namespace gpulab::service {

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

// The caller's container by name: CONTAINER_NOT_FOUND, or FORBIDDEN for another user's.
ContainerRecord require_container(Service& s, const Principal& who, const std::string& name);

// Start and restart: an SSH port taken on the container's host meanwhile (something outside the
// service holds it) gets the container recreated there on a new one (recreate.h), running after;
// a user's own port taken is refused (PORT_CONFLICT naming it) and the container stays stopped.
void start_container(Service& s, const ContainerRecord& c);
void stop_container(Service& s, const ContainerRecord& c);
void restart_container(Service& s, const ContainerRecord& c);
void delete_container(Service& s, const ContainerRecord& c);
// cpus / memory / pids_limit through the engine; gpu_count through commit -> recreate.
ContainerRecord update_resources(Service& s, const ContainerRecord& c, const Json& req);

// The engine's view of managed containers, by name, from every host that is up and answers
// within host_answer_seconds (`host_of`: each one's host; `missed`: the hosts that are up but
// did not answer, and why; `only`: ask just these hosts).
std::map<std::string, EngineContainer> engine_containers(
    Service& s, std::map<std::string, std::string>* host_of = nullptr,
    std::map<std::string, std::string>* missed = nullptr,
    const std::set<std::string>* only = nullptr);
// One container as the API shows it (list, create answers); `host` is its host: on one that is
// down, or up but not `answered` in time ("host_state": "unresponsive"), it shows as
// "unreachable".
Json container_json(const ContainerRecord& c, const EngineContainer* engine,
                    const Host* host = nullptr, bool answered = true);

}  // namespace gpulab::service
