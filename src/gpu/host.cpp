// Host checks for GPU containers (see host.h). The Docker ping uses plain sockets so that the gpu
// module needs no HTTP client and no docker module.
#include "gpu/host.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/files.h"
#include "core/strings.h"

namespace gpulab::gpu {

namespace {

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

// Waits for `events` on fd until the deadline; false on timeout or error.
bool wait_for(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  for (;;) {
    int n = ::poll(&p, 1, timeout_ms);
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

// Non-blocking connect with a deadline.
bool connect_with_timeout(int fd, const sockaddr* addr, socklen_t len, int timeout_ms,
                          std::string& detail) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  if (::connect(fd, addr, len) == 0) return true;
  if (errno != EINPROGRESS && errno != EAGAIN) {
    detail = std::strerror(errno);
    return false;
  }
  if (!wait_for(fd, POLLOUT, timeout_ms)) {
    detail = "connect timed out";
    return false;
  }
  int err = 0;
  socklen_t elen = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen);
  if (err != 0) {
    detail = std::strerror(err);
    return false;
  }
  return true;
}

bool open_socket(const std::string& endpoint, Fd& s, int timeout_ms, std::string& detail) {
  if (starts_with(endpoint, "unix://")) {
    std::string path = endpoint.substr(7);
    sockaddr_un addr{};
    if (path.size() >= sizeof addr.sun_path) {
      detail = "socket path too long";
      return false;
    }
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    s.fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (s.fd < 0) {
      detail = std::strerror(errno);
      return false;
    }
    if (!connect_with_timeout(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr, timeout_ms,
                              detail)) {
      detail = path + ": " + detail;
      return false;
    }
    return true;
  }
  if (starts_with(endpoint, "tcp://")) {
    std::string hostport = endpoint.substr(6);
    size_t colon = hostport.rfind(':');
    std::string host = hostport.substr(0, colon);
    std::string port = colon == std::string::npos ? "2375" : hostport.substr(colon + 1);
    while (!port.empty() && port.back() == '/') port.pop_back();
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &res); rc != 0) {
      detail = host + ": " + ::gai_strerror(rc);
      return false;
    }
    bool ok = false;
    for (addrinfo* a = res; a != nullptr && !ok; a = a->ai_next) {
      Fd attempt;
      attempt.fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (attempt.fd < 0) continue;
      if (connect_with_timeout(attempt.fd, a->ai_addr, a->ai_addrlen, timeout_ms, detail)) {
        std::swap(s.fd, attempt.fd);
        ok = true;
      }
    }
    ::freeaddrinfo(res);
    if (!ok) detail = hostport + ": " + detail;
    return ok;
  }
  detail = "unsupported endpoint " + endpoint + " (only unix:// and tcp:// are checked)";
  return false;
}

std::vector<DeviceNode> render_nodes() {
  std::vector<DeviceNode> out;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/dev/dri", ec)) {
    std::string n = e.path().filename().string();
    if (!starts_with(n, "renderD")) continue;
    out.push_back({e.path().string(), ::access(e.path().c_str(), R_OK | W_OK) == 0});
  }
  std::sort(out.begin(), out.end(),
            [](const DeviceNode& a, const DeviceNode& b) { return a.path < b.path; });
  return out;
}

}  // namespace

std::string docker_endpoint_from_env() {
  const char* h = std::getenv("DOCKER_HOST");
  if (h != nullptr && *h != '\0') return h;
  return "unix:///var/run/docker.sock";
}

bool ping_docker(const std::string& endpoint, std::string& detail, int timeout_ms) {
  Fd s;
  if (!open_socket(endpoint, s, timeout_ms, detail)) return false;
  const std::string req = "GET /_ping HTTP/1.0\r\n\r\n";
  size_t sent = 0;
  while (sent < req.size()) {
    if (!wait_for(s.fd, POLLOUT, timeout_ms)) {
      detail = "send timed out";
      return false;
    }
    ssize_t n = ::send(s.fd, req.data() + sent, req.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      detail = std::string("send: ") + std::strerror(errno);
      return false;
    }
    sent += static_cast<size_t>(n);
  }
  // HTTP/1.0: the engine closes the connection after the answer.
  std::string resp;
  char buf[1024];
  while (resp.size() < 16384) {
    if (!wait_for(s.fd, POLLIN, timeout_ms)) {
      detail = "no answer to GET /_ping";
      return false;
    }
    ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) break;
    resp.append(buf, static_cast<size_t>(n));
  }
  std::string status = resp.substr(0, resp.find("\r\n"));
  if (!starts_with(status, "HTTP/1.") || status.find(" 200") == std::string::npos) {
    detail = status.empty() ? "empty answer to GET /_ping" : "engine answered: " + status;
    return false;
  }
  detail.clear();
  for (const auto& line : split(resp, '\n')) {
    if (starts_with(to_lower(line), "api-version:")) detail = "API " + trim(line.substr(12));
  }
  return true;
}

HostChecks check_host() {
  HostChecks h;
  h.docker_endpoint = docker_endpoint_from_env();
  h.docker_reachable = ping_docker(h.docker_endpoint, h.docker_detail);
  for (const char* tool : {"nvidia-container-cli", "nvidia-ctk", "nvidia-container-runtime"}) {
    auto p = which(tool);
    if (!p) p = find_executable({std::filesystem::path("/usr/bin") / tool});
    if (p) {
      h.nvidia_toolkit = p->string();
      break;
    }
  }
  std::error_code ec;
  if (std::filesystem::exists("/dev/kfd", ec))
    h.kfd = DeviceNode{"/dev/kfd", ::access("/dev/kfd", R_OK | W_OK) == 0};
  h.render_nodes = render_nodes();
  h.nvidia_device_nodes = std::filesystem::exists("/dev/nvidiactl", ec);
  return h;
}

}  // namespace gpulab::gpu
