// Host TCP ports: whether one can be bound right now (the one probe, for SSH ports, user port
// mappings and the rendezvous port), and the seed's SSH port sequence (base+11, base+22, ...).
#pragma once

#include <functional>
#include <optional>
#include <set>

namespace gpulab {

// True when a TCP listener could bind `port` on all IPv4 and IPv6 addresses right now.
bool host_port_bindable(int port);

using PortProbe = std::function<bool(int port)>;

// The seed's step between SSH ports (run-ddp.sh, the GPU Docker Service).
inline constexpr int kSshPortStep = 11;

// The first port base+step*k (k = 1, 2, ...) up to 65535 that is not in `unavailable` and passes
// `probe`; nullopt when none is left.
std::optional<int> next_ssh_port(int base, int step, const std::set<int>& unavailable,
                                 const PortProbe& probe = host_port_bindable);

}  // namespace gpulab
