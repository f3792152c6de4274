// Host ports an engine refused as taken while the book had them free (a stale allocation the
// engine kept after a crash, a container started there outside the service): the SSH port choice
// skips them for a while, then offers them again, so one sick engine's leftovers never fail a
// create whose port the service picked.
#pragma once

#include <set>
#include <string>

#include "service/store/store.h"

namespace gpulab::service {

// Holds `port` on `host` back until the unix time `until` (a later refusal moves it on).
void hold_refused_port(Store& st, const std::string& host, int port, double until);

// The ports of `host` still held back at the unix time `now`.
std::set<int> refused_ports(Store& st, const std::string& host, double now);

}  // namespace gpulab::service
