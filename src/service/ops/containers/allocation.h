// Booking a container's or a lease's GPUs and host ports: one decision at a time, checked against
// the quota, the book and the GPUs the engine reports held outside the service.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "service/ops/service.h"

namespace gpulab::service {

struct CreateOptions {
  std::string name;
  std::string owner;
  ContainerSpec spec;
  bool internal_image = false;  // a snapshot or backup image of ours: skip the allowlist
  std::string host;             // asked for; empty: placement chooses (allocate)
};

// What allocate() took: the row's id, its GPUs and its SSH port (0 without one).
struct Allocation {
  std::int64_t id = 0;
  std::vector<GpuSlot> gpus;
  int ssh_port = 0;
  std::string host;  // where it was placed
};
// Chooses a host (opts.host, else an up host with enough free GPUs: the fullest that fits under
// "pack", the emptiest under "spread"), then GPUs and ports there (the SSH port unless !with_ssh,
// and the spec's user ports) and records them with a row in `state`, in one transaction under the
// allocation lock (the bind probes and the inserts must not interleave with another request).
// `with_image`: the hosts hosts_with_image() found, when the caller asked already; null: asked
// here. GPU_ALLOCATION_FAILED, PORT_CONFLICT, PORT_EXHAUSTED, NAME_CONFLICT.
Allocation allocate(Service& s, const CreateOptions& opts, const std::string& state,
                    bool with_ssh = true, const std::vector<Host*>* with_image = nullptr);
// The hosts `opts` may be placed on, each asked once whether it holds the image (the service
// never pulls): the asked host alone (resolved here: asked_host's errors), else every host that
// is up and answers within host_answer_seconds. Ask before the allocation lock, so the engine
// round trips of one create do not hold up the others. Empty: no such host has the image.
std::vector<Host*> hosts_with_image(Service& s, const CreateOptions& opts);

// On host `h`: the user's host `ports` checked free there and, with_ssh, an SSH port chosen (0
// without). PORT_CONFLICT (saying which ports rest and for how long), PORT_EXHAUSTED. Call under
// the allocation lock, inside the booking transaction.
int choose_host_ports(Service& s, const Host& h, const std::vector<PortMapping>& ports,
                      bool with_ssh);

// Uuids of inventory GPUs held by ddp containers made without a lease (`gpulab ddp
// --no-service`), on every host that is up: the allocator skips them too. Empty when no engine
// can be asked (allocation then relies on the book alone).
std::set<std::string> unleased_ddp_gpus(Service& s);

// The GPUs in use now: `outside` (unleased_ddp_gpus) and those the book's rows hold, but the
// row named `except` (a recreate choosing its own GPUs again). Read under the allocation lock.
std::set<std::string> gpus_in_use(Service& s, std::set<std::string> outside,
                                  const std::string& except = {});

// The host allocate() would choose for `opts` now, its image not asked (opts.host checked when
// given): a backup restore loads its image there before the create, which decides again.
// GPU_ALLOCATION_FAILED or 503 as allocate() says them.
std::string choose_host(Service& s, const CreateOptions& opts);

// The host a create asked for, checked: unknown -> INVALID_REQUEST naming it; down -> 503.
Host& asked_host(Service& s, const std::string& name);

}  // namespace gpulab::service
