// Child processes via fork/exec with pipes and a poll loop, so input and output of any size flow
// while the deadline is enforced; the child is killed (whole process group) on timeout.
#include "core/subprocess.h"

#include <fcntl.h>
#include <linux/close_range.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

extern char** environ;

namespace gpulab {

namespace {

struct Pipe {
  int fd[2] = {-1, -1};
  ~Pipe() {
    for (int f : fd)
      if (f >= 0) ::close(f);
  }
  void close_end(int i) {
    if (fd[i] >= 0) ::close(fd[i]);
    fd[i] = -1;
  }
};

// The child's environment: ours, with opts.env_add replacing or adding entries.
std::vector<std::string> child_environment(const RunOptions& opts) {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string kv(*e);
    auto key = kv.substr(0, kv.find('='));
    if (!opts.env_add.count(key)) env.push_back(kv);
  }
  for (const auto& [k, v] : opts.env_add) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// SIGPIPE blocked in this thread while stdin is fed: a child that exits (or closes stdin) before
// reading all of it must give EPIPE here, not kill the parent. A SIGPIPE raised meanwhile is
// consumed before the mask is restored.
class SigpipeBlock {
 public:
  SigpipeBlock() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    ::pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~SigpipeBlock() {
    timespec zero{0, 0};
    while (::sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }

 private:
  sigset_t pipe_, old_;
};

// Writes what stdin has left as far as the pipe takes it now; closes it when done or refused.
void feed_stdin(Pipe& in, std::string_view& left) {
  ssize_t k = ::write(in.fd[1], left.data(), left.size());
  if (k > 0) left.remove_prefix(static_cast<size_t>(k));
  if (left.empty() || (k < 0 && errno != EAGAIN && errno != EINTR)) in.close_end(1);
}

// Feeds stdin and reads stdout and stderr until both close or the deadline passes (then kills
// the group), in one poll loop: a child may answer before it has read all its input.
void exchange(pid_t pid, Pipe& in, std::string_view input, Pipe& out, Pipe& err,
              std::chrono::milliseconds timeout, ProcessResult& r) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  char buf[65536];
  bool out_open = true, err_open = true;
  if (input.empty()) in.close_end(1);
  while (out_open || err_open) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timed_out = true;
      ::kill(-pid, SIGKILL);
      break;
    }
    pollfd fds[3] = {{out_open ? out.fd[0] : -1, POLLIN, 0},
                     {err_open ? err.fd[0] : -1, POLLIN, 0},
                     {in.fd[1], POLLOUT, 0}};
    int n = ::poll(fds, 3, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (fds[2].fd >= 0 && fds[2].revents) feed_stdin(in, input);
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      ssize_t k = ::read(fds[i].fd, buf, sizeof buf);
      if (k <= 0) {
        (i == 0 ? out_open : err_open) = false;
      } else {
        (i == 0 ? r.out : r.err).append(buf, static_cast<size_t>(k));
      }
    }
  }
  in.close_end(1);
}

}  // namespace

Result<ProcessResult> run_process(const std::vector<std::string>& argv, const RunOptions& opts) {
  if (argv.empty()) return Error{Code::kInvalidArgument, "run_process: empty command"};
  Pipe in, out, err, exec_err;
  if (::pipe2(in.fd, O_CLOEXEC) || ::pipe2(out.fd, O_CLOEXEC) || ::pipe2(err.fd, O_CLOEXEC) ||
      ::pipe2(exec_err.fd, O_CLOEXEC)) {
    return Error{Code::kInternal, std::string("pipe: ") + std::strerror(errno)};
  }
  std::vector<std::string> env_store = child_environment(opts);
  std::vector<std::string> argv_copy = argv;
  std::vector<char*> envp = c_strings(env_store), args = c_strings(argv_copy);

  pid_t pid = ::fork();
  if (pid < 0) return Error{Code::kInternal, std::string("fork: ") + std::strerror(errno)};
  if (pid == 0) {
    ::setpgid(0, 0);
    ::dup2(in.fd[0], 0);
    ::dup2(out.fd[1], 1);
    ::dup2(err.fd[1], 2);
    // Nothing else of ours reaches the child: a daemon it starts would hold our sockets and
    // lock files open for its whole life (exec_err stays open until the exec succeeds).
    (void)::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    if (!opts.cwd.empty() && ::chdir(opts.cwd.c_str()) != 0) _exit(127);
    ::execvpe(args[0], args.data(), envp.data());
    int e = errno;
    (void)!::write(exec_err.fd[1], &e, sizeof e);
    _exit(127);
  }
  in.close_end(0);
  out.close_end(1);
  err.close_end(1);
  exec_err.close_end(1);

  int child_errno = 0;
  if (::read(exec_err.fd[0], &child_errno, sizeof child_errno) == sizeof child_errno) {
    ::waitpid(pid, nullptr, 0);
    return Error{Code::kNotFound, "cannot run " + argv[0] + ": " + std::strerror(child_errno)};
  }

  ProcessResult r;
  {
    SigpipeBlock no_sigpipe;
    ::fcntl(in.fd[1], F_SETFL, ::fcntl(in.fd[1], F_GETFL) | O_NONBLOCK);
    exchange(pid, in, opts.stdin_data, out, err, opts.timeout, r);
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) r.signal = WTERMSIG(status);
  return r;
}

}  // namespace gpulab
