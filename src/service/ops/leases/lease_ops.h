// GPU leases: GPUs (and an SSH port) the service books for a container that someone else creates
// on the same engine -- `gpulab ddp`, which needs host mounts of data/ and log/ that the API never
// allows. The lease is a row in the book like a container's, so the allocator, status and metrics
// count it; the container carries the label gpulab.lease=<name>. Reconcile releases a lease whose
// container is gone, or that never got one within lease_grace_seconds.
#pragma once

#include <map>
#include <set>
#include <string>

#include "service/domain/principal.h"
#include "service/ops/containers/allocation.h"
#include "service/ops/service.h"

namespace gpulab::service {

struct LeaseRequest {
  std::string name;  // the lease's name (unique among containers and leases)
  std::string owner;
  int gpu_count = 0;
  bool ssh_port = true;
  std::string host;  // the host whose engine makes the container; empty: the first host
};

struct LeaseOutcome {
  ContainerRecord record;
  std::vector<GpuSlot> gpus;  // the container must get exactly these (the engine says how)
};

LeaseOutcome create_lease(Service& s, const LeaseRequest& request);

// Releases the lease's GPUs and port. Refused (STATE_CONFLICT) while a container with its label
// is still on the engine: its GPUs are in use until it is removed.
void release_lease(Service& s, const ContainerRecord& lease);

// The caller's lease by name: NOT_FOUND, or FORBIDDEN for another user's.
ContainerRecord require_lease(Service& s, const Principal& who, const std::string& name);

// Engine containers carrying a lease label, by lease name, on every host that is up and
// answers within host_answer_seconds (`missed`: the hosts that did not, and why).
std::map<std::string, EngineContainer> lease_containers(
    Service& s, std::map<std::string, std::string>* missed = nullptr);

inline bool is_lease(const ContainerRecord& c) {
  return c.state == state::kLeased;
}

// What the API shows for a lease (how to attach `gpus` only right after it was made).
Json lease_json(Service& s, const ContainerRecord& lease, const EngineContainer* bound,
                const std::vector<GpuSlot>* gpus = nullptr);

}  // namespace gpulab::service
