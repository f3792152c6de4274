// A container made again on its host from a commit of itself, keeping its writable layer, name,
// owner, SSH password (in the committed /etc/shadow) and user ports: with another GPU count
// (update-resources), or on a new SSH port (a start whose SSH port something outside the service
// took meanwhile). The commit comes first; the new GPUs or port, the new image and the
// "recreating" intent are booked in one step, so a crash leaves either the old container as
// booked or an intent the reconciler completes.
#pragma once

#include "service/ops/service.h"

namespace gpulab::service {

// What a recreate chooses again.
struct RecreateChange {
  bool gpus = false;      // spec.gpu_count GPUs (the quota checked)
  bool ssh_port = false;  // a new SSH port (the old one was refused and is held back)
};

// Recreates `c` as `spec` with `change` on its host, whose engine is `engine`, and starts it.
// Until the old container is removed a failure leaves the row as it was; after that the
// reconciler completes the recreate (finish_recreate).
void recreate_container(Service& s, const ContainerRecord& c, const Engine& engine,
                        ContainerSpec spec, RecreateChange change);

// Creates and starts the engine container of the "recreating" row `id` (its old container gone)
// as booked, and books it running. An SSH port the engine refuses as taken outside the service
// is held back and another booked, kSshPortTries times; after the last the row stays
// "recreating" on a fresh port, so the reconciler's next pass tries that one, never the refused.
void finish_recreate(Service& s, std::int64_t id);

}  // namespace gpulab::service
