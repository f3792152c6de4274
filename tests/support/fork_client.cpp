// test-fork-client SOCKET BINARY ARGS...: runs a test binary's command line in a child of that
// binary's fork server (fork_server.h) when one answers on SOCKET, else runs BINARY itself: the
// same arguments, working directory, environment, streams and exit status either way. ctest puts
// it in front of every libtorch test case (the binary's CROSSCOMPILING_EMULATOR), so that a case
// does not pay libtorch's start (about 0.7 CPU-s) in a process of its own.
#include <sys/socket.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "support/fork_protocol.h"

extern char** environ;

namespace proto = gpulab::testing::fork_server;

namespace {

[[noreturn]] void run_fresh(char** cmd) {
  ::execvp(cmd[0], cmd);
  std::fprintf(stderr, "test-fork-client: cannot run %s: %s\n", cmd[0], std::strerror(errno));
  std::_Exit(127);
}

std::string framed_request(char** cmd) {
  proto::Request r;
  for (char** a = cmd; *a; ++a) r.argv.emplace_back(*a);
  char cwd[4096];
  if (::getcwd(cwd, sizeof cwd) == nullptr) return {};
  r.cwd = cwd;
  for (char** e = environ; *e; ++e) r.env.emplace_back(*e);
  return proto::frame(r);
}

// The request, with this process's stdin, stdout and stderr attached to its first bytes.
bool send_request(int fd, const std::string& bytes) {
  int fds[3] = {0, 1, 2};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{const_cast<char*>(bytes.data()), bytes.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof fds);
  std::memcpy(CMSG_DATA(c), fds, sizeof fds);
  ssize_t sent = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
  if (sent <= 0) return false;
  for (auto at = static_cast<std::size_t>(sent); at < bytes.size(); at += sent) {
    sent = ::send(fd, bytes.data() + at, bytes.size() - at, MSG_NOSIGNAL);
    if (sent <= 0) return false;
  }
  return true;
}

// The reply line without its newline; empty when the server closed without one.
std::string read_reply(int fd) {
  std::string reply;
  char c = 0;
  while (::read(fd, &c, 1) == 1) {
    if (c == '\n') return reply;
    reply += c;
  }
  return {};
}

// Ends this process the way the test's own process ended.
[[noreturn]] void exit_like(const std::string& reply, const char* socket_path) {
  int value = 0;
  if (std::sscanf(reply.c_str(), "exit %d", &value) == 1) std::exit(value);
  if (std::sscanf(reply.c_str(), "signal %d", &value) == 1) {
    std::signal(value, SIG_DFL);
    std::raise(value);
    std::exit(128 + value);
  }
  std::fprintf(stderr,
               "test-fork-client: the fork server ended without the test's status (see %s.log)\n",
               socket_path);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: test-fork-client SOCKET BINARY [ARGS...]\n");
    return 2;
  }
  char** cmd = argv + 2;
  const char* off = std::getenv("GPULAB_TEST_FORK");
  if (off && std::strcmp(off, "off") == 0) run_fresh(cmd);
  for (char** a = cmd; *a; ++a)
    if (std::strcmp(*a, proto::kServerFlag) == 0) run_fresh(cmd);
  const int fd = proto::unix_socket(argv[1], false);
  if (fd < 0) run_fresh(cmd);
  const std::string request = framed_request(cmd);
  if (request.empty() || !send_request(fd, request)) {
    ::close(fd);
    run_fresh(cmd);
  }
  const std::string reply = read_reply(fd);
  if (reply.rfind("fallback", 0) == 0) {
    ::close(fd);
    run_fresh(cmd);
  }
  exit_like(reply, argv[1]);
}
