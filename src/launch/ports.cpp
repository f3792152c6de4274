// Port helpers over plain sockets (IPv4; the rendezvous address is an IPv4 host or a name).
#include "launch/ports.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace gpulab::launch {

namespace {

// Binds a TCP socket to addr:port (port 0: any); returns the fd or -1 with errno set.
int bind_socket(const std::string& addr, int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  if (::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr) != 1) sa.sin_addr.s_addr = htonl(INADDR_ANY);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    int e = errno;
    ::close(fd);
    errno = e;
    return -1;
  }
  return fd;
}

}  // namespace

Result<int> pick_free_port(const std::string& addr) {
  int fd = bind_socket(addr, 0);
  if (fd < 0) {
    return Error{Code::kResourceExhausted,
                 "cannot bind a TCP port on " + addr + ": " + std::strerror(errno),
                 "pass --master_port explicitly"};
  }
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return static_cast<int>(ntohs(sa.sin_port));
}

Result<std::string> local_address_towards(const std::string& peer) {
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(peer.c_str(), "9", &hints, &res); rc != 0 || !res) {
    return Error{Code::kInvalidArgument, "cannot resolve " + peer + ": " + ::gai_strerror(rc),
                 "pass an IPv4 address or a resolvable host name as --master_addr"};
  }
  // connect() on a UDP socket sends nothing; it only asks the kernel to pick the route.
  int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  int rc = fd < 0 ? -1 : ::connect(fd, res->ai_addr, res->ai_addrlen);
  ::freeaddrinfo(res);
  if (rc != 0) {
    int e = errno;
    if (fd >= 0) ::close(fd);
    return Error{Code::kUnavailable, "no route to " + peer + ": " + std::strerror(e)};
  }
  sockaddr_in sa{};
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  char buf[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &sa.sin_addr, buf, sizeof buf);
  return std::string(buf);
}

}  // namespace gpulab::launch
