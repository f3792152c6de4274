// The wire format between a test binary's fork client and its fork server (fork_server.h): one
// request (argv, working directory, environment; the client's stdin, stdout and stderr travel
// beside it as SCM_RIGHTS) and one reply line ("exit N", "signal N" or "fallback WHY").
#pragma once

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace gpulab::testing::fork_server {

struct Request {
  std::vector<std::string> argv;
  std::string cwd;
  std::vector<std::string> env;  // NAME=VALUE, as environ holds them
};

// The argument that puts a test binary in server mode; a client never forwards a command line
// that holds it (the server's own start and stop run as plain processes).
inline constexpr const char* kServerFlag = "--gpulab-fork-server";
inline constexpr std::size_t kMaxRequestBytes = 8u << 20;  // far above any environment
inline constexpr char kMagic[] = "GLFORK1";

namespace detail {

inline void put_u32(std::string& out, uint32_t v) {
  char b[4];
  std::memcpy(b, &v, 4);
  out.append(b, 4);
}

inline bool get_u32(const std::string& in, std::size_t& at, uint32_t& v) {
  if (in.size() - at < 4) return false;
  std::memcpy(&v, in.data() + at, 4);
  at += 4;
  return true;
}

inline void put_strings(std::string& out, const std::vector<std::string>& v) {
  put_u32(out, static_cast<uint32_t>(v.size()));
  for (const auto& s : v) {
    put_u32(out, static_cast<uint32_t>(s.size()));
    out += s;
  }
}

inline bool get_strings(const std::string& in, std::size_t& at, std::vector<std::string>& v) {
  uint32_t n = 0;
  if (!get_u32(in, at, n) || n > in.size()) return false;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t len = 0;
    if (!get_u32(in, at, len) || in.size() - at < len) return false;
    v.emplace_back(in, at, len);
    at += len;
  }
  return true;
}

}  // namespace detail

// The magic, then argv, {cwd} and env as counted, length-prefixed strings (host byte order: the
// two ends are one machine).
inline std::string encode(const Request& r) {
  std::string out(kMagic, sizeof kMagic);
  detail::put_strings(out, r.argv);
  detail::put_strings(out, {r.cwd});
  detail::put_strings(out, r.env);
  return out;
}

// What the client sends: the request's length (4 bytes) and the request.
inline std::string frame(const Request& r) {
  const std::string body = encode(r);
  std::string out;
  detail::put_u32(out, static_cast<uint32_t>(body.size()));
  return out + body;
}

// A Unix stream socket bound and listening at PATH (LISTEN) or connected to it; -1 on failure.
inline int unix_socket(const std::string& path, bool listen) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) return -1;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  auto* a = reinterpret_cast<sockaddr*>(&addr);
  const bool ok = listen ? ::bind(fd, a, sizeof addr) == 0 && ::listen(fd, 64) == 0
                         : ::connect(fd, a, sizeof addr) == 0;
  if (!ok) ::close(fd);
  return ok ? fd : -1;
}

// nullopt unless BYTES are exactly one well-formed request with a command.
inline std::optional<Request> decode(const std::string& bytes) {
  if (bytes.size() < sizeof kMagic || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return std::nullopt;
  std::size_t at = sizeof kMagic;
  Request r;
  std::vector<std::string> cwd;
  if (!detail::get_strings(bytes, at, r.argv) || !detail::get_strings(bytes, at, cwd) ||
      !detail::get_strings(bytes, at, r.env) || at != bytes.size() || r.argv.empty() ||
      cwd.size() != 1)
    return std::nullopt;
  r.cwd = cwd[0];
  return r;
}

}  // namespace gpulab::testing::fork_server
