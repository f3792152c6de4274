// An engine's refusal of a host port ("Bind for 10.0.0.2:20222 failed: port is already
// allocated"): which port it names, and an SSH port the service chose held back on that host, so
// the next choice there skips it (create, and a start whose SSH port was taken meanwhile).
#pragma once

#include <string>

#include "service/ops/service.h"

namespace gpulab::service {

// How many SSH ports one create or one recreate on a new SSH port tries.
inline constexpr int kSshPortTries = 3;

// Whether the engine's refusal `why` names host port `port` (":20222" not followed by a digit);
// never for port 0.
bool names_port(const std::string& why, int port);

// Holds SSH port `port` back on `host` for a while (the engine's stale allocation lasts until
// that engine forgets it; after that the port is offered again) and says so in the log.
void hold_back_refused_ssh_port(Service& s, const std::string& host, int port);

// How the audit log says that a container's SSH port moved: "ssh_port 20222 -> 20233".
std::string ssh_port_change(int from, int to);

}  // namespace gpulab::service
