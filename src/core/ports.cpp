// Host port probes over plain sockets; see ports.h.
#include "core/ports.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>

namespace gpulab {
namespace {

// SO_REUSEADDR lets us ignore TIME_WAIT leftovers, yet on Linux a bind still fails while any
// socket listens on the port: exactly "someone listens there".
bool bind_ok(int family, int port) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return family == AF_INET6;  // no IPv6 on this host: nothing can listen there
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  int rc;
  if (family == AF_INET) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  } else {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    a.sin6_addr = in6addr_any;
    rc = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
    if (rc != 0 && errno == EADDRNOTAVAIL) rc = 0;  // IPv6 disabled
  }
  ::close(fd);
  return rc == 0;
}

}  // namespace

bool host_port_bindable(int port) {
  if (port < 1 || port > 65535) return false;
  return bind_ok(AF_INET, port) && bind_ok(AF_INET6, port);
}

std::optional<int> next_ssh_port(int base, int step, const std::set<int>& unavailable,
                                 const PortProbe& probe) {
  for (long p = static_cast<long>(base) + step; p <= 65535; p += step) {
    int port = static_cast<int>(p);
    if (unavailable.count(port)) continue;
    if (probe && !probe(port)) continue;
    return port;
  }
  return std::nullopt;
}

}  // namespace gpulab
