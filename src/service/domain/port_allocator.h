// Host ports for containers: the SSH port sequence of the seed (base+11, base+22, ...) and checks
// of user-requested host ports. A port is free only if no container holds it, it is not resting
// after a release, and binding it on the host succeeds (so no other process listens there).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "core/ports.h"  // host_port_bindable, next_ssh_port: shared with gpulab ddp

namespace gpulab::service {

// The requested host ports that are taken (held, resting, or bound by some process), in the
// order given; empty when all are free.
std::vector<int> taken_ports(const std::vector<int>& wanted, const std::set<int>& unavailable,
                             const PortProbe& probe = host_port_bindable);

// "Port(s) already in use: [3002, 4002]" (the seed's PORT_CONFLICT message).
std::string port_conflict_message(const std::vector<int>& ports);
// The same for ports that nothing holds but that still rest after a release (port -> seconds
// left): "Port(s) resting after release: [3002] (free again in 5 s)".
std::string port_resting_message(const std::map<int, double>& resting);

}  // namespace gpulab::service
