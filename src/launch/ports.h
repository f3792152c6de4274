// Free TCP port selection for the rendezvous store (core/ports.h probes a given port).
#pragma once

#include <string>

#include "core/result.h"

namespace gpulab::launch {

// Asks the kernel for a free port on `addr` (bind to port 0). The port is released before the
// call returns; the rank-0 store binds it moments later, a race tolerated like torchrun does.
Result<int> pick_free_port(const std::string& addr = "127.0.0.1");

// This host's address on the route towards `peer` (a host name or IPv4 address): what a rank
// binds its collective sockets to so that ranks on other hosts can reach it. Loopback for a
// loopback peer.
Result<std::string> local_address_towards(const std::string& peer);

}  // namespace gpulab::launch
