// Spawning, watching and stopping one group of rank processes (fork/exec, process groups,
// PR_SET_PDEATHSIG so no rank outlives a launcher that was itself killed).
#include "launch/rank_group.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "core/strings.h"
#include "launch/heartbeat.h"

extern char** environ;

namespace gpulab::launch {

std::string signal_name(int sig) {
  // Own table: sigabbrev_np needs glibc 2.32, older than some GPU hosts' distributions.
  switch (sig) {
    case SIGHUP:
      return "SIGHUP";
    case SIGINT:
      return "SIGINT";
    case SIGQUIT:
      return "SIGQUIT";
    case SIGILL:
      return "SIGILL";
    case SIGTRAP:
      return "SIGTRAP";
    case SIGABRT:
      return "SIGABRT";
    case SIGBUS:
      return "SIGBUS";
    case SIGFPE:
      return "SIGFPE";
    case SIGKILL:
      return "SIGKILL";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGSEGV:
      return "SIGSEGV";
    case SIGUSR2:
      return "SIGUSR2";
    case SIGPIPE:
      return "SIGPIPE";
    case SIGALRM:
      return "SIGALRM";
    case SIGTERM:
      return "SIGTERM";
    case SIGSTOP:
      return "SIGSTOP";
    case SIGTSTP:
      return "SIGTSTP";
    case SIGTTIN:
      return "SIGTTIN";
    case SIGTTOU:
      return "SIGTTOU";
    case SIGXCPU:
      return "SIGXCPU";
    case SIGXFSZ:
      return "SIGXFSZ";
    default:
      return "signal " + std::to_string(sig);
  }
}

std::string RankFailure::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ")";
  if (signal) {
    s += " was killed by signal " + std::to_string(signal) + " (" + signal_name(signal) + ")";
  } else if (stopped_by) {
    s += " was stopped by signal " + std::to_string(stopped_by) + " (" + signal_name(stopped_by) +
         ") and hangs the job";
  } else if (silent_s > 0) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.1f", silent_s);
    s += std::string(" hangs: no progress for ") + buf + " s";
  } else {
    s += " exited with code " + std::to_string(exit_code);
  }
  if (!last_progress.empty()) s += " (last progress: " + last_progress + ")";
  if (!error.empty()) s += ": " + error;
  return s;
}

RankGroup::~RankGroup() {
  if (alive_ > 0) stop(std::chrono::milliseconds(0));
}

Status RankGroup::start(const std::vector<std::string>& command,
                        const std::vector<RankSpec>& specs) {
  if (command.empty()) return Error{Code::kInvalidArgument, "no command to launch"};
  pid_t launcher = ::getpid();
  for (const RankSpec& spec : specs) {
    // Everything the child needs is built before fork: after it, only async-signal-safe calls.
    std::vector<std::string> env_store;
    for (char** e = environ; *e; ++e) {
      std::string kv(*e);
      if (!spec.env.count(kv.substr(0, kv.find('=')))) env_store.push_back(std::move(kv));
    }
    for (const auto& [k, v] : spec.env) env_store.push_back(k + "=" + v);
    std::vector<char*> envp, argv;
    for (auto& s : env_store) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = command;
    for (auto& s : args) argv.push_back(s.data());
    argv.push_back(nullptr);
    if (!spec.error_file.empty()) ::unlink(spec.error_file.c_str());
    if (!spec.heartbeat_file.empty()) ::unlink(spec.heartbeat_file.c_str());

    pid_t pid = ::fork();
    if (pid < 0) {
      int e = errno;
      stop(std::chrono::milliseconds(0));
      return Error{Code::kResourceExhausted, std::string("fork failed: ") + std::strerror(e)};
    }
    if (pid == 0) {
      ::setpgid(0, pgid_ < 0 ? 0 : pgid_);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != launcher) _exit(125);  // the launcher died before prctl took effect
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGCHLD}) ::signal(sig, SIG_DFL);
      ::execvpe(argv[0], argv.data(), envp.data());
      const char* msg = "gpulab launch: cannot execute the rank's command\n";
      (void)!::write(2, msg, std::strlen(msg));
      _exit(127);
    }
    // Set the group from the parent too, so it holds before we might signal it.
    ::setpgid(pid, pgid_ < 0 ? pid : pgid_);
    if (pgid_ < 0) pgid_ = pid;
    procs_.push_back(Proc{spec, pid, true});
    ++alive_;
  }
  return ok_status();
}

std::optional<RankFailure> RankGroup::reap(bool blocking, bool record) {
  std::vector<RankFailure> failures;
  while (alive_ > 0) {
    int status = 0;
    // WUNTRACED: a rank stopped by SIGSTOP never ends by itself and blocks its peers in their
    // next collective; it is a failure now, not after the collective timeout.
    pid_t pid = ::waitpid(-pgid_, &status, (blocking ? 0 : WNOHANG) | WUNTRACED);
    if (pid < 0 && errno == EINTR) continue;
    if (pid <= 0) break;
    for (Proc& p : procs_) {
      if (p.pid != pid || !p.running) continue;
      if (WIFSTOPPED(status)) {
        if (record) {
          RankFailure f;
          f.rank = p.spec.rank;
          f.local_rank = p.spec.local_rank;
          f.pid = pid;
          f.stopped_by = WSTOPSIG(status);
          if (auto b = read_heartbeat(p.spec.heartbeat_file)) f.last_progress = b->what;
          failures.push_back(std::move(f));
        }
        continue;
      }
      p.running = false;
      --alive_;
      RankFailure f;
      f.rank = p.spec.rank;
      f.local_rank = p.spec.local_rank;
      f.pid = pid;
      if (WIFSIGNALED(status)) f.signal = WTERMSIG(status);
      if (WIFEXITED(status)) f.exit_code = WEXITSTATUS(status);
      if (record && (f.signal || f.exit_code)) {
        std::ifstream in(p.spec.error_file);
        std::stringstream ss;
        ss << in.rdbuf();
        f.error = trim(ss.str());
        failures.push_back(std::move(f));
      }
    }
  }
  if (failures.empty()) return std::nullopt;
  for (const auto& f : failures)
    if (f.signal || f.stopped_by) return f;
  return failures.front();
}

std::optional<RankFailure> RankGroup::check_progress(std::chrono::milliseconds timeout) const {
  if (timeout.count() <= 0) return std::nullopt;
  const auto now = std::chrono::system_clock::now();
  const Proc* oldest = nullptr;
  std::optional<Beat> oldest_beat;
  for (const Proc& p : procs_) {
    if (!p.running) continue;
    auto b = read_heartbeat(p.spec.heartbeat_file);
    if (!b || now - b->when <= timeout) continue;
    if (!oldest || b->when < oldest_beat->when) {
      oldest = &p;
      oldest_beat = b;
    }
  }
  if (!oldest) return std::nullopt;
  RankFailure f;
  f.rank = oldest->spec.rank;
  f.local_rank = oldest->spec.local_rank;
  f.pid = oldest->pid;
  f.silent_s = std::chrono::duration<double>(now - oldest_beat->when).count();
  f.last_progress = oldest_beat->what;
  // The peers it blocks are usually inside a collective: say which.
  for (const Proc& p : procs_) {
    if (!p.running || &p == oldest) continue;
    if (auto b = read_heartbeat(p.spec.heartbeat_file); b && !b->what.empty())
      f.error += (f.error.empty() ? "" : "; ") + std::string("rank ") +
                 std::to_string(p.spec.rank) + ": " + b->what;
  }
  if (!f.error.empty()) f.error = "the other ranks were at: " + f.error;
  return f;
}

std::optional<RankFailure> RankGroup::poll(std::chrono::milliseconds timeout) {
  if (alive_ == 0) return std::nullopt;
  // SIGCHLD is blocked in the launcher; sigtimedwait wakes as soon as a rank ends.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGCHLD);
  timespec ts{static_cast<time_t>(timeout.count() / 1000),
              static_cast<long>(timeout.count() % 1000) * 1000000L};
  ::sigtimedwait(&set, nullptr, &ts);
  auto failure = reap(false, true);
  if (failure) {
    // Ranks that fail as a consequence (a broken connection) die within milliseconds; give the
    // true cause (a signal) a moment to be reaped too, so it is the one reported.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    auto more = reap(false, true);
    if (more && more->signal && !failure->signal) failure = more;
  }
  return failure;
}

void RankGroup::signal_all(int sig) {
  if (pgid_ > 0 && alive_ > 0) ::kill(-pgid_, sig);
}

void RankGroup::stop(std::chrono::milliseconds grace) {
  if (pgid_ <= 0) return;
  if (alive_ > 0) {
    ::kill(-pgid_, SIGTERM);
    ::kill(-pgid_, SIGCONT);  // a stopped rank acts on SIGTERM only once it runs again
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (alive_ > 0 && std::chrono::steady_clock::now() < deadline) {
    reap(false, false);
    if (alive_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  // SIGKILL the group even when every rank is gone: a grandchild may still hold it.
  ::kill(-pgid_, SIGKILL);
  reap(true, false);
  pgid_ = -1;
}

}  // namespace gpulab::launch
