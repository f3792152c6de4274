// What idle reclaim reads from a container's own /proc/net files: SSH sessions (tcp, tcp6) and
// the network byte counters (dev). Any text is accepted: what is not a row of that file is skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace gpulab::service {

// Established TCP connections to local port 22 in /proc/net/tcp{,6} text.
int ssh_sessions_in(const std::string& proc_net_tcp);

// Received plus sent bytes of every interface but `lo` in /proc/net/dev text: the sum the
// engine's stats give (they count the container's own interfaces, loopback not among them).
// nullopt when the text holds no interface row at all (not that file); 0 with only `lo`.
std::optional<std::int64_t> net_bytes_in(const std::string& proc_net_dev);

}  // namespace gpulab::service
