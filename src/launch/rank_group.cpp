// Spawning, watching and stopping one group of rank processes (fork/exec, process groups,
// PR_SET_PDEATHSIG so no rank outlives a launcher that was itself killed).
#include "launch/rank_group.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>
#include <utility>

#include "core/signal_name.h"
#include "core/strings.h"
#include "launch/heartbeat.h"
#include "launch/rank_cgroup.h"

extern char** environ;

namespace gpulab::launch {

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
      if (!spec.cgroup_procs.empty()) {
        // "0" moves the writing process: open/write/close are async-signal-safe.
        const int fd = ::open(spec.cgroup_procs.c_str(), O_WRONLY | O_CLOEXEC);
        if (fd < 0 || ::write(fd, "0", 1) != 1) {
          const char* msg = "gpulab launch: the rank cannot join its memory cgroup\n";
          (void)!::write(2, msg, std::strlen(msg));
          _exit(126);
        }
        ::close(fd);
      }
      ::execvpe(argv[0], argv.data(), envp.data());
      const char* msg = "gpulab launch: cannot execute the rank's command\n";
      (void)!::write(2, msg, std::strlen(msg));
      _exit(127);
    }
    // Set the group from the parent too, so it holds before we might signal it.
    ::setpgid(pid, pgid_ < 0 ? pid : pgid_);
    if (pgid_ < 0) pgid_ = pid;
    procs_.push_back(Proc{spec, pid, true, std::nullopt});
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
          if (auto b = read_beat(p)) f.last_progress = b->what;
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

std::optional<Beat> RankGroup::read_beat(Proc& p) {
  if (auto b = read_heartbeat(p.spec.heartbeat_file, p.beat)) p.beat = std::move(b);
  return p.beat;
}

std::optional<RankFailure> RankGroup::check_progress(const HangPolicy& policy) {
  if (policy.off()) return std::nullopt;
  const auto now = std::chrono::system_clock::now();
  std::vector<std::optional<Beat>> beats;
  for (Proc& p : procs_) {
    beats.push_back(p.running ? read_beat(p) : std::nullopt);
    if (beats.back()) slowest_phase_s_ = std::max(slowest_phase_s_, beats.back()->slowest_phase_s);
  }
  const auto limit = policy.limit(slowest_phase_s_);
  bool over = false;
  for (const auto& b : beats) {
    if (!b || now - b->when <= limit) continue;
    // Learning the limit needs a few timed phases first: until then, a rank is not judged.
    if (policy.fixed.count() <= 0 && b->progress < policy.warmup) continue;
    over = true;
  }
  if (!over) return std::nullopt;
  // Which rank to name: one waiting inside a collective is blocked by another (and a fast peer
  // may have started waiting before the hung rank's last beat), so a rank that is not waiting
  // comes first, the longest silent among equals.
  const auto waits = [](const Beat& b) { return b.what.rfind("waiting in ", 0) == 0; };
  size_t oldest = procs_.size();
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (!beats[i]) continue;
    if (oldest == procs_.size() || std::pair(waits(*beats[i]), beats[i]->when) <
                                       std::pair(waits(*beats[oldest]), beats[oldest]->when))
      oldest = i;
  }
  const Proc& hung = procs_[oldest];
  RankFailure f;
  f.rank = hung.spec.rank;
  f.local_rank = hung.spec.local_rank;
  f.pid = hung.pid;
  f.silent_s = std::chrono::duration<double>(now - beats[oldest]->when).count();
  f.limit = policy.explain(slowest_phase_s_);
  f.last_progress = beats[oldest]->what;
  // The peers it blocks are usually inside a collective: say which.
  for (size_t i = 0; i < procs_.size(); ++i) {
    if (i == oldest || !beats[i] || beats[i]->what.empty()) continue;
    f.error += (f.error.empty() ? "" : "; ") + std::string("rank ") +
               std::to_string(procs_[i].spec.rank) + ": " + beats[i]->what;
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

int RankGroup::stop(std::chrono::milliseconds grace, int sig) {
  if (pgid_ <= 0) return 0;
  if (alive_ > 0) {
    ::kill(-pgid_, sig);
    ::kill(-pgid_, SIGCONT);  // a stopped rank acts on SIGTERM only once it runs again
  }
  auto deadline = std::chrono::steady_clock::now() + grace;
  while (alive_ > 0 && std::chrono::steady_clock::now() < deadline) {
    reap(false, false);
    if (alive_ > 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  const int killed = alive_;
  // SIGKILL the group even when every rank is gone: a grandchild may still hold it.
  ::kill(-pgid_, SIGKILL);
  reap(true, false);
  pgid_ = -1;
  return killed;
}

}  // namespace gpulab::launch
