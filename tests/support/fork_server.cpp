// The test binaries' fork server (fork_server.h): start, stop, and the loop that forks each case.
#include "support/fork_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "support/fork_protocol.h"

extern char** environ;

namespace gpulab::testing::fork_server {
namespace {

// Read once, when a library is loaded: a client whose values differ runs the binary itself.
constexpr const char* kLoadTimePrefixes[] = {"OMP_",   "GOMP_",    "KMP_",  "MKL_",    "OPENBLAS_",
                                             "DNNL_",  "ONEDNN_",  "LD_",   "MALLOC_", "GLIBC_",
                                             "TORCH_", "PYTORCH_", "CUDA_", "NCCL_",   "ASAN_",
                                             "UBSAN_", "LSAN_",    "LC_",   "LANG"};
constexpr auto kIdleExit = std::chrono::hours(3);  // a server left behind ends by itself
constexpr int kRequestSeconds = 10;  // a client that connects and says nothing stalls no one

void log(const std::string& line) {
  const std::string out = "fork-server: " + line + "\n";
  [[maybe_unused]] auto n = ::write(2, out.data(), out.size());
}

std::vector<std::string> load_time_env(const std::vector<std::string>& env) {
  std::vector<std::string> out;
  for (const auto& kv : env)
    for (const char* p : kLoadTimePrefixes)
      if (kv.rfind(p, 0) == 0) {
        out.push_back(kv);
        break;
      }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::string> own_env() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) env.emplace_back(*e);
  return env;
}

struct FileId {
  dev_t dev = 0;
  ino_t ino = 0;
  timespec mtime{};
  bool operator==(const FileId& o) const {
    return dev == o.dev && ino == o.ino && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};

std::optional<FileId> file_id(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  return FileId{st.st_dev, st.st_ino, st.st_mtim};
}

int thread_count() {
  int n = 0;
  std::error_code ec;
  for (auto it = std::filesystem::directory_iterator("/proc/self/task", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec))
    ++n;
  return n;
}

struct Child {
  pid_t pid;
  int conn;
  int pidfd;
};

struct Received {
  Request request;
  std::vector<int> fds;
};

// Reads N bytes (the socket has its receive timeout); false on EOF, error or timeout.
bool read_exact(int fd, char* out, std::size_t n) {
  while (n > 0) {
    const ssize_t got = ::recv(fd, out, n, 0);
    if (got <= 0) return false;
    out += got;
    n -= static_cast<std::size_t>(got);
  }
  return true;
}

// The first bytes with the client's three descriptors; nullopt (descriptors closed) otherwise.
std::optional<std::vector<int>> receive_fds(int conn, char* head, std::size_t n) {
  int fds[3] = {-1, -1, -1};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof fds)] = {};
  iovec iov{head, n};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  const ssize_t got = ::recvmsg(conn, &msg, MSG_CMSG_CLOEXEC);
  std::vector<int> out;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
    if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
      const std::size_t k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
      std::memcpy(fds, CMSG_DATA(c), std::min<std::size_t>(k, 3) * sizeof(int));
      for (std::size_t i = 0; i < std::min<std::size_t>(k, 3); ++i) out.push_back(fds[i]);
    }
  const bool whole = got > 0 && read_exact(conn, head + got, n - static_cast<std::size_t>(got));
  if (whole && out.size() == 3) return out;
  for (int fd : out) ::close(fd);
  return std::nullopt;
}

std::optional<Received> receive(int conn) {
  timeval tv{kRequestSeconds, 0};
  ::setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char len_bytes[4];
  auto fds = receive_fds(conn, len_bytes, sizeof len_bytes);
  if (!fds) return std::nullopt;
  uint32_t len = 0;
  std::memcpy(&len, len_bytes, 4);
  std::string body(len <= kMaxRequestBytes ? len : 0, '\0');
  auto request =
      len <= kMaxRequestBytes && read_exact(conn, body.data(), len) ? decode(body) : std::nullopt;
  if (!request) {
    for (int fd : *fds) ::close(fd);
    return std::nullopt;
  }
  return Received{std::move(*request), std::move(*fds)};
}

void reply(int conn, const std::string& line) {
  const std::string out = line + "\n";
  [[maybe_unused]] auto n = ::send(conn, out.data(), out.size(), MSG_NOSIGNAL);
}

class Server {
 public:
  Server(int listener, Main run)
      : listener_(listener),
        run_(run),
        env_(load_time_env(own_env())),
        exe_(file_id("/proc/self/exe")) {}
  void serve();

 private:
  void accept_one();
  std::string why_not(const Request& r) const;
  void start_child(int conn, Received in);
  [[noreturn]] void become(int conn, Received& in);
  void finish(std::size_t i, bool client_gone);

  int listener_;
  Main run_;
  std::vector<std::string> env_;
  std::optional<FileId> exe_;
  std::vector<Child> children_;
  std::chrono::steady_clock::time_point last_active_ = std::chrono::steady_clock::now();
};

// Empty when a fork runs R as a fresh process would, else why not.
std::string Server::why_not(const Request& r) const {
  std::string exe = r.argv[0];
  if (!exe.empty() && exe[0] != '/') exe = r.cwd + "/" + exe;
  if (!exe_ || file_id(exe) != exe_) return "the binary is not the one this server loaded";
  if (load_time_env(r.env) != env_) return "a load-time environment variable differs";
  if (const int n = thread_count(); n != 1)
    return "the server has " + std::to_string(n) + " threads";
  return {};
}

void Server::accept_one() {
  const int conn = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
  if (conn < 0) return;
  auto in = receive(conn);
  if (!in) {
    log("a request that was not whole within " + std::to_string(kRequestSeconds) + " s");
    ::close(conn);
    return;
  }
  if (const std::string why = why_not(in->request); !why.empty()) {
    log("fallback for " + in->request.argv[0] + ": " + why);
    reply(conn, "fallback " + why);
    for (int fd : in->fds) ::close(fd);
    ::close(conn);
    return;
  }
  start_child(conn, std::move(*in));
}

void Server::start_child(int conn, Received in) {
  std::fflush(nullptr);  // nothing buffered here may reach the test's streams
  const pid_t pid = ::fork();
  if (pid == 0) become(conn, in);
  for (int fd : in.fds) ::close(fd);
  const int pidfd = pid > 0 ? static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)) : -1;
  if (pidfd < 0) {  // no child, or none this loop can watch: the client runs the binary itself
    if (pid > 0) {
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
    reply(conn, "fallback the server could not fork");
    ::close(conn);
    return;
  }
  children_.push_back({pid, conn, pidfd});
}

// In the child: the client's streams, signals as a fresh process has them, its working directory
// and environment, then the test binary's main.
void Server::become(int conn, Received& in) {
  ::close(listener_);
  ::close(conn);
  for (const Child& c : children_) {
    ::close(c.conn);
    ::close(c.pidfd);
  }
  ::setpgid(0, 0);
  for (int target = 0; target < 3; ++target) ::dup2(in.fds[target], target);
  for (int fd : in.fds)
    if (fd > 2) ::close(fd);
  for (int sig = 1; sig < NSIG; ++sig) std::signal(sig, SIG_DFL);
  sigset_t all;
  sigemptyset(&all);
  ::sigprocmask(SIG_SETMASK, &all, nullptr);
  if (::chdir(in.request.cwd.c_str()) != 0) {
    std::fprintf(stderr, "fork-server: cannot enter %s\n", in.request.cwd.c_str());
    std::_Exit(127);
  }
  ::clearenv();
  for (auto& kv : in.request.env) ::putenv(kv.data());  // the strings live until exit
  std::vector<char*> argv;
  for (auto& a : in.request.argv) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::exit(run_(static_cast<int>(in.request.argv.size()), argv.data()));
}

void Server::finish(std::size_t i, bool client_gone) {
  const Child c = children_[i];
  children_.erase(children_.begin() + static_cast<std::ptrdiff_t>(i));
  if (client_gone) {  // a timeout or Ctrl-C: the case goes with it, and what it started
    ::kill(-c.pid, SIGKILL);
    ::kill(c.pid, SIGKILL);  // in case it has not made its own group yet
  }
  int status = 0;
  ::waitpid(c.pid, &status, 0);
  if (!client_gone)
    reply(c.conn, WIFSIGNALED(status) ? "signal " + std::to_string(WTERMSIG(status))
                                      : "exit " + std::to_string(WEXITSTATUS(status)));
  ::close(c.pidfd);
  ::close(c.conn);
}

void Server::serve() {
  for (;;) {
    std::vector<pollfd> fds{{listener_, POLLIN, 0}};
    for (const Child& c : children_) {
      fds.push_back({c.pidfd, POLLIN, 0});
      fds.push_back({c.conn, POLLIN, 0});
    }
    const int n = ::poll(fds.data(), fds.size(), 60'000);
    const auto now = std::chrono::steady_clock::now();
    if (n == 0 && children_.empty() && now - last_active_ > kIdleExit) return;
    if (n <= 0) continue;
    last_active_ = now;
    // Children from the last first, so that erasing one leaves the others' indices valid.
    for (std::size_t i = children_.size(); i-- > 0;) {
      if (fds[1 + 2 * i].revents != 0)
        finish(i, false);
      else if (fds[2 + 2 * i].revents != 0)
        finish(i, true);  // readable or hung up: the client was killed
    }
    if (fds[0].revents & POLLIN) accept_one();
  }
}

bool cmdline_names(pid_t pid, const std::string& path) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return all.find(std::string(kServerFlag) + '\0') != std::string::npos &&
         all.find('\0' + path + '\0') != std::string::npos;
}

bool zombie_or_gone(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("State:", 0) == 0) return line.find('Z') != std::string::npos;
  return true;
}

int stop(const std::string& path) {
  std::ifstream f(path + ".pid");
  pid_t pid = 0;
  // A server killed outright left its pid file: that number may be another process now.
  if (f >> pid && pid > 0 && cmdline_names(pid, path) && ::kill(pid, SIGTERM) == 0)
    for (int i = 0; i < 100 && !zombie_or_gone(pid); ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  for (const char* suffix : {"", ".pid", ".log"}) ::unlink((path + suffix).c_str());
  return 0;
}

// The detached server: its own session, no caller's streams (ctest waits for every holder of a
// test's output), the socket, then "ok" to the caller.
[[noreturn]] void run_server(const std::string& path, int ready, Main run) {
  ::setsid();
  if (::fork() != 0) std::_Exit(0);
  const int devnull = ::open("/dev/null", O_RDWR);
  const int logfd = ::open((path + ".log").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  ::dup2(devnull, 0);
  ::dup2(logfd, 1);
  ::dup2(logfd, 2);
  ::close(devnull);
  ::close(logfd);
  std::signal(SIGPIPE, SIG_IGN);
  const int listener = unix_socket(path, true);
  if (listener < 0) std::_Exit(1);
  std::ofstream(path + ".pid") << ::getpid() << "\n";
  [[maybe_unused]] auto n = ::write(ready, "ok", 2);
  ::close(ready);
  log("serving " + path);
  Server(listener, run).serve();
  ::unlink(path.c_str());
  ::unlink((path + ".pid").c_str());
  std::_Exit(0);  // not exit(): libtorch's static destructors are the children's to run
}

int start(const std::string& path, Main run) {
  stop(path);
  int ready[2];
  if (::pipe2(ready, O_CLOEXEC) != 0) return 1;
  const pid_t pid = ::fork();
  if (pid < 0) return 1;
  if (pid == 0) {
    ::close(ready[0]);
    run_server(path, ready[1], run);
  }
  ::close(ready[1]);
  char ok[2] = {};
  const bool up = ::read(ready[0], ok, 2) == 2 && std::memcmp(ok, "ok", 2) == 0;
  ::close(ready[0]);
  ::waitpid(pid, nullptr, 0);
  if (!up) std::fprintf(stderr, "fork-server: could not listen on %s\n", path.c_str());
  return up ? 0 : 1;
}

}  // namespace

std::optional<int> server_command(int argc, char** argv, Main run) {
  if (argc < 2 || std::strcmp(argv[1], kServerFlag) != 0) return std::nullopt;
  if (argc != 4 || (std::strcmp(argv[2], "start") != 0 && std::strcmp(argv[2], "stop") != 0)) {
    std::fprintf(stderr, "usage: %s %s start|stop SOCKET\n", argv[0], kServerFlag);
    return 2;
  }
  return std::strcmp(argv[2], "start") == 0 ? start(argv[3], run) : stop(argv[3]);
}

}  // namespace gpulab::testing::fork_server
